#pragma once
// Per-micro-batch context-parallel groups (FlexSP: Wang et al., "FlexSP: Accelerating Large Language Model Training
// via Flexible Sequence Parallelism", ASPLOS'25, §4–5): `units` replicas of one ⟨TP, PP⟩ pipeline (each a TP group
// per stage) re-form, for every micro-batch, into CP groups of different degrees, and each sequence of the
// iteration runs in one group. A group of degree d costs c_d once plus Σ (a_d·l² + b_d·l) over its sequences (the
// CP scheme's quadratic, communication included) and holds at most capacity_d tokens; a micro-batch lasts as long
// as its slowest group; the iteration lasts Σ_m T_m + (PP − 1)·max_m T_m, the 1F1B pipeline's fill and drain
// paid at its slowest micro-batch. The degrees form a divisibility chain, so the groups of a micro-batch, widest
// first, sit on aligned blocks of units: each unit belongs to one group per degree, a pool of |degrees| groups per
// GPU created once (FlexSP keeps about log₂ N). This header states the problem: its costs, the
// validation of problems and plans, the lower bound, and the problem of a profile's schemes; assign/flex_cp.hpp
// solves it (docs/assign-flex-cp.md has the solver and figures).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "sluice/assign/flex_cp_types.hpp"
#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/span.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::assign {

// A sequence's length as degree `k` charges it (rounded up to the degree's multiple); 0 when that overflows.
inline std::int64_t flex_cp_charged(const FlexCpProblem& problem, std::size_t k, std::int64_t length) {
  const std::int64_t multiple = problem.degrees[k].length_multiple;
  if (length > std::numeric_limits<std::int64_t>::max() - multiple) return 0;
  return (length + multiple - 1) / multiple * multiple;
}

// Whether degree `k` holds the sequence alone.
inline bool flex_cp_holds(const FlexCpProblem& problem, std::size_t k, std::int64_t length) {
  const std::int64_t charged = flex_cp_charged(problem, k, length);
  return charged > 0 && charged <= problem.degrees[k].capacity;
}

// Whether some degree holds the sequence alone: the problem's one rule for a length it can run.
inline bool flex_cp_holds(const FlexCpProblem& problem, std::int64_t length) {
  for (std::size_t k = 0; k < problem.degrees.size(); ++k)
    if (flex_cp_holds(problem, k, length)) return true;
  return false;
}

// One sequence's share of its group's time under degree `k`.
inline double flex_cp_sequence_seconds(const FlexCpProblem& problem, std::size_t k, std::int64_t length) {
  return problem.degrees[k].latency.sequence_time(flex_cp_charged(problem, k, length));
}

// Raises invalid_input unless the problem is one the solvers take: units, degrees and collectives in range, and every
// sequence held by some degree.
inline void require_valid(const FlexCpProblem& problem) {
  sluice::require(problem.units >= 1 && problem.units <= flex_cp_max_units, "flex CP: the units must be in [1, ",
                  flex_cp_max_units, "], got ", problem.units);
  sluice::require(problem.pp >= 1, "flex CP: PP must be >= 1, got ", problem.pp);
  sluice::require(!problem.lengths.empty(), "flex CP: the batch is empty");
  sluice::require(problem.lengths.size() <= flex_cp_max_sequences, "flex CP: ", problem.lengths.size(),
                  " sequences, more than the limit of ", flex_cp_max_sequences);
  sluice::require(!problem.degrees.empty(), "flex CP: no CP degree to form groups of");
  sluice::require(std::isfinite(problem.collectives.seconds) && problem.collectives.seconds >= 0 &&
                      std::isfinite(problem.collectives.backward_ratio) && problem.collectives.backward_ratio > 0,
                  "flex CP: the collectives need seconds finite and >= 0 and a backward ratio finite and > 0, got ",
                  problem.collectives.seconds, " s and ", problem.collectives.backward_ratio);
  for (std::size_t k = 0; k < problem.degrees.size(); ++k) {
    const FlexCpDegree& degree = problem.degrees[k];
    sluice::require(degree.degree >= 1 && problem.units % degree.degree == 0, "flex CP: CP degree ", degree.degree,
                    " must be >= 1 and divide the ", problem.units, " units");
    sluice::require(
        k == 0 || (degree.degree % problem.degrees[k - 1].degree == 0 && degree.degree > problem.degrees[k - 1].degree),
        "flex CP: the CP degrees must ascend, each a multiple of the one before (", degree.degree, " after ",
        k == 0 ? 0 : problem.degrees[k - 1].degree, ")");
    sluice::require(degree.capacity >= 0 && degree.length_multiple >= 1, "flex CP: CP degree ", degree.degree,
                    " needs a capacity >= 0 and a length multiple >= 1");
    const cost::LastStageWork& work = degree.last_stage;
    if (work.is_zero()) continue;
    const cost::QuadraticLatency& t = degree.latency;
    sluice::require(problem.pp > 1, "flex CP: CP degree ", degree.degree,
                    " states last-stage work but the pipeline has one stage");
    sluice::require(work.b() <= t.b() && work.c() <= t.c(), "flex CP: CP degree ", degree.degree,
                    "'s last-stage work (b = ", shortest(work.b()), ", c = ", shortest(work.c()),
                    ") exceeds its latency's b and c");
    sluice::require(t(1) - work.seconds(1) >= cost::min_stage_seconds, "flex CP: CP degree ", degree.degree,
                    "'s latency T(1) less its last-stage work is below ", shortest(cost::min_stage_seconds), " s");
  }
  for (std::size_t s = 0; s < problem.lengths.size(); ++s) {
    const std::int64_t length = problem.lengths[s];
    sluice::require(length >= 1, "flex CP: sequence ", s, " has length ", length, " (must be >= 1)");
    sluice::require(flex_cp_holds(problem, length), "flex CP: sequence ", s, " of ", length,
                    " tokens fits no group (the widest, CP ", problem.degrees.back().degree, ", holds ",
                    problem.degrees.back().capacity, ")");
  }
}

// A group's time: c_d + Σ a_d·l² + b_d·l.
inline double flex_cp_group_seconds(const FlexCpProblem& problem, const FlexCpGroup& group) {
  const auto k = static_cast<std::size_t>(group.degree_index);
  double seconds = problem.degrees[k].latency.microbatch_overhead();
  for (const int s : group.sequences)
    seconds += flex_cp_sequence_seconds(problem, k, problem.lengths[static_cast<std::size_t>(s)]);
  return seconds;
}

// A group's time on the pipeline's stages before the last: its time less the last stage's own work on its charged
// tokens (the same time with PP 1 or no work).
inline double flex_cp_group_inner_seconds(const FlexCpProblem& problem, const FlexCpGroup& group) {
  const auto k = static_cast<std::size_t>(group.degree_index);
  const cost::LastStageWork& work = problem.degrees[k].last_stage;
  if (problem.pp == 1 || work.is_zero()) return flex_cp_group_seconds(problem, group);
  std::int64_t tokens = 0;
  for (const int s : group.sequences)
    tokens += flex_cp_charged(problem, k, problem.lengths[static_cast<std::size_t>(s)]);
  return flex_cp_group_seconds(problem, group) - work.seconds(tokens);
}

// A micro-batch's time when its slowest group computes `compute`: that, or longer where the problem's collectives
// outlast a pass.
inline double flex_cp_exposed_seconds(const FlexCpProblem& problem, double compute) {
  const FlexCpCollectives& collectives = problem.collectives;
  if (collectives.seconds == 0) return compute;
  const double forward = compute / (1 + collectives.backward_ratio);
  return std::max(forward, collectives.seconds) + std::max(compute - forward, 2 * collectives.seconds);
}

inline double flex_cp_micro_batch_seconds(const FlexCpProblem& problem, const FlexCpMicroBatch& micro_batch) {
  double slowest = 0;
  for (const FlexCpGroup& group : micro_batch.groups)
    slowest = std::max(slowest, flex_cp_group_seconds(problem, group));
  return flex_cp_exposed_seconds(problem, slowest);
}

// The same on the pipeline's stages before the last, whose groups run their inner time.
inline double flex_cp_micro_batch_inner_seconds(const FlexCpProblem& problem, const FlexCpMicroBatch& micro_batch) {
  double slowest = 0;
  for (const FlexCpGroup& group : micro_batch.groups)
    slowest = std::max(slowest, flex_cp_group_inner_seconds(problem, group));
  return flex_cp_exposed_seconds(problem, slowest);
}

// Σ_m T_m + (PP − 1)·max_m T_m.
inline double flex_cp_iteration_seconds(const FlexCpProblem& problem, const std::vector<FlexCpMicroBatch>& batches) {
  double total = 0;
  double slowest = 0;
  for (const FlexCpMicroBatch& micro_batch : batches) {
    const double seconds = flex_cp_micro_batch_seconds(problem, micro_batch);
    total += seconds;
    slowest = std::max(slowest, seconds);
  }
  return total + (problem.pp - 1) * slowest;
}

// Throws unless `plan` runs every sequence once, in groups of the problem's degrees on aligned, disjoint blocks of
// its units, each within its capacity, with the time it states.
inline void validate(const FlexCpPlan& plan, const FlexCpProblem& problem) {
  const PlanCheck check("flex CP plan: ");
  std::vector<int> runs(problem.lengths.size(), 0);
  for (std::size_t m = 0; m < plan.micro_batches.size(); ++m) {
    const FlexCpMicroBatch& micro_batch = plan.micro_batches[m];
    check(!micro_batch.groups.empty(), "micro-batch ", m, " has no group");
    std::vector<char> used(static_cast<std::size_t>(problem.units), 0);
    for (const FlexCpGroup& group : micro_batch.groups) {
      check(group.degree_index >= 0 && static_cast<std::size_t>(group.degree_index) < problem.degrees.size(),
            "micro-batch ", m, " names degree index ", group.degree_index);
      const auto k = static_cast<std::size_t>(group.degree_index);
      const int width = problem.degrees[k].degree;
      check(!problem.one_degree_per_micro_batch || group.degree_index == micro_batch.groups[0].degree_index,
            "micro-batch ", m, " mixes CP degrees, which the problem forbids");
      check(group.first_unit >= 0 && group.first_unit % width == 0 && group.first_unit + width <= problem.units,
            "micro-batch ", m, " places a group of CP ", width, " at unit ", group.first_unit);
      for (int unit = group.first_unit; unit < group.first_unit + width; ++unit) {
        check(used[static_cast<std::size_t>(unit)] == 0, "micro-batch ", m, " uses unit ", unit, " twice");
        used[static_cast<std::size_t>(unit)] = 1;
      }
      check(!group.sequences.empty(), "micro-batch ", m, " has an empty group");
      std::int64_t tokens = 0;
      for (const int s : group.sequences) {
        check(s >= 0 && static_cast<std::size_t>(s) < runs.size(), "no sequence ", s);
        ++runs[static_cast<std::size_t>(s)];
        const std::int64_t charged = flex_cp_charged(problem, k, problem.lengths[static_cast<std::size_t>(s)]);
        check(charged > 0 && charged <= problem.degrees[k].capacity - tokens, "micro-batch ", m,
              " overfills a group of CP ", width, " (capacity ", problem.degrees[k].capacity, ")");
        tokens += charged;
      }
    }
  }
  for (std::size_t s = 0; s < runs.size(); ++s) check(runs[s] == 1, "sequence ", s, " runs ", runs[s], " times");
  const double seconds = flex_cp_iteration_seconds(problem, plan.micro_batches);
  check(nearly_equal(seconds, plan.seconds), "states ", plan.seconds, " s, its groups take ", seconds, " s");
}

// No plan is faster: the units' busy time Σ_s min_d d·(a_d·l² + b_d·l) spread over all of them, at least one group
// constant per micro-batch and as many micro-batches as the tokens need, and the fill and drain of the slowest
// sequence's fastest group.
inline double flex_cp_lower_bound(const FlexCpProblem& problem) {
  double area = 0;
  double longest = 0;
  std::int64_t tokens = 0;
  double per_unit_tokens = 0;  // the most tokens one unit holds in a micro-batch
  double least_constant = std::numeric_limits<double>::infinity();
  for (const FlexCpDegree& degree : problem.degrees) {
    per_unit_tokens = std::max(per_unit_tokens, static_cast<double>(degree.capacity) / degree.degree);
    least_constant = std::min(least_constant, degree.latency.microbatch_overhead());
  }
  for (const std::int64_t length : problem.lengths) {
    double least_area = std::numeric_limits<double>::infinity();
    double fastest = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < problem.degrees.size(); ++k) {
      if (!flex_cp_holds(problem, k, length)) continue;
      const double work = flex_cp_sequence_seconds(problem, k, length);
      least_area = std::min(least_area, problem.degrees[k].degree * work);
      fastest = std::min(fastest, work + problem.degrees[k].latency.microbatch_overhead());
    }
    area += least_area;
    longest = std::max(longest, fastest);
    tokens = tokens > std::numeric_limits<std::int64_t>::max() - length ? tokens : tokens + length;
  }
  const double micro_batches = std::ceil(static_cast<double>(tokens) / (per_unit_tokens * problem.units));
  const double spread = area / problem.units + micro_batches * least_constant;
  return std::max(spread, longest) + (problem.pp - 1) * longest;
}

// The schemes a domain of `units` replicas of `base` (a ⟨TP, PP⟩ scheme of `profile`) groups into, ascending by
// CP degree: the base, then for each CP degree that `admits` takes a scheme of on that base, the one of least a,
// then b (where a hybrid offers several), kept while the degrees form a chain dividing the units. Schemes that
// hold no sequence are skipped.
template <class Admits>
std::vector<const cost::SchemeCost*> flex_cp_schemes(const cost::Profile& profile, const Scheme& base, int units,
                                                     Admits admits) {
  sluice::require(base.is_base(), "flex CP: ", base.name(), " is not a ⟨TP, PP⟩ scheme to build groups of");
  std::vector<const cost::SchemeCost*> chosen;  // per CP degree, ascending
  for (const cost::SchemeCost& cost : profile.schemes()) {
    const Scheme& scheme = cost.scheme;
    if (scheme.tp() != base.tp() || scheme.pp() != base.pp() || scheme.recompute() != base.recompute() ||
        cost.max_len == 0 || (scheme.cp() > 1 && !admits(scheme)) || units % scheme.cp() != 0)
      continue;
    const auto same =
        std::ranges::find_if(chosen, [&](const cost::SchemeCost* kept) { return kept->scheme.cp() == scheme.cp(); });
    if (same == chosen.end()) {
      chosen.push_back(&cost);
    } else if (std::pair(cost.latency.a(), cost.latency.b()) < std::pair((*same)->latency.a(), (*same)->latency.b())) {
      *same = &cost;
    }
  }
  std::sort(chosen.begin(), chosen.end(),
            [](const cost::SchemeCost* x, const cost::SchemeCost* y) { return x->scheme.cp() < y->scheme.cp(); });
  std::vector<const cost::SchemeCost*> chain;
  for (const cost::SchemeCost* cost : chosen)
    if (chain.empty() || cost->scheme.cp() % chain.back()->scheme.cp() == 0) chain.push_back(cost);
  return chain;
}

// The problem of `lengths` on the degrees of flex_cp_schemes. A ring charges each length rounded up to its 2·R
// causal chunks.
template <class Admits>
FlexCpProblem flex_cp_problem(const cost::Profile& profile, const Scheme& base, int units,
                              Span<const std::int64_t> lengths, Admits admits) {
  FlexCpProblem problem{.lengths = {lengths.begin(), lengths.end()},
                        .units = units,
                        .pp = base.pp(),
                        .degrees = {},
                        .one_degree_per_micro_batch = false};
  for (const cost::SchemeCost* cost : flex_cp_schemes(profile, base, units, admits)) {
    const int degree = cost->scheme.cp();
    const bool ring = degree > 1 && cost->scheme.ring() > 1;
    problem.degrees.push_back({.degree = degree,
                               .latency = cost->latency,
                               .capacity = cost->max_len,
                               .length_multiple = ring ? 2 * cost->scheme.ring() : 1,
                               .last_stage = cost->last_stage});
  }
  return problem;
}

}  // namespace sluice::assign
