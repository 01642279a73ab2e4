#pragma once
// A small mixed-integer linear program: bounded variables, ranged rows stored sparse by row, and a
// checker that planners and tests use to validate any solution, whichever solver produced it.
// Pure C++; the CBC backend that solves it lives in sluice/solver/cbc.hpp.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"

namespace sluice::solver {

inline constexpr double infinity = std::numeric_limits<double>::infinity();

enum class Sense { minimize, maximize };

// binary is integer with bounds inside [0, 1]; it is kept apart so that models read as written.
enum class VarType { continuous, integer, binary };

// A sparse linear expression sum(coef * var), built term by term:
//   LinearExpr expr;  expr.add(x, 1.0).add(z, -1.0);    or    LinearExpr{{x, 1.0}, {z, -1.0}}
// Terms are checked when the expression is added to a model; a variable may appear more than once.
class LinearExpr {
public:
  LinearExpr() = default;
  LinearExpr(std::initializer_list<std::pair<int, double>> terms) {
    reserve(terms.size());
    for (const auto& [var, coef] : terms) add(var, coef);
  }

  LinearExpr& add(int var, double coef) {
    vars_.push_back(var);
    coefs_.push_back(coef);
    return *this;
  }

  void reserve(std::size_t terms) {
    vars_.reserve(terms);
    coefs_.reserve(terms);
  }
  void clear() noexcept {
    vars_.clear();
    coefs_.clear();
  }

  [[nodiscard]] Span<const int> vars() const noexcept { return vars_; }
  [[nodiscard]] Span<const double> coefs() const noexcept { return coefs_; }
  [[nodiscard]] std::size_t size() const noexcept { return vars_.size(); }
  [[nodiscard]] bool empty() const noexcept { return vars_.empty(); }

private:
  std::vector<int> vars_;
  std::vector<double> coefs_;
};

// One row of a model, viewed in place: lower <= sum(coefs[k] * x[vars[k]]) <= upper.
struct RowView {
  Span<const int> vars;
  Span<const double> coefs;
  double lower;
  double upper;
};

class Model {
public:
  // Bounds may be infinite (solver::infinity) for continuous and integer variables. Binary variables
  // take bounds inside [0, 1] (both 0 or both 1 fixes one); add_binary gives the usual [0, 1].
  int add_variable(double lower, double upper, VarType type, double objective_coefficient, std::string name = {}) {
    const int var = num_variables();
    check_bounds(var, name, lower, upper, type);
    sluice::require(std::isfinite(objective_coefficient), "milp: objective coefficient of ", describe(var, name),
                    " must be finite, got ", objective_coefficient);
    lower_.push_back(lower);
    upper_.push_back(upper);
    type_.push_back(type);
    objective_.push_back(objective_coefficient);
    var_name_.push_back(std::move(name));
    return var;
  }

  int add_binary(double objective_coefficient, std::string name = {}) {
    return add_variable(0.0, 1.0, VarType::binary, objective_coefficient, std::move(name));
  }

  // lower <= sum(coefs[k] * x[vars[k]]) <= upper; use +-infinity for a one-sided row. Repeated variables
  // are summed and zero coefficients dropped, so each stored row lists every variable once, in index order.
  int add_constraint(Span<const int> vars, Span<const double> coefs, double lower, double upper,
                     std::string name = {}) {
    const int row = num_constraints();
    sluice::require(vars.size() == coefs.size(), "milp: ", describe_row(row, name), " has ", vars.size(),
                    " variables but ", coefs.size(), " coefficients");
    check_interval(describe_row(row, name), lower, upper);
    for (std::size_t k = 0; k < vars.size(); ++k) {
      sluice::require(vars[k] >= 0 && vars[k] < num_variables(), "milp: ", describe_row(row, name),
                      " refers to unknown variable ", vars[k], " (the model has ", num_variables(), ")");
      sluice::require(std::isfinite(coefs[k]), "milp: coefficient of ", describe(vars[k], var_name_[vars[k]]), " in ",
                      describe_row(row, name), " must be finite, got ", coefs[k]);
    }

    std::vector<std::size_t> order(vars.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return vars[x] < vars[y]; });
    for (std::size_t k = 0; k < order.size();) {
      const int var = vars[order[k]];
      double coef = 0.0;
      for (; k < order.size() && vars[order[k]] == var; ++k) coef += coefs[order[k]];
      if (!std::isfinite(coef)) {
        row_vars_.resize(row_start_.back());  // leave the model as it was
        row_coefs_.resize(row_start_.back());
        sluice::fail("milp: coefficients of ", describe(var, var_name_[var]), " in ", describe_row(row, name),
                     " overflow when summed");
      }
      if (coef != 0.0) {
        row_vars_.push_back(var);
        row_coefs_.push_back(coef);
      }
    }
    row_start_.push_back(row_vars_.size());
    row_lower_.push_back(lower);
    row_upper_.push_back(upper);
    row_name_.push_back(std::move(name));
    return row;
  }

  int add_constraint(const LinearExpr& expr, double lower, double upper, std::string name = {}) {
    return add_constraint(expr.vars(), expr.coefs(), lower, upper, std::move(name));
  }
  int add_less_equal(const LinearExpr& expr, double rhs, std::string name = {}) {
    return add_constraint(expr, -infinity, rhs, std::move(name));
  }
  int add_greater_equal(const LinearExpr& expr, double rhs, std::string name = {}) {
    return add_constraint(expr, rhs, infinity, std::move(name));
  }
  int add_equal(const LinearExpr& expr, double rhs, std::string name = {}) {
    sluice::require(std::isfinite(rhs), "milp: right-hand side of equality ", describe_row(num_constraints(), name),
                    " must be finite, got ", rhs);
    return add_constraint(expr, rhs, rhs, std::move(name));
  }

  void set_sense(Sense sense) noexcept { sense_ = sense; }
  void set_objective_offset(double offset) {
    sluice::require(std::isfinite(offset), "milp: objective offset must be finite, got ", offset);
    offset_ = offset;
  }
  void set_objective_coefficient(int var, double coef) {
    check_var(var, "set_objective_coefficient");
    sluice::require(std::isfinite(coef), "milp: objective coefficient of ", describe(var, var_name_[var]),
                    " must be finite, got ", coef);
    objective_[var] = coef;
  }
  // Lets a planner re-solve one model with variables fixed or released, under the rules of add_variable.
  void set_bounds(int var, double lower, double upper) {
    check_var(var, "set_bounds");
    check_bounds(var, var_name_[var], lower, upper, type_[var]);
    lower_[var] = lower;
    upper_[var] = upper;
  }

  [[nodiscard]] int num_variables() const noexcept { return static_cast<int>(lower_.size()); }
  [[nodiscard]] int num_constraints() const noexcept { return static_cast<int>(row_lower_.size()); }
  [[nodiscard]] std::size_t num_nonzeros() const noexcept { return row_vars_.size(); }
  [[nodiscard]] Sense sense() const noexcept { return sense_; }
  [[nodiscard]] double objective_offset() const noexcept { return offset_; }

  [[nodiscard]] Span<const double> lower_bounds() const noexcept { return lower_; }
  [[nodiscard]] Span<const double> upper_bounds() const noexcept { return upper_; }
  [[nodiscard]] Span<const VarType> types() const noexcept { return type_; }
  [[nodiscard]] Span<const double> objective_coefficients() const noexcept { return objective_; }
  [[nodiscard]] bool is_integral(int var) const {
    check_var(var, "is_integral");
    return type_[var] != VarType::continuous;
  }
  [[nodiscard]] const std::string& variable_name(int var) const {
    check_var(var, "variable_name");
    return var_name_[var];
  }

  // Compressed sparse rows: row r holds entries [row_starts()[r], row_starts()[r + 1]).
  [[nodiscard]] Span<const std::size_t> row_starts() const noexcept { return row_start_; }
  [[nodiscard]] Span<const int> row_vars() const noexcept { return row_vars_; }
  [[nodiscard]] Span<const double> row_coefs() const noexcept { return row_coefs_; }
  [[nodiscard]] Span<const double> row_lower_bounds() const noexcept { return row_lower_; }
  [[nodiscard]] Span<const double> row_upper_bounds() const noexcept { return row_upper_; }
  [[nodiscard]] RowView row(int r) const {
    check_row(r, "row");
    const std::size_t begin = row_start_[r];
    const std::size_t count = row_start_[r + 1] - begin;
    return {Span(row_vars_).subspan(begin, count), Span(row_coefs_).subspan(begin, count), row_lower_[r],
            row_upper_[r]};
  }
  [[nodiscard]] const std::string& constraint_name(int r) const {
    check_row(r, "constraint_name");
    return row_name_[r];
  }

  // offset + sum(objective[j] * x[j]), in the model's own sense.
  [[nodiscard]] double evaluate_objective(Span<const double> x) const {
    check_point(x, "evaluate_objective");
    double value = offset_;
    for (std::size_t j = 0; j < x.size(); ++j) value += objective_[j] * x[j];
    return value;
  }

  // Bounds, integrality and rows. A bound or row may be missed by tolerance * max(1, magnitude), where the
  // magnitude is the bound's for a variable and the largest |coef * x| term's for a row: absolute near zero,
  // relative for large values (a makespan row over token counts). Integrality is within tolerance, absolute.
  // A point with a NaN or infinite value is not feasible.
  [[nodiscard]] bool is_feasible(Span<const double> x, double tolerance) const {
    check_size(x, "is_feasible");
    sluice::require(std::isfinite(tolerance) && tolerance >= 0.0,
                    "milp: is_feasible tolerance must be finite and >= 0, got ", tolerance);
    auto slack = [tolerance](double magnitude) { return tolerance * std::max(1.0, std::abs(magnitude)); };
    for (std::size_t j = 0; j < x.size(); ++j) {
      if (!std::isfinite(x[j])) return false;
      if (x[j] < lower_[j] - slack(lower_[j]) || x[j] > upper_[j] + slack(upper_[j])) return false;
      if (type_[j] != VarType::continuous && std::abs(x[j] - std::round(x[j])) > tolerance) return false;
    }
    for (std::size_t r = 0; r < row_lower_.size(); ++r) {
      double activity = 0.0;
      double magnitude = 0.0;
      for (std::size_t k = row_start_[r]; k < row_start_[r + 1]; ++k) {
        const double term = row_coefs_[k] * x[row_vars_[k]];
        activity += term;
        magnitude = std::max(magnitude, std::abs(term));
      }
      if (activity < row_lower_[r] - slack(magnitude) || activity > row_upper_[r] + slack(magnitude)) return false;
    }
    return true;
  }

private:
  // The bounds of a variable or a row: no NaN, not empty, and not +inf below or -inf above.
  static void check_interval(const std::string& what, double lower, double upper) {
    sluice::require(!std::isnan(lower) && !std::isnan(upper), "milp: ", what, " has a NaN bound [", lower, ", ", upper,
                    "]");
    sluice::require(lower != infinity, "milp: lower bound of ", what, " must not be +infinity");
    sluice::require(upper != -infinity, "milp: upper bound of ", what, " must not be -infinity");
    sluice::require(lower <= upper, "milp: ", what, " has lower bound ", lower, " > upper bound ", upper);
  }

  static std::string describe(int var, const std::string& name) {
    return name.empty() ? sluice::concat("variable ", var) : sluice::concat("variable ", var, " '", name, "'");
  }
  static std::string describe_row(int row, const std::string& name) {
    return name.empty() ? sluice::concat("constraint ", row) : sluice::concat("constraint ", row, " '", name, "'");
  }

  static void check_bounds(int var, const std::string& name, double lower, double upper, VarType type) {
    check_interval(describe(var, name), lower, upper);
    if (type == VarType::binary) {
      sluice::require(lower >= 0.0 && upper <= 1.0, "milp: binary ", describe(var, name),
                      " needs bounds inside [0, 1], got [", lower, ", ", upper, "]");
    }
  }

  void check_var(int var, const char* where) const {
    sluice::require(var >= 0 && var < num_variables(), "milp: ", where, ": unknown variable ", var, " (the model has ",
                    num_variables(), ")");
  }
  void check_row(int row, const char* where) const {
    sluice::require(row >= 0 && row < num_constraints(), "milp: ", where, ": unknown constraint ", row,
                    " (the model has ", num_constraints(), ")");
  }
  void check_size(Span<const double> x, const char* where) const {
    sluice::require(x.size() == lower_.size(), "milp: ", where, ": expected ", lower_.size(), " values, got ",
                    x.size());
  }
  void check_point(Span<const double> x, const char* where) const {
    check_size(x, where);
    for (std::size_t j = 0; j < x.size(); ++j) {
      sluice::require(std::isfinite(x[j]), "milp: ", where, ": value of ", describe(static_cast<int>(j), var_name_[j]),
                      " must be finite, got ", x[j]);
    }
  }

  Sense sense_ = Sense::minimize;
  double offset_ = 0.0;

  std::vector<double> lower_;
  std::vector<double> upper_;
  std::vector<VarType> type_;
  std::vector<double> objective_;
  std::vector<std::string> var_name_;

  std::vector<std::size_t> row_start_{0};
  std::vector<int> row_vars_;
  std::vector<double> row_coefs_;
  std::vector<double> row_lower_;
  std::vector<double> row_upper_;
  std::vector<std::string> row_name_;
};

// The result of solving a Model, whatever the backend.
enum class SolveStatus {
  optimal,     // search finished: the solution is optimal (within relative_gap)
  feasible,    // stopped (time limit, or CBC gave up on numerical trouble) with an incumbent or the warm start
  infeasible,  // proven to have no solution
  unbounded,   // the linear relaxation is unbounded (CBC stops there, whether or not an integer point exists)
  no_solution  // stopped (time limit, or numerical trouble) before finding any solution
};

struct Solution {
  SolveStatus status = SolveStatus::no_solution;
  // Objective of `values` including the model's offset; with no values, +infinity when minimising
  // (-infinity when maximising), and the opposite infinity when unbounded.
  double objective = 0.0;
  // The best bound the solver proved on the objective, in the model's sense and with its offset: <= objective
  // when minimising, >= when maximising (up to CBC's tolerances); -infinity (+infinity) when it has none.
  double best_bound = 0.0;
  // One value per variable (integer and binary variables exactly integral), or empty without a solution.
  std::vector<double> values;
  double seconds = 0.0;  // wall clock for the whole call
};

}  // namespace sluice::solver
