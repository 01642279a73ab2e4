#pragma once
// What a run leaves behind: a Chrome trace (chrome://tracing, ui.perfetto.dev) with one process per pipeline, one
// thread per rank (a lane of a stage) holding an event per instruction and one thread per rank for the transfers it
// receives; and a table of predicted against measured times, per micro-batch and per iteration.
//
// Predicted times come from the planner's simulated timeline (PipelineJob::predicted). Besides the measured
// makespan, the table gives the *replayed* one: the same simulator run on the measured forward and backward times
// with the plan's compute orders and free links. When ranks share a device (the local transport) the measured
// makespan includes their contention; the replay is what the cost model's per-op error alone does to the
// iteration time. Serialized, the ranks that meet inside a pass (a stage's lanes, a compute group's members) share
// its turn, so each one's time holds all their kernels; a GPU of its own would take its share, that time divided by
// how many met, as the profiler divides its samples.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/io/json.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/simulate.hpp"
#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"

namespace sluice::executor {

inline io::json chrome_trace(const Job& job, const RunReport& report) {
  const JobLayout job_layout = layout(job);
  sluice::require(report.instructions.size() == job_layout.ranks.size(), "trace: the report has ",
                  report.instructions.size(), " ranks, the job ", job_layout.ranks.size());
  io::json events = io::json::array();
  for (std::size_t p = 0; p < job.pipelines.size(); ++p)
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", p}, {"args", {{"name", sluice::concat("pipeline ", p)}}}});
  for (std::size_t r = 0; r < job_layout.ranks.size(); ++r) {
    const RankInfo& info = job_layout.ranks[r];
    if (!info.runs) continue;
    const auto lanes = static_cast<int>(job_layout.lane_ranks[static_cast<std::size_t>(info.pipeline)].front().size());
    const auto& list =
        job.pipelines[static_cast<std::size_t>(info.pipeline)].plan.ranks[static_cast<std::size_t>(info.stage)];
    sluice::require(report.instructions[r].size() == list.size(), "trace: rank ", r, " has ",
                    report.instructions[r].size(), " timings for ", list.size(), " instructions");
    const int compute = 2 * (info.stage * lanes + info.lane);
    events.push_back(
        {{"name", "thread_name"},
         {"ph", "M"},
         {"pid", info.pipeline},
         {"tid", compute},
         {"args",
          {{"name", lanes == 1 ? sluice::concat("rank ", r, " (stage ", info.stage, ")")
                               : sluice::concat("rank ", r, " (stage ", info.stage, " lane ", info.lane, ")")}}}});
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", info.pipeline},
                      {"tid", compute + 1},
                      {"args", {{"name", sluice::concat("rank ", r, " receives")}}}});
    for (std::size_t k = 0; k < list.size(); ++k) {
      const schedule::Instruction& in = list[k];
      const InstructionTiming& t = report.instructions[r][k];
      events.push_back({{"name", sluice::concat(schedule::name(in.kind), " ", in.micro_batch)},
                        {"cat", schedule::name(in.kind)},
                        {"ph", "X"},
                        {"pid", info.pipeline},
                        {"tid", compute},
                        {"ts", t.start * 1e6},
                        {"dur", (t.end - t.start) * 1e6},
                        {"args", {{"micro_batch", in.micro_batch}, {"instruction", k}, {"rank", r}}}});
    }
  }
  for (const TransferTiming& t : report.transfers) {
    const RankInfo& to = job_layout.ranks[static_cast<std::size_t>(t.to_rank)];
    const auto lanes = static_cast<int>(job_layout.lane_ranks[static_cast<std::size_t>(to.pipeline)].front().size());
    events.push_back({{"name", sluice::concat(t.activation ? "act " : "grad ", t.micro_batch)},
                      {"cat", t.activation ? "activation" : "gradient"},
                      {"ph", "X"},
                      {"pid", to.pipeline},
                      {"tid", 2 * (to.stage * lanes + to.lane) + 1},
                      {"ts", t.start * 1e6},
                      {"dur", (t.end - t.start) * 1e6},
                      {"args", {{"from_rank", t.from_rank}, {"to_rank", t.to_rank}, {"micro_batch", t.micro_batch}}}});
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"device", report.device}, {"makespan_s", report.makespan}, {"loss", report.result.loss}}}};
}

// Forward and backward seconds of one micro-batch, summed over its pipeline's stages (a stage's time is its slowest
// lane's). Predicted values are NaN when the job carries no prediction.
struct MicroBatchTiming {
  int pipeline = 0;
  int micro_batch = 0;
  std::int64_t tokens = 0;
  double predicted_forward = 0;
  double measured_forward = 0;
  double predicted_backward = 0;
  double measured_backward = 0;
};

struct PipelineTiming {
  double predicted = 0;  // simulated makespan (NaN without a prediction)
  double measured = 0;
  double replayed = 0;  // simulated on the measured op times
};

struct TimingTable {
  std::vector<MicroBatchTiming> micro_batches;
  std::vector<PipelineTiming> pipelines;
  double predicted = 0;  // iteration: the slowest pipeline
  double measured = 0;
  double replayed = 0;
  // Relative error of the prediction against the measured iteration time, and against the replayed one.
  [[nodiscard]] double measured_error() const { return (predicted - measured) / measured; }
  [[nodiscard]] double replayed_error() const { return (predicted - replayed) / replayed; }
};

inline TimingTable timing_table(const Job& job, const RunReport& report) {
  const JobLayout job_layout = layout(job);
  sluice::require(report.instructions.size() == job_layout.ranks.size(), "timing table: the report has ",
                  report.instructions.size(), " ranks, the job ", job_layout.ranks.size());
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  // Op times shorter than this are timer noise; the simulator needs positive times.
  constexpr double resolution = 1e-9;
  std::map<std::pair<int, int>, std::size_t> group_size;  // (rank, micro-batch) of a compute group -> its members
  for (const schedule::ComputeGroup& group : job_layout.compute_groups)
    for (const schedule::ComputeGroup::Member& member : group.members)
      group_size[{member.rank, member.micro_batch}] = group.members.size();
  TimingTable table;
  for (std::size_t p = 0; p < job.pipelines.size(); ++p) {
    const PipelineJob& pipeline = job.pipelines[p];
    const int c = pipeline.plan.stages;
    const std::size_t m = pipeline.micro_batches.size();
    schedule::Problem replay;
    replay.stages = c;
    replay.memory_limit.assign(static_cast<std::size_t>(c), std::numeric_limits<double>::infinity());
    replay.hidden = job.model.hidden;
    for (std::size_t i = 0; i < m; ++i)
      replay.micro_batches.push_back({std::vector<double>(static_cast<std::size_t>(c), resolution),
                                      std::vector<double>(static_cast<std::size_t>(c), resolution),
                                      std::vector<double>(static_cast<std::size_t>(c), 0.0),
                                      job_layout.micro_batches[p][i].size()});
    schedule::Order order;
    order.stages.resize(static_cast<std::size_t>(c));
    for (int j = 0; j < c; ++j) {
      const auto& list = pipeline.plan.ranks[static_cast<std::size_t>(j)];
      for (std::size_t k = 0; k < list.size(); ++k) {
        const schedule::Instruction& in = list[k];
        if (in.kind != schedule::InstructionKind::forward && in.kind != schedule::InstructionKind::backward) continue;
        const bool forward = in.kind == schedule::InstructionKind::forward;
        schedule::MicroBatchCost& cost = replay.micro_batches[static_cast<std::size_t>(in.micro_batch)];
        double& seconds = (forward ? cost.forward : cost.backward)[static_cast<std::size_t>(j)];
        const std::vector<int>& lanes = job_layout.lane_ranks[p][static_cast<std::size_t>(j)];
        for (const int rank : lanes) {
          const InstructionTiming& t = report.instructions[static_cast<std::size_t>(rank)][k];
          const auto group = group_size.find({rank, in.micro_batch});
          const std::size_t met = !report.serialized ? 1 : group != group_size.end() ? group->second : lanes.size();
          seconds = std::max({seconds, (t.end - t.start) / static_cast<double>(met), resolution});
        }
        order.stages[static_cast<std::size_t>(j)].push_back(
            {in.micro_batch, forward ? schedule::Pass::forward : schedule::Pass::backward});
      }
    }
    const double replayed = schedule::simulate(replay, order).makespan;
    PipelineTiming pipeline_timing{nan, report.pipeline_makespan.at(p), replayed};
    if (pipeline.predicted) pipeline_timing.predicted = pipeline.predicted->makespan;
    for (std::size_t i = 0; i < m; ++i) {
      MicroBatchTiming row{static_cast<int>(p), static_cast<int>(i), replay.micro_batches[i].tokens, nan, 0, nan, 0};
      for (int j = 0; j < c; ++j) {
        row.measured_forward += replay.micro_batches[i].forward[static_cast<std::size_t>(j)];
        row.measured_backward += replay.micro_batches[i].backward[static_cast<std::size_t>(j)];
      }
      if (pipeline.predicted) {
        row.predicted_forward = row.predicted_backward = 0;
        for (const auto& stage : pipeline.predicted->stages)
          for (const schedule::OpTiming& op : stage)
            if (op.micro_batch == static_cast<int>(i))
              (op.pass == schedule::Pass::forward ? row.predicted_forward : row.predicted_backward) +=
                  op.end - op.start;
      }
      table.micro_batches.push_back(row);
    }
    table.pipelines.push_back(pipeline_timing);
  }
  const bool predicted = std::all_of(job.pipelines.begin(), job.pipelines.end(),
                                     [](const PipelineJob& pipeline) { return pipeline.predicted.has_value(); });
  table.predicted = predicted ? 0 : nan;
  for (const PipelineTiming& t : table.pipelines) {
    if (predicted) table.predicted = std::max(table.predicted, t.predicted);
    table.measured = std::max(table.measured, t.measured);
    table.replayed = std::max(table.replayed, t.replayed);
  }
  return table;
}

// The table as fixed-width text, times in milliseconds.
inline std::string format(const TimingTable& table) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(3);
  out << "pipeline  micro-batch  tokens   fwd predicted  fwd measured  bwd predicted  bwd measured   (ms, summed over "
         "stages)\n";
  for (const MicroBatchTiming& row : table.micro_batches)
    out << std::setw(8) << row.pipeline << std::setw(13) << row.micro_batch << std::setw(8) << row.tokens
        << std::setw(16) << row.predicted_forward * 1e3 << std::setw(14) << row.measured_forward * 1e3 << std::setw(15)
        << row.predicted_backward * 1e3 << std::setw(14) << row.measured_backward * 1e3 << "\n";
  out << "pipeline  predicted ms  measured ms  replayed ms\n";
  for (std::size_t p = 0; p < table.pipelines.size(); ++p)
    out << std::setw(8) << p << std::setw(14) << table.pipelines[p].predicted * 1e3 << std::setw(13)
        << table.pipelines[p].measured * 1e3 << std::setw(13) << table.pipelines[p].replayed * 1e3 << "\n";
  out << "iteration predicted " << table.predicted * 1e3 << " ms, measured " << table.measured * 1e3 << " ms, replayed "
      << table.replayed * 1e3 << " ms; prediction error " << std::setprecision(1) << 100 * table.measured_error()
      << "% of measured, " << 100 * table.replayed_error() << "% of replayed\n";
  return out.str();
}

}  // namespace sluice::executor
