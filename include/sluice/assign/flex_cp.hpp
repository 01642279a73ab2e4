#pragma once
// The flex CP solver (FlexSP: Wang et al., "FlexSP: Accelerating Large Language Model Training via Flexible Sequence
// Parallelism", ASPLOS'25, §4–5) for the problem of assign/flex_cp_problem.hpp: per-micro-batch CP groups of
// different degrees side by side. docs/assign-flex-cp.md describes the solver and its figures.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "sluice/assign/detail/flex_cp_packer.hpp"
#include "sluice/assign/flex_cp_problem.hpp"
#include "sluice/assign/flex_cp_types.hpp"
#include "sluice/core/error.hpp"

namespace sluice::assign {

struct FlexCpOptions {
  int targets = 32;            // micro-batch heights tried, spread over the micro-batch counts
  int improvement_rounds = 8;  // passes of moving a sequence out of each micro-batch's slowest group
};

inline void require_valid(const FlexCpOptions& options) {
  sluice::require(options.targets >= 1, "flex CP: options.targets must be >= 1, got ", options.targets);
  sluice::require(options.improvement_rounds >= 0, "flex CP: options.improvement_rounds must be >= 0, got ",
                  options.improvement_rounds);
}

// The fast solver: first-fit decreasing at a range of micro-batch heights (one per micro-batch count from 1 to the
// number of sequences, geometrically spaced, then bisected around the best), with each sequence's degree chosen by
// least area under the height or floored at each degree in turn; the best packing then improved by moving sequences
// out of each micro-batch's slowest group, into another group or a new one of any degree, and by emptying the
// shortest micro-batches into the others' idle time.
inline FlexCpPlan solve_flex_cp(const FlexCpProblem& problem, const FlexCpOptions& options = {}) {
  require_valid(problem);
  require_valid(options);
  detail::FlexCpPacker packer(problem);
  const double area = packer.area_per_unit();
  const auto n = static_cast<double>(problem.lengths.size());
  struct Start {
    double target = 0;
    int floor = -1;
    double value = std::numeric_limits<double>::infinity();
  };
  // Below a floor's target_free_below every target packs alike: packed once. Per floor, -1 (none) first.
  const auto slot = [](int floor) { return floor < 0 ? std::size_t{0} : std::size_t(floor) + 1; };
  std::vector<double> target_free_below(problem.degrees.size() + 1);
  std::vector<std::optional<double>> target_free_value(problem.degrees.size() + 1);
  for (int floor = -1; floor < static_cast<int>(problem.degrees.size()); ++floor)
    target_free_below[slot(floor)] = packer.target_free_below(floor);
  const auto consider = [&](Start& start, double target, int floor) {
    std::optional<double>& same = target_free_value[slot(floor)];
    const bool target_free = target < target_free_below[slot(floor)];
    const double value = target_free && same ? *same : packer.pack(target, floor);
    if (target_free) same = value;
    if (value < start.value) start = {target, floor, value};
  };
  // Least area under heights for micro-batch counts 1 .. n, geometrically spaced (the height each count gives if
  // the area spreads evenly), then bisected around the best.
  Start least_area;
  const double ratio = options.targets > 1 ? std::pow(n, 1.0 / (options.targets - 1)) : n;
  for (int t = 0; t < options.targets; ++t) consider(least_area, area / std::pow(ratio, t), -1);
  for (double factor = std::sqrt(std::max(ratio, 1.25)); factor > 1.01; factor = std::sqrt(factor)) {
    const double center = least_area.target;
    consider(least_area, center * factor, -1);
    consider(least_area, center / factor, -1);
  }
  // Every sequence at least as wide as each degree in turn, at one, two and four micro-batches' heights and around
  // the best: side-by-side groups of one width, which the least-area choice misses when units would idle.
  // A floor whose groups alone keep the units busier than twice the least-area packing's whole iteration is not
  // tried: on 150 batches of the bundled sets (8 to 1,024 GPUs) such a start won twice, by 0.1% and 0.6%, while the
  // improvement budget it leaves to the others made 31 plans faster, by up to 2.3% (docs/assign-flex-cp.md).
  std::vector<Start> starts;
  for (int floor = 0; floor < static_cast<int>(problem.degrees.size()); ++floor) {
    if (packer.area_per_unit(floor) > 2 * least_area.value) continue;
    Start& start = starts.emplace_back();
    for (const double target :
         {area, area / 2, area / 4, least_area.target, least_area.target * 2, least_area.target / 2})
      consider(start, target, floor);
  }
  // Each start improved (least area first, then each floor's), but one packing as good as an earlier start's,
  // which high floors repeat; the best kept, ties to the earlier.
  std::vector<FlexCpMicroBatch> best;
  double best_value = std::numeric_limits<double>::infinity();
  starts.insert(starts.begin(), least_area);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const Start& start = starts[i];
    if (std::ranges::any_of(starts.begin(), starts.begin() + std::ptrdiff_t(i),
                            [&](const Start& earlier) { return earlier.value == start.value; }))
      continue;
    packer.pack(start.target, start.floor);
    packer.improve(options.improvement_rounds,
                   detail::FlexCpPacker::improvement_budget / static_cast<std::int64_t>(starts.size()));
    // The packer prices groups alone; collectives that outlast short micro-batches are priced here.
    const double value = problem.collectives.seconds == 0 ? packer.objective()
                                                          : flex_cp_iteration_seconds(problem, packer.micro_batches());
    if (value < best_value) {
      best_value = value;
      best = packer.micro_batches();
    }
  }
  FlexCpPlan plan{.micro_batches = std::move(best), .seconds = 0, .lower_bound = flex_cp_lower_bound(problem)};
  plan.seconds = flex_cp_iteration_seconds(problem, plan.micro_batches);
  return plan;
}

}  // namespace sluice::assign
