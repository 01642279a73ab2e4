#pragma once
// Grid cost models (DynaPipe §2): time and memory profiled on a grid of micro-batch shapes, filled in
// between by multilinear interpolation. A query outside the grid is an error unless the caller asks
// for extrapolation, because a profile silently extended far past its last point is usually wrong.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"

namespace sluice::cost {

enum class OutOfGrid { error, extrapolate };

// Values on the product of D strictly increasing axes (points need not be evenly spaced), stored in
// row-major order: the last axis varies fastest.
template <std::size_t D>
class RectilinearGrid {
  static_assert(D >= 1 && D <= 4, "grids of 1 to 4 dimensions");

public:
  using Point = std::array<double, D>;

  RectilinearGrid(std::array<std::vector<double>, D> axes, std::vector<double> values)
      : axes_(std::move(axes)), values_(std::move(values)) {
    std::size_t expected = 1;
    for (std::size_t d = 0; d < D; ++d) {
      const auto& axis = axes_[d];
      sluice::require(axis.size() >= 2, "grid: axis ", d, " needs at least 2 points, got ", axis.size());
      for (std::size_t i = 0; i < axis.size(); ++i) {
        sluice::require(std::isfinite(axis[i]), "grid: axis ", d, " point ", i, " is not finite");
        sluice::require(i == 0 || axis[i] > axis[i - 1], "grid: axis ", d, " must be strictly increasing at point ", i);
      }
      expected *= axis.size();
    }
    sluice::require(values_.size() == expected, "grid: expected ", expected, " values, got ", values_.size());
    for (std::size_t i = 0; i < values_.size(); ++i)
      sluice::require(std::isfinite(values_[i]), "grid: value ", i, " is not finite");
  }

  [[nodiscard]] const std::array<std::vector<double>, D>& axes() const noexcept { return axes_; }
  [[nodiscard]] const std::vector<double>& values() const noexcept { return values_; }

  [[nodiscard]] double operator()(const Point& point, OutOfGrid policy = OutOfGrid::error) const {
    std::array<std::size_t, D> cell{};
    std::array<double, D> weight{};
    for (std::size_t d = 0; d < D; ++d) {
      const auto& axis = axes_[d];
      const double x = point[d];
      sluice::require(std::isfinite(x), "grid: query coordinate ", d, " is not finite");
      if (policy == OutOfGrid::error)
        sluice::require(x >= axis.front() && x <= axis.back(), "grid: query ", x, " on axis ", d, " is outside [",
                        axis.front(), ", ", axis.back(), "]");
      // Cell whose lower corner is the last point <= x, clamped to the first/last cell (which extrapolates linearly).
      const auto upper = std::upper_bound(axis.begin(), axis.end(), x);
      const auto lower =
          std::clamp<std::ptrdiff_t>(upper - axis.begin() - 1, 0, static_cast<std::ptrdiff_t>(axis.size()) - 2);
      cell[d] = static_cast<std::size_t>(lower);
      weight[d] = (x - axis[cell[d]]) / (axis[cell[d] + 1] - axis[cell[d]]);
    }
    double result = 0;
    for (std::size_t corner = 0; corner < (std::size_t{1} << D); ++corner) {
      double w = 1;
      std::size_t offset = 0;
      for (std::size_t d = 0; d < D; ++d) {
        const bool high = (corner >> d) & 1U;
        w *= high ? weight[d] : 1 - weight[d];
        offset = offset * axes_[d].size() + cell[d] + (high ? 1 : 0);
      }
      result += w * values_[offset];
    }
    return result;
  }

private:
  std::array<std::vector<double>, D> axes_;
  std::vector<double> values_;
};

// Time (seconds) and stored activation memory (bytes) of one micro-batch on one pipeline stage.
// D = 2: axes (micro-batch size, sequence length) for decoder-only models.
// D = 3: axes (micro-batch size, input length, target length) for encoder–decoder models.
template <std::size_t D>
struct GridCostModel {
  RectilinearGrid<D> time;
  RectilinearGrid<D> memory;

  [[nodiscard]] double seconds(const typename RectilinearGrid<D>::Point& shape,
                               OutOfGrid policy = OutOfGrid::error) const {
    return time(shape, policy);
  }
  [[nodiscard]] double bytes(const typename RectilinearGrid<D>::Point& shape,
                             OutOfGrid policy = OutOfGrid::error) const {
    return memory(shape, policy);
  }
};

using DecoderGridCostModel = GridCostModel<2>;
using EncoderDecoderGridCostModel = GridCostModel<3>;

}  // namespace sluice::cost
