// measure_systems on the host backend: the three systems plan exactly as the comparison (sluice simulate) does, and
// every plan of a batch computes the same loss, that of every sequence run alone.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "sluice/compare/compare.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/strategy_pool.hpp"
#include "sluice_executor/host/local.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/reference_run.hpp"
#include "sluice_executor/systems.hpp"

using namespace sluice;
using namespace sluice::executor;

namespace {

// 4 GPUs, <1, PP> schemes holding 192 (PP 1), 256 (PP 2) and 320 (PP 4) tokens, for a 4-layer decoder of hidden 32.
// SLUICE_EXECUTOR_TEST_DATA in the environment names the folder when the test runs outside its build tree (as
// scripts/gpu-check.sh runs it on a GPU machine).
cost::Profile host_profile() {
  const char* folder = std::getenv("SLUICE_EXECUTOR_TEST_DATA");
  return io::read_profile(std::string(folder != nullptr && *folder != '\0' ? folder : SLUICE_EXECUTOR_TEST_DATA) +
                          "/host_profile.json");
}

constexpr ModelConfig model{.layers = 4, .hidden = 32, .heads = 2, .ffn = 64, .vocab = 64};
constexpr std::int64_t context = 256;
constexpr std::int64_t tokens = 1500;

// Long-tailed lengths from 2 to the context: most short, a few near the context.
data::LengthDataset long_tailed() {
  Rng rng(11);
  std::vector<std::int64_t> lengths;
  for (int i = 0; i < 3000; ++i)
    lengths.push_back(std::min<std::int64_t>(context, 2 + static_cast<std::int64_t>(std::exp(rng.uniform() * 5.6))));
  return {lengths, "long-tailed test lengths"};
}

compare::Options options_for(const cost::Profile& profile) {
  return {.profile = profile,
          .context = context,
          .tokens = tokens,
          .cross_node_tp = false,
          .problem = {.hidden = model.hidden},
          .dispatch = {},
          .seed = 3};
}

std::vector<std::vector<Sequence>> batches_of(const data::LengthDataset& dataset, std::size_t count) {
  data::BatchSampler sampler(dataset, {.tokens_per_batch = tokens, .seed = 5});
  std::vector<std::vector<Sequence>> batches;
  for (std::size_t k = 0; k < count; ++k) batches.push_back(sampler.next().sequences);
  return batches;
}

}  // namespace

TEST_CASE("measure_systems plans as the comparison does and every plan computes the unpacked loss") {
  const cost::Profile profile = host_profile();
  const compare::Options options = options_for(profile);
  const data::LengthDataset dataset = long_tailed();
  const auto batches = batches_of(dataset, 3);
  const MeasureOptions padded{.dynapipe_layout = microbatch::Layout::padded, .token_seed = 9};
  const SystemsMeasurement measured = measure_systems(
      options, model, dataset, batches, [](const Job& job) { return host::run_local(job); }, padded);
  const compare::Comparison comparison = compare::compare_systems(options, dataset, std::span(batches));

  CHECK(measured.batches == comparison.batches);
  CHECK(measured.candidates == comparison.candidates);
  REQUIRE(measured.systems.size() == 3);
  const compare::System systems[] = {compare::System::megatron, compare::System::dynapipe, compare::System::sluice};
  std::vector<std::string> strategies;
  for (std::size_t s = 0; s < 3; ++s) {
    const MeasuredSystem& system = measured.systems[s];
    const compare::SystemRun& simulated = comparison.systems[systems[s]];
    CAPTURE(compare::name(systems[s]));
    REQUIRE(!simulated.failure);
    CHECK(system.system == systems[s]);
    REQUIRE(system.iterations.size() == batches.size());
    for (std::size_t k = 0; k < batches.size(); ++k) {
      const MeasuredIteration& it = system.iterations[k];
      CAPTURE(k);
      // The same plan, so the same simulated time, exactly; sluice's adds the exposed layout move.
      CHECK(it.strategy == simulated.iterations[k].strategy);
      CHECK(it.predicted + it.layout_move == simulated.iterations[k].seconds);
      CHECK(it.layout_move == simulated.iterations[k].switching);
      CHECK(it.replayed > 0);
      CHECK(it.measured > 0);
      strategies.push_back(it.strategy);
    }
    CHECK(system.mean_predicted() > 0);
    CHECK(std::isfinite(system.error()));
  }
  // The systems differ: the test exercises more than one kind of plan.
  std::sort(strategies.begin(), strategies.end());
  CHECK(std::unique(strategies.begin(), strategies.end()) - strategies.begin() >= 2);

  // Packing, micro-batching and pipelining only reorder float64 sums: every system's loss is the unpacked one.
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const std::vector<SequenceTokens> sequence_tokens = make_tokens(batches[k], model.vocab, padded.token_seed + k);
    const double unpacked = run_unpacked(model, sequence_tokens).loss;
    for (const MeasuredSystem& system : measured.systems)
      CHECK(std::abs(system.iterations[k].loss - unpacked) <= 1e-9 * std::abs(unpacked));
  }
}

TEST_CASE("measure_systems charges DynaPipe's packed micro-batches by default, as the executor runs them") {
  const cost::Profile profile = host_profile();
  const compare::Options options = options_for(profile);
  const data::LengthDataset dataset = long_tailed();
  const auto batches = batches_of(dataset, 1);
  const auto run = [](const Job& job) { return host::run_local(job); };
  const SystemsMeasurement packed = measure_systems(options, model, dataset, batches, run);
  const SystemsMeasurement padded =
      measure_systems(options, model, dataset, batches, run, {.dynapipe_layout = microbatch::Layout::padded});
  CHECK(packed.systems[1].configuration.find("(packed)") != std::string::npos);
  CHECK(padded.systems[1].configuration.find("(padded)") != std::string::npos);
  // Packed micro-batches cost at most their padded shape; on this batch the best packed plan is also no slower.
  CHECK(packed.systems[1].mean_predicted() <= padded.systems[1].mean_predicted());
  // The other systems do not depend on DynaPipe's layout.
  CHECK(packed.systems[0].mean_predicted() == padded.systems[0].mean_predicted());
  CHECK(packed.systems[2].mean_predicted() == padded.systems[2].mean_predicted());
}

TEST_CASE("measure_systems rejects what no system can run") {
  const cost::Profile profile = host_profile();
  const data::LengthDataset dataset = long_tailed();
  const auto run = [](const Job& job) { return host::run_local(job); };
  compare::Options options = options_for(profile);
  const std::vector<std::vector<Sequence>> none;
  CHECK_THROWS_AS(measure_systems(options, model, dataset, none, run), invalid_input);
  const std::vector<std::vector<Sequence>> empty_batch(1);
  CHECK_THROWS_AS(measure_systems(options, model, dataset, empty_batch, run), invalid_input);
  ModelConfig odd_heads = model;
  odd_heads.heads = 3;
  CHECK_THROWS_AS(measure_systems(options, odd_heads, dataset, batches_of(dataset, 1), run), invalid_input);
  // No homogeneous ⟨TP, PP⟩ strategy, Megatron-LM's, holds 384 tokens (PP 4 holds 320).
  options.context = 384;
  CHECK_THROWS_WITH_AS(measure_systems(options, model, dataset, batches_of(dataset, 1), run),
                       doctest::Contains("megatron: no ⟨TP, PP⟩ strategy"), invalid_input);
}

TEST_CASE("measure_systems runs sluice's iterations on a flex CP domain, CP groups re-formed per micro-batch") {
  // CP 2 and 4 of both kinds and batches of 3,000 tokens: on some batches sluice's fastest plan re-forms the GPUs
  // into CP groups per micro-batch; the executor runs those groups, and every system's loss is the unpacked one.
  ModelConfig four_heads = model;
  four_heads.heads = 4;
  cost::ProfileSpec spec = host_profile().spec();
  spec.model.heads = four_heads.heads;
  const cost::Profile profile(cost::with_scheme_space(
      spec, {.cp_degrees = {2, 4}, .cp_kinds = {CpKind::ulysses, CpKind::ring}, .recompute = false, .links = {}}));
  compare::Options options = options_for(profile);
  options.tokens = 3000;
  const data::LengthDataset dataset = long_tailed();
  data::BatchSampler sampler(dataset, {.tokens_per_batch = options.tokens, .seed = 3});
  std::vector<std::vector<Sequence>> batches;
  for (int k = 0; k < 6; ++k) batches.push_back(sampler.next().sequences);
  compare::ChosenPlans chosen;
  const compare::Comparison comparison = compare::compare_systems(options, dataset, batches, {}, &chosen);
  const auto flex = std::ranges::find_if(chosen.sluice, [](const auto& iteration) { return iteration.runs_flex(); });
  REQUIRE(flex != chosen.sluice.end());
  const auto k = static_cast<std::size_t>(flex - chosen.sluice.begin());
  const std::string domain = comparison.systems[compare::System::sluice].iterations[k].strategy;
  CHECK(domain.find("CP") != std::string::npos);
  // The batches up to that one plan as they did: each system plans its iterations in order.
  batches.resize(k + 1);
  const auto run = [](const Job& job) { return host::run_local(job); };
  const SystemsMeasurement measured = measure_systems(options, four_heads, dataset, batches, run);
  const MeasuredIteration& sluice_run = measured.systems[2].iterations[k];
  CHECK(sluice_run.strategy == domain);
  CHECK(sluice_run.predicted == flex->flex->plan.seconds);
  const MeasureOptions defaults;
  const double unpacked =
      run_unpacked(four_heads, make_tokens(batches[k], four_heads.vocab, defaults.token_seed + k)).loss;
  for (const MeasuredSystem& system : measured.systems)
    CHECK(std::abs(system.iterations[k].loss - unpacked) <= 1e-12 * std::abs(unpacked));
}
