#pragma once
// Analytic per-layer cost estimator (Galvatron-BMW Sec. V, App. C/D): memory as tensor shapes times
// dtype size, compute from a profiled or FLOP-derived forward time per sample plus a profiled time per
// micro-batch (backward = 2x forward), and
// communication as volume over the bandwidth of the link level a group spans. Overlapping the backward
// with the gradient communication slows both by γ (T = γ·min(Tc, Tm) + |Tc − Tm|).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/search/model.hpp"
#include "sluice/search/space.hpp"

namespace sluice::search {

// One layer under one strategy, for one micro-batch of `micro_batch` samples spread over the stage.
struct LayerCost {
  double forward_bytes = 0;   // O_f: activations kept until the backward, per in-flight micro-batch
  double backward_bytes = 0;  // O_b: extra activations live during this layer's backward (CKPT recompute)
  double state_bytes = 0;     // O_ms: parameters, gradients, optimizer states
  double time_sync = 0;       // forward + backward, with the gradient synchronisation (last micro-batch)
  double time_nosync = 0;     // forward + backward without it (gradient accumulation)
};

// What a stage holds and spends besides its layers (the vocabulary layers and the reserved bytes).
struct StageExtra {
  double bytes = 0;
  double time_sync = 0;    // one micro-batch, with the vocabulary layers' gradient sync
  double time_nosync = 0;  // without it
};

class AnalyticEstimator {
public:
  AnalyticEstimator(ModelSpec model, ClusterSpec cluster) : model_(std::move(model)), cluster_(std::move(cluster)) {
    require_valid(model_);
    require_valid(cluster_);
    for (const LayerSpec& layer : model_.layers) {
      const auto s = static_cast<double>(layer.sequence);
      const auto h = static_cast<double>(layer.hidden);
      // Matmuls: 2 FLOPs per parameter per token; attention scores and values: 4·s·span·h.
      const double flops = 2.0 * static_cast<double>(layer.parameter_count()) * s +
                           4.0 * s * static_cast<double>(layer.attention_span()) * h;
      seconds_per_sample_.push_back(layer.forward_seconds > 0 ? layer.forward_seconds
                                                              : flops / (cluster_.flops * cluster_.efficiency));
    }
  }

  [[nodiscard]] const ModelSpec& model() const noexcept { return model_; }
  [[nodiscard]] const ClusterSpec& cluster() const noexcept { return cluster_; }
  [[nodiscard]] int layers() const noexcept { return static_cast<int>(model_.layers.size()); }

  // Activation bytes of one sample kept by a non-CKPT layer (Megatron's count, generalised to any FFN
  // width, attention span and dtype): 10·s·h unsplit, (8h + 4·ffn)·s and 5·a·s·span split by TP, at
  // 2-byte elements.
  // A profiled layer's own table stands in for the count.
  [[nodiscard]] double activation_bytes(int layer, int tp) const noexcept {
    const LayerSpec& spec = model_.layers[static_cast<std::size_t>(layer)];
    if (!spec.activation_bytes.empty()) return profiled(spec.activation_bytes, tp);
    const auto s = static_cast<double>(spec.sequence);
    const auto h = static_cast<double>(spec.hidden);
    const double split = (8.0 * h + 4.0 * static_cast<double>(spec.ffn)) * s +
                         5.0 * static_cast<double>(spec.heads) * s * static_cast<double>(spec.attention_span());
    return (10.0 * s * h + split / tp) * model_.dtype_bytes / 2.0;
  }

  // What a checkpointed layer keeps of one sample: its input, or the profiled bytes.
  [[nodiscard]] double checkpoint_bytes(int layer, int tp) const noexcept {
    const LayerSpec& spec = model_.layers[static_cast<std::size_t>(layer)];
    return spec.checkpoint_bytes.empty() ? boundary_bytes(layer) : profiled(spec.checkpoint_bytes, tp);
  }

  // The layer input (boundary activation) of one sample, replicated over TP.
  [[nodiscard]] double boundary_bytes(int layer) const noexcept {
    const LayerSpec& spec = model_.layers[static_cast<std::size_t>(layer)];
    return static_cast<double>(spec.sequence * spec.hidden) * model_.dtype_bytes;
  }

  // `micro_batches` > 1: gradients accumulate over them, so ZeRO-2 keeps them whole until the last.
  [[nodiscard]] LayerCost layer(int layer, const LayerStrategy& strategy, std::int64_t micro_batch,
                                int micro_batches = 1) const {
    const LayerSpec& spec = model_.layers[static_cast<std::size_t>(layer)];
    const auto split = static_cast<double>(strategy.model_degree());  // TP's or SP's ranks share each sample
    const double b = static_cast<double>(micro_batch) / strategy.dp;  // samples per TP or SP group
    const double params = static_cast<double>(spec.parameter_count()) / strategy.tp;  // per device, before ZeRO

    LayerCost cost;
    const double kept = b * sample_checkpoint_bytes(layer, strategy);
    const double intermediate = std::max(0.0, b * sample_activation_bytes(layer, strategy) - kept);
    cost.forward_bytes = strategy.ckpt ? kept : kept + intermediate;
    cost.backward_bytes = strategy.ckpt ? intermediate : 0.0;
    cost.state_bytes = state_bytes(params, strategy, micro_batches);

    const double forward = seconds_per_sample_[static_cast<std::size_t>(layer)] * b / split + spec.micro_batch_seconds;
    const double sample_bytes = b * static_cast<double>(spec.sequence * spec.hidden) * model_.dtype_bytes;
    double model_pass = 0;  // per pass
    if (strategy.tp > 1) {
      model_pass = all_reduce_seconds(strategy, sample_bytes, spec.decoder ? 3.0 : 2.0);
    } else if (strategy.sp > 1) {
      // Each attention's Q, K, V to heads and its output back to sequence: four all-to-alls of a 1/sp slice, each
      // keeping 1/sp of it.
      model_pass = all_to_all_seconds(strategy, sample_bytes, spec.decoder ? 8.0 : 4.0);
    }
    // The backward is twice the forward's work; the recompute repeats the forward's work and collectives.
    const double backward = (strategy.ckpt ? 3.0 : 2.0) * forward + (strategy.ckpt ? 2.0 : 1.0) * model_pass;
    data_parallel_times(cost, forward + model_pass, backward, params, strategy);
    return cost;
  }

  // What a stage spends besides its layers, for one micro-batch: the reserved bytes on every stage; on the first
  // stage the embedding and on the last the LM head, under the vocabulary layers' own strategy (Galvatron's
  // vtp/vsp/embed_sdp, never checkpointed): their model states, their profiled activations of the `in_flight`
  // micro-batches, and their forward and backward (half the profiled time on each end stage, all on a lone one)
  // with TP's all-reduce of the hidden state per pass (SP's sequence is already split) and the gradient sync.
  [[nodiscard]] StageExtra stage_extra(int stage, int stages, const LayerStrategy& vocabulary, std::int64_t micro_batch,
                                       int micro_batches, double in_flight) const {
    StageExtra extra;
    extra.bytes = static_cast<double>(cluster_.reserved_bytes);
    const bool first = stage == 0;
    const bool last = stage == stages - 1;
    if (!first && !last) return extra;
    double params = 0;
    double activation = 0;
    double hidden_bytes = 0;  // one sample's hidden state at a vocabulary layer
    if (first) {
      params += static_cast<double>(model_.embedding_params);
      activation += model_.embedding_activation_bytes;
      hidden_bytes += boundary_bytes(0);
    }
    if (last) {
      params += static_cast<double>(model_.head_params);
      activation += model_.head_activation_bytes;
      hidden_bytes += boundary_bytes(layers() - 1);
    }
    if (first && last && model_.single_stage_vocabulary_state_bytes > 0)
      params = model_.single_stage_vocabulary_state_bytes / model_.state_bytes_per_param;
    if (first && last && model_.single_stage_vocabulary_activation_bytes > 0)
      activation = model_.single_stage_vocabulary_activation_bytes;
    params /= vocabulary.tp;
    const auto split = static_cast<double>(vocabulary.model_degree());
    const double b = static_cast<double>(micro_batch) / vocabulary.dp;
    extra.bytes += state_bytes(params, vocabulary, micro_batches) + activation * b / split * in_flight;
    const double share = first && last ? 1.0 : 0.5;
    const double forward =
        share * (model_.vocabulary_forward_seconds * b / split + model_.vocabulary_micro_batch_seconds);
    const double model_pass = vocabulary.tp > 1 ? all_reduce_seconds(vocabulary, b * hidden_bytes, 1.0) : 0.0;
    LayerCost cost;
    data_parallel_times(cost, forward + model_pass, 2.0 * forward + model_pass, params, vocabulary);
    extra.time_sync = cost.time_sync;
    extra.time_nosync = cost.time_nosync;
    return extra;
  }

  // R: resharding the activation between two layers whose TP or SP layouts differ, forward and backward. TP to SP of
  // one group is free (each rank keeps its slice of the replicated activation).
  [[nodiscard]] double transition(int layer, const LayerStrategy& from, const LayerStrategy& to,
                                  std::int64_t micro_batch) const noexcept {
    if (from.same_layout(to)) return 0.0;
    if (from.tp > 1 && from.tp == to.sp && from.tp_inner == to.tp_inner) return 0.0;
    const auto degree = static_cast<double>(std::max(from.model_degree(), to.model_degree()));
    const double b = static_cast<double>(micro_batch) / to.dp;
    const double volume = (degree - 1) / degree * b * boundary_bytes(layer);
    return 2.0 * volume / cluster_.bandwidth(to.group());
  }

  // Point-to-point time per micro-batch between stage `group`-blocks: the activation forward and its
  // gradient backward, spread over the stage's devices.
  [[nodiscard]] double p2p(int boundary_layer, std::int64_t group, std::int64_t micro_batch) const noexcept {
    const double volume =
        static_cast<double>(micro_batch) * boundary_bytes(boundary_layer) / static_cast<double>(group);
    return 2.0 * volume / cluster_.pipeline_bandwidth(cluster_.gpus / group, group);
  }

  [[nodiscard]] double overlap(double compute, double communication) const noexcept {
    return cluster_.overlap_slowdown * std::min(compute, communication) + std::abs(compute - communication);
  }

private:
  // Model states per device of `params` parameters (already split by TP): sharded over the data ranks by ZeRO-3; by
  // ZeRO-2 all but the parameters, and the gradients while micro-batches accumulate (Galvatron's ZeRO-2 ratios).
  [[nodiscard]] double state_bytes(double params, const LayerStrategy& strategy, int micro_batches) const noexcept {
    const double states = model_.state_bytes_per_param * params;
    const auto data = static_cast<double>(strategy.data_degree());
    if (strategy.sdp) return states / data;
    if (!strategy.zero2) return states;
    const double kept_bytes = (micro_batches > 1 ? 2.0 : 1.0) * model_.dtype_bytes;
    const double whole = std::min(model_.state_bytes_per_param, kept_bytes) * params;
    return whole + (states - whole) / data;
  }

  // TP (or SP) takes the consecutive ranks when inner, so its group spans its own ranks; DP then strides over the
  // whole stage group, and the other way round. SP's gradient sync spans the whole stage group.
  [[nodiscard]] double model_bandwidth(const LayerStrategy& strategy) const noexcept {
    return strategy.tp_inner ? cluster_.bandwidth(strategy.model_degree())
                             : cluster_.strided_bandwidth(strategy.model_degree(), strategy.group());
  }
  // `count` all-reduces over the strategy's TP group of `bytes` on each rank, and `count` all-to-alls over its SP group
  // of a `bytes` activation split over it: measured where the cluster lists the group size (on consecutive ranks),
  // else volume over bandwidth.
  [[nodiscard]] double all_reduce_seconds(const LayerStrategy& strategy, double bytes, double count) const noexcept {
    if (strategy.tp_inner)
      if (const auto time = detail::measured_seconds(cluster_.all_reduce_times, strategy.tp, bytes))
        return count * *time;
    const auto split = static_cast<double>(strategy.tp);
    return count * 2.0 * (split - 1) / split * bytes / model_bandwidth(strategy);
  }
  [[nodiscard]] double all_to_all_seconds(const LayerStrategy& strategy, double bytes, double count) const noexcept {
    const auto split = static_cast<double>(strategy.sp);
    if (strategy.tp_inner)
      if (const auto time = detail::measured_seconds(cluster_.all_to_all_times, strategy.sp, bytes / split))
        return count * *time;
    return count * (split - 1) / split * bytes / split / model_bandwidth(strategy);
  }

  [[nodiscard]] double sync_bandwidth(const LayerStrategy& strategy) const noexcept {
    return strategy.sp > 1 || strategy.tp == 1 ? cluster_.bandwidth(strategy.group())
           : !strategy.tp_inner                ? cluster_.bandwidth(strategy.dp)
                                               : cluster_.strided_bandwidth(strategy.dp, strategy.group());
  }

  // The times of a forward and a backward (communication within them included) of `params` parameters per device
  // (split by TP) under the strategy's data parallelism: DP's gradient all-reduce (ZeRO-2's reduce-scatter and
  // all-gather of the updated parameters: the same volume) overlapped with the backward on the last micro-batch;
  // ZeRO-3's all-gathers in forward and backward and its reduce-scatter.
  void data_parallel_times(LayerCost& cost, double forward, double backward, double params,
                           const LayerStrategy& strategy) const noexcept {
    const auto data = static_cast<double>(strategy.data_degree());
    const double bytes = params * model_.dtype_bytes;
    const double gather = strategy.sdp ? (data - 1) / data * bytes / sync_bandwidth(strategy) : 0.0;
    const double gradient = data == 1      ? 0.0
                            : strategy.sdp ? gather
                                           : 2.0 * (data - 1) / data * bytes / sync_bandwidth(strategy);
    cost.time_nosync = forward + gather + backward + gather;
    cost.time_sync = forward + gather + overlap(backward, gradient) + gather;
  }

  // One sample's activations and checkpointed input on a device. Ulysses SP splits all of them by sequence: the
  // unsplit activations over sp, or the profiled table at degree sp.
  [[nodiscard]] double sample_activation_bytes(int layer, const LayerStrategy& strategy) const noexcept {
    const LayerSpec& spec = model_.layers[static_cast<std::size_t>(layer)];
    if (strategy.sp == 1 || !spec.activation_bytes.empty())
      return activation_bytes(layer, static_cast<int>(strategy.model_degree()));
    return activation_bytes(layer, 1) / strategy.sp;
  }
  [[nodiscard]] double sample_checkpoint_bytes(int layer, const LayerStrategy& strategy) const noexcept {
    return strategy.sp == 1 ? checkpoint_bytes(layer, strategy.tp) : checkpoint_bytes(layer, 1) / strategy.sp;
  }

  // The table's entry at `tp`, or the nearest profiled degree below it (else above) scaled by the ratio.
  static double profiled(const std::map<int, double>& table, int tp) noexcept {
    auto found = table.upper_bound(tp);
    if (found != table.begin()) --found;
    return found->second * found->first / tp;
  }

  ModelSpec model_;
  ClusterSpec cluster_;
  std::vector<double> seconds_per_sample_;
};

}  // namespace sluice::search
