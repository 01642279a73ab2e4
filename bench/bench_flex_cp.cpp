// Per-micro-batch CP groups (assign/flex_cp.hpp; FlexSP's own planning, assign/flexsp.hpp): one iteration of a
// long-context batch on every GPU of the cluster as replicas of LLaMA2-7B's ⟨1, 1⟩, ring CP of every power of two up to
// the cluster.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "sluice/assign/flex_cp.hpp"
#include "sluice/assign/flexsp.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"

namespace {

// Arg: GPUs. `lengths` (a bundled set) truncated to `context`, 12,500 tokens per GPU per iteration (the study's
// long-context scenario at 64 GPUs: 800K tokens).
sluice::assign::FlexCpProblem long_context_problem(int gpus, const char* lengths_name = "debian-changelogs",
                                                   std::int64_t context = 262'144) {
  const auto profile =
      sluice::io::read_document<sluice::cost::Profile>(sluice::io::resolve_data_file("llama2-7b", "profiles"))
          .with_gpus(gpus);
  sluice::cost::SchemeSpace space;
  for (int degree = 2; degree <= gpus; degree *= 2) space.cp_degrees.push_back(degree);
  const sluice::cost::Profile derived(sluice::cost::with_scheme_space(profile.spec(), space));
  const auto dataset =
      sluice::data::LengthDataset::load(sluice::io::resolve_data_file(lengths_name, "lengths")).truncated(context);
  sluice::data::BatchSampler sampler(dataset, {.tokens_per_batch = 12'500 * std::int64_t{gpus}, .seed = 1});
  std::vector<std::int64_t> lengths;
  for (const sluice::Sequence& sequence : sampler.next().sequences) lengths.push_back(sequence.length());
  return sluice::assign::flex_cp_problem(derived, sluice::Scheme(1, 1), gpus, lengths,
                                         [](const sluice::Scheme&) { return true; });
}

template <class Solve>
void run_flex_cp(benchmark::State& state, const sluice::assign::FlexCpProblem& problem, Solve solve) {
  sluice::assign::FlexCpPlan plan;
  for (auto _ : state) {
    plan = solve(problem);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["sequences"] = static_cast<double>(problem.lengths.size());
  state.counters["degrees"] = static_cast<double>(problem.degrees.size());
  state.counters["micro_batches"] = static_cast<double>(plan.micro_batches.size());
  state.counters["seconds"] = plan.seconds;
  state.counters["gap"] = plan.seconds / plan.lower_bound;
}

sluice::assign::FlexCpPlan solve_flex_cp(const sluice::assign::FlexCpProblem& problem) {
  return sluice::assign::solve_flex_cp(problem);
}

// The same problem planned as FlexSP's authors plan it (assign/flexsp.hpp).
sluice::assign::FlexCpPlan solve_flexsp(const sluice::assign::FlexCpProblem& problem) {
  return sluice::assign::solve_flexsp(problem).value();
}

void BM_FlexCp(benchmark::State& state) {
  run_flex_cp(state, long_context_problem(static_cast<int>(state.range(0))), solve_flex_cp);
}
BENCHMARK(BM_FlexCp)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

void BM_FlexSp(benchmark::State& state) {
  run_flex_cp(state, long_context_problem(static_cast<int>(state.range(0))), solve_flexsp);
}
BENCHMARK(BM_FlexSp)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

// A batch like an encyclopedia's at a 128K context: hundreds of short documents and a few long ones (the manual
// pages: median 953 tokens, p99 13K, longest 239K cut to 128K); about 500 sequences at 64 GPUs, 8,200 at 1,024.
// Targets: 10 ms at 64 GPUs, 100 ms at 1,024.
void BM_FlexCpShortDocuments(benchmark::State& state) {
  run_flex_cp(state, long_context_problem(static_cast<int>(state.range(0)), "man-pages", 131'072), solve_flex_cp);
}
BENCHMARK(BM_FlexCpShortDocuments)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

void BM_FlexSpShortDocuments(benchmark::State& state) {
  run_flex_cp(state, long_context_problem(static_cast<int>(state.range(0)), "man-pages", 131'072), solve_flexsp);
}
BENCHMARK(BM_FlexSpShortDocuments)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
