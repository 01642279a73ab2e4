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
#include <vector>

#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/interpreter.hpp"
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
    if (a.time != b.time) return a.time < b.time;
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.stage != b.stage) return a.stage < b.stage;
    if (a.pass != b.pass) return a.pass < b.pass;
    return a.micro_batch < b.micro_batch;
  }
};

// Lowest-free-slot allocation per rank.
class SlotPool {
public:
  int take() {
    const auto it = std::find(used_.begin(), used_.end(), char{0});
    const auto slot = static_cast<std::size_t>(it - used_.begin());
    if (it == used_.end())
      used_.push_back(1);
    else
      *it = 1;
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

// Checks every invariant of an execution plan against its problem: one rank per stage; every instruction's shape
// (the micro-batch's boundary tensor, or its input ids); then a dry run of the interpreter (interpreter.hpp), which
// checks stages, peers, slots, each micro-batch's loads, receives, compute, sends and frees, and pairs the sends
// and receives as NCCL runs them until every rank finishes; finally the compute orders consistent and within the
// stages' memory limits. Raises invalid_plan.
inline void validate(const ExecutionPlan& plan, const Problem& problem) {
  const PlanCheck check("execution plan: ");
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
  for (int rank = 0; rank < c; ++rank) {
    const std::vector<Instruction>& list = plan.ranks[static_cast<std::size_t>(rank)];
    for (std::size_t k = 0; k < list.size(); ++k) {
      const Instruction& in = list[k];
      check(in.micro_batch >= 0 && static_cast<std::size_t>(in.micro_batch) < m, "rank ", rank, " instruction ", k,
            " names micro-batch ", in.micro_batch);
      const TensorShape act = detail::activation_shape(problem, in.micro_batch);
      const TensorShape ids{act.rows, 1};
      // A free's shape is the tensor's it frees, which the dry run compares.
      const bool shaped = in.kind == InstructionKind::load_input    ? in.shape == ids
                          : in.kind == InstructionKind::free_buffer ? in.shape == act || (rank == 0 && in.shape == ids)
                                                                    : in.shape == act;
      check(shaped, detail::InstructionAt{rank, k, &in}, " has shape ", in.shape.rows, "x", in.shape.cols,
            ", expected ", act.rows, "x", in.kind == InstructionKind::load_input ? 1 : act.cols);
    }
  }
  dry_run({&plan});
  Order order;
  order.stages.resize(static_cast<std::size_t>(c));
  for (int rank = 0; rank < c; ++rank)
    for (const Instruction& in : plan.ranks[static_cast<std::size_t>(rank)])
      if (in.kind == InstructionKind::forward || in.kind == InstructionKind::backward)
        order.stages[static_cast<std::size_t>(rank)].push_back(
            {in.micro_batch, in.kind == InstructionKind::forward ? Pass::forward : Pass::backward});
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
