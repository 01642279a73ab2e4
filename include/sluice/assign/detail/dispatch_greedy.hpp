#pragma once
// Hydraulis Alg. 1, the greedy dispatch, one worker's share of the trials. Used by dispatch.hpp.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "sluice/assign/detail/dispatch_problem.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/span.hpp"

namespace sluice::assign::detail {

// ---- Greedy (Alg. 1) ---------------------------------------------------------------------------------
//
// Alg. 1 puts each sequence on the feasible pipeline j minimising max(new_j, max_{k≠j} bound_k). Adding a
// sequence never lowers a bound, so that is max(new_j, M) with M the current maximum for every j (the
// argmax included), and breaking its ties by the smaller new_j, then the lower index, makes the rule
// "argmin_j (new_j, j)": the pipeline whose bound is lowest after the addition. That needs no top-2 of the
// bounds, and it is cheap to search:
// - Pipelines of one group are interchangeable, so the empty ones are taken in index order and only the
//   lowest-index empty pipeline of a group is evaluated.
// - The non-empty pipelines of a group are kept sorted by the bound's first term A_j; since new_j ≥ A_j + T'(l),
//   a group's scan stops at the first pipeline with A_j + T'(l) above the best new bound found so far.
// - Evaluating a pipeline is O(1): its state is the first term of the bound without the longest-sequence
//   term (`base`), T' of its longest sequence, its micro-batch count V_lo and the tokens left in its last
//   micro-batch (`room`).
// Random trials draw their order lazily (a forward Fisher–Yates, one step per placement). A trial is
// abandoned once its running maximum reaches this worker's best: its objective can only be larger, or
// equal with a larger trial index. The longest-first trial (index −1, LPT) runs first: it is usually the
// best single order, and its objective makes the random trials stop early. No allocation after construction.
class DispatchGreedy {
public:
  DispatchGreedy(const DispatchProblem& problem, Span<const int> pinned, Span<const int> rest,
                 Span<const int> longest_first)
      : problem_(problem),
        pinned_(pinned),
        rest_(rest),
        longest_first_(longest_first),
        entries_(static_cast<std::size_t>(problem.pipelines())),
        states_(static_cast<std::size_t>(problem.pipelines())),
        used_(static_cast<std::size_t>(problem.groups())),
        order_(static_cast<std::size_t>(problem.sequences())),
        assignment_(static_cast<std::size_t>(problem.sequences())),
        best_assignment_(static_cast<std::size_t>(problem.sequences())) {}

  // Trial −1 (the longest-first order) when `first` is −1, then first, first + stride, ... below `trials`
  // (random orders). A trial whose objective is at most `certain` cannot be beaten by more than that margin:
  // the lowest such trial index over all workers is published in `certified`, and no worker starts a trial
  // above it.
  void run(std::uint64_t seed, int first, int trials, int stride, double certain, std::atomic<int>& certified) {
    for (int trial = first; trial < trials && trial < certified.load(std::memory_order_relaxed);
         trial = trial < 0 ? 0 : trial + stride) {
      double objective = 0.0;
      if (!run_trial(seed, trial, objective) || objective >= best_objective_) continue;
      best_objective_ = objective;
      best_trial_ = trial;
      std::copy(assignment_.begin(), assignment_.end(), best_assignment_.begin());
      if (objective <= certain) {
        certified_ = true;
        int known = certified.load(std::memory_order_relaxed);
        while (trial < known && !certified.compare_exchange_weak(known, trial, std::memory_order_relaxed)) {
        }
        return;
      }
    }
  }

  [[nodiscard]] double best_objective() const noexcept { return best_objective_; }
  [[nodiscard]] int best_trial() const noexcept { return best_trial_; }
  [[nodiscard]] bool certified() const noexcept { return certified_; }
  [[nodiscard]] const std::vector<int>& best_assignment() const noexcept { return best_assignment_; }

private:
  struct Entry {  // a non-empty pipeline in its group's list, sorted by the first term of its bound
    double first_term;
    int pipeline;
  };
  struct State {
    double base;                 // Σ T' + c·V + c·(PP − 1): the first term without (PP − 1)·T'(longest)
    double longest;              // T' of the longest sequence
    std::int64_t micro_batches;  // V_lo
    std::int64_t room;           // V·MaxLen − tokens
  };

  // Runs one trial; false when abandoned. Trial −1 takes the longest-first order; the others put pinned
  // sequences first, each part in its own random order.
  bool run_trial(std::uint64_t seed, int trial, double& objective) {
    const bool random = trial >= 0;
    Rng rng = Rng::stream(seed, static_cast<std::uint64_t>(random ? trial : 0));
    if (random) {
      std::copy(pinned_.begin(), pinned_.end(), order_.begin());
      std::copy(rest_.begin(), rest_.end(), order_.begin() + static_cast<std::ptrdiff_t>(pinned_.size()));
    } else {
      std::copy(longest_first_.begin(), longest_first_.end(), order_.begin());
    }
    std::fill(used_.begin(), used_.end(), 0);
    const std::size_t split = pinned_.size();
    const std::size_t n = order_.size();
    double maximum = 0.0;
    for (std::size_t k = 0; k < n; ++k) {
      if (random) std::swap(order_[k], order_[k + static_cast<std::size_t>(rng.below((k < split ? split : n) - k))]);
      maximum = std::max(maximum, place(order_[k]));
      if (maximum >= best_objective_) return false;
    }
    objective = maximum;
    return true;
  }

  // Puts sequence i on argmin_j (new_j, j) and returns its new bound.
  double place(int i) {
    const std::int64_t length = problem_.length(i);
    double best = std::numeric_limits<double>::infinity();
    double best_first_term = best;
    double threshold = best;
    int best_pipeline = std::numeric_limits<int>::max();
    int best_group = -1;
    int best_position = -1;  // in the group's sorted list; −1: its next empty pipeline
    auto consider = [&](double value, double first_term, int pipeline, int g, int position) {
      if (value < best || (value == best && pipeline < best_pipeline)) {
        best = value;
        best_first_term = first_term;
        threshold = value + value * 1e-12;  // covers rounding in new_j ≥ A_j + T'
        best_pipeline = pipeline;
        best_group = g;
        best_position = position;
      }
    };
    const int feasible = problem_.feasible_groups(i);
    for (int g = 0; g < feasible; ++g) {
      const DispatchGroup& group = problem_.group(g);
      const double t = problem_.time(i, g);
      const int used = used_[g];
      if (used < group.count) {
        const double bound = empty_bound(group, t);
        consider(bound, bound, group.first + used, g, -1);
      }
      const Entry* list = entries_.data() + group.first;
      for (int position = 0; position < used; ++position) {
        if (list[position].first_term + t > threshold) break;
        const State& state = states_[list[position].pipeline];
        const bool new_micro_batch = length > state.room;
        const double longest = std::max(state.longest, t);
        const double sum_term = state.base + t + (new_micro_batch ? group.overhead : 0.0) + group.pp_minus_1 * longest;
        const auto v = static_cast<double>(state.micro_batches + (new_micro_batch ? 1 : 0));
        const double value =
            problem_.v_step() ? std::max(sum_term, (longest + group.overhead) * (group.pp_minus_1 + v)) : sum_term;
        consider(value, sum_term, list[position].pipeline, g, position);
      }
    }
    assignment_[i] = best_pipeline;
    const DispatchGroup& group = problem_.group(best_group);
    const double t = problem_.time(i, best_group);
    Entry* list = entries_.data() + group.first;
    State& state = states_[best_pipeline];
    int position = best_position;
    if (position < 0) {
      state = {t + group.overhead + group.pp_minus_1 * group.overhead, t, 1, group.max_len - length};
      position = used_[best_group]++;
      for (; position > 0 && list[position - 1].first_term > best_first_term; --position)
        list[position] = list[position - 1];
    } else {
      const bool new_micro_batch = length > state.room;
      state.base = state.base + t + (new_micro_batch ? group.overhead : 0.0);
      state.micro_batches += new_micro_batch ? 1 : 0;
      state.room += new_micro_batch ? group.max_len - length : -length;
      state.longest = std::max(state.longest, t);
      const int end = used_[best_group];
      for (; position + 1 < end && list[position + 1].first_term < best_first_term; ++position)
        list[position] = list[position + 1];
    }
    list[position] = {best_first_term, best_pipeline};
    return best;
  }

  // Written as the non-empty update computes it, so that the stored bound equals the evaluated one. With one
  // micro-batch the bound's second term never exceeds its first.
  static double empty_bound(const DispatchGroup& group, double t) noexcept {
    return t + group.overhead + group.pp_minus_1 * group.overhead + group.pp_minus_1 * t;
  }

  const DispatchProblem& problem_;
  Span<const int> pinned_;
  Span<const int> rest_;
  Span<const int> longest_first_;
  std::vector<Entry> entries_;  // per group, its non-empty pipelines sorted by bound, at the group's offset
  std::vector<State> states_;   // per pipeline
  std::vector<int> used_;       // per group, how many of its pipelines are non-empty
  std::vector<int> order_;
  std::vector<int> assignment_;
  std::vector<int> best_assignment_;
  double best_objective_ = std::numeric_limits<double>::infinity();
  int best_trial_ = -1;
  bool certified_ = false;
};

}  // namespace sluice::assign::detail
