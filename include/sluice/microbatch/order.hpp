#pragma once
// Sample ordering (DynaPipe §4): the partition DP cuts an ordered list into consecutive runs, so similar
// samples must be neighbours. Decoder-only: by length; encoder–decoder: by (input, target), or along a short
// open path through the (input, target) points (the paper's "T" ordering; nearest neighbour + 2-opt here).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/span.hpp"
#include "sluice/microbatch/types.hpp"

namespace sluice::microbatch {

enum class Ordering {
  length,        // total length (input + target) descending, then id
  input_target,  // (input, target) descending, then id (the paper's "S")
  path,          // open nearest-neighbour path under the L1 distance, improved by 2-opt (the paper's "T")
};

inline constexpr NameTable<Ordering, 3> ordering_names{
    {{Ordering::length, "length"}, {Ordering::input_target, "input_target"}, {Ordering::path, "path"}}};

// Raises invalid_input naming `what` unless `text` is length, input_target or path.
inline Ordering ordering_from(std::string_view text, std::string_view what = "ordering") {
  return value_in(ordering_names, text, what);
}

// Raises invalid_input unless there is at least one sample, ids are >= 0 and distinct, every input is >= 1,
// every target >= 0, and the total token count fits in int64.
inline void check_samples(Span<const Sample> samples, std::string_view where) {
  sluice::require(!samples.empty(), where, ": no samples");
  std::unordered_set<std::int64_t> ids;
  ids.reserve(samples.size());
  std::int64_t total = 0;
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  for (const Sample& sample : samples) {
    sluice::require(sample.id >= 0, where, ": sample id must be >= 0, got ", sample.id);
    sluice::require(ids.insert(sample.id).second, where, ": sample id ", sample.id, " appears twice");
    sluice::require(sample.input >= 1, where, ": sample ", sample.id, ": input length must be >= 1, got ",
                    sample.input);
    sluice::require(sample.target >= 0, where, ": sample ", sample.id, ": target length must be >= 0, got ",
                    sample.target);
    sluice::require(sample.input <= max - sample.target && total <= max - sample.input - sample.target, where,
                    ": total token count overflows");
    total += sample.input + sample.target;
  }
}

namespace detail {

inline std::int64_t l1(const Sample& x, const Sample& y) noexcept {
  return (x.input > y.input ? x.input - y.input : y.input - x.input) +
         (x.target > y.target ? x.target - y.target : y.target - x.target);
}

// Nearest neighbour from the largest point (ties: earlier in (input, target, id) order), then 2-opt with
// first improvement until no reversal shortens the path. Distances are integers, so every accepted move
// shortens the path by >= 1 and the search ends.
inline void path_order(std::vector<Sample>& points) {
  const std::size_t n = points.size();
  for (std::size_t i = 1; i < n; ++i) {
    std::size_t next = i;
    std::int64_t nearest = l1(points[i - 1], points[i]);
    for (std::size_t j = i + 1; j < n; ++j) {
      const std::int64_t d = l1(points[i - 1], points[j]);
      if (d < nearest) {
        nearest = d;
        next = j;
      }
    }
    // Rotate instead of swap so the unvisited points keep their sorted order (deterministic tie-breaks).
    std::rotate(points.begin() + static_cast<std::ptrdiff_t>(i), points.begin() + static_cast<std::ptrdiff_t>(next),
                points.begin() + static_cast<std::ptrdiff_t>(next) + 1);
  }
  if (n < 3) return;
  bool improved = true;
  while (improved) {
    improved = false;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      // Reversing points[i+1..j] replaces edges (i, i+1) and (j, j+1) by (i, j) and (i+1, j+1); at the open
      // end (j = n − 1) only the first edge changes.
      for (std::size_t j = i + 2; j < n; ++j) {
        const std::int64_t before = l1(points[i], points[i + 1]) + (j + 1 < n ? l1(points[j], points[j + 1]) : 0);
        const std::int64_t after = l1(points[i], points[j]) + (j + 1 < n ? l1(points[i + 1], points[j + 1]) : 0);
        if (after < before) {
          std::reverse(points.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                       points.begin() + static_cast<std::ptrdiff_t>(j) + 1);
          improved = true;
        }
      }
    }
    // Reversing a prefix points[0..j] replaces only edge (j, j+1) by (0, j+1).
    for (std::size_t j = 1; j + 1 < n; ++j) {
      if (l1(points[0], points[j + 1]) < l1(points[j], points[j + 1])) {
        std::reverse(points.begin(), points.begin() + static_cast<std::ptrdiff_t>(j) + 1);
        improved = true;
      }
    }
  }
}

}  // namespace detail

// Sum of L1 distances between neighbours: what the path ordering shortens.
inline std::int64_t path_length(Span<const Sample> ordered) noexcept {
  std::int64_t total = 0;
  for (std::size_t i = 1; i < ordered.size(); ++i) total += detail::l1(ordered[i - 1], ordered[i]);
  return total;
}

inline std::vector<Sample> order_samples(Span<const Sample> samples, Ordering ordering) {
  check_samples(samples, "order_samples");
  std::vector<Sample> ordered(samples.begin(), samples.end());
  if (ordering == Ordering::length) {
    std::sort(ordered.begin(), ordered.end(), [](const Sample& x, const Sample& y) {
      const std::int64_t lx = x.input + x.target;
      const std::int64_t ly = y.input + y.target;
      return lx != ly ? lx > ly : x.id < y.id;
    });
    return ordered;
  }
  std::sort(ordered.begin(), ordered.end(), [](const Sample& x, const Sample& y) {
    if (x.input != y.input) return x.input > y.input;
    return x.target != y.target ? x.target > y.target : x.id < y.id;
  });
  if (ordering == Ordering::path) detail::path_order(ordered);
  return ordered;
}

}  // namespace sluice::microbatch
