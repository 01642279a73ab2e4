#pragma once
// How a stage's work divides over its TP·CP lanes.
//
// Tensor parallelism shards the parameters as Megatron-LM does (Shoeybi et al., "Megatron-LM", §3; the embedding and
// the LM head as its vocab-parallel layers): QKV and gate|up column-parallel (TP rank r holds heads
// [r·heads/TP, (r+1)·heads/TP) of q, k and v, and columns [r·ffn/TP, (r+1)·ffn/TP) of the gate and of the up
// projection), the attention output and down row-parallel (the matching rows), the embedding's rows and the LM head's
// columns split by vocabulary, the norm weights replicated. With sequence parallelism (Korthikanti et al.,
// "Reducing Activation Recomputation in Large Transformer Models", §4.2.2), the activations between them hold
// 1/TP of the lane's tokens: TP rank r holds rows [⌊r·n/TP⌋, ⌊(r+1)·n/TP⌋) of the n tokens its CP rank holds.
//
// Context parallelism gives each CP rank some tokens of every sequence of a micro-batch, by the causal load balance
// of ring attention (Megatron-LM's context parallelism; Liu et al., arXiv 2310.01889) nested once per level: with a
// Ulysses degree U and a ring degree R (C = U·R; Ulysses U = C, ring U = 1, the hybrid of USP between), a sequence
// of L tokens is cut at ⌊i·L/(2R)⌋ and ring rank ρ takes chunks ρ and 2R−1−ρ; that share is cut again into 2U
// chunks by index and Ulysses rank u takes chunks u and 2U−1−u. CP rank c is ring rank c / U and Ulysses rank c mod
// U, so a Ulysses group holds consecutive CP ranks and its tokens together are the ring rank's share. Lengths need
// not divide by anything: a sequence shorter than 2·C leaves some ranks without tokens of it, and nothing is padded.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice_executor/model.hpp"

namespace sluice::executor {

// Rows [begin, end) of `count` that part `index` of `parts` holds: ⌊index·count/parts⌋ on.
struct RowRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  [[nodiscard]] std::int64_t size() const noexcept { return end - begin; }
};
inline RowRange even_part(std::int64_t count, int parts, int index) {
  return {index * count / parts, (index + 1) * count / parts};
}

// How TP shards a parameter tensor: split by rows, or each of `blocks` column blocks split, or replicated.
struct TensorSplit {
  enum class Axis : std::uint8_t { replicated, rows, columns };
  Axis axis = Axis::replicated;
  int blocks = 1;  // column blocks (q | k | v: 3; gate | up: 2), each split alike
};

inline TensorSplit tensor_split(ParameterKind kind) {
  using Axis = TensorSplit::Axis;
  switch (kind) {
    case ParameterKind::embedding:
    case ParameterKind::attention_output:
    case ParameterKind::down: return {Axis::rows, 1};
    case ParameterKind::qkv: return {Axis::columns, 3};
    case ParameterKind::gate_up: return {Axis::columns, 2};
    case ParameterKind::lm_head: return {Axis::columns, 1};
    default: return {Axis::replicated, 1};
  }
}

// Raises invalid_input unless TP `tp` shards the model evenly: the heads, the FFN width and the vocabulary.
inline void require_tp(const ModelConfig& model, int tp) {
  sluice::require(tp >= 1, "tensor parallelism: TP must be >= 1, got ", tp);
  sluice::require(model.heads % tp == 0, "tensor parallelism: TP ", tp, " does not divide the model's ", model.heads,
                  " heads");
  sluice::require(model.ffn % tp == 0, "tensor parallelism: TP ", tp, " does not divide the FFN width ", model.ffn);
  sluice::require(model.vocab % tp == 0, "tensor parallelism: TP ", tp, " does not divide the vocabulary ",
                  model.vocab);
}

// The [rows, cols] of TP rank r's shard of a tensor.
inline std::pair<std::int64_t, std::int64_t> shard_shape(const ParameterTensor& tensor, int tp) {
  switch (tensor_split(tensor.kind).axis) {
    case TensorSplit::Axis::rows: return {tensor.rows / tp, tensor.cols};
    case TensorSplit::Axis::columns: return {tensor.rows, tensor.cols / tp};
    default: return {tensor.rows, tensor.cols};
  }
}

// Calls visit(full_offset, shard_offset, count) for every run of contiguous values that TP rank r's shard of
// `tensor` shares with the full tensor (row-major both).
template <class Visit>
void for_each_shard_run(const ParameterTensor& tensor, int tp, int r, Visit visit) {
  const TensorSplit split = tensor_split(tensor.kind);
  const auto cols = static_cast<std::size_t>(tensor.cols);
  if (split.axis == TensorSplit::Axis::replicated || tp == 1) {
    visit(std::size_t{0}, std::size_t{0}, tensor.size());
  } else if (split.axis == TensorSplit::Axis::rows) {
    const auto rows = static_cast<std::size_t>(tensor.rows / tp);
    visit(static_cast<std::size_t>(r) * rows * cols, std::size_t{0}, rows * cols);
  } else {
    const auto block = cols / static_cast<std::size_t>(split.blocks);
    const auto part = block / static_cast<std::size_t>(tp);
    const std::size_t shard_cols = part * static_cast<std::size_t>(split.blocks);
    for (std::size_t row = 0; row < static_cast<std::size_t>(tensor.rows); ++row)
      for (std::size_t b = 0; b < static_cast<std::size_t>(split.blocks); ++b)
        visit(row * cols + b * block + static_cast<std::size_t>(r) * part, row * shard_cols + b * part, part);
  }
}

// TP rank r's shard of a full tensor's values.
inline std::vector<double> shard_of(const ParameterTensor& tensor, std::span<const double> full, int tp, int r) {
  const auto [rows, cols] = shard_shape(tensor, tp);
  std::vector<double> shard(static_cast<std::size_t>(rows * cols));
  for_each_shard_run(tensor, tp, r, [&](std::size_t from, std::size_t to, std::size_t count) {
    std::copy_n(full.begin() + static_cast<std::ptrdiff_t>(from), count,
                shard.begin() + static_cast<std::ptrdiff_t>(to));
  });
  return shard;
}

// TP rank r's shard of tensor `index`'s initial values (model.hpp), as shard_of(initial_values) gives them, drawn
// straight into the shard: no full tensor is held, and the values between the shard's runs cost only their draws.
template <class Value = double>
std::vector<Value> initial_shard(const ModelConfig& model, std::size_t index, int tp, int r) {
  InitialValueStream stream(model, index);
  const auto [rows, cols] = shard_shape(stream.tensor(), tp);
  std::vector<Value> shard(static_cast<std::size_t>(rows * cols));
  std::size_t drawn = 0;  // values of the full tensor drawn so far; the runs come in row-major order
  for_each_shard_run(stream.tensor(), tp, r, [&](std::size_t from, std::size_t to, std::size_t count) {
    stream.skip(from - drawn);
    for (std::size_t k = 0; k < count; ++k) shard[to + k] = static_cast<Value>(stream.next());
    drawn = from + count;
  });
  return shard;
}

// Adds TP rank r's shard into the full tensor's values.
inline void add_shard(const ParameterTensor& tensor, std::span<const double> shard, int tp, int r,
                      std::span<double> full) {
  for_each_shard_run(tensor, tp, r, [&](std::size_t to, std::size_t from, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) full[to + i] += shard[from + i];
  });
}

// One CP rank's tokens of a packed micro-batch, or one ring rank's share (a block of ring attention).
struct CpShard {
  std::vector<std::int32_t> rows;        // packed positions, sequence by sequence, ascending within each
  std::vector<std::int32_t> positions;   // each row's position within its sequence
  std::vector<std::int32_t> cu_seqlens;  // sequences + 1 offsets into rows; a sequence may have no rows here
  [[nodiscard]] std::int64_t size() const noexcept { return static_cast<std::int64_t>(rows.size()); }
};

// The CP split of one micro-batch: every CP rank's tokens and every ring rank's block.
struct CpSplit {
  int ulysses = 1;
  int ring = 1;
  std::vector<CpShard> shards;  // by CP rank
  std::vector<CpShard> blocks;  // by ring rank: the tokens of its Ulysses group, in shard order
  [[nodiscard]] int degree() const noexcept { return ulysses * ring; }
};

namespace detail {

// Chunks `part` and 2·parts − 1 − part of `count` items cut into 2·parts, as index ranges.
inline std::pair<RowRange, RowRange> balanced_chunks(std::int64_t count, int parts, int part) {
  const int chunks = 2 * parts;
  return {even_part(count, chunks, part), even_part(count, chunks, chunks - 1 - part)};
}

}  // namespace detail

// cu_seqlens: the packed micro-batch's offsets. Raises invalid_input for degrees below 1.
inline CpSplit cp_split(std::span<const std::int32_t> cu_seqlens, int ulysses, int ring) {
  sluice::require(ulysses >= 1 && ring >= 1, "context parallelism: degrees must be >= 1, got Ulysses ", ulysses,
                  " and ring ", ring);
  CpSplit split{ulysses, ring, std::vector<CpShard>(static_cast<std::size_t>(ulysses * ring)),
                std::vector<CpShard>(static_cast<std::size_t>(ring))};
  for (CpShard& shard : split.shards) shard.cu_seqlens.push_back(0);
  for (CpShard& block : split.blocks) block.cu_seqlens.push_back(0);
  std::vector<std::int32_t> share;  // positions of one ring rank's share of a sequence
  for (std::size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
    const std::int32_t start = cu_seqlens[s];
    const std::int64_t length = cu_seqlens[s + 1] - start;
    for (int rho = 0; rho < ring; ++rho) {
      share.clear();
      const auto [first, second] = detail::balanced_chunks(length, ring, rho);
      for (const RowRange chunk : {first, second})
        for (std::int64_t p = chunk.begin; p < chunk.end; ++p) share.push_back(static_cast<std::int32_t>(p));
      CpShard& block = split.blocks[static_cast<std::size_t>(rho)];
      for (int u = 0; u < ulysses; ++u) {
        CpShard& shard = split.shards[static_cast<std::size_t>(rho * ulysses + u)];
        const auto [low, high] = detail::balanced_chunks(static_cast<std::int64_t>(share.size()), ulysses, u);
        for (const RowRange chunk : {low, high})
          for (std::int64_t i = chunk.begin; i < chunk.end; ++i) {
            const std::int32_t position = share[static_cast<std::size_t>(i)];
            shard.rows.push_back(start + position);
            shard.positions.push_back(position);
            block.rows.push_back(start + position);
            block.positions.push_back(position);
          }
        shard.cu_seqlens.push_back(static_cast<std::int32_t>(shard.rows.size()));
      }
      block.cu_seqlens.push_back(static_cast<std::int32_t>(block.rows.size()));
    }
  }
  return split;
}

// The CP ranks in CP rank `cp_rank`'s Ulysses group and in its ring group, in member order (cp_split's numbering:
// CP rank c is Ulysses rank c mod U of ring rank c / U).
struct CpGroupMembers {
  std::vector<int> ulysses;
  std::vector<int> ring;
};

inline CpGroupMembers cp_group_members(int cp_rank, int ulysses, int ring) {
  CpGroupMembers members;
  for (int u = 0; u < ulysses; ++u) members.ulysses.push_back(cp_rank / ulysses * ulysses + u);
  for (int r = 0; r < ring; ++r) members.ring.push_back(r * ulysses + cp_rank % ulysses);
  return members;
}

}  // namespace sluice::executor
