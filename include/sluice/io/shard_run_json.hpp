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
  std::optional<Strategy> previous;  // the strategy whose layout the optimizer keeps; none: fully sharded
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

template <>
struct document_traits<ShardRun> {
  static constexpr std::string_view format = "sluice.shard_run";
  static constexpr int version = 1;
};

namespace detail {

// A document nested in a report (a plan with its own format and version), read when present.
template <Document T>
std::optional<T> nested_document(const json& in, std::string_view key, std::string_view where) {
  const auto nested = field_or<json>(in, key, json(nullptr), where);
  if (nested.is_null()) return std::nullopt;
  return from_document<T>(nested, sluice::concat(where, ": field '", key, "'"));
}

}  // namespace detail
}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::io::ShardRunBlock> {
  static void to_json(json& out, const sluice::io::ShardRunBlock& block) {
    out = {{"layers", {block.layer_begin, block.layer_end}},
           {"pull_granularity", block.pull_granularity},
           {"push_granularity", block.push_granularity}};
  }
  static sluice::io::ShardRunBlock from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "shard run block";
    const auto [begin, end] = sluice::io::detail::layer_range(in, where);
    sluice::io::ShardRunBlock block{begin, end, field<std::int64_t>(in, "pull_granularity", where),
                                    field<std::int64_t>(in, "push_granularity", where)};
    sluice::require(0 <= begin && begin < end, where,
                    ": field 'layers' must be [begin, end) with 0 <= begin < end, "
                    "got [",
                    begin, ", ", end, "]");
    sluice::require(block.pull_granularity >= 1 && block.push_granularity >= 1, where, ": granularities must be >= 1");
    return block;
  }
};

template <>
struct adl_serializer<sluice::io::ShardRun> {
  static void to_json(json& out, const sluice::io::ShardRun& run) {
    out = {{"gpus", run.gpus},
           {"strategy", run.strategy},
           {"previous", run.previous ? json(*run.previous) : json(nullptr)},
           {"model", run.model},
           {"cluster", run.cluster},
           {"grid", run.grid},
           {"pipelines", run.pipelines},
           {"blocks", run.blocks},
           {"pull_sends", run.pull_sends},
           {"pull_local_moves", run.pull_local_moves},
           {"push_sends", run.push_sends},
           {"push_local_moves", run.push_local_moves},
           {"rs_groups", run.rs_groups},
           {"cost", run.cost}};
    // Plans are whole documents of their own, so that each can be cut out and read alone.
    if (run.placement) out["placement"] = sluice::io::to_document(*run.placement);
    if (run.layout) out["layout"] = sluice::io::to_document(*run.layout);
    if (run.pull) out["pull"] = sluice::io::to_document(*run.pull);
    if (run.push) out["push"] = sluice::io::to_document(*run.push);
  }
  static sluice::io::ShardRun from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::detail::nested_document;
    constexpr std::string_view where = "shard run";
    sluice::io::ShardRun run{.gpus = field<std::int64_t>(in, "gpus", where),
                             .strategy = field<sluice::Strategy>(in, "strategy", where),
                             .previous = field<std::optional<sluice::Strategy>>(in, "previous", where),
                             .model = field<sluice::shard::Model>(in, "model", where),
                             .cluster = field<sluice::shard::Cluster>(in, "cluster", where),
                             .grid = field<std::int64_t>(in, "grid", where),
                             .pipelines = field<int>(in, "pipelines", where),
                             .blocks = field<std::vector<sluice::io::ShardRunBlock>>(in, "blocks", where),
                             .pull_sends = field<std::size_t>(in, "pull_sends", where),
                             .pull_local_moves = field<std::size_t>(in, "pull_local_moves", where),
                             .push_sends = field<std::size_t>(in, "push_sends", where),
                             .push_local_moves = field<std::size_t>(in, "push_local_moves", where),
                             .rs_groups = field<std::size_t>(in, "rs_groups", where),
                             .cost = field<sluice::shard::ShardCost>(in, "cost", where),
                             .placement = nested_document<sluice::shard::Placement>(in, "placement", where),
                             .layout = nested_document<sluice::shard::OptimizerLayout>(in, "layout", where),
                             .pull = nested_document<sluice::shard::PullPlan>(in, "pull", where),
                             .push = nested_document<sluice::shard::PushPlan>(in, "push", where)};
    sluice::require(run.gpus >= 1 && run.gpus <= sluice::shard::max_gpus, where, ": field 'gpus' must be in [1, ",
                    sluice::shard::max_gpus, "], got ", run.gpus);
    sluice::require(run.cluster.gpus_per_node <= run.gpus, where, ": cluster.gpus_per_node ", run.cluster.gpus_per_node,
                    " exceeds gpus ", run.gpus);
    sluice::require(run.grid >= 1 && run.grid <= run.gpus, where, ": field 'grid' must be in [1, ", run.gpus, "], got ",
                    run.grid);
    sluice::require(run.pipelines >= 1 && run.pipelines <= run.gpus, where, ": field 'pipelines' must be in [1, ",
                    run.gpus, "], got ", run.pipelines);
    // The blocks cut the model's layers in order, without gaps.
    int layer = 0;
    for (std::size_t b = 0; b < run.blocks.size(); ++b) {
      sluice::require(run.blocks[b].layer_begin == layer, where, ": field 'blocks'[", b, "] starts at layer ",
                      run.blocks[b].layer_begin, ", expected ", layer);
      layer = run.blocks[b].layer_end;
    }
    sluice::require(layer == run.model.layers, where, ": field 'blocks' cover ", layer, " layers, the model has ",
                    run.model.layers);
    const int plans = int{run.placement.has_value()} + int{run.layout.has_value()} + int{run.pull.has_value()} +
                      int{run.push.has_value()};
    sluice::require(plans == 0 || plans == 4, where, ": 'placement', 'layout', 'pull' and 'push' go together, got ",
                    plans, " of them");
    if (run.pull) {
      sluice::require(run.pull->sends.size() == run.pull_sends && run.pull->local_moves.size() == run.pull_local_moves,
                      where, ": field 'pull' does not hold the counted sends and local moves");
      sluice::require(run.push->sends.size() == run.push_sends &&
                          run.push->local_moves.size() == run.push_local_moves &&
                          run.push->rs_groups.size() == run.rs_groups,
                      where, ": field 'push' does not hold the counted sends, local moves and groups");
    }
    return run;
  }
};

}  // namespace nlohmann
