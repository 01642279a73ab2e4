#pragma once
// Reader of Galvatron's profile files (PKU-DAIR/Hetu-Galvatron, the formats of its main branch): from one directory,
// computation_profiling_<precision>_<model>_all.json, memory_profiling_<precision>_<model>_all.json and the hardware
// profiles allreduce_bandwidth_, p2p_bandwidth_ and sp_time_<N>nodes_<G>gpus_per_node.json with
// overlap_coefficient.json. Every key must be one Galvatron writes and every number finite and in range; the
// profilers' raw entries (layernum…, pp_tp_dp keys) are checked and otherwise left aside, as Galvatron's search does.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <numeric>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/json.hpp"
#include "sluice/search/galvatron.hpp"
#include "sluice/search/types.hpp"

namespace sluice::io {

// Which files of a directory to read; empty or 0 fields are found from the names when only one candidate exists.
struct GalvatronFiles {
  std::string model{};
  std::string precision{};
  int nodes = 0;
  int gpus_per_node = 0;
};

namespace detail::galvatron {

inline constexpr int max_degree = 1 << 20;
inline constexpr int max_layer_types = 1024;
inline constexpr std::int64_t max_sequence = std::int64_t{1} << 24;

inline std::int64_t integer(const std::string& digits, std::int64_t low, std::int64_t high, std::string_view where) {
  sluice::require(!digits.empty() && digits.size() <= 12 &&
                      std::ranges::all_of(digits, [](char c) { return c >= '0' && c <= '9'; }),
                  where, ": '", digits.substr(0, 40), "' is not a number in [", low, ", ", high, "]");
  const std::int64_t value = std::stoll(digits);
  sluice::require(value >= low && value <= high, where, ": ", value, " is outside [", low, ", ", high, "]");
  return value;
}

inline int degree(const std::string& digits, std::string_view where) {
  const auto value = static_cast<int>(integer(digits, 1, max_degree, where));
  sluice::require((value & (value - 1)) == 0, where, ": degree ", value, " is not a power of 2");
  return value;
}

// A number that is finite and >= low, or > low when `above` (Galvatron's measured times, sizes and bandwidths).
inline double number(const json& value, double low, std::string_view where, bool above = false) {
  sluice::require(value.is_number(), where, ": expected a number, got ", describe(value));
  const double result = value.get<double>();
  sluice::require(std::isfinite(result) && (above ? result > low : result >= low), where, ": expected a finite number ",
                  above ? "> " : ">= ", low, ", got ", result);
  return result;
}

inline const json& object(const json& value, std::string_view where) {
  sluice::require(value.is_object(), where, ": expected an object, got ", describe(value));
  return value;
}

// Names a key in errors; a key longer than any Galvatron writes is refused before a pattern is matched against it.
inline std::string key_where(std::string_view file, const std::string& key) {
  std::string where = concat(file, ": key '", key.substr(0, 80), key.size() > 80 ? "...'" : "'");
  sluice::require(key.size() <= 256, where, ": longer than 256 characters");
  return where;
}

inline void computation(const json& document, std::string_view file, search::GalvatronProfile& profile) {
  static const std::regex processed(R"(layertype_(\d+|other)_bsz(\d+)_seq(\d+))");
  static const std::regex raw(R"(layernum(\[\d+\]|\d+)_bsz(\d+)_seq(\d+))");
  std::smatch match;
  for (const auto& [key, value] : object(document, file).items()) {
    const std::string where = key_where(file, key);
    if (std::regex_match(key, match, processed)) {
      const search::GalvatronTimeEntry entry{static_cast<int>(integer(match[2], 1, max_degree, where)),
                                             integer(match[3], 1, max_sequence, where), number(value, 0, where)};
      if (match[1] == "other") {
        profile.other_times.push_back(entry);
      } else {
        profile.layer_times[static_cast<int>(integer(match[1], 0, max_layer_types - 1, where))].push_back(entry);
      }
    } else {
      sluice::require(std::regex_match(key, match, raw), where,
                      ": not a computation profile key (layertype_<type|other>_bsz<b>_seq<s> or layernum…)");
      number(value, 0, where);
    }
  }
  sluice::require(!profile.layer_times.empty(), file, ": no layertype_<type>_bsz<b>_seq<s> entries");
}

// "2048", or "2048_4096" for several layer types: the sequence key of a processed memory entry.
inline void sequence_key(const std::string& key, std::string_view where) {
  static const std::regex pattern(R"(\d{1,9}(_\d{1,9}){0,63})");
  sluice::require(key.size() <= 256 && std::regex_match(key, pattern), where, ": sequence key '", key.substr(0, 40),
                  "' is not a sequence length or lengths joined by _");
}

inline std::map<int, double> by_degree(const json& value, std::string_view where, double* checkpoint = nullptr) {
  std::map<int, double> out;
  for (const auto& [key, entry] : object(value, where).items()) {
    const std::string inner = concat(where, ".", key.substr(0, 40));
    if (checkpoint != nullptr && key == "checkpoint") {
      *checkpoint = number(entry, 0, inner);
    } else {
      out[degree(key, inner)] = number(entry, 0, inner);
    }
  }
  sluice::require(!out.empty(), where, ": no entry by degree");
  return out;
}

inline void require_fields(const json& value, std::initializer_list<std::string_view> fields, std::string_view where) {
  for (const auto& item : value.items()) {
    bool known = false;
    for (const std::string_view field : fields) known = known || item.key() == field;
    sluice::require(known, where, ": unknown field '", item.key().substr(0, 40), "'");
  }
  for (const std::string_view field : fields)
    sluice::require(value.contains(field), where, ": missing field '", field, "'");
}

inline void memory(const json& document, std::string_view file, search::GalvatronProfile& profile) {
  static const std::regex layer(R"(layertype_(\d+)(_sp)?)");
  static const std::regex other(R"(other_memory_(pp_off|pp_on_first|pp_on_last)(_sp)?)");
  static const std::regex raw(R"(\d+_\d+_\d+(_c)?(_vtp)?(_sp)?)");
  std::smatch match;
  for (const auto& [key, value] : object(document, file).items()) {
    const std::string where = key_where(file, key);
    if (std::regex_match(key, match, layer)) {
      const auto type = integer(match[1], 0, max_layer_types - 1, where);
      search::GalvatronMemory& target = match[2].matched ? profile.memory_sp : profile.memory;
      for (const auto& [sequence, entry] : object(value, where).items()) {
        const std::string inner = concat(where, ".", sequence.substr(0, 40));
        sequence_key(sequence, inner);
        object(entry, inner);
        require_fields(entry, {"parameter_size", "tp_activation_per_bsz_dict"}, inner);
        search::GalvatronLayerMemory held;
        held.parameter_mib = number(entry.at("parameter_size"), 0, inner + ".parameter_size");
        held.activation_mib = by_degree(entry.at("tp_activation_per_bsz_dict"), inner + ".tp_activation_per_bsz_dict",
                                        &held.checkpoint_mib);
        target.layers[concat(type, "/", sequence)] = std::move(held);
      }
    } else if (std::regex_match(key, match, other)) {
      search::GalvatronMemory& target = match[2].matched ? profile.memory_sp : profile.memory;
      for (const auto& [sequence, entry] : object(value, where).items()) {
        const std::string inner = concat(where, ".", sequence.substr(0, 40));
        sequence_key(sequence, inner);
        object(entry, inner);
        require_fields(entry, {"model_states", "activation"}, inner);
        target.other[concat(match[1].str(), "/", sequence)] = {
            by_degree(entry.at("model_states"), inner + ".model_states"),
            by_degree(entry.at("activation"), inner + ".activation")};
      }
    } else {
      sluice::require(std::regex_match(key, match, raw), where,
                      ": not a memory profile key (layertype_<type>[_sp], other_memory_<pp_off|pp_on_first|pp_on_last>"
                      "[_sp] or <pp>_<tp>_<dp>[_c][_vtp][_sp])");
      for (const auto& [entry, measured] : object(value, where).items())
        number(measured, 0, concat(where, ".", entry.substr(0, 80)));
    }
  }
  sluice::require(!profile.memory.layers.empty() || !profile.memory_sp.layers.empty(), file,
                  ": no layertype_<type>[_sp] entries");
}

inline void allreduce(const json& document, std::string_view file, search::GalvatronHardware& hardware) {
  static const std::regex pattern(R"(allreduce_size_(\d+)_consec_([01]))");
  std::smatch match;
  for (const auto& [key, value] : object(document, file).items()) {
    const std::string where = key_where(file, key);
    sluice::require(std::regex_match(key, match, pattern), where, ": not allreduce_size_<n>_consec_<0|1>");
    hardware.allreduce_mib_per_ms[{degree(match[1], where), match[2] == "1"}] = number(value, 0, where, true);
  }
  sluice::require(!hardware.allreduce_mib_per_ms.empty(), file, ": no bandwidths");
}

inline void p2p(const json& document, std::string_view file, search::GalvatronHardware& hardware) {
  static const std::regex pattern(R"(pp_size_(\d+))");
  std::smatch match;
  for (const auto& [key, value] : object(document, file).items()) {
    const std::string where = key_where(file, key);
    sluice::require(std::regex_match(key, match, pattern), where, ": not pp_size_<n>");
    hardware.p2p_mib_per_ms[degree(match[1], where)] = number(value, 0, where, true);
  }
}

inline void overlap(const json& document, std::string_view file, search::GalvatronHardware& hardware) {
  object(document, file);
  require_fields(document, {"overlap_coe"}, file);
  hardware.overlap_coefficient = number(document.at("overlap_coe"), 1, concat(file, ": overlap_coe"));
}

inline void collective_times(const json& document, std::string_view file, search::GalvatronHardware& hardware) {
  static const std::regex pattern(R"((allreduce|all2all)_size_(\d+)_(\d+)MB_time)");
  std::smatch match;
  for (const auto& [key, value] : object(document, file).items()) {
    const std::string where = key_where(file, key);
    sluice::require(std::regex_match(key, match, pattern), where, ": not <allreduce|all2all>_size_<n>_<m>MB_time");
    auto& table = match[1] == "allreduce" ? hardware.allreduce_ms : hardware.all_to_all_ms;
    table[degree(match[2], where)][static_cast<int>(integer(match[3], 1, 1 << 30, where))] =
        number(value, 0, where, true);
  }
}

// The one file of `dir` whose name matches `pattern`, and the pattern's captures in its name.
inline std::pair<std::filesystem::path, std::vector<std::string>> one_file(const std::filesystem::path& dir,
                                                                           const std::regex& pattern,
                                                                           std::string_view what,
                                                                           std::string_view hint) {
  std::vector<std::filesystem::path> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error))
    if (std::regex_match(entry.path().filename().string(), pattern)) found.push_back(entry.path());
  sluice::require(!error, dir.string(), ": cannot list the directory (", error.message(), ")");
  std::sort(found.begin(), found.end());
  sluice::require(!found.empty(), dir.string(), ": no ", what, " file");
  if (found.size() > 1) {
    std::string names;
    for (const auto& path : found) names += (names.empty() ? "" : ", ") + path.filename().string();
    sluice::fail(dir.string(), ": several ", what, " files (", names, "); ", hint);
  }
  const std::string name = found.front().filename().string();
  std::smatch match;
  std::regex_match(name, match, pattern);
  std::vector<std::string> captures;
  for (std::size_t i = 1; i < match.size(); ++i) captures.push_back(match[i].str());
  return {found.front(), std::move(captures)};
}

inline std::string either(const std::string& given, std::string_view any) {
  return given.empty() ? std::string(any) : std::regex_replace(given, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
}

}  // namespace detail::galvatron

// Galvatron's profiles of one model on one cluster shape, from the files of `dir`: a directory, or the name of a
// bundled set (data/galvatron/<name>: llama2-7b).
inline search::GalvatronProfile read_galvatron(std::filesystem::path dir, const GalvatronFiles& files = {}) {
  namespace g = detail::galvatron;
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error) && dir.filename() == dir && !dir.empty() &&
      std::filesystem::is_directory(bundled_data_dir() / "galvatron" / dir, error))
    dir = bundled_data_dir() / "galvatron" / dir;
  sluice::require(std::filesystem::is_directory(dir, error), dir.string(), ": not a directory of Galvatron profiles");
  sluice::require(
      files.precision.empty() || files.precision == "fp32" || files.precision == "fp16" || files.precision == "bf16",
      "galvatron: precision must be fp32, fp16 or bf16, got '", files.precision, "'");
  sluice::require(files.nodes >= 0 && files.gpus_per_node >= 0 && files.nodes <= 65536 && files.gpus_per_node <= 1024,
                  "galvatron: nodes must be in [1, 65536] and GPUs per node in [1, 1024]");
  search::GalvatronProfile profile;
  const std::string precision = g::either(files.precision, "(fp32|fp16|bf16)");
  const std::string model = g::either(files.model, "(.+)");
  const auto [computation_path, computation_names] =
      g::one_file(dir, std::regex("computation_profiling_" + precision + "_" + model + "_all\\.json"),
                  "computation_profiling_<precision>_<model>_all.json", "name the model and precision");
  profile.precision = files.precision.empty() ? computation_names.front() : files.precision;
  profile.model = files.model.empty() ? computation_names.back() : files.model;
  const std::string chosen = profile.precision + "_" + profile.model;
  g::computation(read_json_file(computation_path), computation_path.filename().string(), profile);
  const auto memory_path = dir / ("memory_profiling_" + chosen + "_all.json");
  g::memory(read_json_file(memory_path), memory_path.filename().string(), profile);

  const std::string nodes = files.nodes > 0 ? std::to_string(files.nodes) : "(\\d+)";
  const std::string gpus = files.gpus_per_node > 0 ? std::to_string(files.gpus_per_node) : "(\\d+)";
  const auto [allreduce_path, shape] =
      g::one_file(dir, std::regex("allreduce_bandwidth_" + nodes + "nodes_" + gpus + "gpus_per_node\\.json"),
                  "allreduce_bandwidth_<N>nodes_<G>gpus_per_node.json", "name the nodes and GPUs per node");
  profile.hardware.nodes =
      files.nodes > 0 ? files.nodes : static_cast<int>(g::integer(shape.front(), 1, 65536, "galvatron: nodes"));
  profile.hardware.gpus_per_node =
      files.gpus_per_node > 0 ? files.gpus_per_node
                              : static_cast<int>(g::integer(shape.back(), 1, 1024, "galvatron: GPUs per node"));
  const std::string suffix = std::to_string(profile.hardware.nodes) + "nodes_" +
                             std::to_string(profile.hardware.gpus_per_node) + "gpus_per_node.json";
  g::allreduce(read_json_file(allreduce_path), allreduce_path.filename().string(), profile.hardware);
  g::p2p(read_json_file(dir / ("p2p_bandwidth_" + suffix)), "p2p_bandwidth_" + suffix, profile.hardware);
  g::collective_times(read_json_file(dir / ("sp_time_" + suffix)), "sp_time_" + suffix, profile.hardware);
  g::overlap(read_json_file(dir / "overlap_coefficient.json"), "overlap_coefficient.json", profile.hardware);
  return profile;
}

// A plan Galvatron's search wrote (galvatron_config_<model>_<N>nodes_<G>gpus_per_node_<M>GB_<precision>.json), as
// sluice's search expresses it (the vocabulary layers' vtp, vsp and embed_sdp in plan.vocabulary), with the schedule
// it names.
struct GalvatronPlan {
  search::Plan plan;
  search::Schedule schedule = search::Schedule::one_f_one_b;
};

namespace detail::galvatron {

// "1,1,2": one integer per layer, each in [low, high].
inline std::vector<int> integer_list(const json& document, std::string_view key, std::size_t count, int low, int high,
                                     std::string_view file) {
  const std::string where = concat(file, ": ", key);
  sluice::require(document.contains(key) && document.at(key).is_string(), where,
                  ": expected a string of comma-separated integers");
  const auto text = document.at(key).get<std::string>();
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= text.size() && out.size() <= count) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    out.push_back(static_cast<int>(integer(text.substr(start, end - start), low, high, where)));
    start = end + 1;
  }
  sluice::require(out.size() == count, where, ": expected ", count, " entries");
  return out;
}

inline std::int64_t whole(const json& document, std::string_view key, std::int64_t low, std::int64_t high,
                          std::string_view file) {
  const std::string where = concat(file, ": ", key);
  sluice::require(document.contains(key) && document.at(key).is_number_integer(), where, ": expected an integer");
  const auto value = document.at(key).get<std::int64_t>();
  sluice::require(value >= low && value <= high, where, ": ", value, " is outside [", low, ", ", high, "]");
  return value;
}

}  // namespace detail::galvatron

// Galvatron's plan of a model of `layers` layers on `gpus` GPUs; a layer with use_sp runs Ulysses SP.
inline GalvatronPlan read_galvatron_plan(const std::filesystem::path& path, int layers, std::int64_t gpus) {
  namespace g = detail::galvatron;
  const std::string file = path.filename().string();
  const json document = read_json_file(path);
  g::object(document, file);
  static constexpr std::string_view known[] = {
      "pp_deg",    "tp_sizes_enc", "tp_consecutive_flags", "dp_types_enc",    "use_sp", "checkpoint", "global_bsz",
      "chunks",    "pp_division",  "pipeline_type",        "default_dp_type", "vtp",    "vsp",        "embed_sdp",
      "world_size"};
  for (const auto& item : document.items())
    sluice::require(std::ranges::find(known, item.key()) != std::end(known), file, ": unknown field '",
                    item.key().substr(0, 40), "'");
  sluice::require(layers >= 1 && layers <= 65536 && gpus >= 1 && gpus <= g::max_degree, file,
                  ": layers must be in [1, 65536] and GPUs in [1, 2^20]");
  if (document.contains("world_size"))
    sluice::require(g::whole(document, "world_size", 1, g::max_degree, file) == gpus, file, ": world_size ",
                    document.at("world_size").get<std::int64_t>(), " is not the cluster's ", gpus, " GPUs");
  GalvatronPlan out;
  search::Plan& plan = out.plan;
  plan.method = "galvatron";
  plan.gpus = gpus;
  plan.pp = static_cast<int>(g::whole(document, "pp_deg", 1, layers, file));
  sluice::require(gpus % plan.pp == 0, file, ": pp_deg ", plan.pp, " does not divide ", gpus, " GPUs");
  plan.global_batch = g::whole(document, "global_bsz", 1, 1 << 24, file);
  plan.micro_batches = static_cast<int>(g::whole(document, "chunks", 1, plan.global_batch, file));
  const auto count = static_cast<std::size_t>(layers);
  const std::int64_t group = gpus / plan.pp;
  const auto tp = g::integer_list(document, "tp_sizes_enc", count, 1, static_cast<int>(group), file);
  const auto consecutive = g::integer_list(document, "tp_consecutive_flags", count, 0, 1, file);
  const auto zero3 = g::integer_list(document, "dp_types_enc", count, 0, 1, file);
  const auto ulysses = g::integer_list(document, "use_sp", count, 0, 1, file);
  const auto checkpoint = g::integer_list(document, "checkpoint", count, 0, 1, file);
  const auto division = g::integer_list(document, "pp_division", static_cast<std::size_t>(plan.pp), 1, layers, file);
  sluice::require(std::accumulate(division.begin(), division.end(), 0) == layers, file, ": pp_division sums to ",
                  std::accumulate(division.begin(), division.end(), 0), ", not the model's ", layers, " layers");
  sluice::require(document.contains("default_dp_type") && document.at("default_dp_type").is_string(), file,
                  ": default_dp_type: expected ddp or zero2");
  const auto default_dp = document.at("default_dp_type").get<std::string>();
  sluice::require(default_dp == "ddp" || default_dp == "zero2", file, ": default_dp_type: expected ddp or zero2, got '",
                  default_dp.substr(0, 40), "'");
  sluice::require(document.contains("pipeline_type") && document.at("pipeline_type").is_string(), file,
                  ": pipeline_type: expected gpipe or pipedream_flush");
  const auto pipeline = document.at("pipeline_type").get<std::string>();
  sluice::require(pipeline == "gpipe" || pipeline == "pipedream_flush", file,
                  ": pipeline_type: expected gpipe or pipedream_flush, got '", pipeline.substr(0, 40), "'");
  out.schedule = pipeline == "gpipe" ? search::Schedule::gpipe : search::Schedule::one_f_one_b;
  const auto vocabulary_degree = static_cast<int>(g::whole(document, "vtp", 1, group, file));
  sluice::require((vocabulary_degree & (vocabulary_degree - 1)) == 0 && group % vocabulary_degree == 0, file, ": vtp ",
                  vocabulary_degree, " does not divide the stage's ", group, " GPUs");
  search::LayerStrategy& vocabulary = plan.vocabulary.emplace();
  (g::whole(document, "vsp", 0, 1, file) == 1 ? vocabulary.sp : vocabulary.tp) = vocabulary_degree;
  vocabulary.dp = static_cast<int>(group / vocabulary_degree);
  vocabulary.sdp = vocabulary.data_degree() > 1 && g::whole(document, "embed_sdp", 0, 1, file) == 1;
  vocabulary.zero2 = vocabulary.data_degree() > 1 && !vocabulary.sdp && default_dp == "zero2";

  int first = 0;
  for (const int size : division) {
    search::StagePlan stage;
    stage.first_layer = first;
    for (int l = first; l < first + size; ++l) {
      const auto i = static_cast<std::size_t>(l);
      const std::string where = concat(file, ": layer ", l);
      sluice::require((tp[i] & (tp[i] - 1)) == 0 && group % tp[i] == 0, where, ": TP degree ", tp[i],
                      " does not divide the stage's ", group, " GPUs");
      search::LayerStrategy strategy;
      // use_sp makes the layer's tp_sizes_enc degree Ulysses SP's.
      (ulysses[i] == 1 ? strategy.sp : strategy.tp) = tp[i];
      strategy.dp = static_cast<int>(group / tp[i]);
      strategy.sdp = strategy.dp > 1 && zero3[i] == 1;
      strategy.zero2 = strategy.dp > 1 && !strategy.sdp && default_dp == "zero2";
      strategy.tp_inner = tp[i] == 1 || strategy.dp == 1 || consecutive[i] == 1;
      strategy.ckpt = checkpoint[i] == 1;
      stage.strategies.push_back(strategy);
    }
    first += size;
    plan.stages.push_back(std::move(stage));
  }
  return out;
}

}  // namespace sluice::io
