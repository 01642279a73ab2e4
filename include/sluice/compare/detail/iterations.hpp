#pragma once
// The pieces the compared systems share: one iteration of a strategy planned, validated, scheduled and measured
// (fixed-length packing and 1F1B for the Megatron-LM and HotSPa baselines, DynaPipe §4–5 for DynaPipe, Hydraulis
// §6 for sluice), and the choice of a system's strategy by mean iteration. Not for callers: the systems'
// headers use them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/assign/flex_cp.hpp"
#include "sluice/compare/iteration_plans.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/compare/statistics.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/plan/flex_domain.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/plan/layout_moves.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/proposal/homogeneous.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/shard/model.hpp"

namespace sluice::compare::detail {

inline double imbalance(Span<const double> busy_seconds) {
  double slowest = 0, fastest = std::numeric_limits<double>::infinity();
  for (const double seconds : busy_seconds) {
    slowest = std::max(slowest, seconds);
    fastest = std::min(fastest, seconds);
  }
  return busy_seconds.empty() ? 1.0 : slowest / fastest;
}

// WLB-LLM's imbalance degree of one pipeline's micro-batches, given their times (max · count / sum).
inline double micro_batch_imbalance(Span<const double> micro_batch_seconds) {
  double slowest = 0, total = 0;
  for (const double seconds : micro_batch_seconds) {
    slowest = std::max(slowest, seconds);
    total += seconds;
  }
  return total > 0 ? slowest * static_cast<double>(micro_batch_seconds.size()) / total : 1.0;
}

// The imbalance degree of a scheduled pipeline: each micro-batch's forward summed over the stages.
inline double micro_batch_imbalance(const schedule::Problem& problem) {
  std::vector<double> forward;
  for (const schedule::MicroBatchCost& micro_batch : problem.micro_batches) {
    double seconds = 0;
    for (const double stage : micro_batch.forward) seconds += stage;
    forward.push_back(seconds);
  }
  return micro_batch_imbalance(forward);
}

// The busy pipelines' makespans, their imbalance, the worst pipeline's imbalance degree and the idle share, of a
// scheduled iteration plan.
inline IterationOutcome outcome_of(const plan::IterationSchedule& schedule, const Strategy& strategy) {
  std::vector<double> busy;
  double degree = 1;
  for (const auto& pipeline : schedule.pipelines)
    if (pipeline) {
      busy.push_back(pipeline->schedule.simulation.makespan);
      degree = std::max(degree, micro_batch_imbalance(pipeline->problem));
    }
  const double idle = 1.0 - static_cast<double>(busy.size()) / static_cast<double>(schedule.pipelines.size());
  return {.seconds = schedule.makespan,
          .imbalance = imbalance(busy),
          .idle = idle,
          .micro_batch_imbalance = degree,
          .strategy = strategy.name()};
}

inline SystemRun failed(System system, std::string reason) {
  SystemRun run;
  run.name = name(system);
  run.failure = std::move(reason);
  return run;
}

// Why no homogeneous strategy of the schemes `admits` takes (`kind`, in words) holds `length`, suggesting
// --cross-node-tp only where it would find one.
template <class Admits>
std::string no_homogeneous(const Options& options, std::int64_t length, std::string_view kind, Admits admits) {
  Options across = options;
  across.cross_node_tp = true;
  const bool across_nodes_would_hold =
      !options.cross_node_tp && !homogeneous_strategies(across, length, admits).empty();
  return sluice::concat("no ", kind, " strategy of ", options.profile.name(), " on ", options.profile.gpus(),
                        " GPUs holds ", length, " tokens",
                        across_nodes_would_hold ? " with TP within a node (try --cross-node-tp)"
                                                : " (one scheme, replicated to fill every GPU, must hold it)");
}

inline std::string no_homogeneous(const Options& options, std::int64_t length) {
  return no_homogeneous(options, length, "homogeneous", [](const Scheme&) { return true; });
}

// Every system runs iteration by iteration (so that a long run streams its batches): a SystemRun per strategy
// accumulates the iterations, and the system's choice among its strategies is made once all have run.
inline std::vector<SystemRun> runs_of(Span<const Strategy> strategies) {
  std::vector<SystemRun> runs(strategies.size());
  for (std::size_t s = 0; s < strategies.size(); ++s) runs[s].strategies = {strategies[s]};
  return runs;
}

// The index of the run with the lowest mean iteration (ties to the earlier); nullopt when there is none.
inline std::optional<std::size_t> best_index(Span<const SystemRun> runs) {
  std::optional<std::size_t> best;
  double best_mean = std::numeric_limits<double>::infinity();
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const double seconds = mean(runs[r].seconds());
    if (!best || seconds < best_mean) {
      best_mean = seconds;
      best = r;
    }
  }
  return best;
}

// The run with the lowest mean iteration (ties to the earlier).
inline std::optional<SystemRun> best_of(std::vector<SystemRun> runs) {
  const std::optional<std::size_t> best = best_index(runs);
  if (!best) return std::nullopt;
  return std::move(runs[*best]);
}

// Iteration k of one homogeneous strategy (run.strategies[0]): fixed-length packing into `capacity`-token bins, 1F1B.
// Returns the plan; nullopt for an empty batch (a length range this batch has nothing in).
inline std::optional<ScheduledPlan> fixed_length_iteration(const Options& options, Span<const Sequence> batch,
                                                           std::size_t k, std::int64_t capacity, SystemRun& run) {
  const Strategy& strategy = run.strategies.front();
  if (batch.empty()) {
    run.iterations.push_back({.strategy = strategy.name()});
    return std::nullopt;
  }
  ScheduledPlan scheduled = plan_fixed_length_iteration(options, batch, strategy, capacity);
  run.iterations.push_back(outcome_of(scheduled.schedule, strategy));
  if (k == 0) run.first = timeline_of(scheduled.plan, scheduled.schedule);
  if (k < pictured_iterations) run.plans.push_back(scheduled.plan);
  return scheduled;
}

// Iteration k of DynaPipe on one homogeneous strategy (run.strategies[0]): its pipelines are the data-parallel
// replicas.
inline schedule::PipelineRunPlan dynapipe_iteration(const Options& options, Span<const Sequence> batch, std::size_t k,
                                                    SystemRun& run) {
  const Strategy& strategy = run.strategies.front();
  schedule::PipelineRunPlan plan = plan_dynapipe_iteration(options, batch, strategy);
  const Scheme& scheme = strategy.parts().front().scheme;
  std::vector<double> busy;
  double degree = 1;
  for (std::size_t r = 0; r < plan.replicas.size(); ++r) {
    if (plan.replicas[r].micro_batches.empty()) continue;
    const schedule::Simulation& simulation = plan.replicas[r].schedule.simulation;
    busy.push_back(simulation.makespan);
    degree = std::max(degree, micro_batch_imbalance(plan.replicas[r].problem));
    if (k == 0) {
      run.first.pipelines.push_back(simulation);
      run.first.names.push_back(pipeline_name(r, scheme));
    }
  }
  const double idle = 1.0 - static_cast<double>(busy.size()) / static_cast<double>(plan.replicas.size());
  run.iterations.push_back({.seconds = plan.makespan,
                            .imbalance = imbalance(busy),
                            .idle = idle,
                            .micro_batch_imbalance = degree,
                            .strategy = strategy.name()});
  return plan;
}

// One iteration's outcome of a flex CP plan: imbalance is the mean over micro-batches, weighted by their time, of
// the slowest group over the fastest; idle the share of unit-time no group uses; the imbalance degree is that of
// the micro-batches' times, forward and backward together (the CP schemes' costs do not split them).
inline IterationOutcome flex_cp_outcome(const assign::FlexCpProblem& problem, const assign::FlexCpPlan& plan,
                                        std::string strategy) {
  double weighted = 0, total = 0, busy = 0;
  std::vector<double> micro_batch_seconds;
  for (const assign::FlexCpMicroBatch& micro_batch : plan.micro_batches) {
    double slowest = 0;
    double fastest = std::numeric_limits<double>::infinity();
    for (const assign::FlexCpGroup& group : micro_batch.groups) {
      const double seconds = assign::flex_cp_group_seconds(problem, group);
      slowest = std::max(slowest, seconds);
      fastest = std::min(fastest, seconds);
      busy += seconds * problem.degrees[static_cast<std::size_t>(group.degree_index)].degree;
    }
    weighted += slowest / fastest * slowest;
    total += slowest;
    micro_batch_seconds.push_back(slowest);
  }
  return {.seconds = plan.seconds,
          .imbalance = weighted / total,
          .idle = 1 - busy / (total * problem.units),
          .micro_batch_imbalance = micro_batch_imbalance(micro_batch_seconds),
          .strategy = std::move(strategy)};
}

// Iteration k of sluice, planned by `planner` over its candidates (run.strategies): the iteration is charged its
// simulated makespan plus the share of the kept candidate's layout move that the makespan leaves exposed; or, where
// it runs, the plan of one of `flex`'s domains (plan::OfferedFlex: the planner's), charged as a candidate is.
inline plan::SimulatedIteration sluice_iteration(const plan::IterationPlanner& planner, const plan::OfferedFlex& flex,
                                                 Span<const Sequence> batch, std::size_t k, SystemRun& run) {
  plan::SimulatedIteration iteration = planner.plan(batch);
  planner.validate(iteration, batch);
  const int layers = shard::llama_like(planner.profile().spec().model).layers;
  if (iteration.runs_flex()) {
    const std::size_t d = iteration.flex->domain;
    IterationOutcome outcome =
        flex_cp_outcome(flex.domains->domains()[d]->problem_of(batch), iteration.flex->plan, flex.names[d]);
    outcome.layout_move = flex.layout_moves[d];
    outcome.switching = plan::exposed_layout_move(outcome.layout_move, outcome.seconds, layers);
    outcome.seconds += outcome.switching;
    run.iterations.push_back(std::move(outcome));
    return iteration;
  }
  IterationOutcome outcome = outcome_of(iteration.schedule, iteration.plan.strategy);
  outcome.layout_move = run.layout_moves[iteration.chosen];
  outcome.switching = plan::exposed_layout_move(outcome.layout_move, outcome.seconds, layers);
  outcome.seconds += outcome.switching;
  run.iterations.push_back(std::move(outcome));
  if (k == 0) run.first = timeline_of(iteration.plan, iteration.schedule);
  if (k < pictured_iterations) run.plans.push_back(iteration.plan);
  return iteration;
}

}  // namespace sluice::compare::detail
