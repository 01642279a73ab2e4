#pragma once
// The 1F1B estimate a packing minimises (Hydraulis Eq. 1) and the range of micro-batch counts it is solved for
// (packing.hpp).
#include <algorithm>
#include <cstdint>

#include "sluice/assign/types.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"

namespace sluice::assign {

// The micro-batch counts Eq. 1 is solved for (App. C, rounded as the authors' code does):
// lo = max(1, ⌈Σl / MaxLen⌉), hi = max(lo, min(U, ⌊Σl / UtilLen⌋)).
struct MicroBatchRange {
  std::int64_t lo = 1;
  std::int64_t hi = 1;
  friend bool operator==(const MicroBatchRange&, const MicroBatchRange&) = default;
};

// (max micro-batch time)·(PP − 1 + V), V = the number of micro-batches.
inline double packing_estimate(Span<const MicroBatch> micro_batches, int pp) {
  sluice::require(pp >= 1, "packing: pp must be >= 1, got ", pp);
  sluice::require(!micro_batches.empty(), "packing: no micro-batches");
  double slowest = 0;
  for (const MicroBatch& micro_batch : micro_batches) slowest = std::max(slowest, micro_batch.seconds);
  return slowest * (pp - 1 + static_cast<double>(micro_batches.size()));
}

}  // namespace sluice::assign
