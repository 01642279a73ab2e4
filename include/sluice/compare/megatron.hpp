#pragma once
// The Megatron-LM-style baselines of Hydraulis §8: one static homogeneous strategy, the best by mean over the
// batches of those holding the context; sequences packed best-fit-decreasing into bins of the context
// (assign::plan_fixed_length), bins dealt round-robin to the pipelines; 1F1B. System::megatron runs ⟨TP, PP⟩
// schemes, as the paper configured it (Table 3); System::megatron_cp also Megatron-LM's context parallelism, ring
// attention with the causal load balance, the static strategy a user of long contexts runs today.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/compare/detail/iterations.hpp"
#include "sluice/compare/detail/strategy_runs.hpp"
#include "sluice/compare/iteration_plans.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"

namespace sluice::compare {

class Megatron {
public:
  // Chooses among every homogeneous strategy of `system`'s schemes holding the context. `options` must outlive the
  // system; so must `chosen`, which result() fills with the chosen strategy's plan of every iteration.
  explicit Megatron(const Options& options, std::vector<ScheduledPlan>* chosen = nullptr,
                    System system = System::megatron)
      : Megatron(options, strategies_of(options, system), chosen) {
    system_ = system;
  }
  // Chooses among `strategies` (homogeneous, each holding the context).
  Megatron(const Options& options, Span<const Strategy> strategies, std::vector<ScheduledPlan>* chosen = nullptr)
      : runs_(options, strategies, chosen) {}

  // Packs, schedules and measures the next iteration on every strategy. Raises invalid_input on an empty batch.
  void add(Span<const Sequence> batch) {
    sluice::require(!batch.empty(), "compare: an empty batch");
    runs_.add(batch, [](const Options& options, Span<const Sequence> sequences, std::size_t k, SystemRun& run) {
      return *detail::fixed_length_iteration(options, sequences, k, options.context, run);
    });
  }

  // The fastest strategy's run; a failure when no strategy holds the context, or when Megatron-LM's context
  // parallelism is asked for and the scheme space has no ring scheme.
  [[nodiscard]] SystemRun result() && {
    const Options& options = runs_.options();
    const std::int64_t context = options.context;
    if (system_ == System::megatron_cp && !has_ring_scheme(options.profile))
      return detail::failed(system_, "the scheme space has no ring context-parallel scheme (--cp with the ring kind)");
    const std::string_view kind = system_ == System::megatron ? "⟨TP, PP⟩" : "TP × CP (ring) × PP";
    return std::move(runs_).best(
        system_,
        [&](const Strategy& strategy, std::size_t considered) {
          return sluice::concat(strategy.name(), ", the fastest of ", considered, " homogeneous ", kind,
                                " strategies holding ", context, " tokens; fixed-length packing into ", context,
                                "-token bins; 1F1B");
        },
        [&] { return detail::no_homogeneous(options, context, kind, admits(system_)); });
  }

private:
  // None for context parallelism without a ring scheme: it would rerun System::megatron.
  static std::vector<Strategy> strategies_of(const Options& options, System system) {
    if (system == System::megatron_cp && !has_ring_scheme(options.profile)) return {};
    return homogeneous_strategies(options, options.context, admits(system));
  }

  static bool (*admits(System system))(const Scheme&) {
    return system == System::megatron_cp ? megatron_cp_scheme : megatron_scheme;
  }

  static bool has_ring_scheme(const cost::Profile& profile) {
    for (const cost::SchemeCost& cost : profile.schemes())
      if (cost.scheme.cp() > 1 && cost.scheme.cp_kind() == CpKind::ring) return true;
    return false;
  }

  detail::StrategyRuns<ScheduledPlan> runs_;
  System system_ = System::megatron;
};

}  // namespace sluice::compare
