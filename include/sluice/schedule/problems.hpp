#pragma once
// Scheduling problems for the micro-batches sluice's planners produce: DynaPipe's micro-batch DP (any
// MicroBatchCostModel) and Hydraulis' packing of one pipeline of an iteration plan (a profile's scheme).
// The cost models charge forward + backward together; the scheduler needs them apart, and per stage.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/microbatch/types.hpp"
#include "sluice/schedule/instructions.hpp"

namespace sluice::schedule {

struct ProblemOptions {
  std::int64_t hidden = 1;    // elements per token of a boundary tensor
  int element_bytes = 2;      // bf16 activations
  cost::Link link{};          // between neighbouring stages
  double backward_ratio = 2;  // backward seconds = ratio × forward seconds (2: no recomputation)
  friend bool operator==(const ProblemOptions&, const ProblemOptions&) = default;
};

// Raises invalid_input unless hidden and element_bytes are >= 1, the link is in its physical ranges and the backward
// ratio is finite and > 0.
inline void require_valid(const ProblemOptions& options) {
  sluice::require(std::isfinite(options.backward_ratio) && options.backward_ratio > 0,
                  "schedule problem: backward_ratio must be finite and > 0, got ", options.backward_ratio);
  sluice::require(options.hidden >= 1, "schedule problem: hidden must be >= 1, got ", options.hidden);
  sluice::require(options.element_bytes >= 1, "schedule problem: element_bytes must be >= 1, got ",
                  options.element_bytes);
  cost::require_valid(options.link, "schedule: link");
}

namespace detail {

// A micro-batch on `stages` stages: `last_seconds` on the last, `inner_seconds` on every other, `activation_bytes`
// on each.
inline MicroBatchCost micro_batch_on_stages(int stages, double last_seconds, double inner_seconds,
                                            double activation_bytes, std::int64_t tokens, double backward_ratio) {
  const auto c = static_cast<std::size_t>(stages);
  MicroBatchCost cost{{}, {}, std::vector<double>(c, activation_bytes), tokens};
  for (std::size_t stage = 0; stage < c; ++stage) {
    const double total = stage + 1 == c ? last_seconds : inner_seconds;
    cost.forward.push_back(total / (1 + backward_ratio));
    cost.backward.push_back(total - cost.forward.back());
  }
  return cost;
}

// The same with `seconds` on the last stage and, on every other, `seconds` less the last stage's own work on its
// tokens (zero work: the same on every stage).
inline MicroBatchCost staged_micro_batch(int stages, double seconds, const cost::LastStageWork& last_stage,
                                         double activation_bytes, std::int64_t tokens, double backward_ratio) {
  const double other = stages > 1 ? seconds - last_stage.seconds(tokens) : seconds;
  sluice::require(other > 0, "schedule problem: a micro-batch of ", tokens, " tokens lasts ", seconds,
                  " s on the last stage, no more than that stage's own work ", last_stage.seconds(tokens), " s");
  return micro_batch_on_stages(stages, seconds, other, activation_bytes, tokens, backward_ratio);
}

inline Problem empty_problem(int stages, double stage_memory_limit, const ProblemOptions& options) {
  require_valid(options);
  sluice::require(stages >= 1, "schedule problem: stages must be >= 1, got ", stages);
  Problem problem;
  problem.stages = stages;
  problem.memory_limit.assign(static_cast<std::size_t>(stages), stage_memory_limit);
  problem.hidden = options.hidden;
  problem.element_bytes = options.element_bytes;
  problem.link = options.link;
  return problem;
}

}  // namespace detail

// The micro-batches `indices` of a partition (in that order) on a pipeline of `stages` stages whose stages may
// each hold `stage_memory_limit` activation bytes. A micro-batch's boundary tensor has rows × (input + target)
// tokens; its time is the partition's on the last stage (less `last_stage` work on the others), its memory the
// partition's on each stage.
inline Problem problem_for(const microbatch::Partition& partition, Span<const std::size_t> indices, int stages,
                           double stage_memory_limit, const cost::LastStageWork& last_stage,
                           const ProblemOptions& options) {
  Problem problem = detail::empty_problem(stages, stage_memory_limit, options);
  for (const std::size_t index : indices) {
    sluice::require(index < partition.micro_batches.size(), "schedule problem: micro-batch index ", index,
                    " outside the partition's ", partition.micro_batches.size());
    const microbatch::ShapedMicroBatch& mb = partition.micro_batches[index];
    problem.micro_batches.push_back(detail::staged_micro_batch(stages, mb.seconds, last_stage, mb.bytes,
                                                               mb.shape.rows * (mb.shape.input + mb.shape.target),
                                                               options.backward_ratio));
  }
  require_problem(problem);
  return problem;
}

// One pipeline of a Hydraulis iteration plan on its scheme: the last stage runs the packed micro-batch's time, the
// others that less the scheme's last-stage work; its activation is the scheme's memory per token divided by PP
// (LinearMemory charges the PP micro-batches the first stage holds under 1F1B), and a stage may hold what the
// budget leaves after the model states.
inline Problem problem_for(const assign::PipelinePlan& pipeline, const cost::SchemeCost& scheme,
                           const ProblemOptions& options) {
  sluice::require(pipeline.scheme == scheme.scheme, "schedule problem: pipeline ", pipeline.index, " runs ",
                  pipeline.scheme.name(), " but the cost is for ", scheme.scheme.name());
  sluice::require(scheme.memory.has_value(), "schedule problem: scheme ", scheme.scheme.name(), " has no memory model");
  sluice::require(!pipeline.micro_batches.empty(), "schedule problem: pipeline ", pipeline.index,
                  " has no micro-batches");
  const cost::LinearMemory& memory = *scheme.memory;
  const int stages = scheme.scheme.pp();
  // A stated MaxLen may outlive a memory model in which not even the model states fit.
  const double activation_budget = memory.budget_bytes() - memory.fixed_bytes();
  sluice::require(activation_budget > 0, "schedule problem: scheme ", scheme.scheme.name(),
                  " leaves no memory for activations (model states ", memory.fixed_bytes(), " bytes, budget ",
                  memory.budget_bytes(), " bytes)");
  Problem problem = detail::empty_problem(stages, activation_budget, options);
  const double bytes_per_token = memory.bytes_per_token() / stages;
  for (const assign::MicroBatch& mb : pipeline.micro_batches)
    problem.micro_batches.push_back(detail::staged_micro_batch(stages, mb.seconds, scheme.last_stage,
                                                               bytes_per_token * static_cast<double>(mb.tokens),
                                                               mb.tokens, options.backward_ratio));
  require_problem(problem);
  return problem;
}

}  // namespace sluice::schedule
