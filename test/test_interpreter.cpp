#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/schedule/comm.hpp"
#include "sluice/schedule/deadlock.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/interpreter.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "support.hpp"

using namespace sluice;
using namespace sluice::schedule;

namespace {

using K = InstructionKind;

Problem problem_of(Rng& rng, int m, int c) {
  Problem problem;
  problem.stages = c;
  for (int i = 0; i < m; ++i) {
    const double size = 0.25 + rng.uniform() * 1.75;
    MicroBatchCost mb{{}, {}, {}, static_cast<std::int64_t>(256 * size) + 1};
    for (int j = 0; j < c; ++j) {
      mb.forward.push_back(1e-3 * size * (0.8 + 0.4 * rng.uniform()));
      mb.backward.push_back(2 * mb.forward.back());
      mb.activation.push_back(1e6 * size);
    }
    problem.micro_batches.push_back(std::move(mb));
  }
  problem.memory_limit.assign(static_cast<std::size_t>(c), inf);
  problem.hidden = 64;
  problem.link = {1e-5, 1e10};
  return problem;
}

// The planner's 1F1B plan for three micro-batches on two stages.
std::pair<Problem, ExecutionPlan> two_stage_plan() {
  Rng rng(3);
  Problem problem = problem_of(rng, 3, 2);
  ExecutionPlan plan = schedule_pipeline(problem, {ScheduleKind::one_f_one_b, 1, 0}).plan;
  return {std::move(problem), std::move(plan)};
}

std::size_t find(const std::vector<Instruction>& list, K kind, int micro_batch) {
  const auto it = std::ranges::find_if(
      list, [&](const Instruction& in) { return in.kind == kind && in.micro_batch == micro_batch; });
  REQUIRE(it != list.end());
  return static_cast<std::size_t>(it - list.begin());
}

// Moves list[from] to just after list[after].
void move_after(std::vector<Instruction>& list, std::size_t from, std::size_t after) {
  const Instruction moved = list[from];
  list.erase(list.begin() + static_cast<std::ptrdiff_t>(from));
  if (after > from) --after;
  list.insert(list.begin() + static_cast<std::ptrdiff_t>(after) + 1, moved);
}

Instruction comm_instruction(K kind, int rank, int micro_batch, int peer) {
  return {kind, micro_batch, rank, peer, 0, -1, {4, 4}};
}

// The outcome of a dry run that must fail on communication.
CommOutcome comm_outcome(const ExecutionPlan& plan, bool data_flow, const std::string& expected_text) {
  try {
    dry_run({&plan}, {.context = "execution plan", .data_flow = data_flow});
  } catch (const comm_failure& failure) {
    CHECK_MESSAGE(std::string(failure.what()).find(expected_text) != std::string::npos, failure.what());
    return failure.outcome;
  }
  FAIL("the dry run completed");
  return CommOutcome::completes;
}

// Records what the interpreter asks of a backend and a transport.
struct RecordingBackend {
  using Stamp = int;
  std::vector<std::pair<int, int>> forwards, backwards;  // (rank, micro-batch)
  int loads = 0;
  void load_input(int /*rank*/, int /*micro_batch*/, int /*slot*/) { ++loads; }
  void forward(int rank, int micro_batch, int /*input*/, int /*output*/) { forwards.emplace_back(rank, micro_batch); }
  void backward(int rank, int micro_batch, int /*grad*/, int /*output*/) { backwards.emplace_back(rank, micro_batch); }
  [[nodiscard]] Stamp stamp(int /*rank*/) const { return 0; }
  [[nodiscard]] double seconds(Stamp /*stamp*/) const { return 0; }
};
struct RecordingTransport {
  std::vector<std::pair<Transfer, Transfer>> pairs;
  int posts = 0, waits = 0;
  void post(const Transfer& /*transfer*/) { ++posts; }
  void transfer(const Transfer& send, const Transfer& receive) { pairs.emplace_back(send, receive); }
  void wait(const Transfer& /*transfer*/) { ++waits; }
};
struct SelfPairing {
  static constexpr bool pairs_itself = true;
  void post(const Transfer& /*transfer*/) {}
  void wait(const Transfer& /*transfer*/) {}
};
struct NoWait {
  void post(const Transfer& /*transfer*/) {}
  void transfer(const Transfer& /*send*/, const Transfer& /*receive*/) {}
};

}  // namespace

static_assert(Backend<DryRunBackend> && Backend<RecordingBackend>);
static_assert(Transport<DryRunTransport> && Transport<RecordingTransport>);
static_assert(Transport<SelfPairing>, "a transport that pairs itself needs no transfer()");
static_assert(!Transport<NoWait> && !Backend<DryRunTransport>);

TEST_CASE("interpreter: runs a planned plan, pairing every send with its receive in issue order") {
  const auto [problem, plan] = two_stage_plan();
  RecordingBackend backend;
  RecordingTransport transport;
  Interpreter<RecordingBackend, RecordingTransport> interpreter({&plan}, backend, transport);
  interpreter.run();
  CHECK(backend.loads == 3);
  CHECK(backend.forwards.size() == 6);
  CHECK(backend.backwards.size() == 6);
  REQUIRE(transport.pairs.size() == 6);  // three activations down, three gradients up
  CHECK(transport.posts == 12);
  CHECK(transport.waits == 12);
  for (const auto& [send, receive] : transport.pairs) {
    CHECK(send.send);
    CHECK_FALSE(receive.send);
    CHECK(send.peer == receive.rank);
    CHECK(receive.peer == send.rank);
    CHECK(send.micro_batch == receive.micro_batch);
    CHECK(send.activation == receive.activation);
    CHECK(send.shape == receive.shape);
  }
  const auto timings = interpreter.timings();
  CHECK(timings.size() == 2);
  CHECK(timings[0].size() == plan.ranks[0].size());
}

TEST_CASE("interpreter: the dry run accepts every plan the planners make") {
  Rng rng(11);
  for (int t = 0; t < 300; ++t) {
    const int c = static_cast<int>(rng.uniform_int(1, 5));
    const int m = static_cast<int>(rng.uniform_int(1, 8));
    const Problem problem = problem_of(rng, m, c);
    for (const ScheduleKind kind : {ScheduleKind::cyclic, ScheduleKind::one_f_one_b}) {
      const PipelineSchedule schedule = schedule_pipeline(problem, {kind, rng(), 0});
      CHECK_NOTHROW(dry_run({&schedule.plan}));
      CHECK_NOTHROW(validate(schedule.plan, problem));
      CHECK(check_deadlock(schedule.plan).ok());
    }
  }
  // Several pipelines in one run: ranks numbered pipeline by pipeline, each peer within its own pipeline.
  const auto [problem, plan] = two_stage_plan();
  const PipelineSchedule other = schedule_pipeline(problem_of(rng, 4, 3));
  CHECK_NOTHROW(dry_run({&plan, &other.plan, &plan}));
}

TEST_CASE("interpreter: the dry-run validator rejects each class of broken plan") {
  const auto [problem, good] = two_stage_plan();
  REQUIRE_NOTHROW(validate(good, problem));
  ExecutionPlan plan = good;

  SUBCASE("an unpaired send: its receiver never posts the receive") {
    plan = {2, 1, 1, {{comm_instruction(K::send_act_start, 0, 0, 1), comm_instruction(K::send_act_wait, 0, 0, 1)}, {}}};
    CHECK(comm_outcome(plan, false, "which has finished without matching it") == CommOutcome::unmatched);
    plan.ranks[0].pop_back();
    CHECK(comm_outcome(plan, false, "is never matched") == CommOutcome::unmatched);
  }
  SUBCASE("sizes that differ between a send and its receive") {
    plan.ranks[0][find(plan.ranks[0], K::send_act_start, 0)].shape.rows += 1;
    CHECK(comm_outcome(plan, true, "mismatch: the send of act 0 on rank 0 would pair with the receive of act 0") ==
          CommOutcome::mismatch);
    CHECK_THROWS_WITH_AS(validate(plan, problem), doctest::Contains("has shape"), invalid_plan);
  }
  SUBCASE("sends issued out of order pair with the wrong receives") {
    std::vector<Instruction>& list = plan.ranks[0];
    std::swap(list[find(list, K::send_act_start, 0)].micro_batch, list[find(list, K::send_act_start, 1)].micro_batch);
    CHECK_THROWS_AS(validate(plan, problem), invalid_plan);
  }
  SUBCASE("a slot reused while live") {
    std::vector<Instruction>& list = plan.ranks[0];
    const int live = list[find(list, K::forward, 0)].output;  // held until the backward of micro-batch 0
    list[find(list, K::forward, 1)].output = live;
    const std::string expected =
        "writes slot " + std::to_string(live) + ", which still holds a tensor of micro-batch 0";
    CHECK_THROWS_WITH_AS(validate(plan, problem), doctest::Contains(expected.c_str()), invalid_plan);
  }
  SUBCASE("a sent slot freed before the send's Wait") {
    std::vector<Instruction>& list = plan.ranks[1];
    const std::size_t wait = find(list, K::send_grad_wait, 0);
    REQUIRE(list[wait + 1].kind == K::free_buffer);
    std::swap(list[wait], list[wait + 1]);
    CHECK_THROWS_WITH_AS(validate(plan, problem), doctest::Contains("before the Wait of its transfer"), invalid_plan);
  }
  SUBCASE("a received tensor read before its Wait") {
    std::vector<Instruction>& list = plan.ranks[1];
    const std::size_t wait = find(list, K::recv_act_wait, 0);
    std::swap(list[wait], list[wait + 1]);
    CHECK_THROWS_WITH_AS(validate(plan, problem), doctest::Contains("its receive has not been waited for"),
                         invalid_plan);
  }
  SUBCASE("a slot still live at the end") {
    std::vector<Instruction>& list = plan.ranks[0];
    REQUIRE(list.back().kind == K::free_buffer);
    list.pop_back();
    CHECK_THROWS_WITH_AS(validate(plan, problem), doctest::Contains("ends with slot"), invalid_plan);
  }
  SUBCASE("a wait without its start, and a start issued twice") {
    std::vector<Instruction>& list = plan.ranks[1];
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(find(list, K::recv_act_start, 0)));
    CHECK_THROWS_WITH_AS(validate(plan, problem), doctest::Contains("never started"), invalid_plan);
    plan = good;
    plan.ranks[0].insert(plan.ranks[0].begin() + 1, plan.ranks[0][find(plan.ranks[0], K::load_input, 0)]);
    CHECK_THROWS_WITH_AS(validate(plan, problem), doctest::Contains("loads its input twice"), invalid_plan);
  }
  SUBCASE("two sends at the heads of two ranks' queues: a deadlock of two") {
    // Rank 1 posts the gradient of micro-batch 0 before receiving the activation of micro-batch 1, which rank 0 has
    // already sent (DynaPipe Fig. 8b).
    std::vector<Instruction>& list = plan.ranks[1];
    move_after(list, find(list, K::recv_act_start, 1), find(list, K::send_grad_start, 0));
    CHECK(comm_outcome(plan, true, "can never pair") == CommOutcome::deadlock);
    CHECK(check_deadlock(plan).cycle == std::vector<int>{0, 1});
    CHECK_THROWS_WITH_AS(validate(plan, problem), doctest::Contains("execution plan: rank "), invalid_plan);
  }
  SUBCASE("a cycle of blocked ranks") {
    plan = {3, 1, 1, {}};
    for (int r = 0; r < 3; ++r)
      plan.ranks.push_back({comm_instruction(K::recv_act_start, r, 0, (r + 2) % 3),
                            comm_instruction(K::recv_act_wait, r, 0, (r + 2) % 3),
                            comm_instruction(K::send_act_start, r, 0, (r + 1) % 3),
                            comm_instruction(K::send_act_wait, r, 0, (r + 1) % 3)});
    CHECK(comm_outcome(plan, false, "the ranks wait on each other forever: rank 0") == CommOutcome::deadlock);
    CHECK(check_deadlock(plan).cycle == std::vector<int>{0, 2, 1});
  }
  SUBCASE("pipeline structure: a peer that is not the neighbour, a forward without its output") {
    plan.ranks[0][find(plan.ranks[0], K::send_act_start, 0)].peer = 0;
    CHECK_THROWS_WITH_AS(validate(plan, problem), doctest::Contains("has peer 0"), invalid_plan);
    plan = good;
    plan.ranks[0][find(plan.ranks[0], K::forward, 0)].output = -1;
    CHECK_THROWS_WITH_AS(validate(plan, problem), doctest::Contains("has output slot -1"), invalid_plan);
  }
}

TEST_CASE("interpreter: lanes of a stage pair with the same lane of its neighbours, and compute groups meet") {
  const auto [problem, plan] = two_stage_plan();
  // Two lanes per stage, placed out of order: stage 0 on ranks 5 and 2, stage 1 on ranks 0 and 3; rank 1 and 4 idle.
  const std::vector<PipelineRanks> pipelines{{&plan, {{5, 2}, {0, 3}}}};
  std::vector<ComputeGroup> groups;
  for (int i = 0; i < plan.micro_batches; ++i) {
    groups.push_back({{{5, i}, {2, i}}});
    groups.push_back({{{0, i}, {3, i}}});
  }
  RecordingBackend backend;
  RecordingTransport transport;
  Interpreter<RecordingBackend, RecordingTransport> interpreter(pipelines, groups, backend, transport);
  interpreter.run();
  CHECK(backend.forwards.size() == 12);
  REQUIRE(transport.pairs.size() == 12);
  for (const auto& [send, receive] : transport.pairs) {
    const bool lane0 = send.rank == 5 || send.rank == 0;
    CHECK((receive.rank == 5 || receive.rank == 0) == lane0);  // lane 0 talks to lane 0 only
  }
  CHECK(interpreter.finished(1));  // no pipeline names it
  CHECK(interpreter.timings()[1].empty());
  CHECK(interpreter.where(2).find("rank 2 (pipeline 0 stage 0 lane 1)") == 0);
}

TEST_CASE("interpreter: compute groups that wait for each other are a deadlock, and bad tables are refused") {
  const auto [problem, plan] = two_stage_plan();
  const std::vector<PipelineRanks> two{{&plan, {}}, {&plan, {}}};
  // Pipeline 0's micro-batch 0 computes with pipeline 1's micro-batch 1 and the other way round: each forward waits
  // for a member that waits for the other.
  const std::vector<ComputeGroup> crosswise{{{{0, 0}, {2, 1}}}, {{{0, 1}, {2, 0}}}};
  try {
    dry_run(two, crosswise);
    FAIL("the dry run completed");
  } catch (const comm_failure& failure) {
    CHECK(failure.outcome == CommOutcome::deadlock);
    CHECK(std::string(failure.what()).find("wait on each other forever") != std::string::npos);
  }
  CHECK_NOTHROW(dry_run(two, {{{{0, 0}, {2, 0}}}, {{{0, 1}, {2, 1}}}}));
  CHECK_THROWS_WITH_AS(dry_run(two, {{{{0, 0}, {2, 0}}}, {{{0, 0}, {3, 0}}}}), doctest::Contains("two compute groups"),
                       invalid_plan);
  CHECK_THROWS_WITH_AS(dry_run(two, {{{{0, 9}, {2, 0}}}}), doctest::Contains("names micro-batch 9 of rank 0"),
                       invalid_plan);
  CHECK_THROWS_WITH_AS(dry_run({{&plan, {{0}, {0}}}}, {}), doctest::Contains("rank 0 runs two stages"), invalid_plan);
  CHECK_THROWS_WITH_AS(dry_run({{&plan, {{0, 1}, {2}}}}, {}), doctest::Contains("different lane counts"), invalid_plan);
  CHECK_THROWS_WITH_AS(dry_run({{&plan, {{0}}}}, {}), doctest::Contains("names ranks of 1 stages for 2"), invalid_plan);
  CHECK_THROWS_WITH_AS(dry_run({{&plan, {{-1}, {0}}}}, {}), doctest::Contains("rank -1 outside"), invalid_plan);
}
