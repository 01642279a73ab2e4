#pragma once
// How the CUDA backend's lanes move data inside a forward or backward (TP's all-gathers, reduce-scatters and
// all-reduces, Ulysses' all-to-alls): a DeviceExchange between the members of a group, which the local transport
// implements with device copies between the threads of one process (every lane on one GPU) and the NCCL transport with
// grouped sends and receives on a communicator per group (nccl.hpp). The collectives built on it add in member order,
// as the host backend's do (sluice_executor/host/exchange.hpp), so every member of a group gets the same bits.
#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "device.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/kernels.hpp"

namespace sluice::executor::cuda {

// `bytes` bytes of device memory to send, or to receive into.
struct SendPart {
  const void* data = nullptr;
  std::size_t bytes = 0;
};
struct ReceivePart {
  void* data = nullptr;
  std::size_t bytes = 0;
};

class DeviceExchange {
public:
  DeviceExchange() = default;
  DeviceExchange(const DeviceExchange&) = delete;
  DeviceExchange& operator=(const DeviceExchange&) = delete;
  virtual ~DeviceExchange() = default;
  // Ordered on `stream`: sends[j] to member j, and into receives[j] what member j sends this rank (sends[index] lands
  // in receives[index]). Every member calls it, in the same order as its other calls on the group. Work the caller
  // enqueues on `stream` afterwards may reuse or free both sides' buffers.
  virtual void all_to_all(const Group& group, std::span<const SendPart> sends, std::span<const ReceivePart> receives,
                          cudaStream_t stream) = 0;
};

// Every lane on one device, each on a host thread of its own. A call waits on the host until every member has
// posted its sends (each with an event of its stream), copies each member's part for it on its own stream after
// that event, and returns once every member has enqueued its copies, its stream waiting for them (so that its sends
// outlive the peers' reads).
class LocalExchange final : public DeviceExchange {
public:
  explicit LocalExchange(double timeout_seconds) : timeout_(timeout_seconds) {}
  void all_to_all(const Group& group, std::span<const SendPart> sends, std::span<const ReceivePart> receives,
                  cudaStream_t stream) override;
  // Makes every waiting and later call throw transport_error: another lane failed and its peers would wait forever.
  void stop();

private:
  struct Round {
    explicit Round(int members)
        : sends(static_cast<std::size_t>(members)),
          ready(static_cast<std::size_t>(members)),
          done(static_cast<std::size_t>(members)) {}
    std::vector<std::vector<SendPart>> sends;  // by member
    std::vector<Event> ready, done;            // by member, on its stream: its sends written, its copies finished
    int posted = 0;
    int copied = 0;
    int left = 0;
  };
  double timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<int, std::int64_t>, std::shared_ptr<Round>> rounds_;  // (group, call number) -> its round
  std::map<std::pair<int, int>, std::int64_t> calls_;                      // (group, member) -> its calls so far
  bool stopped_ = false;
};

// TP's collectives on row-major [rows, cols] blocks, on the allocator's stream. Member j of a group of size S holds
// rows even_part(rows, S, j) of a block split over the group (sequence parallelism, shards.hpp).
class DeviceCollectives {
public:
  DeviceCollectives(DeviceExchange* exchange, StreamAllocator& allocator)
      : exchange_(exchange), allocator_(allocator) {}

  // Every member's rows of [rows, cols] into `all`, in member order.
  void all_gather(const Group& group, const bf16* mine, std::int64_t rows, std::int64_t cols, bf16* all) const;
  // This member's rows of the sum over members, in member order, of their [rows, cols] partial sums `full`.
  void reduce_scatter(const Group& group, const bf16* full, std::int64_t rows, std::int64_t cols, bf16* mine) const;
  // In place: every member's `count` values summed in member order, or their maximum.
  void all_reduce_sum(const Group& group, float* values, std::int64_t count) const;
  void all_reduce_max(const Group& group, float* values, std::int64_t count) const;

private:
  // parts[j · count + i]: member j's values[i], for the reductions.
  Scratch<float> gather_values(const Group& group, const float* values, std::int64_t count) const;

  DeviceExchange* exchange_;
  StreamAllocator& allocator_;
};

}  // namespace sluice::executor::cuda
