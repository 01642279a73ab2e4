// LNK planning microbenchmarks: place the assignment scenario's strategy (1×<16,1> + 6×<8,1> per 64 GPUs)
// for a 60-layer LLaMA-32B-like model, plan the pull and the push against the fully sharded optimizer
// layout, and cost them: what plan_iteration pays per candidate to account for the cost of changing strategy.
#include <benchmark/benchmark.h>

#include "assign_fixtures.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"

namespace {

// Arg: GPUs. Counters: pull and push messages (sends), bytes sent, and the α–β seconds of the three phases.
void BM_PlanPullPush(benchmark::State& state) {
  const sluice::bench::AssignScenario scenario = sluice::bench::scenario(static_cast<int>(state.range(0)));
  const sluice::shard::Model model = sluice::shard::llama_like(scenario.profile.spec().model);
  const sluice::shard::OptimizerLayout layout = sluice::shard::sharded_layout(scenario.profile.gpus(), model.layers);
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
BENCHMARK(BM_PlanPullPush)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
