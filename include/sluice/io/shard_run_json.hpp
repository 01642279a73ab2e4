#pragma once
// JSON for what `sluice shard --json` prints: "sluice.shard_run" (version 1, its CP variant 2), a ShardRun built by
// shard_run and written with io::to_document. With --plans it holds the placement, the optimizer layout and the pull
// and push plans, each a whole document of its own. Its reader, io::from_document, checks every member and the
// invariants between members that cost nothing to check.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "sluice/core/strategy.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"

namespace sluice::io {

// One layer block of a shard run: its layers and the mutual slice granularity of each plan.
struct ShardRunBlock {
  int layer_begin = 0;
  int layer_end = 0;
  std::int64_t pull_granularity = 0;
  std::int64_t push_granularity = 0;
  friend bool operator==(const ShardRunBlock&, const ShardRunBlock&) = default;
};

// What `sluice shard` reports: one strategy's pull and push plans, counted and costed; with --plans, the plans.
struct ShardRun {
  std::int64_t gpus = 0;
  Strategy strategy;
  std::optional<Strategy> previous;
  shard::Model model;
  shard::Cluster cluster;
  std::int64_t grid = 0;
  int pipelines = 0;
  std::vector<ShardRunBlock> blocks;
  std::size_t pull_sends = 0;
  std::size_t pull_local_moves = 0;
  std::size_t push_sends = 0;
  std::size_t push_local_moves = 0;
  std::size_t rs_groups = 0;
  shard::ShardCost cost;
  // The full plans: all four or none.
  std::optional<shard::Placement> placement;
  std::optional<shard::OptimizerLayout> layout;
  std::optional<shard::PullPlan> pull;
  std::optional<shard::PushPlan> push;
  friend bool operator==(const ShardRun&, const ShardRun&) = default;
};

// The report of a pull and a push planned for `strategy`; `with_plans` keeps the plans themselves.
inline ShardRun shard_run(std::int64_t gpus, const Strategy& strategy, const std::optional<Strategy>& previous,
                          const shard::Model& model, const shard::Cluster& cluster, const shard::Placement& placement,
                          const shard::OptimizerLayout& layout, const shard::PullPlan& pull,
                          const shard::PushPlan& push, bool with_plans) {
  ShardRun run{.gpus = gpus,
               .strategy = strategy,
               .previous = previous,
               .model = model,
               .cluster = cluster,
               .grid = push.grid,
               .pipelines = push.pipelines,
               .blocks = {},
               .pull_sends = pull.sends.size(),
               .pull_local_moves = pull.local_moves.size(),
               .push_sends = push.sends.size(),
               .push_local_moves = push.local_moves.size(),
               .rs_groups = push.rs_groups.size(),
               .cost = shard::plan_cost(pull, push, cluster),
               .placement = {},
               .layout = {},
               .pull = {},
               .push = {}};
  for (std::size_t b = 0; b < pull.blocks.size(); ++b)
    run.blocks.push_back({pull.blocks[b].layer_begin, pull.blocks[b].layer_end, pull.blocks[b].granularity,
                          push.blocks.at(b).granularity});
  if (with_plans) {
    run.placement = placement;
    run.layout = layout;
    run.pull = pull;
    run.push = push;
  }
  return run;
}

SLUICE_IO_DOCUMENT(ShardRun, "sluice.shard_run", 1);

template <>
struct record<ShardRunBlock> {
  using T = ShardRunBlock;
  static constexpr std::string_view name = "shard run block";
  static constexpr auto fields = std::tuple{SLUICE_IO_RANGE(layers, layer_begin, layer_end),
                                            SLUICE_IO_MEMBERS(pull_granularity, push_granularity)};
  static void check(const T& block) {
    sluice::require(0 <= block.layer_begin && block.layer_begin < block.layer_end, name,
                    ": field 'layers' must be [begin, end) with 0 <= begin < end, got [", block.layer_begin, ", ",
                    block.layer_end, "]");
    sluice::require(block.pull_granularity >= 1 && block.push_granularity >= 1, name, ": granularities must be >= 1");
  }
};

// Plans are whole documents of their own, so that each can be cut out and read alone.
template <>
struct record<ShardRun> {
  using T = ShardRun;
  static constexpr std::string_view name = "shard run";
  static constexpr auto fields =
      std::tuple{SLUICE_IO_MEMBERS(gpus, strategy, previous, model, cluster, grid, pipelines, blocks, pull_sends,
                                   pull_local_moves, push_sends, push_local_moves, rs_groups, cost),
                 document_member("placement", &T::placement, Presence::omitted_when_empty),
                 document_member("layout", &T::layout, Presence::omitted_when_empty),
                 document_member("pull", &T::pull, Presence::omitted_when_empty),
                 document_member("push", &T::push, Presence::omitted_when_empty)};
  static void check(const T& run) {
    sluice::require(run.gpus >= 1 && run.gpus <= sluice::shard::max_gpus, name, ": field 'gpus' must be in [1, ",
                    sluice::shard::max_gpus, "], got ", run.gpus);
    sluice::require(run.cluster.gpus_per_node <= run.gpus, name, ": cluster.gpus_per_node ", run.cluster.gpus_per_node,
                    " exceeds gpus ", run.gpus);
    sluice::require(run.grid >= 1 && run.grid <= run.gpus, name, ": field 'grid' must be in [1, ", run.gpus, "], got ",
                    run.grid);
    sluice::require(run.pipelines >= 1 && run.pipelines <= run.gpus, name, ": field 'pipelines' must be in [1, ",
                    run.gpus, "], got ", run.pipelines);
    // The blocks cut the model's layers in order, without gaps.
    int layer = 0;
    for (std::size_t b = 0; b < run.blocks.size(); ++b) {
      sluice::require(run.blocks[b].layer_begin == layer, name, ": field 'blocks'[", b, "] starts at layer ",
                      run.blocks[b].layer_begin, ", expected ", layer);
      layer = run.blocks[b].layer_end;
    }
    sluice::require(layer == run.model.layers, name, ": field 'blocks' cover ", layer, " layers, the model has ",
                    run.model.layers);
    const int plans = int{run.placement.has_value()} + int{run.layout.has_value()} + int{run.pull.has_value()} +
                      int{run.push.has_value()};
    sluice::require(plans == 0 || plans == 4, name, ": 'placement', 'layout', 'pull' and 'push' go together, got ",
                    plans, " of them");
    if (run.pull) {
      sluice::require(run.pull->sends.size() == run.pull_sends && run.pull->local_moves.size() == run.pull_local_moves,
                      name, ": field 'pull' does not hold the counted sends and local moves");
      sluice::require(run.push->sends.size() == run.push_sends &&
                          run.push->local_moves.size() == run.push_local_moves &&
                          run.push->rs_groups.size() == run.rs_groups,
                      name, ": field 'push' does not hold the counted sends, local moves and groups");
    }
  }
};
SLUICE_IO_DOCS(ShardRun, {"previous", "The strategy whose layout the optimizer keeps; empty: fully sharded"},
               {"placement", "Empty unless the report holds the full plans (all four or none)"});
}  // namespace sluice::io
