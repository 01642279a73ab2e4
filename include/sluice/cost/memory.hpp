#pragma once
// Memory models. LinearMemory is one scheme's peak memory as a function of sequence length;
// TransformerMemorySpec derives it for any scheme from Hydraulis App. B.1.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>

#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/scheme.hpp"

namespace sluice::cost {

// Peak memory fixed_bytes + bytes_per_token·l against budget_bytes; MaxLen is the longest length that
// fits, rounded down to `granularity` (kernels and allocators work in blocks, so do the planners), and at most
// max_tokens.
class LinearMemory {
public:
  // 2^52: every count of tokens up to it is exact in a double, and far beyond any sequence.
  static constexpr std::int64_t max_tokens = std::int64_t{1} << 52;

  LinearMemory(double fixed_bytes, double bytes_per_token, double budget_bytes, std::int64_t granularity)
      : fixed_(fixed_bytes), per_token_(bytes_per_token), budget_(budget_bytes), granularity_(granularity) {
    sluice::require(std::isfinite(fixed_bytes) && fixed_bytes >= 0, "memory: fixed bytes must be finite and >= 0, got ",
                    fixed_bytes);
    sluice::require(std::isfinite(bytes_per_token) && bytes_per_token > 0,
                    "memory: bytes per token must be finite and > 0, got ", bytes_per_token);
    sluice::require(std::isfinite(budget_bytes) && budget_bytes >= 0, "memory: budget must be finite and >= 0, got ",
                    budget_bytes);
    sluice::require(granularity >= 1 && granularity <= max_tokens, "memory: granularity must be in [1, 2^52], got ",
                    granularity);
  }

  [[nodiscard]] double fixed_bytes() const noexcept { return fixed_; }
  [[nodiscard]] double bytes_per_token() const noexcept { return per_token_; }
  [[nodiscard]] double budget_bytes() const noexcept { return budget_; }
  [[nodiscard]] std::int64_t granularity() const noexcept { return granularity_; }

  [[nodiscard]] double bytes(std::int64_t length) const noexcept {
    return fixed_ + per_token_ * static_cast<double>(length);
  }

  // 0 when not even the fixed part fits: the scheme cannot run on this GPU.
  [[nodiscard]] std::int64_t max_len() const noexcept {
    const double tokens = (budget_ - fixed_) / per_token_;
    if (!(tokens >= static_cast<double>(granularity_))) return 0;
    const double blocks = std::floor(tokens / static_cast<double>(granularity_));
    const std::int64_t most_blocks = max_tokens / granularity_;
    return static_cast<std::int64_t>(std::min(blocks, static_cast<double>(most_blocks))) * granularity_;
  }

  friend bool operator==(const LinearMemory&, const LinearMemory&) = default;

private:
  double fixed_;
  double per_token_;
  double budget_;
  std::int64_t granularity_;
};

// A measured (length, peak bytes) pair and the linear fit made from such samples (cost/fit.hpp). Here, not beside
// the fit, so that reading and writing them needs no Eigen.
struct MemorySample {
  std::int64_t length = 0;
  double bytes = 0;
};

struct MemoryFit {
  double fixed_bytes = 0;
  double bytes_per_token = 0;
  double relative_rms_error = 0;  // sqrt(mean(((bytes(l) - m) / m)²)) over the samples
  std::size_t samples = 0;
};

// Hydraulis App. B.1, for a Transformer of `layers` layers, hidden size H and vocabulary V, trained
// with mixed-precision Adam whose fp32 parameters and optimizer states are sharded over all N GPUs:
//   activations   layers·l·H/TP·A           (the first stage holds PP in-flight micro-batches of layers/PP)
//   model states  layers·H²/N·B·α + (layers/PP)·H²/TP·B·(1−α)
//   embedding     H·V/N·16·α + H·V/TP·e·(1−α),  e = 32 when PP = 1 (embedding and LM head on one stage), else 16
// budget = GPU memory − context overhead (CUDA/NCCL) − safety margin. A (bytes per token, hidden unit and
// layer) depends on TP and comes from profiling; B (bytes per H² per layer) ≈ 16 bytes × parameters/H².
// An uneven layer split is charged at its fullest stage, ceil(layers/PP).
// How the model states are kept: Hydraulis' (fp32 weights and optimizer states sharded over all GPUs, the 16-bit
// weights and gradients replicated per TP shard), or ZeRO-3's.
enum class StateSharding { hydraulis, zero3 };
inline constexpr NameTable<StateSharding, 2> state_sharding_names{
    {{StateSharding::hydraulis, "hydraulis"}, {StateSharding::zero3, "zero3"}}};

struct TransformerMemorySpec {
  int layers = 0;
  std::int64_t hidden = 0;
  std::int64_t vocab = 0;
  std::map<int, double> activation_bytes;  // A by TP degree
  double state_bytes = 0;                  // B
  double alpha = 0.75;                     // share of fp32 states (sharded over N): 32·3 / (32·3 + 16·2)
  double gpu_memory_bytes = 0;
  double context_overhead_bytes = 0;
  double safety_margin_bytes = 0;
  std::int64_t granularity = 128;
  StateSharding state_sharding = StateSharding::hydraulis;  // how for_scheme keeps the states unless told

  [[nodiscard]] double activation_constant(int tp) const {
    const auto it = activation_bytes.find(tp);
    sluice::require(it != activation_bytes.end(), "memory model: no activation constant A for tp ", tp);
    return it->second;
  }

  // The parameters the model states count: layers·H²·B/16 (B is 16 bytes per parameter) and the H·V embedding.
  [[nodiscard]] double parameters() const noexcept {
    const auto h = static_cast<double>(hidden);
    return layers * h * h * state_bytes / 16 + h * static_cast<double>(vocab);
  }

  [[nodiscard]] double budget_bytes() const noexcept {
    return gpu_memory_bytes - context_overhead_bytes - safety_margin_bytes;
  }

  [[nodiscard]] double model_state_bytes(const Scheme& scheme, std::int64_t cluster_gpus) const {
    check(scheme, cluster_gpus);
    const double h2 = static_cast<double>(hidden) * static_cast<double>(hidden);
    const double sharded = layers * h2 / static_cast<double>(cluster_gpus) * state_bytes * alpha;
    const double replicated = static_cast<double>(stage_layers(scheme)) * h2 / scheme.tp() * state_bytes * (1 - alpha);
    return sharded + replicated;
  }

  [[nodiscard]] double embedding_bytes(const Scheme& scheme, std::int64_t cluster_gpus) const {
    check(scheme, cluster_gpus);
    const double params = static_cast<double>(hidden) * static_cast<double>(vocab);
    const double half_precision = scheme.pp() == 1 ? 32.0 : 16.0;
    return params / static_cast<double>(cluster_gpus) * 16.0 * alpha +
           params / scheme.tp() * half_precision * (1 - alpha);
  }

  // Peak activation bytes per token of a micro-batch, summed over the in-flight micro-batches of the first stage.
  // They divide by TP·C; with full recomputation a layer keeps only its 16-bit input and one layer's working set is
  // alive at a time (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", §4).
  [[nodiscard]] double activation_bytes_per_token(const Scheme& scheme) const {
    const double in_flight_layers = static_cast<double>(stage_layers(scheme) * scheme.pp());
    const double a = activation_constant(scheme.tp());
    if (scheme.recompute() == Recompute::none)
      return in_flight_layers * static_cast<double>(hidden) / scheme.tp() / scheme.cp() * a;
    constexpr double input_bytes = 2;
    return static_cast<double>(hidden) / scheme.tp() / scheme.cp() * (in_flight_layers * input_bytes + a);
  }

  // ZeRO-3's model states (DeepSpeed's): everything sharded over the cluster, and one layer's 16-bit weights and
  // gradients gathered at a time.
  [[nodiscard]] double zero3_state_bytes(const Scheme& scheme, std::int64_t cluster_gpus) const {
    check(scheme, cluster_gpus);
    const double h2 = static_cast<double>(hidden) * static_cast<double>(hidden);
    return parameters() * 16 / static_cast<double>(cluster_gpus) + h2 / scheme.tp() * state_bytes * (1 - alpha);
  }

  [[nodiscard]] LinearMemory for_scheme(const Scheme& scheme, std::int64_t cluster_gpus) const {
    return for_scheme(scheme, cluster_gpus, state_sharding);
  }

  [[nodiscard]] LinearMemory for_scheme(const Scheme& scheme, std::int64_t cluster_gpus, StateSharding sharding) const {
    const double states = sharding == StateSharding::hydraulis
                              ? model_state_bytes(scheme, cluster_gpus) + embedding_bytes(scheme, cluster_gpus)
                              : zero3_state_bytes(scheme, cluster_gpus);
    return {states, activation_bytes_per_token(scheme), std::max(0.0, budget_bytes()), granularity};
  }

private:
  [[nodiscard]] std::int64_t stage_layers(const Scheme& scheme) const noexcept {
    return (std::int64_t{layers} + scheme.pp() - 1) / scheme.pp();
  }

  void check(const Scheme& scheme, std::int64_t cluster_gpus) const {
    sluice::require(cluster_gpus >= 1, "memory model: cluster GPU count must be >= 1, got ", cluster_gpus);
    sluice::require(scheme.gpus() <= cluster_gpus, "memory model: scheme ", scheme.name(), " needs ", scheme.gpus(),
                    " GPUs but the cluster has ", cluster_gpus);
    sluice::require(scheme.pp() <= layers, "memory model: scheme ", scheme.name(), " has more stages than the ", layers,
                    " layers");
  }
};

// Raises invalid_input unless the sizes are >= 1, every activation constant and B finite and > 0, alpha in [0, 1],
// the memory sizes finite (GPU memory > 0, the overhead and margin >= 0) and the granularity in [1, 2^52].
inline void require_valid(const TransformerMemorySpec& spec) {
  sluice::require(spec.layers >= 1, "memory model: layers must be >= 1, got ", spec.layers);
  sluice::require(spec.hidden >= 1, "memory model: hidden must be >= 1, got ", spec.hidden);
  sluice::require(spec.vocab >= 1, "memory model: vocab must be >= 1, got ", spec.vocab);
  sluice::require(!spec.activation_bytes.empty(), "memory model: activation constants A are missing");
  for (const auto& [tp, a] : spec.activation_bytes) {
    sluice::require(tp >= 1, "memory model: A is given for tp ", tp, ", which is not a TP degree");
    sluice::require(std::isfinite(a) && a > 0, "memory model: A for tp ", tp, " must be finite and > 0, got ", a);
  }
  sluice::require(std::isfinite(spec.state_bytes) && spec.state_bytes > 0,
                  "memory model: B must be finite and > 0, got ", spec.state_bytes);
  sluice::require(std::isfinite(spec.alpha) && spec.alpha >= 0 && spec.alpha <= 1,
                  "memory model: alpha must be in [0, 1], got ", spec.alpha);
  sluice::require(std::isfinite(spec.gpu_memory_bytes) && spec.gpu_memory_bytes > 0,
                  "memory model: GPU memory must be finite and > 0, got ", spec.gpu_memory_bytes);
  sluice::require(std::isfinite(spec.context_overhead_bytes) && spec.context_overhead_bytes >= 0,
                  "memory model: context overhead must be finite and >= 0, got ", spec.context_overhead_bytes);
  sluice::require(std::isfinite(spec.safety_margin_bytes) && spec.safety_margin_bytes >= 0,
                  "memory model: safety margin must be finite and >= 0, got ", spec.safety_margin_bytes);
  sluice::require(spec.granularity >= 1 && spec.granularity <= LinearMemory::max_tokens,
                  "memory model: granularity must be in [1, 2^52], got ", spec.granularity);
}

}  // namespace sluice::cost
