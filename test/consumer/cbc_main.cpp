// Links sluice::cbc from an installed package (find_package(sluice COMPONENTS cbc)) and solves a small MILP.
#include <iostream>

#include <sluice/solver/cbc.hpp>

int main() {
  // max 3x + 2y  s.t.  x + y <= 4,  x + 3y <= 6,  x, y integer in [0, 3]: optimum x = 3, y = 1, value 11.
  sluice::solver::Model model;
  const int x = model.add_variable(0, 3, sluice::solver::VarType::integer, 3, "x");
  const int y = model.add_variable(0, 3, sluice::solver::VarType::integer, 2, "y");
  model.add_less_equal({{x, 1}, {y, 1}}, 4);
  model.add_less_equal({{x, 1}, {y, 3}}, 6);
  model.set_sense(sluice::solver::Sense::maximize);
  const sluice::solver::Solution solution = sluice::solver::solve_with_cbc(model);
  std::cout << "cbc objective " << solution.objective << "\n";
  return solution.status == sluice::solver::SolveStatus::optimal && solution.objective == 11.0 ? 0 : 1;
}
