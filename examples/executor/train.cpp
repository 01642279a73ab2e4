// Trains the executor's model for --iterations steps on batches of a length dataset, as Hydraulis trains: each
// step runs the strategy the sluice plan chose for its batch (proposed candidates and flex CP domains, as
// `sluice simulate` plans), pulls the parameters from the fixed sharded layout into that strategy's placement,
// pushes the gradients back and steps Adam on every owned segment. Prints each step's strategy, loss, compute
// makespan and layout move, measured beside predicted. Started by mpirun or srun with one process per rank of the
// layout (--gpus), each process holds its rank. Usage below (--help prints it).
#include <chrono>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"
#include "processes.hpp"
#include "profile_source.hpp"
#include "sluice/compare/sluice.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/json.hpp"
#include "sluice_executor/training.hpp"

namespace ex = sluice::executor;

namespace {

constexpr std::string_view usage =
    "usage: sluice_train --profile FILE|NAME [--layers 4 --hidden 32 --heads 2 --ffn 64 --vocab 64 --model-seed 1]\n"
    "                    [--lengths man-pages] [--iterations 5] [--tokens 2048] [--context 256] [--gpus 4]\n"
    "                    [--seed 0] [--cp C1,C2 [--cp-kinds K]] [--ac] [--learning-rate 0.001]\n"
    "                    [--checkpoint FILE] [--resume FILE] [--timeout 60] [--json FILE]\n"
    "Trains the executor's model on the float64 host backend for --iterations steps of batches drawn from a length\n"
    "dataset (truncated to --context): each step runs the strategy the sluice plan chose for its batch, pulling the\n"
    "parameters from the optimizer states sharded over the --gpus ranks into its placement and pushing the\n"
    "gradients back, then Adam (lr --learning-rate, betas 0.9 and 0.999, eps 1e-8) on every owned segment. Prints\n"
    "each step's strategy, loss, compute makespan and layout move, measured beside predicted. --checkpoint FILE\n"
    "writes the sharded states at the end (sluice.training_checkpoint); --resume FILE starts from one, on the\n"
    "batches after its steps. --json FILE writes the steps as a sluice.training_run document. Started by mpirun or\n"
    "srun with --gpus processes, process r holds rank r.\n"
    "Exit codes: 0 success, 2 bad input (one line on stderr), 1 anything else.\n"
    "--help prints this; --version prints the version.\n";

// The small decoder of the host backend's tests.
constexpr ex::ModelConfig host_decoder{.layers = 4, .hidden = 32, .heads = 2, .ffn = 64, .vocab = 64};

sluice::io::json document(const std::vector<ex::TrainedIteration>& steps, std::int64_t first_step,
                          const ex::ModelConfig& model, const sluice::compare::Options& options,
                          const std::string& lengths) {
  sluice::io::json iterations = sluice::io::json::array();
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const ex::TrainedIteration& step = steps[k];
    iterations.push_back({{"step", first_step + static_cast<std::int64_t>(k)},
                          {"strategy", step.strategy},
                          {"loss", step.loss},
                          {"predicted_seconds", step.predicted},
                          {"measured_seconds", step.measured},
                          {"pull_seconds", step.pull_seconds},
                          {"push_seconds", step.push_seconds},
                          {"predicted_pull_seconds", step.predicted_move.pull.seconds},
                          {"predicted_reduce_scatter_seconds", step.predicted_move.reduce_scatter.seconds},
                          {"predicted_push_seconds", step.predicted_move.push.seconds}});
  }
  sluice::io::json out = {{"format", "sluice.training_run"}, {"version", 1}};
  out.update(examples::run_description(model, options, lengths));
  out["iterations"] = std::move(iterations);
  return out;
}

int run(int argc, char** argv, const examples::Processes& processes) {
  examples::Arguments arguments(argc, argv, {"ac"});
  if (examples::print_help_or_version(arguments, usage)) return 0;
  const ex::ModelConfig model = examples::model_from(arguments, host_decoder);
  const std::string lengths = arguments.text("lengths", std::string(sluice::io::default_lengths));
  const auto iterations = arguments.integer<int>("iterations", 5);
  const auto tokens = arguments.integer<std::int64_t>("tokens", 2048);
  const auto context = arguments.integer<std::int64_t>("context", 256);
  const auto gpus = arguments.integer<std::int64_t>("gpus", 4);
  const auto seed = arguments.integer<std::uint64_t>("seed", 0);
  const std::string profile_path = arguments.text("profile", "");
  const std::string learning_rate = arguments.text("learning-rate", "0.001");
  const std::string checkpoint_path = arguments.text("checkpoint", "");
  const std::string resume_path = arguments.text("resume", "");
  const auto timeout = arguments.integer<int>("timeout", 60);
  const std::string json_path = arguments.text("json", "");
  const sluice::cost::SchemeSpace space = examples::scheme_space_from(arguments);
  arguments.require_all_used();
  sluice::require(!profile_path.empty(), "give --profile FILE|NAME");
  sluice::require(iterations >= 1 && iterations <= 10000, "--iterations must be in [1, 10000], got ", iterations);
  sluice::require(tokens >= 1, "--tokens must be >= 1, got ", tokens);
  sluice::require(context >= 1, "--context must be >= 1, got ", context);
  sluice::require(gpus >= 1 && gpus <= 1024, "--gpus must be in [1, 1024], got ", gpus);
  sluice::require(timeout >= 1 && timeout <= 86400, "--timeout must be in [1, 86400] seconds, got ", timeout);
  const auto rate = sluice::command_line::parse_number<double>(learning_rate);
  sluice::require(rate.has_value(), "option --learning-rate: '", learning_rate, "' is not a number");
  sluice::require(!processes.mpi || processes.world == gpus, "one process per rank of the layout: --gpus ", gpus,
                  " needs ", gpus, " processes, the launcher started ", processes.world);

  ex::TrainingOptions training;
  training.adam.learning_rate = *rate;
  training.run.timeout_seconds = timeout;
  const std::optional<ex::TrainingCheckpoint> resumed =
      resume_path.empty() ? std::nullopt
                          : std::optional(sluice::io::read_document<ex::TrainingCheckpoint>(resume_path));
  sluice::require(!resumed || resumed->model == model, "--resume ", resume_path,
                  ": the checkpoint is of another model than --layers, --hidden, --heads, --ffn, --vocab and "
                  "--model-seed give");
  if (resumed) training.adam = resumed->adam;

  const sluice::data::LengthDataset dataset =
      sluice::data::LengthDataset::load(sluice::io::resolve_data_file(lengths, "lengths")).truncated(context);
  const sluice::compare::Options options =
      examples::compare_options(profile_path, model, {1}, space, gpus, context, tokens, seed);
  // The sluice plan as `sluice simulate` makes it: proposed candidates, and the flex CP domains it offers.
  const sluice::compare::SluiceCandidates candidates = sluice::compare::propose_candidates(options, dataset);
  if (candidates.failure) sluice::fail(*candidates.failure);
  const sluice::plan::OfferedFlex flex = sluice::plan::offered_flex_domains(
      options.profile, sluice::compare::flex_scope(options), sluice::compare::planner_options(options));
  const sluice::plan::IterationPlanner planner(options.profile, candidates.strategies,
                                               sluice::compare::planner_options(options), flex.domains);

  std::unique_ptr<ex::Cohort> cohort = std::make_unique<ex::LocalCohort>();
#ifdef SLUICE_EXECUTOR_HAVE_MPI
  if (processes.mpi) cohort = std::make_unique<ex::host::MpiCohort>(MPI_COMM_WORLD, timeout);
#endif
  ex::Trainer trainer = resumed ? ex::Trainer(*resumed, gpus, training, std::move(cohort))
                                : ex::Trainer(model, gpus, training, std::move(cohort));
  sluice::data::BatchSampler sampler(dataset, {.tokens_per_batch = tokens, .seed = seed});
  for (std::int64_t k = 0; k < trainer.steps(); ++k) static_cast<void>(sampler.next());  // the steps already taken

  std::vector<ex::TrainedIteration> steps;
  const std::int64_t first_step = trainer.steps();
  for (int k = 0; k < iterations; ++k) {
    const std::vector<sluice::Sequence> batch = sampler.next().sequences;
    const sluice::plan::SimulatedIteration plan = planner.plan(batch);
    const ex::PlacedIteration placed = ex::place_iteration(
        model, ex::make_tokens(batch, model.vocab, seed + static_cast<std::uint64_t>(trainer.steps())), plan,
        options.profile, flex.domains.get());
    steps.push_back(trainer.step(placed));
    if (processes.rank != 0) continue;
    const ex::TrainedIteration& step = steps.back();
    std::cout << std::fixed << std::setprecision(3) << "step " << first_step + k << ": " << step.strategy << ", loss "
              << std::setprecision(6) << step.loss << std::setprecision(3) << ", compute predicted "
              << 1e3 * step.predicted << " ms measured " << 1e3 * step.measured << " ms, pull measured "
              << 1e3 * step.pull_seconds << " ms predicted " << 1e3 * step.predicted_move.pull.seconds
              << " ms, push measured " << 1e3 * step.push_seconds << " ms predicted "
              << 1e3 * (step.predicted_move.reduce_scatter.seconds + step.predicted_move.push.seconds) << " ms\n";
  }
  // Every process takes part in gathering the states; process 0 writes.
  const std::optional<ex::TrainingCheckpoint> checkpoint =
      checkpoint_path.empty() ? std::nullopt : std::optional(trainer.checkpoint());
  if (processes.rank != 0) return 0;
  if (checkpoint) sluice::io::write_document(checkpoint_path, *checkpoint);
  if (!json_path.empty())
    sluice::io::write_text_file(json_path, document(steps, first_step, model, options, lengths).dump(2) + "\n");
  std::cout << "(measured on the float64 host backend" << (processes.mpi ? ", one MPI process per rank" : "")
            << "; the layout move predicted on the cost model's cluster)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_processes("sluice_train", argc, argv,
                                 [&](const examples::Processes& processes) { return run(argc, argv, processes); });
}
