#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ranges>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "document_checks.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/io/chrome_trace.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/schedule/comm.hpp"
#include "sluice/schedule/deadlock.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/orders.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/simulate.hpp"
#include "support.hpp"

using namespace sluice;
using namespace sluice::schedule;

namespace {

using K = InstructionKind;

Problem uniform_problem(int m, int c, double forward, double backward, double activation = 1, double limit = inf) {
  Problem problem;
  problem.stages = c;
  const auto stages = static_cast<std::size_t>(c);
  for (int i = 0; i < m; ++i)
    problem.micro_batches.push_back({std::vector<double>(stages, forward), std::vector<double>(stages, backward),
                                     std::vector<double>(stages, activation), 64});
  problem.memory_limit.assign(stages, limit);
  problem.hidden = 16;
  problem.link = {0, inf};
  return problem;
}

// Micro-batches of random size s: per-stage forward s·U[0.8, 1.2] ms, backward about twice that, activation
// proportional to s; links free or with latency and finite bandwidth.
Problem random_problem(Rng& rng, int m, int c, bool free_links) {
  Problem problem;
  problem.stages = c;
  const auto stages = static_cast<std::size_t>(c);
  for (int i = 0; i < m; ++i) {
    const double size = 0.25 + rng.uniform() * 1.75;
    MicroBatchCost mb{{}, {}, {}, static_cast<std::int64_t>(256 * size) + 1};
    for (std::size_t j = 0; j < stages; ++j) {
      mb.forward.push_back(1e-3 * size * (0.8 + 0.4 * rng.uniform()));
      mb.backward.push_back(mb.forward.back() * (1.5 + rng.uniform()));
      mb.activation.push_back(std::round(1e6 * size));
    }
    problem.micro_batches.push_back(std::move(mb));
  }
  problem.memory_limit.assign(stages, inf);
  problem.hidden = 1024;
  problem.link = free_links ? cost::Link{0, inf} : cost::Link{2e-5 * rng.uniform(), 2e9 + 1e11 * rng.uniform()};
  return problem;
}

double max_activation(const Problem& problem, std::size_t j) {
  double most = 0;
  for (const MicroBatchCost& mb : problem.micro_batches) most = std::max(most, mb.activation[j]);
  return most;
}

// Orders, simulation and plan of `order`, with every validator and the deadlock checker.
ExecutionPlan plan_and_check(const Problem& problem, const Order& order) {
  validate(order, static_cast<int>(problem.micro_batches.size()), problem.stages);
  const Simulation simulation = simulate(problem, order);
  validate(simulation, problem, order);
  ExecutionPlan plan = plan_comm(problem, order, simulation);
  validate(plan, problem);
  const DeadlockReport report = check_deadlock(plan);
  REQUIRE_MESSAGE(report.ok(), report.message);
  return plan;
}

Instruction comm(K kind, int rank, int micro_batch, int peer) { return {kind, micro_batch, rank, peer, 0, -1, {4, 4}}; }

// The naive plan DynaPipe §6 starts from: receive right before use, send right after produce, send Waits at
// the end. Buffers are left out; the deadlock checker does not read them.
ExecutionPlan naive_plan(const Order& order, int micro_batches) {
  const int c = static_cast<int>(order.stages.size());
  ExecutionPlan plan{c, micro_batches, 1, std::vector<std::vector<Instruction>>(order.stages.size())};
  for (int j = 0; j < c; ++j) {
    std::vector<Instruction>& list = plan.ranks[static_cast<std::size_t>(j)];
    std::vector<Instruction> waits;
    for (const Op& op : order.stages[static_cast<std::size_t>(j)]) {
      const bool forward = op.pass == Pass::forward;
      const int from = forward ? j - 1 : j + 1, to = forward ? j + 1 : j - 1;
      if (from >= 0 && from < c) {
        list.push_back(comm(forward ? K::recv_act_start : K::recv_grad_start, j, op.micro_batch, from));
        list.push_back(comm(forward ? K::recv_act_wait : K::recv_grad_wait, j, op.micro_batch, from));
      }
      list.push_back({forward ? K::forward : K::backward, op.micro_batch, j, -1, -1, -1, {4, 4}});
      if (to >= 0 && to < c) {
        list.push_back(comm(forward ? K::send_act_start : K::send_grad_start, j, op.micro_batch, to));
        waits.push_back(comm(forward ? K::send_act_wait : K::send_grad_wait, j, op.micro_batch, to));
      }
    }
    list.insert(list.end(), waits.begin(), waits.end());
  }
  return plan;
}

}  // namespace

TEST_CASE("1F1B and GPipe take (m + c - 1)(t_f + t_b) for m >= c uniform micro-batches and free communication") {
  for (int c = 1; c <= 6; ++c)
    for (int m = c; m <= c + 6; ++m) {
      const Problem problem = uniform_problem(m, c, 0.25, 0.5);
      const std::vector<int> injection = identity_injection(static_cast<std::size_t>(m));
      for (const Order& order : {one_f_one_b(injection, c), gpipe(injection, c)}) {
        plan_and_check(problem, order);
        const Simulation simulation = simulate(problem, order);
        CHECK(simulation.makespan == (m + c - 1) * 0.75);
        for (int j = 0; j < c; ++j) CHECK(simulation.idle[static_cast<std::size_t>(j)] == (c - 1) * 0.75);
      }
      // 1F1B holds at most c - j micro-batches on stage j; GPipe holds all of them.
      const Simulation one_f = simulate(problem, one_f_one_b(injection, c));
      const Simulation all = simulate(problem, gpipe(injection, c));
      for (int j = 0; j < c; ++j) {
        CHECK(one_f.peak_memory[static_cast<std::size_t>(j)] == c - j);
        CHECK(all.peak_memory[static_cast<std::size_t>(j)] == m);
      }
    }
}

TEST_CASE("the simulator charges latency + bytes / bandwidth per transfer, one at a time per link direction") {
  // Two stages, two micro-batches; forward 1, backward 2; a transfer takes 0.5 + 64·8192·2 / 2^21 = 1 s.
  Problem problem = uniform_problem(2, 2, 1, 2);
  problem.hidden = 8192;
  problem.link = {0.5, 0x1p21};
  const Simulation simulation = simulate(problem, one_f_one_b(identity_injection(2), 2));
  validate(simulation, problem, one_f_one_b(identity_injection(2), 2));
  // Stage 0: F0 [0,1] (arrives 2), F1 [1,2] (arrives 3), B0 [6,8], B1 [9,11].
  // Stage 1: F0 [2,3], B0 [3,5] (arrives 6), F1 [5,6], B1 [6,8] (arrives 9).
  const std::vector<OpTiming>& first = simulation.stages[0];
  const std::vector<OpTiming>& second = simulation.stages[1];
  CHECK(first[1].arrival == 3);
  CHECK(second[0].start == 2);
  CHECK(second[1].arrival == 6);
  CHECK(first[2].start == 6);
  CHECK(first[3].start == 9);
  CHECK(simulation.makespan == 11);
  CHECK(simulation.idle[0] == 5);
  CHECK(simulation.idle[1] == 5);
}

TEST_CASE("Algorithm 1 on a hand-checked case") {
  // Three stages, three micro-batches, unlimited memory: each cycle a stage runs a backward then a forward.
  const Problem problem = uniform_problem(3, 3, 1, 1);
  const Order order = adaptive_cyclic(problem, identity_injection(3), std::vector<double>(3, inf));
  using P = Pass;
  CHECK(order.stages[2] ==
        std::vector<Op>{
            {0, P::forward}, {0, P::backward}, {1, P::forward}, {1, P::backward}, {2, P::forward}, {2, P::backward}});
  CHECK(order.stages[0] ==
        std::vector<Op>{
            {0, P::forward}, {1, P::forward}, {2, P::forward}, {0, P::backward}, {1, P::backward}, {2, P::backward}});
  // A limit of one micro-batch per stage: stage 0 waits for each backward before the next forward.
  const Order tight = adaptive_cyclic(problem, identity_injection(3), std::vector<double>(3, 1.0));
  CHECK(tight.stages[0] ==
        std::vector<Op>{
            {0, P::forward}, {0, P::backward}, {1, P::forward}, {1, P::backward}, {2, P::forward}, {2, P::backward}});
  for (const double peak : simulate(problem, tight).peak_memory) CHECK(peak == 1);
}

TEST_CASE("the adaptive schedule never exceeds its memory limits") {
  Rng rng(11);
#ifdef NDEBUG
  constexpr int cases = 3000;
#else
  constexpr int cases = 600;
#endif
  for (int t = 0; t < cases; ++t) {
    const int c = static_cast<int>(rng.uniform_int(1, 6));
    const int m = static_cast<int>(rng.uniform_int(1, 24));
    const Problem problem = random_problem(rng, m, c, rng.uniform() < 0.5);
    std::vector<double> limits;
    for (std::size_t j = 0; j < static_cast<std::size_t>(c); ++j)
      limits.push_back(max_activation(problem, j) * (1 + 3 * rng.uniform()));
    std::vector<int> injection = identity_injection(static_cast<std::size_t>(m));
    rng.shuffle(std::span<int>(injection));
    const Order order = adaptive_cyclic(problem, injection, limits);
    plan_and_check(problem, order);
    const std::vector<double> peaks = peak_memory(problem, order);
    for (std::size_t j = 0; j < peaks.size(); ++j) REQUIRE(peaks[j] <= limits[j]);
  }
}

TEST_CASE("the planner keeps a schedule that fits and is never slower than 1F1B when both fit") {
  Rng rng(12);
#ifdef NDEBUG
  constexpr int cases = 2000;
#else
  constexpr int cases = 300;
#endif
  int faster = 0, compared = 0, memory_aware = 0;
  double gain = 0;
  for (int t = 0; t < cases; ++t) {
    const int c = static_cast<int>(rng.uniform_int(2, 8));
    const int m = static_cast<int>(rng.uniform_int(1, 40));
    Problem problem = random_problem(rng, m, c, rng.uniform() < 0.3);
    for (std::size_t j = 0; j < problem.memory_limit.size(); ++j)
      problem.memory_limit[j] = max_activation(problem, j) * (1 + static_cast<double>(c) * rng.uniform());
    const ScheduleOptions options{ScheduleKind::cyclic, static_cast<std::uint64_t>(t), 0};
    const Simulation baseline = simulate(problem, one_f_one_b(identity_injection(problem.micro_batches.size()), c));
    const bool baseline_fits =
        std::ranges::all_of(std::views::iota(std::size_t{0}, problem.memory_limit.size()),
                            [&](std::size_t j) { return baseline.peak_memory[j] <= problem.memory_limit[j]; });
    PipelineSchedule chosen;
    try {
      chosen = schedule_pipeline(problem, options);
    } catch (const infeasible&) {
      CHECK_FALSE(baseline_fits);  // 1F1B is among the candidates
      continue;
    }
    validate(chosen, problem);
    memory_aware += chosen.memory_aware;
    if (!baseline_fits) continue;
    ++compared;
    REQUIRE(chosen.simulation.makespan <= baseline.makespan);
    faster += chosen.simulation.makespan < baseline.makespan;
    gain += baseline.makespan / chosen.simulation.makespan - 1;
  }
  CHECK(compared > cases / 5);
  CHECK(memory_aware > 0);
  MESSAGE("faster than 1F1B on ", faster, " of ", compared, " cases where 1F1B fits (mean gain ",
          100 * gain / std::max(compared, 1), "%); memory-aware cyclic kept on ", memory_aware, " of ", cases);
}

TEST_CASE("the memory-aware pass runs when no plain schedule fits") {
  // Eight micro-batches on four stages with room for two: plain cyclic and 1F1B hold up to four on stage 0.
  const Problem problem = uniform_problem(8, 4, 1, 2, 1, 2);
  const PipelineSchedule chosen = schedule_pipeline(problem);
  validate(chosen, problem);
  CHECK(chosen.kind == ScheduleKind::cyclic);
  CHECK(chosen.memory_aware);
  for (const double peak : chosen.simulation.peak_memory) CHECK(peak <= 2);
  // Only 1F1B: it does not fit.
  CHECK_THROWS_AS(schedule_pipeline(problem, {ScheduleKind::one_f_one_b, 1, 0}), infeasible);
  // A micro-batch larger than a stage's limit fits no schedule.
  CHECK_THROWS_AS(schedule_pipeline(uniform_problem(3, 2, 1, 1, 5, 4)), infeasible);
}

TEST_CASE("1F1B kind keeps a 1F1B order, searched over injection orders") {
  Rng rng(3);
  const Problem problem = random_problem(rng, 30, 4, false);
  const PipelineSchedule chosen = schedule_pipeline(problem, {ScheduleKind::one_f_one_b, 5, 0});
  validate(chosen, problem);
  CHECK(chosen.kind == ScheduleKind::one_f_one_b);
  CHECK(chosen.order == one_f_one_b(chosen.injection, 4));
  CHECK(chosen.candidates == static_cast<int>(injection_candidates(problem, {ScheduleKind::one_f_one_b, 5, 0}).size()));
  CHECK(chosen.simulation.makespan <= simulate(problem, one_f_one_b(identity_injection(30), 4)).makespan);
  // Deterministic for a seed.
  CHECK(schedule_pipeline(problem, {ScheduleKind::cyclic, 9, 0}) ==
        schedule_pipeline(problem, {ScheduleKind::cyclic, 9, 0}));
}

TEST_CASE("k-means groups micro-batches by time and the search tries every group order") {
  // Three well-separated time levels, interleaved.
  Problem problem = uniform_problem(30, 3, 1, 2);
  for (std::size_t i = 0; i < 30; ++i) {
    const double level = 1.0 + static_cast<double>(i % 3) * 10;
    for (std::size_t j = 0; j < 3; ++j) {
      problem.micro_batches[i].forward[j] = level + 0.01 * static_cast<double>(i);
      problem.micro_batches[i].backward[j] = 2 * level;
    }
  }
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const auto groups = cluster_micro_batches(problem, 3, seed);
    REQUIRE(groups.size() == 3);
    for (std::size_t g = 0; g < 3; ++g) {
      CHECK(groups[g].size() == 10);
      for (const int i : groups[g]) CHECK(i % 3 == static_cast<int>(g));
    }
  }
  const auto candidates = injection_candidates(problem, {ScheduleKind::cyclic, 1, 0});
  CHECK(candidates.size() == 7);  // the input order and the 3! group orders
  for (const auto& injection : candidates) {
    std::vector<int> sorted = injection;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == identity_injection(30));
  }
  // Identical micro-batches form one group, so the input order is the only candidate.
  CHECK(cluster_micro_batches(uniform_problem(30, 2, 1, 1), 3, 1).size() == 1);
  CHECK(injection_candidates(uniform_problem(30, 2, 1, 1), {}).size() == 1);
  // At most k micro-batches: every permutation.
  CHECK(injection_candidates(uniform_problem(4, 2, 1, 1), {}).size() == 24);
  CHECK(injection_candidates(uniform_problem(3, 2, 1, 1), {}).size() == 6);
  // k-means partitions every micro-batch exactly once on random data.
  Rng rng(8);
  for (int t = 0; t < 50; ++t) {
    const Problem random = random_problem(rng, static_cast<int>(rng.uniform_int(1, 40)), 3, true);
    const auto parts = cluster_micro_batches(random, static_cast<int>(rng.uniform_int(1, 5)), rng());
    std::vector<int> all;
    for (const auto& part : parts) {
      CHECK_FALSE(part.empty());
      all.insert(all.end(), part.begin(), part.end());
    }
    std::sort(all.begin(), all.end());
    CHECK(all == identity_injection(random.micro_batches.size()));
  }
}

TEST_CASE("10,000 random plans finish under NCCL's point-to-point rules") {
  Rng rng(2024);
  constexpr int plans = 10'000;
  int memory_aware = 0;
  for (int t = 0; t < plans; ++t) {
    const int c = static_cast<int>(rng.uniform_int(1, 4));
    const int m = static_cast<int>(rng.uniform_int(1, 6));
    const Problem problem = random_problem(rng, m, c, rng.uniform() < 0.3);
    std::vector<int> injection = identity_injection(static_cast<std::size_t>(m));
    rng.shuffle(std::span<int>(injection));
    Order order;
    switch (rng.below(4)) {
      case 0: order = gpipe(injection, c); break;
      case 1: order = one_f_one_b(injection, c); break;
      case 2: order = adaptive_cyclic(problem, injection, std::vector<double>(static_cast<std::size_t>(c), inf)); break;
      default: {
        std::vector<double> limits;
        for (std::size_t j = 0; j < static_cast<std::size_t>(c); ++j)
          limits.push_back(max_activation(problem, j) * (1 + 2 * rng.uniform()));
        order = adaptive_cyclic(problem, injection, limits);
        ++memory_aware;
      }
    }
    plan_and_check(problem, order);
  }
  CHECK(memory_aware > plans / 5);
}

TEST_CASE("the deadlock checker catches hand-made deadlocks") {
  SUBCASE("DynaPipe Fig. 8b: act(0), act(1) against grad(7)") {
    ExecutionPlan plan{2, 8, 1, {}};
    plan.ranks = {
        {comm(K::send_act_start, 0, 0, 1), comm(K::send_act_start, 0, 1, 1), comm(K::recv_grad_start, 0, 7, 1),
         comm(K::send_act_wait, 0, 0, 1), comm(K::send_act_wait, 0, 1, 1), comm(K::recv_grad_wait, 0, 7, 1)},
        {comm(K::send_grad_start, 1, 7, 0), comm(K::recv_act_start, 1, 0, 0), comm(K::recv_act_start, 1, 1, 0),
         comm(K::send_grad_wait, 1, 7, 0), comm(K::recv_act_wait, 1, 0, 0), comm(K::recv_act_wait, 1, 1, 0)}};
    const DeadlockReport report = check_deadlock(plan);
    CHECK(report.outcome == CommOutcome::deadlock);
    CHECK(report.cycle == std::vector<int>{0, 1});
    // Posting the receive of grad(7) first (the planner's order: both ends in one order) resolves it.
    plan.ranks = {
        {comm(K::recv_grad_start, 0, 7, 1), comm(K::send_act_start, 0, 0, 1), comm(K::send_act_start, 0, 1, 1),
         comm(K::send_act_wait, 0, 0, 1), comm(K::send_act_wait, 0, 1, 1), comm(K::recv_grad_wait, 0, 7, 1)},
        {comm(K::send_grad_start, 1, 7, 0), comm(K::recv_act_start, 1, 0, 0), comm(K::recv_act_start, 1, 1, 0),
         comm(K::send_grad_wait, 1, 7, 0), comm(K::recv_act_wait, 1, 0, 0), comm(K::recv_act_wait, 1, 1, 0)}};
    CHECK(check_deadlock(plan).ok());
  }
  SUBCASE("naive send-on-produce, receive-before-use plans deadlock; the planner's do not") {
    // 1F1B on two stages: rank 0 sends act(1) while rank 1 sends grad(0).
    const Problem problem = uniform_problem(2, 2, 1, 2);
    const Order order = one_f_one_b(identity_injection(2), 2);
    const DeadlockReport report = check_deadlock(naive_plan(order, 2));
    CHECK(report.outcome == CommOutcome::deadlock);
    CHECK(report.cycle == std::vector<int>{0, 1});
    CHECK(check_deadlock(plan_and_check(problem, order)).ok());
    // Random cyclic schedules: the naive plan often deadlocks, the planned one never.
    Rng rng(77);
    int naive_deadlocks = 0;
    for (int t = 0; t < 200; ++t) {
      const Problem random =
          random_problem(rng, static_cast<int>(rng.uniform_int(2, 8)), static_cast<int>(rng.uniform_int(2, 5)), false);
      const Order cyclic = adaptive_cyclic(random, identity_injection(random.micro_batches.size()),
                                           std::vector<double>(static_cast<std::size_t>(random.stages), inf));
      naive_deadlocks += check_deadlock(naive_plan(cyclic, static_cast<int>(random.micro_batches.size()))).outcome ==
                         CommOutcome::deadlock;
      plan_and_check(random, cyclic);
    }
    CHECK(naive_deadlocks > 100);
    MESSAGE("naive plans deadlock on ", naive_deadlocks, " of 200 random cyclic schedules");
  }
  SUBCASE("receive-before-use in the wrong order: each rank blocks on a receive the other posts later") {
    ExecutionPlan plan{2, 2, 1, {}};
    plan.ranks = {{comm(K::recv_grad_start, 0, 0, 1), comm(K::recv_grad_wait, 0, 0, 1),
                   comm(K::send_act_start, 0, 1, 1), comm(K::send_act_wait, 0, 1, 1)},
                  {comm(K::recv_act_start, 1, 1, 0), comm(K::recv_act_wait, 1, 1, 0), comm(K::send_grad_start, 1, 0, 0),
                   comm(K::send_grad_wait, 1, 0, 0)}};
    const DeadlockReport report = check_deadlock(plan);
    CHECK(report.outcome == CommOutcome::deadlock);
    CHECK(report.cycle == std::vector<int>{0, 1});
  }
  SUBCASE("a cycle of three ranks") {
    ExecutionPlan plan{3, 1, 1, {}};
    plan.ranks = {{comm(K::recv_act_start, 0, 0, 2), comm(K::recv_act_wait, 0, 0, 2), comm(K::send_act_start, 0, 0, 1),
                   comm(K::send_act_wait, 0, 0, 1)},
                  {comm(K::recv_act_start, 1, 0, 0), comm(K::recv_act_wait, 1, 0, 0), comm(K::send_act_start, 1, 0, 2),
                   comm(K::send_act_wait, 1, 0, 2)},
                  {comm(K::recv_act_start, 2, 0, 1), comm(K::recv_act_wait, 2, 0, 1), comm(K::send_act_start, 2, 0, 0),
                   comm(K::send_act_wait, 2, 0, 0)}};
    const DeadlockReport report = check_deadlock(plan);
    CHECK(report.outcome == CommOutcome::deadlock);
    CHECK(report.cycle == std::vector<int>{0, 2, 1});
  }
  SUBCASE("a send meeting the receive of another micro-batch") {
    ExecutionPlan plan{2, 2, 1, {}};
    plan.ranks = {{comm(K::send_act_start, 0, 0, 1), comm(K::send_act_start, 0, 1, 1)},
                  {comm(K::recv_act_start, 1, 1, 0), comm(K::recv_act_start, 1, 0, 0)}};
    CHECK(check_deadlock(plan).outcome == CommOutcome::mismatch);
  }
  SUBCASE("a receive that is never sent") {
    ExecutionPlan plan{2, 1, 1, {}};
    plan.ranks = {{}, {comm(K::recv_act_start, 1, 0, 0), comm(K::recv_act_wait, 1, 0, 0)}};
    CHECK(check_deadlock(plan).outcome == CommOutcome::unmatched);
    plan.ranks[1].pop_back();
    CHECK(check_deadlock(plan).outcome == CommOutcome::unmatched);
  }
  SUBCASE("plans it cannot run") {
    ExecutionPlan plan{2, 1, 1, {{comm(K::send_act_wait, 0, 0, 1)}, {}}};
    CHECK_THROWS_AS(check_deadlock(plan), invalid_plan);
    plan.ranks[0] = {comm(K::send_act_start, 0, 0, 0)};
    CHECK_THROWS_AS(check_deadlock(plan), invalid_plan);
    plan.ranks[0] = {comm(K::send_act_start, 0, 0, 1), comm(K::send_act_start, 0, 0, 1)};
    CHECK_THROWS_AS(check_deadlock(plan), invalid_plan);
  }
}

TEST_CASE("communication plans: layout of a two-stage plan") {
  const Problem problem = uniform_problem(2, 2, 1, 2);
  const ExecutionPlan plan = plan_and_check(problem, one_f_one_b(identity_injection(2), 2));
  std::vector<K> rank0, rank1;
  for (const Instruction& in : plan.ranks[0]) rank0.push_back(in.kind);
  for (const Instruction& in : plan.ranks[1]) rank1.push_back(in.kind);
  // Stage 0: F0 [0,1], F1 [1,2], B0 [4,6], B1 [7,9]; stage 1: F0 [1,2], B0 [2,4], F1 [4,5], B1 [5,7].
  CHECK(rank0 == std::vector<K>{K::load_input,      K::forward,        K::send_act_start,  K::send_act_wait,
                                K::load_input,      K::forward,        K::send_act_start,  K::send_act_wait,
                                K::recv_grad_start, K::recv_grad_wait, K::backward,        K::free_buffer,
                                K::free_buffer,     K::free_buffer,    K::recv_grad_start, K::recv_grad_wait,
                                K::backward,        K::free_buffer,    K::free_buffer,     K::free_buffer});
  CHECK(rank1 == std::vector<K>{K::recv_act_start, K::recv_act_wait, K::forward, K::recv_act_start, K::backward,
                                K::free_buffer, K::send_grad_start, K::send_grad_wait, K::free_buffer, K::recv_act_wait,
                                K::forward, K::backward, K::free_buffer, K::send_grad_start, K::send_grad_wait,
                                K::free_buffer});
  // Rank 0 at t = 4: both inputs, both outputs (kept for the backward) and the first gradient.
  CHECK(plan.buffer_slots == 5);
  CHECK(plan.ranks[0][0].shape == TensorShape{64, 1});
  CHECK(plan.ranks[0][1].shape == TensorShape{64, 16});
  CHECK(plan.ranks[0][2].peer == 1);
}

TEST_CASE("execution plan JSON round trip and Chrome trace") {
  Rng rng(5);
  const Problem problem = random_problem(rng, 12, 4, false);
  const PipelineSchedule chosen = schedule_pipeline(problem);
  validate(chosen, problem);
  const io::json document = io::to_document(chosen.plan);
  CHECK(document.at("format") == "sluice.execution_plan");
  const auto back = io::from_document<ExecutionPlan>(io::parse(document.dump(), "test"), "test");
  CHECK(back == chosen.plan);
  validate(back, problem);

  io::json broken = document;
  broken["ranks"][0][0]["op"] = "teleport";
  CHECK_THROWS_WITH_AS(io::from_document<ExecutionPlan>(broken), doctest::Contains("teleport"), invalid_input);
  broken = document;
  broken["ranks"][0][0].erase("shape");
  CHECK_THROWS_WITH_AS(io::from_document<ExecutionPlan>(broken), doctest::Contains("shape"), invalid_input);
  broken = document;
  broken["format"] = "sluice.candidates";
  CHECK_THROWS_AS(io::from_document<ExecutionPlan>(broken), invalid_input);

  const io::json trace = io::chrome_trace(chosen.simulation);
  std::size_t ops = 0, transfers = 0, metadata = 0;
  double last_end = 0;
  for (const io::json& event : trace.at("traceEvents")) {
    if (event.at("ph") == "M") {
      ++metadata;
      continue;
    }
    const std::string cat = event.at("cat");
    (cat == "forward" || cat == "backward" ? ops : transfers) += 1;
    last_end = std::max(last_end, event.at("ts").get<double>() + event.at("dur").get<double>());
  }
  CHECK(metadata == 1 + 8);  // the process name, then two thread names per stage
  CHECK(ops == 2 * 12 * 4);
  CHECK(transfers == 2 * 12 * 3);
  CHECK(last_end == doctest::Approx(chosen.simulation.makespan * 1e6));
}

using sluice::test::read_back;
using sluice::test::rejects_document;

TEST_CASE("scheduling problem, order, simulation and pipeline schedule JSON: exact round trips; broken ones named") {
  Rng rng(7);
  for (const bool free_links : {true, false}) {
    CAPTURE(free_links);
    Problem problem = random_problem(rng, 9, 3, free_links);
    if (!free_links) problem.memory_limit[1] = 4 * max_activation(problem, 1);
    const PipelineSchedule chosen = schedule_pipeline(problem);
    validate(chosen, problem);

    const io::json problem_document = io::to_document(problem);
    CHECK(problem_document.at("format") == "sluice.scheduling_problem");
    // JSON has no infinity: an unlimited memory or bandwidth is the string "inf".
    CHECK(problem_document.at("memory_limit").at(0) == "inf");
    CHECK((problem_document.at("link").at("bandwidth") == "inf") == free_links);
    CHECK(io::to_document(chosen.order).at("format") == "sluice.schedule_order");
    CHECK(io::to_document(chosen.simulation).at("format") == "sluice.schedule_simulation");
    CHECK(io::to_document(chosen).at("format") == "sluice.pipeline_schedule");
    const Problem problem_back = read_back(problem);
    CHECK(problem_back == problem);
    CHECK(read_back(chosen.order) == chosen.order);
    CHECK(read_back(chosen.simulation) == chosen.simulation);
    const PipelineSchedule back = read_back(chosen);
    CHECK(back == chosen);
    validate(back, problem_back);
  }
  // An idle replica's empty problem and schedule read back too.
  CHECK(read_back(Problem{}) == Problem{});
  CHECK(read_back(PipelineSchedule{}) == PipelineSchedule{});

  const Problem problem = uniform_problem(3, 2, 1, 2);
  const PipelineSchedule chosen = schedule_pipeline(problem, {ScheduleKind::one_f_one_b, 1, 0});
  io::json broken = io::to_document(problem);
  broken.erase("link");
  rejects_document<Problem>(broken, "missing field 'link'");
  broken = io::to_document(problem);
  broken["memory_limit"][1] = "infinite";
  rejects_document<Problem>(broken, "field 'memory_limit'[1]: expected a number, \"inf\" or \"-inf\"");
  broken = io::to_document(problem);
  broken["link"]["bandwidth"] = true;
  rejects_document<Problem>(broken, "bandwidth: expected a number");
  broken = io::to_document(problem);
  broken["micro_batches"][2]["forward"][0] = "fast";
  rejects_document<Problem>(broken, "field 'micro_batches'[2]: micro-batch cost: field 'forward'[0]");
  broken = io::to_document(chosen.order);
  broken["stages"][1][0]["pass"] = "sideways";
  rejects_document<Order>(broken, "field 'pass': expected \"forward\" or \"backward\", got \"sideways\"");
  broken = io::to_document(chosen.simulation);
  broken.erase("makespan");
  rejects_document<Simulation>(broken, "missing field 'makespan'");
  broken = io::to_document(chosen);
  broken["kind"] = "gpipe";
  rejects_document<PipelineSchedule>(broken, "field 'kind': expected \"cyclic\" or \"1f1b\"");
  broken = io::to_document(chosen);
  broken["candidates"] = 1.5;
  rejects_document<PipelineSchedule>(broken, "field 'candidates'");
  broken = io::to_document(chosen);
  broken["simulation"]["stages"][0][0].erase("arrival");
  rejects_document<PipelineSchedule>(broken, "missing field 'arrival'");
  const std::string text = io::to_document(chosen).dump();
  CHECK_THROWS_WITH_AS(io::parse(text.substr(0, text.size() / 2), "cut.json"), doctest::Contains("not valid JSON"),
                       invalid_input);
}

TEST_CASE("validators reject broken orders, simulations, plans and schedules") {
  const Problem problem = uniform_problem(3, 3, 1, 2, 1, 3);
  const PipelineSchedule good = schedule_pipeline(problem, {ScheduleKind::one_f_one_b, 1, 0});
  validate(good, problem);
  using P = Pass;

  SUBCASE("orders") {
    Order order = good.order;
    order.stages[1][0] = order.stages[1][1];
    CHECK_THROWS_AS(validate(order, 3, 3), invalid_plan);
    order = good.order;
    order.stages.pop_back();
    CHECK_THROWS_AS(validate(order, 3, 3), invalid_plan);
    order = good.order;
    std::swap(order.stages[2][0], order.stages[2][1]);  // backward before forward
    CHECK_THROWS_AS(validate(order, 3, 3), invalid_plan);
    order = good.order;
    order.stages[0][0].micro_batch = 7;
    CHECK_THROWS_AS(validate(order, 3, 3), invalid_plan);
    // Stage 0 waits for B0 from stage 1, which waits for F1 from stage 0.
    const Order crossed{{{{0, P::forward}, {0, P::backward}, {1, P::forward}, {1, P::backward}},
                         {{1, P::forward}, {1, P::backward}, {0, P::forward}, {0, P::backward}}}};
    CHECK_THROWS_WITH_AS(validate(crossed, 2, 2), doctest::Contains("forever"), invalid_plan);
    CHECK_THROWS_AS(simulate(uniform_problem(2, 2, 1, 1), crossed), invalid_plan);
  }
  SUBCASE("simulations") {
    Simulation simulation = good.simulation;
    simulation.stages[1][0].start -= 0.5;
    simulation.stages[1][0].end -= 0.5;
    CHECK_THROWS_WITH_AS(validate(simulation, problem, good.order), doctest::Contains("before its input"),
                         invalid_plan);
    simulation = good.simulation;
    simulation.stages[0][1].end += 1;
    CHECK_THROWS_AS(validate(simulation, problem, good.order), invalid_plan);
    simulation = good.simulation;
    simulation.makespan += 1;
    CHECK_THROWS_AS(validate(simulation, problem, good.order), invalid_plan);
    simulation = good.simulation;
    simulation.peak_memory[0] = 1;
    CHECK_THROWS_AS(validate(simulation, problem, good.order), invalid_plan);
    simulation = good.simulation;
    simulation.idle[2] = 0;
    CHECK_THROWS_AS(validate(simulation, problem, good.order), invalid_plan);
    simulation = good.simulation;
    simulation.stages[0][0].send_start -= 0.25;  // sent before its op ends
    CHECK_THROWS_AS(validate(simulation, problem, good.order), invalid_plan);
  }
  SUBCASE("execution plans") {
    auto broken = [&](auto edit) {
      ExecutionPlan plan = good.plan;
      edit(plan);
      CHECK_THROWS_AS(validate(plan, problem), invalid_plan);
    };
    auto find = [](const std::vector<Instruction>& list, K kind) {
      return static_cast<std::size_t>(std::ranges::find(list, kind, &Instruction::kind) - list.begin());
    };
    broken([&](ExecutionPlan& plan) {
      plan.ranks[1].erase(plan.ranks[1].begin() + static_cast<std::ptrdiff_t>(find(plan.ranks[1], K::recv_act_wait)));
    });
    broken([&](ExecutionPlan& plan) {
      const std::size_t k = find(plan.ranks[1], K::recv_act_wait);
      std::swap(plan.ranks[1][k], plan.ranks[1][k + 1]);  // forward before its input arrives
    });
    broken([&](ExecutionPlan& plan) { plan.ranks[0][find(plan.ranks[0], K::forward)].buffer = 3; });
    broken([&](ExecutionPlan& plan) { plan.ranks[0][find(plan.ranks[0], K::send_act_start)].shape.rows += 1; });
    broken([&](ExecutionPlan& plan) { plan.ranks[0][find(plan.ranks[0], K::send_act_start)].peer = 2; });
    broken([&](ExecutionPlan& plan) { plan.ranks[2][find(plan.ranks[2], K::free_buffer)].buffer = -1; });
    broken([&](ExecutionPlan& plan) { plan.ranks[2].push_back(plan.ranks[2][find(plan.ranks[2], K::free_buffer)]); });
    broken([&](ExecutionPlan& plan) { plan.ranks[2].pop_back(); });
    broken([&](ExecutionPlan& plan) { plan.buffer_slots = 1; });
    broken([&](ExecutionPlan& plan) { plan.buffer_slots = 1 << 30; });
    broken([&](ExecutionPlan& plan) { plan.ranks[1][0].stage = 0; });
    broken([&](ExecutionPlan& plan) { plan.micro_batches = 4; });
    broken([&](ExecutionPlan& plan) { plan.ranks.pop_back(); });
    broken([&](ExecutionPlan& plan) {
      // Two receives on rank 1 swapped, with their sends left in place: the pair order differs.
      std::vector<Instruction>& list = plan.ranks[1];
      std::vector<std::size_t> starts;
      for (std::size_t k = 0; k < list.size(); ++k)
        if (list[k].kind == K::recv_act_start) starts.push_back(k);
      std::swap(list[starts[0]].micro_batch, list[starts[1]].micro_batch);
    });
    broken([&](ExecutionPlan& plan) {
      // Free a slot before the backward that reads it.
      std::vector<Instruction>& list = plan.ranks[0];
      const std::size_t backward = find(list, K::backward);
      Instruction freed = list[backward + 1];
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(backward + 1));
      list.insert(list.begin() + static_cast<std::ptrdiff_t>(backward), freed);
    });
    // Memory: the plan holds three micro-batches on stage 0; a limit of two rejects it.
    Problem tighter = problem;
    tighter.memory_limit[0] = 2;
    CHECK_THROWS_WITH_AS(validate(good.plan, tighter), doctest::Contains("limit"), invalid_plan);
  }
  SUBCASE("pipeline schedules") {
    PipelineSchedule schedule = good;
    schedule.injection[0] = schedule.injection[1];
    CHECK_THROWS_AS(validate(schedule, problem), invalid_plan);
    schedule = good;
    schedule.candidates = 0;
    CHECK_THROWS_AS(validate(schedule, problem), invalid_plan);
    schedule = good;
    schedule.simulation = simulate(problem, gpipe(identity_injection(3), 3));  // another order's timeline
    CHECK_THROWS_AS(validate(schedule, problem), invalid_plan);
    schedule = good;
    schedule.plan.ranks[0].push_back(schedule.plan.ranks[0].front());
    CHECK_THROWS_AS(validate(schedule, problem), invalid_plan);
    Problem tighter = problem;
    tighter.memory_limit[1] = 1.5;
    CHECK_THROWS_AS(validate(good, tighter), invalid_plan);
  }
}

TEST_CASE("timelines of large timestamps validate: durations are checked relative to the timestamps") {
  // Found by fuzzing `sluice simulate --bandwidth 1e-9`: transfers of days next to ops of 66 ms, and the validator
  // compared end − start (rounded at the timestamps' scale) to the cost within 1e-9 s. Here a transfer takes
  // 1 + 2^20·2^26·2 / 1e6 ≈ 1.4e8 s on the slowest link allowed.
  for (int c = 2; c <= 4; ++c) {
    CAPTURE(c);
    Problem problem = uniform_problem(4, c, 0.0655720812, 2 * 0.0655720812);
    for (MicroBatchCost& mb : problem.micro_batches) mb.tokens = 1 << 20;
    problem.hidden = std::int64_t{1} << 26;
    problem.link = {1, cost::Link::min_bandwidth};
    const Order order = one_f_one_b(identity_injection(4), c);
    const Simulation simulation = simulate(problem, order);
    CHECK(simulation.makespan > 1e8);
    CHECK_NOTHROW(validate(simulation, problem, order));
    for (const ScheduleKind kind : {ScheduleKind::cyclic, ScheduleKind::one_f_one_b}) {
      const PipelineSchedule schedule = schedule_pipeline(problem, {kind, 1, 0});
      CHECK_NOTHROW(validate(schedule, problem));
    }
  }
}

TEST_CASE("an op too short for its timeline is bad input, not a misordered plan") {
  // Found by fuzzing profiles with every coefficient 1e-20: on stage 1 an op of 1e-20 s starting after a 1e-5 s
  // transfer ended where it started, and its send sorted before it ("send ... comes before the backward").
  Problem problem = uniform_problem(3, 2, 1e-20, 2e-20);
  problem.link = {1e-5, inf};
  CHECK_THROWS_WITH_AS(require_problem(problem),
                       doctest::Contains("schedule: micro-batch 0 forward[0] = 1e-20 s is below 2^-40 of the"),
                       invalid_input);
  CHECK_THROWS_AS(schedule_pipeline(problem), invalid_input);
  CHECK_THROWS_AS(simulate(problem, one_f_one_b(identity_injection(3), 2)), invalid_input);
  // The same ops on free links share no timeline with anything longer: they are fine.
  problem.link = {0, inf};
  CHECK_NOTHROW(validate(schedule_pipeline(problem), problem));
  // Totals that overflow are refused as well.
  Problem huge = uniform_problem(3, 2, 1e308, 1e308);
  CHECK_THROWS_WITH_AS(require_problem(huge), doctest::Contains("take inf s in all (overflow)"), invalid_input);
}

TEST_CASE("links: latency in [0, 1] s, bandwidth in [1e6, 1e13] bytes/s or +inf") {
  CHECK_NOTHROW(cost::require_valid(cost::Link{}));
  CHECK_NOTHROW(cost::require_valid(cost::Link{0, cost::Link::min_bandwidth}));
  CHECK_NOTHROW(cost::require_valid(cost::Link{cost::Link::max_latency, cost::Link::max_bandwidth}));
  CHECK_THROWS_WITH_AS(cost::require_valid(cost::Link{1.5, 1e9}, "schedule: link"),
                       "schedule: link latency must be in [0, 1] s, got 1.5", invalid_input);
  CHECK_THROWS_AS(cost::require_valid(cost::Link{std::nan(""), 1e9}), invalid_input);
  CHECK_THROWS_WITH_AS(cost::require_valid(cost::Link{0, 1}, "schedule: link"),
                       "schedule: link bandwidth must be in [1e+06, 1e+13] bytes/s or +inf, got 1", invalid_input);
  CHECK_THROWS_AS(cost::require_valid(cost::Link{0, 2e13}), invalid_input);
  CHECK_THROWS_AS(cost::require_valid(cost::Link{0, std::nan("")}), invalid_input);
  Problem problem = uniform_problem(3, 2, 1, 2);
  problem.link = {0, 1e3};
  CHECK_THROWS_WITH_AS(schedule_pipeline(problem), doctest::Contains("link bandwidth"), invalid_input);
}

TEST_CASE("bad input names the field and the value") {
  const Problem good = uniform_problem(3, 2, 1, 2);
  auto rejects = [&](auto edit, const char* text) {
    Problem problem = good;
    edit(problem);
    CHECK_THROWS_WITH_AS(require_problem(problem), doctest::Contains(text), invalid_input);
    CHECK_THROWS_AS(schedule_pipeline(problem), invalid_input);
  };
  rejects([](Problem& p) { p.stages = 0; }, "stages must be >= 1, got 0");
  rejects([](Problem& p) { p.micro_batches.clear(); }, "no micro-batches");
  rejects([](Problem& p) { p.memory_limit.pop_back(); }, "memory_limit has 1 entries");
  rejects([](Problem& p) { p.memory_limit[1] = 0; }, "memory_limit[1] must be > 0, got 0");
  rejects([](Problem& p) { p.memory_limit[0] = std::nan(""); }, "memory_limit[0]");
  rejects([](Problem& p) { p.hidden = 0; }, "hidden must be >= 1, got 0");
  rejects([](Problem& p) { p.element_bytes = 0; }, "element_bytes must be >= 1, got 0");
  rejects([](Problem& p) { p.link.latency = -1; }, "latency must be in [0, 1] s, got -1");
  rejects([](Problem& p) { p.link.latency = inf; }, "latency");
  rejects([](Problem& p) { p.link.bandwidth = 0; }, "bandwidth must be in [1e+06, 1e+13] bytes/s or +inf, got 0");
  rejects([](Problem& p) { p.micro_batches[1].forward.pop_back(); }, "micro-batch 1 has 1 forward");
  rejects([](Problem& p) { p.micro_batches[2].activation.push_back(1); },
          "micro-batch 2 has 2 forward, 2 backward and 3");
  rejects([](Problem& p) { p.micro_batches[0].tokens = 0; }, "micro-batch 0 tokens must be >= 1, got 0");
  rejects([](Problem& p) { p.micro_batches[0].forward[1] = 0; },
          "micro-batch 0 forward[1] must be finite and > 0, got 0");
  rejects([](Problem& p) { p.micro_batches[1].backward[0] = inf; }, "micro-batch 1 backward[0]");
  rejects([](Problem& p) { p.micro_batches[2].activation[0] = -1; },
          "micro-batch 2 activation[0] must be finite and >= 0, got -1");

  CHECK_THROWS_WITH_AS(schedule_pipeline(good, {ScheduleKind::cyclic, 1, 7}),
                       doctest::Contains("clusters must be in [0, 6], got 7"), invalid_input);
  CHECK_THROWS_AS(schedule_pipeline(good, {ScheduleKind::cyclic, 1, -1}), invalid_input);
  CHECK_THROWS_AS(schedule_pipeline(good, {static_cast<ScheduleKind>(5), 1, 0}), invalid_input);
  CHECK_THROWS_WITH_AS(cluster_micro_batches(good, 0, 1), doctest::Contains("clusters must be >= 1, got 0"),
                       invalid_input);

  const std::vector<int> duplicate{0, 0, 1}, outside{0, 1, 3}, short_order{0, 1};
  CHECK_THROWS_WITH_AS(one_f_one_b(duplicate, 2), doctest::Contains("micro-batch 0 twice"), invalid_input);
  CHECK_THROWS_WITH_AS(gpipe(outside, 2), doctest::Contains("micro-batch 3 outside [0, 3)"), invalid_input);
  CHECK_THROWS_WITH_AS(one_f_one_b(identity_injection(2), 0), doctest::Contains("stages must be >= 1, got 0"),
                       invalid_input);
  CHECK_THROWS_AS(gpipe(std::vector<int>{}, 2), invalid_input);
  const std::vector<double> limits{inf, inf}, one_limit{inf}, zero_limit{0, inf};
  CHECK_THROWS_WITH_AS(adaptive_cyclic(good, short_order, limits), doctest::Contains("2 entries for 3 micro-batches"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(adaptive_cyclic(good, identity_injection(3), one_limit),
                       doctest::Contains("1 memory limits for 2 stages"), invalid_input);
  CHECK_THROWS_WITH_AS(adaptive_cyclic(good, identity_injection(3), zero_limit),
                       doctest::Contains("memory limit[0] must be > 0"), invalid_input);
  const std::vector<double> small{0.5, inf};
  CHECK_THROWS_WITH_AS(adaptive_cyclic(good, identity_injection(3), small), doctest::Contains("above its limit"),
                       infeasible);
  // A simulation of another problem's order.
  CHECK_THROWS_AS(simulate(good, one_f_one_b(identity_injection(2), 2)), invalid_plan);
  CHECK_THROWS_AS(plan_comm(good, one_f_one_b(identity_injection(3), 2),
                            simulate(uniform_problem(3, 2, 2, 2), one_f_one_b(identity_injection(3), 2))),
                  invalid_plan);
}
