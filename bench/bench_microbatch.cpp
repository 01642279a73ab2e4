// Micro-batch DP microbenchmarks (DynaPipe §4): one mini-batch drawn by token budget (seed 1) from synthetic
// long-tailed lengths truncated at 8192, ordered by length and partitioned on the bundled LLaMA2-7B profile's
// <1,4> scheme (c = 4 stages, |D| = 4, padded, default tmax interval).
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

namespace {

// Arg: tokens per mini-batch. Ordering and the DP are timed; counters: samples and micro-batches.
void BM_MicroBatchDP(benchmark::State& state) {
  using namespace sluice;
  const cost::Profile profile = io::read_document<cost::Profile>(io::resolve_data_file("llama2-7b", "profiles"));
  const microbatch::StageCostSetup setup = microbatch::stage_cost(profile.at(Scheme(1, 4)));
  const data::LengthDataset dataset =
      data::LengthDataset(data::synthetic_lengths({.count = 100'000, .seed = 1}), "synthetic").truncated(8192);
  data::BatchSampler sampler(dataset, {.tokens_per_batch = state.range(0), .seed = 1});
  std::vector<microbatch::Sample> samples;
  for (const Sequence& sequence : sampler.next().sequences) samples.push_back({sequence.id(), sequence.length(), 0});
  const microbatch::PartitionOptions options{.stages = 4, .replicas = 4, .memory_limit = setup.memory_limit};
  std::size_t micro_batches = 0;
  for (auto _ : state) {
    const std::vector<microbatch::Sample> ordered = microbatch::order_samples(samples, microbatch::Ordering::length);
    const microbatch::Partition result =
        microbatch::partition(std::span<const microbatch::Sample>(ordered), setup.model, options);
    micro_batches = result.micro_batches.size();
    benchmark::DoNotOptimize(result);
  }
  state.counters["samples"] = static_cast<double>(samples.size());
  state.counters["micro_batches"] = static_cast<double>(micro_batches);
}
BENCHMARK(BM_MicroBatchDP)->Arg(65536)->Arg(262144)->Unit(benchmark::kMicrosecond);

}  // namespace
