// DynaPipe microbenchmarks: one mini-batch drawn by token budget (seed 1) from synthetic long-tailed lengths
// truncated at 8192, on the bundled LLaMA2-7B profile's <1,4> scheme (c = 4 stages, |D| = 4, padded, default
// tmax interval). BM_MicroBatchDP times ordering + the Eq. 2 DP (§4); BM_PlanPipeline the whole planner:
// ordering, DP, replica balancing, injection-order search over cyclic and 1F1B orders, simulation and the
// communication plan of every replica (§4–§6). BM_MicroBatchDP_Short and _Real time the DP on many short
// samples and on real prose lengths.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <span>
#include <utility>
#include <vector>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "sluice/core/random.hpp"
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

sluice::microbatch::StageCostSetup llama_7b_1_4() {
  using namespace sluice;
  const cost::Profile profile = io::read_document<cost::Profile>(io::resolve_data_file("llama2-7b", "profiles"));
  return microbatch::stage_cost(profile.at(Scheme(1, 4)));
}

std::vector<sluice::microbatch::Sample> samples_of(const sluice::data::Batch& batch) {
  std::vector<sluice::microbatch::Sample> samples;
  for (const sluice::Sequence& sequence : batch.sequences) samples.push_back({sequence.id(), sequence.length(), 0});
  return samples;
}

MiniBatch mini_batch(std::int64_t tokens) {
  using namespace sluice;
  const data::LengthDataset dataset =
      data::LengthDataset(data::synthetic_lengths({.count = 100'000, .seed = 1}), "synthetic").truncated(8192);
  data::BatchSampler sampler(dataset, {.tokens_per_batch = tokens, .seed = 1});
  return {llama_7b_1_4(), samples_of(sampler.next())};
}

// Peak memory of one call in MB, outside the timed loop: the call runs in a forked child, and its peak resident
// set (getrusage through wait4) less its resident set at the start (/proc/self/statm) is what the call added.
// Linux only; elsewhere -1.
template <class Call>
double peak_memory_mb(Call call) {
#ifdef __linux__
  int channel[2];
  if (pipe(channel) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    long pages = 0;
    long resident = 0;
    std::FILE* statm = std::fopen("/proc/self/statm", "r");
    const bool parsed = statm != nullptr && std::fscanf(statm, "%ld %ld", &pages, &resident) == 2;
    if (statm != nullptr) std::fclose(statm);
    const double start = parsed ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) : -1;
    call();
    [[maybe_unused]] const auto written = write(channel[1], &start, sizeof start);
    _exit(0);
  }
  close(channel[1]);
  double start = -1;
  const bool received = read(channel[0], &start, sizeof start) == static_cast<ssize_t>(sizeof start);
  close(channel[0]);
  rusage usage{};
  int status = 0;
  if (child < 0 || wait4(child, &status, 0, &usage) != child || !received || start < 0) return -1;
  return (static_cast<double>(usage.ru_maxrss) * 1024 - start) / 1e6;
#else
  (void)call;
  return -1;
#endif
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

// Arg: tokens per mini-batch of short samples (lengths uniform in 64–256, seed 1, as SFT data), otherwise as
// BM_MicroBatchDP. Counters: samples, micro-batches, run-table cells, and peak_MB, the memory the call added
// (peak resident set of a forked run, see peak_memory_mb).
void BM_MicroBatchDP_Short(benchmark::State& state) {
  using namespace sluice;
  Rng rng(1);
  std::vector<std::int64_t> lengths(100'000);
  for (std::int64_t& length : lengths) length = rng.uniform_int(64, 256);
  data::BatchSampler sampler(data::LengthDataset(std::move(lengths), "uniform 64-256"),
                             {.tokens_per_batch = state.range(0), .seed = 1});
  const MiniBatch batch{llama_7b_1_4(), samples_of(sampler.next())};
  const microbatch::PartitionOptions options{.stages = 4, .replicas = 4, .memory_limit = batch.setup.memory_limit};
  auto run = [&] {
    const std::vector<microbatch::Sample> ordered =
        microbatch::order_samples(batch.samples, microbatch::Ordering::length);
    return microbatch::partition(std::span<const microbatch::Sample>(ordered), batch.setup.model, options);
  };
  std::size_t micro_batches = 0;
  for (auto _ : state) {
    const microbatch::Partition result = run();
    micro_batches = result.micro_batches.size();
    benchmark::DoNotOptimize(result);
  }
  const std::vector<microbatch::Sample> ordered =
      microbatch::order_samples(batch.samples, microbatch::Ordering::length);
  const microbatch::detail::RunTable table(ordered, batch.setup.model, options.layout, options.memory_limit);
  state.counters["samples"] = static_cast<double>(batch.samples.size());
  state.counters["micro_batches"] = static_cast<double>(micro_batches);
  state.counters["cells"] = static_cast<double>(table.cells());
  state.counters["peak_MB"] = peak_memory_mb([&] { benchmark::DoNotOptimize(run()); });
}
BENCHMARK(BM_MicroBatchDP_Short)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

// Arg: tokens per mini-batch drawn from the bundled man-pages lengths (real prose, truncated at 4096) by the
// token-budget sampler (seed 1); one replica, c = 4, the 7B <1,4> cost. Each iteration partitions the next of
// the epoch's first 16 batches; counters: mean samples and micro-batches per batch.
void BM_MicroBatchDP_Real(benchmark::State& state) {
  using namespace sluice;
  const data::LengthDataset dataset =
      data::LengthDataset::load(io::resolve_data_file("man-pages", "lengths")).truncated(4096);
  data::BatchSampler sampler(dataset, {.tokens_per_batch = state.range(0), .seed = 1});
  std::vector<std::vector<microbatch::Sample>> batches;
  for (int b = 0; b < 16; ++b) batches.push_back(samples_of(sampler.next()));
  const microbatch::StageCostSetup setup = llama_7b_1_4();
  const microbatch::PartitionOptions options{.stages = 4, .replicas = 1, .memory_limit = setup.memory_limit};
  std::size_t next = 0;
  double samples = 0;
  double micro_batches = 0;
  for (auto _ : state) {
    const std::vector<microbatch::Sample>& batch = batches[next++ % batches.size()];
    const std::vector<microbatch::Sample> ordered = microbatch::order_samples(batch, microbatch::Ordering::length);
    const microbatch::Partition result =
        microbatch::partition(std::span<const microbatch::Sample>(ordered), setup.model, options);
    samples += static_cast<double>(batch.size());
    micro_batches += static_cast<double>(result.micro_batches.size());
    benchmark::DoNotOptimize(result);
  }
  state.counters["samples"] = samples / static_cast<double>(state.iterations());
  state.counters["micro_batches"] = micro_batches / static_cast<double>(state.iterations());
}
BENCHMARK(BM_MicroBatchDP_Real)->Arg(262144)->Unit(benchmark::kMicrosecond);

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
