#pragma once
// Vocabulary of the two-stage sequence assignment (Hydraulis §6): which pipeline runs each sequence
// (dispatch), and how a pipeline packs its sequences into micro-batches (packing).
#include <cstdint>
#include <vector>

#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::assign {

// Pipelines as the assignment sees them: the cost of their scheme, ordered by MaxLen descending
// (Profile::pipelines order), so that a sequence of length l may go to pipelines 0..J(l)-1.
using PipelineCosts = Span<const cost::SchemeCost>;

// Stage 1 result. `pipeline_of[i]` is the pipeline of batch[i] (batch order, not sequence id).
struct Dispatch {
  std::vector<int> pipeline_of;
  std::vector<double> pipeline_bounds;  // Eq. 2 per pipeline (dispatch.hpp)
  double objective = 0;                 // Eq. 3: max over pipelines
  double lower_bound = 0;               // a bound on the optimum of Eq. 3, computed without a solver
  bool v_step = true;                   // Eq. 2 charged the V step (DispatchOptions::v_step)
};

// One packed micro-batch: its sequences (ids from the batch), tokens, and estimated time Σ T'(l) + c.
struct MicroBatch {
  std::vector<std::int64_t> sequence_ids;
  std::int64_t tokens = 0;
  double seconds = 0;
  friend bool operator==(const MicroBatch&, const MicroBatch&) = default;
};

// Stage 2 result for one pipeline: V micro-batches and the 1F1B estimate (max micro-batch time)·(PP − 1 + V).
struct Packing {
  std::vector<MicroBatch> micro_batches;
  double estimate = 0;
  friend bool operator==(const Packing&, const Packing&) = default;
};

}  // namespace sluice::assign
