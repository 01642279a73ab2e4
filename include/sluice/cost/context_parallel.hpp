#pragma once
// Context parallelism (CP) and full activation recomputation (AC) derived from a measured ⟨TP, PP⟩ scheme: one
// stage's time and peak memory when C ranks share every sequence, by DeepSpeed-Ulysses' all-to-alls (Jacobs et
// al., arXiv 2309.14509, §3), by ring attention with Megatron-LM's causal balance (Liu et al., arXiv 2310.01889;
// Megatron-LM's context parallelism), or by both (USP: Fang and Zhao, arXiv 2405.07719: Ulysses within U ranks,
// the ring across C/U). The Hydraulis paper (App. B.1) says "a similar modeling approach" applies once such
// degrees are added; docs/cost-models.md states every formula and where it comes from. A measured profile of the
// CP scheme replaces the derivation wherever a user has one.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/links.hpp"
#include "sluice/cost/memory.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::cost {

// What the derivation needs besides the scheme: the base ⟨TP, PP⟩ scheme's fit, the model's shape, and the CP
// group's links (placed within a node first).
struct CpSetup {
  QuadraticLatency base;       // one stage's forward + backward time of one sequence on ⟨TP, PP⟩
  LastStageWork last_stage{};  // the base's: the head and the loss, on the last stage's tokens
  int stage_layers = 1;
  std::int64_t hidden = 0;
  int heads = 0;
  int kv_heads = 0;  // grouped-query attention: K and V have kv_heads heads
  int element_bytes = 2;
  double backward_ratio = 2;       // backward over forward time, as the simulator splits a stage's time
  Link link = Links{}.intra_node;  // per GPU and direction

  // The last stage's own work under `scheme`: every rank runs the head and the loss on its l/C tokens.
  [[nodiscard]] LastStageWork last_stage_work(const Scheme& scheme) const {
    return {last_stage.b() / scheme.cp(), last_stage.c()};
  }

  // Only Ulysses splits heads further: how TP splits them is the measured base scheme's own business.
  [[nodiscard]] bool splits_heads(const Scheme& scheme) const noexcept {
    return scheme.ulysses() == 1 || (kv_heads >= 1 && kv_heads % (scheme.tp() * scheme.ulysses()) == 0);
  }
};

// Raises invalid_input unless `setup` can derive `scheme`: sizes >= 1, a finite positive backward ratio, a link in
// the physical ranges, and for CP heads that split over TP × the Ulysses degree.
inline void require_valid(const CpSetup& setup, const Scheme& scheme) {
  sluice::require(setup.stage_layers >= 1 && setup.hidden >= 1 && setup.element_bytes >= 1,
                  "context parallelism: stage layers, hidden and element bytes must be >= 1");
  sluice::require(std::isfinite(setup.backward_ratio) && setup.backward_ratio > 0,
                  "context parallelism: the backward ratio must be finite and > 0, got ", setup.backward_ratio);
  require_valid(setup.link, "context parallelism: the link");
  if (scheme.cp() == 1) return;  // the heads matter only to CP
  sluice::require(setup.heads >= 1 && setup.kv_heads >= 1 && setup.heads % setup.kv_heads == 0,
                  "context parallelism: ", setup.heads, " heads and ", setup.kv_heads,
                  " key/value heads: the heads must be >= 1 and a multiple of the KV heads");
  // Ulysses gives each of TP·U ranks whole heads; KV heads replicated to fill them are not modelled.
  sluice::require(setup.splits_heads(scheme), "context parallelism: ", scheme.name(), " splits the heads ",
                  scheme.tp() * scheme.ulysses(), " ways (TP × the Ulysses degree), which must divide the ",
                  setup.kv_heads, " key/value heads (and so the ", setup.heads, " heads)");
}

// One stage's time of one sequence of `length` tokens under `scheme`'s CP and AC, split as the model derives it.
struct CpStageTime {
  // The base's (a·l² + b·l)/C + c, times 1 + 1/(1 + r) with AC (one more forward), but for the last stage's own work
  // w, which AC does not recompute: (a·l² + (b − w_b)·l)/C + c − w_c, times that, plus w_b·l/C + w_c.
  double compute = 0;
  double all_to_all = 0;  // Ulysses: exposed, the all-to-alls block the layer
  double ring = 0;        // the ring's exchanges not hidden under a block of attention
  [[nodiscard]] double total() const noexcept { return compute + all_to_all + ring; }
};

inline CpStageTime cp_stage_time(const CpSetup& setup, const Scheme& scheme, std::int64_t length) {
  require_valid(setup, scheme);
  const double l = static_cast<double>(length);
  const double c = scheme.cp();
  const double u = scheme.ulysses();
  const double r = scheme.ring();
  const bool recompute = scheme.recompute() == Recompute::full;
  const double forward_share = 1 / (1 + setup.backward_ratio);
  const double passes = recompute ? 1 + forward_share : 1;  // AC runs each forward twice
  const double forwards = recompute ? 2 : 1;
  const QuadraticLatency& t = setup.base;
  const LastStageWork& head = setup.last_stage;
  CpStageTime time;
  time.compute =
      ((t.a() * l * l + (t.b() - head.b()) * l) / c + (t.c() - head.c())) * passes + (head.b() * l / c + head.c());
  const double layers = setup.stage_layers;
  const double e = setup.element_bytes;
  const double tp = scheme.tp();
  const double hidden = static_cast<double>(setup.hidden);
  const double kv_hidden = hidden * setup.kv_heads / setup.heads;
  if (u > 1) {
    // Per layer, forward: q, k, v to heads and the output back; backward: their gradients. Each rank holds l/C
    // tokens of a tensor of width/TP elements and sends the (U − 1)/U of it that other ranks' heads need, as U − 1
    // pairwise exchanges (a latency each).
    const double share = (u - 1) / u * (l / c) * e / tp / setup.link.bandwidth;
    const double per_pass = 4 * (u - 1) * setup.link.latency + share * (2 * hidden + 2 * kv_hidden);
    time.all_to_all = layers * per_pass * (forwards + 1);
  }
  if (r > 1) {
    // Per layer, R − 1 steps each pass K and V of a block (l/R tokens' KV width over TP·U) while the rank computes
    // its queries against the block it holds: with the causal balance each step is 1/R of the rank's attention, whose
    // forward and backward are a·l²/C split by the backward ratio. The backward passes dK and dV along too, and
    // after its last step sends them home.
    const double block = (l / r) * kv_hidden / (tp * u) * e / setup.link.bandwidth;
    const double attention = t.a() * l * l / c / layers;  // one layer's on this rank, forward + backward
    const double step_forward = attention * forward_share / r;
    const double step_backward = attention * (1 - forward_share) / r;
    const double exposed_forward = (r - 1) * std::max(0.0, setup.link.latency + 2 * block - step_forward);
    const double exposed_backward =
        (r - 1) * std::max(0.0, setup.link.latency + 4 * block - step_backward) + setup.link.latency + 2 * block;
    time.ring = layers * (exposed_forward * forwards + exposed_backward);
  }
  return time;
}

// The quadratic T(l) = a·l² + b·l + c the planners take, fitted (relative least squares, as `sluice fit`) to the
// derived time at lengths from `shortest` to `longest`, and how far it strays: the ring's exposed time is piecewise,
// so the fit's error says how well a quadratic stands for it. With last-stage work the fit is of the other stages'
// time (the derived time less the work) and T adds the work's b and c back: T less the work is then that fit, and
// T's b and c are at least the work's, as a valid profile needs.
inline FitResult cp_latency(const CpSetup& setup, const Scheme& scheme, std::int64_t shortest, std::int64_t longest) {
  sluice::require(shortest >= 1 && longest > shortest,
                  "context parallelism: the fitted lengths need 1 <= shortest < "
                  "longest, got ",
                  shortest, " and ", longest);
  const LastStageWork work = setup.last_stage_work(scheme);
  std::vector<LatencySample> samples;
  constexpr int points = 32;  // geometric, so short sequences weigh as much as long ones
  for (int k = 0; k < points; ++k) {
    const double ratio = static_cast<double>(longest) / static_cast<double>(shortest);
    const auto length =
        static_cast<std::int64_t>(std::llround(static_cast<double>(shortest) * std::pow(ratio, k / (points - 1.0))));
    if (samples.empty() || samples.back().length != length)
      samples.push_back({length, cp_stage_time(setup, scheme, length).total() - work.seconds(length)});
  }
  FitResult fit = fit_quadratic(samples);
  const QuadraticLatency& other = fit.model;
  fit.model = QuadraticLatency(other.a(), other.b() + work.b(), other.c() + work.c());
  return fit;
}

// A scheme of a profile derived from its base ⟨TP, PP⟩ scheme: GPUs (TP·C·PP), MaxLen by the profile's memory
// model, the derived time, the quadratic fitted to it from 256 tokens to MaxLen, and the last stage's own work.
struct CpScheme {
  Scheme scheme;
  std::int64_t max_len = 0;
  CpSetup setup;
  FitResult fit;
  LastStageWork last_stage{};
  [[nodiscard]] double seconds(std::int64_t length) const { return cp_stage_time(setup, scheme, length).total(); }
};

// `scheme` (with CP and/or AC) of `profile` derived from the profile's measured base ⟨TP, PP⟩ `base`; nullopt when
// it cannot be: wider than the cluster, no memory model or activation constant for its TP, or heads that do not
// split over TP × the Ulysses degree. The heads come from the profile's model.
inline std::optional<CpScheme> derive_cp_scheme(const Profile& profile, const SchemeCost& base, const Scheme& scheme,
                                                const Links& links = {}) {
  sluice::require(base.scheme == scheme.base(), "context parallelism: ", scheme.name(), " is not derived from ",
                  base.scheme.name());
  const ModelInfo& model = profile.spec().model;
  sluice::require(scheme.cp() == 1 || model.heads >= 1, "context parallelism: profile ", profile.name(),
                  " does not give the model's attention heads (model.heads)");
  const std::optional<TransformerMemorySpec>& memory = profile.spec().memory;
  if (!memory || scheme.gpus() > profile.gpus() || !memory->activation_bytes.contains(scheme.tp())) return std::nullopt;
  const std::int64_t per_node = profile.spec().gpus_per_node;
  const CpSetup setup{.base = base.latency,
                      .last_stage = base.last_stage,
                      .stage_layers = (memory->layers + scheme.pp() - 1) / scheme.pp(),
                      .hidden = memory->hidden,
                      .heads = model.heads,
                      .kv_heads = model.kv_heads > 0 ? model.kv_heads : model.heads,
                      .link = links.of_group(scheme.stage_gpus(), per_node)};
  if (!setup.splits_heads(scheme)) return std::nullopt;
  require_valid(setup, scheme);
  const std::int64_t max_len = memory->for_scheme(scheme, profile.gpus()).max_len();
  return CpScheme{scheme, max_len, setup, cp_latency(setup, scheme, 256, std::max<std::int64_t>(max_len, 512)),
                  setup.last_stage_work(scheme)};
}

// Which CP and AC schemes a planner may choose from besides the profile's own.
struct SchemeSpace {
  std::vector<int> cp_degrees;  // C > 1 each
  // A hybrid of C ranks takes every Ulysses degree 1 < U < C that divides C.
  std::vector<CpKind> cp_kinds = {CpKind::ring};
  bool recompute = false;  // also each scheme with full recomputation
  Links links;
  [[nodiscard]] bool empty() const noexcept { return cp_degrees.empty() && !recompute; }
};

// The schemes `space` adds to one base scheme, in canonical order.
inline std::vector<Scheme> space_schemes(const Scheme& base, const SchemeSpace& space) {
  std::vector<Degrees> shapes = {base.degrees()};  // ⟨TP, PP⟩, and each CP the space allows
  for (const int cp : space.cp_degrees)
    for (const CpKind kind : space.cp_kinds) {
      Degrees shape{.tp = base.tp(), .pp = base.pp(), .cp = cp, .cp_kind = kind};
      if (kind != CpKind::hybrid) shapes.push_back(shape);
      for (int u = 2; kind == CpKind::hybrid && u < cp; ++u)
        if (cp % u == 0) shapes.push_back({.tp = base.tp(), .pp = base.pp(), .cp = cp, .cp_kind = kind, .ulysses = u});
    }
  std::vector<Scheme> schemes;
  for (Degrees shape : shapes)
    for (const Recompute recompute : {Recompute::none, Recompute::full}) {
      if (recompute == Recompute::full && !space.recompute) continue;
      shape.recompute = recompute;
      const Scheme scheme(shape);
      if (!scheme.is_base() && std::ranges::find(schemes, scheme) == schemes.end()) schemes.push_back(scheme);
    }
  std::sort(schemes.begin(), schemes.end());
  return schemes;
}

// The ⟨TP, 1⟩ schemes `spec` does not measure, each from its shallowest measured ⟨TP, PP⟩ scaled by the layer
// ratio layers / ceil(layers / PP): a stage's time is its layers' (the bundled profiles' ⟨2, 1⟩, ⟨2, 2⟩, ⟨2, 4⟩ and
// ⟨2, 8⟩ halve as their layers do), and its last-stage work once. DeepSpeed's ZeRO-3 and Ulysses run on ⟨1, 1⟩, which
// the Hydraulis authors' 7B and 32B fits lack.
inline std::vector<SchemeEntry> unpipelined_schemes(const ProfileSpec& spec, int layers) {
  std::map<int, const SchemeEntry*> shallowest;  // by TP
  for (const SchemeEntry& entry : spec.schemes) {
    if (!entry.scheme.is_base()) continue;
    const SchemeEntry*& kept = shallowest[entry.scheme.tp()];
    if (kept == nullptr || entry.scheme.pp() < kept->scheme.pp()) kept = &entry;
  }
  std::vector<SchemeEntry> derived;
  for (const auto& [tp, entry] : shallowest) {
    const int pp = entry->scheme.pp();
    if (pp == 1 || pp > layers) continue;
    const int fullest_stage = (layers + pp - 1) / pp;  // layers of the fullest stage
    const double ratio = static_cast<double>(layers) / fullest_stage;
    // The layers scale; the last stage's own work (the head and the loss) is in the one stage once.
    const QuadraticLatency& t = entry->latency;
    const LastStageWork& head = entry->last_stage;
    derived.push_back({Scheme(tp, 1),
                       {t.a() * ratio, (t.b() - head.b()) * ratio + head.b(), (t.c() - head.c()) * ratio + head.c()},
                       std::nullopt,
                       std::nullopt,
                       {}});
  }
  return derived;
}

// `spec` with the schemes of `space` derived from each measured base scheme (and from each ⟨TP, 1⟩ derived by
// unpipelined_schemes), unless the profile measures them itself (a measured profile replaces the derivation).
// Derived schemes state neither MaxLen, which the memory model gives for every cluster size, nor UtilLen, which
// their fitted quadratic gives.
inline ProfileSpec with_scheme_space(ProfileSpec spec, const SchemeSpace& space) {
  if (space.empty()) return spec;
  for (const int degree : space.cp_degrees)
    sluice::require(degree >= 2 && degree <= Scheme::max_degree, "scheme space: CP degrees must be in [2, ",
                    Scheme::max_degree, "], got ", degree);
  sluice::require(space.cp_degrees.empty() || !space.cp_kinds.empty(), "scheme space: CP degrees need a CP kind");
  sluice::require(spec.memory.has_value(), "scheme space: profile ", spec.name,
                  " has no memory model to derive the MaxLen of CP and AC schemes from");
  for (const SchemeEntry& entry : unpipelined_schemes(spec, spec.memory->layers)) spec.schemes.push_back(entry);
  const Profile profile{spec};
  std::vector<SchemeEntry> added;
  // Per CP degree: whether any scheme fits the cluster, splits the heads, and holds a sequence, to say which failed.
  std::map<int, std::array<bool, 3>> reached;
  for (const SchemeCost& base : profile.schemes()) {
    if (!base.scheme.is_base()) continue;
    for (const Scheme& scheme : space_schemes(base.scheme, space)) {
      std::array<bool, 3>& degree = reached[scheme.cp()];
      if (std::ranges::find(spec.schemes, scheme, &SchemeEntry::scheme) != spec.schemes.end()) {
        degree = {true, true, true};
        continue;
      }
      const std::optional<CpScheme> derived = derive_cp_scheme(profile, base, scheme, space.links);
      degree[0] = degree[0] || scheme.gpus() <= profile.gpus();
      degree[1] = degree[1] || derived.has_value();
      // Kept when it holds a sequence with the Hydraulis states or with ZeRO-3's (DeepSpeed's ⟨1, 1⟩ schemes).
      if (!derived || (derived->max_len == 0 &&
                       spec.memory->for_scheme(scheme, profile.gpus(), StateSharding::zero3).max_len() == 0))
        continue;
      degree[2] = true;
      added.push_back({scheme, derived->fit.model, std::nullopt, std::nullopt, derived->last_stage});
    }
  }
  for (const int degree : space.cp_degrees) {
    const std::array<bool, 3> got = reached[degree];
    sluice::require(got[0], "scheme space: no scheme with CP ", degree, " fits the ", profile.gpus(), " GPUs");
    sluice::require(got[1], "scheme space: CP ", degree, " splits the ", spec.model.heads,
                    " heads unevenly in every scheme (TP × the Ulysses degree must divide the KV heads)");
    sluice::require(got[2], "scheme space: no scheme with CP ", degree, " holds a sequence in memory");
  }
  spec.schemes.insert(spec.schemes.end(), added.begin(), added.end());
  return spec;
}

// The smallest CP degree, a power of two up to the cluster's GPUs, at which `holds(profile)` is true of `spec`
// widened by the schemes of `space`'s kinds and recompute at that degree alone; nullopt when at none, or when the
// profile cannot derive CP schemes (no memory model, no kind).
template <class Holds>
std::optional<int> smallest_cp_degree(const ProfileSpec& spec, SchemeSpace space, Holds holds) {
  if (!spec.memory.has_value() || space.cp_kinds.empty()) return std::nullopt;
  const std::int64_t widest = std::min<std::int64_t>(spec.gpus, Scheme::max_degree);
  for (int degree = 2; degree <= widest; degree *= 2) {
    space.cp_degrees = {degree};
    std::optional<Profile> widened;
    try {
      widened.emplace(with_scheme_space(spec, space));
    } catch (const invalid_input&) {
      continue;  // no scheme of this degree fits the cluster, splits the heads or holds a sequence
    }
    if (holds(*widened)) return degree;
  }
  return std::nullopt;
}

// Whether a scheme of `profile` holds `context` tokens on its GPUs, its TP within a node where `tp_within_node`.
inline bool scheme_holds(const Profile& profile, std::int64_t context, bool tp_within_node) {
  return std::ranges::any_of(profile.schemes(), [&](const SchemeCost& scheme) {
    return scheme.max_len >= context && scheme.scheme.gpus() <= profile.gpus() &&
           (!tp_within_node || scheme.scheme.tp() <= profile.spec().gpus_per_node);
  });
}

// The smallest CP degree at which a scheme holds `context` tokens (smallest_cp_degree with scheme_holds).
inline std::optional<int> smallest_cp_holding(const ProfileSpec& spec, std::int64_t context, SchemeSpace space,
                                              bool tp_within_node) {
  return smallest_cp_degree(spec, std::move(space),
                            [&](const Profile& profile) { return scheme_holds(profile, context, tp_within_node); });
}

// The CP kinds a hint suggests (ring and Ulysses), with recompute where `spec` has recomputing schemes already.
inline SchemeSpace hint_space(const ProfileSpec& spec) {
  SchemeSpace space;
  space.cp_kinds = {CpKind::ring, CpKind::ulysses};
  space.recompute = std::ranges::any_of(
      spec.schemes, [](const SchemeEntry& entry) { return entry.scheme.recompute() != Recompute::none; });
  return space;
}

// `--cp auto`: `space` with every power-of-two CP degree from 2 to the smallest that holds `context`
// (smallest_cp_holding): the smaller ones serve the batch's medium sequences, and a wider space only costs planning
// time. No degree at all when the profile's own schemes (with `space`'s recompute) hold the context.
inline SchemeSpace auto_scheme_space(const ProfileSpec& spec, std::int64_t context, SchemeSpace space,
                                     bool tp_within_node) {
  space.cp_degrees.clear();
  if (scheme_holds(Profile(space.empty() ? spec : with_scheme_space(spec, space)), context, tp_within_node))
    return space;
  const std::optional<int> needed = smallest_cp_holding(spec, context, space, tp_within_node);
  sluice::require(needed.has_value(), "option --cp auto: no CP degree up to ", spec.gpus, " GPUs holds the context ",
                  context, " tokens with a scheme of ", spec.name);
  for (int degree = 2; degree <= *needed; degree *= 2) space.cp_degrees.push_back(degree);
  return space;
}

}  // namespace sluice::cost
