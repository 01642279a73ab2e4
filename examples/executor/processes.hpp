#pragma once
// An executor program started as one process of a run of one process per rank (by mpirun or srun, which set the
// environment sluice_executor/launch.hpp reads) takes part in that run over MPI (sluice::executor_mpi); started
// alone, it runs every rank itself.
#include <iostream>
#include <optional>
#include <string_view>
#include <thread>

#include "options.hpp"
#include "sluice/core/error.hpp"
#include "sluice_executor/launch.hpp"

#ifdef SLUICE_EXECUTOR_HAVE_MPI
#include "sluice_executor/host/mpi.hpp"
#include "sluice_executor/mpi.hpp"
#endif
#ifdef SLUICE_EXECUTOR_MPI_GPU
#include "sluice_executor/cuda/mpi.hpp"
#endif

namespace examples {

struct Processes {
  int rank = 0;
  int world = 1;
  bool mpi = false;  // one process of a multi-process run: rank 0 reports, every process runs its rank
};

// Runs `body(processes)`: as one process of the launcher's run when started with more than one process (MPI
// initialised around it; a failure prints one line naming the rank and ends every process, MPI_Abort), else alone
// with run_program's exit codes.
template <class Body>
int run_processes(std::string_view program, int& argc, char**& argv, Body body) {
  std::optional<sluice::executor::LaunchEnvironment> launched;
  try {
    launched = sluice::executor::launch_environment();
  } catch (const sluice::invalid_input& error) {
    std::cerr << program << ": " << error.what() << "\n";
    return 2;
  }
  if (!launched || launched->world == 1) return run_program(program, [&] { return body(Processes{}); });
  if (launched->launcher == "torchrun") {
    std::cerr << program << ": started by torchrun as one of " << launched->world
              << " processes; they talk over MPI, so start them with mpirun or srun\n";
    return 2;
  }
#ifdef SLUICE_EXECUTOR_HAVE_MPI
  const sluice::executor::mpi::Session session(argc, argv);
  return sluice::executor::mpi::run_or_abort(program, MPI_COMM_WORLD, [&] {
    sluice::require(session.size() == launched->world, "the launcher (", launched->launcher, ") started ",
                    launched->world, " processes, MPI sees ", session.size());
    return body(Processes{session.rank(), session.size(), true});
  });
#else
  static_cast<void>(argc);
  static_cast<void>(argv);
  std::cerr << program << ": started as one of " << launched->world
            << " processes, but built without MPI (SLUICE_BUILD_MPI is off)\n";
  return 2;
#endif
}

// Raises invalid_input when this build cannot run the backend one process per rank.
inline void require_process_backend(const Processes& processes, bool on_gpu) {
#ifdef SLUICE_EXECUTOR_MPI_GPU
  static_cast<void>(processes);
  static_cast<void>(on_gpu);
#else
  sluice::require(!processes.mpi || !on_gpu,
                  "this build runs one process per rank on the host backend only "
                  "(--backend host): it has no NCCL");
#endif
}

// A GPU run draws the model's initial parameters on every CPU this process may use (tens of seconds on one core for
// LLaMA-7B-shaped layers, per plan); a launcher that bound it to one core makes that the run's longest part, so
// process 0 says so once.
inline void note_one_cpu(std::string_view program, const Processes& processes, bool on_gpu) {
  const unsigned present = std::thread::hardware_concurrency();
  if (!on_gpu || processes.rank != 0 || sluice::executor::usable_cpus() > 1 || present <= 1) return;
  std::cerr << program << ": this process may use 1 of the machine's " << present << " CPUs (its launcher or "
            << "taskset bound it), and draws the model's initial parameters on it alone: under mpirun, "
            << "--bind-to none lets it use them all\n";
}

#ifdef SLUICE_EXECUTOR_HAVE_MPI
// This process's part of a run of one process per rank over MPI_COMM_WORLD: its rank on one GPU of its node over
// NCCL, or on the float64 host backend. Process 0 returns the whole run, the others its loss and times.
inline sluice::executor::RunReport run_own_rank(const sluice::executor::Job& job, bool on_gpu,
                                                const sluice::executor::RunOptions& options) {
#ifdef SLUICE_EXECUTOR_MPI_GPU
  if (on_gpu) return sluice::executor::cuda::run_nccl(job, MPI_COMM_WORLD, options);
#endif
  sluice::require(!on_gpu, "this build runs one process per rank on the host backend only");
  return sluice::executor::host::run_mpi(job, MPI_COMM_WORLD, options);
}
#endif

}  // namespace examples
