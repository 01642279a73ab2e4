#pragma once
// One MPI process per rank on GPUs (sluice::executor_mpi in builds with the CUDA executor and NCCL, which define
// SLUICE_EXECUTOR_MPI_GPU): each process binds one GPU of its node and runs its rank's instruction list on the CUDA
// backend; the ranks' activations and gradients move by NCCL point-to-point operations on communicators
// bootstrapped from unique ids that process 0 makes and broadcasts over MPI (docs/executor.md, "One process per
// rank").
#include <mpi.h>

#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/mpi.hpp"

namespace sluice::executor::mpi {

struct GpuOptions {
  // A rank whose GPU work has not finished after this long (a peer that failed, or a plan that pairs operations
  // wrongly) ends the run with an error naming the rank.
  double timeout_seconds = 60;
  int warmup = 1;  // untimed iterations first, as cuda::run_nccl runs them
  // The GPU a process binds: -1 picks its rank among the processes of its node (MPI_COMM_TYPE_SHARED).
  int device = -1;
};

// Collective over `comm`, whose size is at least the job's rank count: process r < ranks runs global rank r on one
// GPU (one process per GPU: two on one device is an error), the other processes only wait for the end. The plan is
// first checked by the interpreter's dry run, which rejects any plan NCCL would deadlock on. After the gradients'
// all-reduce, process 0 gathers the loss sums, every tensor's gradient from its first holder and every rank's
// instruction times. Process 0 returns the whole run, as cuda::run_nccl returns it in one process; the others return
// it without the gradients. Failures throw; run it inside run_or_abort so that every process ends.
RunReport run_on_gpu(const Job& job, MPI_Comm comm, const GpuOptions& options = {});

}  // namespace sluice::executor::mpi
