#include "backend.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
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

Backend::Backend(const Job& job, const JobLayout& layout, const std::vector<int>& devices, bool serialize,
                 DeviceExchange* exchange)
    : job_(job), layout_(layout) {
  sluice::require(devices.size() == layout.ranks.size(), "CUDA backend: ", devices.size(), " devices for ",
                  layout.ranks.size(), " ranks");
  require_gpu_job(job);
  if (serialize)
    sluice::require(std::all_of(devices.begin(), devices.end(), [&](int d) { return d == devices.front(); }),
                    "CUDA backend: serialized ranks must share one device");
  ranks_.reserve(layout.ranks.size());
  for (std::size_t r = 0; r < layout.ranks.size(); ++r) {
    if (devices[r] < 0 || !layout.ranks[r].runs) {
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
    const auto pipeline = static_cast<std::size_t>(info.pipeline);
    const auto elements = static_cast<std::size_t>(layout.slot_elements[pipeline]);
    // A slot holds bf16 activations or int32 ids (tokens ≤ elements / hidden of them); 256-byte aligned slots.
    rank.slot_bytes = (std::max(elements * sizeof(bf16),
                                elements * sizeof(std::int32_t) / static_cast<std::size_t>(job.model.hidden)) +
                       255) /
                      256 * 256;
    rank.slots = DeviceBuffer(rank.slot_bytes * static_cast<std::size_t>(job.pipelines[pipeline].plan.buffer_slots));
    for (std::size_t i = 0; i < layout.micro_batches[pipeline].size(); ++i) {
      const LaneWork& work = layout.lane_work(static_cast<int>(r), static_cast<int>(i));
      rank.micro_batches.push_back(
          upload_micro_batch(layout.micro_batches[pipeline][i], layout.cp_splits[static_cast<std::size_t>(work.split)],
                             work.cp_rank, group_of(layout, work.ulysses_group, static_cast<int>(r)),
                             group_of(layout, work.ring_group, static_cast<int>(r)), rank.stream));
    }
    rank.losses = DeviceBuffer(layout.micro_batches[pipeline].size() * sizeof(float));
    rank.saved.resize(layout.micro_batches[pipeline].size());
    ranks_.push_back(std::move(rank));
  }
  // The stages: the lanes that hold the same shards (replicas, CP ranks) share one draw of their initial values, a
  // billion of them for four LLaMA-7B-shaped layers; one set is held at a time.
  using Shards = std::tuple<int, int, bool, bool, int, int>;  // layers, first, last, TP degree and rank
  std::map<Shards, std::vector<std::size_t>> holders;
  for (std::size_t r = 0; r < layout.ranks.size(); ++r) {
    const RankInfo& info = layout.ranks[r];
    if (ranks_[r].device >= 0)
      holders[{info.first_layer, info.end_layer, info.first, info.last, info.tp, info.tp_rank}].push_back(r);
  }
  for (const auto& [shards, members] : holders) {
    const RankInfo& held = layout.ranks[members.front()];
    const InitialShards initial =
        initial_shards(job.model, stage_tensors(job.model, held.first_layer, held.end_layer, held.first, held.last),
                       held.tp, held.tp_rank);
    for (const std::size_t r : members) {
      const RankInfo& info = layout.ranks[r];
      Rank& rank = ranks_[r];
      const DeviceScope scope(rank.device);
      const TensorParallelLane lane{info.tp, info.tp_rank, group_of(layout, info.tp_group, static_cast<int>(r)),
                                    exchange};
      rank.stage = std::make_unique<DeviceStage>(job.model, info.first_layer, info.end_layer, info.first, info.last,
                                                 info.recompute, *rank.allocator, lane, initial);
    }
  }
}

void* Backend::slot(int rank, int slot) const {
  const Rank& state = at(rank);
  return state.slots.as<std::byte>() + static_cast<std::size_t>(slot) * state.slot_bytes;
}

std::size_t Backend::payload_bytes(int rank, int micro_batch) const {
  return static_cast<std::size_t>(layout_.sequence_rows(rank, micro_batch).size() * job_.model.hidden) * sizeof(bf16);
}

void Backend::load_input(int rank, int micro_batch, int slot_id) {
  const Rank& state = at(rank);
  const DeviceMicroBatch& mb = state.micro_batches[static_cast<std::size_t>(micro_batch)];
  SLUICE_CUDA_CHECK(
      cudaMemcpyAsync(slot(rank, slot_id), mb.ids.as<void>(), mb.ids.bytes(), cudaMemcpyDeviceToDevice, state.stream));
}

void Backend::forward(int rank, int micro_batch, int input_slot, int output_slot) {
  Rank& state = at(rank);
  const auto i = static_cast<std::size_t>(micro_batch);
  state.stage->forward(state.micro_batches[i], slot(rank, input_slot),
                       output_slot >= 0 ? static_cast<bf16*>(slot(rank, output_slot)) : nullptr,
                       static_cast<float>(1.0 / static_cast<double>(layout_.total_targets)),
                       state.losses.as<float>() + i, state.saved[i]);
}

void Backend::backward(int rank, int micro_batch, int grad_slot, int output_slot) {
  Rank& state = at(rank);
  const auto i = static_cast<std::size_t>(micro_batch);
  state.stage->backward(state.micro_batches[i],
                        grad_slot >= 0 ? static_cast<const bf16*>(slot(rank, grad_slot)) : nullptr,
                        output_slot >= 0 ? static_cast<bf16*>(slot(rank, output_slot)) : nullptr, state.saved[i]);
}

Backend::Stamp Backend::stamp(int rank) {
  Rank& state = at(rank);
  state.events.emplace_back();
  state.events.back().record(state.stream);
  return {rank, static_cast<int>(state.events.size()) - 1};
}

double Backend::seconds(Stamp stamp) const {
  const DeviceScope scope(at(stamp.rank).device);
  return seconds_between(origin(stamp.rank), at(stamp.rank).events[static_cast<std::size_t>(stamp.event)]);
}

Backend::~Backend() {
  // Each rank's memory, events and streams belong to its device; a rank's members go in reverse order, so its
  // stream-ordered memory before the allocator and the stage that hand it out.
  while (!ranks_.empty()) {
    if (ranks_.back().device >= 0) detail::report_in_destructor(cudaSetDevice(ranks_.back().device), "cudaSetDevice");
    ranks_.pop_back();
  }
  while (!streams_.empty()) {
    detail::report_in_destructor(cudaSetDevice(stream_devices_.back()), "cudaSetDevice");
    streams_.pop_back();
    stream_devices_.pop_back();
  }
}

const Event& Backend::origin(int rank) const { return *at(at(rank).origin_rank).origin; }

void Backend::reset(int rank) {
  Rank& state = at(rank);
  state.events.clear();
  state.allocator->reset_peak();
  state.stage->zero_gradients();
  kernels::fill_zero(state.losses.as<float>(), static_cast<std::int64_t>(state.micro_batches.size()), state.stream);
  SLUICE_CUDA_CHECK(cudaStreamSynchronize(state.stream));
}

void Backend::mark_origin(int rank) {
  Rank& state = at(rank);
  if (state.origin_rank != rank) return;
  SLUICE_CUDA_CHECK(cudaDeviceSynchronize());
  if (!state.origin) state.origin = std::make_unique<Event>();
  state.origin->record(state.stream);
  SLUICE_CUDA_CHECK(cudaEventSynchronize(state.origin->get()));
}

std::vector<double> Backend::loss_sums(int rank) const {
  const Rank& state = at(rank);
  std::vector<float> sums(state.micro_batches.size());
  const DeviceScope scope(state.device);
  SLUICE_CUDA_CHECK(
      cudaMemcpy(sums.data(), state.losses.as<void>(), sums.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return {sums.begin(), sums.end()};
}

std::vector<double> Backend::download_gradient(int rank, std::size_t tensor) const {
  const Rank& state = at(rank);
  std::vector<float> values(state.stage->tensor_size(tensor));
  const DeviceScope scope(state.device);
  SLUICE_CUDA_CHECK(
      cudaMemcpy(values.data(), state.stage->gradient(tensor), values.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return {values.begin(), values.end()};
}

ModelResult collect_result(const Job& job, const JobLayout& layout, const Backend& backend, bool gradients) {
  std::vector<std::vector<double>> loss_sums(backend.ranks());
  for (int r = 0; r < static_cast<int>(backend.ranks()); ++r)
    if (backend.holds(r) && layout.ranks[static_cast<std::size_t>(r)].last)
      loss_sums[static_cast<std::size_t>(r)] = backend.loss_sums(r);
  return combine(
      job, layout, [&](int rank) { return std::span<const double>(loss_sums[static_cast<std::size_t>(rank)]); },
      [&](int rank, std::size_t tensor) { return backend.download_gradient(rank, tensor); }, gradients);
}

}  // namespace sluice::executor::cuda
