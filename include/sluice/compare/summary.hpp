#pragma once
// The statistics a comparison reports per system, over its iterations (Hydraulis §8: mean iteration time and
// throughput, Fig. 10; sluice's speedup over each system; load imbalance, Fig. 12b; layout moves, §5)
// and WLB-LLM's imbalance degree between micro-batches.
#include <cstddef>
#include <optional>
#include <vector>

#include "sluice/compare/results.hpp"
#include "sluice/compare/statistics.hpp"
#include "sluice/core/span.hpp"

namespace sluice::compare {

struct Summary {
  double seconds = 0, seconds_stddev = 0;
  double tokens_per_second = 0, tokens_per_second_stddev = 0;
  std::optional<double> speedup, speedup_stddev;  // sluice over this system; empty when either failed
  double imbalance = 0, idle = 0;
  double micro_batch_imbalance = 0;  // mean imbalance degree
  double switching = 0;              // mean seconds charged for layout moves (included in `seconds`)
  double layout_move = 0;            // mean α–β seconds of those moves before overlap
  // Mean seconds over the mean of the batches' lower bounds (compare/bound.hpp); empty when a batch has none.
  std::optional<double> over_bound;
  double planning_seconds = 0;  // mean wall-clock planning time per iteration (measured)
  friend bool operator==(const Summary&, const Summary&) = default;
};

// The mean of the batches' lower bounds; empty when one has none.
inline std::optional<double> mean_lower_bound(Span<const BatchSize> batches) {
  std::vector<double> bounds;
  for (const BatchSize& batch : batches) {
    if (!batch.lower_bound) return std::nullopt;
    bounds.push_back(batch.lower_bound->seconds);
  }
  if (bounds.empty()) return std::nullopt;
  return mean(bounds);
}

// The summary of `run` (not failed) over `batches`, its speedups those of `sluice` over it, iteration by iteration.
inline Summary summarize(const SystemRun& run, Span<const BatchSize> batches, const SystemRun& sluice) {
  Summary summary;
  std::vector<double> seconds, throughput, speedups, imbalances, idle, degrees, switching, layout_move, planning;
  for (std::size_t k = 0; k < run.iterations.size(); ++k) {
    const IterationOutcome& outcome = run.iterations[k];
    seconds.push_back(outcome.seconds);
    throughput.push_back(static_cast<double>(batches[k].tokens) / outcome.seconds);
    imbalances.push_back(outcome.imbalance);
    idle.push_back(outcome.idle);
    degrees.push_back(outcome.micro_batch_imbalance);
    switching.push_back(outcome.switching);
    layout_move.push_back(outcome.layout_move);
    planning.push_back(outcome.planning_seconds);
    if (!sluice.failure) speedups.push_back(outcome.seconds / sluice.iterations[k].seconds);
  }
  summary.seconds = mean(seconds);
  summary.seconds_stddev = deviation(seconds);
  summary.tokens_per_second = mean(throughput);
  summary.tokens_per_second_stddev = deviation(throughput);
  if (!speedups.empty()) {
    summary.speedup = mean(speedups);
    summary.speedup_stddev = deviation(speedups);
  }
  summary.imbalance = mean(imbalances);
  summary.idle = mean(idle);
  summary.micro_batch_imbalance = mean(degrees);
  summary.switching = mean(switching);
  summary.layout_move = mean(layout_move);
  summary.planning_seconds = mean(planning);
  if (const std::optional<double> bound = mean_lower_bound(batches)) summary.over_bound = summary.seconds / *bound;
  return summary;
}

}  // namespace sluice::compare
