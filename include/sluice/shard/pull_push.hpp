#pragma once
// LNK planning (Hydraulis §5.2): the pull moves 16-bit parameters from the optimizer layout into the
// propagation placement, the push reduce-scatters gradients across the D replicas (every CP rank of every
// pipeline holds a copy of its TP shard, as Megatron-LM all-reduces over DP × CP) and moves the summed pieces to
// their optimizer owners. Everything moves as mutual slices: a block's parameters are cut into
// `granularity` equal slices (each tensor on its own, slice k being elements [floor(k·E/M), floor((k+1)·E/M))),
// fine enough that every TP fraction, optimizer segment and reduce-scatter piece is a whole number of slices.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sluice/core/span.hpp"
#include "sluice/shard/detail/plan_checks.hpp"
#include "sluice/shard/detail/pull_messages.hpp"
#include "sluice/shard/detail/slicing.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/slices.hpp"

namespace sluice::shard {

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
// that hold it, one per replica (pipeline and CP rank): afterwards piece segment·D + i (of D·G) holds the sum and
// lives on members[i].
struct RsGroup {
  int block = 0;
  std::int64_t segment = 0;
  std::vector<int> members;  // members[i] receives piece segment·D + i; as a set, one rank per replica
  std::int64_t bytes = 0;    // gradient bytes of the whole segment, as each member contributes them
  friend bool operator==(const RsGroup&, const RsGroup&) = default;
};

struct PushPlan {
  std::int64_t gpus = 0;
  std::int64_t grid = 0;  // G
  int pipelines = 0;      // D, the replicas: pipelines times their CP degrees
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
  // (greedy, largest overlap first), so more of the LNK is local moves; otherwise piece i goes to replica i.
  bool match_owners = true;
};

// Pull: per block, M = LCM(n, TP_1..TP_K) (n = the block's optimizer segments); TP rank t of a pipeline, in
// every CP rank, needs slices [t·M/TP, (t+1)·M/TP) and takes each from the owner of its segment.
inline PullPlan plan_pull(const Placement& placement, const OptimizerLayout& layout, const Model& model) {
  const Placement replicated = detail::replicas(placement);
  const detail::PullSetup setup = detail::pull_setup(replicated, layout, model);
  PullPlan plan{replicated.gpus, setup.slices, {}, {}, {}, 0, 0};
  // Merging only shrinks the plan: capacity for the messages before merging never reallocates, and the pages
  // of what stays unused are never touched.
  plan.sends.reserve(static_cast<std::size_t>(setup.pieces_before_merging));
  plan.local_moves.reserve(static_cast<std::size_t>(std::min(setup.pieces_before_merging, replicated.gpus)));
  detail::SharedPieces shared;
  detail::for_each_pull_message(replicated, layout, model, setup,
                                [&](int src, int dst, Span<const detail::SliceRun> runs, std::int64_t bytes) {
                                  const std::uint32_t first = shared.find_or_add(src, runs, plan.pieces);
                                  (src == dst ? plan.local_moves : plan.sends)
                                      .push_back({src, dst, first, static_cast<std::uint32_t>(runs.size()), bytes});
                                  (src == dst ? plan.local_bytes : plan.send_bytes) += bytes;
                                });
  return plan;
}

namespace detail {

// Orders one RS group's pieces: result[i] = the member that receives piece i.
inline std::vector<int> order_pieces(Span<const int> members, std::int64_t first_piece, std::int64_t pieces_per_block,
                                     Span<const int> owners, std::vector<int>& position_of_rank, bool match) {
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
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
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

// Push: per block and TP-grid segment u, a reduce-scatter over the D ranks holding u (one per replica)
// leaves piece u·D + i of D·G on members[i]; then per block, M' = LCM(n, D·G) slices move from their piece
// holder to their optimizer owner.
inline PushPlan plan_push(const Placement& placement, const OptimizerLayout& layout, const Model& model,
                          const PushOptions& options = {}) {
  const Placement replicated = detail::replicas(placement);
  detail::require_compatible(replicated, layout, model);
  const std::int64_t grid = detail::tp_grid(replicated);
  const auto d = static_cast<std::int64_t>(replicated.pipelines.size());
  const std::int64_t pieces_before_merging = detail::push_piece_count(replicated, layout, grid);
  detail::require_plan_size("push", pieces_before_merging);
  PushPlan plan{replicated.gpus, grid, static_cast<int>(d), {}, {}, {}, {}, {}, 0, 0};
  const std::int64_t pieces_per_block = d * grid;
  std::vector<detail::RawPiece> raw;
  raw.reserve(static_cast<std::size_t>(pieces_before_merging));
  std::vector<int> position_of_rank(static_cast<std::size_t>(replicated.gpus), -1);
  std::vector<int> holder(static_cast<std::size_t>(pieces_per_block));
  std::vector<int> members(static_cast<std::size_t>(d));
  const auto blocks = detail::blocks(replicated, &layout);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const detail::Block& block = blocks[b];
    const std::vector<int>& owners = layout.groups[block.group].owners;
    const auto n = static_cast<std::int64_t>(owners.size());
    const std::int64_t m = detail::checked_lcm(n, pieces_per_block);
    plan.blocks.push_back({block.layer_begin, block.layer_end, m});
    const SliceBlock& slices = plan.blocks.back();
    for (std::int64_t u = 0; u < grid; ++u) {
      for (std::size_t q = 0; q < block.stages.size(); ++q) {
        const std::int64_t tp = replicated.pipelines[q].scheme.tp();
        members[q] = block.stages[q]->ranks[static_cast<std::size_t>(u * tp / grid)];
      }
      std::vector<int> order =
          detail::order_pieces(members, u * d, pieces_per_block, owners, position_of_rank, options.match_owners);
      std::copy(order.begin(), order.end(), holder.begin() + u * d);
      const std::int64_t step = m / grid;
      plan.rs_groups.push_back({static_cast<int>(b), u, std::move(order),
                                detail::piece_bytes(model, model.grad_bytes, slices, u * step, (u + 1) * step)});
    }
    const std::int64_t piece_step = m / pieces_per_block;
    const std::int64_t owner_step = m / n;
    for (std::int64_t position = 0, h = 0, r = 0; position < m;) {
      const std::int64_t end = std::min((h + 1) * piece_step, (r + 1) * owner_step);
      raw.push_back({holder[static_cast<std::size_t>(h)],
                     owners[static_cast<std::size_t>(r)],
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

// Checks every invariant of a pull plan against its inputs; raises invalid_plan naming the first broken one.
// O(N + pieces + blocks · Σ TP): pieces from different sources cannot overlap (each slice has one
// owner) nor can those of one message, so a rank whose pieces all lie in its TP fraction and add up to its
// width receives that fraction exactly.
inline void validate(const PullPlan& plan, const Placement& placement, const OptimizerLayout& layout,
                     const Model& model) {
  using detail::check_plan;
  const Placement replicated = detail::replicas(placement);
  detail::require_compatible(replicated, layout, model);
  check_plan(plan.gpus == replicated.gpus, "pull: plan for ", plan.gpus, " GPUs, placement has ", placement.gpus);
  detail::require_plan_size("pull", detail::pull_piece_count(replicated, layout));
  const auto blocks = detail::blocks(replicated, &layout);
  check_plan(plan.blocks == detail::expected_blocks(blocks, layout, detail::tp_lcm(replicated)),
             "pull: blocks or granularities differ from LCM(owners, TP degrees) per block");
  // Where each placed rank sits: replica, stage and TP rank. A block has Σ TP holders, one per (replica,
  // TP rank): their slices received are counted at block · Σ TP + (TP ranks of earlier replicas) + TP rank.
  struct Seat {
    std::size_t pipeline = 0;
    const Stage* stage = nullptr;
    std::int64_t tp_rank = 0;
    std::size_t counter = 0;
  };
  std::vector<Seat> seats(static_cast<std::size_t>(replicated.gpus));
  std::size_t holders = 0;
  for (std::size_t j = 0; j < replicated.pipelines.size(); ++j) {
    for (const Stage& stage : replicated.pipelines[j].stages)
      for (std::size_t t = 0; t < stage.ranks.size(); ++t)
        seats[static_cast<std::size_t>(stage.ranks[t])] = {j, &stage, static_cast<std::int64_t>(t), holders + t};
    holders += static_cast<std::size_t>(replicated.pipelines[j].scheme.tp());
  }
  std::vector<std::int64_t> received(blocks.size() * holders, 0);
  std::vector<std::int64_t> owner_step;
  for (std::size_t b = 0; b < blocks.size(); ++b)
    owner_step.push_back(plan.blocks[b].granularity /
                         static_cast<std::int64_t>(layout.groups[blocks[b].group].owners.size()));
  detail::check_messages("pull", plan.gpus, plan.blocks, plan.pieces, plan.sends, plan.local_moves, plan.send_bytes,
                         plan.local_bytes, model, model.param_bytes, [&](int src, int dst, const Piece& piece) {
                           const auto b = static_cast<std::size_t>(piece.block);
                           const auto& owners = layout.groups[blocks[b].group].owners;
                           check_plan(
                               detail::held_by(src, piece.begin, piece.end, owner_step[b],
                                               [&](std::int64_t s) { return owners[static_cast<std::size_t>(s)]; }),
                               "pull: rank ", src, " sends slices [", piece.begin, ", ", piece.end, ") of block ", b,
                               " that it does not own");
                           const Seat& seat = seats[static_cast<std::size_t>(dst)];
                           check_plan(seat.stage != nullptr && blocks[b].stages[seat.pipeline] == seat.stage,
                                      "pull: rank ", dst, " receives slices of block ", b, " that it does not hold");
                           // Within [t·M/TP, (t+1)·M/TP), multiplied out: M ≤ 2^40 and TP ≤ 2^16.
                           const auto tp = static_cast<std::int64_t>(seat.stage->ranks.size());
                           const std::int64_t m = plan.blocks[b].granularity;
                           check_plan(piece.begin * tp >= seat.tp_rank * m && piece.end * tp <= (seat.tp_rank + 1) * m,
                                      "pull: rank ", dst, " receives slices [", piece.begin, ", ", piece.end,
                                      ") of block ", b, " outside its TP fraction ", seat.tp_rank, " of ", tp);
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
  const Placement replicated = detail::replicas(placement);
  detail::require_compatible(replicated, layout, model);
  check_plan(plan.gpus == replicated.gpus, "push: plan for ", plan.gpus, " GPUs, placement has ", placement.gpus);
  const std::int64_t grid = detail::tp_grid(replicated);
  const auto d = static_cast<std::int64_t>(replicated.pipelines.size());
  check_plan(plan.grid == grid && plan.pipelines == d, "push: grid ", plan.grid, " and ", plan.pipelines,
             " pipelines, expected ", grid, " and ", d);
  detail::require_plan_size("push", detail::push_piece_count(replicated, layout, grid));
  const auto blocks = detail::blocks(replicated, &layout);
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
          blocks[b].stages[q]->ranks[static_cast<std::size_t>(u * replicated.pipelines[q].scheme.tp() / grid)]);
    members = group.members;
    std::sort(expected.begin(), expected.end());
    std::sort(members.begin(), members.end());
    check_plan(members == expected, "push: group ", g, " does not hold one rank per replica holding segment ", u);
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
