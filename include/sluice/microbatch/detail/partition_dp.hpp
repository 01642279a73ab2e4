#pragma once
// DynaPipe's partition DP for one cost model: the table of memory-feasible run times, the DP pass for one tmax,
// the tmax candidates and their branch-and-bound search, and the partition built from the winning pass.
// Not for callers: partition.hpp is their interface.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <queue>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/microbatch/partition_options.hpp"
#include "sluice/microbatch/types.hpp"

namespace sluice::microbatch::detail {

// The shape of a run under a padded or packed layout, from its running maxima and sums.
inline Shape run_shape(Layout layout, std::int64_t count, std::int64_t max_input, std::int64_t max_target,
                       std::int64_t sum_input, std::int64_t sum_target) noexcept {
  return layout == Layout::packed ? Shape{1, sum_input, sum_target} : Shape{count, max_input, max_target};
}

inline double checked_cost(double value, const char* what, const Shape& shape) {
  if (std::isnan(value) || value < 0)
    sluice::fail("partition: cost model ", what, " of shape (rows ", shape.rows, ", input ", shape.input, ", target ",
                 shape.target, ") must be >= 0, got ", value);
  return value;
}

// The first sample that does not fit the limit alone (over it, or a forbidden shape), or ordered.size().
template <MicroBatchCostModel Model>
std::size_t first_unfit(Span<const Sample> ordered, const Model& model, Layout layout, double memory_limit) {
  for (std::size_t e = 0; e < ordered.size(); ++e) {
    const Sample& sample = ordered[e];
    const Shape shape = run_shape(layout, 1, sample.input, sample.target, sample.input, sample.target);
    const double bytes = checked_cost(static_cast<double>(model.bytes(shape)), "bytes", shape);
    const double seconds = checked_cost(static_cast<double>(model.seconds(shape)), "seconds", shape);
    if (bytes > memory_limit || seconds == std::numeric_limits<double>::infinity()) return e;
  }
  return ordered.size();
}

// Times of every memory-feasible run, by end, as a band: time(e, k) = t(samples e−k..e) (k = 0 is the sample
// alone) for k < reach(e), row e stored contiguously. Extension stops at the first run over the memory limit
// (or forbidden), which is exact for cost models whose memory grows with the shape, so the table holds
// Σ reach(e) <= n·w cells. Rows are non-decreasing for monotone cost models; dip() bounds how far a time falls
// below an earlier one of its row (0 for those), which the tmax search's bounds allow for.
class RunTable {
public:
  template <MicroBatchCostModel Model>
  RunTable(Span<const Sample> ordered, const Model& model, Layout layout, double memory_limit) : n_(ordered.size()) {
    if (n_ > max_run_table_cells)
      sluice::fail("partition: ", n_, " samples exceed max_run_table_cells (", max_run_table_cells,
                   " run-table cells, at least one per sample)");
    offset_.assign(n_ + 1, 0);
    // Memory bounds a row (a time can only end it sooner), so the size is known, and refused, before
    // allocating: offset_[e + 1] holds row e's runs that fit, up to the first over the limit, with bytes that
    // the checks below reject, or forbidden (+inf bytes, and then +inf seconds, under an infinite limit).
    std::size_t cells = 0;
    std::size_t longest = 0;
    for (std::size_t e = 0; e < n_; ++e) {
      const std::size_t fit = extend(ordered, layout, e, [&](const Shape& shape, std::size_t) {
        constexpr double inf = std::numeric_limits<double>::infinity();
        const auto bytes = static_cast<double>(model.bytes(shape));
        return bytes >= 0 && bytes <= memory_limit &&
               !(bytes == inf && static_cast<double>(model.seconds(shape)) == inf);
      });
      offset_[e + 1] = fit;
      longest = std::max(longest, fit);
      cells += fit;
      if (cells > max_run_table_cells)
        sluice::fail("partition: ", n_, " samples with micro-batches of up to ", longest,
                     " samples (so far) need more than ", max_run_table_cells,
                     " run-table cells (max_run_table_cells); split the batch or lower memory_limit");
    }
    time_.reserve(cells);
    // The times, every cost checked in the order of the runs (bytes, then seconds), as the rows are extended.
    double dip = 0;
    for (std::size_t e = 0; e < n_; ++e) {
      const std::size_t fit = offset_[e + 1];
      double row_max = 0;
      extend(ordered, layout, e, [&](const Shape& shape, std::size_t k) {
        if (k == fit) {
          checked_cost(static_cast<double>(model.bytes(shape)), "bytes", shape);
          checked_cost(static_cast<double>(model.seconds(shape)), "seconds", shape);
          return false;
        }
        const double seconds = checked_cost(static_cast<double>(model.seconds(shape)), "seconds", shape);
        if (seconds == std::numeric_limits<double>::infinity()) return false;
        time_.push_back(seconds);
        dip = std::max(dip, row_max - seconds);
        row_max = std::max(row_max, seconds);
        return true;
      });
      offset_[e + 1] = time_.size();
    }
    // The rounded difference may fall short of the real one by half an ulp.
    dip_ = dip > 0 ? std::nextafter(dip, std::numeric_limits<double>::infinity()) : 0;
  }

  [[nodiscard]] std::size_t size() const noexcept { return n_; }
  [[nodiscard]] std::size_t cells() const noexcept { return time_.size(); }
  [[nodiscard]] std::size_t reach(std::size_t e) const noexcept { return offset_[e + 1] - offset_[e]; }
  [[nodiscard]] double time(std::size_t e, std::size_t k) const noexcept { return time_[offset_[e] + k]; }
  [[nodiscard]] const double* row(std::size_t e) const noexcept { return time_.data() + offset_[e]; }
  [[nodiscard]] double dip() const noexcept { return dip_; }

private:
  // Calls take(shape of samples e−k..e, k) for k = 0, 1, …, e while it returns true; the number of trues.
  template <class Take>
  static std::size_t extend(Span<const Sample> ordered, Layout layout, std::size_t e, Take take) {
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
      const auto count = static_cast<std::int64_t>(k + 1);
      if (!take(run_shape(layout, count, max_input, max_target, sum_input, sum_target), k)) break;
    }
    return k;
  }

  std::size_t n_;
  std::vector<std::size_t> offset_;
  std::vector<double> time_;
  double dip_ = 0;
};

// One DP pass: Σ t of the best partition with every run <= tmax (+inf if none), its slowest run, and `needed`,
// the least tmax under which all its runs are tried (a row is scanned up to its first time above tmax, so a
// run needs the largest time up to it in its row; = slowest for monotone cost models).
struct DpPass {
  double sum = 0;
  double slowest = 0;
  double needed = 0;
};

// Eq. 2 for one tmax, over buffers sized once; run_[e] is the length of the last run of the best prefix e.
class PartitionDp {
public:
  explicit PartitionDp(const RunTable& table) : table_(table), f_(table.size() + 1), run_(table.size() + 1) {}

  DpPass solve(double tmax) noexcept {
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
    if (f_[n] == inf) return {inf, inf, inf};
    DpPass pass{f_[n], 0, 0};
    for (std::size_t e = n; e > 0; e -= run_[e]) {
      const double* row = table_.row(e - 1);
      pass.slowest = std::max(pass.slowest, row[run_[e] - 1]);
      pass.needed = std::max(pass.needed, *std::max_element(row, row + run_[e]));
    }
    return pass;
  }

  [[nodiscard]] const std::vector<std::size_t>& runs() const noexcept { return run_; }

private:
  const RunTable& table_;
  std::vector<double> f_;
  std::vector<std::size_t> run_;
};

// The tmax values to try above `lo` and below `hi`, ascending: all distinct feasible run times when
// interval = 0, else a greedy cover keeping, for the smallest uncovered value v, the largest value <= v + interval.
// firsts[i] is the smallest run time above values[i − 1] (above lo for i = 0): the v of values[i]; left empty
// when interval = 0, where it is values[i].
struct TmaxCandidates {
  std::vector<double> values;
  std::vector<double> firsts;
  [[nodiscard]] double first_above_previous(std::size_t i) const noexcept {
    return firsts.empty() ? values[i] : firsts[i];
  }
};

inline TmaxCandidates tmax_candidates(const RunTable& table, double lo, double hi, double interval) {
  // The run times in (lo, hi), less most repeats: a time equal to the previous row's at the same length (a run
  // of samples like the previous run's) is skipped; sorting removes the rest.
  auto for_each_time = [&](auto visit) {
    for (std::size_t e = 0; e < table.size(); ++e) {
      const double* row = table.row(e);
      const double* previous = e == 0 ? row : table.row(e - 1);
      const std::size_t shared = e == 0 ? 0 : std::min(table.reach(e), table.reach(e - 1));
      for (std::size_t k = 0; k < table.reach(e); ++k)
        if (row[k] > lo && row[k] < hi && (k >= shared || row[k] != previous[k])) visit(row[k]);
    }
  };
  if (!(hi > lo)) return {};
  // A bucket sort, linear for spread-out times: the bucket grows with the value, so sorted buckets are in order.
  // About 8 cells a bucket (fewer times: the table's times outside (lo, hi) and repeats are left out).
  const std::size_t buckets = table.cells() / 8 + 1;
  const double scale = static_cast<double>(buckets) / (hi - lo);
  auto bucket = [&](double t) {
    const double x = (t - lo) * scale;
    return x < static_cast<double>(buckets) ? static_cast<std::size_t>(x) : buckets - 1;
  };
  std::vector<std::uint32_t> end(buckets + 1, 0);  // cells <= max_run_table_cells < 2^32
  for_each_time([&](double t) { ++end[bucket(t) + 1]; });
  for (std::size_t b = 1; b <= buckets; ++b) end[b] += end[b - 1];
  const std::size_t count = end[buckets];
  if (count == 0) return {};
  std::vector<double> values(count);
  for_each_time([&](double t) { values[end[bucket(t)]++] = t; });  // end[b] ends up as bucket b's end
  for (std::size_t b = 0; b < buckets; ++b)
    std::sort(values.begin() + (b == 0 ? 0 : end[b - 1]), values.begin() + end[b]);
  values.erase(std::unique(values.begin(), values.end()), values.end());
  TmaxCandidates result;
  if (interval > 0) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < values.size();) {
      std::size_t j = i;
      while (j + 1 < values.size() && values[j + 1] <= values[i] + interval) ++j;
      result.firsts.push_back(values[i]);
      values[kept++] = values[j];
      i = j + 1;
    }
    values.resize(kept);
  }
  result.values = std::move(values);
  return result;
}

// The outer search's answer without a DP pass per candidate. Trying the tmax values in order (∞, lo, then the
// candidates ascending), each kept if strictly better, until c1·c + F∞/|D| >= the best so far, ends on the
// first position of least objective among those tried. That position is found by branch and bound on facts
// that hold bit for bit in floating point (sums and products round monotonically):
//   - a pass at tmax with `needed` s returns the same partition for every tmax in [s, tmax] (the allowed runs
//     grow with tmax, the partition's runs are allowed from s on, and ties break the same way), so a pass
//     settles every candidate in [s, tmax], and the candidate at or above s comes first with that partition;
//   - Σ t is non-increasing in tmax, and a candidate whose partition is not its predecessor's has needed, so
//     slowest up to dip(), above that predecessor: in a gap below a probed candidate b, the objective of a new
//     partition is at least c1·(first time above the predecessor − dip) + f(b)/|D|.
// A gap whose bound cannot beat the best position found is dropped, others are probed at their middle time.
// Passes: at most one per candidate; 3 to ~150 on the batches measured in docs/microbatch.md.
class TmaxSearch {
public:
  TmaxSearch(const RunTable& table, PartitionDp& dp, double lo, double c1, double d, double interval)
      : table_(table), dp_(dp), lo_(lo), c1_(c1), d_(d) {
    const DpPass free = dp_.solve(std::numeric_limits<double>::infinity());
    sum_free_ = free.sum;
    infinity_ = {objective(free), 0};
    const DpPass at_lo = dp_.solve(lo_);
    lo_position_ = {objective(at_lo), 1};
    const Position first = better(lo_position_, infinity_) ? lo_position_ : infinity_;
    // A tmax at or above hi cannot beat the first: (c − 1)·tmax + f(tmax)/|D| >= (c − 1)·tmax + F∞/|D|.
    candidates_ = tmax_candidates(table_, lo_, (first.objective - sum_free_ / d_) / c1_, interval);
    infinity_origin_ = origin(free.needed);
  }

  // The tmax whose pass gives the answer: ∞, lo or a candidate.
  double winner() {
    Position answer = least_before(candidates_.values.size());
    // The answer is the least before the first candidate the ordered search would not try; a candidate r is
    // tried iff c1·c_r + F∞/|D| is below every objective before it.
    while (answer.order >= 2) {
      const double stop = c1_ * candidate(answer) + sum_free_ / d_;
      if (stop <= answer.objective) break;
      const Position earlier = least_before(answer.order - 2);
      if (earlier.objective > stop) break;
      answer = earlier;
    }
    if (answer.order == 0) return std::numeric_limits<double>::infinity();
    return answer.order == 1 ? lo_ : candidate(answer);
  }

private:
  // A place in the order of trial: 0 = ∞, 1 = lo, 2 + i = candidate i.
  struct Position {
    double objective;
    std::size_t order;
  };
  struct Probe {
    double sum;
    std::size_t origin;  // the first candidate with this partition (0 also when it is lo's)
    Position first;      // where the ordered search meets this partition first
  };
  struct Gap {
    double bound;
    std::size_t first;
    std::size_t last;
    double sum_above;  // Σ t at the nearest probe above, a lower bound on Σ t in the gap
  };

  static bool better(const Position& x, const Position& y) noexcept {
    return x.objective < y.objective || (x.objective == y.objective && x.order < y.order);
  }
  [[nodiscard]] double objective(const DpPass& pass) const noexcept { return c1_ * pass.slowest + pass.sum / d_; }
  [[nodiscard]] double candidate(const Position& position) const noexcept {
    return candidates_.values[position.order - 2];
  }
  [[nodiscard]] std::size_t origin(double needed) const noexcept {
    const auto& values = candidates_.values;
    return static_cast<std::size_t>(std::lower_bound(values.begin(), values.end(), needed) - values.begin());
  }

  // The least objective a partition first met at candidate `first` can have, below a probe with Σ t sum_above.
  [[nodiscard]] double bound(std::size_t first, double sum_above) const noexcept {
    const double above = candidates_.first_above_previous(first);
    const double slowest =
        table_.dip() == 0 ? above : std::nextafter(above - table_.dip(), -std::numeric_limits<double>::infinity());
    return c1_ * slowest + sum_above / d_;
  }

  const Probe& probe(std::size_t i) {
    const DpPass pass = dp_.solve(candidates_.values[i]);
    const bool lo_partition = pass.needed <= lo_;
    const std::size_t start = lo_partition ? 0 : origin(pass.needed);
    return probes_.emplace(i, Probe{pass.sum, start, {objective(pass), lo_partition ? 1 : start + 2}}).first->second;
  }

  // The first position of least objective among ∞, lo and the candidates below `end`.
  Position least_before(std::size_t end) {
    Position best = better(lo_position_, infinity_) ? lo_position_ : infinity_;
    for (const auto& [i, p] : probes_)
      if (p.origin < end && better(p.first, best)) best = p.first;
    auto later = [](const Gap& x, const Gap& y) {
      return x.bound > y.bound || (x.bound == y.bound && x.first > y.first);
    };
    std::priority_queue<Gap, std::vector<Gap>, decltype(later)> gaps(later);
    auto add_gap = [&](std::size_t first, std::size_t last, double sum_above) {
      gaps.push({bound(first, sum_above), first, last, sum_above});
    };
    // The unsettled candidates [from, settled) below `end`, with Σ t of the nearest probe above them.
    auto add_unsettled = [&](std::size_t from, std::size_t settled) {
      if (settled <= from || from >= end) return;
      const std::size_t last = std::min(settled, end) - 1;
      const auto above = probes_.upper_bound(last);
      add_gap(from, last, above == probes_.end() ? sum_free_ : above->second.sum);
    };
    // Settled candidates: [origin, i] of each probe i (disjoint or sharing an origin), [origin(∞), size) of ∞.
    std::size_t next = 0;
    for (const auto& [i, p] : probes_) {
      add_unsettled(next, p.origin);
      next = std::max(next, i + 1);
    }
    add_unsettled(next, infinity_origin_);
    while (!gaps.empty()) {
      const Gap gap = gaps.top();
      gaps.pop();
      if (gap.bound > best.objective || (gap.bound == best.objective && best.order < gap.first + 2)) continue;
      // Probed at the middle time (fewer passes than the middle index: times crowd at the low end).
      const auto& values = candidates_.values;
      const auto from = values.begin() + static_cast<std::ptrdiff_t>(gap.first);
      const auto to = values.begin() + static_cast<std::ptrdiff_t>(gap.last);
      const std::size_t middle = static_cast<std::size_t>(
          std::lower_bound(from, to, values[gap.first] + (values[gap.last] - values[gap.first]) / 2) - values.begin());
      const Probe& p = probe(middle);
      if (better(p.first, best)) best = p.first;
      if (p.origin > gap.first) add_gap(gap.first, p.origin - 1, p.sum);
      if (middle < gap.last) add_gap(middle + 1, gap.last, gap.sum_above);
    }
    return best;
  }

  const RunTable& table_;
  PartitionDp& dp_;
  double lo_;
  double c1_;
  double d_;
  double sum_free_ = 0;
  Position infinity_{};
  Position lo_position_{};
  TmaxCandidates candidates_;
  std::size_t infinity_origin_ = 0;
  std::map<std::size_t, Probe> probes_;
};

template <MicroBatchCostModel Model>
Partition build_partition(Span<const Sample> ordered, const Model& model, Layout layout,
                          const std::vector<std::size_t>& runs, const RunTable& table, std::size_t cost_model,
                          int stages, int replicas) {
  std::vector<std::size_t> ends;
  for (std::size_t e = ordered.size(); e > 0; e -= runs[e]) ends.push_back(e);
  std::reverse(ends.begin(), ends.end());
  Partition partition{layout, {}, 0, cost_model};
  partition.micro_batches.reserve(ends.size());
  std::size_t start = 0;
  for (const std::size_t end : ends) {
    ShapedMicroBatch micro_batch;
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
bool partition_with(Span<const Sample> ordered, const Model& model, std::size_t index, const PartitionOptions& options,
                    Partition& result) {
  if (first_unfit(ordered, model, options.layout, options.memory_limit) != ordered.size()) return false;
  const RunTable table(ordered, model, options.layout, options.memory_limit);
  PartitionDp dp(table);
  // Every sample fits alone, so each alone is a partition under every tmax >= the slowest: if their times sum to
  // a finite value, so does every partition the search compares; otherwise the cost model overflows.
  double singles = 0;
  double slowest = 0;
  for (std::size_t e = 0; e < table.size(); ++e) {
    singles += table.time(e, 0);
    slowest = std::max(slowest, table.time(e, 0));
  }
  if (!std::isfinite(singles))
    sluice::fail("partition: the times of cost model ", index, " overflow: ", ordered.size(), " samples sum to ",
                 singles, " s, the slowest alone takes ", slowest, " s");
  // With c = 1 the objective is Σ t / |D| and no tmax beats ∞.
  double tmax = std::numeric_limits<double>::infinity();
  if (options.stages > 1) {
    // The smallest feasible tmax: every sample alone fits, and a run costs at least each of its samples.
    tmax = TmaxSearch(table, dp, slowest, options.stages - 1, options.replicas, options.tmax_interval).winner();
  }
  dp.solve(tmax);
  result = build_partition(ordered, model, options.layout, dp.runs(), table, index, options.stages, options.replicas);
  return true;
}

}  // namespace sluice::microbatch::detail
