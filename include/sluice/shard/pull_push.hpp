#pragma once
// LNK planning (Hydraulis §5.2): the pull moves 16-bit parameters from the optimizer layout into the
// propagation placement, the push reduce-scatters gradients across the D pipelines and moves the summed
// pieces to their optimizer owners. Everything moves as mutual slices: a block's parameters are cut into
// `granularity` equal slices (each tensor on its own, slice k being elements [floor(k·E/M), floor((k+1)·E/M))),
// fine enough that every TP fraction, optimizer segment and reduce-scatter piece is a whole number of slices.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <tuple>
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
  sluice::detail::require(a / g <= max_granularity / b, "shard: the mutual-slice granularity LCM(", a, ", ", b,
                          ") exceeds 2^40");
  return a / g * b;
}

inline std::int64_t piece_bytes(const Model& model, int bytes_per_element, const SliceBlock& block, std::int64_t begin,
                                std::int64_t end) noexcept {
  std::int64_t elements = 0;
  for (const Tensor& tensor : model.tensors)
    elements += slice_start(end, tensor.elements, block.granularity) - slice_start(begin, tensor.elements, block.granularity);
  return elements * (block.layer_end - block.layer_begin) * bytes_per_element;
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
  sluice::detail::require(placement.gpus == layout.gpus, "shard: the placement has ", placement.gpus,
                          " GPUs, the optimizer layout ", layout.gpus);
  sluice::detail::require(placement.layers == model.layers && layout.layers == model.layers, "shard: the model has ",
                          model.layers, " layers, the placement ", placement.layers, ", the optimizer layout ",
                          layout.layers);
}

inline std::int64_t tp_lcm(const Placement& placement) {
  std::int64_t value = 1;
  for (const PipelinePlacement& pipeline : placement.pipelines) value = checked_lcm(value, pipeline.scheme.tp());
  return value;
}

}  // namespace detail

// Pull: per block, M = LCM(n, TP_1..TP_K) (n = the block's optimizer segments); TP rank t of a pipeline
// needs slices [t·M/TP, (t+1)·M/TP) and takes each from the owner of its segment.
inline PullPlan plan_pull(const Placement& placement, const OptimizerLayout& layout, const Model& model) {
  detail::require_compatible(placement, layout, model);
  const std::int64_t tps = detail::tp_lcm(placement);
  PullPlan plan{placement.gpus, {}, {}, {}, {}, 0, 0};
  std::vector<detail::RawPiece> raw;
  const auto blocks = detail::blocks(placement, &layout);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const detail::Block& block = blocks[b];
    const std::vector<int>& owners = layout.groups[block.group].owners;
    const auto n = static_cast<std::int64_t>(owners.size());
    const std::int64_t m = detail::checked_lcm(n, tps);
    plan.blocks.push_back({block.layer_begin, block.layer_end, m});
    const std::int64_t step = m / n;
    for (std::size_t j = 0; j < block.stages.size(); ++j) {
      const std::int64_t tp = placement.pipelines[j].scheme.tp();
      for (std::int64_t t = 0; t < tp; ++t) {
        const int dst = block.stages[j]->ranks[static_cast<std::size_t>(t)];
        const std::int64_t need_begin = t * (m / tp);
        const std::int64_t need_end = need_begin + m / tp;
        for (std::int64_t r = need_begin / step; r * step < need_end; ++r)
          raw.push_back({owners[static_cast<std::size_t>(r)], dst,
                         {static_cast<int>(b), std::max(r * step, need_begin), std::min((r + 1) * step, need_end)}});
      }
    }
  }
  detail::batch(raw, plan.gpus, model, model.param_bytes, plan.blocks, plan.pieces, plan.sends, plan.local_moves,
                plan.send_bytes, plan.local_bytes);
  return plan;
}

namespace detail {

// Orders one RS group's pieces: result[i] = the member that receives piece i.
inline std::vector<int> order_pieces(std::span<const int> members, std::int64_t first_piece, std::int64_t pieces_per_block,
                                     std::span<const int> owners, std::vector<int>& position_of_rank, bool match) {
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
  PushPlan plan{placement.gpus, grid, static_cast<int>(d), {}, {}, {}, {}, {}, 0, 0};
  const std::int64_t pieces_per_block = d * grid;
  std::vector<detail::RawPiece> raw;
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

// Checks the message lists of a plan: ranks, ordering (one message per pair), piece bounds, each piece in
// exactly one message, bytes; returns every piece with its (src, dst).
inline std::vector<RawPiece> check_messages(const char* what, std::int64_t gpus, const std::vector<SliceBlock>& blocks,
                                            const std::vector<Piece>& pieces, const std::vector<Message>& sends,
                                            const std::vector<Message>& local_moves, std::int64_t send_bytes,
                                            std::int64_t local_bytes, const Model& model, int bytes_per_element) {
  std::vector<char> used(pieces.size(), 0);
  std::vector<RawPiece> all;
  for (const bool local : {false, true}) {
    const std::vector<Message>& messages = local ? local_moves : sends;
    std::int64_t total = 0;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const Message& message = messages[i];
      check_plan(message.src >= 0 && message.src < gpus && message.dst >= 0 && message.dst < gpus, what, ": message ", i,
                 " goes ", message.src, " -> ", message.dst, ", outside [0, ", gpus, ")");
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
        bytes += piece_bytes(model, bytes_per_element, block, piece.begin, piece.end);
        all.push_back({message.src, message.dst, piece});
      }
      check_plan(bytes == message.bytes, what, ": message ", i, " says ", message.bytes, " bytes, its pieces hold ", bytes);
      total += bytes;
    }
    check_plan(total == (local ? local_bytes : send_bytes), what, ": ", local ? "local" : "send", " bytes say ",
               local ? local_bytes : send_bytes, ", the messages hold ", total);
  }
  check_plan(std::ranges::all_of(used, [](char u) { return u != 0; }), what, ": a piece belongs to no message");
  return all;
}

// Every slice of [k0, k1) at `granularity` lies in a segment (of `count` equal ones) that `holder_of` maps to `rank`.
template <class HolderOf>
bool held_by(int rank, std::int64_t k0, std::int64_t k1, std::int64_t granularity, std::int64_t count, HolderOf&& holder_of) {
  const std::int64_t step = granularity / count;
  for (std::int64_t s = k0 / step; s * step < k1; ++s)
    if (holder_of(s) != rank) return false;
  return true;
}

}  // namespace detail

// Checks every invariant of a pull plan against its inputs; raises invalid_plan naming the first broken one.
inline void validate(const PullPlan& plan, const Placement& placement, const OptimizerLayout& layout, const Model& model) {
  using detail::check_plan;
  detail::require_compatible(placement, layout, model);
  check_plan(plan.gpus == placement.gpus, "pull: plan for ", plan.gpus, " GPUs, placement has ", placement.gpus);
  const auto blocks = detail::blocks(placement, &layout);
  check_plan(plan.blocks == detail::expected_blocks(blocks, layout, detail::tp_lcm(placement)),
             "pull: blocks or granularities differ from LCM(owners, TP degrees) per block");
  std::vector<detail::RawPiece> all =
      detail::check_messages("pull", plan.gpus, plan.blocks, plan.pieces, plan.sends, plan.local_moves, plan.send_bytes,
                             plan.local_bytes, model, model.param_bytes);
  for (const detail::RawPiece& item : all) {
    const auto& owners = layout.groups[blocks[static_cast<std::size_t>(item.piece.block)].group].owners;
    check_plan(detail::held_by(item.src, item.piece.begin, item.piece.end,
                               plan.blocks[static_cast<std::size_t>(item.piece.block)].granularity,
                               static_cast<std::int64_t>(owners.size()),
                               [&](std::int64_t s) { return owners[static_cast<std::size_t>(s)]; }),
               "pull: rank ", item.src, " sends slices [", item.piece.begin, ", ", item.piece.end, ") of block ",
               item.piece.block, " that it does not own");
  }
  // Every rank of every stage receives exactly its TP fraction, nothing else.
  std::ranges::sort(all, [](const detail::RawPiece& x, const detail::RawPiece& y) {
    return std::tuple(x.piece.block, x.dst, x.piece.begin) < std::tuple(y.piece.block, y.dst, y.piece.begin);
  });
  std::size_t next = 0;
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    std::vector<std::pair<int, std::int64_t>> needs;  // (dst, TP rank) of every rank holding the block
    for (std::size_t j = 0; j < blocks[b].stages.size(); ++j)
      for (std::size_t t = 0; t < blocks[b].stages[j]->ranks.size(); ++t)
        needs.emplace_back(blocks[b].stages[j]->ranks[t], static_cast<std::int64_t>(j));
    std::ranges::sort(needs);
    for (const auto& [dst, j] : needs) {
      const Stage& stage = *blocks[b].stages[static_cast<std::size_t>(j)];
      const auto t = static_cast<std::int64_t>(std::ranges::find(stage.ranks, dst) - stage.ranks.begin());
      const std::int64_t width = plan.blocks[b].granularity / static_cast<std::int64_t>(stage.ranks.size());
      std::int64_t covered = t * width;
      while (next < all.size() && all[next].piece.block == static_cast<int>(b) && all[next].dst == dst) {
        check_plan(all[next].piece.begin == covered, "pull: rank ", dst, " in block ", b, " receives slice ",
                   all[next].piece.begin, " where slice ", covered, " was due");
        covered = all[next++].piece.end;
      }
      check_plan(covered == (t + 1) * width, "pull: rank ", dst, " in block ", b, " receives slices up to ", covered,
                 " of its [", t * width, ", ", (t + 1) * width, ")");
    }
    check_plan(next == all.size() || all[next].piece.block != static_cast<int>(b), "pull: rank ", all[next].dst,
               " receives slices of block ", b, " that it does not hold");
  }
}

// Checks every invariant of a push plan against its inputs; raises invalid_plan naming the first broken one.
inline void validate(const PushPlan& plan, const Placement& placement, const OptimizerLayout& layout, const Model& model) {
  using detail::check_plan;
  detail::require_compatible(placement, layout, model);
  check_plan(plan.gpus == placement.gpus, "push: plan for ", plan.gpus, " GPUs, placement has ", placement.gpus);
  const std::int64_t grid = detail::tp_grid(placement);
  const auto d = static_cast<std::int64_t>(placement.pipelines.size());
  check_plan(plan.grid == grid && plan.pipelines == d, "push: grid ", plan.grid, " and ", plan.pipelines,
             " pipelines, expected ", grid, " and ", d);
  const auto blocks = detail::blocks(placement, &layout);
  check_plan(plan.blocks == detail::expected_blocks(blocks, layout, d * grid),
             "push: blocks or granularities differ from LCM(owners, D·G) per block");
  check_plan(plan.rs_groups.size() == blocks.size() * static_cast<std::size_t>(grid), "push: ", plan.rs_groups.size(),
             " reduce-scatter groups, expected ", blocks.size() * static_cast<std::size_t>(grid));
  for (std::size_t g = 0; g < plan.rs_groups.size(); ++g) {
    const RsGroup& group = plan.rs_groups[g];
    const std::size_t b = g / static_cast<std::size_t>(grid);
    const auto u = static_cast<std::int64_t>(g % static_cast<std::size_t>(grid));
    check_plan(group.block == static_cast<int>(b) && group.segment == u, "push: group ", g, " is (block ", group.block,
               ", segment ", group.segment, "), expected (", b, ", ", u, ")");
    std::vector<int> expected;
    for (std::size_t q = 0; q < blocks[b].stages.size(); ++q)
      expected.push_back(blocks[b].stages[q]->ranks[static_cast<std::size_t>(u * placement.pipelines[q].scheme.tp() / grid)]);
    std::vector<int> members = group.members;
    std::ranges::sort(expected);
    std::ranges::sort(members);
    check_plan(members == expected, "push: group ", g, " does not hold one rank per pipeline holding segment ", u);
    const std::int64_t step = plan.blocks[b].granularity / grid;
    check_plan(group.bytes == detail::piece_bytes(model, model.grad_bytes, plan.blocks[b], u * step, (u + 1) * step),
               "push: group ", g, " says ", group.bytes, " bytes");
  }
  std::vector<detail::RawPiece> all =
      detail::check_messages("push", plan.gpus, plan.blocks, plan.pieces, plan.sends, plan.local_moves, plan.send_bytes,
                             plan.local_bytes, model, model.grad_bytes);
  for (const detail::RawPiece& item : all) {
    const auto b = static_cast<std::size_t>(item.piece.block);
    const auto& owners = layout.groups[blocks[b].group].owners;
    const std::int64_t m = plan.blocks[b].granularity;
    check_plan(detail::held_by(item.src, item.piece.begin, item.piece.end, m, d * grid,
                               [&](std::int64_t h) {
                                 return plan.rs_groups[b * static_cast<std::size_t>(grid) + static_cast<std::size_t>(h / d)]
                                     .members[static_cast<std::size_t>(h % d)];
                               }),
               "push: rank ", item.src, " sends slices [", item.piece.begin, ", ", item.piece.end, ") of block ", b,
               " that its reduce-scatter did not leave on it");
    check_plan(detail::held_by(item.dst, item.piece.begin, item.piece.end, m, static_cast<std::int64_t>(owners.size()),
                               [&](std::int64_t s) { return owners[static_cast<std::size_t>(s)]; }),
               "push: rank ", item.dst, " receives slices [", item.piece.begin, ", ", item.piece.end, ") of block ", b,
               " that it does not own");
  }
  // Every slice of every block reaches its owner exactly once.
  std::ranges::sort(all, [](const detail::RawPiece& x, const detail::RawPiece& y) {
    return std::pair(x.piece.block, x.piece.begin) < std::pair(y.piece.block, y.piece.begin);
  });
  std::size_t next = 0;
  for (std::size_t b = 0; b < plan.blocks.size(); ++b) {
    std::int64_t covered = 0;
    while (next < all.size() && all[next].piece.block == static_cast<int>(b)) {
      check_plan(all[next].piece.begin == covered, "push: block ", b, " moves slice ", all[next].piece.begin,
                 " where slice ", covered, " was due");
      covered = all[next++].piece.end;
    }
    check_plan(covered == plan.blocks[b].granularity, "push: block ", b, " moves slices up to ", covered, " of ",
               plan.blocks[b].granularity);
  }
}

}  // namespace sluice::shard
