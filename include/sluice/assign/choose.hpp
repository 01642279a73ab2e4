#pragma once
// Hydraulis' per-iteration choice among candidate strategies (Fig. 6, step 4), whatever judges them: every
// candidate whose longest-MaxLen pipeline holds the batch's longest sequence is judged, and the one with the
// lowest score + overhead is kept (ties to the earlier). assign::plan_iteration judges by the packing estimate;
// plan::plan_simulated_iteration by the simulated makespan.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::assign {

// The most sequences one iteration's batch may hold: dispatch indexes them with int, and at this size planning one
// candidate takes seconds even in the worst case (every sequence one token long; docs/limits.md).
inline constexpr std::size_t max_batch_sequences = std::size_t{1} << 20;

// What a judge returns for one candidate: the plan it would run and its time before the candidate's overhead.
template <class Plan>
struct Judged {
  Plan plan;
  double score = 0;
};

template <class Plan>
struct Choice {
  Plan plan;                                  // the kept candidate's
  std::size_t chosen = 0;                     // its index among the candidates
  std::vector<std::optional<double>> scores;  // per candidate; empty when it cannot hold the batch
};

namespace detail {

inline void require_batch(Span<const Sequence> batch) {
  sluice::require(!batch.empty(), "plan: the batch is empty");
  sluice::require(batch.size() <= max_batch_sequences, "plan: the batch has ", batch.size(),
                  " sequences, more than the ", max_batch_sequences, " a plan may hold");
  std::unordered_set<std::int64_t> ids;
  ids.reserve(batch.size());
  for (const Sequence& sequence : batch)
    sluice::require(ids.insert(sequence.id()).second, "plan: sequence id ", sequence.id(),
                    " appears twice in the batch");
}

inline void require_overheads(Span<const double> overheads, std::size_t candidates) {
  sluice::require(overheads.empty() || overheads.size() == candidates, "plan: candidate_overhead has ",
                  overheads.size(), " entries for ", candidates, " candidates");
  for (std::size_t k = 0; k < overheads.size(); ++k)
    sluice::require(std::isfinite(overheads[k]) && overheads[k] >= 0, "plan: candidate_overhead[", k,
                    "] must be finite and >= 0, got ", overheads[k]);
}

// A strategy's pipelines as the assignment sees them: their schemes' costs in MaxLen order.
inline std::vector<cost::SchemeCost> pipeline_costs(const Strategy& strategy, const cost::Profile& profile) {
  std::vector<cost::SchemeCost> costs;
  for (const Pipeline& pipeline : profile.pipelines(strategy)) costs.push_back(profile.at(pipeline.scheme));
  return costs;
}

}  // namespace detail

// `judge(k, costs, overhead)` plans candidate k (its pipelines' costs given) and returns Judged<Plan>; it is
// called only for candidates that hold the batch. `overheads` is empty or one per candidate (seconds each adds
// to an iteration: PlanOptions::candidate_overhead). Raises invalid_input on a bad batch or overheads, or when
// no candidate holds the batch's longest sequence.
template <class Judge>
requires std::invocable < Judge&, std::size_t, Span<const cost::SchemeCost>,
double > auto choose_candidate(Span<const Sequence> batch, Span<const Strategy> candidates,
                               const cost::Profile& profile, Span<const double> overheads, Judge&& judge) {
  using Plan = decltype(judge(std::size_t{}, Span<const cost::SchemeCost>{}, 0.0).plan);
  detail::require_batch(batch);
  sluice::require(!candidates.empty(), "plan: no candidate strategies");
  detail::require_overheads(overheads, candidates.size());
  const std::int64_t longest = longest_length(batch);

  std::optional<Choice<Plan>> best;
  double best_total = 0;
  std::vector<std::optional<double>> scores;
  std::int64_t widest = 0;
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    const auto costs = detail::pipeline_costs(candidates[k], profile);
    widest = std::max(widest, costs.front().max_len);
    if (costs.front().max_len < longest) {
      scores.emplace_back();
      continue;
    }
    const double overhead = overheads.empty() ? 0 : overheads[k];
    Judged<Plan> judged = judge(k, Span<const cost::SchemeCost>(costs), overhead);
    scores.emplace_back(judged.score);
    const double total = judged.score + overhead;
    if (!best || total < best_total) {
      best = Choice<Plan>{.plan = std::move(judged.plan), .chosen = k, .scores = {}};
      best_total = total;
    }
  }
  sluice::require(best.has_value(), "plan: the batch's longest sequence has ", longest,
                  " tokens but no candidate holds more than ", widest, " (MaxLen)");
  best->scores = std::move(scores);
  return *std::move(best);
}

}  // namespace sluice::assign
