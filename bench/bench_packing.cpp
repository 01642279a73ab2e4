// Packing microbenchmarks: every pipeline of the 64- and 1024-GPU scenarios' dispatch, packed by the heuristic.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <vector>

#include "assign_fixtures.hpp"
#include "sluice/assign/dispatch.hpp"
#include "sluice/assign/packing.hpp"
#include "sluice/core/sequence.hpp"

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

}  // namespace
