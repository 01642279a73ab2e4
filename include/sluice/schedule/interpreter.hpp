#pragma once
// What an instruction list means, defined once: the interpreter that executes every rank's ExecutionPlan list
// against a Backend (compute and slot storage) and a Transport (moving slots between ranks), checking the plan as
// it goes. Plan validation (validate(ExecutionPlan, Problem)), the deadlock check (check_deadlock) and the
// reference executor all run it; the first two as dry runs (DryRunBackend, DryRunTransport).
//
// Every stage of a pipeline is run by one or more lanes (its TP·CP shards, PipelineRanks), each lane a global rank
// running the stage's list; lane l of a stage exchanges activations and gradients with lane l of the neighbouring
// stages, so an instruction's peer names a stage of the same pipeline. Without a rank table, a pipeline has one lane
// per stage, numbered after the previous pipeline's ranks. Ranks that compute a micro-batch together (a stage's
// lanes, which exchange data inside their forward and backward; a flex CP group spanning pipelines) form a
// ComputeGroup. The rules:
//   - point-to-point operations as NCCL runs them: a Start queues its operation for that peer and returns; between
//     two ranks the operations pair in issue order, so the two queue heads must be a send and the matching receive
//     (same tensor kind, micro-batch and shape); a Wait blocks its rank until its operation has completed;
//   - with data_flow on (the default), pipeline structure and static slots: a send or receive names its
//     neighbouring stage; a slot is written only while free, read only while it holds the tensor the instruction
//     needs (a received tensor only after its Wait), freed only when it holds a tensor of the micro-batch and no
//     transfer on it is pending; every rank loads or receives each micro-batch's input, runs its forward once,
//     then its backward once, which still finds the forward's input and output slots holding their tensors; at a
//     rank's end every slot is free. With data_flow off only the communication rules apply and compute, load and
//     free never block (a peer may then be any other rank);
//   - a forward or backward of a compute group's member runs only while every member is at or past the same pass
//     of its micro-batch: their collectives inside it need them all (the interpreter blocks the member until then,
//     unless the transport pairs itself, whose collectives block on their own).
// A broken plan raises sluice::invalid_plan naming the rank and the instruction; communication that cannot
// complete raises comm_failure (an invalid_plan) saying how: two queue heads that can never pair or a cycle of
// blocked ranks (deadlock, including ranks waiting for a compute group's member), a send meeting the receive of another
// tensor (mismatch), an operation no peer matches.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/schedule/instructions.hpp"

namespace sluice::schedule {

// One point-to-point operation, as the rank that issued it sees it.
struct Transfer {
  int rank = 0;  // global ranks
  int peer = 0;
  int index = 0;  // among the rank's transfers, in issue order
  int slot = 0;
  bool send = false;
  bool activation = false;
  int micro_batch = 0;
  TensorShape shape;
  bool complete = false;
};

// Seconds from the run's origin.
struct InstructionTiming {
  double start = 0;
  double end = 0;
  friend bool operator==(const InstructionTiming&, const InstructionTiming&) = default;
};

enum class CommOutcome : std::uint8_t {
  completes,  // every rank reaches its end and every operation completes
  deadlock,   // ranks wait on each other in a cycle (two ranks whose queue heads cannot match form a cycle of two)
  mismatch,   // a send meets a receive of another tensor (NCCL would pair them and corrupt the data)
  unmatched,  // an operation that no peer ever matches
};

// Communication that cannot complete under NCCL's rules.
class comm_failure : public invalid_plan {
public:
  comm_failure(CommOutcome how, std::vector<int> ranks, const std::string& message)
      : invalid_plan(message), outcome(how), cycle(std::move(ranks)) {}
  CommOutcome outcome;
  std::vector<int> cycle;  // for a deadlock: the ranks of the first wait-for cycle, each waiting on the next
};

// Compute and slot storage, per global rank: load_input(rank, micro_batch, slot); forward(rank, micro_batch,
// input_slot, output_slot) with output -1 on a last stage (which computes the loss); backward(rank, micro_batch,
// grad_slot, output_slot) with grad -1 on a last stage and output -1 on a first; stamp(rank), a point in the rank's
// execution, and seconds(stamp) after the run, measured from the run's origin.
template <class B>
concept Backend = requires(B& backend, const B& finished, int rank, int micro_batch, int slot,
                           typename B::Stamp stamp) {
  backend.load_input(rank, micro_batch, slot);
  backend.forward(rank, micro_batch, slot, slot);
  backend.backward(rank, micro_batch, slot, slot);
  { backend.stamp(rank) } -> std::convertible_to<typename B::Stamp>;
  { finished.seconds(stamp) } -> std::convertible_to<double>;
};

// A transport whose operations pair themselves (NCCL) says `static constexpr bool pairs_itself = true`: its Starts
// issue the operation at once, Waits never block the host, and each rank may be stepped on its own thread (check
// the plan beforehand with a dry run).
template <class T>
constexpr bool pairs_itself() {
  if constexpr (requires { T::pairs_itself; })
    return T::pairs_itself;
  else
    return false;
}

// post(transfer) at a Start; transfer(send, receive) when the two pair (unless it pairs itself); wait(transfer) at
// the Wait of a completed operation. A transport whose ranks' work shares one stream may also offer turns:
// pass_turn(key) returns a guard, and each pass holds one from before its first stamp to after its last, keyed by its
// stage (the global rank of the stage's first lane) or, for a compute group's micro-batch, by -1 - the group's index.
// The ranks that meet inside a pass share its key.
template <class T>
concept Transport = requires(T& transport, const Transfer& transfer) {
  transport.post(transfer);
  transport.wait(transfer);
}
&&(pairs_itself<T>() ||
   requires(T & transport, const Transfer& send, const Transfer& receive) { transport.transfer(send, receive); });

// The largest global rank a pipeline's rank table may name.
inline constexpr int max_rank = 1 << 24;

// A pipeline as the interpreter runs it: its plan and, in `ranks[j]`, the global rank of every lane of stage j (all
// stages have as many lanes). Empty ranks: one lane per stage, numbered after the previous pipeline's ranks.
struct PipelineRanks {
  const ExecutionPlan* plan = nullptr;
  std::vector<std::vector<int>> ranks{};
};

// Ranks that run a micro-batch's forward, and then its backward, together: each member is a global rank and the
// micro-batch of its own pipeline's plan.
struct ComputeGroup {
  struct Member {
    int rank = 0;
    int micro_batch = 0;
    friend bool operator==(const Member&, const Member&) = default;
  };
  std::vector<Member> members;
  friend bool operator==(const ComputeGroup&, const ComputeGroup&) = default;
};

struct InterpreterOptions {
  std::string_view context = "execution plan";  // the first words of every error message
  bool data_flow = true;                        // check pipeline structure and slots, not only communication
};

template <Backend B, Transport T>
class Interpreter {
public:
  using Stamp = typename B::Stamp;

  // pipelines: each pipeline's plan, outliving the interpreter; one lane per stage, ranks numbered in order.
  Interpreter(const std::vector<const ExecutionPlan*>& pipelines, B& backend, T& transport,
              InterpreterOptions options = {})
      : Interpreter(one_lane(pipelines), {}, backend, transport, options) {}

  // Plans (outliving the interpreter) with their lanes' global ranks, and the compute groups. Global ranks are
  // unique and non-negative; a rank below the largest that no pipeline names has nothing to run. Raises
  // invalid_plan for tables that do not fit their plans or groups naming what no pipeline runs.
  Interpreter(const std::vector<PipelineRanks>& pipelines, const std::vector<ComputeGroup>& groups, B& backend,
              T& transport, InterpreterOptions options = {})
      : backend_(backend), transport_(transport), options_(options) {
    int next_rank = 0;
    for (const PipelineRanks& pipeline : pipelines) {
      const ExecutionPlan& plan = *pipeline.plan;
      const int stages = static_cast<int>(plan.ranks.size());
      std::vector<std::vector<int>> table = pipeline.ranks;
      if (table.empty())
        for (int j = 0; j < stages; ++j) table.push_back({next_rank++});
      if (table.size() != plan.ranks.size())
        throw invalid_plan(sluice::concat(options_.context, ": pipeline ", tables_.size(), " names ranks of ",
                                          table.size(), " stages for ", stages));
      for (const std::vector<int>& lanes : table) {
        if (lanes.empty() || lanes.size() != table.front().size())
          throw invalid_plan(
              sluice::concat(options_.context, ": pipeline ", tables_.size(), " has stages of different lane counts"));
        for (const int rank : lanes) {
          if (rank < 0 || rank > max_rank)
            throw invalid_plan(sluice::concat(options_.context, ": rank ", rank, " outside [0, ", max_rank, "]"));
          next_rank = std::max(next_rank, rank + 1);
        }
      }
      tables_.push_back(std::move(table));
    }
    ranks_.resize(static_cast<std::size_t>(next_rank));
    for (std::size_t p = 0; p < pipelines.size(); ++p) {
      const ExecutionPlan& plan = *pipelines[p].plan;
      const std::vector<std::vector<int>>& table = tables_[p];
      for (std::size_t j = 0; j < table.size(); ++j)
        for (std::size_t lane = 0; lane < table[j].size(); ++lane) {
          RankState& state = ranks_[static_cast<std::size_t>(table[j][lane])];
          if (state.list != &no_instructions_)
            throw invalid_plan(sluice::concat(options_.context, ": rank ", table[j][lane], " runs two stages"));
          state.list = &plan.ranks[j];
          state.pipeline = static_cast<int>(p);
          state.stage = static_cast<int>(j);
          state.lane = static_cast<int>(lane);
          state.stages = static_cast<int>(table.size());
          state.table = &tables_[p];
          if (options_.data_flow) state.slots.resize(static_cast<std::size_t>(std::max(plan.buffer_slots, 0)));
          state.progress.resize(static_cast<std::size_t>(std::max(plan.micro_batches, 0)));
          state.group.assign(state.progress.size(), -1);
          state.starts.resize(state.list->size());
          state.ends.resize(state.list->size());
          std::size_t starts = 0;
          for (const Instruction& in : *state.list) starts += is_comm_start(in.kind);
          state.transfers.reserve(starts);
        }
      name_lanes_ = name_lanes_ || table.front().size() > 1;
    }
    groups_ = groups;
    for (std::size_t g = 0; g < groups_.size(); ++g)
      for (const ComputeGroup::Member& member : groups_[g].members) {
        if (member.rank < 0 || member.rank >= rank_count() || at(member.rank).list == &no_instructions_ ||
            member.micro_batch < 0 || static_cast<std::size_t>(member.micro_batch) >= at(member.rank).progress.size())
          throw invalid_plan(sluice::concat(options_.context, ": compute group ", g, " names micro-batch ",
                                            member.micro_batch, " of rank ", member.rank, ", which runs no such"));
        int& slot_group = at(member.rank).group[static_cast<std::size_t>(member.micro_batch)];
        if (slot_group >= 0)
          throw invalid_plan(sluice::concat(options_.context, ": micro-batch ", member.micro_batch, " of rank ",
                                            member.rank, " is in two compute groups"));
        slot_group = static_cast<int>(g);
      }
    name_pipelines_ = pipelines.size() > 1;
  }

  [[nodiscard]] bool finished(int rank) const { return at(rank).next == at(rank).list->size(); }

  // Executes the rank's instructions until it finishes or blocks at a Wait; returns whether any ran.
  bool step(int rank) {
    RankState& state = at(rank);
    bool moved = false;
    while (state.next < state.list->size()) {
      const Instruction& in = (*state.list)[state.next];
      [[maybe_unused]] const auto turn = pass_turn(rank, in);
      if (!state.blocked_since) state.blocked_since = backend_.stamp(rank);
      if (!execute(rank, in)) return moved;
      state.starts[state.next] = *state.blocked_since;
      state.ends[state.next] = backend_.stamp(rank);
      state.blocked_since.reset();
      ++state.next;
      moved = true;
    }
    if (!state.checked) {
      state.checked = true;
      finish(rank);
    }
    return moved;
  }

  // Steps the ranks round-robin on this thread until all finish.
  void run() {
    for (bool all_done = false; !all_done;) {
      bool moved = false;
      all_done = true;
      for (int r = 0; r < rank_count(); ++r) {
        moved = step(r) || moved;
        all_done = all_done && finished(r);
      }
      if (!all_done && !moved) report_stuck();
    }
    if constexpr (!pairs_itself<T>()) report_unmatched();
  }

  // The rank and the instruction it is at, as error messages name them: "rank 3 (pipeline 1 stage 0) instruction
  // 12 (forward micro-batch 4)". A failure outside the interpreter (a transport's) is reported with it.
  [[nodiscard]] std::string where(int rank) const {
    const RankState& state = at(rank);
    std::string text = sluice::concat("rank ", rank);
    if (name_lanes_)
      text += sluice::concat(" (pipeline ", state.pipeline, " stage ", state.stage, " lane ", state.lane, ")");
    else if (name_pipelines_)
      text += sluice::concat(" (pipeline ", state.pipeline, " stage ", state.stage, ")");
    if (state.next < state.list->size()) {
      const Instruction& in = (*state.list)[state.next];
      text += sluice::concat(" instruction ", state.next, " (", name(in.kind), " micro-batch ", in.micro_batch, ")");
    }
    return text;
  }

  // Per rank and instruction; call after the backend has finished the work (seconds() may need it).
  [[nodiscard]] std::vector<std::vector<InstructionTiming>> timings() const {
    std::vector<std::vector<InstructionTiming>> result(ranks_.size());
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      for (std::size_t k = 0; k < ranks_[r].list->size(); ++k)
        result[r].push_back({backend_.seconds(ranks_[r].starts[k]), backend_.seconds(ranks_[r].ends[k])});
    return result;
  }

private:
  enum class Content : std::uint8_t { none, ids, act_in, act_out, grad_in, grad_out };
  struct Held {
    Content content = Content::none;
    int micro_batch = -1;
    TensorShape shape;
    int transfer = -1;  // a Start on this slot whose Wait has not run yet
  };
  // Per micro-batch: what the rank has done with it.
  struct Progress {
    bool loaded = false;
    bool forwarded = false;
    bool backwarded = false;
    int input_slot = -1;  // the forward's input and output slots, which the backward still needs
    int output_slot = -1;
    int transfers[4] = {-1, -1, -1, -1};  // send_act, recv_act, send_grad, recv_grad
    bool waited[4] = {false, false, false, false};
  };
  // Operations a rank has started toward one peer and that have not paired yet, oldest first.
  struct Queue {
    int peer = 0;
    std::vector<int> transfers;
    std::size_t head = 0;
    [[nodiscard]] bool empty() const { return head == transfers.size(); }
  };
  static inline const std::vector<Instruction> no_instructions_{};
  struct RankState {
    const std::vector<Instruction>* list = &no_instructions_;
    int pipeline = 0;
    int stage = 0;
    int lane = 0;
    int stages = 0;
    const std::vector<std::vector<int>>* table = nullptr;  // the pipeline's ranks by stage and lane
    std::vector<int> group;                                // per micro-batch: its compute group, or -1
    std::size_t next = 0;
    std::vector<Held> slots;
    std::vector<Progress> progress;
    std::vector<Transfer> transfers;
    std::vector<Queue> queues;
    std::vector<Stamp> starts, ends;
    std::optional<Stamp> blocked_since;
    bool checked = false;  // the end-of-list checks ran
    [[nodiscard]] bool first() const { return stage == 0; }
    [[nodiscard]] bool last() const { return stage + 1 == stages; }
  };

  [[nodiscard]] int rank_count() const { return static_cast<int>(ranks_.size()); }

  static std::vector<PipelineRanks> one_lane(const std::vector<const ExecutionPlan*>& plans) {
    std::vector<PipelineRanks> pipelines;
    for (const ExecutionPlan* plan : plans) pipelines.push_back({plan, {}});
    return pipelines;
  }
  RankState& at(int rank) { return ranks_[static_cast<std::size_t>(rank)]; }
  [[nodiscard]] const RankState& at(int rank) const { return ranks_[static_cast<std::size_t>(rank)]; }

  static int transfer_class(InstructionKind kind) {
    using K = InstructionKind;
    switch (kind) {
      case K::send_act_start:
      case K::send_act_wait: return 0;
      case K::recv_act_start:
      case K::recv_act_wait: return 1;
      case K::send_grad_start:
      case K::send_grad_wait: return 2;
      default: return 3;
    }
  }

  [[noreturn]] void fail(int rank, auto&&... parts) const {
    throw invalid_plan(sluice::concat(options_.context, ": ", where(rank), ": ", parts...));
  }
  [[noreturn]] void fail_comm(CommOutcome outcome, std::vector<int> cycle, auto&&... parts) const {
    throw comm_failure(outcome, std::move(cycle), sluice::concat(options_.context, ": ", parts...));
  }

  Held& slot(int rank, int id) {
    RankState& state = at(rank);
    if (id < 0 || static_cast<std::size_t>(id) >= state.slots.size())
      fail(rank, "slot ", id, " outside [0, ", state.slots.size(), ")");
    return state.slots[static_cast<std::size_t>(id)];
  }

  void write(int rank, int id, Content content, const Instruction& in) {
    Held& held = slot(rank, id);
    if (held.content != Content::none)
      fail(rank, "writes slot ", id, ", which still holds a tensor of micro-batch ", held.micro_batch);
    held = {content, in.micro_batch, in.shape, -1};
  }

  // A read needs the tensor in place: a received one only after its Wait.
  void read(int rank, int id, Content content, const Instruction& in) {
    const Held& held = slot(rank, id);
    const bool receiving = held.transfer >= 0 && (content == Content::act_in || content == Content::grad_in);
    if (held.content != content || held.micro_batch != in.micro_batch || receiving)
      fail(rank, "reads slot ", id, ", which does not hold the tensor it needs",
           receiving ? " (its receive has not been waited for)" : "");
  }

  // The fields every instruction must get right before it runs.
  void check_fields(int rank, const Instruction& in) {
    const RankState& state = at(rank);
    if (in.micro_batch < 0 || static_cast<std::size_t>(in.micro_batch) >= state.progress.size())
      fail(rank, "names micro-batch ", in.micro_batch, " outside [0, ", state.progress.size(), ")");
    const bool comm = is_send(in.kind) || is_recv(in.kind);
    if (!options_.data_flow) {
      if (comm && (in.peer < 0 || in.peer >= state.stages || in.peer == state.stage)) fail(rank, "has peer ", in.peer);
      return;
    }
    if (in.stage != state.stage) fail(rank, "is for stage ", in.stage);
    const bool toward_next = carries_activation(in.kind) == is_send(in.kind);
    const int peer = !comm ? -1 : toward_next ? state.stage + 1 : state.stage - 1;
    if (in.peer != peer || (comm && (peer < 0 || peer >= state.stages))) fail(rank, "has peer ", in.peer);
    if (in.kind != InstructionKind::forward && in.kind != InstructionKind::backward && in.output != -1)
      fail(rank, "has output slot ", in.output);
  }

  bool execute(int rank, const Instruction& in) {
    check_fields(rank, in);
    Progress& progress = at(rank).progress[static_cast<std::size_t>(in.micro_batch)];
    if (is_comm_start(in.kind)) {
      start(rank, in, progress);
      return true;
    }
    if (is_comm_wait(in.kind)) return wait(rank, in, progress);
    if constexpr (!pairs_itself<T>())
      if (absent_member(rank, in) >= 0) return false;
    if (options_.data_flow)
      compute(rank, in, progress);
    else if (in.kind == InstructionKind::forward)
      progress.forwarded = true;
    else if (in.kind == InstructionKind::backward)
      progress.backwarded = true;
    return true;
  }

  static bool is_pass(InstructionKind kind) {
    return kind == InstructionKind::forward || kind == InstructionKind::backward;
  }

  // The transport's turn for a pass (see Transport), or nothing.
  auto pass_turn(int rank, const Instruction& in) {
    if constexpr (requires { transport_.pass_turn(rank); }) {
      using Turn = decltype(transport_.pass_turn(rank));
      const RankState& state = at(rank);
      if (!is_pass(in.kind) || in.micro_batch < 0 || static_cast<std::size_t>(in.micro_batch) >= state.group.size())
        return Turn{};
      const int group = state.group[static_cast<std::size_t>(in.micro_batch)];
      return transport_.pass_turn(group >= 0 ? -1 - group
                                             : (*state.table)[static_cast<std::size_t>(state.stage)].front());
    } else {
      return 0;
    }
  }

  // For a forward or backward of a compute group's micro-batch: the first member not yet at or past the same pass
  // of its micro-batch, or -1 when all are (or the micro-batch is in no group).
  [[nodiscard]] int absent_member(int rank, const Instruction& in) const {
    if (!is_pass(in.kind)) return -1;
    const int g = at(rank).group[static_cast<std::size_t>(in.micro_batch)];
    if (g < 0) return -1;
    const bool forward = in.kind == InstructionKind::forward;
    for (const ComputeGroup::Member& member : groups_[static_cast<std::size_t>(g)].members) {
      const RankState& other = at(member.rank);
      const Progress& done = other.progress[static_cast<std::size_t>(member.micro_batch)];
      if (forward ? done.forwarded : done.backwarded) continue;
      const bool there = other.next < other.list->size() && (*other.list)[other.next].kind == in.kind &&
                         (*other.list)[other.next].micro_batch == member.micro_batch;
      if (!there) return member.rank;
    }
    return -1;
  }

  void compute(int rank, const Instruction& in, Progress& progress) {
    using K = InstructionKind;
    const RankState& state = at(rank);
    switch (in.kind) {
      case K::load_input:
        if (!state.first()) fail(rank, "is not on the first stage");
        if (progress.loaded) fail(rank, "loads its input twice");
        write(rank, in.buffer, Content::ids, in);
        backend_.load_input(rank, in.micro_batch, in.buffer);
        progress.loaded = true;
        return;
      case K::forward:
        if (progress.forwarded) fail(rank, "runs the forward twice");
        read(rank, in.buffer, state.first() ? Content::ids : Content::act_in, in);
        if (state.last() != (in.output == -1)) fail(rank, "has output slot ", in.output);
        if (in.output >= 0) write(rank, in.output, Content::act_out, in);
        backend_.forward(rank, in.micro_batch, in.buffer, in.output);
        progress.forwarded = true;
        progress.input_slot = in.buffer;
        progress.output_slot = in.output;
        return;
      case K::backward:
        if (!progress.forwarded) fail(rank, "runs the backward before the forward");
        if (progress.backwarded) fail(rank, "runs the backward twice");
        if (state.last() != (in.buffer == -1)) fail(rank, "reads gradient slot ", in.buffer);
        if (state.first() != (in.output == -1)) fail(rank, "has output slot ", in.output);
        if (in.buffer >= 0) read(rank, in.buffer, Content::grad_in, in);
        read(rank, progress.input_slot, state.first() ? Content::ids : Content::act_in, in);
        if (progress.output_slot >= 0) read(rank, progress.output_slot, Content::act_out, in);
        if (in.output >= 0) write(rank, in.output, Content::grad_out, in);
        backend_.backward(rank, in.micro_batch, in.buffer, in.output);
        progress.backwarded = true;
        return;
      default: {  // free_buffer
        Held& held = slot(rank, in.buffer);
        if (held.content == Content::none) fail(rank, "frees slot ", in.buffer, ", which holds nothing");
        if (held.transfer >= 0) fail(rank, "frees slot ", in.buffer, " before the Wait of its transfer");
        if (held.micro_batch != in.micro_batch || held.shape != in.shape)
          fail(rank, "frees slot ", in.buffer, ", which holds another tensor (micro-batch ", held.micro_batch, ")");
        held = {};
      }
    }
  }

  void start(int rank, const Instruction& in, Progress& progress) {
    const int kind = transfer_class(in.kind);
    if (progress.transfers[kind] >= 0) fail(rank, "is issued twice");
    const bool send = is_send(in.kind);
    const bool activation = carries_activation(in.kind);
    if (options_.data_flow) {
      if (send)
        read(rank, in.buffer, activation ? Content::act_out : Content::grad_out, in);
      else
        write(rank, in.buffer, activation ? Content::act_in : Content::grad_in, in);
    }
    RankState& state = at(rank);
    const int peer = (*state.table)[static_cast<std::size_t>(in.peer)][static_cast<std::size_t>(state.lane)];
    const int index = static_cast<int>(state.transfers.size());
    state.transfers.push_back({rank, peer, index, in.buffer, send, activation, in.micro_batch, in.shape, false});
    progress.transfers[kind] = index;
    if (options_.data_flow) slot(rank, in.buffer).transfer = index;
    transport_.post(state.transfers.back());
    if constexpr (pairs_itself<T>()) {
      state.transfers.back().complete = true;
    } else {
      queue(rank, peer).transfers.push_back(index);
      pair(rank, peer);
    }
  }

  Queue& queue(int rank, int peer) {
    std::vector<Queue>& queues = at(rank).queues;
    for (Queue& q : queues)
      if (q.peer == peer) return q;
    return queues.emplace_back(Queue{.peer = peer, .transfers = {}, .head = 0});
  }

  std::string describe(const Transfer& t) const {
    return sluice::concat(t.send ? "send of " : "receive of ", t.activation ? "act " : "grad ", t.micro_batch,
                          " on rank ", t.rank);
  }

  // Pairs the heads of the two ranks' queues toward each other, as NCCL would run them.
  void pair(int rank, int peer) {
    Queue& mine = queue(rank, peer);
    Queue& theirs = queue(peer, rank);
    while (!mine.empty() && !theirs.empty()) {
      Transfer& a = at(rank).transfers[static_cast<std::size_t>(mine.transfers[mine.head])];
      Transfer& b = at(peer).transfers[static_cast<std::size_t>(theirs.transfers[theirs.head])];
      if (a.send == b.send)
        fail_comm(CommOutcome::deadlock, {std::min(rank, peer), std::max(rank, peer)}, where(rank),
                  ": deadlock: the next operations between ranks ", rank, " and ", peer, " are the ", describe(a),
                  " and the ", describe(b), ", which can never pair");
      Transfer& sent = a.send ? a : b;
      Transfer& received = a.send ? b : a;
      if (sent.activation != received.activation || sent.micro_batch != received.micro_batch ||
          sent.shape != received.shape)
        fail_comm(CommOutcome::mismatch, {}, where(rank), ": mismatch: the ", describe(sent), " would pair with the ",
                  describe(received));
      transport_.transfer(sent, received);
      sent.complete = received.complete = true;
      ++mine.head;
      ++theirs.head;
    }
  }

  bool wait(int rank, const Instruction& in, Progress& progress) {
    const int kind = transfer_class(in.kind);
    if (progress.transfers[kind] < 0) fail(rank, "waits for an operation that was never started");
    if (progress.waited[kind]) fail(rank, "waits twice");
    const Transfer& transfer = at(rank).transfers[static_cast<std::size_t>(progress.transfers[kind])];
    if (options_.data_flow && transfer.slot != in.buffer)
      fail(rank, "waits on slot ", in.buffer, ", its Start used slot ", transfer.slot);
    if (!transfer.complete) return false;
    transport_.wait(transfer);
    progress.waited[kind] = true;
    if (options_.data_flow) slot(rank, in.buffer).transfer = -1;
    return true;
  }

  // At a rank's end: every slot free, every micro-batch's forward and backward run.
  void finish(int rank) {
    if (!options_.data_flow) return;
    const RankState& state = at(rank);
    for (std::size_t s = 0; s < state.slots.size(); ++s)
      if (state.slots[s].content != Content::none)
        fail(rank, "ends with slot ", s, " holding a tensor of micro-batch ", state.slots[s].micro_batch);
    for (std::size_t i = 0; i < state.progress.size(); ++i)
      if (!state.progress[i].backwarded) fail(rank, "ends without the backward of micro-batch ", i);
  }

  // The rank a blocked rank waits for: the peer of the operation its Wait waits for, or the compute group's member
  // its pass waits for.
  [[nodiscard]] int awaited(int rank) const {
    const RankState& state = at(rank);
    const Instruction& in = (*state.list)[state.next];
    if (is_pass(in.kind)) return absent_member(rank, in);
    const Progress& progress = state.progress[static_cast<std::size_t>(in.micro_batch)];
    return state.transfers[static_cast<std::size_t>(progress.transfers[transfer_class(in.kind)])].peer;
  }

  // No rank moved: follow wait-for edges from the first blocked rank (a rank waits for the peer of its awaited
  // operation). The walk ends in a cycle, or at a rank that has finished without posting the match.
  [[noreturn]] void report_stuck() const {
    std::string blocked;
    for (int r = 0; r < rank_count(); ++r)
      if (!finished(r)) blocked += (blocked.empty() ? "" : "; ") + where(r);
    const std::string stuck = "the ranks wait on each other forever: " + blocked;
    int start = 0;
    while (finished(start)) ++start;
    std::vector<int> position(ranks_.size(), -1);
    std::vector<int> path;
    for (int r = start;;) {
      if (finished(r))
        fail_comm(CommOutcome::unmatched, {}, stuck, " (", where(path.back()), " waits for rank ", r,
                  ", which has finished without matching it)");
      if (position[static_cast<std::size_t>(r)] >= 0) {
        std::vector<int> cycle(path.begin() + position[static_cast<std::size_t>(r)], path.end());
        fail_comm(CommOutcome::deadlock, std::move(cycle), stuck, " (no peer will complete what they wait for)");
      }
      position[static_cast<std::size_t>(r)] = static_cast<int>(path.size());
      path.push_back(r);
      r = awaited(r);
    }
  }

  // Every rank has finished: an operation still queued is never matched.
  void report_unmatched() const {
    for (const RankState& state : ranks_)
      for (const Queue& q : state.queues)
        if (!q.empty())
          fail_comm(CommOutcome::unmatched, {}, "the ",
                    describe(state.transfers[static_cast<std::size_t>(q.transfers[q.head])]), " is never matched");
  }

  B& backend_;
  T& transport_;
  InterpreterOptions options_;
  bool name_pipelines_ = false;
  bool name_lanes_ = false;
  std::vector<std::vector<std::vector<int>>> tables_;  // per pipeline: its ranks by stage and lane
  std::vector<ComputeGroup> groups_;
  std::vector<RankState> ranks_;  // by global rank
};

// Computes nothing: a dry run checks the plan alone.
struct DryRunBackend {
  using Stamp = int;
  void load_input(int /*rank*/, int /*micro_batch*/, int /*slot*/) {}
  void forward(int /*rank*/, int /*micro_batch*/, int /*input_slot*/, int /*output_slot*/) {}
  void backward(int /*rank*/, int /*micro_batch*/, int /*grad_slot*/, int /*output_slot*/) {}
  [[nodiscard]] Stamp stamp(int /*rank*/) const { return 0; }
  [[nodiscard]] double seconds(Stamp /*stamp*/) const { return 0; }
};

// Moves nothing: the interpreter's queues pair the messages.
struct DryRunTransport {
  void post(const Transfer& /*transfer*/) {}
  void transfer(const Transfer& /*send*/, const Transfer& /*receive*/) {}
  void wait(const Transfer& /*transfer*/) {}
};

// Runs the pipelines' plans through every check of the interpreter without computing or moving anything.
inline void dry_run(const std::vector<const ExecutionPlan*>& pipelines, InterpreterOptions options = {}) {
  DryRunBackend backend;
  DryRunTransport transport;
  Interpreter<DryRunBackend, DryRunTransport>(pipelines, backend, transport, options).run();
}

// The same for pipelines of several lanes per stage and their compute groups.
inline void dry_run(const std::vector<PipelineRanks>& pipelines, const std::vector<ComputeGroup>& groups,
                    InterpreterOptions options = {}) {
  DryRunBackend backend;
  DryRunTransport transport;
  Interpreter<DryRunBackend, DryRunTransport>(pipelines, groups, backend, transport, options).run();
}

}  // namespace sluice::schedule
