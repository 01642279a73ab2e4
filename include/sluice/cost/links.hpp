#pragma once
// The α–β links every communication cost uses: context parallelism's all-to-alls and rings, ZeRO-3's collectives,
// the sharded optimizer's pull and push, and a pipeline's stage-to-stage transfers.
#include <cstdint>
#include <limits>
#include <string_view>

#include "sluice/core/error.hpp"

namespace sluice::cost {

// A message of b bytes over the link costs latency + b / bandwidth seconds. Free communication is {0, +inf}.
struct Link {
  // Physical ranges (require_valid): latency up to a second, 1e5 times a cross-node RDMA round trip; bandwidth
  // from 1 MB/s, below any interconnect a GPU trains over, to 10 TB/s, above NVLink's 1.8 TB/s per GPU; or +inf.
  // Outside them a transfer would dwarf every stage's compute (or round to nothing), which no plan is meaningfully
  // made for.
  static constexpr double max_latency = 1;
  static constexpr double min_bandwidth = 1e6;
  static constexpr double max_bandwidth = 1e13;

  double latency = 0;                                          // α, seconds per message
  double bandwidth = std::numeric_limits<double>::infinity();  // β, bytes per second
  friend bool operator==(const Link&, const Link&) = default;
};

// Raises invalid_input naming `what` unless latency is in [0, max_latency] s and bandwidth in [min_bandwidth,
// max_bandwidth] bytes/s or +inf.
inline void require_valid(const Link& link, std::string_view what = "link") {
  // The messages are formatted only on failure: the simulator checks its link on every call.
  if (!(link.latency >= 0 && link.latency <= Link::max_latency))
    sluice::fail(what, " latency must be in [0, ", sluice::shortest(Link::max_latency), "] s, got ",
                 sluice::shortest(link.latency));
  if (!((link.bandwidth >= Link::min_bandwidth && link.bandwidth <= Link::max_bandwidth) ||
        link.bandwidth == std::numeric_limits<double>::infinity()))
    sluice::fail(what, " bandwidth must be in [", sluice::shortest(Link::min_bandwidth), ", ",
                 sluice::shortest(Link::max_bandwidth), "] bytes/s or +inf, got ", sluice::shortest(link.bandwidth));
}

// A two-level cluster's links: a GPU's own memory, NVLink between the GPUs of a node, InfiniBand across nodes. The
// defaults are an A800 or H100 node: NVLink at about 200 GB/s per GPU and direction, one 200 Gb/s InfiniBand port
// per GPU, and NCCL's small-message latencies (about 10 µs within a node, 20 µs across).
struct Links {
  Link local{2e-6, 1e12};  // a device-memory copy
  Link intra_node{1e-5, 200e9};
  Link inter_node{2e-5, 25e9};

  // The link a group of `group_gpus` GPUs talks over on a cluster of `gpus_per_node` GPUs per node: groups are
  // placed within a node first.
  [[nodiscard]] const Link& of_group(std::int64_t group_gpus, std::int64_t gpus_per_node) const noexcept {
    return group_gpus <= gpus_per_node ? intra_node : inter_node;
  }
  friend bool operator==(const Links&, const Links&) = default;
};

// Raises invalid_input unless every link is in the physical ranges.
inline void require_valid(const Links& links) {
  require_valid(links.local, "local link");
  require_valid(links.intra_node, "intra-node link");
  require_valid(links.inter_node, "inter-node link");
}

}  // namespace sluice::cost
