// Profiles the executor's model on this machine's GPU: for each scheme <1, PP>, forward + backward of a stage of
// ceil(layers / PP) layers over a sweep of sequence lengths, fitted to T(l) = a·l² + b·l + c, with the activation
// memory constant; writes the sluice profile JSON (sluice.profile v1) that the planners read.
// Usage below (--help prints it).
#include <cstdint>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/samples.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/profiler.hpp"

namespace ex = sluice::executor;

namespace {

constexpr std::string_view usage =
    "usage: sluice_profile_gpu [--layers 8 --hidden 1024 --heads 8 --ffn 2816 --vocab 32000 --model-seed 1]\n"
    "                          [--pp 1,2,4] [--lengths 256,512,1024,2048,4096,8192] [--repetitions 5] [--device 0]\n"
    "                          [--gpus 8] [--ac] [--schemes S1,S2] [--out executor_profile.json] [--samples F]\n"
    "Profiles the executor's model on this GPU and writes a sluice profile (sluice.profile v1); --ac also profiles\n"
    "every PP with full recompute (schemes tp1ppNac); --schemes profiles the schemes named instead (tp2pp1,\n"
    "tp1cp4ringpp2ac, ...: a stage's TP·CP lanes serialized on this GPU, a sample their time over the lanes);\n"
    "--samples F also writes the measured samples as the CSV `sluice fit` reads (docs/profiling.md).\n"
    "Exit codes: 0 success, 2 bad input or no CUDA device (one line on stderr), 1 anything else.\n"
    "--help prints this; --version prints the version.\n";

int run(int argc, char** argv) {
  examples::Arguments arguments(argc, argv, {"ac"});
  if (examples::print_help_or_version(arguments, usage)) return 0;
  const ex::ModelConfig model = examples::model_from(arguments);
  const std::vector<int> pps = arguments.integers<int>("pp", {1, 2, 4});
  ex::cuda::ProfilerOptions options;
  options.lengths = arguments.integers<std::int64_t>("lengths", options.lengths);
  options.repetitions = arguments.integer<int>("repetitions", options.repetitions);
  options.device = arguments.integer<int>("device", 0);
  options.cluster_gpus = arguments.integer<std::int64_t>("gpus", 8);
  const std::string out = arguments.text("out", "executor_profile.json");
  const std::string samples = arguments.text("samples", "");
  const bool recompute = arguments.flag("ac");
  const std::string named = arguments.text("schemes", "");
  arguments.require_all_used();
  std::vector<sluice::Scheme> schemes;
  if (named.empty()) {
    schemes = ex::cuda::pipeline_schemes(pps, recompute);
  } else {
    for (const std::string_view name : sluice::command_line::comma_items(named))
      schemes.push_back(sluice::Scheme::parse(name));
  }
  ex::cuda::require_profilable(model, schemes, options);
  if (ex::cuda::device_count() == 0) {
    std::cerr << "sluice_profile_gpu: no CUDA device\n";
    return 2;
  }
  std::vector<ex::cuda::StageProfile> stages;
  const sluice::cost::Profile profile(ex::cuda::profile_gpu(model, schemes, options, &stages));
  sluice::io::write_document(out, profile);
  if (!samples.empty())
    sluice::io::write_text_file(samples, sluice::io::profile_samples_csv(ex::cuda::profile_samples(stages)));
  for (const sluice::cost::SchemeCost& scheme : profile.schemes()) {
    std::cout << scheme.scheme.name() << ": T(l) = " << scheme.latency.a() << " l^2 + " << scheme.latency.b() << " l + "
              << scheme.latency.c() << " s, MaxLen " << scheme.max_len;
    if (scheme.scheme.pp() > 1)
      std::cout << ", last stage's own work " << scheme.last_stage.b() << " tokens + " << scheme.last_stage.c() << " s";
    std::cout << "\n";
  }
  std::cout << "profile: " << out << "\n";
  if (!samples.empty()) std::cout << "samples: " << samples << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_program("sluice_profile_gpu", [&] { return run(argc, argv); });
}
