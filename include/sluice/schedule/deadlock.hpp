#pragma once
// A deadlock checker: executes an ExecutionPlan under NCCL's point-to-point rules and reports whether it
// finishes. A Start puts its operation on the rank's queue for that peer and returns; the operations between
// two ranks run one at a time, in issue order, so the heads of the two queues must be a send and its matching
// receive; a Wait blocks its rank until its operation has completed. Compute, load and free instructions
// never block (their data dependencies are the plan validator's business).
#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/schedule/instructions.hpp"

namespace sluice::schedule {

enum class CommOutcome : std::uint8_t {
  completes,  // every rank reaches its end and every operation completes
  deadlock,   // ranks wait on each other in a cycle (two ranks whose queue heads cannot match form a cycle of two)
  mismatch,   // a send meets a receive of another tensor (NCCL would pair them and corrupt the data)
  unmatched,  // an operation that no peer ever matches
};

struct DeadlockReport {
  CommOutcome outcome = CommOutcome::completes;
  std::vector<int> cycle;  // for a deadlock: the ranks of the first wait-for cycle, each waiting on the next
  std::string message;
  [[nodiscard]] bool ok() const { return outcome == CommOutcome::completes; }
};

// Raises invalid_plan for plans it cannot execute at all: a peer outside the ranks or equal to the rank, the
// same Start issued twice, a Wait with no earlier Start.
inline DeadlockReport check_deadlock(const ExecutionPlan& plan) {
  const std::size_t ranks = plan.ranks.size();
  auto broken = [](auto&&... parts) { return invalid_plan(sluice::detail::concat("deadlock check: ", parts...)); };
  auto describe = [&plan](std::size_t rank, std::size_t index) {
    const Instruction& in = plan.ranks[rank][index];
    return sluice::detail::concat(name(in.kind), " micro-batch ", in.micro_batch, " on rank ", rank, " (peer ",
                                  in.peer, ")");
  };
  using Key = std::tuple<InstructionKind, int, int>;  // (start kind, micro-batch, peer)
  std::vector<std::map<Key, std::size_t>> issued(ranks);
  std::vector<std::vector<char>> completed(ranks);
  std::vector<std::deque<std::size_t>> queue(ranks * ranks);  // [rank * ranks + peer]: instruction indices
  std::vector<std::size_t> next(ranks, 0);
  for (std::size_t r = 0; r < ranks; ++r) completed[r].assign(plan.ranks[r].size(), 0);

  // The Start a rank's Wait (at its program counter) waits for; issued before it.
  auto awaited = [&](std::size_t r) {
    const Instruction& in = plan.ranks[r][next[r]];
    const auto it = issued[r].find({start_of(in.kind), in.micro_batch, in.peer});
    if (it == issued[r].end()) throw broken(describe(r, next[r]), " has no earlier start");
    return it->second;
  };
  auto is_send_op = [](const Instruction& in) { return is_send(in.kind); };

  DeadlockReport report;
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t r = 0; r < ranks; ++r) {
      while (next[r] < plan.ranks[r].size()) {
        const Instruction& in = plan.ranks[r][next[r]];
        if (is_comm_start(in.kind)) {
          if (in.peer < 0 || static_cast<std::size_t>(in.peer) >= ranks || static_cast<std::size_t>(in.peer) == r)
            throw broken(describe(r, next[r]), " has no valid peer");
          if (!issued[r].emplace(Key{in.kind, in.micro_batch, in.peer}, next[r]).second)
            throw broken(describe(r, next[r]), " is issued twice");
          queue[r * ranks + static_cast<std::size_t>(in.peer)].push_back(next[r]);
        } else if (is_comm_wait(in.kind) && !completed[r][awaited(r)]) {
          break;
        }
        ++next[r];
        progress = true;
      }
    }
    // Match queue heads pairwise until none match.
    for (std::size_t a = 0; a < ranks; ++a)
      for (std::size_t b = a + 1; b < ranks; ++b) {
        std::deque<std::size_t>& qa = queue[a * ranks + b];
        std::deque<std::size_t>& qb = queue[b * ranks + a];
        while (!qa.empty() && !qb.empty()) {
          const Instruction& x = plan.ranks[a][qa.front()];
          const Instruction& y = plan.ranks[b][qb.front()];
          if (is_send_op(x) == is_send_op(y)) break;  // two sends or two receives: stuck for good
          if (carries_activation(x.kind) != carries_activation(y.kind) || x.micro_batch != y.micro_batch ||
              !(x.shape == y.shape)) {
            report.outcome = CommOutcome::mismatch;
            report.message = sluice::detail::concat(describe(a, qa.front()), " meets ", describe(b, qb.front()));
            return report;
          }
          completed[a][qa.front()] = completed[b][qb.front()] = 1;
          qa.pop_front();
          qb.pop_front();
          progress = true;
        }
      }
  }

  bool finished = true;
  for (std::size_t r = 0; r < ranks; ++r) finished = finished && next[r] == plan.ranks[r].size();
  bool drained = true;
  for (const auto& q : queue) drained = drained && q.empty();
  if (finished && drained) return report;

  // Two queue heads that cannot match: each rank's operation waits for the other to post the counterpart.
  for (std::size_t a = 0; a < ranks; ++a)
    for (std::size_t b = a + 1; b < ranks; ++b) {
      const std::deque<std::size_t>& qa = queue[a * ranks + b];
      const std::deque<std::size_t>& qb = queue[b * ranks + a];
      if (qa.empty() || qb.empty()) continue;
      report.outcome = CommOutcome::deadlock;
      report.cycle = {static_cast<int>(a), static_cast<int>(b)};
      report.message = sluice::detail::concat(describe(a, qa.front()), " and ", describe(b, qb.front()),
                                              " wait for each other");
      return report;
    }
  // Otherwise follow wait-for edges from the first blocked rank: r waits for the peer of the queue holding its
  // awaited operation. The walk ends in a cycle, or at a rank that has finished without posting a match.
  std::size_t start = 0;
  while (start < ranks && next[start] == plan.ranks[start].size()) ++start;
  if (start == ranks) {
    for (std::size_t q = 0; q < queue.size(); ++q)
      if (!queue[q].empty()) {
        report.outcome = CommOutcome::unmatched;
        report.message = sluice::detail::concat(describe(q / ranks, queue[q].front()), " is never matched");
        return report;
      }
  }
  std::vector<int> position(ranks, -1);
  std::vector<int> path;
  for (std::size_t r = start;;) {
    if (next[r] == plan.ranks[r].size()) {
      const std::size_t waiting = static_cast<std::size_t>(path.back());
      report.outcome = CommOutcome::unmatched;
      report.message = sluice::detail::concat(describe(waiting, next[waiting]), " waits for rank ", r,
                                              ", which has finished without matching it");
      return report;
    }
    if (position[r] >= 0) {
      report.outcome = CommOutcome::deadlock;
      report.cycle.assign(path.begin() + position[r], path.end());
      report.message = "ranks wait on each other:";
      for (const int rank : report.cycle)
        report.message += sluice::detail::concat(" ", describe(static_cast<std::size_t>(rank), next[static_cast<std::size_t>(rank)]), ";");
      return report;
    }
    position[r] = static_cast<int>(path.size());
    path.push_back(static_cast<int>(r));
    r = static_cast<std::size_t>(plan.ranks[r][next[r]].peer);
  }
}

}  // namespace sluice::schedule
