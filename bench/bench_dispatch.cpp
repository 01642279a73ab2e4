// Dispatch microbenchmarks: Hydraulis Alg. 1 (100 trials) plus local search on the 64- and 1024-GPU scenarios.
#include <benchmark/benchmark.h>

#include "assign_fixtures.hpp"
#include "sluice/assign/dispatch.hpp"

namespace {

// Arg: GPUs. Counters: sequences in the batch, pipelines, and the objective over the lower bound.
void BM_Dispatch(benchmark::State& state) {
  const sluice::bench::AssignScenario scenario = sluice::bench::scenario(static_cast<int>(state.range(0)));
  const sluice::assign::DispatchOptions options{.trials = 100, .threads = 1, .seed = 0, .local_search = true};
  sluice::assign::Dispatch dispatch;
  for (auto _ : state) {
    dispatch = sluice::assign::dispatch_greedy(scenario.batch, scenario.pipelines, options);
    benchmark::DoNotOptimize(dispatch);
  }
  state.counters["sequences"] = static_cast<double>(scenario.batch.size());
  state.counters["pipelines"] = static_cast<double>(scenario.pipelines.size());
  state.counters["objective/bound"] = dispatch.objective / dispatch.lower_bound;
}
BENCHMARK(BM_Dispatch)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond);

}  // namespace
