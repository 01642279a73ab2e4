#pragma once
// Event-driven simulation of stage orders (DynaPipe §5, "cycle → time"): each stage runs its order one op at
// a time and starts an op as soon as the stage is free and the op's input has arrived. A finished op's output
// goes to the neighbouring stage over its link (latency + bytes / bandwidth); each direction of a link
// carries one transfer at a time, in the order the sender produced them. Activation memory is taken at a
// forward's start and given back at its backward's end.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/schedule/instructions.hpp"

namespace sluice::schedule {

struct OpTiming {
  int micro_batch = 0;
  Pass pass = Pass::forward;
  double start = 0;
  double end = 0;
  // The op's output on the link to its neighbour: transfer start and arrival; both equal `end` when the op
  // sends nothing (forward on the last stage, backward on the first).
  double send_start = 0;
  double arrival = 0;
  friend bool operator==(const OpTiming&, const OpTiming&) = default;
};

struct Simulation {
  std::vector<std::vector<OpTiming>> stages;  // in each stage's order
  double makespan = 0;
  std::vector<double> peak_memory;  // activation bytes per stage
  std::vector<double> idle;         // makespan minus the stage's compute seconds
  friend bool operator==(const Simulation&, const Simulation&) = default;
};

// Peak activation bytes of every stage for an order (the simulator's accounting, without timing).
inline std::vector<double> peak_memory(const Problem& problem, const Order& order) {
  std::vector<double> peaks(order.stages.size(), 0.0);
  for (std::size_t j = 0; j < order.stages.size(); ++j) {
    double held = 0;
    for (const Op& op : order.stages[j]) {
      const double bytes = problem.micro_batches[static_cast<std::size_t>(op.micro_batch)].activation[j];
      held += op.pass == Pass::forward ? bytes : -bytes;
      peaks[j] = std::max(peaks[j], held);
    }
  }
  return peaks;
}

// Raises invalid_input for a bad problem and invalid_plan for an order that validate(Order) rejects.
inline Simulation simulate(const Problem& problem, const Order& order) {
  require_problem(problem);
  const int m_int = static_cast<int>(problem.micro_batches.size());
  validate(order, m_int, problem.stages);
  const auto m = problem.micro_batches.size();
  const auto c = static_cast<std::size_t>(problem.stages);
  constexpr double unset = -1;
  // arrival[j * m + i]: when the output of op (i, pass) of stage j is available to its consumer.
  std::vector<double> forward_arrival(c * m, unset), backward_arrival(c * m, unset);
  std::vector<double> transfer(m);
  for (std::size_t i = 0; i < m; ++i) transfer[i] = transfer_time(problem, i);
  std::vector<double> down_free(c, 0.0), up_free(c, 0.0), stage_free(c, 0.0);
  std::vector<std::size_t> next(c, 0);

  Simulation result;
  result.stages.resize(c);
  for (std::size_t j = 0; j < c; ++j) result.stages[j].reserve(2 * m);
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t j = 0; j < c; ++j) {
      const std::vector<Op>& ops = order.stages[j];
      while (next[j] < ops.size()) {
        const Op& op = ops[next[j]];
        const auto i = static_cast<std::size_t>(op.micro_batch);
        const MicroBatchCost& mb = problem.micro_batches[i];
        double ready = 0;
        if (op.pass == Pass::forward) {
          if (j > 0) ready = forward_arrival[(j - 1) * m + i];
        } else {
          ready = j + 1 == c ? forward_arrival[j * m + i] : backward_arrival[(j + 1) * m + i];
        }
        if (ready == unset) break;
        OpTiming timing{op.micro_batch, op.pass, std::max(stage_free[j], ready), 0, 0, 0};
        timing.end = timing.start + (op.pass == Pass::forward ? mb.forward[j] : mb.backward[j]);
        timing.send_start = timing.arrival = timing.end;
        if (op.pass == Pass::forward && j + 1 < c) {
          timing.send_start = std::max(timing.end, down_free[j]);
          timing.arrival = down_free[j] = timing.send_start + transfer[i];
        } else if (op.pass == Pass::backward && j > 0) {
          timing.send_start = std::max(timing.end, up_free[j]);
          timing.arrival = up_free[j] = timing.send_start + transfer[i];
        }
        (op.pass == Pass::forward ? forward_arrival : backward_arrival)[j * m + i] = timing.arrival;
        stage_free[j] = timing.end;
        result.stages[j].push_back(timing);
        ++next[j];
        progress = true;
      }
    }
  }
  for (std::size_t j = 0; j < c; ++j) result.makespan = std::max(result.makespan, stage_free[j]);
  result.peak_memory = peak_memory(problem, order);
  result.idle.resize(c);
  for (std::size_t j = 0; j < c; ++j) {
    double busy = 0;
    for (const MicroBatchCost& mb : problem.micro_batches) busy += mb.forward[j] + mb.backward[j];
    result.idle[j] = result.makespan - busy;
  }
  return result;
}

// Checks a simulation against its problem and order: every op once, in the order given, for its cost; no
// op before its stage is free or its input has arrived; transfers one at a time per link direction; the
// makespan, peaks and idle times as recomputed. Raises invalid_plan.
inline void validate(const Simulation& simulation, const Problem& problem, const Order& order) {
  const PlanCheck check("simulation: ");
  validate(order, static_cast<int>(problem.micro_batches.size()), problem.stages);
  const auto c = static_cast<std::size_t>(problem.stages);
  const auto m = problem.micro_batches.size();
  constexpr double tolerance = 1e-9;
  // A duration recomputed as end − start carries the rounding of the timestamps, not of the duration: it is
  // compared relative to the larger of them (transfers of seconds next to ops of milliseconds are common).
  auto close_at = [](double x, double y, double scale) {
    return std::abs(x - y) <= tolerance * std::max({std::abs(x), std::abs(y), std::abs(scale)});
  };
  check(simulation.stages.size() == c, "has ", simulation.stages.size(), " stages, expected ", c);
  std::vector<double> forward_arrival(c * m), backward_arrival(c * m);
  for (std::size_t j = 0; j < c; ++j) {
    check(simulation.stages[j].size() == order.stages[j].size(), "stage ", j, " has ", simulation.stages[j].size(),
          " ops, its order ", order.stages[j].size());
    for (std::size_t k = 0; k < order.stages[j].size(); ++k) {
      const OpTiming& t = simulation.stages[j][k];
      check(t.micro_batch == order.stages[j][k].micro_batch && t.pass == order.stages[j][k].pass, "stage ", j, " op ",
            k, " is not the order's op");
      const MicroBatchCost& mb = problem.micro_batches[static_cast<std::size_t>(t.micro_batch)];
      const double cost = t.pass == Pass::forward ? mb.forward[j] : mb.backward[j];
      check(t.start >= 0 && close_at(t.end - t.start, cost, t.end), "stage ", j, " op ", k, " runs ", t.end - t.start,
            " s, its cost is ", cost);
      check(k == 0 || t.start >= simulation.stages[j][k - 1].end * (1 - tolerance), "stage ", j, " op ", k,
            " starts before the previous op ends");
      const bool sends = t.pass == Pass::forward ? j + 1 < c : j > 0;
      const double expected_arrival = t.send_start + transfer_time(problem, static_cast<std::size_t>(t.micro_batch));
      check(sends ? (t.send_start >= t.end && close_at(t.arrival, expected_arrival, t.send_start))
                  : (t.send_start == t.end && t.arrival == t.end),
            "stage ", j, " op ", k, " has transfer [", t.send_start, ", ", t.arrival, "]");
      (t.pass == Pass::forward ? forward_arrival : backward_arrival)[j * m + static_cast<std::size_t>(t.micro_batch)] =
          t.arrival;
    }
  }
  // Dependencies, and one transfer at a time per link direction (in the sender's order).
  double makespan = 0;
  for (std::size_t j = 0; j < c; ++j) {
    double down = 0, up = 0;
    for (const OpTiming& t : simulation.stages[j]) {
      const auto i = static_cast<std::size_t>(t.micro_batch);
      const double ready = t.pass == Pass::forward
                               ? (j == 0 ? 0.0 : forward_arrival[(j - 1) * m + i])
                               : (j + 1 == c ? forward_arrival[j * m + i] : backward_arrival[(j + 1) * m + i]);
      check(t.start >= ready * (1 - tolerance), "stage ", j, " starts ", name(t.pass), " of micro-batch ", i, " at ",
            t.start, " before its input arrives at ", ready);
      if (t.send_start != t.end || t.arrival != t.end) {
        double& link = t.pass == Pass::forward ? down : up;
        check(t.send_start >= link * (1 - tolerance), "stage ", j, " micro-batch ", i,
              " transfer starts while its link is busy");
        link = t.arrival;
      }
      makespan = std::max(makespan, t.end);
    }
  }
  check(nearly_equal(makespan, simulation.makespan), "makespan ", simulation.makespan, ", its ops end at ", makespan);
  const std::vector<double> peaks = peak_memory(problem, order);
  check(simulation.peak_memory.size() == c && simulation.idle.size() == c, "peak_memory or idle has the wrong size");
  for (std::size_t j = 0; j < c; ++j) {
    check(nearly_equal(peaks[j], simulation.peak_memory[j]), "stage ", j, " peak ", simulation.peak_memory[j],
          " bytes, its order holds ", peaks[j]);
    double busy = 0;
    for (const MicroBatchCost& mb : problem.micro_batches) busy += mb.forward[j] + mb.backward[j];
    check(nearly_equal(simulation.idle[j], makespan - busy), "stage ", j, " idle ", simulation.idle[j], " s, expected ",
          makespan - busy);
  }
}

}  // namespace sluice::schedule
