// Per-iteration planning: dispatch + packing for four candidates, and the choice among them.
#include <benchmark/benchmark.h>

#include <optional>
#include <vector>

#include "assign_fixtures.hpp"
#include "sluice/assign/plan.hpp"

namespace {

// Arg: GPUs. One thread, 100 dispatch trials per candidate.
void BM_PlanIteration(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const sluice::bench::AssignScenario scenario = sluice::bench::scenario(gpus);
  const auto strategies = sluice::bench::scenario_candidates(gpus);
  std::optional<sluice::assign::IterationPlan> plan;  // no default-constructible Strategy
  for (auto _ : state) {
    plan = sluice::assign::plan_iteration(scenario.batch, strategies, scenario.profile);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["sequences"] = static_cast<double>(scenario.batch.size());
  state.counters["chosen"] = static_cast<double>(plan->chosen);
  state.counters["estimate_s"] = plan->estimate;
}
BENCHMARK(BM_PlanIteration)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
