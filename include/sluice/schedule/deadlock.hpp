#pragma once
// The deadlock check: a dry run of the interpreter (interpreter.hpp) with only its communication rules, on any
// ExecutionPlan. A Start puts its operation on the rank's queue for that peer and returns; the operations between
// two ranks run one at a time, in issue order, so the heads of the two queues must be a send and its matching
// receive; a Wait blocks its rank until its operation has completed. Compute, load and free instructions never
// block (their data dependencies are the plan validator's business).
#include <string>
#include <vector>

#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/interpreter.hpp"

namespace sluice::schedule {

struct DeadlockReport {
  CommOutcome outcome = CommOutcome::completes;
  std::vector<int> cycle;  // for a deadlock: the ranks of the first wait-for cycle, each waiting on the next
  std::string message;
  [[nodiscard]] bool ok() const { return outcome == CommOutcome::completes; }
};

// Raises invalid_plan for plans it cannot execute at all: a micro-batch outside the plan's, a peer outside the ranks
// or equal to the rank, the same Start (kind and micro-batch) issued twice, a Wait with no earlier Start.
inline DeadlockReport check_deadlock(const ExecutionPlan& plan) {
  try {
    dry_run({&plan}, {.context = "deadlock check", .data_flow = false});
  } catch (const comm_failure& failure) {
    return {.outcome = failure.outcome, .cycle = failure.cycle, .message = failure.what()};
  }
  return {};
}

}  // namespace sluice::schedule
