#pragma once
// Stage orders: GPipe, 1F1B, and DynaPipe's memory-aware adaptive cyclic schedule (Algorithm 1). Each takes
// an injection order: the order in which micro-batches enter the first stage.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/schedule/instructions.hpp"

namespace sluice::schedule {

namespace detail {

inline void require_injection(Span<const int> injection, std::size_t micro_batches, int stages) {
  sluice::require(stages >= 1, "schedule: stages must be >= 1, got ", stages);
  sluice::require(injection.size() == micro_batches, "schedule: injection order has ", injection.size(),
                  " entries for ", micro_batches, " micro-batches");
  sluice::require(!injection.empty(), "schedule: no micro-batches");
  std::vector<char> seen(injection.size(), 0);
  for (const int i : injection) {
    sluice::require(i >= 0 && static_cast<std::size_t>(i) < injection.size(),
                    "schedule: injection order names micro-batch ", i, " outside [0, ", injection.size(), ")");
    sluice::require(!seen[static_cast<std::size_t>(i)], "schedule: injection order names micro-batch ", i, " twice");
    seen[static_cast<std::size_t>(i)] = 1;
  }
}

}  // namespace detail

inline std::vector<int> identity_injection(std::size_t micro_batches) {
  std::vector<int> injection(micro_batches);
  for (std::size_t i = 0; i < micro_batches; ++i) injection[i] = static_cast<int>(i);
  return injection;
}

// All forwards in injection order, then all backwards in reverse.
inline Order gpipe(Span<const int> injection, int stages) {
  detail::require_injection(injection, injection.size(), stages);
  Order order;
  order.stages.resize(static_cast<std::size_t>(stages));
  for (std::vector<Op>& ops : order.stages) {
    for (const int i : injection) ops.push_back({i, Pass::forward});
    for (auto it = injection.rbegin(); it != injection.rend(); ++it) ops.push_back({*it, Pass::backward});
  }
  return order;
}

// 1F1B: stage j runs min(c − 1 − j, m) warm-up forwards, then alternates forward and backward, then drains.
inline Order one_f_one_b(Span<const int> injection, int stages) {
  detail::require_injection(injection, injection.size(), stages);
  const std::size_t m = injection.size();
  Order order;
  order.stages.resize(static_cast<std::size_t>(stages));
  for (std::size_t j = 0; j < order.stages.size(); ++j) {
    std::vector<Op>& ops = order.stages[j];
    const std::size_t warm = std::min(order.stages.size() - 1 - j, m);
    for (std::size_t k = 0; k < warm; ++k) ops.push_back({injection[k], Pass::forward});
    for (std::size_t k = 0; k + warm < m; ++k) {
      ops.push_back({injection[warm + k], Pass::forward});
      ops.push_back({injection[k], Pass::backward});
    }
    for (std::size_t k = m - warm; k < m; ++k) ops.push_back({injection[k], Pass::backward});
  }
  return order;
}

// Algorithm 1 (adaptive cyclic). Each cycle every stage runs at most one backward (first) and one forward;
// ops unlocked in a cycle become usable in the next. A forward waits (FIFO kept) while it would raise the
// stage's held activation above its limit, unless the stage holds nothing. Raises sluice::infeasible when a
// single micro-batch's activation exceeds a stage's limit.
inline Order adaptive_cyclic(const Problem& problem, Span<const int> injection, Span<const double> limits) {
  require_problem(problem);
  detail::require_injection(injection, problem.micro_batches.size(), problem.stages);
  const auto c = static_cast<std::size_t>(problem.stages);
  const std::size_t m = injection.size();
  sluice::require(limits.size() == c, "schedule: ", limits.size(), " memory limits for ", c, " stages");
  for (std::size_t j = 0; j < c; ++j) {
    sluice::require(limits[j] > 0 && !std::isnan(limits[j]), "schedule: memory limit[", j, "] must be > 0, got ",
                    limits[j]);
    for (std::size_t i = 0; i < m; ++i)
      if (problem.micro_batches[i].activation[j] > limits[j])
        throw infeasible(sluice::concat("schedule: micro-batch ", i, " needs ", problem.micro_batches[i].activation[j],
                                        " activation bytes on stage ", j, ", above its limit ", limits[j]));
  }
  // Queues as arrays with a read head; each stage receives each micro-batch once per pass.
  std::vector<std::vector<int>> forward_queue(c), backward_queue(c), unlocked_f(c), unlocked_b(c);
  std::vector<std::size_t> forward_head(c, 0), backward_head(c, 0), held_count(c, 0);
  std::vector<double> held(c, 0.0);
  for (std::size_t j = 0; j < c; ++j) {
    forward_queue[j].reserve(m);
    backward_queue[j].reserve(m);
    unlocked_f[j].reserve(m);
    unlocked_b[j].reserve(m);
  }
  forward_queue[0].assign(injection.begin(), injection.end());
  Order order;
  order.stages.resize(c);
  for (std::vector<Op>& ops : order.stages) ops.reserve(2 * m);
  std::size_t remaining = 2 * m * c;
  while (remaining > 0) {
    const std::size_t before = remaining;
    for (std::size_t j = 0; j < c; ++j) {
      if (backward_head[j] < backward_queue[j].size()) {
        const int i = backward_queue[j][backward_head[j]++];
        held[j] -= problem.micro_batches[static_cast<std::size_t>(i)].activation[j];
        --held_count[j];
        order.stages[j].push_back({i, Pass::backward});
        --remaining;
        if (j > 0) unlocked_b[j - 1].push_back(i);
      }
      if (forward_head[j] < forward_queue[j].size()) {
        const int i = forward_queue[j][forward_head[j]];
        const double bytes = problem.micro_batches[static_cast<std::size_t>(i)].activation[j];
        if (held_count[j] == 0 || held[j] + bytes <= limits[j]) {
          ++forward_head[j];
          held[j] += bytes;
          ++held_count[j];
          order.stages[j].push_back({i, Pass::forward});
          --remaining;
          (j + 1 < c ? unlocked_f[j + 1] : unlocked_b[j]).push_back(i);
        }
      }
    }
    for (std::size_t j = 0; j < c; ++j) {
      forward_queue[j].insert(forward_queue[j].end(), unlocked_f[j].begin(), unlocked_f[j].end());
      backward_queue[j].insert(backward_queue[j].end(), unlocked_b[j].begin(), unlocked_b[j].end());
      unlocked_f[j].clear();
      unlocked_b[j].clear();
    }
    if (remaining == before) throw infeasible("schedule: the adaptive cyclic schedule made no progress in a cycle");
  }
  return order;
}

}  // namespace sluice::schedule
