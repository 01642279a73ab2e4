#pragma once
// The checks a Packing and an IterationPlan share over one pipeline's micro-batches. Not for callers: packing.hpp's
// and plan.hpp's validate functions use them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "sluice/assign/types.hpp"
#include "sluice/core/check.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::assign::detail {

// The checks a Packing and an IterationPlan share, over one pipeline's micro-batches: none empty, each
// sequence from `length_of` and not in `placed` yet, tokens right and within `max_len`, seconds Σ T'(l) + c
// (relative tolerance 1e-9). Returns the slowest micro-batch's recomputed seconds.
inline double check_micro_batches(const PlanCheck& check, Span<const MicroBatch> micro_batches,
                                  const std::unordered_map<std::int64_t, std::int64_t>& length_of,
                                  std::unordered_set<std::int64_t>& placed, const cost::SchemeCost& scheme,
                                  std::int64_t max_len) {
  double slowest = 0;
  for (std::size_t m = 0; m < micro_batches.size(); ++m) {
    const MicroBatch& micro_batch = micro_batches[m];
    check(!micro_batch.sequence_ids.empty(), "micro-batch ", m, " is empty");
    std::int64_t tokens = 0;
    double seconds = scheme.latency.microbatch_overhead();
    for (const std::int64_t id : micro_batch.sequence_ids) {
      const auto it = length_of.find(id);
      check(it != length_of.end(), "micro-batch ", m, " holds sequence ", id, ", not among the sequences");
      check(placed.insert(id).second, "micro-batch ", m, " holds sequence ", id, ", already placed");
      tokens += it->second;
      seconds += scheme.latency.sequence_time(it->second);
    }
    check(tokens == micro_batch.tokens, "micro-batch ", m, " says ", micro_batch.tokens, " tokens, its sequences hold ",
          tokens);
    check(tokens <= max_len, "micro-batch ", m, " holds ", tokens, " tokens, above MaxLen ", max_len);
    check(nearly_equal(seconds, micro_batch.seconds), "micro-batch ", m, " says ", micro_batch.seconds,
          " s, the cost model gives ", seconds);
    slowest = std::max(slowest, seconds);
  }
  return slowest;
}

inline std::unordered_map<std::int64_t, std::int64_t> length_by_id(Span<const Sequence> sequences) {
  std::unordered_map<std::int64_t, std::int64_t> length_of;
  for (const Sequence& sequence : sequences) length_of.emplace(sequence.id(), sequence.length());
  return length_of;
}

}  // namespace sluice::assign::detail
