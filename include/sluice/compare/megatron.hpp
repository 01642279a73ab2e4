#pragma once
// The Megatron-LM-style baseline of Hydraulis §8: one static homogeneous strategy, the best by mean over the
// batches of those holding the context; sequences packed best-fit-decreasing into bins of the context
// (assign::plan_fixed_length), bins dealt round-robin to the pipelines; 1F1B.
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sluice/compare/detail/iterations.hpp"
#include "sluice/compare/detail/strategy_runs.hpp"
#include "sluice/compare/iteration_plans.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"

namespace sluice::compare {

class Megatron {
public:
  // Chooses among every homogeneous strategy holding the context. `options` must outlive the system; so must
  // `chosen`, which result() fills with the chosen strategy's plan of every iteration.
  explicit Megatron(const Options& options, std::vector<ScheduledPlan>* chosen = nullptr)
      : Megatron(options, homogeneous_strategies(options, options.context), chosen) {}
  // Chooses among `strategies` (homogeneous, each holding the context).
  Megatron(const Options& options, std::span<const Strategy> strategies, std::vector<ScheduledPlan>* chosen = nullptr)
      : runs_(options, strategies, chosen) {}

  // Packs, schedules and measures the next iteration on every strategy. Raises invalid_input on an empty batch.
  void add(std::span<const Sequence> batch) {
    sluice::require(!batch.empty(), "compare: an empty batch");
    runs_.add(batch, [](const Options& options, std::span<const Sequence> sequences, std::size_t k, SystemRun& run) {
      return *detail::fixed_length_iteration(options, sequences, k, options.context, run);
    });
  }

  // The fastest strategy's run; a failure when no homogeneous strategy holds the context.
  [[nodiscard]] SystemRun result() && {
    const std::int64_t context = runs_.options().context;
    return std::move(runs_).best(System::megatron, [&](const Strategy& strategy, std::size_t considered) {
      return sluice::concat(strategy.name(), ", the fastest of ", considered, " homogeneous strategies holding ",
                            context, " tokens; fixed-length packing into ", context, "-token bins; 1F1B");
    });
  }

private:
  detail::StrategyRuns<ScheduledPlan> runs_;
};

}  // namespace sluice::compare
