#pragma once
// A cost::Profile from the analytic estimator, for planning where nothing was measured: for every scheme
// ⟨TP, PP⟩ that fits the cluster, T(l) is fitted to the estimator's forward+backward time of one
// sequence of length l on the slowest stage of an even partition, and MaxLen is the longest length
// (in steps of `granularity`) whose first-stage memory (1F1B keeps PP micro-batches in flight there)
// fits the budget.
// It adapts a search model to the cost vocabulary, so it lives in search/ (search depends on cost, never
// the reverse). It fits T(l) with cost/fit.hpp, so unlike the rest of search/ it needs Eigen: link sluice::fit.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/search/estimator.hpp"
#include "sluice/search/model.hpp"
#include "sluice/search/partition.hpp"

namespace sluice::search {

struct AnalyticProfileOptions {
  std::int64_t memory_bytes = 0;  // per-device budget; 0 = the cluster's device memory
  std::int64_t min_length = 256;  // the fit's length sweep: min_length, 2·min_length, ..., max_length
  std::int64_t max_length = 65536;
  std::int64_t granularity = 128;  // MaxLen step
  int max_tp = 8;                  // TP degrees 1, 2, ..., max_tp (and dividing every layer's heads)
};

namespace detail {

// The model with every layer's sequence set to `length` (windows capped by it).
inline ModelSpec at_length(ModelSpec model, std::int64_t length) {
  for (LayerSpec& layer : model.layers) {
    layer.sequence = length;
    layer.window = std::min(layer.window, length);
  }
  return model;
}

}  // namespace detail

// Stage time of one sequence of `length` tokens for ⟨tp, pp⟩: the slowest stage of the even partition.
inline double analytic_stage_time(const ModelSpec& model, const ClusterSpec& cluster, const Scheme& scheme,
                                  std::int64_t length) {
  const AnalyticEstimator estimator(detail::at_length(model, length), cluster);
  const LayerStrategy strategy{.tp = scheme.tp(), .dp = 1};
  const std::vector<int> sizes = even_partition(estimator.layers(), scheme.pp());
  double slowest = 0;
  int first = 0;
  for (const int count : sizes) {
    double total = 0;
    for (int l = first; l < first + count; ++l) total += estimator.layer(l, strategy, 1).time_nosync;
    slowest = std::max(slowest, total);
    first += count;
  }
  return slowest;
}

// First-stage memory of one sequence of `length` tokens for ⟨tp, pp⟩, with PP sequences in flight.
inline double analytic_stage_memory(const ModelSpec& model, const ClusterSpec& cluster, const Scheme& scheme,
                                    std::int64_t length) {
  const AnalyticEstimator estimator(detail::at_length(model, length), cluster);
  const LayerStrategy strategy{.tp = scheme.tp(), .dp = 1};
  const int count = even_partition(estimator.layers(), scheme.pp()).front();
  double states = 0;
  double forward = 0;
  double peak = 0;
  for (int l = 0; l < count; ++l) {
    const LayerCost cost = estimator.layer(l, strategy, 1);
    states += cost.state_bytes;
    forward += scheme.pp() * cost.forward_bytes;
    peak = std::max(peak, forward + cost.backward_bytes);
  }
  return states + peak + estimator.stage_extra(0, scheme.pp(), strategy, 1, 1, scheme.pp()).bytes;
}

inline cost::ProfileSpec analytic_profile_spec(const ModelSpec& model, const ClusterSpec& cluster,
                                               const AnalyticProfileOptions& options = {}) {
  require_valid(model);
  require_valid(cluster);
  sluice::require(options.memory_bytes >= 0 && options.memory_bytes <= cluster.memory_bytes,
                  "analytic profile: memory_bytes must be in [0, the device memory ", cluster.memory_bytes, "], got ",
                  options.memory_bytes);
  sluice::require(options.min_length >= 1, "analytic profile: min_length must be >= 1, got ", options.min_length);
  sluice::require(options.max_length >= 4 * options.min_length && options.max_length <= (1 << 24),
                  "analytic profile: max_length must be in [4·min_length, 2^24], got ", options.max_length);
  sluice::require(options.granularity >= 1 && options.granularity <= options.max_length,
                  "analytic profile: granularity must be in [1, max_length], got ", options.granularity);
  sluice::require(options.max_tp >= 1, "analytic profile: max_tp must be >= 1, got ", options.max_tp);
  const double budget = static_cast<double>(options.memory_bytes > 0 ? options.memory_bytes : cluster.memory_bytes);
  std::int64_t heads = 0;
  for (const LayerSpec& layer : model.layers) heads = std::gcd(heads, layer.heads);

  cost::ProfileSpec spec;
  spec.name = model.name + "@" + cluster.name;
  spec.source = "sluice analytic estimator";
  spec.model = {model.name, static_cast<int>(model.layers.size()), model.layers.front().hidden, 0};
  spec.gpus = cluster.gpus;
  spec.gpus_per_node = static_cast<int>(std::min<std::int64_t>(cluster.levels.front().size, cluster.gpus));
  for (int tp = 1; tp <= options.max_tp && tp <= cluster.gpus && heads % tp == 0; tp *= 2)
    for (int pp = 1; std::int64_t{tp} * pp <= cluster.gpus && pp <= static_cast<int>(model.layers.size()); pp *= 2) {
      const Scheme scheme(tp, pp);
      std::vector<cost::LatencySample> samples;
      for (std::int64_t length = options.min_length; length <= options.max_length; length *= 2)
        samples.push_back({length, analytic_stage_time(model, cluster, scheme, length)});
      const cost::QuadraticLatency latency = cost::fit_quadratic(samples).model;
      // MaxLen: bisection over multiples of the granularity (memory grows with the length).
      std::int64_t fits = 0;
      std::int64_t fails = options.max_length / options.granularity + 1;
      while (fails - fits > 1) {
        const std::int64_t mid = fits + (fails - fits) / 2;
        if (analytic_stage_memory(model, cluster, scheme, mid * options.granularity) <= budget)
          fits = mid;
        else
          fails = mid;
      }
      // Without fixed overhead every length runs at full utilisation.
      const std::int64_t util_len = latency.c() > 0 && latency.b() > 0 ? latency.util_len() : 1;
      spec.schemes.push_back({scheme, latency, fits * options.granularity, util_len});
    }
  return spec;
}

inline cost::Profile analytic_profile(const ModelSpec& model, const ClusterSpec& cluster,
                                      const AnalyticProfileOptions& options = {}) {
  return cost::Profile(analytic_profile_spec(model, cluster, options));
}

}  // namespace sluice::search
