// Plans one batch with sluice, runs the plan on this machine's GPU (every rank on one device, the local
// transport), writes the run's Chrome trace and prints the predicted against the measured times.
// Usage below (--help prints it).
//
// Hydraulis (default): plan_iteration over the homogeneous strategies of the profile's schemes on --gpus GPUs,
// scheduled with the adaptive cyclic schedule. --dynapipe: DynaPipe's plan_pipeline with --pp stages and
// --replicas replicas. --serialize runs the ranks one op at a time (per-op times free of contention).
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"
#include "profile_source.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/json.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/trace.hpp"

namespace ex = sluice::executor;

namespace {

constexpr std::string_view usage =
    "usage: sluice_run_plan [--layers 8 --hidden 1024 --heads 8 --ffn 2816 --vocab 32000 --model-seed 1]\n"
    "                       [--tokens 32768] [--context 8192] [--seed 1] [--gpus 4]\n"
    "                       [--profile FILE|NAME | --profile-from-gpu] [--dynapipe --pp 2 --replicas 2]\n"
    "                       [--serialize] [--trace run_trace.json]\n"
    "Plans one batch with sluice, runs it on this GPU and prints the predicted against the measured times.\n"
    "Exit codes: 0 success, 2 bad input or no CUDA device (one line on stderr), 1 anything else.\n"
    "--help prints this; --version prints the version.\n";

// Every homogeneous strategy of a scheme the profile has that fills the GPUs.
std::vector<sluice::Strategy> homogeneous_strategies(const sluice::cost::Profile& profile, std::int64_t gpus) {
  std::vector<sluice::Strategy> strategies;
  for (const sluice::cost::SchemeCost& scheme : profile.schemes())
    if (gpus % scheme.scheme.gpus() == 0 && scheme.max_len > 0)
      strategies.emplace_back(
          std::vector<sluice::StrategyPart>{{scheme.scheme, static_cast<int>(gpus / scheme.scheme.gpus())}});
  sluice::require(!strategies.empty(), "the profile has no scheme that divides ", gpus, " GPUs");
  return strategies;
}

int run(int argc, char** argv) {
  examples::Arguments arguments(argc, argv, {"profile-from-gpu", "dynapipe", "serialize"});
  if (examples::print_help_or_version(arguments, usage)) return 0;
  const ex::ModelConfig model = examples::model_from(arguments);
  const auto tokens = arguments.integer<std::int64_t>("tokens", 32768);
  const auto context = arguments.integer<std::int64_t>("context", 8192);
  const auto seed = arguments.integer<std::uint64_t>("seed", 1);
  const auto gpus = arguments.integer<std::int64_t>("gpus", 4);
  const bool dynapipe = arguments.flag("dynapipe");
  const int pp = arguments.integer<int>("pp", 2);
  const int replicas = arguments.integer<int>("replicas", 2);
  const bool serialize = arguments.flag("serialize");
  const std::string trace_path = arguments.text("trace", "run_trace.json");
  const bool profile_from_gpu = arguments.flag("profile-from-gpu");
  const std::string profile_path = arguments.text("profile", "");
  arguments.require_all_used();
  sluice::require(profile_from_gpu != !profile_path.empty(), "give one of --profile FILE and --profile-from-gpu");
  if (ex::cuda::device_count() == 0) {
    std::cerr << "sluice_run_plan: no CUDA device\n";
    return 2;
  }
  const sluice::cost::Profile profile = examples::load_profile(profile_path, model, gpus);

  const sluice::data::LengthDataset dataset =
      sluice::data::LengthDataset(sluice::data::synthetic_lengths({.count = 5000, .seed = seed}), "synthetic")
          .truncated(context);
  sluice::data::BatchSampler sampler(dataset, {.tokens_per_batch = tokens, .seed = seed});
  const std::vector<sluice::Sequence> batch = sampler.next().sequences;
  std::vector<ex::SequenceTokens> sequences = ex::make_tokens(batch, model.vocab, seed);

  ex::Job job;
  if (dynapipe) {
    const std::vector<sluice::microbatch::Sample> samples = sluice::microbatch::samples_of(batch);
    const sluice::microbatch::StageCostSetup setup = sluice::microbatch::stage_cost(profile.at(sluice::Scheme(1, pp)));
    sluice::schedule::PipelinePlanOptions options;
    options.stages = pp;
    options.replicas = replicas;
    options.micro_batch_memory = setup.memory_limit;
    options.layout = sluice::microbatch::Layout::packed;
    options.problem.hidden = model.hidden;
    const auto plan =
        sluice::schedule::plan_pipeline(std::span<const sluice::microbatch::Sample>(samples), setup.model, options);
    job = ex::job_from_pipeline_plan(model, std::move(sequences), plan);
  } else {
    const std::vector<sluice::Strategy> candidates = homogeneous_strategies(profile, gpus);
    const sluice::assign::IterationPlan plan = sluice::assign::plan_iteration(batch, candidates, profile);
    std::cout << "strategy " << plan.strategy.name() << "\n";
    job = ex::job_from_iteration(model, std::move(sequences), plan, profile);
  }

  ex::cuda::LocalOptions options;
  options.serialize = serialize;
  const ex::RunReport report = ex::cuda::run_local(job, options);
  sluice::io::write_text_file(trace_path, ex::chrome_trace(job, report).dump());
  std::cout << batch.size() << " sequences, " << tokens << " token budget, on " << report.device << "\n"
            << "loss " << report.result.loss << "\n"
            << ex::format(ex::timing_table(job, report)) << "trace: " << trace_path << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_program("sluice_run_plan", [&] { return run(argc, argv); });
}
