// Cost-model microbenchmarks: the evaluations that planners run in their inner loops, and fitting.
#include <benchmark/benchmark.h>

#include <vector>

#include "sluice/core/random.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice/cost/grid.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"

namespace {

void BM_MicrobatchTime(benchmark::State& state) {
  const sluice::cost::QuadraticLatency model(1.372e-9, 9.465e-5, 1.505e-2);
  sluice::Rng rng(1);
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(state.range(0)));
  for (auto& length : lengths) length = rng.uniform_int(1, 32768);
  for (auto _ : state) benchmark::DoNotOptimize(model.microbatch_time(lengths));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_MicrobatchTime)->Arg(1024);

void BM_FitQuadratic(benchmark::State& state) {
  const sluice::cost::QuadraticLatency truth(2.125e-9, 1.414e-4, 1.229e-1);
  sluice::Rng rng(1);
  std::vector<sluice::cost::LatencySample> samples;
  for (std::int64_t length = 256; length <= 65536; length *= 2)
    for (int repeat = 0; repeat < 5; ++repeat) samples.push_back({length, truth(length) * (1 + 0.01 * rng.normal())});
  for (auto _ : state) benchmark::DoNotOptimize(sluice::cost::fit_quadratic(samples));
}
BENCHMARK(BM_FitQuadratic);

void BM_GridLookup(benchmark::State& state) {
  std::vector<double> sizes;
  std::vector<double> lengths;
  for (double size = 1; size <= 64; size *= 2) sizes.push_back(size);
  for (double length = 32; length <= 32768; length *= 2) lengths.push_back(length);
  std::vector<double> values;
  for (double size : sizes)
    for (double length : lengths) values.push_back(size * length * 1e-6 + 1e-3);
  const sluice::cost::RectilinearGrid<2> grid({sizes, lengths}, values);
  sluice::Rng rng(1);
  std::vector<std::array<double, 2>> queries(1024);
  for (auto& query : queries) query = {1 + 63 * rng.uniform(), 32 + 32736 * rng.uniform()};
  for (auto _ : state)
    for (const auto& query : queries) benchmark::DoNotOptimize(grid(query));
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(queries.size()));
}
BENCHMARK(BM_GridLookup);

void BM_LoadBundledProfile(benchmark::State& state) {
  const auto path = sluice::io::resolve_data_file("llama2-32b", "profiles");
  for (auto _ : state) benchmark::DoNotOptimize(sluice::io::read_document<sluice::cost::Profile>(path));
}
BENCHMARK(BM_LoadBundledProfile);

}  // namespace
