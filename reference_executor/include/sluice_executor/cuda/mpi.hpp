#pragma once
// One MPI process per GPU (sluice::executor_mpi in builds with the CUDA executor and NCCL, which define
// SLUICE_EXECUTOR_MPI_GPU): each process binds one GPU of its node and runs its rank's instruction list on the CUDA
// backend; the ranks' activations and gradients move by NCCL point-to-point operations on communicators
// bootstrapped from unique ids that process 0 makes and broadcasts over MPI (docs/executor.md, "One process per
// rank").
#include <mpi.h>

#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/run_options.hpp"

namespace sluice::executor::cuda {

// Collective over `comm`, whose size is more than the job's largest rank: process r runs global rank r on one GPU
// (options.device, or by default its rank among its node's processes; two on one device is an error), processes
// without a rank only wait for the end. The plan is first checked by the interpreter's dry run, which rejects any
// plan NCCL would deadlock on. Process 0 gathers the loss sums, every rank's shards of the gradients and every
// rank's instruction times, and adds them as run_nccl adds them in one process. Process 0 returns the whole run, as
// run_nccl(job, options) returns it in one process; the others return it without the gradients. Failures throw; run
// it inside mpi::run_or_abort so that every process ends.
RunReport run_nccl(const Job& job, MPI_Comm comm, const RunOptions& options = {});

}  // namespace sluice::executor::cuda
