// Measures on this GPU what `sluice simulate` predicts: fits the executor's profile on the GPU, samples iterations
// of real lengths, plans each with the Megatron-LM-style system, DynaPipe and sluice (sluice::compare), executes
// every plan with all its ranks serialized on the one GPU, and prints per system the measured iteration (each op's
// measured time replayed with the plan's orders: the iteration with one GPU per rank), the simulator's prediction
// for the same plan, their error and the measured speedups. Usage below (--help prints it).
#include <chrono>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"
#include "processes.hpp"
#include "profile_source.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/json.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/host/local.hpp"
#include "sluice_executor/systems.hpp"

namespace ex = sluice::executor;

namespace {

constexpr std::string_view usage =
    "usage: sluice_measure_systems [--layers 4 --hidden 4096 --heads 32 --ffn 11008 --vocab 32000 --model-seed 1]\n"
    "                              [--lengths man-pages] [--iterations 3] [--tokens 32768] [--context 8192]\n"
    "                              [--gpus 4] [--seed 0] [--profile FILE|NAME] [--backend cuda|host] [--json FILE]\n"
    "                              [--tp T1,T2] [--cp C1,C2 [--cp-kinds K]] [--ac] [--progress]\n"
    "Plans the same sampled batches with the Megatron-LM-style system, DynaPipe and sluice, runs every plan on this\n"
    "GPU (ranks serialized) and prints per system the measured iteration time, the simulator's prediction for the\n"
    "same plan, their error and the measured speedups. The model defaults to LLaMA-7B-shaped layers; the profile is\n"
    "fitted on the GPU first, over lengths up to the context, unless --profile is given: <TP, PP> for PP 1, 2 and 4\n"
    "and every TP of --tp (default 1; a stage's TP lanes serialized). --backend host runs the\n"
    "float64 host backend instead (small models, needs --profile). --cp, --cp-kinds and --ac add the profile's CP and\n"
    "recompute schemes as the sluice tool does (both backends run them). --json FILE also writes the results as a\n"
    "sluice.measured_systems document.\n"
    "--progress prints on stderr how long the profile and each executed plan took.\n"
    "Exit codes: 0 success, 2 bad input or no CUDA device (one line on stderr), 1 anything else.\n"
    "--help prints this; --version prints the version.\n";

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// LLaMA-7B's layer shape (hidden 4096, 32 heads of 128, SwiGLU 11008, vocabulary 32000), four layers.
constexpr ex::ModelConfig llama7b_layers{.layers = 4, .hidden = 4096, .heads = 32, .ffn = 11008, .vocab = 32000};

double speedup(double baseline, double sluice) { return baseline / sluice; }

sluice::io::json document(const ex::SystemsMeasurement& measured, const ex::ModelConfig& model,
                          const sluice::compare::Options& options, const std::string& lengths,
                          const std::string& device) {
  const ex::MeasuredSystem& sluice_run = measured.systems.back();
  sluice::io::json systems = sluice::io::json::array();
  for (const ex::MeasuredSystem& system : measured.systems) {
    sluice::io::json iterations = sluice::io::json::array();
    for (const ex::MeasuredIteration& it : system.iterations)
      iterations.push_back({{"strategy", it.strategy},
                            {"predicted_seconds", it.predicted},
                            {"replayed_seconds", it.replayed},
                            {"measured_seconds", it.measured},
                            {"layout_move_seconds", it.layout_move},
                            {"activation_peak_bytes", it.activation_peak_bytes},
                            {"loss", it.loss}});
    systems.push_back({{"name", sluice::compare::name(system.system)},
                       {"configuration", system.configuration},
                       {"mean_predicted_seconds", system.mean_predicted()},
                       {"mean_replayed_seconds", system.mean_replayed()},
                       {"prediction_error", system.error()},
                       {"sluice_speedup_measured", speedup(system.mean_replayed(), sluice_run.mean_replayed())},
                       {"sluice_speedup_predicted", speedup(system.mean_predicted(), sluice_run.mean_predicted())},
                       {"iterations", std::move(iterations)}});
  }
  sluice::io::json batches = sluice::io::json::array();
  for (const sluice::compare::BatchSize& batch : measured.batches)
    batches.push_back({{"sequences", batch.sequences}, {"tokens", batch.tokens}});
  sluice::io::json candidates = sluice::io::json::array();
  for (const sluice::Strategy& strategy : measured.candidates) candidates.push_back(strategy.name());
  sluice::io::json out = {{"format", "sluice.measured_systems"}, {"version", 1}, {"device", device}};
  out.update(examples::run_description(model, options, lengths));
  out["batches"] = std::move(batches);
  out["candidates"] = std::move(candidates);
  out["systems"] = std::move(systems);
  return out;
}

std::string table(const ex::SystemsMeasurement& measured) {
  const ex::MeasuredSystem& sluice_run = measured.systems.back();
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  out << "system     predicted ms   measured ms   error   sluice speedup: measured  predicted\n";
  for (const ex::MeasuredSystem& system : measured.systems)
    out << std::left << std::setw(9) << sluice::compare::name(system.system) << std::right << std::setw(14)
        << 1e3 * system.mean_predicted() << std::setw(14) << 1e3 * system.mean_replayed() << std::setw(7)
        << 100 * system.error() << "%" << std::setprecision(2) << std::setw(26)
        << speedup(system.mean_replayed(), sluice_run.mean_replayed()) << "x" << std::setw(10)
        << speedup(system.mean_predicted(), sluice_run.mean_predicted()) << "x" << std::setprecision(1) << "\n";
  out << "(means over the iterations; measured: each op's measured time replayed with the plan's orders, one GPU per "
         "rank)\n";
  for (const ex::MeasuredSystem& system : measured.systems) {
    out << sluice::compare::name(system.system) << ": " << system.configuration << "\n";
    for (std::size_t k = 0; k < system.iterations.size(); ++k) {
      const ex::MeasuredIteration& it = system.iterations[k];
      out << "  iteration " << k << ": " << it.strategy << ", predicted " << 1e3 * it.predicted << " ms, measured "
          << 1e3 * it.replayed << " ms (ranks sharing the GPU: " << 1e3 * it.measured << " ms)";
      if (it.layout_move > 0) out << ", modelled exposed layout move " << 1e3 * it.layout_move << " ms (not run)";
      out << std::setprecision(6) << ", loss " << it.loss << std::setprecision(1) << "\n";
    }
  }
  return out.str();
}

int run(int argc, char** argv, const examples::Processes& processes) {
  examples::Arguments arguments(argc, argv, {"progress", "ac"});
  if (examples::print_help_or_version(arguments, usage)) return 0;
  const ex::ModelConfig model = examples::model_from(arguments, llama7b_layers);
  const std::string lengths = arguments.text("lengths", std::string(sluice::io::default_lengths));
  const auto iterations = arguments.integer<int>("iterations", 3);
  const auto tokens = arguments.integer<std::int64_t>("tokens", 32768);
  const auto context = arguments.integer<std::int64_t>("context", 8192);
  const auto gpus = arguments.integer<std::int64_t>("gpus", 4);
  const auto seed = arguments.integer<std::uint64_t>("seed", 0);
  const std::string profile_path = arguments.text("profile", "");
  const std::string backend = arguments.text("backend", "cuda");
  const std::string json_path = arguments.text("json", "");
  const bool progress = arguments.flag("progress");
  const std::vector<int> tps = arguments.integers<int>("tp", {1});
  const sluice::cost::SchemeSpace space = examples::scheme_space_from(arguments);
  arguments.require_all_used();
  sluice::require(iterations >= 1 && iterations <= 1000, "--iterations must be in [1, 1000], got ", iterations);
  sluice::require(tokens >= 1, "--tokens must be >= 1, got ", tokens);
  sluice::require(context >= 1, "--context must be >= 1, got ", context);
  sluice::require(gpus >= 1, "--gpus must be >= 1, got ", gpus);
  sluice::require(backend == "cuda" || backend == "host", "--backend must be cuda or host, got '", backend, "'");
  const bool on_gpu = backend == "cuda";
  sluice::require(on_gpu || !profile_path.empty(), "--backend host needs --profile (only a GPU can be profiled)");
  examples::require_process_backend(processes, on_gpu);
  sluice::require(!processes.mpi || !profile_path.empty(),
                  "one process per rank needs --profile FILE: each "
                  "process would profile its own GPU, and their plans could differ");
  const sluice::data::LengthDataset dataset =
      sluice::data::LengthDataset::load(sluice::io::resolve_data_file(lengths, "lengths")).truncated(context);
  examples::require_tps_for(profile_path, tps);
  if (profile_path.empty()) static_cast<void>(examples::spot_profile(model, tps, gpus, context));  // bad --tp: exit 2
  if (on_gpu && ex::cuda::device_count() == 0) {
    std::cerr << "sluice_measure_systems: no CUDA device\n";
    return 2;
  }
  examples::note_one_cpu("sluice_measure_systems", processes, on_gpu);

  const auto profiling = std::chrono::steady_clock::now();
  const sluice::compare::Options options =
      examples::compare_options(profile_path, model, tps, space, gpus, context, tokens, seed);
  if (progress && profile_path.empty())
    std::cerr << "sluice_measure_systems: profiled on the GPU in " << seconds_since(profiling) << " s\n";
  sluice::data::BatchSampler sampler(dataset, {.tokens_per_batch = tokens, .seed = seed});
  std::vector<std::vector<sluice::Sequence>> batches;
  for (int k = 0; k < iterations; ++k) batches.push_back(sampler.next().sequences);

  const std::string device = sluice::concat(on_gpu ? ex::cuda::device_name(0) : "host (float64)",
                                            processes.mpi ? ", one MPI process per rank" : "");
  int plans_run = 0;
  const auto runner = [&](const ex::Job& job) {
    const auto began = std::chrono::steady_clock::now();
    // The measurement needs the loss and the times: the gradients stay on the ranks.
    ex::RunReport report = [&] {
#ifdef SLUICE_EXECUTOR_HAVE_MPI
      // Every process takes part in every plan's run (those beyond its ranks wait) and gets the whole report.
      if (processes.mpi) return examples::run_own_rank(job, on_gpu, {.timeout_seconds = 60, .gradients = false});
#endif
      return on_gpu ? ex::cuda::run_local(job, {.warmup = 1, .serialize = true, .device = 0, .gradients = false})
                    : ex::host::run_local(job, {.gradients = false});
    }();
    if (progress && processes.rank == 0)
      std::cerr << "sluice_measure_systems: plan " << ++plans_run << " (" << job.pipelines.size()
                << " pipelines) ran in " << seconds_since(began) << " s\n";
    return report;
  };
  const ex::SystemsMeasurement measured = ex::measure_systems(options, model, dataset, batches, runner);
  if (processes.rank != 0) return 0;
  if (!json_path.empty())
    sluice::io::write_text_file(json_path, document(measured, model, options, lengths, device).dump(2) + "\n");
  std::cout << iterations << " iterations of " << lengths << " (" << tokens << " tokens, context " << context << ") on "
            << options.profile.gpus() << " GPUs of profile " << options.profile.name() << ", run on " << device << "\n"
            << table(measured);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_processes("sluice_measure_systems", argc, argv,
                                 [&](const examples::Processes& processes) { return run(argc, argv, processes); });
}
