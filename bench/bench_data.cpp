// Length-data microbenchmarks: reading length files, histograms, batch sampling and synthetic lengths.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sluice/core/random.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/readers.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"

namespace {

std::vector<std::int64_t> lengths(std::int64_t count) {
  return sluice::data::synthetic_lengths({.count = count, .seed = 42});
}

void BM_ReadLengthsText(benchmark::State& state) {
  std::string text = "# synthetic lengths\n";
  for (const std::int64_t length : lengths(state.range(0))) text += std::to_string(length) + "\n";
  for (auto _ : state) benchmark::DoNotOptimize(sluice::data::parse_lengths_text(text, "bench.txt"));
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_ReadLengthsText)->Arg(100'000);

void BM_ReadLengthsNpy(benchmark::State& state) {
  const std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (" + std::to_string(state.range(0)) +
                             ",), }";
  std::string file = "\x93NUMPY\x01";
  file.push_back('\0');
  const std::string padded = header + std::string(63 - (10 + header.size()) % 64, ' ') + "\n";
  file.push_back(static_cast<char>(padded.size() & 0xff));
  file.push_back(static_cast<char>(padded.size() >> 8));
  file += padded;
  for (const std::int64_t length : lengths(state.range(0))) {
    for (int shift = 0; shift < 32; shift += 8) file.push_back(static_cast<char>((length >> shift) & 0xff));
  }
  const auto bytes = std::as_bytes(std::span(file.data(), file.size()));
  for (auto _ : state) benchmark::DoNotOptimize(sluice::data::parse_lengths_npy(bytes, "bench.npy"));
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(file.size()));
}
BENCHMARK(BM_ReadLengthsNpy)->Arg(1'000'000);

void BM_LengthHistogram(benchmark::State& state) {
  const sluice::data::LengthDataset dataset(lengths(state.range(0)), "bench");
  for (auto _ : state) benchmark::DoNotOptimize(dataset.histogram(128));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_LengthHistogram)->Arg(1'000'000);

// One epoch of batches per iteration, including the shuffle that starts the next epoch.
void BM_SampleBatches(benchmark::State& state) {
  const sluice::data::LengthDataset dataset(lengths(state.range(0)), "bench");
  sluice::data::BatchSampler sampler(dataset, {.tokens_per_batch = 100'000, .seed = 7});
  sluice::data::Batch batch = sampler.next();
  std::int64_t sequences = 0;
  for (auto _ : state) {
    for (const std::int64_t epoch = batch.epoch; batch.epoch == epoch; batch = sampler.next()) {
      sequences += static_cast<std::int64_t>(batch.sequences.size());
    }
  }
  state.SetItemsProcessed(sequences);
}
BENCHMARK(BM_SampleBatches)->Arg(100'000);

void BM_SyntheticLengths(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(lengths(state.range(0)));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_SyntheticLengths)->Arg(100'000);

}  // namespace
