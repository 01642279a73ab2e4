#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/compare/compare.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/readers.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/plan/layout_moves.hpp"
#include "sluice/plan/planner.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/plan/planner.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"

using namespace sluice;
using namespace std::chrono_literals;
using plan::Planned;
using plan::Planner;
using plan::PlannerOptions;

namespace {

// LLaMA2-7B on 16 GPUs, batches of about 20K tokens of the bundled man pages: each plan takes milliseconds.
const cost::Profile& profile16() {
  static const cost::Profile profile =
      io::read_document<cost::Profile>(io::resolve_data_file("llama2-7b", "profiles")).with_gpus(16);
  return profile;
}

const std::vector<Strategy>& candidates16() {
  static const std::vector<Strategy> candidates = {Strategy::parse("4*tp4pp1"),
                                                   Strategy::parse("1*tp4pp1+1*tp2pp1+5*tp1pp2")};
  return candidates;
}

// The planner's mechanics are the same for any plan: a cheap one here (1F1B, the V step charged, no layout moves).
const plan::Options cheap{.dispatch = {.trials = 8, .seed = 7},
                          .schedule = {.kind = schedule::ScheduleKind::one_f_one_b, .seed = 1, .clusters = 0},
                          .problem = {},
                          .layout_moves = plan::LayoutMoves::none,
                          .v_step = plan::VStep::on};

const plan::IterationPlanner& planner16() {
  static const plan::IterationPlanner planner(profile16(), candidates16(), cheap);
  return planner;
}

std::vector<std::vector<Sequence>> batches(int count) {
  const data::LengthDataset dataset =
      data::LengthDataset(data::read_lengths(io::resolve_data_file("man-pages", "lengths")), "man-pages")
          .truncated(16384);
  data::BatchSampler sampler(dataset, {.tokens_per_batch = 20'000, .seed = 3});
  std::vector<std::vector<Sequence>> result;
  for (int k = 0; k < count; ++k) result.push_back(sampler.next().sequences);
  return result;
}

// Hands out `batches` in order and counts the calls; records the largest lead over what the consumer holds.
struct CountingSource {
  std::vector<std::vector<Sequence>> batches;
  std::atomic<std::int64_t> pulled{0};
  std::atomic<std::int64_t> consumed{0};  // the consumer's count of next() calls returned
  std::atomic<std::int64_t> lead{0};      // the largest (pulled − consumed) seen inside the source

  plan::BatchSource source() {
    return [this]() -> std::optional<std::vector<Sequence>> {
      const std::int64_t index = pulled.load();
      const std::int64_t ahead = index + 1 - consumed.load();
      std::int64_t seen = lead.load();
      while (ahead > seen && !lead.compare_exchange_weak(seen, ahead)) {
      }
      if (index >= static_cast<std::int64_t>(batches.size())) return std::nullopt;
      pulled.store(index + 1);
      return batches[static_cast<std::size_t>(index)];
    };
  }
};

std::vector<plan::SimulatedIteration> synchronous(const std::vector<std::vector<Sequence>>& all) {
  std::vector<plan::SimulatedIteration> plans;
  for (const auto& batch : all) plans.push_back(planner16().plan(batch));
  return plans;
}

template <class Predicate>
bool eventually(Predicate done) {
  for (int tries = 0; tries < 2000 && !done(); ++tries) std::this_thread::sleep_for(5ms);
  return done();
}

}  // namespace

TEST_CASE("planner: results in iteration order equal a synchronous loop, whatever threads and lookahead") {
  const auto all = batches(10);
  const auto expected = synchronous(all);
  for (const int threads : {1, 2, 4}) {
    for (const int lookahead : {1, 3}) {
      CAPTURE(threads);
      CAPTURE(lookahead);
      CountingSource counting{.batches = all};
      auto planner = plan::plan_ahead(planner16(), counting.source(), {.lookahead = lookahead, .threads = threads});
      for (std::size_t k = 0; k < all.size(); ++k) {
        auto planned = planner.next();
        REQUIRE(planned.has_value());
        counting.consumed.fetch_add(1);
        CHECK(planned->iteration == static_cast<std::int64_t>(k));
        CHECK(planned->batch == all[k]);
        CHECK(planned->plan == expected[k]);
        CHECK_NOTHROW(planner16().validate(planned->plan, planned->batch));
        // Never more than `lookahead` pulled beyond what next() has delivered.
        CHECK(counting.pulled.load() <= static_cast<std::int64_t>(k) + 1 + lookahead);
      }
      CHECK_FALSE(planner.next().has_value());
      CHECK_FALSE(planner.next().has_value());
      // Inside the source, next() may have delivered one more than the consumer has counted.
      CHECK(counting.lead.load() <= lookahead + 1);
      const plan::PlannerWaits waits = planner.waits();
      CHECK(waits.calls == static_cast<std::int64_t>(all.size()) + 2);
      CHECK(waits.waited <= waits.calls);
      CHECK(waits.seconds >= waits.max_seconds);
    }
  }
}

TEST_CASE("planner: the plans a trainer gets are the comparison's sluice plans, whatever the threads") {
  // The comparison's setting, with its own proposed candidates: what sluice simulate reports is what is planned.
  const data::LengthDataset dataset =
      data::LengthDataset(data::read_lengths(io::resolve_data_file("man-pages", "lengths")), "man-pages")
          .truncated(16384);
  const compare::Options options{.profile = profile16(),
                                 .context = 16384,
                                 .tokens = 20'000,
                                 .cross_node_tp = false,
                                 .problem = {.hidden = profile16().spec().model.hidden},
                                 .dispatch = {.trials = 8},
                                 .seed = 3};
  const auto all = batches(3);
  compare::ChosenPlans chosen;
  const compare::Comparison comparison = compare::compare_systems(options, dataset, std::span(all), {}, &chosen);
  REQUIRE(chosen.sluice.size() == all.size());
  const plan::IterationPlanner planner(profile16(), comparison.candidates, compare::planner_options(options));
  for (const int threads : {1, 3}) {
    CAPTURE(threads);
    CountingSource counting{.batches = all};
    auto ahead = plan::plan_ahead(planner, counting.source(), {.lookahead = 2, .threads = threads});
    for (std::size_t k = 0; k < all.size(); ++k) {
      auto planned = ahead.next();
      REQUIRE(planned.has_value());
      CHECK(planned->plan == chosen.sluice[k]);
      // The iteration the comparison charged: the same makespan and strategy.
      const compare::IterationOutcome& outcome = comparison.systems[compare::System::sluice].iterations[k];
      CHECK(outcome.strategy == planned->plan.plan.strategy.name());
      CHECK(outcome.seconds - outcome.switching == planned->plan.schedule.makespan);
    }
    CHECK_FALSE(ahead.next().has_value());
  }
}

TEST_CASE("planner: a plan function seeded by the iteration index equals the synchronous loop") {
  const auto all = batches(8);
  auto seeded = [](std::int64_t iteration, std::span<const Sequence> batch) {
    const assign::PlanOptions options{.dispatch = {.trials = 8, .seed = static_cast<std::uint64_t>(iteration)},
                                      .candidate_overhead = {}};
    return assign::plan_iteration(batch, candidates16(), profile16(), options);
  };
  CountingSource counting{.batches = all};
  Planner<assign::IterationPlan> planner(counting.source(), seeded, {.lookahead = 3, .threads = 3});
  for (std::size_t k = 0; k < all.size(); ++k) {
    auto planned = planner.next();
    REQUIRE(planned.has_value());
    CHECK(planned->plan == seeded(static_cast<std::int64_t>(k), all[k]));
  }
  CHECK_FALSE(planner.next().has_value());
}

TEST_CASE("planner: the window fills to `lookahead` and no further while the consumer waits") {
  const auto all = batches(12);
  for (const int threads : {1, 4}) {
    CAPTURE(threads);
    CountingSource counting{.batches = all};
    auto planner = plan::plan_ahead(planner16(), counting.source(), {.lookahead = 3, .threads = threads});
    REQUIRE(eventually([&] { return counting.pulled.load() == 3; }));
    std::this_thread::sleep_for(30ms);
    CHECK(counting.pulled.load() == 3);
    REQUIRE(planner.next().has_value());
    counting.consumed.fetch_add(1);
    REQUIRE(eventually([&] { return counting.pulled.load() == 4; }));
    std::this_thread::sleep_for(30ms);
    CHECK(counting.pulled.load() == 4);
  }
}

TEST_CASE("planner: a planning error reaches the consumer at its iteration, and later ones still come") {
  auto all = batches(6);
  const std::int64_t bad = 3;
  // Longer than the MaxLen of every candidate: plan_iteration raises invalid_input.
  all[bad].emplace_back(1'000'000'000, 1'000'000);
  for (const int threads : {1, 3}) {
    CAPTURE(threads);
    CountingSource counting{.batches = all};
    auto planner = plan::plan_ahead(planner16(), counting.source(), {.lookahead = 4, .threads = threads});
    for (std::int64_t k = 0; k < bad; ++k) {
      auto planned = planner.next();
      REQUIRE(planned.has_value());
      CHECK(planned->iteration == k);
    }
    CHECK_THROWS_AS(planner.next(), invalid_input);
    for (std::int64_t k = bad + 1; k < static_cast<std::int64_t>(all.size()); ++k) {
      auto planned = planner.next();
      REQUIRE(planned.has_value());
      CHECK(planned->iteration == k);
    }
    CHECK_FALSE(planner.next().has_value());
  }
}

TEST_CASE("planner: an error of the source is raised at its iteration and ends the run") {
  const auto all = batches(3);
  std::size_t given = 0;
  Planner<std::size_t> planner(
      [&]() -> std::optional<std::vector<Sequence>> {
        if (given == all.size()) throw std::runtime_error("source broke");
        return all[given++];
      },
      [](std::int64_t, std::span<const Sequence> batch) { return batch.size(); }, {.lookahead = 2, .threads = 2});
  for (std::size_t k = 0; k < all.size(); ++k) {
    auto planned = planner.next();
    REQUIRE(planned.has_value());
    CHECK(planned->plan == all[k].size());
  }
  CHECK_THROWS_WITH_AS(planner.next(), "source broke", std::runtime_error);
  CHECK_FALSE(planner.next().has_value());
}

TEST_CASE("planner: an empty source ends at once") {
  auto planner = plan::plan_ahead(planner16(), [] { return std::optional<std::vector<Sequence>>(); },
                                  {.lookahead = 2, .threads = 3});
  CHECK_FALSE(planner.next().has_value());
  CHECK_FALSE(planner.next().has_value());
}

TEST_CASE("planner: destruction mid-run terminates, with a slow consumer or one that never consumes") {
  const auto all = batches(20);
  SUBCASE("never consumes") {
    CountingSource counting{.batches = all};
    {
      auto planner = plan::plan_ahead(planner16(), counting.source(), {.lookahead = 2, .threads = 2});
      REQUIRE(eventually([&] { return counting.pulled.load() == 2; }));
    }
    CHECK(counting.pulled.load() == 2);
  }
  SUBCASE("slow consumer") {
    CountingSource counting{.batches = all};
    {
      auto planner = plan::plan_ahead(planner16(), counting.source(), {.lookahead = 3, .threads = 4});
      for (int k = 0; k < 3; ++k) {
        REQUIRE(planner.next().has_value());
        std::this_thread::sleep_for(10ms);
      }
    }
    CHECK(counting.pulled.load() <= 6);
  }
  SUBCASE("stop() from another thread wakes a waiting next()") {
    // The only plan finishes after next() has returned, so next() can return only because of stop().
    std::atomic<bool> returned{false};
    Planner<int> planner([] { return std::optional<std::vector<Sequence>>(std::vector<Sequence>{Sequence(0, 1)}); },
                         [&](std::int64_t, std::span<const Sequence>) {
                           returned.wait(false);
                           return 1;
                         },
                         {.lookahead = 1, .threads = 1});
    std::jthread stopper([&] {
      std::this_thread::sleep_for(20ms);
      planner.stop();
    });
    CHECK_FALSE(planner.next().has_value());
    returned = true;
    returned.notify_all();
    stopper.join();
    planner.stop();
    CHECK_FALSE(planner.next().has_value());
  }
}

TEST_CASE("planner: bad options and inputs raise invalid_input naming them") {
  const auto source = [] { return std::optional<std::vector<Sequence>>(); };
  const auto plan = [](std::int64_t, std::span<const Sequence>) { return 0; };
  CHECK_THROWS_WITH_AS(Planner<int>(source, plan, {.lookahead = 0, .threads = 1}),
                       "planner: lookahead must be in [1, 64], got 0", invalid_input);
  CHECK_THROWS_WITH_AS(Planner<int>(source, plan, {.lookahead = 65, .threads = 1}),
                       "planner: lookahead must be in [1, 64], got 65", invalid_input);
  CHECK_THROWS_WITH_AS(Planner<int>(source, plan, {.lookahead = 1, .threads = 0}),
                       "planner: threads must be in [1, 256], got 0", invalid_input);
  CHECK_THROWS_WITH_AS(Planner<int>(source, plan, {.lookahead = 1, .threads = 257}),
                       "planner: threads must be in [1, 256], got 257", invalid_input);
  CHECK_THROWS_WITH_AS(Planner<int>(plan::BatchSource(), plan, {}), "planner: the batch source is empty",
                       invalid_input);
  CHECK_THROWS_WITH_AS(Planner<int>(source, Planner<int>::PlanFunction(), {}), "planner: the plan function is empty",
                       invalid_input);
  CHECK_THROWS_WITH_AS(plan::IterationPlanner(profile16(), {}, cheap), "plan: no candidate strategies", invalid_input);
  plan::Options no_trials = cheap;
  no_trials.dispatch.trials = 0;
  CHECK_THROWS_WITH_AS(plan::IterationPlanner(profile16(), candidates16(), no_trials),
                       "dispatch: trials must be >= 1, got 0", invalid_input);
}

TEST_CASE("layout moves: a candidate pays its pull and push beyond the all-gather of its own layout") {
  const shard::Model model = shard::llama_like(profile16().spec().model);
  const shard::Cluster cluster = plan::cluster_of(profile16());
  const shard::PlacementOptions placing{.gpus_per_node = cluster.gpus_per_node};
  const shard::OptimizerLayout sharded = shard::sharded_layout(16, model.layers);
  const std::vector<Strategy> candidates = {Strategy::parse("16*tp1pp1"), Strategy::parse("8*tp2pp1"),
                                            Strategy::parse("1*tp4pp1+1*tp2pp1+5*tp1pp2")};
  const std::vector<double> moves = plan::layout_move_seconds(profile16(), candidates);
  REQUIRE(moves.size() == candidates.size());
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    CAPTURE(candidates[k].name());
    const double moved = plan::pull_and_push(shard::iteration_cost(sharded, candidates[k], model, cluster, placing));
    const double own =
        plan::pull_and_push(shard::switching_cost(candidates[k], candidates[k], 16, model, cluster, placing));
    CHECK(moves[k] == moved - own);
    CHECK(moves[k] < moved);
  }
  // One GPU per replica: rank r's optimizer segment is its own layout's, so the pull is that all-gather exactly.
  CHECK(moves[0] == 0);
  CHECK(moves[1] > 0);
  CHECK(moves[2] > 0);
}
