// MPI around a program's run (sluice_executor/mpi.hpp).
#include "sluice_executor/mpi.hpp"

#include <exception>
#include <iostream>
#include <string>

#include "results.hpp"
#include "sluice/core/error.hpp"

namespace sluice::executor::mpi {

Session::Session(int& argc, char**& argv) {
  int provided = 0;
  detail::check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

Session::~Session() { MPI_Finalize(); }

int run_or_abort(std::string_view program, MPI_Comm comm, const std::function<int()>& body) {
  int process = 0;
  MPI_Comm_rank(comm, &process);
  int code = 1;
  std::string message;
  try {
    return body();
  } catch (const sluice::invalid_input& error) {
    message = error.what();
    code = 2;
  } catch (const std::exception& error) {
    message = error.what();
  }
  // One write, so that the lines of processes failing together do not interleave.
  std::cerr << sluice::concat(program, ": rank ", process, ": ", message, "\n") << std::flush;
  MPI_Abort(comm, code);
  return code;
}

}  // namespace sluice::executor::mpi
