#pragma once
// Eq. 1 solved exactly with CBC, one MILP per micro-batch count V, as the Hydraulis authors' code does
// (PuLP + CBC, 0.5 s per V), for comparison with the heuristic of packing.hpp. Needs sluice::cbc.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "sluice/assign/detail/packing_heuristic.hpp"
#include "sluice/assign/packing.hpp"
#include "sluice/assign/types.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/solver/cbc.hpp"
#include "sluice/solver/milp.hpp"

namespace sluice::assign {

struct ExactPacking {
  Packing packing;
  // optimal when best_bound meets the estimate (relative 1e-9): every V was solved to optimality, proven
  // infeasible, or bounded away from beating the result; feasible otherwise (some V hit the time limit).
  solver::SolveStatus status = solver::SolveStatus::no_solution;
  // A lower bound on the optimum of Eq. 1 over the V range: min over V of (bound_V + c)·(PP − 1 + V), where
  // bound_V is the larger of CBC's bound and the heuristic's combinatorial bound.
  double best_bound = 0;
  double seconds = 0;       // wall clock for the whole call
  std::int64_t solves = 0;  // CBC calls (a V that the heuristic solves to its lower bound needs none)
};

namespace detail {

// Eq. 1 for v micro-batches over the sorted sequences of `items`, linearised with the makespan z:
//   min z  s.t.  Σ_j o_ij = 1 (each i),  Σ_i T'(l_i)·o_ij <= z,  Σ_i l_i·o_ij <= MaxLen (each j),  o binary,
// with z in [lower_bound(v), cutoff]. Symmetry breaking: sequence i (longest first) may only go to
// micro-batches j <= i; any packing satisfies this once its micro-batches are numbered by their longest
// sequence. Variables: o_ij at offset(i) + j, then z.
struct PackModel {
  solver::Model model;
  std::vector<int> offset;  // first variable of sequence i
  int z = 0;
};

inline PackModel pack_model(const PackHeuristic& items, std::int64_t v, double cutoff) {
  const std::size_t n = items.size();
  const auto bins = static_cast<std::size_t>(v);
  PackModel built;
  built.offset.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    built.offset[i] = built.model.num_variables();
    for (std::size_t j = 0; j <= std::min(i, bins - 1); ++j) built.model.add_binary(0.0);
  }
  built.z = built.model.add_variable(items.lower_bound(v), cutoff, solver::VarType::continuous, 1.0, "z");
  for (std::size_t i = 0; i < n; ++i) {
    solver::LinearExpr once;
    for (std::size_t j = 0; j <= std::min(i, bins - 1); ++j) once.add(built.offset[i] + static_cast<int>(j), 1.0);
    built.model.add_equal(once, 1.0);
  }
  for (std::size_t j = 0; j < bins; ++j) {
    solver::LinearExpr time{{built.z, -1.0}};
    solver::LinearExpr tokens;
    std::int64_t reachable = 0;
    for (std::size_t i = j; i < n; ++i) {
      const int var = built.offset[i] + static_cast<int>(j);
      time.add(var, items.weight(i));
      tokens.add(var, static_cast<double>(items.length(i)));
      reachable += items.length(i);
    }
    built.model.add_less_equal(time, 0.0);
    if (reachable > items.capacity()) built.model.add_less_equal(tokens, static_cast<double>(items.capacity()));
  }
  return built;
}

// The heuristic's packing as a point of the model: micro-batches renumbered by their longest sequence.
inline std::vector<double> pack_warm_start(const PackModel& built, Span<const std::size_t> bins, double max_load) {
  std::vector<double> values(static_cast<std::size_t>(built.model.num_variables()), 0.0);
  std::vector<std::size_t> label(bins.size(), std::numeric_limits<std::size_t>::max());
  std::size_t next = 0;
  for (std::size_t i = 0; i < bins.size(); ++i) {
    std::size_t& number = label[bins[i]];
    if (number == std::numeric_limits<std::size_t>::max()) number = next++;
    values[static_cast<std::size_t>(built.offset[i]) + number] = 1.0;
  }
  values[static_cast<std::size_t>(built.z)] =
      std::max(max_load, built.model.lower_bounds()[static_cast<std::size_t>(built.z)]);
  return values;
}

}  // namespace detail

// Every V of micro_batch_range (and, if none has a packing, upward to the first that has), each by CBC with
// `options` per V (time limit 0.5 s per V by default, like the authors' code), warm-started from the
// heuristic. A V is skipped when its lower bound cannot beat the best estimate so far; z is capped so that
// CBC only looks for packings that beat it. Ties go to the smaller V. `options.warm_start` must be empty.
inline ExactPacking pack_exact(Span<const Sequence> sequences, const cost::SchemeCost& scheme,
                               const solver::CbcOptions& options = {.time_limit_seconds = 0.5}) {
  const auto start = std::chrono::steady_clock::now();
  sluice::require(!options.warm_start.has_value(),
                  "pack_exact: options.warm_start must be empty (each V is warm-started from the heuristic)");
  detail::PackHeuristic heuristic(sequences, scheme);
  const MicroBatchRange range = heuristic.range();
  const auto count = static_cast<std::int64_t>(heuristic.size());
  constexpr double inf = std::numeric_limits<double>::infinity();

  ExactPacking result;
  result.best_bound = inf;
  double best = inf;
  std::vector<std::size_t> best_bins;
  std::size_t best_count = 0;
  auto keep = [&](Span<const std::size_t> bins, std::int64_t v) {
    Packing packing = heuristic.to_packing(bins, static_cast<std::size_t>(v));
    if (packing.estimate < best) {
      best = packing.estimate;
      best_bins.assign(bins.begin(), bins.end());
      best_count = static_cast<std::size_t>(v);
    }
  };

  for (std::int64_t v = range.lo; v <= count && (v <= range.hi || best_count == 0); ++v) {
    if (heuristic.longest_bound(v) >= best) break;
    const double lower = heuristic.lower_bound(v);
    if (heuristic.estimate(lower, v) >= best) continue;
    double bound = lower;
    const bool packed = heuristic.solve(v);
    if (packed) keep(heuristic.bins(), v);
    // Within rounding of the bound, the heuristic is optimal for this V.
    const bool at_bound = packed && heuristic.max_load() <= lower * (1 + 1e-12);
    if (!at_bound) {
      // A packing of this V beats the best only if z < best / (PP − 1 + V) − c.
      const double cutoff =
          best == inf
              ? inf
              : std::max(lower, best / (scheme.scheme.pp() - 1 + static_cast<double>(v)) - heuristic.overhead());
      const detail::PackModel built = detail::pack_model(heuristic, v, cutoff);
      solver::CbcOptions per_v = options;
      if (packed && heuristic.max_load() <= cutoff)
        per_v.warm_start = detail::pack_warm_start(built, heuristic.bins(), heuristic.max_load());
      const solver::Solution solution = solver::solve_with_cbc(built.model, per_v);
      ++result.solves;
      if (solution.status == solver::SolveStatus::infeasible) continue;  // no packing, or none that beats the best
      bound = std::max(bound, solution.best_bound);
      if (!solution.values.empty()) {
        std::vector<std::size_t> bins(heuristic.size());
        for (std::size_t i = 0; i < bins.size(); ++i) {
          const auto first = static_cast<std::size_t>(built.offset[i]);
          for (std::size_t j = 0; j <= std::min(i, static_cast<std::size_t>(v) - 1); ++j)
            if (solution.values[first + j] > 0.5) bins[i] = j;
        }
        keep(bins, v);
      }
    }
    result.best_bound = std::min(result.best_bound, heuristic.estimate(bound, v));
  }
  result.packing = heuristic.to_packing(best_bins, best_count);
  // The result's own estimate bounds the optimum from above (this also guards against rounding).
  result.best_bound = std::min(result.best_bound, result.packing.estimate);
  result.status = result.best_bound >= result.packing.estimate * (1 - 1e-9) ? solver::SolveStatus::optimal
                                                                            : solver::SolveStatus::feasible;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace sluice::assign
