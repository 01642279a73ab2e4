#pragma once
// A lower bound on any plan's iteration time under the cost model: no system, however it proposes, assigns,
// micro-batches or schedules, runs a batch faster. Two arguments, and the two together:
// - area: N GPUs for T seconds hold at least every sequence's least GPU-time. A sequence of length l on scheme k
//   (g GPUs, p stages, stage latency a·l² + b·l + c, a micro-batch of at most MaxLen tokens) costs g·(a·l² + b·l)
//   GPU-seconds, plus its share g·c·l/MaxLen of the constants of the micro-batches that must hold the scheme's
//   tokens. A pipeline of p > 1 stages also idles in its fill and drain: stage j waits for j forwards before its
//   first and j backwards after its last, each at least the batch's shortest sequence alone, Σ_j j·T(l_min) over
//   the stages' g/p GPUs each. Either a plan runs only one-stage schemes, or it pays the least such charge once.
//   With last-stage work w (cost::LastStageWork) the p − 1 stages before the last run T − w: a sequence costs
//   g·(T − (p − 1)/p·w) and the fill and drain wait T(l_min) − w(l_min) per step.
// - critical path: the micro-batch that holds the longest sequences goes through the p stages forward and back,
//   p·T(l) − (p − 1)·w(l) on the scheme that does so fastest.
// - together: an iteration of T seconds runs every sequence on a scheme whose trip p·T(l) is at most T, so its
//   GPUs are busy at least the area of those schemes alone, which must fit in N·T. The bound is the least such T;
//   a sequence that is cheap on a slow scheme and fast only on a dear one raises it above both arguments.
// The schemes: those of the profile's space the comparison's systems may run (with TP within a node unless
// cross_node_tp, at most the cluster's GPUs), and the same under ZeRO-3, whose sharded states hold more. Layout
// moves, ZeRO-3's collectives, link latencies and the imbalance between pipelines only add to an iteration.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
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

// One scheme a sequence of one distinct length may run on: its trip through the pipeline, forward and back (no
// makespan is shorter), and the GPU-seconds it costs there with its share of the micro-batch constants.
struct BoundOption {
  double trip = 0;
  double gpu_seconds = 0;
  bool one_stage = false;
  std::size_t length = 0;  // index of the distinct length
};

// Of one length's options, from `first` to the end, keeps those no faster option runs as cheaply (at any depth, or
// of one stage), by trip: the rest never give a least GPU-time, which keeps the options few.
inline void keep_pareto_options(std::vector<BoundOption>& options, std::size_t first) {
  const auto begin = options.begin() + static_cast<std::ptrdiff_t>(first);
  std::sort(begin, options.end(), [](const BoundOption& x, const BoundOption& y) {
    return x.trip != y.trip ? x.trip < y.trip : x.gpu_seconds < y.gpu_seconds;
  });
  double least = std::numeric_limits<double>::infinity(), least_one_stage = least;
  std::size_t kept = first;
  for (std::size_t o = first; o < options.size(); ++o) {
    const BoundOption option = options[o];
    if (option.gpu_seconds >= least && !(option.one_stage && option.gpu_seconds < least_one_stage)) continue;
    least = std::min(least, option.gpu_seconds);
    if (option.one_stage) least_one_stage = std::min(least_one_stage, option.gpu_seconds);
    options[kept++] = option;
  }
  options.resize(kept);
}

// The least GPU-seconds of the batch when no sequence's trip exceeds `trip`: every sequence on its cheapest such
// scheme, either all of one stage or paying the least fill and drain once.
inline double least_busy(Span<const double> counts, Span<const BoundOption> options,
                         Span<const std::size_t> first_option, double trip, double fill_and_drain) {
  constexpr double unheld = std::numeric_limits<double>::infinity();
  double any_depth = 0, one_stage = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    double least = unheld, least_one_stage = unheld;
    for (std::size_t o = first_option[i]; o < first_option[i + 1]; ++o) {
      if (options[o].trip > trip) continue;
      least = std::min(least, options[o].gpu_seconds);
      if (options[o].one_stage) least_one_stage = std::min(least_one_stage, options[o].gpu_seconds);
    }
    any_depth += counts[i] * least;
    one_stage += counts[i] * least_one_stage;
  }
  return std::min(one_stage, any_depth + fill_and_drain);
}

// The trip t >= `critical_path` at which max(t, least_busy(t) / gpus) is least: one sweep over the options by
// trip, each distinct length's least GPU-seconds kept as the trips allow cheaper schemes. The sums are kept
// incrementally only to choose the trip; the caller computes the bound at it afresh.
inline double least_makespan_trip(Span<const double> counts, std::vector<BoundOption> options, double critical_path,
                                  double gpus, double fill_and_drain) {
  constexpr double unheld = std::numeric_limits<double>::infinity();
  std::sort(options.begin(), options.end(), [](const BoundOption& x, const BoundOption& y) {
    return x.trip != y.trip ? x.trip < y.trip : x.length < y.length;
  });
  std::vector<double> least(counts.size(), unheld), least_one_stage(counts.size(), unheld);
  std::size_t unheld_any = counts.size(), unheld_one_stage = counts.size();
  double any_depth = 0, one_stage = 0;  // over the lengths held so far
  const auto lower = [](double& kept, double value, double count, std::size_t& unheld_count, double& sum) {
    if (value >= kept) return;
    sum += count * (kept == unheld ? value : value - kept);
    if (kept == unheld) --unheld_count;
    kept = value;
  };
  double best = unheld, best_trip = critical_path;
  for (std::size_t o = 0; o < options.size();) {
    const double trip = options[o].trip;
    if (trip >= best) break;  // every later candidate is at least its trip
    for (; o < options.size() && options[o].trip == trip; ++o) {
      const BoundOption& option = options[o];
      const double count = counts[option.length];
      lower(least[option.length], option.gpu_seconds, count, unheld_any, any_depth);
      if (option.one_stage)
        lower(least_one_stage[option.length], option.gpu_seconds, count, unheld_one_stage, one_stage);
    }
    if (unheld_any > 0) continue;  // the trip is still below the critical path
    const double busy = std::min(unheld_one_stage > 0 ? unheld : one_stage, any_depth + fill_and_drain);
    if (const double candidate = std::max(trip, busy / gpus); candidate < best) {
      best = candidate;
      best_trip = trip;
    }
  }
  return best_trip;
}

}  // namespace detail

// The bound of `batch` on the schemes of `profile` that the comparison's systems may run (TP across nodes only with
// `cross_node_tp`); nullopt when no scheme holds one of its sequences (no system runs it). Raises invalid_input on
// an empty batch.
inline std::optional<IterationBound> iteration_bound(const cost::Profile& profile, bool cross_node_tp,
                                                     Span<const Sequence> batch) {
  sluice::require(!batch.empty(), "lower bound: an empty batch");
  const std::vector<cost::SchemeCost> schemes = detail::bound_schemes(profile, cross_node_tp);
  std::vector<std::int64_t> lengths;
  lengths.reserve(batch.size());
  for (const Sequence& sequence : batch) lengths.push_back(sequence.length());
  std::ranges::sort(lengths);
  // Per distinct length, how many sequences have it and the schemes a plan may run them on.
  std::vector<double> counts;
  std::vector<detail::BoundOption> options;
  std::vector<std::size_t> first_option;  // per distinct length, its options from here to the next one's first
  for (std::size_t begin = 0; begin < lengths.size();) {
    std::size_t end = begin;
    while (end < lengths.size() && lengths[end] == lengths[begin]) ++end;
    const std::int64_t length = lengths[begin];
    const auto l = static_cast<double>(length);
    first_option.push_back(options.size());
    for (const cost::SchemeCost& cost : schemes) {
      if (cost.max_len < length) continue;
      const double gpus = static_cast<double>(cost.scheme.gpus());
      const double stages = cost.scheme.pp();
      // The stages before the last run without the last stage's own work: a stage's mean is T less (p − 1)/p of it.
      const cost::LastStageWork& work = cost.last_stage;
      const double others_share = (stages - 1) / stages;
      const double constant_share =
          (cost.latency.microbatch_overhead() - others_share * work.c()) * l / static_cast<double>(cost.max_len);
      options.push_back(
          {.trip = stages * cost.latency(length) - (stages - 1) * work.seconds(length),
           .gpu_seconds = gpus * (cost.latency.sequence_time(length) - others_share * work.b() * l + constant_share),
           .one_stage = cost.scheme.pp() == 1,
           .length = counts.size()});
    }
    if (options.size() == first_option.back()) return std::nullopt;
    detail::keep_pareto_options(options, first_option.back());
    counts.push_back(static_cast<double>(end - begin));
    begin = end;
  }
  first_option.push_back(options.size());
  double fill_and_drain = std::numeric_limits<double>::infinity();
  for (const cost::SchemeCost& cost : schemes) {
    const int stages = cost.scheme.pp();
    if (stages == 1 || cost.max_len < lengths.front()) continue;
    const std::int64_t gpus_per_stage = cost.scheme.gpus() / stages;  // exact: PP divides the scheme's GPUs
    const double stage_gpus = static_cast<double>(gpus_per_stage);
    const double lightest_stage = cost.latency(lengths.front()) - cost.last_stage.seconds(lengths.front());
    fill_and_drain = std::min(fill_and_drain, stage_gpus * stages * (stages - 1) / 2.0 * lightest_stage);
  }
  const auto gpus = static_cast<double>(profile.gpus());
  const auto busy_within = [&](double trip) {
    return detail::least_busy(counts, options, first_option, trip, fill_and_drain);
  };
  double critical_path = 0;
  for (std::size_t i = 0; i + 1 < first_option.size(); ++i) {
    double fastest = std::numeric_limits<double>::infinity();
    for (std::size_t o = first_option[i]; o < first_option[i + 1]; ++o) fastest = std::min(fastest, options[o].trip);
    critical_path = std::max(critical_path, fastest);
  }
  IterationBound bound;
  bound.area_seconds = busy_within(std::numeric_limits<double>::infinity()) / gpus;
  bound.critical_path_seconds = critical_path;
  // Together: a plan of makespan T runs each sequence on a scheme whose trip is at most T, so its GPUs are busy at
  // least busy_within(T) <= N·T. The least T that allows lies at a trip where busy_within steps down, or where
  // N·T meets it: the least over the trips t >= the critical path of max(t, busy_within(t) / N).
  const double trip = detail::least_makespan_trip(counts, options, critical_path, gpus, fill_and_drain);
  bound.seconds = std::max({trip, busy_within(trip) / gpus, bound.area_seconds, bound.critical_path_seconds});
  return bound;
}

// The bound of `batch` on the comparison's cluster and scheme space.
inline std::optional<IterationBound> iteration_bound(const Options& options, Span<const Sequence> batch) {
  return iteration_bound(options.profile, options.cross_node_tp, batch);
}

}  // namespace sluice::compare
