#pragma once
// The pull's messages, generated source by source in (src, dst) order without holding every piece at once, and
// the setup plan_pull and the pull's cost share. Not for callers: pull_push.hpp and cost.hpp use it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "sluice/core/span.hpp"
#include "sluice/shard/detail/slicing.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/slices.hpp"

namespace sluice::shard::detail {

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

// The pieces of one source's messages, each distinct list stored once: find_or_add returns the index of the
// first of `runs`' pieces, appending them unless an earlier message of the same source holds the same list.
// An open-addressing table keyed by a hash of the list; entries of earlier sources count as empty, so the
// table is never cleared. O(pieces) time; memory O(the most distinct lists of one source).
class SharedPieces {
public:
  std::uint32_t find_or_add(int src, Span<const SliceRun> runs, std::vector<Piece>& pieces) {
    if (src != src_) {
      src_ = src;
      distinct_ = 0;
    } else if (runs.size() == last_.count &&
               std::equal(runs.begin(), runs.end(), pieces.begin() + static_cast<std::ptrdiff_t>(last_.first),
                          same_slices)) {
      return last_.first;  // the common case: the destinations of one TP degree come one after another
    }
    if (2 * (distinct_ + 1) > slots_.size()) grow();
    const std::uint64_t hash = hash_of(runs);
    std::size_t slot = static_cast<std::size_t>(hash) & (slots_.size() - 1);
    for (; slots_[slot].src == src_; slot = (slot + 1) & (slots_.size() - 1)) {
      const Slot& entry = slots_[slot];
      if (entry.hash == hash && entry.count == runs.size() &&
          std::equal(runs.begin(), runs.end(), pieces.begin() + static_cast<std::ptrdiff_t>(entry.first),
                     same_slices)) {
        last_ = entry;
        return entry.first;
      }
    }
    const auto first = static_cast<std::uint32_t>(pieces.size());
    for (const SliceRun& run : runs) pieces.push_back({run.block, run.begin, run.end});
    slots_[slot] = last_ = {hash, src_, first, static_cast<std::uint32_t>(runs.size())};
    ++distinct_;
    return first;
  }

private:
  struct Slot {
    std::uint64_t hash = 0;
    int src = -1;
    std::uint32_t first = 0;
    std::uint32_t count = 0;
  };

  static bool same_slices(const SliceRun& run, const Piece& piece) {
    return run.block == piece.block && run.begin == piece.begin && run.end == piece.end;
  }

  static std::uint64_t hash_of(Span<const SliceRun> runs) {
    std::uint64_t hash = 0x9e3779b97f4a7c15ULL;
    const auto mix = [&](std::uint64_t value) {
      hash ^= value + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
      hash *= 0xff51afd7ed558ccdULL;
    };
    for (const SliceRun& run : runs) {
      mix(static_cast<std::uint64_t>(run.block));
      mix(static_cast<std::uint64_t>(run.begin));
      mix(static_cast<std::uint64_t>(run.end));
    }
    return hash ^ (hash >> 33);
  }

  // Doubles the table, keeping the current source's entries.
  void grow() {
    std::vector<Slot> old(std::max<std::size_t>(16, 2 * slots_.size()));
    old.swap(slots_);
    for (const Slot& entry : old) {
      if (entry.src != src_) continue;
      std::size_t slot = static_cast<std::size_t>(entry.hash) & (slots_.size() - 1);
      while (slots_[slot].src == src_) slot = (slot + 1) & (slots_.size() - 1);
      slots_[slot] = entry;
    }
  }

  std::vector<Slot> slots_;
  Slot last_;  // the list returned last, if of src_
  int src_ = -1;
  std::size_t distinct_ = 0;
};

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
  std::sort(degrees.begin(), degrees.end());
  degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
  std::vector<std::size_t> kind(pipelines);
  std::vector<std::size_t> holder_offset(pipelines + 1, 0);
  for (std::size_t j = 0; j < pipelines; ++j) {
    const std::int64_t tp = placement.pipelines[j].scheme.tp();
    kind[j] = static_cast<std::size_t>(std::lower_bound(degrees.begin(), degrees.end(), tp) - degrees.begin());
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
      emit(static_cast<int>(src), items[first].rank, Span<const SliceRun>(items.data() + first, i - first), bytes);
    }
  }
}

}  // namespace sluice::shard::detail
