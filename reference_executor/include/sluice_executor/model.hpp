#pragma once
// The reference executor's model: a LLaMA-style decoder (token embedding; per layer RMSNorm, QKV projection,
// rotary embedding, causal attention, output projection and residual, RMSNorm, SwiGLU MLP and residual; final
// RMSNorm and LM head). Its parameters, in one canonical order, and their deterministic initial values.
//
// Initial values depend only on (seed, tensor), never on how layers are split into stages, so every backend
// and every rank holds identical weights for a layer. They are rounded to bf16, so the CUDA backend's bf16
// weights and the host backend's doubles are the same numbers.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"

namespace sluice::executor {

struct ModelConfig {
  int layers = 2;
  std::int64_t hidden = 64;
  int heads = 2;
  std::int64_t ffn = 128;  // SwiGLU inner width (the gate and up projections are each hidden × ffn)
  std::int64_t vocab = 64;
  double rope_theta = 10000;
  double norm_eps = 1e-5;
  std::uint64_t seed = 1;
  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

// Raises invalid_input naming the first field out of range.
inline void require_valid(const ModelConfig& model) {
  using sluice::require;
  require(model.layers >= 1 && model.layers <= 4096, "model: layers must be in [1, 4096], got ", model.layers);
  require(model.hidden >= 2 && model.hidden <= (1 << 20), "model: hidden must be in [2, 1048576], got ", model.hidden);
  require(model.heads >= 1 && model.heads <= model.hidden, "model: heads must be in [1, hidden = ", model.hidden,
          "], got ", model.heads);
  require(model.hidden % model.heads == 0, "model: hidden ", model.hidden, " is not a multiple of heads ", model.heads);
  require((model.hidden / model.heads) % 2 == 0, "model: head dimension hidden / heads = ", model.hidden / model.heads,
          " must be even (rotary embedding turns pairs)");
  require(model.ffn >= 1 && model.ffn <= (1 << 22), "model: ffn must be in [1, 4194304], got ", model.ffn);
  // Token ids are int32 on the device.
  require(model.vocab >= 2 && model.vocab <= (1 << 24), "model: vocab must be in [2, 16777216], got ", model.vocab);
  require(std::isfinite(model.rope_theta) && model.rope_theta > 0, "model: rope_theta must be finite and > 0, got ",
          model.rope_theta);
  require(std::isfinite(model.norm_eps) && model.norm_eps > 0, "model: norm_eps must be finite and > 0, got ",
          model.norm_eps);
}

inline std::int64_t head_dim(const ModelConfig& model) { return model.hidden / model.heads; }

enum class ParameterKind : std::uint8_t {
  embedding,         // [vocab, hidden]
  attention_norm,    // [1, hidden]
  qkv,               // [hidden, 3·hidden]: q | k | v columns
  attention_output,  // [hidden, hidden]
  mlp_norm,          // [1, hidden]
  gate_up,           // [hidden, 2·ffn]: gate | up columns
  down,              // [ffn, hidden]
  final_norm,        // [1, hidden]
  lm_head,           // [hidden, vocab]
};

inline constexpr int tensors_per_layer = 6;

// One parameter tensor, row-major [rows, cols]; projections are applied as x·W.
struct ParameterTensor {
  ParameterKind kind = ParameterKind::embedding;
  int layer = -1;  // -1 for the embedding and the head's tensors
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  [[nodiscard]] std::size_t size() const noexcept { return static_cast<std::size_t>(rows * cols); }
  [[nodiscard]] std::string name() const {
    constexpr const char* names[] = {"embedding", "attention_norm", "qkv",        "attention_output", "mlp_norm",
                                     "gate_up",   "down",           "final_norm", "lm_head"};
    const std::string base = names[static_cast<std::size_t>(kind)];
    return layer < 0 ? base : "layer" + std::to_string(layer) + "." + base;
  }
  friend bool operator==(const ParameterTensor&, const ParameterTensor&) = default;
};

// Canonical order: embedding; per layer attention_norm, qkv, attention_output, mlp_norm, gate_up, down; final_norm,
// lm_head. Tensor indices below refer to this order.
inline std::vector<ParameterTensor> parameter_tensors(const ModelConfig& model) {
  require_valid(model);
  const std::int64_t h = model.hidden;
  std::vector<ParameterTensor> tensors{{ParameterKind::embedding, -1, model.vocab, h}};
  for (int l = 0; l < model.layers; ++l) {
    tensors.push_back({ParameterKind::attention_norm, l, 1, h});
    tensors.push_back({ParameterKind::qkv, l, h, 3 * h});
    tensors.push_back({ParameterKind::attention_output, l, h, h});
    tensors.push_back({ParameterKind::mlp_norm, l, 1, h});
    tensors.push_back({ParameterKind::gate_up, l, h, 2 * model.ffn});
    tensors.push_back({ParameterKind::down, l, model.ffn, h});
  }
  tensors.push_back({ParameterKind::final_norm, -1, 1, h});
  tensors.push_back({ParameterKind::lm_head, -1, h, model.vocab});
  return tensors;
}

inline std::size_t tensor_count(const ModelConfig& model) {
  return 3 + static_cast<std::size_t>(model.layers) * tensors_per_layer;
}
inline std::size_t embedding_tensor() { return 0; }
inline std::size_t layer_tensor(int layer, ParameterKind kind) {
  return 1 + static_cast<std::size_t>(layer) * tensors_per_layer +
         (static_cast<std::size_t>(kind) - static_cast<std::size_t>(ParameterKind::attention_norm));
}
inline std::size_t final_norm_tensor(const ModelConfig& model) { return tensor_count(model) - 2; }
inline std::size_t lm_head_tensor(const ModelConfig& model) { return tensor_count(model) - 1; }

// The tensors a pipeline stage holds: the embedding on the first stage, its layers [first_layer, end_layer), the
// head on the last stage. They are contiguous in the canonical order: [begin, end).
struct TensorRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  [[nodiscard]] bool contains(std::size_t tensor) const noexcept { return tensor >= begin && tensor < end; }
};
inline TensorRange stage_tensors(const ModelConfig& model, int first_layer, int end_layer, bool first_stage,
                                 bool last_stage) {
  const std::size_t begin = first_stage ? embedding_tensor() : layer_tensor(first_layer, ParameterKind::attention_norm);
  const std::size_t end = last_stage ? tensor_count(model) : layer_tensor(end_layer, ParameterKind::attention_norm);
  return {begin, end};
}

// Round to the nearest bf16 (ties to even), through float; inputs are finite.
inline double round_to_bf16(double value) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(static_cast<float>(value));
  bits += 0x7FFFU + ((bits >> 16) & 1U);
  return static_cast<double>(std::bit_cast<float>(bits & 0xFFFF0000U));
}

// Initial values of tensor `index` (canonical order), row-major, each exactly representable in bf16:
// projections N(0, 1/fan_in) so activations stay O(1) through the layers, the embedding N(0, 1), norm weights
// uniform in [0.9, 1.1] (not all ones, so that their gradients are exercised). Drawn one at a time from the
// tensor's own random stream, so that a TP shard can be drawn without the values around it (shards.hpp).
class InitialValueStream {
public:
  InitialValueStream(const ModelConfig& model, std::size_t index) : rng_(Rng::stream(model.seed, index)) {
    const std::vector<ParameterTensor> tensors = parameter_tensors(model);
    sluice::require(index < tensors.size(), "model: tensor index ", index, " outside [0, ", tensors.size(), ")");
    tensor_ = tensors[index];
    norm_ = tensor_.kind == ParameterKind::attention_norm || tensor_.kind == ParameterKind::mlp_norm ||
            tensor_.kind == ParameterKind::final_norm;
    scale_ = tensor_.kind == ParameterKind::embedding ? 1.0 : 1.0 / std::sqrt(static_cast<double>(tensor_.rows));
  }

  [[nodiscard]] const ParameterTensor& tensor() const noexcept { return tensor_; }
  double next() noexcept { return round_to_bf16(norm_ ? 0.9 + 0.2 * rng_.uniform() : scale_ * rng_.normal()); }
  // Passes over `count` values: their draws without their arithmetic (a uniform takes one, a normal two).
  void skip(std::size_t count) noexcept {
    for (std::size_t k = 0; k < (norm_ ? count : 2 * count); ++k) rng_();
  }

private:
  Rng rng_;
  ParameterTensor tensor_;
  bool norm_ = false;
  double scale_ = 1;
};

inline std::vector<double> initial_values(const ModelConfig& model, std::size_t index) {
  InitialValueStream stream(model, index);
  std::vector<double> values(stream.tensor().size());
  for (double& value : values) value = stream.next();
  return values;
}

}  // namespace sluice::executor
