#pragma once
// Runs pull and push plans on host memory: integer data, so sums are exact and any misplaced, missing or
// doubled element shows. Meant for tests and small models (memory is ranks × layers × layer elements).
#include <cstdint>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/shard/detail/slicing.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"

namespace sluice::shard {

// One buffer per (rank, layer, tensor) of the full tensor length, with a mark for the elements present.
class HostBuffers {
public:
  HostBuffers(const Model& model, std::int64_t gpus) : layers_(model.layers) {
    for (const Tensor& tensor : model.tensors) {
      offset_.push_back(layer_size_);
      layer_size_ += tensor.elements;
    }
    const auto size = static_cast<std::size_t>(gpus * layers_ * layer_size_);
    values_.assign(size, 0);
    present_.assign(size, 0);
  }

  [[nodiscard]] std::size_t index(int rank, int layer, std::size_t tensor, std::int64_t element) const noexcept {
    return static_cast<std::size_t>((std::int64_t{rank} * layers_ + layer) * layer_size_ + offset_[tensor] + element);
  }
  [[nodiscard]] bool present(std::size_t i) const noexcept { return present_[i] != 0; }
  [[nodiscard]] std::int64_t value(std::size_t i) const noexcept { return values_[i]; }
  void set(std::size_t i, std::int64_t value) noexcept {
    values_[i] = value;
    present_[i] = 1;
  }

private:
  int layers_;
  std::int64_t layer_size_ = 0;
  std::vector<std::int64_t> offset_;
  std::vector<std::int64_t> values_;
  std::vector<char> present_;
};

namespace detail {

// Calls visit(layer, tensor, element) for every element of a piece.
template <class Visit>
void for_each_element(const Model& model, const SliceBlock& block, std::int64_t begin, std::int64_t end,
                      Visit&& visit) {
  for (int layer = block.layer_begin; layer < block.layer_end; ++layer)
    for (std::size_t p = 0; p < model.tensors.size(); ++p) {
      const std::int64_t elements = model.tensors[p].elements;
      for (std::int64_t e = slice_start(begin, elements, block.granularity);
           e < slice_start(end, elements, block.granularity); ++e)
        visit(layer, p, e);
    }
}

// Copies every piece of every message from `from` (at src) into `to` (at dst); the source must hold the
// element and the destination must not have it yet.
inline void apply_messages(const char* what, const Model& model, const std::vector<SliceBlock>& blocks,
                           const std::vector<Piece>& pieces, const std::vector<Message>& messages,
                           const HostBuffers& from, HostBuffers& to) {
  for (const Message& message : messages)
    for (std::size_t p = message.first_piece; p < message.first_piece + message.piece_count; ++p) {
      const Piece& piece = pieces[p];
      for_each_element(model, blocks[static_cast<std::size_t>(piece.block)], piece.begin, piece.end,
                       [&](int layer, std::size_t tensor, std::int64_t e) {
                         const std::size_t source = from.index(message.src, layer, tensor, e);
                         const std::size_t target = to.index(message.dst, layer, tensor, e);
                         check_plan(from.present(source), what, ": rank ", message.src, " sends element ", e, " of ",
                                    model.tensors[tensor].name, " in layer ", layer, ", which it does not hold");
                         check_plan(!to.present(target), what, ": rank ", message.dst, " receives element ", e, " of ",
                                    model.tensors[tensor].name, " in layer ", layer, " twice");
                         to.set(target, from.value(source));
                       });
    }
}

// Values in [-2^20, 2^20]: sums over up to 2^40 pipelines stay exact in 64 bits.
inline std::int64_t random_value(Rng& rng) { return rng.uniform_int(-(std::int64_t{1} << 20), std::int64_t{1} << 20); }

// Calls visit(rank, layer, tensor, begin, end) for the elements each owner holds.
template <class Visit>
void for_each_owned(const OptimizerLayout& layout, const Model& model, Visit&& visit) {
  for (const OwnerGroup& group : layout.groups) {
    const auto n = static_cast<std::int64_t>(group.owners.size());
    for (int layer = group.layer_begin; layer < group.layer_end; ++layer)
      for (std::size_t p = 0; p < model.tensors.size(); ++p)
        for (std::int64_t r = 0; r < n; ++r)
          visit(group.owners[static_cast<std::size_t>(r)], layer, p, slice_start(r, model.tensors[p].elements, n),
                slice_start(r + 1, model.tensors[p].elements, n));
  }
}

// Calls visit(rank, layer, tensor, begin, end) for the elements each propagation rank holds: every CP rank its
// TP fraction, read from the stage's CP-major ranks (not from the planners' replicas, which it checks).
template <class Visit>
void for_each_held(const Placement& placement, const Model& model, Visit&& visit) {
  for (const PipelinePlacement& pipeline : placement.pipelines)
    for (const Stage& stage : pipeline.stages) {
      const std::int64_t tp = pipeline.scheme.tp();
      for (int layer = stage.layer_begin; layer < stage.layer_end; ++layer)
        for (std::size_t p = 0; p < model.tensors.size(); ++p)
          for (std::size_t i = 0; i < stage.ranks.size(); ++i) {
            const auto t = static_cast<std::int64_t>(i) % tp;
            visit(stage.ranks[i], layer, p, slice_start(t, model.tensors[p].elements, tp),
                  slice_start(t + 1, model.tensors[p].elements, tp));
          }
    }
}

// `actual` must hold exactly the elements `expected` holds, with the same values.
inline void compare(const char* what, const HostBuffers& expected, const HostBuffers& actual, const Model& model,
                    std::int64_t gpus) {
  for (int rank = 0; rank < gpus; ++rank)
    for (int layer = 0; layer < model.layers; ++layer)
      for (std::size_t p = 0; p < model.tensors.size(); ++p)
        for (std::int64_t e = 0; e < model.tensors[p].elements; ++e) {
          const std::size_t i = expected.index(rank, layer, p, e);
          check_plan(expected.present(i) == actual.present(i), what, ": rank ", rank,
                     expected.present(i) ? " lacks" : " has", " element ", e, " of ", model.tensors[p].name,
                     " in layer ", layer);
          check_plan(!expected.present(i) || expected.value(i) == actual.value(i), what, ": rank ", rank, " has ",
                     actual.value(i), " at element ", e, " of ", model.tensors[p].name, " in layer ", layer,
                     ", expected ", expected.value(i));
        }
}

}  // namespace detail

// Fills the optimizer layout with random parameters, applies the pull and checks that every rank holds
// exactly its propagation shard (its TP fraction of its stage's layers, in every CP rank) with the right values.
// Raises invalid_plan at the first difference.
inline void check_pull(const PullPlan& plan, const Placement& placement, const OptimizerLayout& layout,
                       const Model& model, std::uint64_t seed) {
  detail::require_compatible(placement, layout, model);
  Rng rng(seed);
  std::vector<std::int64_t> global(static_cast<std::size_t>(model.layers * model.layer_elements()));
  for (std::int64_t& value : global) value = detail::random_value(rng);
  std::vector<std::int64_t> offset;
  std::int64_t layer_size = 0;
  for (const Tensor& tensor : model.tensors) {
    offset.push_back(layer_size);
    layer_size += tensor.elements;
  }
  auto global_at = [&](int layer, std::size_t p, std::int64_t e) {
    return global[static_cast<std::size_t>(layer * layer_size + offset[p] + e)];
  };
  HostBuffers optimizer(model, plan.gpus);
  detail::for_each_owned(layout, model, [&](int rank, int layer, std::size_t p, std::int64_t begin, std::int64_t end) {
    for (std::int64_t e = begin; e < end; ++e)
      optimizer.set(optimizer.index(rank, layer, p, e), global_at(layer, p, e));
  });
  HostBuffers expected(model, plan.gpus);
  detail::for_each_held(placement, model,
                        [&](int rank, int layer, std::size_t p, std::int64_t begin, std::int64_t end) {
                          for (std::int64_t e = begin; e < end; ++e)
                            expected.set(expected.index(rank, layer, p, e), global_at(layer, p, e));
                        });
  HostBuffers propagation(model, plan.gpus);
  detail::apply_messages("pull", model, plan.blocks, plan.pieces, plan.sends, optimizer, propagation);
  detail::apply_messages("pull", model, plan.blocks, plan.pieces, plan.local_moves, optimizer, propagation);
  detail::compare("pull", expected, propagation, model, plan.gpus);
}

// Gives every propagation rank random gradients for what it holds, runs the push's reduce-scatters (each
// piece summed over its group's members) and LNK, and checks that every optimizer owner ends with exactly
// its segments of the gradient summed over all pipelines and CP ranks. Raises invalid_plan at the first difference.
inline void check_push(const PushPlan& plan, const Placement& placement, const OptimizerLayout& layout,
                       const Model& model, std::uint64_t seed) {
  detail::require_compatible(placement, layout, model);
  Rng rng(seed);
  HostBuffers gradients(model, plan.gpus);
  HostBuffers expected(model, plan.gpus);
  HostBuffers summed(model, plan.gpus);  // the global sum, at rank 0's slots
  detail::for_each_held(placement, model,
                        [&](int rank, int layer, std::size_t p, std::int64_t begin, std::int64_t end) {
                          for (std::int64_t e = begin; e < end; ++e) {
                            const std::int64_t value = detail::random_value(rng);
                            gradients.set(gradients.index(rank, layer, p, e), value);
                            const std::size_t total = summed.index(0, layer, p, e);
                            summed.set(total, summed.value(total) + value);
                          }
                        });
  detail::for_each_owned(layout, model, [&](int rank, int layer, std::size_t p, std::int64_t begin, std::int64_t end) {
    for (std::int64_t e = begin; e < end; ++e)
      expected.set(expected.index(rank, layer, p, e), summed.value(summed.index(0, layer, p, e)));
  });
  HostBuffers reduced(model, plan.gpus);
  const auto d = static_cast<std::int64_t>(plan.pipelines);
  for (const RsGroup& group : plan.rs_groups) {
    detail::check_plan(group.block >= 0 && static_cast<std::size_t>(group.block) < plan.blocks.size() &&
                           static_cast<std::int64_t>(group.members.size()) == d,
                       "push: reduce-scatter group of block ", group.block, " segment ", group.segment,
                       " is malformed");
    const SliceBlock& block = plan.blocks[static_cast<std::size_t>(group.block)];
    const std::int64_t step = block.granularity / (d * plan.grid);
    for (std::int64_t i = 0; i < d; ++i) {
      const std::int64_t piece = group.segment * d + i;
      const int receiver = group.members[static_cast<std::size_t>(i)];
      detail::for_each_element(
          model, block, piece * step, (piece + 1) * step, [&](int layer, std::size_t p, std::int64_t e) {
            std::int64_t sum = 0;
            for (const int member : group.members) {
              const std::size_t source = gradients.index(member, layer, p, e);
              detail::check_plan(gradients.present(source), "push: rank ", member, " reduces element ", e, " of ",
                                 model.tensors[p].name, " in layer ", layer, ", for which it has no gradient");
              sum += gradients.value(source);
            }
            const std::size_t target = reduced.index(receiver, layer, p, e);
            detail::check_plan(!reduced.present(target), "push: rank ", receiver, " is given element ", e, " of ",
                               model.tensors[p].name, " in layer ", layer, " by two reduce-scatters");
            reduced.set(target, sum);
          });
    }
  }
  HostBuffers owners(model, plan.gpus);
  detail::apply_messages("push", model, plan.blocks, plan.pieces, plan.sends, reduced, owners);
  detail::apply_messages("push", model, plan.blocks, plan.pieces, plan.local_moves, reduced, owners);
  detail::compare("push", expected, owners, model, plan.gpus);
}

}  // namespace sluice::shard
