#pragma once
// Synthetic long-tailed sequence lengths, for benchmarks and tests that need a realistic shape without a file.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/data/readers.hpp"

namespace sluice::data {

// Each length is drawn from a mixture, then rounded to the nearest integer and limited to
// [min_length, max_length]; the limiting is part of the distribution (data pipelines drop or cut documents
// outside such bounds), so the ends of the range carry the mass beyond them:
//   with probability 1 - tail_fraction, a log-normal body exp(ln(median) + sigma * Z), Z ~ N(0, 1);
//   with probability tail_fraction, a Pareto tail tail_min * U^(-1 / tail_alpha), U ~ U(0, 1].
struct SyntheticOptions {
  std::int64_t count = 10000;        // how many lengths (>= 1)
  double median = 1024;              // median of the log-normal body, in tokens (finite, > 0)
  double sigma = 1.0;                // standard deviation of the body's logarithm (finite, >= 0)
  double tail_fraction = 0.05;       // probability that a length comes from the tail (in [0, 1])
  double tail_alpha = 1.1;           // Pareto shape: smaller is heavier (finite, > 0)
  std::int64_t tail_min = 8192;      // Pareto scale: the smallest tail length (>= 1)
  std::int64_t min_length = 16;      // lower limit applied to every length (>= 1)
  std::int64_t max_length = 131072;  // upper limit (>= min_length, <= max_plausible_length)
  std::uint64_t seed = 1;            // seeds sluice::Rng: the same options give the same lengths everywhere
  friend bool operator==(const SyntheticOptions&, const SyntheticOptions&) = default;
};

inline void require_valid(const SyntheticOptions& options) {
  using sluice::require;
  require(options.count >= 1, "synthetic: count must be >= 1, got ", options.count);
  require(std::isfinite(options.median) && options.median > 0, "synthetic: median must be finite and > 0, got ",
          options.median);
  require(std::isfinite(options.sigma) && options.sigma >= 0, "synthetic: sigma must be finite and >= 0, got ",
          options.sigma);
  require(options.tail_fraction >= 0 && options.tail_fraction <= 1, "synthetic: tail_fraction must be in [0, 1], got ",
          options.tail_fraction);
  require(std::isfinite(options.tail_alpha) && options.tail_alpha > 0,
          "synthetic: tail_alpha must be finite and > 0, got ", options.tail_alpha);
  require(options.tail_min >= 1, "synthetic: tail_min must be >= 1, got ", options.tail_min);
  require(options.min_length >= 1, "synthetic: min_length must be >= 1, got ", options.min_length);
  require(options.max_length >= options.min_length && options.max_length <= max_plausible_length,
          "synthetic: max_length must be in [min_length = ", options.min_length, ", ", max_plausible_length, "], got ",
          options.max_length);
}

inline std::vector<std::int64_t> synthetic_lengths(const SyntheticOptions& options) {
  require_valid(options);
  Rng rng(options.seed);
  const double log_median = std::log(options.median);
  const auto tail_min = static_cast<double>(options.tail_min);
  const auto lower = static_cast<double>(options.min_length);
  const auto upper = static_cast<double>(options.max_length);
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(options.count));
  for (std::int64_t& length : lengths) {
    const double raw = rng.uniform() < options.tail_fraction
                           ? tail_min * std::pow(1.0 - rng.uniform(), -1.0 / options.tail_alpha)
                           : std::exp(log_median + options.sigma * rng.normal());
    // Limited before the conversion, so an overflowing draw (inf) never reaches the integer cast.
    length = static_cast<std::int64_t>(std::round(std::clamp(raw, lower, upper)));
  }
  return lengths;
}

}  // namespace sluice::data
