#pragma once
// What an iteration on a candidate strategy is charged for moving parameters and gradients between layouts
// (Hydraulis §5): the optimizer states stay fully sharded over every GPU, each iteration pulls the parameters
// into the chosen strategy's layout and pushes its gradients back, layer by layer under the computation. It is
// charged what that costs beyond the all-gather a static strategy's sharded states need anyway. The seconds come
// from shard::'s α–β model (LNK) on the profile's cluster; how much of them a plan is charged is the caller's
// choice, LayoutMoves.
#include <algorithm>
#include <limits>
#include <string_view>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"

namespace sluice::plan {

// How much of a candidate's pull and push its plan is charged.
enum class LayoutMoves {
  none,     // nothing: the planner sees computation alone
  exposed,  // what no overlap can hide: the first layer's pull and the last layer's push (exposed_layout_move)
  all,      // the whole move, as if nothing overlapped
};

inline constexpr NameTable<LayoutMoves, 3> layout_moves_names{
    {{LayoutMoves::none, "none"}, {LayoutMoves::exposed, "exposed"}, {LayoutMoves::all, "all"}}};

constexpr std::string_view name(LayoutMoves moves) { return name_in(layout_moves_names, moves); }

// Raises invalid_input naming `what` unless `text` is one of the names.
inline LayoutMoves layout_moves_from(std::string_view text, std::string_view what = "layout moves") {
  return value_in(layout_moves_names, text, what);
}

// The links of the profile's cluster: its GPUs per node, cost::Links' defaults.
inline shard::Cluster cluster_of(const cost::Profile& profile) {
  shard::Cluster cluster;
  cluster.gpus_per_node = profile.spec().gpus_per_node;
  return cluster;
}

// The α–β seconds of a pull of the parameters into `cost`'s strategy and the push of its gradients back. The
// reduce-scatter is left out: every system synchronises gradients once and none is charged for it.
inline double pull_and_push(const shard::ShardCost& cost) { return cost.pull.seconds + cost.push.seconds; }

// Per candidate, the seconds its pull and push take beyond what a static system on it pays, before any overlap:
// from the optimizer states sharded over all the profile's GPUs (shard::sharded_layout) less from the
// candidate's own layout (shard::aligned_layout), whose pull is the all-gather that every system with sharded
// states does after its step and none is charged, as it is part of synchronising gradients. Hydraulis (§8,
// Table 1) weighs its pull and push the same way, against a homogeneous strategy's all-gather and
// reduce-scatter. The profile's model as LLaMA-like layers.
inline std::vector<double> layout_move_seconds(const cost::Profile& profile, Span<const Strategy> candidates) {
  const shard::Model model = shard::llama_like(profile.spec().model);
  const shard::OptimizerLayout layout = shard::sharded_layout(profile.gpus(), model.layers);
  const shard::Cluster cluster = cluster_of(profile);
  const shard::PlacementOptions placing{.gpus_per_node = cluster.gpus_per_node};
  std::vector<double> seconds;
  seconds.reserve(candidates.size());
  for (const Strategy& candidate : candidates) {
    const double moved = pull_and_push(shard::iteration_cost(layout, candidate, model, cluster, placing));
    const double own =
        pull_and_push(shard::switching_cost(candidate, candidate, profile.gpus(), model, cluster, placing));
    seconds.push_back(std::max(0.0, moved - own));
  }
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

// What a plan on a candidate whose move takes `move` seconds is charged under `policy`, before its compute is
// known: exposed charges the part no compute hides.
inline double charged_layout_move(LayoutMoves policy, double move, int layers) {
  switch (policy) {
    case LayoutMoves::none: return 0;
    case LayoutMoves::exposed: return exposed_layout_move(move, std::numeric_limits<double>::infinity(), layers);
    case LayoutMoves::all: return move;
  }
  return move;
}

}  // namespace sluice::plan
