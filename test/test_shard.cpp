#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <set>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/shard/check.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/holders.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"
#include "sluice/shard/ranks.hpp"
#include "shard_oracle.hpp"

using namespace sluice;
using namespace sluice::shard;

namespace {

#ifdef NDEBUG
constexpr int random_instances = 2000;
#else
constexpr int random_instances = 200;
#endif

Model small_model(int layers) { return {"small", layers, {{"w", 37}, {"v", 64}, {"b", 5}}, 2, 2}; }

struct Planned {
  PullPlan pull;
  PushPlan push;
};

// Plans both directions, validates them and runs them on host memory.
Planned plan_and_check(const Placement& placement, const OptimizerLayout& layout, const Model& model,
                       std::uint64_t seed, const PushOptions& options = {}) {
  Planned planned{plan_pull(placement, layout, model), plan_push(placement, layout, model, options)};
  validate(planned.pull, placement, layout, model);
  validate(planned.push, placement, layout, model);
  check_pull(planned.pull, placement, layout, model, seed);
  check_push(planned.push, placement, layout, model, seed + 1);
  return planned;
}

std::int64_t model_bytes(const Model& model, int bytes_per_element) {
  return model.layer_elements() * model.layers * bytes_per_element;
}

// A random strategy on at most `gpus` GPUs with at most `layers` stages per pipeline; with_cp draws a CP degree
// of 1 to 4 and a kind too (without, the draws are those the tests have always made).
Strategy random_strategy(Rng& rng, std::int64_t gpus, int layers, bool powers_of_two, bool with_cp = false) {
  std::vector<StrategyPart> parts;
  std::int64_t used = 0;
  const std::vector<int> degrees = powers_of_two ? std::vector<int>{1, 2, 4, 8, 16} : std::vector<int>{1, 2, 3, 4, 6};
  while (true) {
    Degrees drawn{.tp = degrees[rng.below(degrees.size())]};
    drawn.pp = static_cast<int>(rng.uniform_int(1, std::min(layers, 4)));
    if (with_cp) {
      drawn.cp = static_cast<int>(rng.uniform_int(1, 4));
      const auto kind = rng.below(3);  // a hybrid needs a Ulysses degree strictly between 1 and C: C = 4, U = 2
      drawn.cp_kind = kind == 0 ? CpKind::ulysses : kind == 1 && drawn.cp == 4 ? CpKind::hybrid : CpKind::ring;
      if (drawn.cp_kind == CpKind::hybrid) drawn.ulysses = 2;
    }
    const Scheme scheme(drawn);
    if (used + scheme.gpus() > gpus) {
      if (!parts.empty()) break;
      if (gpus < scheme.gpus()) continue;
    }
    const auto room = (gpus - used) / scheme.gpus();
    const int copies = static_cast<int>(rng.uniform_int(1, std::min<std::int64_t>(room, 3)));
    parts.push_back({scheme, copies});
    used += scheme.gpus() * copies;
    if (rng.below(3) == 0) break;
  }
  return Strategy(std::move(parts));
}

// A random layout: fully sharded, another strategy's aligned layout, or random owner groups (with repeats).
OptimizerLayout random_layout(Rng& rng, std::int64_t gpus, int layers) {
  switch (rng.below(3)) {
    case 0: return sharded_layout(gpus, layers);
    case 1: return aligned_layout(place(random_strategy(rng, gpus, layers, true), gpus, layers));
    default: {
      OptimizerLayout layout{gpus, layers, {}};
      int begin = 0;
      while (begin < layers) {
        const int end = static_cast<int>(rng.uniform_int(begin + 1, layers));
        std::vector<int> owners(static_cast<std::size_t>(rng.uniform_int(1, 2 * gpus)));
        for (int& owner : owners) owner = static_cast<int>(rng.below(static_cast<std::uint64_t>(gpus)));
        layout.groups.push_back({begin, end, std::move(owners)});
        begin = end;
      }
      return layout;
    }
  }
}

}  // namespace

TEST_CASE("shard: placement packs pipelines into contiguous blocks, TP descending, layers split evenly") {
  const Placement placement = place(Strategy::parse("2*tp2pp2+1*tp4pp1"), 16, 5);
  validate(placement);
  REQUIRE(placement.pipelines.size() == 3);
  CHECK(placement.pipelines[0].scheme == Scheme(4, 1));
  CHECK(placement.pipelines[0].stages[0].ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(placement.pipelines[0].stages[0].layer_end == 5);
  CHECK(placement.pipelines[1].stages[0].ranks == std::vector<int>{4, 5});
  CHECK(placement.pipelines[1].stages[0].layer_begin == 0);
  CHECK(placement.pipelines[1].stages[0].layer_end == 2);
  CHECK(placement.pipelines[1].stages[1].ranks == std::vector<int>{6, 7});
  CHECK(placement.pipelines[1].stages[1].layer_begin == 2);
  CHECK(placement.pipelines[2].stages[1].ranks == std::vector<int>{10, 11});

  // TP groups stay inside 4-GPU nodes: tp3 groups skip the last rank of each node.
  const Placement nodes = place(Strategy::parse("3*tp3pp1"), 12, 2, {.gpus_per_node = 4});
  CHECK(nodes.pipelines[1].stages[0].ranks == std::vector<int>{4, 5, 6});
  CHECK(nodes.pipelines[2].stages[0].ranks == std::vector<int>{8, 9, 10});
  CHECK_THROWS_AS(place(Strategy::parse("4*tp3pp1"), 12, 2, {.gpus_per_node = 4}), infeasible);
  const Placement packed = place(Strategy::parse("4*tp3pp1"), 12, 2, {.gpus_per_node = 4, .tp_within_node = false});
  CHECK(packed.pipelines[1].stages[0].ranks == std::vector<int>{3, 4, 5});

  const Placement ascending = place(Strategy::parse("1*tp1pp1+1*tp2pp1"), 3, 1, {.order = PipelineOrder::tp_ascending});
  CHECK(ascending.pipelines[0].scheme == Scheme(1, 1));
  CHECK(ascending.pipelines[1].stages[0].ranks == std::vector<int>{1, 2});

  const Placement custom = place(Strategy::parse("1*tp1pp2"), 2, 5, {.stage_layers = {{2, {4, 1}}}});
  CHECK(custom.pipelines[0].stages[0].layer_end == 4);
}

TEST_CASE("shard: a CP stage takes TP·C ranks, CP rank after CP rank, inside a node when it fits") {
  // 12 GPUs in nodes of 8: tp2cp2ringpp2 (canonically first) takes 0-3 and 4-7, CP rank c's TP shard t at rank
  // index 2c + t; the tp1pp2 pipelines take 8, 9 and 10, 11.
  const Placement placement = place(Strategy::parse("1*tp2cp2ringpp2+2*tp1pp2"), 12, 4);
  validate(placement);
  REQUIRE(placement.pipelines.size() == 3);
  CHECK(placement.pipelines[0].scheme == Scheme::parse("tp2cp2ringpp2"));
  CHECK(placement.pipelines[0].stages[0].ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(placement.pipelines[0].stages[1].ranks == std::vector<int>{4, 5, 6, 7});
  CHECK(placement.pipelines[0].stages[1].layer_begin == 2);
  CHECK(placement.pipelines[1].stages[0].ranks == std::vector<int>{8});
  CHECK(placement.pipelines[1].stages[1].ranks == std::vector<int>{9});
  CHECK(placement.pipelines[2].stages[0].ranks == std::vector<int>{10});
  CHECK(placement.pipelines[2].stages[1].ranks == std::vector<int>{11});
  CHECK(io::from_document<Placement>(io::to_document(placement)) == placement);

  // Nodes of 4, TP ascending: tp1 takes rank 0; the 4-rank stage would straddle and starts node 1.
  const PlacementOptions ascending{.gpus_per_node = 4, .order = PipelineOrder::tp_ascending};
  const Placement moved = place(Strategy::parse("1*tp1pp1+1*tp2cp2ulyssespp1"), 8, 2, ascending);
  CHECK(moved.pipelines[1].stages[0].ranks == std::vector<int>{4, 5, 6, 7});
  // A stage wider than a node starts on a node boundary.
  const Placement wide = place(Strategy::parse("1*tp1pp1+1*tp2cp4ringpp1"), 12, 2, ascending);
  CHECK(wide.pipelines[1].stages[0].ranks == std::vector<int>{4, 5, 6, 7, 8, 9, 10, 11});
  // TP 3 in nodes of 4, the stage wider than a node: each TP group stays in its node, rank 3 idle.
  const Strategy odd = Strategy::parse("1*tp3cp2ringpp1");
  CHECK(place(odd, 8, 1, {.gpus_per_node = 4}).pipelines[0].stages[0].ranks == std::vector<int>{0, 1, 2, 4, 5, 6});
  CHECK(place(odd, 8, 1, {.gpus_per_node = 4, .tp_within_node = false}).pipelines[0].stages[0].ranks ==
        std::vector<int>{0, 1, 2, 3, 4, 5});
  CHECK_THROWS_AS(place(odd, 6, 1, {.gpus_per_node = 4}), infeasible);

  // Widest stage first: a CP stage wider than the TP ahead of it in canonical order must not leave a gap. Here
  // tp2 first would push the 8-rank stage to node 1 and leave the six tp1 pipelines no room.
  const Placement widest = place(Strategy::parse("1*tp2pp1+1*tp1cp8ulyssespp1+6*tp1pp1"), 16, 32);
  CHECK(widest.pipelines[0].scheme == Scheme::parse("tp1cp8ulyssespp1"));
  CHECK(widest.pipelines[0].stages[0].ranks == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(widest.pipelines[1].stages[0].ranks == std::vector<int>{8, 9});
  CHECK(widest.pipelines[7].stages[0].ranks == std::vector<int>{15});

  // A CP stage needs all of its TP·C ranks: one with its TP group alone is refused.
  Placement tp_only = placement;
  tp_only.pipelines[0].stages[1].ranks = {4, 5};
  CHECK_THROWS_WITH_AS(validate(tp_only), doctest::Contains("pipeline 0 stage 1 has 2 ranks, tp2cp2ringpp2 needs 4"),
                       invalid_plan);
}

TEST_CASE("shard: strategies without CP are placed and grouped exactly as before CP") {
  // The previous place and process groups (test/shard_oracle.hpp) on random strategies without CP, every option
  // drawn; a strategy that did not fit must still not fit.
  Rng rng(404);
  int compared = 0;
  for (int instance = 0; instance < random_instances; ++instance) {
    CAPTURE(instance);
    const std::int64_t gpus = rng.uniform_int(1, 64);
    const int layers = static_cast<int>(rng.uniform_int(1, 6));
    const Strategy strategy = random_strategy(rng, gpus, layers, rng.below(2) == 0);
    CAPTURE(strategy.name());
    const PlacementOptions options{
        .gpus_per_node = static_cast<int>(rng.uniform_int(1, 8)),
        .tp_within_node = rng.below(2) == 0,
        .order = rng.below(2) == 0 ? PipelineOrder::tp_ascending : PipelineOrder::tp_descending};
    Placement before;
    try {
      before = test::shard_oracle::place_before_cp(strategy, gpus, layers, options);
    } catch (const infeasible&) {
      CHECK_THROWS_AS(place(strategy, gpus, layers, options), infeasible);
      continue;
    }
    const Placement placement = place(strategy, gpus, layers, options);
    CHECK(placement == before);
    std::vector<std::size_t> order(placement.pipelines.size());
    std::iota(order.begin(), order.end(), 0);
    rng.shuffle(std::span<std::size_t>(order));
    const ProcessGroups groups = shard::detail::process_groups(placement, order);
    CHECK(groups == test::shard_oracle::process_groups_before_cp(placement, order));
    CHECK(groups.cp.empty());
    ++compared;
  }
  MESSAGE("placements without CP compared with the previous ones: ", compared);
}

TEST_CASE("shard: a small pull and push worked by hand") {
  // 4 GPUs, one tp2 pipeline on ranks 0-1, optimizer sharded in quarters: rank 0 needs quarters 0-1
  // (its own and rank 1's), rank 1 needs quarters 2-3.
  const Model model{"m", 1, {{"w", 8}}, 2, 4};
  const Placement placement = place(Strategy::parse("1*tp2pp1"), 4, 1);
  const OptimizerLayout layout = sharded_layout(4, 1);
  const Planned planned = plan_and_check(placement, layout, model, 7);
  REQUIRE(planned.pull.blocks.size() == 1);
  CHECK(planned.pull.blocks[0].granularity == 4);
  REQUIRE(planned.pull.sends.size() == 3);
  CHECK(std::pair(planned.pull.sends[0].src, planned.pull.sends[0].dst) == std::pair(1, 0));
  CHECK(std::pair(planned.pull.sends[1].src, planned.pull.sends[1].dst) == std::pair(2, 1));
  CHECK(std::pair(planned.pull.sends[2].src, planned.pull.sends[2].dst) == std::pair(3, 1));
  CHECK(planned.pull.sends[0].bytes == 4);  // 2 elements of 2 bytes
  REQUIRE(planned.pull.local_moves.size() == 1);
  CHECK(planned.pull.local_moves[0].src == 0);
  CHECK(planned.pull.send_bytes == 12);
  CHECK(planned.pull.local_bytes == 4);
  // One pipeline: the reduce-scatters are trivial (one member each, G = 2 pieces on ranks 0 and 1), and
  // rank 0 keeps quarter 0, sends quarter 1 to rank 1; rank 1 sends quarters 2, 3 to ranks 2, 3.
  CHECK(planned.push.grid == 2);
  CHECK(planned.push.pipelines == 1);
  REQUIRE(planned.push.rs_groups.size() == 2);
  CHECK(planned.push.rs_groups[1].members == std::vector<int>{1});
  CHECK(planned.push.rs_groups[1].bytes == 16);
  REQUIRE(planned.push.sends.size() == 3);
  CHECK(std::pair(planned.push.sends[0].src, planned.push.sends[0].dst) == std::pair(0, 1));
  CHECK(std::pair(planned.push.sends[1].src, planned.push.sends[1].dst) == std::pair(1, 2));
  CHECK(std::pair(planned.push.sends[2].src, planned.push.sends[2].dst) == std::pair(1, 3));
  CHECK(planned.push.send_bytes == 24);
  CHECK(planned.push.local_bytes == 8);
}

TEST_CASE("shard: Fig. 7 granularity, optimizer in 4 and gradient pieces in 6 give 12 mutual slices") {
  const Model model{"m", 2, {{"w", 24}, {"x", 13}}, 2, 2};
  const Placement placement = place(Strategy::parse("3*tp2pp1"), 6, 2);
  const OptimizerLayout layout{6, 2, {{0, 2, {0, 1, 2, 3}}}};
  const Planned planned = plan_and_check(placement, layout, model, 3);
  REQUIRE(planned.push.blocks.size() == 1);
  CHECK(planned.push.blocks[0].granularity == 12);
  CHECK(planned.pull.blocks[0].granularity == 4);
  CHECK(planned.push.rs_groups.size() == 2);
}

TEST_CASE(
    "shard: the same strategy in both phases prunes the push LNK and, homogeneous, makes the pull an all-gather") {
  for (const char* text : {"8*tp1pp1", "2*tp4pp1", "2*tp2pp2", "1*tp8pp1", "1*tp4pp1+2*tp2pp1",
                           "1*tp2pp2+1*tp2pp1+2*tp1pp1", "2*tp2cp2ringpp1", "1*tp2cp2ulyssespp2"}) {
    CAPTURE(text);
    const Strategy strategy = Strategy::parse(text);
    const Model model = small_model(4);
    const Placement placement = place(strategy, 8, model.layers);
    const OptimizerLayout layout = aligned_layout(placement);
    const Planned planned = plan_and_check(placement, layout, model, 11);
    CHECK(planned.push.sends.empty());
    CHECK(planned.push.send_bytes == 0);
    CHECK(planned.push.local_bytes == model_bytes(model, model.grad_bytes));
    // A heterogeneous strategy's ranks need TP fractions of different widths: no all-gather there.
    if (!strategy.is_homogeneous()) continue;
    // All-gather: the ranks that receive a slice range are exactly the ranks that send it, and each of them
    // sends its own piece to every other one.
    std::map<std::pair<int, int>, std::set<int>> group_of;  // (block, dst) -> sources
    for (const auto* list : {&planned.pull.sends, &planned.pull.local_moves})
      for (const Message& message : *list)
        for (std::size_t p = message.first_piece; p < message.first_piece + message.piece_count; ++p) {
          const Piece& piece = planned.pull.pieces[p];
          group_of[{piece.block, message.dst}].insert(message.src);
        }
    for (const auto& [key, sources] : group_of) {
      for (const int src : sources) {
        const auto it = group_of.find({key.first, src});
        REQUIRE(it != group_of.end());
        CHECK(it->second == sources);
      }
      CHECK(sources.contains(key.second));
    }
    CHECK(planned.pull.local_moves.size() == static_cast<std::size_t>(strategy.gpus()));
  }
}

namespace {
// A model of `layers` layers with random widths and 1 to 3 tensors of up to 200 elements.
Model random_model(Rng& rng, int layers) {
  Model model{"random", layers, {}, static_cast<int>(rng.uniform_int(1, 4)), static_cast<int>(rng.uniform_int(1, 4))};
  const auto tensors = rng.uniform_int(1, 3);
  for (std::int64_t p = 0; p < tensors; ++p) model.tensors.push_back({std::to_string(p), rng.uniform_int(1, 200)});
  return model;
}
}  // namespace

TEST_CASE("shard: random strategies and layouts over N <= 64 move every element exactly") {
  Rng rng(2026);
  std::int64_t pull_sends = 0;
  std::int64_t push_sends = 0;
  std::int64_t matched_local = 0;
  std::int64_t natural_local = 0;
  for (int instance = 0; instance < random_instances; ++instance) {
    CAPTURE(instance);
    const std::int64_t gpus = rng.uniform_int(1, 64);
    const int layers = static_cast<int>(rng.uniform_int(1, 6));
    const Model model = random_model(rng, layers);
    const bool powers_of_two = rng.below(2) == 0;
    const Strategy strategy = random_strategy(rng, gpus, layers, powers_of_two);
    CAPTURE(strategy.name());
    const Placement placement = place(
        strategy, gpus, layers, {.gpus_per_node = static_cast<int>(rng.uniform_int(1, 8)), .tp_within_node = false});
    const OptimizerLayout layout = random_layout(rng, gpus, layers);
    const Planned matched = plan_and_check(placement, layout, model, rng());
    const Planned natural = plan_and_check(placement, layout, model, rng(), {.match_owners = false});
    const std::int64_t copies = static_cast<std::int64_t>(placement.pipelines.size());
    CHECK(matched.pull.send_bytes + matched.pull.local_bytes == copies * model_bytes(model, model.param_bytes));
    CHECK(matched.push.send_bytes + matched.push.local_bytes == model_bytes(model, model.grad_bytes));
    const ShardCost cost = plan_cost(matched.pull, matched.push, Cluster{});
    CHECK(cost.pull.bytes.total() == matched.pull.send_bytes + matched.pull.local_bytes);
    CHECK(cost.pull.bytes.local == matched.pull.local_bytes);
    CHECK(cost.push.bytes.local == matched.push.local_bytes);
    CHECK(cost.seconds() >= 0);
    pull_sends += static_cast<std::int64_t>(matched.pull.sends.size());
    push_sends += static_cast<std::int64_t>(matched.push.sends.size());
    matched_local += matched.push.local_bytes;
    natural_local += natural.push.local_bytes;
  }
  MESSAGE("random instances: ", random_instances, ", pull sends ", pull_sends, ", push sends ", push_sends,
          ", push local bytes with owner matching ", matched_local, " vs pipeline order ", natural_local);
}

TEST_CASE("shard: plans and costs match the previous planner bit for bit") {
  // The previous planner (test/shard_oracle.hpp) held every raw piece and sorted them all; the planner now
  // generates each source's messages in place. Same seeds, same plans: every field equal, costs equal as
  // doubles. Placements get their ranks permuted half the time so destinations come out of rank order, and
  // random layouts repeat owners in runs so adjacent slices merge.
  Rng rng(77);
  std::int64_t compared_pieces = 0;
  const int instances = random_instances / 2;
  for (int instance = 0; instance < instances; ++instance) {
    CAPTURE(instance);
    const std::int64_t gpus = instance % 10 == 0 ? rng.uniform_int(65, 512) : rng.uniform_int(1, 64);
    const int layers = static_cast<int>(rng.uniform_int(1, 8));
    Model model{"random", layers, {}, static_cast<int>(rng.uniform_int(1, 4)), static_cast<int>(rng.uniform_int(1, 4))};
    const auto tensors = rng.uniform_int(1, 3);
    for (std::int64_t p = 0; p < tensors; ++p)
      model.tensors.push_back({std::to_string(p), rng.uniform_int(1, 100'000)});
    const Strategy strategy = random_strategy(rng, gpus, layers, rng.below(2) == 0);
    CAPTURE(strategy.name());
    const PlacementOptions placement_options{
        .gpus_per_node = static_cast<int>(rng.uniform_int(1, 8)),
        .tp_within_node = false,
        .order = rng.below(2) == 0 ? PipelineOrder::tp_ascending : PipelineOrder::tp_descending};
    Placement placement = place(strategy, gpus, layers, placement_options);
    const bool permuted = rng.below(2) == 0;
    if (permuted) {
      std::vector<int> permutation(static_cast<std::size_t>(gpus));
      std::iota(permutation.begin(), permutation.end(), 0);
      rng.shuffle(std::span<int>(permutation));
      for (PipelinePlacement& pipeline : placement.pipelines)
        for (Stage& stage : pipeline.stages)
          for (int& rank : stage.ranks) rank = permutation[static_cast<std::size_t>(rank)];
    }
    OptimizerLayout layout = random_layout(rng, gpus, layers);
    for (OwnerGroup& group : layout.groups)
      for (std::size_t r = 1; r < group.owners.size(); ++r)
        if (rng.below(4) == 0) group.owners[r] = group.owners[r - 1];
    const PullPlan pull = plan_pull(placement, layout, model);
    CHECK(pull == test::shard_oracle::plan_pull(placement, layout, model));
    for (const bool match : {true, false})
      CHECK(plan_push(placement, layout, model, {.match_owners = match}) ==
            test::shard_oracle::plan_push(placement, layout, model, {.match_owners = match}));
    Cluster cluster;
    cluster.gpus_per_node = placement_options.gpus_per_node;
    if (!permuted)
      CHECK(iteration_cost(layout, strategy, model, cluster, placement_options) ==
            plan_cost(test::shard_oracle::plan_pull(placement, layout, model),
                      test::shard_oracle::plan_push(placement, layout, model), cluster));
    compared_pieces += static_cast<std::int64_t>(pull.pieces.size());
  }
  // The benchmark's strategy and a pipeline-parallel mix at 1,024 GPUs, LLaMA-32B-like, sharded layout.
  const Model llama = llama_like({"LLaMA-32B", 60, 6656, 30592});
  for (const char* text : {"16*tp16pp1+96*tp8pp1", "8*tp8pp4+16*tp4pp2+32*tp2pp3+8*tp1pp5"}) {
    CAPTURE(text);
    const Strategy strategy = Strategy::parse(text);
    const Placement placement = place(strategy, 1024, llama.layers);
    const OptimizerLayout layout = sharded_layout(1024, llama.layers);
    const PullPlan pull = plan_pull(placement, layout, llama);
    const PushPlan push = plan_push(placement, layout, llama);
    CHECK(pull == test::shard_oracle::plan_pull(placement, layout, llama));
    CHECK(push == test::shard_oracle::plan_push(placement, layout, llama));
    CHECK(iteration_cost(layout, strategy, llama, Cluster{}) == plan_cost(pull, push, Cluster{}));
    compared_pieces += static_cast<std::int64_t>(pull.pieces.size());
    // Each of the 1,024 owners holds one slice that all 112 pipelines need: one piece, 112 messages.
    if (std::string_view(text) == "16*tp16pp1+96*tp8pp1") {
      CHECK(pull.pieces.size() == 1024);
      CHECK(pull.sends.size() + pull.local_moves.size() == 1024 * 112);
    }
  }
  MESSAGE("pull pieces compared with the previous planner: ", compared_pieces);
}

TEST_CASE("shard: a CP pair worked by hand, each CP rank a replica") {
  // tp1cp2 on 2 GPUs, optimizer in halves: each CP rank pulls the whole layer (its half locally, the other from
  // its peer); the push reduce-scatters over both CP ranks, so each owner's half is summed once, all local.
  const Model model{"m", 1, {{"w", 8}}, 2, 2};
  const Placement placement = place(Strategy::parse("1*tp1cp2ringpp1"), 2, 1);
  CHECK(placement.pipelines[0].stages[0].ranks == std::vector<int>{0, 1});
  const Planned planned = plan_and_check(placement, sharded_layout(2, 1), model, 21);
  REQUIRE(planned.pull.sends.size() == 2);
  CHECK(std::pair(planned.pull.sends[0].src, planned.pull.sends[0].dst) == std::pair(0, 1));
  CHECK(std::pair(planned.pull.sends[1].src, planned.pull.sends[1].dst) == std::pair(1, 0));
  CHECK(planned.pull.send_bytes == 16);
  CHECK(planned.pull.local_bytes == 16);
  CHECK(planned.push.pipelines == 2);
  REQUIRE(planned.push.rs_groups.size() == 1);
  CHECK(planned.push.rs_groups[0].members == std::vector<int>{0, 1});
  CHECK(planned.push.sends.empty());
  CHECK(planned.push.local_bytes == 16);
  // Its own layout: one owner per CP rank, as two data-parallel pipelines would have.
  CHECK(aligned_layout(placement) == aligned_layout(place(Strategy::parse("2*tp1pp1"), 2, 1)));
}

TEST_CASE("shard: a first or last stage's tensors and replicated ones are held where the strategy runs them") {
  // 1*tp2cp2ringpp2 on ranks 0-7 (stages {0,1,2,3} and {4,5,6,7}) beside 1*tp1pp2 on 8 and 9.
  const Placement placement = place(Strategy::parse("1*tp2cp2ringpp2+1*tp1pp2"), 10, 4);
  CHECK(holder_placement(placement, HeldBy::every_stage, false) == placement);
  const Placement embedding = holder_placement(placement, HeldBy::first_stage, false);
  CHECK(embedding.layers == 1);
  REQUIRE(embedding.pipelines.size() == 2);
  CHECK(embedding.pipelines[0].scheme.name() == "tp2cp2ringpp1");
  CHECK(embedding.pipelines[0].stages == std::vector<Stage>{{0, 1, {0, 1, 2, 3}}});
  CHECK(embedding.pipelines[1].stages == std::vector<Stage>{{0, 1, {8}}});
  const Placement head_norm = holder_placement(placement, HeldBy::last_stage, true);
  REQUIRE(head_norm.pipelines.size() == 5);  // every lane of the last stages a replica of TP 1
  for (int lane = 0; lane < 4; ++lane)
    CHECK(head_norm.pipelines[static_cast<std::size_t>(lane)].stages == std::vector<Stage>{{0, 1, {4 + lane}}});
  CHECK(head_norm.pipelines[4].stages == std::vector<Stage>{{0, 1, {9}}});
  const Placement norms = holder_placement(placement, HeldBy::every_stage, true);
  REQUIRE(norms.pipelines.size() == 5);
  CHECK(norms.pipelines[1].scheme.name() == "tp1pp2");
  CHECK(norms.pipelines[1].stages == std::vector<Stage>{{0, 2, {1}}, {2, 4, {5}}});
  // Each is a placement the planner moves every element of exactly, from and to any layout.
  for (const Placement& held : {embedding, head_norm, norms}) {
    validate(held);
    const Model model{"held", held.layers, {{"w", 24}, {"b", 7}}, 2, 2};
    plan_and_check(held, sharded_layout(10, held.layers), model, 31);
    plan_and_check(held, aligned_layout(place(Strategy::parse("5*tp2pp1"), 10, held.layers)), model, 33);
  }
}

TEST_CASE("shard: switching between CP and non-CP strategies moves every element to every holder, once") {
  // Every CP rank receives its TP shard (the pull moves the model once per replica, pipeline and CP rank); the
  // push sums every holder's gradients once (it moves the model once). The planner on a CP placement is the
  // previous planner on its replicas, and the host checker reads the CP placement's ranks on its own.
  const Model model = small_model(4);
  const std::vector<const char*> strategies = {
      "1*tp2cp2ringpp2+2*tp1pp2",           "1*tp2pp2+2*tp1pp2", "1*tp4cp2ulyssespp1+2*tp2pp1",
      "1*tp1cp4hybrid2pp1+1*tp2cp2ringpp2", "3*tp4pp1",          "12*tp1pp1"};
  std::uint64_t seed = 100;
  for (const char* to : strategies) {
    const Placement placement = place(Strategy::parse(to), 12, model.layers);
    const Placement replicated = shard::detail::replicas(placement);
    std::int64_t replicas = 0;
    for (const PipelinePlacement& pipeline : placement.pipelines) replicas += pipeline.scheme.cp();
    CHECK(static_cast<std::int64_t>(replicated.pipelines.size()) == replicas);
    for (const char* from : strategies) {
      CAPTURE(from);
      CAPTURE(to);
      const OptimizerLayout layout = aligned_layout(place(Strategy::parse(from), 12, model.layers));
      const Planned planned = plan_and_check(placement, layout, model, seed++);
      CHECK(planned.pull == test::shard_oracle::plan_pull(replicated, layout, model));
      CHECK(planned.push == test::shard_oracle::plan_push(replicated, layout, model));
      CHECK(planned.pull.send_bytes + planned.pull.local_bytes == replicas * model_bytes(model, model.param_bytes));
      CHECK(planned.push.send_bytes + planned.push.local_bytes == model_bytes(model, model.grad_bytes));
      CHECK(planned.push.pipelines == replicas);
      if (std::string_view(from) == to) CHECK(planned.push.sends.empty());
      CHECK(iteration_cost(layout, Strategy::parse(to), model, Cluster{}) ==
            plan_cost(planned.pull, planned.push, Cluster{}));
    }
  }
}

TEST_CASE("shard: random strategies with CP move every element exactly") {
  Rng rng(1717);
  for (int instance = 0; instance < random_instances / 4; ++instance) {
    CAPTURE(instance);
    const std::int64_t gpus = rng.uniform_int(1, 64);
    const int layers = static_cast<int>(rng.uniform_int(1, 6));
    const Model model = random_model(rng, layers);
    const Strategy strategy = random_strategy(rng, gpus, layers, rng.below(2) == 0, true);
    CAPTURE(strategy.name());
    const Placement placement = place(
        strategy, gpus, layers, {.gpus_per_node = static_cast<int>(rng.uniform_int(1, 8)), .tp_within_node = false});
    const OptimizerLayout layout = random_layout(rng, gpus, layers);
    const Planned planned = plan_and_check(placement, layout, model, rng());
    const Placement replicated = shard::detail::replicas(placement);
    CHECK(planned.pull == test::shard_oracle::plan_pull(replicated, layout, model));
    CHECK(planned.push == test::shard_oracle::plan_push(replicated, layout, model));
    const auto replicas = static_cast<std::int64_t>(replicated.pipelines.size());
    CHECK(planned.pull.send_bytes + planned.pull.local_bytes == replicas * model_bytes(model, model.param_bytes));
    CHECK(planned.push.send_bytes + planned.push.local_bytes == model_bytes(model, model.grad_bytes));
  }
}

TEST_CASE("shard: the limits, 16,384 GPUs and 2^26 pieces per plan, are checked before planning") {
  const Model model = small_model(2);
  CHECK(max_gpus == 16384);
  CHECK(max_plan_pieces == std::int64_t{1} << 26);
  CHECK_THROWS_WITH_AS(place(Strategy::parse("1*tp8pp1"), 16385, 2),
                       doctest::Contains("gpus must be in [1, 16384], got 16385"), invalid_input);
  CHECK_THROWS_WITH_AS(sharded_layout(16385, 2), doctest::Contains("gpus must be in [1, 16384], got 16385"),
                       invalid_input);
  // 16,384 tp1 pipelines on the fully sharded layout: every rank pulls a piece from every owner, 2^28 pieces.
  const Strategy data_parallel = Strategy::parse("16384*tp1pp1");
  const Placement wide = place(data_parallel, 16384, 2);
  const OptimizerLayout sharded = sharded_layout(16384, 2);
  const char* too_many =
      "shard pull: the plan would cut 268435456 pieces (before merging), more than the maximum 67108864";
  CHECK_THROWS_WITH_AS(plan_pull(wide, sharded, model), doctest::Contains(too_many), invalid_input);
  CHECK_THROWS_WITH_AS(iteration_cost(sharded, data_parallel, model, Cluster{}), doctest::Contains(too_many),
                       invalid_input);
  // The push has only N + D·G - gcd pieces per block: 16,384 + 16,384 - 16,384.
  CHECK(plan_push(wide, sharded, model).pieces.size() == 16384);
  // TP 8192 and 8191 make a TP grid of 8192·8191: 2 pipelines · 67,100,672 reduce-scatter pieces.
  const Placement coprime = place(Strategy::parse("1*tp8192pp1+1*tp8191pp1"), 16384, 1);
  const OptimizerLayout one_layer = sharded_layout(16384, 1);
  const PullPlan coprime_pull = plan_pull(coprime, one_layer, small_model(1));
  CHECK(coprime_pull.sends.size() + coprime_pull.local_moves.size() == 16384 + 24574);
  // The 8,190 owners whose segment a TP-8191 boundary cuts send two part lists there and the whole segment to
  // the TP-8192 pipeline; the other 8,194 send their whole segment to both pipelines, one list shared.
  CHECK(coprime_pull.pieces.size() == 8194 + 3 * 8190);
  CHECK_THROWS_WITH_AS(plan_push(coprime, one_layer, small_model(1)),
                       doctest::Contains("shard push: the plan would cut 134201344 pieces"), invalid_input);
  CHECK_THROWS_WITH_AS(aligned_layout(coprime), doctest::Contains("= 134201344 owner entries, more than the maximum"),
                       invalid_input);
}

TEST_CASE("shard: owner matching turns reduce-scatter pieces into local moves") {
  // Two tp1 pipelines on ranks 0 and 1, optimizer halves owned by 1 then 0: in pipeline order piece 0 lands
  // on rank 0 and must move to rank 1; matched, each piece lands on its owner.
  const Model model = small_model(1);
  const Placement placement = place(Strategy::parse("2*tp1pp1"), 2, 1);
  const OptimizerLayout layout{2, 1, {{0, 1, {1, 0}}}};
  const Planned matched = plan_and_check(placement, layout, model, 5);
  const Planned natural = plan_and_check(placement, layout, model, 5, {.match_owners = false});
  CHECK(matched.push.sends.empty());
  CHECK(matched.push.rs_groups[0].members == std::vector<int>{1, 0});
  CHECK(natural.push.sends.size() == 2);
  CHECK(natural.push.local_bytes == 0);
}

TEST_CASE("shard: costs per link class and α–β times") {
  // 4 GPUs in nodes of 2: one tp2 pipeline on ranks 0-1. Pull: 1 -> 0 (intra), 2 -> 1 and 3 -> 1 (inter).
  const Model model{"m", 1, {{"w", 8}}, 2, 2};
  const Placement placement = place(Strategy::parse("1*tp2pp1"), 4, 1, {.gpus_per_node = 2});
  const OptimizerLayout layout = sharded_layout(4, 1);
  const Cluster cluster{2, {{1e-6, 1e9}, {2e-6, 1e8}, {3e-6, 1e7}}};
  const PullPlan pull = plan_pull(placement, layout, model);
  const PushPlan push = plan_push(placement, layout, model);
  const ShardCost cost = plan_cost(pull, push, cluster);
  CHECK(cost.pull.bytes.local == 4);
  CHECK(cost.pull.bytes.intra_node == 4);
  CHECK(cost.pull.bytes.inter_node == 8);
  CHECK(cost.pull.messages == 4);
  // Rank 1 receives two inter-node messages of 4 bytes back to back: 2·(3e-6 + 4e-7).
  CHECK(cost.pull.seconds == doctest::Approx(2 * (3e-6 + 4e-7)));
  CHECK(cost.reduce_scatter.seconds == 0);
  CHECK(cost.reduce_scatter.bytes.total() == 0);
  // Push: rank 0 keeps quarter 0 and sends quarter 1 to rank 1; rank 1 sends quarters 2, 3 to ranks 2, 3.
  CHECK(cost.push.bytes.intra_node == 4);
  CHECK(cost.push.bytes.inter_node == 8);
  CHECK(cost.push.seconds == doctest::Approx(2 * (3e-6 + 4e-7)));
  CHECK(cost.seconds() == doctest::Approx(cost.pull.seconds + cost.push.seconds));

  // Two tp1 pipelines on ranks 0 and 1 (one node): a 2-member ring, one step of half the 16-byte layer.
  const Placement pair = place(Strategy::parse("2*tp1pp1"), 2, 1);
  const OptimizerLayout pair_layout = sharded_layout(2, 1);
  const ShardCost pair_cost =
      plan_cost(plan_pull(pair, pair_layout, model), plan_push(pair, pair_layout, model), cluster);
  CHECK(pair_cost.reduce_scatter.seconds == doctest::Approx(2e-6 + 8.0 / 1e8));
  CHECK(pair_cost.reduce_scatter.bytes.intra_node == 16);
  CHECK(pair_cost.reduce_scatter.messages == 2);

  // The iteration cost is the planned cost; the switching cost from a strategy to itself has no push LNK.
  const Model layer_model = small_model(4);
  const Strategy strategy = Strategy::parse("1*tp4pp1+2*tp2pp1");
  const ShardCost direct = iteration_cost(sharded_layout(8, 4), strategy, layer_model, Cluster{});
  const Placement placed = place(strategy, 8, 4);
  CHECK(direct == plan_cost(plan_pull(placed, sharded_layout(8, 4), layer_model),
                            plan_push(placed, sharded_layout(8, 4), layer_model), Cluster{}));
  const ShardCost same = switching_cost(strategy, strategy, 8, layer_model, Cluster{});
  CHECK(same.push.bytes.intra_node + same.push.bytes.inter_node == 0);
  CHECK(same.seconds() < direct.seconds());
}

TEST_CASE("shard: validators and the host checker reject broken plans") {
  const Model model = small_model(3);
  const Placement placement = place(Strategy::parse("1*tp4pp1+1*tp2pp2"), 8, 3);
  const OptimizerLayout layout = sharded_layout(8, 3);
  const Planned planned = plan_and_check(placement, layout, model, 9);

  auto pull_broken = [&](auto edit) {
    PullPlan plan = planned.pull;
    edit(plan);
    CHECK_THROWS_AS(validate(plan, placement, layout, model), invalid_plan);
  };
  pull_broken([](PullPlan& plan) { plan.sends.front().src = plan.sends.front().dst; });
  pull_broken([](PullPlan& plan) { plan.sends.front().bytes += 1; });
  pull_broken([](PullPlan& plan) { plan.send_bytes += 1; });
  pull_broken([](PullPlan& plan) { std::swap(plan.sends.front(), plan.sends.back()); });
  pull_broken([](PullPlan& plan) { plan.blocks.front().granularity *= 2; });
  pull_broken([](PullPlan& plan) { plan.gpus = 16; });
  pull_broken([](PullPlan& plan) { plan.pieces.push_back(plan.pieces.front()); });
  pull_broken([](PullPlan& plan) {
    plan.local_bytes -= plan.local_moves.back().bytes;
    plan.local_moves.pop_back();
  });
  pull_broken([](PullPlan& plan) { plan.pieces[plan.sends.front().first_piece].end -= 1; });
  pull_broken([](PullPlan& plan) { plan.sends.front().piece_count = static_cast<std::uint32_t>(plan.pieces.size()); });
  // Another source's pieces: shared lists stay within what their source owns.
  pull_broken([](PullPlan& plan) { plan.sends.back().first_piece = plan.sends.front().first_piece; });

  auto push_broken = [&](auto edit) {
    PushPlan plan = planned.push;
    edit(plan);
    CHECK_THROWS_AS(validate(plan, placement, layout, model), invalid_plan);
  };
  push_broken([](PushPlan& plan) { plan.rs_groups.front().members.front() = 7; });
  push_broken([](PushPlan& plan) { std::swap(plan.rs_groups[0], plan.rs_groups[1]); });
  push_broken([](PushPlan& plan) { plan.rs_groups.front().bytes = 0; });
  push_broken([](PushPlan& plan) { plan.grid = 2; });
  push_broken([](PushPlan& plan) {
    Message& copy = plan.sends.back();
    plan.send_bytes += plan.sends.front().bytes - copy.bytes;
    copy.first_piece = plan.sends.front().first_piece;
    copy.piece_count = plan.sends.front().piece_count;
    copy.bytes = plan.sends.front().bytes;
  });
  push_broken([](PushPlan& plan) { std::ranges::reverse(plan.rs_groups.front().members); });
  push_broken([](PushPlan& plan) { plan.blocks.pop_back(); });
  push_broken([](PushPlan& plan) { plan.sends.front().dst = (plan.sends.front().dst + 1) % 8; });

  // The host checker finds a wrong source and a wrong reduce-scatter order on its own.
  PullPlan wrong_source = planned.pull;
  Message& first = wrong_source.sends.front();
  const int original = first.src;
  for (first.src = 0; first.src == original || first.src == first.dst;) ++first.src;
  CHECK_THROWS_AS(check_pull(wrong_source, placement, layout, model, 1), invalid_plan);
  PushPlan wrong_order = planned.push;
  std::ranges::reverse(wrong_order.rs_groups.front().members);
  CHECK_THROWS_AS(check_push(wrong_order, placement, layout, model, 1), invalid_plan);

  Placement broken = placement;
  broken.pipelines[1].stages[1].ranks[0] = 0;
  CHECK_THROWS_AS(validate(broken), invalid_plan);
  broken = placement;
  broken.pipelines[1].stages[1].layer_begin = 2;
  CHECK_THROWS_AS(validate(broken), invalid_plan);
  OptimizerLayout bad_layout = layout;
  bad_layout.groups[0].owners[0] = 8;
  CHECK_THROWS_AS(validate(bad_layout), invalid_plan);
}

TEST_CASE("shard: bad input names the field and the value") {
  const Model model = small_model(2);
  const Strategy strategy = Strategy::parse("2*tp2pp1");
  CHECK_THROWS_WITH_AS(place(strategy, 0, 2), doctest::Contains("gpus must be in [1, 16384], got 0"), invalid_input);
  CHECK_THROWS_WITH_AS(place(strategy, 2, 2), doctest::Contains("needs 4 GPUs"), invalid_input);
  CHECK_THROWS_WITH_AS(place(strategy, 4, 0), doctest::Contains("layers must be >= 1, got 0"), invalid_input);
  CHECK_THROWS_WITH_AS(place(Strategy::parse("1*tp1pp3"), 4, 2), doctest::Contains("more stages than the 2 layers"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(place(strategy, 4, 2, {.gpus_per_node = 0}),
                       doctest::Contains("gpus_per_node must be >= 1, got 0"), invalid_input);
  CHECK_THROWS_WITH_AS(place(Strategy::parse("1*tp1pp2"), 2, 2, {.stage_layers = {{2, {1}}}}),
                       doctest::Contains("stage_layers for pp 2 has 1 entries"), invalid_input);
  CHECK_THROWS_WITH_AS(place(Strategy::parse("1*tp1pp2"), 2, 2, {.stage_layers = {{2, {2, 1}}}}),
                       doctest::Contains("sum to 3"), invalid_input);
  CHECK_THROWS_WITH_AS(place(Strategy::parse("1*tp1pp2"), 2, 2, {.stage_layers = {{2, {2, 0}}}}),
                       doctest::Contains("a stage of 0 layers"), invalid_input);
  CHECK_THROWS_WITH_AS(sharded_layout(0, 2), doctest::Contains("gpus must be in [1, 16384], got 0"), invalid_input);
  CHECK_THROWS_WITH_AS(sharded_layout(4, -1), doctest::Contains("layers must be >= 1, got -1"), invalid_input);

  auto bad_model = [&](auto edit, const char* fragment) {
    Model copy = model;
    edit(copy);
    CAPTURE(fragment);
    CHECK_THROWS_WITH_AS(require_valid(copy), doctest::Contains(fragment), invalid_input);
  };
  bad_model([](Model& m) { m.layers = 0; }, "layers must be in [1, 65536], got 0");
  bad_model([](Model& m) { m.tensors.clear(); }, "has no tensors");
  bad_model([](Model& m) { m.tensors[0].elements = 0; }, "tensor 'w' elements must be in [1, 1099511627776], got 0");
  bad_model([](Model& m) { m.tensors[1].name = "w"; }, "tensor 'w' is listed twice");
  bad_model([](Model& m) { m.tensors[1].name = ""; }, "empty name");
  bad_model([](Model& m) { m.param_bytes = 0; }, "param_bytes must be in [1, 16], got 0");
  bad_model([](Model& m) { m.grad_bytes = 17; }, "grad_bytes must be in [1, 16], got 17");
  CHECK_THROWS_WITH_AS(llama_like({"x", 2, 0, 10}), doctest::Contains("hidden must be in [1, 2^20], got 0"),
                       invalid_input);

  const Placement placement = place(strategy, 4, 2);
  CHECK_THROWS_WITH_AS(plan_pull(placement, sharded_layout(8, 2), model),
                       doctest::Contains("the placement has 4 GPUs, the optimizer layout 8"), invalid_input);
  CHECK_THROWS_WITH_AS(plan_push(placement, sharded_layout(4, 2), small_model(3)),
                       doctest::Contains("the model has 3 layers, the placement 2"), invalid_input);
  // LCM(1000003 owners, 4096, 4095) is about 1.7e13, above the 2^40 limit on mutual slices.
  const Placement wide = place(Strategy::parse("1*tp4096pp1+1*tp4095pp1"), 8191, 1, {.tp_within_node = false});
  const OptimizerLayout odd{8191, 1, {{0, 1, std::vector<int>(1'000'003, 0)}}};
  CHECK_THROWS_WITH_AS(plan_pull(wide, odd, small_model(1)), doctest::Contains("exceeds 2^40"), invalid_input);

  auto bad_cluster = [](auto edit, const char* fragment) {
    Cluster cluster;
    edit(cluster);
    CAPTURE(fragment);
    CHECK_THROWS_WITH_AS(require_valid(cluster), doctest::Contains(fragment), invalid_input);
  };
  bad_cluster([](Cluster& c) { c.gpus_per_node = 0; }, "gpus_per_node must be >= 1, got 0");
  bad_cluster([](Cluster& c) { c.links.intra_node.bandwidth = 0; }, "intra-node link bandwidth must be in [");
  bad_cluster([](Cluster& c) { c.links.inter_node.latency = -1; },
              "inter-node link latency must be in [0, 1] s, got -1");
  bad_cluster([](Cluster& c) { c.links.local.bandwidth = std::numeric_limits<double>::quiet_NaN(); },
              "local link bandwidth must be in [");
  // A free link is a link: every message costs its latency alone.
  Cluster free_local;
  free_local.links.local = {};
  CHECK_NOTHROW(require_valid(free_local));
}

TEST_CASE("shard: the LLaMA-like model from a profile's model description") {
  const Model model = llama_like({"LLaMA-32B", 60, 6656, 30592});
  CHECK(model.layers == 60);
  CHECK(model.tensors.size() == 4);
  CHECK(model.tensors[3].elements == 17920 * 6656);
  CHECK(llama_like({"LLaMA-7B", 32, 4096, 32000}).tensors[3].elements == 11008 * 4096);
}

TEST_CASE("shard: plan_iteration charges every candidate its pull and push") {
  const cost::Profile profile =
      io::read_document<cost::Profile>(io::resolve_data_file("llama2-32b", "profiles")).with_gpus(64);
  const Model model = llama_like(profile.spec().model);
  const OptimizerLayout layout = sharded_layout(64, model.layers);
  const std::vector<Strategy> candidates = {Strategy::parse("1*tp16pp1+6*tp8pp1"), Strategy::parse("4*tp16pp1"),
                                            Strategy::parse("2*tp16pp1+4*tp8pp1")};
  const std::vector<double> overhead = iteration_costs(layout, candidates, model, Cluster{});
  REQUIRE(overhead.size() == candidates.size());
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    CHECK(overhead[k] == iteration_cost(layout, candidates[k], model, Cluster{}).seconds());
    CHECK(overhead[k] > 0);
  }
  const data::LengthDataset dataset =
      data::LengthDataset(data::synthetic_lengths({.count = 5000, .seed = 3}), "synthetic").truncated(32768);
  data::BatchSampler sampler(dataset, {.tokens_per_batch = 200'000, .seed = 3});
  const auto batch = sampler.next().sequences;
  assign::PlanOptions options;
  options.candidate_overhead = overhead;
  const assign::IterationPlan plan = assign::plan_iteration(batch, candidates, profile, options);
  CHECK_NOTHROW(assign::validate(plan, batch, profile));
  CHECK(plan.overhead == overhead[plan.chosen]);
  for (const assign::CandidateEstimate& candidate : plan.candidates)
    if (candidate.estimate) CHECK(*candidate.estimate + candidate.overhead >= plan.total());
}

TEST_CASE("shard: JSON round trips for models, placements, layouts and plans") {
  const Model model = small_model(3);
  const Placement placement = place(Strategy::parse("1*tp4pp1+1*tp2pp2"), 8, 3);
  const OptimizerLayout layout = sharded_layout(8, 3);
  const Planned planned = plan_and_check(placement, layout, model, 4);
  CHECK(io::from_document<Model>(io::to_document(model)) == model);
  CHECK(io::from_document<Placement>(io::to_document(placement)) == placement);
  CHECK(io::from_document<OptimizerLayout>(io::to_document(layout)) == layout);
  CHECK(io::from_document<PullPlan>(io::to_document(planned.pull)) == planned.pull);
  CHECK(io::from_document<PushPlan>(io::to_document(planned.push)) == planned.push);
  const ShardCost cost = plan_cost(planned.pull, planned.push, Cluster{});
  CHECK(io::json(cost).at("seconds") == cost.seconds());
  CHECK(io::json(cost).at("pull").at("bytes").at("local") == cost.pull.bytes.local);

  io::json document = io::to_document(model);
  document["tensors"][0]["elements"] = -3;
  CHECK_THROWS_WITH_AS(io::from_document<Model>(document), doctest::Contains("elements must be in"), invalid_input);
  document = io::to_document(model);
  document.erase("layers");
  CHECK_THROWS_WITH_AS(io::from_document<Model>(document), doctest::Contains("missing field 'layers'"), invalid_input);
  document = io::to_document(model);
  document["format"] = "sluice.strategy";
  CHECK_THROWS_WITH_AS(io::from_document<Model>(document), doctest::Contains("expected format 'sluice.shard_model'"),
                       invalid_input);
  // A pull plan of version 1, before messages shared pieces, is refused by its number; indices past 32 bits too.
  document = io::to_document(planned.pull);
  CHECK(document.at("version") == 3);
  document["version"] = 1;
  CHECK_THROWS_WITH_AS(io::from_document<PullPlan>(document),
                       doctest::Contains("unsupported sluice.pull_plan version 1"), invalid_input);
  document = io::to_document(planned.pull);
  document["sends"][0]["first_piece"] = std::uint64_t{1} << 32;
  CHECK_THROWS_WITH_AS(io::from_document<PullPlan>(document),
                       doctest::Contains("field 'first_piece': expected an integer in [0, 4294967295]"), invalid_input);
}
