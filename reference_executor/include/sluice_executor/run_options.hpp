#pragma once
// What every run of a job takes, whichever backend (host, cuda) and transport (local, nccl, mpi) runs it:
//
//   host::run_local(job, options)        float64, a thread per rank in this process          host/local.hpp
//   host::run_mpi(job, comm, options)    float64, one MPI process per rank                   host/mpi.hpp
//   cuda::run_local(job, options)        every rank on one GPU, device copies                cuda.hpp
//   cuda::run_nccl(job, options)         a GPU and a thread per rank, NCCL                   cuda.hpp
//   cuda::run_nccl(job, comm, options)   one MPI process per GPU, NCCL bootstrapped over MPI  cuda/mpi.hpp
#include <cmath>

#include "sluice/core/error.hpp"
#include "sluice_executor/job.hpp"

namespace sluice::executor {

struct RunOptions {
  // A wait for a message longer than this ends the run with an error naming the rank and the instruction (a peer that
  // failed, or, with JobChecks::structure, a plan that pairs its operations wrongly).
  double timeout_seconds = 60;
  // JobChecks::structure meets a broken plan as the ranks run it; JobChecks::all rejects it before any rank starts.
  JobChecks checks = JobChecks::all;
  int warmup = 1;          // GPUs: untimed iterations first (cuBLAS heuristics, the allocator's pool)
  bool serialize = false;  // cuda::run_local: every rank on one stream, passes taking turns, free of contention
  // cuda::run_local: the GPU; cuda::run_nccl: the first of the ranks' GPUs (rank r on device + r); over MPI: the GPU
  // this process binds. -1: device 0, or under MPI the process's rank among its node's processes.
  int device = -1;
  // false: the report's result holds the loss alone, the gradients left where the ranks computed them (a
  // billion-parameter model's take seconds to download, send and add up, and measuring plans needs none).
  bool gradients = true;
  friend bool operator==(const RunOptions&, const RunOptions&) = default;
};

inline void require_valid(const RunOptions& options) {
  sluice::require(std::isfinite(options.timeout_seconds) && options.timeout_seconds > 0,
                  "run options: timeout_seconds must be finite and > 0, got ", options.timeout_seconds);
  sluice::require(options.warmup >= 0, "run options: warmup must be >= 0, got ", options.warmup);
  sluice::require(options.device >= -1, "run options: device must be >= -1, got ", options.device);
}

}  // namespace sluice::executor
