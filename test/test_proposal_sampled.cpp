#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <span>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/core/random.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/io/proposal_json.hpp"
#include "sluice/proposal/sampled.hpp"
#include "support.hpp"

using namespace sluice;
using proposal::SampledOptions;

namespace {

// Four schemes of 1, 2, 2 and 4 GPUs; only the 2- and 4-GPU TP schemes hold 500 tokens.
cost::Profile sampled_profile() {
  cost::ProfileSpec spec;
  spec.name = "small";
  spec.model = {"toy", 8, 1024, 1000};
  spec.gpus = 8;
  spec.gpus_per_node = 4;
  spec.schemes = {{Scheme(1, 1), cost::QuadraticLatency(2e-6, 2e-3, 0.010), 200, 1},
                  {Scheme(2, 1), cost::QuadraticLatency(1e-6, 1.1e-3, 0.012), 500, 1},
                  {Scheme(1, 2), cost::QuadraticLatency(1.1e-6, 1e-3, 0.006), 300, 1},
                  {Scheme(4, 1), cost::QuadraticLatency(0.6e-6, 0.6e-3, 0.015), 500, 1}};
  return cost::Profile(spec);
}

// Long-tailed lengths up to 500: many short, a few long.
data::LengthDataset sampled_dataset() {
  std::vector<std::int64_t> lengths;
  Rng rng(11);
  for (int i = 0; i < 4000; ++i) {
    const double u = rng.uniform();
    lengths.push_back(std::min<std::int64_t>(500, 1 + static_cast<std::int64_t>(20 / (1.02 - u))));
  }
  return {lengths, "small"};
}

SampledOptions sampled_options() {
  SampledOptions options;
  options.paper.gpus = 8;
  options.paper.max_len = 500;
  options.paper.length_step = 50;
  options.paper.tokens_per_iteration = 3000;
  options.paper.max_candidates = 3;
#ifdef NDEBUG
  options.choosing_batches = 24;
  options.held_out_batches = 16;
#else
  options.choosing_batches = 10;
  options.held_out_batches = 6;
#endif
  options.seed = 5;
  options.max_pool = 40;
  return options;
}

// Mean over the batches of plan_iteration's estimate + overhead for a candidate set, as a user would get it.
double planned_mean(std::span<const data::Batch> batches, const std::vector<Strategy>& set,
                    const cost::Profile& profile, const SampledOptions& options) {
  assign::PlanOptions plan_options{.dispatch = options.dispatch, .candidate_overhead = {}};
  for (const Strategy& strategy : set)
    plan_options.candidate_overhead.push_back(options.overhead ? options.overhead(strategy) : 0);
  double sum = 0;
  for (const data::Batch& batch : batches) {
    try {
      sum += assign::plan_iteration(batch.sequences, set, profile, plan_options).total();
    } catch (const invalid_input&) {
      return inf;  // no member holds the batch
    }
  }
  return sum / static_cast<double>(batches.size());
}

}  // namespace

TEST_CASE("sampled proposal: the set selection against brute force over every subset") {
  Rng rng(2024);
#ifdef NDEBUG
  constexpr int instances = 2000;
#else
  constexpr int instances = 300;
#endif
  int optimal = 0;
  double worst_gap = 0;
  for (int instance = 0; instance < instances; ++instance) {
    CAPTURE(instance);
    const auto rows = static_cast<std::size_t>(2 + rng.uniform() * 8);
    const auto batches = static_cast<std::size_t>(1 + rng.uniform() * 6);
    const auto k = static_cast<std::size_t>(1 + rng.uniform() * 4);
    std::vector<std::vector<double>> times(rows, std::vector<double>(batches));
    std::vector<bool> holds(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      holds[r] = r == 0 || rng.uniform() < 0.3;
      for (double& time : times[r])
        // Coarse values, so that ties occur; a row that does not hold may miss batches.
        time = !holds[r] && rng.uniform() < 0.3 ? inf : std::round(1 + rng.uniform() * 9);
    }
    const proposal::detail::Selection selection = proposal::detail::select_set(times, k, holds);

    // A valid set, and its total is what it says.
    REQUIRE(!selection.rows.empty());
    CHECK(selection.rows.size() <= k);
    CHECK(std::ranges::is_sorted(selection.rows));
    CHECK(std::ranges::any_of(selection.rows, [&](std::size_t r) { return holds[r]; }));
    CHECK(selection.total == proposal::detail::set_total(times, selection.rows));

    // Brute force: every subset of at most k rows holding one holding row.
    double optimum = inf;
    for (std::size_t mask = 1; mask < (std::size_t{1} << rows); ++mask) {
      std::vector<std::size_t> subset;
      for (std::size_t r = 0; r < rows; ++r)
        if ((mask >> r & 1U) != 0) subset.push_back(r);
      if (subset.size() > k || std::ranges::none_of(subset, [&](std::size_t r) { return holds[r]; })) continue;
      optimum = std::min(optimum, proposal::detail::set_total(times, subset));
    }
    CHECK(selection.total >= optimum);
    if (selection.total == optimum) ++optimal;
    worst_gap = std::max(worst_gap, selection.total / optimum - 1);

    // A local optimum: no add (below k) and no swap keeping a holding member lowers the total.
    for (std::size_t in = 0; in < rows; ++in) {
      if (std::ranges::find(selection.rows, in) != selection.rows.end()) continue;
      if (selection.rows.size() < k) {
        std::vector<std::size_t> added = selection.rows;
        added.push_back(in);
        CHECK(proposal::detail::set_total(times, added) >= selection.total);
      }
      for (std::size_t m = 0; m < selection.rows.size(); ++m) {
        std::vector<std::size_t> swapped = selection.rows;
        swapped[m] = in;
        if (std::ranges::none_of(swapped, [&](std::size_t r) { return holds[r]; })) continue;
        CHECK(proposal::detail::set_total(times, swapped) >= selection.total);
      }
    }
  }
  MESSAGE("select_set optimal on ", optimal, " of ", instances, " instances; worst gap ", worst_gap);
  // Measured (Release, 2,000 instances): optimal on all but one, whose gap is 9.1%.
  CHECK(optimal >= instances * 98 / 100);
  CHECK(worst_gap <= 0.1);
}

TEST_CASE("sampled proposal: choosing and held-out batches are distinct draws") {
  const data::LengthDataset dataset = sampled_dataset();
  const SampledOptions options = sampled_options();
  const auto batches = proposal::detail::draw_batches(dataset, options);
  CHECK(std::ssize(batches.choosing) == options.choosing_batches);
  CHECK(std::ssize(batches.held_out) == options.held_out_batches);
  // All of them fit in the first epoch, so no sequence is in both.
  std::set<std::int64_t> chosen_ids;
  for (const data::Batch& batch : batches.choosing) {
    CHECK(batch.epoch == 0);
    for (const Sequence& sequence : batch.sequences) chosen_ids.insert(sequence.id());
  }
  for (const data::Batch& batch : batches.held_out) {
    CHECK(batch.epoch == 0);
    for (const Sequence& sequence : batch.sequences) CHECK(!chosen_ids.contains(sequence.id()));
  }
}

TEST_CASE("sampled proposal: never worse than the paper's set or a homogeneous strategy on its batches") {
  const cost::Profile profile = sampled_profile();
  const data::LengthDataset dataset = sampled_dataset();
  const SampledOptions options = sampled_options();
  const proposal::SampledProposal result = proposal::propose_sampled(dataset, profile, options);
  proposal::validate(result, profile);

  CHECK(result.paper == proposal::propose(dataset, profile, options.paper));
  CHECK(result.candidates.size() <= 3);
  CHECK(profile.pipelines(result.candidates.front().strategy).front().max_len >= 500);
  CHECK(result.pool_size > std::ssize(result.paper.candidates));

  // The reported means are what plan_iteration gives over the same batches.
  const auto batches = proposal::detail::draw_batches(dataset, options);
  CHECK(close(result.choosing_mean, planned_mean(batches.choosing, result.strategies(), profile, options)));
  CHECK(close(result.held_out_mean, planned_mean(batches.held_out, result.strategies(), profile, options)));
  const double paper_choosing = planned_mean(batches.choosing, result.paper.strategies(), profile, options);
  CHECK(close(result.paper_choosing_mean, paper_choosing));
  CHECK(close(result.paper_held_out_mean, planned_mean(batches.held_out, result.paper.strategies(), profile, options)));

  // The paper's set and every homogeneous strategy are in the pool, so the chosen set is never worse on the
  // choosing batches.
  CHECK(result.choosing_mean <= paper_choosing * (1 + 1e-12));
  double best_homogeneous = inf;
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    const std::vector<Strategy> alone = {
        Strategy::homogeneous(scheme.scheme, static_cast<int>(8 / scheme.scheme.gpus()))};
    CHECK(result.choosing_mean <= planned_mean(batches.choosing, alone, profile, options) * (1 + 1e-12));
    if (scheme.max_len >= 500)
      best_homogeneous = std::min(best_homogeneous, planned_mean(batches.held_out, alone, profile, options));
  }
  CHECK(close(result.best_homogeneous_held_out_mean, best_homogeneous));
}

TEST_CASE("sampled proposal: deterministic for a seed at every thread count; overheads count") {
  const cost::Profile profile = sampled_profile();
  const data::LengthDataset dataset = sampled_dataset();
  SampledOptions options = sampled_options();
  const proposal::SampledProposal once = proposal::propose_sampled(dataset, profile, options);
  CHECK(proposal::propose_sampled(dataset, profile, options) == once);
  options.dispatch.threads = 3;
  CHECK(proposal::propose_sampled(dataset, profile, options) == once);
  options.seed = 6;
  CHECK(proposal::propose_sampled(dataset, profile, options).choosing_mean != once.choosing_mean);

  // A constant overhead adds to every planned time alike.
  options = sampled_options();
  options.overhead = [](const Strategy&) { return 0.5; };
  const proposal::SampledProposal shifted = proposal::propose_sampled(dataset, profile, options);
  CHECK(close(shifted.choosing_mean, once.choosing_mean + 0.5));
  CHECK(close(shifted.paper_held_out_mean, once.paper_held_out_mean + 0.5));
  // An overhead on every mixed strategy leaves only homogeneous ones worth choosing.
  options.overhead = [](const Strategy& strategy) { return strategy.is_homogeneous() ? 0.0 : 100.0; };
  const proposal::SampledProposal plain = proposal::propose_sampled(dataset, profile, options);
  for (const proposal::SampledCandidate& candidate : plain.candidates) CHECK(candidate.strategy.is_homogeneous());
}

TEST_CASE("sampled proposal: JSON round trip") {
  const cost::Profile profile = sampled_profile();
  const proposal::SampledProposal result = proposal::propose_sampled(sampled_dataset(), profile, sampled_options());
  const io::json document = io::to_document(result);
  CHECK(document.at("format") == "sluice.sampled_proposal");
  CHECK(document.at("candidates").at(0).at("name") == result.candidates.front().strategy.name());
  const auto read =
      io::from_document<proposal::SampledProposal>(io::parse(document.dump(), "round trip"), "round trip");
  CHECK(read == result);
  io::json bad = document;
  bad["candidates"][0]["source"] = "guessed";
  CHECK_THROWS_WITH_AS(io::from_document<proposal::SampledProposal>(bad), doctest::Contains("field 'source': expected"),
                       invalid_input);
  bad["candidates"] = io::json::array();
  CHECK_THROWS_WITH_AS(io::from_document<proposal::SampledProposal>(bad), doctest::Contains("no candidates"),
                       invalid_input);
}

TEST_CASE("sampled proposal: bad options name the option") {
  const cost::Profile profile = sampled_profile();
  const data::LengthDataset dataset = sampled_dataset();
  auto fails = [&](SampledOptions options, const char* fragment) {
    CAPTURE(fragment);
    CHECK_THROWS_WITH_AS(proposal::propose_sampled(dataset, profile, options), doctest::Contains(fragment),
                         invalid_input);
  };
  auto with = [&](auto change) {
    SampledOptions options = sampled_options();
    change(options);
    return options;
  };
  fails(with([](auto& o) { o.choosing_batches = 0; }), "choosing_batches must be in [1, 1024], got 0");
  fails(with([](auto& o) { o.choosing_batches = 1025; }), "choosing_batches must be in [1, 1024]");
  fails(with([](auto& o) { o.held_out_batches = -1; }), "held_out_batches must be in [1, 1024], got -1");
  fails(with([](auto& o) { o.max_pool = 0; }), "max_pool must be in [1, 4096], got 0");
  fails(with([](auto& o) { o.max_pool = 2; }), "max_pool must be >= max_candidates = 3, got 2");
  fails(with([](auto& o) { o.paper.max_candidates = 65; }), "max_candidates must be in [1, 64], got 65");
  fails(with([](auto& o) { o.paper.tokens_per_iteration = 0.5; }), "tokens_per_iteration must be in [1, 16777216]");
  fails(with([](auto& o) { o.paper.tokens_per_iteration = 1e9; }), "tokens_per_iteration must be in [1, 16777216]");
  fails(with([](auto& o) { o.paper.tokens_per_iteration = std::nan(""); }), "tokens_per_iteration");
  fails(with([](auto& o) { o.dispatch.trials = 0; }), "trials must be >= 1");
  fails(with([](auto& o) { o.paper.max_len = 400; }), "longer than max_len = 400");
  fails(with([](auto& o) { o.overhead = [](const Strategy&) { return -1.0; }; }), "overhead of ");
  fails(with([](auto& o) { o.overhead = [](const Strategy&) { return inf; }; }), "must be finite and >= 0");
}
