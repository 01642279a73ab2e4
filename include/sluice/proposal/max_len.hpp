#pragma once
// The maximum length (Lmax, Hydraulis §7) a proposal plans for when the user names none: the longest sequence of
// the dataset, or the longest MaxLen of a scheme the proposal may use when that is shorter, so that some
// strategy can hold every (truncated) sequence.
#include <algorithm>
#include <cstdint>

#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/proposal/propose.hpp"

namespace sluice::proposal {

// The longest MaxLen among the schemes `options` lets the proposal use (within its GPUs, holding a length step,
// TP within a node when asked), or 0 when none.
inline std::int64_t widest_usable_max_len(const cost::Profile& profile, const ProposeOptions& options) {
  std::int64_t widest = 0;
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    if (scheme.scheme.gpus() > options.gpus.value_or(profile.gpus()) || scheme.max_len < options.length_step) continue;
    if (options.tp_within_node && scheme.scheme.tp() > profile.spec().gpus_per_node) continue;
    widest = std::max(widest, scheme.max_len);
  }
  return widest;
}

// The shorter of the dataset's longest sequence and widest_usable_max_len (the longest sequence when no scheme is
// usable, so that propose() reports why). The dataset is then truncated to it, as a trainer with that context would.
inline std::int64_t default_max_len(const data::LengthDataset& dataset, const cost::Profile& profile,
                                    const ProposeOptions& options) {
  const std::int64_t longest = std::ranges::max(dataset.lengths());
  const std::int64_t widest = widest_usable_max_len(profile, options);
  return widest > 0 ? std::min(longest, widest) : longest;
}

// The same rule when the candidates are already chosen: the dataset's longest sequence, or the longest MaxLen among
// the candidates' pipelines when that is shorter, so that some candidate holds every truncated sequence.
inline std::int64_t default_max_len(const data::LengthDataset& dataset, const cost::Profile& profile,
                                    Span<const Strategy> candidates) {
  const std::int64_t longest = std::ranges::max(dataset.lengths());
  std::int64_t widest = 0;
  for (const Strategy& strategy : candidates) widest = std::max(widest, profile.pipelines(strategy).front().max_len);
  return widest > 0 ? std::min(longest, widest) : longest;
}

}  // namespace sluice::proposal
