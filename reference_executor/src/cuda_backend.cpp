#include "cuda_backend.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sluice_executor/cuda_check.hpp"
#include "sluice/core/error.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/kernels.hpp"

namespace sluice::executor::cuda {

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // clears the error just reported, so later calls start clean
    return 0;
  }
  return count;
}

std::string device_name(int device) {
  cudaDeviceProp properties{};
  SLUICE_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  return properties.name;
}

CudaBackend::CudaBackend(const Job& job, const JobLayout& layout, const std::vector<int>& devices, bool serialize)
    : layout_(layout) {
  sluice::require(devices.size() == layout.ranks.size(), "CUDA backend: ", devices.size(), " devices for ",
                  layout.ranks.size(), " ranks");
  require_gpu_model(job.model);
  if (serialize)
    sluice::require(std::all_of(devices.begin(), devices.end(), [&](int d) { return d == devices.front(); }),
                    "CUDA backend: serialized ranks must share one device");
  ranks_.reserve(layout.ranks.size());
  for (std::size_t r = 0; r < layout.ranks.size(); ++r) {
    if (devices[r] < 0) {
      Rank elsewhere;
      elsewhere.device = -1;
      ranks_.push_back(std::move(elsewhere));
      continue;
    }
    const RankInfo& info = layout.ranks[r];
    const DeviceScope scope(devices[r]);
    if (!serialize || streams_.empty()) {
      streams_.push_back(std::make_unique<Stream>());
      stream_devices_.push_back(devices[r]);
    }
    Rank rank;
    rank.device = devices[r];
    rank.stream = streams_.back()->get();
    rank.origin_rank = static_cast<int>(std::find(devices.begin(), devices.end(), devices[r]) - devices.begin());
    rank.allocator = std::make_unique<StreamAllocator>(rank.stream);
    rank.stage = std::make_unique<DeviceStage>(job.model, info.first_layer, info.end_layer, info.first, info.last,
                                               *rank.allocator);
    const auto pipeline = static_cast<std::size_t>(info.pipeline);
    const auto elements = static_cast<std::size_t>(layout.slot_elements[pipeline]);
    // A slot holds bf16 activations or int32 ids (tokens ≤ elements / hidden of them); 256-byte aligned slots.
    rank.slot_bytes = (std::max(elements * sizeof(bf16),
                                elements * sizeof(std::int32_t) / static_cast<std::size_t>(job.model.hidden)) +
                       255) /
                      256 * 256;
    rank.slots = DeviceBuffer(rank.slot_bytes * static_cast<std::size_t>(job.pipelines[pipeline].plan.buffer_slots));
    for (const PackedMicroBatch& micro_batch : layout.micro_batches[pipeline])
      rank.micro_batches.push_back(upload_micro_batch(micro_batch, rank.stream));
    rank.losses = DeviceBuffer(layout.micro_batches[pipeline].size() * sizeof(float));
    rank.saved.resize(layout.micro_batches[pipeline].size());
    ranks_.push_back(std::move(rank));
  }
}

void* CudaBackend::slot(int rank, int slot) const {
  const Rank& state = at(rank);
  return state.slots.as<std::byte>() + static_cast<std::size_t>(slot) * state.slot_bytes;
}

void CudaBackend::load_input(int rank, int micro_batch, int slot_id) {
  const Rank& state = at(rank);
  const DeviceMicroBatch& mb = state.micro_batches[static_cast<std::size_t>(micro_batch)];
  SLUICE_CUDA_CHECK(
      cudaMemcpyAsync(slot(rank, slot_id), mb.ids.as<void>(), mb.ids.bytes(), cudaMemcpyDeviceToDevice, state.stream));
}

void CudaBackend::forward(int rank, int micro_batch, int input_slot, int output_slot) {
  Rank& state = at(rank);
  const auto i = static_cast<std::size_t>(micro_batch);
  state.stage->forward(state.micro_batches[i], slot(rank, input_slot),
                       output_slot >= 0 ? static_cast<bf16*>(slot(rank, output_slot)) : nullptr,
                       static_cast<float>(1.0 / static_cast<double>(layout_.total_targets)),
                       state.losses.as<float>() + i, state.saved[i]);
}

void CudaBackend::backward(int rank, int micro_batch, int grad_slot, int output_slot) {
  Rank& state = at(rank);
  const auto i = static_cast<std::size_t>(micro_batch);
  state.stage->backward(state.micro_batches[i],
                        grad_slot >= 0 ? static_cast<const bf16*>(slot(rank, grad_slot)) : nullptr,
                        output_slot >= 0 ? static_cast<bf16*>(slot(rank, output_slot)) : nullptr, state.saved[i]);
}

CudaBackend::Stamp CudaBackend::stamp(int rank) {
  Rank& state = at(rank);
  state.events.emplace_back();
  state.events.back().record(state.stream);
  return {rank, static_cast<int>(state.events.size()) - 1};
}

double CudaBackend::seconds(Stamp stamp) const {
  const DeviceScope scope(at(stamp.rank).device);
  return seconds_between(origin(stamp.rank), at(stamp.rank).events[static_cast<std::size_t>(stamp.event)]);
}

CudaBackend::~CudaBackend() {
  // Each rank's memory, events and streams belong to its device; a rank's members go in reverse order, so its
  // stream-ordered memory before the allocator and the stage that hand it out.
  while (!ranks_.empty()) {
    if (ranks_.back().device >= 0)
      detail::report_in_destructor(cudaSetDevice(ranks_.back().device), "cudaSetDevice");
    ranks_.pop_back();
  }
  while (!streams_.empty()) {
    detail::report_in_destructor(cudaSetDevice(stream_devices_.back()), "cudaSetDevice");
    streams_.pop_back();
    stream_devices_.pop_back();
  }
}

const Event& CudaBackend::origin(int rank) const { return *at(at(rank).origin_rank).origin; }

void CudaBackend::reset(int rank) {
  Rank& state = at(rank);
  state.events.clear();
  state.stage->zero_gradients();
  kernels::fill_zero(state.losses.as<float>(), static_cast<std::int64_t>(state.micro_batches.size()), state.stream);
  SLUICE_CUDA_CHECK(cudaStreamSynchronize(state.stream));
}

void CudaBackend::mark_origin(int rank) {
  Rank& state = at(rank);
  if (state.origin_rank != rank) return;
  SLUICE_CUDA_CHECK(cudaDeviceSynchronize());
  if (!state.origin) state.origin = std::make_unique<Event>();
  state.origin->record(state.stream);
  SLUICE_CUDA_CHECK(cudaEventSynchronize(state.origin->get()));
}

std::vector<double> CudaBackend::loss_sums(int rank) const {
  const Rank& state = at(rank);
  std::vector<float> sums(state.micro_batches.size());
  const DeviceScope scope(state.device);
  SLUICE_CUDA_CHECK(
      cudaMemcpy(sums.data(), state.losses.as<void>(), sums.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return {sums.begin(), sums.end()};
}

double CudaBackend::loss() const {
  double sum = 0;
  for (std::size_t r = 0; r < ranks_.size(); ++r)
    if (layout_.ranks[r].last)
      for (const double value : loss_sums(static_cast<int>(r))) sum += value;
  return sum / static_cast<double>(layout_.total_targets);
}

std::vector<double> CudaBackend::download_gradient(int rank, std::size_t tensor) const {
  const Rank& state = at(rank);
  std::vector<float> values(state.stage->tensor_size(tensor));
  const DeviceScope scope(state.device);
  SLUICE_CUDA_CHECK(
      cudaMemcpy(values.data(), state.stage->gradient(tensor), values.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return {values.begin(), values.end()};
}

namespace {

// The ranks holding each tensor, in rank (so pipeline) order.
std::vector<std::vector<int>> holders(const Job& job, const CudaBackend& backend) {
  std::vector<std::vector<int>> result(tensor_count(job.model));
  for (int r = 0; r < static_cast<int>(backend.ranks()); ++r) {
    const TensorRange range = backend.stage(r).tensors();
    for (std::size_t t = range.begin; t < range.end; ++t) result[t].push_back(r);
  }
  return result;
}

}  // namespace

ModelResult collect_result(const Job& job, const CudaBackend& backend) {
  ModelResult result;
  result.loss = backend.loss();
  for (const std::vector<int>& ranks : holders(job, backend))
    result.gradients.push_back(backend.download_gradient(ranks.front(), result.gradients.size()));
  return result;
}

ModelResult reduce_on_device(const Job& job, CudaBackend& backend) {
  const std::vector<std::vector<int>> ranks_of = holders(job, backend);
  for (std::size_t t = 0; t < ranks_of.size(); ++t) {
    const int target = ranks_of[t].front();
    const DeviceStage& stage = backend.stage(target);
    const DeviceScope scope(backend.device(target));
    const float one = 1.0f;
    for (std::size_t k = 1; k < ranks_of[t].size(); ++k)
      SLUICE_CUBLAS_CHECK(cublasSaxpy_64(stage.cublas(), static_cast<std::int64_t>(stage.tensor_size(t)), &one,
                                         backend.stage(ranks_of[t][k]).gradient(t), 1, stage.gradient(t), 1));
    SLUICE_CUDA_CHECK(cudaStreamSynchronize(stage.stream()));
  }
  return collect_result(job, backend);
}

namespace {

// Several ranks on one GPU: a sent slot is copied device to device into the receiving slot when the send and the
// receive pair, on a copy stream per (receiver, sender). The copy waits for both Starts on their ranks' compute
// streams: the sent data is written, and whatever read the receiving slot before it was freed has finished.
class LocalTransport {
public:
  LocalTransport(CudaBackend& backend, bool serialize) : backend_(backend), serialize_(serialize) {}

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

  CudaBackend& backend_;
  bool serialize_;
  std::map<std::pair<int, int>, Stream> streams_;
  std::map<std::pair<int, int>, Event> ready_;  // by (rank, transfer index): the Start on the rank's compute stream
  std::vector<Copy> copies_;                    // in pairing order
  std::map<std::pair<int, int>, std::size_t> copy_of_;  // (rank, transfer index) of either end -> its copy
};

}  // namespace

RunReport run_local(const Job& job, const LocalOptions& options) {
  sluice::require(options.warmup >= 0, "run_local: warmup must be >= 0, got ", options.warmup);
  const JobLayout job_layout = layout(job);
  require_gpu_model(job.model);
  const int devices = device_count();
  if (options.device < 0 || options.device >= devices)
    throw std::runtime_error("run_local: no CUDA device " + std::to_string(options.device) + " (" +
                             std::to_string(devices) + " visible)");
  const DeviceScope scope(options.device);
  CudaBackend backend(job, job_layout, std::vector<int>(job_layout.ranks.size(), options.device), options.serialize);
  RunReport report;
  for (int iteration = 0; iteration <= options.warmup; ++iteration) {
    for (int r = 0; r < static_cast<int>(backend.ranks()); ++r) backend.reset(r);
    backend.mark_origin(0);
    LocalTransport transport(backend, options.serialize);
    auto interpreter = make_interpreter(job, backend, transport);
    interpreter.run();
    SLUICE_CUDA_CHECK(cudaDeviceSynchronize());
    if (iteration == options.warmup) {
      report.instructions = interpreter.timings();
      report.transfers = transport.timings();
    }
  }
  report.result = reduce_on_device(job, backend);
  fill_makespans(job_layout, report);
  report.device = device_name(options.device) + (options.serialize ? " (local, serialized)" : " (local)");
  return report;
}

}  // namespace sluice::executor::cuda
