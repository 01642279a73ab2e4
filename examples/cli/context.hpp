#pragma once
// --context's default, one rule for propose, plan, simulate and trace (docs/cli.md, "The context"): a proposal
// file's max_len when --strategies names one; else the dataset's longest sequence, or the longest MaxLen of a
// scheme the command may use when that is shorter: the given candidates' schemes, or, when none are given, every
// scheme of the profile within its GPUs, TP inside a node unless --cross-node-tp (proposal::default_max_len).
#include <cstdint>

#include "candidates.hpp"
#include "options.hpp"
#include "propose.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/proposal/max_len.hpp"

namespace sluice::cli {

inline std::int64_t context_of(const Options& options, const data::LengthDataset& loaded, const cost::Profile& profile,
                               const Candidates* given = nullptr) {
  if (given == nullptr) return max_len_of(options, loaded, profile, propose_options(options, profile));
  if (const auto context = options.integer("context")) return *context;
  if (given->max_len) return *given->max_len;
  return proposal::default_max_len(loaded, profile, given->strategies);
}

}  // namespace sluice::cli
