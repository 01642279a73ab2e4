#pragma once
// Data-parallel replica balancing (DynaPipe §4): split the micro-batch times among |D| replicas to minimise
// the largest sum. balance_kk is Karmarkar–Karp multi-way largest differencing (max/OPT <= 4/3 − 1/(3|D|),
// Michiels et al. 2012); balance_lpt is greedy longest-processing-time first (the same bound, Graham 1969).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/microbatch/types.hpp"

namespace sluice::microbatch {

namespace detail {

inline void check_balance_input(Span<const double> times, int replicas, const char* where) {
  sluice::require(replicas >= 1, where, ": replicas must be >= 1, got ", replicas);
  sluice::require(!times.empty(), where, ": no micro-batch times");
  for (std::size_t i = 0; i < times.size(); ++i)
    sluice::require(std::isfinite(times[i]) && times[i] >= 0, where, ": time of micro-batch ", i,
                    " must be finite and >= 0, got ", times[i]);
}

// Canonical form: each replica's micro-batches ascending, replicas ordered by their first micro-batch
// (empty ones last), loads summed in that order.
inline ReplicaAssignment canonical(std::vector<std::vector<std::size_t>> replicas, Span<const double> times) {
  for (auto& items : replicas) std::sort(items.begin(), items.end());
  std::sort(replicas.begin(), replicas.end(), [](const auto& x, const auto& y) {
    if (x.empty() || y.empty()) return !x.empty() && y.empty();
    return x.front() < y.front();
  });
  ReplicaAssignment result{std::move(replicas), {}, 0};
  for (const auto& items : result.replicas) {
    double load = 0;
    for (const std::size_t i : items) load += times[i];
    result.loads.push_back(load);
    result.max_load = std::max(result.max_load, load);
  }
  return result;
}

}  // namespace detail

inline ReplicaAssignment balance_kk(Span<const double> times, int replicas) {
  detail::check_balance_input(times, replicas, "balance_kk");
  const std::size_t m = times.size();
  const auto d = static_cast<std::size_t>(replicas);
  // Partial solutions: d subsets each, sums sorted descending; subsets are linked lists over `next`, so
  // merging two subsets is O(1).
  std::vector<double> sum(m * d, 0.0);
  std::vector<std::ptrdiff_t> head(m * d, -1);
  std::vector<std::ptrdiff_t> tail(m * d, -1);
  std::vector<std::ptrdiff_t> next(m, -1);
  struct Entry {
    double spread;  // max − min of the solution's sums
    std::size_t solution;
  };
  // The largest spread first, then the lowest solution.
  auto later = [](const Entry& x, const Entry& y) {
    return x.spread != y.spread ? x.spread < y.spread : x.solution > y.solution;
  };
  std::vector<Entry> storage;
  storage.reserve(m);
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> heap(later, std::move(storage));
  for (std::size_t i = 0; i < m; ++i) {
    sum[i * d] = times[i];
    head[i * d] = tail[i * d] = static_cast<std::ptrdiff_t>(i);
    heap.push({times[i], i});
  }
  std::vector<std::size_t> slot(d);
  std::vector<double> merged_sum(d);
  std::vector<std::ptrdiff_t> merged_head(d);
  std::vector<std::ptrdiff_t> merged_tail(d);
  while (heap.size() > 1) {
    const std::size_t a = heap.top().solution;
    heap.pop();
    const std::size_t b = heap.top().solution;
    heap.pop();
    // Largest subset of one with the smallest of the other, and so on.
    for (std::size_t k = 0; k < d; ++k) {
      const std::size_t x = a * d + k;
      const std::size_t y = b * d + (d - 1 - k);
      merged_sum[k] = sum[x] + sum[y];
      if (head[x] < 0) {
        merged_head[k] = head[y];
        merged_tail[k] = tail[y];
      } else {
        merged_head[k] = head[x];
        merged_tail[k] = head[y] < 0 ? tail[x] : tail[y];
        if (head[y] >= 0) next[static_cast<std::size_t>(tail[x])] = head[y];
      }
    }
    for (std::size_t k = 0; k < d; ++k) slot[k] = k;
    std::stable_sort(slot.begin(), slot.end(),
                     [&](std::size_t x, std::size_t y) { return merged_sum[x] > merged_sum[y]; });
    for (std::size_t k = 0; k < d; ++k) {
      sum[a * d + k] = merged_sum[slot[k]];
      head[a * d + k] = merged_head[slot[k]];
      tail[a * d + k] = merged_tail[slot[k]];
    }
    heap.push({sum[a * d] - sum[a * d + d - 1], a});
  }
  const std::size_t root = heap.top().solution;
  std::vector<std::vector<std::size_t>> assignment(d);
  for (std::size_t k = 0; k < d; ++k)
    for (std::ptrdiff_t i = head[root * d + k]; i >= 0; i = next[static_cast<std::size_t>(i)])
      assignment[k].push_back(static_cast<std::size_t>(i));
  return detail::canonical(std::move(assignment), times);
}

inline ReplicaAssignment balance_lpt(Span<const double> times, int replicas) {
  detail::check_balance_input(times, replicas, "balance_lpt");
  std::vector<std::size_t> order(times.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return times[x] > times[y]; });
  std::vector<std::vector<std::size_t>> assignment(static_cast<std::size_t>(replicas));
  std::vector<double> load(assignment.size(), 0.0);
  for (const std::size_t i : order) {
    const auto least = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    assignment[least].push_back(i);
    load[least] += times[i];
  }
  return detail::canonical(std::move(assignment), times);
}

// The micro-batch times of a partition, in order: what the balancers take.
inline std::vector<double> micro_batch_times(const Partition& partition) {
  std::vector<double> times;
  times.reserve(partition.micro_batches.size());
  for (const ShapedMicroBatch& micro_batch : partition.micro_batches) times.push_back(micro_batch.seconds);
  return times;
}

// Raises invalid_plan unless there are `replicas` lists, every micro-batch index appears exactly once, each
// list ascending, and loads and max_load recompute (relative 1e-9).
inline void validate(const ReplicaAssignment& assignment, Span<const double> times, int replicas) {
  sluice::require(replicas >= 1, "replica assignment: replicas must be >= 1, got ", replicas);
  const PlanCheck check("replica assignment: ");
  const auto d = static_cast<std::size_t>(replicas);
  check(assignment.replicas.size() == d, "has ", assignment.replicas.size(), " replicas, expected ", d);
  check(assignment.loads.size() == d, "has ", assignment.loads.size(), " loads, expected ", d);
  std::vector<bool> seen(times.size(), false);
  double max_load = 0;
  for (std::size_t r = 0; r < d; ++r) {
    double load = 0;
    const auto& items = assignment.replicas[r];
    for (std::size_t k = 0; k < items.size(); ++k) {
      check(items[k] < times.size(), "replica ", r, " holds micro-batch ", items[k], " of ", times.size());
      check(k == 0 || items[k - 1] < items[k], "replica ", r, " is not in ascending micro-batch order");
      check(!seen[items[k]], "micro-batch ", items[k], " is on more than one replica");
      seen[items[k]] = true;
      load += times[items[k]];
    }
    check(nearly_equal(load, assignment.loads[r]), "replica ", r, " says load ", assignment.loads[r],
          ", its micro-batches give ", load);
    max_load = std::max(max_load, load);
  }
  check(std::all_of(seen.begin(), seen.end(), [](bool x) { return x; }), "some micro-batch is on no replica");
  check(nearly_equal(max_load, assignment.max_load), "max_load ", assignment.max_load, ", its replicas give ",
        max_load);
}

}  // namespace sluice::microbatch
