// compare::: the systems of Hydraulis §8 (with Megatron-LM's context parallelism beside its ⟨TP, PP⟩) on the same
// batches: each one's plans valid, names stable, the
// progress callback monotone, each system's choice the fastest of its options, and the results those the
// command line recorded (test/golden/simulate.json, which `sluice simulate` must reproduce byte for byte); a
// comparison's JSON document reads back exactly, and a broken one is rejected naming the field.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "document_checks.hpp"
#include "sluice/compare/compare.hpp"
#include "sluice/compare/microbatching.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/compare_json.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/microbatch/types.hpp"
#include "sluice/schedule/plan_pipeline.hpp"

namespace {

using sluice::compare::System;

sluice::cost::Profile bundled_profile(const std::string& name) {
  return sluice::io::read_document<sluice::cost::Profile>(sluice::io::resolve_data_file(name, "profiles"));
}

sluice::data::LengthDataset bundled_lengths(const std::string& name, std::int64_t context) {
  return sluice::data::LengthDataset::load(sluice::io::resolve_data_file(name, "lengths")).truncated(context);
}

std::vector<std::vector<sluice::Sequence>> batches_of(const sluice::data::LengthDataset& dataset, std::int64_t tokens,
                                                      std::uint64_t seed, int count) {
  sluice::data::BatchSampler sampler(dataset, {.tokens_per_batch = tokens, .seed = seed});
  std::vector<std::vector<sluice::Sequence>> batches;
  for (int k = 0; k < count; ++k) batches.push_back(sampler.next().sequences);
  return batches;
}

// LLaMA2-7B on 8 GPUs, context 16K, 30K tokens per iteration: small enough to stay quick under the sanitizers.
sluice::compare::Options small_options() {
  return {.profile = bundled_profile("llama2-7b").with_gpus(8),
          .context = 16384,
          .tokens = 30000,
          .problem = {.hidden = 4096,
                      .element_bytes = 2,
                      .link = {.latency = 1e-5, .bandwidth = 1e11},
                      .backward_ratio = 2},
          .dispatch = {.trials = 4},
          .seed = 1};
}

// The same with CP 2 and 4 (ring and Ulysses) and recomputation: every system has a scheme of its own.
sluice::compare::Options wide_options() {
  sluice::compare::Options options = small_options();
  options.profile = sluice::cost::Profile(sluice::cost::with_scheme_space(
      options.profile.spec(), {.cp_degrees = {2, 4},
                               .cp_kinds = {sluice::CpKind::ulysses, sluice::CpKind::ring},
                               .recompute = true,
                               .links = {}}));
  return options;
}

// A hand-made profile of 8 GPUs without a memory model (so no ZeRO-3 schemes), for the lower bound's tests.
sluice::cost::Profile bound_profile(int gpus_per_node, std::vector<sluice::cost::SchemeEntry> schemes) {
  return sluice::cost::Profile({.name = "bound",
                                .source = "test",
                                .model = {.name = "m", .layers = 4, .hidden = 1024, .vocab = 32000},
                                .gpus = 8,
                                .gpus_per_node = gpus_per_node,
                                .memory = std::nullopt,
                                .schemes = std::move(schemes)});
}

}  // namespace

TEST_CASE("compare: names, length ranges and homogeneous strategies") {
  CHECK(sluice::compare::name(System::megatron) == "megatron");
  CHECK(sluice::compare::name(System::megatron_cp) == "megatron_cp");
  CHECK(sluice::compare::name(System::deepspeed) == "deepspeed");
  CHECK(sluice::compare::name(System::hotspa) == "hotspa");
  CHECK(sluice::compare::name(System::dynapipe) == "dynapipe");
  CHECK(sluice::compare::name(System::sluice) == "sluice");
  CHECK(sluice::compare::bucket_bounds(16384) == std::vector<std::int64_t>{4096, 16384});
  CHECK(sluice::compare::bucket_bounds(32768) == std::vector<std::int64_t>{4096, 16384, 32768});
  CHECK(sluice::compare::bucket_bounds(131072) == std::vector<std::int64_t>{4096, 16384, 65536, 131072});
  CHECK(sluice::compare::bucket_bounds(2048) == std::vector<std::int64_t>{2048});

  const sluice::compare::Options options = small_options();
  const std::vector<sluice::Strategy> homogeneous = sluice::compare::homogeneous_strategies(options, 16384);
  REQUIRE(!homogeneous.empty());
  for (const sluice::Strategy& strategy : homogeneous) {
    CHECK(strategy.is_homogeneous());
    CHECK(strategy.gpus() == 8);
    CHECK(options.profile.pipelines(strategy).front().max_len >= 16384);
    CHECK(strategy.parts().front().scheme.tp() <= options.profile.spec().gpus_per_node);
  }
}

TEST_CASE("compare: the systems' plans, progress and choices") {
  const sluice::compare::Options options = wide_options();
  const auto dataset = bundled_lengths("cpython-stdlib", options.context);
  const auto batches = batches_of(dataset, options.tokens, 1, 2);
  std::vector<std::pair<std::size_t, std::size_t>> reports;
  const sluice::compare::Comparison comparison = sluice::compare::compare_systems(
      options, dataset, batches, [&](std::size_t done, std::size_t total) { reports.emplace_back(done, total); });

  for (const System system : sluice::compare::all_systems) {
    const sluice::compare::SystemRun& run = comparison.systems[system];
    CAPTURE(run.name);
    CHECK(run.name == sluice::compare::name(system));
    REQUIRE_FALSE(run.failure.has_value());
    CHECK(run.iterations.size() == 2);
    // The flex CP systems simulate no pipelines: their micro-batches' groups re-form.
    CHECK(run.first.pipelines.empty() == (system == System::dynamic_cp || system == System::flexsp));
    // The plans a system keeps for pictures are those of the batches it was given (DeepSpeed's, on its ZeRO-3
    // profile, below).
    for (std::size_t k = 0; k < run.plans.size() && system != System::deepspeed; ++k)
      CHECK_NOTHROW(sluice::assign::validate(run.plans[k], batches[k], options.profile));
  }
  CHECK(comparison.systems[System::megatron].plans.size() == 2);
  CHECK(comparison.systems[System::sluice].plans.size() == 2);
  CHECK(comparison.systems[System::hotspa].strategies.size() == comparison.bounds.size());

  // One report per iteration, counting iterations.
  CHECK(reports == std::vector<std::pair<std::size_t, std::size_t>>{{1, 2}, {2, 2}});

  // Each Megatron-LM's strategy is the fastest homogeneous one of its schemes by mean: none of the others, run
  // alone, beats it. ⟨TP, PP⟩ keeps to CP 1; with CP, the ring; the space gives both more than one to choose from.
  using Admits = bool (*)(const sluice::Scheme&);
  for (const auto& [system, admits] :
       {std::pair<System, Admits>{System::megatron, sluice::compare::megatron_scheme},
        std::pair<System, Admits>{System::megatron_cp, sluice::compare::megatron_cp_scheme}}) {
    const sluice::compare::SystemRun& chosen = comparison.systems[system];
    CHECK(admits(chosen.strategies.front().parts().front().scheme));
    const double chosen_mean = sluice::compare::mean(chosen.seconds());
    const auto strategies = sluice::compare::homogeneous_strategies(options, options.context, admits);
    CHECK(strategies.size() >= 2);
    for (const sluice::Strategy& strategy : strategies) {
      sluice::compare::Megatron alone(options, std::vector{strategy});
      for (const auto& batch : batches) alone.add(batch);
      CHECK(sluice::compare::mean(std::move(alone).result().seconds()) >= chosen_mean);
    }
  }
  CHECK(sluice::compare::mean(comparison.systems[System::megatron_cp].seconds()) <=
        sluice::compare::mean(comparison.systems[System::megatron].seconds()));
  const sluice::Scheme deepspeed = comparison.systems[System::deepspeed].strategies.front().parts().front().scheme;
  CHECK(sluice::cost::zero3_scheme(deepspeed));
  const double megatron_mean = sluice::compare::mean(comparison.systems[System::megatron].seconds());
  // sluice keeps, per iteration, the fastest simulated of its candidates: no candidate alone beats it.
  const sluice::compare::SystemRun& sluice_run = comparison.systems[System::sluice];
  for (const sluice::Strategy& candidate : comparison.candidates) {
    const auto holds = options.profile.pipelines(candidate).front().max_len;
    for (std::size_t k = 0; k < batches.size(); ++k) {
      std::int64_t longest = 0;
      for (const sluice::Sequence& sequence : batches[k]) longest = std::max(longest, sequence.length());
      if (holds < longest) continue;
      sluice::compare::Sluice alone(options, std::vector{candidate});
      alone.add(batches[k]);
      CHECK(std::move(alone).result().iterations[0].seconds >= sluice_run.iterations[k].seconds);
    }
  }

  const sluice::compare::BySystem<sluice::compare::Summary> summaries = sluice::compare::summarize(comparison);
  CHECK(*summaries[System::sluice].speedup == doctest::Approx(1.0));
  CHECK(summaries[System::megatron].seconds == doctest::Approx(megatron_mean));

  // No system beats the lower bound, iteration by iteration, and each summary says by how much it is above.
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const auto& bound = comparison.batches[k].lower_bound;
    REQUIRE(bound.has_value());
    CHECK(*bound == sluice::compare::iteration_bound(options, batches[k]));
    for (const System system : sluice::compare::all_systems) {
      CAPTURE(sluice::compare::name(system));
      CHECK(comparison.systems[system].iterations[k].seconds >= bound->seconds);
    }
  }
  for (const System system : sluice::compare::all_systems) {
    REQUIRE(summaries[system].over_bound.has_value());
    CHECK(*summaries[system].over_bound >= 1);
  }
}

TEST_CASE("lower bound: every term by hand") {
  // 8 GPUs in nodes of 2: ⟨1, 1⟩, ⟨2, 2⟩ and ⟨4, 1⟩, whose TP spans nodes; no memory model, so no ZeRO-3 schemes.
  sluice::compare::Options options{
      .profile = bound_profile(
          2, {{sluice::Scheme(1, 1), sluice::cost::QuadraticLatency(1e-9, 1e-5, 1e-2), 4000, std::nullopt},
              {sluice::Scheme(2, 2), sluice::cost::QuadraticLatency(3e-10, 3e-6, 5e-3), 16000, std::nullopt},
              {sluice::Scheme(4, 1), sluice::cost::QuadraticLatency(1e-10, 1e-6, 1e-3), 32000, std::nullopt}})};
  const auto batch = [](std::vector<std::int64_t> lengths) {
    std::vector<sluice::Sequence> sequences;
    for (const std::int64_t length : lengths)
      sequences.emplace_back(static_cast<std::int64_t>(sequences.size()), length);
    return sequences;
  };
  const auto near = [](double value) { return doctest::Approx(value).epsilon(1e-12); };
  // Per sequence, GPUs × (a·l² + b·l + c·l/MaxLen) on its cheapest scheme; the ⟨2, 2⟩ pipeline's fill and drain
  // are its stage's 2 GPUs × (0 + 1) stages waiting × T(1000) = 2 × 0.0083, as 10000 tokens need it.
  const std::vector<sluice::Sequence> mixed = batch({1000, 3000, 10000, 1000});
  const double one = 1e-3 + 1e-2 + 2.5e-3;          // 1000 on ⟨1, 1⟩ (⟨2, 2⟩: 4 × 0.0036125)
  const double three = 9e-3 + 3e-2 + 7.5e-3;        // 3000 on ⟨1, 1⟩ (⟨2, 2⟩: 4 × 0.0126375)
  const double ten = 4 * (3e-2 + 3e-2 + 3.125e-3);  // 10000 on ⟨2, 2⟩ only
  const double fill = 2 * (3e-4 + 3e-3 + 5e-3);
  auto bound = sluice::compare::iteration_bound(options, mixed);
  REQUIRE(bound.has_value());
  CHECK(bound->area_seconds == near((2 * one + three + ten + fill) / 8));
  // 10000 tokens through ⟨2, 2⟩'s two stages, forward and backward: 2 × T(10000).
  CHECK(bound->critical_path_seconds == near(2 * (3e-2 + 3e-2 + 5e-3)));
  CHECK(bound->seconds == bound->critical_path_seconds);

  // Without a sequence that needs two stages, one-stage plans pay no fill and drain; 40 short ones make the
  // GPU-time the larger bound.
  const std::vector<sluice::Sequence> short_ones = batch(std::vector<std::int64_t>(40, 1000));
  bound = sluice::compare::iteration_bound(options, short_ones);
  REQUIRE(bound.has_value());
  CHECK(bound->area_seconds == near(40 * one / 8));
  CHECK(bound->critical_path_seconds == near(2 * (3e-4 + 3e-3 + 5e-3)));  // ⟨2, 2⟩'s trip beats ⟨1, 1⟩'s 0.021
  CHECK(bound->seconds == bound->area_seconds);

  // TP across nodes admits ⟨4, 1⟩: 10000 tokens on one stage, 4 × (0.01 + 0.01 + 0.0003125) GPU-seconds.
  options.cross_node_tp = true;
  bound = sluice::compare::iteration_bound(options, mixed);
  REQUIRE(bound.has_value());
  const double wide_one = 4 * (1e-4 + 1e-3 + 1e-3 * 1000.0 / 32000);    // below `one`
  const double wide_three = 4 * (9e-4 + 3e-3 + 1e-3 * 3000.0 / 32000);  // below `three`
  CHECK(bound->area_seconds == near((2 * wide_one + wide_three + 4 * (1e-2 + 1e-2 + 3.125e-4)) / 8));
  CHECK(bound->critical_path_seconds == near(1e-2 + 1e-2 + 1e-3));

  // A sequence no scheme holds: no bound (no system runs the batch); an empty batch is refused.
  CHECK_FALSE(sluice::compare::iteration_bound(options, batch({1000, 40000})).has_value());
  CHECK_THROWS_AS((void)sluice::compare::iteration_bound(options, std::vector<sluice::Sequence>{}),
                  sluice::invalid_input);
}

TEST_CASE("lower bound: equals the best assignment of sequences to schemes, found by brute force") {
  // 8 GPUs in nodes of 4: the slow, cheap ⟨1, 1⟩, the pipelined ⟨2, 2⟩, and ⟨4, 1⟩ and ⟨8, 1⟩, fast and dear.
  const sluice::cost::Profile profile = bound_profile(
      4, {{sluice::Scheme(1, 1), sluice::cost::QuadraticLatency(1e-9, 1e-5, 1e-2), 8000, std::nullopt},
          {sluice::Scheme(2, 2), sluice::cost::QuadraticLatency(3e-10, 3e-6, 5e-3), 16000, std::nullopt},
          {sluice::Scheme(4, 1), sluice::cost::QuadraticLatency(2e-10, 2e-6, 1e-3), 24000, std::nullopt},
          {sluice::Scheme(8, 1), sluice::cost::QuadraticLatency(1.5e-10, 1.5e-6, 1e-3), 32000, std::nullopt}});
  // Any plan runs each sequence on one scheme: its makespan is at least every chosen trip (PP · T(l)) and the
  // chosen GPU-seconds (with the constants' share, and one fill and drain where a scheme has stages) over 8 GPUs.
  const auto brute_force = [&](const std::vector<std::int64_t>& lengths, bool cross_node_tp) {
    const std::vector<sluice::cost::SchemeCost> schemes =
        sluice::compare::detail::bound_schemes(profile, cross_node_tp);
    const std::int64_t shortest = *std::ranges::min_element(lengths);
    double fill_and_drain = std::numeric_limits<double>::infinity();
    for (const auto& cost : schemes) {
      const int stages = cost.scheme.pp();
      const auto stage_gpus = static_cast<double>(cost.scheme.gpus() / stages);
      if (stages > 1 && cost.max_len >= shortest)
        fill_and_drain = std::min(fill_and_drain, stage_gpus * stages * (stages - 1) / 2.0 * cost.latency(shortest));
    }
    double best = std::numeric_limits<double>::infinity();
    std::vector<std::size_t> choice(lengths.size(), 0);
    while (true) {
      double trip = 0, busy = 0;
      bool held = true, pipelined = false;
      for (std::size_t i = 0; i < lengths.size(); ++i) {
        const auto& cost = schemes[choice[i]];
        const auto l = static_cast<double>(lengths[i]);
        held = held && cost.max_len >= lengths[i];
        pipelined = pipelined || cost.scheme.pp() > 1;
        trip = std::max(trip, cost.scheme.pp() * cost.latency(lengths[i]));
        busy += static_cast<double>(cost.scheme.gpus()) *
                (cost.latency.sequence_time(lengths[i]) +
                 cost.latency.microbatch_overhead() * l / static_cast<double>(cost.max_len));
      }
      if (held) best = std::min(best, std::max(trip, (busy + (pipelined ? fill_and_drain : 0)) / 8));
      std::size_t i = 0;
      while (i < choice.size() && ++choice[i] == schemes.size()) choice[i++] = 0;
      if (i == choice.size()) return best;
    }
  };
  sluice::Rng rng(7);
  int tighter = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const bool cross_node_tp = trial % 2 == 1;
    std::vector<sluice::Sequence> batch;
    std::vector<std::int64_t> lengths;
    const auto count = 1 + static_cast<int>(rng.uniform_int(0, 4));
    for (int i = 0; i < count; ++i) {
      lengths.push_back(static_cast<std::int64_t>(rng.uniform_int(200, cross_node_tp ? 32000 : 16000)));
      batch.emplace_back(i, lengths.back());
    }
    CAPTURE(trial);
    const auto bound = sluice::compare::iteration_bound(profile, cross_node_tp, batch);
    REQUIRE(bound.has_value());
    const double expected = brute_force(lengths, cross_node_tp);
    CHECK(bound->seconds == doctest::Approx(expected).epsilon(1e-12));
    CHECK(bound->seconds >= std::max(bound->area_seconds, bound->critical_path_seconds));
    if (bound->seconds > 1.001 * std::max(bound->area_seconds, bound->critical_path_seconds)) ++tighter;
  }
  // The two arguments together bound more than the larger of them alone in some of these batches.
  CHECK(tighter > 0);
}

TEST_CASE("lower bound: no system beats it at long contexts, where one sequence's trip can decide it") {
  // LLaMA2-7B on 8 GPUs at 32K with CP 2 and 4 (ring and Ulysses), batches with and without a sequence at the
  // context.
  sluice::compare::Options options = wide_options();
  options.context = 32768;
  options.tokens = 40000;
  const auto dataset = bundled_lengths("man-pages", options.context);
  std::vector<std::vector<sluice::Sequence>> batches = batches_of(dataset, options.tokens, 3, 1);
  batches.push_back({sluice::Sequence(0, 32768), sluice::Sequence(1, 3000), sluice::Sequence(2, 500)});
  const sluice::compare::Comparison comparison = sluice::compare::compare_systems(options, dataset, batches);
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const auto& bound = comparison.batches[k].lower_bound;
    REQUIRE(bound.has_value());
    for (const System system : sluice::compare::all_systems) {
      const sluice::compare::SystemRun& run = comparison.systems[system];
      CAPTURE(run.name);
      if (!run.failure) CHECK(run.iterations[k].seconds >= bound->seconds);
    }
  }
  // The batch with a 32K sequence is bounded by its trip, and sluice runs within 1.5× of the bound.
  const sluice::compare::IterationBound& single = *comparison.batches[1].lower_bound;
  CHECK(single.seconds >= single.critical_path_seconds);
  CHECK(single.critical_path_seconds > single.area_seconds);
  CHECK(comparison.systems[System::sluice].iterations[1].seconds <= 1.5 * single.seconds);
}

TEST_CASE("compare: a system that cannot hold the context fails with the reason, the others run") {
  // 40 GPUs: the schemes holding 22000 tokens within a node (tp8pp2, tp8pp3, tp8pp4) do not divide 40 GPUs.
  const sluice::compare::Options options{.profile = bundled_profile("llama2-32b").with_gpus(40),
                                         .context = 22000,
                                         .tokens = 30000,
                                         .dispatch = {.trials = 4}};
  const auto dataset = bundled_lengths("man-pages", options.context);
  const sluice::compare::Comparison comparison =
      sluice::compare::compare_systems(options, dataset, batches_of(dataset, options.tokens, 0, 1));
  CHECK(comparison.systems[System::megatron_cp].failure ==
        "the scheme space has no ring context-parallel scheme (--cp with the ring kind)");
  for (const System system : {System::megatron, System::hotspa, System::dynapipe}) {
    REQUIRE(comparison.systems[system].failure.has_value());
    CHECK(comparison.systems[system].failure->find("holds 22000 tokens (one scheme, replicated to fill every GPU") !=
          std::string::npos);
  }
  CHECK_FALSE(comparison.systems[System::sluice].failure.has_value());
  CHECK(comparison.any_ran());
  CHECK(sluice::test::read_back(comparison) == comparison);
}

TEST_CASE("compare: the results are those `sluice simulate` recorded") {
  // test/golden/simulate.json: sluice simulate --iterations 2 --tokens 50000 --trials 2 --json, every other
  // option at its default (the context: the longest MaxLen of llama2-7b's schemes on 16 GPUs with TP within a
  // node, shorter than the longest man page).
  const auto golden = sluice::io::read_json_file(std::filesystem::path(SLUICE_BUNDLED_DATA_DIR) / ".." / "test" /
                                                 "golden" / "simulate.json");
  const sluice::cost::Profile profile = bundled_profile("llama2-7b");
  const std::int64_t hidden = profile.spec().model.hidden;
  const sluice::compare::Options options{.profile = profile,
                                         .context = 84224,
                                         .tokens = 50000,
                                         .problem = {.hidden = hidden, .link = {.latency = 1e-5, .bandwidth = 100e9}},
                                         .dispatch = {.trials = 2}};
  const auto dataset = bundled_lengths("man-pages", options.context);
  const sluice::compare::Comparison comparison =
      sluice::compare::compare_systems(options, dataset, batches_of(dataset, options.tokens, 0, 2));
  REQUIRE(golden.at("systems").size() == sluice::compare::all_systems.size());
  for (std::size_t s = 0; s < sluice::compare::all_systems.size(); ++s) {
    const sluice::compare::SystemRun& run = comparison.systems[sluice::compare::all_systems[s]];
    const auto& recorded = golden.at("systems")[s];
    CAPTURE(run.name);
    CHECK(recorded.at("name") == run.name);
    CHECK(recorded.at("configuration") == run.configuration);
    REQUIRE(recorded.at("iterations").size() == run.iterations.size());
    for (std::size_t k = 0; k < run.iterations.size(); ++k) {
      const auto& iteration = recorded.at("iterations")[k];
      CHECK(iteration.at("seconds").get<double>() == run.iterations[k].seconds);
      CHECK(iteration.at("switching").get<double>() == run.iterations[k].switching);
      CHECK(iteration.at("imbalance").get<double>() == run.iterations[k].imbalance);
      CHECK(iteration.at("micro_batch_imbalance").get<double>() == run.iterations[k].micro_batch_imbalance);
      CHECK(iteration.at("strategy") == run.iterations[k].strategy);
    }
  }
  CHECK(golden.at("length_ranges").get<std::vector<std::int64_t>>() == comparison.bounds);
}

TEST_CASE("compare: DynaPipe's micro-batching against token-based micro-batching and packing") {
  const sluice::cost::Profile profile = bundled_profile("llama2-7b");
  const sluice::microbatch::StageCostSetup setup = sluice::microbatch::stage_cost(profile.at(sluice::Scheme(1, 4)));
  sluice::schedule::PipelinePlanOptions options;
  options.stages = 4;
  options.replicas = 2;
  options.micro_batch_memory = setup.memory_limit;
  const auto dataset = bundled_lengths("man-pages", 8192);
  const std::vector<sluice::microbatch::Sample> samples =
      sluice::microbatch::samples_of(batches_of(dataset, 32768, 0, 1).front());
  const std::span<const sluice::microbatch::Sample> span(samples);
  const auto baselines = sluice::compare::microbatching_baselines(span, setup.model, options, 8192);
  REQUIRE(baselines.size() == 2);
  CHECK(baselines[0].name == "token-based");
  CHECK(baselines[1].name == "fixed-length packing");
  for (const auto& baseline : baselines) {
    CAPTURE(baseline.name);
    REQUIRE(baseline.plan.has_value());
    CHECK(baseline.failure.empty());
    std::size_t placed = 0;
    for (const auto& micro_batch : baseline.plan->partition.micro_batches) placed += micro_batch.sample_ids.size();
    CHECK(placed == samples.size());
    CHECK(baseline.plan->makespan > 0);
  }
}

TEST_CASE("compare: a system with no strategy says why, suggesting --cross-node-tp only where it helps") {
  const auto dataset = bundled_lengths("cpython-stdlib", 16384);
  const auto batches = batches_of(dataset, 30000, 1, 1);
  // 7 GPUs: one scheme must fill them all, and no scheme of 1 or 7 GPUs holds 16K; wider TP would not help.
  sluice::compare::Options seven = small_options();
  seven.profile = bundled_profile("llama2-7b").with_gpus(7);
  sluice::compare::Megatron megatron(seven);
  for (const auto& batch : batches) megatron.add(batch);
  const auto failure = std::move(megatron).result().failure;
  REQUIRE(failure.has_value());
  CHECK(failure->find("must hold it") != std::string::npos);
  CHECK(failure->find("--cross-node-tp") == std::string::npos);
  // LLaMA2-32B on 32 GPUs at 32K: only TP 16 holds it, so crossing nodes would.
  sluice::compare::Options wide = small_options();
  wide.profile = bundled_profile("llama2-32b").with_gpus(32);
  wide.context = 32768;
  sluice::compare::Megatron crossing(wide);
  for (const auto& batch : batches) crossing.add(batch);
  const auto crossing_failure = std::move(crossing).result().failure;
  REQUIRE(crossing_failure.has_value());
  CHECK(crossing_failure->find("try --cross-node-tp") != std::string::npos);
}

TEST_CASE("compare: a comparison's JSON document reads back exactly; a broken one names the field") {
  const sluice::compare::Options options = wide_options();
  const auto dataset = bundled_lengths("cpython-stdlib", options.context);
  const sluice::compare::Comparison comparison =
      sluice::compare::compare_systems(options, dataset, batches_of(dataset, options.tokens, 1, 2));
  const sluice::io::json document = sluice::io::to_document(comparison);
  CHECK(document.at("format") == "sluice.comparison");
  CHECK(document.at("version") == 12);  // 11, and one above for its CP and AC schemes
  const sluice::compare::Comparison back = sluice::test::read_back(comparison);
  CHECK(back == comparison);
  for (const System system : sluice::compare::all_systems) {
    CAPTURE(sluice::compare::name(system));
    // Everything a run holds comes back: iteration 0's pipelines, op by op (none for the flex CP systems), and the
    // kept plans.
    CHECK(back.systems[system].first.pipelines.empty() == (system == System::dynamic_cp || system == System::flexsp));
    CHECK(back.systems[system].first == comparison.systems[system].first);
    CHECK(back.systems[system].plans == comparison.systems[system].plans);
  }
  // Equality sees a change anywhere, down to one op's arrival.
  sluice::compare::Comparison changed = comparison;
  changed.systems[System::sluice].first.pipelines.front().stages.front().front().arrival += 1e-9;
  CHECK_FALSE(changed == comparison);

  const auto read = [](const sluice::io::json& broken) {
    (void)sluice::io::from_document<sluice::compare::Comparison>(broken, "broken.json");
  };
  const std::string text = document.dump();
  CHECK_THROWS_WITH_AS(sluice::io::parse(text.substr(0, text.size() / 2), "broken.json"),
                       doctest::Contains("broken.json: not valid JSON"), sluice::invalid_input);
  const auto without = [&](const sluice::io::json::json_pointer& where, const std::string& key) {
    sluice::io::json broken = document;
    broken.at(where).erase(key);
    return broken;
  };
  using pointer = sluice::io::json::json_pointer;
  CHECK_THROWS_WITH_AS(read(without(pointer(""), "bounds")), doctest::Contains("missing field 'bounds'"),
                       sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(without(pointer("/systems/1/iterations/0"), "imbalance")),
                       doctest::Contains("field 'systems'[1]: system run: field 'iterations'[0]: iteration outcome: "
                                         "missing field 'imbalance'"),
                       sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(without(pointer("/systems/5/first/pipelines/0"), "makespan")),
                       doctest::Contains("simulation: missing field 'makespan'"), sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(without(pointer("/systems/0"), "failure")), doctest::Contains("missing field 'failure'"),
                       sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(without(pointer("/systems/0/plans/0"), "chosen")),
                       doctest::Contains("plan: missing field 'chosen'"), sluice::invalid_input);

  sluice::io::json broken = document;
  broken["systems"][5]["first"]["pipelines"][0]["stages"][0][0]["pass"] = "sideways";
  CHECK_THROWS_WITH_AS(read(broken), doctest::Contains("op timing: field 'pass': expected \"forward\" or"),
                       sluice::invalid_input);
  broken = document;
  broken["systems"][2]["first"]["names"].push_back("pipeline 9");
  CHECK_THROWS_WITH_AS(read(broken), doctest::Contains("timeline: "), sluice::invalid_input);
  broken = document;
  std::swap(broken["systems"][0], broken["systems"][1]);
  CHECK_THROWS_WITH_AS(read(broken),
                       doctest::Contains("field 'systems'[0]: expected system 'megatron', got \"megatron_cp\""),
                       sluice::invalid_input);
  broken = document;
  broken["systems"].erase(3);
  CHECK_THROWS_WITH_AS(read(broken), doctest::Contains("expected 8 systems, got 7"), sluice::invalid_input);
  broken = document;
  broken["version"] = 2;  // four systems, before DeepSpeed and Megatron-LM's CP
  CHECK_THROWS_WITH_AS(read(broken), doctest::Contains("unsupported sluice.comparison version 2"),
                       sluice::invalid_input);
  broken["version"] = 4;  // six systems, before Megatron-LM's dynamic CP and FlexSP
  CHECK_THROWS_WITH_AS(read(broken), doctest::Contains("unsupported sluice.comparison version 4"),
                       sluice::invalid_input);
  broken["version"] = 6;  // no imbalance degree
  CHECK_THROWS_WITH_AS(read(broken), doctest::Contains("unsupported sluice.comparison version 6"),
                       sluice::invalid_input);
  broken = document;
  broken["batches"][0]["tokens"] = 1.5;
  CHECK_THROWS_WITH_AS(read(broken), doctest::Contains("field 'tokens': expected an integer"), sluice::invalid_input);
  broken = document;
  broken["systems"][7]["layout_moves"][0] = "fast";
  CHECK_THROWS_WITH_AS(read(broken), doctest::Contains("field 'layout_moves'[0]: expected a number"),
                       sluice::invalid_input);
  broken = document;
  broken["format"] = "sluice.simulate_run";
  CHECK_THROWS_WITH_AS(read(broken), doctest::Contains("expected format 'sluice.comparison'"), sluice::invalid_input);
}

TEST_CASE("compare: DeepSpeed's ZeRO-3 collectives, by hand") {
  const sluice::cost::Profile profile = bundled_profile("llama2-7b");
  const sluice::cost::TransformerMemorySpec& memory = *profile.spec().memory;
  // 32 layers of 4096² × 210/16 parameters and 4096 × 30592 of embedding, as the memory model counts the states:
  // 7,171,735,552, 2 bytes each.
  CHECK(memory.parameters() == 7'171'735'552.0);
  const double bytes = 2 * memory.parameters();
  const sluice::cost::Links links;
  // 16 GPUs span two nodes: InfiniBand; 8 stay on NVLink.
  CHECK(sluice::cost::zero3_collective_seconds(memory, 16, 8, links) ==
        doctest::Approx(15 * 2e-5 + 15.0 / 16 * bytes / 25e9));
  CHECK(sluice::cost::zero3_collective_seconds(memory, 8, 8, links) ==
        doctest::Approx(7 * 1e-5 + 7.0 / 8 * bytes / 200e9));
  // A full bin of 3 s (1 s forward, 2 s backward) hides collectives of 1 s; of 2 s it leaves 1 s + 2 s exposed.
  const sluice::cost::QuadraticLatency three_seconds(0, 0, 3);
  CHECK(sluice::cost::zero3_exposed_seconds(1, three_seconds, 1024, 2) == 0);
  CHECK(sluice::cost::zero3_exposed_seconds(2, three_seconds, 1024, 2) == doctest::Approx(3));
}

TEST_CASE("compare: DeepSpeed runs ZeRO-3 × Ulysses, holds more than the Hydraulis memory model, and says why not") {
  const sluice::compare::Options options = wide_options();
  const auto zero3 = sluice::compare::detail::zero3_options(options, options.context);
  REQUIRE(zero3.options.has_value());
  const sluice::cost::Profile& narrowed = zero3.options->profile;
  CHECK(narrowed.spec().memory->state_sharding == sluice::cost::StateSharding::zero3);
  for (const sluice::cost::SchemeCost& cost : narrowed.schemes()) {
    CAPTURE(cost.scheme.name());
    CHECK(sluice::cost::zero3_scheme(cost.scheme));
    CHECK(cost.max_len >= options.context);
    // ZeRO-3 shards the 16-bit weights too: never less room than Hydraulis' states leave.
    CHECK(cost.max_len >= options.profile.at(cost.scheme).max_len);
    CHECK(cost.latency.c() >= options.profile.at(cost.scheme).latency.c());
  }
  CHECK(narrowed.find(sluice::Scheme({.tp = 1, .pp = 1, .cp = 4, .cp_kind = sluice::CpKind::ulysses})) != nullptr);

  // The plans it keeps hold under its own profile.
  const auto dataset = bundled_lengths("cpython-stdlib", options.context);
  const auto batches = batches_of(dataset, options.tokens, 1, 2);
  sluice::compare::DeepSpeed deepspeed(options);
  for (const auto& batch : batches) deepspeed.add(batch);
  const sluice::compare::SystemRun run = std::move(deepspeed).result();
  REQUIRE_FALSE(run.failure.has_value());
  for (std::size_t k = 0; k < run.plans.size(); ++k)
    CHECK_NOTHROW(sluice::assign::validate(run.plans[k], batches[k], narrowed));

  // Without Ulysses or recomputation nothing of DeepSpeed's holds 64K on 8 GPUs.
  sluice::compare::Options narrow = small_options();
  narrow.context = 65536;
  const auto none = sluice::compare::detail::zero3_options(narrow, narrow.context);
  CHECK_FALSE(none.options.has_value());
  CHECK(none.failure.starts_with("no ZeRO-3 × Ulysses strategy of llama2-7b on 8 GPUs holds 65536 tokens"));
}
