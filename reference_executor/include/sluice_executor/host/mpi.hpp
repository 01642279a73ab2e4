#pragma once
// The host backend with one MPI process per rank (sluice::executor_mpi): each process executes only its rank's
// instruction list through the one interpreter; activations and gradients move by MPI point-to-point messages,
// paired in issue order between two ranks as NCCL pairs them, each carrying its tensor's kind and micro-batch so
// that a send meeting the receive of another tensor stops the run instead of corrupting it; the collectives inside
// the passes (TP, CP) run on one communicator per group, made by one MPI_Comm_split per family of disjoint groups.
#include <mpi.h>

#include <functional>
#include <span>
#include <vector>

#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/layout_move.hpp"
#include "sluice_executor/run_options.hpp"
#include "sluice_executor/training.hpp"

namespace sluice::executor::host {

// Collective over `comm`, whose size is more than the job's largest rank: process r runs global rank r on the
// float64 host backend, processes without a rank only wait for the end. Process 0 gathers the ranks' results and
// returns the whole run: the loss and gradients, added in the order a one-process run adds them (so they are equal
// bit for bit to run_local's), and every rank's instruction times, each on its own process's clock from a common
// barrier. The other processes return the loss and the times, without the gradients. A failure on a rank throws
// there, naming the rank and the instruction; run it inside mpi::run_or_abort so that every process ends.
RunReport run_mpi(const Job& job, MPI_Comm comm, const RunOptions& options = {});

// A layout move's routes over MPI: each process fills its routes' values, sends each peer one message of them in
// route order, receives each peer's, and applies its routes in route order; a wait longer than the timeout raises.
class MpiMover final : public Mover {
public:
  MpiMover(MPI_Comm comm, double timeout_seconds);
  void move(std::span<const Route> routes, const std::function<std::vector<double>(std::size_t)>& fill,
            const std::function<void(std::size_t, std::vector<double>)>& apply) override;

private:
  MPI_Comm comm_;
  double timeout_;
  int process_ = 0;
};

// A training run of one MPI process per rank of the layout: process r holds rank r's optimizer shards and runs
// rank r of each iteration's job (collective over `comm`, whose size is the layout's ranks).
class MpiCohort : public Cohort {
public:
  MpiCohort(MPI_Comm comm, double timeout_seconds);
  [[nodiscard]] bool holds(int rank) const override { return rank == process_; }
  Mover& mover() override { return mover_; }
  void run(const Job& job, const JobLayout& job_layout, const Backend::ParameterShards& parameters,
           const RunOptions& options, const Visit& visit) override;
  std::vector<std::vector<double>> share(std::vector<std::vector<double>> held) override;

private:
  MPI_Comm comm_;
  MpiMover mover_;
  int process_ = 0;
  int processes_ = 1;
};

}  // namespace sluice::executor::host
