#pragma once
// The executor across processes: one MPI process per rank, each executing only its rank's instruction list through
// the one interpreter (schedule::Interpreter), the ranks' activations and gradients moving by MPI point-to-point
// messages (sluice::executor_mpi; docs/executor.md, "One process per rank"). Start the processes with any MPI
// launcher: mpirun, srun, or a hostfile across nodes.
#include <mpi.h>

#include <functional>
#include <string_view>

#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"

namespace sluice::executor::mpi {

// MPI_Init_thread and MPI_Finalize around a program's run; MPI errors on the world communicator return instead of
// aborting, so that they become exceptions with a message.
class Session {
public:
  Session(int& argc, char**& argv);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }

private:
  int rank_ = 0;
  int size_ = 1;
};

struct Options {
  // A wait for a message that lasts longer ends the run with an error naming the rank and the instruction; the
  // limit grows by a tenth per rank, so that of ranks waiting on each other the first one reports.
  double timeout_seconds = 60;
  // JobChecks::structure meets a broken plan as the processes run it; JobChecks::all rejects it first.
  JobChecks checks = JobChecks::all;
};

// Collective over `comm`, whose size is at least the job's rank count: process r < ranks runs global rank r on the
// float64 host backend, the other processes only wait for the end. Process 0 gathers the ranks' results and
// returns the whole run: the loss and gradients, added in the order a one-process run adds them (so they are equal
// bit for bit), and every rank's instruction times, each on its own process's clock from a common barrier. The
// other processes return the loss and the times, without the gradients. A failure on a rank throws there, naming
// the rank and the instruction; run it inside run_or_abort so that every process ends.
RunReport run_on_host(const Job& job, MPI_Comm comm, const Options& options = {});

// Runs `body` and returns its exit code; on an exception prints "program: rank R: message" on stderr, one line,
// and calls MPI_Abort(comm, code) (1, or 2 for invalid_input), which ends every process of the run: a failure
// never hangs the others.
int run_or_abort(std::string_view program, MPI_Comm comm, const std::function<int()>& body);

}  // namespace sluice::executor::mpi
