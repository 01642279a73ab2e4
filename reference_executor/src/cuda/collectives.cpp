#include "collectives.hpp"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/shards.hpp"

namespace sluice::executor::cuda {

void LocalExchange::all_to_all(const Group& group, std::span<const SendPart> sends,
                               std::span<const ReceivePart> receives, cudaStream_t stream) {
  const int size = group.size();
  const int me = group.index;
  std::unique_lock lock(mutex_);
  const std::int64_t call = calls_[{group.id, me}]++;
  std::shared_ptr<Round>& slot = rounds_[{group.id, call}];
  if (!slot) slot = std::make_shared<Round>(size);
  const std::shared_ptr<Round> round = slot;
  round->sends[static_cast<std::size_t>(me)].assign(sends.begin(), sends.end());
  round->ready[static_cast<std::size_t>(me)].record(stream);
  ++round->posted;
  changed_.notify_all();
  const std::string members = sluice::concat("the members of group ", group.id);
  wait_for_peers(changed_, lock, timeout_, stopped_, members, [&] { return round->posted == size; });
  for (int j = 0; j < size; ++j) {
    const SendPart& part = round->sends[static_cast<std::size_t>(j)][static_cast<std::size_t>(me)];
    const ReceivePart& into = receives[static_cast<std::size_t>(j)];
    if (part.bytes != into.bytes)
      throw transport_error(sluice::concat("mismatch: member ", j, " of group ", group.id, " sends ", part.bytes,
                                           " bytes where member ", me, " expects ", into.bytes));
    if (j != me) SLUICE_CUDA_CHECK(cudaStreamWaitEvent(stream, round->ready[static_cast<std::size_t>(j)].get(), 0));
    if (part.bytes > 0)
      SLUICE_CUDA_CHECK(cudaMemcpyAsync(into.data, part.data, part.bytes, cudaMemcpyDeviceToDevice, stream));
  }
  round->done[static_cast<std::size_t>(me)].record(stream);
  ++round->copied;
  changed_.notify_all();
  wait_for_peers(changed_, lock, timeout_, stopped_, members, [&] { return round->copied == size; });
  for (int j = 0; j < size; ++j)
    if (j != me) SLUICE_CUDA_CHECK(cudaStreamWaitEvent(stream, round->done[static_cast<std::size_t>(j)].get(), 0));
  if (++round->left == size) rounds_.erase({group.id, call});
}

void LocalExchange::stop() {
  {
    const std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  changed_.notify_all();
}

namespace {

std::size_t bf16_bytes(std::int64_t rows, std::int64_t cols) {
  return static_cast<std::size_t>(rows * cols) * sizeof(bf16);
}

}  // namespace

void DeviceCollectives::all_gather(const Group& group, const bf16* mine, std::int64_t rows, std::int64_t cols,
                                   bf16* all) const {
  const int size = group.size();
  const RowRange own = even_part(rows, size, group.index);
  const std::vector<SendPart> sends(static_cast<std::size_t>(size), SendPart{mine, bf16_bytes(own.size(), cols)});
  std::vector<ReceivePart> receives;
  for (int j = 0; j < size; ++j) {
    const RowRange part = even_part(rows, size, j);
    receives.push_back({all + part.begin * cols, bf16_bytes(part.size(), cols)});
  }
  exchange_->all_to_all(group, sends, receives, allocator_.stream());
}

void DeviceCollectives::reduce_scatter(const Group& group, const bf16* full, std::int64_t rows, std::int64_t cols,
                                       bf16* mine) const {
  const int size = group.size();
  const std::int64_t count = even_part(rows, size, group.index).size() * cols;
  const Scratch<bf16> parts(allocator_, static_cast<std::size_t>(count * size));
  std::vector<SendPart> sends;
  std::vector<ReceivePart> receives;
  for (int j = 0; j < size; ++j) {
    const RowRange part = even_part(rows, size, j);
    sends.push_back({full + part.begin * cols, bf16_bytes(part.size(), cols)});
    receives.push_back({parts.get() + j * count, static_cast<std::size_t>(count) * sizeof(bf16)});
  }
  exchange_->all_to_all(group, sends, receives, allocator_.stream());
  if (count > 0) kernels::sum_parts(parts.get(), size, count, mine, allocator_.stream());
}

Scratch<float> DeviceCollectives::gather_values(const Group& group, const float* values, std::int64_t count) const {
  const int size = group.size();
  Scratch<float> parts(allocator_, static_cast<std::size_t>(count * size));
  const auto bytes = static_cast<std::size_t>(count) * sizeof(float);
  const std::vector<SendPart> sends(static_cast<std::size_t>(size), SendPart{values, bytes});
  std::vector<ReceivePart> receives;
  for (int j = 0; j < size; ++j) receives.push_back({parts.get() + j * count, bytes});
  exchange_->all_to_all(group, sends, receives, allocator_.stream());
  return parts;
}

void DeviceCollectives::all_reduce_sum(const Group& group, float* values, std::int64_t count) const {
  if (count == 0) return;
  const Scratch<float> parts = gather_values(group, values, count);
  kernels::sum_parts(parts.get(), group.size(), count, values, allocator_.stream());
}

void DeviceCollectives::all_reduce_max(const Group& group, float* values, std::int64_t count) const {
  if (count == 0) return;
  const Scratch<float> parts = gather_values(group, values, count);
  kernels::max_parts(parts.get(), group.size(), count, values, allocator_.stream());
}

}  // namespace sluice::executor::cuda
