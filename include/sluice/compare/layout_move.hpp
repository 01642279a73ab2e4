#pragma once
// What moving parameters and gradients between layouts costs the systems that do it, with shard::'s α–β model
// (LNK): HotSPa's switches between its length ranges' strategies, and sluice's per-iteration parameter pull into
// the chosen strategy and gradient push back to the fully sharded optimizer states, less the part that
// Hydraulis §5 hides under computation layer by layer.
#include <algorithm>
#include <span>
#include <vector>

#include "sluice/compare/options.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"

namespace sluice::compare {

namespace detail {

inline shard::Cluster cluster_of(const Options& options) {
  shard::Cluster cluster;
  cluster.gpus_per_node = options.profile.spec().gpus_per_node;
  return cluster;
}

// The α–β seconds of a pull of the parameters into `cost`'s strategy and the push of its gradients back. The
// reduce-scatter is left out: every system synchronises gradients once and none is charged for it.
inline double pull_and_push(const shard::ShardCost& cost) { return cost.pull.seconds + cost.push.seconds; }

}  // namespace detail

// What running a range on `to` adds when the optimizer states stay in `home`'s layout (shard::switching_cost);
// nothing when `to` is `home`. HotSPa switches between its ranges, so the whole move is exposed.
inline double switching_seconds(const Options& options, const Strategy& home, const Strategy& to) {
  if (to == home) return 0;
  const shard::Cluster cluster = detail::cluster_of(options);
  return detail::pull_and_push(shard::switching_cost(home, to, options.profile.gpus(),
                                                     shard::llama_like(options.profile.spec().model), cluster,
                                                     {.gpus_per_node = cluster.gpus_per_node}));
}

// sluice's pull and push per candidate: Hydraulis §5 keeps the optimizer states fully sharded over every GPU
// (shard::sharded_layout) and each iteration pulls the parameters into the chosen strategy's layout and pushes
// its gradients back.
inline std::vector<double> sluice_layout_moves(const Options& options, std::span<const Strategy> candidates) {
  const shard::Model model = shard::llama_like(options.profile.spec().model);
  const shard::OptimizerLayout layout = shard::sharded_layout(options.profile.gpus(), model.layers);
  const shard::Cluster cluster = detail::cluster_of(options);
  std::vector<double> seconds;
  for (const Strategy& candidate : candidates)
    seconds.push_back(detail::pull_and_push(
        shard::iteration_cost(layout, candidate, model, cluster, {.gpus_per_node = cluster.gpus_per_node})));
  return seconds;
}

// The part of a pull-and-push of `move` seconds that an iteration of `compute` seconds cannot hide. Hydraulis
// (§5) pulls layer by layer ahead of the forward pass and pushes each layer's gradients as the backward pass
// produces them. Modelled with the move split evenly over the model's layers and over pull and push: the first
// layer's pull precedes all compute and the last gradients' push follows it; every other layer's share hides
// under the forward pass (the pull, a third of the compute) or the backward pass (the push, two thirds) as far
// as that pass is long enough. Links are taken as free of the pipelines' own traffic.
inline double exposed_layout_move(double move, double compute, int layers) {
  const double half = move / 2;
  const double per_layer = half / layers;
  const double hidden = half - per_layer;
  return 2 * per_layer + std::max(0.0, hidden - compute / 3) + std::max(0.0, hidden - 2 * compute / 3);
}

}  // namespace sluice::compare
