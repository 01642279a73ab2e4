#pragma once
// The executor's side of the interpreter: the library's schedule::Interpreter (sluice/schedule/interpreter.hpp), which
// defines what a plan means, run over a job's lanes and compute groups with the executor's backends and transports,
// and what a run reports.
#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "sluice/schedule/interpreter.hpp"
#include "sluice_executor/job.hpp"

namespace sluice::executor {

using schedule::InstructionTiming;
using schedule::Transfer;

// A failure of a transport's message layer (a peer that does not answer in time, a message of another tensor),
// reported with the rank's place in its instruction list.
class transport_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct TransferTiming {
  int from_rank = 0;  // global ranks
  int to_rank = 0;
  int micro_batch = 0;
  bool activation = false;
  double start = 0;
  double end = 0;
};

// The model's loss and its parameter gradients (canonical tensor order, summed over pipelines).
struct ModelResult {
  double loss = 0;
  std::vector<std::vector<double>> gradients;
};

struct RunReport {
  ModelResult result;
  std::vector<std::vector<InstructionTiming>> instructions;  // [global rank][instruction]; empty where none runs
  std::vector<TransferTiming> transfers;
  std::vector<double> pipeline_makespan;  // last instruction end minus first instruction start, per pipeline
  double makespan = 0;                    // the slowest pipeline's
  // Per global rank: the most bytes of activations it held at once for backwards (the host backend's saved tensors;
  // the CUDA backend's stream-ordered allocations), where the backend measures them.
  std::vector<double> activation_peak_bytes;
  std::string device;
};

// The interpreter over the job's lanes (ranks as JobLayout places them) and its compute groups; its errors start
// with "executor".
template <schedule::Backend B, schedule::Transport T>
schedule::Interpreter<B, T> make_interpreter(const Job& job, const JobLayout& layout, B& backend, T& transport) {
  return schedule::Interpreter<B, T>(layout.pipeline_ranks(job.pipelines), layout.compute_groups, backend, transport,
                                     {.context = "executor"});
}

// Pipeline makespans from instruction timings: each pipeline's last end minus its first start.
inline void fill_makespans(const JobLayout& layout, RunReport& report) {
  const std::size_t pipelines = layout.lane_ranks.size();
  report.pipeline_makespan.assign(pipelines, 0.0);
  std::vector<double> first(pipelines, 0.0);
  std::vector<char> seen(pipelines, 0);
  for (std::size_t r = 0; r < report.instructions.size(); ++r) {
    if (!layout.ranks[r].runs) continue;
    const auto p = static_cast<std::size_t>(layout.ranks[r].pipeline);
    for (const InstructionTiming& t : report.instructions[r]) {
      first[p] = seen[p] ? std::min(first[p], t.start) : t.start;
      report.pipeline_makespan[p] = seen[p] ? std::max(report.pipeline_makespan[p], t.end) : t.end;
      seen[p] = 1;
    }
  }
  report.makespan = 0;
  for (std::size_t p = 0; p < pipelines; ++p) {
    report.pipeline_makespan[p] -= first[p];
    report.makespan = std::max(report.makespan, report.pipeline_makespan[p]);
  }
}

}  // namespace sluice::executor
