#pragma once
// The flex CP problem of flex_cp.hpp solved exactly with CBC, for small instances (at most
// flex_cp_exact_max_sequences sequences on at most flex_cp_exact_max_units units): the reference that the heuristic
// solve_flex_cp is measured against. Needs sluice::cbc.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/assign/flex_cp.hpp"
#include "sluice/core/error.hpp"
#include "sluice/solver/cbc.hpp"
#include "sluice/solver/milp.hpp"

namespace sluice::assign {

// The model grows as sequences² × Σ_k units / degree_k: 12 sequences on 8 units (degrees 1, 2, 4, 8) make about
// 950 binaries, which CBC (one thread) proves optimal in 5 to 20 s or leaves a few percent open at its time limit;
// 8 sequences take it 2 to 5 s, 6 on 4 units milliseconds. Larger instances are beyond this exact search.
inline constexpr std::size_t flex_cp_exact_max_sequences = 12;
inline constexpr int flex_cp_exact_max_units = 8;

struct ExactFlexCp {
  FlexCpPlan plan;  // never slower than solve_flex_cp's plan
  // optimal when the search finished: CBC proved its plan optimal (within options.relative_gap), or proved that no
  // plan beats the heuristic's by more than a relative 1e-9; feasible when the time limit stopped it (with or
  // without a better plan).
  solver::SolveStatus status = solver::SolveStatus::no_solution;
  double best_bound = 0;  // no plan is faster: max(flex_cp_lower_bound, CBC's bound), at most plan.seconds
  double seconds = 0;     // wall clock for the whole call
};

namespace detail {

// Sequences are renumbered longest first (i), micro-batch slots m and group slots j of each degree k:
//   x[i,m,k,j]  sequence i runs in group j of degree k of micro-batch m (only where degree k holds it alone)
//   u[m,k,j]    that group is open;  z[m,k]  micro-batch m's one degree (with one_degree_per_micro_batch)
//   T_m >= 0 (height[m]), Tmax, total = Σ_m T_m + (PP − 1)·Tmax, the objective, capped at the heuristic's time.
// Symmetry breaking, so that each plan has one point: micro-batch m is the one whose lowest sequence is i = m
// (x[i,m] only for m <= i, and micro-batch m holds i > m only if it holds m); the groups of one degree in a
// micro-batch are numbered by their lowest sequence, so u[m,k,j] >= u[m,k,j+1] and x[i,m,k,j] only for
// j <= i − m (the j-th group's lowest sequence is at least m + j). Each micro-batch holds at most n − m sequences,
// hence at most that many groups of a degree. Times are divided by the heuristic's, so that CBC's absolute
// tolerances act on an objective near 1. The model stands on its own (flex_cp_lower_bound is not in it), so that it
// can check that bound too.
struct FlexCpModel {
  solver::Model model;
  std::vector<std::size_t> order;  // order[i]: the problem's index of sorted sequence i
  struct Assign {
    int i, m, k, j, var;
  };
  std::vector<Assign> assigns;
  std::vector<std::vector<std::vector<int>>> open;  // open[m][k][j]: u's variable
  int total = 0;
};

inline FlexCpModel flex_cp_model(const FlexCpProblem& problem, double scale, double cutoff) {
  const std::size_t n = problem.lengths.size();
  const std::size_t degrees = problem.degrees.size();
  FlexCpModel built;
  built.order.resize(n);
  std::iota(built.order.begin(), built.order.end(), std::size_t{0});
  std::stable_sort(built.order.begin(), built.order.end(),
                   [&](std::size_t a, std::size_t b) { return problem.lengths[a] > problem.lengths[b]; });
  auto length = [&](std::size_t i) { return problem.lengths[built.order[i]]; };
  auto slots = [&](std::size_t m, std::size_t k) {
    return std::min(static_cast<std::size_t>(problem.units / problem.degrees[k].degree), n - m);
  };
  solver::Model& model = built.model;

  // The slowest sequence alone in its fastest group bounds every plan's slowest micro-batch from below.
  double longest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double fastest = solver::infinity;
    for (std::size_t k = 0; k < degrees; ++k)
      if (flex_cp_holds(problem, k, length(i)))
        fastest = std::min(fastest, problem.degrees[k].latency.c() + flex_cp_sequence_seconds(problem, k, length(i)));
    longest = std::max(longest, fastest / scale);
  }
  const auto pp = static_cast<double>(problem.pp);
  const double tmax_cap = std::max(longest, cutoff / pp);
  built.total = model.add_variable(0.0, cutoff, solver::VarType::continuous, 1.0, "total");
  const int tmax = model.add_variable(longest, tmax_cap, solver::VarType::continuous, 0.0, "Tmax");
  std::vector<int> height(n);
  for (std::size_t m = 0; m < n; ++m) height[m] = model.add_variable(0.0, tmax_cap, solver::VarType::continuous, 0.0);

  built.open.resize(n);
  for (std::size_t m = 0; m < n; ++m) {
    built.open[m].resize(degrees);
    for (std::size_t k = 0; k < degrees; ++k)
      for (std::size_t j = 0; j < slots(m, k); ++j) built.open[m][k].push_back(model.add_binary(0.0));
  }
  // by_group[m][k][j]: the assignments into that group; by_batch[m][i]: sequence i's into micro-batch m.
  std::vector<std::vector<std::vector<std::vector<std::size_t>>>> by_group(n);
  std::vector<std::vector<std::vector<int>>> by_batch(n, std::vector<std::vector<int>>(n));
  std::vector<std::vector<std::vector<std::size_t>>> by_batch_entries(n, std::vector<std::vector<std::size_t>>(n));
  std::vector<std::vector<int>> by_sequence(n);
  for (std::size_t m = 0; m < n; ++m) {
    by_group[m].resize(degrees);
    for (std::size_t k = 0; k < degrees; ++k) by_group[m][k].resize(slots(m, k));
  }
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t m = 0; m <= i; ++m)
      for (std::size_t k = 0; k < degrees; ++k) {
        if (!flex_cp_holds(problem, k, length(i))) continue;
        for (std::size_t j = 0; j < std::min(slots(m, k), i - m + 1); ++j) {
          const int var = model.add_binary(0.0);
          by_group[m][k][j].push_back(built.assigns.size());
          by_batch[m][i].push_back(var);
          by_batch_entries[m][i].push_back(built.assigns.size());
          by_sequence[i].push_back(var);
          built.assigns.push_back(
              {static_cast<int>(i), static_cast<int>(m), static_cast<int>(k), static_cast<int>(j), var});
        }
      }

  for (std::size_t i = 0; i < n; ++i) {
    solver::LinearExpr once;
    for (const int var : by_sequence[i]) once.add(var, 1.0);
    model.add_equal(once, 1.0);
  }
  solver::LinearExpr objective{{built.total, 1.0}, {tmax, 1.0 - pp}};
  for (std::size_t m = 0; m < n; ++m) {
    objective.add(height[m], -1.0);
    model.add_less_equal(solver::LinearExpr{{height[m], 1.0}, {tmax, -1.0}}, 0.0);
    // Micro-batch m is in use exactly when it holds sequence m.
    auto holds_m = [&](solver::LinearExpr expr) {
      for (const int var : by_batch[m][m]) expr.add(var, -1.0);
      return expr;
    };
    for (std::size_t i = m + 1; i < n; ++i) {
      if (by_batch[m][i].empty()) continue;
      solver::LinearExpr joins;
      for (const int var : by_batch[m][i]) joins.add(var, 1.0);
      model.add_less_equal(holds_m(std::move(joins)), 0.0);
    }
    // A micro-batch lasts at least as long as any of its sequences alone in its group: the group rows say so only
    // per group, which the LP relaxation spreads over many.
    for (std::size_t i = m; i < n; ++i) {
      solver::LinearExpr alone{{height[m], -1.0}};
      for (const std::size_t a : by_batch_entries[m][i]) {
        const FlexCpModel::Assign& entry = built.assigns[a];
        const auto k = static_cast<std::size_t>(entry.k);
        alone.add(entry.var,
                  (problem.degrees[k].latency.c() + flex_cp_sequence_seconds(problem, k, length(i))) / scale);
      }
      if (alone.size() > 1) model.add_less_equal(alone, 0.0);
    }
    solver::LinearExpr width;
    // The units' busy time in the micro-batch, Σ_groups degree·time, fits in units·T_m: a bound the LP
    // relaxation cannot spread across groups.
    solver::LinearExpr area{{height[m], -static_cast<double>(problem.units)}};
    std::vector<int> choice(degrees, -1);
    if (problem.one_degree_per_micro_batch) {
      solver::LinearExpr one;
      for (std::size_t k = 0; k < degrees; ++k) {
        choice[k] = model.add_binary(0.0);
        one.add(choice[k], 1.0);
      }
      model.add_less_equal(one, 1.0);
    }
    for (std::size_t k = 0; k < degrees; ++k) {
      const FlexCpDegree& degree = problem.degrees[k];
      const double constant = degree.latency.c() / scale;
      const std::vector<int>& open = built.open[m][k];
      for (std::size_t j = 0; j < open.size(); ++j) {
        width.add(open[j], degree.degree);
        area.add(open[j], degree.degree * constant);
        if (j == 0) {
          model.add_less_equal(holds_m(solver::LinearExpr{{open[0], 1.0}}), 0.0);
          if (choice[k] >= 0) model.add_less_equal(solver::LinearExpr{{open[0], 1.0}, {choice[k], -1.0}}, 0.0);
        } else {
          model.add_less_equal(solver::LinearExpr{{open[j], 1.0}, {open[j - 1], -1.0}}, 0.0);
        }
        solver::LinearExpr group_time{{open[j], constant}, {height[m], -1.0}};
        solver::LinearExpr tokens{{open[j], -static_cast<double>(degree.capacity)}};
        solver::LinearExpr used{{open[j], 1.0}};  // an open group runs a sequence
        std::int64_t reachable = 0;
        for (const std::size_t a : by_group[m][k][j]) {
          const FlexCpModel::Assign& entry = built.assigns[a];
          const auto i = static_cast<std::size_t>(entry.i);
          const double work = flex_cp_sequence_seconds(problem, k, length(i)) / scale;
          const std::int64_t charged = flex_cp_charged(problem, k, length(i));
          group_time.add(entry.var, work);
          area.add(entry.var, degree.degree * work);
          tokens.add(entry.var, static_cast<double>(charged));
          used.add(entry.var, -1.0);
          reachable += charged;
          model.add_less_equal(solver::LinearExpr{{entry.var, 1.0}, {open[j], -1.0}}, 0.0);
        }
        model.add_less_equal(group_time, 0.0);
        model.add_less_equal(used, 0.0);
        if (reachable > degree.capacity) model.add_less_equal(tokens, 0.0);
      }
    }
    model.add_less_equal(width, problem.units);
    model.add_less_equal(area, 0.0);
  }
  model.add_equal(objective, 0.0);
  return built;
}

// Groups widest first on consecutive aligned units (the degrees form a chain, so each block stays aligned),
// sequences ascending, micro-batches slowest first: the order solve_flex_cp gives its plans.
inline std::vector<FlexCpMicroBatch> flex_cp_canonical(const FlexCpProblem& problem,
                                                       std::vector<std::vector<FlexCpGroup>> batches) {
  std::vector<std::pair<double, FlexCpMicroBatch>> built;
  for (std::vector<FlexCpGroup>& groups : batches) {
    std::erase_if(groups, [](const FlexCpGroup& group) { return group.sequences.empty(); });
    if (groups.empty()) continue;
    for (FlexCpGroup& group : groups) std::sort(group.sequences.begin(), group.sequences.end());
    std::sort(groups.begin(), groups.end(), [](const FlexCpGroup& x, const FlexCpGroup& y) {
      return x.degree_index != y.degree_index ? x.degree_index > y.degree_index : x.sequences < y.sequences;
    });
    int unit = 0;
    for (FlexCpGroup& group : groups) {
      group.first_unit = unit;
      unit += problem.degrees[static_cast<std::size_t>(group.degree_index)].degree;
    }
    FlexCpMicroBatch micro_batch{std::move(groups)};
    built.emplace_back(flex_cp_micro_batch_seconds(problem, micro_batch), std::move(micro_batch));
  }
  // Ties by the groups' degrees and sequences, so that the order never depends on the solver's numbering.
  auto key = [](const FlexCpGroup& group) { return std::tie(group.degree_index, group.sequences); };
  std::sort(built.begin(), built.end(), [&](const auto& x, const auto& y) {
    if (x.first != y.first) return x.first > y.first;
    return std::ranges::lexicographical_compare(x.second.groups, y.second.groups, {}, key, key);
  });
  std::vector<FlexCpMicroBatch> result;
  for (auto& [seconds, micro_batch] : built) result.push_back(std::move(micro_batch));
  return result;
}

}  // namespace detail

// Starts from solve_flex_cp's plan and asks CBC (with `options`; warm_start must be empty) for one faster by more
// than a relative 1e-9; without one, or when the heuristic meets flex_cp_lower_bound, the heuristic's plan is the
// result. The plan's lower_bound is the result's best_bound.
inline ExactFlexCp solve_flex_cp_exact(const FlexCpProblem& problem, const solver::CbcOptions& options = {}) {
  const auto start = std::chrono::steady_clock::now();
  require_valid(problem);
  sluice::require(problem.lengths.size() <= flex_cp_exact_max_sequences, "flex CP exact: ", problem.lengths.size(),
                  " sequences, more than the exact solver's limit of ", flex_cp_exact_max_sequences);
  sluice::require(problem.units <= flex_cp_exact_max_units, "flex CP exact: ", problem.units,
                  " units, more than the exact solver's limit of ", flex_cp_exact_max_units);
  sluice::require(!options.warm_start.has_value(),
                  "flex CP exact: options.warm_start must be empty (the heuristic's plan is the cutoff)");
  sluice::require(problem.collectives.seconds == 0,
                  "flex CP exact: the model has no collectives; problem.collectives.seconds must be 0");

  ExactFlexCp result;
  result.plan = solve_flex_cp(problem);
  const double heuristic = result.plan.seconds;
  double bound = flex_cp_lower_bound(problem);
  // Only plans faster than the heuristic's by a relative 1e-9 are feasible: an infeasible model proves it optimal.
  constexpr double cutoff = 1 - 1e-9;
  bool proven = heuristic * cutoff <= bound;
  if (!proven) {
    const detail::FlexCpModel built = detail::flex_cp_model(problem, heuristic, cutoff);
    const solver::Solution solution = solver::solve_with_cbc(built.model, options);
    sluice::require(solution.status != solver::SolveStatus::unbounded, "flex CP exact: CBC calls the model unbounded");
    proven = solution.status == solver::SolveStatus::optimal || solution.status == solver::SolveStatus::infeasible;
    // No plan under the cutoff is faster than CBC's bound, and none at or above it is faster than the cutoff.
    const double cbc_bound = solution.status == solver::SolveStatus::infeasible ? cutoff : solution.best_bound;
    bound = std::max(bound, std::min(cbc_bound, cutoff) * heuristic);
    if (!solution.values.empty()) {
      const std::size_t n = problem.lengths.size();
      std::vector<std::vector<FlexCpGroup>> batches(n);
      for (std::size_t m = 0; m < n; ++m)
        for (std::size_t k = 0; k < problem.degrees.size(); ++k)
          for (std::size_t j = 0; j < built.open[m][k].size(); ++j)
            batches[m].push_back({.degree_index = static_cast<int>(k), .first_unit = 0, .sequences = {}});
      for (const detail::FlexCpModel::Assign& entry : built.assigns) {
        if (solution.values[static_cast<std::size_t>(entry.var)] < 0.5) continue;
        const auto m = static_cast<std::size_t>(entry.m);
        auto group = static_cast<std::size_t>(entry.j);
        for (int k = 0; k < entry.k; ++k) group += built.open[m][static_cast<std::size_t>(k)].size();
        batches[m][group].sequences.push_back(static_cast<int>(built.order[static_cast<std::size_t>(entry.i)]));
      }
      FlexCpPlan plan{
          .micro_batches = detail::flex_cp_canonical(problem, std::move(batches)), .seconds = 0, .lower_bound = 0};
      plan.seconds = flex_cp_iteration_seconds(problem, plan.micro_batches);
      if (plan.seconds < heuristic) result.plan = std::move(plan);
    }
  }
  result.best_bound = std::min(bound, result.plan.seconds);
  result.plan.lower_bound = result.best_bound;
  result.status = proven ? solver::SolveStatus::optimal : solver::SolveStatus::feasible;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace sluice::assign
