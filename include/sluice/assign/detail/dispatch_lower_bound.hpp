#pragma once
// A lower bound on the optimum of Eq. 3 (Hydraulis §6.2) without a solver. Used by dispatch.hpp.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "sluice/assign/detail/dispatch_problem.hpp"
#include "sluice/core/span.hpp"

namespace sluice::assign::detail {

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
    std::sort(members_.begin(), members_.end(), [&](int x, int y) {
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
        cheapest = std::min(
            cheapest, problem_.bound(g, sum, token_prefix_[end] - token_prefix_[first], problem_.time(longest, g)));
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
        fill_[g] =
            theta * group.overhead + group.pp_minus_1 * (problem_.latency(g).sequence_time(shortest) + group.overhead);
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
      std::sort(fill_order_.begin(), fill_order_.end(),
                [&](int x, int y) { return fill_[x] != fill_[y] ? fill_[x] < fill_[y] : x < y; });
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
    std::sort(pieces_.begin(), pieces_.end(),
              [](const Piece& x, const Piece& y) { return x.breakpoint < y.breakpoint; });
    const std::size_t count = pieces_.size();
    below_.assign(count + 1, 0.0);
    above_.assign(count + 1, 0.0);
    for (std::size_t k = 0; k < count; ++k) below_[k + 1] = below_[k] + pieces_[k].other;
    for (std::size_t k = count; k > 0; --k) above_[k - 1] = above_[k] + pieces_[k - 1].slope;
  }

  [[nodiscard]] double demand_along(double y) const {
    const auto split = static_cast<std::size_t>(
        std::upper_bound(pieces_.begin(), pieces_.end(), y,
                         [](double value, const Piece& piece) { return value < piece.breakpoint; }) -
        pieces_.begin());
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

}  // namespace sluice::assign::detail
