#pragma once
// One iteration of each homogeneous baseline of Hydraulis §8, validated and ready to run: what the comparison
// simulates (compare::ChosenPlans hands the chosen ones to a caller that runs them, the reference executor).
// sluice's own plan is plan::IterationPlanner's.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/microbatch/types.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/plan_pipeline.hpp"

namespace sluice::compare {

// An iteration plan with its simulated schedule.
struct ScheduledPlan {
  assign::IterationPlan plan;
  plan::IterationSchedule schedule;
};

// Megatron-LM (and each HotSPa length range): `batch` (not empty) packed best-fit-decreasing into `capacity`-token
// bins on one homogeneous strategy, bins dealt round-robin to its pipelines, 1F1B.
inline ScheduledPlan plan_fixed_length_iteration(const Options& options, Span<const Sequence> batch,
                                                 const Strategy& strategy, std::int64_t capacity) {
  const schedule::ScheduleOptions one_f_one_b{
      .kind = schedule::ScheduleKind::one_f_one_b, .seed = options.seed, .clusters = 0};
  ScheduledPlan result{assign::plan_fixed_length(batch, strategy, options.profile, capacity), {}};
  assign::validate(result.plan, batch, options.profile);
  result.schedule = plan::schedule_iteration(result.plan, options.profile, one_f_one_b, options.problem);
  plan::validate(result.schedule, result.plan, options.profile, options.problem);
  return result;
}

// DynaPipe on one homogeneous strategy, whose pipelines are the data-parallel replicas: the batch ordered, cut into
// micro-batches by the DP under the scheme's per-micro-batch memory limit, balanced over the replicas, each replica
// scheduled by the adaptive cyclic search, its micro-batches charged in options.dynapipe_layout.
inline schedule::PipelineRunPlan plan_dynapipe_iteration(const Options& options, Span<const Sequence> batch,
                                                         const Strategy& strategy) {
  sluice::require(strategy.is_homogeneous(), "compare: DynaPipe runs a homogeneous strategy, not ", strategy.name());
  const StrategyPart& part = strategy.parts().front();
  const microbatch::StageCostSetup cost = microbatch::stage_cost(options.profile.at(part.scheme));
  schedule::PipelinePlanOptions pipeline;
  pipeline.stages = part.scheme.pp();
  pipeline.replicas = part.pipelines;
  pipeline.micro_batch_memory = cost.memory_limit;
  pipeline.layout = options.dynapipe_layout;
  pipeline.schedule = {.kind = schedule::ScheduleKind::cyclic, .seed = options.seed, .clusters = 0};
  pipeline.problem = options.problem;
  pipeline.last_stage = cost.last_stage;
  const std::vector<microbatch::Sample> samples = microbatch::samples_of(batch);
  const Span<const microbatch::Sample> span(samples);
  schedule::PipelineRunPlan plan = schedule::plan_pipeline(span, cost.model, pipeline);
  schedule::validate(plan, span, cost.model, pipeline);
  return plan;
}

}  // namespace sluice::compare
