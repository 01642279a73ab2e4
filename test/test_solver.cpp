#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <vector>

#include "cbc_leak_suppression.hpp"
#include "sluice/core/random.hpp"
#include "sluice/io/solver_json.hpp"
#include "sluice/solver/cbc.hpp"
#include "sluice/solver/milp.hpp"
#include "support.hpp"

using namespace sluice;
using solver::LinearExpr;
using solver::Sense;
using solver::SolveStatus;
using solver::VarType;

namespace {

constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();

// max 3x + 2y  s.t.  x + y <= 4,  x + 3y <= 6,  0 <= x <= 3,  y >= 0;  optimum x = 3, y = 1, value 11.
solver::Model small_lp(Sense sense) {
  solver::Model model;
  const double sign = sense == Sense::maximize ? 1.0 : -1.0;
  const int x = model.add_variable(0, 3, VarType::continuous, 3 * sign, "x");
  const int y = model.add_variable(0, inf, VarType::continuous, 2 * sign, "y");
  model.add_less_equal({{x, 1}, {y, 1}}, 4);
  model.add_less_equal({{x, 1}, {y, 3}}, 6);
  model.set_sense(sense);
  return model;
}

// Min-max makespan: jobs with times on identical machines, optionally with a per-machine cap on the
// jobs' lengths. Variables x[i * machines + j] (job i on machine j), then the makespan z last.
struct Makespan {
  std::vector<double> times;
  std::vector<double> lengths;
  std::optional<double> capacity;
  int machines = 1;
};

solver::Model makespan_model(const Makespan& instance) {
  solver::Model model;
  const int jobs = static_cast<int>(instance.times.size());
  for (int i = 0; i < jobs; ++i) {
    for (int j = 0; j < instance.machines; ++j) model.add_binary(0.0);
  }
  const int z = model.add_variable(0, inf, VarType::continuous, 1.0, "makespan");
  for (int i = 0; i < jobs; ++i) {
    LinearExpr once;
    for (int j = 0; j < instance.machines; ++j) once.add(i * instance.machines + j, 1.0);
    model.add_equal(once, 1.0);
  }
  for (int j = 0; j < instance.machines; ++j) {
    LinearExpr load{{z, -1.0}};
    for (int i = 0; i < jobs; ++i) load.add(i * instance.machines + j, instance.times[i]);
    model.add_less_equal(load, 0.0);
    if (instance.capacity) {
      LinearExpr used;
      for (int i = 0; i < jobs; ++i) used.add(i * instance.machines + j, instance.lengths[i]);
      model.add_less_equal(used, *instance.capacity);
    }
  }
  return model;
}

// Every assignment of jobs to machines; nullopt when the capacities admit none.
std::optional<double> brute_force_makespan(const Makespan& instance) {
  const int jobs = static_cast<int>(instance.times.size());
  std::int64_t count = 1;
  for (int i = 0; i < jobs; ++i) count *= instance.machines;
  std::optional<double> best;
  std::vector<double> load(static_cast<std::size_t>(instance.machines));
  std::vector<double> used(static_cast<std::size_t>(instance.machines));
  for (std::int64_t code = 0; code < count; ++code) {
    std::ranges::fill(load, 0.0);
    std::ranges::fill(used, 0.0);
    std::int64_t rest = code;
    for (int i = 0; i < jobs; ++i) {
      const auto j = static_cast<std::size_t>(rest % instance.machines);
      rest /= instance.machines;
      load[j] += instance.times[i];
      used[j] += instance.lengths.empty() ? 0.0 : instance.lengths[i];
    }
    if (instance.capacity && std::ranges::max(used) > *instance.capacity) continue;
    const double makespan = std::ranges::max(load);
    if (!best || makespan < *best) best = makespan;
  }
  return best;
}

Makespan random_makespan(Rng& rng, int jobs, int machines, bool capped) {
  Makespan instance;
  instance.machines = machines;
  double total_length = 0;
  for (int i = 0; i < jobs; ++i) {
    instance.times.push_back(static_cast<double>(rng.uniform_int(1, 100)) / 8.0);
    instance.lengths.push_back(static_cast<double>(rng.uniform_int(100, 4000)));
    total_length += instance.lengths.back();
  }
  // Sometimes too tight to admit any assignment, so that infeasibility is cross-checked too.
  if (capped) instance.capacity = std::round(total_length / machines * (0.9 + 0.4 * rng.uniform()));
  return instance;
}

// Assigns job i to machine i % machines and sets z to the resulting makespan.
std::vector<double> round_robin(const Makespan& instance) {
  const auto jobs = instance.times.size();
  const auto machines = static_cast<std::size_t>(instance.machines);
  std::vector<double> x(jobs * machines + 1, 0.0);
  std::vector<double> load(machines, 0.0);
  for (std::size_t i = 0; i < jobs; ++i) {
    x[i * machines + i % machines] = 1.0;
    load[i % machines] += instance.times[i];
  }
  x.back() = std::ranges::max(load);
  return x;
}

// Runs `body` with stdout pointed at a temporary file and returns how many bytes were written.
template <class Body>
long stdout_bytes_during(Body&& body) {
  std::fflush(stdout);
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  const int saved = dup(STDOUT_FILENO);
  REQUIRE(saved >= 0);
  REQUIRE(dup2(fileno(capture), STDOUT_FILENO) >= 0);
  body();
  std::fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  ::close(saved);
  std::fseek(capture, 0, SEEK_END);
  const long bytes = std::ftell(capture);
  std::fclose(capture);
  return bytes;
}

}  // namespace

TEST_CASE("milp: bad variables are rejected, naming the field and value") {
  solver::Model model;
  const int x = model.add_variable(-inf, inf, VarType::continuous, 1.0, "x");
  CHECK(x == 0);
  CHECK_THROWS_WITH_AS(model.add_variable(not_a_number, 1, VarType::continuous, 0), doctest::Contains("NaN bound"),
                       invalid_input);
  CHECK_THROWS_AS(model.add_variable(0, not_a_number, VarType::integer, 0), invalid_input);
  CHECK_THROWS_WITH_AS(model.add_variable(2, 1, VarType::integer, 0, "y"),
                       doctest::Contains("variable 1 'y' has lower bound 2 > upper bound 1"), invalid_input);
  CHECK_THROWS_AS(model.add_variable(inf, inf, VarType::continuous, 0), invalid_input);
  CHECK_THROWS_AS(model.add_variable(-inf, -inf, VarType::continuous, 0), invalid_input);
  CHECK_THROWS_WITH_AS(model.add_variable(0, 1, VarType::continuous, inf), doctest::Contains("objective coefficient"),
                       invalid_input);
  CHECK_THROWS_AS(model.add_variable(0, 1, VarType::continuous, not_a_number), invalid_input);
  CHECK_THROWS_WITH_AS(model.add_variable(0, 2, VarType::binary, 0), doctest::Contains("inside [0, 1]"), invalid_input);
  CHECK_THROWS_AS(model.add_variable(-1, 1, VarType::binary, 0), invalid_input);
  CHECK_THROWS_AS(model.add_variable(-inf, inf, VarType::binary, 0), invalid_input);
  CHECK(model.add_variable(1, 1, VarType::binary, 0) == 1);  // a fixed binary is fine
  CHECK(model.num_variables() == 2);                         // failed calls added nothing

  CHECK_THROWS_AS(model.set_objective_offset(not_a_number), invalid_input);
  CHECK_THROWS_AS(model.set_objective_offset(-inf), invalid_input);
  CHECK_THROWS_AS(model.set_objective_coefficient(2, 1.0), invalid_input);
  CHECK_THROWS_AS(model.set_objective_coefficient(-1, 1.0), invalid_input);
  CHECK_THROWS_AS(model.set_objective_coefficient(0, not_a_number), invalid_input);
  CHECK_THROWS_AS(model.set_bounds(1, 0, 2), invalid_input);
  CHECK_THROWS_AS(model.set_bounds(0, 1, 0), invalid_input);
  CHECK_THROWS_WITH_AS(model.set_bounds(5, 0, 1), doctest::Contains("unknown variable 5"), invalid_input);
  CHECK_THROWS_AS((void)model.variable_name(2), invalid_input);
  CHECK_THROWS_AS((void)model.is_integral(-1), invalid_input);
  model.set_bounds(1, 0, 1);
  model.set_objective_coefficient(1, -2.5);
  CHECK(model.lower_bounds()[1] == 0.0);
  CHECK(model.objective_coefficients()[1] == -2.5);
}

TEST_CASE("milp: bad constraints are rejected and leave the model unchanged") {
  solver::Model model;
  const int x = model.add_binary(1.0, "x");
  const int y = model.add_variable(0, 10, VarType::integer, 1.0);
  const std::vector<int> vars = {x, y};
  const std::vector<double> coefs = {1.0, 2.0};
  const std::vector<double> one_coef = {1.0};
  CHECK_THROWS_WITH_AS(model.add_constraint(vars, one_coef, 0, 1), doctest::Contains("2 variables but 1 coefficients"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(model.add_less_equal({{x, 1}, {7, 1}}, 1, "cap"),
                       doctest::Contains("constraint 0 'cap' refers to unknown variable 7"), invalid_input);
  CHECK_THROWS_AS(model.add_less_equal({{-1, 1}}, 1), invalid_input);
  CHECK_THROWS_WITH_AS(model.add_less_equal({{x, not_a_number}}, 1), doctest::Contains("coefficient of variable 0 'x'"),
                       invalid_input);
  CHECK_THROWS_AS(model.add_less_equal({{x, inf}}, 1), invalid_input);
  CHECK_THROWS_AS(model.add_constraint(vars, coefs, 2, 1), invalid_input);
  CHECK_THROWS_AS(model.add_constraint(vars, coefs, not_a_number, 1), invalid_input);
  CHECK_THROWS_AS(model.add_constraint(vars, coefs, inf, inf), invalid_input);
  CHECK_THROWS_AS(model.add_constraint(vars, coefs, -inf, -inf), invalid_input);
  CHECK_THROWS_AS(model.add_less_equal({{x, 1}}, not_a_number), invalid_input);
  CHECK_THROWS_AS(model.add_greater_equal({{x, 1}}, inf), invalid_input);
  CHECK_THROWS_AS(model.add_equal({{x, 1}}, inf), invalid_input);
  const double huge = std::numeric_limits<double>::max();
  CHECK_THROWS_WITH_AS(model.add_less_equal({{y, 1}, {x, huge}, {x, huge}}, 1), doctest::Contains("overflow"),
                       invalid_input);
  CHECK(model.num_constraints() == 0);
  CHECK(model.num_nonzeros() == 0);
  CHECK_THROWS_AS((void)model.row(0), invalid_input);
  CHECK_THROWS_AS((void)model.constraint_name(0), invalid_input);
}

TEST_CASE("milp: rows are stored sparse, merged and in variable order") {
  solver::Model model;
  const int a = model.add_variable(0, 5, VarType::integer, 1.0, "a");
  const int b = model.add_variable(0, 5, VarType::continuous, 2.0, "b");
  const int c = model.add_binary(3.0, "c");
  CHECK(model.add_less_equal({{c, 2}, {a, 1}, {c, 3}, {b, 0}}, 10, "first") == 0);
  CHECK(model.add_constraint(LinearExpr{{b, 1}, {a, -1}, {a, 1}}, -1, 1) == 1);
  CHECK(model.add_equal({}, 0) == 2);  // an empty row is allowed: 0 == 0
  CHECK(model.num_constraints() == 3);
  CHECK(model.num_nonzeros() == 3);

  const auto first = model.row(0);
  CHECK(std::vector<int>(first.vars.begin(), first.vars.end()) == std::vector<int>{a, c});
  CHECK(std::vector<double>(first.coefs.begin(), first.coefs.end()) == std::vector<double>{1.0, 5.0});
  CHECK(first.lower == -inf);
  CHECK(first.upper == 10.0);
  CHECK(model.constraint_name(0) == "first");
  const auto second = model.row(1);
  CHECK(std::vector<int>(second.vars.begin(), second.vars.end()) == std::vector<int>{b});  // a - a cancels
  CHECK(model.row(2).vars.empty());

  CHECK(std::vector<std::size_t>(model.row_starts().begin(), model.row_starts().end()) ==
        std::vector<std::size_t>{0, 2, 3, 3});
  CHECK(model.row_vars().size() == 3);
  CHECK(model.row_lower_bounds()[1] == -1.0);
  CHECK(model.row_upper_bounds()[2] == 0.0);
  CHECK(model.variable_name(b) == "b");
  CHECK(model.is_integral(a));
  CHECK_FALSE(model.is_integral(b));
  CHECK(model.is_integral(c));
  CHECK(model.types()[c] == VarType::binary);
  CHECK(model.upper_bounds()[c] == 1.0);
}

TEST_CASE("milp: evaluate_objective and is_feasible on hand examples") {
  solver::Model model;
  const int x = model.add_variable(0, 4, VarType::integer, 2.0, "x");
  const int y = model.add_variable(-inf, 3, VarType::continuous, -1.0, "y");
  const int z = model.add_binary(10.0, "z");
  model.add_constraint(LinearExpr{{x, 1}, {y, 1}}, 1, 5);
  model.add_greater_equal({{x, 1}, {z, -4}}, 0);  // z = 1 needs x >= 4
  model.set_objective_offset(0.5);

  CHECK(model.evaluate_objective(std::vector<double>{4, 1, 1}) == doctest::Approx(8 - 1 + 10 + 0.5));
  CHECK(model.evaluate_objective(std::vector<double>{0, 0, 0}) == 0.5);
  CHECK_THROWS_WITH_AS((void)model.evaluate_objective(std::vector<double>{1, 2}),
                       doctest::Contains("expected 3 values, got 2"), invalid_input);
  CHECK_THROWS_AS((void)model.evaluate_objective(std::vector<double>{1, not_a_number, 0}), invalid_input);

  CHECK(model.is_feasible(std::vector<double>{4, 1, 1}, 1e-9));
  CHECK(model.is_feasible(std::vector<double>{2, -1, 0}, 1e-9));
  CHECK(model.is_feasible(std::vector<double>{1, 0, 0}, 0.0));
  CHECK_FALSE(model.is_feasible(std::vector<double>{2, 0.5, 1}, 1e-9));  // z = 1 with x < 4
  CHECK_FALSE(model.is_feasible(std::vector<double>{0, 0, 0}, 1e-9));    // first row below 1
  CHECK_FALSE(model.is_feasible(std::vector<double>{4, 3, 0}, 1e-9));    // first row above 5
  CHECK_FALSE(model.is_feasible(std::vector<double>{1.5, 0, 0}, 1e-9));  // x fractional
  CHECK_FALSE(model.is_feasible(std::vector<double>{5, -1, 0}, 1e-9));   // x above its bound
  CHECK_FALSE(model.is_feasible(std::vector<double>{1, 0, 0.5}, 1e-9));  // z fractional
  CHECK_FALSE(model.is_feasible(std::vector<double>{1, not_a_number, 0}, 1e-9));
  CHECK_FALSE(model.is_feasible(std::vector<double>{1, -inf, 0}, 1e-9));
  // Tolerances: absolute near zero, and integrality within the tolerance.
  CHECK(model.is_feasible(std::vector<double>{1 + 1e-8, -1e-8, 0}, 1e-7));
  CHECK_FALSE(model.is_feasible(std::vector<double>{1 + 1e-8, -1e-8, 0}, 1e-9));
  CHECK(model.is_feasible(std::vector<double>{4 + 1e-7, 1, 1}, 1e-6));
  CHECK_THROWS_AS((void)model.is_feasible(std::vector<double>{1, 0, 0}, -1e-6), invalid_input);
  CHECK_THROWS_AS((void)model.is_feasible(std::vector<double>{1, 0, 0}, not_a_number), invalid_input);
  CHECK_THROWS_AS((void)model.is_feasible(std::vector<double>{1, 0}, 1e-6), invalid_input);

  // Row tolerance is relative to the row's largest term: a 1e-3 miss on a 1e4-token row passes at 1e-6.
  solver::Model big;
  const int t = big.add_variable(0, inf, VarType::continuous, 0);
  big.add_less_equal({{t, 1e4}}, 1e8);
  CHECK(big.is_feasible(std::vector<double>{1e4 + 1e-4}, 1e-6));
  CHECK_FALSE(big.is_feasible(std::vector<double>{1e4 + 1e-1}, 1e-6));
}

TEST_CASE("cbc: bad input is rejected") {
  CHECK_THROWS_WITH_AS(solver::solve_with_cbc(solver::Model{}), doctest::Contains("empty"), invalid_input);
  const solver::Model model = small_lp(Sense::maximize);
  CHECK_THROWS_WITH_AS(solver::solve_with_cbc(model, {.time_limit_seconds = -1}),
                       doctest::Contains("time_limit_seconds must be > 0"), invalid_input);
  CHECK_THROWS_AS(solver::solve_with_cbc(model, {.time_limit_seconds = 0}), invalid_input);
  CHECK_THROWS_AS(solver::solve_with_cbc(model, {.time_limit_seconds = not_a_number}), invalid_input);
  CHECK_THROWS_AS(solver::solve_with_cbc(model, {.threads = 0}), invalid_input);
  CHECK_THROWS_AS(solver::solve_with_cbc(model, {.threads = 100}), invalid_input);
  CHECK_THROWS_AS(solver::solve_with_cbc(model, {.relative_gap = -0.1}), invalid_input);
  CHECK_THROWS_AS(solver::solve_with_cbc(model, {.relative_gap = inf}), invalid_input);
  CHECK_THROWS_WITH_AS(solver::solve_with_cbc(model, {.warm_start = std::vector<double>{1.0}}),
                       doctest::Contains("warm_start has 1 values"), invalid_input);
  const std::vector<double> outside = {3.0, 3.0};  // x + y <= 4 fails
  CHECK_THROWS_WITH_AS(solver::solve_with_cbc(model, {.warm_start = outside}),
                       doctest::Contains("not a feasible point"), invalid_input);
}

TEST_CASE("cbc: a small LP, either sense, with an objective offset") {
  for (const Sense sense : {Sense::minimize, Sense::maximize}) {
    CAPTURE(static_cast<int>(sense));
    solver::Model model = small_lp(sense);
    model.set_objective_offset(5.0);
    const auto solution = solver::solve_with_cbc(model);
    const double expected = sense == Sense::maximize ? 11.0 + 5.0 : -11.0 + 5.0;
    REQUIRE(solution.status == SolveStatus::optimal);
    CHECK(solution.objective == doctest::Approx(expected).epsilon(1e-9));
    CHECK(solution.best_bound == doctest::Approx(expected).epsilon(1e-9));
    REQUIRE(solution.values.size() == 2);
    CHECK(solution.values[0] == doctest::Approx(3.0));
    CHECK(solution.values[1] == doctest::Approx(1.0));
    CHECK(model.is_feasible(solution.values, 1e-7));
    CHECK(solution.seconds >= 0.0);
  }
}

TEST_CASE("cbc: a knapsack, maximised, and the same with integer copies") {
  // weights 12 2 1 1 4, values 4 2 1 2 10, capacity 15: take the last four for 15.
  const std::vector<double> weight = {12, 2, 1, 1, 4};
  const std::vector<double> value = {4, 2, 1, 2, 10};
  solver::Model model;
  LinearExpr load;
  for (std::size_t i = 0; i < weight.size(); ++i) load.add(model.add_binary(value[i]), weight[i]);
  model.add_less_equal(load, 15);
  model.set_sense(Sense::maximize);
  const auto solution = solver::solve_with_cbc(model);
  REQUIRE(solution.status == SolveStatus::optimal);
  CHECK(solution.objective == 15.0);
  CHECK(solution.values == std::vector<double>{0, 1, 1, 1, 1});
  CHECK(solution.best_bound == doctest::Approx(15.0));

  // Up to 3 copies of each: 3 of item 4 (weight 3, value 6) and 3 of item 5 (weight 12, value 30) = 36.
  solver::Model copies;
  LinearExpr used;
  for (std::size_t i = 0; i < weight.size(); ++i) {
    used.add(copies.add_variable(0, 3, VarType::integer, value[i]), weight[i]);
  }
  copies.add_less_equal(used, 15);
  copies.set_sense(Sense::maximize);
  const auto integer = solver::solve_with_cbc(copies);
  REQUIRE(integer.status == SolveStatus::optimal);
  CHECK(integer.objective == 36.0);
  CHECK(copies.is_feasible(integer.values, 0.0));  // integers come back exactly integral
}

TEST_CASE("cbc: random small binary programs agree with brute force") {
  Rng rng(20240611);
  int infeasible = 0;
  for (int trial = 0; trial < 30; ++trial) {
    CAPTURE(trial);
    const int n = static_cast<int>(rng.uniform_int(8, 12));
    solver::Model model;
    for (int j = 0; j < n; ++j) model.add_binary(std::round(rng.uniform() * 2000.0 - 1000.0) / 100.0);
    const int rows = static_cast<int>(rng.uniform_int(1, 4));
    for (int r = 0; r < rows; ++r) {
      LinearExpr row;
      double positive = 0;
      for (int j = 0; j < n; ++j) {
        if (rng.uniform() < 0.3) continue;
        const auto coef = static_cast<double>(rng.uniform_int(-5, 10));
        row.add(j, coef);
        positive += std::max(coef, 0.0);
      }
      // Mostly <= rows; an occasional >= row can make the program infeasible.
      if (rng.uniform() < 0.8) {
        model.add_less_equal(row, std::round(positive * rng.uniform()));
      } else {
        model.add_greater_equal(row, std::round(positive * (0.5 + 0.6 * rng.uniform())));
      }
    }
    model.set_sense(rng.uniform() < 0.5 ? Sense::minimize : Sense::maximize);

    std::optional<double> best;
    std::vector<double> x(static_cast<std::size_t>(n));
    for (std::uint32_t mask = 0; mask < (1U << n); ++mask) {
      for (int j = 0; j < n; ++j) x[j] = (mask >> j) & 1U;
      if (!model.is_feasible(x, 1e-9)) continue;
      const double value = model.evaluate_objective(x);
      if (!best || (model.sense() == Sense::minimize ? value < *best : value > *best)) best = value;
    }

    const auto solution = solver::solve_with_cbc(model);
    if (!best) {
      ++infeasible;
      CHECK(solution.status == SolveStatus::infeasible);
      CHECK(solution.values.empty());
      continue;
    }
    REQUIRE(solution.status == SolveStatus::optimal);
    CHECK(std::abs(solution.objective - *best) <= 1e-6);
    CHECK(model.is_feasible(solution.values, 1e-6));
    CHECK(solution.objective == model.evaluate_objective(solution.values));
  }
  CHECK(infeasible > 0);  // both outcomes are exercised
  CHECK(infeasible < 30);
}

TEST_CASE("cbc: min-max makespan assignment agrees with brute force") {
  Rng rng(77);
  int infeasible = 0;
  for (int trial = 0; trial < 12; ++trial) {
    CAPTURE(trial);
    const int jobs = static_cast<int>(rng.uniform_int(3, 8));
    const int machines = static_cast<int>(rng.uniform_int(2, 3));
    const Makespan instance = random_makespan(rng, jobs, machines, trial % 2 == 1);
    const solver::Model model = makespan_model(instance);
    const auto expected = brute_force_makespan(instance);
    const auto solution = solver::solve_with_cbc(model);
    if (!expected) {
      ++infeasible;
      CHECK(solution.status == SolveStatus::infeasible);
      continue;
    }
    REQUIRE(solution.status == SolveStatus::optimal);
    CHECK(std::abs(solution.objective - *expected) <= 1e-6);
    CHECK(model.is_feasible(solution.values, 1e-6));
    CHECK(solution.best_bound <= solution.objective + 1e-6);
  }
  CHECK(infeasible > 0);
  CHECK(infeasible < 6);
}

TEST_CASE("cbc: infeasible and unbounded models report so") {
  SUBCASE("infeasible rows") {
    solver::Model model;
    const int x = model.add_binary(1.0);
    const int y = model.add_binary(1.0);
    model.add_greater_equal({{x, 1}, {y, 1}}, 3);
    const auto solution = solver::solve_with_cbc(model);
    CHECK(solution.status == SolveStatus::infeasible);
    CHECK(solution.values.empty());
    CHECK(solution.objective == inf);
  }
  SUBCASE("integer infeasible, LP feasible") {
    solver::Model model;
    const int x = model.add_variable(0, 5, VarType::integer, 1.0);
    const int y = model.add_variable(0, 5, VarType::integer, 1.0);
    model.add_equal({{x, 2}, {y, 2}}, 3);
    model.set_sense(Sense::maximize);
    const auto solution = solver::solve_with_cbc(model);
    CHECK(solution.status == SolveStatus::infeasible);
    CHECK(solution.objective == -inf);
  }
  SUBCASE("infeasible LP") {
    solver::Model model;
    const int x = model.add_variable(0, inf, VarType::continuous, 1.0);
    model.add_less_equal({{x, 1}}, -1);
    CHECK(solver::solve_with_cbc(model).status == SolveStatus::infeasible);
  }
  SUBCASE("unbounded LP") {
    solver::Model model;
    const int x = model.add_variable(0, inf, VarType::continuous, -1.0);
    const int y = model.add_variable(0, inf, VarType::continuous, 0.0);
    model.add_less_equal({{x, 1}, {y, -1}}, 2);
    const auto solution = solver::solve_with_cbc(model);
    CHECK(solution.status == SolveStatus::unbounded);
    CHECK(solution.values.empty());
    CHECK(solution.objective == -inf);
  }
  SUBCASE("unbounded MILP") {
    solver::Model model;
    const int x = model.add_variable(0, inf, VarType::integer, 1.0);
    const int y = model.add_variable(-inf, inf, VarType::integer, 0.0);
    model.add_less_equal({{x, 1}, {y, -2}}, 1);
    model.set_sense(Sense::maximize);
    const auto solution = solver::solve_with_cbc(model);
    CHECK(solution.status == SolveStatus::unbounded);
    CHECK(solution.objective == inf);
  }
}

TEST_CASE("cbc: a short time limit on a hard instance stops with or without an incumbent") {
  Rng rng(3);
  for (const int jobs : {40, 200}) {
    CAPTURE(jobs);
    const Makespan instance = random_makespan(rng, jobs, 13, false);
    const solver::Model model = makespan_model(instance);
    const auto solution = solver::solve_with_cbc(model, {.time_limit_seconds = 0.05});
    CAPTURE(static_cast<int>(solution.status));
    CHECK((solution.status == SolveStatus::feasible || solution.status == SolveStatus::no_solution));
    if (solution.status == SolveStatus::feasible) {
      CHECK(model.is_feasible(solution.values, 1e-6));
      CHECK(solution.best_bound <= solution.objective + 1e-6);
    } else {
      CHECK(solution.values.empty());
      CHECK(solution.objective == inf);
      CHECK(solution.best_bound <= solution.objective);
    }
  }
}

TEST_CASE("cbc: the same model gives the same solution") {
  Rng rng(9);
  const Makespan instance = random_makespan(rng, 9, 3, true);  // many optimal assignments to choose from
  const solver::Model model = makespan_model(instance);
  const auto first = solver::solve_with_cbc(model);
  const auto second = solver::solve_with_cbc(model);
  REQUIRE(first.status == SolveStatus::optimal);
  CHECK(second.status == first.status);
  CHECK(second.values == first.values);
  CHECK(second.objective == first.objective);
  CHECK(second.best_bound == first.best_bound);

  // A model saved as JSON and read back solves to the same solution.
  const auto reloaded = sluice::io::from_document<solver::Model>(sluice::io::to_document(model));
  CHECK(solver::solve_with_cbc(reloaded).values == first.values);

  // CBC's deterministic parallel mode: repeatable, and the same optimum.
  const auto parallel = solver::solve_with_cbc(model, {.threads = 2});
  const auto again = solver::solve_with_cbc(model, {.threads = 2});
  REQUIRE(parallel.status == SolveStatus::optimal);
  CHECK(parallel.objective == doctest::Approx(first.objective));
  CHECK(again.values == parallel.values);
}

TEST_CASE("cbc: a relative gap stops the search early and is reported as optimal") {
  Rng rng(12);
  const solver::Model model = makespan_model(random_makespan(rng, 14, 4, false));
  const auto solution = solver::solve_with_cbc(model, {.relative_gap = 0.05});
  REQUIRE(solution.status == SolveStatus::optimal);
  CHECK(model.is_feasible(solution.values, 1e-6));
  CHECK(solution.best_bound <= solution.objective + 1e-9);
  CHECK(solution.objective - solution.best_bound <= 0.05 * solution.objective + 1e-9);
}

TEST_CASE("cbc: a feasible warm start is used and never made worse") {
  Rng rng(5);
  for (int trial = 0; trial < 2; ++trial) {
    CAPTURE(trial);
    const Makespan instance = random_makespan(rng, 8, 3, false);
    const solver::Model model = makespan_model(instance);
    const std::vector<double> warm = round_robin(instance);
    REQUIRE(model.is_feasible(warm, 1e-9));
    const auto solution = solver::solve_with_cbc(model, {.warm_start = warm});
    REQUIRE(solution.status == SolveStatus::optimal);
    // A proof of optimality is also the bound, even where the start cut CBC's root LP off.
    CHECK(solution.best_bound == doctest::Approx(solution.objective).epsilon(1e-9));
    CHECK(solution.objective <= model.evaluate_objective(warm) + 1e-9);
    CHECK(std::abs(solution.objective - *brute_force_makespan(instance)) <= 1e-6);
  }
  // With a warm start and no time to improve it (CBC may not even reach it), the warm start comes back.
  const Makespan hard = random_makespan(rng, 200, 13, false);
  const solver::Model model = makespan_model(hard);
  const std::vector<double> warm = round_robin(hard);
  const auto solution = solver::solve_with_cbc(model, {.time_limit_seconds = 0.05, .warm_start = warm});
  REQUIRE(solution.status == SolveStatus::feasible);
  CHECK(solution.objective <= model.evaluate_objective(warm) + 1e-6);
  CHECK(model.is_feasible(solution.values, 1e-6));
}

TEST_CASE("cbc: silent unless asked to log") {
  Rng rng(9);
  const solver::Model model = makespan_model(random_makespan(rng, 8, 3, true));
  CHECK(stdout_bytes_during([&] { (void)solver::solve_with_cbc(model); }) == 0);
  CHECK(stdout_bytes_during([&] { (void)solver::solve_with_cbc(model, {.log = true}); }) > 0);
}
