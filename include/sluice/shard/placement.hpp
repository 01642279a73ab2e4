#pragma once
// Where a strategy runs (which rank holds which layers and which TP fraction) and where the optimizer
// states live (which rank owns which segment of every parameter). Pull and push plans go between the two.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/strategy.hpp"

namespace sluice::shard {

// Limits of the shard planner (docs/shard.md, "Limits"). The pull moves about N²/TP pieces, so the cluster
// size is bounded where the benchmarked strategy mix (TP 8 and 16) still plans in seconds; any plan, however
// many GPUs, is bounded by its piece count, checked before anything of that size is allocated.
inline constexpr std::int64_t max_gpus = std::int64_t{1} << 14;
// Pieces of one pull or push plan before adjacent slices are merged (about 56 bytes each once planned), and
// owner entries of an aligned layout.
inline constexpr std::int64_t max_plan_pieces = std::int64_t{1} << 26;

// One pipeline stage: layers [layer_begin, layer_end) on TP·C GPUs, CP-major: CP rank c's TP rank t is GPU
// ranks[c·TP + t] and holds the fraction [t/TP, (t+1)/TP) of every parameter of those layers (CP ranks share
// the tokens, not the parameters).
struct Stage {
  int layer_begin = 0;
  int layer_end = 0;
  std::vector<int> ranks;
  friend bool operator==(const Stage&, const Stage&) = default;
};

struct PipelinePlacement {
  Scheme scheme;
  std::vector<Stage> stages;  // pp of them, in pipeline order
  friend bool operator==(const PipelinePlacement&, const PipelinePlacement&) = default;
};

struct Placement {
  std::int64_t gpus = 0;  // cluster size N; ranks not in any stage are idle in propagation
  int layers = 0;
  std::vector<PipelinePlacement> pipelines;
  friend bool operator==(const Placement&, const Placement&) = default;
};

enum class PipelineOrder { tp_descending, tp_ascending };
inline constexpr NameTable<PipelineOrder, 2> pipeline_order_names{
    {{PipelineOrder::tp_descending, "tp_descending"}, {PipelineOrder::tp_ascending, "tp_ascending"}}};

struct PlacementOptions {
  int gpus_per_node = 8;
  // A stage's TP·C GPUs never straddle a node when they fit in one; a larger stage starts on a node boundary
  // and each of its TP groups follows the same rule (a TP group larger than a node starts on a boundary). The
  // skipped ranks stay idle.
  bool tp_within_node = true;
  PipelineOrder order = PipelineOrder::tp_descending;
  // Layers per stage for schemes of a given PP degree; absent degrees split evenly (stage s holds
  // [floor(s·L/PP), floor((s+1)·L/PP))).
  std::map<int, std::vector<int>> stage_layers = {};
};

// The checks that need no model: place checks the stage sums against its layers.
inline void require_valid(const PlacementOptions& options) {
  sluice::require(options.gpus_per_node >= 1, "shard placement: gpus_per_node must be >= 1, got ",
                  options.gpus_per_node);
  for (const auto& [pp, counts] : options.stage_layers) {
    sluice::require(static_cast<int>(counts.size()) == pp, "shard placement: stage_layers for pp ", pp, " has ",
                    counts.size(), " entries");
    for (const int count : counts)
      sluice::require(count >= 1, "shard placement: stage_layers for pp ", pp, " has a stage of ", count, " layers");
  }
}

// Pipelines take contiguous rank blocks in `order` of their stages' width (ties keep the strategy's canonical
// order), stage after
// stage, CP rank after CP rank, TP rank after TP rank; only tp_within_node skips ranks. Raises invalid_input
// for bad options, infeasible when the strategy does not fit.
inline Placement place(const Strategy& strategy, std::int64_t gpus, int layers, const PlacementOptions& options = {}) {
  sluice::require(gpus >= 1 && gpus <= max_gpus, "shard placement: gpus must be in [1, ", max_gpus, "], got ", gpus);
  sluice::require(layers >= 1, "shard placement: layers must be >= 1, got ", layers);
  require_valid(options);
  strategy.require_fits(gpus);
  for (const auto& [pp, counts] : options.stage_layers) {
    const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
    sluice::require(total == layers, "shard placement: stage_layers for pp ", pp, " sum to ", total, ", the model has ",
                    layers, " layers");
  }
  // By stage width TP·C, so that blocks of powers of two fill the nodes without a gap (a CP stage is wider than
  // its TP); with CP 1 the width is the TP and the canonical order is kept.
  std::vector<StrategyPart> parts = strategy.parts();
  std::stable_sort(parts.begin(), parts.end(), [&](const StrategyPart& x, const StrategyPart& y) {
    return options.order == PipelineOrder::tp_ascending ? x.scheme.stage_gpus() < y.scheme.stage_gpus()
                                                        : x.scheme.stage_gpus() > y.scheme.stage_gpus();
  });

  Placement placement{gpus, layers, {}};
  const std::int64_t node = options.gpus_per_node;
  std::int64_t cursor = 0;
  // Moves the cursor so that `width` ranks from it do not straddle a node, or, wider than a node, start one.
  const auto align = [&](std::int64_t width) {
    if (!options.tp_within_node) return;
    const bool straddles = width <= node ? cursor / node != (cursor + width - 1) / node : cursor % node != 0;
    if (straddles) cursor = (cursor / node + 1) * node;
  };
  for (const StrategyPart& part : parts) {
    const int pp = part.scheme.pp();
    const int tp = part.scheme.tp();
    sluice::require(pp <= layers, "shard placement: scheme ", part.scheme.name(), " has more stages than the ", layers,
                    " layers");
    std::vector<int> bounds(static_cast<std::size_t>(pp) + 1, 0);
    const auto custom = options.stage_layers.find(pp);
    for (int s = 0; s < pp; ++s)
      bounds[static_cast<std::size_t>(s) + 1] =
          custom != options.stage_layers.end()
              ? bounds[static_cast<std::size_t>(s)] + custom->second[static_cast<std::size_t>(s)]
              : static_cast<int>(std::int64_t{s + 1} * layers / pp);
    for (int copy = 0; copy < part.pipelines; ++copy) {
      PipelinePlacement pipeline{part.scheme, {}};
      for (int s = 0; s < pp; ++s) {
        Stage stage{bounds[static_cast<std::size_t>(s)], bounds[static_cast<std::size_t>(s) + 1], {}};
        align(part.scheme.stage_gpus());
        for (int c = 0; c < part.scheme.cp(); ++c) {
          align(tp);  // a no-op once the whole stage fits in the node
          if (cursor + tp > gpus)
            throw infeasible(sluice::concat("shard placement: strategy ", strategy.name(), " does not fit ", gpus,
                                            " GPUs", options.tp_within_node ? " keeping TP groups inside nodes" : ""));
          for (int t = 0; t < tp; ++t) stage.ranks.push_back(static_cast<int>(cursor + t));
          cursor += tp;
        }
        pipeline.stages.push_back(std::move(stage));
      }
      placement.pipelines.push_back(std::move(pipeline));
    }
  }
  return placement;
}

namespace detail {
template <class... Parts>
void check_plan(bool condition, Parts&&... parts) {
  if (!condition) throw invalid_plan(sluice::concat(std::forward<Parts>(parts)...));
}
}  // namespace detail

// Every pipeline has PP stages of TP·C ranks; each pipeline's stages tile [0, layers) in order; no rank is used
// twice.
inline void validate(const Placement& placement) {
  using detail::check_plan;
  check_plan(placement.gpus >= 1 && placement.gpus <= max_gpus, "placement: gpus ", placement.gpus, " out of range");
  check_plan(placement.layers >= 1, "placement: layers ", placement.layers, " must be >= 1");
  check_plan(!placement.pipelines.empty(), "placement: has no pipelines");
  std::vector<char> used(static_cast<std::size_t>(placement.gpus), 0);
  for (std::size_t j = 0; j < placement.pipelines.size(); ++j) {
    const PipelinePlacement& pipeline = placement.pipelines[j];
    check_plan(static_cast<int>(pipeline.stages.size()) == pipeline.scheme.pp(), "placement: pipeline ", j, " (",
               pipeline.scheme.name(), ") has ", pipeline.stages.size(), " stages");
    int next = 0;
    for (std::size_t s = 0; s < pipeline.stages.size(); ++s) {
      const Stage& stage = pipeline.stages[s];
      check_plan(stage.layer_begin == next && stage.layer_end > stage.layer_begin, "placement: pipeline ", j, " stage ",
                 s, " holds layers [", stage.layer_begin, ", ", stage.layer_end, "), expected to start at ", next);
      next = stage.layer_end;
      check_plan(static_cast<std::int64_t>(stage.ranks.size()) == pipeline.scheme.stage_gpus(), "placement: pipeline ",
                 j, " stage ", s, " has ", stage.ranks.size(), " ranks, ", pipeline.scheme.name(), " needs ",
                 pipeline.scheme.stage_gpus());
      for (const int rank : stage.ranks) {
        check_plan(rank >= 0 && rank < placement.gpus, "placement: pipeline ", j, " stage ", s, " uses rank ", rank,
                   " outside [0, ", placement.gpus, ")");
        check_plan(!used[static_cast<std::size_t>(rank)], "placement: rank ", rank, " is used twice");
        used[static_cast<std::size_t>(rank)] = 1;
      }
    }
    check_plan(next == placement.layers, "placement: pipeline ", j, " covers layers up to ", next, " of ",
               placement.layers);
  }
}

// The fixed optimizer layout: for the layers of each group, the parameter is split evenly into
// owners.size() segments and segment r lives on GPU owners[r] (a rank may own several segments).
struct OwnerGroup {
  int layer_begin = 0;
  int layer_end = 0;
  std::vector<int> owners;
  friend bool operator==(const OwnerGroup&, const OwnerGroup&) = default;
};

struct OptimizerLayout {
  std::int64_t gpus = 0;
  int layers = 0;
  std::vector<OwnerGroup> groups;  // tile [0, layers) in order
  friend bool operator==(const OptimizerLayout&, const OptimizerLayout&) = default;
};

inline void validate(const OptimizerLayout& layout) {
  using detail::check_plan;
  check_plan(layout.gpus >= 1 && layout.gpus <= max_gpus, "optimizer layout: gpus ", layout.gpus, " out of range");
  check_plan(layout.layers >= 1, "optimizer layout: layers ", layout.layers, " must be >= 1");
  int next = 0;
  for (std::size_t g = 0; g < layout.groups.size(); ++g) {
    const OwnerGroup& group = layout.groups[g];
    check_plan(group.layer_begin == next && group.layer_end > group.layer_begin, "optimizer layout: group ", g,
               " holds layers [", group.layer_begin, ", ", group.layer_end, "), expected to start at ", next);
    next = group.layer_end;
    check_plan(!group.owners.empty(), "optimizer layout: group ", g, " has no owners");
    for (const int rank : group.owners)
      check_plan(rank >= 0 && rank < layout.gpus, "optimizer layout: group ", g, " names rank ", rank, " outside [0, ",
                 layout.gpus, ")");
  }
  check_plan(next == layout.layers, "optimizer layout: groups cover layers up to ", next, " of ", layout.layers);
}

// Hydraulis' layout: every parameter sharded over all N GPUs, segment r on GPU r.
inline OptimizerLayout sharded_layout(std::int64_t gpus, int layers) {
  sluice::require(gpus >= 1 && gpus <= max_gpus, "optimizer layout: gpus must be in [1, ", max_gpus, "], got ", gpus);
  sluice::require(layers >= 1, "optimizer layout: layers must be >= 1, got ", layers);
  std::vector<int> owners(static_cast<std::size_t>(gpus));
  std::iota(owners.begin(), owners.end(), 0);
  return {gpus, layers, {{0, layers, std::move(owners)}}};
}

namespace detail {

// A maximal layer range on which the owner group and every pipeline's stage are constant.
struct Block {
  int layer_begin = 0;
  int layer_end = 0;
  std::size_t group = 0;
  std::vector<const Stage*> stages;  // per pipeline; left empty by block_ranges
};

// The blocks without their stages: O(layers + blocks), so plan sizes can be checked before the blocks'
// blocks × pipelines stage table is built.
inline std::vector<Block> block_ranges(const Placement& placement, const OptimizerLayout* layout) {
  std::vector<char> cut(static_cast<std::size_t>(placement.layers) + 1, 0);
  cut.front() = cut.back() = 1;
  if (layout != nullptr)
    for (const OwnerGroup& group : layout->groups) cut[static_cast<std::size_t>(group.layer_begin)] = 1;
  for (const PipelinePlacement& pipeline : placement.pipelines)
    for (const Stage& stage : pipeline.stages) cut[static_cast<std::size_t>(stage.layer_begin)] = 1;
  std::vector<Block> result;
  std::size_t group = 0;
  int begin = 0;
  for (int layer = 1; layer <= placement.layers; ++layer) {
    if (!cut[static_cast<std::size_t>(layer)]) continue;
    Block block{begin, layer, 0, {}};
    if (layout != nullptr) {
      while (layout->groups[group].layer_end <= begin) ++group;
      block.group = group;
    }
    result.push_back(std::move(block));
    begin = layer;
  }
  return result;
}

inline std::vector<Block> blocks(const Placement& placement, const OptimizerLayout* layout) {
  std::vector<Block> result = block_ranges(placement, layout);
  std::vector<std::size_t> stage_index(placement.pipelines.size(), 0);
  for (Block& block : result) {
    block.stages.reserve(placement.pipelines.size());
    for (std::size_t j = 0; j < placement.pipelines.size(); ++j) {
      const auto& stages = placement.pipelines[j].stages;
      while (stages[stage_index[j]].layer_end <= block.layer_begin) ++stage_index[j];
      block.stages.push_back(&stages[stage_index[j]]);
    }
  }
  return result;
}

// LCM of the TP degrees: the push's TP grid (TPmax when every degree divides it, as powers of two do).
inline std::int64_t tp_grid(const Placement& placement) {
  std::int64_t grid = 1;
  for (const PipelinePlacement& pipeline : placement.pipelines) {
    grid = std::lcm(grid, std::int64_t{pipeline.scheme.tp()});
    sluice::require(grid <= (std::int64_t{1} << 30), "shard: the LCM of the TP degrees exceeds 2^30");
  }
  return grid;
}

// The placement as the pull and push see it: for the parameters a CP rank is a data-parallel replica (it holds
// its TP shard and adds its gradients in), so a pipeline of CP degree C becomes C pipelines of its TP and PP,
// replica c on ranks [c·TP, (c+1)·TP) of every stage (without CP, the pipeline itself). The pull and push
// planners, their validators and costs work on this placement alone.
inline Placement replicas(const Placement& placement) {
  validate(placement);
  Placement result{placement.gpus, placement.layers, {}};
  for (const PipelinePlacement& pipeline : placement.pipelines) {
    const auto tp = static_cast<std::ptrdiff_t>(pipeline.scheme.tp());
    for (std::ptrdiff_t c = 0; c < pipeline.scheme.cp(); ++c) {
      PipelinePlacement replica{pipeline.scheme.base(), {}};
      for (const Stage& stage : pipeline.stages)
        replica.stages.push_back(
            {stage.layer_begin, stage.layer_end, {stage.ranks.begin() + c * tp, stage.ranks.begin() + (c + 1) * tp}});
      result.pipelines.push_back(std::move(replica));
    }
  }
  return result;
}

}  // namespace detail

// The layout a push under `placement` leaves behind when its LNK is pruned: segment u·D + q (of D·G, G the
// LCM of the TP degrees, D the replicas: one per pipeline and CP rank) on replica q's rank holding TP-grid
// segment u. A strategy's own layout: pulling from it for the same placement is an all-gather, pushing into it
// is a reduce-scatter alone.
inline OptimizerLayout aligned_layout(const Placement& placement) {
  const Placement replicated = detail::replicas(placement);
  const std::int64_t grid = detail::tp_grid(replicated);
  const auto pipelines = static_cast<std::int64_t>(replicated.pipelines.size());
  const auto block_count = static_cast<std::int64_t>(detail::block_ranges(replicated, nullptr).size());
  // grid ≤ 2^30, and pipelines and blocks (each starting at a stage) ≤ 2^14: the product fits in 64 bits.
  const std::int64_t owners_listed = block_count * grid * pipelines;
  sluice::require(owners_listed <= max_plan_pieces, "shard aligned layout: ", block_count, " blocks x TP grid ", grid,
                  " x ", pipelines, " pipelines = ", owners_listed, " owner entries, more than the maximum ",
                  max_plan_pieces);
  OptimizerLayout layout{replicated.gpus, replicated.layers, {}};
  for (const detail::Block& block : detail::blocks(replicated, nullptr)) {
    std::vector<int> owners;
    owners.reserve(static_cast<std::size_t>(grid) * block.stages.size());
    for (std::int64_t u = 0; u < grid; ++u)
      for (std::size_t q = 0; q < block.stages.size(); ++q) {
        const std::int64_t tp = replicated.pipelines[q].scheme.tp();
        owners.push_back(block.stages[q]->ranks[static_cast<std::size_t>(u * tp / grid)]);
      }
    if (!layout.groups.empty() && layout.groups.back().owners == owners) {
      layout.groups.back().layer_end = block.layer_end;
    } else {
      layout.groups.push_back({block.layer_begin, block.layer_end, std::move(owners)});
    }
  }
  return layout;
}

}  // namespace sluice::shard
