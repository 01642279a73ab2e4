#pragma once
// A system that runs every batch on each of its homogeneous strategies and keeps the fastest by mean (the
// Megatron-LM-style and DynaPipe baselines of Hydraulis §8, tuned as well as a simulator allows). Not for
// callers: megatron.hpp and dynapipe.hpp are made of it.
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sluice/compare/detail/iterations.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/core/sequence.hpp"

namespace sluice::compare::detail {

class StrategyRuns {
public:
  // `options` must outlive the runs.
  StrategyRuns(const Options& options, std::span<const Strategy> strategies)
      : options_(&options), runs_(runs_of(strategies)) {}

  [[nodiscard]] const Options& options() const { return *options_; }

  // `iteration(options, batch, k, run)` adds iteration k of the batch to each strategy's run.
  template <class Iteration>
  void add(std::span<const Sequence> batch, Iteration iteration) {
    for (SystemRun& run : runs_) iteration(*options_, batch, iterations_, run);
    ++iterations_;
  }

  // The fastest strategy's run as `system`'s, with `configuration(strategy, considered)` describing it; a failure
  // when no homogeneous strategy holds the context.
  template <class Configuration>
  [[nodiscard]] SystemRun best(System system, Configuration configuration) && {
    const std::size_t considered = runs_.size();
    auto fastest = best_of(std::move(runs_));
    if (!fastest) return failed(system, no_homogeneous(*options_, options_->context));
    fastest->name = name(system);
    fastest->configuration = configuration(fastest->strategies.front(), considered);
    return *std::move(fastest);
  }

private:
  const Options* options_;
  std::vector<SystemRun> runs_;
  std::size_t iterations_ = 0;
};

}  // namespace sluice::compare::detail
