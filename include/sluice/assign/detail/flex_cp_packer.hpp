#pragma once
// The flex CP solver's working state and moves (assign/flex_cp.hpp states the problem and runs the solver): first-fit
// decreasing packings into micro-batches of groups, and the improvement that moves, swaps and regroups sequences.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <memory_resource>
#include <numeric>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/assign/flex_cp_problem.hpp"
#include "sluice/assign/flex_cp_types.hpp"

namespace sluice::assign::detail {

// The heuristic's working state: micro-batches of groups, each micro-batch with a height limit set when it opens,
// so a group's slack under it changes only when the group does.
class FlexCpPacker {
public:
  explicit FlexCpPacker(const FlexCpProblem& problem) : problem_(problem), degrees_(problem.degrees.size()) {
    const std::size_t n = problem.lengths.size();
    work_.assign(n * degrees_, std::numeric_limits<double>::infinity());
    charged_.assign(n * degrees_, 0);
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t k = 0; k < degrees_; ++k)
        if (flex_cp_holds(problem, k, problem.lengths[s])) {
          work_[s * degrees_ + k] = flex_cp_sequence_seconds(problem, k, problem.lengths[s]);
          charged_[s * degrees_ + k] = flex_cp_charged(problem, k, problem.lengths[s]);
        }
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::ranges::sort(order, [&](int x, int y) {
      return problem.lengths[std::size_t(x)] != problem.lengths[std::size_t(y)]
                 ? problem.lengths[std::size_t(x)] > problem.lengths[std::size_t(y)]
                 : x < y;
    });
    longest_first_rank_.resize(n);
    for (std::size_t r = 0; r < n; ++r) longest_first_rank_[std::size_t(order[r])] = int(r);
    longest_first_ = std::move(order);
    rank_marks_.assign(n, 0);
    slowest_first_.resize(degrees_);
    slowest_first_place_.assign(degrees_ * n, 0);
    slowest_first_alone_.resize(degrees_);
    for (std::size_t k = 0; k < degrees_; ++k) {
      // (time alone, sequence), slowest first, ties by index: taken longest first, where time grows with length
      // and only runs of equal times need sorting.
      std::vector<std::pair<double, int>> timed;
      for (const int s : longest_first_)
        if (std::isfinite(work(s, k))) timed.emplace_back(constant(k) + work(s, k), s);
      const auto slower = [](const auto& x, const auto& y) {
        return x.first != y.first ? x.first > y.first : x.second < y.second;
      };
      if (!std::ranges::is_sorted(timed, std::ranges::greater{}, &std::pair<double, int>::first)) {
        std::ranges::sort(timed, slower);
      } else {
        for (auto run = timed.begin(); run != timed.end();) {
          const auto run_end = std::find_if(run, timed.end(), [&](const auto& x) { return x.first != run->first; });
          std::sort(run, run_end, slower);
          run = run_end;
        }
      }
      for (const auto& [alone, s] : timed) {
        slowest_first_place_[k * n + std::size_t(s)] = int(slowest_first_[k].size());
        slowest_first_[k].push_back(s);
        slowest_first_alone_[k].push_back(alone);
      }
    }
    // Per sequence, its fastest degree (ties to the narrower) and the degrees that hold it by least area (ties
    // likewise): packing_degree's choices without a pass over every degree.
    fastest_.assign(n, -1);
    least_area_first_.assign(n * degrees_, -1);
    for (std::size_t s = 0; s < n; ++s) {
      int* const by_area = &least_area_first_[s * degrees_];
      int held = 0;
      for (std::size_t k = 0; k < degrees_; ++k) {
        if (!std::isfinite(work(s, k))) continue;
        if (fastest_[s] < 0 || constant(k) + work(s, k) < constant(fastest_[s]) + work(s, fastest_[s]))
          fastest_[s] = int(k);
        by_area[held++] = int(k);
      }
      std::stable_sort(by_area, by_area + held,
                       [&](int x, int y) { return width(x) * work(s, x) < width(y) * work(s, y); });
    }
    least_alone_.assign(n, std::numeric_limits<double>::infinity());
    least_area_.assign(n, std::numeric_limits<double>::infinity());
    least_tokens_.assign(n, std::numeric_limits<double>::infinity());
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t k = 0; k < degrees_; ++k) {
        least_alone_[s] = std::min(least_alone_[s], bound_alone(s, k));
        least_area_[s] = std::min(least_area_[s], bound_area(s, k));
        least_tokens_[s] = std::min(least_tokens_[s], bound_tokens(s, k));
      }
  }

  // The units' busy time per unit when each sequence takes its least-area degree, or with a `floor` pack()'s degree.
  [[nodiscard]] double area_per_unit(int floor = -1) const {
    double area = 0;
    for (std::size_t s = 0; s < problem_.lengths.size(); ++s) {
      double least = std::numeric_limits<double>::infinity();
      if (floor >= 0) {
        const int k = packing_degree(s, 0, floor);
        least = width(k) * work(s, k);
      } else {
        for (std::size_t k = 0; k < degrees_; ++k) least = std::min(least, width(k) * work(s, k));
      }
      area += least;
    }
    return area / problem_.units;
  }

  // The target below which pack(target, floor) no longer depends on it: every sequence then takes its fastest
  // degree (or the floor's) and every micro-batch's height limit is its first sequence's time alone.
  [[nodiscard]] double target_free_below(int floor) const {
    double shortest = std::numeric_limits<double>::infinity();
    for (std::size_t s = 0; s < problem_.lengths.size(); ++s) {
      const int k = packing_degree(s, -std::numeric_limits<double>::infinity(), floor);
      shortest = std::min(shortest, constant(k) + work(s, k));
    }
    return shortest;
  }

  // First-fit decreasing into micro-batches of height `target`: each sequence takes the least-area degree whose group
  // stays under the target (else its fastest degree), or with a `floor` the narrowest degree from the floor up that
  // holds it; then the fullest group of that degree it fits, else a new group in the first micro-batch with room,
  // else a new micro-batch.
  double pack(double target, int floor = -1) {
    reset();
    const std::size_t n = problem_.lengths.size();
    std::vector<int>& degree_of = packing_degree_of_;
    degree_of.resize(n);
    // Each degree's sequences as their places in its slowest-first order: filtered from the whole order where the
    // degree has many, sorted where it has few.
    std::vector<std::vector<int>>& chose = packing_places_;
    chose.resize(degrees_);
    for (std::vector<int>& places : chose) places.clear();
    lightest_.assign(degrees_, std::numeric_limits<double>::infinity());
    for (std::size_t s = 0; s < n; ++s) {
      const auto k = std::size_t(packing_degree(s, target, floor));
      degree_of[s] = int(k);
      chose[k].push_back(slowest_first_place_[k * n + s]);
      lightest_[k] = std::min(lightest_[k], work(s, k));
    }
    for (std::size_t k = 0; k < degrees_; ++k) {
      std::vector<int>& places = chose[k];
      if (places.size() * 16 < n) {
        std::ranges::sort(places);
        continue;
      }
      places.clear();
      for (std::size_t place = 0; place < slowest_first_[k].size(); ++place)
        if (degree_of[std::size_t(slowest_first_[k][place])] == int(k)) places.push_back(int(place));
    }
    // Slowest alone first (ties by index): each degree's sequences merged.
    struct Head {
      std::size_t k;
      std::size_t next = 0;
      int sequence = -1;  // at chose[k][next], and its time alone
      double alone = 0;
    };
    std::vector<Head> heads;
    const auto advance = [&](Head& head) {
      const auto place = std::size_t(chose[head.k][head.next]);
      head.sequence = slowest_first_[head.k][place];
      head.alone = slowest_first_alone_[head.k][place];
    };
    for (std::size_t k = 0; k < degrees_; ++k)
      if (!chose[k].empty()) advance(heads.emplace_back(Head{.k = k}));
    const auto ahead = [](const Head& x, const Head& y) {  // x's sequence goes before y's
      return x.alone != y.alone ? x.alone > y.alone : x.sequence < y.sequence;
    };
    while (!heads.empty()) {
      std::size_t first = 0;
      for (std::size_t h = 1; h < heads.size(); ++h)
        if (ahead(heads[h], heads[first])) first = h;
      Head& head = heads[first];
      place(head.sequence, int(head.k), target);
      if (++head.next == chose[head.k].size()) {
        heads.erase(heads.begin() + std::ptrdiff_t(first));
      } else {
        advance(head);
      }
    }
    return objective();
  }

  // Candidate moves the improvement of all starts together prices at most (a tenth of a second at 1,024 GPUs), so
  // that huge batches stay bounded in time.
  static constexpr std::int64_t improvement_budget = std::int64_t{1} << 26;

  // Moves a sequence out of each micro-batch's slowest group, or swaps it with another group's, wherever that
  // shortens the iteration; empties the shortest micro-batches into the others' idle time; regroups each
  // micro-batch's sequences; pools two micro-batches into one; and takes a sequence of the tallest into its own.
  void improve(int rounds, std::int64_t budget = improvement_budget) {
    const std::vector<Layout> layouts = group_layouts();
    budget_ = budget;
    for (int round = 0; round < rounds && budget_ > 0; ++round) {
      bool moved = false;
      Heights now = heights();
      for (std::size_t m = 0; m < micro_batches_.size(); ++m)
        if (!micro_batches_[m].groups.empty()) moved = relieve(m, now) || moved;
      while (budget_ > 0 && eliminate()) moved = true;
      for (std::size_t m = 0; m < micro_batches_.size(); ++m)
        if (!micro_batches_[m].groups.empty()) moved = regroup(m, layouts) || moved;
      while (budget_ > 0 && merge(layouts)) moved = true;
      moved = split(layouts) || moved;
      if (!moved) break;
    }
  }

  [[nodiscard]] double objective() const {
    double total = 0;
    double slowest = 0;
    for (const MicroBatch& micro_batch : micro_batches_) {
      const double height = height_of(micro_batch);
      total += height;
      slowest = std::max(slowest, height);
    }
    return total + (problem_.pp - 1) * slowest;
  }

  [[nodiscard]] std::vector<FlexCpMicroBatch> micro_batches() const {
    std::vector<std::pair<double, FlexCpMicroBatch>> built;
    for (const MicroBatch& micro_batch : micro_batches_) {
      if (micro_batch.groups.empty()) continue;
      std::vector<FlexCpGroup> groups;
      for (const int c : micro_batch.groups) {
        FlexCpGroup group{.degree_index = groups_[std::size_t(c)].degree,
                          .first_unit = 0,
                          .sequences = groups_[std::size_t(c)].sequences};
        std::sort(group.sequences.begin(), group.sequences.end());
        groups.push_back(std::move(group));
      }
      std::sort(groups.begin(), groups.end(), [](const FlexCpGroup& x, const FlexCpGroup& y) {
        return x.degree_index != y.degree_index ? x.degree_index > y.degree_index : x.sequences < y.sequences;
      });
      int unit = 0;
      for (FlexCpGroup& group : groups) {
        group.first_unit = unit;
        unit += problem_.degrees[std::size_t(group.degree_index)].degree;
      }
      built.emplace_back(height_of(micro_batch), FlexCpMicroBatch{std::move(groups)});
    }
    std::stable_sort(built.begin(), built.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second.groups[0].sequences < y.second.groups[0].sequences;
    });
    std::vector<FlexCpMicroBatch> batches;
    for (auto& [seconds, micro_batch] : built) batches.push_back(std::move(micro_batch));
    return batches;
  }

private:
  struct Group {
    int micro_batch = 0;
    int degree = 0;
    double load = 0;
    std::int64_t tokens = 0;
    std::vector<int> sequences;
  };
  struct MicroBatch {
    int free_units = 0;
    double limit = 0;
    int degree = -1;  // the one degree of its groups, when the problem asks for one
    std::vector<int> groups;
  };

  // Sequence and degree indices come as int (the plan's type) or std::size_t (loop counters).
  template <class S, class K>
  [[nodiscard]] double work(S s, K k) const {
    return work_[std::size_t(s) * degrees_ + std::size_t(k)];
  }
  template <class K>
  [[nodiscard]] std::int64_t charged(int s, K k) const {
    return charged_[std::size_t(s) * degrees_ + std::size_t(k)];
  }
  template <class K>
  [[nodiscard]] double constant(K k) const {
    return problem_.degrees[std::size_t(k)].latency.microbatch_overhead();
  }
  template <class K>
  [[nodiscard]] double width(K k) const {
    return problem_.degrees[std::size_t(k)].degree;
  }
  template <class K>
  [[nodiscard]] int units_of(K k) const {
    return problem_.degrees[std::size_t(k)].degree;
  }
  template <class K>
  [[nodiscard]] std::int64_t capacity(K k) const {
    return problem_.degrees[std::size_t(k)].capacity;
  }
  [[nodiscard]] bool fits(const Group& group, int s) const {
    return charged(s, group.degree) <= capacity(group.degree) - group.tokens;
  }
  // Micro-batch m's sequences, group after group.
  [[nodiscard]] std::vector<int> sequences_of(std::size_t m) const {
    std::vector<int> sequences;
    for (const int c : micro_batches_[m].groups)
      sequences.insert(sequences.end(), groups_[std::size_t(c)].sequences.begin(),
                       groups_[std::size_t(c)].sequences.end());
    return sequences;
  }
  // Longest first, ties by index: a large share of the batch by marking ranks, O(batch), a small one by sorting.
  void sort_longest_first(std::vector<int>& sequences) {
    if (sequences.size() * 16 < longest_first_.size()) {
      std::ranges::sort(sequences, {}, [&](int s) { return longest_first_rank_[std::size_t(s)]; });
      return;
    }
    for (const int s : sequences) rank_marks_[std::size_t(longest_first_rank_[std::size_t(s)])] = 1;
    sequences.clear();
    for (std::size_t r = 0; r < rank_marks_.size(); ++r)
      if (rank_marks_[r] != 0) {
        rank_marks_[r] = 0;
        sequences.push_back(longest_first_[r]);
      }
  }
  [[nodiscard]] double height_of(const MicroBatch& micro_batch) const {
    double height = 0;
    for (const int c : micro_batch.groups) height = std::max(height, groups_[std::size_t(c)].load);
    return height;
  }
  [[nodiscard]] double slack(int c) const {
    const Group& group = groups_[std::size_t(c)];
    return micro_batches_[std::size_t(group.micro_batch)].limit - group.load;
  }
  [[nodiscard]] bool admits(const MicroBatch& micro_batch, int k) const {
    return micro_batch.free_units >= units_of(k) && (micro_batch.degree < 0 || micro_batch.degree == k);
  }

  // pack()'s degree for sequence s: the least-area degree whose time alone stays under `target`, or with a `floor`
  // the narrowest from the floor up that holds it; else its fastest.
  [[nodiscard]] int packing_degree(std::size_t s, double target, int floor) const {
    if (floor >= 0) {
      for (auto k = std::size_t(floor); k < degrees_; ++k)
        if (std::isfinite(work(s, k))) return int(k);
      return fastest_[s];
    }
    for (std::size_t i = s * degrees_; i < (s + 1) * degrees_ && least_area_first_[i] >= 0; ++i) {
      const int k = least_area_first_[i];
      if (constant(k) + work(s, k) <= target) return k;
    }
    return fastest_[s];
  }

  void reset() {
    for (Group& group : groups_) {
      group.sequences.clear();
      spare_sequences_.push_back(std::move(group.sequences));
    }
    groups_.clear();
    micro_batches_.clear();
    open_.clear();  // its nodes' memory is released whole, then reused by the next packing's sets
    open_memory_.release();
    for (std::size_t k = 0; k < degrees_; ++k) open_.emplace_back(&open_memory_);
    first_admitting_.assign(degrees_, 0);
  }

  void add(int c, int s) {
    Group& group = groups_[std::size_t(c)];
    group.load += work(s, group.degree);
    group.tokens += charged(s, group.degree);
    group.sequences.push_back(s);
  }

  int open_group(int micro_batch, int k) {
    MicroBatch& target = micro_batches_[std::size_t(micro_batch)];
    target.free_units -= units_of(k);
    if (problem_.one_degree_per_micro_batch) target.degree = k;
    const int c = static_cast<int>(groups_.size());
    std::vector<int> sequences;  // a cleared one kept from an earlier packing, sparing its allocation
    if (!spare_sequences_.empty()) {
      sequences = std::move(spare_sequences_.back());
      spare_sequences_.pop_back();
    }
    groups_.push_back(
        {.micro_batch = micro_batch, .degree = k, .load = constant(k), .tokens = 0, .sequences = std::move(sequences)});
    target.groups.push_back(c);
    return c;
  }

  void place(int s, int k, double target) {
    OpenGroups& open = open_[std::size_t(k)];
    const double w = work(s, k);
    int chosen = -1;
    int scanned = 0;
    const std::int64_t most_tokens = capacity(k) - charged(s, k);  // a group's tokens for s to fit
    for (auto it = open.lower_bound({.slack = w, .group = -1, .tokens = 0}); it != open.end() && scanned < 8;
         ++it, ++scanned)
      if (it->tokens <= most_tokens) {
        chosen = it->group;
        open.erase(it);
        break;
      }
    if (chosen < 0) {
      // A micro-batch without room for degree k never gets it back while packing (units are only taken, a degree
      // once set stays), so the first one worth trying only moves forward.
      std::size_t& first = first_admitting_[std::size_t(k)];
      while (first < micro_batches_.size() && !admits(micro_batches_[first], k)) ++first;
      for (std::size_t m = first; m < micro_batches_.size() && chosen < 0; ++m)
        if (admits(micro_batches_[m], k) && constant(k) + w <= micro_batches_[m].limit) chosen = open_group(int(m), k);
      if (chosen < 0) {
        micro_batches_.push_back(
            {.free_units = problem_.units, .limit = std::max(target, constant(k) + w), .degree = -1, .groups = {}});
        chosen = open_group(static_cast<int>(micro_batches_.size()) - 1, k);
      }
    }
    add(chosen, s);
    // A group without room for the lightest sequence of its degree is never chosen again.
    if (const double room = slack(chosen); room >= lightest_[std::size_t(k)])
      open.insert({.slack = room, .group = chosen, .tokens = groups_[std::size_t(chosen)].tokens});
  }

  // Keeps `top` the tallest items seen, tallest first (ties to the earlier), `none` in places not yet filled.
  template <class Item, std::size_t N, class Height>
  static void keep_tallest(std::array<Item, N>& top, Item item, Item none, Height height) {
    for (std::size_t r = 0; r < N; ++r)
      if (top[r] == none || height(item) > height(top[r])) {
        std::copy_backward(top.begin() + std::ptrdiff_t(r), top.end() - 1, top.end());
        top[r] = item;
        return;
      }
  }

  [[nodiscard]] double load_of(int c) const { return c < 0 ? 0.0 : groups_[std::size_t(c)].load; }

  // The micro-batches' heights, to price a move in O(1): their sum and the three tallest.
  struct Heights {
    std::vector<double> of;
    double total = 0;
    std::array<std::size_t, 3> tallest{};
    int pp = 1;

    // The objective after micro-batch `m` becomes `m_height` and micro-batch `t` (which may be m) `t_height`.
    [[nodiscard]] double with(std::size_t m, double m_height, std::size_t t, double t_height) const {
      double sum = total - of[m] + m_height;
      double slowest = m_height;
      if (t != m) {
        sum += t_height - of[t];
        slowest = std::max(slowest, t_height);
      }
      for (const std::size_t i : tallest)
        if (i != m && i != t && i < of.size()) {
          slowest = std::max(slowest, of[i]);
          break;
        }
      return sum + (pp - 1) * slowest;
    }

    // Micro-batch m is now `height` tall: O(micro-batches), not the O(groups) of heights().
    void update(std::size_t m, double height) {
      total += height - of[m];
      of[m] = height;
      tallest.fill(of.size());
      for (std::size_t i = 0; i < of.size(); ++i)
        keep_tallest(tallest, i, of.size(), [&](std::size_t j) { return of[j]; });
    }
  };

  [[nodiscard]] Heights heights() const {
    Heights result{.of = {}, .total = 0, .tallest = {}, .pp = problem_.pp};
    for (const MicroBatch& micro_batch : micro_batches_) result.of.push_back(height_of(micro_batch));
    std::vector<std::size_t> order(result.of.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    const std::size_t top = std::min<std::size_t>(3, order.size());
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(top), order.end(),
                      [&](std::size_t x, std::size_t y) { return result.of[x] > result.of[y]; });
    result.tallest.fill(order.size());
    std::copy_n(order.begin(), top, result.tallest.begin());
    for (const double height : result.of) result.total += height;
    return result;
  }

  // Where relieve() sends a sequence: an existing group, or (group −1) a new group of `degree` in `micro_batch`.
  struct Destination {
    int group = -1;
    std::size_t micro_batch = 0;
    int degree = 0;
  };
  // The best change relieve() has priced: `sequence` to `to`, and `other` from there back into its group in a swap.
  struct Relief {
    double value = 0;
    int sequence = -1;
    Destination to;
    int other = -1;
  };

  // Moves a sequence of micro-batch m's slowest group into another group or a new one, or swaps it with another
  // group's sequence, where that shortens the iteration most, if anything does.
  bool relieve(std::size_t m, Heights& now) {
    std::array<int, 3> m_slowest{-1, -1, -1};  // m's three slowest groups, slowest first
    for (const int c : micro_batches_[m].groups) keep_tallest(m_slowest, c, -1, [&](int g) { return load_of(g); });
    const Group& from = groups_[std::size_t(m_slowest[0])];
    constexpr std::size_t tried = 16;
    std::vector<int> candidates = from.sequences;
    std::sort(candidates.begin(), candidates.end(),
              [&](int x, int y) { return work(x, from.degree) > work(y, from.degree); });
    if (candidates.size() > tried) candidates.resize(tried);
    if (budget_ <= 0) return false;
    const double current = now.with(m, now.of[m], m, now.of[m]);
    Relief best{.value = current * (1 - 1e-12), .sequence = -1, .to = {}, .other = -1};
    price_moves(m, m_slowest, candidates, now, best);
    price_swaps(m, m_slowest, candidates, now, best);
    if (best.sequence < 0) return false;
    const std::size_t t =
        best.to.group >= 0 ? std::size_t(groups_[std::size_t(best.to.group)].micro_batch) : best.to.micro_batch;
    if (best.other >= 0) {
      swap(m_slowest[0], best.sequence, best.to.group, best.other);
    } else {
      move(m_slowest[0], best.sequence, best.to);
    }
    now.update(m, height_of(micro_batches_[m]));
    now.update(t, height_of(micro_batches_[t]));
    return true;
  }

  // relieve()'s moves of each candidate out of m's slowest group: into another group it fits, or into a new group of
  // any degree where units are free.
  void price_moves(std::size_t m, const std::array<int, 3>& m_slowest, const std::vector<int>& candidates,
                   const Heights& now, Relief& best) {
    const int slowest = m_slowest[0];
    const Group& from = groups_[std::size_t(slowest)];
    const double second = std::max(0.0, load_of(m_slowest[1]));  // the next slowest group's load
    const bool alone = micro_batches_[m].groups.size() == 1 && from.sequences.size() == 1;
    budget_ -= std::int64_t(candidates.size() * (groups_.size() + micro_batches_.size() * degrees_));
    for (const int s : candidates) {
      const double left = from.sequences.size() == 1 ? 0.0 : from.load - work(s, from.degree);
      const double m_height = std::max(second, left);
      const auto offer = [&](std::size_t t, double load, Destination to) {
        const double t_height = std::max(t == m ? m_height : now.of[t], load);
        const double value = now.with(m, t == m ? t_height : m_height, t, t_height);
        if (value < best.value) best = {.value = value, .sequence = s, .to = to, .other = -1};
      };
      for (std::size_t c = 0; c < groups_.size(); ++c) {
        const Group& to = groups_[c];
        if (int(c) == slowest || to.sequences.empty() || !std::isfinite(work(s, to.degree)) || !fits(to, s)) continue;
        offer(std::size_t(to.micro_batch), to.load + work(s, to.degree),
              {.group = int(c), .micro_batch = 0, .degree = 0});
      }
      for (std::size_t t = 0; t < micro_batches_.size(); ++t)
        for (std::size_t k = 0; k < degrees_; ++k) {
          const int freed = t == m && from.sequences.size() == 1 ? units_of(from.degree) : 0;
          const int free = micro_batches_[t].free_units + freed;
          const bool same_degree =
              micro_batches_[t].degree < 0 || micro_batches_[t].degree == int(k) || (t == m && alone);
          if (free < units_of(int(k)) || !same_degree || !std::isfinite(work(s, k)) || charged(s, int(k)) > capacity(k))
            continue;
          offer(t, constant(k) + work(s, k), {.group = -1, .micro_batch = t, .degree = int(k)});
        }
    }
  }

  // relieve()'s swaps of each candidate with a sequence of another group, where each fits the other's group.
  void price_swaps(std::size_t m, const std::array<int, 3>& m_slowest, const std::vector<int>& candidates,
                   const Heights& now, Relief& best) {
    const int slowest = m_slowest[0];
    const Group& from = groups_[std::size_t(slowest)];
    const double second = std::max(0.0, load_of(m_slowest[1]));
    budget_ -= std::int64_t(candidates.size() * problem_.lengths.size() + groups_.size());
    // Each micro-batch's two slowest groups give its height without any one group in O(1); m's three, without its
    // slowest and any other.
    std::vector<std::array<int, 2>> two_slowest(micro_batches_.size(), {-1, -1});
    for (std::size_t c = 0; c < groups_.size(); ++c)
      if (!groups_[c].sequences.empty())
        keep_tallest(two_slowest[std::size_t(groups_[c].micro_batch)], int(c), -1, [&](int g) { return load_of(g); });
    const auto without = [&](std::size_t t, int c) {
      if (t == m) {
        for (const int kept : m_slowest)
          if (kept >= 0 && kept != slowest && kept != c) return load_of(kept);
        return 0.0;
      }
      return load_of(two_slowest[t][0] != c ? two_slowest[t][0] : two_slowest[t][1]);
    };
    // Each group's load less its heaviest sequence: the least it keeps in a swap, so that a group no swap can
    // take s into below the best is passed over whole.
    std::vector<double> keeps(groups_.size());
    for (std::size_t c = 0; c < groups_.size(); ++c) {
      double heaviest = 0;
      for (const int other : groups_[c].sequences) heaviest = std::max(heaviest, work(other, groups_[c].degree));
      keeps[c] = groups_[c].load - heaviest;
    }
    const auto swapped = [&](std::size_t t, double rest_of_t, double from_load, double to_load) {
      return t == m ? now.with(m, std::max({rest_of_t, from_load, to_load}), m, 0)
                    : now.with(m, std::max(second, from_load), t, std::max(rest_of_t, to_load));
    };
    for (const int s : candidates)
      for (std::size_t c = 0; c < groups_.size(); ++c) {
        const Group& to = groups_[c];
        if (int(c) == slowest || to.sequences.empty() || !std::isfinite(work(s, to.degree))) continue;
        const auto t = std::size_t(to.micro_batch);
        const double rest_of_t = without(t, int(c));
        // Rounding keeps each of the swap's loads at or above these (every work is >= 0), so nothing better is missed.
        if (swapped(t, rest_of_t, from.load - work(s, from.degree), keeps[c] + work(s, to.degree)) >= best.value)
          continue;
        for (const int other : to.sequences) {
          if (!std::isfinite(work(other, from.degree)) ||
              from.tokens - charged(s, from.degree) + charged(other, from.degree) > capacity(from.degree) ||
              to.tokens - charged(other, to.degree) + charged(s, to.degree) > capacity(to.degree))
            continue;
          const double from_load = from.load - work(s, from.degree) + work(other, from.degree);
          const double to_load = to.load - work(other, to.degree) + work(s, to.degree);
          const double value = swapped(t, rest_of_t, from_load, to_load);
          if (value < best.value)
            best = {
                .value = value, .sequence = s, .to = {.group = int(c), .micro_batch = 0, .degree = 0}, .other = other};
        }
      }
  }

  // Sequence s of group x and sequence o of group y trade places; loads re-summed, leaving no rounding behind.
  void swap(int x, int s, int y, int o) {
    for (const auto& [c, out, in] : {std::tuple(x, s, o), std::tuple(y, o, s)}) {
      Group& group = groups_[std::size_t(c)];
      std::ranges::replace(group.sequences, out, in);
      group.load = constant(group.degree);
      group.tokens = 0;
      for (const int sequence : group.sequences) {
        group.load += work(sequence, group.degree);
        group.tokens += charged(sequence, group.degree);
      }
    }
  }

  // Empties one of the two shortest micro-batches into the others without raising any of them: each of its
  // sequences, longest first, into the fullest group with room under its micro-batch's height, else into a new group
  // (least area) where units are free.
  bool eliminate() {
    std::vector<std::size_t> order;
    for (std::size_t m = 0; m < micro_batches_.size(); ++m)
      if (!micro_batches_[m].groups.empty()) order.push_back(m);
    if (order.size() < 2) return false;
    const Heights now = heights();
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return now.of[x] < now.of[y]; });
    for (std::size_t tried = 0; tried < 2; ++tried)
      if (empty_into_others(order[tried], now)) return true;
    return false;
  }

  bool empty_into_others(std::size_t m, const Heights& now) {
    budget_ -= std::int64_t(groups_.size() * (1 + groups_.size() / std::max<std::size_t>(1, micro_batches_.size())));
    std::vector<std::pair<int, int>> sequences;  // (sequence, its group)
    for (const int c : micro_batches_[m].groups)
      for (const int s : groups_[std::size_t(c)].sequences) sequences.emplace_back(s, c);
    const auto home_work = [&](const std::pair<int, int>& entry) {
      return work(entry.first, groups_[std::size_t(entry.second)].degree);
    };
    std::stable_sort(sequences.begin(), sequences.end(),
                     [&](const auto& x, const auto& y) { return home_work(x) > home_work(y); });
    // Tentative groups: the existing ones of other micro-batches, then any opened here; committed only if every
    // sequence finds a place.
    std::vector<Group> tentative;
    std::vector<int> existing;  // tentative group → groups_ index, or −1 for a new one
    for (std::size_t c = 0; c < groups_.size(); ++c)
      if (groups_[c].micro_batch != int(m) && !groups_[c].sequences.empty()) {
        tentative.push_back({.micro_batch = groups_[c].micro_batch,
                             .degree = groups_[c].degree,
                             .load = groups_[c].load,
                             .tokens = groups_[c].tokens,
                             .sequences = {}});
        existing.push_back(int(c));
      }
    // Each degree's tentative groups by the height left above their load, then index: the group with least room for
    // a sequence is a lower bound away, not a scan of every group.
    const auto height_left = [&](const Group& group) { return now.of[std::size_t(group.micro_batch)] - group.load; };
    std::vector<std::set<std::pair<double, int>>> by_height_left(degrees_);
    for (std::size_t c = 0; c < tentative.size(); ++c)
      by_height_left[std::size_t(tentative[c].degree)].emplace(height_left(tentative[c]), int(c));
    std::vector<int> free(micro_batches_.size());
    std::vector<int> degree(micro_batches_.size());
    for (std::size_t t = 0; t < micro_batches_.size(); ++t) {
      free[t] = micro_batches_[t].free_units;
      degree[t] = micro_batches_[t].degree;
    }
    // Per position and degree, the fewest tokens a sequence from there on is charged: a group with no room for
    // that many leaves its set for good.
    std::vector<std::int64_t> fewest_charged((sequences.size() + 1) * degrees_,
                                             std::numeric_limits<std::int64_t>::max());
    for (std::size_t i = sequences.size(); i-- > 0;)
      for (std::size_t k = 0; k < degrees_; ++k) {
        const int s = sequences[i].first;
        fewest_charged[i * degrees_ + k] =
            std::min(fewest_charged[(i + 1) * degrees_ + k],
                     std::isfinite(work(s, k)) ? charged(s, k) : std::numeric_limits<std::int64_t>::max());
      }
    for (std::size_t i = 0; i < sequences.size(); ++i) {
      const int s = sequences[i].first;
      // The group s fits that it leaves with least room under its micro-batch's height (ties to the first group).
      int target = -1;
      double least = std::numeric_limits<double>::infinity();
      for (std::size_t k = 0; k < degrees_; ++k) {
        const double w = work(s, k);
        if (!std::isfinite(w)) continue;
        auto& ordered = by_height_left[k];
        for (auto it = ordered.lower_bound({w, -1}); it != ordered.end();) {
          const double room = it->first - w;  // grows along the set
          if (room > least) break;
          const Group& group = tentative[std::size_t(it->second)];
          if (group.tokens > capacity(k) - fewest_charged[i * degrees_ + k]) {
            it = ordered.erase(it);
            continue;
          }
          if ((room < least || it->second < target) && fits(group, s)) {
            least = room;
            target = it->second;
          }
          ++it;
        }
      }
      if (target < 0) {
        double area = std::numeric_limits<double>::infinity();
        std::size_t where = 0;
        for (std::size_t t = 0; t < micro_batches_.size(); ++t)
          for (std::size_t k = 0; k < degrees_ && t != m; ++k) {
            const double alone = constant(k) + work(s, k);
            if (free[t] >= units_of(int(k)) && (degree[t] < 0 || degree[t] == int(k)) && alone <= now.of[t] &&
                charged(s, k) <= capacity(k) && width(k) * alone < area) {
              area = width(k) * alone;
              where = t * degrees_ + k;
            }
          }
        if (!std::isfinite(area)) return false;
        const auto t = where / degrees_;
        const auto k = int(where % degrees_);
        free[t] -= units_of(k);
        if (problem_.one_degree_per_micro_batch) degree[t] = k;
        target = int(tentative.size());
        tentative.push_back({.micro_batch = int(t), .degree = k, .load = constant(k), .tokens = 0, .sequences = {}});
        by_height_left[std::size_t(k)].emplace(height_left(tentative.back()), target);
        existing.push_back(-1);
      }
      Group& group = tentative[std::size_t(target)];
      auto& ordered = by_height_left[std::size_t(group.degree)];
      ordered.erase({height_left(group), target});
      group.load += work(s, group.degree);
      group.tokens += charged(s, group.degree);
      group.sequences.push_back(s);
      ordered.emplace(height_left(group), target);
    }
    remove_groups(m);
    for (std::size_t c = 0; c < tentative.size(); ++c) {
      if (tentative[c].sequences.empty()) continue;
      const int group = existing[c] >= 0 ? existing[c] : open_group(tentative[c].micro_batch, tentative[c].degree);
      for (const int s : tentative[c].sequences) add(group, s);
    }
    return true;
  }

  // The group layouts a micro-batch is regrouped into, each with every unit used: `count` groups of degree `wide`
  // and the rest of the units in groups of degree `narrow` (count a power of two, or one short of all; or all
  // groups of `wide`, narrow = wide).
  struct Layout {
    int wide = 0;
    int count = 0;
    int narrow = 0;
    [[nodiscard]] std::size_t groups(const FlexCpPacker& packer) const {
      const int rest = packer.problem_.units - count * packer.units_of(wide);
      return std::size_t(count) + std::size_t(rest / packer.units_of(narrow));
    }
  };

  [[nodiscard]] std::vector<Layout> group_layouts() const {
    std::vector<Layout> layouts;
    for (std::size_t wide = 0; wide < degrees_; ++wide) {
      const int most = problem_.units / units_of(wide);
      layouts.push_back({int(wide), most, int(wide)});
      if (problem_.one_degree_per_micro_batch) continue;
      std::vector<int> counts;
      for (int count = 1; count < most; count *= 2) counts.push_back(count);
      if (most > 2 && counts.back() != most - 1) counts.push_back(most - 1);
      for (std::size_t narrow = 0; narrow < wide; ++narrow)
        for (const int count : counts) layouts.push_back({int(wide), count, int(narrow)});
    }
    return layouts;
  }

  // Regroups micro-batch m's sequences into the layout whose longest-first greedy (each sequence into the group it
  // finishes soonest in, within capacity) gives the shortest micro-batch, if that is shorter than it is.
  bool regroup(std::size_t m, const std::vector<Layout>& layouts) {
    double height = height_of(micro_batches_[m]) * (1 - 1e-12);
    std::vector<Group> regrouped = grouped(sequences_of(m), layouts, height);
    if (regrouped.empty()) return false;
    replace(m, regrouped);
    return true;
  }

  // Pools two micro-batches into one, regrouped, where that shortens the iteration: first-fit leaves units idle
  // that narrower groups side by side fill, one micro-batch constant fewer. Pairs among the eight shortest.
  bool merge(const std::vector<Layout>& layouts) {
    std::vector<std::size_t> order;
    for (std::size_t m = 0; m < micro_batches_.size(); ++m)
      if (!micro_batches_[m].groups.empty()) order.push_back(m);
    if (order.size() < 2) return false;
    const Heights now = heights();
    const double current = now.with(order[0], now.of[order[0]], order[0], now.of[order[0]]);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return now.of[x] < now.of[y]; });
    order.resize(std::min<std::size_t>(order.size(), 8));
    for (std::size_t i = 0; i < order.size() && budget_ > 0; ++i)
      for (std::size_t j = i + 1; j < order.size() && budget_ > 0; ++j) {
        const std::size_t m = order[j];  // the taller keeps the pool
        const std::size_t t = order[i];
        double bound = 0;
        if (!highest_paying(
                now.of[m], now.of[m] + now.of[t], current, [&](double height) { return now.with(m, height, t, 0); },
                bound))
          continue;
        std::vector<int> pooled = sequences_of(m);
        const std::vector<int> other = sequences_of(t);
        pooled.insert(pooled.end(), other.begin(), other.end());
        const std::vector<Group> regrouped = grouped(std::move(pooled), layouts, bound);
        if (regrouped.empty()) continue;
        remove_groups(t);
        replace(m, regrouped);
        return true;
      }
    return false;
  }

  // Takes one sequence of the tallest micro-batch into a micro-batch of its own (its fastest degree) and regroups
  // the rest, where that shortens the iteration: the move relieve cannot price, one step worse before the regroup.
  bool split(const std::vector<Layout>& layouts) {
    const Heights now = heights();
    const std::size_t m = now.tallest[0];
    if (m >= micro_batches_.size() || micro_batches_[m].groups.empty()) return false;
    const std::vector<int> pooled = sequences_of(m);
    if (pooled.size() < 2) return false;
    const double current = now.with(m, now.of[m], m, now.of[m]);
    const std::size_t next = now.tallest[1];  // the tallest micro-batch left
    const double others = next < now.of.size() ? now.of[next] : 0.0;
    constexpr std::size_t tried = 16;
    std::vector<int> candidates = pooled;
    sort_longest_first(candidates);
    if (candidates.size() > tried) candidates.resize(tried);
    std::vector<int> rest;
    for (const int s : candidates) {
      if (budget_ <= 0) return false;
      const int fastest = packing_degree(std::size_t(s), -std::numeric_limits<double>::infinity(), -1);
      const double alone = constant(fastest) + work(s, fastest);
      const auto with_split = [&](double rest_height) {
        return now.total - now.of[m] + rest_height + alone + (problem_.pp - 1) * std::max({others, rest_height, alone});
      };
      double bound = 0;
      if (!highest_paying(0, now.of[m], current, with_split, bound)) continue;
      rest.clear();
      std::ranges::copy_if(pooled, std::back_inserter(rest), [&](int x) { return x != s; });
      const std::vector<Group> regrouped = grouped(rest, layouts, bound);
      if (regrouped.empty()) continue;
      replace(m, regrouped);
      micro_batches_.push_back({.free_units = problem_.units, .limit = alone, .degree = -1, .groups = {}});
      add(open_group(static_cast<int>(micro_batches_.size()) - 1, fastest), s);
      return true;
    }
    return false;
  }

  // The tallest micro-batch height in [low, high] at which `objective` (growing with it) stays under `current`, by
  // bisection, into `height`; false if even `low` does not.
  template <class Objective>
  static bool highest_paying(double low, double high, double current, Objective objective, double& height) {
    if (objective(low) >= current) return false;
    if (objective(high) < current) {
      height = high;
      return true;
    }
    for (int step = 0; step < 40; ++step) {
      const double middle = (low + high) / 2;
      (objective(middle) < current ? low : high) = middle;
    }
    height = low;
    return true;
  }

  // The groups of one micro-batch for `sequences` in the layout whose longest-first greedy gives the shortest
  // micro-batch below `bound` (lowered to it); empty if none does. The greedy runs on flat arrays of the groups'
  // loads and tokens, one degree's range at a time (this loop is where the solver spends its time).
  std::vector<Group> grouped(std::vector<int> sequences, const std::vector<Layout>& layouts, double& bound) {
    sort_longest_first(sequences);
    constexpr std::size_t budget = 1 << 21;  // sequence-group pairs tried per micro-batch, bounding the time
    std::size_t spent = 0;
    if (budget_ <= 0) return {};
    const Layout* best = nullptr;
    constexpr double infinity = std::numeric_limits<double>::infinity();
    std::vector<int> best_group_of;
    std::vector<double>& loads = greedy_loads_;
    std::vector<std::int64_t>& tokens = greedy_tokens_;
    std::vector<int>& group_of = greedy_group_of_;
    const std::vector<double>& rest_area = greedy_rest_area_;
    group_of.resize(sequences.size());
    LayoutBounds bounds;
    std::optional<LayoutBounds> any_degree;
    std::pair<int, int> bounded{-1, -1};  // the degrees `bounds` is of: layouts come grouped by them
    for (const Layout& layout : layouts) {
      const std::size_t size = layout.groups(*this);
      if (size > sequences.size()) continue;  // more groups than sequences: a narrower layout does better
      spent += size * sequences.size();
      if (spent > budget) break;
      if (!any_degree) {
        any_degree = layout_bounds(sequences, -1, -1);
      }
      // The bounds over all degrees are no higher than the layout's own: what they rule out, those would too.
      if (cannot_beat(*any_degree, layout, bound)) continue;
      if (bounded != std::pair(layout.wide, layout.narrow)) {
        bounded = {layout.wide, layout.narrow};
        bounds = layout_bounds(sequences, layout.wide, layout.narrow);
      }
      if (cannot_beat(bounds, layout, bound)) continue;
      // Groups [0, count) are of the wide degree, the rest of the narrow one.
      const std::size_t wide_end = std::min(size, std::size_t(layout.count));
      const std::array<std::pair<std::size_t, std::size_t>, 2> ranges{std::pair{std::size_t{0}, wide_end},
                                                                      std::pair{wide_end, size}};
      const std::array<int, 2> degree_of_range{layout.wide, layout.narrow};
      loads.assign(size, constant(layout.narrow));
      std::fill_n(loads.begin(), wide_end, constant(layout.wide));
      tokens.assign(size, 0);
      double slowest = 0;
      // The units' busy time so far plus the rest's least: no lower than the micro-batch's height times the units.
      double busy = constants_busy(layout);
      const double hopeless = bound * (1 + 1e-9) * problem_.units;
      for (std::size_t i = 0; i < sequences.size(); ++i) {
        const int s = sequences[i];
        std::size_t chosen = size;
        double soonest = infinity;
        for (std::size_t r = 0; r < ranges.size(); ++r) {
          const int k = degree_of_range[r];
          const double w = work(s, k);
          if (!std::isfinite(w)) continue;
          const std::int64_t most_tokens = capacity(k) - charged(s, k);  // a group's tokens for s to fit
          // The first group of least finish among those with room.
          const auto [finish, g] = first_least(ranges[r].first, ranges[r].second, [&](std::size_t group) {
            return tokens[group] <= most_tokens ? loads[group] + w : infinity;
          });
          if (finish < soonest) {
            soonest = finish;
            chosen = g;
          }
        }
        if (chosen == size) {
          slowest = std::numeric_limits<double>::infinity();
          break;
        }
        const int k = degree_of_range[chosen < wide_end ? 0 : 1];
        loads[chosen] += work(s, k);
        tokens[chosen] += charged(s, k);
        group_of[i] = int(chosen);
        slowest = std::max(slowest, loads[chosen]);
        busy += width(k) * work(s, k);
        if (slowest >= bound || busy + rest_area[i + 1] > hopeless) {
          slowest = std::max(slowest, bound);
          break;
        }
      }
      if (slowest < bound) {
        bound = slowest;
        best = &layout;
        best_group_of = group_of;
      }
    }
    budget_ -= std::int64_t(spent);
    if (best == nullptr) return {};
    // The chosen layout's groups, their loads summed in the greedy's order.
    const std::size_t size = best->groups(*this);
    std::vector<Group> groups(size);
    for (std::size_t g = 0; g < size; ++g) {
      const int degree = g < std::size_t(best->count) ? best->wide : best->narrow;
      groups[g] = {.micro_batch = 0, .degree = degree, .load = constant(degree), .tokens = 0, .sequences = {}};
    }
    for (std::size_t i = 0; i < sequences.size(); ++i) {
      Group& group = groups[std::size_t(best_group_of[i])];
      group.load += work(sequences[i], group.degree);
      group.tokens += charged(sequences[i], group.degree);
      group.sequences.push_back(sequences[i]);
    }
    return groups;
  }

  // The first index in [begin, end) of least value(i), as (value, index); (infinity, end) if every value is
  // infinite. Branch-free, in two lanes of their own minima so that the greedy's scan, where the improvement spends
  // its time, does not wait on one chain of comparisons.
  template <class Value>
  static std::pair<double, std::size_t> first_least(std::size_t begin, std::size_t end, Value value) {
    constexpr double infinity = std::numeric_limits<double>::infinity();
    double even = infinity;
    double odd = infinity;
    std::size_t even_at = end;
    std::size_t odd_at = end;
    std::size_t i = begin;
    for (; i + 2 <= end; i += 2) {
      const double even_value = value(i);
      const double odd_value = value(i + 1);
      even_at = even_value < even ? i : even_at;
      even = std::min(even_value, even);
      odd_at = odd_value < odd ? i + 1 : odd_at;
      odd = std::min(odd_value, odd);
    }
    if (i < end) {
      const double last = value(i);
      even_at = last < even ? i : even_at;
      even = std::min(last, even);
    }
    return odd < even || (odd == even && odd_at < even_at) ? std::pair(odd, odd_at) : std::pair(even, even_at);
  }

  // What no grouping of `sequences` into groups of degrees `wide` and `narrow` (both -1: any degrees) beats: the
  // slowest sequence alone in its fastest group, the units' least busy time spread over all of them, and the fewest
  // tokens the sequences are charged. Fills greedy_rest_area_: the least busy time of the sequences from each
  // position on.
  struct LayoutBounds {
    double height = 0;
    double area = 0;  // the least busy time spread over the units
    double tokens = 0;
  };
  [[nodiscard]] LayoutBounds layout_bounds(const std::vector<int>& sequences, int wide, int narrow) {
    double slowest = 0;
    double area = 0;
    double tokens = 0;
    const bool any = wide < 0;
    greedy_rest_area_.assign(sequences.size() + 1, 0.0);
    for (std::size_t i = sequences.size(); i-- > 0;) {
      const auto s = std::size_t(sequences[i]);
      const double least_area = any ? least_area_[s] : std::min(bound_area(s, wide), bound_area(s, narrow));
      slowest = std::max(slowest, any ? least_alone_[s] : std::min(bound_alone(s, wide), bound_alone(s, narrow)));
      area += least_area;
      tokens += any ? least_tokens_[s] : std::min(bound_tokens(s, wide), bound_tokens(s, narrow));
      greedy_rest_area_[i] = greedy_rest_area_[i + 1] + least_area;
    }
    return {.height = std::max(slowest, area / problem_.units), .area = area / problem_.units, .tokens = tokens};
  }

  // Sequence s in a group of degree k: its time alone, busy time and tokens; infinite where the group cannot hold
  // it.
  template <class K>
  [[nodiscard]] double bound_alone(std::size_t s, K k) const {
    return constant(k) + work(s, k);
  }
  template <class K>
  [[nodiscard]] double bound_area(std::size_t s, K k) const {
    return width(k) * work(s, k);
  }
  template <class K>
  [[nodiscard]] double bound_tokens(std::size_t s, K k) const {
    return std::isfinite(work(s, k)) ? static_cast<double>(charged(int(s), k))
                                     : std::numeric_limits<double>::infinity();
  }

  // Whether `layout` cannot group sequences of these bounds into a micro-batch shorter than `bound`. Skipping such
  // layouts leaves every choice as it was (a margin far above rounding keeps it so), while most layouts of a
  // micro-batch of hundreds of short sequences are skipped for O(1) instead of priced for O(sequences × groups).
  [[nodiscard]] bool cannot_beat(const LayoutBounds& bounds, const Layout& layout, double bound) const {
    const std::size_t groups = layout.groups(*this);
    const double held =
        static_cast<double>(capacity(layout.wide)) * layout.count +
        static_cast<double>(capacity(layout.narrow)) * static_cast<double>(groups - std::size_t(layout.count));
    return bounds.tokens > held ||
           std::max(bounds.height, bounds.area + constants_busy(layout) / problem_.units) > bound * (1 + 1e-9);
  }

  // The units' busy time in `layout`'s groups' constants alone (every unit is in one group).
  [[nodiscard]] double constants_busy(const Layout& layout) const {
    const double wide_units = static_cast<double>(layout.count) * width(layout.wide);
    return wide_units * constant(layout.wide) + (problem_.units - wide_units) * constant(layout.narrow);
  }

  // Micro-batch m without groups; its height limit, which only packing reads, stays.
  void remove_groups(std::size_t m) {
    MicroBatch& micro_batch = micro_batches_[m];
    for (const int c : micro_batch.groups) groups_[std::size_t(c)].sequences.clear();
    micro_batch.groups.clear();
    micro_batch.free_units = problem_.units;
    micro_batch.degree = -1;
  }

  // Micro-batch m's groups become `groups` (their micro_batch fields ignored).
  void replace(std::size_t m, const std::vector<Group>& groups) {
    remove_groups(m);
    for (const Group& group : groups) {
      if (group.sequences.empty()) continue;
      const int opened = open_group(int(m), group.degree);
      for (const int s : group.sequences) add(opened, s);
    }
  }

  void move(int from_group, int s, Destination to) {
    Group& from = groups_[std::size_t(from_group)];
    MicroBatch& home = micro_batches_[std::size_t(from.micro_batch)];
    std::erase(from.sequences, s);
    from.load -= work(s, from.degree);
    from.tokens -= charged(s, from.degree);
    if (from.sequences.empty()) {
      home.free_units += units_of(from.degree);
      std::erase(home.groups, from_group);
      if (home.groups.empty()) home.degree = -1;
    } else {
      from.load = constant(from.degree);  // re-summed, so removals leave no rounding behind
      for (const int other : from.sequences) from.load += work(other, from.degree);
    }
    add(to.group >= 0 ? to.group : open_group(int(to.micro_batch), to.degree), s);
  }

  const FlexCpProblem& problem_;
  std::size_t degrees_;
  std::vector<double> work_;  // per sequence and degree; infinite where the degree cannot hold it
  std::vector<std::int64_t> charged_;
  std::vector<int> longest_first_rank_;                   // per sequence, its place longest first (ties by index)
  std::vector<int> longest_first_;                        // the sequences longest first: rank → sequence
  std::vector<char> rank_marks_;                          // sort_longest_first's working array, all zero between calls
  std::vector<std::vector<int>> slowest_first_;           // per degree, the sequences it holds, slowest alone first
  std::vector<int> slowest_first_place_;                  // per degree and sequence, its place in slowest_first_
  std::vector<std::vector<double>> slowest_first_alone_;  // per degree and place, the sequence's time alone
  std::vector<int> fastest_;                              // per sequence, its fastest degree
  std::vector<int> least_area_first_;   // per sequence, the degrees holding it by least area, then -1s
  std::vector<int> packing_degree_of_;  // pack()'s working arrays
  std::vector<std::vector<int>> packing_places_;
  std::vector<double> lightest_;                   // per degree, the least work of the sequences pack() gives it
  std::vector<std::vector<int>> spare_sequences_;  // cleared groups' lists, reused by open_group
  std::vector<Group> groups_;
  std::vector<MicroBatch> micro_batches_;
  // A group open to more sequences while packing, by slack: its tokens kept beside it, where the search reads them.
  struct OpenGroup {
    double slack = 0;
    int group = 0;
    std::int64_t tokens = 0;
    [[nodiscard]] bool operator<(const OpenGroup& other) const {
      return slack != other.slack ? slack < other.slack : group < other.group;
    }
  };
  using OpenGroups = std::pmr::set<OpenGroup>;
  std::pmr::monotonic_buffer_resource open_memory_;  // open_'s nodes, contiguous for the packing's lookups and freed at
                                                     // once
  std::vector<OpenGroups> open_;                     // per degree
  std::vector<std::size_t> first_admitting_;         // per degree: no micro-batch before it has room for one
  std::int64_t budget_ = 0;                          // candidate moves improve() may still price
  std::vector<double> greedy_loads_;                 // grouped()'s working arrays, kept to spare allocations
  std::vector<std::int64_t> greedy_tokens_;
  std::vector<int> greedy_group_of_;
  std::vector<double> greedy_rest_area_;
  std::vector<double> least_alone_;   // per sequence, the least of bound_alone over the degrees
  std::vector<double> least_area_;    // of bound_area
  std::vector<double> least_tokens_;  // of bound_tokens
};

}  // namespace sluice::assign::detail
