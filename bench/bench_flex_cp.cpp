// Per-micro-batch CP groups (assign/flex_cp.hpp): one iteration of a long-context batch on every GPU of the cluster
// as replicas of LLaMA2-7B's ⟨1, 1⟩, ring CP of every power of two up to the cluster.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "sluice/assign/flex_cp.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"

namespace {

// Arg: GPUs. debian-changelogs truncated to 256K, 12,500 tokens per GPU per iteration (the study's long-context
// scenario at 64 GPUs: 800K tokens).
sluice::assign::FlexCpProblem long_context_problem(int gpus) {
  const auto profile = sluice::io::read_document<sluice::cost::Profile>(
                           sluice::io::resolve_data_file("llama2-7b", "profiles"))
                           .with_gpus(gpus);
  sluice::cost::SchemeSpace space;
  for (int degree = 2; degree <= gpus; degree *= 2) space.cp_degrees.push_back(degree);
  const sluice::cost::Profile derived(sluice::cost::with_scheme_space(profile.spec(), space));
  const auto dataset = sluice::data::LengthDataset::load(sluice::io::resolve_data_file("debian-changelogs", "lengths"))
                           .truncated(262'144);
  sluice::data::BatchSampler sampler(dataset, {.tokens_per_batch = 12'500 * std::int64_t{gpus}, .seed = 1});
  std::vector<std::int64_t> lengths;
  for (const sluice::Sequence& sequence : sampler.next().sequences) lengths.push_back(sequence.length());
  return sluice::assign::flex_cp_problem(derived, sluice::Scheme(1, 1), gpus, lengths,
                                         [](const sluice::Scheme&) { return true; });
}

void BM_FlexCp(benchmark::State& state) {
  const sluice::assign::FlexCpProblem problem = long_context_problem(static_cast<int>(state.range(0)));
  sluice::assign::FlexCpPlan plan;
  for (auto _ : state) {
    plan = sluice::assign::solve_flex_cp(problem);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["sequences"] = static_cast<double>(problem.lengths.size());
  state.counters["degrees"] = static_cast<double>(problem.degrees.size());
  state.counters["micro_batches"] = static_cast<double>(plan.micro_batches.size());
  state.counters["seconds"] = plan.seconds;
  state.counters["gap"] = plan.seconds / plan.lower_bound;
}
BENCHMARK(BM_FlexCp)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
