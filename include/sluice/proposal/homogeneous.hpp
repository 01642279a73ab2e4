#pragma once
// The homogeneous strategies that fill a cluster: one scheme replicated over every GPU (DP·TP·PP = N), as
// Megatron-LM runs (Hydraulis §2.2). The baselines of compare:: choose among them and sluice keeps them as a
// fallback among its candidates.
#include <cstdint>
#include <vector>

#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::proposal {

struct HomogeneousOptions {
  std::int64_t holds = 0;      // the scheme's MaxLen must reach this many tokens
  bool tp_within_node = true;  // only schemes with TP <= the profile's gpus_per_node
};

// In the profile's canonical order: every usable scheme whose GPU count divides the profile's, whose MaxLen
// holds `options.holds` tokens and (when asked) whose TP stays within a node, replicated over all GPUs.
inline std::vector<Strategy> homogeneous_strategies(const cost::Profile& profile, const HomogeneousOptions& options) {
  std::vector<Strategy> result;
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    if (profile.gpus() % scheme.scheme.gpus() != 0 || scheme.max_len < options.holds) continue;
    if (options.tp_within_node && scheme.scheme.tp() > profile.spec().gpus_per_node) continue;
    result.push_back(Strategy::homogeneous(scheme.scheme, static_cast<int>(profile.gpus() / scheme.scheme.gpus())));
  }
  return result;
}

}  // namespace sluice::proposal
