#pragma once
// The DeepSpeed baseline of Hydraulis §8 (Table 3: "DP2SP4", "DP8SP4+AC"): ZeRO-3 data parallelism times
// DeepSpeed-Ulysses sequence parallelism (Jacobs et al., arXiv 2309.14509), with or without full recomputation,
// one static strategy for the whole run, the best by mean over the batches; sequences packed best-fit-decreasing
// into bins of the context, as the paper ran it; no pipeline or tensor parallelism.
// ZeRO-3 shards every model state over all GPUs (memory by TransformerMemorySpec's zero3 sharding) and gathers
// the 16-bit weights layer by layer: per micro-batch one all-gather in the forward, one all-gather and one
// reduce-scatter of the gradients in the backward, overlapped with that pass's compute. The part a full bin's
// compute does not cover is added to the scheme's per-micro-batch constant.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
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
#include "sluice/cost/profile.hpp"

namespace sluice::compare {

// The schemes DeepSpeed runs: ⟨1, 1⟩ (ZeRO-3 alone) and Ulysses of any degree, with or without recomputation.
inline bool deepspeed_scheme(const Scheme& scheme) {
  return scheme.tp() == 1 && scheme.pp() == 1 && (scheme.cp() == 1 || scheme.cp_kind() == CpKind::ulysses);
}

// One ZeRO-3 collective of the model's 16-bit weights (2 bytes × layers·H²·B/16 + 2·H·V parameters: B is 16 bytes
// per parameter) over `gpus` GPUs, as a ring: (N − 1) steps of α, and (N − 1)/N of the bytes through each GPU's
// link.
inline double zero3_collective_seconds(const cost::TransformerMemorySpec& memory, std::int64_t gpus,
                                       std::int64_t gpus_per_node, const cost::CpLinks& links) {
  const double h = static_cast<double>(memory.hidden);
  const double parameters = memory.layers * h * h * memory.state_bytes / 16 + 2 * h * static_cast<double>(memory.vocab);
  const double n = static_cast<double>(gpus);
  return (n - 1) * links.latency(gpus, gpus_per_node) +
         (n - 1) / n * 2 * parameters / links.bandwidth(gpus, gpus_per_node);
}

// The ZeRO-3 collectives' time per micro-batch that a full bin's compute (one sequence of `context` tokens on
// `scheme`; forward and backward split by the backward ratio) leaves exposed: the forward's all-gather, and the
// backward's all-gather and reduce-scatter. A bin of many short sequences computes less and exposes more: this is
// what ZeRO-3 costs at the least.
inline double zero3_exposed_seconds(double collective, const cost::QuadraticLatency& latency, std::int64_t context,
                                    double backward_ratio) {
  const double compute = latency(context);
  const double forward = compute / (1 + backward_ratio);
  return std::max(0.0, collective - forward) + std::max(0.0, 2 * collective - (compute - forward));
}

namespace detail {

// `options` with its profile narrowed to DeepSpeed's schemes under ZeRO-3 that hold `holds` tokens (DeepSpeed: the
// context; FlexSP: any sequence): memory with every state sharded over the cluster, and, `exposed_in_constants`,
// the collectives' exposed time at a full bin added to each scheme's constant (flex CP charges each micro-batch its
// own: assign::FlexCpCollectives); nullopt with why when there is none.
struct Zero3Options {
  std::optional<Options> options;
  std::string failure;
  double collective_seconds = 0;
};

inline Zero3Options zero3_options(const Options& options, std::int64_t holds, bool exposed_in_constants = true) {
  const cost::ProfileSpec& spec = options.profile.spec();
  Zero3Options result;
  if (!spec.memory || !spec.memory->activation_bytes.contains(1)) {
    result.failure = sluice::concat("profile ", spec.name,
                                    " has no memory model with an activation constant for "
                                    "TP 1 to derive ZeRO-3's MaxLen from");
    return result;
  }
  const std::int64_t gpus = options.profile.gpus();
  result.collective_seconds = zero3_collective_seconds(*spec.memory, gpus, spec.gpus_per_node, options.links);
  std::vector<cost::SchemeEntry> entries;
  for (const cost::SchemeCost& cost : options.profile.schemes()) {
    if (!deepspeed_scheme(cost.scheme) || gpus % cost.scheme.gpus() != 0) continue;
    if (spec.memory->for_scheme(cost.scheme, gpus, cost::StateSharding::zero3).max_len() < holds) continue;
    const cost::QuadraticLatency& t = cost.latency;
    const double exposed = exposed_in_constants ? zero3_exposed_seconds(result.collective_seconds, t, options.context,
                                                                        options.problem.backward_ratio)
                                                : 0.0;
    entries.push_back({cost.scheme, {t.a(), t.b(), t.c() + exposed}, std::nullopt, cost.util_len});
  }
  if (entries.empty()) {
    result.failure = sluice::concat("no ZeRO-3 × Ulysses strategy of ", spec.name, " on ", gpus, " GPUs holds ", holds,
                                    " tokens (the scheme space's Ulysses degrees: --cp with the "
                                    "ulysses kind; recomputation: --ac)");
    return result;
  }
  cost::ProfileSpec narrowed = spec;
  narrowed.schemes = std::move(entries);
  narrowed.memory->state_sharding = cost::StateSharding::zero3;
  result.options = options;
  result.options->profile = cost::Profile(std::move(narrowed));
  return result;
}

}  // namespace detail

class DeepSpeed {
public:
  // Chooses among every DeepSpeed strategy holding the context, or only among those of them in `only` (the
  // paper's configuration, for one). `options` must outlive the system.
  explicit DeepSpeed(const Options& options, std::optional<std::span<const Strategy>> only = std::nullopt)
      : zero3_(detail::zero3_options(options, options.context)),
        runs_(zero3_.options ? *zero3_.options : options, strategies(options.context, only), nullptr) {}
  DeepSpeed(const DeepSpeed&) = delete;  // runs_ points into zero3_
  DeepSpeed& operator=(const DeepSpeed&) = delete;

  // Packs, schedules and measures the next iteration on every strategy. Raises invalid_input on an empty batch.
  void add(std::span<const Sequence> batch) {
    sluice::require(!batch.empty(), "compare: an empty batch");
    runs_.add(batch, [](const Options& options, std::span<const Sequence> sequences, std::size_t k, SystemRun& run) {
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
  [[nodiscard]] std::vector<Strategy> strategies(std::int64_t context,
                                                 std::optional<std::span<const Strategy>> only) const {
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
