#pragma once
// Cost models for micro-batch planning (DynaPipe §2): time and memory of one micro-batch shape on one
// pipeline stage. QuadraticStageCost is the GPT-style closed form from a profile's fitted latency;
// GridStageCost interpolates a profiled grid (cost/grid.hpp).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

#include "sluice/core/error.hpp"
#include "sluice/cost/grid.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/microbatch/types.hpp"

namespace sluice::microbatch {

// Every row of L = input + target tokens costs a·L² + b·L (attention is per row), plus c once per
// micro-batch; stored activations are bytes_per_token per row token.
class QuadraticStageCost {
public:
  QuadraticStageCost(cost::QuadraticLatency latency, double bytes_per_token)
      : latency_(latency), bytes_per_token_(bytes_per_token) {
    sluice::require(std::isfinite(bytes_per_token) && bytes_per_token > 0,
                    "stage cost: bytes_per_token must be finite and > 0, got ", bytes_per_token);
  }

  [[nodiscard]] const cost::QuadraticLatency& latency() const noexcept { return latency_; }
  [[nodiscard]] double bytes_per_token() const noexcept { return bytes_per_token_; }

  [[nodiscard]] double seconds(const Shape& shape) const noexcept {
    return static_cast<double>(shape.rows) * latency_.sequence_time(shape.input + shape.target) +
           latency_.microbatch_overhead();
  }
  [[nodiscard]] double bytes(const Shape& shape) const noexcept {
    return bytes_per_token_ * static_cast<double>(shape.rows) * static_cast<double>(shape.input + shape.target);
  }

private:
  cost::QuadraticLatency latency_;
  double bytes_per_token_;
};

// A scheme of a profile as the micro-batch DP sees it: its stage cost, the per-micro-batch memory limit under 1F1B,
// (budget − model states) / PP (DynaPipe §4: 1/c of the memory left for activations), and the last stage's own work,
// which the schedule takes off the other stages (schedule::PipelinePlanOptions::last_stage).
struct StageCostSetup {
  QuadraticStageCost model;
  double memory_limit = 0;
  cost::LastStageWork last_stage{};
};

inline StageCostSetup stage_cost(const cost::SchemeCost& scheme) {
  sluice::require(scheme.memory.has_value(), "stage cost: scheme ", scheme.scheme.name(), " has no memory model");
  const cost::LinearMemory& memory = *scheme.memory;
  // LinearMemory charges the PP in-flight micro-batches of the first stage; one micro-batch holds 1/PP of that.
  const double pp = scheme.scheme.pp();
  const double limit = (memory.budget_bytes() - memory.fixed_bytes()) / pp;
  sluice::require(limit > 0, "stage cost: scheme ", scheme.scheme.name(),
                  " leaves no memory for activations (model states ", memory.fixed_bytes(), " bytes, budget ",
                  memory.budget_bytes(), " bytes)");
  return {QuadraticStageCost(scheme.latency, memory.bytes_per_token() / pp), limit, scheme.last_stage};
}

// A profiled grid with axes (micro-batch size, length) for D = 2 or (micro-batch size, input, target) for
// D = 3. A shape beyond a grid's largest point is forbidden (+inf); coordinates below the first point are
// charged at it (a smaller shape costs no more than the smallest profiled one).
template <std::size_t D>
class GridStageCost {
  static_assert(D == 2 || D == 3, "grid stage costs are 2-D (decoder) or 3-D (encoder-decoder)");

public:
  explicit GridStageCost(cost::GridCostModel<D> grid) : grid_(std::move(grid)) {}

  [[nodiscard]] const cost::GridCostModel<D>& grid() const noexcept { return grid_; }

  [[nodiscard]] double seconds(const Shape& shape) const { return at(grid_.time, shape); }
  [[nodiscard]] double bytes(const Shape& shape) const { return at(grid_.memory, shape); }

private:
  static double at(const cost::RectilinearGrid<D>& grid, const Shape& shape) {
    typename cost::RectilinearGrid<D>::Point point{};
    point[0] = static_cast<double>(shape.rows);
    if constexpr (D == 2) {
      point[1] = static_cast<double>(shape.input + shape.target);
    } else {
      point[1] = static_cast<double>(shape.input);
      point[2] = static_cast<double>(shape.target);
    }
    for (std::size_t d = 0; d < D; ++d) {
      const auto& axis = grid.axes()[d];
      if (point[d] > axis.back()) return std::numeric_limits<double>::infinity();
      if (point[d] < axis.front()) point[d] = axis.front();
    }
    return grid(point);
  }

  cost::GridCostModel<D> grid_;
};

static_assert(MicroBatchCostModel<QuadraticStageCost>);
static_assert(MicroBatchCostModel<GridStageCost<2>>);
static_assert(MicroBatchCostModel<GridStageCost<3>>);

}  // namespace sluice::microbatch
