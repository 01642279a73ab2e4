// Scheduling microbenchmarks: the whole per-pipeline scheduler (injection-order search over adaptive cyclic
// and 1F1B candidates, simulation, communication plan) on 8 stages.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "sluice/core/random.hpp"
#include "sluice/schedule/orders.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/simulate.hpp"

namespace {

// Micro-batch sizes uniform in [0.25, 2] (seed 1): per-stage forward 2 ms × size, backward twice that,
// activation 1 GB × size, 4096 tokens × size of hidden 4096 over 100 GB/s links with 10 µs latency;
// every stage may hold 12 GB of activations (1F1B holds up to 8 micro-batches on the first stage).
sluice::schedule::Problem cyclic_problem(int micro_batches) {
  constexpr int stages = 8;
  sluice::Rng rng(1);
  sluice::schedule::Problem problem;
  problem.stages = stages;
  for (int i = 0; i < micro_batches; ++i) {
    const double size = 0.25 + 1.75 * rng.uniform();
    sluice::schedule::MicroBatchCost mb;
    mb.forward.assign(stages, 2e-3 * size);
    mb.backward.assign(stages, 4e-3 * size);
    mb.activation.assign(stages, std::round(1e9 * size));
    mb.tokens = static_cast<std::int64_t>(4096 * size);
    problem.micro_batches.push_back(std::move(mb));
  }
  problem.memory_limit.assign(stages, 12e9);
  problem.hidden = 4096;
  problem.link = {1e-5, 1e11};
  return problem;
}

// Arg: micro-batches. Counters: the chosen makespan against 1F1B in the input order (when it fits), the
// orders simulated, and the instructions emitted.
void BM_ScheduleCyclic(benchmark::State& state) {
  const sluice::schedule::Problem problem = cyclic_problem(static_cast<int>(state.range(0)));
  sluice::schedule::PipelineSchedule chosen;
  for (auto _ : state) {
    chosen = sluice::schedule::schedule_pipeline(problem);
    benchmark::DoNotOptimize(chosen);
  }
  const sluice::schedule::Simulation baseline = sluice::schedule::simulate(
      problem, sluice::schedule::one_f_one_b(sluice::schedule::identity_injection(problem.micro_batches.size()), 8));
  std::size_t instructions = 0;
  for (const auto& rank : chosen.plan.ranks) instructions += rank.size();
  state.counters["makespan_s"] = chosen.simulation.makespan;
  state.counters["one_f_one_b_s"] = baseline.makespan;
  state.counters["candidates"] = chosen.candidates;
  state.counters["instructions"] = static_cast<double>(instructions);
  state.counters["memory_aware"] = chosen.memory_aware ? 1 : 0;
}
BENCHMARK(BM_ScheduleCyclic)->Arg(32)->Arg(128)->Unit(benchmark::kMillisecond);

}  // namespace
