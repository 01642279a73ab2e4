#pragma once
// The values of a per-micro-batch context-parallel plan (assign/flex_cp.hpp states the problem and solves it),
// apart from the solver, so that a plan can carry one without parsing the solver.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sluice/cost/latency.hpp"

namespace sluice::assign {

inline constexpr int flex_cp_max_units = 1 << 16;
inline constexpr std::size_t flex_cp_max_sequences = std::size_t{1} << 22;

// One group size the pool offers.
struct FlexCpDegree {
  int degree = 1;                  // units sharing each sequence of the group
  cost::QuadraticLatency latency;  // one stage's time of one sequence in such a group
  std::int64_t capacity = 0;       // MaxLen: the most (charged) tokens one group holds in a micro-batch
  int length_multiple = 1;         // lengths are charged rounded up to this: 2·R for a ring of R's causal chunks
  // The pipeline's last stage's own work (head and loss) on a group's charged tokens: the other stages run the
  // group's time less it. Zero: every stage alike.
  cost::LastStageWork last_stage{};
};

// Collectives that every micro-batch runs over all units beside its compute, each overlapping one pass (ZeRO-3:
// the parameters' all-gather in the forward, all-gather and reduce-scatter in the backward): a micro-batch whose
// slowest group computes T lasts max(T_f, C) + max(T_b, 2·C), T split into T_f + T_b by the backward ratio. So a
// micro-batch of little compute exposes the collectives that a long one hides.
struct FlexCpCollectives {
  double seconds = 0;         // C, one collective; 0 for none
  double backward_ratio = 2;  // T_b / T_f
  friend bool operator==(const FlexCpCollectives&, const FlexCpCollectives&) = default;
};

struct FlexCpProblem {
  std::vector<std::int64_t> lengths;  // the iteration's sequences
  int units = 1;
  int pp = 1;
  std::vector<FlexCpDegree> degrees;        // ascending, each dividing the next and the units
  bool one_degree_per_micro_batch = false;  // Megatron-LM's dynamic CP: one CP size per micro-batch
  FlexCpCollectives collectives{};
};

struct FlexCpGroup {
  int degree_index = 0;
  int first_unit = 0;          // a multiple of the degree
  std::vector<int> sequences;  // indices into FlexCpProblem::lengths, ascending
  friend bool operator==(const FlexCpGroup&, const FlexCpGroup&) = default;
};

struct FlexCpMicroBatch {
  std::vector<FlexCpGroup> groups;  // widest first, then by first unit
  friend bool operator==(const FlexCpMicroBatch&, const FlexCpMicroBatch&) = default;
};

struct FlexCpPlan {
  std::vector<FlexCpMicroBatch> micro_batches;  // slowest first
  double seconds = 0;                           // the iteration's time
  double lower_bound = 0;                       // flex_cp_lower_bound: no plan of the problem is faster
  friend bool operator==(const FlexCpPlan&, const FlexCpPlan&) = default;
};

}  // namespace sluice::assign
