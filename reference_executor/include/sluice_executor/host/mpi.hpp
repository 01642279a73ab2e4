#pragma once
// The host backend with one MPI process per rank (sluice::executor_mpi): each process executes only its rank's
// instruction list through the one interpreter; activations and gradients move by MPI point-to-point messages,
// paired in issue order between two ranks as NCCL pairs them, each carrying its tensor's kind and micro-batch so
// that a send meeting the receive of another tensor stops the run instead of corrupting it; the collectives inside
// the passes (TP, CP) run on one communicator per group, made by one MPI_Comm_split per family of disjoint groups.
#include <mpi.h>

#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/run_options.hpp"

namespace sluice::executor::host {

// Collective over `comm`, whose size is more than the job's largest rank: process r runs global rank r on the
// float64 host backend, processes without a rank only wait for the end. Process 0 gathers the ranks' results and
// returns the whole run: the loss and gradients, added in the order a one-process run adds them (so they are equal
// bit for bit to run_local's), and every rank's instruction times, each on its own process's clock from a common
// barrier. The other processes return the loss and the times, without the gradients. A failure on a rank throws
// there, naming the rank and the instruction; run it inside mpi::run_or_abort so that every process ends.
RunReport run_mpi(const Job& job, MPI_Comm comm, const RunOptions& options = {});

}  // namespace sluice::executor::host
