#pragma once
// Local search on the best greedy dispatch (moves and swaps off the pipeline at the maximum). Used by dispatch.hpp.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <vector>

#include "sluice/assign/detail/dispatch_problem.hpp"
#include "sluice/core/span.hpp"

namespace sluice::assign::detail {

// ---- Local search --------------------------------------------------------------------------------------
//
// Repeatedly takes p, the pipeline with the largest bound (lowest index on ties), and looks at every move of
// one of its sequences to another feasible pipeline q and every swap of one of its sequences with a shorter
// one of q (a swap with a sequence at least as long cannot lower bound_p). The candidate minimising
// max(new_p, new_q) is applied if that is below bound_p (by a relative 1e-12, so that rounding never
// accepts a non-move); ties keep the first in (sequence, pipeline, partner) order. Each accepted step
// strictly lowers the bounds sorted in descending order, lexicographically, so the search ends; the maximum
// never rises, and falls once every pipeline at the maximum has been lowered. Bounds are recomputed in batch
// order after each step, so they equal dispatch_pipeline_bounds exactly. The best swap of a sequence with q is
// found by binary search over q's sequences in length order (consider_swaps), not by trying each.
class DispatchLocalSearch {
public:
  DispatchLocalSearch(const DispatchProblem& problem, std::vector<int>& pipeline_of)
      : problem_(problem),
        pipeline_of_(pipeline_of),
        members_(static_cast<std::size_t>(problem.pipelines())),
        by_length_(static_cast<std::size_t>(problem.pipelines())),
        loads_(static_cast<std::size_t>(problem.pipelines())),
        length_class_(static_cast<std::size_t>(problem.sequences())) {
    for (int i = 0; i < problem.sequences(); ++i) members_[pipeline_of[i]].push_back(i);
    for (int p = 0; p < problem.pipelines(); ++p) {
      by_length_[p] = members_[p];
      std::sort(by_length_[p].begin(), by_length_[p].end(), shorter_);
    }
    std::vector<std::int64_t> lengths;
    for (int i = 0; i < problem.sequences(); ++i) lengths.push_back(problem.length(i));
    std::sort(lengths.begin(), lengths.end());
    lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
    for (int i = 0; i < problem.sequences(); ++i)
      length_class_[i] =
          static_cast<int>(std::lower_bound(lengths.begin(), lengths.end(), problem.length(i)) - lengths.begin());
    moved_seen_.assign(lengths.size(), 0);
    for (int p = 0; p < problem.pipelines(); ++p) recompute(p);
  }

  void run() {
    const int pipelines = problem_.pipelines();
    while (true) {
      int p = 0;
      for (int q = 1; q < pipelines; ++q) {
        if (loads_[q].bound > loads_[p].bound) p = q;
      }
      const double current = loads_[p].bound;
      Step step;
      step.value = current - current * 1e-12;
      ++moved_stamp_;
      for (const int i : members_[p]) {
        if (first_of_class(i)) consider_moves(p, i, step);
      }
      if (step.sequence < 0) return;
      apply(p, step);
    }
  }

private:
  struct Load {
    double sum = 0;
    std::int64_t tokens = 0;
    std::int64_t micro_batches = 1;  // V_lo (1 while empty)
    int count = 0;
    int longest = -1;  // the longest sequence (first in batch order on ties) ...
    int second = -1;   // ... and the longest of the others
    double bound = 0;
  };
  // Length, then batch order.
  struct Shorter {
    const DispatchProblem* problem;
    bool operator()(int x, int y) const noexcept {
      return problem->length(x) != problem->length(y) ? problem->length(x) < problem->length(y) : x < y;
    }
  };
  struct Step {
    double value = 0;
    int sequence = -1;
    int target = -1;
    int partner = -1;  // −1: a move
  };

  // Sequences of one length are interchangeable: their times and limits are equal, so every move or swap of a
  // later one has the value of the earlier one's and, compared strictly, never replaces it. Looking at the first
  // of each length of p keeps the result and makes a batch of many equal lengths cheap.
  bool first_of_class(int i) {
    std::uint64_t& mark = moved_seen_[static_cast<std::size_t>(length_class_[i])];
    if (mark == moved_stamp_) return false;
    mark = moved_stamp_;
    return true;
  }

  void consider_moves(int p, int i, Step& step) const {
    const int limit = problem_.limit(i);
    const double without = bound_after(p, i, -1);
    for (int q = 0; q < limit; ++q) {
      if (q == p) continue;
      // An empty pipeline right after an empty one of its group is the same candidate again.
      if (loads_[q].count == 0 && q > 0 && loads_[q - 1].count == 0 && problem_.group_of(q - 1) == problem_.group_of(q))
        continue;
      if (without < step.value) {
        const double value = std::max(without, bound_after(q, -1, i));
        if (value < step.value) step = {value, i, q, -1};
      }
      consider_swaps(p, i, q, step);
    }
  }

  // The best swap of i (on p) with a shorter sequence k of q, found by binary search rather than by trying every
  // k. Along q's sequences in length order, p's bound after the swap never falls (k's time, tokens and the longest
  // only grow) and q's never rises (q's longest becomes max(i, its longest) whatever k is): their maximum is least
  // where they cross, and every k of that least value lies in one run around the crossing. The partners that can go
  // to p are a prefix too (a shorter sequence fits at least the pipelines a longer one does). Among the k of least
  // value the first in batch order is taken, as a scan in batch order comparing strictly would.
  void consider_swaps(int p, int i, int q, Step& step) const {
    const std::vector<int>& partners = by_length_[q];
    const std::int64_t length = problem_.length(i);
    const auto eligible_end = std::partition_point(
        partners.begin(), partners.end(), [&](int k) { return problem_.length(k) < length && problem_.limit(k) > p; });
    const Span<const int> eligible(partners.begin(), eligible_end);
    if (eligible.empty()) return;
    const auto on_p = [&](int k) { return bound_after(p, i, k); };
    const auto on_q = [&](int k) { return bound_after(q, k, i); };
    // p's least is at the shortest partner and q's at the longest: a swap beats neither where their max does not.
    if (std::max(on_p(eligible.front()), on_q(eligible.back())) >= step.value) return;
    const auto crossing =
        std::partition_point(eligible.begin(), eligible.end(), [&](int k) { return on_p(k) < on_q(k); });
    double least = std::numeric_limits<double>::infinity();
    if (crossing != eligible.begin()) least = on_q(*std::prev(crossing));
    if (crossing != eligible.end()) least = std::min(least, on_p(*crossing));
    if (!(least < step.value)) return;
    const auto first = std::partition_point(eligible.begin(), eligible.end(), [&](int k) { return on_q(k) > least; });
    const auto last = std::partition_point(eligible.begin(), eligible.end(), [&](int k) { return on_p(k) <= least; });
    const int partner = *std::min_element(first, last);
    step = {least, i, q, partner};
  }

  // Eq. 2 of pipeline p after removing `removed` and adding `added` (either may be −1).
  [[nodiscard]] double bound_after(int p, int removed, int added) const noexcept {
    const Load& load = loads_[p];
    const int g = problem_.group_of(p);
    const int count = load.count - (removed >= 0 ? 1 : 0) + (added >= 0 ? 1 : 0);
    if (count == 0) return 0.0;
    double sum = load.sum;
    std::int64_t tokens = load.tokens;
    int longest = load.longest;
    if (removed >= 0) {
      sum -= problem_.time(removed, g);
      tokens -= problem_.length(removed);
      if (removed == longest) longest = load.second;
    }
    if (added >= 0) {
      sum += problem_.time(added, g);
      tokens += problem_.length(added);
      if (longest < 0 || problem_.length(added) > problem_.length(longest)) longest = added;
    }
    // Tokens moved by at most MaxLen (one sequence each way), so V_lo moves by at most one: no division.
    const std::int64_t max_len = problem_.group(g).max_len;
    std::int64_t micro_batches = load.micro_batches;
    if (tokens > micro_batches * max_len) {
      ++micro_batches;
    } else if (micro_batches > 1 && tokens <= (micro_batches - 1) * max_len) {
      --micro_batches;
    }
    return problem_.bound_of(g, sum, micro_batches, problem_.time(longest, g));
  }

  void apply(int p, const Step& step) {
    const int q = step.target;
    erase(p, step.sequence);
    insert(q, step.sequence);
    pipeline_of_[step.sequence] = q;
    if (step.partner >= 0) {
      erase(q, step.partner);
      insert(p, step.partner);
      pipeline_of_[step.partner] = p;
    }
    recompute(p);
    recompute(q);
  }

  void erase(int p, int i) {
    std::vector<int>& list = members_[p];
    list.erase(std::lower_bound(list.begin(), list.end(), i));
    std::vector<int>& sorted = by_length_[p];
    sorted.erase(std::lower_bound(sorted.begin(), sorted.end(), i, shorter_));
  }
  void insert(int p, int i) {
    std::vector<int>& list = members_[p];
    list.insert(std::lower_bound(list.begin(), list.end(), i), i);
    std::vector<int>& sorted = by_length_[p];
    sorted.insert(std::lower_bound(sorted.begin(), sorted.end(), i, shorter_), i);
  }

  // Sums in batch order, as DispatchProblem::bounds does.
  void recompute(int p) {
    const int g = problem_.group_of(p);
    Load load;
    for (const int i : members_[p]) {
      load.sum += problem_.time(i, g);
      load.tokens += problem_.length(i);
      ++load.count;
      const std::int64_t length = problem_.length(i);
      if (load.longest < 0 || length > problem_.length(load.longest)) {
        load.second = load.longest;
        load.longest = i;
      } else if (load.second < 0 || length > problem_.length(load.second)) {
        load.second = i;
      }
    }
    if (load.count > 0) {
      load.micro_batches = problem_.micro_batches(g, load.tokens);
      load.bound = problem_.bound_of(g, load.sum, load.micro_batches, problem_.time(load.longest, g));
    }
    loads_[p] = load;
  }

  const DispatchProblem& problem_;
  std::vector<int>& pipeline_of_;
  std::vector<std::vector<int>> members_;  // per pipeline, its sequences in batch order
  Shorter shorter_{&problem_};
  std::vector<std::vector<int>> by_length_;  // per pipeline, its sequences by Shorter
  std::vector<Load> loads_;
  std::vector<int> length_class_;          // per sequence, the rank of its length among the batch's distinct lengths
  std::vector<std::uint64_t> moved_seen_;  // per length class, the stamp it was last seen under
  std::uint64_t moved_stamp_ = 0;
};

}  // namespace sluice::assign::detail
