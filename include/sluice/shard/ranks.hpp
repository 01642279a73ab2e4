#pragma once
// What a trainer needs to run an iteration plan: the global rank of every (pipeline, stage, TP shard) of the
// chosen strategy, and the process groups to create. The ranks are shard::place's, so the pull and push plans
// move parameters between the same GPUs that the plan runs on.
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/shard/placement.hpp"

namespace sluice::shard {

// The groups every rank of a strategy joins. Each group lists global ranks; pipelines are in plan order.
struct ProcessGroups {
  std::vector<std::vector<int>> tp;  // per (plan pipeline, stage): its TP group, shard 0 first
  // Per (plan pipeline, TP shard): the ranks of that shard, stage 0 first; consecutive ranks are the send/recv
  // neighbour pairs of pipeline parallelism.
  std::vector<std::vector<int>> pp;
  // Per (scheme, stage, TP shard), schemes in the strategy's canonical order: the ranks holding that stage and
  // shard in every pipeline of the scheme, which all-reduce their gradients together (one rank when the scheme
  // has one pipeline).
  std::vector<std::vector<int>> dp;
  friend bool operator==(const ProcessGroups&, const ProcessGroups&) = default;
};

struct RankPlacement {
  Placement placement;  // shard::place's: pipelines in the strategy's canonical order
  int gpus_per_node = 8;
  bool tp_within_node = true;
  // plan_order[j]: the placement pipeline that runs pipeline j of an IterationPlan (MaxLen order, as
  // Profile::pipelines gives it). The c-th pipeline of a scheme in plan order is its c-th in placement order.
  std::vector<std::size_t> plan_order;
  ProcessGroups groups;
  friend bool operator==(const RankPlacement&, const RankPlacement&) = default;
};

namespace detail {

// The plan-order to placement-order map: both orders keep the copies of one scheme in sequence.
inline std::vector<std::size_t> plan_order(const Placement& placement, const std::vector<Pipeline>& planned) {
  std::map<Scheme, std::vector<std::size_t>> copies;
  for (std::size_t p = 0; p < placement.pipelines.size(); ++p) copies[placement.pipelines[p].scheme].push_back(p);
  std::map<Scheme, std::size_t> used;
  std::vector<std::size_t> order;
  for (const Pipeline& pipeline : planned) {
    const auto it = copies.find(pipeline.scheme);
    sluice::require(it != copies.end() && used[pipeline.scheme] < it->second.size(), "rank placement: scheme ",
                    pipeline.scheme.name(), " has more pipelines in the plan than in the placement");
    order.push_back(it->second[used[pipeline.scheme]++]);
  }
  return order;
}

inline ProcessGroups process_groups(const Placement& placement, const std::vector<std::size_t>& order) {
  ProcessGroups groups;
  for (const std::size_t p : order) {
    const PipelinePlacement& pipeline = placement.pipelines[p];
    for (const Stage& stage : pipeline.stages) groups.tp.push_back(stage.ranks);
    for (std::size_t t = 0; t < static_cast<std::size_t>(pipeline.scheme.tp()); ++t) {
      std::vector<int> ranks;
      for (const Stage& stage : pipeline.stages) ranks.push_back(stage.ranks[t]);
      groups.pp.push_back(std::move(ranks));
    }
  }
  // Placement order is canonical, so each scheme's pipelines are adjacent.
  for (std::size_t first = 0; first < placement.pipelines.size();) {
    const Scheme& scheme = placement.pipelines[first].scheme;
    std::size_t last = first;
    while (last < placement.pipelines.size() && placement.pipelines[last].scheme == scheme) ++last;
    for (std::size_t s = 0; s < static_cast<std::size_t>(scheme.pp()); ++s)
      for (std::size_t t = 0; t < static_cast<std::size_t>(scheme.tp()); ++t) {
        std::vector<int> ranks;
        for (std::size_t p = first; p < last; ++p) ranks.push_back(placement.pipelines[p].stages[s].ranks[t]);
        groups.dp.push_back(std::move(ranks));
      }
    first = last;
  }
  return groups;
}

}  // namespace detail

// The ranks of `strategy` on the profile's cluster, stages over the profile's model layers, nodes of the
// profile's gpus_per_node; a TP group within a node unless `tp_within_node` is false.
inline RankPlacement rank_placement(const Strategy& strategy, const cost::Profile& profile,
                                    bool tp_within_node = true) {
  const int per_node = profile.spec().gpus_per_node;
  Placement placement = place(strategy, profile.gpus(), profile.spec().model.layers,
                              {.gpus_per_node = per_node, .tp_within_node = tp_within_node});
  std::vector<std::size_t> order = detail::plan_order(placement, profile.pipelines(strategy));
  ProcessGroups groups = detail::process_groups(placement, order);
  return {std::move(placement), per_node, tp_within_node, std::move(order), std::move(groups)};
}

// Every GPU holds at most one (pipeline, stage, TP shard); the placement runs `strategy` (its pipelines in
// canonical order); plan_order maps the profile's MaxLen order onto it; TP groups of at most gpus_per_node GPUs
// sit inside one node when tp_within_node; the groups are the placement's. Raises invalid_plan.
inline void validate(const RankPlacement& ranks, const Strategy& strategy, const cost::Profile& profile) {
  using detail::check_plan;
  validate(ranks.placement);
  check_plan(ranks.gpus_per_node >= 1, "rank placement: gpus_per_node ", ranks.gpus_per_node, " must be >= 1");
  std::vector<Scheme> expected;
  for (const StrategyPart& part : strategy.parts())
    for (int copy = 0; copy < part.pipelines; ++copy) expected.push_back(part.scheme);
  check_plan(ranks.placement.pipelines.size() == expected.size(), "rank placement: has ",
             ranks.placement.pipelines.size(), " pipelines, strategy ", strategy.name(), " has ", expected.size());
  for (std::size_t p = 0; p < expected.size(); ++p)
    check_plan(ranks.placement.pipelines[p].scheme == expected[p], "rank placement: pipeline ", p, " is ",
               ranks.placement.pipelines[p].scheme.name(), ", strategy ", strategy.name(), " has ",
               expected[p].name(), " there");
  const std::vector<Pipeline> planned = profile.pipelines(strategy);
  check_plan(ranks.plan_order == detail::plan_order(ranks.placement, planned),
             "rank placement: plan_order does not map the plan's MaxLen order onto the placement");
  if (ranks.tp_within_node)
    for (std::size_t p = 0; p < ranks.placement.pipelines.size(); ++p)
      for (const Stage& stage : ranks.placement.pipelines[p].stages) {
        if (static_cast<int>(stage.ranks.size()) > ranks.gpus_per_node) continue;
        for (const int rank : stage.ranks)
          check_plan(rank / ranks.gpus_per_node == stage.ranks.front() / ranks.gpus_per_node,
                     "rank placement: pipeline ", p, " has a TP group with ranks ", stage.ranks.front(), " and ", rank,
                     " on different nodes of ", ranks.gpus_per_node, " GPUs");
      }
  check_plan(ranks.groups == detail::process_groups(ranks.placement, ranks.plan_order),
             "rank placement: process groups differ from those of the placement");
}

}  // namespace sluice::shard
