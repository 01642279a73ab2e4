#pragma once
// JSON for the hybrid-parallel search: the model ("sluice.model"), the cluster ("sluice.cluster") and
// the search report ("sluice.search"), each version 1. A model lists its layers in runs: {"count": 48,
// "hidden": 4096, ...}; consecutive equal layers are written back as one run.
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"
#include "sluice/search/model.hpp"
#include "sluice/search/search.hpp"

namespace sluice::io {
SLUICE_IO_DOCUMENT(search::ModelSpec, "sluice.model", 1);
SLUICE_IO_DOCUMENT(search::ClusterSpec, "sluice.cluster", 1);
SLUICE_IO_DOCUMENT(search::SearchReport, "sluice.search", 1);

SLUICE_IO_RECORD(search::CollectiveTime, "collective time", SLUICE_IO_MEMBERS(size, bytes, seconds));

// BMW's partition search of one (B, P, m), as balance_trace reports it; best_iteration is infinite when no
// partition fits.
SLUICE_IO_RECORD(search::Adjustment, "partition adjustment", SLUICE_IO_MEMBERS(sizes, alpha_time, alpha_memory));
SLUICE_IO_RECORD(search::BalanceTrace, "balance trace",
                 SLUICE_IO_MEMBERS(memory_balanced, time_balanced, accepted, best),
                 extended_member("best_iteration", &T::best_iteration));
SLUICE_IO_DOCS(search::BalanceTrace, {"best", "The best partition; empty: no partition fits"});

SLUICE_IO_RECORD(search::StagePlan, "stage",
                 SLUICE_IO_MEMBERS(first_layer, strategies, time_sync, time_nosync, memory_bytes));
SLUICE_IO_DOCS(search::StagePlan, {"strategies", "One per layer of the stage."},
               {"time_sync", "One micro-batch with the gradient synchronisation (s)"},
               {"time_nosync", "One micro-batch without it (s)"}, {"memory_bytes", "Peak per device"});

// The stage sizes (partition) are written for readers; the stages hold them.
template <>
struct record<search::Plan> {
  using T = search::Plan;
  static constexpr std::string_view name = "plan";
  static constexpr auto fields = std::tuple{
      SLUICE_IO_MEMBERS(method, gpus, pp, global_batch, micro_batches, iteration_seconds, throughput, stages),
      member("vocabulary", &T::vocabulary, Presence::omitted_when_empty)};
  static void write_derived(json& out, const T& plan) { out["partition"] = plan.partition(); }
};
SLUICE_IO_DOCS(search::Plan, {"iteration_seconds", "Eq. 9"}, {"throughput", "Samples per second"},
               {"vocabulary",
                "The embedding's and the LM head's strategy; empty: evaluation picks the fastest of the space."});

}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::search::ModelSpec> {
  static void to_json(json& out, const sluice::search::ModelSpec& model) {
    json runs = json::array();
    for (std::size_t i = 0; i < model.layers.size();) {
      std::size_t j = i;
      while (j < model.layers.size() && model.layers[j] == model.layers[i]) ++j;
      const sluice::search::LayerSpec& layer = model.layers[i];
      json run = {{"count", j - i},       {"type", layer.type}, {"hidden", layer.hidden},
                  {"heads", layer.heads}, {"ffn", layer.ffn},   {"sequence", layer.sequence}};
      if (layer.window > 0) run["window"] = layer.window;
      if (layer.params > 0) run["params"] = layer.params;
      if (layer.decoder) run["decoder"] = true;
      if (layer.forward_seconds > 0) run["forward_seconds"] = layer.forward_seconds;
      if (layer.micro_batch_seconds > 0) run["micro_batch_seconds"] = layer.micro_batch_seconds;
      if (!layer.activation_bytes.empty()) run["activation_bytes"] = by_degree(layer.activation_bytes);
      if (!layer.checkpoint_bytes.empty()) run["checkpoint_bytes"] = by_degree(layer.checkpoint_bytes);
      runs.push_back(std::move(run));
      i = j;
    }
    out = {{"name", model.name},
           {"dtype_bytes", model.dtype_bytes},
           {"state_bytes_per_param", model.state_bytes_per_param},
           {"embedding_params", model.embedding_params},
           {"head_params", model.head_params},
           {"layers", std::move(runs)}};
    for (const auto& [key, member] : vocabulary_fields)
      if (model.*member > 0) out[std::string(key)] = model.*member;
  }

  // The profiled vocabulary layers' fields, written only when set.
  static constexpr std::array<std::pair<std::string_view, double sluice::search::ModelSpec::*>, 6> vocabulary_fields{
      {{"vocabulary_forward_seconds", &sluice::search::ModelSpec::vocabulary_forward_seconds},
       {"vocabulary_micro_batch_seconds", &sluice::search::ModelSpec::vocabulary_micro_batch_seconds},
       {"embedding_activation_bytes", &sluice::search::ModelSpec::embedding_activation_bytes},
       {"head_activation_bytes", &sluice::search::ModelSpec::head_activation_bytes},
       {"single_stage_vocabulary_state_bytes", &sluice::search::ModelSpec::single_stage_vocabulary_state_bytes},
       {"single_stage_vocabulary_activation_bytes",
        &sluice::search::ModelSpec::single_stage_vocabulary_activation_bytes}}};

  static json by_degree(const std::map<int, double>& table) {
    json out = json::object();
    for (const auto& [degree, bytes] : table) out[std::to_string(degree)] = bytes;
    return out;
  }

  static std::map<int, double> by_degree(const json& in, const std::string& where) {
    sluice::require(in.is_object(), where, ": expected an object of bytes by TP degree, got ",
                    sluice::io::detail::describe(in));
    std::map<int, double> out;
    for (const auto& [key, value] : in.items()) {
      const bool digits =
          !key.empty() && key.size() <= 7 && std::ranges::all_of(key, [](char c) { return c >= '0' && c <= '9'; });
      sluice::require(digits, where, ": key '", key.substr(0, 40), "' is not a TP degree");
      out[std::stoi(key)] = sluice::io::field<double>(in, key, where);
    }
    return out;
  }
  static sluice::search::ModelSpec from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::field_or;
    sluice::search::ModelSpec model;
    model.name = field_or<std::string>(in, "name", "", "model");
    model.dtype_bytes = field_or<int>(in, "dtype_bytes", model.dtype_bytes, "model");
    model.state_bytes_per_param = field_or<double>(in, "state_bytes_per_param", model.state_bytes_per_param, "model");
    model.embedding_params = field_or<std::int64_t>(in, "embedding_params", 0, "model");
    model.head_params = field_or<std::int64_t>(in, "head_params", 0, "model");
    for (const auto& [key, member] : vocabulary_fields) model.*member = field_or<double>(in, key, 0.0, "model");
    const json runs = field<json>(in, "layers", "model");
    sluice::require(runs.is_array() && !runs.empty(), "model: 'layers' must be a non-empty array of runs");
    for (std::size_t r = 0; r < runs.size(); ++r) {
      const auto where = sluice::concat("model.layers[", r, "]");
      const auto count = field<std::int64_t>(runs[r], "count", where);
      sluice::require(count >= 1 && count <= 65536, where, ": count must be in [1, 65536], got ", count);
      sluice::search::LayerSpec layer;
      layer.type = field_or<std::string>(runs[r], "type", layer.type, where);
      layer.hidden = field<std::int64_t>(runs[r], "hidden", where);
      layer.heads = field<std::int64_t>(runs[r], "heads", where);
      // 4·hidden when absent, formed only where it cannot overflow (require_valid rejects such a hidden size anyway).
      const bool widenable = layer.hidden >= 1 && layer.hidden <= std::numeric_limits<std::int64_t>::max() / 4;
      layer.ffn = field_or<std::int64_t>(runs[r], "ffn", widenable ? 4 * layer.hidden : 0, where);
      layer.sequence = field<std::int64_t>(runs[r], "sequence", where);
      layer.window = field_or<std::int64_t>(runs[r], "window", 0, where);
      layer.params = field_or<std::int64_t>(runs[r], "params", 0, where);
      layer.decoder = field_or<bool>(runs[r], "decoder", false, where);
      layer.forward_seconds = field_or<double>(runs[r], "forward_seconds", 0.0, where);
      layer.micro_batch_seconds = field_or<double>(runs[r], "micro_batch_seconds", 0.0, where);
      if (runs[r].contains("activation_bytes"))
        layer.activation_bytes = by_degree(runs[r].at("activation_bytes"), where + ".activation_bytes");
      if (runs[r].contains("checkpoint_bytes"))
        layer.checkpoint_bytes = by_degree(runs[r].at("checkpoint_bytes"), where + ".checkpoint_bytes");
      sluice::require(model.layers.size() + static_cast<std::size_t>(count) <= 65536, "model: more than 65536 layers");
      model.layers.insert(model.layers.end(), static_cast<std::size_t>(count), layer);
    }
    sluice::search::require_valid(model);
    return model;
  }
};

template <>
struct adl_serializer<sluice::search::ClusterSpec> {
  static void to_json(json& out, const sluice::search::ClusterSpec& cluster) {
    json levels = json::array();
    for (const auto& level : cluster.levels) levels.push_back({{"size", level.size}, {"bandwidth", level.bandwidth}});
    out = {{"name", cluster.name},
           {"gpus", cluster.gpus},
           {"memory_bytes", cluster.memory_bytes},
           {"reserved_bytes", cluster.reserved_bytes},
           {"flops", cluster.flops},
           {"efficiency", cluster.efficiency},
           {"overlap_slowdown", cluster.overlap_slowdown},
           {"levels", std::move(levels)}};
    for (const auto& [key, measured] : {std::pair{"strided_levels", &cluster.strided_levels},
                                        std::pair{"pipeline_levels", &cluster.pipeline_levels}}) {
      if (measured->empty()) continue;
      json entries = json::array();
      for (const auto& level : *measured) entries.push_back({{"size", level.size}, {"bandwidth", level.bandwidth}});
      out[key] = std::move(entries);
    }
    if (!cluster.all_reduce_times.empty()) out["all_reduce_times"] = cluster.all_reduce_times;
    if (!cluster.all_to_all_times.empty()) out["all_to_all_times"] = cluster.all_to_all_times;
  }
  static sluice::search::ClusterSpec from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::field_or;
    sluice::search::ClusterSpec cluster;
    cluster.name = field_or<std::string>(in, "name", "", "cluster");
    cluster.gpus = field<std::int64_t>(in, "gpus", "cluster");
    cluster.memory_bytes = field<std::int64_t>(in, "memory_bytes", "cluster");
    cluster.reserved_bytes = field_or<std::int64_t>(in, "reserved_bytes", 0, "cluster");
    cluster.flops = field<double>(in, "flops", "cluster");
    cluster.efficiency = field_or<double>(in, "efficiency", cluster.efficiency, "cluster");
    cluster.overlap_slowdown = field_or<double>(in, "overlap_slowdown", cluster.overlap_slowdown, "cluster");
    const json levels = field<json>(in, "levels", "cluster");
    sluice::require(levels.is_array(), "cluster: 'levels' must be an array");
    for (std::size_t i = 0; i < levels.size(); ++i) {
      const auto where = sluice::concat("cluster.levels[", i, "]");
      cluster.levels.push_back(
          {field<std::int64_t>(levels[i], "size", where), field<double>(levels[i], "bandwidth", where)});
    }
    for (const auto& [key, measured] : {std::pair{"strided_levels", &cluster.strided_levels},
                                        std::pair{"pipeline_levels", &cluster.pipeline_levels}}) {
      if (!in.contains(key)) continue;
      const json& entries = in.at(key);
      sluice::require(entries.is_array(), "cluster: '", key, "' must be an array");
      for (std::size_t i = 0; i < entries.size(); ++i) {
        const auto where = sluice::concat("cluster.", key, "[", i, "]");
        measured->push_back(
            {field<std::int64_t>(entries[i], "size", where), field<double>(entries[i], "bandwidth", where)});
      }
    }
    for (auto [key, table] : {std::pair{"all_reduce_times", &cluster.all_reduce_times},
                              std::pair{"all_to_all_times", &cluster.all_to_all_times}}) {
      if (!in.contains(key)) continue;
      const json& entries = in.at(key);
      sluice::require(entries.is_array() && entries.size() <= sluice::search::detail::max_collective_times,
                      "cluster: '", key, "' must be an array of at most ", sluice::search::detail::max_collective_times,
                      " entries");
      *table = field<std::vector<sluice::search::CollectiveTime>>(in, key, "cluster");
    }
    sluice::search::require_valid(cluster);
    return cluster;
  }
};

template <>
struct adl_serializer<sluice::search::LayerStrategy> {
  static void to_json(json& out, const sluice::search::LayerStrategy& strategy) {
    out = {{"name", strategy.name()},       {"tp", strategy.tp},    {"dp", strategy.dp}, {"sdp", strategy.sdp},
           {"tp_inner", strategy.tp_inner}, {"ckpt", strategy.ckpt}};
    if (strategy.zero2) out["zero2"] = true;
    if (strategy.sp > 1) out["sp"] = strategy.sp;
  }
  static sluice::search::LayerStrategy from_json(const json& in) {
    using sluice::io::field;
    sluice::search::LayerStrategy strategy{field<int>(in, "tp", "strategy"),
                                           field<int>(in, "dp", "strategy"),
                                           field<bool>(in, "sdp", "strategy"),
                                           field<bool>(in, "tp_inner", "strategy"),
                                           field<bool>(in, "ckpt", "strategy"),
                                           sluice::io::field_or<bool>(in, "zero2", false, "strategy"),
                                           sluice::io::field_or<int>(in, "sp", 1, "strategy")};
    sluice::require(!(strategy.sdp && strategy.zero2), "strategy: 'sdp' and 'zero2' are both true");
    for (const auto& [name, degree] : {std::pair{"tp", strategy.tp}, {"dp", strategy.dp}, {"sp", strategy.sp}})
      sluice::require(degree >= 1 && degree <= (1 << 20) && (degree & (degree - 1)) == 0, "strategy: '", name,
                      "' must be a power of 2 in [1, 2^20], got ", degree);
    sluice::require(strategy.tp == 1 || strategy.sp == 1, "strategy: 'tp' and 'sp' are both above 1");
    return strategy;
  }
};

template <>
struct adl_serializer<sluice::search::SearchReport> {
  static void to_json(json& out, const sluice::search::SearchReport& report) {
    json baselines = json::array();
    for (const auto& baseline : report.baselines)
      baselines.push_back({{"name", baseline.name}, {"plan", baseline.plan ? json(*baseline.plan) : json(nullptr)}});
    out = {{"best", report.best},
           {"base", report.base ? json(*report.base) : json(nullptr)},
           {"baselines", std::move(baselines)}};
  }
  static sluice::search::SearchReport from_json(const json& in) {
    using sluice::io::field;
    using OptionalPlan = std::optional<sluice::search::Plan>;
    sluice::search::SearchReport report;
    report.best = field<sluice::search::Plan>(in, "best", "search");
    report.base = field<OptionalPlan>(in, "base", "search");
    const json baselines = field<json>(in, "baselines", "search");
    sluice::require(baselines.is_array(), "search: 'baselines' must be an array");
    for (std::size_t i = 0; i < baselines.size(); ++i) {
      const auto where = sluice::concat("search.baselines[", i, "]");
      report.baselines.push_back(
          {field<std::string>(baselines[i], "name", where), field<OptionalPlan>(baselines[i], "plan", where)});
    }
    return report;
  }
};

}  // namespace nlohmann
