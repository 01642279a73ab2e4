#pragma once
// FlexSP's planning as its authors run it (Wang et al., "FlexSP: Accelerating Large Language Model Training via
// Flexible Sequence Parallelism", ASPLOS'25, §5, and the authors' solver): the iteration's sequences sorted longest
// first and split into consecutive micro-batches of least largest token count, for the fewest micro-batches whose
// token counts all stay below what the cluster holds and for the next few counts; each micro-batch grouped on its
// own into SP groups that together use every GPU, each group with at least one sequence, the slowest group as short
// as it can be; the count of least iteration time kept. The SP degrees are the problem's from 2 up (the authors'
// get_sp_options skips 1). Where the authors solve each micro-batch's grouping as a MILP (SCIP), this solves it by
// bisection on the slowest group's time, each height packed first-fit by least area and the units left over given to
// the slowest groups, beside groups of one degree filled longest first, each improved by moves and swaps; tests
// measure it against exhaustive search.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/assign/flex_cp_problem.hpp"
#include "sluice/assign/flex_cp_types.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"

namespace sluice::assign {

// Micro-batch counts tried from the fewest valid one up (the authors' default mb_option_num).
inline constexpr int flexsp_micro_batch_counts = 5;
// Counts tried in all before giving up, which bounds the time on batches no count groups.
inline constexpr int flexsp_most_counts = 64;

namespace detail {

// x + y for x, y >= 0, held at the type's largest value where the sum passes it.
inline std::int64_t flexsp_add(std::int64_t x, std::int64_t y) {
  return y > std::numeric_limits<std::int64_t>::max() - x ? std::numeric_limits<std::int64_t>::max() : x + y;
}

// The fewest consecutive runs of `lengths` whose token sums stay at or below `most` (each length at most it): the
// greedy from the front.
inline std::size_t flexsp_fewest_runs(Span<const std::int64_t> lengths, std::int64_t most) {
  std::size_t runs = 1;
  std::int64_t sum = 0;
  for (const std::int64_t length : lengths) {
    if (length > most - sum) {
      ++runs;
      sum = 0;
    }
    sum += length;
  }
  return runs;
}

// Splits `lengths` (longest first) into `count` consecutive, non-empty runs (1 <= count <= size) whose largest token
// sum is the least any such split has; returns where each run ends. Of the splits that reach it, the one whose runs
// from the last backwards each start as early as they can, as the authors' dynamic program picks.
inline std::vector<std::size_t> flexsp_sorted_split(Span<const std::int64_t> lengths, std::size_t count) {
  const std::size_t n = lengths.size();
  sluice::require(count >= 1 && count <= n, "FlexSP: ", count, " micro-batches of ", n, " sequences");
  const auto runs_within = [&](std::int64_t most) { return flexsp_fewest_runs(lengths, most); };
  std::int64_t low = *std::ranges::max_element(lengths);  // low may fail, high holds (but past int64's range)
  std::int64_t high = 0;
  for (const std::int64_t length : lengths) high = flexsp_add(high, length);
  if (runs_within(low) <= count) high = low;
  while (high - low > 1) {
    const std::int64_t middle = low + (high - low) / 2;
    (runs_within(middle) <= count ? high : low) = middle;
  }
  std::vector<std::size_t> ends(count);
  std::size_t end = n;
  for (std::size_t run = count; run-- > 0;) {
    ends[run] = end;
    std::size_t start = end - 1;
    std::int64_t sum = lengths[start];
    while (start > run && lengths[start - 1] <= high - sum) sum += lengths[--start];
    end = start;  // run 0 starts at 0 whatever its sum, which only a total past int64's range makes exceed high
  }
  return ends;
}

// The index of the problem's first degree of 2 or more: where FlexSP's pool starts.
inline std::size_t flexsp_first_degree(const FlexCpProblem& problem) {
  std::size_t k = 0;
  while (k < problem.degrees.size() && problem.degrees[k].degree < 2) ++k;
  return k;
}

// One micro-batch's SP groups under FlexSP's rules, built at a height limit.
class FlexSpGrouper {
public:
  FlexSpGrouper(const FlexCpProblem& problem, Span<const int> sequences)
      : problem_(problem), sequences_(sequences.begin(), sequences.end()), first_(flexsp_first_degree(problem)) {
    std::ranges::sort(sequences_, [&](int x, int y) {
      const std::int64_t lx = length(x), ly = length(y);
      return lx != ly ? lx > ly : x < y;
    });
  }

  // The grouping whose slowest group is shortest among those tried: heights bisected between the slowest
  // sequence alone in its fastest group and the least-area packing's, and every unit in groups of one degree; each
  // improved. nullopt when no tried height gives one.
  std::optional<FlexCpMicroBatch> solve() {
    double low = 0;
    for (const int s : sequences_) {
      double fastest = std::numeric_limits<double>::infinity();
      for (std::size_t k = first_; k < degrees(); ++k)
        if (flex_cp_holds(problem_, k, length(s))) fastest = std::min(fastest, alone(s, k));
      low = std::max(low, fastest);
    }
    const double unlimited = std::numeric_limits<double>::infinity();
    std::optional<double> high = try_height(unlimited);
    if (!high) high = try_height(low);
    if (high) {
      double top = std::max(*high, low);
      for (int step = 0; step < bisection_steps && top > low * (1 + 1e-6); ++step) {
        const double middle = (low + top) / 2;
        if (try_height(middle))
          top = middle;
        else
          low = middle;
      }
    }
    std::vector<std::vector<Group>> candidates;
    if (!best_.empty()) candidates.push_back(std::move(best_));
    for (std::size_t k = first_; k < degrees(); ++k)  // and side by side groups of one degree each
      if (std::optional<std::vector<Group>> uniform = longest_processing_time(k)) candidates.push_back(*uniform);
    if (candidates.empty()) return std::nullopt;
    // The most promising improved, the best kept (ties to the earlier).
    std::ranges::stable_sort(candidates, {}, [&](const std::vector<Group>& groups) { return time(groups); });
    candidates.resize(std::min(candidates.size(), improved_candidates));
    for (std::vector<Group>& candidate : candidates) improve(candidate);
    return micro_batch(*std::ranges::min_element(candidates, {}, [&](const auto& groups) { return time(groups); }));
  }

private:
  struct Group {
    std::size_t degree = 0;
    double load = 0;  // Σ work, without the constant
    std::int64_t tokens = 0;
    std::vector<int> sequences;
  };

  using LoadOrder = std::set<std::pair<double, std::size_t>>;  // (load, group index)
  static constexpr int bisection_steps = 40;
  static constexpr std::size_t improved_candidates = 3;
  // Each step lowers the slowest group, pricing at most a budget of moves and swaps: huge batches stay bounded.
  static constexpr int improvement_steps = 256;
  static constexpr std::int64_t improvement_budget = std::int64_t{1} << 22;

  // Packs at `height`: each sequence (longest first) where it adds the least area — an open group that stays under
  // the height, else a new group of the narrowest degree that does — then every unit left over given to the slowest
  // group that can widen into it, or to a group of its own for the shortest sequence of the slowest group of
  // several. Returns the slowest group's time, keeping the best grouping; nullopt when the units run out first.
  std::optional<double> try_height(double height) {
    std::vector<Group> groups;
    std::vector<LoadOrder> open(degrees());  // per degree, its groups least loaded first
    int used = 0;
    for (const int s : sequences_) {
      std::optional<std::size_t> into;
      double into_area = std::numeric_limits<double>::infinity();
      for (std::size_t k = first_; k < degrees(); ++k) {
        if (!flex_cp_holds(problem_, k, length(s)) || width(k) * work(s, k) >= into_area) continue;
        const std::optional<std::size_t> g = least_loaded_fitting(groups, open[k], s, height - alone(s, k));
        if (!g) continue;
        into = g;
        into_area = width(k) * work(s, k);
      }
      for (std::size_t k = first_; k < degrees(); ++k) {
        if (!flex_cp_holds(problem_, k, length(s)) || alone(s, k) > height ||
            used + problem_.degrees[k].degree > problem_.units)
          continue;
        if (width(k) * alone(s, k) < into_area) {
          groups.push_back(Group{.degree = k, .load = 0, .tokens = 0, .sequences = {}});
          open[k].emplace(0.0, groups.size() - 1);
          used += problem_.degrees[k].degree;
          into = groups.size() - 1;
        }
        break;  // the narrowest that holds it under the height
      }
      if (!into) return std::nullopt;
      add_ordered(groups, open[groups[*into].degree], *into, s);
    }
    if (!use_every_unit(groups, used)) return std::nullopt;
    const double slowest = time(groups[slowest_of(groups)]);
    if (slowest < best_seconds_) {
      best_seconds_ = slowest;
      best_ = std::move(groups);
    }
    return slowest;
  }

  // Every unit in groups of degree k, each sequence (longest first) into the group it finishes soonest in, within
  // capacity; nullopt when a sequence fits none or a group stays empty.
  [[nodiscard]] std::optional<std::vector<Group>> longest_processing_time(std::size_t k) const {
    const auto count = static_cast<std::size_t>(problem_.units / problem_.degrees[k].degree);
    if (count > sequences_.size()) return std::nullopt;
    std::vector<Group> groups(count, Group{.degree = k, .load = 0, .tokens = 0, .sequences = {}});
    LoadOrder order;
    for (std::size_t g = 0; g < count; ++g) order.emplace(0.0, g);
    for (const int s : sequences_) {
      const std::optional<std::size_t> soonest =
          least_loaded_fitting(groups, order, s, std::numeric_limits<double>::infinity());
      if (!soonest) return std::nullopt;
      add_ordered(groups, order, *soonest, s);
    }
    if (std::ranges::any_of(groups, [](const Group& group) { return group.sequences.empty(); })) return std::nullopt;
    return groups;
  }

  // Of one degree's groups in `order`, the least loaded that holds s with its load at most `most` before it.
  [[nodiscard]] std::optional<std::size_t> least_loaded_fitting(const std::vector<Group>& groups,
                                                                const LoadOrder& order, int s, double most) const {
    for (auto it = order.begin(); it != order.end() && it->first <= most; ++it)
      if (fits(groups[it->second], groups[it->second].degree, s)) return it->second;
    return std::nullopt;
  }

  void add_ordered(std::vector<Group>& groups, LoadOrder& order, std::size_t g, int s) const {
    order.erase({groups[g].load, g});
    add(groups[g], s);
    order.emplace(groups[g].load, g);
  }

  // Moves a sequence out of the slowest group, or swaps it with another group's, the change that leaves the two
  // groups' slower one shortest, while that is shorter than the slowest was; every group keeps a sequence.
  void improve(std::vector<Group>& groups) const {
    std::int64_t priced = 0;
    for (int step = 0; step < improvement_steps && priced < improvement_budget; ++step) {
      const std::size_t slow = slowest_of(groups);
      const Group& from = groups[slow];
      double best = time(from);
      constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
      std::size_t to = slow, moved = 0, swapped = none;  // positions in from and in groups[to] (none: a move)
      for (std::size_t i = 0; i < from.sequences.size(); ++i) {
        const int s = from.sequences[i];
        const double without = from.load - work(s, from.degree);
        for (std::size_t g = 0; g < groups.size(); ++g) {
          if (g == slow) continue;
          const Group& other = groups[g];
          priced += 1 + static_cast<std::int64_t>(other.sequences.size());
          if (from.sequences.size() > 1 && fits(other, other.degree, s)) {
            const double value = std::max(constant(from.degree) + without, time_with(other, other.degree, s));
            if (value < best) std::tie(best, to, moved, swapped) = std::tuple(value, g, i, none);
          }
          for (std::size_t j = 0; j < other.sequences.size(); ++j) {
            const int o = other.sequences[j];
            if (length(o) >= length(s)) continue;  // only a shorter one lowers the slowest group
            const double here = constant(from.degree) + without + work(o, from.degree);
            const double there = constant(other.degree) + other.load - work(o, other.degree) + work(s, other.degree);
            if (std::max(here, there) < best && swap_fits(from, i, other, j))
              std::tie(best, to, moved, swapped) = std::tuple(std::max(here, there), g, i, j);
          }
        }
      }
      if (to == slow) return;
      Group& source = groups[slow];
      Group& target = groups[to];
      const int s = source.sequences[moved];
      source.sequences.erase(source.sequences.begin() + std::ptrdiff_t(moved));
      if (swapped != none) {
        const int o = target.sequences[swapped];
        target.sequences.erase(target.sequences.begin() + std::ptrdiff_t(swapped));
        source.sequences.push_back(o);
      }
      target.sequences.push_back(s);
      regroup(source, source.degree);
      regroup(target, target.degree);
    }
  }

  [[nodiscard]] double time(const std::vector<Group>& groups) const { return time(groups[slowest_of(groups)]); }

  [[nodiscard]] std::size_t slowest_of(const std::vector<Group>& groups) const {
    std::size_t slowest = 0;
    for (std::size_t g = 1; g < groups.size(); ++g)
      if (time(groups[g]) > time(groups[slowest])) slowest = g;
    return slowest;
  }

  // Whether sequence i of `from` and sequence j of `to` can trade places within both groups' capacities.
  [[nodiscard]] bool swap_fits(const Group& from, std::size_t i, const Group& to, std::size_t j) const {
    const int s = from.sequences[i], o = to.sequences[j];
    const auto charged = [&](int sequence, std::size_t k) { return flex_cp_charged(problem_, k, length(sequence)); };
    const std::int64_t into_from = charged(o, from.degree), into_to = charged(s, to.degree);
    return into_from > 0 && into_to > 0 &&
           from.tokens - charged(s, from.degree) + into_from <= problem_.degrees[from.degree].capacity &&
           to.tokens - charged(o, to.degree) + into_to <= problem_.degrees[to.degree].capacity;
  }

  bool use_every_unit(std::vector<Group>& groups, int used) {
    while (used < problem_.units) {
      const int free = problem_.units - used;
      std::vector<std::size_t> slowest_first(groups.size());
      std::iota(slowest_first.begin(), slowest_first.end(), std::size_t{0});
      std::ranges::stable_sort(slowest_first,
                               [&](std::size_t x, std::size_t y) { return time(groups[x]) > time(groups[y]); });
      bool changed = false;
      for (const std::size_t g : slowest_first) {
        Group& group = groups[g];
        const std::size_t wider = group.degree + 1;
        if (wider >= degrees() || problem_.degrees[wider].degree - problem_.degrees[group.degree].degree > free ||
            !holds_all(group, wider))
          continue;
        used += problem_.degrees[wider].degree - problem_.degrees[group.degree].degree;
        regroup(group, wider);
        changed = true;
        break;
      }
      if (changed) continue;
      for (const std::size_t g : slowest_first) {
        if (groups[g].sequences.size() < 2) continue;
        const int s = groups[g].sequences.back();  // its shortest
        std::optional<std::size_t> widest;
        for (std::size_t k = first_; k < degrees(); ++k)
          if (problem_.degrees[k].degree <= free && flex_cp_holds(problem_, k, length(s))) widest = k;
        if (!widest) continue;
        groups[g].sequences.pop_back();
        regroup(groups[g], groups[g].degree);
        groups.push_back(Group{.degree = *widest, .load = 0, .tokens = 0, .sequences = {}});
        add(groups.back(), s);
        used += problem_.degrees[*widest].degree;
        changed = true;
        break;
      }
      if (!changed) return false;
    }
    return true;
  }

  [[nodiscard]] FlexCpMicroBatch micro_batch(const std::vector<Group>& groups) const {
    FlexCpMicroBatch built;
    for (const Group& group : groups) {
      FlexCpGroup out{.degree_index = static_cast<int>(group.degree), .first_unit = 0, .sequences = group.sequences};
      std::ranges::sort(out.sequences);
      built.groups.push_back(std::move(out));
    }
    std::ranges::sort(built.groups, [](const FlexCpGroup& x, const FlexCpGroup& y) {
      return x.degree_index != y.degree_index ? x.degree_index > y.degree_index : x.sequences < y.sequences;
    });
    int unit = 0;  // widest first: each group starts at a multiple of its degree
    for (FlexCpGroup& group : built.groups) {
      group.first_unit = unit;
      unit += problem_.degrees[static_cast<std::size_t>(group.degree_index)].degree;
    }
    return built;
  }

  [[nodiscard]] std::size_t degrees() const { return problem_.degrees.size(); }
  [[nodiscard]] std::int64_t length(int s) const { return problem_.lengths[static_cast<std::size_t>(s)]; }
  [[nodiscard]] double width(std::size_t k) const { return problem_.degrees[k].degree; }
  [[nodiscard]] double constant(std::size_t k) const { return problem_.degrees[k].latency.microbatch_overhead(); }
  [[nodiscard]] double work(int s, std::size_t k) const { return flex_cp_sequence_seconds(problem_, k, length(s)); }
  [[nodiscard]] double alone(int s, std::size_t k) const { return constant(k) + work(s, k); }
  [[nodiscard]] double time(const Group& group) const { return constant(group.degree) + group.load; }
  [[nodiscard]] double time_with(const Group& group, std::size_t k, int s) const {
    return constant(k) + group.load + work(s, k);
  }
  [[nodiscard]] bool fits(const Group& group, std::size_t k, int s) const {
    const std::int64_t charged = flex_cp_charged(problem_, k, length(s));
    return charged > 0 && charged <= problem_.degrees[k].capacity - group.tokens;
  }
  [[nodiscard]] bool holds_all(const Group& group, std::size_t k) const {
    std::int64_t tokens = 0;
    for (const int s : group.sequences) {
      const std::int64_t charged = flex_cp_charged(problem_, k, length(s));
      if (charged == 0 || charged > problem_.degrees[k].capacity - tokens) return false;
      tokens += charged;
    }
    return true;
  }
  void add(Group& group, int s) const {
    group.load += work(s, group.degree);
    group.tokens += flex_cp_charged(problem_, group.degree, length(s));
    group.sequences.push_back(s);
  }
  // Re-sums the group's load and tokens at degree k (no rounding left behind by removals).
  void regroup(Group& group, std::size_t k) const {
    std::vector<int> sequences = std::move(group.sequences);
    group = Group{.degree = k, .load = 0, .tokens = 0, .sequences = {}};
    for (const int s : sequences) add(group, s);
  }

  const FlexCpProblem& problem_;
  std::vector<int> sequences_;  // longest first
  std::size_t first_;           // the pool's narrowest degree
  double best_seconds_ = std::numeric_limits<double>::infinity();
  std::vector<Group> best_;
};

}  // namespace detail

// One micro-batch of `sequences` (indices into problem.lengths) grouped as FlexSP groups it: every unit in a group
// with at least one sequence; nullopt when none is found (too few sequences for the units, or too many tokens).
inline std::optional<FlexCpMicroBatch> flexsp_group(const FlexCpProblem& problem, Span<const int> sequences) {
  sluice::require(!sequences.empty(), "FlexSP: a micro-batch without sequences");
  return detail::FlexSpGrouper(problem, sequences).solve();
}

// The iteration planned as FlexSP plans it: sorted split into the fewest micro-batches whose tokens stay below the
// cluster's (units × the most tokens a unit holds in any degree), and into each of the next
// flexsp_micro_batch_counts − 1 counts, each micro-batch grouped by flexsp_group; the count of least iteration time
// kept (ties to the fewer). Where no count among those can group every micro-batch, further counts one at a time, as
// the authors' first solver does, up to flexsp_most_counts in all. nullopt when none can (require_valid(FlexCpProblem)
// errors raise).
inline std::optional<FlexCpPlan> solve_flexsp(const FlexCpProblem& problem) {
  require_valid(problem);
  const std::size_t n = problem.lengths.size();
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::ranges::stable_sort(order, [&](int x, int y) {
    return problem.lengths[static_cast<std::size_t>(x)] > problem.lengths[static_cast<std::size_t>(y)];
  });
  std::vector<std::int64_t> sorted(n);
  std::int64_t tokens = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sorted[i] = problem.lengths[static_cast<std::size_t>(order[i])];
    tokens = detail::flexsp_add(tokens, sorted[i]);
  }
  std::int64_t per_unit = 0;
  for (std::size_t k = detail::flexsp_first_degree(problem); k < problem.degrees.size(); ++k)
    per_unit = std::max(per_unit, problem.degrees[k].capacity / problem.degrees[k].degree);
  const std::int64_t cluster = per_unit > std::numeric_limits<std::int64_t>::max() / problem.units
                                   ? std::numeric_limits<std::int64_t>::max()
                                   : per_unit * problem.units;

  // The fewest micro-batches whose tokens all stay below the cluster's: the greedy's count at cluster − 1 tokens, as
  // a split of least largest run stays below it from that count on; where one sequence alone reaches it, the count
  // the tokens need.
  const std::size_t fewest =
      sorted.front() < cluster ? detail::flexsp_fewest_runs(sorted, cluster - 1)
                               : static_cast<std::size_t>(std::clamp<std::int64_t>(
                                     tokens / std::max<std::int64_t>(cluster, 1) + 1, 1, static_cast<std::int64_t>(n)));

  std::optional<FlexCpPlan> best;
  for (std::size_t count = fewest; count <= n && count < fewest + flexsp_most_counts; ++count) {
    if (best && count >= fewest + flexsp_micro_batch_counts) break;
    std::vector<FlexCpMicroBatch> batches;
    std::size_t start = 0;
    for (const std::size_t end : detail::flexsp_sorted_split(sorted, count)) {
      std::optional<FlexCpMicroBatch> grouped = flexsp_group(problem, Span(order).subspan(start, end - start));
      if (!grouped) break;
      batches.push_back(*std::move(grouped));
      start = end;
    }
    if (batches.size() < count) continue;
    const double seconds = flex_cp_iteration_seconds(problem, batches);
    if (!best || seconds < best->seconds)
      best = FlexCpPlan{.micro_batches = std::move(batches), .seconds = seconds, .lower_bound = 0};
  }
  if (!best) return std::nullopt;
  std::ranges::stable_sort(best->micro_batches, [&](const auto& x, const auto& y) {
    return flex_cp_micro_batch_seconds(problem, x) > flex_cp_micro_batch_seconds(problem, y);
  });
  best->seconds = flex_cp_iteration_seconds(problem, best->micro_batches);
  best->lower_bound = flex_cp_lower_bound(problem);
  return best;
}

}  // namespace sluice::assign
