// Packing microbenchmarks: every pipeline of the 64- and 1024-GPU scenarios' dispatch, packed by the heuristic.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "assign_fixtures.hpp"
#include "sluice/assign/dispatch.hpp"
#include "sluice/assign/packing.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"

namespace {

// Arg: GPUs. The dispatch runs once, outside the timed loop. Counters: pipelines, sequences, and the
// micro-batches of the last round.
void BM_Pack(benchmark::State& state) {
  const sluice::bench::AssignScenario scenario = sluice::bench::scenario(static_cast<int>(state.range(0)));
  const sluice::assign::Dispatch dispatch = sluice::assign::dispatch_greedy(scenario.batch, scenario.pipelines);
  std::vector<std::vector<sluice::Sequence>> assigned(scenario.pipelines.size());
  for (std::size_t i = 0; i < scenario.batch.size(); ++i)
    assigned[static_cast<std::size_t>(dispatch.pipeline_of[i])].push_back(scenario.batch[i]);
  std::size_t micro_batches = 0;
  for (auto _ : state) {
    micro_batches = 0;
    for (std::size_t j = 0; j < assigned.size(); ++j) {
      if (assigned[j].empty()) continue;
      const sluice::assign::Packing packing = sluice::assign::pack(assigned[j], scenario.pipelines[j]);
      micro_batches += packing.micro_batches.size();
      benchmark::DoNotOptimize(packing);
    }
  }
  state.counters["pipelines"] = static_cast<double>(scenario.pipelines.size());
  state.counters["sequences"] = static_cast<double>(scenario.batch.size());
  state.counters["micro_batches"] = static_cast<double>(micro_batches);
}
BENCHMARK(BM_Pack)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond);

// One pipeline's share of a long-context batch of short documents that fills its micro-batches to MaxLen: manual
// pages (cut to 16K) just under three 128K micro-batches, a few hundred per micro-batch, where nearly every exchange
// of the descent breaks a token cap. Arg: the batch (sampler seed).
void BM_PackFullMicroBatches(benchmark::State& state) {
  constexpr std::int64_t max_len = 131'072;
  sluice::cost::SchemeCost scheme =
      sluice::io::read_document<sluice::cost::Profile>(sluice::io::resolve_data_file("llama2-7b", "profiles"))
          .with_gpus(8)
          .at(sluice::Scheme(8, 1));
  scheme.max_len = max_len;
  const auto dataset =
      sluice::data::LengthDataset::load(sluice::io::resolve_data_file("man-pages", "lengths")).truncated(16'384);
  sluice::data::BatchSampler sampler(
      dataset, {.tokens_per_batch = 3 * max_len - 2'048, .seed = static_cast<std::uint64_t>(state.range(0))});
  const std::vector<sluice::Sequence> batch = sampler.next().sequences;
  sluice::assign::Packing packing;
  for (auto _ : state) {
    packing = sluice::assign::pack(batch, scheme);
    benchmark::DoNotOptimize(packing);
  }
  std::int64_t tokens = 0;
  for (const sluice::Sequence& sequence : batch) tokens += sequence.length();
  state.counters["sequences"] = static_cast<double>(batch.size());
  state.counters["fill"] = static_cast<double>(tokens) /
                           static_cast<double>(max_len * static_cast<std::int64_t>(packing.micro_batches.size()));
  state.counters["micro_batches"] = static_cast<double>(packing.micro_batches.size());
}
BENCHMARK(BM_PackFullMicroBatches)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace
