#pragma once
// The LNK planner as it was before the pull stopped holding every (owner, rank) piece: each plan generated
// as raw pieces, sorted by (src, dst) with two stable counting passes, merged and batched. Kept verbatim (its
// shared helpers, blocks, granularities and byte counts, are the library's) as the oracle that plan_pull and
// plan_push must match bit for bit.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"
#include "sluice/shard/ranks.hpp"

namespace sluice::test::shard_oracle {

using namespace sluice::shard;
namespace lib = sluice::shard::detail;

struct RawPiece {
  int src;
  int dst;
  Piece piece;
};

struct PieceListOrder {
  bool operator()(const std::vector<Piece>& x, const std::vector<Piece>& y) const {
    return std::ranges::lexicographical_compare(x, y, [](const Piece& a, const Piece& b) {
      return std::tuple(a.block, a.begin, a.end) < std::tuple(b.block, b.begin, b.end);
    });
  }
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
      message.bytes += lib::piece_bytes(model, bytes_per_element, blocks[static_cast<std::size_t>(pieces[p].block)],
                                        pieces[p].begin, pieces[p].end);
    (src == dst ? local_bytes : send_bytes) += message.bytes;
    (src == dst ? local_moves : sends).push_back(message);
  }
}

// What the pull planner added later: messages of one source with equal piece lists share the first copy,
// pieces kept in (src, dst) order of their first use.
inline void share_pieces(PullPlan& plan) {
  std::vector<Message*> messages;
  for (std::vector<Message>* list : {&plan.sends, &plan.local_moves})
    for (Message& message : *list) messages.push_back(&message);
  std::ranges::sort(messages, [](const Message* x, const Message* y) {
    return std::pair(x->src, x->dst) < std::pair(y->src, y->dst);
  });
  std::vector<Piece> shared;
  std::map<std::vector<Piece>, std::uint32_t, PieceListOrder> first_of;
  int src = -1;
  for (Message* message : messages) {
    if (message->src != src) first_of.clear();
    src = message->src;
    std::vector<Piece> list(plan.pieces.begin() + message->first_piece,
                            plan.pieces.begin() + message->first_piece + message->piece_count);
    const auto [it, added] = first_of.try_emplace(list, static_cast<std::uint32_t>(shared.size()));
    if (added) shared.insert(shared.end(), list.begin(), list.end());
    message->first_piece = it->second;
  }
  plan.pieces = std::move(shared);
}

// Pull: per block, M = LCM(n, TP_1..TP_K) (n = the block's optimizer segments); TP rank t of a pipeline
// needs slices [t·M/TP, (t+1)·M/TP) and takes each from the owner of its segment.
inline PullPlan plan_pull(const Placement& placement, const OptimizerLayout& layout, const Model& model) {
  lib::require_compatible(placement, layout, model);
  const std::int64_t tps = lib::tp_lcm(placement);
  PullPlan plan{placement.gpus, {}, {}, {}, {}, 0, 0};
  std::vector<RawPiece> raw;
  const auto blocks = lib::blocks(placement, &layout);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const lib::Block& block = blocks[b];
    const std::vector<int>& owners = layout.groups[block.group].owners;
    const auto n = static_cast<std::int64_t>(owners.size());
    const std::int64_t m = lib::checked_lcm(n, tps);
    plan.blocks.push_back({block.layer_begin, block.layer_end, m});
    const std::int64_t step = m / n;
    for (std::size_t j = 0; j < block.stages.size(); ++j) {
      const std::int64_t tp = placement.pipelines[j].scheme.tp();
      for (std::int64_t t = 0; t < tp; ++t) {
        const int dst = block.stages[j]->ranks[static_cast<std::size_t>(t)];
        const std::int64_t need_begin = t * (m / tp);
        const std::int64_t need_end = need_begin + m / tp;
        for (std::int64_t r = need_begin / step; r * step < need_end; ++r)
          raw.push_back({owners[static_cast<std::size_t>(r)],
                         dst,
                         {static_cast<int>(b), std::max(r * step, need_begin), std::min((r + 1) * step, need_end)}});
      }
    }
  }
  batch(raw, plan.gpus, model, model.param_bytes, plan.blocks, plan.pieces, plan.sends, plan.local_moves,
        plan.send_bytes, plan.local_bytes);
  share_pieces(plan);
  return plan;
}

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
  const std::int64_t m = lib::checked_lcm(n, pieces_per_block);
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

// Push: per block and TP-grid segment u, a reduce-scatter over the D ranks holding u (one per pipeline)
// leaves piece u·D + i of D·G on members[i]; then per block, M' = LCM(n, D·G) slices move from their piece
// holder to their optimizer owner.
inline PushPlan plan_push(const Placement& placement, const OptimizerLayout& layout, const Model& model,
                          const PushOptions& options = {}) {
  lib::require_compatible(placement, layout, model);
  const std::int64_t grid = lib::tp_grid(placement);
  const auto d = static_cast<std::int64_t>(placement.pipelines.size());
  PushPlan plan{placement.gpus, grid, static_cast<int>(d), {}, {}, {}, {}, {}, 0, 0};
  const std::int64_t pieces_per_block = d * grid;
  std::vector<RawPiece> raw;
  std::vector<int> position_of_rank(static_cast<std::size_t>(placement.gpus), -1);
  std::vector<int> holder(static_cast<std::size_t>(pieces_per_block));
  std::vector<int> members(static_cast<std::size_t>(d));
  const auto blocks = lib::blocks(placement, &layout);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const lib::Block& block = blocks[b];
    const std::vector<int>& owners = layout.groups[block.group].owners;
    const auto n = static_cast<std::int64_t>(owners.size());
    const std::int64_t m = lib::checked_lcm(n, pieces_per_block);
    plan.blocks.push_back({block.layer_begin, block.layer_end, m});
    const SliceBlock& slices = plan.blocks.back();
    for (std::int64_t u = 0; u < grid; ++u) {
      for (std::size_t q = 0; q < block.stages.size(); ++q) {
        const std::int64_t tp = placement.pipelines[q].scheme.tp();
        members[q] = block.stages[q]->ranks[static_cast<std::size_t>(u * tp / grid)];
      }
      std::vector<int> order =
          order_pieces(members, u * d, pieces_per_block, owners, position_of_rank, options.match_owners);
      std::ranges::copy(order, holder.begin() + u * d);
      const std::int64_t step = m / grid;
      plan.rs_groups.push_back({static_cast<int>(b), u, std::move(order),
                                lib::piece_bytes(model, model.grad_bytes, slices, u * step, (u + 1) * step)});
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
  batch(raw, plan.gpus, model, model.grad_bytes, plan.blocks, plan.pieces, plan.sends, plan.local_moves,
        plan.send_bytes, plan.local_bytes);
  return plan;
}

// shard::place and the process groups as they were before context parallelism, kept verbatim: a strategy
// without CP must still get exactly these ranks and groups.
inline Placement place_before_cp(const Strategy& strategy, std::int64_t gpus, int layers,
                                 const PlacementOptions& options = {}) {
  sluice::require(gpus >= 1 && gpus <= max_gpus, "shard placement: gpus must be in [1, ", max_gpus, "], got ", gpus);
  sluice::require(layers >= 1, "shard placement: layers must be >= 1, got ", layers);
  sluice::require(options.gpus_per_node >= 1, "shard placement: gpus_per_node must be >= 1, got ",
                  options.gpus_per_node);
  strategy.require_fits(gpus);
  for (const auto& [pp, counts] : options.stage_layers) {
    sluice::require(static_cast<int>(counts.size()) == pp, "shard placement: stage_layers for pp ", pp, " has ",
                    counts.size(), " entries");
    std::int64_t total = 0;
    for (const int count : counts) {
      sluice::require(count >= 1, "shard placement: stage_layers for pp ", pp, " has a stage of ", count, " layers");
      total += count;
    }
    sluice::require(total == layers, "shard placement: stage_layers for pp ", pp, " sum to ", total, ", the model has ",
                    layers, " layers");
  }
  std::vector<StrategyPart> parts = strategy.parts();
  if (options.order == PipelineOrder::tp_ascending)
    std::ranges::stable_sort(
        parts, [](const StrategyPart& x, const StrategyPart& y) { return x.scheme.tp() < y.scheme.tp(); });

  Placement placement{gpus, layers, {}};
  const std::int64_t node = options.gpus_per_node;
  std::int64_t cursor = 0;
  for (const StrategyPart& part : parts) {
    const int pp = part.scheme.pp();
    const int tp = part.scheme.tp();
    sluice::require(pp <= layers, "shard placement: scheme ", part.scheme.name(), " has more stages than the ", layers,
                    " layers");
    std::vector<int> bounds(static_cast<std::size_t>(pp) + 1, 0);
    const auto custom = options.stage_layers.find(pp);
    for (int s = 0; s < pp; ++s)
      bounds[static_cast<std::size_t>(s) + 1] =
          custom != options.stage_layers.end()
              ? bounds[static_cast<std::size_t>(s)] + custom->second[static_cast<std::size_t>(s)]
              : static_cast<int>(std::int64_t{s + 1} * layers / pp);
    for (int copy = 0; copy < part.pipelines; ++copy) {
      PipelinePlacement pipeline{part.scheme, {}};
      for (int s = 0; s < pp; ++s) {
        if (options.tp_within_node) {
          const bool straddles = tp <= node ? cursor / node != (cursor + tp - 1) / node : cursor % node != 0;
          if (straddles) cursor = (cursor / node + 1) * node;
        }
        if (cursor + tp > gpus)
          throw infeasible(sluice::concat("shard placement: strategy ", strategy.name(), " does not fit ", gpus,
                                          " GPUs", options.tp_within_node ? " keeping TP groups inside nodes" : ""));
        Stage stage{bounds[static_cast<std::size_t>(s)], bounds[static_cast<std::size_t>(s) + 1], {}};
        for (int t = 0; t < tp; ++t) stage.ranks.push_back(static_cast<int>(cursor + t));
        cursor += tp;
        pipeline.stages.push_back(std::move(stage));
      }
      placement.pipelines.push_back(std::move(pipeline));
    }
  }
  return placement;
}

inline ProcessGroups process_groups_before_cp(const Placement& placement, const std::vector<std::size_t>& order) {
  ProcessGroups groups;
  for (const std::size_t p : order) {
    const PipelinePlacement& pipeline = placement.pipelines[p];
    for (const Stage& stage : pipeline.stages) groups.tp.push_back(stage.ranks);
    for (std::size_t t = 0; t < static_cast<std::size_t>(pipeline.scheme.tp()); ++t) {
      std::vector<int> ranks;
      for (const Stage& stage : pipeline.stages) ranks.push_back(stage.ranks[t]);
      groups.pp.push_back(std::move(ranks));
    }
  }
  // Placement order is canonical, so each scheme's pipelines are adjacent.
  for (std::size_t first = 0; first < placement.pipelines.size();) {
    const Scheme& scheme = placement.pipelines[first].scheme;
    std::size_t last = first;
    while (last < placement.pipelines.size() && placement.pipelines[last].scheme == scheme) ++last;
    for (std::size_t s = 0; s < static_cast<std::size_t>(scheme.pp()); ++s)
      for (std::size_t t = 0; t < static_cast<std::size_t>(scheme.tp()); ++t) {
        std::vector<int> ranks;
        for (std::size_t p = first; p < last; ++p) ranks.push_back(placement.pipelines[p].stages[s].ranks[t]);
        groups.dp.push_back(std::move(ranks));
      }
    first = last;
  }
  return groups;
}

}  // namespace sluice::test::shard_oracle
