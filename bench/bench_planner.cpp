// Planning ahead while the trainer trains: the trainer's step is emulated by sleeping the simulated iteration time
// of its plan, while plan::Planner plans the next iterations on worker threads. The target: after the first
// iteration, next() never waits.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "assign_fixtures.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/plan/planner.hpp"

namespace {

constexpr int overlap_iterations = 8;

// Arg: GPUs. The bench scenario's profile, candidates and batches (200K tokens per 64 GPUs), each iteration given
// the sluice plan (plan::IterationPlanner, its defaults); lookahead 2, two planning workers (the machine's cores).
void BM_PlannerOverlap(benchmark::State& state) {
  using namespace sluice;
  const int gpus = static_cast<int>(state.range(0));
  const bench::AssignScenario scenario = bench::scenario(gpus);
  const std::vector<Strategy> candidates = bench::scenario_candidates(gpus);
  const data::LengthDataset dataset = bench::scenario_dataset();
  // The candidates have PP = 1: no stage boundaries, so the default ProblemOptions are exact.
  const plan::IterationPlanner sluice_plan(scenario.profile, candidates);
  const plan::PlannerOptions options{.lookahead = 2, .threads = 2};
  double waited_seconds = 0;  // after the first iteration
  double first_wait = 0;
  double trained = 0;
  std::int64_t waited_steps = 0;
  std::int64_t steps = 0;
  std::atomic<std::int64_t> planning_ns{0};
  for (auto _ : state) {
    data::BatchSampler sampler(dataset,
                               {.tokens_per_batch = bench::scenario_tokens_per_64_gpus * (gpus / 64), .seed = 1});
    int pulled = 0;
    plan::Planner<plan::SimulatedIteration> planner(
        [&]() -> std::optional<std::vector<Sequence>> {
          if (pulled++ == overlap_iterations) return std::nullopt;
          return sampler.next().sequences;
        },
        [&](std::int64_t, std::span<const Sequence> batch) {
          const auto begin = std::chrono::steady_clock::now();
          auto planned = sluice_plan.plan(batch);
          planning_ns +=
              std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - begin).count();
          return planned;
        },
        options);
    std::int64_t waited_before = 0;
    while (auto planned = planner.next()) {
      const plan::PlannerWaits waits = planner.waits();
      if (planned->iteration == 0) {
        first_wait += waits.last_seconds;
      } else {
        ++steps;
        waited_seconds += waits.last_seconds;
        waited_steps += waits.waited - waited_before;
      }
      waited_before = waits.waited;
      trained += planned->plan.total();
      std::this_thread::sleep_for(std::chrono::duration<double>(planned->plan.total()));
    }
  }
  const auto runs = static_cast<double>(state.iterations());
  const double planned_iterations = runs * overlap_iterations;
  state.counters["step_s"] = trained / planned_iterations;
  state.counters["plan_s"] = static_cast<double>(planning_ns.load()) * 1e-9 / planned_iterations;
  state.counters["first_wait_s"] = first_wait / runs;
  state.counters["wait_s"] = waited_seconds / runs;  // total over the steps after the first
  state.counters["waited_fraction"] = steps == 0 ? 0 : static_cast<double>(waited_steps) / static_cast<double>(steps);
}
BENCHMARK(BM_PlannerOverlap)->Arg(64)->Arg(1024)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
