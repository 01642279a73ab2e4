#pragma once
// The HotSPa-style baseline of Hydraulis §8 (HotSPa: hot-switching between sequence-parallel strategies by
// length range): each iteration's sequences bucketed by length range, each range run on its own homogeneous
// strategy (the best by mean of those holding the range's upper bound, fixed-length packing into bins of that
// bound, 1F1B), the ranges one after another. The optimizer states stay in the first range's strategy's layout;
// a range on another strategy pays the switch there and back (switching_seconds).
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sluice/compare/detail/iterations.hpp"
#include "sluice/compare/layout_move.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"

namespace sluice::compare {

// HotSPa's length ranges: upper bounds 4K, 16K, 64K, ... (×4) below the context, then the context; the paper's
// (Appendix F) <4K, 4K–16K for a 16K context and <4K, 4K–16K, 16K–32K for 32K.
inline std::vector<std::int64_t> bucket_bounds(std::int64_t context) {
  std::vector<std::int64_t> bounds;
  for (std::int64_t bound = 4096; bound < context; bound *= 4) bounds.push_back(bound);
  bounds.push_back(context);
  return bounds;
}

// The sequences of `batch` in the length range (lower, upper].
inline std::vector<Sequence> bucket(Span<const Sequence> batch, std::int64_t lower, std::int64_t upper) {
  std::vector<Sequence> result;
  for (const Sequence& sequence : batch)
    if (sequence.length() > lower && sequence.length() <= upper) result.push_back(sequence);
  return result;
}

class HotSpa {
public:
  // Every range chooses among the homogeneous strategies holding its upper bound. `options` must outlive the system.
  explicit HotSpa(const Options& options) : options_(&options), bounds_(bucket_bounds(options.context)) {
    if (homogeneous_strategies(options, options.context).empty()) return;  // the context's range has none either
    for (const std::int64_t bound : bounds_) ranges_.push_back(detail::runs_of(homogeneous_strategies(options, bound)));
  }

  // The length ranges' upper bounds: (0, b0], (b0, b1], ...
  [[nodiscard]] const std::vector<std::int64_t>& bounds() const { return bounds_; }

  // Buckets the next iteration and runs every range's bucket on each of the range's strategies.
  void add(Span<const Sequence> batch) {
    std::int64_t lower = 0;
    for (std::size_t b = 0; b < ranges_.size(); ++b) {
      const std::vector<Sequence> range = bucket(batch, lower, bounds_[b]);
      for (SystemRun& run : ranges_[b]) detail::fixed_length_iteration(*options_, range, iterations_, bounds_[b], run);
      lower = bounds_[b];
    }
    ++iterations_;
  }

  // Each range's fastest strategy, their iterations summed with the switches between them; a failure when some
  // range has no homogeneous strategy.
  [[nodiscard]] SystemRun result() &&;

private:
  const Options* options_;
  std::vector<std::int64_t> bounds_;
  std::vector<std::vector<SystemRun>> ranges_;  // per range, a run per strategy; empty when none holds the context
  std::size_t iterations_ = 0;
};

namespace detail {

// Iteration k of HotSPa: its ranges' runs one after another, each switch charged; imbalance, idle and the
// imbalance degree weighted by each range's time.
inline IterationOutcome hotspa_iteration(Span<const SystemRun> ranges, Span<const double> switch_seconds,
                                         std::size_t k) {
  IterationOutcome total;
  double weighted_imbalance = 0, weighted_idle = 0, weighted_degree = 0, busy_seconds = 0;
  for (std::size_t b = 0; b < ranges.size(); ++b) {
    const IterationOutcome& range = ranges[b].iterations[k];
    if (range.seconds == 0) continue;  // nothing of this batch in the range
    total.seconds += range.seconds + switch_seconds[b];
    total.switching += switch_seconds[b];
    total.layout_move += switch_seconds[b];
    weighted_imbalance += range.seconds * range.imbalance;
    weighted_idle += range.seconds * range.idle;
    weighted_degree += range.seconds * range.micro_batch_imbalance;
    busy_seconds += range.seconds;
    total.strategy += (total.strategy.empty() ? "" : " | ") + range.strategy;
  }
  total.imbalance = weighted_imbalance / busy_seconds;
  total.idle = weighted_idle / busy_seconds;
  total.micro_batch_imbalance = weighted_degree / busy_seconds;
  return total;
}

}  // namespace detail

inline SystemRun HotSpa::result() && {
  if (ranges_.empty()) return detail::failed(System::hotspa, detail::no_homogeneous(*options_, options_->context));
  std::vector<SystemRun> ranges;
  std::vector<Strategy> chosen;
  std::string configuration;
  std::int64_t lower = 0;
  for (std::size_t b = 0; b < bounds_.size(); ++b) {
    const std::int64_t upper = bounds_[b];
    auto best = detail::best_of(std::move(ranges_[b]));
    if (!best) return detail::failed(System::hotspa, detail::no_homogeneous(*options_, upper));
    chosen.push_back(best->strategies.front());
    configuration += sluice::concat(b == 0 ? "" : " | ", "(", lower, ", ", upper, "]: ", chosen.back().name());
    ranges.push_back(*std::move(best));
    lower = upper;
  }
  std::vector<double> switch_seconds;
  for (const Strategy& strategy : chosen) switch_seconds.push_back(switching_seconds(*options_, chosen[0], strategy));

  SystemRun run;
  run.name = name(System::hotspa);
  run.configuration = configuration + "; fixed-length packing, 1F1B; switching charged";
  run.strategies = chosen;
  for (std::size_t k = 0; k < ranges.front().iterations.size(); ++k)
    run.iterations.push_back(detail::hotspa_iteration(ranges, switch_seconds, k));
  // Pictures show the range that holds the most of iteration 0's time.
  std::size_t widest = 0;
  for (std::size_t b = 1; b < ranges.size(); ++b)
    if (ranges[b].iterations.front().seconds > ranges[widest].iterations.front().seconds) widest = b;
  run.first = std::move(ranges[widest].first);
  return run;
}

}  // namespace sluice::compare
