#pragma once
// JSON for the LNK planning types, all version 1: models ("sluice.shard_model"), placements
// ("sluice.placement"), rank placements ("sluice.rank_placement"), optimizer layouts ("sluice.optimizer_layout"),
// pull plans ("sluice.pull_plan") and push plans ("sluice.push_plan"); costs and clusters are written inside other
// documents.
#include <array>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <vector>

#include "sluice/io/core_json.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"
#include "sluice/shard/ranks.hpp"

namespace sluice::io {
SLUICE_IO_DOCUMENT(shard::Model, "sluice.shard_model", 1);
SLUICE_IO_DOCUMENT(shard::Placement, "sluice.placement", 1);
SLUICE_IO_DOCUMENT(shard::RankPlacement, "sluice.rank_placement", 1);
SLUICE_IO_DOCUMENT(shard::OptimizerLayout, "sluice.optimizer_layout", 1);
// Version 1 sent every piece in one message; messages now share equal piece lists.
SLUICE_IO_DOCUMENT(shard::PullPlan, "sluice.pull_plan", 3);
SLUICE_IO_DOCUMENT(shard::PushPlan, "sluice.push_plan", 1);

SLUICE_IO_RECORD(shard::Tensor, "tensor", SLUICE_IO_MEMBERS(name, elements));
SLUICE_IO_RECORD(shard::Stage, "stage", SLUICE_IO_RANGE(layers, layer_begin, layer_end), SLUICE_IO_MEMBERS(ranks));
SLUICE_IO_RECORD(shard::OwnerGroup, "owner group", SLUICE_IO_RANGE(layers, layer_begin, layer_end),
                 SLUICE_IO_MEMBERS(owners));
SLUICE_IO_DOCS(shard::OwnerGroup, {"owners", "Per segment of the layers' parameters, the rank that owns it"});
SLUICE_IO_RECORD(shard::SliceBlock, "slice block", SLUICE_IO_RANGE(layers, layer_begin, layer_end),
                 SLUICE_IO_MEMBERS(granularity));
SLUICE_IO_RECORD(shard::PipelinePlacement, "pipeline", SLUICE_IO_INLINE(scheme), SLUICE_IO_MEMBERS(stages));

template <>
struct record<shard::Model> {
  using T = shard::Model;
  static constexpr std::string_view name = "shard model";
  static constexpr auto fields = std::tuple{SLUICE_IO_DEFAULTED(name), SLUICE_IO_MEMBERS(layers, tensors),
                                            SLUICE_IO_DEFAULTED(param_bytes, grad_bytes)};
  static void check(const T& model) { shard::require_valid(model); }
};

SLUICE_IO_RECORD(shard::Placement, "placement", SLUICE_IO_MEMBERS(gpus, layers, pipelines));

SLUICE_IO_RECORD(shard::OptimizerLayout, "optimizer layout", SLUICE_IO_MEMBERS(gpus, layers, groups));

SLUICE_IO_RECORD(shard::Message, "message", SLUICE_IO_MEMBERS(src, dst, first_piece, piece_count, bytes));

SLUICE_IO_RECORD(shard::PullPlan, "pull plan",
                 SLUICE_IO_MEMBERS(gpus, blocks, pieces, sends, local_moves, send_bytes, local_bytes));

SLUICE_IO_RECORD(shard::RsGroup, "reduce-scatter group", SLUICE_IO_MEMBERS(block, segment, members, bytes));

SLUICE_IO_RECORD(shard::PushPlan, "push plan",
                 SLUICE_IO_MEMBERS(gpus, grid, pipelines, blocks, rs_groups, pieces, sends, local_moves, send_bytes,
                                   local_bytes));

template <>
struct record<shard::LinkBytes> {
  using T = shard::LinkBytes;
  static constexpr std::string_view name = "link bytes";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(local, intra_node, inter_node)};
  static void check(const T& bytes) {
    sluice::require(bytes.local >= 0 && bytes.intra_node >= 0 && bytes.inter_node >= 0, name,
                    ": byte counts must be >= 0");
  }
};

template <>
struct record<shard::PhaseCost> {
  using T = shard::PhaseCost;
  static constexpr std::string_view name = "phase cost";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(bytes, messages, seconds)};
  static void check(const T& phase) {
    sluice::require(phase.messages >= 0, name, ": field 'messages' must be >= 0, got ", phase.messages);
    sluice::require(phase.seconds >= 0, name, ": field 'seconds' must be >= 0, got ", phase.seconds);
  }
};

}  // namespace sluice::io

namespace nlohmann {

// A piece as [block, begin, end].
template <>
struct adl_serializer<sluice::shard::Piece> {
  static void to_json(json& out, const sluice::shard::Piece& piece) { out = {piece.block, piece.begin, piece.end}; }
  static sluice::shard::Piece from_json(const json& in) {
    using sluice::io::as;
    const auto items = as<std::array<json, 3>>(in, "piece [block, begin, end]");
    return {as<int>(items[0], "piece: block"), as<std::int64_t>(items[1], "piece: begin"),
            as<std::int64_t>(items[2], "piece: end")};
  }
};

template <>
struct adl_serializer<sluice::shard::Cluster> {
  static void to_json(json& out, const sluice::shard::Cluster& cluster) {
    out = {{"gpus_per_node", cluster.gpus_per_node},
           {"local", cluster.links.local},
           {"intra_node", cluster.links.intra_node},
           {"inter_node", cluster.links.inter_node}};
  }
  static sluice::shard::Cluster from_json(const json& in) {
    using sluice::io::field_or;
    const sluice::shard::Cluster defaults;
    const sluice::cost::Links& links = defaults.links;
    sluice::shard::Cluster cluster{field_or<int>(in, "gpus_per_node", defaults.gpus_per_node, "cluster"),
                                   {field_or<sluice::cost::Link>(in, "local", links.local, "cluster"),
                                    field_or<sluice::cost::Link>(in, "intra_node", links.intra_node, "cluster"),
                                    field_or<sluice::cost::Link>(in, "inter_node", links.inter_node, "cluster")}};
    sluice::shard::require_valid(cluster);
    return cluster;
  }
};

template <>
struct adl_serializer<sluice::shard::ShardCost> {
  static void to_json(json& out, const sluice::shard::ShardCost& cost) {
    out = {
        {"pull", cost.pull}, {"reduce_scatter", cost.reduce_scatter}, {"push", cost.push}, {"seconds", cost.seconds()}};
  }
  // "seconds" is derived: it must be the three phases' sum, as written.
  static sluice::shard::ShardCost from_json(const json& in) {
    using sluice::io::field;
    using sluice::shard::PhaseCost;
    constexpr std::string_view where = "shard cost";
    sluice::shard::ShardCost cost{field<PhaseCost>(in, "pull", where), field<PhaseCost>(in, "reduce_scatter", where),
                                  field<PhaseCost>(in, "push", where)};
    const auto seconds = field<double>(in, "seconds", where);
    sluice::require(seconds == cost.seconds(), where, ": field 'seconds' is ", seconds, ", not the phases' sum ",
                    cost.seconds());
    return cost;
  }
};

// Pipelines in plan order, each with its index in shard::place's order ("placement_index"), so that a trainer
// reads plan pipeline j's ranks at pipelines[j].
template <>
struct adl_serializer<sluice::shard::RankPlacement> {
  static void to_json(json& out, const sluice::shard::RankPlacement& ranks) {
    json pipelines = json::array();
    for (std::size_t j = 0; j < ranks.plan_order.size(); ++j) {
      json pipeline = ranks.placement.pipelines.at(ranks.plan_order[j]);
      pipeline["index"] = j;
      pipeline["placement_index"] = ranks.plan_order[j];
      pipelines.push_back(std::move(pipeline));
    }
    out = {{"gpus", ranks.placement.gpus},
           {"layers", ranks.placement.layers},
           {"gpus_per_node", ranks.gpus_per_node},
           {"tp_within_node", ranks.tp_within_node},
           {"pipelines", std::move(pipelines)},
           {"groups", {{"tp", ranks.groups.tp}, {"pp", ranks.groups.pp}, {"dp", ranks.groups.dp}}}};
    // Only a strategy with CP has CP groups: without, the document is the one it always was.
    if (!ranks.groups.cp.empty()) out["groups"]["cp"] = ranks.groups.cp;
  }
  static sluice::shard::RankPlacement from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "rank placement";
    const auto pipelines = field<std::vector<json>>(in, "pipelines", where);
    sluice::shard::RankPlacement ranks{{field<std::int64_t>(in, "gpus", where), field<int>(in, "layers", where), {}},
                                       field<int>(in, "gpus_per_node", where),
                                       field<bool>(in, "tp_within_node", where),
                                       {},
                                       {}};
    ranks.placement.pipelines.resize(pipelines.size());
    std::vector<char> seen(pipelines.size(), 0);
    for (const json& pipeline : pipelines) {
      const auto p = field<std::size_t>(pipeline, "placement_index", where);
      sluice::require(p < pipelines.size() && !seen[p], where, ": placement_index ", p, " is out of range or repeated");
      seen[p] = 1;
      ranks.placement.pipelines[p] = pipeline.get<sluice::shard::PipelinePlacement>();
      ranks.plan_order.push_back(p);
    }
    const json& groups = in.contains("groups") ? in.at("groups") : json::object();
    using Groups = std::vector<std::vector<int>>;
    ranks.groups = {field<Groups>(groups, "tp", "process groups"), field<Groups>(groups, "pp", "process groups"),
                    field<Groups>(groups, "dp", "process groups"),
                    sluice::io::field_or<Groups>(groups, "cp", {}, "process groups")};
    return ranks;
  }
};

}  // namespace nlohmann
