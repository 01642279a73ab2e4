#pragma once
// The micro-batching baselines DynaPipe compares with (§8): token-based micro-batching (cut the ordered
// samples whenever a micro-batch's padded tokens would exceed a budget) and fixed-length packing (samples
// packed into rows of the context length, a fixed number of rows per micro-batch, Megatron-LM style). Both
// are scored with the same cost model and objective as the DP; a micro-batch over the memory limit is an
// out-of-memory run and raises sluice::infeasible.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/microbatch/order.hpp"
#include "sluice/microbatch/partition.hpp"
#include "sluice/microbatch/types.hpp"

namespace sluice::microbatch {

// Rows of `input` + `target` token capacity, `rows` of them per micro-batch (the last may have fewer).
struct FixedRows {
  std::int64_t input = 0;
  std::int64_t target = 0;
  std::int64_t rows = 1;
  friend bool operator==(const FixedRows&, const FixedRows&) = default;
};

namespace detail {

inline void check_context(const PartitionContext& context, const char* where) {
  sluice::require(context.stages >= 1, where, ": stages must be >= 1, got ", context.stages);
  sluice::require(context.replicas >= 1, where, ": replicas must be >= 1, got ", context.replicas);
  sluice::require(!std::isnan(context.memory_limit) && context.memory_limit > 0, where,
                  ": memory_limit must be > 0 bytes, got ", context.memory_limit);
}

template <MicroBatchCostModel Model>
void price(ShapedMicroBatch& micro_batch, const Model& model, const PartitionContext& context, std::size_t index,
           const char* where) {
  const Shape& shape = micro_batch.shape;
  micro_batch.seconds = static_cast<double>(model.seconds(shape));
  micro_batch.bytes = static_cast<double>(model.bytes(shape));
  (void)checked_cost(micro_batch.seconds, "seconds", shape);
  (void)checked_cost(micro_batch.bytes, "bytes", shape);
  if (!(micro_batch.bytes <= context.memory_limit) || micro_batch.seconds == std::numeric_limits<double>::infinity())
    throw infeasible(sluice::concat(where, ": micro-batch ", index, " (", shape.rows, " rows of ", shape.input, " + ",
                                    shape.target, " tokens) needs ", micro_batch.bytes, " bytes, above the limit ",
                                    context.memory_limit, " bytes (or the cost model forbids the shape)"));
}

}  // namespace detail

// Greedy in the given order: a micro-batch grows while rows × (longest input + longest target) stays within
// `tokens_per_micro_batch`; a sample over the budget alone forms its own micro-batch. Layout padded.
template <MicroBatchCostModel Model>
Partition token_based(Span<const Sample> ordered, const Model& model, std::int64_t tokens_per_micro_batch,
                      const PartitionContext& context) {
  check_samples(ordered, "token_based");
  detail::check_context(context, "token_based");
  sluice::require(tokens_per_micro_batch >= 1, "token_based: tokens_per_micro_batch must be >= 1, got ",
                  tokens_per_micro_batch);
  Partition partition{Layout::padded, {}, 0, 0};
  ShapedMicroBatch current;
  auto close = [&] {
    current.shape.rows = static_cast<std::int64_t>(current.sample_ids.size());
    current.row_sizes.assign(current.sample_ids.size(), 1);
    detail::price(current, model, context, partition.micro_batches.size(), "token_based");
    partition.micro_batches.push_back(std::move(current));
    current = ShapedMicroBatch{};
  };
  for (const Sample& sample : ordered) {
    const std::int64_t input = std::max(current.shape.input, sample.input);
    const std::int64_t target = std::max(current.shape.target, sample.target);
    const auto rows = static_cast<std::int64_t>(current.sample_ids.size()) + 1;
    // (input + target) <= budget / rows, without overflow.
    if (!current.sample_ids.empty() && input + target > tokens_per_micro_batch / rows) {
      close();
      current.shape = {0, sample.input, sample.target};
    } else {
      current.shape = {0, input, target};
    }
    current.sample_ids.push_back(sample.id);
  }
  close();
  partition.objective = partition_objective(partition.micro_batches, context.stages, context.replicas);
  return partition;
}

// First-fit decreasing by (input, target, id) into rows of the given capacity; rows in opening order, grouped
// `rows` at a time. Every row is charged at full capacity (padding fills what the samples leave). Raises
// invalid_input if a sample is longer than a row.
template <MicroBatchCostModel Model>
Partition fixed_length_packing(Span<const Sample> samples, const Model& model, const FixedRows& rows,
                               const PartitionContext& context) {
  check_samples(samples, "fixed_length_packing");
  detail::check_context(context, "fixed_length_packing");
  sluice::require(rows.input >= 1, "fixed_length_packing: row input capacity must be >= 1, got ", rows.input);
  sluice::require(rows.target >= 0, "fixed_length_packing: row target capacity must be >= 0, got ", rows.target);
  sluice::require(rows.rows >= 1, "fixed_length_packing: rows per micro-batch must be >= 1, got ", rows.rows);
  const std::vector<Sample> sorted = order_samples(samples, Ordering::input_target);
  struct Row {
    std::int64_t input = 0;
    std::int64_t target = 0;
    std::vector<std::int64_t> ids;
  };
  std::vector<Row> packed;
  for (const Sample& sample : sorted) {
    sluice::require(sample.input <= rows.input && sample.target <= rows.target, "fixed_length_packing: sample ",
                    sample.id, " (input ", sample.input, ", target ", sample.target, ") is longer than a row (",
                    rows.input, ", ", rows.target, ")");
    const auto fit = std::find_if(packed.begin(), packed.end(), [&](const Row& row) {
      return row.input + sample.input <= rows.input && row.target + sample.target <= rows.target;
    });
    Row& row = fit == packed.end() ? packed.emplace_back() : *fit;
    row.input += sample.input;
    row.target += sample.target;
    row.ids.push_back(sample.id);
  }
  Partition partition{Layout::fixed_rows, {}, 0, 0};
  for (std::size_t first = 0; first < packed.size(); first += static_cast<std::size_t>(rows.rows)) {
    const std::size_t last = std::min(packed.size(), first + static_cast<std::size_t>(rows.rows));
    ShapedMicroBatch micro_batch;
    for (std::size_t r = first; r < last; ++r) {
      micro_batch.sample_ids.insert(micro_batch.sample_ids.end(), packed[r].ids.begin(), packed[r].ids.end());
      micro_batch.row_sizes.push_back(static_cast<std::int64_t>(packed[r].ids.size()));
    }
    micro_batch.shape = {static_cast<std::int64_t>(last - first), rows.input, rows.target};
    detail::price(micro_batch, model, context, partition.micro_batches.size(), "fixed_length_packing");
    partition.micro_batches.push_back(std::move(micro_batch));
  }
  partition.objective = partition_objective(partition.micro_batches, context.stages, context.replicas);
  return partition;
}

}  // namespace sluice::microbatch
