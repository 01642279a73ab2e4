#pragma once
// sluice's plans as executor jobs: a Hydraulis iteration plan (assign::plan_iteration, scheduled by
// plan::schedule_iteration), a DynaPipe pipeline plan (schedule::plan_pipeline) and a flex CP iteration (a
// plan::FlexDomain's, FlexSP's groups or Megatron-LM's dynamic CP). Each pipeline keeps its scheme's TP, CP and
// recompute; ranks are numbered pipeline by pipeline unless a shard::RankPlacement of the plan's strategy places
// them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sluice/assign/flex_cp.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/schedule/flex_units.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice/schedule/problems.hpp"
#include "sluice/shard/ranks.hpp"
#include "sluice_executor/job.hpp"

namespace sluice::executor {

namespace detail {

inline void place_nodes(Job& job, const shard::RankPlacement& placement) {
  job.gpus_per_node = placement.gpus_per_node;
  job.tp_within_node = placement.tp_within_node;
}

// The simulated timeline's ops of the kept micro-batches, renumbered as schedule::restrict_plan does.
inline schedule::Simulation restrict_simulation(const schedule::Simulation& simulation, std::span<const int> kept) {
  schedule::Simulation result = simulation;
  for (std::vector<schedule::OpTiming>& stage : result.stages) {
    std::vector<schedule::OpTiming> ops;
    for (schedule::OpTiming op : stage) {
      const auto it = std::find(kept.begin(), kept.end(), op.micro_batch);
      if (it == kept.end()) continue;
      op.micro_batch = static_cast<int>(it - kept.begin());
      ops.push_back(op);
    }
    stage = std::move(ops);
  }
  return result;
}

}  // namespace detail

// A job for the busy pipelines of a Hydraulis iteration plan, scheduled as `schedule` (schedule_iteration of the
// same plan): micro-batch i of a pipeline is its plan's micro_batches[i], on its scheme's TP, CP and recompute.
// Layers are split evenly over each pipeline's PP stages; instruction shapes are set to the packed micro-batches and
// the model's hidden size. Idle pipelines get no ranks; `placement` (shard::rank_placement of the plan's strategy),
// where given, places every lane, idle pipelines' GPUs left out.
inline Job job_from_iteration(const ModelConfig& model, std::vector<SequenceTokens> sequences,
                              const assign::IterationPlan& plan, const plan::IterationSchedule& schedule,
                              const shard::RankPlacement* placement = nullptr) {
  sluice::require(schedule.pipelines.size() == plan.pipelines.size(), "job: the schedule has ",
                  schedule.pipelines.size(), " pipelines, the plan ", plan.pipelines.size());
  sluice::require(placement == nullptr || placement->plan_order.size() == plan.pipelines.size(),
                  "job: the placement has ", placement ? placement->plan_order.size() : 0, " pipelines, the plan ",
                  plan.pipelines.size());
  Job job{model, std::move(sequences), {}};
  const auto index = detail::sequence_index(job.sequences);
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const auto& scheduled = schedule.pipelines[p];
    if (!scheduled) continue;
    PipelineJob pipeline;
    pipeline.plan = scheduled->schedule.plan;
    pipeline.scheme = plan.pipelines[p].scheme;
    pipeline.layer_boundaries = even_layer_split(model.layers, pipeline.plan.stages);
    std::vector<std::int64_t> tokens;
    for (const assign::MicroBatch& mb : plan.pipelines[p].micro_batches) {
      for (const std::int64_t id : mb.sequence_ids)
        sluice::require(index.contains(id), "job: sequence ", id, " has no tokens");
      pipeline.micro_batches.push_back(mb.sequence_ids);
      tokens.push_back(detail::packed_length(index, job.sequences, mb.sequence_ids));
    }
    detail::set_packed_shapes(pipeline.plan, tokens, model.hidden);
    pipeline.predicted = scheduled->schedule.simulation;
    if (placement != nullptr) {
      const shard::PipelinePlacement& placed = placement->placement.pipelines.at(placement->plan_order[p]);
      sluice::require(placed.scheme == pipeline.scheme, "job: the placement runs ", placed.scheme.name(),
                      " where the plan runs ", pipeline.scheme.name());
      for (const shard::Stage& stage : placed.stages) pipeline.ranks.push_back(stage.ranks);
    }
    job.pipelines.push_back(std::move(pipeline));
  }
  if (placement != nullptr) detail::place_nodes(job, *placement);
  validate(job);
  return job;
}

// As above, scheduling the plan's pipelines with `options` (boundary tensors of the model's hidden size).
inline Job job_from_iteration(const ModelConfig& model, std::vector<SequenceTokens> sequences,
                              const assign::IterationPlan& plan, const cost::Profile& profile,
                              const schedule::ScheduleOptions& options = {}) {
  require_valid(model);
  schedule::ProblemOptions problem;
  problem.hidden = model.hidden;
  return job_from_iteration(model, std::move(sequences), plan,
                            plan::schedule_iteration(plan, profile, options, problem));
}

// A job for the replicas of a DynaPipe pipeline plan that got micro-batches, each on `degrees`' TP, CP and
// recompute (its PP is the plan's stages); sample ids are sequence ids. Micro-batch i of a replica is partition
// micro-batch replica.micro_batches[i], run packed (a padded micro-batch's rows are concatenated without padding),
// so instruction shapes are rewritten to the packed token counts.
inline Job job_from_pipeline_plan(const ModelConfig& model, std::vector<SequenceTokens> sequences,
                                  const schedule::PipelineRunPlan& plan, Degrees degrees = {}) {
  Job job{model, std::move(sequences), {}};
  const auto index = detail::sequence_index(job.sequences);
  for (const schedule::ReplicaSchedule& replica : plan.replicas) {
    if (replica.micro_batches.empty()) continue;
    PipelineJob pipeline;
    pipeline.plan = replica.schedule.plan;
    degrees.pp = pipeline.plan.stages;
    pipeline.scheme = Scheme(degrees);
    pipeline.layer_boundaries = even_layer_split(model.layers, pipeline.plan.stages);
    std::vector<std::int64_t> tokens;
    for (const std::size_t i : replica.micro_batches) {
      sluice::require(i < plan.partition.micro_batches.size(), "job: replica micro-batch ", i,
                      " outside the partition");
      const std::vector<std::int64_t>& ids = plan.partition.micro_batches[i].sample_ids;
      for (const std::int64_t id : ids)
        sluice::require(index.contains(id), "job: sample ", id, " has no sequence tokens");
      pipeline.micro_batches.push_back(ids);
      tokens.push_back(detail::packed_length(index, job.sequences, ids));
    }
    detail::set_packed_shapes(pipeline.plan, tokens, model.hidden);
    pipeline.predicted = replica.schedule.simulation;
    job.pipelines.push_back(std::move(pipeline));
  }
  validate(job);
  return job;
}

// A job for a flex CP iteration (a plan::FlexDomain's plan of `problem`, problem_of(batch)): every unit of the
// domain (a replica of its ⟨TP, PP⟩ scheme) is a pipeline, and each group of each of the plan's micro-batches runs
// its sequences on its units, as one CP group (a CpGroupJob, of the degree's scheme) when its degree is above 1.
// sequences[i] holds the tokens of the problem's sequence i. Every unit runs its micro-batches as
// schedule::flex_units schedules them, and the timeline predicted is that schedule's.
// `placement` (shard::flex_domain_ranks of the domain), where given, places unit u's stage j TP rank t on its stage
// j's rank u·TP + t.
inline Job job_from_flex(const ModelConfig& model, std::vector<SequenceTokens> sequences,
                         const plan::FlexIteration& iteration, const assign::FlexCpProblem& problem,
                         const shard::RankPlacement* placement = nullptr) {
  require_valid(model);
  schedule::ProblemOptions options;
  options.hidden = model.hidden;
  const schedule::FlexUnits flex_units =
      schedule::flex_units(iteration.plan, iteration.strategy, iteration.schemes, problem, options);
  sluice::require(sequences.size() == problem.lengths.size(), "job: ", sequences.size(), " sequences of tokens for ",
                  problem.lengths.size(), " in the flex CP problem");
  for (std::size_t s = 0; s < sequences.size(); ++s)
    sluice::require(static_cast<std::int64_t>(sequences[s].tokens.size()) == problem.lengths[s], "job: sequence ",
                    sequences[s].id, " has ", sequences[s].tokens.size(), " tokens, the flex CP problem ",
                    problem.lengths[s]);
  const Scheme base = iteration.strategy.parts().front().scheme;
  const int units = iteration.strategy.parts().front().pipelines;
  const schedule::PipelineSchedule& pipeline_schedule = flex_units.schedule;

  Job job{model, std::move(sequences), {}};
  std::vector<std::vector<std::vector<std::int64_t>>> unit_ids(static_cast<std::size_t>(units));  // per kept one
  // The CP groups, with members (unit, its micro-batch), numbered once the units are known.
  std::vector<std::pair<Scheme, std::vector<std::pair<int, int>>>> groups;
  for (std::size_t m = 0; m < iteration.plan.micro_batches.size(); ++m)
    for (const assign::FlexCpGroup& group : iteration.plan.micro_batches[m].groups) {
      std::vector<std::int64_t> ids;
      for (const int s : group.sequences) ids.push_back(job.sequences[static_cast<std::size_t>(s)].id);
      const Scheme& scheme = iteration.schemes[static_cast<std::size_t>(group.degree_index)];
      std::vector<std::pair<int, int>> members;
      for (int unit = group.first_unit; unit < group.first_unit + scheme.cp(); ++unit) {
        const auto u = static_cast<std::size_t>(unit);
        members.emplace_back(unit, static_cast<int>(unit_ids[u].size()));
        unit_ids[u].push_back(ids);
      }
      if (scheme.cp() > 1) groups.emplace_back(scheme, std::move(members));
    }
  std::vector<int> pipeline_of(static_cast<std::size_t>(units), -1);
  const auto index = detail::sequence_index(job.sequences);
  for (std::size_t u = 0; u < static_cast<std::size_t>(units); ++u) {
    const std::vector<int>& kept = flex_units.kept[u];
    if (kept.empty()) continue;
    PipelineJob pipeline;
    pipeline.plan = schedule::restrict_plan(pipeline_schedule.plan, kept);
    pipeline.scheme = base;
    pipeline.layer_boundaries = even_layer_split(model.layers, base.pp());
    pipeline.micro_batches = unit_ids[u];
    std::vector<std::int64_t> tokens;
    for (const std::vector<std::int64_t>& ids : pipeline.micro_batches)
      tokens.push_back(detail::packed_length(index, job.sequences, ids));
    detail::set_packed_shapes(pipeline.plan, tokens, model.hidden);
    pipeline.predicted = detail::restrict_simulation(pipeline_schedule.simulation, kept);
    if (placement != nullptr)
      for (const shard::Stage& stage : placement->placement.pipelines.at(0).stages) {
        const auto tp = static_cast<std::size_t>(base.tp());
        sluice::require(stage.ranks.size() == static_cast<std::size_t>(units) * tp, "job: the placement's stages hold ",
                        stage.ranks.size(), " ranks, the domain ", units, " units of TP ", tp);
        pipeline.ranks.emplace_back(stage.ranks.begin() + static_cast<std::ptrdiff_t>(u * tp),
                                    stage.ranks.begin() + static_cast<std::ptrdiff_t>((u + 1) * tp));
      }
    pipeline_of[u] = static_cast<int>(job.pipelines.size());
    job.pipelines.push_back(std::move(pipeline));
  }
  for (auto& [scheme, members] : groups) {
    CpGroupJob group{scheme, {}};
    for (const auto& [unit, micro_batch] : members)
      group.members.emplace_back(pipeline_of[static_cast<std::size_t>(unit)], micro_batch);
    job.cp_groups.push_back(std::move(group));
  }
  if (placement != nullptr) detail::place_nodes(job, *placement);
  validate(job);
  return job;
}

}  // namespace sluice::executor
