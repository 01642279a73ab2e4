// The CUDA backend on the local transport: every rank on one GPU, each on a host thread of its own
// (sluice_executor/cuda.hpp, run_local).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "collectives.hpp"
#include "device.hpp"
#include "sluice/core/error.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/cuda_check.hpp"

namespace sluice::executor::cuda {

namespace {

int first_held(const Backend& backend) {
  int rank = 0;
  while (!backend.holds(rank)) ++rank;
  return rank;
}

// Several ranks on one GPU, each stepped on its own thread: a sent slot is copied device to device into the
// receiving slot once the send and the receive have both started (whichever Start comes second issues the copy),
// on a copy stream per (receiver, sender). The copy waits for both Starts on their ranks' compute streams: the sent
// data is written, and whatever read the receiving slot before has finished. A Wait blocks its thread until its
// operation has paired, as the plan's dry run assumes, and makes its compute stream wait for the copy. Serialized,
// every rank's work goes onto one stream, so each pass takes its turn (StageTurns): the kernels between its stamps
// are its stage's alone, not whatever another thread issued meanwhile.
class LocalTransport {
public:
  static constexpr bool pairs_itself = true;

  LocalTransport(Backend& backend, bool serialize, double timeout_seconds)
      : backend_(backend), serialize_(serialize), timeout_(timeout_seconds), turns_(timeout_seconds) {}

  StageTurns::Turn pass_turn(int key) { return serialize_ ? turns_.take(key) : StageTurns::Turn{}; }

  void post(const Transfer& transfer) {
    const std::lock_guard lock(mutex_);
    ready_.try_emplace({transfer.rank, transfer.index}).first->second.record(backend_.stream(transfer.rank));
    const std::pair<int, int> link =
        transfer.send ? std::pair(transfer.rank, transfer.peer) : std::pair(transfer.peer, transfer.rank);
    std::deque<Transfer>& others = (transfer.send ? receives_ : sends_)[link];
    if (others.empty()) {
      (transfer.send ? sends_ : receives_)[link].push_back(transfer);
      return;
    }
    const Transfer other = others.front();
    others.pop_front();
    copy(transfer.send ? transfer : other, transfer.send ? other : transfer);
    paired_.notify_all();
  }

  void wait(const Transfer& transfer) {
    std::unique_lock lock(mutex_);
    const std::pair<int, int> key{transfer.rank, transfer.index};
    wait_for_peers(paired_, lock, timeout_, stopped_, sluice::concat("rank ", transfer.peer),
                   [&] { return copy_of_.contains(key); });
    const Copy& copy = copies_[copy_of_.at(key)];
    if (!copy.error.empty()) throw transport_error(copy.error);
    SLUICE_CUDA_CHECK(cudaStreamWaitEvent(backend_.stream(transfer.rank), copy.done.get(), 0));
  }

  // Makes every waiting and later Wait throw: another rank failed.
  void stop() {
    {
      const std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    paired_.notify_all();
    turns_.stop();
  }

  // After the device has finished.
  [[nodiscard]] std::vector<TransferTiming> timings() const {
    std::vector<TransferTiming> result;
    for (const Copy& copy : copies_) {
      if (!copy.error.empty()) continue;
      const Event& origin = backend_.origin(copy.to_rank);
      result.push_back({copy.from_rank, copy.to_rank, copy.micro_batch, copy.activation,
                        seconds_between(origin, copy.start), seconds_between(origin, copy.done)});
    }
    return result;
  }

private:
  struct Copy {
    int from_rank = 0;
    int to_rank = 0;
    int micro_batch = 0;
    bool activation = false;
    std::string error;  // a send paired with the receive of another tensor: both Waits report it
    Event start, done;  // on the copy stream
  };

  // With the lock held.
  void copy(const Transfer& send, const Transfer& receive) {
    Copy& copy = copies_.emplace_back();
    copy_of_[{send.rank, send.index}] = copy_of_[{receive.rank, receive.index}] = copies_.size() - 1;
    copy.from_rank = send.rank;
    copy.to_rank = receive.rank;
    copy.micro_batch = send.micro_batch;
    copy.activation = send.activation;
    const std::size_t bytes = backend_.payload_bytes(send.rank, send.micro_batch);
    if (send.activation != receive.activation || send.micro_batch != receive.micro_batch ||
        send.shape != receive.shape || bytes != backend_.payload_bytes(receive.rank, receive.micro_batch)) {
      copy.error =
          sluice::concat("mismatch: the receive of ", receive.activation ? "activation" : "gradient", " micro-batch ",
                         receive.micro_batch, " [", receive.shape.rows, ", ", receive.shape.cols, "] from rank ",
                         send.rank, " met the send of ", send.activation ? "activation" : "gradient", " micro-batch ",
                         send.micro_batch, " [", send.shape.rows, ", ", send.shape.cols, "]");
      return;
    }
    const cudaStream_t stream = copy_stream(receive.rank, send.rank);
    SLUICE_CUDA_CHECK(cudaStreamWaitEvent(stream, ready_.at({send.rank, send.index}).get(), 0));
    SLUICE_CUDA_CHECK(cudaStreamWaitEvent(stream, ready_.at({receive.rank, receive.index}).get(), 0));
    copy.start.record(stream);
    SLUICE_CUDA_CHECK(cudaMemcpyAsync(backend_.slot(receive.rank, receive.slot), backend_.slot(send.rank, send.slot),
                                      bytes, cudaMemcpyDeviceToDevice, stream));
    copy.done.record(stream);
  }

  cudaStream_t copy_stream(int receiver, int sender) {
    if (serialize_) return backend_.stream(receiver);
    return streams_.try_emplace({receiver, sender}).first->second.get();
  }

  Backend& backend_;
  bool serialize_;
  double timeout_;
  StageTurns turns_;
  std::mutex mutex_;
  std::condition_variable paired_;
  bool stopped_ = false;
  std::map<std::pair<int, int>, Stream> streams_;
  std::map<std::pair<int, int>, Event> ready_;  // by (rank, transfer index): the Start on the rank's compute stream
  std::map<std::pair<int, int>, std::deque<Transfer>> sends_, receives_;  // by (sender, receiver): not yet paired
  std::deque<Copy> copies_;                                               // in pairing order
  std::map<std::pair<int, int>, std::size_t> copy_of_;  // (rank, transfer index) of either end -> its copy
};

}  // namespace

RunReport run_local(const Job& job, const RunOptions& options) {
  require_valid(options);
  const JobLayout job_layout = layout(job, options.checks);
  require_gpu_job(job);
  const int device = std::max(options.device, 0);
  const int visible = device_count();
  if (device >= visible)
    throw std::runtime_error("run_local: no CUDA device " + std::to_string(device) + " (" + std::to_string(visible) +
                             " visible)");
  const DeviceScope scope(device);
  std::vector<int> devices;
  for (const RankInfo& info : job_layout.ranks) devices.push_back(info.runs ? device : -1);
  LocalExchange exchange(options.timeout_seconds);
  Backend backend(job, job_layout, devices, options.serialize, &exchange);
  RunReport report;
  for (int iteration = 0; iteration <= options.warmup; ++iteration) {
    for (int r = 0; r < static_cast<int>(backend.ranks()); ++r)
      if (backend.holds(r)) backend.reset(r);
    backend.mark_origin(first_held(backend));
    LocalTransport transport(backend, options.serialize, options.timeout_seconds);
    auto interpreter = make_interpreter(job, job_layout, backend, transport);
    step_on_threads(
        interpreter, static_cast<int>(backend.ranks()), [&](int rank) { return backend.holds(rank); },
        [&] {
          transport.stop();
          exchange.stop();
        },
        [device] { SLUICE_CUDA_CHECK(cudaSetDevice(device)); });
    SLUICE_CUDA_CHECK(cudaDeviceSynchronize());
    if (iteration == options.warmup) {
      report.instructions = interpreter.timings();
      report.transfers = transport.timings();
    }
  }
  report.result = collect_result(job, job_layout, backend, options.gradients);
  report.activation_peak_bytes = backend.activation_peaks();
  fill_makespans(job_layout, report);
  report.device = device_name(device) + (options.serialize ? " (local, serialized)" : " (local)");
  report.serialized = options.serialize;
  return report;
}

}  // namespace sluice::executor::cuda
