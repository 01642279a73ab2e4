// The rank placement of an iteration plan's strategy (shard/ranks.hpp), a trainer's batch as read by
// io::parse_batch, and proposal::default_max_len for given candidates.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/core/error.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/io/data_json.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/proposal/max_len.hpp"
#include "sluice/shard/ranks.hpp"

using namespace sluice;

namespace {

// A profile whose MaxLen order is not the canonical (TP, then PP, descending) order: tp1pp4 holds the most.
cost::Profile mixed_profile(std::int64_t gpus, int per_node) {
  cost::ProfileSpec spec{.name = "mixed",
                         .source = "test",
                         .model = {.name = "m", .layers = 12, .hidden = 1024, .vocab = 32000},
                         .gpus = gpus,
                         .gpus_per_node = per_node,
                         .memory = std::nullopt,
                         .schemes = {}};
  const auto entry = [](int tp, int pp, std::int64_t max_len) {
    return cost::SchemeEntry{Scheme(tp, pp), cost::QuadraticLatency(1e-10, 1e-6, 1e-3), max_len, std::nullopt};
  };
  spec.schemes = {entry(4, 1, 8000), entry(2, 1, 4000), entry(1, 4, 16000), entry(1, 2, 2000)};
  return cost::Profile(spec);
}

// tp2cp2ringpp2 and tp1pp2 on 12 GPUs in nodes of `per_node`; tp1pp2 holds the longer sequences.
cost::Profile cp_profile(int per_node) {
  cost::ProfileSpec spec{.name = "cp",
                         .source = "test",
                         .model = {.name = "m", .layers = 4, .hidden = 1024, .vocab = 32000},
                         .gpus = 12,
                         .gpus_per_node = per_node,
                         .memory = std::nullopt,
                         .schemes = {}};
  const auto entry = [](const char* scheme, std::int64_t max_len) {
    return cost::SchemeEntry{Scheme::parse(scheme), cost::QuadraticLatency(1e-10, 1e-6, 1e-3), max_len, std::nullopt};
  };
  spec.schemes = {entry("tp2cp2ringpp2", 8000), entry("tp1pp2", 16000)};
  return cost::Profile(spec);
}

std::vector<int> all_ranks(const shard::ProcessGroups& groups) {
  std::vector<int> ranks;
  for (const auto& group : groups.tp) ranks.insert(ranks.end(), group.begin(), group.end());
  return ranks;
}

}  // namespace

TEST_CASE("rank placement: plan pipeline j runs on placement pipeline plan_order[j], groups follow") {
  const cost::Profile profile = mixed_profile(16, 4);
  const Strategy strategy = Strategy::parse("1*tp4pp1+2*tp2pp1+2*tp1pp4");
  const shard::RankPlacement ranks = shard::rank_placement(strategy, profile);
  shard::validate(ranks, strategy, profile);
  // shard::place's order is canonical: tp4pp1, tp2pp1 x2, tp1pp4 x2; ranks 0-3, 4-5, 6-7, 8-11, 12-15.
  REQUIRE(ranks.placement.pipelines.size() == 5);
  CHECK(ranks.placement.pipelines[3].stages[0].ranks == std::vector<int>{8});
  // MaxLen order: tp1pp4 x2 (16000), tp4pp1 (8000), tp2pp1 x2 (4000).
  CHECK(ranks.plan_order == std::vector<std::size_t>{3, 4, 0, 1, 2});
  const std::vector<Pipeline> planned = profile.pipelines(strategy);
  for (std::size_t j = 0; j < planned.size(); ++j)
    CHECK(ranks.placement.pipelines[ranks.plan_order[j]].scheme == planned[j].scheme);
  // The plan's pipelines, as plan_iteration orders them, line up with plan_order.
  const std::vector<Sequence> batch = {{0, 15000}, {1, 3000}, {2, 7000}, {3, 100}, {4, 200}};
  const assign::IterationPlan plan = assign::plan_iteration(batch, std::vector<Strategy>{strategy}, profile);
  for (std::size_t j = 0; j < plan.pipelines.size(); ++j)
    CHECK(ranks.placement.pipelines[ranks.plan_order[j]].scheme == plan.pipelines[j].scheme);

  // TP groups per (plan pipeline, stage): the tp1pp4 pipelines' 4 stages each, then tp4pp1, then the tp2pp1s.
  CHECK(ranks.groups.tp.size() == 4 + 4 + 1 + 1 + 1);
  CHECK(ranks.groups.tp[0] == std::vector<int>{8});
  CHECK(ranks.groups.tp[8] == std::vector<int>{0, 1, 2, 3});
  // Pipeline groups per (plan pipeline, TP shard), stage 0 first.
  CHECK(ranks.groups.pp.front() == std::vector<int>{8, 9, 10, 11});
  CHECK(ranks.groups.pp[1] == std::vector<int>{12, 13, 14, 15});
  CHECK(ranks.groups.pp.size() == 1 + 1 + 4 + 2 + 2);
  // DP groups per (scheme, stage, shard) in canonical order: tp4pp1's 4 singletons, tp2pp1's 2 pairs, tp1pp4's
  // 4 pairs (one per stage).
  CHECK(ranks.groups.dp.size() == 4 + 2 + 4);
  CHECK(ranks.groups.dp[4] == std::vector<int>{4, 6});
  CHECK(ranks.groups.dp[5] == std::vector<int>{5, 7});
  CHECK(ranks.groups.dp[6] == std::vector<int>{8, 12});
  CHECK(ranks.groups.dp[9] == std::vector<int>{11, 15});
  // Every GPU holds exactly one (pipeline, stage, TP shard).
  std::vector<int> used = all_ranks(ranks.groups);
  std::ranges::sort(used);
  CHECK(used == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
}

TEST_CASE("rank placement: CP ranks get their own groups and join the TP, PP and DP groups of their shard") {
  const cost::Profile profile = cp_profile(8);
  const Strategy strategy = Strategy::parse("1*tp2cp2ringpp2+2*tp1pp2");
  const shard::RankPlacement ranks = shard::rank_placement(strategy, profile);
  shard::validate(ranks, strategy, profile);
  // Placement: tp2cp2ringpp2 on 0-3 and 4-7 (CP rank c, TP shard t at 2c + t), the tp1pp2s on 8, 9 and 10, 11.
  REQUIRE(ranks.placement.pipelines.size() == 3);
  CHECK(ranks.placement.pipelines[0].stages[0].ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(ranks.placement.pipelines[0].stages[1].ranks == std::vector<int>{4, 5, 6, 7});
  CHECK(ranks.placement.pipelines[2].stages[1].ranks == std::vector<int>{11});
  // MaxLen order: the tp1pp2s (16000), then the CP pipeline (8000).
  CHECK(ranks.plan_order == std::vector<std::size_t>{1, 2, 0});
  using Groups = std::vector<std::vector<int>>;
  // TP per (plan pipeline, stage, CP rank); PP per (plan pipeline, CP rank, TP shard).
  CHECK(ranks.groups.tp == Groups{{8}, {9}, {10}, {11}, {0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(ranks.groups.pp == Groups{{8, 9}, {10, 11}, {0, 4}, {1, 5}, {2, 6}, {3, 7}});
  // CP per (plan pipeline with CP, stage, TP shard), CP rank 0 first.
  CHECK(ranks.groups.cp == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  // DP per (scheme, stage, TP shard), over every pipeline and CP rank: the CP pipeline's are its CP groups.
  CHECK(ranks.groups.dp == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}});

  // JSON: the CP groups are written, and read back.
  const io::json json = io::to_document(ranks);
  CHECK(json.at("groups").at("cp") == io::json(ranks.groups.cp));
  CHECK(io::from_document<shard::RankPlacement>(json) == ranks);

  const auto fails = [&](shard::RankPlacement bad, const char* expected) {
    CAPTURE(expected);
    CHECK_THROWS_WITH_AS(shard::validate(bad, strategy, profile), doctest::Contains(expected), invalid_plan);
  };
  {
    auto bad = ranks;  // a CP stage with its TP ranks alone
    bad.placement.pipelines[0].stages[0].ranks = {0, 1};
    fails(bad, "pipeline 0 stage 0 has 2 ranks, tp2cp2ringpp2 needs 4");
  }
  {
    auto bad = ranks;  // a 4-rank stage across nodes of 8 while it fits in one
    std::swap(bad.placement.pipelines[0].stages[0].ranks[3], bad.placement.pipelines[1].stages[0].ranks[0]);
    fails(bad, "pipeline 0 has a stage with ranks 0 and 8 on different nodes");
  }
  {
    auto bad = ranks;
    std::swap(bad.groups.cp[0], bad.groups.cp[1]);
    fails(bad, "process groups differ");
  }
  {
    auto bad = ranks;
    bad.groups.cp.clear();
    fails(bad, "process groups differ");
  }
  // Nodes of 2: the 4-rank stages are wider than a node; each TP pair must then sit in one.
  const cost::Profile small_nodes = cp_profile(2);
  const shard::RankPlacement paired = shard::rank_placement(strategy, small_nodes);
  shard::validate(paired, strategy, small_nodes);
  auto split = paired;
  std::swap(split.placement.pipelines[0].stages[0].ranks[1], split.placement.pipelines[0].stages[0].ranks[2]);
  split.groups = shard::detail::process_groups(split.placement, split.plan_order);
  CHECK_THROWS_WITH_AS(shard::validate(split, strategy, small_nodes),
                       doctest::Contains("has a TP group with ranks 0 and 2 on different nodes"), invalid_plan);
}

TEST_CASE("rank placement: a CP scheme wider per stage than the strategy's first scheme is placed first") {
  // tp2pp2 comes first in the strategy (TP descending), tp1cp4ringpp1 first in the placement (stage width 4 > 2).
  cost::ProfileSpec spec{.name = "wide cp",
                         .source = "test",
                         .model = {.name = "m", .layers = 4, .hidden = 1024, .vocab = 32000},
                         .gpus = 12,
                         .gpus_per_node = 8,
                         .memory = std::nullopt,
                         .schemes = {}};
  for (const auto& [scheme, max_len] : {std::pair{"tp2pp2", 4000}, std::pair{"tp1cp4ringpp1", 16000}})
    spec.schemes.push_back({Scheme::parse(scheme), cost::QuadraticLatency(1e-10, 1e-6, 1e-3), max_len, std::nullopt});
  const cost::Profile profile(spec);
  const Strategy strategy = Strategy::parse("2*tp2pp2+1*tp1cp4ringpp1");
  REQUIRE(strategy.parts().front().scheme == Scheme::parse("tp2pp2"));
  const shard::RankPlacement ranks = shard::rank_placement(strategy, profile);
  REQUIRE(ranks.placement.pipelines.size() == 3);
  CHECK(ranks.placement.pipelines[0].scheme == Scheme::parse("tp1cp4ringpp1"));
  CHECK(ranks.placement.pipelines[0].stages[0].ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(ranks.plan_order == std::vector<std::size_t>{0, 1, 2});
  shard::validate(ranks, strategy, profile);

  auto split = ranks;  // the two tp2pp2 copies apart
  std::swap(split.placement.pipelines[0], split.placement.pipelines[1]);
  split.plan_order = shard::detail::plan_order(split.placement, profile.pipelines(strategy));
  split.groups = shard::detail::process_groups(split.placement, split.plan_order);
  CHECK_THROWS_WITH_AS(shard::validate(split, strategy, profile),
                       doctest::Contains("pipeline 0 is tp2pp2, the first of 1 side by side"), invalid_plan);
}

TEST_CASE("flex domain ranks: each stage's units side by side, so that an aligned CP group stays in a node") {
  cost::ProfileSpec spec = mixed_profile(16, 8).spec();
  spec.schemes.push_back({Scheme(2, 2), cost::QuadraticLatency(1e-10, 1e-6, 1e-3), 4000, std::nullopt});
  const cost::Profile profile(spec);
  const Strategy domain = Strategy::parse("4*tp2pp2");
  const shard::RankPlacement ranks = shard::flex_domain_ranks(domain, profile);
  // Stage 0 on node 0 and stage 1 on node 1, unit u's TP shard t at 2u + t.
  REQUIRE(ranks.placement.pipelines.size() == 1);
  CHECK(ranks.placement.pipelines[0].stages[0].ranks == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(ranks.placement.pipelines[0].stages[1].ranks == std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15});
  using Groups = std::vector<std::vector<int>>;
  // The pools, per (stage, TP shard), unit order; each unit's TP group per stage and PP group per TP shard.
  CHECK(ranks.groups.cp == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}});
  CHECK(ranks.groups.tp == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(ranks.groups.pp == Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}});
  // Every aligned group of every degree is inside one node; placed pipeline by pipeline, the 4-unit group is not.
  const auto one_node = [](const std::vector<int>& pool, std::size_t first, std::size_t degree) {
    return std::all_of(pool.begin() + static_cast<std::ptrdiff_t>(first),
                       pool.begin() + static_cast<std::ptrdiff_t>(first + degree),
                       [&](int rank) { return rank / 8 == pool[first] / 8; });
  };
  for (const auto& pool : ranks.groups.cp)
    for (const std::size_t degree : {1, 2, 4})
      for (std::size_t first = 0; first < pool.size(); first += degree) CHECK(one_node(pool, first, degree));
  const shard::RankPlacement replicas = shard::rank_placement(domain, profile);
  CHECK(replicas.groups.dp.front() == std::vector<int>{0, 4, 8, 12});
  CHECK_FALSE(one_node(replicas.groups.dp.front(), 0, 4));
  // One unit has no CP pool; a domain is replicas of one ⟨TP, PP⟩ scheme.
  CHECK(shard::flex_domain_ranks(Strategy::parse("1*tp2pp2"), profile).groups.cp.empty());
  CHECK_THROWS_WITH_AS(shard::flex_domain_ranks(Strategy::parse("2*tp2pp2+2*tp1pp4"), profile),
                       doctest::Contains("is not replicas of one ⟨TP, PP⟩ scheme"), invalid_input);
  CHECK_THROWS_AS(shard::flex_domain_ranks(Strategy::parse("2*tp2cp2ringpp2"), profile), invalid_input);
}

TEST_CASE("rank placement: TP groups stay inside a node, skipped ranks stay idle") {
  // Nodes of 4: the tp4 group fills node 0, the tp2 group starts node 1.
  const cost::Profile profile = mixed_profile(12, 4);
  const Strategy strategy = Strategy::parse("1*tp4pp1+1*tp2pp1");
  const auto ranks = shard::rank_placement(strategy, profile);
  shard::validate(ranks, strategy, profile);
  for (const auto& group : ranks.groups.tp)
    CHECK(std::ranges::all_of(group, [&](int rank) { return rank / 4 == group.front() / 4; }));
  // A strategy that fits the GPUs but not their nodes is infeasible, not a silent straddle.
  CHECK_THROWS_AS(shard::rank_placement(Strategy::parse("2*tp2pp1+2*tp4pp1"), mixed_profile(12, 3)), infeasible);
}

TEST_CASE("rank placement: a corrupted placement fails validation") {
  const cost::Profile profile = mixed_profile(16, 4);
  const Strategy strategy = Strategy::parse("1*tp4pp1+2*tp2pp1+2*tp1pp4");
  const shard::RankPlacement good = shard::rank_placement(strategy, profile);
  const auto fails = [&](shard::RankPlacement bad, const char* expected) {
    CAPTURE(expected);
    CHECK_THROWS_WITH_AS(shard::validate(bad, strategy, profile), doctest::Contains(expected), invalid_plan);
  };
  {
    auto bad = good;  // one GPU in two slots
    bad.placement.pipelines[1].stages[0].ranks[1] = 0;
    fails(bad, "rank 0 is used twice");
  }
  {
    auto bad = good;  // a TP group across nodes of 4: ranks 2..5 are free only after moving the tp4 group
    bad.placement.pipelines[0].stages[0].ranks = {0, 1, 2, 4};
    bad.placement.pipelines[1].stages[0].ranks = {3, 5};
    fails(bad, "on different nodes");
  }
  {
    auto bad = good;  // plan pipeline 0 mapped to the wrong copy
    std::swap(bad.plan_order[0], bad.plan_order[1]);
    fails(bad, "plan_order");
  }
  {
    auto bad = good;  // groups that do not match the placement
    std::swap(bad.groups.dp[0], bad.groups.dp[1]);
    fails(bad, "process groups differ");
  }
  {
    auto bad = good;  // a scheme's copies apart
    std::swap(bad.placement.pipelines[0], bad.placement.pipelines[1]);
    fails(bad, "rank placement: pipeline 0 is tp2pp1, the first of 1 side by side");
  }
  CHECK_THROWS_AS(shard::validate(good, Strategy::parse("1*tp4pp1+2*tp2pp1+1*tp1pp4"), profile), invalid_plan);
}

TEST_CASE("rank placement: JSON in plan order round-trips") {
  const cost::Profile profile = mixed_profile(16, 4);
  const Strategy strategy = Strategy::parse("1*tp4pp1+2*tp2pp1+2*tp1pp4");
  const auto ranks = shard::rank_placement(strategy, profile);
  const io::json json = io::to_document(ranks);
  CHECK(json.at("format") == "sluice.rank_placement");
  CHECK(json.at("pipelines")[0].at("placement_index") == 3);
  CHECK(json.at("pipelines")[0].at("stages")[0].at("ranks") == io::json({8}));
  CHECK_FALSE(json.at("groups").contains("cp"));  // no CP, no CP groups: the document it always was
  CHECK(io::from_document<shard::RankPlacement>(json) == ranks);
  io::json repeated = json;
  repeated["pipelines"][1]["placement_index"] = 3;
  CHECK_THROWS_AS(io::from_document<shard::RankPlacement>(repeated), invalid_input);
}

TEST_CASE("batch reader: text, JSON lengths and JSON objects; every bad batch names its source") {
  CHECK(io::parse_batch("10\n# comment\n 20 \n", "b") == std::vector<Sequence>{{0, 10}, {1, 20}});
  CHECK(io::parse_batch(" [5, 6]", "b") == std::vector<Sequence>{{0, 5}, {1, 6}});
  CHECK(io::parse_batch(R"([{"id": 9, "length": 5}, {"length": 6}])", "b") == std::vector<Sequence>{{9, 5}, {1, 6}});
  std::istringstream in("[7]");
  CHECK(io::read_batch("-", in) == std::vector<Sequence>{{0, 7}});
  const auto fails = [](const std::string& content, const char* expected) {
    CAPTURE(content);
    const std::string message = std::string("batch.txt: ") + expected;
    CHECK_THROWS_WITH_AS(io::parse_batch(content, "batch.txt"), doctest::Contains(message.c_str()), invalid_input);
  };
  fails("", "no lengths");
  fails("[]", "the batch is empty");
  fails("[0]", "entry 0: length must be >= 1, got 0");
  fails("[3, -2]", "entry 1: length must be >= 1, got -2");
  fails("[1.5]", "entry 0: length must be an integer, got 1.5");
  fails("[\"7\"]", "entry 0: length must be an integer");
  fails("[true]", "entry 0: length must be an integer");
  fails("[NaN]", "not valid JSON");
  fails("[1, 2", "not valid JSON");
  fails("{\"length\": 3}", "");  // not an array: read as text, and refused there
  fails(R"([{"id": 1, "length": 2}, {"id": 1, "length": 3}])", "entry 1: duplicate id 1");
  fails(R"([{"id": 1}])", "entry 0: missing field 'length'");
  fails(R"([{"id": -1, "length": 3}])", "entry 0: id must be >= 0");
  fails("[99999999999]", "entry 0: length 99999999999 exceeds the plausible maximum");
  fails("[18446744073709551615]", "entry 0: length 18446744073709551615 is too large");
  fails("0\n", "");
  fails("12.5\n", "");
  fails("nan\n", "");
  std::string many = "[1";
  for (std::size_t i = 0; i < io::max_batch_sequences; ++i) many += ",1";
  fails(many + "]", "1048577 sequences, more than the limit of 1048576");
}

TEST_CASE("default max length: with candidates, the longest sequence or the widest candidate MaxLen") {
  const cost::Profile profile = mixed_profile(16, 4);
  const data::LengthDataset dataset({100, 9000, 30000}, "d");
  const std::vector<Strategy> wide = {Strategy::parse("2*tp4pp1"), Strategy::parse("2*tp1pp4")};
  CHECK(proposal::default_max_len(dataset, profile, wide) == 16000);
  const std::vector<Strategy> narrow = {Strategy::parse("2*tp2pp1")};
  CHECK(proposal::default_max_len(dataset, profile, narrow) == 4000);
  const data::LengthDataset short_dataset({100, 900}, "d");
  CHECK(proposal::default_max_len(short_dataset, profile, wide) == 900);
}
