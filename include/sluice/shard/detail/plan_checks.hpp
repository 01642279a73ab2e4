#pragma once
// The checks the pull and push validators share: the expected blocks, and one pass over a plan's messages and
// pieces. Not for callers: pull_push.hpp's validate functions are made of it.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sluice/shard/detail/slicing.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/slices.hpp"

namespace sluice::shard::detail {

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

// Checks the message lists of a plan: ranks, ordering (one message per pair), piece bounds, each piece in a
// message, a message's pieces in (block, slice) order without overlap, bytes; calls visit(src, dst, piece) for
// every piece of every message. O(messages' pieces), no copy of them. Messages may share pieces: the callers
// check that src holds and dst needs each piece, which two messages of a push can never both pass.
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
  check_plan(std::all_of(used.begin(), used.end(), [](char u) { return u != 0; }), what,
             ": a piece belongs to no message");
}

// Every slice of [k0, k1) lies in a segment (of `step` slices each) that `holder_of` maps to `rank`.
template <class HolderOf>
bool held_by(int rank, std::int64_t k0, std::int64_t k1, std::int64_t step, HolderOf&& holder_of) {
  for (std::int64_t s = k0 / step; s * step < k1; ++s)
    if (holder_of(s) != rank) return false;
  return true;
}

}  // namespace sluice::shard::detail
