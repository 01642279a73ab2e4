#pragma once
// DynaPipe (its §4 micro-batch DP, §5 adaptive schedule) on the best homogeneous strategy, by mean, of those
// holding the context: per iteration the mini-batch is ordered, cut into micro-batches by the DP under the
// per-micro-batch memory limit of the profile's ⟨TP, PP⟩ scheme (microbatch::stage_cost), balanced over the
// strategy's pipelines as data-parallel replicas (Karmarkar–Karp), and every replica scheduled by the adaptive
// cyclic search (1F1B kept when faster).
#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/compare/detail/iterations.hpp"
#include "sluice/compare/detail/strategy_runs.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/microbatch/types.hpp"
#include "sluice/schedule/plan_pipeline.hpp"

namespace sluice::compare {

class DynaPipe {
public:
  // Chooses among every homogeneous strategy holding the context. `options` must outlive the system; so must
  // `chosen`, which result() fills with the chosen strategy's plan of every iteration.
  explicit DynaPipe(const Options& options, std::vector<schedule::PipelineRunPlan>* chosen = nullptr)
      : DynaPipe(options, homogeneous_strategies(options, options.context), chosen) {}
  // Chooses among `strategies` (homogeneous, each holding the context).
  DynaPipe(const Options& options, Span<const Strategy> strategies,
           std::vector<schedule::PipelineRunPlan>* chosen = nullptr)
      : runs_(options, strategies, chosen) {}

  // Micro-batches, balances, schedules and measures the next iteration on every strategy.
  void add(Span<const Sequence> batch) { runs_.add(batch, detail::dynapipe_iteration); }

  // The fastest strategy's run; a failure when no homogeneous strategy holds the context.
  [[nodiscard]] SystemRun result() && {
    const std::string_view layout = microbatch::name(runs_.options().dynapipe_layout);
    return std::move(runs_).best(
        System::dynapipe,
        [&](const Strategy& strategy, std::size_t considered) {
          return sluice::concat(strategy.name(), ", the fastest of ", considered,
                                " homogeneous strategies under DynaPipe; micro-batch DP (", layout, "), ",
                                "Karmarkar-Karp over its pipelines, adaptive schedule");
        },
        [this] { return detail::no_homogeneous(runs_.options(), runs_.options().context); });
  }

private:
  detail::StrategyRuns<schedule::PipelineRunPlan> runs_;
};

}  // namespace sluice::compare
