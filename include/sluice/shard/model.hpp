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

  void validate() const {
    sluice::require(layers >= 1 && layers <= max_layers, "shard model ", name, ": layers must be in [1, ", max_layers,
                    "], got ", layers);
    sluice::require(!tensors.empty(), "shard model ", name, ": has no tensors");
    std::set<std::string, std::less<>> seen;
    for (const Tensor& tensor : tensors) {
      sluice::require(!tensor.name.empty(), "shard model ", name, ": a tensor has an empty name");
      sluice::require(seen.insert(tensor.name).second, "shard model ", name, ": tensor '", tensor.name,
                      "' is listed twice");
      sluice::require(tensor.elements >= 1 && tensor.elements <= max_elements, "shard model ", name, ": tensor '",
                      tensor.name, "' elements must be in [1, ", max_elements, "], got ", tensor.elements);
    }
    sluice::require(param_bytes >= 1 && param_bytes <= 16, "shard model ", name,
                    ": param_bytes must be in [1, 16], got ", param_bytes);
    sluice::require(grad_bytes >= 1 && grad_bytes <= 16, "shard model ", name, ": grad_bytes must be in [1, 16], got ",
                    grad_bytes);
  }

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
  model.validate();
  return model;
}

}  // namespace sluice::shard
