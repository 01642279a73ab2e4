#pragma once
// A lower bound on any plan's iteration time under the cost model: no system, however it proposes, assigns,
// micro-batches or schedules, runs a batch faster. Two arguments, the larger taken:
// - area: N GPUs for T seconds hold at least every sequence's least GPU-time. A sequence of length l on scheme k
//   (g GPUs, p stages, stage latency a·l² + b·l + c, a micro-batch of at most MaxLen tokens) costs g·(a·l² + b·l)
//   GPU-seconds, plus its share g·c·l/MaxLen of the constants of the micro-batches that must hold the scheme's
//   tokens. A pipeline of p > 1 stages also idles in its fill and drain: stage j waits for j forwards before its
//   first and j backwards after its last, each at least the batch's shortest sequence alone, Σ_j j·T(l_min) over
//   the stages' g/p GPUs each. Either a plan runs only one-stage schemes, or it pays the least such charge once.
// - critical path: the micro-batch that holds the longest sequences goes through the p stages forward and back,
//   p·T(l) on the scheme that does so fastest.
// The schemes: those of the profile's space the comparison's systems may run (with TP within a node unless
// cross_node_tp, at most the cluster's GPUs), and the same under ZeRO-3, whose sharded states hold more. Layout
// moves, ZeRO-3's collectives, link latencies and the imbalance between pipelines only add to an iteration.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/cost/zero3.hpp"

namespace sluice::compare {

namespace detail {

// The schemes any compared system may run a sequence on: `profile`'s, with TP within a node unless
// `cross_node_tp`, at most the cluster's GPUs, also under ZeRO-3.
inline std::vector<cost::SchemeCost> bound_schemes(const cost::Profile& profile, bool cross_node_tp) {
  std::vector<cost::SchemeCost> schemes;
  const auto admit = [&](const cost::Profile& admitted) {
    for (const cost::SchemeCost& cost : admitted.schemes())
      if (cost.max_len > 0 && cost.scheme.gpus() <= profile.gpus() &&
          (cross_node_tp || cost.scheme.tp() <= profile.spec().gpus_per_node))
        schemes.push_back(cost);
  };
  admit(profile);
  // The links time only the collectives, which the bound leaves out.
  if (const cost::Zero3Profile zero3 = cost::zero3_profile(profile, {}, 1); zero3.profile) admit(*zero3.profile);
  return schemes;
}

}  // namespace detail

// The bound of `batch` on the schemes of `profile` that the comparison's systems may run (TP across nodes only with
// `cross_node_tp`); nullopt when no scheme holds one of its sequences (no system runs it). Raises invalid_input on
// an empty batch.
inline std::optional<IterationBound> iteration_bound(const cost::Profile& profile, bool cross_node_tp,
                                                     std::span<const Sequence> batch) {
  sluice::require(!batch.empty(), "lower bound: an empty batch");
  const std::vector<cost::SchemeCost> schemes = detail::bound_schemes(profile, cross_node_tp);
  std::vector<std::int64_t> lengths;
  lengths.reserve(batch.size());
  for (const Sequence& sequence : batch) lengths.push_back(sequence.length());
  std::ranges::sort(lengths);
  constexpr double unheld = std::numeric_limits<double>::infinity();
  // GPU-seconds of the sequences on their cheapest scheme of any depth, and of one stage only.
  double any_depth = 0, one_stage = 0, critical_path = 0;
  for (std::size_t begin = 0; begin < lengths.size();) {
    std::size_t end = begin;
    while (end < lengths.size() && lengths[end] == lengths[begin]) ++end;
    const std::int64_t length = lengths[begin];
    const auto l = static_cast<double>(length);
    double least = unheld, least_one_stage = unheld, fastest_trip = unheld;
    for (const cost::SchemeCost& cost : schemes) {
      if (cost.max_len < length) continue;
      const double gpus = static_cast<double>(cost.scheme.gpus());
      const double constant_share = cost.latency.microbatch_overhead() * l / static_cast<double>(cost.max_len);
      const double gpu_seconds = gpus * (cost.latency.sequence_time(length) + constant_share);
      least = std::min(least, gpu_seconds);
      if (cost.scheme.pp() == 1) least_one_stage = std::min(least_one_stage, gpu_seconds);
      fastest_trip = std::min(fastest_trip, cost.scheme.pp() * cost.latency(length));
    }
    if (least == unheld) return std::nullopt;
    const auto count = static_cast<double>(end - begin);
    any_depth += count * least;
    one_stage += count * least_one_stage;
    critical_path = std::max(critical_path, fastest_trip);
    begin = end;
  }
  double fill_and_drain = unheld;
  for (const cost::SchemeCost& cost : schemes) {
    const int stages = cost.scheme.pp();
    if (stages == 1 || cost.max_len < lengths.front()) continue;
    const std::int64_t gpus_per_stage = cost.scheme.gpus() / stages;  // exact: PP divides the scheme's GPUs
    const double stage_gpus = static_cast<double>(gpus_per_stage);
    fill_and_drain = std::min(fill_and_drain, stage_gpus * stages * (stages - 1) / 2.0 * cost.latency(lengths.front()));
  }
  const double busy = std::min(one_stage, any_depth + fill_and_drain);
  IterationBound bound;
  bound.area_seconds = busy / static_cast<double>(profile.gpus());
  bound.critical_path_seconds = critical_path;
  bound.seconds = std::max(bound.area_seconds, bound.critical_path_seconds);
  return bound;
}

// The bound of `batch` on the comparison's cluster and scheme space.
inline std::optional<IterationBound> iteration_bound(const Options& options, std::span<const Sequence> batch) {
  return iteration_bound(options.profile, options.cross_node_tp, batch);
}

}  // namespace sluice::compare
