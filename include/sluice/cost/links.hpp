#pragma once
// The links a group of GPUs exchanges on: NVLink while the group fits in a node (groups are placed within a node
// first), InfiniBand across nodes. Context parallelism's all-to-alls and rings and ZeRO-3's collectives use them.
#include <cstdint>

namespace sluice::cost {

struct CpLinks {
  double node_latency = 1e-5;
  double node_bandwidth = 200e9;  // NVLink, per GPU and direction
  double cross_latency = 2e-5;
  double cross_bandwidth = 25e9;  // one 200 Gb/s InfiniBand port per GPU

  // α and β of a group of `group_gpus` GPUs on a cluster of `gpus_per_node` GPUs per node.
  [[nodiscard]] double latency(std::int64_t group_gpus, std::int64_t gpus_per_node) const noexcept {
    return group_gpus <= gpus_per_node ? node_latency : cross_latency;
  }
  [[nodiscard]] double bandwidth(std::int64_t group_gpus, std::int64_t gpus_per_node) const noexcept {
    return group_gpus <= gpus_per_node ? node_bandwidth : cross_bandwidth;
  }
};

}  // namespace sluice::cost
