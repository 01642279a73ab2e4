// Galvatron-BMW search microbenchmarks: the whole search (Base, the six baselines, BMW) for the 48-layer
// GPT-style model (hidden 4096, sequence 2048), 16 GiB per device, granularity 16 MiB, global batch 64,
// every PP degree and micro-batch count, on 8, 16 and 64 A100s (8 per NVLink node, 100 Gb/s across).
#include <benchmark/benchmark.h>

#include <cstdint>

#include "sluice/core/error.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/search_json.hpp"
#include "sluice/search/search.hpp"

namespace {

// Arg: GPUs. Counters: the best plan's samples/s (0 when nothing fits: 9.7 B parameters need 19 GiB of
// model states per GPU on 8 GPUs), its PP degree and micro-batch count.
void BM_GalvatronSearch(benchmark::State& state) {
  const auto model =
      sluice::io::read_document<sluice::search::ModelSpec>(sluice::io::bundled_data_dir() / "models" / "gpt-48.json");
  auto cluster = sluice::io::read_document<sluice::search::ClusterSpec>(sluice::io::bundled_data_dir() / "clusters" /
                                                                        "a100-64.json");
  cluster.gpus = state.range(0);
  sluice::search::SearchOptions options;
  options.memory_bytes = std::int64_t{16} << 30;
  options.granularity_bytes = std::int64_t{16} << 20;
  options.global_batch = 64;
  double throughput = 0;
  int pp = 0;
  int micro_batches = 0;
  for (auto _ : state) {
    try {
      const sluice::search::SearchReport report = sluice::search::search(model, cluster, options);
      throughput = report.best.throughput;
      pp = report.best.pp;
      micro_batches = report.best.micro_batches;
      benchmark::DoNotOptimize(report);
    } catch (const sluice::infeasible&) {
      throughput = 0;
    }
  }
  state.counters["samples_per_s"] = throughput;
  state.counters["pp"] = pp;
  state.counters["micro_batches"] = micro_batches;
}
BENCHMARK(BM_GalvatronSearch)->Arg(8)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);

}  // namespace
