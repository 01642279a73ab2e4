// Per-iteration planning: dispatch + packing for four candidates, and the choice among them.
#include <benchmark/benchmark.h>

#include <optional>
#include <vector>

#include "assign_fixtures.hpp"
#include "cp_fixtures.hpp"
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

// The same batch over the CP scheme space (bench::wide_space), with candidates that use CP and AC schemes.
void BM_PlanIterationCp(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const sluice::bench::AssignScenario scenario = sluice::bench::scenario(gpus);
  const sluice::cost::Profile profile(
      sluice::cost::with_scheme_space(scenario.profile.spec(), sluice::bench::wide_space()));
  const auto strategies = sluice::bench::scenario_cp_candidates(gpus);
  std::optional<sluice::assign::IterationPlan> plan;
  for (auto _ : state) {
    plan = sluice::assign::plan_iteration(scenario.batch, strategies, profile);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["schemes"] = static_cast<double>(profile.schemes().size());
  state.counters["chosen"] = static_cast<double>(plan->chosen);
  state.counters["estimate_s"] = plan->estimate;
}
BENCHMARK(BM_PlanIterationCp)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
