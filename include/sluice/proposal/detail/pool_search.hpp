#pragma once
// The searches the sampled proposal runs over its pool (sampled.hpp): the set of at most k rows of a time matrix
// that minimises the sum of per-batch minima, and the neighbours that grow the pool. Not for callers.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/proposal/dp.hpp"

namespace sluice::proposal::detail {

// A chosen subset of a time matrix's rows and the sum over columns of its per-column minimum.
struct Selection {
  std::vector<std::size_t> rows;  // ascending
  double total = 0;
};

inline double set_total(const std::vector<std::vector<double>>& times, Span<const std::size_t> rows) {
  double total = 0;
  for (std::size_t b = 0; b < times.front().size(); ++b) {
    double best = infinity;
    for (const std::size_t r : rows) best = std::min(best, times[r][b]);
    total += best;
  }
  return total;
}

// Local search from a valid set (holding a holding row): best-improvement moves, first adding a row while the set
// has fewer than k, then also swapping a member for a non-member (keeping a holding member), until no move strictly
// lowers the total. Ties go to the lower row index. Moves strictly lower one deterministic sum, so it ends; each
// pass costs O((k + 1)·rows·batches).
inline Selection improve_set(const std::vector<std::vector<double>>& times, std::size_t k,
                             const std::vector<bool>& holds, std::vector<std::size_t> set) {
  const std::size_t rows = times.size();
  const std::size_t batches = times.front().size();
  std::vector<bool> member(rows);
  for (const std::size_t r : set) member[r] = true;

  // Per batch the set's lowest and second-lowest time, and the member giving the lowest (ties to the lower row).
  std::vector<double> lowest(batches);
  std::vector<double> second(batches);
  std::vector<std::size_t> lowest_row(batches);
  auto summarise = [&] {
    std::sort(set.begin(), set.end());
    for (std::size_t b = 0; b < batches; ++b) {
      lowest[b] = second[b] = infinity;
      for (const std::size_t r : set) {
        if (times[r][b] < lowest[b]) {
          second[b] = lowest[b];
          lowest[b] = times[r][b];
          lowest_row[b] = r;
        } else {
          second[b] = std::min(second[b], times[r][b]);
        }
      }
    }
    double total = 0;
    for (std::size_t b = 0; b < batches; ++b) total += lowest[b];
    return total;
  };
  double total = summarise();

  constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  // The total after dropping `out` (none: drop nothing) and adding `in`.
  auto moved_total = [&](std::size_t out, std::size_t in) {
    double sum = 0;
    for (std::size_t b = 0; b < batches; ++b) {
      const double kept = out != none && lowest_row[b] == out ? second[b] : lowest[b];
      sum += std::min(kept, times[in][b]);
    }
    return sum;
  };
  auto best_move = [&](bool swaps) {
    std::tuple<double, std::size_t, std::size_t> best{total, none, none};
    std::size_t holding = 0;
    for (const std::size_t r : set) holding += holds[r] ? 1 : 0;
    std::vector<std::size_t> outs;
    if (set.size() < k) outs.push_back(none);
    if (swaps)
      for (const std::size_t r : set) outs.push_back(r);
    for (const std::size_t out : outs) {
      for (std::size_t in = 0; in < rows; ++in) {
        if (member[in]) continue;
        if (out != none && holds[out] && holding == 1 && !holds[in]) continue;  // keep a holding member
        const double sum = moved_total(out, in);
        if (sum < std::get<0>(best)) best = {sum, out, in};
      }
    }
    return best;
  };
  for (const bool swaps : {false, true}) {
    while (true) {
      const auto [sum, out, in] = best_move(swaps);
      if (in == none) break;
      if (out != none) {
        member[out] = false;
        std::erase(set, out);
      }
      member[in] = true;
      set.push_back(in);
      total = summarise();
    }
  }
  return {set, total};
}

// How many holding rows select_set starts from, best alone first: more starts escape more local optima (on the
// tests' 2,000 small random matrices one start misses the optimum 16 times, eight starts once), a search each.
inline constexpr std::size_t selection_starts = 8;

// At most k rows of times[row][batch] minimising the sum over batches of the per-batch minimum, holding at least
// one row with holds[row] (a row that can serve any batch, so finite everywhere). Local search (improve_set) from
// `start` when given and from each of the selection_starts best holding rows alone; the best result wins, ties to
// the earlier start. A heuristic: the tests compare it with brute force.
inline Selection select_set(const std::vector<std::vector<double>>& times, std::size_t k,
                            const std::vector<bool>& holds, const std::vector<std::size_t>& start = {}) {
  std::vector<std::pair<double, std::size_t>> alone;
  for (std::size_t r = 0; r < times.size(); ++r)
    if (holds[r]) alone.emplace_back(set_total(times, Span(&r, 1)), r);
  std::sort(alone.begin(), alone.end());
  std::vector<std::vector<std::size_t>> starts;
  if (!start.empty()) starts.push_back(start);
  for (std::size_t s = 0; s < std::min(alone.size(), selection_starts); ++s) starts.push_back({alone[s].second});
  std::optional<Selection> best;
  for (const std::vector<std::size_t>& from : starts) {
    Selection found = improve_set(times, k, holds, from);
    if (!best || found.total < best->total) best = std::move(found);
  }
  return *std::move(best);
}

// Neighbours of a strategy within N GPUs: for every part and every other scheme of `schemes`, trade the fewest
// pipelines of the part that (with the idle GPUs) free one pipeline of the scheme for as many of it as fit; and
// fill idle GPUs with as many pipelines of one scheme as fit.
inline std::vector<Strategy> neighbours(const Strategy& strategy, Span<const Scheme> schemes, std::int64_t gpus) {
  std::vector<Strategy> result;
  const std::int64_t idle = gpus - strategy.gpus();
  for (const Scheme& target : schemes) {
    const std::int64_t size = target.gpus();
    if (size <= idle) {
      std::vector<StrategyPart> parts = strategy.parts();
      parts.push_back({target, static_cast<int>(idle / size)});
      result.emplace_back(std::move(parts));
    }
    for (std::size_t p = 0; p < strategy.parts().size(); ++p) {
      const StrategyPart& part = strategy.parts()[p];
      if (part.scheme == target) continue;
      const std::int64_t traded =
          std::max<std::int64_t>(1, (size - idle + part.scheme.gpus() - 1) / part.scheme.gpus());
      if (traded > part.pipelines) continue;
      std::vector<StrategyPart> parts = strategy.parts();
      parts[p].pipelines -= static_cast<int>(traded);
      if (parts[p].pipelines == 0) parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(p));
      parts.push_back({target, static_cast<int>((traded * part.scheme.gpus() + idle) / size)});
      result.emplace_back(std::move(parts));
    }
  }
  return result;
}

}  // namespace sluice::proposal::detail
