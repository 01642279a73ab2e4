#pragma once
// The DeepSpeed baseline of Hydraulis §8 (Table 3: "DP2SP4", "DP8SP4+AC"): ZeRO-3 data parallelism times
// DeepSpeed-Ulysses sequence parallelism (Jacobs et al., arXiv 2309.14509), with or without full recomputation,
// one static strategy for the whole run, the best by mean over the batches; sequences packed best-fit-decreasing
// into bins of the context, as the paper ran it; no pipeline or tensor parallelism.
// ZeRO-3's memory and collectives are cost/zero3.hpp's; the part of the collectives a full bin's compute does not
// cover is added to the scheme's per-micro-batch constant.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/compare/detail/iterations.hpp"
#include "sluice/compare/detail/strategy_runs.hpp"
#include "sluice/compare/iteration_plans.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/cost/zero3.hpp"

namespace sluice::compare {

namespace detail {

// `options` with its profile narrowed to ZeRO-3 (cost::zero3_profile) holding `holds` tokens, the collectives'
// exposed time at a full bin of the context in each scheme's constant; nullopt with why when there is none.
struct Zero3Options {
  std::optional<Options> options;
  std::string failure;
  double collective_seconds = 0;
};

inline Zero3Options zero3_options(const Options& options, std::int64_t holds) {
  const cost::FullBin full_bin{.tokens = options.context, .backward_ratio = options.problem.backward_ratio};
  cost::Zero3Profile narrowed = cost::zero3_profile(options.profile, options.links, holds, full_bin);
  Zero3Options result{.options = std::nullopt,
                      .failure = std::move(narrowed.failure),
                      .collective_seconds = narrowed.collective_seconds};
  if (narrowed.profile) {
    result.options = options;
    result.options->profile = *std::move(narrowed.profile);
  }
  return result;
}

}  // namespace detail

class DeepSpeed {
public:
  // Chooses among every DeepSpeed strategy holding the context, or only among those of them in `only` (the
  // paper's configuration, for one). `options` must outlive the system.
  explicit DeepSpeed(const Options& options, std::optional<Span<const Strategy>> only = std::nullopt)
      : zero3_(detail::zero3_options(options, options.context)),
        runs_(zero3_.options ? *zero3_.options : options, strategies(options.context, only), nullptr) {}
  DeepSpeed(const DeepSpeed&) = delete;  // runs_ points into zero3_
  DeepSpeed& operator=(const DeepSpeed&) = delete;

  // Packs, schedules and measures the next iteration on every strategy. Raises invalid_input on an empty batch.
  void add(Span<const Sequence> batch) {
    sluice::require(!batch.empty(), "compare: an empty batch");
    runs_.add(batch, [](const Options& options, Span<const Sequence> sequences, std::size_t k, SystemRun& run) {
      detail::fixed_length_iteration(options, sequences, k, options.context, run);
      return 0;
    });
  }

  // The fastest strategy's run; a failure when no DeepSpeed strategy holds the context.
  [[nodiscard]] SystemRun result() && {
    const std::int64_t context = runs_.options().context;
    const double collective = zero3_.collective_seconds;
    return std::move(runs_).best(
        System::deepspeed,
        [&](const Strategy& strategy, std::size_t considered) {
          return sluice::concat(strategy.name(), ", the fastest of ", considered,
                                " ZeRO-3 × Ulysses strategies holding ", context, " tokens; ZeRO-3 collectives of ",
                                sluice::shortest(collective), " s each; fixed-length packing into ", context,
                                "-token bins");
        },
        [&] { return zero3_.failure; });
  }

private:
  [[nodiscard]] std::vector<Strategy> strategies(std::int64_t context, std::optional<Span<const Strategy>> only) const {
    if (!zero3_.options) return {};
    std::vector<Strategy> all = homogeneous_strategies(*zero3_.options, context);
    if (only)
      std::erase_if(all, [&](const Strategy& strategy) { return std::ranges::find(*only, strategy) == only->end(); });
    return all;
  }

  detail::Zero3Options zero3_;
  detail::StrategyRuns<int> runs_;
};

}  // namespace sluice::compare
