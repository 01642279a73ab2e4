#pragma once
// NCCL's side of the executor, shared by the run of every rank in one process (run_nccl, a thread per rank) and the
// run of one process per rank (run_nccl over MPI): the communicators, the transport and the exchange of the
// collectives inside passes. Only in builds with NCCL (SLUICE_EXECUTOR_HAVE_NCCL).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <map>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "collectives.hpp"
#include "device.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/model.hpp"

namespace sluice::executor::cuda {

inline void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status != ncclSuccess) detail::fail_call(call, file, line, ncclGetErrorString(status));
}
#define SLUICE_NCCL_CHECK(call) ::sluice::executor::cuda::check_nccl((call), #call, __FILE__, __LINE__)

// The links between neighbouring lanes: (lower stage's rank, upper stage's rank) for every lane of every stage
// boundary, in pipeline, stage and lane order.
inline std::vector<std::pair<int, int>> lane_links(const JobLayout& layout) {
  std::vector<std::pair<int, int>> links;
  for (const auto& stages : layout.lane_ranks)
    for (std::size_t j = 0; j + 1 < stages.size(); ++j)
      for (std::size_t lane = 0; lane < stages[j].size(); ++lane)
        links.emplace_back(stages[j][lane], stages[j + 1][lane]);
  return links;
}

// The ranks that run, in rank order.
inline std::vector<int> running_ranks(const JobLayout& layout) {
  std::vector<int> ranks;
  for (int r = 0; r < layout.rank_count(); ++r)
    if (layout.ranks[static_cast<std::size_t>(r)].runs) ranks.push_back(r);
  return ranks;
}

// A two-rank communicator for every link between neighbouring lanes (so the operations of a link run in the order
// both ends issue them, as the plan's deadlock-freedom assumes), one for every group of lanes that exchange data
// inside passes (JobLayout::groups: a TP or a Ulysses group).
class Communicators {
public:
  // Every rank in this process, rank r on devices[r] (-1 for a rank that runs nothing).
  Communicators(const JobLayout& layout, const std::vector<int>& devices) : links_(lane_links(layout)) {
    for (const auto& [lower, upper] : links_) {
      std::array<ncclComm_t, 2> pair{nullptr, nullptr};
      const int pair_devices[2] = {devices[static_cast<std::size_t>(lower)], devices[static_cast<std::size_t>(upper)]};
      SLUICE_NCCL_CHECK(ncclCommInitAll(pair.data(), 2, pair_devices));
      ends_[{lower, upper}] = pair[0];
      ends_[{upper, lower}] = pair[1];
    }
    for (std::size_t g = 0; g < layout.groups.size(); ++g) {
      const std::vector<int>& ranks = layout.groups[g];
      std::vector<int> group_devices;
      for (const int rank : ranks) group_devices.push_back(devices[static_cast<std::size_t>(rank)]);
      std::vector<ncclComm_t> comms(ranks.size(), nullptr);
      SLUICE_NCCL_CHECK(ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), group_devices.data()));
      for (std::size_t i = 0; i < ranks.size(); ++i) groups_[{static_cast<int>(g), ranks[i]}] = comms[i];
    }
  }

  // Only `rank`, on the current device, joining the other processes' ranks by the ids they were all given: ids[k]
  // for lane_links(layout)[k], then one per group. Each rank joins its links toward the stage before it first, so
  // the chains of blocking joins complete from the first stages on, and then its groups in group order, so that no
  // two ranks wait for each other's joins.
  Communicators(const JobLayout& layout, int rank, std::span<const ncclUniqueId> ids) : links_(lane_links(layout)) {
    for (const bool toward_previous : {true, false})
      for (std::size_t k = 0; k < links_.size(); ++k) {
        const auto [lower, upper] = links_[k];
        if ((toward_previous ? upper : lower) != rank) continue;
        ncclComm_t comm = nullptr;
        SLUICE_NCCL_CHECK(ncclCommInitRank(&comm, 2, ids[k], toward_previous ? 1 : 0));
        ends_[toward_previous ? std::pair(upper, lower) : std::pair(lower, upper)] = comm;
      }
    for (std::size_t g = 0; g < layout.groups.size(); ++g) {
      const std::vector<int>& ranks = layout.groups[g];
      const auto member = std::find(ranks.begin(), ranks.end(), rank);
      if (member == ranks.end()) continue;
      ncclComm_t comm = nullptr;
      SLUICE_NCCL_CHECK(ncclCommInitRank(&comm, static_cast<int>(ranks.size()), ids[links_.size() + g],
                                         static_cast<int>(member - ranks.begin())));
      groups_[{static_cast<int>(g), rank}] = comm;
    }
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
    for (const auto& [ends, comm] : ends_) release(comm);
    for (const auto& [member, comm] : groups_) release(comm);
  }

  // After a failure: unblocks and frees every communicator.
  void abort() noexcept {
    for (const auto& [ends, comm] : ends_) static_cast<void>(ncclCommAbort(comm));  // nothing is left to report to
    for (const auto& [member, comm] : groups_) static_cast<void>(ncclCommAbort(comm));
    aborted_ = true;
  }

  // The rank's end of its link to `peer`, and the peer's index in it.
  [[nodiscard]] ncclComm_t link(int rank, int peer) const { return ends_.at({rank, peer}); }
  [[nodiscard]] int peer_index(int rank, int peer) const {
    return std::find(links_.begin(), links_.end(), std::pair(rank, peer)) != links_.end() ? 1 : 0;
  }
  // The rank's communicator of group `group` (JobLayout::groups), whose members are numbered in group order.
  [[nodiscard]] ncclComm_t group(int group, int rank) const { return groups_.at({group, rank}); }
  // The ids the multi-process constructor takes.
  [[nodiscard]] static std::size_t id_count(const JobLayout& layout) {
    return lane_links(layout).size() + layout.groups.size();
  }

private:
  std::vector<std::pair<int, int>> links_;
  std::map<std::pair<int, int>, ncclComm_t> ends_;    // (rank, peer) -> the rank's end of their link
  std::map<std::pair<int, int>, ncclComm_t> groups_;  // (group, rank) -> the rank's member of the group's
  bool aborted_ = false;
};

// Each rank's thread touches only that rank's state here; ranks the backend does not hold have none.
class NcclTransport {
public:
  static constexpr bool pairs_itself = true;

  NcclTransport(Backend& backend, const Communicators& communicators)
      : backend_(backend), communicators_(communicators), ranks_(backend.ranks()) {}
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;
  ~NcclTransport() {
    // Streams and events belong to their rank's device.
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      if (!backend_.holds(static_cast<int>(r))) continue;
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
    const std::size_t count = backend_.payload_bytes(transfer.rank, transfer.micro_batch) / sizeof(bf16);
    const ncclComm_t comm = communicators_.link(transfer.rank, transfer.peer);
    const int peer = communicators_.peer_index(transfer.rank, transfer.peer);
    if (transfer.send)
      SLUICE_NCCL_CHECK(ncclSend(data, count, ncclBfloat16, peer, comm, stream));
    else
      SLUICE_NCCL_CHECK(ncclRecv(data, count, ncclBfloat16, peer, comm, stream));
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
      if (!backend_.holds(static_cast<int>(r))) continue;
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

  Backend& backend_;
  const Communicators& communicators_;
  std::vector<RankState> ranks_;
};

// The collectives inside passes: grouped sends and receives on the group's communicator, the part a member keeps
// copied on its stream. Parts of no bytes move nothing (both ends know their sizes).
class NcclExchange final : public DeviceExchange {
public:
  explicit NcclExchange(const Communicators& communicators) : communicators_(communicators) {}

  void all_to_all(const Group& group, std::span<const SendPart> sends, std::span<const ReceivePart> receives,
                  cudaStream_t stream) override {
    const ncclComm_t comm = communicators_.group(group.id, group.rank());
    SLUICE_NCCL_CHECK(ncclGroupStart());
    for (int j = 0; j < group.size(); ++j) {
      if (j == group.index) continue;
      const SendPart& send = sends[static_cast<std::size_t>(j)];
      const ReceivePart& receive = receives[static_cast<std::size_t>(j)];
      if (send.bytes > 0) SLUICE_NCCL_CHECK(ncclSend(send.data, send.bytes, ncclChar, j, comm, stream));
      if (receive.bytes > 0) SLUICE_NCCL_CHECK(ncclRecv(receive.data, receive.bytes, ncclChar, j, comm, stream));
    }
    SLUICE_NCCL_CHECK(ncclGroupEnd());
    const SendPart& own = sends[static_cast<std::size_t>(group.index)];
    if (own.bytes > 0)
      SLUICE_CUDA_CHECK(cudaMemcpyAsync(receives[static_cast<std::size_t>(group.index)].data, own.data, own.bytes,
                                        cudaMemcpyDeviceToDevice, stream));
  }

private:
  const Communicators& communicators_;
};

// Waits for `done`, calling `give_up()` between polls: it throws to stop waiting, as when another rank has failed
// and this rank's NCCL operations would never complete.
template <class GiveUp>
void wait_polling(const Event& done, GiveUp give_up) {
  for (;;) {
    const cudaError_t status = cudaEventQuery(done.get());
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) SLUICE_CUDA_CHECK(status);
    give_up();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace sluice::executor::cuda
