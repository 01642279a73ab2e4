#pragma once
// Scheduling every pipeline of a Hydraulis iteration plan: each pipeline's packed micro-batches become a
// scheduling problem on its scheme, scheduled by schedule_pipeline (1F1B, or the adaptive cyclic search).
#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/problems.hpp"

namespace sluice::schedule {

struct ScheduledPipeline {
  Problem problem;
  PipelineSchedule schedule;
};

struct IterationSchedule {
  std::vector<std::optional<ScheduledPipeline>> pipelines;  // by pipeline index; empty for an idle pipeline
  double makespan = 0;                                      // the slowest pipeline's simulated time
};

// Raises sluice::infeasible when a pipeline's micro-batches fit no schedule within its memory.
inline IterationSchedule schedule_iteration(const assign::IterationPlan& plan, const cost::Profile& profile,
                                            const ScheduleOptions& schedule = {}, const ProblemOptions& problem = {}) {
  IterationSchedule result;
  for (const assign::PipelinePlan& pipeline : plan.pipelines) {
    if (pipeline.micro_batches.empty()) {
      result.pipelines.emplace_back();
      continue;
    }
    ScheduledPipeline scheduled{problem_for(pipeline, profile.at(pipeline.scheme), problem), {}};
    scheduled.schedule = schedule_pipeline(scheduled.problem, schedule);
    result.makespan = std::max(result.makespan, scheduled.schedule.simulation.makespan);
    result.pipelines.emplace_back(std::move(scheduled));
  }
  return result;
}

// Raises invalid_plan unless every busy pipeline's problem is its micro-batches' and its schedule valid, idle
// pipelines have none, and the makespan is the slowest pipeline's.
inline void validate(const IterationSchedule& schedule, const assign::IterationPlan& plan, const cost::Profile& profile,
                     const ProblemOptions& problem = {}) {
  auto check = [](bool condition, auto&&... parts) {
    if (!condition) throw invalid_plan(sluice::detail::concat("iteration schedule: ", parts...));
  };
  check(schedule.pipelines.size() == plan.pipelines.size(), "has ", schedule.pipelines.size(), " pipelines, the plan ",
        plan.pipelines.size());
  double makespan = 0;
  for (std::size_t j = 0; j < plan.pipelines.size(); ++j) {
    const auto& scheduled = schedule.pipelines[j];
    check(scheduled.has_value() != plan.pipelines[j].micro_batches.empty(), "pipeline ", j,
          scheduled ? " is scheduled but idle" : " has micro-batches but no schedule");
    if (!scheduled) continue;
    check(scheduled->problem == problem_for(plan.pipelines[j], profile.at(plan.pipelines[j].scheme), problem),
          "pipeline ", j, " problem is not its micro-batches'");
    validate(scheduled->schedule, scheduled->problem);
    makespan = std::max(makespan, scheduled->schedule.simulation.makespan);
  }
  check(makespan == schedule.makespan, "makespan ", schedule.makespan, " s, its pipelines give ", makespan);
}

}  // namespace sluice::schedule
