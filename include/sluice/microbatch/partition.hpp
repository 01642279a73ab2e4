#pragma once
// DynaPipe's micro-batch partition DP (Eq. 2, §4). The ordered samples are cut into consecutive runs; for a
// bound tmax on a run's time,
//     f(e; tmax) = min_{s < e} f(s; tmax) + t(s..e)   over runs with t(s..e) <= tmax and mem(s..e) <= limit,
// f(0) = 0, and the partition minimises (c − 1)·max_M t(M) + Σ_M t(M) / |D|. The outer search runs the DP for
// candidate tmax values (the times of feasible runs), thinned so that every candidate has a kept value at
// most `tmax_interval` above it; thinning then costs at most (c − 1)·tmax_interval of objective and never
// loses feasibility (the smallest feasible tmax is always tried). Details and numbers: docs/microbatch.md.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/microbatch/order.hpp"
#include "sluice/microbatch/types.hpp"

namespace sluice::microbatch {

struct PartitionOptions {
  int stages = 1;                                                // c >= 1
  int replicas = 1;                                              // |D| >= 1
  double memory_limit = std::numeric_limits<double>::infinity();  // bytes per micro-batch, > 0 (may be +inf)
  Layout layout = Layout::padded;                                // padded or packed
  double tmax_interval = 5e-6;                                   // seconds, >= 0; 0 = exact enumeration
};

inline void validate(const PartitionOptions& options) {
  using sluice::detail::require;
  require(options.stages >= 1, "partition: stages must be >= 1, got ", options.stages);
  require(options.replicas >= 1, "partition: replicas must be >= 1, got ", options.replicas);
  require(!std::isnan(options.memory_limit) && options.memory_limit > 0,
          "partition: memory_limit must be > 0 bytes, got ", options.memory_limit);
  require(options.layout == Layout::padded || options.layout == Layout::packed,
          "partition: layout must be padded or packed, got ", layout_name(options.layout));
  require(std::isfinite(options.tmax_interval) && options.tmax_interval >= 0,
          "partition: tmax_interval must be finite and >= 0, got ", options.tmax_interval);
}

namespace detail {

// The shape of a run under a padded or packed layout, from its running maxima and sums.
inline Shape run_shape(Layout layout, std::int64_t count, std::int64_t max_input, std::int64_t max_target,
                       std::int64_t sum_input, std::int64_t sum_target) noexcept {
  return layout == Layout::packed ? Shape{1, sum_input, sum_target} : Shape{count, max_input, max_target};
}

inline double checked_cost(double value, const char* what, const Shape& shape) {
  if (std::isnan(value) || value < 0)
    sluice::detail::fail("partition: cost model ", what, " of shape (rows ", shape.rows, ", input ", shape.input,
                         ", target ", shape.target, ") must be >= 0, got ", value);
  return value;
}

// Times of every memory-feasible run, by end: time(e, k) = t(samples e−k..e) (k = 0 is the sample alone),
// for k < reach(e). Extension stops at the first run over the memory limit, which is exact for cost models
// whose memory grows with the shape. Row e is non-decreasing in k for such models.
class RunTable {
public:
  template <MicroBatchCostModel Model>
  RunTable(std::span<const Sample> ordered, const Model& model, Layout layout, double memory_limit)
      : n_(ordered.size()), time_(n_ * n_), reach_(n_) {
    for (std::size_t e = 0; e < n_; ++e) {
      std::int64_t max_input = 0;
      std::int64_t max_target = 0;
      std::int64_t sum_input = 0;
      std::int64_t sum_target = 0;
      std::size_t k = 0;
      for (; k <= e; ++k) {
        const Sample& sample = ordered[e - k];
        max_input = std::max(max_input, sample.input);
        max_target = std::max(max_target, sample.target);
        sum_input += sample.input;
        sum_target += sample.target;
        const Shape shape = run_shape(layout, static_cast<std::int64_t>(k + 1), max_input, max_target, sum_input,
                                      sum_target);
        const double bytes = checked_cost(static_cast<double>(model.bytes(shape)), "bytes", shape);
        const double seconds = checked_cost(static_cast<double>(model.seconds(shape)), "seconds", shape);
        if (bytes > memory_limit || seconds == std::numeric_limits<double>::infinity()) break;
        time_[e * n_ + k] = seconds;
      }
      reach_[e] = k;
    }
  }

  [[nodiscard]] std::size_t size() const noexcept { return n_; }
  [[nodiscard]] std::size_t reach(std::size_t e) const noexcept { return reach_[e]; }
  [[nodiscard]] double time(std::size_t e, std::size_t k) const noexcept { return time_[e * n_ + k]; }
  [[nodiscard]] const double* row(std::size_t e) const noexcept { return time_.data() + e * n_; }

  // The first sample that does not fit alone, or size() when all do.
  [[nodiscard]] std::size_t first_unfit() const noexcept {
    for (std::size_t e = 0; e < n_; ++e)
      if (reach_[e] == 0) return e;
    return n_;
  }

private:
  std::size_t n_;
  std::vector<double> time_;
  std::vector<std::size_t> reach_;
};

// Eq. 2 for one tmax, over buffers sized once; run_[e] is the length of the last run of the best prefix e.
class PartitionDp {
public:
  explicit PartitionDp(const RunTable& table) : table_(table), f_(table.size() + 1), run_(table.size() + 1) {}

  // Σ t of the best partition with every run <= tmax (+inf if none), and its slowest run.
  std::pair<double, double> solve(double tmax) noexcept {
    constexpr double inf = std::numeric_limits<double>::infinity();
    const std::size_t n = table_.size();
    f_[0] = 0;
    for (std::size_t e = 1; e <= n; ++e) {
      const double* row = table_.row(e - 1);
      const std::size_t reach = table_.reach(e - 1);
      double best = inf;
      std::size_t length = 0;
      for (std::size_t k = 0; k < reach; ++k) {
        const double t = row[k];
        if (t > tmax) break;
        const double value = f_[e - 1 - k] + t;
        if (value < best) {
          best = value;
          length = k + 1;
        }
      }
      f_[e] = best;
      run_[e] = length;
    }
    if (f_[n] == inf) return {inf, inf};
    double slowest = 0;
    for (std::size_t e = n; e > 0; e -= run_[e]) slowest = std::max(slowest, table_.time(e - 1, run_[e] - 1));
    return {f_[n], slowest};
  }

  [[nodiscard]] const std::vector<std::size_t>& runs() const noexcept { return run_; }

private:
  const RunTable& table_;
  std::vector<double> f_;
  std::vector<std::size_t> run_;
};

// The tmax values to try above `lo` and below `hi`, ascending: all distinct feasible run times when
// interval = 0, else a greedy cover keeping, for the smallest uncovered value v, the largest value <= v + interval.
inline std::vector<double> tmax_candidates(const RunTable& table, double lo, double hi, double interval) {
  std::vector<double> values;
  for (std::size_t e = 0; e < table.size(); ++e)
    for (std::size_t k = 0; k < table.reach(e); ++k) {
      const double t = table.time(e, k);
      if (t > lo && t < hi) values.push_back(t);
    }
  std::ranges::sort(values);
  values.erase(std::unique(values.begin(), values.end()), values.end());
  if (interval == 0) return values;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < values.size();) {
    std::size_t j = i;
    while (j + 1 < values.size() && values[j + 1] <= values[i] + interval) ++j;
    values[kept++] = values[j];
    i = j + 1;
  }
  values.resize(kept);
  return values;
}

template <MicroBatchCostModel Model>
Partition build_partition(std::span<const Sample> ordered, const Model& model, Layout layout,
                          const std::vector<std::size_t>& runs, const RunTable& table, std::size_t cost_model,
                          int stages, int replicas) {
  std::vector<std::size_t> ends;
  for (std::size_t e = ordered.size(); e > 0; e -= runs[e]) ends.push_back(e);
  std::ranges::reverse(ends);
  Partition partition{layout, {}, 0, cost_model};
  partition.micro_batches.reserve(ends.size());
  std::size_t start = 0;
  for (const std::size_t end : ends) {
    MicroBatch micro_batch;
    std::int64_t max_input = 0;
    std::int64_t max_target = 0;
    std::int64_t sum_input = 0;
    std::int64_t sum_target = 0;
    for (std::size_t i = start; i < end; ++i) {
      micro_batch.sample_ids.push_back(ordered[i].id);
      max_input = std::max(max_input, ordered[i].input);
      max_target = std::max(max_target, ordered[i].target);
      sum_input += ordered[i].input;
      sum_target += ordered[i].target;
    }
    const auto count = static_cast<std::int64_t>(end - start);
    micro_batch.row_sizes =
        layout == Layout::packed ? std::vector<std::int64_t>{count} : std::vector<std::int64_t>(end - start, 1);
    micro_batch.shape = run_shape(layout, count, max_input, max_target, sum_input, sum_target);
    micro_batch.seconds = table.time(end - 1, end - start - 1);
    micro_batch.bytes = static_cast<double>(model.bytes(micro_batch.shape));
    partition.micro_batches.push_back(std::move(micro_batch));
    start = end;
  }
  partition.objective = partition_objective(partition.micro_batches, stages, replicas);
  return partition;
}

// The outer tmax search for one cost model; false when some sample does not fit alone.
template <MicroBatchCostModel Model>
bool partition_with(std::span<const Sample> ordered, const Model& model, std::size_t index,
                    const PartitionOptions& options, Partition& result) {
  const RunTable table(ordered, model, options.layout, options.memory_limit);
  if (table.first_unfit() != table.size()) return false;
  const double c1 = options.stages - 1;
  const double d = options.replicas;
  PartitionDp dp(table);
  // No tmax: the least Σ t, a lower bound on f for every tmax.
  const auto [sum_free, max_free] = dp.solve(std::numeric_limits<double>::infinity());
  std::vector<std::size_t> best_runs = dp.runs();
  double best = c1 * max_free + sum_free / d;
  // Every sample fits alone, so only an overflow leaves no finite partition (and no runs to rebuild it from).
  if (!std::isfinite(best)) {
    double slowest = 0;
    for (std::size_t e = 0; e < table.size(); ++e) slowest = std::max(slowest, table.time(e, 0));
    sluice::detail::fail("partition: the times of cost model ", index, " overflow: ", ordered.size(),
                         " samples sum to ", sum_free, " s, the slowest alone takes ", slowest, " s");
  }
  if (options.stages > 1) {
    // The smallest feasible tmax: every sample alone fits, and a run costs at least each of its samples.
    double lo = 0;
    for (std::size_t e = 0; e < table.size(); ++e) lo = std::max(lo, table.time(e, 0));
    auto consider = [&](double tmax) {
      const auto [sum, slowest] = dp.solve(tmax);
      const double objective = c1 * slowest + sum / d;
      if (objective < best) {
        best = objective;
        best_runs = dp.runs();
      }
    };
    consider(lo);
    // A tmax at or above hi cannot beat `best`: (c − 1)·tmax + f(tmax)/|D| >= (c − 1)·tmax + sum_free/|D|.
    const double hi = (best - sum_free / d) / c1;
    for (const double tmax : tmax_candidates(table, lo, hi, options.tmax_interval)) {
      if (c1 * tmax + sum_free / d >= best) break;
      consider(tmax);
    }
  }
  result = build_partition(ordered, model, options.layout, best_runs, table, index, options.stages, options.replicas);
  return true;
}

}  // namespace detail

// Partitions the samples, in the given order, with the first cost model (recomputation level) under which
// every sample fits the memory limit alone (then a partition exists). Raises invalid_input on bad samples,
// options or cost values (NaN, negative, or times whose sum overflows) and sluice::infeasible when some sample
// exceeds the limit under every model.
template <MicroBatchCostModel Model>
Partition partition(std::span<const Sample> ordered, std::span<const Model> models, const PartitionOptions& options) {
  check_samples(ordered, "partition");
  validate(options);
  sluice::detail::require(!models.empty(), "partition: no cost models");
  Partition result;
  for (std::size_t m = 0; m < models.size(); ++m)
    if (detail::partition_with(ordered, models[m], m, options, result)) return result;
  const detail::RunTable table(ordered, models.back(), options.layout, options.memory_limit);
  const Sample& sample = ordered[table.first_unfit()];
  const Shape alone = detail::run_shape(options.layout, 1, sample.input, sample.target, sample.input, sample.target);
  throw infeasible(sluice::detail::concat(
      "partition: sample ", sample.id, " (input ", sample.input, ", target ", sample.target, ") alone needs ",
      models.back().bytes(alone), " bytes and ", models.back().seconds(alone), " s under the last of ", models.size(),
      " cost models; the memory limit is ", options.memory_limit, " bytes per micro-batch, so no partition fits"));
}

template <MicroBatchCostModel Model>
Partition partition(std::span<const Sample> ordered, const Model& model, const PartitionOptions& options) {
  return partition(ordered, std::span<const Model>(&model, 1), options);
}

// Checks a partition against its samples, cost model and context; raises invalid_plan naming the first broken
// invariant: at least one micro-batch, none empty, every sample exactly once and nothing else, rows that hold
// their samples (padded: one per row, shape = the longest input and target; packed: one row, shape = the
// sums; fixed_rows: each row within the shape), seconds and bytes equal to the model's (relative 1e-9), bytes
// within the memory limit, and the objective recomputed.
template <MicroBatchCostModel Model>
void validate(const Partition& partition, std::span<const Sample> samples, const Model& model,
              const PartitionContext& context) {
  sluice::detail::require(context.stages >= 1, "partition context: stages must be >= 1, got ", context.stages);
  sluice::detail::require(context.replicas >= 1, "partition context: replicas must be >= 1, got ", context.replicas);
  sluice::detail::require(!std::isnan(context.memory_limit) && context.memory_limit > 0,
                          "partition context: memory_limit must be > 0, got ", context.memory_limit);
  auto check = [](bool condition, auto&&... parts) {
    if (!condition) throw invalid_plan(sluice::detail::concat("partition: ", parts...));
  };
  auto close = [](double x, double y) {
    return x == y || std::abs(x - y) <= 1e-9 * std::max({1.0, std::abs(x), std::abs(y)});
  };
  check(!partition.micro_batches.empty(), "has no micro-batches");
  std::unordered_map<std::int64_t, const Sample*> by_id;
  for (const Sample& sample : samples) by_id.emplace(sample.id, &sample);
  std::unordered_set<std::int64_t> seen;
  for (std::size_t m = 0; m < partition.micro_batches.size(); ++m) {
    const MicroBatch& mb = partition.micro_batches[m];
    check(!mb.sample_ids.empty(), "micro-batch ", m, " is empty");
    check(static_cast<std::int64_t>(mb.row_sizes.size()) == mb.shape.rows, "micro-batch ", m, " has ",
          mb.row_sizes.size(), " rows but its shape says ", mb.shape.rows);
    std::size_t next = 0;
    std::int64_t max_input = 0;
    std::int64_t max_target = 0;
    for (std::size_t r = 0; r < mb.row_sizes.size(); ++r) {
      const std::int64_t size = mb.row_sizes[r];
      check(size >= 1 && static_cast<std::size_t>(size) <= mb.sample_ids.size() - next, "micro-batch ", m, " row ",
            r, " has size ", size, ", which its sample list cannot fill");
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
      check(std::ranges::all_of(mb.row_sizes, [](std::int64_t size) { return size == 1; }), "micro-batch ", m,
            " is padded but a row holds several samples");
    if (partition.layout == Layout::packed) check(mb.shape.rows == 1, "micro-batch ", m, " is packed into ",
                                                  mb.shape.rows, " rows");
    if (partition.layout != Layout::fixed_rows)
      check(max_input == mb.shape.input && max_target == mb.shape.target, "micro-batch ", m, " shape (",
            mb.shape.input, ", ", mb.shape.target, ") is not its samples' (", max_input, ", ", max_target, ")");
    const double seconds = model.seconds(mb.shape);
    const double bytes = model.bytes(mb.shape);
    check(std::isfinite(seconds) && close(seconds, mb.seconds), "micro-batch ", m, " says ", mb.seconds,
          " s, the cost model gives ", seconds);
    check(close(bytes, mb.bytes), "micro-batch ", m, " says ", mb.bytes, " bytes, the cost model gives ", bytes);
    check(bytes <= context.memory_limit, "micro-batch ", m, " needs ", bytes, " bytes, above the limit ",
          context.memory_limit);
  }
  check(seen.size() == by_id.size(), "places ", seen.size(), " of ", by_id.size(), " samples");
  const double objective = partition_objective(partition.micro_batches, context.stages, context.replicas);
  check(close(objective, partition.objective), "objective ", partition.objective, ", its micro-batches give ",
        objective);
}

// As above with the partition's own cost model among several (recomputation levels).
template <MicroBatchCostModel Model>
void validate(const Partition& partition, std::span<const Sample> samples, std::span<const Model> models,
              const PartitionContext& context) {
  if (partition.cost_model >= models.size())
    throw invalid_plan(sluice::detail::concat("partition: cost model ", partition.cost_model, " of ", models.size()));
  validate(partition, samples, models[partition.cost_model], context);
}

}  // namespace sluice::microbatch
