#pragma once
// One iteration as each compared system of Hydraulis §8 plans it, validated and ready to run: what the comparison
// simulates, and what the reference executor executes to measure the same plans on a GPU.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/compare/layout_move.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/microbatch/types.hpp"
#include "sluice/schedule/iteration.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice/shard/model.hpp"

namespace sluice::compare {

// An iteration plan with its simulated schedule.
struct ScheduledPlan {
  assign::IterationPlan plan;
  schedule::IterationSchedule schedule;
};

// Megatron-LM (and each HotSPa length range): `batch` (not empty) packed best-fit-decreasing into `capacity`-token
// bins on one homogeneous strategy, bins dealt round-robin to its pipelines, 1F1B.
inline ScheduledPlan plan_fixed_length_iteration(const Options& options, std::span<const Sequence> batch,
                                                 const Strategy& strategy, std::int64_t capacity) {
  const schedule::ScheduleOptions one_f_one_b{
      .kind = schedule::ScheduleKind::one_f_one_b, .seed = options.seed, .clusters = 0};
  ScheduledPlan result{assign::plan_fixed_length(batch, strategy, options.profile, capacity), {}};
  assign::validate(result.plan, batch, options.profile);
  result.schedule = schedule::schedule_iteration(result.plan, options.profile, one_f_one_b, options.problem);
  schedule::validate(result.schedule, result.plan, options.profile, options.problem);
  return result;
}

// DynaPipe on one homogeneous strategy, whose pipelines are the data-parallel replicas: the batch ordered, cut into
// micro-batches by the DP under the scheme's per-micro-batch memory limit, balanced over the replicas, each replica
// scheduled by the adaptive cyclic search. `layout` is the shape micro-batches are charged for: padded, as DynaPipe
// runs them, or packed, as the reference executor runs every micro-batch.
inline schedule::PipelineRunPlan plan_dynapipe_iteration(const Options& options, std::span<const Sequence> batch,
                                                         const Strategy& strategy,
                                                         microbatch::Layout layout = microbatch::Layout::padded) {
  sluice::require(strategy.is_homogeneous(), "compare: DynaPipe runs a homogeneous strategy, not ", strategy.name());
  const StrategyPart& part = strategy.parts().front();
  const microbatch::StageCostSetup cost = microbatch::stage_cost(options.profile.at(part.scheme));
  schedule::PipelinePlanOptions pipeline;
  pipeline.stages = part.scheme.pp();
  pipeline.replicas = part.pipelines;
  pipeline.micro_batch_memory = cost.memory_limit;
  pipeline.layout = layout;
  pipeline.schedule = {.kind = schedule::ScheduleKind::cyclic, .seed = options.seed, .clusters = 0};
  pipeline.problem = options.problem;
  const std::vector<microbatch::Sample> samples = microbatch::samples_of(batch);
  const std::span<const microbatch::Sample> span(samples);
  schedule::PipelineRunPlan plan = schedule::plan_pipeline(span, cost.model, pipeline);
  schedule::validate(plan, span, cost.model, pipeline);
  return plan;
}

// sluice (Hydraulis §5–6) over `candidates`, whose pull-and-push seconds before overlap are `layout_moves`: each
// candidate's share of its move that no overlap can hide is added to its cost, every candidate is dispatched twice
// (charging the V step agrees with packing's 1F1B estimate, leaving it out with a schedule that overlaps unequal
// micro-batches), scheduled by the adaptive cyclic search, and the lowest simulated total is kept (ties to the V
// step).
inline schedule::SimulatedIteration plan_sluice_iteration(const Options& options, std::span<const Sequence> batch,
                                                          std::span<const Strategy> candidates,
                                                          std::span<const double> layout_moves) {
  sluice::require(layout_moves.size() == candidates.size(), "compare: ", layout_moves.size(), " layout moves for ",
                  candidates.size(), " candidates");
  const schedule::ScheduleOptions cyclic{.kind = schedule::ScheduleKind::cyclic, .seed = options.seed, .clusters = 0};
  const int layers = shard::llama_like(options.profile.spec().model).layers;
  assign::PlanOptions plan = options.plan;
  plan.candidate_overhead.clear();
  for (const double move : layout_moves)
    plan.candidate_overhead.push_back(exposed_layout_move(move, std::numeric_limits<double>::infinity(), layers));
  std::optional<schedule::SimulatedIteration> kept;
  bool kept_v_step = true;
  for (const bool v_step : {true, false}) {
    plan.dispatch.v_step = v_step;
    schedule::SimulatedIteration candidate =
        schedule::plan_simulated_iteration(batch, candidates, options.profile, plan, cyclic, options.problem);
    if (!kept || candidate.total() < kept->total()) {
      kept = std::move(candidate);
      kept_v_step = v_step;
    }
  }
  plan.dispatch.v_step = kept_v_step;
  schedule::validate(*kept, batch, candidates, options.profile, plan, options.problem);
  return *std::move(kept);
}

}  // namespace sluice::compare
