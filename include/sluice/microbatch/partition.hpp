#pragma once
// DynaPipe's micro-batch partition DP (Eq. 2, §4). The ordered samples are cut into consecutive runs; for a
// bound tmax on a run's time,
//     f(e; tmax) = min_{s < e} f(s; tmax) + t(s..e)   over runs with t(s..e) <= tmax and mem(s..e) <= limit,
// f(0) = 0, and the partition minimises (c − 1)·max_M t(M) + Σ_M t(M) / |D|. The outer search runs the DP for
// candidate tmax values (the times of feasible runs), thinned so that every candidate has a kept value at
// most `tmax_interval` above it; thinning then costs at most (c − 1)·tmax_interval of objective and never
// loses feasibility (the smallest feasible tmax is always tried). Only the band of memory-feasible runs is
// stored, and the candidates are searched by branch and bound instead of one DP pass each, with the result of
// trying them all in order. Details and numbers: docs/microbatch.md.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/microbatch/detail/partition_dp.hpp"
#include "sluice/microbatch/order.hpp"
#include "sluice/microbatch/partition_options.hpp"
#include "sluice/microbatch/types.hpp"

namespace sluice::microbatch {

inline void require_valid(const PartitionOptions& options) {
  using sluice::require;
  require(options.stages >= 1, "partition: stages must be >= 1, got ", options.stages);
  require(options.replicas >= 1, "partition: replicas must be >= 1, got ", options.replicas);
  require(!std::isnan(options.memory_limit) && options.memory_limit > 0,
          "partition: memory_limit must be > 0 bytes, got ", options.memory_limit);
  require(options.layout == Layout::padded || options.layout == Layout::packed,
          "partition: layout must be padded or packed, got ", name(options.layout));
  require(std::isfinite(options.tmax_interval) && options.tmax_interval >= 0,
          "partition: tmax_interval must be finite and >= 0, got ", options.tmax_interval);
}

// Partitions the samples, in the given order, with the first cost model (recomputation level) under which
// every sample fits the memory limit alone (then a partition exists). Raises invalid_input on bad samples,
// options or cost values (NaN, negative, or times whose sum overflows) or a batch whose run table would pass
// max_run_table_cells, and sluice::infeasible when some sample exceeds the limit under every model.
template <MicroBatchCostModel Model>
Partition partition(Span<const Sample> ordered, Span<const Model> models, const PartitionOptions& options) {
  check_samples(ordered, "partition");
  require_valid(options);
  sluice::require(!models.empty(), "partition: no cost models");
  Partition result;
  for (std::size_t m = 0; m < models.size(); ++m)
    if (detail::partition_with(ordered, models[m], m, options, result)) return result;
  const Sample& sample = ordered[detail::first_unfit(ordered, models.back(), options.layout, options.memory_limit)];
  const Shape alone = detail::run_shape(options.layout, 1, sample.input, sample.target, sample.input, sample.target);
  throw infeasible(sluice::concat(
      "partition: sample ", sample.id, " (input ", sample.input, ", target ", sample.target, ") alone needs ",
      models.back().bytes(alone), " bytes and ", models.back().seconds(alone), " s under the last of ", models.size(),
      " cost models; the memory limit is ", options.memory_limit, " bytes per micro-batch, so no partition fits"));
}

template <MicroBatchCostModel Model>
Partition partition(Span<const Sample> ordered, const Model& model, const PartitionOptions& options) {
  return partition(ordered, Span<const Model>(&model, 1), options);
}

// Checks a partition against its samples, cost model and context; raises invalid_plan naming the first broken
// invariant: at least one micro-batch, none empty, every sample exactly once and nothing else, rows that hold
// their samples (padded: one per row, shape = the longest input and target; packed: one row, shape = the
// sums; fixed_rows: each row within the shape), seconds and bytes equal to the model's (relative 1e-9), bytes
// within the memory limit, and the objective recomputed.
template <MicroBatchCostModel Model>
void validate(const Partition& partition, Span<const Sample> samples, const Model& model,
              const PartitionContext& context) {
  sluice::require(context.stages >= 1, "partition context: stages must be >= 1, got ", context.stages);
  sluice::require(context.replicas >= 1, "partition context: replicas must be >= 1, got ", context.replicas);
  sluice::require(!std::isnan(context.memory_limit) && context.memory_limit > 0,
                  "partition context: memory_limit must be > 0, got ", context.memory_limit);
  const PlanCheck check("partition: ");
  check(!partition.micro_batches.empty(), "has no micro-batches");
  std::unordered_map<std::int64_t, const Sample*> by_id;
  for (const Sample& sample : samples) by_id.emplace(sample.id, &sample);
  std::unordered_set<std::int64_t> seen;
  for (std::size_t m = 0; m < partition.micro_batches.size(); ++m) {
    const ShapedMicroBatch& mb = partition.micro_batches[m];
    check(!mb.sample_ids.empty(), "micro-batch ", m, " is empty");
    check(static_cast<std::int64_t>(mb.row_sizes.size()) == mb.shape.rows, "micro-batch ", m, " has ",
          mb.row_sizes.size(), " rows but its shape says ", mb.shape.rows);
    std::size_t next = 0;
    std::int64_t max_input = 0;
    std::int64_t max_target = 0;
    for (std::size_t r = 0; r < mb.row_sizes.size(); ++r) {
      const std::int64_t size = mb.row_sizes[r];
      check(size >= 1 && static_cast<std::size_t>(size) <= mb.sample_ids.size() - next, "micro-batch ", m, " row ", r,
            " has size ", size, ", which its sample list cannot fill");
      std::int64_t row_input = 0;
      std::int64_t row_target = 0;
      for (std::int64_t i = 0; i < size; ++i, ++next) {
        const std::int64_t id = mb.sample_ids[next];
        const auto it = by_id.find(id);
        check(it != by_id.end(), "micro-batch ", m, " holds sample ", id, ", not among the samples");
        check(seen.insert(id).second, "sample ", id, " is in more than one place");
        row_input += it->second->input;
        row_target += it->second->target;
      }
      check(row_input <= mb.shape.input && row_target <= mb.shape.target, "micro-batch ", m, " row ", r, " holds ",
            row_input, " input and ", row_target, " target tokens, above its shape's ", mb.shape.input, " and ",
            mb.shape.target);
      max_input = std::max(max_input, row_input);
      max_target = std::max(max_target, row_target);
    }
    check(next == mb.sample_ids.size(), "micro-batch ", m, " rows hold ", next, " of its ", mb.sample_ids.size(),
          " samples");
    if (partition.layout == Layout::padded)
      check(std::all_of(mb.row_sizes.begin(), mb.row_sizes.end(), [](std::int64_t size) { return size == 1; }),
            "micro-batch ", m, " is padded but a row holds several samples");
    if (partition.layout == Layout::packed)
      check(mb.shape.rows == 1, "micro-batch ", m, " is packed into ", mb.shape.rows, " rows");
    if (partition.layout != Layout::fixed_rows)
      check(max_input == mb.shape.input && max_target == mb.shape.target, "micro-batch ", m, " shape (", mb.shape.input,
            ", ", mb.shape.target, ") is not its samples' (", max_input, ", ", max_target, ")");
    const double seconds = model.seconds(mb.shape);
    const double bytes = model.bytes(mb.shape);
    check(std::isfinite(seconds) && nearly_equal(seconds, mb.seconds), "micro-batch ", m, " says ", mb.seconds,
          " s, the cost model gives ", seconds);
    check(nearly_equal(bytes, mb.bytes), "micro-batch ", m, " says ", mb.bytes, " bytes, the cost model gives ", bytes);
    check(bytes <= context.memory_limit, "micro-batch ", m, " needs ", bytes, " bytes, above the limit ",
          context.memory_limit);
  }
  check(seen.size() == by_id.size(), "places ", seen.size(), " of ", by_id.size(), " samples");
  const double objective = partition_objective(partition.micro_batches, context.stages, context.replicas);
  check(nearly_equal(objective, partition.objective), "objective ", partition.objective, ", its micro-batches give ",
        objective);
}

// As above with the partition's own cost model among several (recomputation levels).
template <MicroBatchCostModel Model>
void validate(const Partition& partition, Span<const Sample> samples, Span<const Model> models,
              const PartitionContext& context) {
  if (partition.cost_model >= models.size())
    throw invalid_plan(sluice::concat("partition: cost model ", partition.cost_model, " of ", models.size()));
  validate(partition, samples, models[partition.cost_model], context);
}

}  // namespace sluice::microbatch
