// The host backend with one MPI process per rank (sluice_executor/host/mpi.hpp), started by mpirun with 8 processes:
//   - 60 seeded jobs from every planner (fixtures::seeded_job: Hydraulis, the sluice plan, DynaPipe, Megatron-LM-style
//     packing, FlexSP's and dynamic CP's flex domains, single pipelines) with TP, CP of every kind and recompute,
//     each of 2 to 8 ranks and run by as many processes: process 0's loss and gradients equal the one-process run's
//     (a thread per rank) bit for bit, and the unpacked reference's within 1e-12; the other processes return the
//     same loss and every rank's times, no gradients; asked for the loss alone, every process returns it, no
//     gradients;
//   - five steps of training with the strategy changing every step (sluice_executor/training.hpp, host::MpiCohort):
//     every loss and the final parameters equal the one-process trainer's bit for bit and the single-device
//     reference's within 1e-10;
//   - `--broken KIND` (2 processes, 8 for push_fails): a plan broken as KIND says (missing_receive, mismatched_size,
//     cycle), run with only its structure checked, or a training step whose push fails on rank 1 (push_fails), ends
//     every process with an error naming the rank (mpi_broken.cmake checks it).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plan_fixtures.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice_executor/host/local.hpp"
#include "sluice_executor/host/mpi.hpp"
#include "sluice_executor/mpi.hpp"
#include "sluice_executor/reference_run.hpp"
#include "sluice_executor/training.hpp"

namespace ex = sluice::executor;
using sluice::schedule::InstructionKind;
using sluice::schedule::ScheduleKind;

namespace {

constexpr int job_count = 60;
constexpr double float64_tolerance = 1e-12;

bool same_bits(const ex::ModelResult& a, const ex::ModelResult& b) {
  return a.loss == b.loss && a.gradients == b.gradients;
}

int equal_runs(int process, int processes) {
  sluice::Rng rng(7);
  int failures = 0;
  std::map<std::string, int> planners;
  std::map<int, int> sizes;
  for (int made = 0, k = 0; made < job_count; ++k) {
    auto [job, planner] = fixtures::seeded_job(k, rng);
    const int ranks = fixtures::rank_count(job);
    if (ranks < 2 || ranks > processes) continue;  // one process is not a multi-process run
    ++made;
    ++planners[planner];
    ++sizes[ranks];
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, process < ranks ? 0 : MPI_UNDEFINED, process, &comm);
    if (comm == MPI_COMM_NULL) continue;
    const ex::RunReport report = ex::host::run_mpi(job, comm);
    if (made % 6 == 1) {  // asked for the loss alone: the same loss, and no process sends or returns gradients
      const ex::RunReport loss_only = ex::host::run_mpi(job, comm, {.gradients = false});
      if (loss_only.result.loss != report.result.loss || !loss_only.result.gradients.empty()) {
        ++failures;
        std::cerr << "FAIL: job " << made - 1 << ": process " << process << "'s run for the loss alone differs\n";
      }
    }
    // Every process has the loss and the ranks' times; the gradients stay with process 0, which writes them.
    double loss = report.result.loss;
    MPI_Bcast(&loss, 1, MPI_DOUBLE, 0, comm);
    MPI_Comm_free(&comm);
    if (process != 0) {
      if (loss != report.result.loss || !report.result.gradients.empty() ||
          report.instructions.size() != static_cast<std::size_t>(ranks)) {
        ++failures;
        std::cerr << "FAIL: job " << made - 1 << ": process " << process << " returns another run than process 0's\n";
      }
      continue;
    }
    const ex::RunReport alone = ex::host::run_local(job);
    const bool close =
        fixtures::worst_difference(report.result, ex::run_unpacked(job.model, job.sequences)) <= float64_tolerance;
    if (!same_bits(report.result, alone.result) || !close || report.instructions.size() != alone.instructions.size()) {
      ++failures;
      std::cerr << "FAIL: job " << made - 1 << " (" << planner << ", " << ranks
                << " ranks): " << (same_bits(report.result, alone.result) ? "" : "differs from the one-process run; ")
                << (close ? "" : "differs from the unpacked reference; ") << "\n";
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (process == 0) {
    std::cout << job_count << " jobs by";
    for (const auto& [name, count] : planners) std::cout << " " << name << " ×" << count;
    std::cout << "; ranks";
    for (const auto& [ranks, count] : sizes) std::cout << " " << ranks << " ×" << count;
    std::cout << "\n" << (failures == 0 ? "every run equals the one-process run bit for bit" : "runs differ") << "\n";
  }
  return failures == 0 ? 0 : 1;
}

constexpr double training_tolerance = 1e-10;

ex::TrainingOptions training_options() {
  ex::TrainingOptions options;
  options.adam.learning_rate = 1e-2;
  return options;
}

// Five steps of training with the strategy changing every step, one MPI process per rank of an 8-rank layout: every
// step's loss and the final parameters equal a one-process run's bit for bit (on process 0) and the single-device
// reference trainer's within 1e-10.
int equal_training(int process, int processes) {
  if (processes != 8) throw sluice::invalid_input("the training check needs 8 processes, one per rank of its layout");
  sluice::Rng rng(17);
  const ex::ModelConfig model = fixtures::training_model(rng);
  std::vector<std::vector<ex::SequenceTokens>> batches;
  const std::vector<ex::PlacedIteration> steps = fixtures::training_steps(model, rng, 5, batches);
  ex::Trainer distributed(model, 8, training_options(), std::make_unique<ex::host::MpiCohort>(MPI_COMM_WORLD, 60));
  std::optional<ex::Trainer> alone;
  std::optional<ex::ReferenceTrainer> reference;
  if (process == 0) {
    alone.emplace(model, 8, training_options());
    reference.emplace(model, training_options().adam);
  }
  int failures = 0;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const ex::TrainedIteration result = distributed.step(steps[k]);
    if (process != 0) continue;
    const double one_process = alone->step(steps[k]).loss;
    const double expected = reference->step(batches[k]);
    if (result.loss != one_process || std::abs(result.loss - expected) > training_tolerance * std::abs(expected)) {
      ++failures;
      std::cerr << "FAIL: training step " << k << " (" << result.strategy << "): loss " << result.loss
                << ", one process " << one_process << ", reference " << expected << "\n";
    }
  }
  const std::vector<std::vector<double>> parameters = distributed.parameters();
  if (process == 0) {
    double worst = 0;
    for (std::size_t t = 0; t < parameters.size(); ++t)
      worst = std::max(worst, fixtures::relative_difference(parameters[t], reference->parameters()[t]));
    if (parameters != alone->parameters() || worst > training_tolerance) {
      ++failures;
      std::cerr << "FAIL: training: the final parameters differ from the one-process run's"
                << (worst > training_tolerance ? " and the reference's" : "") << "\n";
    }
    std::cout << "training: " << steps.size() << " steps, a new strategy each, equal the one-process run bit for bit\n";
  }
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return failures == 0 ? 0 : 1;
}

// Fails on process 1 in the middle of the push (the pull moves five groups, the push ten phases).
class FailingCohort final : public ex::host::MpiCohort {
public:
  using MpiCohort::MpiCohort;
  ex::Mover& mover() override { return failing_; }

private:
  class Failing final : public ex::Mover {
  public:
    explicit Failing(ex::Mover& inner) : inner_(inner) {}
    void move(std::span<const ex::Route> routes, const std::function<std::vector<double>(std::size_t)>& fill,
              const std::function<void(std::size_t, std::vector<double>)>& apply) override {
      int process = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &process);
      if (++moves_ == 8 && process == 1) throw std::runtime_error("injected failure in the middle of the push");
      inner_.move(routes, fill, apply);
    }

  private:
    ex::Mover& inner_;
    int moves_ = 0;
  };
  Failing failing_{MpiCohort::mover()};
};

int failing_push() {
  sluice::Rng rng(17);
  const ex::ModelConfig model = fixtures::training_model(rng);
  std::vector<std::vector<ex::SequenceTokens>> batches;
  const std::vector<ex::PlacedIteration> steps = fixtures::training_steps(model, rng, 1, batches);
  ex::TrainingOptions options = training_options();
  options.run.timeout_seconds = 5;
  int processes = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  ex::Trainer trainer(model, processes, options, std::make_unique<FailingCohort>(MPI_COMM_WORLD, 5));
  trainer.step(steps.front());
  std::cerr << "test_executor_mpi: the push with a failing rank ran to its end\n";
  return 1;
}

// The position of rank `stage`'s first instruction of `kind` for micro-batch 0.
std::size_t find(const std::vector<sluice::schedule::Instruction>& list, InstructionKind kind) {
  const auto it = std::ranges::find_if(list, [&](const auto& in) { return in.kind == kind && in.micro_batch == 0; });
  if (it == list.end()) throw std::logic_error("broken plan: the plan lacks the instruction to break");
  return static_cast<std::size_t>(it - list.begin());
}

// A two-stage pipeline of one micro-batch, broken as `kind` says (peer_exits: not broken).
ex::Job broken_job(std::string_view kind) {
  sluice::Rng rng(11);
  const ex::ModelConfig model = fixtures::random_model(rng);
  const std::vector<sluice::Sequence> batch{sluice::Sequence(0, 12)};
  ex::Job job = fixtures::single_pipeline_job(model, batch, 3, 2, ScheduleKind::one_f_one_b);
  auto& first = job.pipelines[0].plan.ranks[0];
  auto& second = job.pipelines[0].plan.ranks[1];
  if (kind == "missing_receive") {
    // Stage 1 never receives micro-batch 0's activation, so its forward reads an empty slot.
    const std::size_t start = find(second, InstructionKind::recv_act_start);
    second.erase(second.begin() + static_cast<std::ptrdiff_t>(find(second, InstructionKind::recv_act_wait)));
    second.erase(second.begin() + static_cast<std::ptrdiff_t>(start));
  } else if (kind == "mismatched_size") {
    // Stage 0 sends one row fewer than stage 1 receives.
    --first[find(first, InstructionKind::send_act_start)].shape.rows;
  } else if (kind == "cycle") {
    // Stage 0 waits for the gradient before it sends the activation stage 1 needs to compute it.
    const std::size_t start = find(first, InstructionKind::send_act_start);
    const std::size_t wait = find(first, InstructionKind::send_act_wait);
    const sluice::schedule::Instruction send = first[start], sent = first[wait];
    first.erase(first.begin() + static_cast<std::ptrdiff_t>(wait));
    first.erase(first.begin() + static_cast<std::ptrdiff_t>(start));
    const std::size_t received = find(first, InstructionKind::recv_grad_wait);
    first.insert(first.begin() + static_cast<std::ptrdiff_t>(received) + 1, {send, sent});
  } else if (kind != "peer_exits") {
    throw sluice::invalid_input(
        sluice::concat("--broken: expected missing_receive, mismatched_size, cycle or "
                       "peer_exits, got '",
                       kind, "'"));
  }
  return job;
}

int broken(std::string_view kind) {
  if (kind == "peer_exits") {
    // Rank 1 dies before its list, so rank 0 waits for its messages: the launcher must end the run.
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 1) std::_Exit(3);
  }
  const ex::Job job = broken_job(kind);
  (void)ex::host::run_mpi(job, MPI_COMM_WORLD, {.timeout_seconds = 5, .checks = ex::JobChecks::structure});
  std::cerr << "test_executor_mpi: the broken plan (" << kind << ") ran to its end\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  ex::mpi::Session session(argc, argv);
  return ex::mpi::run_or_abort("test_executor_mpi", MPI_COMM_WORLD, [&] {
    if (argc == 3 && std::string_view(argv[1]) == "--broken")
      return std::string_view(argv[2]) == "push_fails" ? failing_push() : broken(argv[2]);
    const int runs = equal_runs(session.rank(), session.size());
    return equal_training(session.rank(), session.size()) == 0 ? runs : 1;
  });
}
