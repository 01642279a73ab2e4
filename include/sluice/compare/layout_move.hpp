#pragma once
// What HotSPa's switches between its length ranges' strategies cost, with shard::'s α–β model (LNK) on the
// profile's cluster. sluice's own per-iteration pull and push are the plan's (plan/layout_moves.hpp).
#include "sluice/compare/options.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/plan/layout_moves.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"

namespace sluice::compare {

// What running a range on `to` adds when the optimizer states stay in `home`'s layout (shard::switching_cost);
// nothing when `to` is `home`. HotSPa switches between its ranges, so the whole move is exposed.
inline double switching_seconds(const Options& options, const Strategy& home, const Strategy& to) {
  if (to == home) return 0;
  const shard::Cluster cluster = plan::cluster_of(options.profile);
  return plan::pull_and_push(shard::switching_cost(home, to, options.profile.gpus(),
                                                   shard::llama_like(options.profile.spec().model), cluster,
                                                   {.gpus_per_node = cluster.gpus_per_node}));
}

}  // namespace sluice::compare
