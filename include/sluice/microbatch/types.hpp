#pragma once
// Vocabulary of DynaPipe's micro-batch construction (§4): samples, the shape a cost model is charged for,
// micro-batches, partitions of a mini-batch into micro-batches, and the cost-model concept the planners
// are templates over. Algorithms: docs/microbatch.md.
#include <concepts>
#include <cstdint>
#include <string_view>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"

namespace sluice::microbatch {

// One training sample: an id (its index in the batch or dataset), the input (encoder) length and the target
// (decoder) length in tokens. Decoder-only models put the whole sequence in `input` and leave `target` at 0.
struct Sample {
  std::int64_t id = 0;
  std::int64_t input = 0;
  std::int64_t target = 0;
  friend bool operator==(const Sample&, const Sample&) = default;
};

// A decoder-only batch as samples: each sequence's id and its whole length as the input.
inline std::vector<Sample> samples_of(Span<const Sequence> sequences) {
  std::vector<Sample> samples;
  samples.reserve(sequences.size());
  for (const Sequence& sequence : sequences) samples.push_back({.id = sequence.id(), .input = sequence.length()});
  return samples;
}

// What a micro-batch costs is charged for: `rows` rows, each padded to `input` input and `target` target tokens.
struct Shape {
  std::int64_t rows = 0;
  std::int64_t input = 0;
  std::int64_t target = 0;
  friend bool operator==(const Shape&, const Shape&) = default;
};

// How samples become rows.
//   padded      one sample per row, every row padded to the micro-batch's longest input and target (DynaPipe);
//   packed      all samples of the micro-batch concatenated into one row;
//   fixed_rows  samples packed into rows of a fixed capacity, each row padded to it (Megatron-style packing).
enum class Layout { padded, packed, fixed_rows };

inline constexpr NameTable<Layout, 3> layout_names{
    {{Layout::padded, "padded"}, {Layout::packed, "packed"}, {Layout::fixed_rows, "fixed_rows"}}};

constexpr std::string_view name(Layout layout) { return name_in(layout_names, layout); }

// Raises invalid_input naming `what` unless `text` is padded, packed or fixed_rows.
inline Layout layout_from(std::string_view text, std::string_view what = "micro-batch layout") {
  return value_in(layout_names, text, what);
}

// Time (seconds, forward + backward on one pipeline stage) and stored activation memory (bytes, on one stage)
// of a micro-batch of the given shape. Both must be non-decreasing in every coordinate of the shape; +inf
// marks a shape the model forbids (for example outside a profiled grid).
template <class M>
concept MicroBatchCostModel = requires(const M& model, const Shape& shape) {
  { model.seconds(shape) } -> std::convertible_to<double>;
  { model.bytes(shape) } -> std::convertible_to<double>;
};

// One of DynaPipe's micro-batches: samples in rows, padded to a shape (assign::MicroBatch is Hydraulis' packed
// micro-batch of whole sequences, without a shape).
struct ShapedMicroBatch {
  std::vector<std::int64_t> sample_ids;  // row by row
  std::vector<std::int64_t> row_sizes;   // samples per row, summing to sample_ids.size(); shape.rows entries
  Shape shape;
  double seconds = 0;  // cost model's time of `shape`
  double bytes = 0;    // cost model's memory of `shape`
  friend bool operator==(const ShapedMicroBatch&, const ShapedMicroBatch&) = default;
};

// A mini-batch cut into micro-batches. objective = (c − 1)·max_M t(M) + Σ_M t(M) / |D| (Eq. 1 with the
// data-parallel lower bound, §4), c = stages and |D| = replicas of the options it was made with.
struct Partition {
  Layout layout = Layout::padded;
  std::vector<ShapedMicroBatch> micro_batches;
  double objective = 0;
  std::size_t cost_model = 0;  // index of the cost model (recomputation level) it was planned with
  friend bool operator==(const Partition&, const Partition&) = default;
};

// What a partition is checked against: the pipeline shape of the objective and the per-micro-batch memory limit.
struct PartitionContext {
  int stages = 1;
  int replicas = 1;
  double memory_limit = 0;  // bytes per micro-batch
};

inline double partition_objective(const std::vector<ShapedMicroBatch>& micro_batches, int stages, int replicas) {
  double slowest = 0;
  double total = 0;
  for (const ShapedMicroBatch& micro_batch : micro_batches) {
    slowest = slowest < micro_batch.seconds ? micro_batch.seconds : slowest;
    total += micro_batch.seconds;
  }
  return (stages - 1) * slowest + total / replicas;
}

// Micro-batch times are split among |D| data-parallel replicas: replicas[d] lists the micro-batch indices of
// replica d in ascending (partition) order; loads[d] is the sum of their times.
struct ReplicaAssignment {
  std::vector<std::vector<std::size_t>> replicas;
  std::vector<double> loads;
  double max_load = 0;
  friend bool operator==(const ReplicaAssignment&, const ReplicaAssignment&) = default;
};

}  // namespace sluice::microbatch
