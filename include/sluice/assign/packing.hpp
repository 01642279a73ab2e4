#pragma once
// Stage 2 of Hydraulis' two-stage assignment (§6.1, App. C): pack the sequences dispatched to one pipeline
// into micro-batches. For V micro-batches, Eq. 1 minimises (max_j Σ_{i∈j} T'(l_i) + c)·(PP − 1 + V) with
// each micro-batch's tokens ≤ MaxLen; every V of the pruned range is solved and the best kept.
// Algorithms, bounds and measured quality: docs/assign-packing.md. The exact MILP: packing_cbc.hpp.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sluice/assign/detail/micro_batch_checks.hpp"
#include "sluice/assign/detail/packing_heuristic.hpp"
#include "sluice/assign/packing_estimate.hpp"
#include "sluice/assign/types.hpp"
#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::assign {

inline MicroBatchRange micro_batch_range(Span<const Sequence> sequences, const cost::SchemeCost& scheme) {
  return detail::PackHeuristic(sequences, scheme).range();
}

// The heuristic for one fixed number of micro-batches v in [1, U]; raises sluice::infeasible when it finds
// no packing of v micro-batches within MaxLen (one may still exist: bin packing is NP-hard).
inline Packing pack_with_v(Span<const Sequence> sequences, const cost::SchemeCost& scheme, std::int64_t v) {
  detail::PackHeuristic heuristic(sequences, scheme);
  sluice::require(v >= 1 && v <= static_cast<std::int64_t>(heuristic.size()), "pack: v must be in [1, ",
                  heuristic.size(), "] (the sequence count), got ", v);
  if (!heuristic.solve(v))
    throw infeasible(sluice::concat("pack: no packing of ", heuristic.size(), " sequences into ", v,
                                    " micro-batches within max_len ", scheme.max_len, " found"));
  return heuristic.to_packing(heuristic.bins(), static_cast<std::size_t>(v));
}

// Eq. 1 over every V of micro_batch_range, by the heuristic; ties go to the smaller V. A V whose lower bound
// cannot beat the best estimate so far is skipped. If the heuristic packs no V of the range, V goes on
// upward from hi + 1 to the first it packs (V = U always packs: one sequence per micro-batch).
inline Packing pack(Span<const Sequence> sequences, const cost::SchemeCost& scheme) {
  detail::PackHeuristic heuristic(sequences, scheme);
  const MicroBatchRange range = heuristic.range();
  const auto count = static_cast<std::int64_t>(heuristic.size());
  std::vector<std::size_t> best_bins;
  std::int64_t best_v = 0;
  double best = std::numeric_limits<double>::infinity();
  for (std::int64_t v = range.lo; v <= count && (v <= range.hi || best_v == 0); ++v) {
    // The bounds prune only once some V is packed, so the loop cannot end without a packing.
    if (best_v != 0 && heuristic.longest_bound(v) >= best) break;
    if ((best_v != 0 && heuristic.estimate(heuristic.lower_bound(v), v) >= best) || !heuristic.solve(v)) continue;
    const double estimate = heuristic.estimate(heuristic.max_load(), v);
    if (estimate < best) {
      best = estimate;
      best_v = v;
      best_bins.assign(heuristic.bins().begin(), heuristic.bins().end());
    }
  }
  // V = U packs whenever every sequence fits MaxLen (checked above); kept as a guard, never an out-of-range read.
  if (best_v == 0)
    throw infeasible(sluice::concat("pack: no packing of ", count, " sequences within max_len ", scheme.max_len, " of ",
                                    scheme.scheme.name(), " found"));
  return heuristic.to_packing(best_bins, static_cast<std::size_t>(best_v));
}

// Megatron-LM-style baseline: best-fit decreasing by tokens into bins of `capacity_tokens` (the context
// length or MaxLen; the longest sequence <= capacity_tokens <= MaxLen), one micro-batch per bin. Free room
// is kept in an ordered set, so each sequence finds its bin in O(log U).
inline Packing pack_fixed_length(Span<const Sequence> sequences, const cost::SchemeCost& scheme,
                                 std::int64_t capacity_tokens) {
  sluice::require(capacity_tokens >= 1 && capacity_tokens <= scheme.max_len,
                  "pack_fixed_length: capacity_tokens must be in [1, max_len = ", scheme.max_len, "] of ",
                  scheme.scheme.name(), ", got ", capacity_tokens);
  const detail::PackHeuristic items(sequences, scheme, capacity_tokens);
  // (free tokens, bin) of every bin with room: the first that fits is the fullest, the earliest opened among equals.
  std::set<std::pair<std::int64_t, std::size_t>> room;
  std::vector<std::size_t> bin_of(items.size());
  std::size_t bins = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto fit = room.lower_bound({items.length(i), 0});
    std::int64_t left = capacity_tokens - items.length(i);
    if (fit == room.end()) {
      bin_of[i] = bins++;
    } else {
      bin_of[i] = fit->second;
      left = fit->first - items.length(i);
      room.erase(fit);
    }
    if (left > 0) room.emplace(left, bin_of[i]);
  }
  return items.to_packing(bin_of, bins);
}

// Checks a Packing against its sequences and scheme; raises invalid_plan naming the first broken invariant:
// at least one micro-batch, every sequence exactly once and nothing else, each micro-batch as
// detail::check_micro_batches requires, and the estimate.
inline void validate(const Packing& packing, Span<const Sequence> sequences, const cost::SchemeCost& scheme) {
  const PlanCheck check("packing: ");
  check(!packing.micro_batches.empty(), "has no micro-batches");
  const auto length_of = detail::length_by_id(sequences);
  std::unordered_set<std::int64_t> placed;
  detail::check_micro_batches(check, packing.micro_batches, length_of, placed, scheme, scheme.max_len);
  check(placed.size() == length_of.size(), "packs ", placed.size(), " of ", length_of.size(), " sequences");
  const double estimate = packing_estimate(packing.micro_batches, scheme.scheme.pp());
  check(nearly_equal(estimate, packing.estimate), "estimate ", packing.estimate, " s, its micro-batches give ",
        estimate);
}

}  // namespace sluice::assign
