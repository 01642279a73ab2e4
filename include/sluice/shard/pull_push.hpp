#pragma once
// LNK planning (Hydraulis §5.2): the pull moves 16-bit parameters from the optimizer layout into the
// propagation placement, the push reduce-scatters gradients across the D pipelines and moves the summed
// pieces to their optimizer owners. Everything moves as mutual slices: a block's parameters are cut into
// `granularity` equal slices (each tensor on its own, slice k being elements [floor(k·E/M), floor((k+1)·E/M))),
// fine enough that every TP fraction, optimizer segment and reduce-scatter piece is a whole number of slices.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"

namespace sluice::shard {

// Layers [layer_begin, layer_end), on which the owners and every pipeline's stage are constant.
struct SliceBlock {
  int layer_begin = 0;
  int layer_end = 0;
  std::int64_t granularity = 0;  // mutual slices per parameter tensor
  friend bool operator==(const SliceBlock&, const SliceBlock&) = default;
};

// Mutual slices [begin, end) of every tensor of every layer of block `block`.
struct Piece {
  int block = 0;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  friend bool operator==(const Piece&, const Piece&) = default;
};

// All pieces from src to dst, in one message: pieces[first_piece, first_piece + piece_count).
struct Message {
  int src = 0;
  int dst = 0;
  std::size_t first_piece = 0;
  std::size_t piece_count = 0;
  std::int64_t bytes = 0;
  friend bool operator==(const Message&, const Message&) = default;
};

struct PullPlan {
  std::int64_t gpus = 0;
  std::vector<SliceBlock> blocks;
  std::vector<Piece> pieces;
  std::vector<Message> sends;        // src != dst, ordered by (src, dst), one per pair
  std::vector<Message> local_moves;  // src == dst, ordered by rank
  std::int64_t send_bytes = 0;
  std::int64_t local_bytes = 0;
  friend bool operator==(const PullPlan&, const PullPlan&) = default;
};

// The reduce-scatter of segment `segment` of a block's TP grid (G = LCM of the TP degrees) over the D ranks
// that hold it, one per pipeline: afterwards piece segment·D + i (of D·G) holds the sum and lives on members[i].
struct RsGroup {
  int block = 0;
  std::int64_t segment = 0;
  std::vector<int> members;  // members[i] receives piece segment·D + i; as a set, one rank per pipeline
  std::int64_t bytes = 0;    // gradient bytes of the whole segment, as each member contributes them
  friend bool operator==(const RsGroup&, const RsGroup&) = default;
};

struct PushPlan {
  std::int64_t gpus = 0;
  std::int64_t grid = 0;  // G
  int pipelines = 0;      // D
  std::vector<SliceBlock> blocks;
  std::vector<RsGroup> rs_groups;  // ordered by (block, segment)
  std::vector<Piece> pieces;
  std::vector<Message> sends;        // RS piece holder -> optimizer owner, ordered by (src, dst), one per pair
  std::vector<Message> local_moves;  // holder == owner
  std::int64_t send_bytes = 0;
  std::int64_t local_bytes = 0;
  friend bool operator==(const PushPlan&, const PushPlan&) = default;
};

struct PushOptions {
  // Give each reduce-scatter piece to the group member that owns most of it in the optimizer layout
  // (greedy, largest overlap first), so more of the LNK is local moves; otherwise piece i goes to pipeline i.
  bool match_owners = true;
};

namespace detail {

__extension__ using wide = __int128;

inline constexpr std::int64_t max_granularity = std::int64_t{1} << 40;

// floor(k·elements/granularity) without overflow; 128-bit division (slow) only when the product needs it.
inline std::int64_t slice_start(std::int64_t k, std::int64_t elements, std::int64_t granularity) noexcept {
  std::int64_t product = 0;
  if (!__builtin_mul_overflow(k, elements, &product)) return product / granularity;
  return static_cast<std::int64_t>(static_cast<wide>(k) * elements / granularity);
}

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
    std::ranges::fill(start, 0);
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
    Message message{src, dst, pieces.size(), 0, 0};
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
  model.validate();
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

}  // namespace detail

namespace detail {

// A run of mutual slices [begin, end) of a block, with slice_prefix at both ends; `rank` is the rank it goes
// to (for a source's own segments, the source).
struct SliceRun {
  int rank = 0;
  int block = 0;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t prefix_begin = 0;
  std::int64_t prefix_end = 0;
};

// Stable sort by rank: O(k) when already sorted, O(k · log runs) otherwise (merges of the ascending runs).
inline void sort_by_rank(std::vector<SliceRun>& items, std::vector<SliceRun>& scratch, std::vector<std::size_t>& runs) {
  runs.assign(1, 0);
  for (std::size_t i = 1; i < items.size(); ++i)
    if (items[i].rank < items[i - 1].rank) runs.push_back(i);
  runs.push_back(items.size());
  const auto by_rank = [](const SliceRun& x, const SliceRun& y) { return x.rank < y.rank; };
  while (runs.size() > 2) {
    scratch.resize(items.size());
    std::size_t kept = 0;
    for (std::size_t k = 0; k + 1 < runs.size(); k += 2) {
      const std::size_t end = k + 2 < runs.size() ? runs[k + 2] : runs[k + 1];
      const auto first = items.begin() + static_cast<std::ptrdiff_t>(runs[k]);
      const auto middle = items.begin() + static_cast<std::ptrdiff_t>(runs[k + 1]);
      const auto last = items.begin() + static_cast<std::ptrdiff_t>(end);
      std::merge(first, middle, middle, last, scratch.begin() + static_cast<std::ptrdiff_t>(runs[k]), by_rank);
      runs[kept++] = runs[k];
    }
    runs[kept++] = items.size();
    runs.resize(kept);
    items.swap(scratch);
  }
}

// The segments each rank owns, by rank, each rank's in (group, segment) order: O(N + owner entries).
struct Ownership {
  struct Segment {
    std::size_t group;
    std::int64_t segment;
  };
  std::vector<std::size_t> start;  // rank r owns segments[start[r], start[r + 1])
  std::vector<Segment> segments;
};

inline Ownership ownership(const OptimizerLayout& layout) {
  Ownership owned;
  owned.start.assign(static_cast<std::size_t>(layout.gpus) + 1, 0);
  for (const OwnerGroup& group : layout.groups)
    for (const int rank : group.owners) ++owned.start[static_cast<std::size_t>(rank) + 1];
  std::partial_sum(owned.start.begin(), owned.start.end(), owned.start.begin());
  owned.segments.resize(owned.start.back());
  std::vector<std::size_t> next(owned.start.begin(), owned.start.end() - 1);
  for (std::size_t g = 0; g < layout.groups.size(); ++g)
    for (std::size_t r = 0; r < layout.groups[g].owners.size(); ++r)
      owned.segments[next[static_cast<std::size_t>(layout.groups[g].owners[r])]++] = {g, static_cast<std::int64_t>(r)};
  return owned;
}

// What plan_pull and the pull's cost share: the inputs checked, the blocks and their granularities.
struct PullSetup {
  std::vector<Block> blocks;
  std::vector<SliceBlock> slices;
  std::int64_t pieces_before_merging = 0;
};

inline PullSetup pull_setup(const Placement& placement, const OptimizerLayout& layout, const Model& model) {
  require_compatible(placement, layout, model);
  const std::int64_t tps = tp_lcm(placement);
  PullSetup setup;
  for (const Block& block : block_ranges(placement, &layout))
    setup.slices.push_back({block.layer_begin, block.layer_end,
                            checked_lcm(static_cast<std::int64_t>(layout.groups[block.group].owners.size()), tps)});
  setup.pieces_before_merging = pull_piece_count(placement, layout);
  require_plan_size("pull", setup.pieces_before_merging);
  setup.blocks = blocks(placement, &layout);
  return setup;
}

// Calls emit(src, dst, runs, bytes) for every message of the pull, in (src, dst) order, `runs` being its
// pieces. Per source rank: its owned segments per block, cut by each pipeline's TP fractions (pipeline by
// pipeline, so that destinations mostly come in rank order), a run of slices extended while the next one
// continues it for the same destination, then a stable sort by destination. This is the order, merging and
// byte count of sorting all (owner, rank) pieces by (src, dst), without holding them: the time is
// O(N + owner entries + pieces before merging), the memory beyond the output O(N + blocks · Σ TP + one
// source's pieces).
template <class Emit>
void for_each_pull_message(const Placement& placement, const OptimizerLayout& layout, const Model& model,
                           const PullSetup& setup, Emit&& emit) {
  const Ownership owned = ownership(layout);
  const std::size_t pipelines = placement.pipelines.size();
  std::vector<std::size_t> first_block(layout.groups.size() + 1, setup.blocks.size());
  for (std::size_t b = setup.blocks.size(); b-- > 0;) first_block[setup.blocks[b].group] = b;
  // Flat tables: the TP degrees (as indices into the distinct ones), and per block the ranks of every
  // pipeline's stage one after another (pipeline j's at holder_offset[j]), so a destination is one load.
  std::vector<std::int64_t> degrees;
  for (const PipelinePlacement& pipeline : placement.pipelines) degrees.push_back(pipeline.scheme.tp());
  std::ranges::sort(degrees);
  degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
  std::vector<std::size_t> kind(pipelines);
  std::vector<std::size_t> holder_offset(pipelines + 1, 0);
  for (std::size_t j = 0; j < pipelines; ++j) {
    const std::int64_t tp = placement.pipelines[j].scheme.tp();
    kind[j] = static_cast<std::size_t>(std::ranges::lower_bound(degrees, tp) - degrees.begin());
    holder_offset[j + 1] = holder_offset[j] + static_cast<std::size_t>(tp);
  }
  const std::size_t holders = holder_offset.back();
  std::vector<int> holder_ranks;
  holder_ranks.reserve(setup.blocks.size() * holders);
  for (const Block& block : setup.blocks)
    for (const Stage* stage : block.stages)
      holder_ranks.insert(holder_ranks.end(), stage->ranks.begin(), stage->ranks.end());
  std::vector<std::int64_t> widths;  // per (block, TP degree)
  for (const SliceBlock& block : setup.slices)
    for (const std::int64_t tp : degrees) widths.push_back(block.granularity / tp);

  std::vector<SliceRun> spans;
  std::vector<std::int64_t> first_tp_rank;  // per (span, TP degree): the TP rank holding the span's first slice
  std::vector<SliceRun> items;
  std::vector<SliceRun> scratch;
  std::vector<std::size_t> runs;
  for (std::size_t src = 0; src + 1 < owned.start.size(); ++src) {
    // The source's segments in (block, segment) order.
    spans.clear();
    for (std::size_t e = owned.start[src]; e < owned.start[src + 1];) {
      const std::size_t g = owned.segments[e].group;
      std::size_t group_end = e;
      while (group_end < owned.start[src + 1] && owned.segments[group_end].group == g) ++group_end;
      const auto n = static_cast<std::int64_t>(layout.groups[g].owners.size());
      for (std::size_t b = first_block[g]; b < first_block[g + 1]; ++b) {
        const std::int64_t m = setup.slices[b].granularity;
        for (std::size_t k = e; k < group_end; ++k) {
          const std::int64_t begin = owned.segments[k].segment * (m / n);
          const std::int64_t end = begin + m / n;
          spans.push_back({static_cast<int>(src), static_cast<int>(b), begin, end, slice_prefix(model, begin, m),
                           slice_prefix(model, end, m)});
        }
      }
      e = group_end;
    }
    if (spans.empty()) continue;
    first_tp_rank.clear();
    for (const SliceRun& span : spans)
      for (std::size_t k = 0; k < degrees.size(); ++k)
        first_tp_rank.push_back(span.begin / widths[static_cast<std::size_t>(span.block) * degrees.size() + k]);
    items.clear();
    for (std::size_t j = 0; j < pipelines; ++j) {
      for (std::size_t i = 0; i < spans.size(); ++i) {
        const SliceRun& span = spans[i];
        const auto b = static_cast<std::size_t>(span.block);
        const std::int64_t width = widths[b * degrees.size() + kind[j]];
        const int* ranks = holder_ranks.data() + b * holders + holder_offset[j];
        for (std::int64_t t = first_tp_rank[i * degrees.size() + kind[j]]; t * width < span.end; ++t) {
          const int dst = ranks[t];
          const std::int64_t begin = std::max(span.begin, t * width);
          const std::int64_t end = std::min(span.end, (t + 1) * width);
          const std::int64_t m = setup.slices[b].granularity;
          const std::int64_t prefix_end = end == span.end ? span.prefix_end : slice_prefix(model, end, m);
          if (!items.empty() && items.back().rank == dst && items.back().block == span.block &&
              items.back().end == begin) {
            items.back().end = end;
            items.back().prefix_end = prefix_end;
          } else {
            items.push_back({dst, span.block, begin, end,
                             begin == span.begin ? span.prefix_begin : slice_prefix(model, begin, m), prefix_end});
          }
        }
      }
    }
    sort_by_rank(items, scratch, runs);
    for (std::size_t i = 0; i < items.size();) {
      const std::size_t first = i;
      std::int64_t bytes = 0;
      for (; i < items.size() && items[i].rank == items[first].rank; ++i) {
        const SliceBlock& block = setup.slices[static_cast<std::size_t>(items[i].block)];
        bytes +=
            (items[i].prefix_end - items[i].prefix_begin) * (block.layer_end - block.layer_begin) * model.param_bytes;
      }
      emit(static_cast<int>(src), items[first].rank, std::span<const SliceRun>(items.data() + first, i - first), bytes);
    }
  }
}

}  // namespace detail

// Pull: per block, M = LCM(n, TP_1..TP_K) (n = the block's optimizer segments); TP rank t of a pipeline
// needs slices [t·M/TP, (t+1)·M/TP) and takes each from the owner of its segment.
inline PullPlan plan_pull(const Placement& placement, const OptimizerLayout& layout, const Model& model) {
  const detail::PullSetup setup = detail::pull_setup(placement, layout, model);
  PullPlan plan{placement.gpus, setup.slices, {}, {}, {}, 0, 0};
  // Merging only shrinks the plan: capacity for the pieces before merging never reallocates, and the pages
  // of what stays unused are never touched.
  plan.pieces.reserve(static_cast<std::size_t>(setup.pieces_before_merging));
  plan.sends.reserve(static_cast<std::size_t>(setup.pieces_before_merging));
  plan.local_moves.reserve(static_cast<std::size_t>(std::min(setup.pieces_before_merging, placement.gpus)));
  detail::for_each_pull_message(
      placement, layout, model, setup,
      [&](int src, int dst, std::span<const detail::SliceRun> runs, std::int64_t bytes) {
        (src == dst ? plan.local_moves : plan.sends).push_back({src, dst, plan.pieces.size(), runs.size(), bytes});
        (src == dst ? plan.local_bytes : plan.send_bytes) += bytes;
        for (const detail::SliceRun& run : runs) plan.pieces.push_back({run.block, run.begin, run.end});
      });
  return plan;
}

namespace detail {

// Orders one RS group's pieces: result[i] = the member that receives piece i.
inline std::vector<int> order_pieces(std::span<const int> members, std::int64_t first_piece,
                                     std::int64_t pieces_per_block, std::span<const int> owners,
                                     std::vector<int>& position_of_rank, bool match) {
  if (!match) return {members.begin(), members.end()};
  const std::size_t d = members.size();
  std::vector<int> result(d, -1);
  for (std::size_t q = 0; q < d; ++q) position_of_rank[static_cast<std::size_t>(members[q])] = static_cast<int>(q);
  struct Candidate {
    std::int64_t overlap;
    std::size_t piece;
    int member;
  };
  std::vector<Candidate> candidates;
  const auto n = static_cast<std::int64_t>(owners.size());
  const std::int64_t m = checked_lcm(n, pieces_per_block);
  const std::int64_t piece_step = m / pieces_per_block;
  const std::int64_t owner_step = m / n;
  for (std::size_t i = 0; i < d; ++i) {
    const std::int64_t begin = (first_piece + static_cast<std::int64_t>(i)) * piece_step;
    const std::int64_t end = begin + piece_step;
    for (std::int64_t r = begin / owner_step; r * owner_step < end; ++r) {
      const int member = position_of_rank[static_cast<std::size_t>(owners[static_cast<std::size_t>(r)])];
      if (member >= 0)
        candidates.push_back({std::min((r + 1) * owner_step, end) - std::max(r * owner_step, begin), i, member});
    }
  }
  for (std::size_t q = 0; q < d; ++q) position_of_rank[static_cast<std::size_t>(members[q])] = -1;
  std::ranges::sort(candidates, [](const Candidate& x, const Candidate& y) {
    if (x.overlap != y.overlap) return x.overlap > y.overlap;
    if (x.piece != y.piece) return x.piece < y.piece;
    return x.member < y.member;
  });
  std::vector<char> taken(d, 0);
  for (const Candidate& candidate : candidates) {
    if (result[candidate.piece] >= 0 || taken[static_cast<std::size_t>(candidate.member)]) continue;
    result[candidate.piece] = members[static_cast<std::size_t>(candidate.member)];
    taken[static_cast<std::size_t>(candidate.member)] = 1;
  }
  std::size_t next = 0;
  for (std::size_t i = 0; i < d; ++i) {
    if (result[i] >= 0) continue;
    while (taken[next]) ++next;
    result[i] = members[next];
    taken[next] = 1;
  }
  return result;
}

}  // namespace detail

// Push: per block and TP-grid segment u, a reduce-scatter over the D ranks holding u (one per pipeline)
// leaves piece u·D + i of D·G on members[i]; then per block, M' = LCM(n, D·G) slices move from their piece
// holder to their optimizer owner.
inline PushPlan plan_push(const Placement& placement, const OptimizerLayout& layout, const Model& model,
                          const PushOptions& options = {}) {
  detail::require_compatible(placement, layout, model);
  const std::int64_t grid = detail::tp_grid(placement);
  const auto d = static_cast<std::int64_t>(placement.pipelines.size());
  const std::int64_t pieces_before_merging = detail::push_piece_count(placement, layout, grid);
  detail::require_plan_size("push", pieces_before_merging);
  PushPlan plan{placement.gpus, grid, static_cast<int>(d), {}, {}, {}, {}, {}, 0, 0};
  const std::int64_t pieces_per_block = d * grid;
  std::vector<detail::RawPiece> raw;
  raw.reserve(static_cast<std::size_t>(pieces_before_merging));
  std::vector<int> position_of_rank(static_cast<std::size_t>(placement.gpus), -1);
  std::vector<int> holder(static_cast<std::size_t>(pieces_per_block));
  std::vector<int> members(static_cast<std::size_t>(d));
  const auto blocks = detail::blocks(placement, &layout);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const detail::Block& block = blocks[b];
    const std::vector<int>& owners = layout.groups[block.group].owners;
    const auto n = static_cast<std::int64_t>(owners.size());
    const std::int64_t m = detail::checked_lcm(n, pieces_per_block);
    plan.blocks.push_back({block.layer_begin, block.layer_end, m});
    const SliceBlock& slices = plan.blocks.back();
    for (std::int64_t u = 0; u < grid; ++u) {
      for (std::size_t q = 0; q < block.stages.size(); ++q) {
        const std::int64_t tp = placement.pipelines[q].scheme.tp();
        members[q] = block.stages[q]->ranks[static_cast<std::size_t>(u * tp / grid)];
      }
      std::vector<int> order =
          detail::order_pieces(members, u * d, pieces_per_block, owners, position_of_rank, options.match_owners);
      std::ranges::copy(order, holder.begin() + u * d);
      const std::int64_t step = m / grid;
      plan.rs_groups.push_back({static_cast<int>(b), u, std::move(order),
                                detail::piece_bytes(model, model.grad_bytes, slices, u * step, (u + 1) * step)});
    }
    const std::int64_t piece_step = m / pieces_per_block;
    const std::int64_t owner_step = m / n;
    for (std::int64_t position = 0, h = 0, r = 0; position < m;) {
      const std::int64_t end = std::min((h + 1) * piece_step, (r + 1) * owner_step);
      raw.push_back({holder[static_cast<std::size_t>(h)], owners[static_cast<std::size_t>(r)],
                     {static_cast<int>(b), position, end}});
      position = end;
      if (end == (h + 1) * piece_step) ++h;
      if (end == (r + 1) * owner_step) ++r;
    }
  }
  detail::batch(raw, plan.gpus, model, model.grad_bytes, plan.blocks, plan.pieces, plan.sends, plan.local_moves,
                plan.send_bytes, plan.local_bytes);
  return plan;
}

namespace detail {

inline std::vector<SliceBlock> expected_blocks(const std::vector<Block>& blocks, const OptimizerLayout& layout,
                                               std::int64_t multiple) {
  std::vector<SliceBlock> result;
  for (const Block& block : blocks)
    result.push_back({block.layer_begin, block.layer_end,
                      checked_lcm(static_cast<std::int64_t>(layout.groups[block.group].owners.size()), multiple)});
  return result;
}

// slice_prefix remembered at the last two positions asked for: consecutive pieces of a plan mostly share their
// boundaries (one owner segment sent to every pipeline), and then cost no division.
class PrefixMemo {
public:
  explicit PrefixMemo(const Model& model) : model_(model) {}
  std::int64_t operator()(int block, std::int64_t position, std::int64_t granularity) {
    for (std::size_t i = 0; i < 2; ++i)
      if (block_[i] == block && position_[i] == position) return value_[i];
    block_[next_] = block;
    position_[next_] = position;
    value_[next_] = slice_prefix(model_, position, granularity);
    return value_[std::exchange(next_, 1 - next_)];
  }

private:
  const Model& model_;
  std::array<int, 2> block_ = {-1, -1};
  std::array<std::int64_t, 2> position_ = {0, 0};
  std::array<std::int64_t, 2> value_ = {0, 0};
  std::size_t next_ = 0;
};

// Checks the message lists of a plan: ranks, ordering (one message per pair), piece bounds, each piece in
// exactly one message, a message's pieces in (block, slice) order without overlap, bytes; calls
// visit(src, dst, piece) for every piece. O(pieces), no copy of them.
template <class Visit>
void check_messages(const char* what, std::int64_t gpus, const std::vector<SliceBlock>& blocks,
                    const std::vector<Piece>& pieces, const std::vector<Message>& sends,
                    const std::vector<Message>& local_moves, std::int64_t send_bytes, std::int64_t local_bytes,
                    const Model& model, int bytes_per_element, Visit&& visit) {
  std::vector<char> used(pieces.size(), 0);
  PrefixMemo prefix(model);
  for (const bool local : {false, true}) {
    const std::vector<Message>& messages = local ? local_moves : sends;
    std::int64_t total = 0;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const Message& message = messages[i];
      check_plan(message.src >= 0 && message.src < gpus && message.dst >= 0 && message.dst < gpus, what, ": message ",
                 i, " goes ", message.src, " -> ", message.dst, ", outside [0, ", gpus, ")");
      check_plan((message.src == message.dst) == local, what, ": message ", i, " (", message.src, " -> ", message.dst,
                 ") is in the ", local ? "local moves" : "sends");
      if (i > 0)
        check_plan(std::pair(messages[i - 1].src, messages[i - 1].dst) < std::pair(message.src, message.dst), what,
                   ": messages ", i - 1, " and ", i, " are out of order or repeat a pair");
      check_plan(message.piece_count >= 1 && message.first_piece <= pieces.size() &&
                     message.piece_count <= pieces.size() - message.first_piece,
                 what, ": message ", i, " names pieces outside the plan");
      std::int64_t bytes = 0;
      for (std::size_t p = message.first_piece; p < message.first_piece + message.piece_count; ++p) {
        check_plan(!used[p], what, ": piece ", p, " is in two messages");
        used[p] = 1;
        const Piece& piece = pieces[p];
        check_plan(piece.block >= 0 && static_cast<std::size_t>(piece.block) < blocks.size(), what, ": piece ", p,
                   " names block ", piece.block);
        const SliceBlock& block = blocks[static_cast<std::size_t>(piece.block)];
        check_plan(piece.begin >= 0 && piece.begin < piece.end && piece.end <= block.granularity, what, ": piece ", p,
                   " covers slices [", piece.begin, ", ", piece.end, ") of ", block.granularity);
        if (p > message.first_piece) {
          const Piece& previous = pieces[p - 1];
          check_plan(previous.block < piece.block || (previous.block == piece.block && previous.end <= piece.begin),
                     what, ": message ", i, " has pieces ", p - 1, " and ", p, " out of order or overlapping");
        }
        bytes +=
            (prefix(piece.block, piece.end, block.granularity) - prefix(piece.block, piece.begin, block.granularity)) *
            (block.layer_end - block.layer_begin) * bytes_per_element;
        visit(message.src, message.dst, piece);
      }
      check_plan(bytes == message.bytes, what, ": message ", i, " says ", message.bytes, " bytes, its pieces hold ",
                 bytes);
      total += bytes;
    }
    check_plan(total == (local ? local_bytes : send_bytes), what, ": ", local ? "local" : "send", " bytes say ",
               local ? local_bytes : send_bytes, ", the messages hold ", total);
  }
  check_plan(std::ranges::all_of(used, [](char u) { return u != 0; }), what, ": a piece belongs to no message");
}

// Every slice of [k0, k1) lies in a segment (of `step` slices each) that `holder_of` maps to `rank`.
template <class HolderOf>
bool held_by(int rank, std::int64_t k0, std::int64_t k1, std::int64_t step, HolderOf&& holder_of) {
  for (std::int64_t s = k0 / step; s * step < k1; ++s)
    if (holder_of(s) != rank) return false;
  return true;
}

}  // namespace detail

// Checks every invariant of a pull plan against its inputs; raises invalid_plan naming the first broken one.
// O(N + pieces + blocks · Σ TP): pieces from different sources cannot overlap (each slice has one
// owner) nor can those of one message, so a rank whose pieces all lie in its TP fraction and add up to its
// width receives that fraction exactly.
inline void validate(const PullPlan& plan, const Placement& placement, const OptimizerLayout& layout,
                     const Model& model) {
  using detail::check_plan;
  detail::require_compatible(placement, layout, model);
  check_plan(plan.gpus == placement.gpus, "pull: plan for ", plan.gpus, " GPUs, placement has ", placement.gpus);
  detail::require_plan_size("pull", detail::pull_piece_count(placement, layout));
  const auto blocks = detail::blocks(placement, &layout);
  check_plan(plan.blocks == detail::expected_blocks(blocks, layout, detail::tp_lcm(placement)),
             "pull: blocks or granularities differ from LCM(owners, TP degrees) per block");
  // Where each placed rank sits: pipeline, stage and TP rank. A block has Σ TP holders, one per (pipeline,
  // TP rank): their slices received are counted at block · Σ TP + (TP ranks of earlier pipelines) + TP rank.
  struct Seat {
    std::size_t pipeline = 0;
    const Stage* stage = nullptr;
    std::int64_t tp_rank = 0;
    std::size_t counter = 0;
  };
  std::vector<Seat> seats(static_cast<std::size_t>(placement.gpus));
  std::size_t holders = 0;
  for (std::size_t j = 0; j < placement.pipelines.size(); ++j) {
    for (const Stage& stage : placement.pipelines[j].stages)
      for (std::size_t t = 0; t < stage.ranks.size(); ++t)
        seats[static_cast<std::size_t>(stage.ranks[t])] = {j, &stage, static_cast<std::int64_t>(t), holders + t};
    holders += static_cast<std::size_t>(placement.pipelines[j].scheme.tp());
  }
  std::vector<std::int64_t> received(blocks.size() * holders, 0);
  std::vector<std::int64_t> owner_step;
  for (std::size_t b = 0; b < blocks.size(); ++b)
    owner_step.push_back(plan.blocks[b].granularity /
                         static_cast<std::int64_t>(layout.groups[blocks[b].group].owners.size()));
  detail::check_messages(
      "pull", plan.gpus, plan.blocks, plan.pieces, plan.sends, plan.local_moves, plan.send_bytes, plan.local_bytes,
      model, model.param_bytes, [&](int src, int dst, const Piece& piece) {
        const auto b = static_cast<std::size_t>(piece.block);
        const auto& owners = layout.groups[blocks[b].group].owners;
        check_plan(detail::held_by(src, piece.begin, piece.end, owner_step[b],
                                   [&](std::int64_t s) { return owners[static_cast<std::size_t>(s)]; }),
                   "pull: rank ", src, " sends slices [", piece.begin, ", ", piece.end, ") of block ", b,
                   " that it does not own");
        const Seat& seat = seats[static_cast<std::size_t>(dst)];
        check_plan(seat.stage != nullptr && blocks[b].stages[seat.pipeline] == seat.stage, "pull: rank ", dst,
                   " receives slices of block ", b, " that it does not hold");
        // Within [t·M/TP, (t+1)·M/TP), multiplied out: M ≤ 2^40 and TP ≤ 2^16.
        const auto tp = static_cast<std::int64_t>(seat.stage->ranks.size());
        const std::int64_t m = plan.blocks[b].granularity;
        check_plan(piece.begin * tp >= seat.tp_rank * m && piece.end * tp <= (seat.tp_rank + 1) * m, "pull: rank ", dst,
                   " receives slices [", piece.begin, ", ", piece.end, ") of block ", b, " outside its TP fraction ",
                   seat.tp_rank, " of ", tp);
        received[b * holders + seat.counter] += piece.end - piece.begin;
      });
  for (std::size_t b = 0; b < blocks.size(); ++b)
    for (std::size_t j = 0; j < blocks[b].stages.size(); ++j)
      for (const int rank : blocks[b].stages[j]->ranks) {
        const Seat& seat = seats[static_cast<std::size_t>(rank)];
        const std::int64_t width = plan.blocks[b].granularity / static_cast<std::int64_t>(seat.stage->ranks.size());
        check_plan(received[b * holders + seat.counter] == width, "pull: rank ", rank, " in block ", b, " receives ",
                   received[b * holders + seat.counter], " of the ", width, " slices of its TP fraction");
      }
}

// Checks every invariant of a push plan against its inputs; raises invalid_plan naming the first broken one.
// O(N + pieces + reduce-scatter members): a slice has one reduce-scatter holder and one owner, so pieces of
// different messages cannot overlap, and a block whose pieces add up to its granularity is covered once.
inline void validate(const PushPlan& plan, const Placement& placement, const OptimizerLayout& layout,
                     const Model& model) {
  using detail::check_plan;
  detail::require_compatible(placement, layout, model);
  check_plan(plan.gpus == placement.gpus, "push: plan for ", plan.gpus, " GPUs, placement has ", placement.gpus);
  const std::int64_t grid = detail::tp_grid(placement);
  const auto d = static_cast<std::int64_t>(placement.pipelines.size());
  check_plan(plan.grid == grid && plan.pipelines == d, "push: grid ", plan.grid, " and ", plan.pipelines,
             " pipelines, expected ", grid, " and ", d);
  detail::require_plan_size("push", detail::push_piece_count(placement, layout, grid));
  const auto blocks = detail::blocks(placement, &layout);
  check_plan(plan.blocks == detail::expected_blocks(blocks, layout, d * grid),
             "push: blocks or granularities differ from LCM(owners, D·G) per block");
  check_plan(plan.rs_groups.size() == blocks.size() * static_cast<std::size_t>(grid), "push: ", plan.rs_groups.size(),
             " reduce-scatter groups, expected ", blocks.size() * static_cast<std::size_t>(grid));
  std::vector<int> expected;
  std::vector<int> members;
  for (std::size_t g = 0; g < plan.rs_groups.size(); ++g) {
    const RsGroup& group = plan.rs_groups[g];
    const std::size_t b = g / static_cast<std::size_t>(grid);
    const auto u = static_cast<std::int64_t>(g % static_cast<std::size_t>(grid));
    check_plan(group.block == static_cast<int>(b) && group.segment == u, "push: group ", g, " is (block ", group.block,
               ", segment ", group.segment, "), expected (", b, ", ", u, ")");
    expected.clear();
    for (std::size_t q = 0; q < blocks[b].stages.size(); ++q)
      expected.push_back(
          blocks[b].stages[q]->ranks[static_cast<std::size_t>(u * placement.pipelines[q].scheme.tp() / grid)]);
    members = group.members;
    std::ranges::sort(expected);
    std::ranges::sort(members);
    check_plan(members == expected, "push: group ", g, " does not hold one rank per pipeline holding segment ", u);
    const std::int64_t step = plan.blocks[b].granularity / grid;
    check_plan(group.bytes == detail::piece_bytes(model, model.grad_bytes, plan.blocks[b], u * step, (u + 1) * step),
               "push: group ", g, " says ", group.bytes, " bytes");
  }
  std::vector<std::int64_t> moved(blocks.size(), 0);
  detail::check_messages(
      "push", plan.gpus, plan.blocks, plan.pieces, plan.sends, plan.local_moves, plan.send_bytes, plan.local_bytes,
      model, model.grad_bytes, [&](int src, int dst, const Piece& piece) {
        const auto b = static_cast<std::size_t>(piece.block);
        const auto& owners = layout.groups[blocks[b].group].owners;
        const std::int64_t m = plan.blocks[b].granularity;
        check_plan(detail::held_by(
                       src, piece.begin, piece.end, m / (d * grid),
                       [&](std::int64_t h) {
                         return plan.rs_groups[b * static_cast<std::size_t>(grid) + static_cast<std::size_t>(h / d)]
                             .members[static_cast<std::size_t>(h % d)];
                       }),
                   "push: rank ", src, " sends slices [", piece.begin, ", ", piece.end, ") of block ", b,
                   " that its reduce-scatter did not leave on it");
        check_plan(detail::held_by(dst, piece.begin, piece.end, m / static_cast<std::int64_t>(owners.size()),
                                   [&](std::int64_t s) { return owners[static_cast<std::size_t>(s)]; }),
                   "push: rank ", dst, " receives slices [", piece.begin, ", ", piece.end, ") of block ", b,
                   " that it does not own");
        moved[b] += piece.end - piece.begin;
      });
  for (std::size_t b = 0; b < plan.blocks.size(); ++b)
    check_plan(moved[b] == plan.blocks[b].granularity, "push: block ", b, " moves ", moved[b], " of its ",
               plan.blocks[b].granularity, " slices");
}

}  // namespace sluice::shard
