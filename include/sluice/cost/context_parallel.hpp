#pragma once
// Context parallelism (CP) and full activation recomputation (AC) derived from a measured ⟨TP, PP⟩ scheme: one
// stage's time and peak memory when C ranks share every sequence, by DeepSpeed-Ulysses' all-to-alls (Jacobs et
// al., arXiv 2309.14509, §3), by ring attention with Megatron-LM's causal balance (Liu et al., arXiv 2310.01889;
// Megatron-LM's context parallelism), or by both (USP: Fang and Zhao, arXiv 2405.07719: Ulysses within U ranks,
// the ring across C/U). The Hydraulis paper (App. B.1) says "a similar modeling approach" applies once such
// degrees are added; docs/cost-models.md states every formula and where it comes from. A measured profile of the
// CP scheme replaces the derivation wherever a user has one.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/memory.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::cost {

enum class CpKind { ulysses, ring, hybrid };
inline constexpr NameTable<CpKind, 3> cp_kind_names{
    {{CpKind::ulysses, "ulysses"}, {CpKind::ring, "ring"}, {CpKind::hybrid, "hybrid"}}};

enum class Recompute { none, full };

// How the C ranks of a stage share its sequences.
struct ContextParallel {
  int degree = 1;  // C
  CpKind kind = CpKind::ring;
  int ulysses_degree = 1;  // U: the Ulysses part of a hybrid (C / U ranks form the ring); C for Ulysses, 1 for ring
  Recompute recompute = Recompute::none;
};

// What the derivation needs besides the base scheme's fit: the model's shape (the profiles give layers and hidden,
// not the heads), the stage's TP and layers, and the CP group's links (placed within a node first).
struct CpSetup {
  QuadraticLatency base;  // one stage's forward + backward time of one sequence on ⟨TP, PP⟩
  int tp = 1;
  int stage_layers = 1;
  std::int64_t hidden = 0;
  int heads = 0;
  int kv_heads = 0;  // grouped-query attention: K and V have kv_heads heads
  int element_bytes = 2;
  double backward_ratio = 2;  // backward over forward time, as the simulator splits a stage's time
  double link_latency = 1e-5;
  double link_bandwidth = 200e9;  // bytes per second and direction, per GPU

  void validate(const ContextParallel& cp) const {
    sluice::require(cp.degree >= 1 && cp.degree <= Scheme::max_degree, "context parallelism: the degree must be in [1, ",
                    Scheme::max_degree, "], got ", cp.degree);
    const int ulysses = this->ulysses(cp);
    sluice::require(ulysses >= 1 && cp.degree % ulysses == 0, "context parallelism: the Ulysses degree ", ulysses,
                    " must divide the CP degree ", cp.degree);
    sluice::require(tp >= 1 && stage_layers >= 1 && hidden >= 1 && element_bytes >= 1,
                    "context parallelism: tp, stage layers, hidden and element bytes must be >= 1");
    sluice::require(heads >= 1 && kv_heads >= 1 && heads % kv_heads == 0, "context parallelism: ", heads,
                    " heads and ", kv_heads, " key/value heads: the heads must be >= 1 and a multiple of the KV heads");
    // Ulysses gives each of TP·U ranks whole heads; KV heads replicated to fill them are not modelled.
    sluice::require(kv_heads % (tp * ulysses) == 0, "context parallelism: Ulysses over ", ulysses, " ranks with TP ", tp,
                    " splits the heads ", tp * ulysses, " ways, which must divide the ", kv_heads,
                    " key/value heads (and so the ", heads, " heads)");
    sluice::require(std::isfinite(backward_ratio) && backward_ratio > 0,
                    "context parallelism: the backward ratio must be finite and > 0, got ", backward_ratio);
    sluice::require(std::isfinite(link_latency) && link_latency >= 0 && std::isfinite(link_bandwidth) &&
                        link_bandwidth > 0,
                    "context parallelism: the link needs a finite latency >= 0 and bandwidth > 0");
  }

  [[nodiscard]] int ulysses(const ContextParallel& cp) const noexcept {
    return cp.kind == CpKind::ulysses ? cp.degree : cp.kind == CpKind::ring ? 1 : cp.ulysses_degree;
  }
};

// The scheme's spelling with its CP and AC: ⟨TP, PP⟩'s own for CP 1 without AC ("tp4pp2"), else
// "tp{TP}cp{C}{kind}pp{PP}", the hybrid's kind with its Ulysses degree, and "ac" last: "tp2cp4ringpp1",
// "tp1cp8hybrid2pp1", "tp8pp2ac".
inline std::string cp_scheme_name(const Scheme& scheme, const ContextParallel& cp) {
  std::string name = "tp" + std::to_string(scheme.tp());
  if (cp.degree > 1) {
    name += "cp" + std::to_string(cp.degree) + std::string(name_in(cp_kind_names, cp.kind));
    if (cp.kind == CpKind::hybrid) name += std::to_string(cp.ulysses_degree);
  }
  name += "pp" + std::to_string(scheme.pp());
  if (cp.recompute == Recompute::full) name += "ac";
  return name;
}

// One stage's time of one sequence of `length` tokens under `cp`, split as the model derives it.
struct CpStageTime {
  double compute = 0;    // the base's (a·l² + b·l)/C + c, times 1 + 1/(1 + r) with AC (one more forward)
  double all_to_all = 0; // Ulysses: exposed, the all-to-alls block the layer
  double ring = 0;       // the ring's exchanges not hidden under a block of attention
  [[nodiscard]] double total() const noexcept { return compute + all_to_all + ring; }
};

inline CpStageTime cp_stage_time(const CpSetup& setup, const ContextParallel& cp, std::int64_t length) {
  setup.validate(cp);
  const double l = static_cast<double>(length);
  const double c = cp.degree;
  const double u = setup.ulysses(cp);
  const double r = c / u;  // ring degree
  const double forward_share = 1 / (1 + setup.backward_ratio);
  const double passes = cp.recompute == Recompute::full ? 1 + forward_share : 1;  // AC runs each forward twice
  const double forwards = cp.recompute == Recompute::full ? 2 : 1;
  const QuadraticLatency& t = setup.base;
  CpStageTime time;
  time.compute = ((t.a() * l * l + t.b() * l) / c + t.c()) * passes;
  const double layers = setup.stage_layers;
  const double e = setup.element_bytes;
  const double tp = setup.tp;
  const double hidden = static_cast<double>(setup.hidden);
  const double kv_hidden = hidden * setup.kv_heads / setup.heads;
  if (u > 1) {
    // Per layer, forward: q, k, v to heads and the output back; backward: their gradients. Each rank holds l/C
    // tokens of a tensor of width/TP elements and sends the (U − 1)/U of it that other ranks' heads need, as U − 1
    // pairwise exchanges (a latency each).
    const double share = (u - 1) / u * (l / c) * e / tp / setup.link_bandwidth;
    const double per_pass = 4 * (u - 1) * setup.link_latency + share * (2 * hidden + 2 * kv_hidden);
    time.all_to_all = layers * per_pass * (forwards + 1);
  }
  if (r > 1) {
    // Per layer, R − 1 steps each pass K and V of a block (l/R tokens' KV width over TP·U) while the rank computes
    // its queries against the block it holds: with the causal balance each step is 1/R of the rank's attention, whose
    // forward and backward are a·l²/C split by the backward ratio. The backward passes dK and dV along too, and
    // after its last step sends them home.
    const double block = (l / r) * kv_hidden / (tp * u) * e / setup.link_bandwidth;
    const double attention = t.a() * l * l / c / layers;  // one layer's on this rank, forward + backward
    const double step_forward = attention * forward_share / r;
    const double step_backward = attention * (1 - forward_share) / r;
    const double exposed_forward = (r - 1) * std::max(0.0, setup.link_latency + 2 * block - step_forward);
    const double exposed_backward = (r - 1) * std::max(0.0, setup.link_latency + 4 * block - step_backward) +
                                    setup.link_latency + 2 * block;
    time.ring = layers * (exposed_forward * forwards + exposed_backward);
  }
  return time;
}

// The quadratic T(l) = a·l² + b·l + c the planners take, fitted (relative least squares, as `sluice fit`) to the
// derived time at lengths from `shortest` to `longest`, and how far it strays: the ring's exposed time is piecewise,
// so the fit's error says how well a quadratic stands for it.
inline FitResult cp_latency(const CpSetup& setup, const ContextParallel& cp, std::int64_t shortest,
                            std::int64_t longest) {
  sluice::require(shortest >= 1 && longest > shortest, "context parallelism: the fitted lengths need 1 <= shortest < "
                  "longest, got ", shortest, " and ", longest);
  std::vector<LatencySample> samples;
  constexpr int points = 32;  // geometric, so short sequences weigh as much as long ones
  for (int k = 0; k < points; ++k) {
    const double ratio = static_cast<double>(longest) / static_cast<double>(shortest);
    const auto length = static_cast<std::int64_t>(std::llround(static_cast<double>(shortest) *
                                                               std::pow(ratio, k / (points - 1.0))));
    if (samples.empty() || samples.back().length != length)
      samples.push_back({length, cp_stage_time(setup, cp, length).total()});
  }
  return fit_quadratic(samples);
}

// How the model states are kept: Hydraulis' (fp32 weights and optimizer states sharded over all GPUs, the 16-bit
// weights and gradients replicated per TP shard), or ZeRO-3 (DeepSpeed's: everything sharded, one layer's 16-bit
// weights and gradients gathered at a time).
enum class StateSharding { hydraulis, zero3 };

// The stage's peak memory under `cp` on ⟨TP, PP⟩: the activations of each in-flight token divide by C; with full
// recomputation a layer keeps only its 16-bit input, and one layer's working set (the memory model's A) is alive at
// a time (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", §4).
inline LinearMemory cp_memory(const TransformerMemorySpec& spec, const Scheme& scheme, const ContextParallel& cp,
                              std::int64_t cluster_gpus, StateSharding sharding = StateSharding::hydraulis) {
  spec.validate();
  sluice::require(cp.degree >= 1, "context parallelism: the degree must be >= 1, got ", cp.degree);
  sluice::require(scheme.gpus() * cp.degree <= cluster_gpus, "memory model: scheme ", scheme.name(), " with CP ",
                  cp.degree, " needs ", scheme.gpus() * cp.degree, " GPUs but the cluster has ", cluster_gpus);
  const double hidden = static_cast<double>(spec.hidden);
  const double h2 = hidden * hidden;
  const double layers = spec.layers;
  const double stage_layers = std::ceil(layers / scheme.pp());
  double fixed = 0;
  if (sharding == StateSharding::hydraulis) {
    fixed = spec.model_state_bytes(scheme, cluster_gpus) + spec.embedding_bytes(scheme, cluster_gpus);
  } else {
    const double gpus = static_cast<double>(cluster_gpus);
    fixed = (layers * h2 * spec.state_bytes + hidden * static_cast<double>(spec.vocab) * 16) / gpus +
            h2 / scheme.tp() * spec.state_bytes * (1 - spec.alpha);
  }
  const double in_flight_layers = stage_layers * scheme.pp();
  const double width = hidden / scheme.tp() / cp.degree;
  const double a = spec.activation_constant(scheme.tp());
  constexpr double input_bytes = 2;  // a layer's 16-bit input, all that recomputation keeps of it
  const double per_token = cp.recompute == Recompute::full ? width * (in_flight_layers * input_bytes + a)
                                                           : width * in_flight_layers * a;
  return {fixed, per_token, std::max(0.0, spec.budget_bytes()), spec.granularity};
}

// What a profile lacks to derive its schemes with CP: the attention heads, and the CP group's links.
struct CpModel {
  int heads = 0;
  int kv_heads = 0;  // 0: as many as the heads
  double link_latency = 1e-5;
  double link_bandwidth = 200e9;  // within a node, where CP groups are placed first
};

// A scheme of a profile derived with CP (and AC): its spelling, GPUs (TP·C·PP), MaxLen by the profile's memory
// model, the derived time and the quadratic fitted to it from 256 tokens to MaxLen.
struct CpScheme {
  std::string name;
  Scheme base;
  ContextParallel cp;
  std::int64_t gpus = 0;
  std::int64_t max_len = 0;
  CpSetup setup;
  FitResult fit;
  [[nodiscard]] double seconds(std::int64_t length) const { return cp_stage_time(setup, cp, length).total(); }
};

// `scheme` of `profile` derived with `cp`; nullopt when it cannot be: wider than the cluster, no memory model or
// activation constant for its TP, or heads that do not split over TP × the Ulysses degree.
inline std::optional<CpScheme> derive_cp_scheme(const Profile& profile, const SchemeCost& scheme,
                                                const ContextParallel& cp, const CpModel& model) {
  const std::optional<TransformerMemorySpec>& memory = profile.spec().memory;
  const std::int64_t gpus = scheme.scheme.gpus() * cp.degree;
  if (!memory || gpus > profile.gpus() || !memory->activation_bytes.contains(scheme.scheme.tp())) return std::nullopt;
  const CpSetup setup{.base = scheme.latency,
                      .tp = scheme.scheme.tp(),
                      .stage_layers = (memory->layers + scheme.scheme.pp() - 1) / scheme.scheme.pp(),
                      .hidden = memory->hidden,
                      .heads = model.heads,
                      .kv_heads = model.kv_heads > 0 ? model.kv_heads : model.heads,
                      .link_latency = model.link_latency,
                      .link_bandwidth = model.link_bandwidth};
  const int ulysses = setup.ulysses(cp);
  sluice::require(ulysses >= 1 && cp.degree % ulysses == 0, "context parallelism: the Ulysses degree ", ulysses,
                  " must divide the CP degree ", cp.degree);
  if (setup.kv_heads % (setup.tp * ulysses) != 0) return std::nullopt;
  setup.validate(cp);
  const std::int64_t max_len = cp_memory(*memory, scheme.scheme, cp, profile.gpus()).max_len();
  return CpScheme{cp_scheme_name(scheme.scheme, cp), scheme.scheme, cp, gpus, max_len, setup,
                  cp_latency(setup, cp, 256, std::max<std::int64_t>(max_len, 512))};
}

}  // namespace sluice::cost
