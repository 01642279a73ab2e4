#pragma once
// The optimization–propagation disaggregation of Hydraulis (§5.2–5.3), executed: the fp32 master parameters and
// Adam's states of every tensor stay sharded over all N ranks in one fixed layout (shard::sharded_layout: segment r
// of every tensor's view on rank r, views.hpp; or a strategy's own, shard::aligned_layout); each iteration *pulls* the
// parameters into the placement of the strategy it runs by executing shard::PullPlan's messages, and *pushes* the
// gradients back by executing shard::PushPlan (the reduce-scatter across the replicas, then the LNK's sends and local
// moves on mutual slices), after which every owner steps Adam on its segments.
//
// shard:: plans a stack of identical layers whose tensors split over TP; the model has tensors outside the layers
// and tensors every TP rank holds whole, so its parameters move as five groups, each one shard:: problem: the layers'
// split tensors (qkv, attention output, gate|up, down) on the strategy's placement; the layers' norm weights, with
// every lane of a stage its own replica (a TP rank holds the whole weight, and its gradient is a partial sum over its
// rows, as a CP rank's is); the embedding, one layer on each pipeline's first stage; the LM head, one layer on each
// last stage; the final norm, one layer on each last stage's lanes as replicas.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/holders.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"
#include "sluice/shard/slices.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/shards.hpp"
#include "sluice_executor/views.hpp"

namespace sluice::executor {

// Adam (Kingma and Ba, "Adam: A Method for Stochastic Optimization", Algorithm 1) with bias correction and no weight
// decay, on each owned element: m ← β₁m + (1 − β₁)g, v ← β₂v + (1 − β₂)g², θ ← θ − lr·m̂ / (√v̂ + ε).
struct AdamOptions {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  friend bool operator==(const AdamOptions&, const AdamOptions&) = default;
};

inline void require_valid(const AdamOptions& adam) {
  sluice::require(std::isfinite(adam.learning_rate) && adam.learning_rate > 0,
                  "adam: learning_rate must be finite and > 0, got ", adam.learning_rate);
  sluice::require(adam.beta1 >= 0 && adam.beta1 < 1, "adam: beta1 must be in [0, 1), got ", adam.beta1);
  sluice::require(adam.beta2 >= 0 && adam.beta2 < 1, "adam: beta2 must be in [0, 1), got ", adam.beta2);
  sluice::require(std::isfinite(adam.epsilon) && adam.epsilon > 0, "adam: epsilon must be finite and > 0, got ",
                  adam.epsilon);
}

// One Adam step (the `step`-th, from 1) of `parameters` with `gradients`, every span of one length.
inline void adam_step(const AdamOptions& adam, std::int64_t step, std::span<double> parameters,
                      std::span<const double> gradients, std::span<double> m, std::span<double> v) {
  const double m_correction = 1 - std::pow(adam.beta1, static_cast<double>(step));
  const double v_correction = 1 - std::pow(adam.beta2, static_cast<double>(step));
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    m[i] = adam.beta1 * m[i] + (1 - adam.beta1) * gradients[i];
    v[i] = adam.beta2 * v[i] + (1 - adam.beta2) * gradients[i] * gradients[i];
    parameters[i] -= adam.learning_rate * (m[i] / m_correction) / (std::sqrt(v[i] / v_correction) + adam.epsilon);
  }
}

// The five groups of parameters, each moved as one shard:: problem.
enum class GroupKind : std::uint8_t { layer_split, layer_norms, embedding, head, final_norm };

struct ParameterGroup {
  GroupKind kind = GroupKind::layer_split;
  std::vector<ParameterKind> tensors;  // per layer of the group, in this order
  [[nodiscard]] bool per_layer() const noexcept {
    return kind == GroupKind::layer_split || kind == GroupKind::layer_norms;
  }
  [[nodiscard]] bool replicated() const noexcept {
    return kind == GroupKind::layer_norms || kind == GroupKind::final_norm;
  }
};

inline const std::vector<ParameterGroup>& parameter_groups() {
  using K = ParameterKind;
  static const std::vector<ParameterGroup> groups{
      {GroupKind::layer_split, {K::qkv, K::attention_output, K::gate_up, K::down}},
      {GroupKind::layer_norms, {K::attention_norm, K::mlp_norm}},
      {GroupKind::embedding, {K::embedding}},
      {GroupKind::head, {K::lm_head}},
      {GroupKind::final_norm, {K::final_norm}}};
  return groups;
}

// The canonical index of tensor k of the group's layer `layer`.
inline std::size_t group_tensor(const ModelConfig& model, const ParameterGroup& group, int layer, std::size_t k) {
  switch (group.kind) {
    case GroupKind::embedding: return embedding_tensor();
    case GroupKind::head: return lm_head_tensor(model);
    case GroupKind::final_norm: return final_norm_tensor(model);
    default: return layer_tensor(layer, group.tensors[k]);
  }
}

// The group as shard:: sees it: its layers and tensors, `bytes` per element pulled and pushed.
inline shard::Model group_model(const ModelConfig& model, const ParameterGroup& group, int bytes) {
  const std::vector<ParameterTensor> tensors = parameter_tensors(model);
  shard::Model result{
      sluice::concat("group ", static_cast<int>(group.kind)), group.per_layer() ? model.layers : 1, {}, bytes, bytes};
  for (std::size_t k = 0; k < group.tensors.size(); ++k) {
    const ParameterTensor& tensor = tensors[group_tensor(model, group, 0, k)];
    result.tensors.push_back({tensor.name(), static_cast<std::int64_t>(tensor.size())});
  }
  return result;
}

// Where the group's tensors are held in a strategy's placement (shard::holder_placement).
inline shard::Placement group_placement(const shard::Placement& placement, const ParameterGroup& group) {
  const shard::HeldBy held_by = group.kind == GroupKind::embedding ? shard::HeldBy::first_stage
                                : group.per_layer()                ? shard::HeldBy::every_stage
                                                                   : shard::HeldBy::last_stage;
  return shard::holder_placement(placement, held_by, group.replicated());
}

// A route of a layout move: `count` values from rank `src` to rank `dst`. Every rank knows a phase's routes in the
// same order; a Mover delivers them.
struct Route {
  int src = 0;
  int dst = 0;
  std::size_t count = 0;
};

// Delivers a phase's routes: fill(i) gives route i's values where its source is held, apply(i, values) takes them
// where its destination is held, for each destination in route order. In one process every rank is held.
class Mover {
public:
  Mover() = default;
  Mover(const Mover&) = delete;
  Mover& operator=(const Mover&) = delete;
  virtual ~Mover() = default;
  virtual void move(std::span<const Route> routes, const std::function<std::vector<double>(std::size_t)>& fill,
                    const std::function<void(std::size_t, std::vector<double>)>& apply) = 0;
};

// Every rank in this process: each route's values go straight from its fill to its apply.
class LocalMover final : public Mover {
public:
  void move(std::span<const Route> routes, const std::function<std::vector<double>(std::size_t)>& fill,
            const std::function<void(std::size_t, std::vector<double>)>& apply) override {
    for (std::size_t i = 0; i < routes.size(); ++i) apply(i, fill(i));
  }
};

// Deliberate defects the tests inject to show that their equality checks catch a broken layout move.
enum class MoveMutation : std::uint8_t {
  none,
  dropped_pull_message,   // the pull's first send is never delivered
  slice_off_by_one,       // a pull piece is read one element past where it starts
  push_skips_replica,     // a reduce-scatter leaves out its last member's gradients
  adam_on_wrong_segment,  // an owner steps its first segment with the gradient of the element after each
};

// What one rank keeps of the fixed layout: per canonical tensor, the segments of the view it owns (masters, Adam's
// m and v, the gradient the push leaves there), and, per iteration, the fraction of the view its lane holds (pulled
// parameters; the run's gradients) and the reduce-scatter pieces it sums.
struct RankShards {
  struct Segment {
    std::int64_t begin = 0;
    std::vector<double> master, m, v, gradient;
    [[nodiscard]] std::int64_t end() const noexcept { return begin + static_cast<std::int64_t>(master.size()); }
  };
  std::vector<std::vector<Segment>> owned;      // by canonical tensor, in view order
  std::vector<RowRange> held;                   // by canonical tensor: the view range the lane holds; empty if none
  std::vector<std::vector<double>> parameters;  // by canonical tensor: the pulled fraction
  std::vector<std::vector<double>> gradients;   // by canonical tensor: the run's gradient of the fraction
  std::vector<std::vector<double>> reduced;     // by canonical tensor: view-indexed sums of the pieces it holds
};

// The fixed layout of every group (parameter_groups' order) over `gpus` ranks: Hydraulis' sharded layout, or, with
// `aligned_to`, that placement's own (shard::aligned_layout of the group's placement on it).
inline std::vector<shard::OptimizerLayout> optimizer_layouts(const ModelConfig& model, std::int64_t gpus,
                                                             const shard::Placement* aligned_to = nullptr) {
  std::vector<shard::OptimizerLayout> layouts;
  for (const ParameterGroup& group : parameter_groups()) {
    if (aligned_to == nullptr) {
      layouts.push_back(shard::sharded_layout(gpus, group.per_layer() ? model.layers : 1));
      continue;
    }
    sluice::require(aligned_to->layers == model.layers && aligned_to->gpus == gpus, "optimizer layout: the placement ",
                    "it is aligned to has ", aligned_to->layers, " layers on ", aligned_to->gpus, " GPUs, the model ",
                    model.layers, " layers on ", gpus);
    layouts.push_back(shard::aligned_layout(group_placement(*aligned_to, group)));
  }
  return layouts;
}

// The layout move of one iteration on a placement (of the model's layers, every group's plans made once).
class LayoutMove {
public:
  // `layouts`: every group's fixed layout (optimizer_layouts); `bytes`: per element moved, as the cost model charges
  // them (8 for the host backend's float64).
  LayoutMove(const ModelConfig& model, const shard::Placement& placement,
             const std::vector<shard::OptimizerLayout>& layouts, int bytes = 8)
      : model_(model), tensors_(parameter_tensors(model)) {
    sluice::require(placement.layers == model.layers, "layout move: the placement has ", placement.layers,
                    " layers, the model ", model.layers);
    sluice::require(layouts.size() == parameter_groups().size(), "layout move: ", layouts.size(), " layouts for ",
                    parameter_groups().size(), " groups");
    for (std::size_t g = 0; g < layouts.size(); ++g) {
      const ParameterGroup& group = parameter_groups()[g];
      sluice::require(placement.gpus == layouts[g].gpus, "layout move: the placement has ", placement.gpus,
                      " GPUs, the optimizer layout ", layouts[g].gpus);
      Planned planned{&group, group_model(model, group, bytes), group_placement(placement, group), layouts[g], {}, {}};
      planned.pull = shard::plan_pull(planned.placement, planned.layout, planned.model);
      planned.push = shard::plan_push(planned.placement, planned.layout, planned.model);
      groups_.push_back(std::move(planned));
    }
  }

  // The pull and push as the cost model prices them on `cluster`, summed over the groups.
  [[nodiscard]] shard::ShardCost predicted(const shard::Cluster& cluster) const {
    shard::ShardCost total;
    for (const Planned& planned : groups_) {
      const shard::ShardCost cost = shard::plan_cost(planned.pull, planned.push, cluster);
      total.pull = add(total.pull, cost.pull);
      total.reduce_scatter = add(total.reduce_scatter, cost.reduce_scatter);
      total.push = add(total.push, cost.push);
    }
    return total;
  }

  // Marks in every held rank's shards the view ranges its lanes hold, and sizes its fractions.
  void hold(std::span<RankShards* const> ranks) const {
    for (RankShards* shards : ranks) {
      if (shards == nullptr) continue;
      shards->held.assign(tensors_.size(), {});
      shards->parameters.assign(tensors_.size(), {});
      shards->gradients.assign(tensors_.size(), {});
      shards->reduced.assign(tensors_.size(), {});
    }
    for (const Planned& planned : groups_)
      for_each_holder(planned, [&](int rank, int tp, int t, std::size_t tensor) {
        RankShards* shards = ranks[static_cast<std::size_t>(rank)];
        if (shards == nullptr) return;
        const RowRange range = even_part(static_cast<std::int64_t>(tensors_[tensor].size()), tp, t);
        shards->held[tensor] = range;
        shards->parameters[tensor].assign(static_cast<std::size_t>(range.size()), 0.0);
        shards->gradients[tensor].assign(static_cast<std::size_t>(range.size()), 0.0);
      });
  }

  // Executes every group's pull: each message's pieces from its owner's masters into its destination's fraction.
  void pull(std::span<RankShards* const> ranks, Mover& mover, MoveMutation mutation = MoveMutation::none) const {
    for (const Planned& planned : groups_) {
      std::vector<Route> routes;
      std::vector<const shard::Message*> messages;
      for (const auto* list : {&planned.pull.sends, &planned.pull.local_moves})
        for (const shard::Message& message : *list) {
          messages.push_back(&message);
          routes.push_back(
              {message.src, message.dst, elements(planned, planned.pull.blocks, planned.pull.pieces, message)});
        }
      const bool drop = mutation == MoveMutation::dropped_pull_message && &planned == &groups_.front();
      const std::int64_t shift = mutation == MoveMutation::slice_off_by_one && &planned == &groups_.front() ? 1 : 0;
      mover.move(
          routes,
          [&](std::size_t i) {
            const shard::Message& message = *messages[i];
            std::vector<double> values;
            values.reserve(routes[i].count);
            for_each_run(planned, planned.pull.blocks, planned.pull.pieces, message,
                         [&](std::size_t tensor, std::int64_t begin, std::int64_t end) {
                           const auto& owned = ranks[static_cast<std::size_t>(message.src)]->owned[tensor];
                           for_each_owned(owned, begin, end, [&](const RankShards::Segment& segment, std::int64_t e) {
                             const std::int64_t last = static_cast<std::int64_t>(segment.master.size()) - 1;
                             values.push_back(segment.master[static_cast<std::size_t>(
                                 std::min(e - segment.begin + (i == 0 ? shift : 0), last))]);
                           });
                         });
            return values;
          },
          [&](std::size_t i, std::vector<double> values) {
            if (drop && i == 0 && !planned.pull.sends.empty()) return;
            const shard::Message& message = *messages[i];
            RankShards& shards = *ranks[static_cast<std::size_t>(message.dst)];
            std::size_t at = 0;
            for_each_run(planned, planned.pull.blocks, planned.pull.pieces, message,
                         [&](std::size_t tensor, std::int64_t begin, std::int64_t end) {
                           const std::int64_t first = shards.held[tensor].begin;
                           std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(at), end - begin,
                                       shards.parameters[tensor].begin() + (begin - first));
                           at += static_cast<std::size_t>(end - begin);
                         });
          });
    }
  }

  // Executes every group's push: each reduce-scatter piece summed over its group's members in member order on the
  // member that keeps it, then each message's pieces from that member to their owner's gradient.
  void push(std::span<RankShards* const> ranks, Mover& mover, MoveMutation mutation = MoveMutation::none) const {
    for (RankShards* shards : ranks)
      if (shards != nullptr)
        for (std::size_t t = 0; t < tensors_.size(); ++t) {
          for (RankShards::Segment& segment : shards->owned[t]) segment.gradient.assign(segment.master.size(), 0.0);
          shards->reduced[t].clear();
        }
    for (const Planned& planned : groups_) {
      const shard::PushPlan& plan = planned.push;
      const auto d = static_cast<std::int64_t>(plan.pipelines);
      // Reduce-scatter: route (group, piece i, member q) carries member q's gradient of piece i to members[i].
      struct Part {
        const shard::RsGroup* group;
        std::int64_t piece;
        std::size_t member;
      };
      std::vector<Route> routes;
      std::vector<Part> parts;
      for (const shard::RsGroup& group : plan.rs_groups) {
        const shard::SliceBlock& block = plan.blocks[static_cast<std::size_t>(group.block)];
        const std::int64_t step = block.granularity / (d * plan.grid);
        const std::size_t members = mutation == MoveMutation::push_skips_replica && group.members.size() > 1
                                        ? group.members.size() - 1
                                        : group.members.size();
        for (std::int64_t i = 0; i < d; ++i) {
          const std::int64_t piece = group.segment * d + i;
          const std::size_t count = block_elements(planned, block, piece * step, (piece + 1) * step);
          for (std::size_t q = 0; q < members; ++q) {
            routes.push_back({group.members[q], group.members[static_cast<std::size_t>(i)], count});
            parts.push_back({&group, piece, q});
          }
        }
      }
      mover.move(
          routes,
          [&](std::size_t r) {
            const Part& part = parts[r];
            const shard::SliceBlock& block = plan.blocks[static_cast<std::size_t>(part.group->block)];
            const std::int64_t step = block.granularity / (d * plan.grid);
            const RankShards& shards = *ranks[static_cast<std::size_t>(routes[r].src)];
            std::vector<double> values;
            values.reserve(routes[r].count);
            for_each_block_run(planned, block, part.piece * step, (part.piece + 1) * step,
                               [&](std::size_t tensor, std::int64_t begin, std::int64_t end) {
                                 const std::int64_t first = shards.held[tensor].begin;
                                 for (std::int64_t e = begin; e < end; ++e)
                                   values.push_back(shards.gradients[tensor][static_cast<std::size_t>(e - first)]);
                               });
            return values;
          },
          [&](std::size_t r, std::vector<double> values) {
            const Part& part = parts[r];
            const shard::SliceBlock& block = plan.blocks[static_cast<std::size_t>(part.group->block)];
            const std::int64_t step = block.granularity / (d * plan.grid);
            RankShards& shards = *ranks[static_cast<std::size_t>(routes[r].dst)];
            std::size_t at = 0;
            for_each_block_run(planned, block, part.piece * step, (part.piece + 1) * step,
                               [&](std::size_t tensor, std::int64_t begin, std::int64_t end) {
                                 std::vector<double>& reduced = shards.reduced[tensor];
                                 if (reduced.empty()) reduced.assign(tensors_[tensor].size(), 0.0);
                                 for (std::int64_t e = begin; e < end; ++e, ++at)
                                   reduced[static_cast<std::size_t>(e)] =
                                       part.member == 0 ? values[at]
                                                        : reduced[static_cast<std::size_t>(e)] + values[at];
                               });
          });
      // The LNK: every piece from the member that keeps it to its owner.
      std::vector<Route> moves;
      std::vector<const shard::Message*> messages;
      for (const auto* list : {&plan.sends, &plan.local_moves})
        for (const shard::Message& message : *list) {
          messages.push_back(&message);
          moves.push_back({message.src, message.dst, elements(planned, plan.blocks, plan.pieces, message)});
        }
      mover.move(
          moves,
          [&](std::size_t i) {
            const shard::Message& message = *messages[i];
            const RankShards& shards = *ranks[static_cast<std::size_t>(message.src)];
            std::vector<double> values;
            values.reserve(moves[i].count);
            for_each_run(planned, plan.blocks, plan.pieces, message,
                         [&](std::size_t tensor, std::int64_t begin, std::int64_t end) {
                           for (std::int64_t e = begin; e < end; ++e)
                             values.push_back(shards.reduced[tensor][static_cast<std::size_t>(e)]);
                         });
            return values;
          },
          [&](std::size_t i, std::vector<double> values) {
            const shard::Message& message = *messages[i];
            RankShards& shards = *ranks[static_cast<std::size_t>(message.dst)];
            std::size_t at = 0;
            for_each_run(planned, plan.blocks, plan.pieces, message,
                         [&](std::size_t tensor, std::int64_t begin, std::int64_t end) {
                           for_each_owned(
                               shards.owned[tensor], begin, end, [&](RankShards::Segment& segment, std::int64_t e) {
                                 segment.gradient[static_cast<std::size_t>(e - segment.begin)] = values[at++];
                               });
                         });
          });
    }
  }

  // Calls visit(segment, element) for elements [begin, end) of a tensor's view, which `owned` segments hold; raises
  // when one is not owned (a plan that sends what its source does not own).
  template <class Segments, class Visit>
  static void for_each_owned(Segments& owned, std::int64_t begin, std::int64_t end, Visit visit) {
    auto segment = std::upper_bound(owned.begin(), owned.end(), begin,
                                    [](std::int64_t e, const RankShards::Segment& s) { return e < s.begin; });
    sluice::require(segment != owned.begin(), "layout move: element ", begin, " is not owned here");
    --segment;
    for (std::int64_t e = begin; e < end; ++e) {
      while (segment != owned.end() && e >= segment->end()) ++segment;
      sluice::require(segment != owned.end() && e >= segment->begin, "layout move: element ", e, " is not owned here");
      visit(*segment, e);
    }
  }

private:
  struct Planned {
    const ParameterGroup* group;
    shard::Model model;
    shard::Placement placement;
    shard::OptimizerLayout layout;
    shard::PullPlan pull;
    shard::PushPlan push;
  };

  // The groups move one after another: their bytes, messages and seconds add.
  static shard::PhaseCost add(shard::PhaseCost total, const shard::PhaseCost& part) {
    total.bytes.local += part.bytes.local;
    total.bytes.intra_node += part.bytes.intra_node;
    total.bytes.inter_node += part.bytes.inter_node;
    total.messages += part.messages;
    total.seconds += part.seconds;
    return total;
  }

  // Calls visit(rank, tp, t, tensor) for every (rank, tensor) of the group's placement: TP rank t of tp holds
  // fraction t of the tensor's view (every CP rank its TP rank's; a replica of TP 1 all of it).
  template <class Visit>
  void for_each_holder(const Planned& planned, Visit visit) const {
    for (const shard::PipelinePlacement& pipeline : planned.placement.pipelines) {
      const int tp = pipeline.scheme.tp();
      for (const shard::Stage& stage : pipeline.stages)
        for (int layer = stage.layer_begin; layer < stage.layer_end; ++layer)
          for (std::size_t k = 0; k < planned.group->tensors.size(); ++k)
            for (std::size_t i = 0; i < stage.ranks.size(); ++i)
              visit(stage.ranks[i], tp, static_cast<int>(i) % tp, group_tensor(model_, *planned.group, layer, k));
    }
  }

  // Calls visit(tensor, begin, end) for the view elements of slices [begin, end) of every tensor of every layer of
  // `block`, in the order a message lays them out.
  template <class Visit>
  void for_each_block_run(const Planned& planned, const shard::SliceBlock& block, std::int64_t begin, std::int64_t end,
                          Visit visit) const {
    for (int layer = block.layer_begin; layer < block.layer_end; ++layer)
      for (std::size_t k = 0; k < planned.model.tensors.size(); ++k) {
        const std::int64_t elements = planned.model.tensors[k].elements;
        visit(group_tensor(model_, *planned.group, layer, k), shard::slice_start(begin, elements, block.granularity),
              shard::slice_start(end, elements, block.granularity));
      }
  }

  template <class Visit>
  void for_each_run(const Planned& planned, const std::vector<shard::SliceBlock>& blocks,
                    const std::vector<shard::Piece>& pieces, const shard::Message& message, Visit visit) const {
    for (std::size_t p = message.first_piece; p < message.first_piece + message.piece_count; ++p)
      for_each_block_run(planned, blocks[static_cast<std::size_t>(pieces[p].block)], pieces[p].begin, pieces[p].end,
                         visit);
  }

  std::size_t block_elements(const Planned& planned, const shard::SliceBlock& block, std::int64_t begin,
                             std::int64_t end) const {
    std::size_t count = 0;
    for_each_block_run(planned, block, begin, end, [&](std::size_t, std::int64_t first, std::int64_t last) {
      count += static_cast<std::size_t>(last - first);
    });
    return count;
  }

  std::size_t elements(const Planned& planned, const std::vector<shard::SliceBlock>& blocks,
                       const std::vector<shard::Piece>& pieces, const shard::Message& message) const {
    std::size_t count = 0;
    for_each_run(planned, blocks, pieces, message, [&](std::size_t, std::int64_t first, std::int64_t last) {
      count += static_cast<std::size_t>(last - first);
    });
    return count;
  }

  ModelConfig model_;
  std::vector<ParameterTensor> tensors_;
  std::vector<Planned> groups_;
};

// Rank `rank`'s segments of the fixed layouts (optimizer_layouts), their masters from `full` (every tensor row-major,
// canonical order).
inline RankShards owned_shards(const ModelConfig& model, std::span<const std::vector<double>> full,
                               const std::vector<shard::OptimizerLayout>& layouts, int rank) {
  const std::vector<ParameterTensor> tensors = parameter_tensors(model);
  RankShards shards;
  shards.owned.resize(tensors.size());
  for (std::size_t g = 0; g < layouts.size(); ++g) {
    const ParameterGroup& group = parameter_groups()[g];
    for (const shard::OwnerGroup& owners : layouts[g].groups)
      for (int layer = owners.layer_begin; layer < owners.layer_end; ++layer)
        for (std::size_t k = 0; k < group.tensors.size(); ++k) {
          const std::size_t t = group_tensor(model, group, layer, k);
          const std::vector<double> view = view_of(tensors[t], full[t]);
          const auto n = static_cast<std::int64_t>(owners.owners.size());
          for (std::int64_t i = 0; i < n; ++i) {
            if (owners.owners[static_cast<std::size_t>(i)] != rank) continue;
            const std::int64_t begin = shard::slice_start(i, static_cast<std::int64_t>(view.size()), n);
            const std::int64_t end = shard::slice_start(i + 1, static_cast<std::int64_t>(view.size()), n);
            if (begin == end) continue;
            RankShards::Segment segment{begin, {view.begin() + begin, view.begin() + end}, {}, {}, {}};
            segment.m.assign(segment.master.size(), 0.0);
            segment.v.assign(segment.master.size(), 0.0);
            shards.owned[t].push_back(std::move(segment));
          }
        }
  }
  return shards;
}

// Adam on every segment the rank owns (`step` from 1). MoveMutation::adam_on_wrong_segment steps the first owned
// segment of the first tensor with its gradient shifted by one element.
inline void adam_on_owned(RankShards& shards, const AdamOptions& adam, std::int64_t step,
                          MoveMutation mutation = MoveMutation::none) {
  bool shifted = mutation != MoveMutation::adam_on_wrong_segment;
  for (std::vector<RankShards::Segment>& segments : shards.owned)
    for (RankShards::Segment& segment : segments) {
      if (!shifted && segment.gradient.size() > 1) {
        std::rotate(segment.gradient.begin(), segment.gradient.begin() + 1, segment.gradient.end());
        shifted = true;
      }
      adam_step(adam, step, segment.master, segment.gradient, segment.m, segment.v);
    }
}

}  // namespace sluice::executor
