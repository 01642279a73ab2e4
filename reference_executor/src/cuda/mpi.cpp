// One MPI process per GPU, over NCCL (sluice_executor/cuda/mpi.hpp).
#include "sluice_executor/cuda/mpi.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "../mpi/results.hpp"
#include "nccl.hpp"
#include "sluice/core/error.hpp"
#include "sluice_executor/cuda.hpp"

namespace sluice::executor::cuda {

namespace results = mpi::detail;

namespace {

// This process's rank among the processes of its node.
int node_rank(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  results::check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  return rank;
}

}  // namespace

RunReport run_nccl(const Job& job, MPI_Comm comm, const RunOptions& options) {
  require_valid(options);
  const JobLayout job_layout = layout(job, options.checks);  // its dry run rejects a plan NCCL would deadlock on
  require_gpu_job(job);
  const int process = results::process_for(job_layout, comm);
  const int ranks = job_layout.rank_count();
  const int device = options.device >= 0 ? options.device : node_rank(comm);
  const bool runs = process < ranks && job_layout.ranks[static_cast<std::size_t>(process)].runs;
  // Every process takes part in the split and the broadcast; only the job's ranks join the communicators.
  MPI_Comm ranks_comm = MPI_COMM_NULL;
  results::check(MPI_Comm_split(comm, runs ? 0 : MPI_UNDEFINED, process, &ranks_comm), "MPI_Comm_split");
  std::vector<ncclUniqueId> ids(Communicators::id_count(job_layout));
  if (process == 0)
    for (ncclUniqueId& id : ids) SLUICE_NCCL_CHECK(ncclGetUniqueId(&id));
  results::check(MPI_Bcast(ids.data(), static_cast<int>(ids.size() * sizeof(ncclUniqueId)), MPI_BYTE, 0, comm),
                 "MPI_Bcast");

  results::RankValues own;
  if (runs) {
    const int visible = device_count();
    if (device >= visible)
      throw std::runtime_error(sluice::concat("mpi: this process would bind GPU ", device, " of its node, which has ",
                                              visible, " visible: start one process per GPU"));
    SLUICE_CUDA_CHECK(cudaSetDevice(device));
    std::vector<int> devices(static_cast<std::size_t>(ranks), -1);
    devices[static_cast<std::size_t>(process)] = device;
    Communicators communicators(job_layout, process, ids);
    NcclExchange exchange(communicators);
    Backend backend(job, job_layout, devices, false, &exchange);
    const double timeout = options.timeout_seconds * (1 + 0.1 * process);
    std::vector<InstructionTiming> timings;
    try {
      for (int iteration = 0; iteration <= options.warmup; ++iteration) {
        NcclTransport transport(backend, communicators);
        auto interpreter = make_interpreter(job, job_layout, backend, transport);
        backend.reset(process);
        results::check(MPI_Barrier(ranks_comm), "MPI_Barrier");
        backend.mark_origin(process);
        while (!interpreter.finished(process)) interpreter.step(process);
        const Event done;
        done.record(backend.stream(process));
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
        wait_polling(done, [&] {
          if (std::chrono::steady_clock::now() > deadline)
            throw std::runtime_error(sluice::concat("timed out after ", timeout, " s waiting for the GPU to finish ",
                                                    "the rank's list (a peer that failed or never sent)"));
        });
        if (iteration == options.warmup) timings = interpreter.timings()[static_cast<std::size_t>(process)];
      }
    } catch (...) {
      communicators.abort();
      throw;
    }
    const RankInfo& info = job_layout.ranks[static_cast<std::size_t>(process)];
    const std::vector<double> loss_sums = info.last ? backend.loss_sums(process) : std::vector<double>();
    own = results::rank_values(job, job_layout, process, timings, loss_sums, backend.activation_peak_bytes(process),
                               options.gradients,
                               [&](std::size_t tensor) { return backend.download_gradient(process, tensor); });
    MPI_Comm_free(&ranks_comm);
  }
  // Added as a one-process run adds them (collect_result).
  RunReport report = results::share_run(job, job_layout, comm, std::move(own), options.gradients);
  report.device = sluice::concat(ranks, ranks == 1 ? " MPI process" : " MPI processes", " × ",
                                 runs ? device_name(device) : "GPU", " (NCCL)");
  return report;
}

}  // namespace sluice::executor::cuda
