#pragma once
// Pipeline partitions: layer counts per stage, contiguous, at least one layer each. The even split
// (Galvatron-Base), the exact min-max split of a per-stage cost (the memory-balanced p_m and the
// time-balanced p_t of Galvatron-BMW), and Eq. 6's balance degrees.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"

namespace sluice::search {

// L layers over P stages; the remainder goes to the deepest stages, which hold fewer in-flight
// micro-batches under 1F1B.
inline std::vector<int> even_partition(int layers, int stages) {
  sluice::require(stages >= 1 && stages <= layers, "partition: stages must be in [1, layers = ", layers, "], got ",
                  stages);
  std::vector<int> sizes(static_cast<std::size_t>(stages), layers / stages);
  for (int i = 0; i < layers % stages; ++i) ++sizes[static_cast<std::size_t>(stages - 1 - i)];
  return sizes;
}

// The contiguous split minimising max_i cost(i, first_i, count_i), by DP over (stage, layers placed):
// O(P·L²) calls. Ties go to the split whose stages end earliest.
template <class Cost>
std::vector<int> min_max_partition(int layers, int stages, Cost&& cost) {
  sluice::require(stages >= 1 && stages <= layers, "partition: stages must be in [1, layers = ", layers, "], got ",
                  stages);
  constexpr double inf = std::numeric_limits<double>::infinity();
  const auto width = static_cast<std::size_t>(layers) + 1;
  std::vector<double> best(static_cast<std::size_t>(stages) * width, inf);
  std::vector<int> cut(static_cast<std::size_t>(stages) * width, 0);
  for (int j = 1; j <= layers; ++j) best[static_cast<std::size_t>(j)] = cost(0, 0, j);
  for (int i = 1; i < stages; ++i)
    for (int j = i + 1; j <= layers; ++j)
      for (int k = i; k < j; ++k) {
        const double value = std::max(best[static_cast<std::size_t>(i - 1) * width + static_cast<std::size_t>(k)],
                                      static_cast<double>(cost(i, k, j - k)));
        if (value < best[static_cast<std::size_t>(i) * width + static_cast<std::size_t>(j)]) {
          best[static_cast<std::size_t>(i) * width + static_cast<std::size_t>(j)] = value;
          cut[static_cast<std::size_t>(i) * width + static_cast<std::size_t>(j)] = k;
        }
      }
  std::vector<int> sizes(static_cast<std::size_t>(stages));
  int end = layers;
  for (int i = stages - 1; i > 0; --i) {
    const int k = cut[static_cast<std::size_t>(i) * width + static_cast<std::size_t>(end)];
    sizes[static_cast<std::size_t>(i)] = end - k;
    end = k;
  }
  sizes[0] = end;
  return sizes;
}

// Eq. 6: α = 1 − max / Σ, in [0, 1 − 1/P]; 1 − 1/P is perfect balance.
inline double balance(Span<const double> values) {
  double total = 0;
  double peak = 0;
  for (const double value : values) {
    total += value;
    peak = std::max(peak, value);
  }
  return total > 0 ? 1.0 - peak / total : 0.0;
}

}  // namespace sluice::search
