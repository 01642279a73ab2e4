#pragma once
// A system that runs every batch on each of its homogeneous strategies and keeps the fastest by mean (the
// Megatron-LM-style and DynaPipe baselines of Hydraulis §8, tuned as well as a simulator allows). Not for
// callers: megatron.hpp and dynapipe.hpp are made of it.
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/compare/detail/iterations.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"

namespace sluice::compare::detail {

// Plan: what one iteration on one strategy returns. With a `chosen` sink, every strategy's plans are kept and the
// fastest strategy's are moved into it by best().
template <class Plan>
class StrategyRuns {
public:
  // `options` (and `chosen`) must outlive the runs.
  StrategyRuns(const Options& options, Span<const Strategy> strategies, std::vector<Plan>* chosen)
      : options_(&options), runs_(runs_of(strategies)), chosen_(chosen) {
    if (chosen_) plans_.resize(runs_.size());
  }

  [[nodiscard]] const Options& options() const { return *options_; }

  // `iteration(options, batch, k, run)` adds iteration k of the batch to each strategy's run and returns its plan.
  template <class Iteration>
  void add(Span<const Sequence> batch, Iteration iteration) {
    for (std::size_t s = 0; s < runs_.size(); ++s) {
      Plan plan = iteration(*options_, batch, iterations_, runs_[s]);
      if (chosen_) plans_[s].push_back(std::move(plan));
    }
    ++iterations_;
  }

  // The fastest strategy's run as `system`'s, with `configuration(strategy, considered)` describing it; a failure
  // saying `none()` when there is no strategy.
  template <class Configuration, class None>
  [[nodiscard]] SystemRun best(System system, Configuration configuration, None none) && {
    const std::optional<std::size_t> fastest = best_index(runs_);
    if (!fastest) return failed(system, none());
    if (chosen_) *chosen_ = std::move(plans_[*fastest]);
    SystemRun run = std::move(runs_[*fastest]);
    run.name = name(system);
    run.configuration = configuration(run.strategies.front(), runs_.size());
    return run;
  }

private:
  const Options* options_;
  std::vector<SystemRun> runs_;
  std::vector<Plan>* chosen_;
  std::vector<std::vector<Plan>> plans_;  // per strategy, when kept
  std::size_t iterations_ = 0;
};

}  // namespace sluice::compare::detail
