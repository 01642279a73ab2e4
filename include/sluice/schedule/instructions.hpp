#pragma once
// The vocabulary of pipeline scheduling (DynaPipe §5–§6): the problem one pipeline solves (per-micro-batch
// stage costs, memory limits, links), the per-stage op orders a schedule produces, and the per-rank
// instruction lists (ExecutionPlan) an executor interprets. Rank j runs stage j.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/cost/links.hpp"

namespace sluice::schedule {

// One micro-batch as the scheduler sees it: per-stage forward and backward seconds, the activation bytes a
// stage keeps from the start of its forward to the end of its backward, and the rows of the tensor that
// crosses a stage boundary (micro-batch size × padded length, in tokens).
struct MicroBatchCost {
  std::vector<double> forward;
  std::vector<double> backward;
  std::vector<double> activation;
  std::int64_t tokens = 0;
  friend bool operator==(const MicroBatchCost&, const MicroBatchCost&) = default;
};

// One pipeline's scheduling problem. memory_limit[j] is the activation budget of stage j in bytes (+inf for
// none); a boundary tensor is tokens × hidden elements of element_bytes each.
struct Problem {
  int stages = 0;
  std::vector<MicroBatchCost> micro_batches;
  std::vector<double> memory_limit;
  std::int64_t hidden = 1;
  int element_bytes = 2;
  cost::Link link;  // between neighbouring stages; free by default
  friend bool operator==(const Problem&, const Problem&) = default;
};

enum class Pass : std::uint8_t { forward, backward };

inline constexpr NameTable<Pass, 2> pass_names{{{Pass::forward, "forward"}, {Pass::backward, "backward"}}};

constexpr std::string_view name(Pass pass) { return name_in(pass_names, pass); }

// One compute op of a stage's order.
struct Op {
  int micro_batch = 0;
  Pass pass = Pass::forward;
  friend bool operator==(const Op&, const Op&) = default;
};

// O_j of every stage j: the order in which stage j runs its forward and backward ops.
struct Order {
  std::vector<std::vector<Op>> stages;
  friend bool operator==(const Order&, const Order&) = default;
};

// Rows × columns of a tensor: activations and gradients are tokens × hidden; loaded input ids tokens × 1.
struct TensorShape {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  friend bool operator==(const TensorShape&, const TensorShape&) = default;
};

// Starts launch on the rank's communication stream for that peer and return at once; Waits make the compute
// stream wait for the transfer to finish.
enum class InstructionKind : std::uint8_t {
  load_input,  // write micro-batch input ids into `buffer` (first stage only)
  forward,   // read `buffer` (input activation or ids), write `output` (activation for the next stage; -1 on the last)
  backward,  // read `buffer` (gradient from the next stage; -1 on the last), write `output` (gradient for the
             // previous stage; -1 on the first); also reads the micro-batch's forward input and output slots
  free_buffer,     // release slot `buffer`
  send_act_start,  // send `buffer` to `peer` (the next stage)
  send_act_wait,
  recv_act_start,  // receive into `buffer` from `peer` (the previous stage)
  recv_act_wait,
  send_grad_start,  // send `buffer` to `peer` (the previous stage)
  send_grad_wait,
  recv_grad_start,  // receive into `buffer` from `peer` (the next stage)
  recv_grad_wait,
};

inline constexpr std::string_view instruction_names[] = {
    "load_input",     "forward",       "backward",        "free_buffer",    "send_act_start",  "send_act_wait",
    "recv_act_start", "recv_act_wait", "send_grad_start", "send_grad_wait", "recv_grad_start", "recv_grad_wait"};

inline constexpr std::string_view name(InstructionKind kind) {
  return instruction_names[static_cast<std::size_t>(kind)];
}

// One instruction of a rank. `shape` is the shape of the tensor the instruction moves, computes or frees;
// buffer ids are slots in [0, ExecutionPlan::buffer_slots), reused after free_buffer.
struct Instruction {
  InstructionKind kind = InstructionKind::forward;
  int micro_batch = 0;
  int stage = 0;
  int peer = -1;
  int buffer = -1;
  int output = -1;
  TensorShape shape;
  friend bool operator==(const Instruction&, const Instruction&) = default;
};

// Per-rank instruction lists; rank j runs stage j. buffer_slots is the most slots any rank uses at once.
struct ExecutionPlan {
  int stages = 0;
  int micro_batches = 0;
  int buffer_slots = 0;
  std::vector<std::vector<Instruction>> ranks;
  friend bool operator==(const ExecutionPlan&, const ExecutionPlan&) = default;
};

inline constexpr bool is_send(InstructionKind kind) {
  return kind == InstructionKind::send_act_start || kind == InstructionKind::send_act_wait ||
         kind == InstructionKind::send_grad_start || kind == InstructionKind::send_grad_wait;
}
inline constexpr bool is_recv(InstructionKind kind) {
  return kind == InstructionKind::recv_act_start || kind == InstructionKind::recv_act_wait ||
         kind == InstructionKind::recv_grad_start || kind == InstructionKind::recv_grad_wait;
}
inline constexpr bool is_comm_start(InstructionKind kind) {
  return kind == InstructionKind::send_act_start || kind == InstructionKind::recv_act_start ||
         kind == InstructionKind::send_grad_start || kind == InstructionKind::recv_grad_start;
}
inline constexpr bool is_comm_wait(InstructionKind kind) {
  return kind == InstructionKind::send_act_wait || kind == InstructionKind::recv_act_wait ||
         kind == InstructionKind::send_grad_wait || kind == InstructionKind::recv_grad_wait;
}
inline constexpr bool carries_activation(InstructionKind kind) {
  return kind == InstructionKind::send_act_start || kind == InstructionKind::send_act_wait ||
         kind == InstructionKind::recv_act_start || kind == InstructionKind::recv_act_wait;
}
// The Start that a Wait completes.
inline constexpr InstructionKind start_of(InstructionKind wait) {
  return static_cast<InstructionKind>(static_cast<int>(wait) - 1);
}

// The shortest op a problem may hold, relative to the total of its ops and transfers (require_problem): 2^-40,
// 4096 ulps of any time of its simulation.
inline constexpr double time_resolution = 0x1p-40;

// Seconds to move one boundary tensor of micro-batch i.
inline double transfer_time(const Problem& problem, std::size_t i) {
  const double bytes = static_cast<double>(problem.micro_batches[i].tokens) * static_cast<double>(problem.hidden) *
                       problem.element_bytes;
  return problem.link.latency + bytes / problem.link.bandwidth;
}

// Raises invalid_input naming the first field that breaks a precondition.
inline void require_problem(const Problem& problem) {
  using sluice::require;
  require(problem.stages >= 1, "schedule: stages must be >= 1, got ", problem.stages);
  require(!problem.micro_batches.empty(), "schedule: no micro-batches");
  // Micro-batch ids are ints in orders and instructions.
  require(problem.micro_batches.size() <= 1'000'000, "schedule: ", problem.micro_batches.size(),
          " micro-batches (at most 1000000)");
  const auto stages = static_cast<std::size_t>(problem.stages);
  require(problem.memory_limit.size() == stages, "schedule: memory_limit has ", problem.memory_limit.size(),
          " entries for ", problem.stages, " stages");
  for (std::size_t j = 0; j < stages; ++j)
    require(problem.memory_limit[j] > 0 && !std::isnan(problem.memory_limit[j]), "schedule: memory_limit[", j,
            "] must be > 0, got ", problem.memory_limit[j]);
  require(problem.hidden >= 1, "schedule: hidden must be >= 1, got ", problem.hidden);
  require(problem.element_bytes >= 1, "schedule: element_bytes must be >= 1, got ", problem.element_bytes);
  cost::require_valid(problem.link, "schedule: link");
  for (std::size_t i = 0; i < problem.micro_batches.size(); ++i) {
    const MicroBatchCost& mb = problem.micro_batches[i];
    require(mb.forward.size() == stages && mb.backward.size() == stages && mb.activation.size() == stages,
            "schedule: micro-batch ", i, " has ", mb.forward.size(), " forward, ", mb.backward.size(), " backward and ",
            mb.activation.size(), " activation entries for ", problem.stages, " stages");
    require(mb.tokens >= 1, "schedule: micro-batch ", i, " tokens must be >= 1, got ", mb.tokens);
    for (std::size_t j = 0; j < stages; ++j) {
      require(std::isfinite(mb.forward[j]) && mb.forward[j] > 0, "schedule: micro-batch ", i, " forward[", j,
              "] must be finite and > 0, got ", mb.forward[j]);
      require(std::isfinite(mb.backward[j]) && mb.backward[j] > 0, "schedule: micro-batch ", i, " backward[", j,
              "] must be finite and > 0, got ", mb.backward[j]);
      require(std::isfinite(mb.activation[j]) && mb.activation[j] >= 0, "schedule: micro-batch ", i, " activation[", j,
              "] must be finite and >= 0, got ", mb.activation[j]);
    }
  }
  // No time in a simulation exceeds the sum of every op and transfer (a timestamp is the end of a chain of
  // them). An op shorter than time_resolution of that sum could vanish in floating point where it starts:
  // its end would equal its start and events that must follow it could sort before it.
  double total = 0;
  for (std::size_t i = 0; i < problem.micro_batches.size(); ++i) {
    const MicroBatchCost& mb = problem.micro_batches[i];
    for (std::size_t j = 0; j < stages; ++j) total += mb.forward[j] + mb.backward[j];
    total += 2.0 * static_cast<double>(stages - 1) * transfer_time(problem, i);
  }
  require(std::isfinite(total), "schedule: the ops and transfers of the ", problem.micro_batches.size(),
          " micro-batches take ", total, " s in all (overflow)");
  for (std::size_t i = 0; i < problem.micro_batches.size(); ++i) {
    const MicroBatchCost& mb = problem.micro_batches[i];
    for (std::size_t j = 0; j < stages; ++j) {
      const bool forward = mb.forward[j] <= mb.backward[j];
      const double op = forward ? mb.forward[j] : mb.backward[j];
      if (op < time_resolution * total)
        sluice::fail("schedule: micro-batch ", i, forward ? " forward[" : " backward[", j, "] = ", sluice::shortest(op),
                     " s is below 2^-40 of the ", sluice::shortest(total),
                     " s all ops and transfers take: a simulated timeline cannot resolve it");
    }
  }
}

// Checks that every stage runs each micro-batch's forward and backward exactly once, forward first, and that
// the orders cannot wait on each other forever (replayed as the simulator replays them). Raises invalid_plan.
inline void validate(const Order& order, int micro_batches, int stages) {
  const PlanCheck check("order: ");
  check(order.stages.size() == static_cast<std::size_t>(stages), "has ", order.stages.size(), " stages, expected ",
        stages);
  const auto m = static_cast<std::size_t>(micro_batches);
  const auto c = static_cast<std::size_t>(stages);
  // done[pass][j][i]: op (i, pass) of stage j has run.
  std::vector<std::vector<char>> done_f(c, std::vector<char>(m, 0)), done_b(c, std::vector<char>(m, 0));
  for (std::size_t j = 0; j < c; ++j) {
    check(order.stages[j].size() == 2 * m, "stage ", j, " has ", order.stages[j].size(), " ops, expected ", 2 * m);
    std::vector<char> seen_f(m, 0), seen_b(m, 0);
    for (const Op& op : order.stages[j]) {
      check(op.micro_batch >= 0 && static_cast<std::size_t>(op.micro_batch) < m, "stage ", j, " has micro-batch ",
            op.micro_batch, " outside [0, ", m, ")");
      const auto i = static_cast<std::size_t>(op.micro_batch);
      if (op.pass == Pass::forward) {
        check(!seen_f[i], "stage ", j, " runs the forward of micro-batch ", i, " twice");
        seen_f[i] = 1;
      } else {
        check(seen_f[i], "stage ", j, " runs the backward of micro-batch ", i, " before its forward");
        check(!seen_b[i], "stage ", j, " runs the backward of micro-batch ", i, " twice");
        seen_b[i] = 1;
      }
    }
  }
  // Replay: an op may run once its input exists; a replay that stops early means the orders wait on each other.
  std::vector<std::size_t> next(c, 0);
  std::size_t remaining = 2 * m * c;
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t j = 0; j < c; ++j) {
      while (next[j] < order.stages[j].size()) {
        const Op& op = order.stages[j][next[j]];
        const auto i = static_cast<std::size_t>(op.micro_batch);
        const bool ready = op.pass == Pass::forward ? (j == 0 || done_f[j - 1][i])
                                                    : (j + 1 == c ? done_f[j][i] : done_b[j + 1][i] != 0);
        if (!ready) break;
        (op.pass == Pass::forward ? done_f : done_b)[j][i] = 1;
        ++next[j];
        --remaining;
        progress = true;
      }
    }
  }
  check(remaining == 0, "the stage orders wait on each other forever (", remaining, " ops never run)");
}

}  // namespace sluice::schedule
