// The CUDA backend on the local transport: every rank on one GPU (sluice_executor/cuda.hpp, run_local).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backend.hpp"
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

// Several ranks on one GPU: a sent slot is copied device to device into the receiving slot when the send and the
// receive pair, on a copy stream per (receiver, sender). The copy waits for both Starts on their ranks' compute
// streams: the sent data is written, and whatever read the receiving slot before it was freed has finished.
class LocalTransport {
public:
  LocalTransport(Backend& backend, bool serialize) : backend_(backend), serialize_(serialize) {}

  void post(const Transfer& transfer) {
    ready_.try_emplace({transfer.rank, transfer.index}).first->second.record(backend_.stream(transfer.rank));
  }

  void transfer(const Transfer& send, const Transfer& receive) {
    const cudaStream_t stream = copy_stream(receive.rank, send.rank);
    SLUICE_CUDA_CHECK(cudaStreamWaitEvent(stream, ready_.at({send.rank, send.index}).get(), 0));
    SLUICE_CUDA_CHECK(cudaStreamWaitEvent(stream, ready_.at({receive.rank, receive.index}).get(), 0));
    Copy& copy = copies_.emplace_back();
    copy.from_rank = send.rank;
    copy.to_rank = receive.rank;
    copy.micro_batch = send.micro_batch;
    copy.activation = send.activation;
    copy.start.record(stream);
    const auto bytes = static_cast<std::size_t>(send.shape.rows * send.shape.cols) * sizeof(bf16);
    SLUICE_CUDA_CHECK(cudaMemcpyAsync(backend_.slot(receive.rank, receive.slot), backend_.slot(send.rank, send.slot),
                                      bytes, cudaMemcpyDeviceToDevice, stream));
    copy.done.record(stream);
    copy_of_[{send.rank, send.index}] = copy_of_[{receive.rank, receive.index}] = copies_.size() - 1;
  }

  void wait(const Transfer& transfer) {
    const Copy& copy = copies_[copy_of_.at({transfer.rank, transfer.index})];
    SLUICE_CUDA_CHECK(cudaStreamWaitEvent(backend_.stream(transfer.rank), copy.done.get(), 0));
  }

  // After the device has finished.
  [[nodiscard]] std::vector<TransferTiming> timings() const {
    std::vector<TransferTiming> result;
    for (const Copy& copy : copies_) {
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
    Event start, done;  // on the copy stream
  };

  cudaStream_t copy_stream(int receiver, int sender) {
    if (serialize_) return backend_.stream(receiver);
    return streams_.try_emplace({receiver, sender}).first->second.get();
  }

  Backend& backend_;
  bool serialize_;
  std::map<std::pair<int, int>, Stream> streams_;
  std::map<std::pair<int, int>, Event> ready_;  // by (rank, transfer index): the Start on the rank's compute stream
  std::vector<Copy> copies_;                    // in pairing order
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
  Backend backend(job, job_layout, devices, options.serialize);
  RunReport report;
  for (int iteration = 0; iteration <= options.warmup; ++iteration) {
    for (int r = 0; r < static_cast<int>(backend.ranks()); ++r)
      if (backend.holds(r)) backend.reset(r);
    backend.mark_origin(first_held(backend));
    LocalTransport transport(backend, options.serialize);
    auto interpreter = make_interpreter(job, job_layout, backend, transport);
    interpreter.run();
    SLUICE_CUDA_CHECK(cudaDeviceSynchronize());
    if (iteration == options.warmup) {
      report.instructions = interpreter.timings();
      report.transfers = transport.timings();
    }
  }
  report.result = reduce_on_device(job, backend);
  report.activation_peak_bytes = backend.activation_peaks();
  fill_makespans(job_layout, report);
  report.device = device_name(device) + (options.serialize ? " (local, serialized)" : " (local)");
  return report;
}

}  // namespace sluice::executor::cuda
