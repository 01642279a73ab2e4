#pragma once
// The per-pipeline scheduler (DynaPipe §5): searches injection orders for the adaptive cyclic schedule and for
// 1F1B, simulates every candidate, keeps the fastest that fits memory, and plans its communication.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/span.hpp"
#include "sluice/schedule/comm.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/orders.hpp"
#include "sluice/schedule/simulate.hpp"

namespace sluice::schedule {

enum class ScheduleKind : std::uint8_t { cyclic, one_f_one_b };

inline constexpr NameTable<ScheduleKind, 2> schedule_kind_names{
    {{ScheduleKind::cyclic, "cyclic"}, {ScheduleKind::one_f_one_b, "1f1b"}}};

constexpr std::string_view name(ScheduleKind kind) { return name_in(schedule_kind_names, kind); }

// Raises invalid_input naming `what` unless `text` is cyclic or 1f1b.
inline ScheduleKind schedule_kind_from(std::string_view text, std::string_view what = "schedule kind") {
  return value_in(schedule_kind_names, text, what);
}

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::cyclic;
  std::uint64_t seed = 1;
  int clusters = 0;  // injection-order groups; 0: 3 when there are more than 20 micro-batches, else 4
  friend bool operator==(const ScheduleOptions&, const ScheduleOptions&) = default;
};

// Raises invalid_input unless clusters is in [0, 6] (6! injection orders at most).
inline void require_valid(const ScheduleOptions& options) {
  sluice::require(options.clusters >= 0 && options.clusters <= 6, "schedule: clusters must be in [0, 6], got ",
                  options.clusters);
}

struct PipelineSchedule {
  ScheduleKind kind = ScheduleKind::cyclic;  // the kind of the order kept (cyclic may keep a 1F1B order)
  bool memory_aware = false;                 // a cyclic order built under the memory limits (Alg. 1's check)
  std::vector<int> injection;
  Order order;
  Simulation simulation;
  ExecutionPlan plan;
  int candidates = 0;  // orders simulated
  friend bool operator==(const PipelineSchedule&, const PipelineSchedule&) = default;
};

// Seeded k-means (k-means++ seeding, Lloyd iterations to a fixed point) on [first-stage forward, last-stage
// forward, first-stage backward, last-stage backward] seconds. Returns the groups, each in input order, ordered
// by their first member; empty groups are dropped.
inline std::vector<std::vector<int>> cluster_micro_batches(const Problem& problem, int k, std::uint64_t seed) {
  require_problem(problem);
  sluice::require(k >= 1, "schedule: clusters must be >= 1, got ", k);
  const std::size_t m = problem.micro_batches.size();
  const std::size_t last = static_cast<std::size_t>(problem.stages) - 1;
  constexpr std::size_t dims = 4;
  std::vector<double> points(m * dims);
  for (std::size_t i = 0; i < m; ++i) {
    const MicroBatchCost& mb = problem.micro_batches[i];
    const double row[dims] = {mb.forward[0], mb.forward[last], mb.backward[0], mb.backward[last]};
    std::copy(row, row + dims, points.begin() + static_cast<std::ptrdiff_t>(i * dims));
  }
  auto distance = [&](std::size_t i, const double* centre) {
    double sum = 0;
    for (std::size_t d = 0; d < dims; ++d)
      sum += (points[i * dims + d] - centre[d]) * (points[i * dims + d] - centre[d]);
    return sum;
  };
  const std::size_t most = std::min(static_cast<std::size_t>(k), m);
  Rng rng(seed);
  std::vector<double> centres;
  std::vector<double> nearest(m, std::numeric_limits<double>::infinity());
  std::size_t chosen = static_cast<std::size_t>(rng.below(m));
  for (std::size_t g = 0; g < most; ++g) {
    centres.insert(centres.end(), points.begin() + static_cast<std::ptrdiff_t>(chosen * dims),
                   points.begin() + static_cast<std::ptrdiff_t>((chosen + 1) * dims));
    double total = 0;
    for (std::size_t i = 0; i < m; ++i) {
      nearest[i] = std::min(nearest[i], distance(i, &centres[g * dims]));
      total += nearest[i];
    }
    if (total <= 0) break;  // every point sits on a centre: more groups would be empty
    double pick = rng.uniform() * total;
    chosen = m - 1;
    for (std::size_t i = 0; i < m; ++i) {
      if (pick < nearest[i]) {
        chosen = i;
        break;
      }
      pick -= nearest[i];
    }
  }
  const std::size_t groups = centres.size() / dims;
  std::vector<std::size_t> label(m, 0);
  std::vector<std::size_t> count(groups);
  // Lloyd's iterations to a fixed point; the cap only guards against float ties that alternate forever.
  for (int iteration = 0; iteration < 1000; ++iteration) {
    bool changed = iteration == 0;
    for (std::size_t i = 0; i < m; ++i) {
      std::size_t best = 0;
      for (std::size_t g = 1; g < groups; ++g)
        if (distance(i, &centres[g * dims]) < distance(i, &centres[best * dims])) best = g;
      changed = changed || best != label[i];
      label[i] = best;
    }
    if (!changed) break;
    std::fill(centres.begin(), centres.end(), 0.0);
    std::fill(count.begin(), count.end(), 0);
    for (std::size_t i = 0; i < m; ++i) {
      ++count[label[i]];
      for (std::size_t d = 0; d < dims; ++d) centres[label[i] * dims + d] += points[i * dims + d];
    }
    for (std::size_t g = 0; g < groups; ++g)
      for (std::size_t d = 0; d < dims; ++d)
        if (count[g] > 0) centres[g * dims + d] /= static_cast<double>(count[g]);
  }
  std::vector<std::vector<int>> result;
  std::vector<int> slot(groups, -1);
  for (std::size_t i = 0; i < m; ++i) {
    if (slot[label[i]] < 0) {
      slot[label[i]] = static_cast<int>(result.size());
      result.emplace_back();
    }
    result[static_cast<std::size_t>(slot[label[i]])].push_back(static_cast<int>(i));
  }
  return result;
}

// The injection orders tried: the input order, then every order of the k groups (members in input order), or
// every permutation of the micro-batches when there are at most k of them. Duplicates are dropped.
inline std::vector<std::vector<int>> injection_candidates(const Problem& problem, const ScheduleOptions& options) {
  require_problem(problem);
  require_valid(options);
  const std::size_t m = problem.micro_batches.size();
  const int k = options.clusters > 0 ? options.clusters : (m > 20 ? 3 : 4);
  std::vector<std::vector<int>> candidates{identity_injection(m)};
  auto add = [&candidates](std::vector<int> injection) {
    if (std::find(candidates.begin(), candidates.end(), injection) == candidates.end())
      candidates.push_back(std::move(injection));
  };
  if (m <= static_cast<std::size_t>(k)) {
    std::vector<int> permutation = identity_injection(m);
    while (std::next_permutation(permutation.begin(), permutation.end())) add(permutation);
    return candidates;
  }
  const std::vector<std::vector<int>> groups = cluster_micro_batches(problem, k, options.seed);
  std::vector<int> group_order = identity_injection(groups.size());
  do {
    std::vector<int> injection;
    injection.reserve(m);
    for (const int g : group_order)
      injection.insert(injection.end(), groups[static_cast<std::size_t>(g)].begin(),
                       groups[static_cast<std::size_t>(g)].end());
    add(std::move(injection));
  } while (std::next_permutation(group_order.begin(), group_order.end()));
  return candidates;
}

namespace detail {

inline bool fits(const Simulation& simulation, const Problem& problem) {
  for (std::size_t j = 0; j < simulation.peak_memory.size(); ++j)
    if (simulation.peak_memory[j] > problem.memory_limit[j]) return false;
  return true;
}

}  // namespace detail

// Candidates, in order (ties go to the earlier): for kind cyclic, the plain cyclic schedule (no memory check)
// of every injection order; if none of them fits, the memory-aware one of every injection order; then, for
// both kinds, 1F1B of every injection order. The fastest that fits is kept, so a cyclic schedule is never slower
// than 1F1B in the input order when that fits. Raises sluice::infeasible when no candidate fits the memory
// limits, invalid_input for a bad problem or options.
inline PipelineSchedule schedule_pipeline(const Problem& problem, const ScheduleOptions& options = {}) {
  require_problem(problem);
  sluice::require(options.kind == ScheduleKind::cyclic || options.kind == ScheduleKind::one_f_one_b,
                  "schedule: unknown schedule kind ", static_cast<int>(options.kind));
  const std::vector<std::vector<int>> injections = injection_candidates(problem, options);
  std::optional<PipelineSchedule> best;
  int simulated = 0;
  auto consider = [&](ScheduleKind kind, bool memory_aware, const std::vector<int>& injection, Order order) {
    Simulation simulation = simulate(problem, order);
    ++simulated;
    if (!detail::fits(simulation, problem)) return;
    if (best && simulation.makespan >= best->simulation.makespan) return;
    best = PipelineSchedule{kind, memory_aware, injection, std::move(order), std::move(simulation), {}, 0};
  };
  if (options.kind == ScheduleKind::cyclic) {
    const std::vector<double> unlimited(static_cast<std::size_t>(problem.stages),
                                        std::numeric_limits<double>::infinity());
    for (const std::vector<int>& injection : injections)
      consider(ScheduleKind::cyclic, false, injection, adaptive_cyclic(problem, injection, unlimited));
    if (!best) {
      bool single_fits = true;
      for (const MicroBatchCost& mb : problem.micro_batches)
        for (std::size_t j = 0; j < mb.activation.size(); ++j)
          single_fits = single_fits && mb.activation[j] <= problem.memory_limit[j];
      if (single_fits)
        for (const std::vector<int>& injection : injections)
          consider(ScheduleKind::cyclic, true, injection, adaptive_cyclic(problem, injection, problem.memory_limit));
    }
  }
  for (const std::vector<int>& injection : injections)
    consider(ScheduleKind::one_f_one_b, false, injection, one_f_one_b(injection, problem.stages));
  if (!best)
    throw infeasible(sluice::concat("schedule: no schedule of ", problem.micro_batches.size(), " micro-batches on ",
                                    problem.stages, " stages fits the memory limits"));
  best->plan = plan_comm(problem, best->order, best->simulation);
  best->candidates = simulated;
  return *std::move(best);
}

// Checks a pipeline schedule against its problem: the injection order is a permutation; the order is
// consistent; the simulation is the order's (re-simulated) and within the memory limits; the execution plan is
// valid (which includes finishing under NCCL's rules) and is the order's communication plan. Raises invalid_plan.
inline void validate(const PipelineSchedule& schedule, const Problem& problem) {
  const PlanCheck check("pipeline schedule: ");
  const std::size_t m = problem.micro_batches.size();
  std::vector<int> sorted = schedule.injection;
  std::sort(sorted.begin(), sorted.end());
  check(sorted == identity_injection(m), "injection order is not a permutation of the ", m, " micro-batches");
  validate(schedule.order, static_cast<int>(m), problem.stages);
  validate(schedule.simulation, problem, schedule.order);
  check(schedule.simulation == simulate(problem, schedule.order), "simulation differs from the order's");
  for (std::size_t j = 0; j < schedule.simulation.peak_memory.size(); ++j)
    check(schedule.simulation.peak_memory[j] <= problem.memory_limit[j] * (1 + 1e-9), "stage ", j, " holds ",
          schedule.simulation.peak_memory[j], " activation bytes, above its limit ", problem.memory_limit[j]);
  check(schedule.candidates >= 1, "simulated ", schedule.candidates, " candidates");
  validate(schedule.plan, problem);
  check(schedule.plan == plan_comm(problem, schedule.order, schedule.simulation),
        "execution plan is not the communication plan of its order");
}

}  // namespace sluice::schedule
