#pragma once
// ZeRO-3 data parallelism (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
// Models", §5) as DeepSpeed runs it under Ulysses sequence parallelism, and as FlexSP (Wang et al., ASPLOS'25)
// plans on it: every model state sharded over all GPUs (memory by TransformerMemorySpec's zero3 sharding), the
// 16-bit weights gathered layer by layer. Per micro-batch one all-gather in the forward, one all-gather and one
// reduce-scatter of the gradients in the backward, overlapped with that pass's compute.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/links.hpp"
#include "sluice/cost/memory.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::cost {

// The schemes ZeRO-3 runs: no tensor or pipeline parallelism, ⟨1, 1⟩ alone or in Ulysses groups of any degree, with
// or without recomputation.
inline bool zero3_scheme(const Scheme& scheme) {
  return scheme.tp() == 1 && scheme.pp() == 1 && (scheme.cp() == 1 || scheme.cp_kind() == CpKind::ulysses);
}

// One ZeRO-3 collective of the model's 16-bit weights (2 bytes × the parameters its states count,
// TransformerMemorySpec::parameters) over `gpus` GPUs, as a ring: (N − 1) steps of α, and (N − 1)/N of the bytes
// through each GPU's link.
inline double zero3_collective_seconds(const TransformerMemorySpec& memory, std::int64_t gpus,
                                       std::int64_t gpus_per_node, const Links& links) {
  const double n = static_cast<double>(gpus);
  const Link& link = links.of_group(gpus, gpus_per_node);
  return (n - 1) * link.latency + (n - 1) / n * 2 * memory.parameters() / link.bandwidth;
}

// The ZeRO-3 collectives' time per micro-batch that a full bin's compute (one sequence of `context` tokens on
// `scheme`; forward and backward split by the backward ratio) leaves exposed: the forward's all-gather, and the
// backward's all-gather and reduce-scatter. A bin of many short sequences computes less and exposes more: this is
// what ZeRO-3 costs at the least.
inline double zero3_exposed_seconds(double collective, const QuadraticLatency& latency, std::int64_t context,
                                    double backward_ratio) {
  const double compute = latency(context);
  const double forward = compute / (1 + backward_ratio);
  return std::max(0.0, collective - forward) + std::max(0.0, 2 * collective - (compute - forward));
}

// A full bin whose exposed collectives (zero3_exposed_seconds) a fixed-length packing charges every micro-batch.
struct FullBin {
  std::int64_t tokens = 0;
  double backward_ratio = 0;
};

// A profile narrowed to ZeRO-3, or why there is none.
struct Zero3Profile {
  std::optional<Profile> profile;
  std::string failure;
  double collective_seconds = 0;  // one collective over every GPU of the cluster
};

// `profile` narrowed to its ZeRO-3 schemes that hold `holds` tokens (DeepSpeed: the context; FlexSP: any sequence)
// and divide the cluster: memory with every state sharded over the cluster, and, with `exposed_at`, the collectives'
// exposed time at that full bin added to each scheme's constant (flex CP charges each micro-batch its own instead:
// assign::FlexCpCollectives).
inline Zero3Profile zero3_profile(const Profile& profile, const Links& links, std::int64_t holds,
                                  std::optional<FullBin> exposed_at = std::nullopt) {
  const ProfileSpec& spec = profile.spec();
  Zero3Profile result;
  if (!spec.memory || !spec.memory->activation_bytes.contains(1)) {
    result.failure = sluice::concat("profile ", spec.name,
                                    " has no memory model with an activation constant for "
                                    "TP 1 to derive ZeRO-3's MaxLen from");
    return result;
  }
  const std::int64_t gpus = profile.gpus();
  result.collective_seconds = zero3_collective_seconds(*spec.memory, gpus, spec.gpus_per_node, links);
  std::vector<SchemeEntry> entries;
  for (const SchemeCost& cost : profile.schemes()) {
    if (!zero3_scheme(cost.scheme) || gpus % cost.scheme.gpus() != 0) continue;
    if (spec.memory->for_scheme(cost.scheme, gpus, StateSharding::zero3).max_len() < holds) continue;
    const QuadraticLatency& t = cost.latency;
    const double exposed =
        exposed_at ? zero3_exposed_seconds(result.collective_seconds, t, exposed_at->tokens, exposed_at->backward_ratio)
                   : 0.0;
    entries.push_back({cost.scheme, {t.a(), t.b(), t.c() + exposed}, std::nullopt, cost.util_len, cost.last_stage});
  }
  if (entries.empty()) {
    result.failure = sluice::concat("no ZeRO-3 × Ulysses strategy of ", spec.name, " on ", gpus, " GPUs holds ", holds,
                                    " tokens (the scheme space's Ulysses degrees: --cp with the "
                                    "ulysses kind; recomputation: --ac)");
    return result;
  }
  ProfileSpec narrowed = spec;
  narrowed.schemes = std::move(entries);
  narrowed.memory->state_sharding = StateSharding::zero3;
  result.profile = Profile(std::move(narrowed));
  return result;
}

}  // namespace sluice::cost
