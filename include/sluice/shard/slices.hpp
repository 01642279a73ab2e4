#pragma once
// The units a pull or push plan moves (pull_push.hpp): blocks of layers whose tensors are cut into mutual slices,
// pieces of those slices, and messages that carry pieces from one rank to another.
#include <cstdint>

namespace sluice::shard {

// The first element of mutual slice k of a tensor of `elements` cut into `granularity` slices, ⌊k·elements /
// granularity⌋, without overflow (128-bit division, slow, only when the product needs it). Slice k is
// [slice_start(k), slice_start(k + 1)).
inline std::int64_t slice_start(std::int64_t k, std::int64_t elements, std::int64_t granularity) noexcept {
  std::int64_t product = 0;
  if (!__builtin_mul_overflow(k, elements, &product)) return product / granularity;
  __extension__ using wide = __int128;
  return static_cast<std::int64_t>(static_cast<wide>(k) * elements / granularity);
}

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

// All pieces from src to dst, in one message: pieces[first_piece, first_piece + piece_count). Messages of one
// source with equal pieces share them (the pull sends an owner's slices to every pipeline of a TP degree alike).
// 24 bytes: a plan holds at most max_plan_pieces (2^26) pieces and messages, so 32-bit indices suffice.
struct Message {
  int src = 0;
  int dst = 0;
  std::uint32_t first_piece = 0;
  std::uint32_t piece_count = 0;
  std::int64_t bytes = 0;
  friend bool operator==(const Message&, const Message&) = default;
};

}  // namespace sluice::shard
