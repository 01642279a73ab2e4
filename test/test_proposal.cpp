#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/proposal_json.hpp"
#include "sluice/proposal/max_len.hpp"
#include "sluice/proposal/propose.hpp"
#include "support.hpp"

using namespace sluice;
using proposal::ProposeOptions;

namespace {

// Four schemes of 1, 2, 2 and 4 GPUs with stated MaxLen, one of them pipelined (so the fill term matters).
cost::Profile small_profile(std::int64_t gpus = 8) {
  cost::ProfileSpec spec;
  spec.name = "small";
  spec.model = {"toy", 8, 1024, 1000};
  spec.gpus = gpus;
  spec.gpus_per_node = 4;
  spec.schemes = {{Scheme(1, 1), cost::QuadraticLatency(2e-6, 2e-3, 0.010), 200, 1},
                  {Scheme(2, 1), cost::QuadraticLatency(1e-6, 1.1e-3, 0.012), 500, 1},
                  {Scheme(1, 2), cost::QuadraticLatency(1.1e-6, 1e-3, 0.006), 300, 1},
                  {Scheme(4, 1), cost::QuadraticLatency(0.6e-6, 0.6e-3, 0.015), 500, 1}};
  return cost::Profile(spec);
}

data::LengthDataset small_dataset() {
  std::vector<std::int64_t> lengths = {50, 480, 500, 260, 120};
  Rng rng(7);
  for (int i = 0; i < 35; ++i) lengths.push_back(1 + static_cast<std::int64_t>(rng.uniform() * 499));
  return {lengths, "small"};
}

ProposeOptions small_options(std::int64_t gpus) {
  ProposeOptions options;
  options.gpus = gpus;
  options.max_len = 500;
  options.length_step = 100;
  options.tokens_per_iteration = 3000;
  return options;
}

const cost::Profile& profile32b() {
  static const cost::Profile profile =
      io::read_document<cost::Profile>(io::resolve_data_file("llama2-32b", "profiles")).with_gpus(64);
  return profile;
}

const data::LengthDataset& synthetic() {
  static const data::LengthDataset dataset =
      data::LengthDataset(data::synthetic_lengths({.count = 5000, .seed = 1}), "synthetic").truncated(32768);
  return dataset;
}

ProposeOptions options32b() {
  ProposeOptions options;
  options.max_len = 32768;
  options.length_step = 1024;
  options.tokens_per_iteration = 200'000;
  options.tp_within_node = false;  // only tp16pp1 holds 32768 tokens on 64 GPUs
  return options;
}

// Exhaustive enumeration: every multiset of groups (scheme, d) — d pipelines of a scheme sharing one
// length interval at cost C/d — with Σ d·N_k <= gpus, every order of the groups along the length axis and
// every split of the bins (0, J] into one non-empty interval per group, the interval's scheme holding its
// upper end. Interval costs are summed directly from the lengths. Returns best[n][J] for n <= gpus.
std::vector<std::vector<double>> exhaustive(const cost::Profile& profile, const data::LengthDataset& dataset,
                                            const ProposeOptions& options, std::int64_t gpus) {
  const std::int64_t step = options.length_step;
  const std::int64_t bins = *options.max_len / step;
  const double weight = options.tokens_per_iteration / static_cast<double>(dataset.tokens());
  const auto schemes = profile.schemes();
  // cost[k][i][j]: C_k over the lengths in (i·step, j·step].
  std::vector<std::vector<std::vector<double>>> cost(schemes.size());
  for (std::size_t k = 0; k < schemes.size(); ++k) {
    cost[k].assign(static_cast<std::size_t>(bins + 1), std::vector<double>(static_cast<std::size_t>(bins + 1)));
    for (std::int64_t i = 0; i < bins; ++i)
      for (std::int64_t j = i + 1; j <= bins; ++j) {
        double sum = 0;
        std::int64_t longest = 0;
        for (const std::int64_t length : dataset.lengths())
          if (length > i * step && length <= j * step) {
            sum += weight *
                   (options.sequence_constant ? schemes[k].latency(length) : schemes[k].latency.sequence_time(length));
            longest = std::max(longest, length);
          }
        if (options.fill_term && longest > 0) sum += (schemes[k].scheme.pp() - 1) * schemes[k].latency(longest);
        cost[k][static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = sum;
      }
  }
  struct GroupType {
    std::size_t scheme;
    std::int64_t replicas;
  };
  std::vector<GroupType> types;
  for (std::size_t k = 0; k < schemes.size(); ++k)
    for (std::int64_t d = 1; d * schemes[k].scheme.gpus() <= gpus; ++d) types.push_back({k, d});

  std::vector<std::vector<double>> best(static_cast<std::size_t>(gpus + 1),
                                        std::vector<double>(static_cast<std::size_t>(bins + 1), inf));
  std::vector<int> multiset;  // indices into types, non-decreasing
  auto evaluate = [&](std::int64_t used) {
    std::vector<int> order = multiset;
    const std::size_t m = order.size();
    do {
      for (std::int64_t last = static_cast<std::int64_t>(m); last <= bins; ++last) {
        // Interval ends e[0] < ... < e[m − 1] = last, each cut chosen recursively.
        std::vector<std::int64_t> ends(m);
        std::function<void(std::size_t, std::int64_t, double)> cut = [&](std::size_t g, std::int64_t from,
                                                                         double worst) {
          const GroupType& type = types[static_cast<std::size_t>(order[g])];
          const std::int64_t lowest = g + 1 == m ? last : from + 1;
          const std::int64_t highest = g + 1 == m ? last : last - static_cast<std::int64_t>(m - g - 1);
          for (std::int64_t end = lowest; end <= highest; ++end) {
            if (schemes[type.scheme].max_len < end * step) break;
            const double value =
                std::max(worst, cost[type.scheme][static_cast<std::size_t>(from)][static_cast<std::size_t>(end)] /
                                    static_cast<double>(type.replicas));
            if (g + 1 == m) {
              double& slot = best[static_cast<std::size_t>(used)][static_cast<std::size_t>(last)];
              slot = std::min(slot, value);
            } else {
              cut(g + 1, end, value);
            }
          }
        };
        cut(0, 0, 0);
      }
    } while (std::next_permutation(order.begin(), order.end()));
  };
  std::function<void(std::size_t, std::int64_t)> grow = [&](std::size_t first, std::int64_t used) {
    if (!multiset.empty()) evaluate(used);
    if (std::ssize(multiset) == bins) return;
    for (std::size_t t = first; t < types.size(); ++t) {
      const std::int64_t more = types[t].replicas * schemes[types[t].scheme].scheme.gpus();
      if (used + more > gpus) continue;
      multiset.push_back(static_cast<int>(t));
      grow(t, used + more);
      multiset.pop_back();
    }
  };
  grow(0, 0);
  for (std::size_t n = 1; n < best.size(); ++n)
    for (std::size_t j = 0; j < best[n].size(); ++j) best[n][j] = std::min(best[n][j], best[n - 1][j]);
  return best;
}

void check_valid(const proposal::Proposal& result, const cost::Profile& profile) {
  proposal::validate(result, profile);
  const std::int64_t gpus = *result.options.gpus;
  for (const auto& candidate : result.candidates) {
    CAPTURE(candidate.strategy.name());
    CHECK(candidate.strategy.gpus() <= gpus);
    std::int64_t widest = 0;
    for (const Pipeline& pipeline : profile.pipelines(candidate.strategy)) widest = std::max(widest, pipeline.max_len);
    CHECK(widest >= candidate.max_len);
    CHECK(candidate.min_len <= candidate.max_len);
    // No integer strategy beats the integer DP at the length it was proposed for.
    const auto point = std::ranges::find(result.by_length, candidate.max_len, &proposal::LengthOptimum::max_len);
    REQUIRE(point != result.by_length.end());
    CHECK(candidate.estimate >= point->integer * (1 - 1e-12));
  }
  CHECK(result.candidates.front().max_len == *result.options.max_len);
}

}  // namespace

TEST_CASE("proposal: the integer DP equals exhaustive enumeration of all strategies") {
  const cost::Profile profile = small_profile();
  const data::LengthDataset dataset = small_dataset();
  for (const auto& [fill, constant] : {std::pair{true, true}, {false, true}, {true, false}}) {
    CAPTURE(fill);
    CAPTURE(constant);
    ProposeOptions options = small_options(8);
    options.fill_term = fill;
    options.sequence_constant = constant;
    const auto best = exhaustive(profile, dataset, options, 8);
    for (std::int64_t gpus = 2; gpus <= 8; ++gpus) {
      CAPTURE(gpus);
      options.gpus = gpus;
      const proposal::Proposal result = proposal::propose(dataset, profile, options);
      REQUIRE(result.by_length.size() == 5);
      for (std::size_t j = 0; j < result.by_length.size(); ++j) {
        CAPTURE(j);
        CHECK(result.by_length[j].max_len == 100 * static_cast<std::int64_t>(j + 1));
        CHECK(close(result.by_length[j].integer, best[static_cast<std::size_t>(gpus)][j + 1], 1e-12));
      }
      CHECK(result.integer_optimum == result.by_length.back().integer);
      CHECK(result.candidates.front().estimate == result.integer_optimum);
      check_valid(result, profile);
    }
  }
}

TEST_CASE("proposal: CP and AC schemes another matches on every count leave the DP's optimum unchanged") {
  // The small profile with CP schemes of 2 and 4 GPUs: each ring one slower than the Ulysses one of its size on
  // every coefficient (dominated), a hybrid faster than that Ulysses one from 250 tokens on and slower below (kept),
  // an AC one holding more than ⟨1, 1⟩ (kept), and a copy of ⟨4, 1⟩ (it goes).
  cost::ProfileSpec spec = small_profile().spec();
  const auto cp = [](int tp, int c, CpKind kind, int ulysses = 0) {
    return Scheme({.tp = tp, .pp = 1, .cp = c, .cp_kind = kind, .ulysses = ulysses, .recompute = Recompute::none});
  };
  spec.schemes.push_back({cp(1, 2, CpKind::ulysses), cost::QuadraticLatency(1.1e-6, 1.2e-3, 0.011), 400, 1});
  spec.schemes.push_back({cp(1, 2, CpKind::ring), cost::QuadraticLatency(1.2e-6, 1.2e-3, 0.012), 400, 1});
  spec.schemes.push_back({cp(1, 4, CpKind::ulysses), cost::QuadraticLatency(0.5e-6, 0.7e-3, 0.014), 500, 1});
  spec.schemes.push_back({cp(1, 4, CpKind::ring), cost::QuadraticLatency(0.55e-6, 0.7e-3, 0.014), 500, 1});
  spec.schemes.push_back({cp(1, 4, CpKind::hybrid, 2), cost::QuadraticLatency(0.3e-6, 0.75e-3, 0.014), 500, 1});
  spec.schemes.push_back({Scheme({.tp = 1, .pp = 1, .recompute = Recompute::full}),
                          cost::QuadraticLatency(2.5e-6, 2.5e-3, 0.012), 500, 1});
  spec.schemes.push_back({cp(2, 2, CpKind::ring), cost::QuadraticLatency(0.6e-6, 0.6e-3, 0.015), 500, 1});
  const cost::Profile profile(spec);
  std::vector<std::string> kept;
  for (const cost::SchemeCost& scheme :
       proposal::detail::undominated({profile.schemes().begin(), profile.schemes().end()}, true, 500))
    kept.push_back(scheme.scheme.name());
  // ⟨4, 1⟩, a base scheme, matches tp2cp2ringpp1, which goes; both rings go; the rest stay.
  std::ranges::sort(kept);
  CHECK(kept == std::vector<std::string>{"tp1cp2ulyssespp1", "tp1cp4hybrid2pp1", "tp1cp4ulyssespp1", "tp1pp1",
                                         "tp1pp1ac", "tp1pp2", "tp2pp1", "tp4pp1"});
  const data::LengthDataset dataset = small_dataset();
  ProposeOptions options = small_options(8);
  const auto best = exhaustive(profile, dataset, options, 8);  // over every scheme, dominated ones too
  for (std::int64_t gpus = 2; gpus <= 8; ++gpus) {
    CAPTURE(gpus);
    options.gpus = gpus;
    const proposal::Proposal result = proposal::propose(dataset, profile, options);
    for (std::size_t j = 0; j < result.by_length.size(); ++j)
      CHECK(close(result.by_length[j].integer, best[static_cast<std::size_t>(gpus)][j + 1], 1e-12));
    check_valid(result, profile);
  }
}

TEST_CASE("proposal: the relaxation is never worse than the integer DP") {
  for (std::int64_t gpus = 2; gpus <= 8; ++gpus) {
    ProposeOptions options = small_options(gpus);
    options.relaxed = true;
    options.gpu_step = 1;
    const proposal::Proposal result = proposal::propose(small_dataset(), small_profile(), options);
    REQUIRE(result.relaxed_optimum.has_value());
    CHECK(*result.relaxed_optimum <= result.integer_optimum);
    for (const auto& point : result.by_length) CHECK(*point.relaxed <= point.integer);
    check_valid(result, small_profile());
  }
  ProposeOptions options = options32b();
  options.relaxed = true;
  options.gpu_step = 1;
  const proposal::Proposal result = proposal::propose(synthetic(), profile32b(), options);
  CHECK(*result.relaxed_optimum < result.integer_optimum);
  for (const auto& point : result.by_length) CHECK(*point.relaxed <= point.integer);
  check_valid(result, profile32b());
  CHECK(std::ranges::any_of(
      result.candidates, [](const auto& candidate) { return candidate.origin == proposal::Origin::relaxed_rounding; }));
}

TEST_CASE("proposal: candidates on the bundled 32B profile") {
  const proposal::Proposal result = proposal::propose(synthetic(), profile32b(), options32b());
  check_valid(result, profile32b());
  CHECK(result.candidates.size() == 8);
  CHECK(result.considered >= 8);
  CHECK(result.sequences_per_iteration == doctest::Approx(200'000.0 / synthetic().stats().mean));
  // The best candidate at Lmax first; the best homogeneous strategy for Lmax is always kept.
  const auto& best = result.candidates.front();
  CHECK(best.estimate == result.integer_optimum);
  for (const auto& candidate : result.candidates)
    if (candidate.max_len == 32768) CHECK(candidate.estimate >= best.estimate);
  const auto homogeneous =
      std::ranges::find_if(result.candidates, [](const auto& c) { return c.strategy.is_homogeneous(); });
  REQUIRE(homogeneous != result.candidates.end());
  CHECK(homogeneous->strategy == Strategy::parse("4*tp16pp1"));
  CHECK(homogeneous->estimate > best.estimate);
  double shares = 0;
  for (const auto& point : result.by_length) shares += point.share;
  CHECK(shares == doctest::Approx(1.0));

  ProposeOptions one = options32b();
  one.max_candidates = 1;
  const proposal::Proposal single = proposal::propose(synthetic(), profile32b(), one);
  REQUIRE(single.candidates.size() == 1);
  CHECK(single.candidates.front() == best);

  // The candidates are what plan_iteration takes.
  data::BatchSampler sampler(synthetic(), {.tokens_per_batch = 200'000, .seed = 3});
  const data::Batch batch = sampler.next();
  const assign::IterationPlan plan = assign::plan_iteration(batch.sequences, result.strategies(), profile32b());
  assign::validate(plan, batch.sequences, profile32b());
}

TEST_CASE("proposal: more GPUs are never worse") {
  double previous = inf;
  for (std::int64_t gpus = 16; gpus <= 64; gpus += 4) {
    ProposeOptions options = options32b();
    options.gpus = gpus;
    const proposal::Proposal result = proposal::propose(synthetic(), profile32b(), options);
    CHECK(result.integer_optimum <= previous);
    previous = result.integer_optimum;
  }
  previous = inf;
  for (std::int64_t gpus = 2; gpus <= 8; ++gpus) {
    ProposeOptions options = small_options(gpus);
    options.relaxed = true;
    options.gpu_step = 1;
    const proposal::Proposal result = proposal::propose(small_dataset(), small_profile(), options);
    CHECK(*result.relaxed_optimum <= previous);
    previous = *result.relaxed_optimum;
  }
}

TEST_CASE("proposal: deterministic, and a coarser GPU step is never better") {
  ProposeOptions options = options32b();
  options.relaxed = true;
  options.gpu_step = 5;
  const proposal::Proposal first = proposal::propose(synthetic(), profile32b(), options);
  CHECK(first == proposal::propose(synthetic(), profile32b(), options));
  options.relaxed = false;
  options.gpu_step = 40;
  const proposal::Proposal coarse = proposal::propose(synthetic(), profile32b(), options);
  CHECK(coarse == proposal::propose(synthetic(), profile32b(), options));
  CHECK(coarse.integer_optimum >= proposal::propose(synthetic(), profile32b(), options32b()).integer_optimum);
}

TEST_CASE("proposal: normalisation and the fill term") {
  // Without the fill term and with c = 0 the objective is linear in the counts, so the argmin is
  // scale-invariant and the optimum scales with the tokens per iteration.
  cost::ProfileSpec spec = small_profile().spec();
  for (auto& entry : spec.schemes) entry.latency = cost::QuadraticLatency(entry.latency.a(), entry.latency.b(), 0);
  const cost::Profile profile(spec);
  ProposeOptions options = small_options(8);
  options.fill_term = false;
  const proposal::Proposal base = proposal::propose(small_dataset(), profile, options);
  options.tokens_per_iteration *= 4;
  const proposal::Proposal scaled = proposal::propose(small_dataset(), profile, options);
  CHECK(scaled.integer_optimum == doctest::Approx(4 * base.integer_optimum).epsilon(1e-12));
  CHECK(scaled.candidates.front().strategy == base.candidates.front().strategy);
  // The fill term only adds cost.
  options.fill_term = true;
  CHECK(proposal::propose(small_dataset(), profile, options).integer_optimum >= scaled.integer_optimum);
}

TEST_CASE("proposal: JSON round trip") {
  ProposeOptions options = options32b();
  for (const bool relaxed : {false, true}) {
    options.relaxed = relaxed;
    options.gpu_step = relaxed ? 5 : 10;
    const proposal::Proposal result = proposal::propose(synthetic(), profile32b(), options);
    const io::json document = io::to_document(result);
    CHECK(document.at("format") == "sluice.proposal");
    CHECK(document.at("candidates").at(0).at("name") == result.candidates.front().strategy.name());
    CHECK(document.at("relaxed_optimum").is_null() == !relaxed);
    // Steps in GPUs and pipelines, as `sluice propose` prints them.
    CHECK(document.at("options").at("gpu_step") == (relaxed ? 0.5 : 1.0));
    CHECK(document.at("options").at("replica_step") == 0.1);
    const auto read = io::from_document<proposal::Proposal>(io::parse(document.dump(), "round trip"), "round trip");
    CHECK(read == result);
  }
  // Options alone: absent fields take their defaults.
  ProposeOptions expected;
  expected.gpus = 64;
  CHECK(io::json::parse(R"({"gpus": 64})").get<ProposeOptions>() == expected);
  expected.gpu_step = 1;
  CHECK(io::json::parse(R"({"gpus": 64, "gpu_step": 0.1})").get<ProposeOptions>() == expected);
  CHECK_THROWS_WITH_AS((void)io::json::parse(R"({"gpu_step": 0.15})").get<ProposeOptions>(),
                       doctest::Contains("gpu_step must be a positive multiple of 0.1, got 0.1499"), invalid_input);
  io::json bad = io::to_document(proposal::propose(small_dataset(), small_profile(), small_options(8)));
  bad["candidates"][0]["origin"] = "guessed";
  CHECK_THROWS_WITH_AS(io::from_document<proposal::Proposal>(bad), doctest::Contains("field 'origin': expected"),
                       invalid_input);
  bad["candidates"] = io::json::array();
  CHECK_THROWS_WITH_AS(io::from_document<proposal::Proposal>(bad), doctest::Contains("no candidates"), invalid_input);
  CHECK_THROWS_WITH_AS(io::from_document<proposal::Proposal>(io::json{{"format", "sluice.candidates"}, {"version", 1}}),
                       doctest::Contains("expected format 'sluice.proposal'"), invalid_input);
}

TEST_CASE("proposal: bad input names the field") {
  const cost::Profile profile = small_profile();
  const data::LengthDataset dataset = small_dataset();
  auto fails = [&](ProposeOptions options, const char* fragment) {
    CAPTURE(fragment);
    CHECK_THROWS_WITH_AS(proposal::propose(dataset, profile, options), doctest::Contains(fragment), invalid_input);
  };
  const ProposeOptions good = small_options(8);
  auto with = [&](auto change) {
    ProposeOptions options = good;
    change(options);
    return options;
  };
  fails(with([](auto& o) { o.gpus = 0; }), "gpus must be in [1, 8]");
  fails(with([](auto& o) { o.gpus = 9; }), "gpus must be in [1, 8]");
  fails(with([](auto& o) { o.length_step = 0; }), "length_step must be >= 1");
  fails(with([](auto& o) { o.length_step = 600; }), "max_len must be >= length_step = 600");
  fails(with([](auto& o) { o.max_len = 99; }), "max_len must be >= length_step");
  fails(with([](auto& o) { o.gpu_step = 0; }), "gpu_step must be >= 1");
  fails(with([](auto& o) { o.gpu_step = 5; }), "gpu_step must be whole GPUs");
  fails(with([](auto& o) { o.replica_step = 0; }), "replica_step must be 1, 2, 5 or 10 tenths");
  fails(with([](auto& o) { o.relaxed = true, o.replica_step = 3; }), "replica_step must be 1, 2, 5 or 10 tenths");
  fails(with([](auto& o) { o.relaxed = true, o.gpu_step = 3; }), "or 1, 2 or 5 tenths when relaxed, got 3");
  fails(with([](auto& o) { o.tokens_per_iteration = std::nan(""); }), "tokens_per_iteration must be finite and > 0");
  fails(with([](auto& o) { o.tokens_per_iteration = inf; }), "tokens_per_iteration");
  fails(with([](auto& o) { o.tokens_per_iteration = 0; }), "tokens_per_iteration");
  fails(with([](auto& o) { o.max_candidates = 0; }), "max_candidates must be >= 1");
  fails(with([](auto& o) { o.max_len = 400; }), "holds a sequence of 500 tokens, longer than max_len = 400");
  fails(with([](auto& o) { o.gpus = 1; }), "max_len = 500 exceeds the longest MaxLen of a usable scheme (200, tp1pp1)");
  fails(with([](auto& o) { o.tp_within_node = false, o.max_len = 600, o.length_step = 600; }),
        "no scheme of profile small fits 8 GPUs and holds length_step = 600");
  fails(with([](auto& o) { o.gpu_step = 90; }), "gpu_step = 90 tenths is too coarse");

  cost::ProfileSpec spec = profile.spec();
  spec.gpus = 100'000;
  ProposeOptions fine = good;
  fine.gpus = std::nullopt;
  fine.length_step = 1;
  CHECK_THROWS_WITH_AS(proposal::propose(dataset, cost::Profile(spec), fine),
                       doctest::Contains("100001 budgets x 501 lengths, more than 16777216 states"), invalid_input);
  spec.gpus = 8;
  spec.gpus_per_node = 1;
  CHECK_THROWS_WITH_AS(proposal::propose(dataset, cost::Profile(spec), good),
                       doctest::Contains("allow TP across nodes (tp_within_node = false)"), invalid_input);
  ProposeOptions no_node = good;
  no_node.max_len = 200;
  CHECK_THROWS_WITH_AS(proposal::propose(data::LengthDataset({300}, "one"), cost::Profile(spec), no_node),
                       doctest::Contains("longer than max_len = 200"), invalid_input);
}

TEST_CASE("proposal: the default max length is the longest sequence, capped by the widest usable MaxLen") {
  const cost::Profile profile =
      io::read_document<cost::Profile>(io::resolve_data_file("llama2-7b", "profiles")).with_gpus(16);
  ProposeOptions options;
  std::int64_t widest_within_node = 0, widest_of_8_gpus = 0;
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    const bool within_node = scheme.scheme.tp() <= profile.spec().gpus_per_node;
    if (within_node) widest_within_node = std::max(widest_within_node, scheme.max_len);
    if (within_node && scheme.scheme.gpus() <= 8) widest_of_8_gpus = std::max(widest_of_8_gpus, scheme.max_len);
  }
  CHECK(proposal::widest_usable_max_len(profile, options) == widest_within_node);
  options.gpus = 8;
  CHECK(proposal::widest_usable_max_len(profile, options) == widest_of_8_gpus);
  options.gpus.reset();

  const data::LengthDataset longer(std::vector<std::int64_t>{100, 2 * widest_within_node}, "longer");
  CHECK(proposal::default_max_len(longer, profile, options) == widest_within_node);
  const data::LengthDataset shorter(std::vector<std::int64_t>{100, 3000}, "shorter");
  CHECK(proposal::default_max_len(shorter, profile, options) == 3000);
  options.length_step = 1 << 30;  // no scheme holds a step: the longest sequence, so that propose() says why
  CHECK(proposal::widest_usable_max_len(profile, options) == 0);
  CHECK(proposal::default_max_len(longer, profile, options) == 2 * widest_within_node);
}
