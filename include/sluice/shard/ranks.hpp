#pragma once
// What a trainer needs to run an iteration plan: the global rank of every (pipeline, stage, CP rank, TP shard) of
// the chosen strategy, and the process groups to create. The ranks are shard::place's, so the pull and push plans
// move parameters between the same GPUs that the plan runs on.
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/shard/placement.hpp"

namespace sluice::shard {

// The groups every rank of a strategy joins. Each group lists global ranks; pipelines are in plan order.
struct ProcessGroups {
  std::vector<std::vector<int>> tp;  // per (plan pipeline, stage, CP rank): its TP group, shard 0 first
  // Per (plan pipeline, CP rank, TP shard): the ranks of that shard, stage 0 first; consecutive ranks are the
  // send/recv neighbour pairs of pipeline parallelism.
  std::vector<std::vector<int>> pp;
  // Per (scheme, stage, TP shard), schemes in placement order: the ranks holding that stage and
  // shard in every pipeline of the scheme and every CP rank, pipeline by pipeline, which all-reduce their
  // gradients together, as Megatron-LM does over DP × CP (one rank when the scheme has one pipeline and no CP).
  std::vector<std::vector<int>> dp;
  // Per (plan pipeline with CP, stage, TP shard): the C ranks that share its sequences, CP rank 0 first. Empty
  // when no scheme has CP, so that a strategy without it has the groups it always had.
  std::vector<std::vector<int>> cp;
  friend bool operator==(const ProcessGroups&, const ProcessGroups&) = default;
};

struct RankPlacement {
  Placement placement;  // shard::place's: by stage width, each scheme's copies side by side
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

// Stage ranks are CP-major: CP rank c's TP shard t is ranks[c·TP + t].
inline ProcessGroups process_groups(const Placement& placement, const std::vector<std::size_t>& order) {
  ProcessGroups groups;
  for (const std::size_t p : order) {
    const PipelinePlacement& pipeline = placement.pipelines[p];
    const auto tp = static_cast<std::size_t>(pipeline.scheme.tp());
    const auto cp = static_cast<std::size_t>(pipeline.scheme.cp());
    for (const Stage& stage : pipeline.stages)
      for (std::size_t c = 0; c < cp; ++c)
        groups.tp.emplace_back(stage.ranks.begin() + static_cast<std::ptrdiff_t>(c * tp),
                               stage.ranks.begin() + static_cast<std::ptrdiff_t>((c + 1) * tp));
    if (cp > 1)
      for (const Stage& stage : pipeline.stages)
        for (std::size_t t = 0; t < tp; ++t) {
          std::vector<int> ranks;
          for (std::size_t c = 0; c < cp; ++c) ranks.push_back(stage.ranks[c * tp + t]);
          groups.cp.push_back(std::move(ranks));
        }
    for (std::size_t i = 0; i < cp * tp; ++i) {
      std::vector<int> ranks;
      for (const Stage& stage : pipeline.stages) ranks.push_back(stage.ranks[i]);
      groups.pp.push_back(std::move(ranks));
    }
  }
  // place() keeps each scheme's pipelines side by side.
  for (std::size_t first = 0; first < placement.pipelines.size();) {
    const Scheme& scheme = placement.pipelines[first].scheme;
    std::size_t last = first;
    while (last < placement.pipelines.size() && placement.pipelines[last].scheme == scheme) ++last;
    const auto tp = static_cast<std::size_t>(scheme.tp());
    for (std::size_t s = 0; s < static_cast<std::size_t>(scheme.pp()); ++s)
      for (std::size_t t = 0; t < tp; ++t) {
        std::vector<int> ranks;
        for (std::size_t p = first; p < last; ++p)
          for (std::size_t c = 0; c < static_cast<std::size_t>(scheme.cp()); ++c)
            ranks.push_back(placement.pipelines[p].stages[s].ranks[c * tp + t]);
        groups.dp.push_back(std::move(ranks));
      }
    first = last;
  }
  return groups;
}

}  // namespace detail

// The ranks of `strategy` on the profile's cluster for a model of `layers` layers placed as `options` says (its
// nodes, its stages' layers): another model than the profile's, as the reference executor trains.
inline RankPlacement rank_placement(const Strategy& strategy, const cost::Profile& profile, int layers,
                                    const PlacementOptions& options) {
  Placement placement = place(strategy, profile.gpus(), layers, options);
  std::vector<std::size_t> order = detail::plan_order(placement, profile.pipelines(strategy));
  ProcessGroups groups = detail::process_groups(placement, order);
  return {std::move(placement), options.gpus_per_node, options.tp_within_node, std::move(order), std::move(groups)};
}

// The same with stages over the profile's model layers, nodes of the profile's gpus_per_node; a stage's TP·C ranks
// within a node (or, more than a node, its TP groups) unless `tp_within_node` is false.
inline RankPlacement rank_placement(const Strategy& strategy, const cost::Profile& profile,
                                    bool tp_within_node = true) {
  return rank_placement(strategy, profile, profile.spec().model.layers,
                        {.gpus_per_node = profile.spec().gpus_per_node, .tp_within_node = tp_within_node});
}

// The ranks of a flex CP domain (plan::FlexDomain): `domain`, replicas of one ⟨TP, PP⟩ scheme, whose units
// re-form per micro-batch into CP groups of aligned units [f, f + d) within each stage. The domain's degrees are
// costed as CP stages, a group's d·TP GPUs contiguous and inside one node where they fit, so the domain is placed
// as the one CP pipeline ⟨TP, CP = units, PP⟩, unit u its CP rank u (that pipeline's scheme names the ring kind,
// which moves no rank). groups.cp then holds, per (stage, TP shard), every unit's rank in unit order: the pool that
// each group takes its ranks from. Placing the replicas pipeline by pipeline, as rank_placement(domain) does,
// would split a group of a pipelined base across nodes that its cost does not charge. `layers` and `options`: the
// model's layers and how the placement splits them into stages and nodes.
inline RankPlacement flex_domain_ranks(const Strategy& domain, const cost::Profile& profile, int layers,
                                       const PlacementOptions& options) {
  sluice::require(domain.parts().size() == 1 && domain.parts().front().scheme.is_base(),
                  "flex domain ranks: ", domain.name(), " is not replicas of one ⟨TP, PP⟩ scheme");
  const Scheme& base = domain.parts().front().scheme;
  const int units = domain.parts().front().pipelines;
  const Scheme stage_wide = units == 1 ? base
                                       : Scheme({.tp = base.tp(),
                                                 .pp = base.pp(),
                                                 .cp = units,
                                                 .cp_kind = CpKind::ring,
                                                 .ulysses = 0,
                                                 .recompute = Recompute::none});
  Placement placement = place(Strategy({{stage_wide, 1}}), profile.gpus(), layers, options);
  std::vector<std::size_t> order{0};
  ProcessGroups groups = detail::process_groups(placement, order);
  return {std::move(placement), options.gpus_per_node, options.tp_within_node, std::move(order), std::move(groups)};
}

// flex_domain_ranks on the profile's model layers and nodes.
inline RankPlacement flex_domain_ranks(const Strategy& domain, const cost::Profile& profile,
                                       bool tp_within_node = true) {
  return flex_domain_ranks(domain, profile, profile.spec().model.layers,
                           {.gpus_per_node = profile.spec().gpus_per_node, .tp_within_node = tp_within_node});
}

// Every GPU holds at most one (pipeline, stage, CP rank, TP shard); the placement runs `strategy` (every copy of
// a scheme beside the others); plan_order maps the profile's MaxLen order onto it; when tp_within_node, a stage of
// at most gpus_per_node GPUs sits inside one node, and in a larger one each TP group of at most gpus_per_node does;
// the groups are the placement's. Raises invalid_plan.
inline void validate(const RankPlacement& ranks, const Strategy& strategy, const cost::Profile& profile) {
  using detail::check_plan;
  validate(ranks.placement);
  check_plan(ranks.gpus_per_node >= 1, "rank placement: gpus_per_node ", ranks.gpus_per_node, " must be >= 1");
  const std::vector<PipelinePlacement>& pipelines = ranks.placement.pipelines;
  check_plan(static_cast<std::int64_t>(pipelines.size()) == strategy.pipeline_count(), "rank placement: has ",
             pipelines.size(), " pipelines, strategy ", strategy.name(), " has ", strategy.pipeline_count());
  // place() orders the schemes by stage width, which may differ from the strategy's order; what the groups need
  // is every copy of a scheme beside the others.
  std::map<Scheme, std::size_t> unplaced;
  for (const StrategyPart& part : strategy.parts()) unplaced[part.scheme] = static_cast<std::size_t>(part.pipelines);
  for (std::size_t first = 0; first < pipelines.size();) {
    const Scheme& scheme = pipelines[first].scheme;
    std::size_t last = first;
    while (last < pipelines.size() && pipelines[last].scheme == scheme) ++last;
    const auto it = unplaced.find(scheme);
    check_plan(it != unplaced.end() && it->second == last - first, "rank placement: pipeline ", first, " is ",
               scheme.name(), ", the first of ", last - first, " side by side; strategy ", strategy.name(), " has ",
               it == unplaced.end() ? 0 : it->second, " of it, each copy beside the others");
    unplaced.erase(it);
    first = last;
  }
  const std::vector<Pipeline> planned = profile.pipelines(strategy);
  check_plan(ranks.plan_order == detail::plan_order(ranks.placement, planned),
             "rank placement: plan_order does not map the plan's MaxLen order onto the placement");
  if (ranks.tp_within_node)
    for (std::size_t p = 0; p < ranks.placement.pipelines.size(); ++p)
      for (const Stage& stage : ranks.placement.pipelines[p].stages) {
        // The whole stage when it fits in a node, else each TP group that does.
        const auto tp = static_cast<std::size_t>(ranks.placement.pipelines[p].scheme.tp());
        const std::size_t group = static_cast<int>(stage.ranks.size()) <= ranks.gpus_per_node ? stage.ranks.size() : tp;
        if (static_cast<int>(group) > ranks.gpus_per_node) continue;
        for (std::size_t i = 0; i < stage.ranks.size(); ++i) {
          const int first = stage.ranks[i - i % group];
          check_plan(stage.ranks[i] / ranks.gpus_per_node == first / ranks.gpus_per_node, "rank placement: pipeline ",
                     p, " has a ", group == tp ? "TP group" : "stage", " with ranks ", first, " and ", stage.ranks[i],
                     " on different nodes of ", ranks.gpus_per_node, " GPUs");
        }
      }
  check_plan(ranks.groups == detail::process_groups(ranks.placement, ranks.plan_order),
             "rank placement: process groups differ from those of the placement");
}

}  // namespace sluice::shard
