// Length-data microbenchmarks: reading length files, histograms, batch sampling and synthetic lengths.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "sluice/core/random.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/readers.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"

namespace {

std::vector<std::int64_t> lengths(std::int64_t count) {
  return sluice::data::synthetic_lengths({.count = count, .seed = 42});
}

// Glibc keeps freed memory for reuse; a reader that reuses it would not raise the resident set.
void release_free_memory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

std::optional<std::int64_t> status_bytes(std::string_view field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with(field)) return std::stoll(line.substr(field.size())) * 1024;  // "VmHWM:  1234 kB"
  }
  return std::nullopt;
}

// Peak memory of one call: the resident set's high-water mark (VmHWM) after it less the resident set (VmRSS)
// before it, after writing 5 to /proc/self/clear_refs, which resets the high-water mark to the current resident
// set (Linux >= 4.0). getrusage's ru_maxrss cannot be reset, so its delta would read 0 under the peak of an
// earlier benchmark. Nothing where /proc is missing.
template <class Call>
std::optional<std::int64_t> peak_memory(Call&& call) {
  release_free_memory();
  std::ofstream("/proc/self/clear_refs") << "5";
  const auto before = status_bytes("VmRSS:");
  std::forward<Call>(call)();
  const auto peak = status_bytes("VmHWM:");
  if (!before || !peak) return std::nullopt;
  return *peak - *before;
}

// Reads a file from disk (the page cache after the first read), as `sluice inspect --lengths` does. The counter
// peak_memory is one read's peak (see peak_memory), file_size the file's size, for comparison.
void BM_ReadLengthsText(benchmark::State& state) {
  const auto path =
      std::filesystem::temp_directory_path() / ("sluice-bench-lengths-" + std::to_string(state.range(0)) + ".txt");
  std::int64_t file_size = 0;
  {
    std::ofstream out(path, std::ios::binary);
    out << "# synthetic lengths\n";
    for (const std::int64_t length : lengths(state.range(0))) out << length << '\n';
    file_size = static_cast<std::int64_t>(out.tellp());
  }
  const auto peak = peak_memory([&] { benchmark::DoNotOptimize(sluice::data::read_lengths_text(path)); });
  for (auto _ : state) benchmark::DoNotOptimize(sluice::data::read_lengths_text(path));
  std::filesystem::remove(path);
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * file_size);
  using benchmark::Counter;
  if (peak) state.counters["peak_memory"] = Counter(static_cast<double>(*peak), Counter::kDefaults, Counter::kIs1024);
  state.counters["file_size"] = Counter(static_cast<double>(file_size), Counter::kDefaults, Counter::kIs1024);
}
BENCHMARK(BM_ReadLengthsText)->Arg(100'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);

void BM_ReadLengthsNpy(benchmark::State& state) {
  const std::string header =
      "{'descr': '<i4', 'fortran_order': False, 'shape': (" + std::to_string(state.range(0)) + ",), }";
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
