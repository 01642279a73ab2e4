#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/search/analytic_profile.hpp"
#include "sluice/search/estimator.hpp"
#include "sluice/search/dp.hpp"
#include "sluice/search/model.hpp"
#include "sluice/search/partition.hpp"
#include "sluice/search/search.hpp"
#include "sluice/search/space.hpp"
#include "support.hpp"

using namespace sluice;
using search::LayerStrategy;

namespace {

constexpr std::int64_t GiB = std::int64_t{1} << 30;
constexpr std::int64_t MiB = std::int64_t{1} << 20;

search::ModelSpec small_model_spec(int layers, std::int64_t hidden = 1024, std::int64_t sequence = 512) {
  search::ModelSpec model;
  model.name = "test";
  model.embedding_params = 50'000 * hidden;
  model.head_params = 50'000 * hidden;
  for (int i = 0; i < layers; ++i)
    model.layers.push_back({.type = "encoder", .hidden = hidden, .heads = 16, .ffn = 4 * hidden, .sequence = sequence});
  return model;
}

search::ClusterSpec node(std::int64_t gpus, std::int64_t memory = 24 * GiB) {
  return {.name = "node",
          .gpus = gpus,
          .memory_bytes = memory,
          .reserved_bytes = 1 * GiB,
          .flops = 125e12,
          .efficiency = 0.5,
          .overlap_slowdown = 1.3,
          .levels = {{.size = std::max<std::int64_t>(8, gpus <= 8 ? gpus : 8), .bandwidth = 100e9},
                     {.size = std::max<std::int64_t>(gpus, 16), .bandwidth = 10e9}}};
}

// The paper's strategies on 8 GPUs appear in `wider` in their own order (the layer DP breaks ties by it).
bool keeps_the_papers_order(const std::vector<LayerStrategy>& wider) {
  const auto paper = search::stage_strategies(8, {});
  std::size_t matched = 0;
  for (const auto& strategy : wider)
    if (matched < paper.size() && strategy == paper[matched]) ++matched;
  return matched == paper.size();
}

}  // namespace

TEST_CASE("search space: the paper's strategy counts") {
  CHECK(search::count_strategies(8, false) == 68);
  CHECK(search::count_strategies(8, true) == 44);
  CHECK(search::count_strategies(16, false) == 146);
  CHECK(search::count_strategies(16, true) == 74);
  CHECK(search::count_strategies(64, false) == 458);
  CHECK(search::count_strategies(64, true) == 158);
  for (std::int64_t n = 0; n <= 10; ++n) {
    CHECK(search::count_strategies(std::int64_t{1} << n, true) == 2 * (2 * n * n + n + 1));
    CHECK(search::count_strategies(std::int64_t{1} << n, false) == 2 * (n * n * n + 2 * n + 1));
  }
  // Per PP degree on 8 GPUs: the stage DP only sees its own group's strategies.
  const search::SpaceOptions full;
  CHECK(search::stage_strategies(8, full).size() == 22);
  CHECK(search::stage_strategies(4, full).size() == 14);
  CHECK(search::stage_strategies(2, full).size() == 6);
  CHECK(search::stage_strategies(1, full).size() == 2);
  // Fig. 3: P = 2, g = 4: the two DP x SDP trees go, S3..S6 stay (4 trees mixing TP, plus pure ones).
  CHECK(search::decision_trees(4, false).size() == 9);
  CHECK(search::decision_trees(4, true).size() == 7);
  // Every pruned strategy is distinct and fills its group.
  for (int group = 1; group <= 64; group *= 2) {
    const auto strategies = search::stage_strategies(group, full);
    for (std::size_t i = 0; i < strategies.size(); ++i) {
      CHECK(strategies[i].group() == group);
      for (std::size_t j = 0; j < i; ++j) CHECK_FALSE(strategies[i] == strategies[j]);
    }
  }
}

TEST_CASE("search space: DP+TP and DP+PP have 4 candidates each on 8 GPUs (Sec. VII-C)") {
  std::size_t dp_tp = 0;
  std::size_t dp_pp = 0;
  for (const auto& [name, space] : search::baseline_spaces(8)) {
    for (int pp = 1; pp <= 8; pp *= 2) {
      if (!space.pp_degrees.empty() && std::ranges::find(space.pp_degrees, pp) == space.pp_degrees.end()) continue;
      const std::size_t count = search::stage_strategies(8 / pp, space).size();
      if (name == "dp+tp") dp_tp += count;
      if (name == "dp+pp") dp_pp += count;
    }
  }
  CHECK(dp_tp == 4);
  CHECK(dp_pp == 4);
  CHECK(LayerStrategy{.tp = 2, .dp = 4, .sdp = true, .tp_inner = true, .ckpt = true}.name() == "sdp4*tp2+ckpt");
  CHECK(LayerStrategy{.tp = 2, .dp = 4, .sdp = false, .tp_inner = false}.name() == "tp2*dp4");
}

TEST_CASE("search space: ZeRO-2 is a third data paradigm, never mixed with another") {
  search::SpaceOptions with_zero2;
  with_zero2.zero2 = true;
  // Per data paradigm on 8 GPUs: pure (1), with TP 2 or 4 in either order (4); TP alone (1) once; x2 for CKPT.
  CHECK(search::stage_strategies(8, with_zero2).size() == 2 * (3 * 5 + 1));
  CHECK(search::stage_strategies(1, with_zero2).size() == 2);
  const auto wider = search::stage_strategies(8, with_zero2);
  CHECK(keeps_the_papers_order(wider));
  for (const auto& strategy : wider) {
    CHECK_FALSE((strategy.sdp && strategy.zero2));
    CHECK((strategy.dp > 1 || !strategy.zero2));
  }
  CHECK(LayerStrategy{.tp = 2, .dp = 4, .tp_inner = true, .zero2 = true}.name() == "z2dp4*tp2");
  search::SpaceOptions only_zero2{.dp = false, .sdp = false, .tp = false, .ckpt = false, .zero2 = true};
  const auto pure = search::stage_strategies(8, only_zero2);
  REQUIRE(pure.size() == 1);
  CHECK(pure[0].name() == "z2dp8");
}

TEST_CASE("search space: Ulysses SP takes TP's place in a tree, never beside it") {
  const search::SpaceOptions with_sp{.ulysses = true};
  // 8 GPUs: DP and SDP pure (2); TP alone (1) or with DP or SDP at 2 or 4 in either order (8); the same for SP (9);
  // x2 for CKPT.
  CHECK(search::stage_strategies(8, with_sp).size() == 2 * (2 + 9 + 9));
  const auto wider = search::stage_strategies(8, with_sp);
  CHECK(keeps_the_papers_order(wider));
  for (const auto& strategy : wider) {
    CHECK((strategy.tp == 1 || strategy.sp == 1));
    CHECK(strategy.group() == 8);
  }
  CHECK(LayerStrategy{.tp = 1, .dp = 2, .tp_inner = true, .sp = 4}.name() == "dp2*sp4");
  CHECK(LayerStrategy{.tp = 1, .dp = 2, .sdp = true, .tp_inner = false, .ckpt = true, .sp = 4}.name() ==
        "sp4*sdp2+ckpt");
  CHECK(LayerStrategy{.tp = 1, .dp = 1, .sp = 8}.name() == "sp8");
  // SP, like TP, must divide the heads and stay under max_tp.
  for (const auto& strategy : search::stage_strategies(8, with_sp, 2)) CHECK(strategy.model_degree() <= 2);
  for (const auto& strategy : search::stage_strategies(8, {.max_tp = 4, .ulysses = true}))
    CHECK(strategy.model_degree() <= 4);
  const search::SpaceOptions only_sp{.dp = false, .sdp = false, .tp = false, .ckpt = false, .ulysses = true};
  const auto pure = search::stage_strategies(8, only_sp);
  REQUIRE(pure.size() == 1);
  CHECK(pure[0].name() == "sp8");
}

TEST_CASE(
    "search: ZeRO-2, Ulysses SP, gradient accumulation and micro-batches DP divides, against brute force on "
    "one stage") {
  // Every plan of one stage: m micro-batches dividing B, and per layer every strategy whose DP degree divides B / m.
  const auto model = small_model_spec(3, 1024, 2048);
  const auto cluster = node(4, 16 * GiB);
  for (const bool ulysses : {false, true}) {
    CAPTURE(ulysses);
    search::SearchOptions options;
    options.granularity_bytes = 1 * MiB;
    options.global_batch = 12;
    // ZeRO-2 or Ulysses: both at once would make 34^3 plans per m.
    options.space.zero2 = !ulysses;
    options.space.ulysses = ulysses;
    options.space.pp_degrees = {1};
    struct Candidate {
      double throughput;
      double memory;
      int micro_batches;
    };
    std::vector<Candidate> candidates;
    const std::vector<int> counts = search::detail::micro_batch_counts(12, 1, true);
    CHECK(counts == std::vector<int>{1, 3, 6, 12});
    CHECK(search::detail::micro_batch_counts(12, 1, false) == std::vector<int>{1});
    CHECK(search::detail::micro_batch_counts(64, 2, false) == std::vector<int>{1, 2, 4, 8, 16, 32, 64});
    // The vocabulary layers' strategy adds its extras to the one stage's layers: each plan is costed once, and then
    // under every vocabulary strategy by swapping the extras.
    const search::AnalyticEstimator estimator(model, cluster);
    for (const int m : counts) {
      const auto strategies = search::detail::micro_batch_strategies(4, options.space, 16, 12 / m);
      std::vector<LayerStrategy> vocabularies;
      std::vector<search::StageExtra> extras;
      for (const LayerStrategy& strategy : strategies)
        if (!strategy.ckpt) {
          vocabularies.push_back(strategy);
          extras.push_back(estimator.stage_extra(0, 1, strategy, 12 / m, m, 1.0));
        }
      const std::size_t S = strategies.size();
      for (std::size_t code = 0; code < S * S * S; ++code) {
        search::Plan plan;
        plan.pp = 1;
        plan.global_batch = 12;
        plan.micro_batches = m;
        plan.stages.push_back(
            {.first_layer = 0,
             .strategies = {strategies[code % S], strategies[code / S % S], strategies[code / S / S]}});
        plan.vocabulary = vocabularies.front();
        const auto costed = search::evaluate(plan, model, cluster, options);
        const search::StagePlan& stage = costed.stages[0];
        for (const search::StageExtra& extra : extras) {
          const double sync = stage.time_sync - extras.front().time_sync + extra.time_sync;
          const double nosync = stage.time_nosync - extras.front().time_nosync + extra.time_nosync;
          candidates.push_back(
              {12 / ((m - 1) * nosync + sync), stage.memory_bytes - extras.front().bytes + extra.bytes, m});
        }
      }
    }
    auto brute_force = [&](double budget) {
      double best = 0;
      for (const Candidate& candidate : candidates)
        if (candidate.memory <= budget) best = std::max(best, candidate.throughput);
      return best;
    };
    // Budgets from below the least memory of any plan to above the least of one micro-batch's.
    double fewest = std::numeric_limits<double>::infinity();
    double fewest_whole = fewest;
    for (const Candidate& candidate : candidates) {
      fewest = std::min(fewest, candidate.memory);
      if (candidate.micro_batches == 1) fewest_whole = std::min(fewest_whole, candidate.memory);
    }
    const auto granules = [&](double bytes) { return static_cast<std::int64_t>(bytes / MiB) * MiB; };
    REQUIRE(fewest < fewest_whole - 64 * MiB);
    bool accumulated = false;
    bool extra_chosen = false;
    for (const std::int64_t budget :
         {granules(fewest) - 4 * MiB, granules(fewest) + 8 * MiB, granules((fewest + fewest_whole) / 2),
          granules(fewest_whole) + 8 * MiB, 16 * GiB}) {
      CAPTURE(budget);
      options.memory_bytes = budget;
      const double exact = brute_force(static_cast<double>(budget));
      if (exact == 0) {
        CHECK_THROWS_AS(search::search(model, cluster, options), infeasible);
        continue;
      }
      const auto report = search::search(model, cluster, options);
      search::validate(report, model, cluster, options);
      // The layer DP rounds each layer's memory up by less than a granule: never better than brute force, never worse
      // than brute force with that much less memory.
      CHECK(report.best.throughput <= exact * (1 + 1e-12));
      const double coarser = brute_force(static_cast<double>(budget - 3 * options.granularity_bytes));
      CHECK(report.best.throughput >= coarser * (1 - 1e-12));
      accumulated = accumulated || report.best.micro_batches > 1;
      for (const auto& strategy : report.best.stages[0].strategies)
        extra_chosen = extra_chosen || (ulysses ? strategy.sp > 1 : strategy.zero2);
    }
    CHECK(accumulated);
    CHECK(extra_chosen);
  }
}

namespace {

// A random stage problem: `strategies` strategies in `layouts` layouts; memory in whole granules when
// `aligned`, no backward memory when `forward_only`.
search::StageProblem random_problem(Rng& rng, int layers, int strategies, int layouts, double granularity, bool aligned,
                                    bool forward_only) {
  search::StageProblem problem;
  problem.layers = layers;
  problem.strategies = strategies;
  problem.layouts = layouts;
  for (int s = 0; s < strategies; ++s)
    problem.layout.push_back(s < layouts ? s : static_cast<int>(rng.uniform_int(0, layouts - 1)));
  auto memory = [&] {
    return aligned ? granularity * static_cast<double>(rng.uniform_int(0, 6)) : granularity * 6 * rng.uniform();
  };
  for (int l = 0; l < layers; ++l)
    for (int s = 0; s < strategies; ++s) {
      problem.forward_bytes.push_back(memory());
      problem.state_bytes.push_back(memory());
      problem.backward_bytes.push_back(forward_only ? 0.0 : memory());
      problem.time.push_back(1.0 + 9.0 * rng.uniform());
    }
  for (int l = 0; l < layers; ++l)
    for (int from = 0; from < layouts; ++from)
      for (int to = 0; to < layouts; ++to) problem.transition.push_back(from == to ? 0.0 : 2.0 * rng.uniform());
  problem.budget = granularity * static_cast<double>(rng.uniform_int(layers, 12 * layers));
  return problem;
}

// Every plan: the cheapest whose Eq. 2 peak fits (inf if none).
double brute_force(const search::StageProblem& problem) {
  double best = inf;
  std::vector<int> choice(static_cast<std::size_t>(problem.layers), 0);
  while (true) {
    if (search::plan_memory(problem, choice) <= problem.budget)
      best = std::min(best, search::plan_time(problem, choice));
    std::size_t k = 0;
    while (k < choice.size() && ++choice[k] == problem.strategies) choice[k++] = 0;
    if (k == choice.size()) return best;
  }
}

void check_solution(const search::StageProblem& problem, const search::StageSolution& solution) {
  if (!solution.feasible) return;
  REQUIRE(solution.choice.size() == static_cast<std::size_t>(problem.layers));
  CHECK(search::plan_memory(problem, solution.choice) <= problem.budget);
  CHECK(solution.memory == doctest::Approx(search::plan_memory(problem, solution.choice)));
  CHECK(solution.time == doctest::Approx(search::plan_time(problem, solution.choice)));
}

}  // namespace

TEST_CASE("layer DP: the Pareto variant equals brute force; the discretised DP is feasible and no better") {
  Rng rng(7);
  search::StageWorkspace work;
  const double granularity = 1000;
  for (int trial = 0; trial < 400; ++trial) {
    const int layers = static_cast<int>(rng.uniform_int(1, 4));
    const int strategies = static_cast<int>(rng.uniform_int(1, 4));
    const int layouts = static_cast<int>(rng.uniform_int(1, strategies));
    const auto problem = random_problem(rng, layers, strategies, layouts, granularity, false, false);
    const double expected = brute_force(problem);
    const auto exact = search::solve_stage_exact(problem);
    check_solution(problem, exact);
    CHECK(exact.feasible == (expected < inf));
    if (exact.feasible) CHECK(exact.time == doctest::Approx(expected).epsilon(1e-12));
    const auto discrete = search::solve_stage(problem, granularity, work);
    check_solution(problem, discrete);
    if (discrete.feasible) CHECK(discrete.time >= expected * (1 - 1e-12));
  }
}

TEST_CASE("layer DP: one table for several budgets gives each budget's own solution") {
  Rng rng(13);
  search::StageWorkspace work;
  search::StageWorkspace alone;
  const double granularity = 4096;
  for (int trial = 0; trial < 200; ++trial) {
    const int layers = static_cast<int>(rng.uniform_int(1, 5));
    const int strategies = static_cast<int>(rng.uniform_int(1, 6));
    auto problem = random_problem(rng, layers, strategies, static_cast<int>(rng.uniform_int(1, strategies)),
                                  granularity, trial % 2 == 0, trial % 3 == 0);
    std::vector<double> budgets;
    for (int k = 0; k < 4; ++k) budgets.push_back(granularity * (12.0 * layers * rng.uniform() - 1));
    const auto together = search::solve_stage(problem, budgets, granularity, work);
    REQUIRE(together.size() == budgets.size());
    for (std::size_t k = 0; k < budgets.size(); ++k) {
      problem.budget = budgets[k];
      const auto single = search::solve_stage(problem, granularity, alone);
      CHECK(together[k].feasible == single.feasible);
      CHECK(together[k].choice == single.choice);
      if (single.feasible) {
        CHECK(together[k].time == single.time);
        CHECK(together[k].memory == single.memory);
      }
    }
  }
  CHECK_THROWS_AS(search::solve_stage(search::StageProblem{}, std::vector<double>{}, granularity, work), invalid_input);
}

TEST_CASE("layer DP: whole granules give the exact optimum; otherwise within one granule per layer") {
  Rng rng(11);
  search::StageWorkspace work;
  const double granularity = 4096;
  for (int trial = 0; trial < 300; ++trial) {
    const int layers = static_cast<int>(rng.uniform_int(1, 4));
    const int strategies = static_cast<int>(rng.uniform_int(1, 5));
    const int layouts = static_cast<int>(rng.uniform_int(1, strategies));
    const bool aligned = trial % 2 == 0;
    auto problem = random_problem(rng, layers, strategies, layouts, granularity, aligned, true);
    const auto discrete = search::solve_stage(problem, granularity, work);
    const auto exact = search::solve_stage_exact(problem);
    check_solution(problem, discrete);
    if (aligned) {
      CHECK(discrete.feasible == exact.feasible);
      if (exact.feasible) CHECK(discrete.time == doctest::Approx(exact.time).epsilon(1e-12));
      continue;
    }
    if (exact.feasible && discrete.feasible) CHECK(discrete.time >= exact.time * (1 - 1e-12));
    if (!exact.feasible) CHECK_FALSE(discrete.feasible);
    // Rounding costs at most one granule per layer: the exact optimum with that much less memory is
    // never better than the discretised DP.
    problem.budget -= granularity * layers;
    const auto tighter = search::solve_stage_exact(problem);
    if (tighter.feasible) {
      REQUIRE(discrete.feasible);
      CHECK(discrete.time <= tighter.time * (1 + 1e-12));
    }
  }
}

TEST_CASE("layer DP: Algorithm 3's check rejects plans whose backward peak overflows") {
  // Two layers, two strategies: A keeps activations (O_f 6, O_b 0, fast), B checkpoints (O_f 1, O_b 5, slow).
  search::StageProblem problem;
  problem.layers = 2;
  problem.strategies = 2;
  problem.layouts = 1;
  problem.layout = {0, 0};
  problem.forward_bytes = {6, 1, 6, 1};
  problem.backward_bytes = {0, 5, 0, 5};
  problem.state_bytes = {0, 0, 0, 0};
  problem.time = {1, 2, 1, 2};
  problem.transition = {0, 0};
  problem.budget = 7;
  search::StageWorkspace work;
  // A,A needs 12; B,B peaks at 1 + 1 + 5 = 7; A,B peaks at 6 + 1 + 5 = 12; B,A at 1 + 6 = 7.
  const auto solution = search::solve_stage(problem, 1, work);
  REQUIRE(solution.feasible);
  CHECK(solution.choice == std::vector<int>{1, 0});
  CHECK(solution.time == 3);
  CHECK(solution.memory == 7);
  CHECK(search::solve_stage_exact(problem).time == 3);
  problem.budget = 6.5;
  CHECK_FALSE(search::solve_stage(problem, 1, work).feasible);
  CHECK_FALSE(search::solve_stage_exact(problem).feasible);
}

TEST_CASE("layer DP: bad input") {
  search::StageProblem problem;
  search::StageWorkspace work;
  CHECK_THROWS_AS(search::solve_stage(problem, 1, work), invalid_input);
  problem.layers = 1;
  problem.strategies = 1;
  problem.layout = {0};
  problem.forward_bytes = {1};
  problem.backward_bytes = {0};
  problem.state_bytes = {1};
  problem.time = {1};
  problem.transition = {0};
  problem.budget = 10;
  CHECK(search::solve_stage(problem, 1, work).feasible);
  CHECK_THROWS_AS(search::solve_stage(problem, 0, work), invalid_input);
  CHECK_THROWS_AS(search::solve_stage(problem, 1e-9 * 10, work), invalid_input);
  problem.time = {-1};
  CHECK_THROWS_AS(search::solve_stage(problem, 1, work), invalid_input);
  problem.time = {1};
  problem.layout = {1};
  CHECK_THROWS_AS(search::solve_stage(problem, 1, work), invalid_input);
  problem.layout = {0};
  problem.forward_bytes = {1, 2};
  CHECK_THROWS_AS(search::solve_stage_exact(problem), invalid_input);
  // A backtracking table past 2^28 entries asks for a coarser granularity.
  problem.layers = 300;
  problem.forward_bytes.assign(300, 1);
  problem.backward_bytes.assign(300, 0);
  problem.state_bytes.assign(300, 1);
  problem.time.assign(300, 1);
  problem.transition.assign(300, 0);
  problem.budget = 1 << 20;
  CHECK_THROWS_AS(search::solve_stage(problem, 1, work), invalid_input);
  CHECK(search::solve_stage(problem, 64, work).feasible);
}

TEST_CASE("partition: min-max split equals brute force") {
  Rng rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const int layers = static_cast<int>(rng.uniform_int(1, 9));
    const int stages = static_cast<int>(rng.uniform_int(1, layers));
    std::vector<double> weight;
    for (int l = 0; l < layers; ++l) weight.push_back(rng.uniform());
    std::vector<double> factor;
    for (int i = 0; i < stages; ++i) factor.push_back(1 + rng.uniform());
    auto cost = [&](int stage, int first, int count) {
      double sum = 0;
      for (int l = first; l < first + count; ++l) sum += weight[static_cast<std::size_t>(l)];
      return factor[static_cast<std::size_t>(stage)] * sum;
    };
    auto value = [&](const std::vector<int>& sizes) {
      double peak = 0;
      int first = 0;
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        peak = std::max(peak, cost(static_cast<int>(i), first, sizes[i]));
        first += sizes[i];
      }
      return peak;
    };
    double best = inf;
    std::function<void(std::vector<int>&, int)> all = [&](std::vector<int>& sizes, int left) {
      if (static_cast<int>(sizes.size()) == stages - 1) {
        sizes.push_back(left);
        best = std::min(best, value(sizes));
        sizes.pop_back();
        return;
      }
      for (int count = 1; left - count >= stages - static_cast<int>(sizes.size()) - 1; ++count) {
        sizes.push_back(count);
        all(sizes, left - count);
        sizes.pop_back();
      }
    };
    std::vector<int> sizes;
    all(sizes, layers);
    const auto split = search::min_max_partition(layers, stages, cost);
    REQUIRE(split.size() == static_cast<std::size_t>(stages));
    for (const int count : split) CHECK(count >= 1);
    CHECK(value(split) == doctest::Approx(best).epsilon(1e-12));
  }
  CHECK(search::even_partition(10, 4) == std::vector<int>{2, 2, 3, 3});
  CHECK_THROWS_AS(search::even_partition(3, 4), invalid_input);
  const std::vector<double> equal{1, 1, 1, 1};
  CHECK(search::balance(equal) == doctest::Approx(0.75));
}

TEST_CASE("estimator: memory and time follow the strategies") {
  const search::AnalyticEstimator estimator(small_model_spec(4), node(8));
  const auto dp = estimator.layer(0, {.tp = 1, .dp = 8}, 64);
  const auto sdp = estimator.layer(0, {.tp = 1, .dp = 8, .sdp = true}, 64);
  const auto tp = estimator.layer(0, {.tp = 8, .dp = 1}, 64);
  const auto dp_ckpt = estimator.layer(0, {.tp = 1, .dp = 8, .ckpt = true}, 64);
  CHECK(sdp.state_bytes == doctest::Approx(dp.state_bytes / 8));
  CHECK(tp.state_bytes == doctest::Approx(dp.state_bytes / 8));
  CHECK(sdp.forward_bytes == doctest::Approx(dp.forward_bytes));
  CHECK(dp_ckpt.forward_bytes < dp.forward_bytes);
  CHECK(dp_ckpt.backward_bytes + dp_ckpt.forward_bytes == doctest::Approx(dp.forward_bytes));
  CHECK(dp_ckpt.time_nosync > dp.time_nosync);
  // Gradient sync costs only on the last micro-batch; SDP communicates 1.5x DP's volume.
  CHECK(dp.time_sync > dp.time_nosync);
  CHECK(sdp.time_nosync > dp.time_nosync);
  // Per sample, TP replicates the boundary activation but splits the rest (TP holds 64 samples, DP 8).
  CHECK(tp.forward_bytes / 64 > dp.forward_bytes / 8 / 8);
  CHECK(tp.forward_bytes / 64 < dp.forward_bytes / 8);
  // ZeRO-2: DP's time, whole parameters, the rest sharded; whole gradients too while micro-batches accumulate.
  const auto& spec = estimator.model().layers[0];
  const double params = static_cast<double>(spec.parameter_count());
  const double states = estimator.model().state_bytes_per_param;
  const double q = estimator.model().dtype_bytes;
  const auto zero2 = estimator.layer(0, {.tp = 1, .dp = 8, .zero2 = true}, 64);
  const auto zero2_accumulating = estimator.layer(0, {.tp = 1, .dp = 8, .zero2 = true}, 64, 4);
  CHECK(zero2.state_bytes == doctest::Approx(q * params + (states - q) * params / 8));
  CHECK(zero2_accumulating.state_bytes == doctest::Approx(2 * q * params + (states - 2 * q) * params / 8));
  CHECK(zero2.time_sync == dp.time_sync);
  CHECK(zero2.time_nosync == dp.time_nosync);
  CHECK(zero2.forward_bytes == dp.forward_bytes);
  CHECK(estimator.layer(0, {.tp = 1, .dp = 8, .sdp = true}, 64, 4).state_bytes == sdp.state_bytes);
  // Ulysses SP 8: DP's compute, whole parameters, every activation split by sequence, four all-to-alls of a 1/8 slice
  // per pass, and the gradient all-reduce over the 8 SP ranks at DP's volume.
  const auto sp = estimator.layer(0, {.tp = 1, .dp = 1, .sp = 8}, 64);
  const auto sp_ckpt = estimator.layer(0, {.tp = 1, .dp = 1, .ckpt = true, .sp = 8}, 64);
  const auto sp_sdp = estimator.layer(0, {.tp = 1, .dp = 2, .sdp = true, .sp = 4}, 64);
  const double sample = static_cast<double>(spec.sequence * spec.hidden) * q;
  CHECK(sp.state_bytes == doctest::Approx(dp.state_bytes));
  CHECK(sp.forward_bytes == doctest::Approx(dp.forward_bytes));
  CHECK(sp_ckpt.forward_bytes == doctest::Approx(64 * sample / 8));
  CHECK(sp_sdp.state_bytes == doctest::Approx(sdp.state_bytes));
  const double all_to_alls = 4 * 7.0 / 8 * 64 * sample / 8 / 100e9;
  const double compute = dp.time_nosync;  // DP has no communication without the sync
  CHECK(sp.time_nosync == doctest::Approx(compute + 2 * all_to_alls));
  CHECK(sp_ckpt.time_nosync == doctest::Approx(compute * 4 / 3 + 3 * all_to_alls));
  CHECK(sp.time_sync - sp.time_nosync == doctest::Approx(dp.time_sync - dp.time_nosync));
  // TP to SP of one group keeps each rank's slice; SP to TP gathers it.
  CHECK(estimator.transition(1, {.tp = 4, .dp = 2}, {.tp = 1, .dp = 2, .sp = 4}, 64) == 0);
  CHECK(estimator.transition(1, {.tp = 1, .dp = 2, .sp = 4}, {.tp = 4, .dp = 2}, 64) ==
        doctest::Approx(2 * 3.0 / 4 * 32 * sample / 100e9));
  CHECK(estimator.transition(1, {.tp = 1, .dp = 2, .sp = 4}, {.tp = 1, .dp = 2, .ckpt = true, .sp = 4}, 64) == 0);
  // Overlap: γ·min + |difference|.
  CHECK(estimator.overlap(2, 1) == doctest::Approx(2.3));
  CHECK(estimator.overlap(1, 0) == doctest::Approx(1));
  // R is free between strategies of one layout and costs otherwise.
  CHECK(estimator.transition(1, {.tp = 2, .dp = 4}, {.tp = 2, .dp = 4, .sdp = true, .ckpt = true}, 64) == 0);
  CHECK(estimator.transition(1, {.tp = 2, .dp = 4}, {.tp = 1, .dp = 8}, 64) > 0);
  CHECK(estimator.transition(1, {.tp = 2, .dp = 4}, {.tp = 2, .dp = 4, .tp_inner = false}, 64) > 0);
  // With a faster inner link (4 GPUs), TP on the consecutive ranks beats TP across them.
  auto islands = node(8);
  islands.levels = {{.size = 4, .bandwidth = 100e9}, {.size = 8, .bandwidth = 10e9}};
  const search::AnalyticEstimator split(small_model_spec(4), islands);
  CHECK(split.layer(0, {.tp = 2, .dp = 4}, 64).time_nosync <
        split.layer(0, {.tp = 2, .dp = 4, .tp_inner = false}, 64).time_nosync);
}

namespace {

search::SearchOptions quick_options(std::int64_t memory) {
  search::SearchOptions options;
  options.memory_bytes = memory;
  options.granularity_bytes = 64 * MiB;
#ifdef NDEBUG
  options.max_batch = 256;
#else
  options.max_batch = 64;
#endif
  options.batch_step = 8;
  return options;
}

}  // namespace

TEST_CASE("search: BMW >= Base >= every baseline, every plan valid, more memory never lowers the optimum") {
  struct Case {
    int layers;
    std::int64_t hidden;
    std::int64_t sequence;
    std::int64_t gpus;
    bool islands = false;  // 4-GPU islands with a 10x slower link between them
  };
  const std::vector<Case> small_cases = {
      {8, 1024, 512, 8}, {12, 1536, 1024, 8}, {6, 2048, 256, 4}, {16, 1024, 512, 16}, {8, 2048, 512, 8, true}};
#ifdef NDEBUG
  std::vector<Case> cases = small_cases;
  cases.insert(cases.end(), {{24, 1024, 1024, 8}, {32, 1280, 512, 8, true}, {12, 4096, 2048, 16}});
  const std::vector<std::int64_t> budgets = {3 * GiB, 4 * GiB, 5 * GiB, 6 * GiB, 8 * GiB, 10 * GiB, 12 * GiB, 16 * GiB};
#else
  const std::vector<Case> cases = small_cases;
  const std::vector<std::int64_t> budgets = {4 * GiB, 6 * GiB, 8 * GiB, 12 * GiB};
#endif
  for (const Case& c : cases) {
    const auto model = small_model_spec(c.layers, c.hidden, c.sequence);
    auto cluster = node(c.gpus, 16 * GiB);
    if (c.islands) cluster.levels = {{.size = 4, .bandwidth = 100e9}, {.size = 8, .bandwidth = 10e9}};
    double previous_best = 0;
    double previous_base = 0;
    for (const std::int64_t memory : budgets) {
      if (memory > cluster.memory_bytes) continue;
      CAPTURE(c.layers);
      CAPTURE(c.gpus);
      CAPTURE(memory);
      const auto options = quick_options(memory);
      search::SearchReport report;
      std::vector<std::pair<std::size_t, std::size_t>> reports;
      try {
        report = search::search(model, cluster, options,
                                [&](std::size_t done, std::size_t searches) { reports.emplace_back(done, searches); });
      } catch (const infeasible&) {
        CHECK(previous_best == 0);
        continue;
      }
      search::validate(report, model, cluster, options);
      // One progress report per search: Base, each baseline, BMW.
      const std::size_t searches = report.baselines.size() + 2;
      REQUIRE(reports.size() == searches);
      for (std::size_t k = 0; k < searches; ++k) CHECK(reports[k] == std::pair{k + 1, searches});
      REQUIRE(report.base.has_value());
      CHECK(report.best.throughput >= report.base->throughput);
      for (const auto& baseline : report.baselines)
        if (baseline.plan) CHECK(report.base->throughput >= baseline.plan->throughput);
      CHECK(report.best.throughput >= previous_best);
      CHECK(report.base->throughput >= previous_base);
      previous_best = report.best.throughput;
      previous_base = report.base->throughput;
      // The standalone Base search is what the report's Base started from.
      const auto own = search::search_base(model, cluster, options);
      if (own) {
        search::validate(*own, model, cluster, options, options.space);
        CHECK(report.base->throughput >= own->throughput);
      }
    }
    CHECK(previous_best > 0);
  }
}

TEST_CASE("search: the plans do not depend on the thread count") {
  // A sweep that ends when a batch no longer fits (4 GiB), and one that runs to a max_batch that no thread count
  // here divides into whole rounds.
  const auto model = small_model_spec(8, 1024, 512);
  const auto cluster = node(8, 16 * GiB);
  for (const std::int64_t memory : {4 * GiB, 8 * GiB}) {
    auto options = quick_options(memory);
    options.max_batch = 8 * 13;
    const search::SearchReport one = search::search(model, cluster, options);
    for (const int threads : {2, 3, 5, 16}) {
      CAPTURE(memory);
      CAPTURE(threads);
      options.threads = threads;
      const search::SearchReport many = search::search(model, cluster, options);
      CHECK(many.best == one.best);
      CHECK(many.base == one.base);
      REQUIRE(many.baselines.size() == one.baselines.size());
      for (std::size_t k = 0; k < one.baselines.size(); ++k) CHECK(many.baselines[k].plan == one.baselines[k].plan);
    }
  }
}

TEST_CASE("search: BMW's accepted adjustments keep Eq. 7/8") {
  const auto model = small_model_spec(16, 1024, 1024);
  const auto cluster = node(8, 16 * GiB);
  auto options = quick_options(6 * GiB);
  options.global_batch = 64;
  std::size_t accepted = 0;
  for (const int pp : {2, 4, 8})
    for (const int m : {1, 2, 4, 8}) {
      if ((64 / m) % (8 / pp) != 0) continue;
      const auto trace = search::balance_trace(model, cluster, options, pp, 64, m);
      CHECK(trace.memory_balanced.size() == static_cast<std::size_t>(pp));
      CHECK(trace.time_balanced.size() == static_cast<std::size_t>(pp));
      if (trace.accepted.empty()) continue;
      // Re-derive the balance of p_m and p_t from a search pinned to them.
      auto alphas = [&](const std::vector<int>& sizes) {
        search::detail::Searcher searcher(model, cluster, options);
        auto context = searcher.context(options.space, pp, 64, m);
        const auto evaluation = context.evaluate(sizes);
        return std::pair{evaluation.feasible ? search::balance(evaluation.times()) : -1.0,
                         evaluation.feasible ? search::balance(evaluation.memories()) : -1.0};
      };
      const auto [t_m, m_m] = alphas(trace.memory_balanced);
      const auto [t_t, m_t] = alphas(trace.time_balanced);
      double last_t = t_m;
      for (const auto& step : trace.accepted) {
        ++accepted;
        const auto [t, mem] = alphas(step.sizes);
        CHECK(t == doctest::Approx(step.alpha_time));
        CHECK(mem == doctest::Approx(step.alpha_memory));
        CHECK(t >= last_t);
        CHECK(t >= t_m);
        CHECK(mem <= m_m);
        if (t_t >= 0) {
          CHECK(t <= t_t);
          CHECK(mem >= m_t);
        }
        last_t = t;
      }
      REQUIRE(trace.best.has_value());
    }
  CHECK(accepted > 0);
}

TEST_CASE("search: a fixed batch and GPipe") {
  const auto model = small_model_spec(8);
  const auto cluster = node(8, 16 * GiB);
  auto options = quick_options(8 * GiB);
  options.global_batch = 32;
  options.schedule = search::Schedule::gpipe;
  const auto report = search::search(model, cluster, options);
  search::validate(report, model, cluster, options);
  CHECK(report.best.global_batch == 32);
  for (const auto& baseline : report.baselines)
    if (baseline.plan) CHECK(baseline.plan->global_batch == 32);
  // A validator catches a tampered plan.
  auto broken = report.best;
  broken.stages.front().memory_bytes += 1e6;
  CHECK_THROWS_AS(search::validate(broken, model, cluster, options, options.space), invalid_plan);
  broken = report.best;
  broken.throughput *= 2;
  CHECK_THROWS_AS(search::validate(broken, model, cluster, options, options.space), invalid_plan);
  broken = report.best;
  broken.micro_batches = 3;
  CHECK_THROWS_AS(search::validate(broken, model, cluster, options, options.space), invalid_plan);
  broken = report.best;
  broken.stages.front().strategies.front().tp *= 2;
  CHECK_THROWS_AS(search::validate(broken, model, cluster, options, options.space), invalid_plan);
  broken = report.best;
  broken.vocabulary->ckpt = true;
  CHECK_THROWS_AS(search::validate(broken, model, cluster, options, options.space), invalid_plan);
}

TEST_CASE("search: a baseline's plan is inside a space only with its vocabulary layers") {
  // Base adopts a baseline's plan only inside the options' space: a DP+TP plan of pure TP layers is, unless its
  // embedding runs DDP in a space without it.
  const auto model = small_model_spec(4);
  search::Plan plan;
  plan.gpus = 8;
  plan.pp = 1;
  plan.global_batch = 8;
  plan.stages.push_back({.first_layer = 0, .strategies = std::vector<LayerStrategy>(4, LayerStrategy{.tp = 8})});
  const search::SpaceOptions no_ddp{.dp = false};
  plan.vocabulary = LayerStrategy{.tp = 8};
  CHECK(search::detail::within(plan, no_ddp, model));
  plan.vocabulary = LayerStrategy{.tp = 1, .dp = 8};
  CHECK_FALSE(search::detail::within(plan, no_ddp, model));
  CHECK(search::detail::within(plan, {}, model));
}

TEST_CASE("search: bad input and infeasible problems") {
  const auto model = small_model_spec(4);
  const auto cluster = node(8, 16 * GiB);
  auto options = quick_options(8 * GiB);
  options.global_batch = 16;
  auto bad = options;
  bad.memory_bytes = 32 * GiB;
  CHECK_THROWS_AS(search::search(model, cluster, bad), invalid_input);
  bad = options;
  bad.granularity_bytes = 0;
  CHECK_THROWS_AS(search::search(model, cluster, bad), invalid_input);
  bad.granularity_bytes = 1;
  CHECK_THROWS_AS(search::search(model, cluster, bad), invalid_input);
  bad = options;
  bad.global_batch = -1;
  CHECK_THROWS_AS(search::search(model, cluster, bad), invalid_input);
  for (const int threads : {0, search::max_search_threads + 1}) {
    bad = options;
    bad.threads = threads;
    CHECK_THROWS_WITH_AS(search::search(model, cluster, bad), doctest::Contains("search: threads must be in [1, 256]"),
                         invalid_input);
  }
  bad = options;
  bad.space.pp_degrees = {3};
  CHECK_THROWS_AS(search::search(model, cluster, bad), invalid_input);
  auto bad_model = model;
  bad_model.layers[1].heads = 7;
  CHECK_THROWS_AS(search::search(bad_model, cluster, options), invalid_input);
  bad_model = model;
  bad_model.layers.clear();
  CHECK_THROWS_AS(search::search(bad_model, cluster, options), invalid_input);
  auto bad_cluster = cluster;
  bad_cluster.gpus = 6;
  CHECK_THROWS_AS(search::search(model, bad_cluster, options), invalid_input);
  bad_cluster = cluster;
  bad_cluster.levels = {{.size = 4, .bandwidth = 1e9}};
  CHECK_THROWS_AS(search::search(model, bad_cluster, options), invalid_input);
  bad_cluster = cluster;
  bad_cluster.levels.front().bandwidth = 0;
  CHECK_THROWS_AS(search::search(model, bad_cluster, options), invalid_input);
  // A budget below the reserved context fits nothing.
  auto tiny = options;
  tiny.memory_bytes = 512 * MiB;
  CHECK_THROWS_AS(search::search(model, cluster, tiny), infeasible);
  // A space with no strategy for any stage of these 8 GPUs (TP only, at most 2-way, no pipeline); the
  // baselines outside it are reported but not adopted.
  auto narrow = options;
  narrow.space = {.dp = false, .sdp = false, .tp = true, .ckpt = false, .pp_degrees = {1}, .max_tp = 2};
  CHECK_THROWS_AS(search::search(model, cluster, narrow), infeasible);
  narrow.space.max_tp = 0;
  const auto tp_only = search::search(model, cluster, narrow);
  search::validate(tp_only, model, cluster, narrow);
  for (const auto& stage : tp_only.best.stages)
    for (const auto& strategy : stage.strategies) CHECK(strategy.tp == 8);
  // A global batch of 3: only the strategies of DP degree 1 take it, and a space without them has no plan.
  auto odd = options;
  odd.global_batch = 3;
  const auto odd_report = search::search(model, cluster, odd);
  search::validate(odd_report, model, cluster, odd);
  for (const auto& stage : odd_report.best.stages)
    for (const auto& strategy : stage.strategies) CHECK(strategy.dp == 1);
  odd.space.tp = false;
  odd.space.pp_degrees = {1, 2, 4};
  CHECK_THROWS_AS(search::search(model, cluster, odd), infeasible);
  // max_pp bounds the pipeline.
  auto shallow = options;
  shallow.space.max_pp = 2;
  CHECK(search::search(model, cluster, shallow).best.pp <= 2);
  shallow.space.max_pp = -1;
  CHECK_THROWS_AS(search::search(model, cluster, shallow), invalid_input);
  CHECK_THROWS_AS(search::balance_trace(model, cluster, options, 3, 16, 1), invalid_input);
  CHECK_THROWS_AS(search::balance_trace(model, cluster, options, 2, 16, 3), invalid_input);
  CHECK_THROWS_AS(search::count_strategies(6, true), invalid_input);
  CHECK_THROWS_AS(search::decision_trees(0, true), invalid_input);
}

TEST_CASE("analytic profile: T(l) fitted to the estimator, MaxLen from its memory") {
  const auto model = small_model_spec(8, 2048, 1024);
  const auto cluster = node(16, 40 * GiB);
  search::AnalyticProfileOptions options;
  options.memory_bytes = 24 * GiB;
  const cost::Profile profile = search::analytic_profile(model, cluster, options);
  CHECK(profile.gpus() == 16);
  CHECK(profile.schemes().size() == 13);  // TP 1, 2: PP 1..8; TP 4: PP 1..4; TP 8: PP 1, 2
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    CAPTURE(scheme.scheme.name());
    for (const std::int64_t length : {700, 3000, 20000}) {
      const double expected = search::analytic_stage_time(model, cluster, scheme.scheme, length);
      CHECK(scheme.latency(length) == doctest::Approx(expected).epsilon(0.02));
    }
    REQUIRE(scheme.max_len > 0);
    CHECK(scheme.max_len % options.granularity == 0);
    CHECK(search::analytic_stage_memory(model, cluster, scheme.scheme, scheme.max_len) <=
          static_cast<double>(options.memory_bytes));
    if (scheme.max_len < options.max_length)
      CHECK(search::analytic_stage_memory(model, cluster, scheme.scheme, scheme.max_len + options.granularity) >
            static_cast<double>(options.memory_bytes));
    // More TP splits states and activations: MaxLen never shrinks.
    if (scheme.scheme.tp() > 1) {
      if (const auto* narrower = profile.find(Scheme(scheme.scheme.tp() / 2, scheme.scheme.pp())))
        CHECK(scheme.max_len >= narrower->max_len);
    }
  }
  auto bad = options;
  bad.memory_bytes = 64 * GiB;
  CHECK_THROWS_AS(search::analytic_profile(model, cluster, bad), invalid_input);
  bad = options;
  bad.max_length = 512;
  CHECK_THROWS_AS(search::analytic_profile(model, cluster, bad), invalid_input);
  bad = options;
  bad.granularity = 0;
  CHECK_THROWS_AS(search::analytic_profile(model, cluster, bad), invalid_input);
}
