#pragma once
// What the runs of one process per rank share (host/mpi.hpp, cuda/mpi.hpp): MPI errors as exceptions, and the
// gathering of every rank's results to process 0, which combines them into the run it returns.
#include <mpi.h>

#include <functional>
#include <span>
#include <stdexcept>
#include <vector>

#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"

namespace sluice::executor::mpi::detail {

using executor::transport_error;

// Throws transport_error with MPI's text when `code` is not MPI_SUCCESS.
void check(int code, const char* call);

// This process's index in `comm`; raises invalid_input unless `comm` has a process for every rank of the job.
int process_for(const JobLayout& layout, MPI_Comm comm);

// What rank `rank` sends process 0 at the end: its instruction times (start, end pairs), a last stage's
// cross-entropy sums by micro-batch and its activation peak, then, with `gradients`, its TP shards of the
// gradients of the tensors it holds, in tensor order, one message each.
struct RankValues {
  std::vector<double> times_and_sums;
  std::vector<std::vector<double>> gradients;
};
RankValues rank_values(const Job& job, const JobLayout& layout, int rank, const std::vector<InstructionTiming>& timings,
                       std::span<const double> loss_sums, double activation_peak_bytes, bool gradients,
                       const std::function<std::vector<double>(std::size_t tensor)>& gradient);

// Collective over `comm`: process 0 receives every rank's rank_values (`own` is its own, moved, not copied;
// processes without a rank pass none) and adds them up as a run in one process does (interpreter.hpp's combine), so
// that the two are equal bit for bit; every process returns the loss and every rank's instruction times and
// activation peak, and process 0 alone the gradients too, since a model's gradients are gigabytes that only the
// writer needs. Without `gradients` no rank sends any (every process must pass the same).
RunReport share_run(const Job& job, const JobLayout& layout, MPI_Comm comm, RankValues own, bool gradients);

}  // namespace sluice::executor::mpi::detail
