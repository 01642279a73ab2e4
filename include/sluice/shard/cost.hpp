#pragma once
// The cost of the LNK: bytes per link class and an α–β time, for the pull, the push's reduce-scatter and
// the push's LNK of one iteration. This is what changing strategy costs under optimization–propagation
// disaggregation: the optimizer layout stays fixed, so the cost depends on the candidate strategy alone.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/links.hpp"
#include "sluice/shard/detail/pull_messages.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"

namespace sluice::shard {

// A two-level hierarchy: GPUs of one node share fast links, nodes talk over the network (cost::Links' defaults).
struct Cluster {
  int gpus_per_node = 8;
  cost::Links links{};
  friend bool operator==(const Cluster&, const Cluster&) = default;
};

// Raises invalid_input unless gpus_per_node >= 1 and every link is in the physical ranges.
inline void require_valid(const Cluster& cluster) {
  sluice::require(cluster.gpus_per_node >= 1, "shard cluster: gpus_per_node must be >= 1, got ", cluster.gpus_per_node);
  require_valid(cluster.links);
}

enum class LinkClass { local, intra_node, inter_node };

struct LinkBytes {
  std::int64_t local = 0;
  std::int64_t intra_node = 0;
  std::int64_t inter_node = 0;
  [[nodiscard]] std::int64_t total() const noexcept { return local + intra_node + inter_node; }
  friend bool operator==(const LinkBytes&, const LinkBytes&) = default;
};

struct PhaseCost {
  LinkBytes bytes;
  std::int64_t messages = 0;  // point-to-point messages (local moves included); ring steps for a reduce-scatter
  double seconds = 0;
  friend bool operator==(const PhaseCost&, const PhaseCost&) = default;
};

struct ShardCost {
  PhaseCost pull;
  PhaseCost reduce_scatter;
  PhaseCost push;
  // The three phases back to back: what the LNK adds to an iteration when none of it overlaps computation.
  [[nodiscard]] double seconds() const noexcept { return pull.seconds + reduce_scatter.seconds + push.seconds; }
  friend bool operator==(const ShardCost&, const ShardCost&) = default;
};

inline LinkClass link_class(int a, int b, int gpus_per_node) noexcept {
  if (a == b) return LinkClass::local;
  return a / gpus_per_node == b / gpus_per_node ? LinkClass::intra_node : LinkClass::inter_node;
}

namespace detail {

inline const cost::Link& link(const Cluster& cluster, LinkClass c) noexcept {
  const cost::Links& links = cluster.links;
  return c == LinkClass::local ? links.local : c == LinkClass::intra_node ? links.intra_node : links.inter_node;
}

inline void add(LinkBytes& bytes, LinkClass c, std::int64_t amount) noexcept {
  (c == LinkClass::local ? bytes.local : c == LinkClass::intra_node ? bytes.intra_node : bytes.inter_node) += amount;
}

// Point-to-point phase: every rank sends and receives at once, each link class on its own hardware, the
// messages of one rank over one class back to back. Phase time = the busiest (rank, class, direction).
// Messages are added one at a time; each (rank, class, direction) sums its own in the order they come.
class MessageCosts {
public:
  MessageCosts(std::int64_t gpus, const Cluster& cluster)
      : cluster_(cluster), busy_(static_cast<std::size_t>(gpus) * 6, 0.0) {}  // (rank, class, out/in)

  void add(int src, int dst, std::int64_t bytes) {
    const LinkClass c = link_class(src, dst, cluster_.gpus_per_node);
    const cost::Link& l = link(cluster_, c);
    const double seconds = l.latency + static_cast<double>(bytes) / l.bandwidth;
    const auto slot = static_cast<std::size_t>(c) * 2;
    busy_[static_cast<std::size_t>(src) * 6 + slot] += seconds;
    busy_[static_cast<std::size_t>(dst) * 6 + slot + 1] += seconds;
    detail::add(cost_.bytes, c, bytes);
    ++cost_.messages;
  }

  [[nodiscard]] PhaseCost finish() const {
    PhaseCost cost = cost_;
    for (const double seconds : busy_) cost.seconds = std::max(cost.seconds, seconds);
    return cost;
  }

private:
  Cluster cluster_;
  std::vector<double> busy_;
  PhaseCost cost_;
};

inline PhaseCost message_cost(std::int64_t gpus, const std::vector<Message>& sends,
                              const std::vector<Message>& local_moves, const Cluster& cluster) {
  MessageCosts costs(gpus, cluster);
  for (const std::vector<Message>* list : {&sends, &local_moves})
    for (const Message& message : *list) costs.add(message.src, message.dst, message.bytes);
  return costs.finish();
}

// Ring reduce-scatter per group over its members in rank order: D − 1 steps, each member sending one
// D-th of the segment to its successor; a step takes as long as the ring's slowest hop. A rank's groups
// run one after another; phase time = the busiest rank.
inline PhaseCost reduce_scatter_cost(const PushPlan& plan, const Cluster& cluster) {
  PhaseCost cost;
  std::vector<double> busy(static_cast<std::size_t>(plan.gpus), 0.0);
  std::vector<int> ring;
  for (const RsGroup& group : plan.rs_groups) {
    const auto d = static_cast<std::int64_t>(group.members.size());
    if (d < 2) continue;
    ring = group.members;
    std::sort(ring.begin(), ring.end());
    const double chunk = static_cast<double>(group.bytes) / static_cast<double>(d);
    double step = 0;
    for (std::size_t i = 0; i < ring.size(); ++i) {
      const int next = ring[(i + 1) % ring.size()];
      const LinkClass c = link_class(ring[i], next, cluster.gpus_per_node);
      step = std::max(step, link(cluster, c).latency + chunk / link(cluster, c).bandwidth);
      // The D − 1 chunks of one member sum to the segment less the member's own piece.
      add(cost.bytes, c, group.bytes - group.bytes / d);
    }
    cost.messages += d * (d - 1);
    const double seconds = static_cast<double>(d - 1) * step;
    for (const int rank : ring) busy[static_cast<std::size_t>(rank)] += seconds;
  }
  for (const double seconds : busy) cost.seconds = std::max(cost.seconds, seconds);
  return cost;
}

}  // namespace detail

inline ShardCost plan_cost(const PullPlan& pull, const PushPlan& push, const Cluster& cluster) {
  require_valid(cluster);
  return {detail::message_cost(pull.gpus, pull.sends, pull.local_moves, cluster),
          detail::reduce_scatter_cost(push, cluster),
          detail::message_cost(push.gpus, push.sends, push.local_moves, cluster)};
}

// What one iteration under `candidate` pays to pull parameters from and push gradients to `layout`: exactly
// plan_cost of both plans, but the pull's messages are priced as they are planned, never stored (the pull
// is the large plan: about N²/TP messages). Sends and local moves come interleaved in (src, dst) order,
// which changes no sum: local moves have their own link class.
inline ShardCost iteration_cost(const OptimizerLayout& layout, const Strategy& candidate, const Model& model,
                                const Cluster& cluster, const PlacementOptions& options = {}) {
  const Placement placement = place(candidate, layout.gpus, model.layers, options);
  const Placement replicated = detail::replicas(placement);
  const detail::PullSetup pull = detail::pull_setup(replicated, layout, model);
  const PushPlan push = plan_push(placement, layout, model);
  require_valid(cluster);
  detail::MessageCosts pull_costs(placement.gpus, cluster);
  detail::for_each_pull_message(
      replicated, layout, model, pull,
      [&](int src, int dst, Span<const detail::SliceRun>, std::int64_t bytes) { pull_costs.add(src, dst, bytes); });
  return {pull_costs.finish(), detail::reduce_scatter_cost(push, cluster),
          detail::message_cost(push.gpus, push.sends, push.local_moves, cluster)};
}

// Per candidate, the seconds iteration_cost adds to an iteration: what assign::PlanOptions::candidate_overhead
// takes, so that the per-iteration choice accounts for pulling and pushing each candidate's layout.
inline std::vector<double> iteration_costs(const OptimizerLayout& layout, Span<const Strategy> candidates,
                                           const Model& model, const Cluster& cluster,
                                           const PlacementOptions& options = {}) {
  std::vector<double> seconds;
  seconds.reserve(candidates.size());
  for (const Strategy& candidate : candidates)
    seconds.push_back(iteration_cost(layout, candidate, model, cluster, options).seconds());
  return seconds;
}

// The same when the optimizer states follow a previous strategy's layout (aligned_layout of its placement)
// instead of the fixed fully sharded one.
inline ShardCost switching_cost(const Strategy& previous, const Strategy& candidate, std::int64_t gpus,
                                const Model& model, const Cluster& cluster, const PlacementOptions& options = {}) {
  return iteration_cost(aligned_layout(place(previous, gpus, model.layers, options)), candidate, model, cluster,
                        options);
}

}  // namespace sluice::shard
