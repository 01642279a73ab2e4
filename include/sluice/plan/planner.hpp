#pragma once
// The sluice plan of every iteration, planned ahead of the trainer on worker threads (schedule::Planner): what a
// synchronous loop of IterationPlanner::plan gives, in order, whatever the thread count.
#include <cstdint>
#include <span>
#include <utility>

#include "sluice/core/sequence.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/schedule/iteration.hpp"
#include "sluice/schedule/planner.hpp"

namespace sluice::plan {

inline schedule::Planner<schedule::SimulatedIteration> plan_ahead(IterationPlanner planner,
                                                                  schedule::BatchSource source,
                                                                  schedule::PlannerOptions options = {}) {
  return schedule::Planner<schedule::SimulatedIteration>(
      std::move(source),
      [planner = std::move(planner)](std::int64_t, std::span<const Sequence> batch) { return planner.plan(batch); },
      options);
}

}  // namespace sluice::plan
