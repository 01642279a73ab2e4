#pragma once
// Mean and sample standard deviation of per-iteration values, as the comparison's summaries (Hydraulis §8:
// mean iteration time over the iterations) report them.
#include <cmath>
#include <vector>

namespace sluice::compare {

inline double mean(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) sum += value;
  return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

inline double deviation(const std::vector<double>& values) {
  const double centre = mean(values);
  double sum = 0;
  for (double value : values) sum += (value - centre) * (value - centre);
  return values.size() > 1 ? std::sqrt(sum / static_cast<double>(values.size() - 1)) : 0.0;
}

}  // namespace sluice::compare
