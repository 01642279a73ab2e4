// LNK planning microbenchmarks: place the assignment scenario's strategy (1×<16,1> + 6×<8,1> per 64 GPUs)
// for a 60-layer LLaMA-32B-like model, plan the pull and the push against the fully sharded optimizer
// layout, and cost them: what plan_iteration pays per candidate to account for the cost of changing strategy.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "sluice/core/scheme.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"

namespace {

// The assignment scenario's strategy for `gpus` (a multiple of 64) and the bundled LLaMA-32B profile's model.
// Built here rather than from the assignment fixture, whose batches are sampled only for 64 and 1,024 GPUs.
struct ShardScenario {
  sluice::Strategy strategy;
  sluice::shard::Model model;
};

ShardScenario shard_scenario(std::int64_t gpus) {
  const int scale = static_cast<int>(gpus / 64);
  const auto profile =
      sluice::io::read_document<sluice::cost::Profile>(sluice::io::resolve_data_file("llama2-32b", "profiles"));
  return {sluice::Strategy({{sluice::Scheme(16, 1), scale}, {sluice::Scheme(8, 1), 6 * scale}}),
          sluice::shard::llama_like(profile.spec().model)};
}

// Arg: GPUs. Counters: pull and push messages (sends), bytes sent, and the α–β seconds of the three phases.
void BM_PlanPullPush(benchmark::State& state) {
  const ShardScenario scenario = shard_scenario(state.range(0));
  const sluice::shard::Model& model = scenario.model;
  const sluice::shard::OptimizerLayout layout = sluice::shard::sharded_layout(state.range(0), model.layers);
  const sluice::shard::Cluster cluster;
  sluice::shard::PullPlan pull;
  sluice::shard::PushPlan push;
  sluice::shard::ShardCost cost;
  for (auto _ : state) {
    const sluice::shard::Placement placement = sluice::shard::place(scenario.strategy, layout.gpus, model.layers);
    pull = sluice::shard::plan_pull(placement, layout, model);
    push = sluice::shard::plan_push(placement, layout, model);
    cost = sluice::shard::plan_cost(pull, push, cluster);
    benchmark::DoNotOptimize(cost);
  }
  state.counters["pull_sends"] = static_cast<double>(pull.sends.size());
  state.counters["push_sends"] = static_cast<double>(push.sends.size());
  state.counters["pull_GB"] = static_cast<double>(pull.send_bytes) * 1e-9;
  state.counters["push_GB"] = static_cast<double>(push.send_bytes) * 1e-9;
  state.counters["lnk_s"] = cost.seconds();
}
BENCHMARK(BM_PlanPullPush)->Arg(64)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond);

// Arg: GPUs. What `sluice plan --lnk` charges per candidate: iteration_cost prices the pull as it plans it,
// without storing its N²/TP messages.
void BM_IterationCost(benchmark::State& state) {
  const ShardScenario scenario = shard_scenario(state.range(0));
  const sluice::shard::OptimizerLayout layout = sluice::shard::sharded_layout(state.range(0), scenario.model.layers);
  double seconds = 0;
  for (auto _ : state) {
    seconds =
        sluice::shard::iteration_cost(layout, scenario.strategy, scenario.model, sluice::shard::Cluster{}).seconds();
    benchmark::DoNotOptimize(seconds);
  }
  state.counters["lnk_s"] = seconds;
}
BENCHMARK(BM_IterationCost)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond);

}  // namespace
