#pragma once
// The exact dispatch: Eq. 3 as a MILP solved by CBC, warm-started with the greedy dispatch so that the
// result is never worse than it. Include this only from code that links sluice::cbc. Model and measured
// gaps: docs/assign-dispatch.md.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sluice/assign/dispatch.hpp"
#include "sluice/assign/types.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/solver/cbc.hpp"
#include "sluice/solver/milp.hpp"

namespace sluice::assign {

struct ExactDispatch {
  Dispatch dispatch;                                              // lower_bound is the solver-free dispatch_lower_bound
  solver::SolveStatus status = solver::SolveStatus::no_solution;  // optimal: proven within relative_gap
  double best_bound = 0;                                          // the bound CBC proved on the optimum of Eq. 3
  double seconds = 0;  // wall clock of the whole call: greedy warm start, model and search
};

namespace detail {

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
// solution, relabelled that way, is the warm start.
class DispatchMilp {
public:
  DispatchMilp(const DispatchProblem& problem, double lower_bound) : problem_(problem) {
    const int n = problem.sequences();
    for (int i = 0; i < n; ++i) usable_ = std::max(usable_, problem.limit(i));
    z_ = model_.add_variable(lower_bound, solver::infinity, solver::VarType::continuous, 1.0, "z");
    first_m_.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      first_m_[i] = model_.num_variables();
      for (int p = 0; p < problem.limit(i); ++p) model_.add_binary(0.0);
    }
    v_.resize(static_cast<std::size_t>(usable_));
    e_.assign(static_cast<std::size_t>(usable_), -1);
    most_.resize(static_cast<std::size_t>(usable_));
    for (int p = 0; p < usable_; ++p) {
      const DispatchGroup& group = problem.group(problem.group_of(p));
      std::int64_t tokens = 0;
      for (int i = 0; i < n; ++i) tokens += p < problem.limit(i) ? problem.length(i) : 0;
      most_[p] = std::max<std::int64_t>(1, (tokens + group.max_len - 1) / group.max_len);
      v_[p] = model_.add_variable(0, static_cast<double>(most_[p]), solver::VarType::integer, 0.0);
      if (group.pp_minus_1 > 0) e_[p] = model_.add_variable(0, solver::infinity, solver::VarType::continuous, 0.0);
    }
    add_assignment_rows();
    for (int p = 0; p < usable_; ++p) add_pipeline_rows(p);
  }

  [[nodiscard]] const solver::Model& model() const noexcept { return model_; }

  // The greedy solution with each group's pipelines relabelled by tokens, descending (stable).
  [[nodiscard]] std::vector<double> warm_start(const Dispatch& greedy) const {
    const int n = problem_.sequences();
    std::vector<std::int64_t> tokens(static_cast<std::size_t>(problem_.pipelines()), 0);
    for (int i = 0; i < n; ++i) tokens[greedy.pipeline_of[i]] += problem_.length(i);
    std::vector<int> label(static_cast<std::size_t>(problem_.pipelines()));
    for (int g = 0; g < problem_.groups(); ++g) {
      const DispatchGroup& group = problem_.group(g);
      std::vector<int> members(static_cast<std::size_t>(group.count));
      for (int k = 0; k < group.count; ++k) members[k] = group.first + k;
      std::stable_sort(members.begin(), members.end(), [&](int x, int y) { return tokens[x] > tokens[y]; });
      for (int k = 0; k < group.count; ++k) label[members[k]] = group.first + k;
    }
    std::vector<double> warm(static_cast<std::size_t>(model_.num_variables()), 0.0);
    std::vector<std::int64_t> load(static_cast<std::size_t>(usable_), 0);
    for (int i = 0; i < n; ++i) {
      const int p = label[greedy.pipeline_of[i]];
      warm[m(i, p)] = 1.0;
      load[p] += problem_.length(i);
      const int g = problem_.group_of(p);
      if (e_[p] >= 0) {
        const double term = problem_.group(g).pp_minus_1 * (problem_.time(i, g) + problem_.group(g).overhead);
        warm[e_[p]] = std::max(warm[e_[p]], term);
      }
    }
    double level = greedy.lower_bound;
    for (int p = 0; p < usable_; ++p) {
      if (load[p] == 0) continue;
      const int g = problem_.group_of(p);
      const DispatchGroup& group = problem_.group(g);
      const std::int64_t micro_batches = (load[p] + group.max_len - 1) / group.max_len;  // rounded up
      warm[v_[p]] = static_cast<double>(micro_batches);
      double value = group.overhead * warm[v_[p]] + (e_[p] >= 0 ? warm[e_[p]] : 0.0);
      double slowest = 0.0;
      for (int i = 0; i < n; ++i) {
        if (p >= problem_.limit(i) || warm[m(i, p)] == 0.0) continue;
        value += problem_.time(i, g);
        slowest = std::max(slowest, problem_.time(i, g) + group.overhead);
      }
      level = std::max({level, value, slowest * (group.pp_minus_1 + warm[v_[p]])});
    }
    warm[z_] = level;
    return warm;
  }

  // The pipeline of every sequence in a solution's values.
  [[nodiscard]] std::vector<int> pipeline_of(Span<const double> values) const {
    std::vector<int> result(static_cast<std::size_t>(problem_.sequences()), -1);
    for (int i = 0; i < problem_.sequences(); ++i)
      for (int p = 0; p < problem_.limit(i); ++p)
        if (values[m(i, p)] > 0.5) result[i] = p;
    return result;
  }

private:
  [[nodiscard]] int m(int i, int p) const { return first_m_[i] + p; }

  void add_assignment_rows() {
    solver::LinearExpr row;
    for (int i = 0; i < problem_.sequences(); ++i) {
      row.clear();
      for (int p = 0; p < problem_.limit(i); ++p) row.add(m(i, p), 1.0);
      model_.add_equal(row, 1.0);
    }
  }

  // Pipeline p's rows: v_p, memory, E_p, both terms of Eq. 2 and the symmetry row with p + 1.
  void add_pipeline_rows(int p) {
    const int g = problem_.group_of(p);
    const DispatchGroup& group = problem_.group(g);
    solver::LinearExpr memory{{v_[p], -static_cast<double>(group.max_len)}};
    solver::LinearExpr bound{{z_, -1.0}, {v_[p], group.overhead}};
    if (e_[p] >= 0) bound.add(e_[p], 1.0);
    for (int i = 0; i < problem_.sequences(); ++i) {
      if (p >= problem_.limit(i)) continue;
      model_.add_less_equal({{m(i, p), 1.0}, {v_[p], -1.0}}, 0.0);
      if (e_[p] >= 0)
        model_.add_less_equal({{m(i, p), group.pp_minus_1 * (problem_.time(i, g) + group.overhead)}, {e_[p], -1.0}},
                              0.0);
      memory.add(m(i, p), static_cast<double>(problem_.length(i)));
      bound.add(m(i, p), problem_.time(i, g));
      if (most_[p] > 1) {
        const double slowest = problem_.time(i, g) + group.overhead;
        const double big_m = slowest * (group.pp_minus_1 + static_cast<double>(most_[p]));
        model_.add_less_equal({{v_[p], slowest}, {m(i, p), big_m}, {z_, -1.0}}, big_m - slowest * group.pp_minus_1);
      }
    }
    model_.add_less_equal(memory, 0.0);
    model_.add_less_equal(bound, 0.0);
    if (p + 1 < usable_ && problem_.group_of(p + 1) == g) {
      solver::LinearExpr row;
      for (int i = 0; i < problem_.sequences(); ++i) {
        if (p + 1 >= problem_.limit(i)) continue;
        row.add(m(i, p), static_cast<double>(problem_.length(i)));
        row.add(m(i, p + 1), -static_cast<double>(problem_.length(i)));
      }
      model_.add_greater_equal(row, 0.0);
    }
  }

  const DispatchProblem& problem_;
  solver::Model model_;
  int usable_ = 0;  // pipelines 0..usable−1 can hold some sequence
  int z_ = 0;
  std::vector<int> first_m_;  // m_ip is variable first_m_[i] + p
  std::vector<int> v_, e_;
  std::vector<std::int64_t> most_;  // V_max,p
};

}  // namespace detail

// Eq. 3 solved exactly: detail::DispatchMilp solved by CBC from the greedy dispatch. `options.warm_start` must
// be empty (the model's variables are internal).
[[nodiscard]] inline ExactDispatch dispatch_exact(Span<const Sequence> batch, PipelineCosts pipelines,
                                                  const solver::CbcOptions& options = {.time_limit_seconds = 30}) {
  const auto start = std::chrono::steady_clock::now();
  sluice::require(!options.warm_start.has_value(),
                  "dispatch_exact: options.warm_start must be empty (the greedy dispatch is the warm start)");
  const detail::DispatchProblem problem(batch, pipelines);
  const Dispatch greedy = dispatch_greedy(batch, pipelines);
  const detail::DispatchMilp milp(problem, greedy.lower_bound);
  solver::CbcOptions cbc = options;
  cbc.warm_start = milp.warm_start(greedy);
  const solver::Solution solution = solver::solve_with_cbc(milp.model(), cbc);

  ExactDispatch result{.dispatch = greedy, .status = solution.status, .best_bound = solution.best_bound, .seconds = 0};
  if (!solution.values.empty()) {
    std::vector<int> pipeline_of = milp.pipeline_of(solution.values);
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
