#pragma once
// The CUDA backend of the interpreter: every rank's stage, static slots, micro-batch metadata and timing events on
// its device. Shared by the local (one GPU) and NCCL (one GPU per rank) runs.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "device.hpp"
#include "stage.hpp"
#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/run_options.hpp"

namespace sluice::executor::cuda {

class Backend {
public:
  struct Stamp {
    int rank = 0;
    int event = 0;
  };

  // devices[r]: the device of global rank r, or -1 when another process runs it (the backend then holds nothing
  // of it). `serialize` (all ranks on one device): one stream for every rank. `exchange` moves the data of the
  // collectives inside passes (needed with TP > 1).
  Backend(const Job& job, const JobLayout& layout, const std::vector<int>& devices, bool serialize,
          DeviceExchange* exchange);
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  ~Backend();

  // Interpreter interface; call with the rank's device current.
  void load_input(int rank, int micro_batch, int slot);
  void forward(int rank, int micro_batch, int input_slot, int output_slot);
  void backward(int rank, int micro_batch, int grad_slot, int output_slot);
  [[nodiscard]] Stamp stamp(int rank);
  [[nodiscard]] double seconds(Stamp stamp) const;

  // Zeroes the rank's gradients and loss sums and forgets its timing events (device current, streams idle).
  void reset(int rank);
  // Records the rank's time origin once its device is idle; ranks sharing a device share the first one's origin.
  void mark_origin(int rank);

  [[nodiscard]] int device(int rank) const { return at(rank).device; }
  [[nodiscard]] cudaStream_t stream(int rank) const { return at(rank).stream; }
  [[nodiscard]] void* slot(int rank, int slot) const;
  // The bytes a rank sends of a micro-batch's activation or gradient: its lane's rows × hidden.
  [[nodiscard]] std::size_t payload_bytes(int rank, int micro_batch) const;
  [[nodiscard]] const Event& origin(int rank) const;
  [[nodiscard]] DeviceStage& stage(int rank) const { return *at(rank).stage; }
  [[nodiscard]] std::size_t ranks() const noexcept { return ranks_.size(); }

  [[nodiscard]] bool holds(int rank) const { return at(rank).stage != nullptr; }

  // A last stage's sums of its micro-batches' cross-entropies, in micro-batch order.
  [[nodiscard]] std::vector<double> loss_sums(int rank) const;
  // The most bytes of stream-ordered memory (activations and workspaces) the rank held at once since its reset.
  [[nodiscard]] double activation_peak_bytes(int rank) const { return static_cast<double>(at(rank).allocator->peak()); }
  // Every rank's, 0 where this backend holds none.
  [[nodiscard]] std::vector<double> activation_peaks() const {
    std::vector<double> peaks;
    for (int r = 0; r < static_cast<int>(ranks()); ++r) peaks.push_back(holds(r) ? activation_peak_bytes(r) : 0.0);
    return peaks;
  }
  // The rank's fp32 gradient of its shard of a tensor it holds, as doubles.
  [[nodiscard]] std::vector<double> download_gradient(int rank, std::size_t tensor) const;

private:
  struct Rank {
    int device = 0;
    cudaStream_t stream = nullptr;
    int origin_rank = 0;
    std::unique_ptr<StreamAllocator> allocator;
    std::unique_ptr<DeviceStage> stage;
    DeviceBuffer slots;
    std::size_t slot_bytes = 0;
    std::vector<DeviceMicroBatch> micro_batches;
    DeviceBuffer losses;  // float per micro-batch: the sums of its cross-entropies (last stage)
    std::unique_ptr<Event> origin;
    std::vector<Event> events;
    std::vector<StageSaved> saved;  // per micro-batch, from its forward to its backward; freed first
  };

  Rank& at(int rank) { return ranks_[static_cast<std::size_t>(rank)]; }
  [[nodiscard]] const Rank& at(int rank) const { return ranks_[static_cast<std::size_t>(rank)]; }

  const Job& job_;
  const JobLayout& layout_;
  std::vector<std::unique_ptr<Stream>> streams_;  // outlive the ranks' stream-ordered memory
  std::vector<int> stream_devices_;
  std::vector<Rank> ranks_;
};

// The loss and the gradients of the run, once every device has finished: every rank's shards downloaded and added
// on the host as the host backend adds them (combine: over DP, and over TP for the replicated norms), in float64;
// without `gradients`, the loss alone. Every rank must be held.
ModelResult collect_result(const Job& job, const JobLayout& layout, const Backend& backend, bool gradients);

}  // namespace sluice::executor::cuda
