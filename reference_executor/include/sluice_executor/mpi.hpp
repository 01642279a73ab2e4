#pragma once
// A program's part in a run of one MPI process per rank (sluice::executor_mpi; docs/executor.md, "One process per
// rank"): MPI started and ended around it, and failures that end every process instead of hanging the others. The
// runs themselves: host::run_mpi (host/mpi.hpp) and cuda::run_nccl over MPI (cuda/mpi.hpp). Start the processes with
// any MPI launcher: mpirun, srun, or a hostfile across nodes.
#include <mpi.h>

#include <functional>
#include <string_view>

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

// Runs `body` and returns its exit code; on an exception prints "program: rank R: message" on stderr, one line,
// and calls MPI_Abort(comm, code) (1, or 2 for invalid_input), which ends every process of the run: a failure
// never hangs the others.
int run_or_abort(std::string_view program, MPI_Comm comm, const std::function<int()>& body);

}  // namespace sluice::executor::mpi
