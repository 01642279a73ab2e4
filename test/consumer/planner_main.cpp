// A trainer that only plans: a profile built in code (no JSON), one iteration's batch dispatched and packed.
// Built against sluice::sluice alone, with Eigen, nlohmann-json and Boost shadowed by headers that #error.
#include <iostream>
#include <vector>

#include <sluice/planners.hpp>

int main() {
  sluice::cost::ProfileSpec spec;
  spec.name = "toy";
  spec.source = "planner consumer";
  spec.model = {"toy", 8, 1024, 0};
  spec.gpus = 8;
  spec.schemes = {{sluice::Scheme(1, 1), sluice::cost::QuadraticLatency(1e-9, 1e-5, 1e-3), 4096, {}},
                  {sluice::Scheme(2, 1), sluice::cost::QuadraticLatency(5e-10, 5e-6, 1e-3), 16384, {}}};
  const sluice::cost::Profile profile(spec);
  std::vector<sluice::Sequence> batch;
  for (int i = 0; i < 64; ++i) batch.emplace_back(i, 128 + 97 * i);
  const std::vector<sluice::Strategy> candidates{
      sluice::Strategy({{sluice::Scheme(2, 1), 4}}),
      sluice::Strategy({{sluice::Scheme(1, 1), 4}, {sluice::Scheme(2, 1), 2}})};
  const sluice::assign::IterationPlan plan = sluice::assign::plan_iteration(batch, candidates, profile);
  sluice::assign::validate(plan, batch, profile);
  std::cout << plan.strategy.name() << " " << plan.estimate << " s\n";
  return plan.estimate > 0 ? 0 : 1;
}
