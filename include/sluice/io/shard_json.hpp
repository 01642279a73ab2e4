#pragma once
// JSON for the LNK planning types, all version 1: models ("sluice.shard_model"), placements
// ("sluice.placement"), rank placements ("sluice.rank_placement"), optimizer layouts ("sluice.optimizer_layout"),
// pull plans ("sluice.pull_plan") and push plans ("sluice.push_plan"); costs and clusters are written inside other
// documents.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/io/core_json.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"
#include "sluice/shard/ranks.hpp"

namespace sluice::io {
template <>
struct document_traits<shard::Model> {
  static constexpr std::string_view format = "sluice.shard_model";
  static constexpr int version = 1;
};
template <>
struct document_traits<shard::Placement> {
  static constexpr std::string_view format = "sluice.placement";
  static constexpr int version = 1;
};
template <>
struct document_traits<shard::RankPlacement> {
  static constexpr std::string_view format = "sluice.rank_placement";
  static constexpr int version = 1;
};
template <>
struct document_traits<shard::OptimizerLayout> {
  static constexpr std::string_view format = "sluice.optimizer_layout";
  static constexpr int version = 1;
};
template <>
struct document_traits<shard::PullPlan> {
  static constexpr std::string_view format = "sluice.pull_plan";
  static constexpr int version = 3;  // 1: every piece in one message; messages now share equal piece lists
};
template <>
struct document_traits<shard::PushPlan> {
  static constexpr std::string_view format = "sluice.push_plan";
  static constexpr int version = 1;
};

namespace detail {

// A layer range [begin, end) as a two-element array.
inline std::pair<int, int> layer_range(const json& in, std::string_view where) {
  const auto range = field<std::vector<int>>(in, "layers", where);
  sluice::require(range.size() == 2, where, ": field 'layers' must be [begin, end], got ", range.size(), " numbers");
  return {range[0], range[1]};
}

}  // namespace detail
}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::shard::Tensor> {
  static void to_json(json& out, const sluice::shard::Tensor& tensor) {
    out = {{"name", tensor.name}, {"elements", tensor.elements}};
  }
  static sluice::shard::Tensor from_json(const json& in) {
    using sluice::io::field;
    return {field<std::string>(in, "name", "tensor"), field<std::int64_t>(in, "elements", "tensor")};
  }
};

template <>
struct adl_serializer<sluice::shard::Model> {
  static void to_json(json& out, const sluice::shard::Model& model) {
    out = {{"name", model.name},
           {"layers", model.layers},
           {"param_bytes", model.param_bytes},
           {"grad_bytes", model.grad_bytes},
           {"tensors", model.tensors}};
  }
  static sluice::shard::Model from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::field_or;
    sluice::shard::Model model{
        field_or<std::string>(in, "name", "", "shard model"), field<int>(in, "layers", "shard model"),
        field<std::vector<sluice::shard::Tensor>>(in, "tensors", "shard model"),
        field_or<int>(in, "param_bytes", 2, "shard model"), field_or<int>(in, "grad_bytes", 2, "shard model")};
    sluice::shard::require_valid(model);
    return model;
  }
};

template <>
struct adl_serializer<sluice::shard::Stage> {
  static void to_json(json& out, const sluice::shard::Stage& stage) {
    out = {{"layers", {stage.layer_begin, stage.layer_end}}, {"ranks", stage.ranks}};
  }
  static sluice::shard::Stage from_json(const json& in) {
    const auto [begin, end] = sluice::io::detail::layer_range(in, "stage");
    return {begin, end, sluice::io::field<std::vector<int>>(in, "ranks", "stage")};
  }
};

template <>
struct adl_serializer<sluice::shard::PipelinePlacement> {
  static void to_json(json& out, const sluice::shard::PipelinePlacement& pipeline) {
    out = json(pipeline.scheme);
    out["stages"] = pipeline.stages;
  }
  static sluice::shard::PipelinePlacement from_json(const json& in) {
    return {in.get<sluice::Scheme>(), sluice::io::field<std::vector<sluice::shard::Stage>>(in, "stages", "pipeline")};
  }
};

template <>
struct adl_serializer<sluice::shard::Placement> {
  static void to_json(json& out, const sluice::shard::Placement& placement) {
    out = {{"gpus", placement.gpus}, {"layers", placement.layers}, {"pipelines", placement.pipelines}};
  }
  static sluice::shard::Placement from_json(const json& in) {
    using sluice::io::field;
    return {field<std::int64_t>(in, "gpus", "placement"), field<int>(in, "layers", "placement"),
            field<std::vector<sluice::shard::PipelinePlacement>>(in, "pipelines", "placement")};
  }
};

template <>
struct adl_serializer<sluice::shard::OwnerGroup> {
  static void to_json(json& out, const sluice::shard::OwnerGroup& group) {
    out = {{"layers", {group.layer_begin, group.layer_end}}, {"owners", group.owners}};
  }
  static sluice::shard::OwnerGroup from_json(const json& in) {
    const auto [begin, end] = sluice::io::detail::layer_range(in, "owner group");
    return {begin, end, sluice::io::field<std::vector<int>>(in, "owners", "owner group")};
  }
};

template <>
struct adl_serializer<sluice::shard::OptimizerLayout> {
  static void to_json(json& out, const sluice::shard::OptimizerLayout& layout) {
    out = {{"gpus", layout.gpus}, {"layers", layout.layers}, {"groups", layout.groups}};
  }
  static sluice::shard::OptimizerLayout from_json(const json& in) {
    using sluice::io::field;
    return {field<std::int64_t>(in, "gpus", "optimizer layout"), field<int>(in, "layers", "optimizer layout"),
            field<std::vector<sluice::shard::OwnerGroup>>(in, "groups", "optimizer layout")};
  }
};

template <>
struct adl_serializer<sluice::shard::SliceBlock> {
  static void to_json(json& out, const sluice::shard::SliceBlock& block) {
    out = {{"layers", {block.layer_begin, block.layer_end}}, {"granularity", block.granularity}};
  }
  static sluice::shard::SliceBlock from_json(const json& in) {
    const auto [begin, end] = sluice::io::detail::layer_range(in, "slice block");
    return {begin, end, sluice::io::field<std::int64_t>(in, "granularity", "slice block")};
  }
};

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
struct adl_serializer<sluice::shard::Message> {
  static void to_json(json& out, const sluice::shard::Message& message) {
    out = {{"src", message.src},
           {"dst", message.dst},
           {"first_piece", message.first_piece},
           {"piece_count", message.piece_count},
           {"bytes", message.bytes}};
  }
  static sluice::shard::Message from_json(const json& in) {
    using sluice::io::field;
    return {field<int>(in, "src", "message"), field<int>(in, "dst", "message"),
            field<std::uint32_t>(in, "first_piece", "message"), field<std::uint32_t>(in, "piece_count", "message"),
            field<std::int64_t>(in, "bytes", "message")};
  }
};

template <>
struct adl_serializer<sluice::shard::PullPlan> {
  static void to_json(json& out, const sluice::shard::PullPlan& plan) {
    out = {{"gpus", plan.gpus},
           {"blocks", plan.blocks},
           {"pieces", plan.pieces},
           {"sends", plan.sends},
           {"local_moves", plan.local_moves},
           {"send_bytes", plan.send_bytes},
           {"local_bytes", plan.local_bytes}};
  }
  static sluice::shard::PullPlan from_json(const json& in) {
    using sluice::io::field;
    using sluice::shard::Message;
    return {field<std::int64_t>(in, "gpus", "pull plan"),
            field<std::vector<sluice::shard::SliceBlock>>(in, "blocks", "pull plan"),
            field<std::vector<sluice::shard::Piece>>(in, "pieces", "pull plan"),
            field<std::vector<Message>>(in, "sends", "pull plan"),
            field<std::vector<Message>>(in, "local_moves", "pull plan"),
            field<std::int64_t>(in, "send_bytes", "pull plan"),
            field<std::int64_t>(in, "local_bytes", "pull plan")};
  }
};

template <>
struct adl_serializer<sluice::shard::RsGroup> {
  static void to_json(json& out, const sluice::shard::RsGroup& group) {
    out = {{"block", group.block}, {"segment", group.segment}, {"members", group.members}, {"bytes", group.bytes}};
  }
  static sluice::shard::RsGroup from_json(const json& in) {
    using sluice::io::field;
    return {field<int>(in, "block", "reduce-scatter group"), field<std::int64_t>(in, "segment", "reduce-scatter group"),
            field<std::vector<int>>(in, "members", "reduce-scatter group"),
            field<std::int64_t>(in, "bytes", "reduce-scatter group")};
  }
};

template <>
struct adl_serializer<sluice::shard::PushPlan> {
  static void to_json(json& out, const sluice::shard::PushPlan& plan) {
    out = {{"gpus", plan.gpus},
           {"grid", plan.grid},
           {"pipelines", plan.pipelines},
           {"blocks", plan.blocks},
           {"rs_groups", plan.rs_groups},
           {"pieces", plan.pieces},
           {"sends", plan.sends},
           {"local_moves", plan.local_moves},
           {"send_bytes", plan.send_bytes},
           {"local_bytes", plan.local_bytes}};
  }
  static sluice::shard::PushPlan from_json(const json& in) {
    using sluice::io::field;
    using sluice::shard::Message;
    return {field<std::int64_t>(in, "gpus", "push plan"),
            field<std::int64_t>(in, "grid", "push plan"),
            field<int>(in, "pipelines", "push plan"),
            field<std::vector<sluice::shard::SliceBlock>>(in, "blocks", "push plan"),
            field<std::vector<sluice::shard::RsGroup>>(in, "rs_groups", "push plan"),
            field<std::vector<sluice::shard::Piece>>(in, "pieces", "push plan"),
            field<std::vector<Message>>(in, "sends", "push plan"),
            field<std::vector<Message>>(in, "local_moves", "push plan"),
            field<std::int64_t>(in, "send_bytes", "push plan"),
            field<std::int64_t>(in, "local_bytes", "push plan")};
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
struct adl_serializer<sluice::shard::LinkBytes> {
  static void to_json(json& out, const sluice::shard::LinkBytes& bytes) {
    out = {{"local", bytes.local}, {"intra_node", bytes.intra_node}, {"inter_node", bytes.inter_node}};
  }
  static sluice::shard::LinkBytes from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "link bytes";
    sluice::shard::LinkBytes bytes{field<std::int64_t>(in, "local", where),
                                   field<std::int64_t>(in, "intra_node", where),
                                   field<std::int64_t>(in, "inter_node", where)};
    sluice::require(bytes.local >= 0 && bytes.intra_node >= 0 && bytes.inter_node >= 0, where,
                    ": byte counts must be >= 0");
    return bytes;
  }
};

template <>
struct adl_serializer<sluice::shard::PhaseCost> {
  static void to_json(json& out, const sluice::shard::PhaseCost& phase) {
    out = {{"bytes", phase.bytes}, {"messages", phase.messages}, {"seconds", phase.seconds}};
  }
  static sluice::shard::PhaseCost from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "phase cost";
    sluice::shard::PhaseCost phase{field<sluice::shard::LinkBytes>(in, "bytes", where),
                                   field<std::int64_t>(in, "messages", where), field<double>(in, "seconds", where)};
    sluice::require(phase.messages >= 0, where, ": field 'messages' must be >= 0, got ", phase.messages);
    sluice::require(phase.seconds >= 0, where, ": field 'seconds' must be >= 0, got ", phase.seconds);
    return phase;
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
