#include "mpi_results.hpp"

#include <cstddef>
#include <string>
#include <string_view>

#include "sluice/core/error.hpp"

namespace sluice::executor::mpi::detail {

namespace {

constexpr int gather_tag = 2;

std::size_t instruction_count(const Job& job, const RankInfo& info) {
  return job.pipelines[static_cast<std::size_t>(info.pipeline)].plan.ranks[static_cast<std::size_t>(info.stage)]
      .size();
}

// Exactly `count` values from process `from`: a rank that holds other tensors than the layout says is a bug.
std::vector<double> receive_values(int from, std::size_t count, MPI_Comm comm) {
  std::vector<double> values(count);
  MPI_Status status{};
  check(MPI_Recv(values.data(), static_cast<int>(count), MPI_DOUBLE, from, gather_tag, comm, &status), "MPI_Recv");
  int received = 0;
  check(MPI_Get_count(&status, MPI_DOUBLE, &received), "MPI_Get_count");
  if (static_cast<std::size_t>(received) != count)
    throw std::logic_error(sluice::concat("mpi: rank ", from, " sent ", received, " values, expected ", count));
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

std::vector<double> rank_values(const Job& job, const JobLayout& layout, int rank,
                                const std::vector<InstructionTiming>& timings, std::span<const double> loss_sums,
                                const std::function<std::vector<double>(std::size_t tensor)>& gradient) {
  std::vector<double> values;
  for (const InstructionTiming& timing : timings) values.insert(values.end(), {timing.start, timing.end});
  values.insert(values.end(), loss_sums.begin(), loss_sums.end());
  const RankInfo& info = layout.ranks[static_cast<std::size_t>(rank)];
  const TensorRange range = stage_tensors(job.model, info.first_layer, info.end_layer, info.first, info.last);
  for (std::size_t t = range.begin; t < range.end; ++t) {
    const std::vector<double> values_of_tensor = gradient(t);
    values.insert(values.end(), values_of_tensor.begin(), values_of_tensor.end());
  }
  return values;
}

RunReport share_run(const Job& job, const JobLayout& layout, MPI_Comm comm, const std::vector<double>& own,
                    const std::function<ModelResult(const GatheredRanks&)>& combine) {
  int process = 0;
  MPI_Comm_rank(comm, &process);
  const int ranks = static_cast<int>(layout.ranks.size());
  const std::vector<ParameterTensor> tensors = parameter_tensors(job.model);
  std::vector<double> shared;
  if (process == 0) {
    GatheredRanks gathered;
    gathered.loss_sums.resize(layout.micro_batches.size());
    gathered.gradients.resize(static_cast<std::size_t>(ranks));
    std::vector<double> timings;
    for (int r = 0; r < ranks; ++r) {
      const RankInfo& info = layout.ranks[static_cast<std::size_t>(r)];
      const TensorRange range = stage_tensors(job.model, info.first_layer, info.end_layer, info.first, info.last);
      const std::size_t micro_batches =
          info.last ? layout.micro_batches[static_cast<std::size_t>(info.pipeline)].size() : 0;
      std::size_t count = 2 * instruction_count(job, info) + micro_batches;
      for (std::size_t t = range.begin; t < range.end; ++t) count += tensors[t].size();
      const std::vector<double> values = r == 0 ? own : receive_values(r, count, comm);
      auto at = values.begin();
      const auto times = static_cast<std::ptrdiff_t>(2 * instruction_count(job, info));
      timings.insert(timings.end(), at, at + times);
      at += times;
      const auto sums = static_cast<std::ptrdiff_t>(micro_batches);
      if (info.last) gathered.loss_sums[static_cast<std::size_t>(info.pipeline)].assign(at, at + sums);
      at += sums;
      gathered.gradients[static_cast<std::size_t>(r)].resize(tensors.size());
      for (std::size_t t = range.begin; t < range.end; ++t) {
        gathered.gradients[static_cast<std::size_t>(r)][t].assign(at,
                                                                   at + static_cast<std::ptrdiff_t>(tensors[t].size()));
        at += static_cast<std::ptrdiff_t>(tensors[t].size());
      }
    }
    const ModelResult result = combine(gathered);
    shared.push_back(result.loss);
    for (const std::vector<double>& gradient : result.gradients)
      shared.insert(shared.end(), gradient.begin(), gradient.end());
    shared.insert(shared.end(), timings.begin(), timings.end());
  } else if (process < ranks) {
    check(MPI_Send(own.data(), static_cast<int>(own.size()), MPI_DOUBLE, 0, gather_tag, comm), "MPI_Send");
  }

  std::size_t values = 1;
  for (const ParameterTensor& tensor : tensors) values += tensor.size();
  for (const RankInfo& info : layout.ranks) values += 2 * instruction_count(job, info);
  shared.resize(values);
  check(MPI_Bcast(shared.data(), static_cast<int>(values), MPI_DOUBLE, 0, comm), "MPI_Bcast");
  RunReport report;
  auto at = shared.begin();
  report.result.loss = *at++;
  for (const ParameterTensor& tensor : tensors) {
    report.result.gradients.emplace_back(at, at + static_cast<std::ptrdiff_t>(tensor.size()));
    at += static_cast<std::ptrdiff_t>(tensor.size());
  }
  for (const RankInfo& info : layout.ranks) {
    std::vector<InstructionTiming>& rank_timings = report.instructions.emplace_back();
    for (std::size_t k = 0, count = instruction_count(job, info); k < count; ++k, at += 2)
      rank_timings.push_back({*at, *(at + 1)});
  }
  fill_makespans(layout, report);
  return report;
}

}  // namespace sluice::executor::mpi::detail
