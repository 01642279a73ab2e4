// Plans one batch with sluice, runs the plan on this machine's GPU (every rank on one device, the local
// transport) or on the float64 host backend, writes the run's Chrome trace and prints the predicted against the
// measured times. Started by mpirun or srun, it runs one process per rank (the host backend, ranks talking over
// MPI): every process plans the same batch and runs its rank, and rank 0 reports. Usage below (--help prints it).
//
// sluice (default): the sluice plan (plan::IterationPlanner) over the homogeneous strategies of the profile's
// schemes on --gpus GPUs. --dynapipe: DynaPipe's plan_pipeline with --pp stages and --replicas replicas.
// --serialize runs the ranks one op at a time (per-op times free of contention).
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"
#include "processes.hpp"
#include "profile_source.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/json.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/builders.hpp"
#include "sluice_executor/host/local.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/trace.hpp"

namespace ex = sluice::executor;

namespace {

constexpr std::string_view usage =
    "usage: sluice_run_plan [--layers 8 --hidden 1024 --heads 8 --ffn 2816 --vocab 32000 --model-seed 1]\n"
    "                       [--tokens 32768] [--context 8192] [--seed 1] [--gpus 4]\n"
    "                       [--profile FILE|NAME | --profile-from-gpu [--tp T1,T2]] [--cp C1,C2 [--cp-kinds K]]\n"
    "                       [--ac]\n"
    "                       [--dynapipe --pp 2 --replicas 2]\n"
    "                       [--serialize] [--backend cuda|host] [--timeout 60] [--trace run_trace.json]\n"
    "Plans one batch with sluice, runs it on this GPU (--backend host: the float64 host backend, which needs\n"
    "--profile, and runs every TP, CP and recompute scheme) and prints the predicted against the measured times.\n"
    "--profile-from-gpu profiles <TP, PP> for PP 1, 2 and 4 and every TP of --tp (default 1) on this GPU first.\n"
    "--cp, --cp-kinds and --ac add the profile's CP and recompute schemes as the sluice tool does. Started by\n"
    "mpirun or srun with one process per rank of the plan (or more), each process runs its rank (on one GPU of its\n"
    "node over NCCL, or on the host backend) and rank 0 reports; a wait longer than --timeout seconds ends the run\n"
    "with an error naming the rank.\n"
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

int run(int argc, char** argv, const examples::Processes& processes) {
  examples::Arguments arguments(argc, argv, {"profile-from-gpu", "dynapipe", "serialize", "ac"});
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
  const std::string backend = arguments.text("backend", "cuda");
  const auto timeout = arguments.integer<int>("timeout", 60);
  const std::vector<int> tps = arguments.integers<int>("tp", {1});
  const sluice::cost::SchemeSpace space = examples::scheme_space_from(arguments);
  arguments.require_all_used();
  sluice::require(profile_from_gpu != !profile_path.empty(), "give one of --profile FILE and --profile-from-gpu");
  sluice::require(backend == "cuda" || backend == "host", "--backend must be cuda or host, got '", backend, "'");
  const bool on_gpu = backend == "cuda";
  sluice::require(on_gpu || !profile_from_gpu, "--backend host needs --profile (only a GPU can be profiled)");
  sluice::require(on_gpu || !serialize, "--serialize is for the CUDA backend, which runs every rank on one GPU");
  examples::require_process_backend(processes, on_gpu);
  sluice::require(!processes.mpi || !profile_from_gpu,
                  "one process per rank needs --profile FILE: each process "
                  "would profile its own GPU, and their plans could differ");
  sluice::require(!processes.mpi || !serialize, "--serialize runs every rank in one process, not one per rank");
  sluice::require(timeout >= 1 && timeout <= 86400, "--timeout must be in [1, 86400] seconds, got ", timeout);
  examples::require_tps_for(profile_path, tps);
  if (profile_from_gpu) static_cast<void>(examples::spot_profile(model, tps, gpus, context));  // bad --tp: exit 2
  if (on_gpu && ex::cuda::device_count() == 0) {
    std::cerr << "sluice_run_plan: no CUDA device\n";
    return 2;
  }
  examples::note_one_cpu("sluice_run_plan", processes, on_gpu);
  const sluice::cost::Profile profile =
      examples::with_space(examples::load_profile(profile_path, model, tps, gpus, context), space, model);

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
    options.last_stage = setup.last_stage;
    options.layout = sluice::microbatch::Layout::packed;
    options.problem.hidden = model.hidden;
    const auto plan =
        sluice::schedule::plan_pipeline(std::span<const sluice::microbatch::Sample>(samples), setup.model, options);
    job = ex::job_from_pipeline_plan(model, std::move(sequences), plan);
  } else {
    sluice::plan::Options options;
    options.problem.hidden = model.hidden;
    const sluice::plan::IterationPlanner planner(profile, homogeneous_strategies(profile, gpus), options);
    const sluice::plan::SimulatedIteration iteration = planner.plan(batch);
    job = ex::job_from_iteration(model, std::move(sequences), iteration.plan, iteration.schedule);
    if (processes.rank == 0) std::cout << "strategy " << iteration.plan.strategy.name() << "\n";
  }

  // It prints the loss and the times: the gradients stay on the ranks.
  const ex::RunReport report = [&] {
#ifdef SLUICE_EXECUTOR_HAVE_MPI
    if (processes.mpi)
      return examples::run_own_rank(job, on_gpu, {.timeout_seconds = static_cast<double>(timeout), .gradients = false});
#endif
    if (!on_gpu) return ex::host::run_local(job, {.gradients = false});
    return ex::cuda::run_local(job, {.serialize = serialize, .gradients = false});
  }();
  if (processes.rank != 0) return 0;
  sluice::io::write_text_file(trace_path, ex::chrome_trace(job, report).dump());
  std::cout << batch.size() << " sequences, " << tokens << " token budget, on " << report.device << "\n"
            << "loss " << report.result.loss << "\n"
            << ex::format(ex::timing_table(job, report)) << "trace: " << trace_path << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_processes("sluice_run_plan", argc, argv,
                                 [&](const examples::Processes& processes) { return run(argc, argv, processes); });
}
