#pragma once
// The sluice plan of one iteration and its choice: every pipeline of a Hydraulis iteration plan scheduled (its packed
// micro-batches a scheduling problem on its scheme, scheduled by schedule::schedule_pipeline: 1F1B, or the adaptive
// cyclic search), the per-iteration choice among candidate strategies judged by that simulation, and the flex CP
// plan that runs instead where it is faster.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "sluice/assign/choose.hpp"
#include "sluice/assign/flex_cp_types.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/core/check.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/problems.hpp"

namespace sluice::plan {

struct ScheduledPipeline {
  schedule::Problem problem;
  schedule::PipelineSchedule schedule;
  friend bool operator==(const ScheduledPipeline&, const ScheduledPipeline&) = default;
};

struct IterationSchedule {
  std::vector<std::optional<ScheduledPipeline>> pipelines;  // by pipeline index; empty for an idle pipeline
  double makespan = 0;                                      // the slowest pipeline's simulated time
  friend bool operator==(const IterationSchedule&, const IterationSchedule&) = default;
};

// Raises sluice::infeasible when a pipeline's micro-batches fit no schedule within its memory.
inline IterationSchedule schedule_iteration(const assign::IterationPlan& plan, const cost::Profile& profile,
                                            const schedule::ScheduleOptions& schedule = {},
                                            const schedule::ProblemOptions& problem = {}) {
  IterationSchedule result;
  for (const assign::PipelinePlan& pipeline : plan.pipelines) {
    if (pipeline.micro_batches.empty()) {
      result.pipelines.emplace_back();
      continue;
    }
    ScheduledPipeline scheduled{schedule::problem_for(pipeline, profile.at(pipeline.scheme), problem), {}};
    scheduled.schedule = schedule::schedule_pipeline(scheduled.problem, schedule);
    result.makespan = std::max(result.makespan, scheduled.schedule.simulation.makespan);
    result.pipelines.emplace_back(std::move(scheduled));
  }
  return result;
}

// Raises invalid_plan unless every busy pipeline's problem is its micro-batches' and its schedule valid, idle
// pipelines have none, and the makespan is the slowest pipeline's.
inline void validate(const IterationSchedule& schedule, const assign::IterationPlan& plan, const cost::Profile& profile,
                     const schedule::ProblemOptions& problem = {}) {
  const PlanCheck check("iteration schedule: ");
  check(schedule.pipelines.size() == plan.pipelines.size(), "has ", schedule.pipelines.size(), " pipelines, the plan ",
        plan.pipelines.size());
  double makespan = 0;
  for (std::size_t j = 0; j < plan.pipelines.size(); ++j) {
    const auto& scheduled = schedule.pipelines[j];
    check(scheduled.has_value() != plan.pipelines[j].micro_batches.empty(), "pipeline ", j,
          scheduled ? " is scheduled but idle" : " has micro-batches but no schedule");
    if (!scheduled) continue;
    check(scheduled->problem == schedule::problem_for(plan.pipelines[j], profile.at(plan.pipelines[j].scheme), problem),
          "pipeline ", j, " problem is not its micro-batches'");
    schedule::validate(scheduled->schedule, scheduled->problem);
    makespan = std::max(makespan, scheduled->schedule.simulation.makespan);
  }
  check(makespan == schedule.makespan, "makespan ", schedule.makespan, " s, its pipelines give ", makespan);
}

// The batch planned on a flex CP domain (plan/flex_domain.hpp): `strategy`'s replicas of one ⟨TP, PP⟩ scheme
// re-form, per micro-batch, into CP groups of the degrees that `schemes` run (degree k of the plan runs schemes[k]).
struct FlexIteration {
  std::size_t domain = 0;  // which of the planner's domains (plan::FlexDomains), 0 where it offers one
  Strategy strategy;
  std::vector<Scheme> schemes;
  assign::FlexCpPlan plan;
  double overhead = 0;  // what the domain is charged besides its groups' time: its layout move, as a candidate's
  [[nodiscard]] double total() const noexcept { return plan.seconds + overhead; }
  friend bool operator==(const FlexIteration&, const FlexIteration&) = default;
};

// Whether an iteration runs its flex plan: only where one is offered and its total is below the kept candidate's
// (ties to the candidate). Every record of an iteration (SimulatedIteration, io's plan and trace runs) decides so.
[[nodiscard]] inline bool flex_plan_runs(const std::optional<FlexIteration>& flex, double candidate_total) noexcept {
  return flex && flex->total() < candidate_total;
}

// The iteration's time: the flex plan's total where it runs, the candidate's otherwise.
[[nodiscard]] inline double iteration_total(const std::optional<FlexIteration>& flex, double candidate_total) noexcept {
  return flex_plan_runs(flex, candidate_total) ? flex->total() : candidate_total;
}

// Hydraulis' per-iteration choice (assign::plan_iteration) with the simulator as the judge: every candidate
// that holds the batch's longest sequence is dispatched and packed alone, then scheduled; the candidate with the
// lowest simulated makespan + overhead is kept (ties to the earlier). plan_iteration judges by the packing
// estimate (max micro-batch)·(PP − 1 + V), which ignores how a schedule overlaps unequal micro-batches.
struct SimulatedIteration {
  assign::IterationPlan plan;  // the kept candidate planned alone: its `candidates` holds only that candidate
  IterationSchedule schedule;
  std::size_t chosen = 0;                        // index into the candidates
  std::vector<std::optional<double>> makespans;  // per candidate; empty when it cannot hold the batch
  // The fastest flex CP domain's plan, where the planner offers domains that hold the batch: the iteration runs
  // it instead of `plan` where its total is below the kept candidate's.
  std::optional<FlexIteration> flex{};
  [[nodiscard]] double candidate_total() const noexcept { return schedule.makespan + plan.overhead; }
  [[nodiscard]] bool runs_flex() const noexcept { return flex_plan_runs(flex, candidate_total()); }
  [[nodiscard]] double total() const noexcept { return iteration_total(flex, candidate_total()); }
  friend bool operator==(const SimulatedIteration&, const SimulatedIteration&) = default;
};

// Raises invalid_input as plan_iteration does (no candidate holds the batch, bad options).
inline SimulatedIteration plan_simulated_iteration(Span<const Sequence> batch, Span<const Strategy> candidates,
                                                   const cost::Profile& profile,
                                                   const assign::PlanOptions& plan_options = {},
                                                   const schedule::ScheduleOptions& schedule = {},
                                                   const schedule::ProblemOptions& problem = {}) {
  auto choice = assign::choose_candidate(
      batch, candidates, profile, plan_options.candidate_overhead,
      [&](std::size_t k, Span<const cost::SchemeCost>, double overhead) {
        assign::PlanOptions alone = plan_options;
        if (!alone.candidate_overhead.empty()) alone.candidate_overhead = {overhead};
        SimulatedIteration candidate{.plan = assign::plan_iteration(batch, Span(&candidates[k], 1), profile, alone),
                                     .schedule = {},
                                     .chosen = k,
                                     .makespans = {}};
        candidate.schedule = schedule_iteration(candidate.plan, profile, schedule, problem);
        const double makespan = candidate.schedule.makespan;
        return assign::Judged<SimulatedIteration>{.plan = std::move(candidate), .score = makespan};
      });
  SimulatedIteration result = std::move(choice.plan);
  result.makespans = std::move(choice.scores);
  return result;
}

// Raises invalid_plan unless the plan and its schedule are valid for the batch, the plan runs the chosen
// candidate, and no other candidate's simulated makespan + overhead is lower.
inline void validate(const SimulatedIteration& iteration, Span<const Sequence> batch, Span<const Strategy> candidates,
                     const cost::Profile& profile, const assign::PlanOptions& plan_options = {},
                     const schedule::ProblemOptions& problem = {}) {
  const PlanCheck check("simulated iteration: ");
  assign::validate(iteration.plan, batch, profile);
  validate(iteration.schedule, iteration.plan, profile, problem);
  check(iteration.makespans.size() == candidates.size(), "has ", iteration.makespans.size(), " makespans for ",
        candidates.size(), " candidates");
  check(iteration.chosen < candidates.size() && candidates[iteration.chosen] == iteration.plan.strategy,
        "chosen candidate ", iteration.chosen, " is not the planned strategy ", iteration.plan.strategy.name());
  check(iteration.makespans[iteration.chosen] == iteration.schedule.makespan, "chosen candidate's makespan is not ",
        "its schedule's");
  const std::vector<double>& overheads = plan_options.candidate_overhead;
  check(iteration.plan.overhead == (overheads.empty() ? 0.0 : overheads[iteration.chosen]),
        "overhead is not the chosen candidate's");
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    if (!iteration.makespans[k]) continue;
    const double total = *iteration.makespans[k] + (overheads.empty() ? 0.0 : overheads[k]);
    check(total >= iteration.candidate_total(), "candidate ", k, " simulates faster (", total,
          " s) than the chosen one (", iteration.candidate_total(), " s)");
  }
}

}  // namespace sluice::plan
