// Strategy-proposal benchmarks (docs/proposal.md): the bundled LLaMA-32B profile, Lmax 32768, 100,000
// synthetic long-tailed lengths (seed 1) truncated to 32768, one thread. TP may span nodes: on this profile
// only tp16pp1 holds 32768 tokens.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <optional>

#include "cp_fixtures.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/proposal/propose.hpp"
#include "sluice/proposal/sampled.hpp"

namespace {

using sluice::proposal::ProposeOptions;

const sluice::data::LengthDataset& dataset() {
  static const sluice::data::LengthDataset lengths =
      sluice::data::LengthDataset(sluice::data::synthetic_lengths({.count = 100'000, .seed = 1}), "synthetic")
          .truncated(32768);
  return lengths;
}

// LLaMA-32B on `gpus` GPUs; with `wide`, over CP 2, 4 and 8 of every kind and full recomputation.
sluice::cost::Profile profile_of(std::int64_t gpus, bool wide) {
  sluice::cost::Profile profile =
      sluice::io::read_document<sluice::cost::Profile>(sluice::io::resolve_data_file("llama2-32b", "profiles"))
          .with_gpus(gpus);
  if (!wide) return profile;
  return sluice::cost::Profile(sluice::cost::with_scheme_space(profile.spec(), sluice::bench::wide_space()));
}

void run(benchmark::State& state, std::int64_t gpus, const ProposeOptions& options, bool wide) {
  const sluice::cost::Profile profile = profile_of(gpus, wide);
  double optimum = 0;
  for (auto _ : state) {
    const sluice::proposal::Proposal result = sluice::proposal::propose(dataset(), profile, options);
    optimum = result.relaxed_optimum.value_or(result.integer_optimum);
    benchmark::DoNotOptimize(optimum);
  }
  state.counters["optimum_s"] = optimum;
  state.counters["schemes"] = static_cast<double>(profile.schemes().size());
}

// The sampled proposal with its defaults (48 choosing and 32 held-out batches, 4 dispatch trials, pool of 256)
// over the paper DP of BM_Propose/64.
void run_sampled(benchmark::State& state, const ProposeOptions& paper) {
  const sluice::cost::Profile profile =
      sluice::io::read_document<sluice::cost::Profile>(sluice::io::resolve_data_file("llama2-32b", "profiles"))
          .with_gpus(64);
  sluice::proposal::SampledOptions options;
  options.paper = paper;
  std::optional<sluice::proposal::SampledProposal> result;
  for (auto _ : state) {
    result = sluice::proposal::propose_sampled(dataset(), profile, options);
    benchmark::DoNotOptimize(result);
  }
  state.counters["pool"] = static_cast<double>(result->pool_size);
  state.counters["plans"] = static_cast<double>(result->plans);
  state.counters["held_out_s"] = result->held_out_mean;
  state.counters["paper_held_out_s"] = result->paper_held_out_mean;
}

ProposeOptions options(std::int64_t gpus, std::int64_t length_step, std::int64_t gpu_step, bool relaxed,
                       double tokens) {
  ProposeOptions result;
  result.gpus = gpus;
  result.max_len = 32768;
  result.length_step = length_step;
  result.gpu_step = gpu_step;
  result.relaxed = relaxed;
  result.tokens_per_iteration = tokens;
  result.tp_within_node = false;
  return result;
}

// n step 1, Δl 128: the authors' setting for small clusters.
// n step 4, Δl 1024: the authors' setting for 1024 GPUs.
// n and d step 0.1, Δl 128: the paper's stated setting.
const bool registered = [] {
  benchmark::RegisterBenchmark("BM_Propose/64", run, 64, options(64, 128, 10, false, 200'000), false)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Propose/64_cp", run, 64, options(64, 128, 10, false, 200'000), true)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Propose/1024", run, 1024, options(1024, 1024, 40, false, 3'200'000), false)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Propose/64_fine", run, 64, options(64, 128, 1, true, 200'000), false)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_ProposeSampled/64", run_sampled, options(64, 128, 10, false, 200'000))
      ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
