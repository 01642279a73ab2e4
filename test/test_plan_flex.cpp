// The sluice plan with a flex CP domain beside its candidates (plan::FlexDomain, plan::IterationPlanner): the
// domain's plan is made on every batch it holds, runs exactly where it is faster than the kept candidate, is
// checked by the validator (which names what was tampered with), and reads back from its document; in the
// comparison, sluice, which offers FlexSP's domain, is never slower than FlexSP.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "document_checks.hpp"
#include "sluice/compare/compare.hpp"
#include "sluice/compare/flex_cp.hpp"
#include "sluice/core/error.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/plan/flex_domain.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/plan/layout_moves.hpp"
#include "sluice/shard/model.hpp"

using namespace sluice;
using compare::System;

namespace {

const cost::Profile& profile8() {
  static const cost::Profile profile =
      io::read_document<cost::Profile>(io::resolve_data_file("llama2-7b", "profiles")).with_gpus(8);
  return profile;
}

std::vector<std::vector<Sequence>> batches(std::int64_t context, std::int64_t tokens, int count) {
  const data::LengthDataset dataset =
      data::LengthDataset::load(io::resolve_data_file("man-pages", "lengths")).truncated(context);
  data::BatchSampler sampler(dataset, {.tokens_per_batch = tokens, .seed = 5});
  std::vector<std::vector<Sequence>> result;
  for (int k = 0; k < count; ++k) result.push_back(sampler.next().sequences);
  return result;
}

const plan::Options cheap_flex{.dispatch = {.trials = 4, .seed = 7},
                               .schedule = {.kind = schedule::ScheduleKind::one_f_one_b, .seed = 1, .clusters = 0},
                               .problem = {},
                               .layout_moves = plan::LayoutMoves::none,
                               .v_step = plan::VStep::on};

// A hand-made domain of 8 ⟨1, 1⟩ units with Ulysses groups of 2: each group costs `scale` times ⟨2, 1⟩'s
// quadratic; its groups hold 4,096 tokens (degree 1) and 8,192 (degree 2).
std::shared_ptr<const plan::FlexDomain> scaled_domain(double scale) {
  const cost::QuadraticLatency& base = profile8().at(Scheme(2, 1)).latency;
  const cost::QuadraticLatency latency(scale * base.a(), scale * base.b(), scale * base.c());
  assign::FlexCpProblem problem{.lengths = {},
                                .units = 8,
                                .pp = 1,
                                .degrees = {{.degree = 1, .latency = latency, .capacity = 4096, .length_multiple = 1},
                                            {.degree = 2, .latency = latency, .capacity = 8192, .length_multiple = 1}},
                                .one_degree_per_micro_batch = false};
  return std::make_shared<const plan::FlexDomain>(std::vector<Scheme>{Scheme(1, 1), Scheme::parse("tp1cp2ulyssespp1")},
                                                  std::move(problem));
}

const std::vector<Strategy>& candidates8() {
  static const std::vector<Strategy> candidates = {Strategy::parse("2*tp4pp1"), Strategy::parse("4*tp2pp1")};
  return candidates;
}

}  // namespace

TEST_CASE("flex domain: runs exactly where faster than the kept candidate, and is validated") {
  const std::vector<std::vector<Sequence>> drawn = batches(8192, 30000, 3);
  for (const double scale : {1e-3, 1e3}) {
    CAPTURE(scale);
    const auto domain = scaled_domain(scale);
    const plan::IterationPlanner with(profile8(), candidates8(), cheap_flex, domain);
    const plan::IterationPlanner without(profile8(), candidates8(), cheap_flex);
    for (const std::vector<Sequence>& batch : drawn) {
      const plan::SimulatedIteration iteration = with.plan(batch);
      REQUIRE(iteration.flex.has_value());
      CHECK_NOTHROW(with.validate(iteration, batch));
      // The candidates' side is the plan without the domain.
      plan::SimulatedIteration alone = without.plan(batch);
      CHECK(alone.total() == iteration.candidate_total());
      alone.flex = iteration.flex;
      CHECK(alone == iteration);
      // A thousandth of ⟨2, 1⟩'s cost beats every candidate; a thousand times it beats none.
      CHECK(iteration.runs_flex() == (scale < 1));
      CHECK(iteration.total() == (scale < 1 ? iteration.flex->plan.seconds : iteration.candidate_total()));
      CHECK(iteration.flex->strategy == Strategy::parse("8*tp1pp1"));
      assign::validate(iteration.flex->plan, domain->problem_of(batch));
    }
  }
}

TEST_CASE("flex domain: the validator names what was tampered with") {
  const auto domain = scaled_domain(1e-3);
  const plan::IterationPlanner with(profile8(), candidates8(), cheap_flex, domain);
  const plan::IterationPlanner without(profile8(), candidates8(), cheap_flex);
  const std::vector<Sequence> batch = batches(8192, 30000, 1).front();
  const plan::SimulatedIteration planned = with.plan(batch);
  REQUIRE(planned.runs_flex());

  plan::SimulatedIteration broken = planned;
  broken.flex.reset();
  CHECK_THROWS_WITH_AS(with.validate(broken, batch), doctest::Contains("lacks the flex CP domain's plan"),
                       invalid_plan);
  CHECK_THROWS_WITH_AS(without.validate(planned, batch), doctest::Contains("the planner offers no flex CP domain"),
                       invalid_plan);
  broken = planned;
  broken.flex->plan.seconds *= 0.5;
  CHECK_THROWS_WITH_AS(with.validate(broken, batch), doctest::Contains("its groups take"), invalid_plan);
  broken = planned;
  broken.flex->strategy = Strategy::parse("4*tp1pp1");
  CHECK_THROWS_WITH_AS(with.validate(broken, batch), doctest::Contains("runs 4*tp1pp1"), invalid_plan);
  broken = planned;
  broken.flex->schemes.back() = Scheme::parse("tp1cp2ringpp1");
  CHECK_THROWS_WITH_AS(with.validate(broken, batch), doctest::Contains("other schemes"), invalid_plan);
  broken = planned;
  broken.flex->plan.micro_batches.front().groups.front().sequences.pop_back();
  CHECK_THROWS_AS(with.validate(broken, batch), invalid_plan);

  // A batch with a sequence no group of the domain holds is planned on the candidates alone.
  std::vector<Sequence> longer = batch;
  longer.push_back(Sequence(static_cast<std::int64_t>(batch.size()), 12000));
  const plan::SimulatedIteration without_flex = with.plan(longer);
  CHECK_FALSE(without_flex.flex.has_value());
  CHECK_NOTHROW(with.validate(without_flex, longer));
}

TEST_CASE("flex domain: bad domains are rejected, naming the input") {
  assign::FlexCpProblem problem = scaled_domain(1)->problem_of(batches(8192, 30000, 1).front());
  CHECK_THROWS_WITH_AS(plan::FlexDomain({Scheme(1, 1)}, problem), doctest::Contains("1 schemes for 2 degrees"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(plan::FlexDomain({Scheme(1, 1), Scheme::parse("tp1cp4ulyssespp1")}, problem),
                       doctest::Contains("degree 2 runs tp1cp4ulyssespp1"), invalid_input);
  CHECK_THROWS_WITH_AS(
      plan::FlexDomain({Scheme::parse("tp1cp2ulyssespp1"), Scheme::parse("tp1cp2ulyssespp1")}, problem),
      doctest::Contains("degree 1 runs tp1cp2ulyssespp1"), invalid_input);
  problem.units = 3;
  CHECK_THROWS_WITH_AS(plan::FlexDomain({Scheme(1, 1), Scheme::parse("tp1cp2ulyssespp1")}, problem),
                       doctest::Contains("divide the 3 units"), invalid_input);
}

TEST_CASE("flex domain: a plan that carries one reads back from its document, at the CP version") {
  const plan::IterationPlanner with(profile8(), candidates8(), cheap_flex, scaled_domain(1e-3));
  const std::vector<Sequence> batch = batches(8192, 30000, 1).front();
  const plan::SimulatedIteration planned = with.plan(batch);
  const io::json document = io::to_document(planned);
  CHECK(document.at("version") == 2);  // its Ulysses scheme needs a build that reads CP
  CHECK(io::from_document<plan::SimulatedIteration>(document) == planned);
  io::json broken = document;
  broken["flex"].erase("schemes");
  CHECK_THROWS_WITH_AS(io::from_document<plan::SimulatedIteration>(broken),
                       doctest::Contains("flex CP iteration: missing field 'schemes'"), invalid_input);
  broken = document;
  broken["flex"]["plan"]["micro_batches"][0][0]["first_unit"] = "zero";
  CHECK_THROWS_AS(io::from_document<plan::SimulatedIteration>(broken), invalid_input);
  // Without a domain the document is the one it always was.
  const plan::IterationPlanner without(profile8(), candidates8(), cheap_flex);
  CHECK_FALSE(io::to_document(without.plan(batch)).contains("flex"));
}

TEST_CASE("flex domains: the fastest kept, and the validator names a slower one") {
  const auto fast = scaled_domain(1e-3);
  const auto slow = scaled_domain(1e-2);
  const auto domains =
      std::make_shared<const plan::FlexDomains>(std::vector<std::shared_ptr<const plan::FlexDomain>>{slow, fast, fast});
  const plan::IterationPlanner planner(profile8(), candidates8(), cheap_flex, domains);
  const std::vector<Sequence> batch = batches(8192, 30000, 1).front();
  const plan::SimulatedIteration planned = planner.plan(batch);
  REQUIRE(planned.flex.has_value());
  CHECK(planned.flex->domain == 1);  // the faster, and of two equal ones the earlier
  CHECK(planned.flex->plan == fast->plan(batch).plan);
  CHECK_NOTHROW(planner.validate(planned, batch));
  plan::SimulatedIteration broken = planned;
  broken.flex = slow->plan(batch);
  CHECK_THROWS_WITH_AS(planner.validate(broken, batch), doctest::Contains("domain 1 plans faster"), invalid_plan);
  broken.flex = fast->plan(batch);
  broken.flex->domain = 2;
  CHECK_THROWS_WITH_AS(planner.validate(broken, batch), doctest::Contains("domain 1 plans faster"), invalid_plan);
  broken.flex->domain = 3;
  CHECK_THROWS_WITH_AS(planner.validate(broken, batch), doctest::Contains("names domain 3 of 3"), invalid_plan);
  // A charge counts as the groups' time does.
  const auto charged = std::make_shared<const plan::FlexDomain>(
      std::vector<Scheme>(fast->schemes().begin(), fast->schemes().end()), fast->problem_of(batch), 1e3);
  const plan::IterationPlanner with_charge(
      profile8(), candidates8(), cheap_flex,
      std::make_shared<const plan::FlexDomains>(std::vector<std::shared_ptr<const plan::FlexDomain>>{charged, slow}));
  const plan::SimulatedIteration planned_with_charge = with_charge.plan(batch);
  CHECK(planned_with_charge.flex->domain == 1);
  CHECK_THROWS_WITH_AS(plan::FlexDomains({}), doctest::Contains("none given"), invalid_input);
  CHECK_THROWS_WITH_AS(plan::FlexDomain({Scheme(1, 1), Scheme::parse("tp1cp2ulyssespp1")}, fast->problem_of(batch), -1),
                       doctest::Contains("overhead must be finite and >= 0"), invalid_input);
}

namespace {

// A comparison on profile8's 8 GPUs at a 16K context with the CP schemes of `degrees` and `kinds`.
compare::Options comparison_options(std::vector<int> degrees, std::vector<CpKind> kinds) {
  compare::Options options{.profile = profile8(),
                           .context = 16384,
                           .tokens = 40000,
                           .problem = {.hidden = 4096,
                                       .element_bytes = 2,
                                       .link = {.latency = 1e-5, .bandwidth = 1e11},
                                       .backward_ratio = 2},
                           .dispatch = {.trials = 4},
                           .seed = 3};
  options.profile = cost::Profile(cost::with_scheme_space(
      options.profile.spec(),
      {.cp_degrees = std::move(degrees), .cp_kinds = std::move(kinds), .recompute = false, .links = {}}));
  return options;
}

}  // namespace

TEST_CASE("flex domains: sluice, offering FlexSP's and dynamic CP's domains, is never slower than FlexSP") {
  const compare::Options options = comparison_options({2, 4, 8}, {CpKind::ulysses, CpKind::ring});
  const plan::OfferedFlex flex =
      plan::offered_flex_domains(options.profile, compare::flex_scope(options), compare::planner_options(options));
  REQUIRE(flex.domains != nullptr);
  const auto domains = flex.domains->domains();
  REQUIRE(domains.size() >= 3);
  CHECK(flex.names.front() == "8*tp1pp1 flex CP (ZeRO-3)");
  CHECK(flex.flexsp);
  compare::Options ring_only = options;
  ring_only.profile = cost::Profile(cost::with_scheme_space(
      profile8().spec(), {.cp_degrees = {2, 4, 8}, .cp_kinds = {CpKind::ring}, .recompute = false, .links = {}}));
  const plan::OfferedFlex without_ulysses = plan::offered_flex_domains(
      ring_only.profile, compare::flex_scope(ring_only), compare::planner_options(ring_only));
  REQUIRE(without_ulysses.domains != nullptr);
  CHECK_FALSE(without_ulysses.flexsp);  // FlexSP's groups are Ulysses'
  CHECK(without_ulysses.names.front().ends_with(" dynamic CP"));
  CHECK(domains.front()->overhead() == 0);
  const int layers = shard::llama_like(options.profile.spec().model).layers;
  for (std::size_t d = 1; d < domains.size(); ++d) {
    CAPTURE(flex.names[d]);
    // A layout move, charged as a candidate's. One GPU per replica keeps the sharded layout as its own, so its
    // pull is the all-gather every system pays and nothing is left to charge.
    CHECK((flex.layout_moves[d] == 0) == flex.names[d].starts_with("8*tp1pp1 "));
    CHECK(flex.layout_moves[d] >= 0);
    CHECK(domains[d]->overhead() ==
          plan::charged_layout_move(plan::LayoutMoves::exposed, flex.layout_moves[d], layers));
    CHECK(domains[d]->one_degree_per_micro_batch() == flex.names[d].ends_with(" dynamic CP"));
  }
  const data::LengthDataset dataset =
      data::LengthDataset::load(io::resolve_data_file("man-pages", "lengths")).truncated(options.context);
  std::vector<std::vector<Sequence>> drawn;
  data::BatchSampler sampler(dataset, {.tokens_per_batch = options.tokens, .seed = 3});
  for (int k = 0; k < 3; ++k) drawn.push_back(sampler.next().sequences);
  compare::ChosenPlans chosen;
  const compare::Comparison comparison = compare::compare_systems(options, dataset, drawn, {}, &chosen);
  const compare::SystemRun& sluice = comparison.systems[System::sluice];
  const compare::SystemRun& flexsp = comparison.systems[System::flexsp];
  REQUIRE_FALSE(flexsp.failure.has_value());
  REQUIRE(chosen.sluice.size() == drawn.size());
  std::size_t runs_flex = 0;
  for (std::size_t k = 0; k < drawn.size(); ++k) {
    CAPTURE(k);
    const plan::SimulatedIteration& iteration = chosen.sluice[k];
    REQUIRE(iteration.flex.has_value());
    // FlexSP's domain is among sluice's, uncharged: sluice's choice is at most FlexSP's time.
    CHECK(iteration.total() <= flexsp.iterations[k].seconds);
    CHECK(sluice.iterations[k].seconds <= flexsp.iterations[k].seconds);
    CHECK(sluice.iterations[k].strategy ==
          (iteration.runs_flex() ? flex.names[iteration.flex->domain] : iteration.plan.strategy.name()));
    runs_flex += iteration.runs_flex() ? 1 : 0;
  }
  // Here a flex CP domain is the faster on some batches, and sluice's candidates on the others.
  CHECK(runs_flex > 0);
  CHECK(runs_flex < drawn.size());
}

TEST_CASE("flex domains: FlexSP fails, naming why, on a batch too small to keep every GPU busy") {
  const compare::Options options = comparison_options({2, 4}, {CpKind::ulysses});
  const data::LengthDataset dataset =
      data::LengthDataset::load(io::resolve_data_file("man-pages", "lengths")).truncated(options.context);
  // One sequence, and Ulysses groups of at most 4 of the 8 GPUs: FlexSP's groups cannot use them all.
  const std::vector<std::vector<Sequence>> drawn = {{Sequence(0, 3000)}};
  const compare::Comparison comparison = compare::compare_systems(options, dataset, drawn);
  const compare::SystemRun& flexsp = comparison.systems[System::flexsp];
  REQUIRE(flexsp.failure.has_value());
  CHECK(flexsp.failure->find("keeps every GPU busy") != std::string::npos);
  CHECK(flexsp.failure->find("Ulysses groups of 2, 4 GPUs") != std::string::npos);
  CHECK_FALSE(comparison.systems[System::sluice].failure.has_value());  // sluice's own choices still run it
}
