#pragma once
// Model and cluster descriptions for the hybrid-parallel search (Galvatron-BMW): the layers of one
// Transformer and the GPUs it trains on, with a hierarchy of links.
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"

namespace sluice::search {

// One Transformer layer. Parameters default to the dense layer's 4h² + 2h·ffn + 9h + ffn when 0.
struct LayerSpec {
  std::string type = "encoder";  // free-form label; layers of one type usually share every field
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t ffn = 0;
  std::int64_t sequence = 0;  // tokens per sample
  std::int64_t window = 0;    // tokens each token attends to (Swin's windows); 0 = the whole sequence
  std::int64_t params = 0;
  bool decoder = false;        // cross-attention: 3 TP all-reduces per pass instead of 2
  double forward_seconds = 0;  // profiled forward time of one sample on one GPU; 0 = analytic from FLOPs
  // Profiled forward time of one micro-batch on one device beyond its samples' (launches, fixed work): Galvatron's
  // c in m·b + c. Small micro-batches pay it most.
  double micro_batch_seconds = 0;
  // Profiled activation bytes one sample leaves on a device, by TP degree (Galvatron's tp_activation_per_bsz_dict):
  // all of them without checkpointing (`activation_bytes`), what a checkpointed layer keeps (`checkpoint_bytes`).
  // Empty: Megatron's count. A degree not profiled takes the nearest profiled one below it (else above), scaled by
  // the ratio of the degrees.
  std::map<int, double> activation_bytes{};
  std::map<int, double> checkpoint_bytes{};
  friend bool operator==(const LayerSpec&, const LayerSpec&) = default;

  [[nodiscard]] std::int64_t attention_span() const noexcept { return window > 0 ? window : sequence; }
  [[nodiscard]] std::int64_t parameter_count() const {
    return params > 0 ? params : 4 * hidden * hidden + 2 * hidden * ffn + 9 * hidden + ffn;
  }
};

struct ModelSpec {
  std::string name;
  std::vector<LayerSpec> layers;
  std::int64_t embedding_params = 0;  // input embedding, held by the first stage
  std::int64_t head_params = 0;       // output head, held by the last stage
  int dtype_bytes = 2;                // activations and communicated tensors
  double state_bytes_per_param = 16;  // parameters + gradients + optimizer states (mixed-precision Adam)
  // Profiled vocabulary layers (embedding, LM head, loss): forward seconds per sample and per micro-batch, split
  // evenly between the first and the last stage, and the activation bytes one sample leaves on each. 0: not costed.
  double vocabulary_forward_seconds = 0;
  double vocabulary_micro_batch_seconds = 0;
  double embedding_activation_bytes = 0;
  double head_activation_bytes = 0;
  // The vocabulary layers on a pipeline of one stage, where both sit together (Galvatron profiles it apart:
  // other_memory_pp_off): their model states (bytes at TP 1, before ZeRO) and activation per sample. 0: the first
  // and last stages' together.
  double single_stage_vocabulary_state_bytes = 0;
  double single_stage_vocabulary_activation_bytes = 0;
  friend bool operator==(const ModelSpec&, const ModelSpec&) = default;
};

// Raises invalid_input unless the model has layers, each of sizes in range and finite non-negative costs, and its
// vocabulary layers' costs are finite and non-negative.
inline void require_valid(const ModelSpec& model) {
  sluice::require(!model.layers.empty(), "model ", model.name, ": has no layers");
  sluice::require(model.dtype_bytes >= 1 && model.dtype_bytes <= 8, "model ", model.name,
                  ": dtype_bytes must be in [1, 8], got ", model.dtype_bytes);
  sluice::require(std::isfinite(model.state_bytes_per_param) && model.state_bytes_per_param > 0, "model ", model.name,
                  ": state_bytes_per_param must be finite and > 0, got ", model.state_bytes_per_param);
  sluice::require(model.embedding_params >= 0, "model ", model.name, ": embedding_params must be >= 0, got ",
                  model.embedding_params);
  sluice::require(model.head_params >= 0, "model ", model.name, ": head_params must be >= 0, got ", model.head_params);
  for (const auto& [field, value] :
       {std::pair<std::string_view, double>{"vocabulary_forward_seconds", model.vocabulary_forward_seconds},
        {"vocabulary_micro_batch_seconds", model.vocabulary_micro_batch_seconds},
        {"embedding_activation_bytes", model.embedding_activation_bytes},
        {"head_activation_bytes", model.head_activation_bytes},
        {"single_stage_vocabulary_state_bytes", model.single_stage_vocabulary_state_bytes},
        {"single_stage_vocabulary_activation_bytes", model.single_stage_vocabulary_activation_bytes}})
    sluice::require(std::isfinite(value) && value >= 0 && value < 0x1p60, "model ", model.name, ": ", field,
                    " must be finite and in [0, 2^60), got ", value);
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const LayerSpec& layer = model.layers[i];
    const auto where = sluice::concat("model ", model.name, ": layer ", i);
    sluice::require(layer.hidden >= 1 && layer.hidden <= (1 << 20), where, ": hidden must be in [1, 2^20], got ",
                    layer.hidden);
    sluice::require(layer.heads >= 1 && layer.hidden % layer.heads == 0, where,
                    ": heads must be >= 1 and divide hidden, got ", layer.heads);
    sluice::require(layer.ffn >= 1 && layer.ffn <= (1 << 22), where, ": ffn must be in [1, 2^22], got ", layer.ffn);
    sluice::require(layer.sequence >= 1 && layer.sequence <= (1 << 24), where, ": sequence must be in [1, 2^24], got ",
                    layer.sequence);
    sluice::require(layer.window >= 0 && layer.window <= layer.sequence, where,
                    ": window must be in [0, sequence], got ", layer.window);
    sluice::require(layer.params >= 0, where, ": params must be >= 0, got ", layer.params);
    sluice::require(std::isfinite(layer.forward_seconds) && layer.forward_seconds >= 0, where,
                    ": forward_seconds must be finite and >= 0, got ", layer.forward_seconds);
    sluice::require(std::isfinite(layer.micro_batch_seconds) && layer.micro_batch_seconds >= 0, where,
                    ": micro_batch_seconds must be finite and >= 0, got ", layer.micro_batch_seconds);
    for (const auto& [field, table] :
         {std::pair<std::string_view, const std::map<int, double>*>{"activation_bytes", &layer.activation_bytes},
          {"checkpoint_bytes", &layer.checkpoint_bytes}})
      for (const auto& [degree, bytes] : *table)
        sluice::require(degree >= 1 && degree <= (1 << 20) && (degree & (degree - 1)) == 0 && std::isfinite(bytes) &&
                            bytes > 0 && bytes < 0x1p50,
                        where, ": ", field, " needs power-of-2 degrees in [1, 2^20] and bytes in (0, 2^50), got ",
                        degree, ": ", bytes);
    sluice::require(layer.checkpoint_bytes.empty() || !layer.activation_bytes.empty(), where,
                    ": checkpoint_bytes needs activation_bytes");
  }
}

// GPUs [0, size) of every aligned block of `size` consecutive ranks talk over links of `bandwidth`
// bytes/s; the levels nest (NVLink inside a node, then the network across nodes).
struct LinkLevel {
  std::int64_t size = 0;
  double bandwidth = 0;
  friend bool operator==(const LinkLevel&, const LinkLevel&) = default;
};

// One measured collective: a group of `size` consecutive ranks, each with a tensor of `bytes`, took `seconds`.
struct CollectiveTime {
  std::int64_t size = 0;
  double bytes = 0;
  double seconds = 0;
  friend bool operator==(const CollectiveTime&, const CollectiveTime&) = default;
};

namespace detail {

// The measured time of a collective of `size` ranks on `bytes` each: interpolated between the two measured messages
// around it, proportional to the bytes past the largest (bandwidth-bound), the smallest's time below it (latency-
// bound). Unset without a measurement at that size.
inline std::optional<double> measured_seconds(const std::vector<CollectiveTime>& table, std::int64_t size,
                                              double bytes) noexcept {
  const CollectiveTime* below = nullptr;
  const CollectiveTime* above = nullptr;
  for (const CollectiveTime& entry : table) {
    if (entry.size != size) continue;
    if (entry.bytes <= bytes && (below == nullptr || entry.bytes > below->bytes)) below = &entry;
    if (entry.bytes >= bytes && (above == nullptr || entry.bytes < above->bytes)) above = &entry;
  }
  if (below == nullptr && above == nullptr) return std::nullopt;
  if (below == nullptr) return above->seconds;
  if (above == nullptr) return below->seconds * bytes / below->bytes;
  if (above->bytes == below->bytes) return below->seconds;
  return below->seconds + (above->seconds - below->seconds) * (bytes - below->bytes) / (above->bytes - below->bytes);
}

inline constexpr std::size_t max_collective_times = 4096;

inline void validate_collectives(const std::vector<CollectiveTime>& table, std::string_view field,
                                 const std::string& name, std::int64_t gpus) {
  sluice::require(table.size() <= max_collective_times, "cluster ", name, ": ", field, " has ", table.size(),
                  " entries, more than ", max_collective_times);
  for (std::size_t i = 0; i < table.size(); ++i) {
    const CollectiveTime& entry = table[i];
    sluice::require(entry.size >= 2 && entry.size <= gpus && (entry.size & (entry.size - 1)) == 0 &&
                        std::isfinite(entry.bytes) && entry.bytes > 0 && std::isfinite(entry.seconds) &&
                        entry.seconds > 0,
                    "cluster ", name, ": ", field, " ", i,
                    ": size must be a power of 2 in [2, gpus], bytes and seconds finite and > 0, got ", entry.size,
                    ", ", entry.bytes, ", ", entry.seconds);
    for (std::size_t j = 0; j < i; ++j)
      sluice::require(table[j].size != entry.size || table[j].bytes != entry.bytes, "cluster ", name, ": ", field, " ",
                      i, ": a second time for ", entry.size, " ranks and ", entry.bytes, " bytes");
  }
}

}  // namespace detail

struct ClusterSpec {
  std::string name;
  std::int64_t gpus = 0;
  std::int64_t memory_bytes = 0;    // device memory
  std::int64_t reserved_bytes = 0;  // CUDA context and allocator slack, charged to every device
  double flops = 0;                 // peak dense FLOP/s of one GPU at the model's dtype
  double efficiency = 0.5;          // achieved share of `flops` in matmuls
  double overlap_slowdown = 1.3;    // γ: compute and communication both slow down when they overlap
  std::vector<LinkLevel> levels;    // innermost first; the last spans the cluster
  // Measured bandwidths of groups of `size` ranks at a stride (Galvatron's consec_0 all-reduces): DP across TP
  // groups, TP across DP groups. A size not listed communicates at the bandwidth of its span.
  std::vector<LinkLevel> strided_levels{};
  // Measured all-reduce and all-to-all times (Galvatron's sp_time_ profile): where a group size is listed, TP's
  // all-reduces and SP's all-to-alls on consecutive ranks take them in place of volume over bandwidth.
  std::vector<CollectiveTime> all_reduce_times{};
  std::vector<CollectiveTime> all_to_all_times{};
  // Measured point-to-point bandwidths between pipeline stages, by PP degree (`size`; Galvatron's p2p_bandwidth_
  // profile): a pipeline of a listed degree sends its activations at that bandwidth, not its span's.
  std::vector<LinkLevel> pipeline_levels{};
  friend bool operator==(const ClusterSpec&, const ClusterSpec&) = default;

  // Bandwidth of a communication group whose ranks span `span` consecutive ranks (a group of g ranks at
  // stride t spans g·t): the innermost level that holds the whole span.
  [[nodiscard]] double bandwidth(std::int64_t span) const noexcept {
    for (const LinkLevel& level : levels)
      if (level.size >= span) return level.bandwidth;
    return levels.back().bandwidth;
  }

  // Bandwidth between the stages of a pipeline of `pp` stages of `group` GPUs each: measured, else the span of two.
  [[nodiscard]] double pipeline_bandwidth(std::int64_t pp, std::int64_t group) const noexcept {
    for (const LinkLevel& level : pipeline_levels)
      if (level.size == pp) return level.bandwidth;
    return bandwidth(2 * group);
  }

  // Bandwidth of a group of `size` ranks at a stride, spanning `span` ranks: measured, else the span's.
  [[nodiscard]] double strided_bandwidth(std::int64_t size, std::int64_t span) const noexcept {
    for (const LinkLevel& level : strided_levels)
      if (level.size == size) return level.bandwidth;
    return bandwidth(span);
  }
};

// Raises invalid_input unless the sizes are powers of 2 in range, the link levels nest and span the cluster, and
// every bandwidth, rate and measured collective is finite and positive.
inline void require_valid(const ClusterSpec& cluster) {
  sluice::require(cluster.gpus >= 1 && cluster.gpus <= (1 << 20) && (cluster.gpus & (cluster.gpus - 1)) == 0,
                  "cluster ", cluster.name, ": gpus must be a power of 2 in [1, 2^20], got ", cluster.gpus);
  sluice::require(cluster.memory_bytes >= 1, "cluster ", cluster.name, ": memory_bytes must be >= 1, got ",
                  cluster.memory_bytes);
  sluice::require(cluster.reserved_bytes >= 0 && cluster.reserved_bytes < cluster.memory_bytes, "cluster ",
                  cluster.name, ": reserved_bytes must be in [0, memory_bytes), got ", cluster.reserved_bytes);
  sluice::require(std::isfinite(cluster.flops) && cluster.flops > 0, "cluster ", cluster.name,
                  ": flops must be finite and > 0, got ", cluster.flops);
  sluice::require(std::isfinite(cluster.efficiency) && cluster.efficiency > 0 && cluster.efficiency <= 1, "cluster ",
                  cluster.name, ": efficiency must be in (0, 1], got ", cluster.efficiency);
  sluice::require(std::isfinite(cluster.overlap_slowdown) && cluster.overlap_slowdown >= 1, "cluster ", cluster.name,
                  ": overlap_slowdown must be finite and >= 1, got ", cluster.overlap_slowdown);
  sluice::require(!cluster.levels.empty(), "cluster ", cluster.name, ": has no link levels");
  std::int64_t inner = 1;
  for (std::size_t i = 0; i < cluster.levels.size(); ++i) {
    const LinkLevel& level = cluster.levels[i];
    sluice::require(level.size > inner && level.size % inner == 0 && (level.size & (level.size - 1)) == 0, "cluster ",
                    cluster.name, ": level ", i, ": size must be a power of 2 larger than the level inside it, got ",
                    level.size);
    sluice::require(std::isfinite(level.bandwidth) && level.bandwidth > 0, "cluster ", cluster.name, ": level ", i,
                    ": bandwidth must be finite and > 0, got ", level.bandwidth);
    inner = level.size;
  }
  sluice::require(inner >= cluster.gpus, "cluster ", cluster.name, ": the outermost link level spans ", inner,
                  " GPUs, fewer than the cluster's ", cluster.gpus);
  for (std::size_t i = 0; i < cluster.strided_levels.size(); ++i) {
    const LinkLevel& level = cluster.strided_levels[i];
    sluice::require(level.size >= 2 && level.size <= cluster.gpus && (level.size & (level.size - 1)) == 0 &&
                        (i == 0 || level.size > cluster.strided_levels[i - 1].size),
                    "cluster ", cluster.name, ": strided level ", i,
                    ": size must be a power of 2 in [2, gpus], larger than the one before, got ", level.size);
    sluice::require(std::isfinite(level.bandwidth) && level.bandwidth > 0, "cluster ", cluster.name, ": strided level ",
                    i, ": bandwidth must be finite and > 0, got ", level.bandwidth);
  }
  for (std::size_t i = 0; i < cluster.pipeline_levels.size(); ++i) {
    const LinkLevel& level = cluster.pipeline_levels[i];
    sluice::require(level.size >= 2 && level.size <= cluster.gpus && (level.size & (level.size - 1)) == 0 &&
                        (i == 0 || level.size > cluster.pipeline_levels[i - 1].size) &&
                        std::isfinite(level.bandwidth) && level.bandwidth > 0,
                    "cluster ", cluster.name, ": pipeline level ", i,
                    ": size must be a power of 2 in [2, gpus], larger than the one before, and bandwidth finite "
                    "and > 0, got ",
                    level.size, ", ", level.bandwidth);
  }
  detail::validate_collectives(cluster.all_reduce_times, "all_reduce_times", cluster.name, cluster.gpus);
  detail::validate_collectives(cluster.all_to_all_times, "all_to_all_times", cluster.name, cluster.gpus);
}

}  // namespace sluice::search
