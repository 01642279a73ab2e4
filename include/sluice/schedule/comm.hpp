#pragma once
// Communication planning (DynaPipe §6, Fig. 12): turns stage orders and their simulated timeline into
// per-rank instruction lists whose sends and receives cannot deadlock under NCCL's rules.
//
// Every instruction is an event in one global order, sorted by simulated time: a producing op's send Start
// and the matching receive Start are one event, appended to both ranks at the same moment (at the op's end),
// so the Starts between two ranks are issued in the same order on both ends. A receive's Wait goes right
// before the compute op that consumes it; a send's Wait goes at the simulated arrival, where it cannot stall.
// Buffers are static slots: the lowest free slot is taken when a tensor is first written and released by a
// free_buffer after its last use.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <tuple>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/simulate.hpp"

namespace sluice::schedule {

namespace detail {

// One global event. kind 0: a send/receive Start pair; 1: a send Wait; 2: a compute op with its waits and frees.
struct CommEvent {
  double time = 0;
  int kind = 0;
  int stage = 0;
  Pass pass = Pass::forward;
  int micro_batch = 0;
  friend bool operator<(const CommEvent& a, const CommEvent& b) {
    return std::tie(a.time, a.kind, a.stage, a.pass, a.micro_batch) <
           std::tie(b.time, b.kind, b.stage, b.pass, b.micro_batch);
  }
};

// Lowest-free-slot allocation per rank.
class SlotPool {
public:
  int take() {
    const auto it = std::find(used_.begin(), used_.end(), char{0});
    const auto slot = static_cast<std::size_t>(it - used_.begin());
    if (it == used_.end()) used_.push_back(1);
    else *it = 1;
    ++in_use_;
    peak_ = std::max(peak_, in_use_);
    return static_cast<int>(slot);
  }
  void release(int slot) {
    used_[static_cast<std::size_t>(slot)] = 0;
    --in_use_;
  }
  [[nodiscard]] int peak() const { return peak_; }

private:
  std::vector<char> used_;
  int in_use_ = 0;
  int peak_ = 0;
};

// Names an instruction in a validator's message (streamed only when a check fails).
struct InstructionAt {
  int rank = 0;
  std::size_t index = 0;
  const Instruction* instruction = nullptr;
  friend std::ostream& operator<<(std::ostream& out, const InstructionAt& at) {
    return out << "rank " << at.rank << " instruction " << at.index << " (" << name(at.instruction->kind)
               << " micro-batch " << at.instruction->micro_batch << ")";
  }
};

inline TensorShape activation_shape(const Problem& problem, int micro_batch) {
  return {problem.micro_batches[static_cast<std::size_t>(micro_batch)].tokens, problem.hidden};
}

}  // namespace detail

// Raises invalid_input for a bad problem and invalid_plan when the simulation does not fit the order.
inline ExecutionPlan plan_comm(const Problem& problem, const Order& order, const Simulation& simulation) {
  require_problem(problem);
  validate(simulation, problem, order);
  const int c = problem.stages;
  const auto m = problem.micro_batches.size();
  std::vector<detail::CommEvent> events;
  events.reserve(m * static_cast<std::size_t>(c) * 6);
  for (int j = 0; j < c; ++j)
    for (const OpTiming& t : simulation.stages[static_cast<std::size_t>(j)]) {
      events.push_back({t.start, 2, j, t.pass, t.micro_batch});
      const bool sends = t.pass == Pass::forward ? j + 1 < c : j > 0;
      if (!sends) continue;
      events.push_back({t.end, 0, j, t.pass, t.micro_batch});
      events.push_back({t.arrival, 1, j, t.pass, t.micro_batch});
    }
  std::sort(events.begin(), events.end());

  ExecutionPlan plan{c, static_cast<int>(m), 0, std::vector<std::vector<Instruction>>(static_cast<std::size_t>(c))};
  std::vector<detail::SlotPool> pools(static_cast<std::size_t>(c));
  // Slot of each tensor, indexed [stage * m + micro_batch].
  std::vector<int> act_in(c * m, -1), act_out(c * m, -1), grad_in(c * m, -1), grad_out(c * m, -1);
  auto at = [m](int stage, int i) { return static_cast<std::size_t>(stage) * m + static_cast<std::size_t>(i); };
  auto emit = [&plan](int rank, InstructionKind kind, int i, int peer, int buffer, int output, TensorShape shape) {
    plan.ranks[static_cast<std::size_t>(rank)].push_back({kind, i, rank, peer, buffer, output, shape});
  };
  auto take = [&pools](int rank) { return pools[static_cast<std::size_t>(rank)].take(); };
  auto release = [&](int rank, int i, int slot, TensorShape shape) {
    pools[static_cast<std::size_t>(rank)].release(slot);
    emit(rank, InstructionKind::free_buffer, i, -1, slot, -1, shape);
  };
  using K = InstructionKind;
  for (const detail::CommEvent& e : events) {
    const int j = e.stage, i = e.micro_batch;
    const TensorShape act = detail::activation_shape(problem, i);
    const bool forward = e.pass == Pass::forward;
    if (e.kind == 0) {
      const int peer = forward ? j + 1 : j - 1;
      std::vector<int>& received = forward ? act_in : grad_in;
      received[at(peer, i)] = take(peer);
      emit(j, forward ? K::send_act_start : K::send_grad_start, i, peer, (forward ? act_out : grad_out)[at(j, i)], -1,
           act);
      emit(peer, forward ? K::recv_act_start : K::recv_grad_start, i, j, received[at(peer, i)], -1, act);
    } else if (e.kind == 1) {
      const int peer = forward ? j + 1 : j - 1;
      emit(j, forward ? K::send_act_wait : K::send_grad_wait, i, peer, (forward ? act_out : grad_out)[at(j, i)], -1,
           act);
      if (!forward) release(j, i, grad_out[at(j, i)], act);  // the activation output is freed after the backward
    } else if (forward) {
      if (j == 0) {
        act_in[at(j, i)] = take(j);
        emit(j, K::load_input, i, -1, act_in[at(j, i)], -1, {act.rows, 1});
      } else {
        emit(j, K::recv_act_wait, i, j - 1, act_in[at(j, i)], -1, act);
      }
      if (j + 1 < c) act_out[at(j, i)] = take(j);
      emit(j, K::forward, i, -1, act_in[at(j, i)], act_out[at(j, i)], act);
    } else {
      if (j + 1 < c) emit(j, K::recv_grad_wait, i, j + 1, grad_in[at(j, i)], -1, act);
      if (j > 0) grad_out[at(j, i)] = take(j);
      emit(j, K::backward, i, -1, grad_in[at(j, i)], grad_out[at(j, i)], act);
      release(j, i, act_in[at(j, i)], j == 0 ? TensorShape{act.rows, 1} : act);
      if (j + 1 < c) {
        release(j, i, act_out[at(j, i)], act);
        release(j, i, grad_in[at(j, i)], act);
      }
    }
  }
  for (const detail::SlotPool& pool : pools) plan.buffer_slots = std::max(plan.buffer_slots, pool.peak());
  return plan;
}

// Checks every invariant of an execution plan against its problem: one rank per stage; every instruction's
// stage, peer, shape and slots; per micro-batch and rank, each expected instruction exactly once and in a
// valid order (input loaded or received before the forward, gradient received before the backward, Waits
// after their Starts, sends after the op that produces them); slots written only when free, read only
// while they hold the right tensor, freed after their last use and all free at the end; between every two
// ranks, the sends of one and the receives of the other in the same order and with the same shapes; the
// compute orders consistent and within the stages' memory limits. Raises invalid_plan.
inline void validate(const ExecutionPlan& plan, const Problem& problem) {
  auto check = [](bool condition, auto&&... parts) {
    if (!condition) throw invalid_plan(sluice::detail::concat("execution plan: ", parts...));
  };
  const int c = problem.stages;
  const auto m = problem.micro_batches.size();
  check(plan.stages == c && plan.ranks.size() == static_cast<std::size_t>(c), "has ", plan.ranks.size(),
        " ranks and says ", plan.stages, " stages, the problem has ", c);
  check(plan.micro_batches == static_cast<int>(m), "says ", plan.micro_batches, " micro-batches, the problem has ", m);
  std::size_t instructions = 0;
  for (const std::vector<Instruction>& list : plan.ranks) instructions += list.size();
  // Every slot is written by some instruction; the bound also keeps a hostile plan from sizing the slot table.
  check(plan.buffer_slots >= 0 && static_cast<std::size_t>(plan.buffer_slots) <= instructions, "buffer_slots ",
        plan.buffer_slots, " for ", instructions, " instructions");

  // What a slot holds: none, or a tensor (kind, micro-batch).
  enum Tensor : int { none, act_in, act_out, grad_in, grad_out };
  struct Held {
    Tensor tensor = none;
    int micro_batch = -1;
  };
  // Per (rank, micro-batch) progress bits.
  enum Step : unsigned { loaded = 1u, recv_act = 2u, recv_act_done = 4u, forwarded = 8u, send_act = 16u,
                         send_act_done = 32u, recv_grad = 64u, recv_grad_done = 128u, backwarded = 256u,
                         send_grad = 512u, send_grad_done = 1024u, freed_act_in = 2048u, freed_act_out = 4096u,
                         freed_grad_in = 8192u, freed_grad_out = 16384u };
  Order order;
  order.stages.resize(static_cast<std::size_t>(c));
  for (int rank = 0; rank < c; ++rank) {
    const bool first = rank == 0, last = rank + 1 == c;
    std::vector<Held> slots(static_cast<std::size_t>(std::max(plan.buffer_slots, 0)));
    std::vector<unsigned> done(m, 0);
    std::vector<int> slot_of_act_in(m, -1), slot_of_act_out(m, -1), slot_of_grad_in(m, -1), slot_of_grad_out(m, -1);
    const std::vector<Instruction>& list = plan.ranks[static_cast<std::size_t>(rank)];
    for (std::size_t k = 0; k < list.size(); ++k) {
      const Instruction& in = list[k];
      check(in.stage == rank, "rank ", rank, " instruction ", k, " is for stage ", in.stage);
      check(in.micro_batch >= 0 && static_cast<std::size_t>(in.micro_batch) < m, "rank ", rank, " instruction ", k,
            " names micro-batch ", in.micro_batch);
      const auto i = static_cast<std::size_t>(in.micro_batch);
      const TensorShape act = detail::activation_shape(problem, in.micro_batch);
      unsigned& d = done[i];
      const detail::InstructionAt here{rank, k, &in};
      auto once = [&](Step step) {
        check(!(d & step), here, " appears twice");
        d |= step;
      };
      auto need = [&](unsigned steps, const char* what) { check((d & steps) == steps, here, " comes before ", what); };
      auto slot_ok = [&](int slot) {
        check(slot >= 0 && slot < plan.buffer_slots, here, " uses slot ", slot, " outside [0, ", plan.buffer_slots,
              ")");
        return static_cast<std::size_t>(slot);
      };
      auto write = [&](int slot, Tensor tensor, std::vector<int>& slot_of) {
        Held& held = slots[slot_ok(slot)];
        check(held.tensor == none, here, " writes slot ", slot, ", which still holds a tensor of micro-batch ",
              held.micro_batch);
        held = {tensor, in.micro_batch};
        slot_of[i] = slot;
      };
      auto read = [&](int slot, Tensor tensor, const std::vector<int>& slot_of) {
        check(slot == slot_of[i] && slot >= 0 && slots[slot_ok(slot)].tensor == tensor &&
                  slots[static_cast<std::size_t>(slot)].micro_batch == in.micro_batch,
              here, " reads slot ", slot, ", which does not hold its tensor");
      };
      const bool is_comm = is_send(in.kind) || is_recv(in.kind);
      if (is_comm) {
        const bool toward_next = carries_activation(in.kind) == is_send(in.kind);
        check(in.peer == (toward_next ? rank + 1 : rank - 1) && in.peer >= 0 && in.peer < c, here, " has peer ",
              in.peer);
      } else {
        check(in.peer == -1, here, " has peer ", in.peer);
      }
      check(in.kind == InstructionKind::forward || in.kind == InstructionKind::backward || in.output == -1, here,
            " has output slot ", in.output);
      switch (in.kind) {
        case InstructionKind::load_input:
          check(first, here, " is not on the first stage");
          check(in.shape == TensorShape{act.rows, 1}, here, " has a wrong shape");
          once(loaded);
          write(in.buffer, act_in, slot_of_act_in);
          break;
        case InstructionKind::recv_act_start:
          check(!first, here, " is on the first stage");
          once(recv_act);
          write(in.buffer, act_in, slot_of_act_in);
          break;
        case InstructionKind::recv_act_wait:
          need(recv_act, "its start");
          once(recv_act_done);
          read(in.buffer, act_in, slot_of_act_in);
          break;
        case InstructionKind::forward:
          need(first ? loaded : recv_act_done, "its input");
          once(forwarded);
          read(in.buffer, act_in, slot_of_act_in);
          if (last) check(in.output == -1, here, " on the last stage has output slot ", in.output);
          else write(in.output, act_out, slot_of_act_out);
          order.stages[static_cast<std::size_t>(rank)].push_back({in.micro_batch, Pass::forward});
          break;
        case InstructionKind::send_act_start:
          check(!last, here, " is on the last stage");
          need(forwarded, "the forward");
          once(send_act);
          read(in.buffer, act_out, slot_of_act_out);
          break;
        case InstructionKind::send_act_wait:
          need(send_act, "its start");
          once(send_act_done);
          read(in.buffer, act_out, slot_of_act_out);
          break;
        case InstructionKind::recv_grad_start:
          check(!last, here, " is on the last stage");
          once(recv_grad);
          write(in.buffer, grad_in, slot_of_grad_in);
          break;
        case InstructionKind::recv_grad_wait:
          need(recv_grad, "its start");
          once(recv_grad_done);
          read(in.buffer, grad_in, slot_of_grad_in);
          break;
        case InstructionKind::backward:
          need(forwarded | (last ? 0u : recv_grad_done), "its forward and gradient");
          once(backwarded);
          read(slot_of_act_in[i], act_in, slot_of_act_in);
          if (last) check(in.buffer == -1, here, " on the last stage reads slot ", in.buffer);
          else {
            read(in.buffer, grad_in, slot_of_grad_in);
            read(slot_of_act_out[i], act_out, slot_of_act_out);
          }
          if (first) check(in.output == -1, here, " on the first stage has output slot ", in.output);
          else write(in.output, grad_out, slot_of_grad_out);
          order.stages[static_cast<std::size_t>(rank)].push_back({in.micro_batch, Pass::backward});
          break;
        case InstructionKind::send_grad_start:
          check(!first, here, " is on the first stage");
          need(backwarded, "the backward");
          once(send_grad);
          read(in.buffer, grad_out, slot_of_grad_out);
          break;
        case InstructionKind::send_grad_wait:
          need(send_grad, "its start");
          once(send_grad_done);
          read(in.buffer, grad_out, slot_of_grad_out);
          break;
        case InstructionKind::free_buffer: {
          const Held held = slots[slot_ok(in.buffer)];
          check(held.tensor != none && held.micro_batch == in.micro_batch, here, " frees slot ", in.buffer,
                ", which does not hold a tensor of its micro-batch");
          const bool ids = first && held.tensor == act_in;
          check(in.shape == (ids ? TensorShape{act.rows, 1} : act), here, " has a wrong shape");
          switch (held.tensor) {
            case act_in: need(backwarded, "the backward"); once(freed_act_in); break;
            case act_out: need(backwarded | send_act_done, "the backward and the send's wait"); once(freed_act_out); break;
            case grad_in: need(backwarded, "the backward"); once(freed_grad_in); break;
            default: need(send_grad_done, "the send's wait"); once(freed_grad_out); break;
          }
          slots[static_cast<std::size_t>(in.buffer)] = {};
          break;
        }
      }
      if (in.kind != InstructionKind::free_buffer && in.kind != InstructionKind::load_input)
        check(in.shape == act, here, " has shape ", in.shape.rows, "x", in.shape.cols, ", expected ", act.rows, "x",
              act.cols);
    }
    unsigned expected = forwarded | backwarded | freed_act_in;
    if (first) expected |= loaded;
    else expected |= recv_act | recv_act_done | send_grad | send_grad_done | freed_grad_out;
    if (!last) expected |= send_act | send_act_done | recv_grad | recv_grad_done | freed_act_out | freed_grad_in;
    for (std::size_t i = 0; i < m; ++i)
      check(done[i] == expected, "rank ", rank, " micro-batch ", i, " misses instructions (steps ", done[i], " of ",
            expected, ")");
  }
  // Pairing: between ranks j and j + 1, j's sends and receives match j + 1's receives and sends in order.
  for (int j = 0; j + 1 < c; ++j) {
    std::vector<const Instruction*> left, right;
    for (const Instruction& in : plan.ranks[static_cast<std::size_t>(j)])
      if (is_comm_start(in.kind) && in.peer == j + 1) left.push_back(&in);
    for (const Instruction& in : plan.ranks[static_cast<std::size_t>(j + 1)])
      if (is_comm_start(in.kind) && in.peer == j) right.push_back(&in);
    check(left.size() == right.size(), "ranks ", j, " and ", j + 1, " issue ", left.size(), " and ", right.size(),
          " operations to each other");
    for (std::size_t k = 0; k < left.size(); ++k) {
      const bool match = left[k]->micro_batch == right[k]->micro_batch && left[k]->shape == right[k]->shape &&
                         ((left[k]->kind == InstructionKind::send_act_start &&
                           right[k]->kind == InstructionKind::recv_act_start) ||
                          (left[k]->kind == InstructionKind::recv_grad_start &&
                           right[k]->kind == InstructionKind::send_grad_start));
      check(match, "operation ", k, " between ranks ", j, " and ", j + 1, " is ", name(left[k]->kind), " micro-batch ",
            left[k]->micro_batch, " on rank ", j, " but ", name(right[k]->kind), " micro-batch ", right[k]->micro_batch,
            " on rank ", j + 1);
    }
  }
  try {
    validate(order, static_cast<int>(m), c);
  } catch (const invalid_plan& error) {
    check(false, "compute ", error.what());
  }
  const std::vector<double> peaks = peak_memory(problem, order);
  for (std::size_t j = 0; j < peaks.size(); ++j)
    check(peaks[j] <= problem.memory_limit[j] * (1 + 1e-9), "stage ", j, " holds ", peaks[j],
          " activation bytes, above its limit ", problem.memory_limit[j]);
}

}  // namespace sluice::schedule
