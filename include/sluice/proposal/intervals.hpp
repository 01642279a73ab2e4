#pragma once
// The length axis of the strategy-proposal DP and the cost of one length interval on one scheme
// (Hydraulis §7, Eq. 4), each evaluated in O(1) from per-scheme prefix sums.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "sluice/core/span.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::proposal::detail {

// Bin j (1-based) holds the lengths in (upper[j − 1], upper[j]]: upper[j] = min(j·step, max_len), upper[0] = 0.
struct LengthAxis {
  std::int64_t bins = 0;
  std::vector<std::int64_t> upper;          // L_j, j = 0..bins
  std::vector<std::int64_t> last_nonempty;  // the last bin j' <= j holding a sequence; 0 if none
  std::vector<std::int64_t> longest;        // longest length in bin j; 0 if the bin is empty
  // Per bin, Σ 1, Σ x and Σ x² over the lengths x it holds: interval costs use the exact lengths, not bin centres.
  std::vector<double> count;
  std::vector<double> sum;
  std::vector<double> sum_squares;
  std::vector<double> cdf;  // share of the sequences with length <= L_j
  std::int64_t first_nonempty = 0;

  // Lengths must lie in [1, max_len].
  LengthAxis(Span<const std::int64_t> lengths, std::int64_t step, std::int64_t max_len)
      : bins((max_len + step - 1) / step),
        upper(static_cast<std::size_t>(bins + 1)),
        last_nonempty(upper.size()),
        longest(upper.size()),
        count(upper.size()),
        sum(upper.size()),
        sum_squares(upper.size()),
        cdf(upper.size()) {
    for (std::int64_t j = 1; j <= bins; ++j) upper[at(j)] = std::min(j * step, max_len);
    for (const std::int64_t length : lengths) {
      const std::size_t j = at(bin_of(length, step));
      const auto x = static_cast<double>(length);
      count[j] += 1;
      sum[j] += x;
      sum_squares[j] += x * x;
      longest[j] = std::max(longest[j], length);
    }
    double seen = 0;
    for (std::int64_t j = 1; j <= bins; ++j) {
      seen += count[at(j)];
      cdf[at(j)] = seen / static_cast<double>(lengths.size());
      last_nonempty[at(j)] = count[at(j)] > 0 ? j : last_nonempty[at(j - 1)];
      if (first_nonempty == 0 && count[at(j)] > 0) first_nonempty = j;
    }
  }

  static std::int64_t bin_of(std::int64_t length, std::int64_t step) { return (length - 1) / step + 1; }
  static std::size_t at(std::int64_t j) { return static_cast<std::size_t>(j); }
};

// One usable scheme with the prefix sums of its per-sequence cost over the length axis.
//   C(i, j) = Σ_{x in (L_i, L_j]} w·(a·x² + b·x + s·c)  +  f·(PP − 1)·T(longest x in (L_i, L_j])
// w scales the dataset's counts to one iteration; s = 1 charges c per sequence (the authors' static.py),
// s = 0 charges T'(x) = a·x² + b·x per sequence as the dispatch stage's Eq. 2 does; the fill term (f = 1)
// is the pipeline's warm-up and cool-down.
struct SchemeTable {
  Scheme scheme;
  std::int64_t gpus = 0;
  std::int64_t max_len = 0;
  std::vector<double> prefix;  // Σ over bins 1..j of the per-sequence term
  std::vector<double> fill;    // fill term of an interval whose longest sequence lies in bin j

  SchemeTable(const cost::SchemeCost& cost, const LengthAxis& axis, double weight, bool sequence_constant,
              bool fill_term)
      : scheme(cost.scheme),
        gpus(cost.scheme.gpus()),
        max_len(cost.max_len),
        prefix(axis.upper.size()),
        fill(axis.upper.size()) {
    const cost::QuadraticLatency& latency = cost.latency;
    for (std::int64_t j = 1; j <= axis.bins; ++j) {
      const std::size_t k = LengthAxis::at(j);
      double bin = latency.a() * axis.sum_squares[k] + latency.b() * axis.sum[k];
      if (sequence_constant) bin += latency.c() * axis.count[k];
      prefix[k] = prefix[k - 1] + weight * bin;
      if (fill_term && axis.longest[k] > 0)
        fill[k] = static_cast<double>(cost.scheme.pp() - 1) * latency(axis.longest[k]);
    }
  }

  // C(i, j) for 0 <= i < j; 0 when no sequence lies in (L_i, L_j].
  [[nodiscard]] double interval(std::int64_t i, std::int64_t j, std::int64_t last_nonempty_j) const noexcept {
    const double body = prefix[LengthAxis::at(j)] - prefix[LengthAxis::at(i)];
    return i < last_nonempty_j ? body + fill[LengthAxis::at(last_nonempty_j)] : body;
  }
};

}  // namespace sluice::proposal::detail
