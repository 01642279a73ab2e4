#pragma once
// Per-micro-batch context-parallel groups (FlexSP: Wang et al., "FlexSP: Accelerating Large Language Model Training
// via Flexible Sequence Parallelism", ASPLOS'25, §4–5): `units` replicas of one ⟨TP, PP⟩ pipeline (each a TP group
// per stage) re-form, for every micro-batch, into CP groups of different degrees, and each sequence of the
// iteration runs in one group. A group of degree d costs c_d once plus Σ (a_d·l² + b_d·l) over its sequences (the
// CP scheme's quadratic, communication included) and holds at most capacity_d tokens; a micro-batch lasts as long
// as its slowest group; the iteration lasts Σ_m T_m + (PP − 1)·max_m T_m, the 1F1B pipeline's fill and drain
// paid at its slowest micro-batch. The degrees form a divisibility chain, so the groups of a micro-batch, widest
// first, sit on aligned blocks of units: each unit belongs to one group per degree, a pool of |degrees| groups per
// GPU created once (FlexSP keeps about log₂ N). docs/assign-flex-cp.md states the problem, the solver and figures.
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
#include <optional>
#include <set>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/assign/flex_cp_types.hpp"
#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::assign {

// A sequence's length as degree `k` charges it (rounded up to the degree's multiple); 0 when that overflows.
inline std::int64_t flex_cp_charged(const FlexCpProblem& problem, std::size_t k, std::int64_t length) {
  const std::int64_t multiple = problem.degrees[k].length_multiple;
  if (length > std::numeric_limits<std::int64_t>::max() - multiple) return 0;
  return (length + multiple - 1) / multiple * multiple;
}

// Whether degree `k` holds the sequence alone.
inline bool flex_cp_holds(const FlexCpProblem& problem, std::size_t k, std::int64_t length) {
  const std::int64_t charged = flex_cp_charged(problem, k, length);
  return charged > 0 && charged <= problem.degrees[k].capacity;
}

// One sequence's share of its group's time under degree `k`.
inline double flex_cp_sequence_seconds(const FlexCpProblem& problem, std::size_t k, std::int64_t length) {
  return problem.degrees[k].latency.sequence_time(flex_cp_charged(problem, k, length));
}

inline void validate_flex_cp(const FlexCpProblem& problem) {
  sluice::require(problem.units >= 1 && problem.units <= flex_cp_max_units, "flex CP: the units must be in [1, ",
                  flex_cp_max_units, "], got ", problem.units);
  sluice::require(problem.pp >= 1, "flex CP: PP must be >= 1, got ", problem.pp);
  sluice::require(!problem.lengths.empty(), "flex CP: the batch is empty");
  sluice::require(problem.lengths.size() <= flex_cp_max_sequences, "flex CP: ", problem.lengths.size(),
                  " sequences, more than the limit of ", flex_cp_max_sequences);
  sluice::require(!problem.degrees.empty(), "flex CP: no CP degree to form groups of");
  sluice::require(std::isfinite(problem.collectives.seconds) && problem.collectives.seconds >= 0 &&
                      std::isfinite(problem.collectives.backward_ratio) && problem.collectives.backward_ratio > 0,
                  "flex CP: the collectives need seconds finite and >= 0 and a backward ratio finite and > 0, got ",
                  problem.collectives.seconds, " s and ", problem.collectives.backward_ratio);
  for (std::size_t k = 0; k < problem.degrees.size(); ++k) {
    const FlexCpDegree& degree = problem.degrees[k];
    sluice::require(degree.degree >= 1 && problem.units % degree.degree == 0, "flex CP: CP degree ", degree.degree,
                    " must be >= 1 and divide the ", problem.units, " units");
    sluice::require(k == 0 || (degree.degree % problem.degrees[k - 1].degree == 0 &&
                                   degree.degree > problem.degrees[k - 1].degree),
                    "flex CP: the CP degrees must ascend, each a multiple of the one before (", degree.degree,
                    " after ", k == 0 ? 0 : problem.degrees[k - 1].degree, ")");
    sluice::require(degree.capacity >= 0 && degree.length_multiple >= 1, "flex CP: CP degree ", degree.degree,
                    " needs a capacity >= 0 and a length multiple >= 1");
  }
  for (std::size_t s = 0; s < problem.lengths.size(); ++s) {
    const std::int64_t length = problem.lengths[s];
    sluice::require(length >= 1, "flex CP: sequence ", s, " has length ", length, " (must be >= 1)");
    bool held = false;
    for (std::size_t k = 0; k < problem.degrees.size() && !held; ++k) held = flex_cp_holds(problem, k, length);
    sluice::require(held, "flex CP: sequence ", s, " of ", length, " tokens fits no group (the widest, CP ",
                    problem.degrees.back().degree, ", holds ", problem.degrees.back().capacity, ")");
  }
}

// A group's time: c_d + Σ a_d·l² + b_d·l.
inline double flex_cp_group_seconds(const FlexCpProblem& problem, const FlexCpGroup& group) {
  const auto k = static_cast<std::size_t>(group.degree_index);
  double seconds = problem.degrees[k].latency.microbatch_overhead();
  for (const int s : group.sequences)
    seconds += flex_cp_sequence_seconds(problem, k, problem.lengths[static_cast<std::size_t>(s)]);
  return seconds;
}

// A micro-batch's time when its slowest group computes `compute`: that, or longer where the problem's collectives
// outlast a pass.
inline double flex_cp_exposed_seconds(const FlexCpProblem& problem, double compute) {
  const FlexCpCollectives& collectives = problem.collectives;
  if (collectives.seconds == 0) return compute;
  const double forward = compute / (1 + collectives.backward_ratio);
  return std::max(forward, collectives.seconds) + std::max(compute - forward, 2 * collectives.seconds);
}

inline double flex_cp_micro_batch_seconds(const FlexCpProblem& problem, const FlexCpMicroBatch& micro_batch) {
  double slowest = 0;
  for (const FlexCpGroup& group : micro_batch.groups)
    slowest = std::max(slowest, flex_cp_group_seconds(problem, group));
  return flex_cp_exposed_seconds(problem, slowest);
}

// Σ_m T_m + (PP − 1)·max_m T_m.
inline double flex_cp_iteration_seconds(const FlexCpProblem& problem, const std::vector<FlexCpMicroBatch>& batches) {
  double total = 0;
  double slowest = 0;
  for (const FlexCpMicroBatch& micro_batch : batches) {
    const double seconds = flex_cp_micro_batch_seconds(problem, micro_batch);
    total += seconds;
    slowest = std::max(slowest, seconds);
  }
  return total + (problem.pp - 1) * slowest;
}

// Throws unless `plan` runs every sequence once, in groups of the problem's degrees on aligned, disjoint blocks of
// its units, each within its capacity, with the time it states.
inline void check_flex_cp_plan(const FlexCpProblem& problem, const FlexCpPlan& plan) {
  const PlanCheck check("flex CP plan: ");
  std::vector<int> runs(problem.lengths.size(), 0);
  for (std::size_t m = 0; m < plan.micro_batches.size(); ++m) {
    const FlexCpMicroBatch& micro_batch = plan.micro_batches[m];
    check(!micro_batch.groups.empty(), "micro-batch ", m, " has no group");
    std::vector<char> used(static_cast<std::size_t>(problem.units), 0);
    for (const FlexCpGroup& group : micro_batch.groups) {
      check(group.degree_index >= 0 && static_cast<std::size_t>(group.degree_index) < problem.degrees.size(),
            "micro-batch ", m, " names degree index ", group.degree_index);
      const auto k = static_cast<std::size_t>(group.degree_index);
      const int width = problem.degrees[k].degree;
      check(!problem.one_degree_per_micro_batch || group.degree_index == micro_batch.groups[0].degree_index,
            "micro-batch ", m, " mixes CP degrees, which the problem forbids");
      check(group.first_unit >= 0 && group.first_unit % width == 0 && group.first_unit + width <= problem.units,
            "micro-batch ", m, " places a group of CP ", width, " at unit ", group.first_unit);
      for (int unit = group.first_unit; unit < group.first_unit + width; ++unit) {
        check(used[static_cast<std::size_t>(unit)] == 0, "micro-batch ", m, " uses unit ", unit, " twice");
        used[static_cast<std::size_t>(unit)] = 1;
      }
      check(!group.sequences.empty(), "micro-batch ", m, " has an empty group");
      std::int64_t tokens = 0;
      for (const int s : group.sequences) {
        check(s >= 0 && static_cast<std::size_t>(s) < runs.size(), "no sequence ", s);
        ++runs[static_cast<std::size_t>(s)];
        const std::int64_t charged = flex_cp_charged(problem, k, problem.lengths[static_cast<std::size_t>(s)]);
        check(charged > 0 && charged <= problem.degrees[k].capacity - tokens, "micro-batch ", m,
              " overfills a group of CP ", width, " (capacity ", problem.degrees[k].capacity, ")");
        tokens += charged;
      }
    }
  }
  for (std::size_t s = 0; s < runs.size(); ++s) check(runs[s] == 1, "sequence ", s, " runs ", runs[s], " times");
  const double seconds = flex_cp_iteration_seconds(problem, plan.micro_batches);
  check(nearly_equal(seconds, plan.seconds), "states ", plan.seconds, " s, its groups take ", seconds, " s");
}

// No plan is faster: the units' busy time Σ_s min_d d·(a_d·l² + b_d·l) spread over all of them, at least one group
// constant per micro-batch and as many micro-batches as the tokens need, and the fill and drain of the slowest
// sequence's fastest group.
inline double flex_cp_lower_bound(const FlexCpProblem& problem) {
  double area = 0;
  double longest = 0;
  std::int64_t tokens = 0;
  double per_unit_tokens = 0;  // the most tokens one unit holds in a micro-batch
  double least_constant = std::numeric_limits<double>::infinity();
  for (const FlexCpDegree& degree : problem.degrees) {
    per_unit_tokens = std::max(per_unit_tokens, static_cast<double>(degree.capacity) / degree.degree);
    least_constant = std::min(least_constant, degree.latency.microbatch_overhead());
  }
  for (const std::int64_t length : problem.lengths) {
    double least_area = std::numeric_limits<double>::infinity();
    double fastest = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < problem.degrees.size(); ++k) {
      if (!flex_cp_holds(problem, k, length)) continue;
      const double work = flex_cp_sequence_seconds(problem, k, length);
      least_area = std::min(least_area, problem.degrees[k].degree * work);
      fastest = std::min(fastest, work + problem.degrees[k].latency.microbatch_overhead());
    }
    area += least_area;
    longest = std::max(longest, fastest);
    tokens = tokens > std::numeric_limits<std::int64_t>::max() - length ? tokens : tokens + length;
  }
  const double micro_batches = std::ceil(static_cast<double>(tokens) / (per_unit_tokens * problem.units));
  const double spread = area / problem.units + micro_batches * least_constant;
  return std::max(spread, longest) + (problem.pp - 1) * longest;
}


struct FlexCpOptions {
  int targets = 32;           // micro-batch heights tried, spread over the micro-batch counts
  int improvement_rounds = 8; // passes of moving a sequence out of each micro-batch's slowest group
};

namespace detail {

// The heuristic's working state: micro-batches ("shelves") of columns (groups), each shelf with a height limit set
// when it opens, so a group's slack under it changes only when the group does.
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
    slowest_first_.resize(degrees_);
    for (std::size_t k = 0; k < degrees_; ++k) {
      std::vector<int>& sorted = slowest_first_[k];
      for (std::size_t s = 0; s < n; ++s)
        if (std::isfinite(work(s, k))) sorted.push_back(int(s));
      std::ranges::stable_sort(sorted, std::ranges::greater{}, [&](int s) { return constant(k) + work(s, k); });
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

  // First-fit decreasing into shelves of height `target`: each sequence takes the least-area degree whose group
  // stays under the target (else its fastest degree), or with a `floor` the narrowest degree from the floor up that
  // holds it; then the fullest group of that degree it fits, else a new group in the first micro-batch with room,
  // else a new micro-batch.
  double pack(double target, int floor = -1) {
    clear();
    std::vector<int>& degree_of = packing_degree_of_;
    degree_of.resize(problem_.lengths.size());
    std::vector<int> used(degrees_, 0);
    for (std::size_t s = 0; s < degree_of.size(); ++s) {
      degree_of[s] = packing_degree(s, target, floor);
      ++used[std::size_t(degree_of[s])];
    }
    // Slowest alone first (ties by index): each degree's sequences in its precomputed order, merged.
    struct Head {
      std::size_t k;
      std::size_t next;
    };
    std::vector<Head> heads;
    for (std::size_t k = 0; k < degrees_; ++k)
      if (used[k] > 0) heads.push_back({k, 0});
    const auto advance = [&](Head& head) {
      const std::vector<int>& sorted = slowest_first_[head.k];
      while (head.next < sorted.size() && degree_of[std::size_t(sorted[head.next])] != int(head.k)) ++head.next;
    };
    for (Head& head : heads) advance(head);
    const auto ahead = [&](const Head& x, const Head& y) {  // x's sequence goes before y's
      const int sx = slowest_first_[x.k][x.next];
      const int sy = slowest_first_[y.k][y.next];
      const double tx = constant(x.k) + work(sx, x.k);
      const double ty = constant(y.k) + work(sy, y.k);
      return tx != ty ? tx > ty : sx < sy;
    };
    while (!heads.empty()) {
      std::size_t first = 0;
      for (std::size_t h = 1; h < heads.size(); ++h)
        if (ahead(heads[h], heads[first])) first = h;
      Head& head = heads[first];
      place(slowest_first_[head.k][head.next], int(head.k), target);
      ++head.next;
      advance(head);
      if (head.next == slowest_first_[head.k].size()) heads.erase(heads.begin() + std::ptrdiff_t(first));
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
      for (std::size_t m = 0; m < shelves_.size(); ++m)
        if (!shelves_[m].columns.empty()) moved = relieve(m, now) || moved;
      while (budget_ > 0 && eliminate()) moved = true;
      for (std::size_t m = 0; m < shelves_.size(); ++m)
        if (!shelves_[m].columns.empty()) moved = regroup(m, layouts) || moved;
      while (budget_ > 0 && merge(layouts)) moved = true;
      moved = split(layouts) || moved;
      if (!moved) break;
    }
  }

  [[nodiscard]] double objective() const {
    double total = 0;
    double slowest = 0;
    for (const Shelf& shelf : shelves_) {
      const double height = shelf_height(shelf);
      total += height;
      slowest = std::max(slowest, height);
    }
    return total + (problem_.pp - 1) * slowest;
  }

  [[nodiscard]] std::vector<FlexCpMicroBatch> micro_batches() const {
    std::vector<std::pair<double, FlexCpMicroBatch>> built;
    for (const Shelf& shelf : shelves_) {
      if (shelf.columns.empty()) continue;
      std::vector<FlexCpGroup> groups;
      for (const int c : shelf.columns) {
        FlexCpGroup group{.degree_index = columns_[std::size_t(c)].degree, .first_unit = 0,
                          .sequences = columns_[std::size_t(c)].sequences};
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
      built.emplace_back(shelf_height(shelf), FlexCpMicroBatch{std::move(groups)});
    }
    std::stable_sort(built.begin(), built.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second.groups[0].sequences < y.second.groups[0].sequences;
    });
    std::vector<FlexCpMicroBatch> batches;
    for (auto& [seconds, micro_batch] : built) batches.push_back(std::move(micro_batch));
    return batches;
  }

private:
  struct Column {
    int shelf = 0;
    int degree = 0;
    double load = 0;
    std::int64_t tokens = 0;
    std::vector<int> sequences;
  };
  struct Shelf {
    int free_units = 0;
    double limit = 0;
    int degree = -1;  // the one degree of its groups, when the problem asks for one
    std::vector<int> columns;
  };

  // Sequence and degree indices come as int (the plan's type) or std::size_t (loop counters).
  template <class S, class K>
  [[nodiscard]] double work(S s, K k) const { return work_[std::size_t(s) * degrees_ + std::size_t(k)]; }
  template <class K>
  [[nodiscard]] std::int64_t charged(int s, K k) const { return charged_[std::size_t(s) * degrees_ + std::size_t(k)]; }
  template <class K>
  [[nodiscard]] double constant(K k) const { return problem_.degrees[std::size_t(k)].latency.microbatch_overhead(); }
  template <class K>
  [[nodiscard]] double width(K k) const { return problem_.degrees[std::size_t(k)].degree; }
  template <class K>
  [[nodiscard]] int units_of(K k) const { return problem_.degrees[std::size_t(k)].degree; }
  template <class K>
  [[nodiscard]] std::int64_t capacity(K k) const { return problem_.degrees[std::size_t(k)].capacity; }
  [[nodiscard]] bool fits(const Column& column, int s) const {
    return charged(s, column.degree) <= capacity(column.degree) - column.tokens;
  }
  // Micro-batch m's sequences, group after group.
  [[nodiscard]] std::vector<int> sequences_of(std::size_t m) const {
    std::vector<int> sequences;
    for (const int c : shelves_[m].columns)
      sequences.insert(sequences.end(), columns_[std::size_t(c)].sequences.begin(),
                       columns_[std::size_t(c)].sequences.end());
    return sequences;
  }
  // Longest first, ties by index.
  void sort_longest_first(std::vector<int>& sequences) const {
    std::ranges::sort(sequences, {}, [&](int s) { return longest_first_rank_[std::size_t(s)]; });
  }
  [[nodiscard]] double shelf_height(const Shelf& shelf) const {
    double height = 0;
    for (const int c : shelf.columns) height = std::max(height, columns_[std::size_t(c)].load);
    return height;
  }
  [[nodiscard]] double slack(int c) const {
    const Column& column = columns_[std::size_t(c)];
    return shelves_[std::size_t(column.shelf)].limit - column.load;
  }
  [[nodiscard]] bool admits(const Shelf& shelf, int k) const {
    return shelf.free_units >= units_of(k) && (shelf.degree < 0 || shelf.degree == k);
  }

  // pack()'s degree for sequence s: the least-area degree whose time alone stays under `target`, or with a `floor`
  // the narrowest from the floor up that holds it; else its fastest.
  [[nodiscard]] int packing_degree(std::size_t s, double target, int floor) const {
    int chosen = -1;
    int fastest = -1;
    for (std::size_t k = 0; k < degrees_; ++k) {
      const double alone = constant(k) + work(s, k);
      if (!std::isfinite(alone)) continue;
      if (fastest < 0 || alone < constant(fastest) + work(s, fastest)) fastest = int(k);
      if (floor >= 0) {
        if (chosen < 0 && int(k) >= floor) chosen = int(k);
      } else if (alone <= target && (chosen < 0 || width(k) * work(s, k) < width(chosen) * work(s, chosen))) {
        chosen = int(k);
      }
    }
    return chosen >= 0 ? chosen : fastest;
  }

  void clear() {
    for (Column& column : columns_) {
      column.sequences.clear();
      spare_sequences_.push_back(std::move(column.sequences));
    }
    columns_.clear();
    shelves_.clear();
    open_.clear();  // its nodes' memory is released whole, then reused by the next packing's sets
    open_memory_.release();
    for (std::size_t k = 0; k < degrees_; ++k) open_.emplace_back(&open_memory_);
    first_admitting_.assign(degrees_, 0);
  }

  void add(int c, int s) {
    Column& column = columns_[std::size_t(c)];
    column.load += work(s, column.degree);
    column.tokens += charged(s, column.degree);
    column.sequences.push_back(s);
  }

  int open_column(int shelf, int k) {
    Shelf& target = shelves_[std::size_t(shelf)];
    target.free_units -= units_of(k);
    if (problem_.one_degree_per_micro_batch) target.degree = k;
    const int c = static_cast<int>(columns_.size());
    std::vector<int> sequences;  // a cleared one kept from an earlier packing, sparing its allocation
    if (!spare_sequences_.empty()) {
      sequences = std::move(spare_sequences_.back());
      spare_sequences_.pop_back();
    }
    columns_.push_back(
        {.shelf = shelf, .degree = k, .load = constant(k), .tokens = 0, .sequences = std::move(sequences)});
    target.columns.push_back(c);
    return c;
  }

  void place(int s, int k, double target) {
    OpenColumns& open = open_[std::size_t(k)];
    const double w = work(s, k);
    int chosen = -1;
    int scanned = 0;
    for (auto it = open.lower_bound({w, -1}); it != open.end() && scanned < 8; ++it, ++scanned)
      if (fits(columns_[std::size_t(it->second)], s)) {
        chosen = it->second;
        open.erase(it);
        break;
      }
    if (chosen < 0) {
      // A micro-batch without room for degree k never gets it back while packing (units are only taken, a degree
      // once set stays), so the first one worth trying only moves forward.
      std::size_t& first = first_admitting_[std::size_t(k)];
      while (first < shelves_.size() && !admits(shelves_[first], k)) ++first;
      for (std::size_t m = first; m < shelves_.size() && chosen < 0; ++m)
        if (admits(shelves_[m], k) && constant(k) + w <= shelves_[m].limit) chosen = open_column(int(m), k);
      if (chosen < 0) {
        shelves_.push_back({.free_units = problem_.units, .limit = std::max(target, constant(k) + w), .degree = -1,
                            .columns = {}});
        chosen = open_column(static_cast<int>(shelves_.size()) - 1, k);
      }
    }
    add(chosen, s);
    open.insert({slack(chosen), chosen});
  }

  // The micro-batches' heights, to price a move in O(1): their sum and the three tallest.
  struct Heights {
    std::vector<double> of;
    double total = 0;
    std::array<std::size_t, 3> tallest{};
    int pp = 1;

    // The objective after shelf `m` becomes `m_height` and shelf `t` (which may be m) `t_height`.
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

    // Shelf m is now `height` tall: O(shelves), not the O(groups) of heights().
    void update(std::size_t m, double height) {
      total += height - of[m];
      of[m] = height;
      std::array<std::size_t, 3> top;
      top.fill(of.size());
      for (std::size_t i = 0; i < of.size(); ++i)
        for (std::size_t r = 0; r < top.size(); ++r)
          if (top[r] == of.size() || of[i] > of[top[r]]) {
            std::copy_backward(top.begin() + std::ptrdiff_t(r), top.end() - 1, top.end());
            top[r] = i;
            break;
          }
      tallest = top;
    }
  };

  [[nodiscard]] Heights heights() const {
    Heights result{.of = {}, .total = 0, .tallest = {}, .pp = problem_.pp};
    for (const Shelf& shelf : shelves_) result.of.push_back(shelf_height(shelf));
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

  // Moves the sequence of shelf m's slowest group whose move shortens the iteration most, if any does.
  bool relieve(std::size_t m, Heights& now) {
    Shelf& shelf = shelves_[m];
    int slowest = shelf.columns.front();
    double second = 0;  // the next slowest group's load
    for (const int c : shelf.columns)
      if (columns_[std::size_t(c)].load > columns_[std::size_t(slowest)].load) slowest = c;
    for (const int c : shelf.columns)
      if (c != slowest) second = std::max(second, columns_[std::size_t(c)].load);
    const Column& from = columns_[std::size_t(slowest)];
    double best = now.with(m, now.of[m], m, now.of[m]) * (1 - 1e-12);
    int best_s = -1;
    int best_to = -1;  // a column, or −1 − (shelf·degrees + k) for a new group
    constexpr std::size_t tried = 16;
    std::vector<int> candidates = from.sequences;
    std::sort(candidates.begin(), candidates.end(),
              [&](int x, int y) { return work(x, from.degree) > work(y, from.degree); });
    if (candidates.size() > tried) candidates.resize(tried);
    if (budget_ <= 0) return false;
    budget_ -= std::int64_t(candidates.size() * (columns_.size() + shelves_.size() * degrees_));
    for (const int s : candidates) {
      const double left = from.sequences.size() == 1 ? 0.0 : from.load - work(s, from.degree);
      const double m_height = std::max(second, left);
      for (std::size_t c = 0; c < columns_.size(); ++c) {
        const Column& to = columns_[c];
        if (int(c) == slowest || to.sequences.empty() || !std::isfinite(work(s, to.degree)) || !fits(to, s)) continue;
        const auto t = std::size_t(to.shelf);
        const double load = to.load + work(s, to.degree);
        const double t_height = std::max(t == m ? m_height : now.of[t], load);
        const double value = now.with(m, t == m ? t_height : m_height, t, t_height);
        if (value < best) {
          best = value;
          best_s = s;
          best_to = int(c);
        }
      }
      for (std::size_t t = 0; t < shelves_.size(); ++t)
        for (std::size_t k = 0; k < degrees_; ++k) {
          const int free = shelves_[t].free_units + (t == m && from.sequences.size() == 1 ? units_of(from.degree) : 0);
          const bool same_degree = shelves_[t].degree < 0 || shelves_[t].degree == int(k) ||
                                   (t == m && shelf.columns.size() == 1 && from.sequences.size() == 1);
          if (free < units_of(int(k)) || !same_degree || !std::isfinite(work(s, k)) ||
              charged(s, int(k)) > capacity(k))
            continue;
          const double load = constant(k) + work(s, k);
          const double t_height = std::max(t == m ? m_height : now.of[t], load);
          const double value = now.with(m, t == m ? t_height : m_height, t, t_height);
          if (value < best) {
            best = value;
            best_s = s;
            best_to = -1 - int(t * degrees_ + k);
          }
        }
    }
    // Or swap a candidate with a sequence of another group, where each fits the other's group. Each micro-batch's
    // two slowest groups give its height without any one group in O(1).
    int best_other = -1;
    budget_ -= std::int64_t(candidates.size() * problem_.lengths.size() + columns_.size());
    std::vector<std::array<int, 2>> two_slowest(shelves_.size(), {-1, -1});
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      if (columns_[c].sequences.empty()) continue;
      std::array<int, 2>& top = two_slowest[std::size_t(columns_[c].shelf)];
      const double load = columns_[c].load;
      if (top[0] < 0 || load > columns_[std::size_t(top[0])].load) {
        top = {int(c), top[0]};
      } else if (top[1] < 0 || load > columns_[std::size_t(top[1])].load) {
        top[1] = int(c);
      }
    }
    const auto without = [&](std::size_t t, int c) {
      const int kept = two_slowest[t][0] != c ? two_slowest[t][0] : two_slowest[t][1];
      return kept < 0 ? 0.0 : columns_[std::size_t(kept)].load;
    };
    // Each group's load less its heaviest sequence: the least it keeps in a swap, so that a group no swap can
    // take s into below the best is passed over whole.
    std::vector<double> keeps(columns_.size());
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      double heaviest = 0;
      for (const int other : columns_[c].sequences) heaviest = std::max(heaviest, work(other, columns_[c].degree));
      keeps[c] = columns_[c].load - heaviest;
    }
    // Shelf m's three slowest groups give its height without the slowest and any other in O(1).
    std::array<int, 3> m_slowest{-1, -1, -1};
    for (const int c : shelf.columns) {
      const double load = columns_[std::size_t(c)].load;
      for (std::size_t r = 0; r < m_slowest.size(); ++r)
        if (m_slowest[r] < 0 || load > columns_[std::size_t(m_slowest[r])].load) {
          std::copy_backward(m_slowest.begin() + std::ptrdiff_t(r), m_slowest.end() - 1, m_slowest.end());
          m_slowest[r] = c;
          break;
        }
    }
    const auto m_without_slowest_and = [&](int y) {
      for (const int c : m_slowest)
        if (c >= 0 && c != slowest && c != y) return columns_[std::size_t(c)].load;
      return 0.0;
    };
    const auto swapped = [&](std::size_t t, double rest_of_t, double from_load, double to_load) {
      return t == m ? now.with(m, std::max({rest_of_t, from_load, to_load}), m, 0)
                    : now.with(m, std::max(second, from_load), t, std::max(rest_of_t, to_load));
    };
    for (const int s : candidates)
      for (std::size_t c = 0; c < columns_.size(); ++c) {
        const Column& to = columns_[c];
        if (int(c) == slowest || to.sequences.empty() || !std::isfinite(work(s, to.degree))) continue;
        const auto t = std::size_t(to.shelf);
        const double rest_of_t = t == m ? m_without_slowest_and(int(c)) : without(t, int(c));
        // Rounding keeps each of the swap's loads at or above these (every work is >= 0), so nothing better is missed.
        if (swapped(t, rest_of_t, from.load - work(s, from.degree), keeps[c] + work(s, to.degree)) >= best) continue;
        for (const int other : to.sequences) {
          if (!std::isfinite(work(other, from.degree)) ||
              from.tokens - charged(s, from.degree) + charged(other, from.degree) > capacity(from.degree) ||
              to.tokens - charged(other, to.degree) + charged(s, to.degree) > capacity(to.degree))
            continue;
          const double from_load = from.load - work(s, from.degree) + work(other, from.degree);
          const double to_load = to.load - work(other, to.degree) + work(s, to.degree);
          const double value = swapped(t, rest_of_t, from_load, to_load);
          if (value < best) {
            best = value;
            best_s = s;
            best_to = int(c);
            best_other = other;
          }
        }
      }
    if (best_s < 0) return false;
    const std::size_t t = best_to >= 0 ? std::size_t(columns_[std::size_t(best_to)].shelf)
                                       : std::size_t(-1 - best_to) / degrees_;
    if (best_other >= 0) {
      swap(slowest, best_s, best_to, best_other);
    } else {
      move(slowest, best_s, best_to);
    }
    now.update(m, shelf_height(shelves_[m]));
    now.update(t, shelf_height(shelves_[t]));
    return true;
  }

  // Sequence s of column x and sequence o of column y trade places; loads re-summed, leaving no rounding behind.
  void swap(int x, int s, int y, int o) {
    for (const auto& [c, out, in] : {std::tuple(x, s, o), std::tuple(y, o, s)}) {
      Column& column = columns_[std::size_t(c)];
      std::ranges::replace(column.sequences, out, in);
      column.load = constant(column.degree);
      column.tokens = 0;
      for (const int sequence : column.sequences) {
        column.load += work(sequence, column.degree);
        column.tokens += charged(sequence, column.degree);
      }
    }
  }

  // Empties one of the two shortest micro-batches into the others without raising any of them: each of its
  // sequences, longest first, into the fullest group with room under its micro-batch's height, else into a new group
  // (least area) where units are free.
  bool eliminate() {
    std::vector<std::size_t> order;
    for (std::size_t m = 0; m < shelves_.size(); ++m)
      if (!shelves_[m].columns.empty()) order.push_back(m);
    if (order.size() < 2) return false;
    const Heights now = heights();
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return now.of[x] < now.of[y]; });
    for (std::size_t tried = 0; tried < 2; ++tried)
      if (empty_into_others(order[tried], now)) return true;
    return false;
  }

  bool empty_into_others(std::size_t m, const Heights& now) {
    budget_ -= std::int64_t(columns_.size() * (1 + columns_.size() / std::max<std::size_t>(1, shelves_.size())));
    std::vector<std::pair<int, int>> sequences;  // (sequence, its column)
    for (const int c : shelves_[m].columns)
      for (const int s : columns_[std::size_t(c)].sequences) sequences.emplace_back(s, c);
    const auto home_work = [&](const std::pair<int, int>& entry) {
      return work(entry.first, columns_[std::size_t(entry.second)].degree);
    };
    std::stable_sort(sequences.begin(), sequences.end(),
                     [&](const auto& x, const auto& y) { return home_work(x) > home_work(y); });
    // Tentative columns: the existing ones of other micro-batches, then any opened here; committed only if every
    // sequence finds a place.
    std::vector<Column> tentative;
    std::vector<int> existing;  // tentative column → columns_ index, or −1 for a new one
    for (std::size_t c = 0; c < columns_.size(); ++c)
      if (columns_[c].shelf != int(m) && !columns_[c].sequences.empty()) {
        tentative.push_back({.shelf = columns_[c].shelf, .degree = columns_[c].degree, .load = columns_[c].load,
                             .tokens = columns_[c].tokens, .sequences = {}});
        existing.push_back(int(c));
      }
    std::vector<int> free(shelves_.size());
    std::vector<int> degree(shelves_.size());
    for (std::size_t t = 0; t < shelves_.size(); ++t) {
      free[t] = shelves_[t].free_units;
      degree[t] = shelves_[t].degree;
    }
    for (const auto& entry : sequences) {
      const int s = entry.first;
      int target = -1;
      double least = std::numeric_limits<double>::infinity();
      for (std::size_t c = 0; c < tentative.size(); ++c) {
        const Column& column = tentative[c];
        const double room = now.of[std::size_t(column.shelf)] - column.load - work(s, column.degree);
        if (room >= 0 && room < least && fits(column, s)) {
          least = room;
          target = int(c);
        }
      }
      if (target < 0) {
        double area = std::numeric_limits<double>::infinity();
        std::size_t where = 0;
        for (std::size_t t = 0; t < shelves_.size(); ++t)
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
        tentative.push_back({.shelf = int(t), .degree = k, .load = constant(k), .tokens = 0, .sequences = {}});
        existing.push_back(-1);
      }
      Column& column = tentative[std::size_t(target)];
      column.load += work(s, column.degree);
      column.tokens += charged(s, column.degree);
      column.sequences.push_back(s);
    }
    empty(m);
    for (std::size_t c = 0; c < tentative.size(); ++c) {
      if (tentative[c].sequences.empty()) continue;
      const int column = existing[c] >= 0 ? existing[c] : open_column(tentative[c].shelf, tentative[c].degree);
      for (const int s : tentative[c].sequences) add(column, s);
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
    double height = shelf_height(shelves_[m]) * (1 - 1e-12);
    std::vector<Column> regrouped = grouped(sequences_of(m), layouts, height);
    if (regrouped.empty()) return false;
    replace(m, regrouped);
    return true;
  }

  // Pools two micro-batches into one, regrouped, where that shortens the iteration: first-fit leaves units idle
  // that narrower groups side by side fill, one micro-batch constant fewer. Pairs among the eight shortest.
  bool merge(const std::vector<Layout>& layouts) {
    std::vector<std::size_t> order;
    for (std::size_t m = 0; m < shelves_.size(); ++m)
      if (!shelves_[m].columns.empty()) order.push_back(m);
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
        if (!highest_paying(now.of[m], now.of[m] + now.of[t], current,
                            [&](double height) { return now.with(m, height, t, 0); }, bound))
          continue;
        std::vector<int> pooled = sequences_of(m);
        const std::vector<int> other = sequences_of(t);
        pooled.insert(pooled.end(), other.begin(), other.end());
        const std::vector<Column> regrouped = grouped(std::move(pooled), layouts, bound);
        if (regrouped.empty()) continue;
        empty(t);
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
    if (m >= shelves_.size() || shelves_[m].columns.empty()) return false;
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
        return now.total - now.of[m] + rest_height + alone +
               (problem_.pp - 1) * std::max({others, rest_height, alone});
      };
      double bound = 0;
      if (!highest_paying(0, now.of[m], current, with_split, bound)) continue;
      rest.clear();
      std::ranges::copy_if(pooled, std::back_inserter(rest), [&](int x) { return x != s; });
      const std::vector<Column> regrouped = grouped(rest, layouts, bound);
      if (regrouped.empty()) continue;
      replace(m, regrouped);
      shelves_.push_back({.free_units = problem_.units, .limit = alone, .degree = -1, .columns = {}});
      add(open_column(static_cast<int>(shelves_.size()) - 1, fastest), s);
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
  std::vector<Column> grouped(std::vector<int> sequences, const std::vector<Layout>& layouts, double& bound) {
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
          // Branch-free: the first group of least load among those with room.
          for (std::size_t g = ranges[r].first; g < ranges[r].second; ++g) {
            const double finish = tokens[g] <= most_tokens ? loads[g] + w : infinity;
            const bool sooner = finish < soonest;
            soonest = sooner ? finish : soonest;
            chosen = sooner ? g : chosen;
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
    std::vector<Column> groups(size);
    for (std::size_t g = 0; g < size; ++g) {
      const int degree = g < std::size_t(best->count) ? best->wide : best->narrow;
      groups[g] = {.shelf = 0, .degree = degree, .load = constant(degree), .tokens = 0, .sequences = {}};
    }
    for (std::size_t i = 0; i < sequences.size(); ++i) {
      Column& group = groups[std::size_t(best_group_of[i])];
      group.load += work(sequences[i], group.degree);
      group.tokens += charged(sequences[i], group.degree);
      group.sequences.push_back(sequences[i]);
    }
    return groups;
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
  [[nodiscard]] double bound_alone(std::size_t s, K k) const { return constant(k) + work(s, k); }
  template <class K>
  [[nodiscard]] double bound_area(std::size_t s, K k) const { return width(k) * work(s, k); }
  template <class K>
  [[nodiscard]] double bound_tokens(std::size_t s, K k) const {
    return std::isfinite(work(s, k)) ? static_cast<double>(charged(int(s), k)) : std::numeric_limits<double>::infinity();
  }

  // Whether `layout` cannot group sequences of these bounds into a micro-batch shorter than `bound`. Skipping such
  // layouts leaves every choice as it was (a margin far above rounding keeps it so), while most layouts of a
  // micro-batch of hundreds of short sequences are skipped for O(1) instead of priced for O(sequences × groups).
  [[nodiscard]] bool cannot_beat(const LayoutBounds& bounds, const Layout& layout, double bound) const {
    const std::size_t groups = layout.groups(*this);
    const double held = static_cast<double>(capacity(layout.wide)) * layout.count +
                        static_cast<double>(capacity(layout.narrow)) *
                            static_cast<double>(groups - std::size_t(layout.count));
    return bounds.tokens > held ||
           std::max(bounds.height, bounds.area + constants_busy(layout) / problem_.units) > bound * (1 + 1e-9);
  }

  // The units' busy time in `layout`'s groups' constants alone (every unit is in one group).
  [[nodiscard]] double constants_busy(const Layout& layout) const {
    const double wide_units = static_cast<double>(layout.count) * width(layout.wide);
    return wide_units * constant(layout.wide) + (problem_.units - wide_units) * constant(layout.narrow);
  }

  // Micro-batch m without groups; its height limit, which only packing reads, stays.
  void empty(std::size_t m) {
    Shelf& shelf = shelves_[m];
    for (const int c : shelf.columns) columns_[std::size_t(c)].sequences.clear();
    shelf.columns.clear();
    shelf.free_units = problem_.units;
    shelf.degree = -1;
  }

  // Micro-batch m's groups become `groups` (shelf fields ignored).
  void replace(std::size_t m, const std::vector<Column>& groups) {
    empty(m);
    for (const Column& group : groups) {
      if (group.sequences.empty()) continue;
      const int column = open_column(int(m), group.degree);
      for (const int s : group.sequences) add(column, s);
    }
  }

  void move(int from_column, int s, int to) {
    Column& from = columns_[std::size_t(from_column)];
    Shelf& home = shelves_[std::size_t(from.shelf)];
    std::erase(from.sequences, s);
    from.load -= work(s, from.degree);
    from.tokens -= charged(s, from.degree);
    if (from.sequences.empty()) {
      home.free_units += units_of(from.degree);
      std::erase(home.columns, from_column);
      if (home.columns.empty()) home.degree = -1;
    } else {
      from.load = constant(from.degree);  // re-summed, so removals leave no rounding behind
      for (const int other : from.sequences) from.load += work(other, from.degree);
    }
    if (to < 0) {
      const auto index = std::size_t(-1 - to);
      to = open_column(static_cast<int>(index / degrees_), static_cast<int>(index % degrees_));
    }
    add(to, s);
  }

  const FlexCpProblem& problem_;
  std::size_t degrees_;
  std::vector<double> work_;           // per sequence and degree; infinite where the degree cannot hold it
  std::vector<std::int64_t> charged_;
  std::vector<int> longest_first_rank_;  // per sequence, its place longest first (ties by index)
  std::vector<std::vector<int>> slowest_first_;  // per degree, the sequences it holds, slowest alone first
  std::vector<int> packing_degree_of_;           // pack()'s working array
  std::vector<std::vector<int>> spare_sequences_;  // cleared columns' lists, reused by open_column
  std::vector<Column> columns_;
  std::vector<Shelf> shelves_;
  using OpenColumns = std::pmr::set<std::pair<double, int>>;  // (slack, column)
  std::pmr::monotonic_buffer_resource open_memory_;  // open_'s nodes, contiguous for the packing's lookups and
                                                     // freed at once
  std::vector<OpenColumns> open_;                    // per degree
  std::vector<std::size_t> first_admitting_;           // per degree: no micro-batch before it has room for one
  std::int64_t budget_ = 0;                            // candidate moves improve() may still price
  std::vector<double> greedy_loads_;                   // grouped()'s working arrays, kept to spare allocations
  std::vector<std::int64_t> greedy_tokens_;
  std::vector<int> greedy_group_of_;
  std::vector<double> greedy_rest_area_;
  std::vector<double> least_alone_;   // per sequence, the least of bound_alone over the degrees
  std::vector<double> least_area_;    // of bound_area
  std::vector<double> least_tokens_;  // of bound_tokens
};

}  // namespace detail

// The fast solver: first-fit decreasing at a range of micro-batch heights (one per micro-batch count from 1 to the
// number of sequences, geometrically spaced, then bisected around the best), with each sequence's degree chosen by
// least area under the height or floored at each degree in turn; the best packing then improved by moving sequences
// out of each micro-batch's slowest group, into another group or a new one of any degree, and by emptying the
// shortest micro-batches into the others' idle time.
inline FlexCpPlan solve_flex_cp(const FlexCpProblem& problem, const FlexCpOptions& options = {}) {
  validate_flex_cp(problem);
  sluice::require(options.targets >= 1, "flex CP: options.targets must be >= 1, got ", options.targets);
  sluice::require(options.improvement_rounds >= 0, "flex CP: options.improvement_rounds must be >= 0, got ",
                  options.improvement_rounds);
  detail::FlexCpPacker packer(problem);
  const double area = packer.area_per_unit();
  const auto n = static_cast<double>(problem.lengths.size());
  struct Start {
    double target = 0;
    int floor = -1;
    double value = std::numeric_limits<double>::infinity();
  };
  // Below a floor's target_free_below every target packs alike: packed once.
  std::vector<double> target_free_below(problem.degrees.size() + 1);
  std::vector<std::optional<double>> target_free_value(problem.degrees.size() + 1);
  for (int floor = -1; floor < static_cast<int>(problem.degrees.size()); ++floor)
    target_free_below[std::size_t(floor + 1)] = packer.target_free_below(floor);
  const auto consider = [&](Start& start, double target, int floor) {
    std::optional<double>& same = target_free_value[std::size_t(floor + 1)];
    const bool target_free = target < target_free_below[std::size_t(floor + 1)];
    const double value = target_free && same ? *same : packer.pack(target, floor);
    if (target_free) same = value;
    if (value < start.value) start = {target, floor, value};
  };
  // Least area under heights for micro-batch counts 1 .. n, geometrically spaced (the height each count gives if
  // the area spreads evenly), then bisected around the best.
  Start least_area;
  const double ratio = options.targets > 1 ? std::pow(n, 1.0 / (options.targets - 1)) : n;
  for (int t = 0; t < options.targets; ++t) consider(least_area, area / std::pow(ratio, t), -1);
  for (double factor = std::sqrt(std::max(ratio, 1.25)); factor > 1.01; factor = std::sqrt(factor)) {
    const double center = least_area.target;
    consider(least_area, center * factor, -1);
    consider(least_area, center / factor, -1);
  }
  // Every sequence at least as wide as each degree in turn, at one, two and four micro-batches' heights and around
  // the best: side-by-side groups of one width, which the least-area choice misses when units would idle.
  // A floor whose groups alone keep the units busier than twice the least-area packing's whole iteration is not
  // tried: on 150 batches of the bundled sets (8 to 1,024 GPUs) such a start won twice, by 0.1% and 0.6%, while the
  // improvement budget it leaves to the others made 31 plans faster, by up to 2.3% (docs/assign-flex-cp.md).
  std::vector<Start> starts;
  for (int floor = 0; floor < static_cast<int>(problem.degrees.size()); ++floor) {
    if (packer.area_per_unit(floor) > 2 * least_area.value) continue;
    Start& start = starts.emplace_back();
    for (const double target : {area, area / 2, area / 4, least_area.target, least_area.target * 2,
                                least_area.target / 2})
      consider(start, target, floor);
  }
  // Each start improved (least area first, then each floor's), but one packing as good as an earlier start's,
  // which high floors repeat; the best kept, ties to the earlier.
  std::vector<FlexCpMicroBatch> best;
  double best_value = std::numeric_limits<double>::infinity();
  starts.insert(starts.begin(), least_area);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const Start& start = starts[i];
    if (std::ranges::any_of(starts.begin(), starts.begin() + std::ptrdiff_t(i),
                            [&](const Start& earlier) { return earlier.value == start.value; }))
      continue;
    packer.pack(start.target, start.floor);
    packer.improve(options.improvement_rounds,
                   detail::FlexCpPacker::improvement_budget / static_cast<std::int64_t>(starts.size()));
    // The packer prices groups alone; collectives that outlast short micro-batches are priced here.
    const double value = problem.collectives.seconds == 0
                             ? packer.objective()
                             : flex_cp_iteration_seconds(problem, packer.micro_batches());
    if (value < best_value) {
      best_value = value;
      best = packer.micro_batches();
    }
  }
  FlexCpPlan plan{.micro_batches = std::move(best), .seconds = 0, .lower_bound = flex_cp_lower_bound(problem)};
  plan.seconds = flex_cp_iteration_seconds(problem, plan.micro_batches);
  return plan;
}

// The schemes a domain of `units` replicas of `base` (a ⟨TP, PP⟩ scheme of `profile`) groups into, ascending by
// CP degree: the base, then for each CP degree that `admits` takes a scheme of on that base, the one of least a,
// then b (where a hybrid offers several), kept while the degrees form a chain dividing the units. Schemes that
// hold no sequence are skipped.
template <class Admits>
std::vector<const cost::SchemeCost*> flex_cp_schemes(const cost::Profile& profile, const Scheme& base, int units,
                                                     Admits admits) {
  sluice::require(base.is_base(), "flex CP: ", base.name(), " is not a ⟨TP, PP⟩ scheme to build groups of");
  std::vector<const cost::SchemeCost*> chosen;  // per CP degree, ascending
  for (const cost::SchemeCost& cost : profile.schemes()) {
    const Scheme& scheme = cost.scheme;
    if (scheme.tp() != base.tp() || scheme.pp() != base.pp() || scheme.recompute() != base.recompute() ||
        cost.max_len == 0 || (scheme.cp() > 1 && !admits(scheme)) || units % scheme.cp() != 0)
      continue;
    const auto same = std::ranges::find_if(chosen, [&](const cost::SchemeCost* kept) {
      return kept->scheme.cp() == scheme.cp();
    });
    if (same == chosen.end()) {
      chosen.push_back(&cost);
    } else if (std::pair(cost.latency.a(), cost.latency.b()) < std::pair((*same)->latency.a(), (*same)->latency.b())) {
      *same = &cost;
    }
  }
  std::sort(chosen.begin(), chosen.end(),
            [](const cost::SchemeCost* x, const cost::SchemeCost* y) { return x->scheme.cp() < y->scheme.cp(); });
  std::vector<const cost::SchemeCost*> chain;
  for (const cost::SchemeCost* cost : chosen)
    if (chain.empty() || cost->scheme.cp() % chain.back()->scheme.cp() == 0) chain.push_back(cost);
  return chain;
}

// The problem of `lengths` on the degrees of flex_cp_schemes. A ring charges each length rounded up to its 2·R
// causal chunks.
template <class Admits>
FlexCpProblem flex_cp_problem(const cost::Profile& profile, const Scheme& base, int units,
                              std::span<const std::int64_t> lengths, Admits admits) {
  FlexCpProblem problem{.lengths = {lengths.begin(), lengths.end()}, .units = units, .pp = base.pp(), .degrees = {},
                        .one_degree_per_micro_batch = false};
  for (const cost::SchemeCost* cost : flex_cp_schemes(profile, base, units, admits)) {
    const int degree = cost->scheme.cp();
    const bool ring = degree > 1 && cost->scheme.ring() > 1;
    problem.degrees.push_back({.degree = degree, .latency = cost->latency, .capacity = cost->max_len,
                               .length_multiple = ring ? 2 * cost->scheme.ring() : 1});
  }
  return problem;
}

}  // namespace sluice::assign
