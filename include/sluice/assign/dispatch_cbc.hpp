#pragma once
// The exact dispatch: Eq. 3 as a MILP solved by CBC, warm-started with the greedy dispatch so that the
// result is never worse than it. Include this only from code that links sluice::cbc. Model and measured
// gaps: docs/assign-dispatch.md.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sluice/assign/dispatch.hpp"
#include "sluice/assign/types.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/solver/cbc.hpp"
#include "sluice/solver/milp.hpp"

namespace sluice::assign {

struct ExactDispatch {
  Dispatch dispatch;  // lower_bound is the solver-free dispatch_lower_bound
  solver::SolveStatus status = solver::SolveStatus::no_solution;  // optimal: proven within relative_gap
  double best_bound = 0;  // the bound CBC proved on the optimum of Eq. 3
  double seconds = 0;     // wall clock of the whole call: greedy warm start, model and search
};

// The MILP, for the pipelines p that some sequence can use (the others stay empty, bound 0):
//   minimise z
//   Σ_{p < J_i} m_ip = 1                                       each sequence on one feasible pipeline
//   m_ip ≤ v_p,   Σ_i l_i·m_ip ≤ MaxLen_p·v_p,   v_p ∈ ℤ≥0       v_p ≥ V_lo (0 exactly when p is empty)
//   (T'_p(l_i) + c_p)·(PP_p − 1)·m_ip ≤ E_p   (PP_p > 1)       E_p ≥ the longest-sequence term
//   Σ_i T'_p(l_i)·m_ip + c_p·v_p + E_p ≤ z                     z ≥ Eq. 2's first term of every pipeline
//   (T'_p(l_i) + c_p)·(PP_p − 1 + v_p) − M_ip·(1 − m_ip) ≤ z    z ≥ its second term (the V step), where
//                                                               M_ip = (T'_p(l_i) + c_p)·(PP_p − 1 + V_max,p)
//   Σ_i l_i·m_ip ≥ Σ_i l_i·m_i,p+1   for p, p+1 of one group   symmetry breaking
//   z ≥ dispatch_lower_bound
// The V-step rows are needed only where v_p can exceed 1 (with one micro-batch the first term dominates).
// Minimising z lets v_p and E_p sit above V_lo and the max-term only where that costs nothing, so the
// optimum of the MILP is the optimum of Eq. 3. Pipelines of one group are interchangeable: any solution can
// be relabelled so that their tokens decrease, so ordering them removes only symmetric copies. The greedy
// solution, relabelled that way, is the warm start. `options.warm_start` must be empty (the model's variables
// are internal).
[[nodiscard]] inline ExactDispatch dispatch_exact(std::span<const Sequence> batch, PipelineCosts pipelines,
                                                  const solver::CbcOptions& options = {.time_limit_seconds = 30}) {
  const auto start = std::chrono::steady_clock::now();
  sluice::detail::require(!options.warm_start.has_value(),
                          "dispatch_exact: options.warm_start must be empty (the greedy dispatch is the warm start)");
  const detail::DispatchProblem problem(batch, pipelines);
  const Dispatch greedy = dispatch_greedy(batch, pipelines);
  const int n = problem.sequences();
  int usable = 0;  // pipelines 0..usable−1 can hold some sequence
  for (int i = 0; i < n; ++i) usable = std::max(usable, problem.limit(i));

  solver::Model model;
  const int z = model.add_variable(greedy.lower_bound, solver::infinity, solver::VarType::continuous, 1.0, "z");
  std::vector<int> first_m(static_cast<std::size_t>(n));  // m_ip is variable first_m[i] + p
  for (int i = 0; i < n; ++i) {
    first_m[i] = model.num_variables();
    for (int p = 0; p < problem.limit(i); ++p) model.add_binary(0.0);
  }
  std::vector<int> v(static_cast<std::size_t>(usable));
  std::vector<int> e(static_cast<std::size_t>(usable), -1);
  std::vector<std::int64_t> most(static_cast<std::size_t>(usable));  // V_max,p
  for (int p = 0; p < usable; ++p) {
    const detail::DispatchGroup& group = problem.group(problem.group_of(p));
    std::int64_t tokens = 0;
    for (int i = 0; i < n; ++i) tokens += p < problem.limit(i) ? problem.length(i) : 0;
    most[p] = std::max<std::int64_t>(1, (tokens + group.max_len - 1) / group.max_len);
    v[p] = model.add_variable(0, static_cast<double>(most[p]), solver::VarType::integer, 0.0);
    if (group.pp_minus_1 > 0) e[p] = model.add_variable(0, solver::infinity, solver::VarType::continuous, 0.0);
  }
  auto m = [&](int i, int p) { return first_m[i] + p; };

  solver::LinearExpr row;
  for (int i = 0; i < n; ++i) {
    row.clear();
    for (int p = 0; p < problem.limit(i); ++p) row.add(m(i, p), 1.0);
    model.add_equal(row, 1.0);
  }
  for (int p = 0; p < usable; ++p) {
    const int g = problem.group_of(p);
    const detail::DispatchGroup& group = problem.group(g);
    solver::LinearExpr memory{{v[p], -static_cast<double>(group.max_len)}};
    solver::LinearExpr bound{{z, -1.0}, {v[p], group.overhead}};
    if (e[p] >= 0) bound.add(e[p], 1.0);
    for (int i = 0; i < n; ++i) {
      if (p >= problem.limit(i)) continue;
      model.add_less_equal({{m(i, p), 1.0}, {v[p], -1.0}}, 0.0);
      if (e[p] >= 0)
        model.add_less_equal({{m(i, p), group.pp_minus_1 * (problem.time(i, g) + group.overhead)}, {e[p], -1.0}}, 0.0);
      memory.add(m(i, p), static_cast<double>(problem.length(i)));
      bound.add(m(i, p), problem.time(i, g));
      if (most[p] > 1) {
        const double slowest = problem.time(i, g) + group.overhead;
        const double big_m = slowest * (group.pp_minus_1 + static_cast<double>(most[p]));
        model.add_less_equal({{v[p], slowest}, {m(i, p), big_m}, {z, -1.0}}, big_m - slowest * group.pp_minus_1);
      }
    }
    model.add_less_equal(memory, 0.0);
    model.add_less_equal(bound, 0.0);
    if (p + 1 < usable && problem.group_of(p + 1) == g) {
      row.clear();
      for (int i = 0; i < n; ++i) {
        if (p + 1 >= problem.limit(i)) continue;
        row.add(m(i, p), static_cast<double>(problem.length(i)));
        row.add(m(i, p + 1), -static_cast<double>(problem.length(i)));
      }
      model.add_greater_equal(row, 0.0);
    }
  }

  // The greedy solution with each group's pipelines relabelled by tokens, descending (stable).
  std::vector<std::int64_t> tokens(static_cast<std::size_t>(problem.pipelines()), 0);
  for (int i = 0; i < n; ++i) tokens[greedy.pipeline_of[i]] += problem.length(i);
  std::vector<int> label(static_cast<std::size_t>(problem.pipelines()));
  for (int g = 0; g < problem.groups(); ++g) {
    const detail::DispatchGroup& group = problem.group(g);
    std::vector<int> members(static_cast<std::size_t>(group.count));
    for (int k = 0; k < group.count; ++k) members[k] = group.first + k;
    std::ranges::stable_sort(members, [&](int x, int y) { return tokens[x] > tokens[y]; });
    for (int k = 0; k < group.count; ++k) label[members[k]] = group.first + k;
  }
  std::vector<double> warm(static_cast<std::size_t>(model.num_variables()), 0.0);
  std::vector<std::int64_t> load(static_cast<std::size_t>(usable), 0);
  for (int i = 0; i < n; ++i) {
    const int p = label[greedy.pipeline_of[i]];
    warm[m(i, p)] = 1.0;
    load[p] += problem.length(i);
    const int g = problem.group_of(p);
    if (e[p] >= 0) {
      const double term = problem.group(g).pp_minus_1 * (problem.time(i, g) + problem.group(g).overhead);
      warm[e[p]] = std::max(warm[e[p]], term);
    }
  }
  double level = greedy.lower_bound;
  for (int p = 0; p < usable; ++p) {
    if (load[p] == 0) continue;
    const int g = problem.group_of(p);
    const detail::DispatchGroup& group = problem.group(g);
    warm[v[p]] = static_cast<double>((load[p] + group.max_len - 1) / group.max_len);
    double value = group.overhead * warm[v[p]] + (e[p] >= 0 ? warm[e[p]] : 0.0);
    double slowest = 0.0;
    for (int i = 0; i < n; ++i) {
      if (p >= problem.limit(i) || warm[m(i, p)] == 0.0) continue;
      value += problem.time(i, g);
      slowest = std::max(slowest, problem.time(i, g) + group.overhead);
    }
    level = std::max({level, value, slowest * (group.pp_minus_1 + warm[v[p]])});
  }
  warm[z] = level;

  solver::CbcOptions cbc = options;
  cbc.warm_start = std::move(warm);
  const solver::Solution solution = solver::solve_with_cbc(model, cbc);

  ExactDispatch result{greedy, solution.status, solution.best_bound, 0.0};
  if (!solution.values.empty()) {
    std::vector<int> pipeline_of(static_cast<std::size_t>(n), -1);
    for (int i = 0; i < n; ++i) {
      for (int p = 0; p < problem.limit(i); ++p) {
        if (solution.values[m(i, p)] > 0.5) pipeline_of[i] = p;
      }
    }
    std::vector<double> bounds = problem.bounds(pipeline_of);
    const double objective = *std::ranges::max_element(bounds);
    // CBC's row tolerances could let a z a hair below the true maximum through; never report worse than greedy.
    if (objective <= greedy.objective) {
      result.dispatch.pipeline_of = std::move(pipeline_of);
      result.dispatch.pipeline_bounds = std::move(bounds);
      result.dispatch.objective = objective;
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace sluice::assign
