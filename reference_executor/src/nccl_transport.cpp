// One GPU per rank: a host thread per rank runs the rank's instructions; sends and receives are NCCL
// point-to-point operations on a communicator per neighbouring pair of stages, issued on a stream per (rank, peer).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cuda_backend.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "device.hpp"
#include "sluice/core/error.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/interpreter.hpp"

#ifdef SLUICE_EXECUTOR_HAVE_NCCL
#include <nccl.h>
#endif

namespace sluice::executor::cuda {

bool nccl_available() noexcept {
#ifdef SLUICE_EXECUTOR_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

#ifndef SLUICE_EXECUTOR_HAVE_NCCL

RunReport run_nccl(const Job& /*job*/, const NcclOptions& /*options*/) {
  throw std::runtime_error("run_nccl: this build of the executor has no NCCL transport (NCCL was not found)");
}

#else

namespace {

void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status != ncclSuccess) detail::fail_call(call, file, line, ncclGetErrorString(status));
}
#define SLUICE_NCCL_CHECK(call) check_nccl((call), #call, __FILE__, __LINE__)

// A two-rank communicator for every link between neighbouring stages (so the operations of a link run in the
// order both ends issue them, as the plan's deadlock-freedom assumes) and one over all ranks for the gradients.
class Communicators {
public:
  Communicators(const JobLayout& layout, const std::vector<int>& devices)
      : links_(layout.ranks.size(), {nullptr, nullptr}), all_(layout.ranks.size(), nullptr) {
    for (std::size_t r = 0; r + 1 < layout.ranks.size(); ++r) {
      if (layout.ranks[r].last) continue;  // the next rank starts another pipeline
      const int pair_devices[2] = {devices[r], devices[r + 1]};
      SLUICE_NCCL_CHECK(ncclCommInitAll(links_[r].data(), 2, pair_devices));
    }
    SLUICE_NCCL_CHECK(ncclCommInitAll(all_.data(), static_cast<int>(all_.size()), devices.data()));
  }
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;
  ~Communicators() {
    auto release = [this](ncclComm_t comm) {
      if (comm == nullptr) return;
      const ncclResult_t status = aborted_ ? ncclSuccess : ncclCommDestroy(comm);
      if (status != ncclSuccess)
        std::fprintf(stderr, "sluice executor: ncclCommDestroy failed: %s\n", ncclGetErrorString(status));
    };
    for (const auto& link : links_)
      for (const ncclComm_t comm : link) release(comm);
    for (const ncclComm_t comm : all_) release(comm);
  }

  // After a failure: unblocks and frees every communicator.
  void abort() noexcept {
    auto abort_one = [](ncclComm_t comm) {
      if (comm != nullptr) static_cast<void>(ncclCommAbort(comm));  // nothing is left to report to
    };
    for (const auto& link : links_)
      for (const ncclComm_t comm : link) abort_one(comm);
    for (const ncclComm_t comm : all_) abort_one(comm);
    aborted_ = true;
  }

  // The rank's end of its link to `peer` (rank ± 1), and the peer's index in it.
  [[nodiscard]] ncclComm_t link(int rank, int peer) const {
    return peer > rank ? links_[static_cast<std::size_t>(rank)][0] : links_[static_cast<std::size_t>(peer)][1];
  }
  [[nodiscard]] static int peer_index(int rank, int peer) { return peer > rank ? 1 : 0; }
  [[nodiscard]] ncclComm_t all(int rank) const { return all_[static_cast<std::size_t>(rank)]; }

private:
  std::vector<std::array<ncclComm_t, 2> > links_;  // by the link's lower rank
  std::vector<ncclComm_t> all_;
  bool aborted_ = false;
};

// Each rank's thread touches only that rank's state here.
class NcclTransport {
public:
  static constexpr bool pairs_itself = true;

  NcclTransport(CudaBackend& backend, const Communicators& communicators)
      : backend_(backend), communicators_(communicators), ranks_(backend.ranks()) {}
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;
  ~NcclTransport() {
    // Streams and events belong to their rank's device.
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      detail::report_in_destructor(cudaSetDevice(backend_.device(static_cast<int>(r))), "cudaSetDevice");
      ranks_[r].records.clear();
      ranks_[r].streams.clear();
    }
  }

  void post(const Transfer& transfer) {
    RankState& state = ranks_[static_cast<std::size_t>(transfer.rank)];
    const cudaStream_t stream = state.streams.try_emplace(transfer.peer).first->second.get();
    Record& record = state.records.emplace_back();
    record.transfer = transfer;
    record.ready.record(backend_.stream(transfer.rank));
    SLUICE_CUDA_CHECK(cudaStreamWaitEvent(stream, record.ready.get(), 0));
    record.start.record(stream);
    void* data = backend_.slot(transfer.rank, transfer.slot);
    const auto count = static_cast<std::size_t>(transfer.shape.rows * transfer.shape.cols);
    const ncclComm_t comm = communicators_.link(transfer.rank, transfer.peer);
    const int peer = Communicators::peer_index(transfer.rank, transfer.peer);
    if (transfer.send) SLUICE_NCCL_CHECK(ncclSend(data, count, ncclBfloat16, peer, comm, stream));
    else SLUICE_NCCL_CHECK(ncclRecv(data, count, ncclBfloat16, peer, comm, stream));
    record.done.record(stream);
  }

  void wait(const Transfer& transfer) {
    const Record& record =
        ranks_[static_cast<std::size_t>(transfer.rank)].records[static_cast<std::size_t>(transfer.index)];
    SLUICE_CUDA_CHECK(cudaStreamWaitEvent(backend_.stream(transfer.rank), record.done.get(), 0));
  }

  // Receives, as the receiving rank timed them; after every device has finished.
  [[nodiscard]] std::vector<TransferTiming> timings() const {
    std::vector<TransferTiming> result;
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      const DeviceScope scope(backend_.device(static_cast<int>(r)));
      const Event& origin = backend_.origin(static_cast<int>(r));
      for (const Record& record : ranks_[r].records)
        if (!record.transfer.send)
          result.push_back({record.transfer.peer, record.transfer.rank, record.transfer.micro_batch,
                            record.transfer.activation, seconds_between(origin, record.start),
                            seconds_between(origin, record.done)});
    }
    return result;
  }

private:
  struct Record {
    Transfer transfer;
    Event ready, start, done;
  };
  struct RankState {
    std::map<int, Stream> streams;  // by peer
    std::vector<Record> records;    // by transfer index
  };

  CudaBackend& backend_;
  const Communicators& communicators_;
  std::vector<RankState> ranks_;
};

// Waits for `done` without blocking forever when another rank's thread has failed (its peers' NCCL operations
// would then never complete).
void wait_unless_failed(const Event& done, const std::atomic<bool>& failed) {
  for (;;) {
    const cudaError_t status = cudaEventQuery(done.get());
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) SLUICE_CUDA_CHECK(status);
    if (failed.load()) throw std::runtime_error("run_nccl: stopped because another rank failed");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

RunReport run_nccl(const Job& job, const NcclOptions& options) {
  sluice::require(options.warmup >= 0, "run_nccl: warmup must be >= 0, got ", options.warmup);
  const JobLayout job_layout = layout(job);  // its dry run rejects a plan NCCL would deadlock on
  require_gpu_model(job.model);
  const int ranks = static_cast<int>(job_layout.ranks.size());
  const int visible = device_count();
  if (options.first_device < 0 || options.first_device + ranks > visible)
    throw std::runtime_error("run_nccl: the job has " + std::to_string(ranks) + " ranks, devices from " +
                             std::to_string(options.first_device) + " on; " + std::to_string(visible) + " visible");
  std::vector<int> devices(static_cast<std::size_t>(ranks));
  std::iota(devices.begin(), devices.end(), options.first_device);
  CudaBackend backend(job, job_layout, devices, false);
  Communicators communicators(job_layout, devices);

  // Ranks without a tensor all-reduce zeros into a scratch buffer, so every rank joins every tensor's all-reduce.
  const std::vector<ParameterTensor> tensors = parameter_tensors(job.model);
  std::size_t largest = 0;
  for (const ParameterTensor& tensor : tensors) largest = std::max(largest, tensor.size());
  std::vector<DeviceBuffer> zeros, scratch;
  for (const int device : devices) {
    const DeviceScope scope(device);
    zeros.emplace_back(largest * sizeof(float));
    scratch.emplace_back(largest * sizeof(float));
    SLUICE_CUDA_CHECK(cudaMemset(zeros.back().as<void>(), 0, zeros.back().bytes()));
  }

  RunReport report;
  for (int iteration = 0; iteration <= options.warmup; ++iteration) {
    NcclTransport transport(backend, communicators);
    auto interpreter = make_interpreter(job, backend, transport);
    std::barrier start_line(ranks);
    std::atomic<bool> failed{false};
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
    auto run_rank = [&](int rank) {
      const auto r = static_cast<std::size_t>(rank);
      bool arrived = false;
      try {
        SLUICE_CUDA_CHECK(cudaSetDevice(devices[r]));
        backend.reset(rank);
        arrived = true;
        start_line.arrive_and_wait();
        backend.mark_origin(rank);
        while (!interpreter.finished(rank)) interpreter.step(rank);
        const DeviceStage& stage = backend.stage(rank);
        for (std::size_t t = 0; t < tensors.size(); ++t) {
          const bool holds = stage.tensors().contains(t);
          SLUICE_NCCL_CHECK(ncclAllReduce(holds ? stage.gradient(t) : zeros[r].as<float>(),
                                          holds ? stage.gradient(t) : scratch[r].as<float>(), tensors[t].size(),
                                          ncclFloat32, ncclSum, communicators.all(rank), backend.stream(rank)));
        }
        const Event done;
        done.record(backend.stream(rank));
        wait_unless_failed(done, failed);
      } catch (...) {
        errors[r] = std::current_exception();
        failed = true;
        if (!arrived) start_line.arrive_and_drop();
      }
    };
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) threads.emplace_back(run_rank, r);
    for (std::thread& thread : threads) thread.join();
    if (failed) {
      communicators.abort();
      for (const std::exception_ptr& error : errors)
        if (error) std::rethrow_exception(error);
    }
    if (iteration == options.warmup) {
      report.instructions = interpreter.timings();
      report.transfers = transport.timings();
    }
  }
  report.result = collect_result(job, backend);
  fill_makespans(job_layout, report);
  report.device = std::to_string(ranks) + " × " + device_name(options.first_device) + " (NCCL)";
  return report;
}

#endif

}  // namespace sluice::executor::cuda
