#pragma once
// What the executor runs for one iteration: the model, the token ids of every sequence, and one or more pipelines
// (data-parallel replicas), each with its scheme (TP, CP and its kind, recompute), the layer range of every stage,
// its ExecutionPlan, the sequences packed in each of its micro-batches, and the global rank of every lane (TP·CP
// shard) of every stage; and the micro-batches whose CP group spans pipelines (a flex CP domain). builders.hpp turns
// sluice's plans into jobs; layout() derives what every backend needs.
//
// Micro-batches always run packed: the sequences of a micro-batch are concatenated into one row and attention stays
// causal within each sequence (FlashAttention's varlen layout). Stage j of a pipeline of ⟨TP, CP⟩ runs on TP·CP
// lanes, lane c·TP + t being CP rank c's TP rank t (shard::rank_placement's order); lane l of a stage sends its
// activations to lane l of the next stage (shards.hpp says which tokens and parameters a lane holds).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/interpreter.hpp"
#include "sluice/schedule/simulate.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/shards.hpp"

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
  // TP, CP (its kind and Ulysses degree) and recompute; its PP is the plan's stage count.
  Scheme scheme{};
  // ranks[j][c·TP + t]: the global rank of stage j's CP rank c, TP rank t. Empty: numbered after the ranks of the
  // pipelines before it, stage by stage, lane by lane.
  std::vector<std::vector<int>> ranks{};
  friend bool operator==(const PipelineJob&, const PipelineJob&) = default;
};

// A micro-batch whose CP group spans pipelines, as a flex CP domain forms them (FlexSP; Megatron-LM's dynamic CP):
// member c, CP rank c, is a micro-batch of a pipeline of CP 1; the members' pipelines share TP, stages and layer
// split, and every member lists the group's sequences in the same order. `scheme` gives the group's CP degree (the
// member count), kind and Ulysses degree.
struct CpGroupJob {
  Scheme scheme;
  std::vector<std::pair<int, int>> members;  // (pipeline, micro-batch)
  friend bool operator==(const CpGroupJob&, const CpGroupJob&) = default;
};

struct Job {
  ModelConfig model;
  std::vector<SequenceTokens> sequences;
  std::vector<PipelineJob> pipelines;
  std::vector<CpGroupJob> cp_groups{};
  // Ranks sit on nodes of gpus_per_node (rank / gpus_per_node; 0: all on one node); with tp_within_node, every TP
  // group must be inside one node.
  int gpus_per_node = 0;
  bool tp_within_node = true;
  friend bool operator==(const Job&, const Job&) = default;
};

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

// A global rank: lane `lane` (CP rank cp_rank's TP rank tp_rank) of stage `stage` of pipeline `pipeline`.
struct RankInfo {
  bool runs = false;  // some pipeline's stage names it; the others have nothing to run
  int pipeline = 0;
  int stage = 0;
  int lane = 0;
  int tp = 1;
  int tp_rank = 0;
  int cp_rank = 0;  // within its pipeline's CP (a flex group's CP rank is the member index instead)
  int first_layer = 0;
  int end_layer = 0;
  bool first = false;  // the pipeline's first stage: holds the embedding and loads inputs
  bool last = false;   // the pipeline's last stage: holds the head and computes the loss
  Recompute recompute = Recompute::none;
  int tp_group = -1;  // JobLayout::groups index of its TP group; -1 for TP 1
};

// What lane `lane` of stage `stage` does for one micro-batch: which CP rank it is of which split, and the groups it
// exchanges with (JobLayout::groups indices; -1 where that level has degree 1).
struct LaneWork {
  int split = 0;  // JobLayout::cp_splits index
  int cp_rank = 0;
  int ulysses_group = -1;
  int ring_group = -1;
};

// What every backend derives from a validated job.
struct JobLayout {
  std::vector<RankInfo> ranks;                               // by global rank
  std::vector<std::vector<std::vector<int>>> lane_ranks;     // [pipeline][stage][lane]: global ranks
  std::vector<std::vector<PackedMicroBatch>> micro_batches;  // [pipeline][micro-batch]
  std::vector<CpSplit> cp_splits;                            // each micro-batch's (a flex group's members share one)
  // [pipeline][micro-batch][stage·lanes + lane]
  std::vector<std::vector<std::vector<LaneWork>>> work;
  // Every group of ranks that exchange data inside a forward or backward, members in order, and its family: the
  // groups of one family share no rank (one MPI_Comm_split makes a family's communicators).
  std::vector<std::vector<int>> groups;
  std::vector<int> group_family;
  std::vector<schedule::ComputeGroup> compute_groups;  // for the interpreter
  std::int64_t total_targets = 0;                      // the loss is the sum of cross-entropies over these
  // Largest tensor a slot of the pipeline's ranks holds, in elements (a whole packed micro-batch × hidden bounds
  // every lane's share).
  std::vector<std::int64_t> slot_elements;
  [[nodiscard]] int rank_count() const noexcept { return static_cast<int>(ranks.size()); }
  [[nodiscard]] const LaneWork& lane_work(int rank, int micro_batch) const {
    const RankInfo& info = ranks[static_cast<std::size_t>(rank)];
    const std::size_t lanes = lane_ranks[static_cast<std::size_t>(info.pipeline)].front().size();
    return work[static_cast<std::size_t>(info.pipeline)][static_cast<std::size_t>(micro_batch)]
               [static_cast<std::size_t>(info.stage) * lanes + static_cast<std::size_t>(info.lane)];
  }
  [[nodiscard]] const PackedMicroBatch& packed(int rank, int micro_batch) const {
    return micro_batches[static_cast<std::size_t>(ranks[static_cast<std::size_t>(rank)].pipeline)]
                        [static_cast<std::size_t>(micro_batch)];
  }
  // The tokens the rank's CP rank holds of the micro-batch, and the rows of them its TP rank holds between layers
  // (sequence parallelism).
  [[nodiscard]] const CpShard& shard(int rank, int micro_batch) const {
    const LaneWork& lane = lane_work(rank, micro_batch);
    return cp_splits[static_cast<std::size_t>(lane.split)].shards[static_cast<std::size_t>(lane.cp_rank)];
  }
  [[nodiscard]] RowRange sequence_rows(int rank, int micro_batch) const {
    const RankInfo& info = ranks[static_cast<std::size_t>(rank)];
    return even_part(shard(rank, micro_batch).size(), info.tp, info.tp_rank);
  }
  [[nodiscard]] std::vector<schedule::PipelineRanks> pipeline_ranks(const std::vector<PipelineJob>& pipelines) const {
    std::vector<schedule::PipelineRanks> result;
    for (std::size_t p = 0; p < pipelines.size(); ++p) result.push_back({&pipelines[p].plan, lane_ranks[p]});
    return result;
  }
};

// A group of ranks exchanging data: its id (JobLayout::groups), its global ranks in member order and this rank's
// index among them. A default Group is this rank alone.
struct Group {
  int id = -1;
  std::span<const int> ranks{};
  int index = 0;
  [[nodiscard]] int size() const noexcept { return ranks.empty() ? 1 : static_cast<int>(ranks.size()); }
  [[nodiscard]] int rank() const noexcept { return ranks.empty() ? -1 : ranks[static_cast<std::size_t>(index)]; }
};

// A lane's groups as the stage sees them: the layout's group `id` with this rank's place in it.
inline Group group_of(std::span<const std::vector<int>> groups, int id, int rank) {
  if (id < 0) return {};
  const std::vector<int>& ranks = groups[static_cast<std::size_t>(id)];
  return {id, ranks, static_cast<int>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin())};
}

inline Group group_of(const JobLayout& layout, int id, int rank) { return group_of(layout.groups, id, rank); }

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
// loading and freeing input ids (a slot holds ids from its load_input until the next tensor written into it). A
// lane moves its share of those rows; the shape names the micro-batch's.
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

// The model can run the scheme: TP divides the heads, the FFN width and the vocabulary, and a Ulysses degree the
// heads each TP rank holds (invalid_input naming them).
inline void require_scheme(const ModelConfig& model, const Scheme& scheme, std::string_view where) {
  try {
    require_tp(model, scheme.tp());
  } catch (const invalid_input& error) {
    sluice::fail("job: ", where, " (", scheme.name(), "): ", error.what());
  }
  const int heads = model.heads / scheme.tp();
  sluice::require(heads % scheme.ulysses() == 0, "job: ", where, " (", scheme.name(), "): Ulysses degree ",
                  scheme.ulysses(), " does not divide the ", heads, " heads of each TP rank");
}

// Pipeline p's scheme, plan counts, layer boundaries and micro-batches; returns each micro-batch's packed token
// count.
inline std::vector<std::int64_t> validate_pipeline(const Job& job, std::size_t p,
                                                   const std::unordered_map<std::int64_t, std::size_t>& index) {
  const PipelineJob& pipeline = job.pipelines[p];
  const schedule::ExecutionPlan& plan = pipeline.plan;
  const int c = plan.stages;
  if (c < 1 || plan.ranks.size() != static_cast<std::size_t>(c))
    broken_plan("pipeline ", p, " has ", plan.ranks.size(), " rank lists for ", c, " stages");
  if (pipeline.scheme.pp() != c)
    broken_plan("pipeline ", p, " runs ", pipeline.scheme.name(), " on a plan of ", c, " stages");
  require_scheme(job.model, pipeline.scheme, sluice::concat("pipeline ", p));
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
  if (!pipeline.ranks.empty()) {
    const auto lanes = static_cast<std::size_t>(pipeline.scheme.stage_gpus());
    if (pipeline.ranks.size() != static_cast<std::size_t>(c) ||
        std::any_of(pipeline.ranks.begin(), pipeline.ranks.end(),
                    [&](const std::vector<int>& stage) { return stage.size() != lanes; }))
      broken_plan("pipeline ", p, " names ranks that are not ", c, " stages of ", lanes, " lanes");
  }
  std::vector<std::int64_t> tokens(m);
  for (std::size_t i = 0; i < m; ++i) {
    if (pipeline.micro_batches[i].empty()) broken_plan("pipeline ", p, " micro-batch ", i, " is empty");
    for (const std::int64_t id : pipeline.micro_batches[i])
      if (!index.contains(id))
        broken_plan("pipeline ", p, " micro-batch ", i, " names sequence ", id, ", which the job lacks");
    tokens[i] = packed_length(index, job.sequences, pipeline.micro_batches[i]);
    if (tokens[i] > std::numeric_limits<std::int32_t>::max())
      broken_plan("pipeline ", p, " micro-batch ", i, " packs ", tokens[i], " tokens (at most 2^31 - 1)");
  }
  return tokens;
}

// The flex CP groups: members are micro-batches of pipelines without CP that agree on TP, stages and layers, each in
// at most one group, all listing the same sequences. Returns the group of every (pipeline, micro-batch), or -1.
inline std::vector<std::vector<int>> validate_cp_groups(const Job& job) {
  std::vector<std::vector<int>> group_of;
  for (const PipelineJob& pipeline : job.pipelines) group_of.emplace_back(pipeline.micro_batches.size(), -1);
  for (std::size_t g = 0; g < job.cp_groups.size(); ++g) {
    const CpGroupJob& group = job.cp_groups[g];
    if (group.members.size() < 2 || static_cast<int>(group.members.size()) != group.scheme.cp())
      broken_plan("CP group ", g, " has ", group.members.size(), " members for ", group.scheme.name());
    for (std::size_t c = 0; c < group.members.size(); ++c) {
      const auto [p, i] = group.members[c];
      if (p < 0 || static_cast<std::size_t>(p) >= job.pipelines.size() || i < 0 ||
          static_cast<std::size_t>(i) >= job.pipelines[static_cast<std::size_t>(p)].micro_batches.size())
        broken_plan("CP group ", g, " names micro-batch ", i, " of pipeline ", p, ", which the job lacks");
      const PipelineJob& member = job.pipelines[static_cast<std::size_t>(p)];
      const PipelineJob& lead = job.pipelines[static_cast<std::size_t>(group.members.front().first)];
      if (member.scheme.cp() != 1 || member.scheme.tp() != group.scheme.tp() ||
          member.plan.stages != lead.plan.stages || member.layer_boundaries != lead.layer_boundaries)
        broken_plan("CP group ", g, " spans pipeline ", p, " (", member.scheme.name(),
                    "), which is not of CP 1 with the group's TP, stages and layer split");
      if (member.micro_batches[static_cast<std::size_t>(i)] !=
          lead.micro_batches[static_cast<std::size_t>(group.members.front().second)])
        broken_plan("CP group ", g, " member ", c, " packs other sequences than member 0");
      int& slot = group_of[static_cast<std::size_t>(p)][static_cast<std::size_t>(i)];
      if (slot >= 0) broken_plan("micro-batch ", i, " of pipeline ", p, " is in two CP groups");
      slot = static_cast<int>(g);
    }
    require_scheme(job.model, group.scheme, sluice::concat("CP group ", g));
  }
  return group_of;
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

// Global ranks of every pipeline's lanes: the job's, or numbered in order; each rank once; TP groups inside a node
// when the job says so.
inline std::vector<std::vector<std::vector<int>>> lane_ranks(const Job& job) {
  std::vector<std::vector<std::vector<int>>> tables;
  int next = 0;
  for (const PipelineJob& pipeline : job.pipelines)
    for (const std::vector<int>& stage : pipeline.ranks)
      for (const int rank : stage) next = std::max(next, rank + 1);
  for (const PipelineJob& pipeline : job.pipelines) {
    std::vector<std::vector<int>> table = pipeline.ranks;
    if (table.empty())
      for (int j = 0; j < pipeline.plan.stages; ++j) {
        table.emplace_back();
        for (std::int64_t lane = 0; lane < pipeline.scheme.stage_gpus(); ++lane) table.back().push_back(next++);
      }
    tables.push_back(std::move(table));
  }
  std::map<int, std::size_t> owner;
  for (std::size_t p = 0; p < tables.size(); ++p)
    for (const std::vector<int>& stage : tables[p])
      for (const int rank : stage) {
        if (rank < 0 || rank > schedule::max_rank) broken_plan("pipeline ", p, " names rank ", rank);
        if (!owner.emplace(rank, p).second)
          broken_plan("rank ", rank, " runs two lanes (pipelines ", owner[rank], " and ", p, ")");
      }
  sluice::require(job.gpus_per_node >= 0, "job: gpus_per_node must be >= 0, got ", job.gpus_per_node);
  if (job.gpus_per_node > 0 && job.tp_within_node)
    for (std::size_t p = 0; p < tables.size(); ++p) {
      const auto tp = static_cast<std::size_t>(job.pipelines[p].scheme.tp());
      if (static_cast<int>(tp) > job.gpus_per_node) continue;  // a TP group wider than a node spans several
      for (std::size_t j = 0; j < tables[p].size(); ++j)
        for (std::size_t lane = 0; lane < tables[p][j].size(); ++lane) {
          const int first = tables[p][j][lane - lane % tp];
          sluice::require(tables[p][j][lane] / job.gpus_per_node == first / job.gpus_per_node, "job: pipeline ", p,
                          " stage ", j, " splits a TP group across nodes (ranks ", first, " and ", tables[p][j][lane],
                          ", nodes of ", job.gpus_per_node, " GPUs), and the plan keeps TP within a node");
        }
    }
  return tables;
}

// Packs one more sequence's tokens, each token's target the next token of the same sequence.
inline void append_sequence(PackedMicroBatch& mb, std::span<const std::int32_t> tokens) {
  if (mb.cu_seqlens.empty()) mb.cu_seqlens.push_back(0);
  mb.tokens.insert(mb.tokens.end(), tokens.begin(), tokens.end());
  for (std::size_t t = 0; t < tokens.size(); ++t) mb.targets.push_back(t + 1 < tokens.size() ? tokens[t + 1] : -1);
  mb.cu_seqlens.push_back(static_cast<std::int32_t>(mb.tokens.size()));
  mb.max_seqlen = std::max(mb.max_seqlen, static_cast<std::int32_t>(tokens.size()));
}

inline PackedMicroBatch pack(const Job& job, const std::unordered_map<std::int64_t, std::size_t>& index,
                             std::span<const std::int64_t> ids) {
  PackedMicroBatch mb;
  mb.cu_seqlens.push_back(0);
  for (const std::int64_t id : ids) append_sequence(mb, job.sequences[index.at(id)].tokens);
  return mb;
}

// Registers groups of ranks by their member lists.
class GroupTable {
public:
  // The group's index, or -1 for a group of one rank (nothing to exchange).
  int id(std::vector<int> ranks) {
    if (ranks.size() < 2) return -1;
    const auto [it, added] = index_.try_emplace(ranks, static_cast<int>(groups_.size()));
    if (added) groups_.push_back(std::move(ranks));
    return it->second;
  }
  // Families of groups that share no rank, made greedily in id order.
  [[nodiscard]] std::vector<int> families() const {
    std::vector<std::vector<char>> used;  // [family][rank]
    std::vector<int> family(groups_.size());
    int ranks = 0;
    for (const std::vector<int>& group : groups_)
      for (const int rank : group) ranks = std::max(ranks, rank + 1);
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      std::size_t f = 0;
      auto fits = [&](std::size_t candidate) {
        return std::none_of(groups_[g].begin(), groups_[g].end(),
                            [&](int rank) { return used[candidate][static_cast<std::size_t>(rank)] != 0; });
      };
      while (f < used.size() && !fits(f)) ++f;
      if (f == used.size()) used.emplace_back(static_cast<std::size_t>(ranks), 0);
      for (const int rank : groups_[g]) used[f][static_cast<std::size_t>(rank)] = 1;
      family[g] = static_cast<int>(f);
    }
    return family;
  }
  [[nodiscard]] std::vector<std::vector<int>> take() { return std::move(groups_); }

private:
  std::map<std::vector<int>, int> index_;
  std::vector<std::vector<int>> groups_;
};

}  // namespace detail

// How much of a job is checked before it runs. `structure` is what a backend needs to run it safely: the model,
// the sequences, and plans, schemes, ranks, layer ranges and micro-batches that fit together. `all` adds every
// instruction's shape and the interpreter's dry run of the whole plan, every lane and compute group included. A
// multi-process run may take `structure` alone, to meet a broken plan as the processes do (the interpreter still
// checks each rank's own instructions as it runs them).
enum class JobChecks { all, structure };

// Checks the job and derives its ranks, lanes, packed micro-batches, CP splits, groups and loss normaliser. Raises
// invalid_input for the model, the tokens and schemes the model cannot run (a TP that does not divide the heads,
// FFN width or vocabulary; a Ulysses degree that does not divide a TP rank's heads; a TP group split across nodes
// the job keeps TP within), invalid_plan for everything structural: every sequence in exactly one micro-batch (or
// flex CP group); with JobChecks::all every instruction's micro-batch and shape, then a dry run of the interpreter
// over every lane, with the compute groups' rendezvous, that checks stage, peer and slots, slot lifetimes,
// send/receive pairing and deadlock, so that a plan that would hang is refused before any rank starts.
inline JobLayout layout(const Job& job, JobChecks checks = JobChecks::all) {
  require_valid(job.model);
  const auto index = detail::validate_sequences(job);
  if (job.pipelines.empty()) detail::broken_plan("no pipelines");
  std::vector<std::vector<std::int64_t>> tokens;
  for (std::size_t p = 0; p < job.pipelines.size(); ++p) tokens.push_back(detail::validate_pipeline(job, p, index));
  const std::vector<std::vector<int>> group_of = detail::validate_cp_groups(job);
  std::unordered_map<std::int64_t, std::size_t> placed;  // sequence id -> times placed
  for (std::size_t p = 0; p < job.pipelines.size(); ++p)
    for (std::size_t i = 0; i < job.pipelines[p].micro_batches.size(); ++i) {
      const int g = group_of[p][i];
      if (g >= 0 && job.cp_groups[static_cast<std::size_t>(g)].members.front() !=
                        std::pair<int, int>(static_cast<int>(p), static_cast<int>(i)))
        continue;  // a flex group's sequences count once, at its first member
      for (const std::int64_t id : job.pipelines[p].micro_batches[i])
        if (++placed[id] > 1) detail::broken_plan("sequence ", id, " is in more than one micro-batch");
    }
  if (placed.size() != job.sequences.size())
    for (const SequenceTokens& sequence : job.sequences)
      if (!placed.contains(sequence.id)) detail::broken_plan("sequence ", sequence.id, " is in no micro-batch");
  if (checks == JobChecks::all)
    for (std::size_t p = 0; p < job.pipelines.size(); ++p)
      detail::validate_shapes(job.pipelines[p].plan, p, tokens[p], job.model.hidden);

  JobLayout result;
  result.lane_ranks = detail::lane_ranks(job);
  int rank_count = 0;
  for (const auto& table : result.lane_ranks)
    for (const std::vector<int>& stage : table)
      for (const int rank : stage) rank_count = std::max(rank_count, rank + 1);
  result.ranks.resize(static_cast<std::size_t>(rank_count));
  detail::GroupTable groups;
  for (std::size_t p = 0; p < job.pipelines.size(); ++p) {
    const PipelineJob& pipeline = job.pipelines[p];
    const Scheme& scheme = pipeline.scheme;
    const int tp = scheme.tp();
    for (int j = 0; j < pipeline.plan.stages; ++j) {
      const std::vector<int>& lanes = result.lane_ranks[p][static_cast<std::size_t>(j)];
      for (std::size_t lane = 0; lane < lanes.size(); ++lane) {
        const int c = static_cast<int>(lane) / tp;
        RankInfo& info = result.ranks[static_cast<std::size_t>(lanes[lane])];
        info = {true,
                static_cast<int>(p),
                j,
                static_cast<int>(lane),
                tp,
                static_cast<int>(lane) % tp,
                c,
                pipeline.layer_boundaries[static_cast<std::size_t>(j)],
                pipeline.layer_boundaries[static_cast<std::size_t>(j) + 1],
                j == 0,
                j + 1 == pipeline.plan.stages,
                scheme.recompute(),
                groups.id(std::vector<int>(lanes.begin() + c * tp, lanes.begin() + (c + 1) * tp))};
      }
    }
    std::vector<PackedMicroBatch> packed;
    std::int64_t largest = 0;
    for (const std::vector<std::int64_t>& ids : pipeline.micro_batches) {
      packed.push_back(detail::pack(job, index, ids));
      largest = std::max(largest, packed.back().size());
    }
    result.slot_elements.push_back(largest * job.model.hidden);
    result.micro_batches.push_back(std::move(packed));
  }
  // The CP split of each micro-batch and what each lane does with it: its CP rank and its Ulysses and ring groups.
  result.work.resize(job.pipelines.size());
  std::vector<std::vector<int>> split_of(job.pipelines.size());
  for (std::size_t p = 0; p < job.pipelines.size(); ++p) split_of[p].assign(job.pipelines[p].micro_batches.size(), -1);
  for (std::size_t p = 0; p < job.pipelines.size(); ++p) {
    const PipelineJob& pipeline = job.pipelines[p];
    const int tp = pipeline.scheme.tp();
    const auto lanes = static_cast<std::size_t>(pipeline.scheme.stage_gpus());
    result.work[p].resize(pipeline.micro_batches.size());
    for (std::size_t i = 0; i < pipeline.micro_batches.size(); ++i) {
      const int g = group_of[p][i];
      const Scheme& cp_scheme = g >= 0 ? job.cp_groups[static_cast<std::size_t>(g)].scheme : pipeline.scheme;
      // The members of this micro-batch's CP group: (pipeline, micro-batch, lane offset) per CP rank.
      std::vector<std::pair<std::size_t, std::size_t>> members;
      if (g >= 0)
        for (const auto& [member, mb] : job.cp_groups[static_cast<std::size_t>(g)].members)
          members.emplace_back(static_cast<std::size_t>(member), static_cast<std::size_t>(mb));
      if (split_of[p][i] < 0) {
        const PackedMicroBatch& packed = result.micro_batches[p][i];
        result.cp_splits.push_back(cp_split(packed.cu_seqlens, cp_scheme.ulysses(), cp_scheme.ring()));
        result.total_targets +=
            static_cast<std::int64_t>(packed.tokens.size()) - static_cast<std::int64_t>(packed.cu_seqlens.size() - 1);
        const int split = static_cast<int>(result.cp_splits.size()) - 1;
        if (g >= 0)
          for (const auto& [member, mb] : members) split_of[member][mb] = split;
        else
          split_of[p][i] = split;
      }
      const int cp_index = [&] {
        if (g < 0) return -1;
        for (std::size_t c = 0; c < members.size(); ++c)
          if (members[c] == std::pair(p, i)) return static_cast<int>(c);
        return -1;
      }();
      const int ulysses = cp_scheme.ulysses();
      const int ring = cp_scheme.ring();
      // The global rank of CP rank c's TP rank t at stage j.
      auto rank_of = [&](std::size_t j, int c, int t) {
        if (g < 0) return result.lane_ranks[p][j][static_cast<std::size_t>(c * tp + t)];
        return result.lane_ranks[members[static_cast<std::size_t>(c)].first][j][static_cast<std::size_t>(t)];
      };
      std::vector<LaneWork>& work = result.work[p][i];
      work.resize(static_cast<std::size_t>(pipeline.plan.stages) * lanes);
      for (std::size_t j = 0; j < static_cast<std::size_t>(pipeline.plan.stages); ++j)
        for (std::size_t lane = 0; lane < lanes; ++lane) {
          const int t = static_cast<int>(lane) % tp;
          const int c = g >= 0 ? cp_index : static_cast<int>(lane) / tp;
          const CpGroupMembers cp_members = cp_group_members(c, ulysses, ring);
          std::vector<int> ulysses_ranks, ring_ranks;
          for (const int member : cp_members.ulysses) ulysses_ranks.push_back(rank_of(j, member, t));
          for (const int member : cp_members.ring) ring_ranks.push_back(rank_of(j, member, t));
          work[j * lanes + lane] = {split_of[p][i], c, groups.id(std::move(ulysses_ranks)),
                                    groups.id(std::move(ring_ranks))};
        }
    }
  }
  result.group_family = groups.families();
  result.groups = groups.take();
  // Compute groups: a stage's lanes for each micro-batch, or every member's lanes of a flex CP group.
  for (std::size_t p = 0; p < job.pipelines.size(); ++p) {
    const PipelineJob& pipeline = job.pipelines[p];
    for (std::size_t i = 0; i < pipeline.micro_batches.size(); ++i) {
      const int g = group_of[p][i];
      if (g >= 0 && job.cp_groups[static_cast<std::size_t>(g)].members.front() !=
                        std::pair<int, int>(static_cast<int>(p), static_cast<int>(i)))
        continue;
      for (std::size_t j = 0; j < static_cast<std::size_t>(pipeline.plan.stages); ++j) {
        schedule::ComputeGroup group;
        if (g < 0) {
          for (const int rank : result.lane_ranks[p][j]) group.members.push_back({rank, static_cast<int>(i)});
        } else {
          for (const auto& [member, mb] : job.cp_groups[static_cast<std::size_t>(g)].members)
            for (const int rank : result.lane_ranks[static_cast<std::size_t>(member)][j])
              group.members.push_back({rank, mb});
        }
        if (group.members.size() > 1) result.compute_groups.push_back(std::move(group));
      }
    }
  }
  // A plan that would deadlock or misuse a slot is rejected here rather than hanging the ranks.
  if (checks == JobChecks::all)
    schedule::dry_run(result.pipeline_ranks(job.pipelines), result.compute_groups, {.context = "executor"});
  return result;
}

// Checks the job as layout() does.
inline void validate(const Job& job, JobChecks checks = JobChecks::all) { static_cast<void>(layout(job, checks)); }

}  // namespace sluice::executor
