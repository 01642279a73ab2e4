#pragma once
// What validators check plans with: a failed condition raises invalid_plan, its message prefixed by what is
// being checked, so that composed validators (a plan's check running its pipelines' checks) name the part.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "sluice/core/error.hpp"

namespace sluice {

// The tolerance between a figure a plan records and the same figure recomputed: relative to the larger
// magnitude, absolute below 1, so that sums taken in another order still agree.
[[nodiscard]] inline bool nearly_equal(double x, double y, double tolerance = 1e-9) noexcept {
  return x == y || std::abs(x - y) <= tolerance * std::max({1.0, std::abs(x), std::abs(y)});
}

class PlanCheck {
public:
  explicit PlanCheck(std::string subject) : prefix_(std::move(subject)) {}

  template <class... Parts>
  void operator()(bool condition, Parts&&... parts) const {
    if (!condition) fail(std::forward<Parts>(parts)...);
  }

  template <class... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    throw invalid_plan(sluice::concat(prefix_, std::forward<Parts>(parts)...));
  }

  // The check of a part: its messages read "<whole><part>…" ("plan: " then "pipeline 3 ").
  template <class... Parts>
  [[nodiscard]] PlanCheck part(Parts&&... parts) const {
    return PlanCheck(sluice::concat(prefix_, std::forward<Parts>(parts)...));
  }

private:
  std::string prefix_;
};

}  // namespace sluice
