#pragma once
// The parameters that pull and push move: a stack of identical layers, each a list of tensors. Every tensor
// is viewed as a 1-D array along its tensor-parallel split axis, so a TP rank, an optimizer segment and a
// mutual slice are all contiguous ranges of that array.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::shard {

struct Tensor {
  std::string name;
  std::int64_t elements = 0;  // per layer
  friend bool operator==(const Tensor&, const Tensor&) = default;
};

struct Model {
  static constexpr int max_layers = 1 << 16;
  static constexpr std::int64_t max_elements = std::int64_t{1} << 40;

  std::string name;
  int layers = 0;
  std::vector<Tensor> tensors;
  int param_bytes = 2;  // bytes per pulled element (16-bit parameters after the fp32 -> 16-bit cast)
  int grad_bytes = 2;   // bytes per pushed gradient element

  [[nodiscard]] std::int64_t layer_elements() const noexcept {
    std::int64_t total = 0;
    for (const Tensor& tensor : tensors) total += tensor.elements;
    return total;
  }

  [[nodiscard]] std::int64_t max_tensor_elements() const noexcept {
    std::int64_t widest = 0;
    for (const Tensor& tensor : tensors) widest = std::max(widest, tensor.elements);
    return widest;
  }

  friend bool operator==(const Model&, const Model&) = default;
};

// Raises invalid_input unless the model has 1 to max_layers layers, named tensors of 1 to max_elements elements
// each, and 1 to 16 bytes per parameter and gradient.
inline void require_valid(const Model& model) {
  sluice::require(model.layers >= 1 && model.layers <= Model::max_layers, "shard model ", model.name,
                  ": layers must be in [1, ", Model::max_layers, "], got ", model.layers);
  sluice::require(!model.tensors.empty(), "shard model ", model.name, ": has no tensors");
  std::set<std::string, std::less<>> seen;
  for (const Tensor& tensor : model.tensors) {
    sluice::require(!tensor.name.empty(), "shard model ", model.name, ": a tensor has an empty name");
    sluice::require(seen.insert(tensor.name).second, "shard model ", model.name, ": tensor '", tensor.name,
                    "' is listed twice");
    sluice::require(tensor.elements >= 1 && tensor.elements <= Model::max_elements, "shard model ", model.name,
                    ": tensor '", tensor.name, "' elements must be in [1, ", Model::max_elements, "], got ",
                    tensor.elements);
  }
  sluice::require(model.param_bytes >= 1 && model.param_bytes <= 16, "shard model ", model.name,
                  ": param_bytes must be in [1, 16], got ", model.param_bytes);
  sluice::require(model.grad_bytes >= 1 && model.grad_bytes <= 16, "shard model ", model.name,
                  ": grad_bytes must be in [1, 16], got ", model.grad_bytes);
}

// A LLaMA-style layer from a profile's model description: fused QKV (3H x H), attention output (H x H),
// fused gate and up projections (2F x H) and down projection (F x H), with F = 8H/3 rounded up to a
// multiple of 256 (LLaMA's rule: 11008 for H = 4096, 17920 for H = 6656). Norm weights (2H per layer) are
// replicated across TP rather than split and are left out.
inline Model llama_like(const cost::ModelInfo& info) {
  sluice::require(info.hidden >= 1 && info.hidden <= (std::int64_t{1} << 20), "shard model ", info.name,
                  ": hidden must be in [1, 2^20], got ", info.hidden);
  const std::int64_t h = info.hidden;
  const std::int64_t ffn = (8 * h / 3 + 255) / 256 * 256;
  Model model{info.name,
              info.layers,
              {{"qkv", 3 * h * h}, {"attn_out", h * h}, {"mlp_gate_up", 2 * ffn * h}, {"mlp_down", ffn * h}},
              2,
              2};
  require_valid(model);
  return model;
}

}  // namespace sluice::shard
