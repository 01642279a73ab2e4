#pragma once
// JSON for the cost models and profiles. The profile document ("sluice.profile", version 1) is
// documented in docs/formats.md.
#include <charconv>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "sluice/cost/grid.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/links.hpp"
#include "sluice/cost/memory.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"

namespace sluice::io {
SLUICE_IO_DOCUMENT(cost::Profile, "sluice.profile", 1);
template <>
struct document_traits<cost::ProfileSpec> : document_traits<cost::Profile> {};
SLUICE_IO_DOCUMENT(cost::FitResult, "sluice.latency_fit", 1);

namespace detail {
// JSON object keys must be strings; TP degrees are written as "1", "2", ...
inline json tp_map(const std::map<int, double>& values) {
  json out = json::object();
  for (const auto& [tp, value] : values) out[std::to_string(tp)] = value;
  return out;
}
// Values read as Value (double for the activation constants, std::int64_t for token counts).
template <class Value = double>
std::map<int, Value> tp_map(const json& in, std::string_view where) {
  sluice::require(in.is_object(), where, ": expected an object keyed by TP degree, got ", describe(in));
  std::map<int, Value> out;
  for (const auto& [key, value] : in.items()) {
    std::string_view digits = key;
    if (digits.starts_with("tp")) digits.remove_prefix(2);
    int tp = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), tp);
    sluice::require(error == std::errc{} && end == digits.data() + digits.size() && !digits.empty(), where, ": key ",
                    describe(key), " is not a TP degree");
    out[tp] = convert<Value>(value, [&] { return sluice::concat(where, ": value for ", describe(key)); });
  }
  return out;
}
}  // namespace detail

// {latency, bandwidth}; a free link's bandwidth is "inf" (an extended number).
SLUICE_IO_RECORD(cost::Link, "link", SLUICE_IO_MEMBERS(latency), extended_member("bandwidth", &T::bandwidth));

SLUICE_IO_RECORD(cost::LatencySample, "sample", SLUICE_IO_MEMBERS(length, seconds), SLUICE_IO_DEFAULTED(sequences));

// heads and kv_heads only where given (0: not given).
template <>
struct record<cost::ModelInfo> {
  using T = cost::ModelInfo;
  static constexpr std::string_view name = "model";
  static constexpr auto fields = std::tuple{SLUICE_IO_DEFAULTED(name), SLUICE_IO_MEMBERS(layers, hidden, vocab),
                                            member("heads", &T::heads, Presence::omitted_when_zero),
                                            member("kv_heads", &T::kv_heads, Presence::omitted_when_zero)};
  static void check(const T& model) {
    sluice::require(model.heads >= 0 && model.kv_heads >= 0 && (model.kv_heads == 0 || model.heads > 0),
                    "model: heads and kv_heads must be >= 1 when given, and kv_heads only with heads");
    sluice::require(model.kv_heads == 0 || model.heads % model.kv_heads == 0, "model: the ", model.heads,
                    " heads must be a multiple of the ", model.kv_heads, " kv_heads");
  }
};
SLUICE_IO_DOCS(cost::ModelInfo, {"heads", "Attention heads; 0: not given"},
               {"kv_heads", "Key/value heads; 0: as many as the heads"});

SLUICE_IO_RECORD(cost::FitResult, "fit", member("latency", &T::model), SLUICE_IO_MEMBERS(relative_rms_error, samples));

template <std::size_t D>
struct record<cost::GridCostModel<D>> {
  using T = cost::GridCostModel<D>;
  static constexpr std::string_view name = "grid cost model";
  static constexpr auto fields = std::tuple{member("time", &T::time), member("memory", &T::memory)};
};

}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::cost::QuadraticLatency> {
  static void to_json(json& out, const sluice::cost::QuadraticLatency& model) {
    out = {{"a", model.a()}, {"b", model.b()}, {"c", model.c()}};
  }
  static sluice::cost::QuadraticLatency from_json(const json& in) {
    using sluice::io::field;
    return {field<double>(in, "a", "latency"), field<double>(in, "b", "latency"), field<double>(in, "c", "latency")};
  }
};

template <>
struct adl_serializer<sluice::cost::LastStageWork> {
  static void to_json(json& out, const sluice::cost::LastStageWork& work) { out = {{"b", work.b()}, {"c", work.c()}}; }
  static sluice::cost::LastStageWork from_json(const json& in) {
    using sluice::io::field;
    return {field<double>(in, "b", "last_stage"), field<double>(in, "c", "last_stage")};
  }
};

template <>
struct adl_serializer<sluice::cost::LinearMemory> {
  static void to_json(json& out, const sluice::cost::LinearMemory& memory) {
    out = {{"fixed_bytes", memory.fixed_bytes()},
           {"bytes_per_token", memory.bytes_per_token()},
           {"budget_bytes", memory.budget_bytes()},
           {"granularity", memory.granularity()}};
  }
  static sluice::cost::LinearMemory from_json(const json& in) {
    using sluice::io::field;
    return {field<double>(in, "fixed_bytes", "memory"), field<double>(in, "bytes_per_token", "memory"),
            field<double>(in, "budget_bytes", "memory"), field<std::int64_t>(in, "granularity", "memory")};
  }
};

// The memory coefficients; layers, hidden and vocab live in the profile's "model" object.
template <>
struct adl_serializer<sluice::cost::TransformerMemorySpec> {
  static void to_json(json& out, const sluice::cost::TransformerMemorySpec& spec) {
    out = {{"activation_bytes", sluice::io::detail::tp_map(spec.activation_bytes)},
           {"state_bytes", spec.state_bytes},
           {"alpha", spec.alpha},
           {"gpu_memory_bytes", spec.gpu_memory_bytes},
           {"context_overhead_bytes", spec.context_overhead_bytes},
           {"safety_margin_bytes", spec.safety_margin_bytes},
           {"granularity", spec.granularity}};
    // Written only when not the Hydraulis model's, so that every profile before ZeRO-3 reads as it was written.
    if (spec.state_sharding != sluice::cost::StateSharding::hydraulis)
      out["state_sharding"] = sluice::name_in(sluice::cost::state_sharding_names, spec.state_sharding);
  }
  static sluice::cost::TransformerMemorySpec from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::field_or;
    sluice::cost::TransformerMemorySpec spec;
    spec.activation_bytes =
        sluice::io::detail::tp_map(field<json>(in, "activation_bytes", "memory"), "memory.activation_bytes");
    spec.state_bytes = field<double>(in, "state_bytes", "memory");
    spec.alpha = field_or<double>(in, "alpha", spec.alpha, "memory");
    spec.gpu_memory_bytes = field<double>(in, "gpu_memory_bytes", "memory");
    spec.context_overhead_bytes = field_or<double>(in, "context_overhead_bytes", 0.0, "memory");
    spec.safety_margin_bytes = field_or<double>(in, "safety_margin_bytes", 0.0, "memory");
    spec.granularity = field_or<std::int64_t>(in, "granularity", spec.granularity, "memory");
    if (in.contains("state_sharding"))
      spec.state_sharding = sluice::io::name_field(in, "state_sharding", sluice::cost::state_sharding_names, "memory");
    return spec;
  }
};

template <>
struct adl_serializer<sluice::cost::SchemeEntry> {
  static void to_json(json& out, const sluice::cost::SchemeEntry& entry) {
    out = json(entry.scheme);
    out["latency"] = entry.latency;
    if (entry.max_len) out["max_len"] = *entry.max_len;
    if (entry.util_len) out["util_len"] = *entry.util_len;
    // Written only when given, so that a profile pricing every stage alike reads as it was written.
    if (!entry.last_stage.is_zero()) out["last_stage"] = entry.last_stage;
  }
  static sluice::cost::SchemeEntry from_json(const json& in) {
    using sluice::io::field;
    sluice::cost::SchemeEntry entry{in.get<sluice::Scheme>(),
                                    field<sluice::cost::QuadraticLatency>(in, "latency", "scheme"),
                                    std::nullopt,
                                    std::nullopt,
                                    {}};
    if (in.contains("max_len")) entry.max_len = field<std::int64_t>(in, "max_len", "scheme");
    if (in.contains("util_len")) entry.util_len = field<std::int64_t>(in, "util_len", "scheme");
    if (in.contains("last_stage")) entry.last_stage = field<sluice::cost::LastStageWork>(in, "last_stage", "scheme");
    return entry;
  }
};

template <>
struct adl_serializer<sluice::cost::SchemeCost> {
  static void to_json(json& out, const sluice::cost::SchemeCost& cost) {
    out = json(cost.scheme);
    out["latency"] = cost.latency;
    out["max_len"] = cost.max_len;
    out["util_len"] = cost.util_len;
    if (cost.memory) out["memory"] = *cost.memory;
    if (!cost.last_stage.is_zero()) out["last_stage"] = cost.last_stage;
  }
  static sluice::cost::SchemeCost from_json(const json& in) {
    using sluice::io::field;
    sluice::cost::SchemeCost cost{in.get<sluice::Scheme>(),
                                  field<sluice::cost::QuadraticLatency>(in, "latency", "scheme"),
                                  field<std::int64_t>(in, "max_len", "scheme"),
                                  field<std::int64_t>(in, "util_len", "scheme"),
                                  std::nullopt,
                                  {}};
    if (in.contains("memory")) cost.memory = field<sluice::cost::LinearMemory>(in, "memory", "scheme");
    if (in.contains("last_stage")) cost.last_stage = field<sluice::cost::LastStageWork>(in, "last_stage", "scheme");
    return cost;
  }
};

template <>
struct adl_serializer<sluice::cost::ProfileSpec> {
  static void to_json(json& out, const sluice::cost::ProfileSpec& spec) {
    out = {{"name", spec.name},
           {"source", spec.source},
           {"model", spec.model},
           {"cluster", {{"gpus", spec.gpus}, {"gpus_per_node", spec.gpus_per_node}}},
           {"util_threshold", spec.util_threshold},
           {"schemes", spec.schemes}};
    if (spec.memory) out["memory"] = *spec.memory;
  }
  static sluice::cost::ProfileSpec from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::field_or;
    sluice::cost::ProfileSpec spec;
    spec.name = field<std::string>(in, "name", "profile");
    spec.source = field_or<std::string>(in, "source", "", "profile");
    spec.model = field<sluice::cost::ModelInfo>(in, "model", "profile");
    const auto cluster = field<json>(in, "cluster", "profile");
    spec.gpus = field<std::int64_t>(cluster, "gpus", "profile.cluster");
    spec.gpus_per_node = field_or<int>(cluster, "gpus_per_node", spec.gpus_per_node, "profile.cluster");
    spec.util_threshold = field_or<double>(in, "util_threshold", spec.util_threshold, "profile");
    spec.schemes = field<std::vector<sluice::cost::SchemeEntry>>(in, "schemes", "profile");
    if (in.contains("memory")) {
      auto memory = field<sluice::cost::TransformerMemorySpec>(in, "memory", "profile");
      memory.layers = spec.model.layers;
      memory.hidden = spec.model.hidden;
      memory.vocab = spec.model.vocab;
      spec.memory = std::move(memory);
    }
    return spec;
  }
};

template <>
struct adl_serializer<sluice::cost::Profile> {
  static void to_json(json& out, const sluice::cost::Profile& profile) { out = profile.spec(); }
  static sluice::cost::Profile from_json(const json& in) {
    return sluice::cost::Profile(in.get<sluice::cost::ProfileSpec>());
  }
};

template <std::size_t D>
struct adl_serializer<sluice::cost::RectilinearGrid<D>> {
  static void to_json(json& out, const sluice::cost::RectilinearGrid<D>& grid) {
    out = {{"axes", grid.axes()}, {"values", grid.values()}};
  }
  static sluice::cost::RectilinearGrid<D> from_json(const json& in) {
    using sluice::io::field;
    return {field<std::array<std::vector<double>, D>>(in, "axes", "grid"),
            field<std::vector<double>>(in, "values", "grid")};
  }
};

}  // namespace nlohmann
