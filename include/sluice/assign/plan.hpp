#pragma once
// The per-iteration routine (Hydraulis Fig. 6, steps 1–4): for every candidate strategy that can hold
// the batch, dispatch the sequences across its pipelines, pack each pipeline, estimate the iteration as
// the slowest pipeline, and choose the candidate with the lowest estimate.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sluice/assign/choose.hpp"
#include "sluice/assign/detail/micro_batch_checks.hpp"
#include "sluice/assign/dispatch.hpp"
#include "sluice/assign/packing.hpp"
#include "sluice/assign/types.hpp"
#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::assign {

struct PlanOptions {
  DispatchOptions dispatch{};
  // Seconds each candidate adds to an iteration outside propagation, one per candidate (or none): the cost of
  // pulling parameters into its layout and pushing gradients back (shard::iteration_costs). The choice
  // minimises estimate + overhead.
  std::vector<double> candidate_overhead{};
};

// The candidate strategies an iteration chooses among (the output of strategy proposal, or a user's list).
struct CandidateSet {
  std::vector<Strategy> strategies;
  friend bool operator==(const CandidateSet&, const CandidateSet&) = default;
};

struct PipelinePlan {
  int index = 0;  // MaxLen order, as Profile::pipelines gives it
  Scheme scheme;
  std::int64_t max_len = 0;
  std::vector<MicroBatch> micro_batches{};  // in execution order
  double estimate = 0;                      // (max micro-batch time)·(PP − 1 + V); 0 when idle
  friend bool operator==(const PipelinePlan&, const PipelinePlan&) = default;
};

struct CandidateEstimate {
  Strategy strategy;
  std::optional<double> estimate;  // empty: the strategy cannot hold the batch's longest sequence
  double overhead = 0;             // PlanOptions::candidate_overhead
  friend bool operator==(const CandidateEstimate&, const CandidateEstimate&) = default;
};

struct IterationPlan {
  Strategy strategy;
  std::vector<PipelinePlan> pipelines{};
  double estimate = 0;              // max over pipelines: the iteration's propagation time
  double dispatch_objective = 0;    // Eq. 3 of the chosen dispatch (a lower bound on `estimate`)
  double dispatch_lower_bound = 0;  // a bound on the optimum of Eq. 3 for the chosen strategy
  std::size_t chosen = 0;           // index into `candidates`
  std::vector<CandidateEstimate> candidates{};
  double overhead = 0;  // the chosen candidate's PlanOptions::candidate_overhead
  [[nodiscard]] double total() const noexcept { return estimate + overhead; }
  friend bool operator==(const IterationPlan&, const IterationPlan&) = default;
};

namespace detail {

// One candidate fully planned: dispatch, then pack every pipeline.
inline IterationPlan plan_candidate(Span<const Sequence> batch, const Strategy& strategy,
                                    Span<const cost::SchemeCost> costs, const PlanOptions& options) {
  const Dispatch dispatch = dispatch_greedy(batch, costs, options.dispatch);
  IterationPlan plan{
      .strategy = strategy, .dispatch_objective = dispatch.objective, .dispatch_lower_bound = dispatch.lower_bound};
  std::vector<std::vector<Sequence>> assigned(costs.size());
  for (std::size_t i = 0; i < batch.size(); ++i)
    assigned[static_cast<std::size_t>(dispatch.pipeline_of[i])].push_back(batch[i]);
  for (std::size_t j = 0; j < costs.size(); ++j) {
    PipelinePlan pipeline{.index = static_cast<int>(j), .scheme = costs[j].scheme, .max_len = costs[j].max_len};
    if (!assigned[j].empty()) {
      Packing packing = pack(assigned[j], costs[j]);
      pipeline.micro_batches = std::move(packing.micro_batches);
      pipeline.estimate = packing.estimate;
    }
    plan.estimate = std::max(plan.estimate, pipeline.estimate);
    plan.pipelines.push_back(std::move(pipeline));
  }
  return plan;
}

}  // namespace detail

// Hydraulis' choice judged by the packing estimate (choose.hpp): candidates that cannot hold the batch's longest
// sequence are reported with no estimate; ties between estimate + overhead go to the earlier candidate.
inline IterationPlan plan_iteration(Span<const Sequence> batch, Span<const Strategy> candidates,
                                    const cost::Profile& profile, const PlanOptions& options = {}) {
  auto choice = choose_candidate(batch, candidates, profile, options.candidate_overhead,
                                 [&](std::size_t k, Span<const cost::SchemeCost> costs, double overhead) {
                                   IterationPlan plan = detail::plan_candidate(batch, candidates[k], costs, options);
                                   plan.overhead = overhead;
                                   const double estimate = plan.estimate;
                                   return Judged<IterationPlan>{.plan = std::move(plan), .score = estimate};
                                 });
  IterationPlan plan = std::move(choice.plan);
  plan.chosen = choice.chosen;
  for (std::size_t k = 0; k < candidates.size(); ++k)
    plan.candidates.push_back({.strategy = candidates[k],
                               .estimate = choice.scores[k],
                               .overhead = options.candidate_overhead.empty() ? 0 : options.candidate_overhead[k]});
  return plan;
}

// Megatron-LM-style baseline: one static homogeneous strategy, sequences packed best-fit-decreasing into
// fixed-length bins of `capacity_tokens` (the context length, or MaxLen), bins dealt round-robin to the
// pipelines. (The other baseline, a homogeneous strategy with sluice's two-stage assignment, is
// plan_iteration with that single candidate.)
inline IterationPlan plan_fixed_length(Span<const Sequence> batch, const Strategy& strategy,
                                       const cost::Profile& profile, std::int64_t capacity_tokens) {
  detail::require_batch(batch);
  sluice::require(strategy.is_homogeneous(), "plan: the fixed-length baseline needs a homogeneous strategy, got ",
                  strategy.name());
  const auto costs = detail::pipeline_costs(strategy, profile);
  const cost::SchemeCost& scheme = costs.front();
  const Packing packs = pack_fixed_length(batch, scheme, capacity_tokens);
  IterationPlan plan{.strategy = strategy};
  for (std::size_t j = 0; j < costs.size(); ++j)
    plan.pipelines.push_back({.index = static_cast<int>(j), .scheme = scheme.scheme, .max_len = scheme.max_len});
  for (std::size_t k = 0; k < packs.micro_batches.size(); ++k)
    plan.pipelines[k % costs.size()].micro_batches.push_back(packs.micro_batches[k]);
  for (PipelinePlan& pipeline : plan.pipelines) {
    double slowest = 0;
    for (const MicroBatch& micro_batch : pipeline.micro_batches) slowest = std::max(slowest, micro_batch.seconds);
    const auto count = static_cast<double>(pipeline.micro_batches.size());
    pipeline.estimate = count == 0 ? 0 : slowest * (scheme.scheme.pp() - 1 + count);
    plan.estimate = std::max(plan.estimate, pipeline.estimate);
  }
  std::unordered_map<std::int64_t, int> pipeline_of_id;
  for (const PipelinePlan& pipeline : plan.pipelines)
    for (const MicroBatch& micro_batch : pipeline.micro_batches)
      for (const std::int64_t id : micro_batch.sequence_ids) pipeline_of_id[id] = pipeline.index;
  std::vector<int> pipeline_of;
  for (const Sequence& sequence : batch) pipeline_of.push_back(pipeline_of_id.at(sequence.id()));
  plan.dispatch_objective = dispatch_objective(batch, costs, pipeline_of);
  plan.dispatch_lower_bound = dispatch_lower_bound(batch, costs);
  plan.candidates = {{.strategy = strategy, .estimate = plan.estimate}};
  return plan;
}

// Checks every invariant of an iteration plan against its batch and profile; raises invalid_plan naming
// the first broken one.
inline void validate(const IterationPlan& plan, Span<const Sequence> batch, const cost::Profile& profile) {
  const PlanCheck check("plan: ");
  constexpr double tolerance = 1e-9;

  check(plan.strategy.gpus() <= profile.gpus(), "strategy ", plan.strategy.name(), " needs ", plan.strategy.gpus(),
        " GPUs but the cluster has ", profile.gpus());
  std::vector<Pipeline> expected;
  try {
    expected = profile.pipelines(plan.strategy);
  } catch (const invalid_input& error) {
    check(false, "strategy does not fit the profile: ", error.what());
  }
  check(plan.pipelines.size() == expected.size(), "has ", plan.pipelines.size(), " pipelines, strategy ",
        plan.strategy.name(), " has ", expected.size());

  const auto length_of = detail::length_by_id(batch);
  std::unordered_set<std::int64_t> placed;
  double slowest_pipeline = 0;
  for (std::size_t j = 0; j < plan.pipelines.size(); ++j) {
    const PipelinePlan& pipeline = plan.pipelines[j];
    check(pipeline.index == static_cast<int>(j), "pipeline ", j, " has index ", pipeline.index);
    check(pipeline.scheme == expected[j].scheme && pipeline.max_len == expected[j].max_len, "pipeline ", j, " is ",
          pipeline.scheme.name(), " (MaxLen ", pipeline.max_len, "), the strategy's pipeline ", j,
          " in MaxLen order is ", expected[j].scheme.name(), " (MaxLen ", expected[j].max_len, ")");
    const double slowest =
        detail::check_micro_batches(check.part("pipeline ", j, " "), pipeline.micro_batches, length_of, placed,
                                    profile.at(pipeline.scheme), pipeline.max_len);
    const auto count = static_cast<double>(pipeline.micro_batches.size());
    const double estimate = count == 0 ? 0 : slowest * (pipeline.scheme.pp() - 1 + count);
    check(nearly_equal(estimate, pipeline.estimate), "pipeline ", j, " estimate ", pipeline.estimate,
          " s, its micro-batches give ", estimate);
    slowest_pipeline = std::max(slowest_pipeline, estimate);
  }
  check(placed.size() == length_of.size(), "plans ", placed.size(), " of the batch's ", length_of.size(), " sequences");
  check(nearly_equal(plan.estimate, slowest_pipeline), "estimate ", plan.estimate, " s, its slowest pipeline takes ",
        slowest_pipeline);
  check(plan.dispatch_lower_bound <= plan.estimate * (1 + tolerance), "dispatch lower bound ",
        plan.dispatch_lower_bound, " exceeds the estimate ", plan.estimate);
  check(plan.chosen < plan.candidates.size(), "chosen candidate ", plan.chosen, " of ", plan.candidates.size());
  const CandidateEstimate& chosen = plan.candidates[plan.chosen];
  check(chosen.strategy == plan.strategy && chosen.estimate && nearly_equal(*chosen.estimate, plan.estimate) &&
            chosen.overhead == plan.overhead,
        "chosen candidate ", plan.chosen, " is not the planned strategy with its estimate and overhead");
  for (std::size_t k = 0; k < plan.candidates.size(); ++k) {
    const CandidateEstimate& candidate = plan.candidates[k];
    check(std::isfinite(candidate.overhead) && candidate.overhead >= 0, "candidate ", k, " has overhead ",
          candidate.overhead);
    check(!candidate.estimate || *candidate.estimate + candidate.overhead >= plan.total() * (1 - tolerance),
          "candidate ", k, " has a lower estimate + overhead than the chosen one");
  }
}

}  // namespace sluice::assign
