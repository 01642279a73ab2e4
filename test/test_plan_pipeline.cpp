// The whole DynaPipe pipeline planner (order → DP → replica balancing → schedule per replica) and the
// scheduling of Hydraulis iteration plans.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "document_checks.hpp"
#include "fixtures.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/compare/bound.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/microbatch/baselines.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/orders.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice/schedule/simulate.hpp"

using namespace sluice;

namespace {

schedule::PipelinePlanOptions options_for(const microbatch::StageCostSetup& setup, int stages, int replicas) {
  schedule::PipelinePlanOptions options;
  options.stages = stages;
  options.replicas = replicas;
  options.micro_batch_memory = setup.memory_limit;
  options.problem = {.hidden = 4096, .element_bytes = 2, .link = {1e-5, 1e11}};
  return options;
}

}  // namespace

TEST_CASE("plan_pipeline: valid, every sample once, makespan of the slowest replica, deterministic") {
  for (const int pp : {2, 4}) {
    const microbatch::StageCostSetup setup = microbatch::stage_cost(profile7b().at(Scheme(1, pp)));
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
      CAPTURE(pp);
      CAPTURE(seed);
      const int replicas = 1 + static_cast<int>(seed % 4);
      const auto samples = microbatch::samples_of(batch_of(seed, 40'000 * replicas, 8192));
      schedule::PipelinePlanOptions options = options_for(setup, pp, replicas);
      options.schedule.kind = seed % 2 == 0 ? schedule::ScheduleKind::cyclic : schedule::ScheduleKind::one_f_one_b;
      const schedule::PipelineRunPlan plan =
          schedule::plan_pipeline(std::span<const microbatch::Sample>(samples), setup.model, options);
      CHECK_NOTHROW(schedule::validate(plan, std::span<const microbatch::Sample>(samples), setup.model, options));
      REQUIRE(plan.replicas.size() == static_cast<std::size_t>(replicas));
      std::size_t scheduled = 0;
      for (const schedule::ReplicaSchedule& replica : plan.replicas) {
        scheduled += replica.micro_batches.size();
        if (!replica.micro_batches.empty()) CHECK(replica.schedule.plan.ranks.size() == static_cast<std::size_t>(pp));
      }
      CHECK(scheduled == plan.partition.micro_batches.size());
      CHECK(plan == schedule::plan_pipeline(std::span<const microbatch::Sample>(samples), setup.model, options));
    }
  }
}

TEST_CASE("plan_pipeline: baselines through schedule_partition, and validators reject tampering") {
  const microbatch::StageCostSetup setup = microbatch::stage_cost(profile7b().at(Scheme(1, 4)));
  const auto samples = microbatch::samples_of(batch_of(3, 65'536, 8192));
  const schedule::PipelinePlanOptions options = options_for(setup, 4, 2);
  const std::span<const microbatch::Sample> span(samples);
  const microbatch::PartitionContext context{4, 2, setup.memory_limit};
  const auto ordered = microbatch::order_samples(span, microbatch::Ordering::length);
  const schedule::PipelineRunPlan token_based = schedule::schedule_partition(
      microbatch::token_based(std::span<const microbatch::Sample>(ordered), setup.model, 8192, context), options);
  CHECK_NOTHROW(schedule::validate(token_based, span, setup.model, options));
  const schedule::PipelineRunPlan dp = schedule::plan_pipeline(span, setup.model, options);
  CHECK(dp.partition.objective <= token_based.partition.objective * (1 + 1e-12));

  schedule::PipelineRunPlan broken = dp;
  broken.makespan *= 1.5;
  CHECK_THROWS_AS(schedule::validate(broken, span, setup.model, options), invalid_plan);
  broken = dp;
  broken.replicas.front().problem.micro_batches.front().forward.front() *= 2;
  CHECK_THROWS_AS(schedule::validate(broken, span, setup.model, options), invalid_plan);
  broken = dp;
  std::swap(broken.replicas.front().micro_batches, broken.replicas.back().micro_batches);
  CHECK_THROWS_AS(schedule::validate(broken, span, setup.model, options), invalid_plan);
}

TEST_CASE("plan_pipeline: bad input and infeasible batches") {
  const microbatch::StageCostSetup setup = microbatch::stage_cost(profile7b().at(Scheme(1, 4)));
  const auto samples = microbatch::samples_of(batch_of(2, 30'000, 8192));
  const std::span<const microbatch::Sample> span(samples);
  schedule::PipelinePlanOptions options = options_for(setup, 4, 1);
  options.stage_memory = -1;
  CHECK_THROWS_AS(schedule::plan_pipeline(span, setup.model, options), invalid_input);
  options = options_for(setup, 0, 1);
  CHECK_THROWS_AS(schedule::plan_pipeline(span, setup.model, options), invalid_input);
  options = options_for(setup, 4, 1);
  options.problem.backward_ratio = 0;
  CHECK_THROWS_AS(schedule::plan_pipeline(span, setup.model, options), invalid_input);
  CHECK_THROWS_AS(schedule::plan_pipeline(std::span<const microbatch::Sample>(), setup.model, options_for(setup, 4, 1)),
                  invalid_input);
  // A sample longer than the per-micro-batch memory allows.
  std::vector<microbatch::Sample> too_long = samples;
  too_long.push_back({999'999, 10'000'000, 0});
  CHECK_THROWS_AS(
      schedule::plan_pipeline(std::span<const microbatch::Sample>(too_long), setup.model, options_for(setup, 4, 1)),
      infeasible);
  // Stages that cannot hold even one micro-batch: no schedule fits.
  options = options_for(setup, 4, 1);
  options.stage_memory = 1;
  CHECK_THROWS_AS(schedule::plan_pipeline(span, setup.model, options), infeasible);
}

TEST_CASE("schedule_iteration: every pipeline of a Hydraulis plan scheduled; 1F1B within the packing estimate") {
  const cost::Profile profile = profile7b().with_gpus(16);
  const std::vector<Strategy> candidates = {Strategy::parse("2*tp2pp2+2*tp1pp4"), Strategy::parse("4*tp1pp4"),
                                            Strategy::parse("1*tp4pp2+4*tp1pp2")};
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    CAPTURE(seed);
    const auto batch = batch_of(seed, 120'000, 16384);
    const assign::IterationPlan plan = assign::plan_iteration(batch, candidates, profile);
    for (const auto kind : {schedule::ScheduleKind::one_f_one_b, schedule::ScheduleKind::cyclic}) {
      // Free links: the estimate (max micro-batch time)·(PP − 1 + V) bounds 1F1B, whose makespan is a longest path
      // that only grows when every micro-batch takes the slowest one's time.
      const plan::IterationSchedule scheduled = plan::schedule_iteration(plan, profile, {.kind = kind});
      CHECK_NOTHROW(plan::validate(scheduled, plan, profile));
      REQUIRE(scheduled.pipelines.size() == plan.pipelines.size());
      for (std::size_t j = 0; j < plan.pipelines.size(); ++j) {
        if (!scheduled.pipelines[j]) continue;
        const schedule::Simulation& simulation = scheduled.pipelines[j]->schedule.simulation;
        CHECK(simulation.makespan <= plan.pipelines[j].estimate * (1 + 1e-9));
        if (kind == schedule::ScheduleKind::cyclic) {
          const auto& problem = scheduled.pipelines[j]->problem;
          const schedule::Simulation one_f_one_b = schedule::simulate(
              problem,
              schedule::one_f_one_b(schedule::identity_injection(problem.micro_batches.size()), problem.stages));
          CHECK(simulation.makespan <= one_f_one_b.makespan * (1 + 1e-12));
        }
      }
      CHECK(scheduled.makespan <= plan.estimate * (1 + 1e-9));
    }
  }
}

TEST_CASE("schedule problems: bad input") {
  const cost::Profile profile = profile7b().with_gpus(16);
  const auto batch = batch_of(5, 50'000, 16384);
  const std::vector<Strategy> candidates = {Strategy::parse("4*tp1pp4")};
  const assign::IterationPlan plan = assign::plan_iteration(batch, candidates, profile);
  const assign::PipelinePlan& pipeline = plan.pipelines.front();
  CHECK_THROWS_AS(schedule::problem_for(pipeline, profile.at(Scheme(1, 2)), {}), invalid_input);
  cost::SchemeCost no_memory = profile.at(pipeline.scheme);
  no_memory.memory.reset();
  CHECK_THROWS_AS(schedule::problem_for(pipeline, no_memory, {}), invalid_input);
  assign::PipelinePlan idle = pipeline;
  idle.micro_batches.clear();
  CHECK_THROWS_AS(schedule::problem_for(idle, profile.at(pipeline.scheme), {}), invalid_input);
  CHECK_THROWS_AS(schedule::problem_for(pipeline, profile.at(pipeline.scheme),
                                        {.hidden = 0, .element_bytes = 2, .link = {}, .backward_ratio = 2}),
                  invalid_input);
  const microbatch::Partition partition{microbatch::Layout::packed, {}, 0, 0};
  const std::vector<std::size_t> outside = {0};
  CHECK_THROWS_AS(schedule::problem_for(partition, outside, 2, 1e9, {}, {}), invalid_input);
}

namespace {

// The 7B profile with every pipelined scheme's last stage doing a quarter of b and half of c on its own.
cost::Profile with_last_stage_work(const cost::Profile& profile) {
  cost::ProfileSpec spec = profile.spec();
  for (cost::SchemeEntry& entry : spec.schemes)
    if (entry.scheme.pp() > 1) entry.last_stage = cost::LastStageWork(entry.latency.b() / 4, entry.latency.c() / 2);
  return cost::Profile(spec);
}

bool same_seconds(double x, double y) { return std::abs(x - y) <= 1e-12 * std::abs(y); }

}  // namespace

TEST_CASE("schedule problems: the last stage runs T, the others T less the last stage's own work") {
  const cost::Profile uniform = profile7b().with_gpus(16);
  const cost::Profile profile = with_last_stage_work(uniform);
  const std::vector<Strategy> candidates = {Strategy::parse("4*tp1pp4")};
  const auto batch = batch_of(3, 60'000, 8192);
  // The planners price a micro-batch at the last stage's T, so the work changes the schedule, not the plan.
  const assign::IterationPlan plan = assign::plan_iteration(batch, candidates, profile);
  REQUIRE(plan == assign::plan_iteration(batch, candidates, uniform));
  const cost::SchemeCost& scheme = profile.at(Scheme(1, 4));
  const cost::LastStageWork& work = scheme.last_stage;
  REQUIRE(!work.is_zero());
  for (const assign::PipelinePlan& pipeline : plan.pipelines) {
    if (pipeline.micro_batches.empty()) continue;
    const schedule::Problem problem = schedule::problem_for(pipeline, scheme, {});
    const schedule::Problem alike = schedule::problem_for(pipeline, uniform.at(Scheme(1, 4)), {});
    for (std::size_t m = 0; m < problem.micro_batches.size(); ++m) {
      const schedule::MicroBatchCost& cost = problem.micro_batches[m];
      const double seconds = pipeline.micro_batches[m].seconds;
      for (std::size_t stage = 0; stage < 4; ++stage) {
        const double expected = stage == 3 ? seconds : seconds - work.seconds(pipeline.micro_batches[m].tokens);
        CHECK(same_seconds(cost.forward[stage] + cost.backward[stage], expected));
        CHECK(same_seconds(cost.backward[stage], 2 * cost.forward[stage]));
      }
      CHECK(cost.activation == alike.micro_batches[m].activation);
      CHECK(alike.micro_batches[m].forward.back() == cost.forward.back());
    }
    // One micro-batch on free links runs every stage's forward, then every backward: (PP − 1)·(T − work) + T.
    schedule::Problem one = problem;
    one.micro_batches.resize(1);
    const double seconds = pipeline.micro_batches.front().seconds;
    const schedule::Simulation simulation =
        schedule::simulate(one, schedule::one_f_one_b(schedule::identity_injection(1), 4));
    CHECK(same_seconds(simulation.makespan,
                       3 * (seconds - work.seconds(pipeline.micro_batches.front().tokens)) + seconds));
  }
  const plan::IterationSchedule scheduled = plan::schedule_iteration(plan, profile, {});
  CHECK_NOTHROW(plan::validate(scheduled, plan, profile));
  CHECK(scheduled.makespan < plan::schedule_iteration(plan, uniform, {}).makespan);
  // No plan beats the lower bound, which prices the lighter stages too.
  const std::optional<compare::IterationBound> bound = compare::iteration_bound(profile, false, batch);
  REQUIRE(bound.has_value());
  CHECK(bound->seconds <= scheduled.makespan);
  CHECK(bound->seconds <= compare::iteration_bound(uniform, false, batch)->seconds);
  // DynaPipe's partitions: the scheme's work rides in the options, and the validator rebuilds the problems with it.
  const microbatch::StageCostSetup setup = microbatch::stage_cost(scheme);
  CHECK(setup.last_stage == work);
  const auto samples = microbatch::samples_of(batch);
  const std::span<const microbatch::Sample> span(samples);
  schedule::PipelinePlanOptions options = options_for(setup, 4, 2);
  options.last_stage = setup.last_stage;
  const schedule::PipelineRunPlan run = schedule::plan_pipeline(span, setup.model, options);
  CHECK_NOTHROW(schedule::validate(run, span, setup.model, options));
  const schedule::MicroBatchCost& first = run.replicas.front().problem.micro_batches.front();
  CHECK(first.forward.front() < first.forward.back());
  options.last_stage = {};
  CHECK_THROWS_AS(schedule::validate(run, span, setup.model, options), invalid_plan);
  // Work no shorter than a micro-batch leaves the other stages nothing: refused, not scheduled.
  options.last_stage = cost::LastStageWork(0, 1e6);
  CHECK_THROWS_WITH_AS(schedule::plan_pipeline(span, setup.model, options),
                       doctest::Contains("no more than that stage's own work"), invalid_input);
}

TEST_CASE("plan_simulated_iteration: the fastest simulated candidate, valid and deterministic") {
  const cost::Profile profile = profile7b().with_gpus(16);
  // The last candidate holds at most tp1pp8's MaxLen (about 12K tokens), below every batch's longest sequence.
  const std::vector<Strategy> candidates = {Strategy::parse("2*tp2pp2+2*tp1pp4"), Strategy::parse("4*tp2pp2"),
                                            Strategy::parse("1*tp4pp2+4*tp1pp2"), Strategy::parse("2*tp1pp8")};
  const schedule::ProblemOptions problem{.hidden = 4096, .element_bytes = 2, .link = {1e-5, 1e11}, .backward_ratio = 2};
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    CAPTURE(seed);
    auto batch = batch_of(seed, 80'000, 16384);
    batch.emplace_back(1'000'000, 16000);  // longer than the last candidate holds
    const plan::SimulatedIteration iteration =
        plan::plan_simulated_iteration(batch, candidates, profile, {}, {}, problem);
    CHECK_NOTHROW(plan::validate(iteration, batch, candidates, profile, {}, problem));
    REQUIRE(iteration.makespans.size() == candidates.size());
    CHECK_FALSE(iteration.makespans.back().has_value());
    // Each candidate planned and scheduled alone simulates no faster than the one kept.
    for (std::size_t k = 0; k + 1 < candidates.size(); ++k) {
      const assign::IterationPlan alone = assign::plan_iteration(batch, std::span(&candidates[k], 1), profile);
      const double makespan = plan::schedule_iteration(alone, profile, {}, problem).makespan;
      CHECK(iteration.makespans[k] == makespan);
      CHECK(makespan >= iteration.schedule.makespan);
    }
    CHECK(plan::plan_simulated_iteration(batch, candidates, profile, {}, {}, problem).schedule == iteration.schedule);
    // An overhead large enough moves the choice to another candidate.
    assign::PlanOptions penalised;
    penalised.candidate_overhead.assign(candidates.size(), 0.0);
    penalised.candidate_overhead[iteration.chosen] = 1e3;
    const auto moved = plan::plan_simulated_iteration(batch, candidates, profile, penalised, {}, problem);
    CHECK(moved.chosen != iteration.chosen);
    CHECK_NOTHROW(plan::validate(moved, batch, candidates, profile, penalised, problem));
    // A broken choice is caught.
    plan::SimulatedIteration broken = iteration;
    broken.makespans[(iteration.chosen + 1) % 3] = iteration.schedule.makespan / 2;
    CHECK_THROWS_AS(plan::validate(broken, batch, candidates, profile, {}, problem), invalid_plan);
  }
  auto batch = batch_of(1, 80'000, 16384);
  batch.emplace_back(1'000'000, 16000);
  const std::vector<Strategy> short_only = {Strategy::parse("2*tp1pp8")};
  CHECK_THROWS_WITH_AS(plan::plan_simulated_iteration(batch, short_only, profile), doctest::Contains("MaxLen"),
                       invalid_input);
  CHECK_THROWS_AS(plan::plan_simulated_iteration(batch, std::span<const Strategy>{}, profile), invalid_input);
}

using sluice::test::read_back;
using sluice::test::rejects_document;

namespace {

void rejects_truncated(const io::json& document) {
  const std::string text = document.dump();
  CHECK_THROWS_WITH_AS(io::parse(text.substr(0, text.size() - 2), "cut.json"), doctest::Contains("not valid JSON"),
                       invalid_input);
}

}  // namespace

TEST_CASE("pipeline run plan JSON: an exact round trip, still valid; a broken document names the field") {
  const microbatch::StageCostSetup setup = microbatch::stage_cost(profile7b().at(Scheme(1, 2)));
  const auto samples = microbatch::samples_of(batch_of(2, 60'000, 8192));
  const schedule::PipelinePlanOptions options = options_for(setup, 2, 3);
  const schedule::PipelineRunPlan plan =
      schedule::plan_pipeline(std::span<const microbatch::Sample>(samples), setup.model, options);
  const io::json document = io::to_document(plan);
  CHECK(document.at("format") == "sluice.pipeline_run_plan");
  const schedule::PipelineRunPlan back = read_back(plan);
  CHECK(back == plan);
  CHECK_NOTHROW(schedule::validate(back, std::span<const microbatch::Sample>(samples), setup.model, options));

  io::json broken = document;
  broken.erase("partition");
  rejects_document<schedule::PipelineRunPlan>(broken, "missing field 'partition'");
  broken = document;
  broken["replica_schedules"][1]["problem"]["link"].erase("latency");
  rejects_document<schedule::PipelineRunPlan>(broken, "missing field 'latency'");
  broken = document;
  broken["replica_schedules"][0]["micro_batches"][0] = -1;
  rejects_document<schedule::PipelineRunPlan>(broken, "field 'micro_batches'[0]");
  broken = document;
  broken["makespan"] = "slow";
  rejects_document<schedule::PipelineRunPlan>(broken, "field 'makespan': expected a number");
  rejects_truncated(document);
}

TEST_CASE("iteration schedule and simulated iteration JSON: exact round trips, still valid; broken ones named") {
  const cost::Profile profile = profile7b().with_gpus(16);
  const std::vector<Strategy> candidates = {Strategy::parse("2*tp2pp2+2*tp1pp4"), Strategy::parse("2*tp1pp8")};
  const schedule::ProblemOptions problem{.hidden = 4096, .element_bytes = 2, .link = {1e-5, 1e11}, .backward_ratio = 2};
  auto batch = batch_of(3, 40'000, 16384);
  batch.emplace_back(1'000'000, 16000);  // longer than the last candidate holds: its makespan is null
  const plan::SimulatedIteration iteration =
      plan::plan_simulated_iteration(batch, candidates, profile, {}, {}, problem);
  REQUIRE_FALSE(iteration.makespans.back().has_value());
  const io::json document = io::to_document(iteration);
  CHECK(document.at("format") == "sluice.simulated_iteration");
  CHECK(document.at("makespans").back().is_null());
  const plan::SimulatedIteration back = read_back(iteration);
  CHECK(back == iteration);
  CHECK_NOTHROW(plan::validate(back, batch, candidates, profile, {}, problem));

  // An idle pipeline is null.
  plan::IterationSchedule with_idle = iteration.schedule;
  with_idle.pipelines.emplace_back();
  CHECK(io::to_document(with_idle).at("format") == "sluice.iteration_schedule");
  CHECK(io::to_document(with_idle).at("pipelines").back().is_null());
  CHECK(read_back(with_idle) == with_idle);
  CHECK(read_back(iteration.schedule) == iteration.schedule);
  CHECK_NOTHROW(plan::validate(read_back(iteration.schedule), iteration.plan, profile, problem));

  io::json broken = document;
  broken["makespans"][0] = "fast";
  rejects_document<plan::SimulatedIteration>(broken, "field 'makespans'[0]: expected a number");
  broken = document;
  broken["chosen"] = -1;
  rejects_document<plan::SimulatedIteration>(broken, "field 'chosen'");
  broken = document;
  broken.erase("plan");
  rejects_document<plan::SimulatedIteration>(broken, "missing field 'plan'");
  broken = document;
  broken["schedule"]["pipelines"][0] = 3;
  rejects_document<plan::SimulatedIteration>(broken, "field 'pipelines'[0]");
  broken = io::to_document(iteration.schedule);
  broken["pipelines"][0].erase("schedule");
  rejects_document<plan::IterationSchedule>(broken, "missing field 'schedule'");
  rejects_truncated(document);
  rejects_truncated(io::to_document(iteration.schedule));
}
