#pragma once
// Mutual-slice arithmetic and what the pull and push plans share: slice bounds and bytes, the granularity LCMs,
// the plan-size limits, the inputs' compatibility, and the merging of raw pieces into messages. Not for callers:
// pull_push.hpp, check.hpp and the other detail headers use it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/slices.hpp"

namespace sluice::shard::detail {

inline constexpr std::int64_t max_granularity = std::int64_t{1} << 40;

using shard::slice_start;

inline std::int64_t checked_lcm(std::int64_t a, std::int64_t b) {
  const std::int64_t g = std::gcd(a, b);
  sluice::require(a / g <= max_granularity / b, "shard: the mutual-slice granularity LCM(", a, ", ", b,
                  ") exceeds 2^40");
  return a / g * b;
}

inline std::int64_t piece_bytes(const Model& model, int bytes_per_element, const SliceBlock& block, std::int64_t begin,
                                std::int64_t end) noexcept {
  std::int64_t elements = 0;
  for (const Tensor& tensor : model.tensors)
    elements +=
        slice_start(end, tensor.elements, block.granularity) - slice_start(begin, tensor.elements, block.granularity);
  return elements * (block.layer_end - block.layer_begin) * bytes_per_element;
}

// The elements of one layer in slices [0, k): piece_bytes of [a, b) is (prefix(b) - prefix(a)) · layers · bytes,
// so a piece cut at boundaries whose prefixes are known costs no division.
inline std::int64_t slice_prefix(const Model& model, std::int64_t k, std::int64_t granularity) noexcept {
  std::int64_t elements = 0;
  for (const Tensor& tensor : model.tensors) elements += slice_start(k, tensor.elements, granularity);
  return elements;
}

// Cells of the common refinement of two partitions of [0, M) into a and b equal parts (both dividing M):
// a + b boundaries less the gcd(a, b) they share.
inline std::int64_t refinement_cells(std::int64_t a, std::int64_t b) noexcept { return a + b - std::gcd(a, b); }

inline void require_owner_counts(const OptimizerLayout& layout) {
  for (std::size_t g = 0; g < layout.groups.size(); ++g)
    sluice::require(static_cast<std::int64_t>(layout.groups[g].owners.size()) <= max_plan_pieces,
                    "shard: optimizer layout group ", g, " has ", layout.groups[g].owners.size(),
                    " owner segments, more than the maximum ", max_plan_pieces);
}

// Pieces of the pull before merging: per block and pipeline, the TP fractions cut by the owner segments.
// O(blocks · distinct TP degrees). Owners ≤ 2^26, blocks ≤ 2^17 and pipelines ≤ 2^14: no overflow.
inline std::int64_t pull_piece_count(const Placement& placement, const OptimizerLayout& layout) {
  require_owner_counts(layout);
  std::map<std::int64_t, std::int64_t> pipelines_of_tp;
  for (const PipelinePlacement& pipeline : placement.pipelines) ++pipelines_of_tp[pipeline.scheme.tp()];
  std::int64_t pieces = 0;
  for (const Block& block : block_ranges(placement, &layout)) {
    const auto n = static_cast<std::int64_t>(layout.groups[block.group].owners.size());
    for (const auto& [tp, count] : pipelines_of_tp) pieces += count * refinement_cells(tp, n);
  }
  return pieces;
}

// Pieces of the push before merging: per block, the D·G reduce-scatter pieces cut by the owner segments.
inline std::int64_t push_piece_count(const Placement& placement, const OptimizerLayout& layout, std::int64_t grid) {
  require_owner_counts(layout);
  const std::int64_t rs_pieces = static_cast<std::int64_t>(placement.pipelines.size()) * grid;
  std::int64_t pieces = 0;
  for (const Block& block : block_ranges(placement, &layout))
    pieces += refinement_cells(rs_pieces, static_cast<std::int64_t>(layout.groups[block.group].owners.size()));
  return pieces;
}

inline void require_plan_size(const char* what, std::int64_t pieces) {
  sluice::require(pieces <= max_plan_pieces, "shard ", what, ": the plan would cut ", pieces,
                  " pieces (before merging), more than the maximum ", max_plan_pieces);
}

struct RawPiece {
  int src;
  int dst;
  Piece piece;
};

// Sorts raw pieces by (src, dst) keeping generation order within a pair (two stable counting passes),
// merges adjacent slices, and emits one message per pair.
inline void batch(std::vector<RawPiece>& raw, std::int64_t gpus, const Model& model, int bytes_per_element,
                  const std::vector<SliceBlock>& blocks, std::vector<Piece>& pieces, std::vector<Message>& sends,
                  std::vector<Message>& local_moves, std::int64_t& send_bytes, std::int64_t& local_bytes) {
  std::vector<RawPiece> sorted(raw.size());
  std::vector<std::size_t> start(static_cast<std::size_t>(gpus) + 1);
  auto pass = [&](std::vector<RawPiece>& from, std::vector<RawPiece>& to, auto key) {
    std::fill(start.begin(), start.end(), 0);
    for (const RawPiece& item : from) ++start[static_cast<std::size_t>(key(item)) + 1];
    std::partial_sum(start.begin(), start.end(), start.begin());
    for (const RawPiece& item : from) to[start[static_cast<std::size_t>(key(item))]++] = item;
  };
  pass(raw, sorted, [](const RawPiece& item) { return item.dst; });
  pass(sorted, raw, [](const RawPiece& item) { return item.src; });

  pieces.clear();
  pieces.reserve(raw.size());
  sends.reserve(raw.size());
  send_bytes = local_bytes = 0;
  for (std::size_t i = 0; i < raw.size();) {
    const int src = raw[i].src;
    const int dst = raw[i].dst;
    Message message{src, dst, static_cast<std::uint32_t>(pieces.size()), 0, 0};
    for (; i < raw.size() && raw[i].src == src && raw[i].dst == dst; ++i) {
      const Piece& piece = raw[i].piece;
      if (message.piece_count > 0 && pieces.back().block == piece.block && pieces.back().end == piece.begin) {
        pieces.back().end = piece.end;
      } else {
        pieces.push_back(piece);
        ++message.piece_count;
      }
    }
    for (std::size_t p = message.first_piece; p < pieces.size(); ++p)
      message.bytes += piece_bytes(model, bytes_per_element, blocks[static_cast<std::size_t>(pieces[p].block)],
                                   pieces[p].begin, pieces[p].end);
    (src == dst ? local_bytes : send_bytes) += message.bytes;
    (src == dst ? local_moves : sends).push_back(message);
  }
}

inline void require_compatible(const Placement& placement, const OptimizerLayout& layout, const Model& model) {
  require_valid(model);
  validate(placement);
  validate(layout);
  sluice::require(placement.gpus == layout.gpus, "shard: the placement has ", placement.gpus,
                  " GPUs, the optimizer layout ", layout.gpus);
  sluice::require(placement.layers == model.layers && layout.layers == model.layers, "shard: the model has ",
                  model.layers, " layers, the placement ", placement.layers, ", the optimizer layout ", layout.layers);
}

inline std::int64_t tp_lcm(const Placement& placement) {
  std::int64_t value = 1;
  for (const PipelinePlacement& pipeline : placement.pipelines) value = checked_lcm(value, pipeline.scheme.tp());
  return value;
}

}  // namespace sluice::shard::detail
