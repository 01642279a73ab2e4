#pragma once
// DynaPipe's whole per-iteration pipeline planner (EuroSys'24 Fig. 4): order the mini-batch's samples, cut
// them into micro-batches with the Eq. 2 DP, balance the micro-batches over the |D| data-parallel replicas
// (Karmarkar–Karp), then schedule every replica's pipeline (injection-order search over adaptive cyclic and
// 1F1B orders, simulation, communication plan).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/microbatch/balance.hpp"
#include "sluice/microbatch/order.hpp"
#include "sluice/microbatch/partition.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/problems.hpp"

namespace sluice::schedule {

struct PipelinePlanOptions {
  int stages = 1;    // c
  int replicas = 1;  // |D|
  // Per micro-batch activation bytes on one stage (the DP's limit; DynaPipe: 1/c of what a stage has left).
  double micro_batch_memory = std::numeric_limits<double>::infinity();
  // Activation bytes a stage may hold at once; 0 = stages × micro_batch_memory (what 1F1B needs).
  double stage_memory = 0;
  microbatch::Ordering ordering = microbatch::Ordering::length;
  microbatch::Layout layout = microbatch::Layout::padded;
  double tmax_interval = 5e-6;
  ScheduleOptions schedule{};
  ProblemOptions problem{};
  // The last stage's own work per micro-batch (a profile scheme's, microbatch::stage_cost); zero prices every stage
  // alike.
  cost::LastStageWork last_stage{};
};

struct ReplicaSchedule {
  std::vector<std::size_t> micro_batches;  // indices into the partition, in the schedule's micro-batch ids
  Problem problem;
  PipelineSchedule schedule;  // empty (no ops) when the replica got no micro-batch
  friend bool operator==(const ReplicaSchedule&, const ReplicaSchedule&) = default;
};

struct PipelineRunPlan {
  microbatch::Partition partition;
  microbatch::ReplicaAssignment assignment;
  std::vector<ReplicaSchedule> replicas;
  double makespan = 0;  // the slowest replica's simulated iteration
  friend bool operator==(const PipelineRunPlan&, const PipelineRunPlan&) = default;
};

namespace detail {

inline double stage_memory(const PipelinePlanOptions& options) {
  return options.stage_memory > 0 ? options.stage_memory : options.micro_batch_memory * options.stages;
}

}  // namespace detail

// The second half of the planner for any partition (the DP's, or a baseline's): balance its micro-batches over
// the replicas and schedule each replica. Raises sluice::infeasible when no schedule of a replica fits.
inline PipelineRunPlan schedule_partition(microbatch::Partition partition, const PipelinePlanOptions& options) {
  sluice::require(options.stage_memory >= 0 && !std::isnan(options.stage_memory),
                  "plan_pipeline: stage_memory must be >= 0, got ", options.stage_memory);
  PipelineRunPlan plan;
  plan.partition = std::move(partition);
  plan.assignment = microbatch::balance_kk(microbatch::micro_batch_times(plan.partition), options.replicas);
  for (const std::vector<std::size_t>& indices : plan.assignment.replicas) {
    ReplicaSchedule replica{indices, {}, {}};
    if (!indices.empty()) {
      replica.problem = problem_for(plan.partition, indices, options.stages, detail::stage_memory(options),
                                    options.last_stage, options.problem);
      replica.schedule = schedule_pipeline(replica.problem, options.schedule);
      plan.makespan = std::max(plan.makespan, replica.schedule.simulation.makespan);
    }
    plan.replicas.push_back(std::move(replica));
  }
  return plan;
}

// Raises invalid_input for bad samples or options, sluice::infeasible when a sample exceeds the memory limit
// under every model or no schedule of a replica fits its stages' memory. `models` are tried in order
// (recomputation escalation, see microbatch::partition).
template <microbatch::MicroBatchCostModel Model>
PipelineRunPlan plan_pipeline(Span<const microbatch::Sample> samples, Span<const Model> models,
                              const PipelinePlanOptions& options) {
  const std::vector<microbatch::Sample> ordered = microbatch::order_samples(samples, options.ordering);
  return schedule_partition(microbatch::partition(Span<const microbatch::Sample>(ordered), models,
                                                  {options.stages, options.replicas, options.micro_batch_memory,
                                                   options.layout, options.tmax_interval}),
                            options);
}

template <microbatch::MicroBatchCostModel Model>
PipelineRunPlan plan_pipeline(Span<const microbatch::Sample> samples, const Model& model,
                              const PipelinePlanOptions& options) {
  return plan_pipeline(samples, Span<const Model>(&model, 1), options);
}

// Checks the partition against the samples and the model it names, the replica assignment, every replica's
// problem (rebuilt from the partition) and schedule, and the makespan. Raises invalid_plan.
template <microbatch::MicroBatchCostModel Model>
void validate(const PipelineRunPlan& plan, Span<const microbatch::Sample> samples, Span<const Model> models,
              const PipelinePlanOptions& options) {
  const PlanCheck check("pipeline plan: ");
  microbatch::validate(plan.partition, samples, models, {options.stages, options.replicas, options.micro_batch_memory});
  microbatch::validate(plan.assignment, microbatch::micro_batch_times(plan.partition), options.replicas);
  check(plan.replicas.size() == plan.assignment.replicas.size(), "has ", plan.replicas.size(),
        " replica schedules for ", plan.assignment.replicas.size(), " replicas");
  double makespan = 0;
  for (std::size_t r = 0; r < plan.replicas.size(); ++r) {
    const ReplicaSchedule& replica = plan.replicas[r];
    check(replica.micro_batches == plan.assignment.replicas[r], "replica ", r,
          " schedules other micro-batches than it was assigned");
    if (replica.micro_batches.empty()) continue;
    check(replica.problem == problem_for(plan.partition, replica.micro_batches, options.stages,
                                         detail::stage_memory(options), options.last_stage, options.problem),
          "replica ", r, " problem is not its micro-batches'");
    validate(replica.schedule, replica.problem);
    makespan = std::max(makespan, replica.schedule.simulation.makespan);
  }
  check(makespan == plan.makespan, "makespan ", plan.makespan, " s, its replicas give ", makespan);
}

template <microbatch::MicroBatchCostModel Model>
void validate(const PipelineRunPlan& plan, Span<const microbatch::Sample> samples, const Model& model,
              const PipelinePlanOptions& options) {
  validate(plan, samples, Span<const Model>(&model, 1), options);
}

}  // namespace sluice::schedule
