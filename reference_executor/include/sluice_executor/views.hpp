#pragma once
// Every parameter tensor as the pull and push move it (sluice/shard/model.hpp): a 1-D array along its TP split axis,
// the *view*, in which TP rank t of TP holds the contiguous fraction [⌊t·E/TP⌋, ⌊(t+1)·E/TP⌋) for every TP that
// shards the model (shards.hpp), and an optimizer segment, a mutual slice and a reduce-scatter piece are element
// ranges too. A row-split tensor's view is its row-major order; a column-split one's runs column by column within its
// blocks (column c of every block, then c + 1), rows innermost; a replicated one's is its row-major order, every TP
// rank holding all of it.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/shards.hpp"

namespace sluice::executor {

// The row-major index of view element `v` of `tensor`.
inline std::size_t full_index(const ParameterTensor& tensor, std::size_t v) {
  const TensorSplit split = tensor_split(tensor.kind);
  if (split.axis != TensorSplit::Axis::columns) return v;
  const auto rows = static_cast<std::size_t>(tensor.rows);
  const auto blocks = static_cast<std::size_t>(split.blocks);
  const std::size_t width = static_cast<std::size_t>(tensor.cols) / blocks;  // columns of one block
  const std::size_t r = v % rows;
  const std::size_t b = (v / rows) % blocks;
  const std::size_t c = v / (rows * blocks);
  return r * static_cast<std::size_t>(tensor.cols) + b * width + c;
}

// The index in TP rank t's shard (shard_of's row-major layout) of row-major element `full`, which the rank holds.
inline std::size_t shard_index(const ParameterTensor& tensor, int tp, int t, std::size_t full) {
  const TensorSplit split = tensor_split(tensor.kind);
  const auto cols = static_cast<std::size_t>(tensor.cols);
  if (split.axis == TensorSplit::Axis::replicated || tp == 1) return full;
  if (split.axis == TensorSplit::Axis::rows)
    return full - static_cast<std::size_t>(t) * static_cast<std::size_t>(tensor.rows / tp) * cols;
  const auto blocks = static_cast<std::size_t>(split.blocks);
  const std::size_t part = cols / blocks / static_cast<std::size_t>(tp);
  const std::size_t r = full / cols;
  const std::size_t b = (full % cols) / (cols / blocks);
  const std::size_t c = (full % cols) % (cols / blocks);
  return r * blocks * part + b * part + (c - static_cast<std::size_t>(t) * part);
}

// The view of a whole tensor from its row-major values.
inline std::vector<double> view_of(const ParameterTensor& tensor, std::span<const double> full) {
  std::vector<double> view(full.size());
  for (std::size_t v = 0; v < view.size(); ++v) view[v] = full[full_index(tensor, v)];
  return view;
}

// The row-major values of a whole tensor from its view.
inline std::vector<double> full_of(const ParameterTensor& tensor, std::span<const double> view) {
  std::vector<double> full(view.size());
  for (std::size_t v = 0; v < view.size(); ++v) full[full_index(tensor, v)] = view[v];
  return full;
}

// The first view element of TP rank t's fraction, and its end: ⌊t·E/TP⌋ (a replicated tensor's fraction is the
// whole of it).
inline RowRange view_fraction(const ParameterTensor& tensor, int tp, int t) {
  if (tensor_split(tensor.kind).axis == TensorSplit::Axis::replicated) tp = 1, t = 0;
  return even_part(static_cast<std::int64_t>(tensor.size()), tp, t);
}

// TP rank t's shard from its fraction of the view, and back.
inline std::vector<double> shard_from_fraction(const ParameterTensor& tensor, int tp, int t,
                                               std::span<const double> fraction) {
  const RowRange range = view_fraction(tensor, tp, t);
  sluice::require(fraction.size() == static_cast<std::size_t>(range.size()), "views: a fraction of ", fraction.size(),
                  " values for ", range.size(), " of ", tensor.name());
  std::vector<double> shard(fraction.size());
  for (std::size_t i = 0; i < fraction.size(); ++i)
    shard[shard_index(tensor, tp, t, full_index(tensor, static_cast<std::size_t>(range.begin) + i))] = fraction[i];
  return shard;
}

inline std::vector<double> fraction_from_shard(const ParameterTensor& tensor, int tp, int t,
                                               std::span<const double> shard) {
  const RowRange range = view_fraction(tensor, tp, t);
  sluice::require(shard.size() == static_cast<std::size_t>(range.size()), "views: a shard of ", shard.size(),
                  " values for ", range.size(), " of ", tensor.name());
  std::vector<double> fraction(shard.size());
  for (std::size_t i = 0; i < fraction.size(); ++i)
    fraction[i] = shard[shard_index(tensor, tp, t, full_index(tensor, static_cast<std::size_t>(range.begin) + i))];
  return fraction;
}

}  // namespace sluice::executor
