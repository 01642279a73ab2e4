#pragma once
// Stage 1 of Hydraulis' two-stage assignment (§6.2, App. D): dispatch a mini-batch across the D pipelines
// of a heterogeneous strategy so that the largest per-pipeline lower bound (Eq. 2) is as small as possible
// (Eq. 3). The greedy of Alg. 1 with seeded random restarts and a longest-first order, a local search on
// its best trial, and a solver-free lower bound on the optimum. Derivations, structure and measured quality:
// docs/assign-dispatch.md. The exact MILP: dispatch_cbc.hpp.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/assign/types.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::assign {

struct DispatchOptions {
  int trials = 100;           // random orders tried by the greedy (Alg. 1's T); >= 1
  int threads = 1;            // workers sharing the trials; the result does not depend on it; >= 1
  std::uint64_t seed = 0;     // trial t orders the batch with Rng::stream(seed, t)
  bool local_search = true;   // improve the best trial with moves and swaps
  bool longest_first = true;  // also try the longest-first (LPT) order, ahead of the random trials
  // Charge the V step (Eq. 2's second term, below). Off, Eq. 2 is its first term alone: the pipeline time
  // Σ micro-batches + (PP − 1)·slowest that a schedule overlapping unequal micro-batches comes close to, where
  // the 1F1B estimate (packing's objective) charges the slowest micro-batch V times.
  bool v_step = true;
};

inline void validate(const DispatchOptions& options) {
  sluice::detail::require(options.trials >= 1, "dispatch: trials must be >= 1, got ", options.trials);
  sluice::detail::require(options.threads >= 1, "dispatch: threads must be >= 1, got ", options.threads);
}

namespace detail {

// Eq. 2 as sluice uses it, for a non-empty pipeline j holding S_j (PP, c, MaxLen of its scheme):
//   bound_j = max( Σ_{S_j} T'(l) + c·V_lo + (T'(max_{S_j} l) + c)·(PP − 1),   (T'(max_{S_j} l) + c)·(PP − 1 + V_lo) ),
//   V_lo = max(1, ⌈tokens(S_j) / MaxLen⌉).
// It never exceeds the 1F1B estimate X·(PP − 1 + V) of any packing of S_j into V micro-batches, where X is
// the slowest micro-batch: every micro-batch costs its Σ T' plus c, so X·V ≥ Σ_{S_j} T' + V·c ≥ Σ T' + V_lo·c
// (a micro-batch holds at most MaxLen tokens, so V ≥ V_lo); and the micro-batch holding the longest sequence
// costs at least T'(max l) + c, so X·(PP − 1) ≥ (T'(max l) + c)·(PP − 1), and X·(PP − 1 + V) is at least
// (T'(max l) + c)·(PP − 1 + V_lo). An empty pipeline costs 0.
// The second term is the step a pipeline takes when its tokens pass a multiple of MaxLen: the slowest
// micro-batch is paid once more. Without it, a pipeline holding a sequence near MaxLen plus a little more
// looks cheap here and doubles once packed. With V_lo = 1 it never exceeds the first term.
// The paper's Eq. 2 charges c per sequence instead (T = T' + c); the authors' code drops it. Charging it per
// micro-batch, as packing does, keeps the bound true and tight.
struct DispatchGroup {
  int first = 0;  // pipelines first .. first + count − 1: identical cost, hence interchangeable
  int count = 0;
  std::int64_t max_len = 0;
  double overhead = 0;    // c
  double pp_minus_1 = 0;  // PP − 1
};

// The batch and pipelines checked and tabulated once: pipelines grouped into runs of identical cost (same
// scheme, latency and MaxLen), each sequence's feasible groups (a prefix, as pipelines are in MaxLen order),
// and T'(l) of every sequence on every group.
class DispatchProblem {
public:
  DispatchProblem(std::span<const Sequence> batch, PipelineCosts pipelines, bool v_step = true) : v_step_(v_step) {
    using sluice::detail::require;
    require(!batch.empty(), "dispatch: the batch is empty");
    require(!pipelines.empty(), "dispatch: no pipelines");
    require(pipelines.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max() / 2),
            "dispatch: too many pipelines: ", pipelines.size());
    require(batch.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max() / 2),
            "dispatch: too many sequences: ", batch.size());
    for (std::size_t j = 0; j < pipelines.size(); ++j) {
      const cost::SchemeCost& cost = pipelines[j];
      if (cost.max_len < 0)
        sluice::detail::fail("dispatch: pipeline ", j, " (", cost.scheme.name(), "): max_len must be >= 0, got ",
                             cost.max_len);
      if (j > 0 && cost.max_len > pipelines[j - 1].max_len)
        sluice::detail::fail("dispatch: pipelines must be ordered by max_len descending, but pipeline ", j, " (",
                             cost.scheme.name(), ", max_len ", cost.max_len, ") follows pipeline ", j - 1,
                             " (max_len ", pipelines[j - 1].max_len, ")");
      const bool same = j > 0 && cost.scheme == pipelines[j - 1].scheme && cost.latency == pipelines[j - 1].latency &&
                        cost.max_len == pipelines[j - 1].max_len;
      if (same) {
        ++groups_.back().count;
      } else {
        groups_.push_back({static_cast<int>(j), 1, cost.max_len, cost.latency.microbatch_overhead(),
                           static_cast<double>(cost.scheme.pp() - 1)});
        latency_.push_back(cost.latency);
      }
      group_of_.push_back(static_cast<int>(groups_.size()) - 1);
    }
    const std::size_t n = batch.size();
    const std::size_t g_count = groups_.size();
    length_.resize(n);
    feasible_groups_.resize(n);
    time_.resize(n * g_count);
    std::int64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const Sequence& sequence = batch[i];
      require(sequence.length() <= pipelines.front().max_len, "dispatch: sequence ", sequence.id(), " has length ",
              sequence.length(), ", longer than every pipeline's max_len (the largest is ", pipelines.front().max_len,
              ")");
      require(total <= std::numeric_limits<std::int64_t>::max() - sequence.length(),
              "dispatch: the batch's total tokens overflow");
      total += sequence.length();
      length_[i] = sequence.length();
      const auto fits = std::ranges::partition_point(
          groups_, [&](const DispatchGroup& group) { return group.max_len >= sequence.length(); });
      feasible_groups_[i] = static_cast<int>(fits - groups_.begin());
      for (std::size_t g = 0; g < g_count; ++g) time_[i * g_count + g] = latency_[g].sequence_time(sequence.length());
    }
    // Eq. 2 of a pipeline holding every sequence it can bounds every value computed here; when it is finite, so
    // are they (an infinite bound would tie with "no assignment yet").
    for (std::size_t g = 0; g < g_count; ++g) {
      double sum = 0;
      double longest = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (feasible_groups_[i] > static_cast<int>(g)) {
          sum += time_[i * g_count + g];
          longest = std::max(longest, time_[i * g_count + g]);
        }
      const double worst = bound_of(static_cast<int>(g), sum, static_cast<std::int64_t>(n), longest);
      const Scheme& scheme = pipelines[static_cast<std::size_t>(groups_[g].first)].scheme;
      require(std::isfinite(worst), "dispatch: pipeline ", groups_[g].first, " (", scheme.name(),
              "): the batch's Eq. 2 bound overflows (", worst, " s; latency a = ", latency_[g].a(), ", b = ",
              latency_[g].b(), ", c = ", latency_[g].c(), ")");
    }
  }

  [[nodiscard]] bool v_step() const noexcept { return v_step_; }
  [[nodiscard]] int sequences() const noexcept { return static_cast<int>(length_.size()); }
  [[nodiscard]] int pipelines() const noexcept { return static_cast<int>(group_of_.size()); }
  [[nodiscard]] int groups() const noexcept { return static_cast<int>(groups_.size()); }
  [[nodiscard]] const DispatchGroup& group(int g) const noexcept { return groups_[g]; }
  [[nodiscard]] int group_of(int pipeline) const noexcept { return group_of_[pipeline]; }
  [[nodiscard]] const cost::QuadraticLatency& latency(int g) const noexcept { return latency_[g]; }
  [[nodiscard]] std::int64_t length(int i) const noexcept { return length_[i]; }
  // Sequence i may go to groups 0 .. feasible_groups(i) − 1, that is to pipelines 0 .. limit(i) − 1 (J_i).
  [[nodiscard]] int feasible_groups(int i) const noexcept { return feasible_groups_[i]; }
  [[nodiscard]] int limit(int i) const noexcept {
    const DispatchGroup& last = groups_[feasible_groups_[i] - 1];
    return last.first + last.count;
  }
  // T'(l_i) on group g.
  [[nodiscard]] double time(int i, int g) const noexcept {
    return time_[static_cast<std::size_t>(i) * groups_.size() + static_cast<std::size_t>(g)];
  }

  // Eq. 2 for a non-empty pipeline of group g: Σ T' = sum, its tokens, and T' of its longest sequence.
  [[nodiscard]] double bound(int g, double sum, std::int64_t tokens, double longest_time) const noexcept {
    return bound_of(g, sum, micro_batches(g, tokens), longest_time);
  }
  // V_lo = max(1, ⌈tokens / MaxLen⌉).
  [[nodiscard]] std::int64_t micro_batches(int g, std::int64_t tokens) const noexcept {
    const std::int64_t max_len = groups_[g].max_len;
    return std::max<std::int64_t>(1, (tokens + max_len - 1) / max_len);
  }
  [[nodiscard]] double bound_of(int g, double sum, std::int64_t micro_batches, double longest_time) const noexcept {
    const DispatchGroup& group = groups_[g];
    const auto v = static_cast<double>(micro_batches);
    const double first = sum + group.overhead * v + group.pp_minus_1 * (longest_time + group.overhead);
    return v_step_ ? std::max(first, (longest_time + group.overhead) * (group.pp_minus_1 + v)) : first;
  }

  // Eq. 2 of every pipeline for an assignment, summing T' in batch order (the canonical value every
  // function here reports). Checks the assignment.
  [[nodiscard]] std::vector<double> bounds(std::span<const int> pipeline_of) const {
    using sluice::detail::require;
    const int n = sequences();
    require(pipeline_of.size() == length_.size(), "dispatch: the assignment has ", pipeline_of.size(),
            " entries for a batch of ", n, " sequences");
    std::vector<double> sum(group_of_.size(), 0.0);
    std::vector<std::int64_t> tokens(group_of_.size(), 0);
    std::vector<double> longest(group_of_.size(), -1.0);
    for (int i = 0; i < n; ++i) {
      const int p = pipeline_of[i];
      require(p >= 0 && p < limit(i), "dispatch: sequence at batch index ", i, " (length ", length_[i],
              ") is assigned to pipeline ", p, ", but only pipelines 0..", limit(i) - 1, " can hold it (of ",
              pipelines(), ")");
      const double t = time(i, group_of_[p]);
      sum[p] += t;
      tokens[p] += length_[i];
      longest[p] = std::max(longest[p], t);  // T' is non-decreasing in l (a, b >= 0)
    }
    std::vector<double> result(group_of_.size(), 0.0);
    for (std::size_t p = 0; p < result.size(); ++p) {
      if (tokens[p] > 0) result[p] = bound(group_of_[p], sum[p], tokens[p], longest[p]);
    }
    return result;
  }

private:
  bool v_step_ = true;
  std::vector<DispatchGroup> groups_;
  std::vector<cost::QuadraticLatency> latency_;
  std::vector<int> group_of_;
  std::vector<std::int64_t> length_;
  std::vector<int> feasible_groups_;
  std::vector<double> time_;
};

// ---- Lower bound -------------------------------------------------------------------------------------
//
// (a) Each sequence alone: whichever pipeline j holds sequence i has bound_j ≥ its bound with S_j = {i}
//     (Eq. 2 grows when sequences are added), so OPT ≥ max_i min_{j < J_i} bound_j({i}).
// (b) Spreading the work. Take any assignment with max_j bound_j ≤ z, and θ ∈ [0, 1]. For a non-empty
//     pipeline j, V_lo ≥ max(1, tokens/MaxLen) ≥ θ + (1 − θ)·tokens/MaxLen, and its longest sequence is at
//     least λ, the shortest length considered, so
//        Σ_{i ∈ S_j} w_ij ≤ z − F_j,   w_ij = T'_j(l_i) + (1 − θ)·c_j·l_i / MaxLen_j,
//                                       F_j = θ·c_j + (PP_j − 1)·(T'_j(λ) + c_j);
//     an empty pipeline satisfies Σ w = 0 ≤ max(0, z − F_j). So x_ij = [i ∈ S_j] is a fractional assignment
//     with Σ_i x_ij·w_ij ≤ cap_j(z) = max(0, z − F_j). Weak duality (Farkas): for any y_j ≥ 0,
//        Σ_i min_{j < J_i} y_j·w_ij ≤ Σ_i Σ_j x_ij·y_j·w_ij ≤ Σ_j y_j·cap_j(z),
//     so OPT is at least the smallest z where the right side reaches the left: a water level, found by
//     walking the breakpoints F_j. Any y gives a valid bound; y_j = 1/(speed of j) weighs a fast pipeline as
//     several slow ones. Setting y_j = 0 beyond a MaxLen tier k restricts the bound to the sequences only
//     pipelines 0..k−1 can hold (they must fit there: the nested-prefix bound), with λ their shortest length.
//     y is constant over a group of identical pipelines (the bound is quasi-concave in y and symmetric), and
//     chosen per tier by a coordinate golden-section search on log y (y_0 = 1; the bound is scale-free).
//     Along one coordinate the left side is piecewise linear: sorted once, then evaluated by bisection.
// (c) Pigeonhole. The P pipelines of a tier prefix receive all of its sequences; sorted by length, the r·P + 1
//     longest put r + 1 of them on one pipeline, which are at least as long, one for one, as the r + 1
//     shortest of those, R_r. Eq. 2 grows with every length, so OPT ≥ min_g bound_g(R_r) over the groups g
//     that can hold R_r's longest. This catches the long sequences that only a few pipelines can hold.
// (d) Pairing, the classic bound for up to 2P sequences on P machines; stated at the code.
// The result is max((a), (1 − 1e-9)·max((b), (c), (d))): the factor absorbs the summation error of (b)–(d);
// (a) uses Eq. 2's own arithmetic and is exact.
class DispatchLowerBound {
public:
  explicit DispatchLowerBound(const DispatchProblem& problem) : problem_(problem) {}

  [[nodiscard]] double compute() {
    const int n = problem_.sequences();
    double single = 0.0;
    for (int i = 0; i < n; ++i) {
      double cheapest = std::numeric_limits<double>::infinity();
      for (int g = 0; g < problem_.feasible_groups(i); ++g) {
        const double t = problem_.time(i, g);
        cheapest = std::min(cheapest, problem_.bound(g, t, problem_.length(i), t));
      }
      single = std::max(single, cheapest);
    }
    double spread = 0.0;
    for (int tier = 1; tier <= problem_.groups(); ++tier) {
      const bool tier_end =
          tier == problem_.groups() || problem_.group(tier).max_len < problem_.group(tier - 1).max_len;
      if (!tier_end) continue;
      select(tier);
      if (!members_.empty()) spread = std::max({spread, spread_bound(), pigeonhole()});
    }
    return std::max(single, spread * (1.0 - 1e-9));
  }

private:
  // Bound (c) over members_ (the tier's sequences) and the active_ groups, via prefix sums in length order.
  double pigeonhole() {
    const auto count = members_.size();
    const int prefix = problem_.group(active_ - 1).first + problem_.group(active_ - 1).count;
    if (count <= static_cast<std::size_t>(prefix)) return 0.0;
    std::ranges::sort(members_, [&](int x, int y) {
      return problem_.length(x) != problem_.length(y) ? problem_.length(x) > problem_.length(y) : x < y;
    });
    const auto tier = static_cast<std::size_t>(active_);
    time_prefix_.assign((count + 1) * tier, 0.0);
    token_prefix_.assign(count + 1, 0);
    for (std::size_t k = 0; k < count; ++k) {
      token_prefix_[k + 1] = token_prefix_[k] + problem_.length(members_[k]);
      for (std::size_t g = 0; g < tier; ++g)
        time_prefix_[(k + 1) * tier + g] = time_prefix_[k * tier + g] + problem_.time(members_[k], static_cast<int>(g));
    }
    const auto pipelines = static_cast<std::size_t>(prefix);
    // Eq. 2 of positions [first, end) on the cheapest group that can hold position `first`.
    auto range = [&](std::size_t first, std::size_t end) {
      const int longest = members_[first];
      double cheapest = std::numeric_limits<double>::infinity();
      for (int g = 0; g < problem_.feasible_groups(longest); ++g) {
        const auto column = static_cast<std::size_t>(g);
        const double sum = time_prefix_[end * tier + column] - time_prefix_[first * tier + column];
        cheapest = std::min(cheapest, problem_.bound(g, sum, token_prefix_[end] - token_prefix_[first],
                                                     problem_.time(longest, g)));
      }
      return cheapest;
    };
    auto pair = [&](std::size_t x, std::size_t y) {  // positions x < y
      const int longest = members_[x];
      double cheapest = std::numeric_limits<double>::infinity();
      for (int g = 0; g < problem_.feasible_groups(longest); ++g) {
        const double sum = problem_.time(longest, g) + problem_.time(members_[y], g);
        cheapest = std::min(cheapest, problem_.bound(g, sum, problem_.length(longest) + problem_.length(members_[y]),
                                                     problem_.time(longest, g)));
      }
      return cheapest;
    };
    double best = 0.0;
    for (std::size_t r = 1; r * pipelines < count; ++r)
      best = std::max(best, range(r * pipelines - r, r * pipelines + 1));
    // (d) For P < a ≤ min(n, 2P) and h = 2P + 1 − a (1-based): with the h longest "heavy", either two heavy
    //     share a pipeline (≥ pair s_{h−1}, s_h), or a heavy one shares with another of the a longest
    //     (≥ pair s_h, s_a), or the a − h others fill the P − h other pipelines, three on one of them (≥ the
    //     three shortest of the a longest).
    for (std::size_t a = pipelines + 1; a <= std::min(count, 2 * pipelines); ++a) {
      const std::size_t h = 2 * pipelines + 1 - a;
      double value = pair(h - 1, a - 1);
      if (h >= 2) value = std::min(value, pair(h - 2, h - 1));
      if (h < pipelines) value = std::min(value, range(a - 3, a));
      best = std::max(best, value);
    }
    return best;
  }

  // The sequences that only groups 0..tier−1 can hold.
  void select(int tier) {
    active_ = tier;
    members_.clear();
    for (int i = 0; i < problem_.sequences(); ++i) {
      if (problem_.feasible_groups(i) <= tier) members_.push_back(i);
    }
  }

  // Bound (b) over members_ and the active_ groups, for θ = 0 and θ = 1.
  double spread_bound() {
    const int tier = active_;
    std::int64_t shortest = std::numeric_limits<std::int64_t>::max();
    for (const int i : members_) shortest = std::min(shortest, problem_.length(i));
    double best = 0.0;
    for (const double theta : {0.0, 1.0}) {
      fill_.assign(static_cast<std::size_t>(tier), 0.0);
      work_.assign(members_.size() * static_cast<std::size_t>(tier), 0.0);
      for (int g = 0; g < tier; ++g) {
        const DispatchGroup& group = problem_.group(g);
        fill_[g] = theta * group.overhead +
                   group.pp_minus_1 * (problem_.latency(g).sequence_time(shortest) + group.overhead);
      }
      for (std::size_t k = 0; k < members_.size(); ++k) {
        const int i = members_[k];
        for (int g = 0; g < problem_.feasible_groups(i); ++g) {
          const DispatchGroup& group = problem_.group(g);
          work_[k * static_cast<std::size_t>(tier) + static_cast<std::size_t>(g)] =
              problem_.time(i, g) + (1.0 - theta) * group.overhead * static_cast<double>(problem_.length(i)) /
                                        static_cast<double>(group.max_len);
        }
      }
      fill_order_.resize(static_cast<std::size_t>(tier));
      std::iota(fill_order_.begin(), fill_order_.end(), 0);
      std::ranges::sort(fill_order_, [&](int x, int y) { return fill_[x] != fill_[y] ? fill_[x] < fill_[y] : x < y; });
      best = std::max(best, search());
    }
    return best;
  }

  // Coordinate golden-section ascent over log y_g, g = 1..active−1, from y_g = (work on group 0) / (work
  // on g) over the sequences g can hold. Returns the largest level seen (each one is a valid bound).
  double search() {
    const auto tier = static_cast<std::size_t>(active_);
    weight_.assign(tier, 0.0);
    weight_[0] = 1.0;
    for (std::size_t g = 1; g < tier; ++g) {
      double on_first = 0.0;
      double on_g = 0.0;
      bool usable = false;
      for (std::size_t k = 0; k < members_.size(); ++k) {
        if (static_cast<std::size_t>(problem_.feasible_groups(members_[k])) <= g) continue;
        usable = true;
        on_first += work_[k * tier];
        on_g += work_[k * tier + g];
      }
      // A group no considered sequence can use would only add capacity: leave it out (y = 0).
      weight_[g] = !usable ? 0.0 : (on_g > 0.0 && on_first > 0.0 ? on_first / on_g : 1.0);
    }
    double best = level(demand());
    constexpr double ratio = 0.6180339887498949;  // golden section
    const int rounds = tier > 2 ? 3 : 1;
    for (int round = 0; round < rounds; ++round) {
      for (std::size_t g = 1; g < tier; ++g) {
        if (weight_[g] <= 0.0) continue;
        prepare(g);
        const double centre = std::log(weight_[g]);
        double lo = centre - 6.0;
        double hi = centre + 6.0;
        auto at = [&](double log_weight) {
          weight_[g] = std::exp(log_weight);
          const double value = level(demand_along(weight_[g]));
          best = std::max(best, value);
          return value;
        };
        double x1 = hi - ratio * (hi - lo);
        double x2 = lo + ratio * (hi - lo);
        double f1 = at(x1);
        double f2 = at(x2);
        for (int step = 0; step < 24; ++step) {
          if (f1 < f2) {
            lo = x1;
            x1 = x2;
            f1 = f2;
            x2 = lo + ratio * (hi - lo);
            f2 = at(x2);
          } else {
            hi = x2;
            x2 = x1;
            f2 = f1;
            x1 = hi - ratio * (hi - lo);
            f1 = at(x1);
          }
        }
        weight_[g] = std::exp(f1 >= f2 ? x1 : x2);
      }
    }
    return best;
  }

  // Σ_i min_g y_g·w_ig.
  [[nodiscard]] double demand() const {
    const auto tier = static_cast<std::size_t>(active_);
    double total = 0.0;
    for (std::size_t k = 0; k < members_.size(); ++k) {
      const auto feasible = static_cast<std::size_t>(problem_.feasible_groups(members_[k]));
      double cheapest = std::numeric_limits<double>::infinity();
      for (std::size_t g = 0; g < feasible; ++g) cheapest = std::min(cheapest, weight_[g] * work_[k * tier + g]);
      total += cheapest;
    }
    return total;
  }

  // The demand as a function of y_g alone, the other weights fixed: Σ_i min(y_g·w_ig, m_i) with m_i the
  // cheapest other group, piecewise linear with breakpoints m_i / w_ig. Sorted once, evaluated by bisection.
  void prepare(std::size_t g) {
    const auto tier = static_cast<std::size_t>(active_);
    fixed_demand_ = 0.0;
    pieces_.clear();
    for (std::size_t k = 0; k < members_.size(); ++k) {
      const auto feasible = static_cast<std::size_t>(problem_.feasible_groups(members_[k]));
      double other = std::numeric_limits<double>::infinity();
      for (std::size_t h = 0; h < feasible; ++h)
        if (h != g) other = std::min(other, weight_[h] * work_[k * tier + h]);
      const double slope = g < feasible ? work_[k * tier + g] : 0.0;
      if (slope <= 0.0) {
        fixed_demand_ += g < feasible ? 0.0 : other;  // w_ig = 0: this sequence costs nothing on g
      } else {
        pieces_.push_back({other / slope, other, slope});
      }
    }
    std::ranges::sort(pieces_, {}, &Piece::breakpoint);
    const std::size_t count = pieces_.size();
    below_.assign(count + 1, 0.0);
    above_.assign(count + 1, 0.0);
    for (std::size_t k = 0; k < count; ++k) below_[k + 1] = below_[k] + pieces_[k].other;
    for (std::size_t k = count; k > 0; --k) above_[k - 1] = above_[k] + pieces_[k - 1].slope;
  }

  [[nodiscard]] double demand_along(double y) const {
    const auto split = static_cast<std::size_t>(
        std::ranges::upper_bound(pieces_, y, {}, &Piece::breakpoint) - pieces_.begin());
    return fixed_demand_ + below_[split] + y * above_[split];
  }

  // The smallest z with Σ_g y_g·count_g·max(0, z − F_g) ≥ demand.
  [[nodiscard]] double level(double demand) const {
    const auto tier = static_cast<std::size_t>(active_);
    if (demand <= 0.0) return 0.0;
    double slope = 0.0;
    double offset = 0.0;
    for (std::size_t r = 0; r < tier; ++r) {
      const int g = fill_order_[r];
      const double capacity = weight_[g] * problem_.group(g).count;
      slope += capacity;
      offset += capacity * fill_[g];
      if (slope <= 0.0) continue;
      const double z = (demand + offset) / slope;
      if (r + 1 == tier || z <= fill_[fill_order_[r + 1]]) return z;
    }
    return 0.0;  // unreachable: y_0 = 1 > 0
  }

  struct Piece {
    double breakpoint;  // m_i / w_ig: above it, the sequence is cheaper on g
    double other;       // m_i
    double slope;       // w_ig
  };

  const DispatchProblem& problem_;
  std::vector<int> members_;
  std::vector<double> work_;  // w_ig, row per member
  std::vector<double> fill_;  // F_g
  std::vector<int> fill_order_;
  std::vector<double> weight_;  // y_g
  std::vector<Piece> pieces_;
  std::vector<double> below_;  // prefix sums of Piece::other
  std::vector<double> above_;  // suffix sums of Piece::slope
  double fixed_demand_ = 0.0;
  std::vector<double> time_prefix_;
  std::vector<std::int64_t> token_prefix_;
  int active_ = 0;
};

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
  DispatchGreedy(const DispatchProblem& problem, std::span<const int> pinned, std::span<const int> rest,
                 std::span<const int> longest_first)
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
      std::ranges::copy(assignment_, best_assignment_.begin());
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
      std::ranges::copy(pinned_, order_.begin());
      std::ranges::copy(rest_, order_.begin() + static_cast<std::ptrdiff_t>(pinned_.size()));
    } else {
      std::ranges::copy(longest_first_, order_.begin());
    }
    std::ranges::fill(used_, 0);
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
  std::span<const int> pinned_;
  std::span<const int> rest_;
  std::span<const int> longest_first_;
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

// ---- Local search --------------------------------------------------------------------------------------
//
// Repeatedly takes p, the pipeline with the largest bound (lowest index on ties), and looks at every move of
// one of its sequences to another feasible pipeline q and every swap of one of its sequences with a shorter
// one of q (a swap with a sequence at least as long cannot lower bound_p). The candidate minimising
// max(new_p, new_q) is applied if that is below bound_p (by a relative 1e-12, so that rounding never
// accepts a non-move); ties keep the first in (sequence, pipeline, partner) order. Each accepted step
// strictly lowers the bounds sorted in descending order, lexicographically, so the search ends; the maximum
// never rises, and falls once every pipeline at the maximum has been lowered. Bounds are recomputed in batch
// order after each step, so they equal dispatch_pipeline_bounds exactly.
class DispatchLocalSearch {
public:
  DispatchLocalSearch(const DispatchProblem& problem, std::vector<int>& pipeline_of)
      : problem_(problem),
        pipeline_of_(pipeline_of),
        members_(static_cast<std::size_t>(problem.pipelines())),
        loads_(static_cast<std::size_t>(problem.pipelines())),
        length_class_(static_cast<std::size_t>(problem.sequences())) {
    for (int i = 0; i < problem.sequences(); ++i) members_[pipeline_of[i]].push_back(i);
    std::vector<std::int64_t> lengths;
    for (int i = 0; i < problem.sequences(); ++i) lengths.push_back(problem.length(i));
    std::ranges::sort(lengths);
    lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
    for (int i = 0; i < problem.sequences(); ++i)
      length_class_[i] = static_cast<int>(std::ranges::lower_bound(lengths, problem.length(i)) - lengths.begin());
    moved_seen_.assign(lengths.size(), 0);
    partner_seen_.assign(lengths.size(), 0);
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
        if (first_of_class(moved_seen_, moved_stamp_, i)) consider_moves(p, i, step);
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
  struct Step {
    double value = 0;
    int sequence = -1;
    int target = -1;
    int partner = -1;  // −1: a move
  };

  // Sequences of one length are interchangeable: their times and limits are equal, so every move or swap of a
  // later one has the value of the earlier one's and, compared strictly, never replaces it. Looking at the first
  // of each length per pipeline keeps the result and makes a batch of many equal lengths cheap.
  bool first_of_class(std::vector<std::uint64_t>& seen, std::uint64_t stamp, int i) {
    std::uint64_t& mark = seen[static_cast<std::size_t>(length_class_[i])];
    if (mark == stamp) return false;
    mark = stamp;
    return true;
  }

  void consider_moves(int p, int i, Step& step) {
    const int limit = problem_.limit(i);
    const std::int64_t length = problem_.length(i);
    const double without = bound_after(p, i, -1);
    // Swapping i for k leaves p at least floor + (1 + PP − 1)·T'_p(k): V_lo drops by one at most, and k
    // becomes p's longest sequence or is shorter than it.
    const int g = problem_.group_of(p);
    const DispatchGroup& group = problem_.group(g);
    const Load& load = loads_[p];
    const double floor = load.sum - problem_.time(i, g) +
                         group.overhead * static_cast<double>(std::max<std::int64_t>(1, load.micro_batches - 1)) +
                         group.pp_minus_1 * group.overhead;
    for (int q = 0; q < limit; ++q) {
      if (q == p) continue;
      // An empty pipeline right after an empty one of its group is the same candidate again.
      if (loads_[q].count == 0 && q > 0 && loads_[q - 1].count == 0 && problem_.group_of(q - 1) == problem_.group_of(q))
        continue;
      if (without < step.value) {
        const double value = std::max(without, bound_after(q, -1, i));
        if (value < step.value) step = {value, i, q, -1};
      }
      ++partner_stamp_;
      for (const int k : members_[q]) {
        if (problem_.length(k) >= length || problem_.limit(k) <= p) continue;
        if (!first_of_class(partner_seen_, partner_stamp_, k)) continue;
        if (floor + (1 + group.pp_minus_1) * problem_.time(k, g) >= step.value) continue;
        const double new_p = bound_after(p, i, k);
        if (new_p >= step.value) continue;
        const double value = std::max(new_p, bound_after(q, k, i));
        if (value < step.value) step = {value, i, q, k};
      }
    }
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
    list.erase(std::ranges::lower_bound(list, i));
  }
  void insert(int p, int i) {
    std::vector<int>& list = members_[p];
    list.insert(std::ranges::lower_bound(list, i), i);
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
  std::vector<Load> loads_;
  std::vector<int> length_class_;  // per sequence, the rank of its length among the batch's distinct lengths
  std::vector<std::uint64_t> moved_seen_, partner_seen_;  // per length class, the stamp it was last seen under
  std::uint64_t moved_stamp_ = 0, partner_stamp_ = 0;
};

}  // namespace detail

// Eq. 2 of every pipeline for `pipeline_of` (pipeline of batch[i], batch order); empty pipelines are 0.
// Raises invalid_input if the input is malformed or a sequence sits on a pipeline that cannot hold it.
[[nodiscard]] inline std::vector<double> dispatch_pipeline_bounds(std::span<const Sequence> batch,
                                                                  PipelineCosts pipelines,
                                                                  std::span<const int> pipeline_of,
                                                                  bool v_step = true) {
  return detail::DispatchProblem(batch, pipelines, v_step).bounds(pipeline_of);
}

// Eq. 3: the largest Eq. 2 bound over the pipelines.
[[nodiscard]] inline double dispatch_objective(std::span<const Sequence> batch, PipelineCosts pipelines,
                                               std::span<const int> pipeline_of, bool v_step = true) {
  const std::vector<double> bounds = dispatch_pipeline_bounds(batch, pipelines, pipeline_of, v_step);
  return *std::ranges::max_element(bounds);
}

// A lower bound on the optimum of Eq. 3, computed without a solver (derivation above).
[[nodiscard]] inline double dispatch_lower_bound(std::span<const Sequence> batch, PipelineCosts pipelines,
                                                bool v_step = true) {
  const detail::DispatchProblem problem(batch, pipelines, v_step);
  return detail::DispatchLowerBound(problem).compute();
}

// Hydraulis Alg. 1 with `trials` seeded random orders (and first, unless disabled, the longest-first
// order), the best trial (lowest objective, then lowest trial index, longest-first counting as −1) improved
// by local search; the first trial within 1e-9 of the lower bound ends the search. Sequences that only the
// pipelines of the largest MaxLen can hold are placed first in each random trial, as the authors' code does.
// Deterministic for a seed, whatever the thread count. Raises invalid_input on an empty batch, no pipelines,
// pipelines out of MaxLen order, a sequence longer than every MaxLen, or bad options.
[[nodiscard]] inline Dispatch dispatch_greedy(std::span<const Sequence> batch, PipelineCosts pipelines,
                                              const DispatchOptions& options = {}) {
  validate(options);
  const detail::DispatchProblem problem(batch, pipelines, options.v_step);
  const int n = problem.sequences();
  const detail::DispatchGroup& first = problem.group(0);
  int top = 0;  // pipelines sharing the largest MaxLen
  for (int g = 0; g < problem.groups() && problem.group(g).max_len == first.max_len; ++g) top += problem.group(g).count;
  std::vector<int> pinned;
  std::vector<int> rest;
  for (int i = 0; i < n; ++i) (top < problem.pipelines() && problem.limit(i) == top ? pinned : rest).push_back(i);
  // Length descending, then batch order; the pinned sequences are the longest, so they come first here too.
  std::vector<int> longest_first(static_cast<std::size_t>(n));
  std::iota(longest_first.begin(), longest_first.end(), 0);
  std::ranges::sort(longest_first, [&](int x, int y) {
    return problem.length(x) != problem.length(y) ? problem.length(x) > problem.length(y) : x < y;
  });

  // A trial within 1e-9 of the lower bound is optimal to that margin: trials above the first such one are
  // skipped (deterministically: every trial below it still runs), and so is the local search.
  const double lower_bound = detail::DispatchLowerBound(problem).compute();
  const double certain = lower_bound * (1 + 1e-9);
  std::atomic<int> certified{options.trials};
  const int workers = std::min(options.threads, options.trials);
  std::vector<detail::DispatchGreedy> greedy;
  greedy.reserve(static_cast<std::size_t>(workers));
  for (int w = 0; w < workers; ++w) greedy.emplace_back(problem, pinned, rest, longest_first);
  {
    std::vector<std::jthread> threads;
    threads.reserve(static_cast<std::size_t>(workers - 1));
    for (int w = 1; w < workers; ++w)
      threads.emplace_back([&, w] { greedy[w].run(options.seed, w, options.trials, workers, certain, certified); });
    greedy[0].run(options.seed, options.longest_first ? -1 : 0, options.trials, workers, certain, certified);
  }
  // The first certified trial if there is one, else the lowest objective, then the lowest trial index.
  auto before = [](const detail::DispatchGreedy& x, const detail::DispatchGreedy& y) {
    if (x.certified() != y.certified()) return x.certified();
    if (!x.certified() && x.best_objective() != y.best_objective()) return x.best_objective() < y.best_objective();
    return x.best_trial() < y.best_trial();
  };
  const auto best = std::ranges::min_element(greedy, before);

  Dispatch result;
  result.pipeline_of = best->best_assignment();
  if (options.local_search && !best->certified()) detail::DispatchLocalSearch(problem, result.pipeline_of).run();
  result.pipeline_bounds = problem.bounds(result.pipeline_of);
  result.objective = *std::ranges::max_element(result.pipeline_bounds);
  result.lower_bound = lower_bound;
  result.v_step = options.v_step;
  return result;
}

// Checks a Dispatch against its batch and pipelines; raises invalid_plan naming the first broken invariant:
// one pipeline per sequence, each able to hold it (J_i); per-pipeline bounds, objective (their maximum)
// agreeing with Eq. 2–3 (relative tolerance 1e-9); 0 ≤ lower_bound ≤ objective.
inline void validate(const Dispatch& dispatch, std::span<const Sequence> batch, PipelineCosts pipelines) {
  auto check = [](bool condition, auto&&... parts) {
    if (!condition) throw invalid_plan(sluice::detail::concat("dispatch: ", parts...));
  };
  auto close = [](double x, double y) { return std::abs(x - y) <= 1e-9 * std::max({1.0, std::abs(x), std::abs(y)}); };
  const detail::DispatchProblem problem(batch, pipelines, dispatch.v_step);
  check(dispatch.pipeline_of.size() == batch.size(), "pipeline_of has ", dispatch.pipeline_of.size(),
        " entries for a batch of ", batch.size(), " sequences");
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const int p = dispatch.pipeline_of[i];
    check(p >= 0 && p < problem.limit(static_cast<int>(i)), "sequence ", batch[i].id(), " (length ",
          batch[i].length(), ") is on pipeline ", p, ", but only pipelines 0..", problem.limit(static_cast<int>(i)) - 1,
          " can hold it");
  }
  const std::vector<double> bounds = problem.bounds(dispatch.pipeline_of);
  check(dispatch.pipeline_bounds.size() == bounds.size(), "pipeline_bounds has ", dispatch.pipeline_bounds.size(),
        " entries for ", bounds.size(), " pipelines");
  for (std::size_t p = 0; p < bounds.size(); ++p) {
    check(close(dispatch.pipeline_bounds[p], bounds[p]), "pipeline ", p, " bound ", dispatch.pipeline_bounds[p],
          " s, Eq. 2 gives ", bounds[p]);
  }
  const double objective = *std::ranges::max_element(bounds);
  check(close(dispatch.objective, objective), "objective ", dispatch.objective, " s, Eq. 3 gives ", objective);
  check(std::isfinite(dispatch.lower_bound) && dispatch.lower_bound >= 0, "lower_bound ", dispatch.lower_bound,
        " is not finite and >= 0");
  check(dispatch.lower_bound <= dispatch.objective * (1 + 1e-9), "lower_bound ", dispatch.lower_bound,
        " exceeds the objective ", dispatch.objective);
}

}  // namespace sluice::assign
