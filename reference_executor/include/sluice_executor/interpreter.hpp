#pragma once
// The executor's side of the interpreter: the library's schedule::Interpreter (sluice/schedule/interpreter.hpp), which
// defines what a plan means, run over a job's lanes and compute groups with the executor's backends and transports,
// and what a run reports.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
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

// The threads of one process waiting for their peers (the local transports and exchanges): waits on `changed` until
// `ready()`, throwing transport_error once `stopped` is set (another rank failed, so the peer may never come) or
// after `timeout_seconds`. `peers` names what is awaited ("rank 3").
template <class Ready>
void wait_for_peers(std::condition_variable& changed, std::unique_lock<std::mutex>& lock, double timeout_seconds,
                    const bool& stopped, std::string_view peers, Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  while (!ready()) {
    if (stopped) throw transport_error(sluice::concat("stopped waiting for ", peers, ": another rank failed"));
    if (changed.wait_until(lock, deadline) == std::cv_status::timeout && !ready())
      throw transport_error(sluice::concat("timed out after ", timeout_seconds, " s waiting for ", peers));
  }
}

// Turns at the passes of ranks whose work goes onto one stream (the serialized CUDA run), for a transport's
// pass_turn (sluice/schedule/interpreter.hpp): the passes of one key (a stage's lanes, which meet at the collectives
// inside their passes) run together and exclude every other key's, so that the kernels between a pass's stamps are
// its own and its measured time is free of the others'. Only passes take turns, never a Wait, so a rank waiting for
// a peer holds none.
class StageTurns {
public:
  class Turn {
  public:
    Turn() = default;
    Turn(Turn&& other) noexcept : turns_(std::exchange(other.turns_, nullptr)) {}
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    Turn& operator=(Turn&&) = delete;
    ~Turn() {
      if (turns_) turns_->release();
    }

  private:
    friend class StageTurns;
    explicit Turn(StageTurns* turns) : turns_(turns) {}
    StageTurns* turns_ = nullptr;
  };

  explicit StageTurns(double timeout_seconds) : timeout_(timeout_seconds) {}

  // Blocks until no pass of another key is running; throws transport_error after the timeout or once stop() was
  // called.
  [[nodiscard]] Turn take(int key) {
    std::unique_lock lock(mutex_);
    wait_for_peers(free_, lock, timeout_, stopped_, "the passes of another stage",
                   [&] { return holders_ == 0 || owner_ == key; });
    owner_ = key;
    ++holders_;
    return Turn(this);
  }

  void stop() {
    {
      const std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    free_.notify_all();
  }

private:
  void release() {
    {
      const std::lock_guard lock(mutex_);
      --holders_;
    }
    free_.notify_all();
  }

  double timeout_;
  std::mutex mutex_;
  std::condition_variable free_;
  int owner_ = 0;
  int holders_ = 0;
  bool stopped_ = false;
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
  std::vector<std::vector<double>> gradients;  // empty when the run was asked for the loss alone
};

// The loss and the parameter gradients of a run, from every rank's per-micro-batch cross-entropy sums
// (`loss_sums(rank)`, empty off the last stages) and its TP shards of the gradients of the tensors it holds
// (`gradient(rank, tensor)`): the loss summed in rank and micro-batch order, each tensor's gradient the sum over
// ranks in rank order of their shards placed in it (over DP, CP and, for the replicated norms, TP). One function,
// so that a run gathered from many processes adds exactly as a run in one process does. Without `gradients`, the
// loss alone (RunOptions::gradients).
template <class LossSums, class Gradient>
ModelResult combine(const Job& job, const JobLayout& layout, LossSums loss_sums, Gradient gradient,
                    bool gradients = true) {
  ModelResult result;
  for (int r = 0; r < layout.rank_count(); ++r)
    if (layout.ranks[static_cast<std::size_t>(r)].runs)
      for (const double sum : loss_sums(r)) result.loss += sum;
  result.loss /= static_cast<double>(layout.total_targets);
  if (!gradients) return result;
  const std::vector<ParameterTensor> tensors = parameter_tensors(job.model);
  result.gradients.resize(tensors.size());
  for (std::size_t t = 0; t < tensors.size(); ++t) result.gradients[t].assign(tensors[t].size(), 0.0);
  for (int r = 0; r < layout.rank_count(); ++r) {
    const RankInfo& info = layout.ranks[static_cast<std::size_t>(r)];
    if (!info.runs) continue;
    const TensorRange range = stage_tensors(job.model, info.first_layer, info.end_layer, info.first, info.last);
    for (std::size_t t = range.begin; t < range.end; ++t)
      add_shard(tensors[t], gradient(r, t), info.tp, info.tp_rank, result.gradients[t]);
  }
  return result;
}

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
  bool serialized = false;  // every rank's work on one stream, its passes taking turns (cuda::run_local)
};

// The interpreter over the job's lanes (ranks as JobLayout places them) and its compute groups; its errors start
// with "executor".
template <schedule::Backend B, schedule::Transport T>
schedule::Interpreter<B, T> make_interpreter(const Job& job, const JobLayout& layout, B& backend, T& transport) {
  return schedule::Interpreter<B, T>(layout.pipeline_ranks(job.pipelines), layout.compute_groups, backend, transport,
                                     {.context = "executor"});
}

// Steps every rank that `runs(rank)` on a thread of its own, each calling `prepare()` first (to bind its device);
// a transport's failure is reported with the rank's place in its list, and any failure calls `stop()` so that the
// other ranks stop waiting. Rethrows the first failure that is not another rank's having stopped this one.
template <class Interpreter, class Runs, class Stop, class Prepare>
void step_on_threads(Interpreter& interpreter, int ranks, Runs runs, Stop stop, Prepare prepare) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  {
    std::vector<std::jthread> threads;
    for (int rank = 0; rank < ranks; ++rank) {
      if (!runs(rank)) continue;
      threads.emplace_back([&, rank] {
        try {
          prepare();
          try {
            while (!interpreter.finished(rank)) interpreter.step(rank);
          } catch (const transport_error& error) {
            throw invalid_plan(sluice::concat("executor: ", interpreter.where(rank), ": ", error.what()));
          }
        } catch (...) {
          errors[static_cast<std::size_t>(rank)] = std::current_exception();
          stop();
        }
      });
    }
  }
  std::exception_ptr stopped;
  for (const std::exception_ptr& error : errors) {
    if (!error) continue;
    try {
      std::rethrow_exception(error);
    } catch (const invalid_plan& failure) {
      if (std::string(failure.what()).find("another rank failed") == std::string::npos) std::rethrow_exception(error);
      if (!stopped) stopped = error;
    } catch (...) {
      std::rethrow_exception(error);
    }
  }
  if (stopped) std::rethrow_exception(stopped);
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
