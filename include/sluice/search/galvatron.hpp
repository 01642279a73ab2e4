#pragma once
// Galvatron's profiles (PKU-DAIR/Hetu-Galvatron; Galvatron-BMW, Sec. V and App. C/D): what its profilers measure of a
// model and a cluster, and the terms its cost model derives from them, in sluice's units (seconds, bytes). The files
// are read by io/galvatron.hpp; `galvatron_model` and `galvatron_cluster` turn a profile into the model and cluster
// that the search (search.hpp) costs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <Eigen/QR>

#include "sluice/core/error.hpp"
#include "sluice/search/model.hpp"

namespace sluice::search {

// Galvatron's MB (memory profiles, collective sizes) is 2^20 bytes; its bandwidths are MB per millisecond.
inline constexpr double galvatron_mib = 1048576.0;

// How a computation profile becomes one time per layer (Galvatron's time_profile_mode): `fixed` one measured batch
// size ("static"), `batch` a straight-line fit over batch sizes, `sequence` a fit over sequence lengths at batch 1.
enum class GalvatronTimeMode { fixed, batch, sequence };

inline GalvatronTimeMode galvatron_time_mode(std::string_view name) {
  if (name == "fixed") return GalvatronTimeMode::fixed;
  if (name == "batch") return GalvatronTimeMode::batch;
  sluice::require(name == "sequence", "galvatron: time mode must be fixed, batch or sequence, got '", name, "'");
  return GalvatronTimeMode::sequence;
}

// Forward milliseconds of ONE sample through one layer type (or, with the type `other`, through the embedding, the LM
// head and the loss), profiled at a batch size and a sequence length.
struct GalvatronTimeEntry {
  int batch = 0;
  std::int64_t sequence = 0;
  double milliseconds = 0;
  friend bool operator==(const GalvatronTimeEntry&, const GalvatronTimeEntry&) = default;
};

// One layer type's memory at one sequence length: its parameters (MiB in fp32, unsharded) and the activation one
// sample leaves on a device, by TP (or Ulysses SP) degree, and with checkpointing.
struct GalvatronLayerMemory {
  double parameter_mib = 0;
  std::map<int, double> activation_mib;  // per sample, by degree
  double checkpoint_mib = 0;             // per sample, whatever the degree
  friend bool operator==(const GalvatronLayerMemory&, const GalvatronLayerMemory&) = default;
};

// The vocabulary layers (embedding, LM head, final norm) of a stage: model states (4 × the fp32 parameters) and the
// activation per sample, by the vocabulary layers' TP degree.
struct GalvatronOtherMemory {
  std::map<int, double> model_states_mib;
  std::map<int, double> activation_mib;
  friend bool operator==(const GalvatronOtherMemory&, const GalvatronOtherMemory&) = default;
};

// Everything at one sequence-length key of the memory profile (several layer types write "2048_4096").
struct GalvatronMemory {
  std::map<std::string, GalvatronLayerMemory> layers;  // by "<type>/<sequence key>"
  std::map<std::string, GalvatronOtherMemory> other;   // by "<pp_off|pp_on_first|pp_on_last>/<sequence key>"
  friend bool operator==(const GalvatronMemory&, const GalvatronMemory&) = default;
};

// The hardware profile of one cluster shape.
struct GalvatronHardware {
  int nodes = 0;
  int gpus_per_node = 0;
  std::map<std::pair<int, bool>, double> allreduce_mib_per_ms;  // (group size, consecutive ranks) → bus bandwidth
  std::map<int, double> p2p_mib_per_ms;                         // by PP degree
  double overlap_coefficient = 1;                               // slowdown of compute and communication overlapped
  std::map<int, std::map<int, double>> allreduce_ms;            // group size → message MiB → milliseconds
  std::map<int, std::map<int, double>> all_to_all_ms;           // the same for all-to-all (Ulysses)
  friend bool operator==(const GalvatronHardware&, const GalvatronHardware&) = default;

  [[nodiscard]] int gpus() const noexcept { return nodes * gpus_per_node; }
};

struct GalvatronProfile {
  std::string model;      // the name in the file names: computation_profiling_<precision>_<model>_all.json
  std::string precision;  // fp32, fp16 or bf16
  std::map<int, std::vector<GalvatronTimeEntry>> layer_times;  // by layer type
  std::vector<GalvatronTimeEntry> other_times;
  GalvatronMemory memory;     // the keys written without sequence parallelism
  GalvatronMemory memory_sp;  // the "_sp" keys: Megatron sequence parallelism on
  GalvatronHardware hardware;
  friend bool operator==(const GalvatronProfile&, const GalvatronProfile&) = default;
};

// Forward time of a micro-batch of x samples on one device: per_sample·x + per_micro_batch (Galvatron's fit m·x + c).
struct GalvatronLineTime {
  double per_sample_seconds = 0;
  double per_micro_batch_seconds = 0;
  friend bool operator==(const GalvatronLineTime&, const GalvatronLineTime&) = default;
};

namespace detail {

// Ordinary least squares of ys on the powers 0..degree of xs (Galvatron's curve_fit), coefficients lowest power first.
// x is scaled to [0, 1] for conditioning.
inline std::vector<double> least_squares(const std::vector<double>& xs, const std::vector<double>& ys, int degree) {
  double scale = 1;
  for (const double x : xs) scale = std::max(scale, std::abs(x));
  Eigen::MatrixXd design(static_cast<Eigen::Index>(xs.size()), degree + 1);
  Eigen::VectorXd target(static_cast<Eigen::Index>(xs.size()));
  for (std::size_t i = 0; i < xs.size(); ++i) {
    double power = 1;
    for (int k = 0; k <= degree; ++k, power *= xs[i] / scale) design(static_cast<Eigen::Index>(i), k) = power;
    target(static_cast<Eigen::Index>(i)) = ys[i];
  }
  const Eigen::VectorXd solution = design.colPivHouseholderQr().solve(target);
  std::vector<double> out;
  double power = 1;
  for (int k = 0; k <= degree; ++k, power *= scale) out.push_back(solution(k) / power);
  return out;
}

inline GalvatronLineTime galvatron_line(const std::vector<GalvatronTimeEntry>& entries, GalvatronTimeMode mode,
                                        std::int64_t sequence, const std::string& what) {
  std::vector<double> xs;
  std::vector<double> ys;
  if (mode == GalvatronTimeMode::sequence) {
    for (const GalvatronTimeEntry& entry : entries)
      if (entry.batch == 1) {
        xs.push_back(static_cast<double>(entry.sequence));
        ys.push_back(entry.milliseconds);
      }
  } else {
    for (const GalvatronTimeEntry& entry : entries)
      if (entry.sequence == sequence) {
        xs.push_back(entry.batch);
        ys.push_back(entry.milliseconds * entry.batch);
      }
  }
  const int coefficients = mode == GalvatronTimeMode::fixed ? 1 : mode == GalvatronTimeMode::batch ? 2 : 3;
  std::vector<double> distinct = xs;
  std::ranges::sort(distinct);
  const auto count = static_cast<int>(std::ranges::unique(distinct).begin() - distinct.begin());
  sluice::require(count >= coefficients, "galvatron profile: ", what, ": ", count,
                  mode == GalvatronTimeMode::sequence ? " sequence lengths at batch 1" : " batch sizes at sequence ",
                  mode == GalvatronTimeMode::sequence ? std::string() : std::to_string(sequence),
                  ", the time mode needs ", coefficients);
  GalvatronLineTime line;
  if (mode == GalvatronTimeMode::fixed) {
    // The smallest profiled batch: a static profile holds one.
    const auto smallest = std::ranges::min_element(xs) - xs.begin();
    line.per_sample_seconds = ys[static_cast<std::size_t>(smallest)] / xs[static_cast<std::size_t>(smallest)] / 1e3;
  } else if (mode == GalvatronTimeMode::batch) {
    const std::vector<double> fit = least_squares(xs, ys, 1);
    line = {fit[1] / 1e3, fit[0] / 1e3};
  } else {
    // The layer's time grows with the square of the sequence (attention), the vocabulary layers' linearly.
    const std::vector<double> fit = least_squares(xs, ys, what == "layertype_other" ? 1 : 2);
    const auto s = static_cast<double>(sequence);
    double value = 0;
    for (std::size_t k = fit.size(); k-- > 0;) value = value * s + fit[k];
    line.per_sample_seconds = value / 1e3;
  }
  sluice::require(std::isfinite(line.per_sample_seconds) && std::isfinite(line.per_micro_batch_seconds) &&
                      line.per_sample_seconds > 0 && line.per_micro_batch_seconds >= 0,
                  "galvatron profile: ", what, ": the fitted time is ", line.per_sample_seconds, " s per sample and ",
                  line.per_micro_batch_seconds,
                  " s per micro-batch; both must be >= 0 and the first > 0 (try "
                  "another time mode)");
  return line;
}

}  // namespace detail

// One layer type's forward time at `sequence` tokens under `mode`; `type` -1 is the vocabulary layers.
inline GalvatronLineTime galvatron_forward_time(const GalvatronProfile& profile, int type, GalvatronTimeMode mode,
                                                std::int64_t sequence) {
  if (type < 0) return detail::galvatron_line(profile.other_times, mode, sequence, "layertype_other");
  const auto found = profile.layer_times.find(type);
  sluice::require(found != profile.layer_times.end(), "galvatron profile: no computation profile of layer type ", type);
  return detail::galvatron_line(found->second, mode, sequence, "layertype_" + std::to_string(type));
}

// Which of the profile's readings the search uses.
struct GalvatronSettings {
  GalvatronTimeMode time_mode = GalvatronTimeMode::batch;
  bool sequence_parallel = true;           // read the "_sp" memory keys (Galvatron's default)
  std::int64_t memory_bytes = 24LL << 30;  // per device (Galvatron's memory_constraint, 24 GB by default)
};

namespace detail {

inline const GalvatronMemory& galvatron_memory(const GalvatronProfile& profile, const GalvatronSettings& settings) {
  return settings.sequence_parallel ? profile.memory_sp : profile.memory;
}

inline std::int64_t galvatron_params(double mib, double bytes_per_param) {
  return static_cast<std::int64_t>(std::llround(mib * galvatron_mib / bytes_per_param));
}

}  // namespace detail

// `shape` with the profile's times, parameter counts and activations: Galvatron layer type k is the k-th distinct
// `type` label in layer order. Per layer, forward_seconds and micro_batch_seconds are the profile's fit at the
// layer's sequence length, params its fp32 parameter size over 4 bytes, activation_bytes and checkpoint_bytes its
// profiled activations per sample by TP degree. The embedding and the head hold the first and last stages'
// vocabulary model states at TP 1 (state_bytes_per_param each) and their activations per sample, a lone stage its
// own (other_memory_pp_off); the vocabulary layers' time is the profile's layertype_other fit.
inline ModelSpec galvatron_model(const GalvatronProfile& profile, ModelSpec shape, const GalvatronSettings& settings) {
  require_valid(shape);
  const GalvatronMemory& memory = detail::galvatron_memory(profile, settings);
  std::vector<std::string> types;
  for (LayerSpec& layer : shape.layers) {
    auto found = std::ranges::find(types, layer.type);
    if (found == types.end()) found = types.insert(types.end(), layer.type);
    const auto type = static_cast<int>(found - types.begin());
    const GalvatronLineTime time = galvatron_forward_time(profile, type, settings.time_mode, layer.sequence);
    layer.forward_seconds = time.per_sample_seconds;
    layer.micro_batch_seconds = time.per_micro_batch_seconds;
    const std::string key = std::to_string(type) + "/" + std::to_string(layer.sequence);
    const auto held = memory.layers.find(key);
    sluice::require(held != memory.layers.end(), "galvatron profile: no memory profile of layer type ", type,
                    " at sequence ", layer.sequence, settings.sequence_parallel ? " (the _sp keys)" : "");
    layer.params = detail::galvatron_params(held->second.parameter_mib, 4.0);
    sluice::require(layer.params >= 1, "galvatron profile: layer type ", type, " has no parameters");
    layer.activation_bytes.clear();
    layer.checkpoint_bytes.clear();
    for (const auto& [degree, mib] : held->second.activation_mib) {
      layer.activation_bytes[degree] = mib * galvatron_mib;
      // Megatron's sequence parallelism splits the kept input over the TP group too.
      if (held->second.checkpoint_mib > 0)
        layer.checkpoint_bytes[degree] =
            held->second.checkpoint_mib * galvatron_mib / (settings.sequence_parallel ? degree : 1);
    }
  }
  const std::int64_t sequence = shape.layers.front().sequence;
  auto vocabulary = [&](const std::string& place) -> const GalvatronOtherMemory& {
    const auto found = memory.other.find(place + "/" + std::to_string(sequence));
    sluice::require(found != memory.other.end() && found->second.model_states_mib.contains(1) &&
                        found->second.activation_mib.contains(1),
                    "galvatron profile: no other_memory_", place, " at TP 1 and sequence ", sequence);
    return found->second;
  };
  shape.embedding_params =
      detail::galvatron_params(vocabulary("pp_on_first").model_states_mib.at(1), shape.state_bytes_per_param);
  shape.head_params =
      detail::galvatron_params(vocabulary("pp_on_last").model_states_mib.at(1), shape.state_bytes_per_param);
  shape.embedding_activation_bytes = vocabulary("pp_on_first").activation_mib.at(1) * galvatron_mib;
  shape.head_activation_bytes = vocabulary("pp_on_last").activation_mib.at(1) * galvatron_mib;
  shape.single_stage_vocabulary_state_bytes = vocabulary("pp_off").model_states_mib.at(1) * galvatron_mib;
  shape.single_stage_vocabulary_activation_bytes = vocabulary("pp_off").activation_mib.at(1) * galvatron_mib;
  if (!profile.other_times.empty()) {
    const GalvatronLineTime time = galvatron_forward_time(profile, -1, settings.time_mode, sequence);
    shape.vocabulary_forward_seconds = time.per_sample_seconds;
    shape.vocabulary_micro_batch_seconds = time.per_micro_batch_seconds;
  }
  require_valid(shape);
  return shape;
}

// The cluster the hardware profile measured: one link level per consecutive all-reduce group size (a group of g
// consecutive ranks communicates at the bus bandwidth measured for g) and a strided level per strided one, the
// sp_time_ profile's all-reduce and all-to-all times (each rank's message in MiB), the p2p bandwidth by PP degree,
// Galvatron's overlap coefficient, its 1 GiB PyTorch context per device (and a fifth of a budget above 20 GiB),
// and `settings.memory_bytes`. `flops` is nominal: every layer's time is profiled.
inline ClusterSpec galvatron_cluster(const GalvatronProfile& profile, const GalvatronSettings& settings) {
  const GalvatronHardware& hardware = profile.hardware;
  ClusterSpec cluster;
  cluster.name = "galvatron-" + std::to_string(hardware.nodes) + "x" + std::to_string(hardware.gpus_per_node);
  cluster.gpus = hardware.gpus();
  cluster.memory_bytes = settings.memory_bytes;
  // Galvatron's PyTorch context, and above 20 GB the fifth of the budget it holds back for the allocator's cache.
  cluster.reserved_bytes = (1LL << 30) + (settings.memory_bytes > 20LL << 30 ? settings.memory_bytes / 5 : 0);
  cluster.flops = 1e15;
  cluster.overlap_slowdown = hardware.overlap_coefficient;
  for (const auto& [key, bandwidth] : hardware.allreduce_mib_per_ms)
    (key.second ? cluster.levels : cluster.strided_levels).push_back({key.first, bandwidth * galvatron_mib * 1e3});
  for (const auto& [pp, bandwidth] : hardware.p2p_mib_per_ms)
    if (pp >= 2 && pp <= cluster.gpus) cluster.pipeline_levels.push_back({pp, bandwidth * galvatron_mib * 1e3});
  for (const auto& [times, table] : {std::pair{&hardware.allreduce_ms, &cluster.all_reduce_times},
                                     std::pair{&hardware.all_to_all_ms, &cluster.all_to_all_times}})
    for (const auto& [size, by_message] : *times)
      if (size >= 2 && size <= cluster.gpus)
        for (const auto& [mib, milliseconds] : by_message)
          table->push_back({size, mib * galvatron_mib, milliseconds / 1e3});
  sluice::require(!cluster.levels.empty() && cluster.levels.back().size == cluster.gpus,
                  "galvatron profile: no consecutive all-reduce bandwidth over all ", cluster.gpus, " GPUs");
  sluice::require(cluster.memory_bytes > cluster.reserved_bytes, "galvatron: memory ", cluster.memory_bytes,
                  " bytes is not more than the 1 GiB context Galvatron reserves");
  require_valid(cluster);
  return cluster;
}

}  // namespace sluice::search
