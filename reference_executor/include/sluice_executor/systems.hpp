#pragma once
// sluice's plans measured instead of simulated: the Megatron-LM-style system, DynaPipe and sluice of Hydraulis §8
// (sluice::compare, what `sluice simulate` compares) plan the same batches, each plan is executed by the caller's
// runner (the CUDA backend, or the float64 host backend in tests), and its measured time is set beside the
// simulator's prediction for the same plan. The systems choose among the profile's schemes, so an executor profile
// (<1, PP> schemes) restricts them to data and pipeline parallelism, which is what the executor runs.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sluice/compare/iteration_plans.hpp"
#include "sluice/compare/layout_move.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/compare/sluice.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/microbatch/types.hpp"
#include "sluice/shard/model.hpp"
#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/trace.hpp"

namespace sluice::executor {

struct MeasureOptions {
  // How DynaPipe's planner charges a micro-batch. The executor runs every micro-batch packed, so packed makes the
  // prediction about what runs; padded is DynaPipe's own shape (the comparison's).
  microbatch::Layout dynapipe_layout = microbatch::Layout::packed;
  std::uint64_t token_seed = 1;  // iteration k's token ids are drawn from token_seed + k
};

struct MeasuredIteration {
  std::string strategy;
  double predicted = 0;    // the simulator's makespan of the plan
  double replayed = 0;     // the plan's orders replayed on its measured op times: the iteration with a GPU per rank
  double measured = 0;     // the run's wall-clock makespan (ranks sharing one device take turns or contend)
  double layout_move = 0;  // sluice: the modelled pull and push its makespan leaves exposed; not executed
  double loss = 0;
};

struct MeasuredSystem {
  compare::System system = compare::System::megatron;
  std::string configuration;
  std::vector<MeasuredIteration> iterations;
  [[nodiscard]] double mean_predicted() const { return mean(&MeasuredIteration::predicted); }
  [[nodiscard]] double mean_replayed() const { return mean(&MeasuredIteration::replayed); }
  // The prediction's relative error against the replayed iteration, over the run.
  [[nodiscard]] double error() const { return (mean_predicted() - mean_replayed()) / mean_replayed(); }

private:
  [[nodiscard]] double mean(double MeasuredIteration::*field) const {
    double sum = 0;
    for (const MeasuredIteration& iteration : iterations) sum += iteration.*field;
    return iterations.empty() ? std::numeric_limits<double>::quiet_NaN()
                              : sum / static_cast<double>(iterations.size());
  }
};

struct SystemsMeasurement {
  std::vector<compare::BatchSize> batches;
  std::vector<Strategy> candidates;    // sluice's
  std::vector<MeasuredSystem> systems;  // Megatron-LM, DynaPipe, sluice
};

namespace detail {

inline compare::BatchSize size_of(std::span<const Sequence> batch) {
  compare::BatchSize size{.sequences = batch.size(), .tokens = 0};
  for (const Sequence& sequence : batch) size.tokens += sequence.length();
  return size;
}

// The homogeneous strategy holding the context with the lowest mean predicted makespan over the batches (ties to
// the earlier), as the comparison's baselines choose, and its plans. `plan(batch, strategy)` plans one batch,
// `makespan(plan)` is its prediction.
template <class Plan, class PlanBatch, class Makespan>
std::pair<Strategy, std::vector<Plan>> best_homogeneous(const compare::Options& options,
                                                        std::span<const std::vector<Sequence>> batches,
                                                        PlanBatch plan, Makespan makespan) {
  const std::vector<Strategy> strategies = compare::homogeneous_strategies(options, options.context);
  sluice::require(!strategies.empty(), "measure: no homogeneous strategy of ", options.profile.name(), " on ",
                  options.profile.gpus(), " GPUs holds the context of ", options.context, " tokens");
  std::pair<Strategy, std::vector<Plan>> best{strategies.front(), {}};
  double best_mean = std::numeric_limits<double>::infinity();
  for (const Strategy& strategy : strategies) {
    std::vector<Plan> plans;
    double sum = 0;
    for (const std::vector<Sequence>& batch : batches) {
      plans.push_back(plan(batch, strategy));
      sum += makespan(plans.back());
    }
    const double mean = sum / static_cast<double>(batches.size());
    if (mean < best_mean) {
      best_mean = mean;
      best = {strategy, std::move(plans)};
    }
  }
  return best;
}

// Runs `job` and sets its measured times beside `predicted`.
template <class Runner>
MeasuredIteration measure(const Job& job, Runner& run, std::string strategy, double predicted) {
  const RunReport report = run(job);
  const TimingTable table = compare(job, report);
  return {.strategy = std::move(strategy),
          .predicted = predicted,
          .replayed = table.replayed,
          .measured = table.measured,
          .layout_move = 0,
          .loss = report.result.loss};
}

}  // namespace detail

// The three systems on `batches` (each not empty, no sequence longer than options.context), every plan executed by
// `run(const Job&) -> RunReport`. sluice proposes its candidates from `dataset` (truncated to the context), as the
// comparison does. Raises invalid_input when a system cannot hold the context.
template <class Runner>
SystemsMeasurement measure_systems(const compare::Options& options, const ModelConfig& model,
                                   const data::LengthDataset& dataset, std::span<const std::vector<Sequence>> batches,
                                   Runner&& run, const MeasureOptions& measure = {}) {
  validate(model);
  sluice::require(!batches.empty(), "measure: no batches");
  SystemsMeasurement result;
  std::vector<std::vector<SequenceTokens>> tokens;
  for (std::size_t k = 0; k < batches.size(); ++k) {
    sluice::require(!batches[k].empty(), "measure: batch ", k, " is empty");
    result.batches.push_back(detail::size_of(batches[k]));
    tokens.push_back(make_tokens(batches[k], model.vocab, measure.token_seed + k));
  }

  {
    const auto [strategy, plans] = detail::best_homogeneous<compare::ScheduledPlan>(
        options, batches,
        [&](std::span<const Sequence> batch, const Strategy& s) {
          return compare::plan_fixed_length_iteration(options, batch, s, options.context);
        },
        [](const compare::ScheduledPlan& p) { return p.schedule.makespan; });
    MeasuredSystem system{.system = compare::System::megatron,
                          .configuration = sluice::concat(strategy.name(), "; fixed-length packing into ",
                                                          options.context, "-token bins; 1F1B"),
                          .iterations = {}};
    for (std::size_t k = 0; k < plans.size(); ++k)
      system.iterations.push_back(detail::measure(job_from_iteration(model, tokens[k], plans[k].plan, plans[k].schedule),
                                                  run, strategy.name(), plans[k].schedule.makespan));
    result.systems.push_back(std::move(system));
  }

  {
    const auto [strategy, plans] = detail::best_homogeneous<schedule::PipelineRunPlan>(
        options, batches,
        [&](std::span<const Sequence> batch, const Strategy& s) {
          return compare::plan_dynapipe_iteration(options, batch, s, measure.dynapipe_layout);
        },
        [](const schedule::PipelineRunPlan& p) { return p.makespan; });
    MeasuredSystem system{
        .system = compare::System::dynapipe,
        .configuration = sluice::concat(strategy.name(), "; micro-batch DP (",
                                        microbatch::layout_name(measure.dynapipe_layout),
                                        "), Karmarkar-Karp over the replicas, adaptive schedule"),
        .iterations = {}};
    for (std::size_t k = 0; k < plans.size(); ++k)
      system.iterations.push_back(detail::measure(job_from_pipeline_plan(model, tokens[k], plans[k]), run,
                                                  strategy.name(), plans[k].makespan));
    result.systems.push_back(std::move(system));
  }

  compare::SluiceCandidates candidates = compare::propose_candidates(options, dataset);
  if (candidates.failure) throw sluice::invalid_input("measure: " + *candidates.failure);
  result.candidates = candidates.strategies;
  const std::vector<double> moves = compare::sluice_layout_moves(options, result.candidates);
  const int layers = shard::llama_like(options.profile.spec().model).layers;
  MeasuredSystem system{.system = compare::System::sluice,
                        .configuration = sluice::concat(result.candidates.size(),
                                                        " candidates; two-stage assignment, adaptive schedule; the "
                                                        "fastest simulated candidate per iteration"),
                        .iterations = {}};
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const schedule::SimulatedIteration iteration =
        compare::plan_sluice_iteration(options, batches[k], result.candidates, moves);
    MeasuredIteration measured = detail::measure(job_from_iteration(model, tokens[k], iteration.plan, iteration.schedule),
                                                 run, iteration.plan.strategy.name(), iteration.schedule.makespan);
    measured.layout_move = compare::exposed_layout_move(moves[iteration.chosen], iteration.schedule.makespan, layers);
    system.iterations.push_back(std::move(measured));
  }
  result.systems.push_back(std::move(system));
  return result;
}

}  // namespace sluice::executor
