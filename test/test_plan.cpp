#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"

using namespace sluice;
using namespace sluice::assign;

namespace {

const cost::Profile& profile64() {
  static const cost::Profile profile =
      io::read_document<cost::Profile>(io::resolve_data_file("llama2-32b", "profiles")).with_gpus(64);
  return profile;
}

const std::vector<Strategy>& candidates64() {
  static const std::vector<Strategy> candidates = {Strategy::parse("1*tp16pp1+6*tp8pp1"), Strategy::parse("4*tp16pp1"),
                                                   Strategy::parse("8*tp8pp1"), Strategy::parse("2*tp16pp1+4*tp8pp1")};
  return candidates;
}

}  // namespace

TEST_CASE("plan_iteration: every plan passes its validator and picks the lowest estimate") {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const auto batch = batch_of(seed, 200'000);
    const IterationPlan plan = plan_iteration(batch, candidates64(), profile64());
    CHECK_NOTHROW(validate(plan, batch, profile64()));
    REQUIRE(plan.candidates.size() == candidates64().size());
    for (std::size_t k = 0; k < candidates64().size(); ++k) {
      CAPTURE(k);
      // 8*tp8pp1 cannot hold the longest sequences; the others can.
      const std::int64_t longest = std::ranges::max(batch, {}, &Sequence::length).length();
      const bool holds = profile64().pipelines(candidates64()[k]).front().max_len >= longest;
      REQUIRE(plan.candidates[k].estimate.has_value() == holds);
      if (!holds) continue;
      // Each candidate's reported estimate is what planning it alone gives.
      const IterationPlan alone = plan_iteration(batch, std::span(candidates64()).subspan(k, 1), profile64());
      CHECK_NOTHROW(validate(alone, batch, profile64()));
      CHECK(*plan.candidates[k].estimate == alone.estimate);
      CHECK(plan.estimate <= alone.estimate);
    }
    CHECK(plan.strategy == candidates64()[plan.chosen]);
    CHECK(plan.dispatch_lower_bound <= plan.dispatch_objective * (1 + 1e-12));
    CHECK(plan.dispatch_objective <= plan.estimate * (1 + 1e-12));
  }
}

TEST_CASE("plan_iteration: the lowest estimate wins, not the fewest pipelines") {
  // A candidate with more pipelines listed second must still be chosen when it is faster.
  const auto batch = batch_of(7, 200'000, profile64().max_len(Scheme(8, 1)));
  const std::vector<Strategy> candidates = {Strategy::parse("4*tp16pp1"), Strategy::parse("8*tp8pp1")};
  const IterationPlan plan = plan_iteration(batch, candidates, profile64());
  REQUIRE(plan.candidates[0].estimate.has_value());
  REQUIRE(plan.candidates[1].estimate.has_value());
  const double first = *plan.candidates[0].estimate;
  const double second = *plan.candidates[1].estimate;
  CHECK(plan.chosen == (second < first ? 1U : 0U));
  CHECK(plan.estimate == std::min(first, second));
}

TEST_CASE("plan_iteration: pipelines are planned in MaxLen order whatever order the strategy was written in") {
  const auto batch = batch_of(3, 200'000);
  const Strategy written({{Scheme(8, 1), 6}, {Scheme(16, 1), 1}});  // the small-MaxLen scheme first
  const IterationPlan plan = plan_iteration(batch, std::vector<Strategy>{written}, profile64());
  CHECK_NOTHROW(validate(plan, batch, profile64()));
  REQUIRE(plan.pipelines.size() == 7);
  CHECK(plan.pipelines[0].scheme == Scheme(16, 1));
  for (std::size_t j = 1; j < plan.pipelines.size(); ++j) {
    CHECK(plan.pipelines[j].scheme == Scheme(8, 1));
    for (const MicroBatch& micro_batch : plan.pipelines[j].micro_batches)
      CHECK(micro_batch.tokens <= profile64().max_len(Scheme(8, 1)));
  }
}

TEST_CASE("plan_iteration: candidates that cannot hold the longest sequence are skipped") {
  const std::int64_t tp8 = profile64().max_len(Scheme(8, 1));
  const std::int64_t tp16 = profile64().max_len(Scheme(16, 1));
  REQUIRE(tp16 > tp8);
  std::vector<Sequence> batch = {Sequence(0, tp8 + 1), Sequence(1, 1000), Sequence(2, 5000)};
  const std::vector<Strategy> candidates = {Strategy::parse("8*tp8pp1"), Strategy::parse("4*tp16pp1")};
  const IterationPlan plan = plan_iteration(batch, candidates, profile64());
  CHECK_FALSE(plan.candidates[0].estimate.has_value());
  CHECK(plan.chosen == 1);
  CHECK_NOTHROW(validate(plan, batch, profile64()));
}

TEST_CASE("plan_iteration: deterministic, and the same for any thread count") {
  const auto batch = batch_of(5, 200'000);
  PlanOptions options;
  const IterationPlan first = plan_iteration(batch, candidates64(), profile64(), options);
  CHECK(plan_iteration(batch, candidates64(), profile64(), options) == first);
  options.dispatch.threads = 2;
  CHECK(plan_iteration(batch, candidates64(), profile64(), options) == first);
  options.dispatch.threads = 3;
  CHECK(plan_iteration(batch, candidates64(), profile64(), options) == first);
}

TEST_CASE("plan_iteration: bad input") {
  const auto batch = batch_of(1, 50'000);
  CHECK_THROWS_WITH_AS(plan_iteration(std::vector<Sequence>{}, candidates64(), profile64()),
                       doctest::Contains("batch is empty"), invalid_input);
  CHECK_THROWS_WITH_AS(plan_iteration(batch, std::vector<Strategy>{}, profile64()), doctest::Contains("no candidate"),
                       invalid_input);
  const std::vector<Sequence> twice = {Sequence(4, 100), Sequence(4, 200)};
  CHECK_THROWS_WITH_AS(plan_iteration(twice, candidates64(), profile64()), doctest::Contains("appears twice"),
                       invalid_input);
  const std::vector<Sequence> too_long = {Sequence(0, 100), Sequence(1, profile64().max_len(Scheme(16, 1)) + 1)};
  CHECK_THROWS_WITH_AS(plan_iteration(too_long, candidates64(), profile64()), doctest::Contains("no candidate holds"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(plan_iteration(batch, std::vector<Strategy>{Strategy::parse("5*tp16pp1")}, profile64()),
                       doctest::Contains("needs 80 GPUs"), invalid_input);
  CHECK_THROWS_AS(plan_iteration(batch, std::vector<Strategy>{Strategy::parse("1*tp3pp1")}, profile64()),
                  invalid_input);
  // NaN coefficients never reach a planner: the profile refuses them.
  auto spec = profile64().spec();
  auto document = io::json(spec);
  document["schemes"][0]["latency"]["a"] = "NaN";
  CHECK_THROWS_AS(document.get<cost::ProfileSpec>(), invalid_input);
  CHECK_THROWS_AS(cost::QuadraticLatency(std::numeric_limits<double>::quiet_NaN(), 0, 0), invalid_input);
}

TEST_CASE("infinite cost estimates are bad input naming the scheme, never an unset choice") {
  // Found by fuzzing: a = 1e300 with 20,000-token sequences made every packing estimate infinite, so no V beat
  // the initial "infinite" best and pack read its choice out of range.
  const cost::SchemeCost huge{Scheme(1, 2), cost::QuadraticLatency(1e300, 0, 0.01), 32768, 1, std::nullopt};
  const std::vector<Sequence> long_ones = {Sequence(0, 20000), Sequence(1, 20000), Sequence(2, 20000)};
  CHECK_THROWS_WITH_AS(pack(long_ones, huge), doctest::Contains("pack: tp1pp2: the estimate of 3 sequences"),
                       invalid_input);
  CHECK_THROWS_AS(pack_with_v(long_ones, huge, 1), invalid_input);
  CHECK_THROWS_AS(pack_fixed_length(long_ones, huge, 32768), invalid_input);
  // Each sequence's time finite (1e308 s), their sum not.
  const std::vector<Sequence> two = {Sequence(0, 10000), Sequence(1, 10000)};
  CHECK_THROWS_WITH_AS(pack(two, huge), doctest::Contains("overflows"), invalid_input);
  const std::vector<cost::SchemeCost> pipelines = {huge};
  CHECK_THROWS_WITH_AS(dispatch_greedy(long_ones, pipelines),
                       doctest::Contains("dispatch: pipeline 0 (tp1pp2): the batch's Eq. 2 bound overflows"),
                       invalid_input);
  // One short sequence still packs: its estimate is finite.
  const std::vector<Sequence> short_one = {Sequence(0, 1)};
  const Packing packing = pack(short_one, huge);
  CHECK(packing.estimate == (1e300 + 0.01) * 2);
  // Through a profile, such coefficients never reach the planners: the profile names itself and the scheme.
  auto document = io::json(profile64().spec());
  document["schemes"][0]["latency"]["a"] = 1e300;
  const std::string expected = "profile llama2-32b: tp" + document["schemes"][0]["tp"].dump() + "pp" +
                               document["schemes"][0]["pp"].dump() + ": latency T(max_len = ";
  CHECK_THROWS_WITH_AS(cost::Profile(document.get<cost::ProfileSpec>()), doctest::Contains(expected.c_str()),
                       invalid_input);
}

TEST_CASE("plan_iteration: a per-candidate overhead is added before choosing") {
  const auto batch = batch_of(2, 200'000);
  const IterationPlan plain = plan_iteration(batch, candidates64(), profile64());
  REQUIRE(plain.overhead == 0);
  // Charging the plain choice more than the gap to every other candidate moves the choice to the next best.
  std::vector<double> overhead(candidates64().size(), 0.0);
  double runner_up = std::numeric_limits<double>::infinity();
  std::size_t runner_up_index = 0;
  for (std::size_t k = 0; k < plain.candidates.size(); ++k)
    if (k != plain.chosen && plain.candidates[k].estimate && *plain.candidates[k].estimate < runner_up) {
      runner_up = *plain.candidates[k].estimate;
      runner_up_index = k;
    }
  REQUIRE(std::isfinite(runner_up));
  overhead[plain.chosen] = runner_up - plain.estimate + 1.0;
  PlanOptions options;
  options.candidate_overhead = overhead;
  const IterationPlan charged = plan_iteration(batch, candidates64(), profile64(), options);
  CHECK_NOTHROW(validate(charged, batch, profile64()));
  CHECK(charged.chosen == runner_up_index);
  CHECK(charged.overhead == 0);
  CHECK(charged.candidates[plain.chosen].overhead == overhead[plain.chosen]);
  // A uniform overhead never changes the choice, only the total.
  options.candidate_overhead.assign(candidates64().size(), 0.25);
  const IterationPlan uniform = plan_iteration(batch, candidates64(), profile64(), options);
  CHECK(uniform.chosen == plain.chosen);
  CHECK(uniform.total() == doctest::Approx(plain.estimate + 0.25));
  const IterationPlan again = io::from_document<IterationPlan>(io::to_document(charged));
  CHECK(again == charged);
  // The validator refuses a choice that the overhead makes worse than another candidate.
  IterationPlan broken = charged;
  broken.candidates[plain.chosen].overhead = 0;
  CHECK_THROWS_AS(validate(broken, batch, profile64()), invalid_plan);

  options.candidate_overhead = {1.0};
  CHECK_THROWS_WITH_AS(plan_iteration(batch, candidates64(), profile64(), options),
                       doctest::Contains("candidate_overhead has 1 entries"), invalid_input);
  options.candidate_overhead.assign(candidates64().size(), 0.0);
  options.candidate_overhead[1] = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(plan_iteration(batch, candidates64(), profile64(), options),
                       doctest::Contains("candidate_overhead[1]"), invalid_input);
  options.candidate_overhead[1] = -1;
  CHECK_THROWS_AS(plan_iteration(batch, candidates64(), profile64(), options), invalid_input);
}

TEST_CASE("fixed-length baseline: best-fit-decreasing bins dealt round-robin") {
  const auto batch = batch_of(2, 200'000);
  const Strategy strategy = Strategy::parse("4*tp16pp1");
  const IterationPlan plan = plan_fixed_length(batch, strategy, profile64(), 32768);
  CHECK_NOTHROW(validate(plan, batch, profile64()));
  std::size_t packs = 0;
  for (const PipelinePlan& pipeline : plan.pipelines) packs += pipeline.micro_batches.size();
  for (const PipelinePlan& pipeline : plan.pipelines) {
    CHECK(pipeline.micro_batches.size() >= packs / 4);
    CHECK(pipeline.micro_batches.size() <= packs / 4 + 1);
    for (const MicroBatch& micro_batch : pipeline.micro_batches) CHECK(micro_batch.tokens <= 32768);
  }
  CHECK_THROWS_WITH_AS(plan_fixed_length(batch, candidates64()[0], profile64(), 32768),
                       doctest::Contains("homogeneous"), invalid_input);
}

TEST_CASE("validate: each invariant, broken on purpose") {
  const auto batch = batch_of(9, 200'000);
  const IterationPlan good = plan_iteration(batch, candidates64(), profile64());
  REQUIRE_NOTHROW(validate(good, batch, profile64()));
  auto first_busy = [](IterationPlan& plan) -> PipelinePlan& {
    return *std::ranges::find_if(plan.pipelines, [](const PipelinePlan& p) { return p.micro_batches.size() >= 2; });
  };
  const std::vector<std::pair<std::string, std::function<void(IterationPlan&)>>> breaks = {
      {"pipelines, strategy", [](IterationPlan& p) { p.pipelines.pop_back(); }},
      {"has index", [](IterationPlan& p) { p.pipelines[1].index = 5; }},
      {"in MaxLen order", [](IterationPlan& p) { std::swap(p.pipelines.front().scheme, p.pipelines.back().scheme); }},
      {"MaxLen", [](IterationPlan& p) { p.pipelines.back().max_len += 128; }},
      {"is empty", [&](IterationPlan& p) { first_busy(p).micro_batches.front().sequence_ids.clear(); }},
      {"not among the sequences",
       [&](IterationPlan& p) { first_busy(p).micro_batches.front().sequence_ids.push_back(1 << 30); }},
      {"already placed",
       [&](IterationPlan& p) {
         auto& pipeline = first_busy(p);
         pipeline.micro_batches[1].sequence_ids.push_back(pipeline.micro_batches[0].sequence_ids.front());
       }},
      {"tokens, its sequences hold", [&](IterationPlan& p) { first_busy(p).micro_batches.front().tokens += 1; }},
      {"above MaxLen",
       [&](IterationPlan& p) {
         // Every sequence in one micro-batch of pipeline 0: 200K tokens exceed any MaxLen.
         MicroBatch all;
         for (const Sequence& sequence : batch) {
           all.sequence_ids.push_back(sequence.id());
           all.tokens += sequence.length();
         }
         for (auto& pipeline : p.pipelines) pipeline.micro_batches.clear();
         p.pipelines.front().micro_batches.push_back(all);
       }},
      {"the cost model gives", [&](IterationPlan& p) { first_busy(p).micro_batches.front().seconds *= 1.01; }},
      {"its micro-batches give", [&](IterationPlan& p) { first_busy(p).estimate *= 1.01; }},
      {"its slowest pipeline", [](IterationPlan& p) { p.estimate *= 0.99; }},
      {"exceeds the estimate", [](IterationPlan& p) { p.dispatch_lower_bound = p.estimate * 2; }},
      {"chosen candidate 9", [](IterationPlan& p) { p.chosen = 9; }},
      {"not the planned strategy", [](IterationPlan& p) { p.chosen = (p.chosen + 1) % p.candidates.size(); }},
      {"lower estimate + overhead than the chosen",
       [](IterationPlan& p) { p.candidates[(p.chosen + 1) % 4].estimate = 1e-3; }},
      {"needs 128 GPUs", [](IterationPlan& p) { p.strategy = Strategy::parse("8*tp16pp1"); }},
  };
  for (const auto& [fragment, breaker] : breaks) {
    CAPTURE(fragment);
    IterationPlan broken = good;
    breaker(broken);
    CHECK_THROWS_WITH_AS(validate(broken, batch, profile64()), doctest::Contains(fragment.c_str()), invalid_plan);
  }
  // A batch sequence the plan leaves out.
  auto larger = batch;
  larger.emplace_back(1 << 30, 100);
  CHECK_THROWS_WITH_AS(validate(good, larger, profile64()), doctest::Contains("of the batch's"), invalid_plan);
}

TEST_CASE("iteration plans and candidate sets round-trip through JSON") {
  const auto batch = batch_of(4, 100'000);
  const IterationPlan plan = plan_iteration(batch, candidates64(), profile64());
  const IterationPlan again = io::from_document<IterationPlan>(io::to_document(plan));
  CHECK(again == plan);
  CHECK_NOTHROW(validate(again, batch, profile64()));
  const CandidateSet set{candidates64()};
  const auto document = io::to_document(set);
  CHECK(document.at("format") == "sluice.candidates");
  CHECK(io::from_document<CandidateSet>(document) == set);
  auto bad = document;
  bad["strategies"][0]["parts"][0]["pipelines"] = 0;
  CHECK_THROWS_AS(io::from_document<CandidateSet>(bad), invalid_input);
}
