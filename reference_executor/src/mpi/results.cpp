#include "results.hpp"

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "sluice/core/error.hpp"

namespace sluice::executor::mpi::detail {

namespace {

constexpr int gather_tag = 2;
// MPI counts are ints: a stage's gradients (a billion values for four LLaMA-7B-shaped layers) go in pieces.
constexpr std::size_t piece = std::size_t{1} << 30;

// Every rank's results on process 0.
struct GatheredRanks {
  std::vector<std::vector<double>> loss_sums;               // by rank: a last stage's, per micro-batch
  std::vector<std::vector<std::vector<double>>> gradients;  // [rank][tensor], empty where the rank lacks it
};

std::size_t instruction_count(const Job& job, const RankInfo& info) {
  if (!info.runs) return 0;
  return job.pipelines[static_cast<std::size_t>(info.pipeline)].plan.ranks[static_cast<std::size_t>(info.stage)].size();
}

std::size_t loss_sum_count(const JobLayout& layout, const RankInfo& info) {
  return info.runs && info.last ? layout.micro_batches[static_cast<std::size_t>(info.pipeline)].size() : 0;
}

void send_values(std::span<const double> values, MPI_Comm comm) {
  for (std::size_t at = 0; at < values.size(); at += piece) {
    const std::size_t count = std::min(piece, values.size() - at);
    check(MPI_Send(values.data() + at, static_cast<int>(count), MPI_DOUBLE, 0, gather_tag, comm), "MPI_Send");
  }
}

// Exactly `count` values from process `from`: a rank that holds other tensors than the layout says is a bug.
std::vector<double> receive_values(int from, std::size_t count, MPI_Comm comm) {
  std::vector<double> values(count);
  for (std::size_t at = 0; at < count; at += piece) {
    const std::size_t expected = std::min(piece, count - at);
    MPI_Status status{};
    check(MPI_Recv(values.data() + at, static_cast<int>(expected), MPI_DOUBLE, from, gather_tag, comm, &status),
          "MPI_Recv");
    int received = 0;
    check(MPI_Get_count(&status, MPI_DOUBLE, &received), "MPI_Get_count");
    if (static_cast<std::size_t>(received) != expected)
      throw std::logic_error(sluice::concat("mpi: rank ", from, " sent ", received, " values, expected ", expected));
  }
  return values;
}

}  // namespace

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw transport_error(sluice::concat(call, " failed: ", std::string_view(text, static_cast<std::size_t>(length))));
}

int process_for(const JobLayout& layout, MPI_Comm comm) {
  int process = 0, processes = 0;
  MPI_Comm_rank(comm, &process);
  MPI_Comm_size(comm, &processes);
  sluice::require(processes >= layout.rank_count(), "mpi: the job has ", layout.rank_count(),
                  " ranks, the communicator ", processes, " processes");
  return process;
}

RankValues rank_values(const Job& job, const JobLayout& layout, int rank, const std::vector<InstructionTiming>& timings,
                       std::span<const double> loss_sums, double activation_peak_bytes, bool gradients,
                       const std::function<std::vector<double>(std::size_t tensor)>& gradient) {
  const RankInfo& info = layout.ranks[static_cast<std::size_t>(rank)];
  const TensorRange range = stage_tensors(job.model, info.first_layer, info.end_layer, info.first, info.last);
  RankValues values;
  for (const InstructionTiming& timing : timings) {
    values.times_and_sums.push_back(timing.start);
    values.times_and_sums.push_back(timing.end);
  }
  values.times_and_sums.insert(values.times_and_sums.end(), loss_sums.begin(),
                               loss_sums.begin() + static_cast<std::ptrdiff_t>(loss_sum_count(layout, info)));
  values.times_and_sums.push_back(activation_peak_bytes);
  if (gradients)
    for (std::size_t t = range.begin; t < range.end; ++t) values.gradients.push_back(gradient(t));
  return values;
}

RunReport share_run(const Job& job, const JobLayout& layout, MPI_Comm comm, RankValues own, bool gradients) {
  int process = 0;
  MPI_Comm_rank(comm, &process);
  const int ranks = layout.rank_count();
  const std::vector<ParameterTensor> tensors = parameter_tensors(job.model);
  RunReport report;
  // The loss, then every rank's instruction times and activation peak: all that process 0 sends the others.
  std::vector<double> shared;
  if (process == 0) {
    GatheredRanks gathered;
    gathered.loss_sums.resize(static_cast<std::size_t>(ranks));
    gathered.gradients.resize(static_cast<std::size_t>(ranks));
    std::vector<double> timings;
    for (int r = 0; r < ranks; ++r) {
      const RankInfo& info = layout.ranks[static_cast<std::size_t>(r)];
      if (!info.runs) {
        timings.push_back(0);  // its activation peak
        continue;
      }
      const TensorRange range = stage_tensors(job.model, info.first_layer, info.end_layer, info.first, info.last);
      const std::size_t times = 2 * instruction_count(job, info);
      const std::size_t sums = loss_sum_count(layout, info);
      const std::vector<double> times_and_sums =
          r == 0 ? std::move(own.times_and_sums) : receive_values(r, times + sums + 1, comm);
      const auto sums_begin = times_and_sums.begin() + static_cast<std::ptrdiff_t>(times);
      timings.insert(timings.end(), times_and_sums.begin(), sums_begin);
      timings.push_back(times_and_sums.back());
      gathered.loss_sums[static_cast<std::size_t>(r)].assign(sums_begin, times_and_sums.end() - 1);
      if (!gradients) continue;
      // Each tensor lands in its own vector once: a model's gradients are gigabytes, and fresh pages cost.
      std::vector<std::vector<double>>& rank_gradients = gathered.gradients[static_cast<std::size_t>(r)];
      rank_gradients.resize(tensors.size());
      for (std::size_t t = range.begin; t < range.end; ++t) {
        const auto [rows, cols] = shard_shape(tensors[t], info.tp);
        rank_gradients[t] = r == 0 ? std::move(own.gradients[t - range.begin])
                                   : receive_values(r, static_cast<std::size_t>(rows * cols), comm);
      }
    }
    report.result = combine(
        job, layout,
        [&](int rank) { return std::span<const double>(gathered.loss_sums[static_cast<std::size_t>(rank)]); },
        [&](int rank, std::size_t tensor) {
          return std::span<const double>(gathered.gradients[static_cast<std::size_t>(rank)][tensor]);
        },
        gradients);
    shared.push_back(report.result.loss);
    shared.insert(shared.end(), timings.begin(), timings.end());
  } else if (process < ranks && layout.ranks[static_cast<std::size_t>(process)].runs) {
    send_values(own.times_and_sums, comm);
    for (const std::vector<double>& gradient : own.gradients) send_values(gradient, comm);
  }

  std::size_t values = 1;
  for (const RankInfo& info : layout.ranks) values += 2 * instruction_count(job, info) + 1;
  shared.resize(values);
  check(MPI_Bcast(shared.data(), static_cast<int>(values), MPI_DOUBLE, 0, comm), "MPI_Bcast");
  auto at = shared.begin();
  report.result.loss = *at++;
  for (const RankInfo& info : layout.ranks) {
    std::vector<InstructionTiming>& rank_timings = report.instructions.emplace_back();
    for (std::size_t k = 0, count = instruction_count(job, info); k < count; ++k, at += 2)
      rank_timings.push_back({*at, *(at + 1)});
    report.activation_peak_bytes.push_back(*at++);
  }
  fill_makespans(layout, report);
  return report;
}

}  // namespace sluice::executor::mpi::detail
