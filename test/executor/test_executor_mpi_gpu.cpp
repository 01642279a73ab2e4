// The executor with one MPI process per rank on GPUs (sluice_executor/mpi_gpu.hpp), started by mpirun with one
// process per GPU of the node (N): seeded jobs of 1 and N ranks from the DynaPipe planner and schedule_pipeline
// (cyclic and 1F1B), each run by N processes over NCCL. Process 0's loss and gradients equal the one-process NCCL
// run's (cuda::run_nccl, a thread per rank) bit for bit, and the float64 host backend's within bf16 tolerance.
// Without a CUDA device it exits 77, which ctest reports as skipped.
#include <mpi.h>

#include <cmath>
#include <cstddef>
#include <iostream>
#include <string>
#include <vector>

#include "plan_fixtures.hpp"
#include "sluice/core/random.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/host/local.hpp"
#include "sluice_executor/mpi.hpp"
#include "sluice_executor/cuda/mpi.hpp"

namespace ex = sluice::executor;
using sluice::schedule::ScheduleKind;

namespace {

constexpr int skipped = 77;
// As test_executor_cuda: bf16 activations with fp32 accumulation against float64.
constexpr double loss_tolerance = 1e-2;
constexpr double gradient_tolerance = 5e-2;

std::vector<std::pair<ex::Job, std::string>> jobs(int processes) {
  const ex::ModelConfig model = fixtures::gpu_model();
  sluice::Rng rng(13);
  std::vector<std::pair<ex::Job, std::string>> result;
  std::vector<int> sizes{1};
  if (processes > 1) sizes.push_back(processes);
  for (const int ranks : sizes) {
    const std::vector<sluice::Sequence> batch = fixtures::random_batch(rng);
    const auto named = [&](const char* kind) {
      return sluice::concat(kind, ", ", ranks, ranks == 1 ? " rank" : " ranks");
    };
    result.emplace_back(fixtures::single_pipeline_job(model, batch, rng(), ranks, ScheduleKind::cyclic),
                        named("one pipeline cyclic"));
    result.emplace_back(fixtures::single_pipeline_job(model, batch, rng(), ranks, ScheduleKind::one_f_one_b),
                        named("one pipeline 1f1b"));
    result.emplace_back(fixtures::dynapipe_job(model, batch, rng(), ranks, 1, sluice::microbatch::Layout::packed,
                                               ScheduleKind::one_f_one_b),
                        named("dynapipe packed"));
    if (ranks % 2 == 0)
      result.emplace_back(fixtures::dynapipe_job(model, batch, rng(), ranks / 2, 2, sluice::microbatch::Layout::padded,
                                                 ScheduleKind::cyclic),
                          sluice::concat("dynapipe padded, 2 replicas of ", ranks / 2, " stages"));
  }
  return result;
}

bool close_to(const ex::ModelResult& gpu, const ex::ModelResult& host) {
  bool close = std::abs(gpu.loss - host.loss) <= loss_tolerance * std::abs(host.loss);
  for (std::size_t t = 0; t < host.gradients.size(); ++t)
    close = close && fixtures::relative_difference(gpu.gradients[t], host.gradients[t]) <= gradient_tolerance;
  return close;
}

int equal_runs(int process, int processes) {
  int failures = 0;
  for (const auto& [job, name] : jobs(processes)) {
    const ex::RunReport report = ex::cuda::run_nccl(job, MPI_COMM_WORLD);
    if (process != 0) continue;
    const ex::RunReport alone = ex::cuda::run_nccl(job);
    const ex::ModelResult host = ex::host::run_local(job).result;
    const bool same = report.result.loss == alone.result.loss && report.result.gradients == alone.result.gradients;
    const bool close = close_to(report.result, host);
    std::cout << name << ": loss " << report.result.loss << " (one process " << alone.result.loss << ", float64 "
              << host.loss << ")" << (same ? ", equal bit for bit" : ", DIFFERS from the one-process run")
              << (close ? "" : ", NOT within bf16 tolerance of float64") << ", makespan " << report.makespan << " s on "
              << report.device << "\n";
    if (!same || !close) ++failures;
  }
  MPI_Bcast(&failures, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  ex::mpi::Session session(argc, argv);
  return ex::mpi::run_or_abort("test_executor_mpi_gpu", MPI_COMM_WORLD, [&] {
    int devices = ex::cuda::device_count();
    MPI_Allreduce(MPI_IN_PLACE, &devices, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (devices == 0) {
      if (session.rank() == 0) std::cout << "skipped: no CUDA device\n";
      return skipped;
    }
    return equal_runs(session.rank(), session.size());
  });
}
