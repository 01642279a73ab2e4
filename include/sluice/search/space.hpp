#pragma once
// The per-layer search space (Galvatron-BMW Sec. III): decision trees over DP, SDP (ZeRO-3) and TP for
// the N/P devices of one pipeline stage, each with and without activation checkpointing (CKPT). Two paradigms of
// Galvatron's released search are off unless asked for: ZeRO-2, a third data paradigm, and Ulysses sequence
// parallelism (SP), which takes TP's place in a tree (a layer never has both).
// Takeaway 1 puts PP outermost (PP is partitioned first), Takeaway 2 gives every group of a stage the
// same strategy, Takeaway 3 drops every tree that mixes DP and SDP.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"

namespace sluice::search {

enum class Paradigm { dp, sdp, tp, zero2, sp };

// One decision tree: its levels from the outermost (strided ranks, slower links) to the innermost
// (consecutive ranks); every degree is a power of 2 >= 2 and no paradigm appears twice.
struct DecisionTree {
  std::vector<std::pair<Paradigm, int>> levels;
  friend bool operator==(const DecisionTree&, const DecisionTree&) = default;
};

// One layer's strategy inside a stage of tp·sp·dp GPUs. `sp`: Ulysses sequence parallelism (DeepSpeed-Ulysses; the
// `use_sp` of Galvatron's plans): the sp ranks split every sample's sequence, hold whole parameters and trade
// sequence for heads by all-to-all around attention; tp and sp are never both above 1. `tp_inner`: the TP (or SP)
// ranks are consecutive (it is true whenever tp·sp or dp is 1, where the order means nothing). `sdp`: the data
// ranks shard model states (ZeRO-3); `zero2`: they shard gradients and optimizer states and keep whole parameters
// (ZeRO-2); both false whenever dp is 1, never both true. SP's ranks join the data ranks in ZeRO and the gradient
// sync, since they hold the same parameters.
struct LayerStrategy {
  int tp = 1;
  int dp = 1;
  bool sdp = false;
  bool tp_inner = true;
  bool ckpt = false;
  bool zero2 = false;
  int sp = 1;
  friend bool operator==(const LayerStrategy&, const LayerStrategy&) = default;

  // In 64 bits: a strategy read from a file may hold three degrees of 2^20 before it is refused.
  [[nodiscard]] std::int64_t group() const noexcept { return std::int64_t{tp} * sp * dp; }
  // The ranks that split one sample: TP's or SP's (Galvatron's tp_sp_size).
  [[nodiscard]] std::int64_t model_degree() const noexcept { return std::int64_t{tp} * sp; }
  // The ranks that share parameters and sync gradients: ZeRO's sharding degree.
  [[nodiscard]] std::int64_t data_degree() const noexcept { return std::int64_t{dp} * sp; }
  // TP or SP groups and activation layout: two strategies with the same layout need no resharding between them.
  [[nodiscard]] bool same_layout(const LayerStrategy& other) const noexcept {
    return tp == other.tp && sp == other.sp && tp_inner == other.tp_inner;
  }

  // "tp2*sdp4+ckpt", "z2dp8", "sp4*dp2": levels outer to inner.
  [[nodiscard]] std::string name() const {
    const std::string data = (sdp ? "sdp" : zero2 ? "z2dp" : "dp") + std::to_string(dp);
    const std::string model = sp > 1 ? "sp" + std::to_string(sp) : "tp" + std::to_string(tp);
    std::string text;
    if (model_degree() == 1)
      text = data;
    else if (dp == 1)
      text = model;
    else
      text = tp_inner ? data + "*" + model : model + "*" + data;
    return ckpt ? text + "+ckpt" : text;
  }
};

struct SpaceOptions {
  bool dp = true;
  bool sdp = true;
  bool tp = true;
  bool ckpt = true;
  bool tp_outer = true;           // allow TP (or SP) on the strided (outer) ranks; Megatron keeps TP inner
  std::vector<int> pp_degrees{};  // empty: every power of 2 up to min(GPUs, layers)
  int max_tp = 0;                 // 0: no limit; TP must also divide every layer's heads
  bool zero2 = false;             // ZeRO-2 data parallelism
  int max_pp = 0;                 // 0: no limit
  bool ulysses = false;           // Ulysses SP in TP's place; max_tp caps its degree too, which must divide the heads
};

// The paradigms a tree may use beyond the paper's DP, SDP and TP.
struct ExtraParadigms {
  bool zero2 = false;
  bool sp = false;
};

namespace detail {

inline void trees(int remaining, std::vector<std::pair<Paradigm, int>>& prefix, unsigned used, bool takeaway3,
                  ExtraParadigms extra, std::vector<DecisionTree>& out) {
  if (remaining == 1) {
    if (!prefix.empty()) out.push_back({prefix});
    return;
  }
  constexpr unsigned data_bits = (1U << static_cast<unsigned>(Paradigm::dp)) |
                                 (1U << static_cast<unsigned>(Paradigm::sdp)) |
                                 (1U << static_cast<unsigned>(Paradigm::zero2));
  constexpr unsigned model_bits =
      (1U << static_cast<unsigned>(Paradigm::tp)) | (1U << static_cast<unsigned>(Paradigm::sp));
  for (const Paradigm paradigm : {Paradigm::dp, Paradigm::sdp, Paradigm::tp, Paradigm::zero2, Paradigm::sp}) {
    if ((paradigm == Paradigm::zero2 && !extra.zero2) || (paradigm == Paradigm::sp && !extra.sp)) continue;
    const unsigned bit = 1U << static_cast<unsigned>(paradigm);
    if ((used & bit) != 0) continue;
    const bool mixes_data = (bit & data_bits) != 0 && (used & data_bits) != 0;
    if (takeaway3 && mixes_data) continue;
    if ((bit & model_bits) != 0 && (used & model_bits) != 0) continue;  // TP and SP split a sample two ways
    for (int degree = 2; degree <= remaining; degree *= 2) {
      if (remaining % degree != 0) continue;
      prefix.emplace_back(paradigm, degree);
      trees(remaining / degree, prefix, used | bit, takeaway3, extra, out);
      prefix.pop_back();
    }
  }
}

inline bool power_of_two(std::int64_t value) noexcept { return value >= 1 && (value & (value - 1)) == 0; }

}  // namespace detail

// Every decision tree for a group of `group` devices (a power of 2); group 1 has one empty tree (the
// layer sits whole on one device: pure PP). `extra` adds ZeRO-2 and Ulysses SP to the paradigms; SP never joins TP.
inline std::vector<DecisionTree> decision_trees(int group, bool takeaway3, ExtraParadigms extra = {}) {
  sluice::require(detail::power_of_two(group) && group <= (1 << 20),
                  "search space: group size must be a power of 2 in [1, 2^20], got ", group);
  std::vector<DecisionTree> out;
  if (group == 1) return {DecisionTree{}};
  std::vector<std::pair<Paradigm, int>> prefix;
  detail::trees(group, prefix, 0, takeaway3, extra, out);
  return out;
}

// Strategies per layer over every PP degree, with and without CKPT: 68 for 8 GPUs, 44 after Takeaway 3.
inline std::int64_t count_strategies(std::int64_t gpus, bool takeaway3) {
  sluice::require(detail::power_of_two(gpus) && gpus <= (1 << 20),
                  "search space: gpus must be a power of 2 in [1, 2^20], got ", gpus);
  std::int64_t total = 0;
  for (std::int64_t pp = 1; pp <= gpus; pp *= 2)
    total += 2 * static_cast<std::int64_t>(decision_trees(static_cast<int>(gpus / pp), takeaway3).size());
  return total;
}

// A pruned tree (one data paradigm at most) as a layer strategy.
inline LayerStrategy to_strategy(const DecisionTree& tree, bool ckpt) {
  LayerStrategy strategy;
  strategy.ckpt = ckpt;
  bool model_seen_last = false;
  for (const auto& [paradigm, degree] : tree.levels) {
    if (paradigm == Paradigm::tp || paradigm == Paradigm::sp) {
      (paradigm == Paradigm::tp ? strategy.tp : strategy.sp) = degree;
      model_seen_last = true;
    } else {
      sluice::require(strategy.dp == 1, "search space: a tree that mixes data paradigms has no layer strategy");
      strategy.dp = degree;
      strategy.sdp = paradigm == Paradigm::sdp;
      strategy.zero2 = paradigm == Paradigm::zero2;
      model_seen_last = false;
    }
  }
  strategy.tp_inner = strategy.model_degree() == 1 || strategy.dp == 1 || model_seen_last;
  return strategy;
}

// The strategies one stage of `group` devices may use under `options`, in tree order, CKPT variants after.
inline std::vector<LayerStrategy> stage_strategies(int group, const SpaceOptions& options, std::int64_t heads_gcd = 0) {
  std::vector<LayerStrategy> out;
  for (const bool ckpt : {false, true}) {
    if (ckpt && !options.ckpt) continue;
    for (const DecisionTree& tree : decision_trees(group, true, {.zero2 = options.zero2, .sp = options.ulysses})) {
      const LayerStrategy strategy = to_strategy(tree, ckpt);
      if (strategy.tp > 1 && !options.tp) continue;
      if (strategy.dp > 1 && !(strategy.sdp ? options.sdp : strategy.zero2 ? options.zero2 : options.dp)) continue;
      if (!strategy.tp_inner && !options.tp_outer) continue;
      if (options.max_tp > 0 && strategy.model_degree() > options.max_tp) continue;
      if (heads_gcd > 0 && heads_gcd % strategy.model_degree() != 0) continue;
      out.push_back(strategy);
    }
  }
  return out;
}

}  // namespace sluice::search
