#pragma once
// Least-squares fit of T(l) = a·l² + b·l + c to measured (length, seconds) samples, with a, b, c >= 0.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <span>

#include <Eigen/Core>
#include <Eigen/QR>

#include "sluice/core/error.hpp"
#include "sluice/cost/latency.hpp"

namespace sluice::cost {

// Minimises the *relative* squared error, so that short sequences (milliseconds) weigh as much as
// long ones (seconds). Non-negativity is exact: with three coefficients the optimum is the
// unconstrained least-squares solution on one of the seven supports, so every support is solved and
// the best non-negative one kept (the KKT conditions make this the NNLS optimum).
inline FitResult fit_quadratic(std::span<const LatencySample> samples) {
  std::set<std::int64_t> distinct;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const LatencySample& sample = samples[i];
    sluice::require(sample.length > 0, "fit: sample ", i, ": length must be > 0, got ", sample.length);
    sluice::require(std::isfinite(sample.seconds) && sample.seconds > 0, "fit: sample ", i,
                    ": seconds must be finite and > 0, got ", sample.seconds);
    distinct.insert(sample.length);
  }
  sluice::require(distinct.size() >= 3, "fit: needs samples at 3 or more distinct lengths, got ", distinct.size());

  const auto rows = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd design(rows, 3);
  Eigen::VectorXd target = Eigen::VectorXd::Ones(rows);  // t / t after dividing each row by t
  for (Eigen::Index r = 0; r < rows; ++r) {
    const auto l = static_cast<double>(samples[static_cast<std::size_t>(r)].length);
    const double t = samples[static_cast<std::size_t>(r)].seconds;
    design.row(r) << l * l / t, l / t, 1.0 / t;
  }
  // Columns differ by many orders of magnitude (l² vs 1); scale them for a well-conditioned solve.
  const Eigen::Vector3d scale = design.colwise().norm().transpose();
  const Eigen::MatrixXd scaled = design * scale.cwiseInverse().asDiagonal();

  Eigen::Vector3d best = Eigen::Vector3d::Zero();
  double best_residual = target.squaredNorm();
  for (unsigned support = 1; support < 8; ++support) {
    std::array<Eigen::Index, 3> columns{};
    Eigen::Index count = 0;
    for (Eigen::Index k = 0; k < 3; ++k)
      if (support & (1U << k)) columns[static_cast<std::size_t>(count++)] = k;
    Eigen::MatrixXd sub(rows, count);
    for (Eigen::Index j = 0; j < count; ++j) sub.col(j) = scaled.col(columns[static_cast<std::size_t>(j)]);
    const Eigen::VectorXd solution = sub.colPivHouseholderQr().solve(target);
    if ((solution.array() < 0).any() || !solution.allFinite()) continue;
    const double residual = (sub * solution - target).squaredNorm();
    if (residual < best_residual) {
      best_residual = residual;
      best.setZero();
      for (Eigen::Index j = 0; j < count; ++j) best[columns[static_cast<std::size_t>(j)]] = solution[j];
    }
  }
  const Eigen::Vector3d coefficients = best.cwiseQuotient(scale);
  return {QuadraticLatency(coefficients[0], coefficients[1], coefficients[2]),
          std::sqrt(best_residual / static_cast<double>(rows)), samples.size()};
}

}  // namespace sluice::cost
