// DynaPipe microbenchmarks: one mini-batch drawn by token budget (seed 1) from synthetic long-tailed lengths
// truncated at 8192, on the bundled LLaMA2-7B profile's <1,4> scheme (c = 4 stages, |D| = 4, padded, default
// tmax interval). BM_MicroBatchDP times ordering + the Eq. 2 DP (§4); BM_PlanPipeline the whole planner:
// ordering, DP, replica balancing, injection-order search over cyclic and 1F1B orders, simulation and the
// communication plan of every replica (§4–§6).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <span>
#include <vector>

#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/microbatch/order.hpp"
#include "sluice/microbatch/partition.hpp"
#include "sluice/schedule/plan_pipeline.hpp"

namespace {

struct MiniBatch {
  sluice::microbatch::StageCostSetup setup;
  std::vector<sluice::microbatch::Sample> samples;
};

MiniBatch mini_batch(std::int64_t tokens) {
  using namespace sluice;
  const cost::Profile profile = io::read_document<cost::Profile>(io::resolve_data_file("llama2-7b", "profiles"));
  const data::LengthDataset dataset =
      data::LengthDataset(data::synthetic_lengths({.count = 100'000, .seed = 1}), "synthetic").truncated(8192);
  data::BatchSampler sampler(dataset, {.tokens_per_batch = tokens, .seed = 1});
  MiniBatch batch{microbatch::stage_cost(profile.at(Scheme(1, 4))), {}};
  for (const Sequence& sequence : sampler.next().sequences) batch.samples.push_back({sequence.id(), sequence.length(), 0});
  return batch;
}

// Arg: tokens per mini-batch. Ordering and the DP are timed; counters: samples and micro-batches.
void BM_MicroBatchDP(benchmark::State& state) {
  using namespace sluice;
  const MiniBatch batch = mini_batch(state.range(0));
  const microbatch::PartitionOptions options{.stages = 4, .replicas = 4, .memory_limit = batch.setup.memory_limit};
  std::size_t micro_batches = 0;
  for (auto _ : state) {
    const std::vector<microbatch::Sample> ordered =
        microbatch::order_samples(batch.samples, microbatch::Ordering::length);
    const microbatch::Partition result =
        microbatch::partition(std::span<const microbatch::Sample>(ordered), batch.setup.model, options);
    micro_batches = result.micro_batches.size();
    benchmark::DoNotOptimize(result);
  }
  state.counters["samples"] = static_cast<double>(batch.samples.size());
  state.counters["micro_batches"] = static_cast<double>(micro_batches);
}
BENCHMARK(BM_MicroBatchDP)->Arg(65536)->Arg(262144)->Unit(benchmark::kMicrosecond);

// Arg: tokens per mini-batch; boundary tensors of hidden 4096 in bf16 over 100 GB/s links, 10 µs latency.
// Counters: micro-batches, the slowest replica's simulated iteration, instructions emitted.
void BM_PlanPipeline(benchmark::State& state) {
  using namespace sluice;
  const MiniBatch batch = mini_batch(state.range(0));
  schedule::PipelinePlanOptions options;
  options.stages = 4;
  options.replicas = 4;
  options.micro_batch_memory = batch.setup.memory_limit;
  options.problem = {.hidden = 4096, .element_bytes = 2, .link = {1e-5, 1e11}};
  schedule::PipelineRunPlan plan;
  for (auto _ : state) {
    plan = schedule::plan_pipeline(std::span<const microbatch::Sample>(batch.samples), batch.setup.model, options);
    benchmark::DoNotOptimize(plan);
  }
  std::size_t instructions = 0;
  for (const schedule::ReplicaSchedule& replica : plan.replicas)
    for (const auto& rank : replica.schedule.plan.ranks) instructions += rank.size();
  state.counters["micro_batches"] = static_cast<double>(plan.partition.micro_batches.size());
  state.counters["makespan_s"] = plan.makespan;
  state.counters["instructions"] = static_cast<double>(instructions);
}
BENCHMARK(BM_PlanPipeline)->Arg(65536)->Arg(262144)->Unit(benchmark::kMillisecond);

}  // namespace
