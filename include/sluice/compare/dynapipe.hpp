#pragma once
// DynaPipe (its §4 micro-batch DP, §5 adaptive schedule) on the best homogeneous strategy, by mean, of those
// holding the context: per iteration the mini-batch is ordered, cut into micro-batches by the DP under the
// per-micro-batch memory limit of the profile's ⟨TP, PP⟩ scheme (microbatch::stage_cost), balanced over the
// strategy's pipelines as data-parallel replicas (Karmarkar–Karp), and every replica scheduled by the adaptive
// cyclic search (1F1B kept when faster).
#include <cstddef>
#include <span>
#include <utility>

#include "sluice/compare/detail/iterations.hpp"
#include "sluice/compare/detail/strategy_runs.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"

namespace sluice::compare {

class DynaPipe {
public:
  // Chooses among every homogeneous strategy holding the context. `options` must outlive the system.
  explicit DynaPipe(const Options& options) : DynaPipe(options, homogeneous_strategies(options, options.context)) {}
  // Chooses among `strategies` (homogeneous, each holding the context).
  DynaPipe(const Options& options, std::span<const Strategy> strategies) : runs_(options, strategies) {}

  // Micro-batches, balances, schedules and measures the next iteration on every strategy.
  void add(std::span<const Sequence> batch) { runs_.add(batch, detail::dynapipe_iteration); }

  // The fastest strategy's run; a failure when no homogeneous strategy holds the context.
  [[nodiscard]] SystemRun result() && {
    return std::move(runs_).best(System::dynapipe, [](const Strategy& strategy, std::size_t considered) {
      return sluice::concat(strategy.name(), ", the fastest of ", considered,
                            " homogeneous strategies under DynaPipe; micro-batch DP (padded), ",
                            "Karmarkar-Karp over its pipelines, adaptive schedule");
    });
  }

private:
  detail::StrategyRuns runs_;
};

}  // namespace sluice::compare
