#pragma once
// The strategy-proposal DP (Hydraulis §7, Eq. 4) over GPU budgets n and length-grid points L_j:
//   t[n][j] = min( t[n − 1][j],  min_{k, d, i < j} max( t[n − d·N_k][i],  C_k(i, j) / d ) )
// with MaxLen_k >= L_j. Budgets and replica counts are integers of tenths of a GPU and of a pipeline,
// so the integer DP (replica step 10) and the continuous relaxation (replica step 1) share one kernel
// and no floating-point drift enters the grid.
//
// Structure exploited (see docs/proposal.md):
//  - Budgets. Every group of replicas costs a multiple of e·G tenths (e the replica step, G the gcd of
//    the schemes' GPU counts), so when the GPU step divides e·G the table is kept only at multiples of
//    e·G; the values elsewhere equal those of the multiple below. Otherwise budgets are on the GPU-step
//    grid and a group's cost is rounded up to it.
//  - Crossing. For fixed (n, j, k, d), t[n − d·N_k][i] does not decrease in i and C_k(i, j)/d does not
//    increase, so the best i is where they cross; as d grows the first term rises and the second falls,
//    so the crossing never moves up. Following it down by galloping search costs
//    O(D_k·log(1 + J/D_k) + log J) per (n, j, k) instead of O(D_k·J).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/proposal/intervals.hpp"

namespace sluice::proposal::detail {

inline constexpr double infinity = std::numeric_limits<double>::infinity();

// More DP states than this means a grid far finer than the problem needs.
inline constexpr std::int64_t max_dp_states = std::int64_t{1} << 24;
// The DP's work is its states times the replica counts each may try; past this (about ten seconds on one core) a
// cluster of tens of thousands of GPUs at a one-GPU step would run for hours, so the grid must be coarser.
inline constexpr double max_dp_steps = 0x1p31;

// The budget grid of one DP: budgets 0, unit, 2·unit, ..., top·unit tenths of a GPU.
struct Grid {
  std::int64_t unit = 0;
  std::int64_t top = 0;
  std::int64_t replica_step = 0;

  // `gpu_step` and `replica_step` in tenths; `common` is the gcd of the usable schemes' GPU counts.
  // Raises invalid_input before anything is allocated when the table would be too large.
  static Grid make(std::int64_t common, std::int64_t gpus, std::int64_t gpu_step, std::int64_t replica_step,
                   std::int64_t bins) {
    const std::int64_t lattice = replica_step * common;
    Grid grid{lattice % gpu_step == 0 ? lattice : gpu_step, 0, replica_step};
    grid.top = 10 * gpus / grid.unit;
    const std::int64_t lengths = bins + 1;
    sluice::require(lengths <= max_dp_states && grid.top + 1 <= max_dp_states / lengths, "proposal: the DP grid has ",
                    grid.top + 1, " budgets x ", lengths, " lengths, more than ", max_dp_states,
                    " states; use a coarser gpu_step or length_step");
    return grid;
  }
};

// A group of the DP's solution: `units` replica steps of scheme `scheme` share one length interval.
struct Group {
  std::size_t scheme = 0;
  std::int64_t units = 0;
};

class Dp {
public:
  // `schemes` ordered by MaxLen descending, so the schemes allowed at L_j are a prefix.
  Dp(Span<const SchemeTable> schemes, const LengthAxis& axis, const Grid& grid)
      : stride_(axis.bins + 1), top_(grid.top) {
    const std::int64_t states = (top_ + 1) * stride_;
    const std::int64_t replica_step = grid.replica_step;

    // shift of d replica steps of scheme k, in budget indices (rounded up when the grid is not a lattice).
    offsets_.push_back(0);
    std::int64_t most = 0;
    for (const SchemeTable& scheme : schemes) {
      for (std::int64_t d = 1;; ++d) {
        const std::int64_t shift = (d * replica_step * scheme.gpus + grid.unit - 1) / grid.unit;
        if (shift > top_) break;
        shifts_.push_back(shift);
        most = std::max(most, d);
      }
      offsets_.push_back(static_cast<std::int64_t>(shifts_.size()));
    }
    double steps = 0;  // every (budget, replica count) a state tries, per length point
    for (const std::int64_t shift : shifts_) steps += static_cast<double>(top_ - shift + 1);
    steps *= static_cast<double>(axis.bins);
    sluice::require(steps <= max_dp_steps, "proposal: the DP would take ", steps, " steps (", top_ + 1, " budgets x ",
                    axis.bins, " lengths), more than ", max_dp_steps, "; use a coarser gpu_step or length_step");
    replicas_.resize(static_cast<std::size_t>(most + 1));
    for (std::int64_t d = 1; d <= most; ++d)
      replicas_[static_cast<std::size_t>(d)] = static_cast<double>(d * replica_step) / 10.0;

    std::vector<std::size_t> allowed(static_cast<std::size_t>(stride_));
    for (std::int64_t j = 1; j <= axis.bins; ++j)
      while (allowed[at(j)] < schemes.size() && schemes[allowed[at(j)]].max_len >= axis.upper[at(j)]) ++allowed[at(j)];

    value_.assign(static_cast<std::size_t>(states), infinity);
    choice_.assign(static_cast<std::size_t>(states), Choice{});
    value_[0] = 0;
    std::vector<std::int64_t> reach(schemes.size());  // replica counts of scheme k that fit budget n
    for (std::int64_t n = 1; n <= top_; ++n) {
      for (std::size_t k = 0; k < schemes.size(); ++k)
        while (offsets_[k] + reach[k] < offsets_[k + 1] && shift(k, reach[k] + 1) <= n) ++reach[k];
      double* const row = &value_[at(n * stride_)];
      Choice* const chosen = &choice_[at(n * stride_)];
      row[0] = 0;
      for (std::int64_t j = 1; j <= axis.bins; ++j) {
        double best = row[j - stride_];
        Choice choice{};
        const std::int64_t last = axis.last_nonempty[at(j)];
        for (std::size_t k = 0; k < allowed[at(j)]; ++k) relax(schemes[k], k, n, j, last, reach[k], best, choice);
        row[j] = best;
        chosen[j] = choice;
      }
    }
  }

  // t[N][j]: the optimum with at most N GPUs for all sequences of length <= L_j.
  [[nodiscard]] double optimum(std::int64_t j) const { return value_[at(top_ * stride_ + j)]; }

  // The groups of S[N][L_j], from the longest interval down (empty when t[N][j] is infinite).
  [[nodiscard]] std::vector<Group> groups(std::int64_t j) const {
    std::vector<Group> result;
    if (optimum(j) == infinity) return result;
    std::int64_t n = top_;
    while (j > 0) {
      const Choice choice = choice_[at(n * stride_ + j)];
      if (choice.scheme < 0) {
        --n;
        continue;
      }
      const auto k = static_cast<std::size_t>(choice.scheme);
      result.push_back({k, choice.replicas});
      n -= shift(k, choice.replicas);
      j = choice.from;
    }
    return result;
  }

private:
  // The state inherits from budget n − 1 when `scheme` < 0; otherwise the interval (from, j] goes to
  // `replicas` replica steps of `scheme`.
  struct Choice {
    std::int32_t scheme = -1;
    std::int32_t replicas = 0;
    std::int32_t from = 0;
  };

  static std::size_t at(std::int64_t index) { return static_cast<std::size_t>(index); }

  [[nodiscard]] std::int64_t shift(std::size_t k, std::int64_t d) const { return shifts_[at(offsets_[k] + d - 1)]; }

  // min over d <= reach and i < j of max(t[n − shift(d)][i], C(i, j)/d), following the crossing down.
  void relax(const SchemeTable& scheme, std::size_t k, std::int64_t n, std::int64_t j, std::int64_t last,
             std::int64_t reach, double& best, Choice& choice) const {
    std::int64_t cross = j;  // the first i with t[n − shift(d)][i] >= C(i, j)/d; never rises with d
    for (std::int64_t d = 1; d <= reach; ++d) {
      const double* const below = &value_[at((n - shift(k, d)) * stride_)];
      const double replicas = replicas_[at(d)];
      auto interval = [&](std::int64_t i) { return scheme.interval(i, j, last) / replicas; };
      double left = cross > 0 ? interval(cross - 1) : 0;  // C(cross − 1, j)/d: the best value left of the crossing
      if (cross > 0 && below[cross - 1] >= left) {
        // Gallop down to an i left of the crossing, then bisect: O(log of the move), not O(move).
        std::int64_t high = cross - 1;
        std::int64_t low = -1;
        for (std::int64_t step = 1; high - step >= 0; step *= 2) {
          const double value = interval(high - step);
          if (below[high - step] < value) {
            low = high - step;
            left = value;
            break;
          }
          high -= step;
        }
        while (high - low > 1) {
          const std::int64_t mid = low + (high - low) / 2;
          const double value = interval(mid);
          if (below[mid] >= value) {
            high = mid;
          } else {
            low = mid;
            left = value;
          }
        }
        cross = high;
      }
      if (cross < j && below[cross] < best) {
        best = below[cross];
        choice = {static_cast<std::int32_t>(k), static_cast<std::int32_t>(d), static_cast<std::int32_t>(cross)};
      }
      if (cross > 0 && left < best) {
        best = left;
        choice = {static_cast<std::int32_t>(k), static_cast<std::int32_t>(d), static_cast<std::int32_t>(cross - 1)};
      }
    }
  }

  std::int64_t stride_ = 0;
  std::int64_t top_ = 0;
  std::vector<std::int64_t> shifts_;
  std::vector<std::int64_t> offsets_;
  std::vector<double> replicas_;
  std::vector<double> value_;
  std::vector<Choice> choice_;
};

// The objective of a fixed integer strategy at every L_j, j <= last: its pipelines are given per scheme
// (index into `schemes`, count), and each scheme's pipelines share one contiguous length interval, the
// schemes in any order, a scheme possibly idle. Merging two adjacent groups of one scheme never raises
// the objective (the pooled interval pays the fill term once), so this equals the best assignment of
// Eq. 4 unless the optimum interleaves schemes (A below B below A). Subset DP: O(2^m·m·J·log J).
inline std::vector<double> pooled_objective(Span<const SchemeTable> schemes, const LengthAxis& axis,
                                            Span<const std::pair<std::size_t, std::int64_t>> parts, std::int64_t last) {
  const std::size_t masks = std::size_t{1} << parts.size();
  const auto stride = static_cast<std::size_t>(last + 1);
  std::vector<double> value(masks * stride, infinity);
  value[0] = 0;
  for (std::size_t mask = 1; mask < masks; ++mask) {
    double* const row = &value[mask * stride];
    row[0] = 0;
    for (std::int64_t j = 1; j <= last; ++j) {
      const auto jj = static_cast<std::size_t>(j);
      const std::int64_t last_j = axis.last_nonempty[jj];
      double best = infinity;
      for (std::size_t b = 0; b < parts.size(); ++b) {
        if ((mask >> b & 1U) == 0) continue;
        const double* below = &value[(mask ^ (std::size_t{1} << b)) * stride];
        best = std::min(best, below[jj]);
        const SchemeTable& scheme = schemes[parts[b].first];
        if (scheme.max_len < axis.upper[jj]) continue;
        const auto count = static_cast<double>(parts[b].second);
        std::int64_t low = 0;
        std::int64_t high = j;
        while (low < high) {
          const std::int64_t mid = (low + high) / 2;
          if (below[mid] >= scheme.interval(mid, j, last_j) / count) {
            high = mid;
          } else {
            low = mid + 1;
          }
        }
        if (low < j) best = std::min(best, below[low]);
        if (low > 0) best = std::min(best, scheme.interval(low - 1, j, last_j) / count);
      }
      row[jj] = best;
    }
  }
  return {value.end() - static_cast<std::ptrdiff_t>(stride), value.end()};
}

}  // namespace sluice::proposal::detail
