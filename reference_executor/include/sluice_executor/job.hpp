#pragma once
// What the executor runs for one iteration: the model, the token ids of every sequence, and one or more
// pipelines (data-parallel replicas), each with the layer range of every stage, its ExecutionPlan, and the
// sequences packed in each of its micro-batches. Builders turn sluice's plans into jobs: a Hydraulis iteration
// plan (assign::plan_iteration, scheduled by schedule::schedule_iteration) or a DynaPipe pipeline plan
// (schedule::plan_pipeline).
//
// Micro-batches always run packed: the sequences of a micro-batch are concatenated into one row and attention
// stays causal within each sequence (FlashAttention's varlen layout). Tensor parallelism is not executed: a
// stage of a TP > 1 scheme runs all its layers on one device.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/interpreter.hpp"
#include "sluice/schedule/iteration.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice/schedule/simulate.hpp"
#include "sluice_executor/model.hpp"

namespace sluice::executor {

struct SequenceTokens {
  std::int64_t id = 0;
  std::vector<std::int32_t> tokens;
  friend bool operator==(const SequenceTokens&, const SequenceTokens&) = default;
};

struct PipelineJob {
  schedule::ExecutionPlan plan;
  // Stage j runs layers [layer_boundaries[j], layer_boundaries[j + 1]); stages + 1 entries from 0 to the
  // model's layers. A stage may hold no layer (the first then only embeds, the last only computes the loss).
  std::vector<int> layer_boundaries;
  std::vector<std::vector<std::int64_t>> micro_batches;  // sequence ids of micro-batch i, in packing order
  std::optional<schedule::Simulation> predicted;         // the planner's simulated timeline, in seconds
  friend bool operator==(const PipelineJob&, const PipelineJob&) = default;
};

struct Job {
  ModelConfig model;
  std::vector<SequenceTokens> sequences;
  std::vector<PipelineJob> pipelines;
  friend bool operator==(const Job&, const Job&) = default;
};

// Every pipeline's plan, in global rank order (JobLayout's).
inline std::vector<const schedule::ExecutionPlan*> pipeline_plans(const Job& job) {
  std::vector<const schedule::ExecutionPlan*> plans;
  for (const PipelineJob& pipeline : job.pipelines) plans.push_back(&pipeline.plan);
  return plans;
}

// Stage j gets layers / stages layers, plus one of the remainder for the first (layers mod stages) stages.
inline std::vector<int> even_layer_split(int layers, int stages) {
  sluice::require(layers >= 1, "layer split: layers must be >= 1, got ", layers);
  sluice::require(stages >= 1, "layer split: stages must be >= 1, got ", stages);
  std::vector<int> boundaries{0};
  for (int j = 0; j < stages; ++j) boundaries.push_back(boundaries.back() + layers / stages + (j < layers % stages));
  return boundaries;
}

// Token ids of every sequence of a batch, uniform in [0, vocab), from (seed, sequence id): a sequence's tokens
// do not depend on the rest of the batch.
inline std::vector<SequenceTokens> make_tokens(std::span<const Sequence> batch, std::int64_t vocab,
                                               std::uint64_t seed) {
  sluice::require(vocab >= 2 && vocab <= std::numeric_limits<std::int32_t>::max(),
                  "tokens: vocab must be in [2, 2^31), got ", vocab);
  std::vector<SequenceTokens> sequences;
  sequences.reserve(batch.size());
  for (const Sequence& sequence : batch) {
    Rng rng = Rng::stream(seed, static_cast<std::uint64_t>(sequence.id()));
    SequenceTokens tokens{sequence.id(), std::vector<std::int32_t>(static_cast<std::size_t>(sequence.length()))};
    for (std::int32_t& token : tokens.tokens)
      token = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
    sequences.push_back(std::move(tokens));
  }
  return sequences;
}

// One micro-batch, packed: its sequences' tokens back to back.
struct PackedMicroBatch {
  std::vector<std::int32_t> cu_seqlens;  // sequences + 1 offsets {0, l0, l0 + l1, ...}
  std::vector<std::int32_t> tokens;      // input ids
  std::vector<std::int32_t> targets;     // the next token of the same sequence; -1 at each sequence's last token
  std::int32_t max_seqlen = 0;
  [[nodiscard]] std::int64_t size() const noexcept { return static_cast<std::int64_t>(tokens.size()); }
};

// A global rank: stage `stage` of pipeline `pipeline`. Ranks are numbered pipeline by pipeline, stage by stage.
struct RankInfo {
  int pipeline = 0;
  int stage = 0;
  int first_layer = 0;
  int end_layer = 0;
  bool first = false;  // the pipeline's first stage: holds the embedding and loads inputs
  bool last = false;   // the pipeline's last stage: holds the head and computes the loss
};

// What every backend derives from a validated job.
struct JobLayout {
  std::vector<RankInfo> ranks;
  std::vector<int> first_rank;                               // per pipeline
  std::vector<std::vector<PackedMicroBatch>> micro_batches;  // [pipeline][micro-batch]
  std::int64_t total_targets = 0;                            // the loss is the sum of cross-entropies over these
  // Largest tensor a slot of the pipeline's ranks holds, in elements (activations and gradients: tokens × hidden;
  // input ids: tokens).
  std::vector<std::int64_t> slot_elements;
  [[nodiscard]] int global_rank(int pipeline, int stage) const {
    return first_rank[static_cast<std::size_t>(pipeline)] + stage;
  }
};

namespace detail {

[[noreturn]] inline void broken_plan(auto&&... parts) { throw invalid_plan(sluice::concat("job: ", parts...)); }

inline std::int64_t packed_length(const std::unordered_map<std::int64_t, std::size_t>& index,
                                  std::span<const SequenceTokens> sequences, std::span<const std::int64_t> ids) {
  std::int64_t total = 0;
  for (const std::int64_t id : ids) total += static_cast<std::int64_t>(sequences[index.at(id)].tokens.size());
  return total;
}

inline std::unordered_map<std::int64_t, std::size_t> sequence_index(std::span<const SequenceTokens> sequences) {
  std::unordered_map<std::int64_t, std::size_t> index;
  for (std::size_t s = 0; s < sequences.size(); ++s) index.emplace(sequences[s].id, s);
  return index;
}

// Rewrites every instruction's shape to the packed micro-batch it carries: tokens × hidden, or tokens × 1 for
// loading and freeing input ids (a slot holds ids from its load_input until the next tensor written into it).
inline void set_packed_shapes(schedule::ExecutionPlan& plan, std::span<const std::int64_t> tokens,
                              std::int64_t hidden) {
  using K = schedule::InstructionKind;
  for (std::vector<schedule::Instruction>& rank : plan.ranks) {
    std::vector<char> holds_ids(static_cast<std::size_t>(std::max(plan.buffer_slots, 0)), 0);
    auto mark = [&holds_ids](int slot, bool ids) {
      if (slot >= 0 && static_cast<std::size_t>(slot) < holds_ids.size())
        holds_ids[static_cast<std::size_t>(slot)] = ids;
    };
    for (schedule::Instruction& in : rank) {
      bool ids = false;
      if (in.kind == K::load_input) {
        mark(in.buffer, true);
        ids = true;
      } else if (in.kind == K::free_buffer) {
        ids = in.buffer >= 0 && static_cast<std::size_t>(in.buffer) < holds_ids.size() &&
              holds_ids[static_cast<std::size_t>(in.buffer)];
      } else if (in.kind == K::recv_act_start || in.kind == K::recv_grad_start) {
        mark(in.buffer, false);
      } else if (in.kind == K::forward || in.kind == K::backward) {
        mark(in.output, false);
      }
      if (in.micro_batch >= 0 && static_cast<std::size_t>(in.micro_batch) < tokens.size())
        in.shape = {tokens[static_cast<std::size_t>(in.micro_batch)], ids ? 1 : hidden};
    }
  }
}

// Every sequence's tokens in the vocabulary, ids unique, at least one next-token target; returns id -> index.
inline std::unordered_map<std::int64_t, std::size_t> validate_sequences(const Job& job) {
  using sluice::require;
  require(!job.sequences.empty(), "job: no sequences");
  std::unordered_map<std::int64_t, std::size_t> index;
  std::int64_t targets = 0;
  for (std::size_t s = 0; s < job.sequences.size(); ++s) {
    const SequenceTokens& sequence = job.sequences[s];
    require(index.emplace(sequence.id, s).second, "job: sequence id ", sequence.id, " appears twice");
    require(!sequence.tokens.empty(), "job: sequence ", sequence.id, " has no tokens");
    require(sequence.tokens.size() <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
            "job: sequence ", sequence.id, " has more than 2^31 - 1 tokens");
    for (std::size_t t = 0; t < sequence.tokens.size(); ++t)
      require(sequence.tokens[t] >= 0 && sequence.tokens[t] < job.model.vocab, "job: sequence ", sequence.id, " token ",
              t, " is ", sequence.tokens[t], ", outside the vocabulary [0, ", job.model.vocab, ")");
    targets += static_cast<std::int64_t>(sequence.tokens.size()) - 1;
  }
  require(targets >= 1, "job: no sequence has two or more tokens, so there is no next-token target");
  return index;
}

// Pipeline p's plan counts, layer boundaries and micro-batches; records where each sequence is placed and returns
// each micro-batch's packed token count.
inline std::vector<std::int64_t> validate_pipeline(const Job& job, std::size_t p,
                                                   const std::unordered_map<std::int64_t, std::size_t>& index,
                                                   std::unordered_map<std::int64_t, std::size_t>& placed) {
  const PipelineJob& pipeline = job.pipelines[p];
  const schedule::ExecutionPlan& plan = pipeline.plan;
  const int c = plan.stages;
  if (c < 1 || plan.ranks.size() != static_cast<std::size_t>(c))
    broken_plan("pipeline ", p, " has ", plan.ranks.size(), " rank lists for ", c, " stages");
  const auto& b = pipeline.layer_boundaries;
  if (b.size() != static_cast<std::size_t>(c) + 1 || b.front() != 0 || b.back() != job.model.layers ||
      !std::is_sorted(b.begin(), b.end()))
    broken_plan("pipeline ", p, " layer boundaries do not split the ", job.model.layers, " layers into ", c,
                " stages in order");
  const std::size_t m = pipeline.micro_batches.size();
  if (m == 0 || plan.micro_batches != static_cast<int>(m))
    broken_plan("pipeline ", p, " plan has ", plan.micro_batches, " micro-batches, the job lists ", m);
  std::size_t instructions = 0;
  for (const std::vector<schedule::Instruction>& list : plan.ranks) instructions += list.size();
  // Every slot is written by some instruction; the bound also keeps a hostile plan from sizing the slot tables.
  if (plan.buffer_slots < 1 || static_cast<std::size_t>(plan.buffer_slots) > instructions)
    broken_plan("pipeline ", p, " plan has ", plan.buffer_slots, " buffer slots for ", instructions, " instructions");
  std::vector<std::int64_t> tokens(m);
  for (std::size_t i = 0; i < m; ++i) {
    if (pipeline.micro_batches[i].empty()) broken_plan("pipeline ", p, " micro-batch ", i, " is empty");
    for (const std::int64_t id : pipeline.micro_batches[i]) {
      if (!index.contains(id))
        broken_plan("pipeline ", p, " micro-batch ", i, " names sequence ", id, ", which the job lacks");
      if (!placed.emplace(id, p).second) broken_plan("sequence ", id, " is in more than one micro-batch");
    }
    tokens[i] = packed_length(index, job.sequences, pipeline.micro_batches[i]);
    if (tokens[i] > std::numeric_limits<std::int32_t>::max())
      broken_plan("pipeline ", p, " micro-batch ", i, " packs ", tokens[i], " tokens (at most 2^31 - 1)");
  }
  return tokens;
}

// Every instruction of pipeline p names one of its micro-batches and has the shape of the packed micro-batch:
// tokens × hidden, or tokens × 1 for input ids.
inline void validate_shapes(const schedule::ExecutionPlan& plan, std::size_t p, std::span<const std::int64_t> tokens,
                            std::int64_t hidden) {
  using K = schedule::InstructionKind;
  for (std::size_t j = 0; j < plan.ranks.size(); ++j) {
    const auto& list = plan.ranks[j];
    for (std::size_t k = 0; k < list.size(); ++k) {
      const schedule::Instruction& in = list[k];
      auto fail = [&](auto&&... parts) {
        broken_plan("pipeline ", p, " rank ", j, " instruction ", k, " (", schedule::name(in.kind), "): ", parts...);
      };
      if (in.micro_batch < 0 || static_cast<std::size_t>(in.micro_batch) >= tokens.size())
        fail("names micro-batch ", in.micro_batch, " outside [0, ", tokens.size(), ")");
      const std::int64_t rows = tokens[static_cast<std::size_t>(in.micro_batch)];
      const bool ids = in.kind == K::load_input || (in.kind == K::free_buffer && in.shape.cols == 1 && j == 0);
      if (in.shape != schedule::TensorShape{rows, ids ? 1 : hidden})
        fail("has shape [", in.shape.rows, ", ", in.shape.cols, "], the packed micro-batch is [", rows, ", ",
             ids ? 1 : hidden, "]");
    }
  }
}

}  // namespace detail

// How much of a job is checked before it runs. `structure` is what a backend needs to run it safely: the model,
// the sequences, and plans, layer ranges and micro-batches that fit together. `all` adds every instruction's
// shape and the interpreter's dry run of the whole plan. A multi-process run may take `structure` alone, to meet a
// broken plan as the processes do (the interpreter still checks each rank's own instructions as it runs them).
enum class JobChecks { all, structure };

// Checks the job: the model (invalid_input), every sequence's tokens (invalid_input), and the consistency of
// plans, layer ranges, micro-batches and sequences (invalid_plan): every sequence in exactly one micro-batch of
// one pipeline; with JobChecks::all also every instruction's micro-batch and shape (the packed token count), then a
// dry run of the interpreter that checks every instruction's stage, peer and slots, slot lifetimes and
// send/receive pairing.
inline void validate(const Job& job, JobChecks checks = JobChecks::all) {
  require_valid(job.model);
  const auto index = detail::validate_sequences(job);
  if (job.pipelines.empty()) detail::broken_plan("no pipelines");
  std::unordered_map<std::int64_t, std::size_t> placed;  // sequence id -> pipeline
  for (std::size_t p = 0; p < job.pipelines.size(); ++p) {
    const std::vector<std::int64_t> tokens = detail::validate_pipeline(job, p, index, placed);
    if (checks == JobChecks::all) detail::validate_shapes(job.pipelines[p].plan, p, tokens, job.model.hidden);
  }
  if (placed.size() != job.sequences.size())
    for (const SequenceTokens& sequence : job.sequences)
      if (!placed.contains(sequence.id)) detail::broken_plan("sequence ", sequence.id, " is in no micro-batch");
  // A plan NCCL would deadlock on is rejected here rather than hanging the GPUs.
  if (checks == JobChecks::all) schedule::dry_run(pipeline_plans(job), {.context = "executor"});
}

// Validates the job and derives its ranks, packed micro-batches and loss normaliser.
inline JobLayout layout(const Job& job, JobChecks checks = JobChecks::all) {
  validate(job, checks);
  const auto index = detail::sequence_index(job.sequences);
  JobLayout result;
  for (std::size_t p = 0; p < job.pipelines.size(); ++p) {
    const PipelineJob& pipeline = job.pipelines[p];
    result.first_rank.push_back(static_cast<int>(result.ranks.size()));
    const int c = pipeline.plan.stages;
    for (int j = 0; j < c; ++j)
      result.ranks.push_back({static_cast<int>(p), j, pipeline.layer_boundaries[static_cast<std::size_t>(j)],
                              pipeline.layer_boundaries[static_cast<std::size_t>(j) + 1], j == 0, j + 1 == c});
    std::vector<PackedMicroBatch> packed;
    std::int64_t largest = 0;
    for (const std::vector<std::int64_t>& ids : pipeline.micro_batches) {
      PackedMicroBatch mb;
      mb.cu_seqlens.push_back(0);
      for (const std::int64_t id : ids) {
        const std::vector<std::int32_t>& tokens = job.sequences[index.at(id)].tokens;
        mb.tokens.insert(mb.tokens.end(), tokens.begin(), tokens.end());
        for (std::size_t t = 0; t < tokens.size(); ++t)
          mb.targets.push_back(t + 1 < tokens.size() ? tokens[t + 1] : -1);
        mb.cu_seqlens.push_back(static_cast<std::int32_t>(mb.tokens.size()));
        mb.max_seqlen = std::max(mb.max_seqlen, static_cast<std::int32_t>(tokens.size()));
        result.total_targets += static_cast<std::int64_t>(tokens.size()) - 1;
      }
      largest = std::max(largest, mb.size());
      packed.push_back(std::move(mb));
    }
    result.slot_elements.push_back(largest * job.model.hidden);
    result.micro_batches.push_back(std::move(packed));
  }
  return result;
}

// A job for the busy pipelines of a Hydraulis iteration plan, scheduled as `schedule` (schedule_iteration of the
// same plan): micro-batch i of a pipeline is its plan's micro_batches[i]. Layers are split evenly over each
// pipeline's PP stages; instruction shapes are set to the packed micro-batches and the model's hidden size.
inline Job job_from_iteration(const ModelConfig& model, std::vector<SequenceTokens> sequences,
                              const assign::IterationPlan& plan, const schedule::IterationSchedule& schedule) {
  sluice::require(schedule.pipelines.size() == plan.pipelines.size(), "job: the schedule has ",
                  schedule.pipelines.size(), " pipelines, the plan ", plan.pipelines.size());
  Job job{model, std::move(sequences), {}};
  const auto index = detail::sequence_index(job.sequences);
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const auto& scheduled = schedule.pipelines[p];
    if (!scheduled) continue;
    PipelineJob pipeline;
    pipeline.plan = scheduled->schedule.plan;
    pipeline.layer_boundaries = even_layer_split(model.layers, pipeline.plan.stages);
    std::vector<std::int64_t> tokens;
    for (const assign::MicroBatch& mb : plan.pipelines[p].micro_batches) {
      for (const std::int64_t id : mb.sequence_ids)
        sluice::require(index.contains(id), "job: sequence ", id, " has no tokens");
      pipeline.micro_batches.push_back(mb.sequence_ids);
      tokens.push_back(detail::packed_length(index, job.sequences, mb.sequence_ids));
    }
    detail::set_packed_shapes(pipeline.plan, tokens, model.hidden);
    pipeline.predicted = scheduled->schedule.simulation;
    job.pipelines.push_back(std::move(pipeline));
  }
  validate(job);
  return job;
}

// As above, scheduling the plan's pipelines with `options` (boundary tensors of the model's hidden size).
inline Job job_from_iteration(const ModelConfig& model, std::vector<SequenceTokens> sequences,
                              const assign::IterationPlan& plan, const cost::Profile& profile,
                              const schedule::ScheduleOptions& options = {}) {
  require_valid(model);
  schedule::ProblemOptions problem;
  problem.hidden = model.hidden;
  return job_from_iteration(model, std::move(sequences), plan,
                            schedule::schedule_iteration(plan, profile, options, problem));
}

// A job for the replicas of a DynaPipe pipeline plan that got micro-batches; sample ids are sequence ids.
// Micro-batch i of a replica is partition micro-batch replica.micro_batches[i], run packed (a padded micro-batch's
// rows are concatenated without padding), so instruction shapes are rewritten to the packed token counts.
inline Job job_from_pipeline_plan(const ModelConfig& model, std::vector<SequenceTokens> sequences,
                                  const schedule::PipelineRunPlan& plan) {
  Job job{model, std::move(sequences), {}};
  const auto index = detail::sequence_index(job.sequences);
  for (const schedule::ReplicaSchedule& replica : plan.replicas) {
    if (replica.micro_batches.empty()) continue;
    PipelineJob pipeline;
    pipeline.plan = replica.schedule.plan;
    pipeline.layer_boundaries = even_layer_split(model.layers, pipeline.plan.stages);
    std::vector<std::int64_t> tokens;
    for (const std::size_t i : replica.micro_batches) {
      sluice::require(i < plan.partition.micro_batches.size(), "job: replica micro-batch ", i,
                      " outside the partition");
      const std::vector<std::int64_t>& ids = plan.partition.micro_batches[i].sample_ids;
      for (const std::int64_t id : ids)
        sluice::require(index.contains(id), "job: sample ", id, " has no sequence tokens");
      pipeline.micro_batches.push_back(ids);
      tokens.push_back(detail::packed_length(index, job.sequences, ids));
    }
    detail::set_packed_shapes(pipeline.plan, tokens, model.hidden);
    pipeline.predicted = replica.schedule.simulation;
    job.pipelines.push_back(std::move(pipeline));
  }
  validate(job);
  return job;
}

}  // namespace sluice::executor
