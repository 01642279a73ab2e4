#pragma once
// Importer for the Hetu/Hydraulis `strategy_pool_*.json` profile layout:
//   strategies[{tp, pp, a, b, c}]                         latency per sequence, milliseconds
//   memory_regression{A{tpK}, B, alpha, gap, safe_bound}  A, B in bytes; gap and safe_bound in MiB
//   model_config{H, L, V}
//   cluster_config{gpus_per_node, gpu_memory_bound, utilization_seqlen{tpK}}  memory bound in MiB, lengths integers
// comm_cost is not used: sluice's estimates do not take it (the authors' planners ignore it too).
// read_profile reads either this layout or a sluice.profile document, as every `--profile` of the CLI does.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/cost/profile.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"

namespace sluice::io {

namespace detail {
// Runs `make`, naming `where` in the invalid_input it raises: constructors name a bad value, not its place.
template <class Make>
auto located(std::string_view where, Make&& make) -> decltype(make()) {
  try {
    return make();
  } catch (const invalid_input& error) {
    sluice::fail(where, ": ", error.what());
  }
}
}  // namespace detail

inline cost::ProfileSpec import_strategy_pool(const json& pool, std::string_view source, std::int64_t gpus) {
  constexpr double mib = 1024.0 * 1024.0;
  constexpr double ms = 1e-3;
  const std::string where(source);
  detail::require_depth(pool, where);
  const auto model = field<json>(pool, "model_config", where);
  const auto memory = field<json>(pool, "memory_regression", where);
  const auto cluster = field<json>(pool, "cluster_config", where);

  cost::ProfileSpec spec;
  spec.name = where;
  spec.source = "imported from the Hetu/Hydraulis strategy_pool file " + where;
  spec.model = {"", field<int>(model, "L", where + ".model_config"),
                field<std::int64_t>(model, "H", where + ".model_config"),
                field<std::int64_t>(model, "V", where + ".model_config")};
  spec.gpus = gpus;
  spec.gpus_per_node = field<int>(cluster, "gpus_per_node", where + ".cluster_config");

  cost::TransformerMemorySpec memory_spec;
  memory_spec.layers = spec.model.layers;
  memory_spec.hidden = spec.model.hidden;
  memory_spec.vocab = spec.model.vocab;
  memory_spec.activation_bytes =
      detail::tp_map(field<json>(memory, "A", where + ".memory_regression"), where + ".memory_regression.A");
  memory_spec.state_bytes = field<double>(memory, "B", where + ".memory_regression");
  memory_spec.alpha = field<double>(memory, "alpha", where + ".memory_regression");
  memory_spec.context_overhead_bytes = field<double>(memory, "gap", where + ".memory_regression") * mib;
  memory_spec.safety_margin_bytes = field<double>(memory, "safe_bound", where + ".memory_regression") * mib;
  memory_spec.gpu_memory_bytes = field<double>(cluster, "gpu_memory_bound", where + ".cluster_config") * mib;
  detail::located(where, [&] { cost::require_valid(memory_spec); });
  spec.memory = memory_spec;

  std::map<int, std::int64_t> util_by_tp;
  if (cluster.contains("utilization_seqlen"))
    util_by_tp =
        detail::tp_map<std::int64_t>(cluster.at("utilization_seqlen"), where + ".cluster_config.utilization_seqlen");

  const auto strategies = field<json>(pool, "strategies", where);
  sluice::require(strategies.is_array(), where, ": 'strategies' must be an array, got ", detail::describe(strategies));
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    const json& item = strategies[i];
    const std::string item_where = where + ".strategies[" + std::to_string(i) + "]";
    const int tp = field<int>(item, "tp", item_where);
    const int pp = field<int>(item, "pp", item_where);
    const double a = field<double>(item, "a", item_where) * ms;
    const double b = field<double>(item, "b", item_where) * ms;
    const double c = field<double>(item, "c", item_where) * ms;
    cost::SchemeEntry entry{detail::located(item_where, [&] { return Scheme(tp, pp); }),
                            detail::located(item_where, [&] { return cost::QuadraticLatency(a, b, c); }), std::nullopt,
                            std::nullopt};
    if (const auto it = util_by_tp.find(entry.scheme.tp()); it != util_by_tp.end()) {
      sluice::require(it->second >= 1, item_where, ": utilization_seqlen must be >= 1, got ", it->second);
      entry.util_len = it->second;
    }
    spec.schemes.push_back(entry);
  }
  return spec;
}

// A Hetu/Hydraulis strategy_pool file rather than a sluice document: it has their two top-level fields and no
// "format".
inline bool is_strategy_pool(const json& document) {
  return document.is_object() && document.contains("strategies") && document.contains("memory_regression") &&
         !document.contains("format");
}

// A profile file of either kind, told apart by is_strategy_pool, resolved for `gpus` GPUs when given; otherwise
// for the profile's own cluster, or, for a pool (which states no cluster size), the largest scheme's GPU count.
inline cost::Profile read_profile(const std::filesystem::path& path, std::optional<std::int64_t> gpus = std::nullopt) {
  const json document = read_json_file(path);
  if (!is_strategy_pool(document)) {
    cost::Profile profile = from_document<cost::Profile>(document, path.string());
    return gpus ? profile.with_gpus(*gpus) : profile;
  }
  cost::ProfileSpec spec = import_strategy_pool(document, path.string(), gpus.value_or(0));
  if (!gpus)
    for (const cost::SchemeEntry& entry : spec.schemes) spec.gpus = std::max(spec.gpus, entry.scheme.gpus());
  return cost::Profile(std::move(spec));
}

}  // namespace sluice::io
