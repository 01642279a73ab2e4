// One MPI process per rank on the float64 host backend (sluice_executor/mpi.hpp).
#include "sluice_executor/mpi.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice_executor/host_backend.hpp"
#include "mpi_results.hpp"

namespace sluice::executor::mpi {

using detail::check;
using detail::transport_error;

namespace {

// Messages between two ranks pair in issue order, as NCCL pairs them: MPI never reorders messages of one tag
// between two processes.
constexpr int data_tag = 1;

// Moves slots by MPI_Isend/MPI_Irecv. Every message carries, after the tensor, its kind and micro-batch, so that a
// send that pairs with the receive of another tensor is caught where NCCL would silently corrupt the data.
class Transport {
public:
  static constexpr bool pairs_itself = true;

  Transport(host::Backend& backend, const JobLayout& layout, MPI_Comm comm, double timeout)
      : backend_(backend), layout_(layout), comm_(comm), timeout_(timeout) {}

  void post(const Transfer& transfer) {
    if (static_cast<std::size_t>(transfer.index) >= operations_.size())
      operations_.resize(static_cast<std::size_t>(transfer.index) + 1);
    Operation& operation = operations_[static_cast<std::size_t>(transfer.index)];
    const std::int64_t count = transfer.shape.rows * transfer.shape.cols;
    const std::int64_t capacity = layout_.slot_elements[static_cast<std::size_t>(rank_info(transfer).pipeline)];
    if (transfer.shape.rows < 0 || transfer.shape.cols < 0 || count > capacity)
      throw transport_error(sluice::concat("the ", describe(transfer), " has shape [", transfer.shape.rows, ", ",
                                           transfer.shape.cols, "], larger than its slot (", capacity, " values)"));
    operation.buffer.assign(static_cast<std::size_t>(count) + 2, 0.0);
    if (transfer.send) {
      const std::vector<double>& data = backend_.data(transfer.rank, transfer.slot);
      std::copy_n(data.begin(), count, operation.buffer.begin());
      operation.buffer[static_cast<std::size_t>(count)] = transfer.activation ? 1 : 0;
      operation.buffer[static_cast<std::size_t>(count) + 1] = transfer.micro_batch;
      check(MPI_Isend(operation.buffer.data(), static_cast<int>(operation.buffer.size()), MPI_DOUBLE, transfer.peer,
                      data_tag, comm_, &operation.request),
            "MPI_Isend");
    } else {
      check(MPI_Irecv(operation.buffer.data(), static_cast<int>(operation.buffer.size()), MPI_DOUBLE, transfer.peer,
                      data_tag, comm_, &operation.request),
            "MPI_Irecv");
    }
  }

  void wait(const Transfer& transfer) {
    Operation& operation = operations_[static_cast<std::size_t>(transfer.index)];
    MPI_Status status{};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    for (int done = 0;;) {
      const int code = MPI_Test(&operation.request, &done, &status);
      if (code != MPI_SUCCESS) {
        // A message longer than the receive: the sender's tensor is not the one expected.
        if (!transfer.send)
          throw transport_error(sluice::concat("mismatch: the ", describe(transfer),
                                               " met a longer message from rank ", transfer.peer));
        check(code, "MPI_Test");
      }
      if (done) break;
      if (std::chrono::steady_clock::now() > deadline)
        throw transport_error(sluice::concat("timed out after ", timeout_, " s waiting for the ", describe(transfer),
                                             " (a missing or mismatched operation on rank ", transfer.peer,
                                             ", or a cycle of waiting ranks)"));
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (!transfer.send) {
      int received = 0;
      check(MPI_Get_count(&status, MPI_DOUBLE, &received), "MPI_Get_count");
      const std::size_t count = operation.buffer.size() - 2;
      if (static_cast<std::size_t>(received) != operation.buffer.size() ||
          operation.buffer[count] != (transfer.activation ? 1 : 0) ||
          operation.buffer[count + 1] != transfer.micro_batch)
        throw transport_error(sluice::concat("mismatch: the ", describe(transfer), " got ",
                                             received >= 2 ? received - 2 : 0, " values of ",
                                             received >= 2 ? describe_received(operation, received) : "no tensor",
                                             ", expected ", count));
      std::copy_n(operation.buffer.begin(), count, backend_.data(transfer.rank, transfer.slot).begin());
    }
    operation.buffer = {};
  }

private:
  struct Operation {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<double> buffer;  // the tensor, then its kind (1: activation) and micro-batch
  };

  [[nodiscard]] const RankInfo& rank_info(const Transfer& transfer) const {
    return layout_.ranks[static_cast<std::size_t>(transfer.rank)];
  }

  static std::string describe(const Transfer& transfer) {
    return sluice::concat(transfer.send ? "send of " : "receive of ", transfer.activation ? "activation" : "gradient",
                          " micro-batch ", transfer.micro_batch, transfer.send ? " to" : " from", " rank ",
                          transfer.peer);
  }

  static std::string describe_received(const Operation& operation, int received) {
    const auto end = static_cast<std::size_t>(received);
    return sluice::concat(operation.buffer[end - 2] == 1 ? "activation" : "gradient", " micro-batch ",
                          operation.buffer[end - 1]);
  }

  host::Backend& backend_;
  const JobLayout& layout_;
  MPI_Comm comm_;
  double timeout_;
  std::vector<Operation> operations_;  // by the rank's transfer index
};

}  // namespace

Session::Session(int& argc, char**& argv) {
  int provided = 0;
  check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

Session::~Session() { MPI_Finalize(); }

RunReport run_on_host(const Job& job, MPI_Comm comm, const Options& options) {
  sluice::require(options.timeout_seconds > 0, "mpi: timeout_seconds must be > 0, got ", options.timeout_seconds);
  int process = 0, processes = 0;
  MPI_Comm_rank(comm, &process);
  MPI_Comm_size(comm, &processes);
  const JobLayout job_layout = layout(job, options.checks);
  const int ranks = static_cast<int>(job_layout.ranks.size());
  sluice::require(processes >= ranks, "mpi: the job has ", ranks, " ranks, the communicator ", processes,
                  " processes");
  detail::RankValues own;
  if (process < ranks) {
    const int own_rank[] = {process};
    host::Backend backend(job, job_layout, own_rank);
    Transport transport(backend, job_layout, comm, options.timeout_seconds * (1 + 0.1 * process));
    auto interpreter = make_interpreter(job, backend, transport);
    check(MPI_Barrier(comm), "MPI_Barrier");
    try {
      while (!interpreter.finished(process)) interpreter.step(process);
    } catch (const transport_error& error) {
      throw invalid_plan(sluice::concat("executor: ", interpreter.where(process), ": ", error.what()));
    }
    const RankInfo& info = job_layout.ranks[static_cast<std::size_t>(process)];
    own = detail::rank_values(job, job_layout, process, interpreter.timings()[static_cast<std::size_t>(process)],
                      info.last ? std::span<const double>(backend.loss_sums(info.pipeline)) : std::span<const double>(),
                      [&](std::size_t tensor) { return backend.stage(process).gradients()[tensor]; });
  } else {
    check(MPI_Barrier(comm), "MPI_Barrier");
  }
  // Added as a one-process run adds them, so that the two are equal bit for bit.
  RunReport report = detail::share_run(job, job_layout, comm, std::move(own), [&](detail::GatheredRanks& gathered) {
    return host::combine(job, job_layout, gathered.loss_sums, [&](int rank, std::size_t tensor) {
      return std::span<const double>(gathered.gradients[static_cast<std::size_t>(rank)][tensor]);
    });
  });
  report.device = sluice::concat("host (float64), ", ranks, " MPI processes");
  return report;
}

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
