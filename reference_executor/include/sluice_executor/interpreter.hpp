#pragma once
// The per-rank instruction interpreter. It executes every rank's instruction list against a Backend (compute and
// slot storage) and a Transport (moving slots between ranks), and checks the plan as it goes:
//   - static slots: a slot is written only while free, read only while it holds the tensor the instruction needs
//     (a received tensor only after its Wait), freed only when it holds something and no transfer on it is
//     pending (a sender's slot is not reused before its send's Wait); every slot is free at the end;
//   - every rank runs each micro-batch's forward once, then its backward once, which still finds the forward's
//     input and output slots holding their tensors;
//   - point-to-point rules as NCCL runs them: a Start queues its operation for that peer and returns; between two
//     ranks the operations pair in issue order, so the two queue heads must be a send and the matching receive
//     (same tensor kind, micro-batch and shape); a Wait blocks its rank until its operation has completed.
// Anything else raises sluice::invalid_plan naming the rank and the instruction. run() steps ranks round-robin
// on one host thread; a round in which no rank moves means the ranks wait on each other, reported with every
// blocked rank.
//
// Backend (per global rank): load_input(rank, micro_batch, slot); forward(rank, micro_batch, input_slot,
// output_slot) with output -1 on a last stage (which computes the loss); backward(rank, micro_batch, grad_slot,
// output_slot) with grad -1 on a last stage and output -1 on a first; Stamp stamp(rank), a point in the rank's
// execution, and double seconds(Stamp) after the run, measured from the run's origin.
// Transport: post(transfer) at a Start; transfer(send, recv) when the two pair (enqueue the copy); wait(transfer)
// at a Wait of a completed operation. A transport whose operations pair themselves (NCCL) sets
// `static constexpr bool pairs_itself = true`: its Starts issue the operation at once, Waits never block the host,
// and each rank may be stepped on its own thread (the plan is checked beforehand by a round-robin dry run).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice_executor/job.hpp"

namespace sluice::executor {

// One point-to-point operation, as the rank that issued it sees it.
struct Transfer {
  int rank = 0;  // global ranks
  int peer = 0;
  int index = 0;  // among the rank's transfers, in issue order
  int slot = 0;
  bool send = false;
  bool activation = false;
  int micro_batch = 0;
  schedule::TensorShape shape;
  bool complete = false;
};

// Seconds from the run's origin.
struct InstructionTiming {
  double start = 0;
  double end = 0;
  friend bool operator==(const InstructionTiming&, const InstructionTiming&) = default;
};

struct TransferTiming {
  int from_rank = 0;  // global ranks
  int to_rank = 0;
  int micro_batch = 0;
  bool activation = false;
  double start = 0;
  double end = 0;
};

// The model's loss and its parameter gradients (canonical tensor order, summed over pipelines).
struct ModelResult {
  double loss = 0;
  std::vector<std::vector<double>> gradients;
};

struct RunReport {
  ModelResult result;
  std::vector<std::vector<InstructionTiming>> instructions;  // [global rank][instruction]
  std::vector<TransferTiming> transfers;
  std::vector<double> pipeline_makespan;  // last instruction end minus first instruction start, per pipeline
  double makespan = 0;                    // the slowest pipeline's
  std::string device;
};

namespace detail {
template <class Transport>
constexpr bool pairs_itself() {
  if constexpr (requires { Transport::pairs_itself; }) return Transport::pairs_itself;
  else return false;
}
}  // namespace detail

template <class Backend, class Transport>
class Interpreter {
public:
  using Stamp = typename Backend::Stamp;

  Interpreter(const Job& job, const JobLayout& layout, Backend& backend, Transport& transport)
      : layout_(layout),
        backend_(backend),
        transport_(transport),
        ranks_(layout.ranks.size()),
        queues_(2 * layout.ranks.size()) {
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      const RankInfo& info = layout.ranks[r];
      const PipelineJob& pipeline = job.pipelines[static_cast<std::size_t>(info.pipeline)];
      RankState& state = ranks_[r];
      state.list = &pipeline.plan.ranks[static_cast<std::size_t>(info.stage)];
      state.slots.resize(static_cast<std::size_t>(pipeline.plan.buffer_slots));
      const std::size_t m = pipeline.micro_batches.size();
      state.progress.resize(m);
      state.starts.resize(state.list->size());
      state.ends.resize(state.list->size());
    }
  }

  [[nodiscard]] bool finished(int rank) const { return at(rank).next == at(rank).list->size(); }

  // Executes the rank's instructions until it finishes or blocks at a Wait; returns whether any ran.
  bool step(int rank) {
    RankState& state = at(rank);
    bool moved = false;
    while (state.next < state.list->size()) {
      const schedule::Instruction& in = (*state.list)[state.next];
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

  // Steps the ranks round-robin until all finish.
  void run() {
    for (bool all_done = false; !all_done;) {
      bool moved = false;
      all_done = true;
      for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
        moved = step(r) || moved;
        all_done = all_done && finished(r);
      }
      if (!all_done && !moved) report_stuck();
    }
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
    schedule::TensorShape shape;
    int transfer = -1;  // a Start on this slot whose Wait has not run yet
  };
  // Per micro-batch: what the rank has done with it.
  struct Progress {
    bool forwarded = false;
    bool backwarded = false;
    int input_slot = -1;  // the forward's input and output slots, which the backward still needs
    int output_slot = -1;
    int transfers[4] = {-1, -1, -1, -1};  // send_act, recv_act, send_grad, recv_grad
    bool waited[4] = {false, false, false, false};
  };
  struct RankState {
    const std::vector<schedule::Instruction>* list = nullptr;
    std::size_t next = 0;
    std::vector<Held> slots;
    std::vector<Progress> progress;
    std::vector<Transfer> transfers;
    std::vector<Stamp> starts, ends;
    std::optional<Stamp> blocked_since;
    bool checked = false;  // the end-of-list checks ran
  };

  RankState& at(int rank) { return ranks_[static_cast<std::size_t>(rank)]; }
  [[nodiscard]] const RankState& at(int rank) const { return ranks_[static_cast<std::size_t>(rank)]; }

  static int transfer_class(schedule::InstructionKind kind) {
    using K = schedule::InstructionKind;
    switch (kind) {
      case K::send_act_start:
      case K::send_act_wait:
        return 0;
      case K::recv_act_start:
      case K::recv_act_wait:
        return 1;
      case K::send_grad_start:
      case K::send_grad_wait:
        return 2;
      default:
        return 3;
    }
  }

  [[nodiscard]] std::string where(int rank) const {
    const RankInfo& info = layout_.ranks[static_cast<std::size_t>(rank)];
    const RankState& state = at(rank);
    std::string text = sluice::detail::concat("rank ", rank, " (pipeline ", info.pipeline, " stage ", info.stage, ")");
    if (state.next < state.list->size()) {
      const schedule::Instruction& in = (*state.list)[state.next];
      text += sluice::detail::concat(" instruction ", state.next, " (", schedule::name(in.kind), " micro-batch ",
                                     in.micro_batch, ")");
    }
    return text;
  }

  [[noreturn]] void fail(int rank, auto&&... parts) const {
    throw invalid_plan(sluice::detail::concat("executor: ", where(rank), ": ", parts...));
  }

  Held& slot(int rank, int id) {
    RankState& state = at(rank);
    if (id < 0 || static_cast<std::size_t>(id) >= state.slots.size())
      fail(rank, "slot ", id, " outside [0, ", state.slots.size(), ")");
    return state.slots[static_cast<std::size_t>(id)];
  }

  void write(int rank, int id, Content content, const schedule::Instruction& in) {
    Held& held = slot(rank, id);
    if (held.content != Content::none)
      fail(rank, "writes slot ", id, ", which still holds a tensor of micro-batch ", held.micro_batch);
    held = {content, in.micro_batch, in.shape, -1};
  }

  // A read needs the tensor in place: a received one only after its Wait.
  void read(int rank, int id, Content content, const schedule::Instruction& in) {
    const Held& held = slot(rank, id);
    const bool receiving = held.transfer >= 0 && (content == Content::act_in || content == Content::grad_in);
    if (held.content != content || held.micro_batch != in.micro_batch || receiving)
      fail(rank, "reads slot ", id, ", which does not hold the tensor it needs",
           receiving ? " (its receive has not been waited for)" : "");
  }

  bool execute(int rank, const schedule::Instruction& in) {
    using K = schedule::InstructionKind;
    const RankInfo& info = layout_.ranks[static_cast<std::size_t>(rank)];
    Progress& progress = at(rank).progress[static_cast<std::size_t>(in.micro_batch)];
    switch (in.kind) {
      case K::load_input:
        write(rank, in.buffer, Content::ids, in);
        backend_.load_input(rank, in.micro_batch, in.buffer);
        return true;
      case K::forward:
        if (progress.forwarded) fail(rank, "runs the forward twice");
        read(rank, in.buffer, info.first ? Content::ids : Content::act_in, in);
        if (in.output >= 0) write(rank, in.output, Content::act_out, in);
        backend_.forward(rank, in.micro_batch, in.buffer, in.output);
        progress.forwarded = true;
        progress.input_slot = in.buffer;
        progress.output_slot = in.output;
        return true;
      case K::backward:
        if (!progress.forwarded) fail(rank, "runs the backward before the forward");
        if (progress.backwarded) fail(rank, "runs the backward twice");
        if (in.buffer >= 0) read(rank, in.buffer, Content::grad_in, in);
        read(rank, progress.input_slot, info.first ? Content::ids : Content::act_in, in);
        if (progress.output_slot >= 0) read(rank, progress.output_slot, Content::act_out, in);
        if (in.output >= 0) write(rank, in.output, Content::grad_out, in);
        backend_.backward(rank, in.micro_batch, in.buffer, in.output);
        progress.backwarded = true;
        return true;
      case K::free_buffer: {
        Held& held = slot(rank, in.buffer);
        if (held.content == Content::none) fail(rank, "frees slot ", in.buffer, ", which holds nothing");
        if (held.transfer >= 0) fail(rank, "frees slot ", in.buffer, " before the Wait of its transfer");
        if (held.micro_batch != in.micro_batch || held.shape != in.shape)
          fail(rank, "frees slot ", in.buffer, ", which holds another tensor (micro-batch ", held.micro_batch, ")");
        held = {};
        return true;
      }
      case K::send_act_start:
      case K::recv_act_start:
      case K::send_grad_start:
      case K::recv_grad_start:
        start(rank, in, progress);
        return true;
      default:
        return wait(rank, in, progress);
    }
  }

  void start(int rank, const schedule::Instruction& in, Progress& progress) {
    const int kind = transfer_class(in.kind);
    if (progress.transfers[kind] >= 0) fail(rank, "is issued twice");
    const bool send = schedule::is_send(in.kind);
    const bool activation = schedule::carries_activation(in.kind);
    if (send) read(rank, in.buffer, activation ? Content::act_out : Content::grad_out, in);
    else write(rank, in.buffer, activation ? Content::act_in : Content::grad_in, in);
    RankState& state = at(rank);
    const RankInfo& info = layout_.ranks[static_cast<std::size_t>(rank)];
    const int peer = layout_.global_rank(info.pipeline, in.peer);
    const int index = static_cast<int>(state.transfers.size());
    state.transfers.push_back({rank, peer, index, in.buffer, send, activation, in.micro_batch, in.shape, false});
    progress.transfers[kind] = index;
    slot(rank, in.buffer).transfer = index;
    transport_.post(state.transfers.back());
    if constexpr (detail::pairs_itself<Transport>()) {
      state.transfers.back().complete = true;
    } else {
      queue(rank, peer).push_back(index);
      pair(rank, peer);
    }
  }

  std::deque<int>& queue(int rank, int peer) {
    return queues_[2 * static_cast<std::size_t>(rank) + (peer > rank ? 1 : 0)];
  }

  // Pairs the heads of the two ranks' queues toward each other, as NCCL would run them.
  void pair(int rank, int peer) {
    std::deque<int>& mine = queue(rank, peer);
    std::deque<int>& theirs = queue(peer, rank);
    while (!mine.empty() && !theirs.empty()) {
      Transfer& a = at(rank).transfers[static_cast<std::size_t>(mine.front())];
      Transfer& b = at(peer).transfers[static_cast<std::size_t>(theirs.front())];
      auto describe = [](const Transfer& t) {
        return sluice::detail::concat(t.send ? "send of " : "receive of ", t.activation ? "act " : "grad ",
                                      t.micro_batch, " on rank ", t.rank);
      };
      if (a.send == b.send)
        fail(rank, "deadlock: the next operations between ranks ", rank, " and ", peer, " are the ", describe(a),
             " and the ", describe(b), ", which can never pair");
      Transfer& sent = a.send ? a : b;
      Transfer& received = a.send ? b : a;
      if (sent.activation != received.activation || sent.micro_batch != received.micro_batch ||
          sent.shape != received.shape)
        fail(rank, "mismatch: the ", describe(sent), " would pair with the ", describe(received));
      transport_.transfer(sent, received);
      sent.complete = received.complete = true;
      mine.pop_front();
      theirs.pop_front();
    }
  }

  bool wait(int rank, const schedule::Instruction& in, Progress& progress) {
    const int kind = transfer_class(in.kind);
    if (progress.transfers[kind] < 0) fail(rank, "waits for an operation that was never started");
    if (progress.waited[kind]) fail(rank, "waits twice");
    const Transfer& transfer = at(rank).transfers[static_cast<std::size_t>(progress.transfers[kind])];
    if (transfer.slot != in.buffer) fail(rank, "waits on slot ", in.buffer, ", its Start used slot ", transfer.slot);
    if (!transfer.complete) return false;
    transport_.wait(transfer);
    progress.waited[kind] = true;
    slot(rank, in.buffer).transfer = -1;
    return true;
  }

  // At a rank's end: every slot free, every micro-batch's forward and backward run.
  void finish(int rank) {
    const RankState& state = at(rank);
    for (std::size_t s = 0; s < state.slots.size(); ++s)
      if (state.slots[s].content != Content::none)
        fail(rank, "ends with slot ", s, " holding a tensor of micro-batch ", state.slots[s].micro_batch);
    for (std::size_t i = 0; i < state.progress.size(); ++i)
      if (!state.progress[i].backwarded) fail(rank, "ends without the backward of micro-batch ", i);
  }

  [[noreturn]] void report_stuck() const {
    std::string blocked;
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r)
      if (!finished(r)) blocked += (blocked.empty() ? "" : "; ") + where(r);
    throw invalid_plan("executor: the ranks wait on each other forever: " + blocked +
                       " (no peer will complete what they wait for)");
  }

  const JobLayout& layout_;
  Backend& backend_;
  Transport& transport_;
  std::vector<RankState> ranks_;
  std::vector<std::deque<int>> queues_;  // [2 * rank + (peer above)]: indices into the rank's transfers
};

// Runs every rank's instruction list through the interpreter's checks (slots, pairing under NCCL's rules, waits
// that could never complete) without computing or moving anything. Raises invalid_plan like a real run.
inline void check_plan(const Job& job, const JobLayout& job_layout) {
  struct NoCompute {
    using Stamp = int;
    void load_input(int, int, int) {}
    void forward(int, int, int, int) {}
    void backward(int, int, int, int) {}
    [[nodiscard]] Stamp stamp(int) const { return 0; }
    [[nodiscard]] double seconds(Stamp) const { return 0; }
  };
  struct NoMoves {
    void post(const Transfer&) {}
    void transfer(const Transfer&, const Transfer&) {}
    void wait(const Transfer&) {}
  };
  NoCompute backend;
  NoMoves transport;
  Interpreter<NoCompute, NoMoves>(job, job_layout, backend, transport).run();
}

// Pipeline makespans from instruction timings: each pipeline's last end minus its first start.
inline void fill_makespans(const JobLayout& layout, RunReport& report) {
  report.pipeline_makespan.assign(layout.first_rank.size(), 0.0);
  std::vector<double> first(layout.first_rank.size(), 0.0);
  std::vector<char> seen(layout.first_rank.size(), 0);
  for (std::size_t r = 0; r < report.instructions.size(); ++r) {
    const auto p = static_cast<std::size_t>(layout.ranks[r].pipeline);
    for (const InstructionTiming& t : report.instructions[r]) {
      first[p] = seen[p] ? std::min(first[p], t.start) : t.start;
      report.pipeline_makespan[p] = seen[p] ? std::max(report.pipeline_makespan[p], t.end) : t.end;
      seen[p] = 1;
    }
  }
  report.makespan = 0;
  for (std::size_t p = 0; p < first.size(); ++p) {
    report.pipeline_makespan[p] -= first[p];
    report.makespan = std::max(report.makespan, report.pipeline_makespan[p]);
  }
}

}  // namespace sluice::executor
