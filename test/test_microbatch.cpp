#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/span.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/microbatch_json.hpp"
#include "sluice/microbatch/balance.hpp"
#include "sluice/microbatch/baselines.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/microbatch/order.hpp"
#include "sluice/microbatch/partition.hpp"
#include "support.hpp"

using namespace sluice;
using namespace sluice::microbatch;

namespace {

// A cost model that returns a fixed value for every shape (NaN, negative) to test input checks.
struct ConstantCost {
  double time = 1;
  double memory = 1;
  [[nodiscard]] double seconds(const Shape&) const { return time; }
  [[nodiscard]] double bytes(const Shape&) const { return memory; }
};

std::vector<Sample> random_samples(Rng& rng, std::size_t n, bool encoder_decoder, std::int64_t longest) {
  std::vector<Sample> samples;
  for (std::size_t i = 0; i < n; ++i)
    samples.push_back({static_cast<std::int64_t>(i) * 3 + 1, rng.uniform_int(1, longest),
                       encoder_decoder ? rng.uniform_int(0, longest / 2) : 0});
  return samples;
}

QuadraticStageCost random_model(Rng& rng) {
  return {cost::QuadraticLatency(rng.uniform() * 1e-6, rng.uniform() * 1e-3, rng.uniform() * 0.05), 1.0};
}

// Every way to cut the ordered samples into consecutive runs (2^(n−1) patterns): the least objective
// (c − 1)·max t + Σ t / |D| over those whose runs all fit the memory limit; inf if none fits.
template <class Model>
double brute_force(Span<const Sample> ordered, const Model& model, const PartitionOptions& options) {
  const std::size_t n = ordered.size();
  double best = inf;
  for (std::uint64_t cuts = 0; cuts < (std::uint64_t{1} << (n - 1)); ++cuts) {
    double slowest = 0;
    double total = 0;
    bool fits = true;
    std::size_t start = 0;
    for (std::size_t end = 1; end <= n && fits; ++end) {
      if (end < n && !((cuts >> (end - 1)) & 1U)) continue;
      Shape shape{};
      std::int64_t sum_input = 0;
      std::int64_t sum_target = 0;
      for (std::size_t i = start; i < end; ++i) {
        shape.input = std::max(shape.input, ordered[i].input);
        shape.target = std::max(shape.target, ordered[i].target);
        sum_input += ordered[i].input;
        sum_target += ordered[i].target;
      }
      shape.rows = static_cast<std::int64_t>(end - start);
      if (options.layout == Layout::packed) shape = {1, sum_input, sum_target};
      const double t = model.seconds(shape);
      fits = model.bytes(shape) <= options.memory_limit && t < inf;
      slowest = std::max(slowest, t);
      total += t;
      start = end;
    }
    if (fits) best = std::min(best, (options.stages - 1) * slowest + total / options.replicas);
  }
  return best;
}

// The authors' thinning (dp_helper.cpp): sort the feasible run times, keep a value only if it is at least
// `interval` above the last kept one, and try those. True when one of them admits a partition.
bool authors_thinning_feasible(Span<const Sample> ordered, const QuadraticStageCost& model, double limit,
                               double interval) {
  std::vector<double> times;
  for (std::size_t s = 0; s < ordered.size(); ++s) {
    Shape shape{0, 0, 0};
    for (std::size_t e = s; e < ordered.size(); ++e) {
      shape = {static_cast<std::int64_t>(e - s + 1), std::max(shape.input, ordered[e].input),
               std::max(shape.target, ordered[e].target)};
      if (model.bytes(shape) > limit) break;
      times.push_back(model.seconds(shape));
    }
  }
  std::ranges::sort(times);
  std::vector<double> kept;
  for (const double t : times)
    if (kept.empty() || t >= kept.back() + interval) kept.push_back(t);
  // Feasible for tmax iff every sample alone fits within it (runs of one are always available).
  double needed = 0;
  for (const Sample& sample : ordered) needed = std::max(needed, model.seconds({1, sample.input, sample.target}));
  return std::ranges::any_of(kept, [&](double t) { return t >= needed; });
}

// The dense DP this library used before the band, kept verbatim as the oracle: an n×n run table, and one DP
// pass per tmax candidate in ascending order until the bound stops the search. The banded DP must return
// exactly its partition, objective bits included.
namespace dense {

class RunTable {
public:
  template <class Model>
  RunTable(Span<const Sample> ordered, const Model& model, Layout layout, double memory_limit)
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
        const Shape shape = microbatch::detail::run_shape(layout, static_cast<std::int64_t>(k + 1), max_input,
                                                          max_target, sum_input, sum_target);
        const double bytes = microbatch::detail::checked_cost(static_cast<double>(model.bytes(shape)), "bytes", shape);
        const double seconds =
            microbatch::detail::checked_cost(static_cast<double>(model.seconds(shape)), "seconds", shape);
        if (bytes > memory_limit || seconds == inf) break;
        time_[e * n_ + k] = seconds;
      }
      reach_[e] = k;
    }
  }

  [[nodiscard]] std::size_t size() const noexcept { return n_; }
  [[nodiscard]] std::size_t reach(std::size_t e) const noexcept { return reach_[e]; }
  [[nodiscard]] double time(std::size_t e, std::size_t k) const noexcept { return time_[e * n_ + k]; }
  [[nodiscard]] const double* row(std::size_t e) const noexcept { return time_.data() + e * n_; }
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

class PartitionDp {
public:
  explicit PartitionDp(const RunTable& table) : table_(table), f_(table.size() + 1), run_(table.size() + 1) {}

  std::pair<double, double> solve(double tmax) noexcept {
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

std::vector<double> tmax_candidates(const RunTable& table, double lo, double hi, double interval) {
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

template <class Model>
Partition build_partition(Span<const Sample> ordered, const Model& model, Layout layout,
                          const std::vector<std::size_t>& runs, const RunTable& table, int stages, int replicas) {
  std::vector<std::size_t> ends;
  for (std::size_t e = ordered.size(); e > 0; e -= runs[e]) ends.push_back(e);
  std::ranges::reverse(ends);
  Partition partition{layout, {}, 0, 0};
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
    micro_batch.shape = microbatch::detail::run_shape(layout, count, max_input, max_target, sum_input, sum_target);
    micro_batch.seconds = table.time(end - 1, end - start - 1);
    micro_batch.bytes = static_cast<double>(model.bytes(micro_batch.shape));
    partition.micro_batches.push_back(std::move(micro_batch));
    start = end;
  }
  partition.objective = partition_objective(partition.micro_batches, stages, replicas);
  return partition;
}

// One cost model; raises sluice::infeasible when a sample does not fit alone.
template <class Model>
Partition partition(Span<const Sample> ordered, const Model& model, const PartitionOptions& options) {
  const RunTable table(ordered, model, options.layout, options.memory_limit);
  if (table.first_unfit() != table.size()) throw sluice::infeasible("dense: a sample does not fit alone");
  const double c1 = options.stages - 1;
  const double d = options.replicas;
  PartitionDp dp(table);
  const auto [sum_free, max_free] = dp.solve(inf);
  std::vector<std::size_t> best_runs = dp.runs();
  double best = c1 * max_free + sum_free / d;
  if (options.stages > 1) {
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
    const double hi = (best - sum_free / d) / c1;
    for (const double tmax : tmax_candidates(table, lo, hi, options.tmax_interval)) {
      if (c1 * tmax + sum_free / d >= best) break;
      consider(tmax);
    }
  }
  return build_partition(ordered, model, options.layout, best_runs, table, options.stages, options.replicas);
}

}  // namespace dense

// A profiled-grid stage cost (rows × length) with random values: monotone (running sums of positive steps) or
// noisy (rows of a run then sometimes get faster as it grows, which the tmax search's bounds must allow for).
GridStageCost<2> random_grid(Rng& rng, bool monotone) {
  const std::vector<double> rows = {1, 2, 4, 8, 16, 32, 64};
  const std::vector<double> lengths = {16, 64, 256, 1024, 4096};
  std::vector<double> time(rows.size() * lengths.size());
  std::vector<double> memory(time.size());
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t l = 0; l < lengths.size(); ++l) {
      const std::size_t i = r * lengths.size() + l;
      const double base = rows[r] * lengths[l] * 1e-5 + 0.01;
      time[i] = monotone ? base * (1 + 0.1 * rng.uniform()) : base * (0.5 + rng.uniform());
      memory[i] = rows[r] * lengths[l];
    }
  // Monotone: each value at least its lower neighbours in both axes.
  if (monotone)
    for (std::size_t r = 0; r < rows.size(); ++r)
      for (std::size_t l = 0; l < lengths.size(); ++l) {
        const std::size_t i = r * lengths.size() + l;
        if (r > 0) time[i] = std::max(time[i], time[i - lengths.size()]);
        if (l > 0) time[i] = std::max(time[i], time[i - 1]);
      }
  return GridStageCost<2>(cost::GridCostModel<2>{cost::RectilinearGrid<2>({rows, lengths}, time),
                                                 cost::RectilinearGrid<2>({rows, lengths}, memory)});
}
}  // namespace

TEST_CASE("orderings: length, (input, target) and a 2-opt-optimal open path") {
  const std::vector<Sample> samples = {{0, 5, 1}, {1, 9, 0}, {2, 5, 3}, {3, 2, 7}, {4, 9, 0}};
  const auto by_length = order_samples(samples, Ordering::length);
  std::vector<std::int64_t> ids;
  for (const Sample& s : by_length) ids.push_back(s.id);
  CHECK(ids == std::vector<std::int64_t>{1, 3, 4, 2, 0});
  ids.clear();
  for (const Sample& s : order_samples(samples, Ordering::input_target)) ids.push_back(s.id);
  CHECK(ids == std::vector<std::int64_t>{1, 4, 2, 0, 3});

  Rng rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const auto points = random_samples(rng, 2 + static_cast<std::size_t>(rng.below(60)), true, 500);
    const auto path = order_samples(points, Ordering::path);
    REQUIRE(path.size() == points.size());
    CHECK(std::ranges::is_permutation(path, points));
    CHECK(order_samples(points, Ordering::path) == path);
    // No segment reversal (inner, suffix or prefix) shortens the path any more.
    const std::int64_t length = path_length(path);
    for (std::size_t i = 0; i < path.size(); ++i)
      for (std::size_t j = i + 1; j < path.size(); ++j) {
        auto moved = path;
        std::reverse(moved.begin() + static_cast<std::ptrdiff_t>(i),
                     moved.begin() + static_cast<std::ptrdiff_t>(j) + 1);
        CHECK(path_length(moved) >= length);
      }
  }
}

TEST_CASE("partition DP equals brute force over all cuts of <= 10 ordered samples") {
  Rng rng(11);
  int instances = 0;
  int infeasible_cases = 0;
  int on_grids = 0;
  for (int trial = 0; trial < 1200; ++trial) {
    const std::size_t n = 1 + static_cast<std::size_t>(rng.below(10));
    const bool encoder_decoder = rng.below(3) == 0;
    const auto ordering =
        encoder_decoder ? (rng.below(2) == 0 ? Ordering::path : Ordering::input_target) : Ordering::length;
    const bool grid = rng.below(3) == 0;
    const auto ordered = order_samples(random_samples(rng, n, encoder_decoder, grid ? 1500 : 2000), ordering);
    PartitionOptions options;
    options.stages = 1 + static_cast<int>(rng.below(6));
    options.replicas = 1 + static_cast<int>(rng.below(4));
    options.layout = rng.below(3) == 0 ? Layout::packed : Layout::padded;
    options.memory_limit = rng.below(4) == 0 ? inf : 500.0 + rng.uniform() * 8000.0;
    options.tmax_interval = 0;
    const double thinning = rng.uniform() * 0.2;
    auto check_model = [&](const auto& model) {
      const double expected = brute_force(Span<const Sample>(ordered), model, options);
      const PartitionContext context{options.stages, options.replicas, options.memory_limit};
      if (expected == inf) {
        CHECK_THROWS_AS(partition(Span<const Sample>(ordered), model, options), sluice::infeasible);
        ++infeasible_cases;
        return;
      }
      const Partition exact = partition(Span<const Sample>(ordered), model, options);
      validate(exact, Span<const Sample>(ordered), model, context);
      CHECK(close(exact.objective, expected));
      CHECK(exact == dense::partition(Span<const Sample>(ordered), model, options));
      // Thinned: never infeasible, and within (c − 1)·interval of the exact objective.
      PartitionOptions thinned_options = options;
      thinned_options.tmax_interval = thinning;
      const Partition thinned = partition(Span<const Sample>(ordered), model, thinned_options);
      validate(thinned, Span<const Sample>(ordered), model, context);
      CHECK(thinned.objective >= exact.objective * (1 - 1e-12));
      CHECK(thinned.objective <= exact.objective + (options.stages - 1) * thinning + 1e-12);
      CHECK(thinned == dense::partition(Span<const Sample>(ordered), model, thinned_options));
      ++instances;
    };
    if (grid) {
      check_model(random_grid(rng, true));
      ++on_grids;
    } else {
      check_model(random_model(rng));
    }
  }
  MESSAGE("DP = brute force on ", instances, " feasible instances (", on_grids, " on profiled grids); ",
          infeasible_cases, " infeasible ones raised");
  CHECK(instances > 600);
}

TEST_CASE("banded DP = the dense DP it replaced, bit for bit, on seeded random batches") {
#ifdef NDEBUG
  const int trials = 1500;
#else
  const int trials = 250;
#endif
  Rng rng(29);
  int compared = 0;
  int infeasible_cases = 0;
  int noisy = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const std::size_t n = 1 + static_cast<std::size_t>(rng.below(rng.below(4) == 0 ? 400 : 120));
    // 0-1 quadratic, 2 the 7B-like one, 3 grid, 4 noisy grid, 5 one time for every run (all candidates tie)
    const int kind = static_cast<int>(rng.below(6));
    const bool encoder_decoder = kind < 2 && rng.below(3) == 0;
    const std::int64_t longest = kind >= 3 ? 1500 : 1 + static_cast<std::int64_t>(rng.below(4) == 0 ? 8192 : 600);
    const auto ordering =
        encoder_decoder ? (rng.below(2) == 0 ? Ordering::path : Ordering::input_target) : Ordering::length;
    auto samples = random_samples(rng, n, encoder_decoder, longest);
    if (rng.below(4) == 0)
      for (Sample& sample : samples) sample.input = 1 + sample.input % 4;  // many equal run times
    const auto ordered = rng.below(5) == 0 ? samples : order_samples(samples, ordering);
    PartitionOptions options;
    options.stages = 1 + static_cast<int>(rng.below(8));
    options.replicas = 1 + static_cast<int>(rng.below(4));
    options.layout = rng.below(3) == 0 ? Layout::packed : Layout::padded;
    const double per_run = kind >= 3 ? 1024.0 : static_cast<double>(longest);
    options.memory_limit = rng.below(4) == 0 ? inf : per_run * (0.5 + rng.uniform() * 20.0);
    const int interval = static_cast<int>(rng.below(4));
    options.tmax_interval = interval == 0   ? 0.0
                            : interval == 1 ? 5e-6
                            : interval == 2 ? rng.uniform() * 0.05
                                            : rng.uniform() * 2;
    auto compare = [&](const auto& model) {
      Partition banded;
      Partition oracle;
      bool banded_fits = true;
      bool oracle_fits = true;
      try {
        banded = partition(Span<const Sample>(ordered), model, options);
      } catch (const sluice::infeasible&) {
        banded_fits = false;
      }
      try {
        oracle = dense::partition(Span<const Sample>(ordered), model, options);
      } catch (const sluice::infeasible&) {
        oracle_fits = false;
      }
      REQUIRE(banded_fits == oracle_fits);
      if (!banded_fits) {
        ++infeasible_cases;
        return;
      }
      CHECK(banded == oracle);
      CHECK(std::bit_cast<std::uint64_t>(banded.objective) == std::bit_cast<std::uint64_t>(oracle.objective));
      ++compared;
    };
    if (kind <= 1) {
      compare(random_model(rng));
    } else if (kind == 2) {
      compare(QuadraticStageCost(cost::QuadraticLatency(9.555e-10, 4.552e-05, 0.01427), 1.0));
    } else if (kind == 5) {
      compare(ConstantCost{0.01 + rng.uniform(), 1});
    } else {
      noisy += kind == 4 ? 1 : 0;
      compare(random_grid(rng, kind == 3));
    }
  }
  MESSAGE("banded = dense on ", compared, " batches (", noisy, " with noisy grid times); ", infeasible_cases,
          " infeasible on both");
  CHECK(compared > trials / 2);
}

TEST_CASE("the run table is a band: large batches of short samples fit, past max_run_table_cells refused") {
  // 30,000 samples of 1-8 tokens, at most 64 tokens per micro-batch: the band is at most 64 runs wide, where the
  // dense table had 30,000² cells (7.2 GB).
  Rng rng(31);
  std::vector<Sample> samples;
  for (std::int64_t i = 0; i < 30'000; ++i) samples.push_back({i, rng.uniform_int(1, 8), 0});
  const QuadraticStageCost model(cost::QuadraticLatency(9.555e-10, 4.552e-05, 0.01427), 1.0);
  const auto ordered = order_samples(samples, Ordering::length);
  const PartitionOptions options{.stages = 4, .replicas = 2, .memory_limit = 64};
  const Partition result = partition(Span<const Sample>(ordered), model, options);
  validate(result, Span<const Sample>(ordered), model, PartitionContext{4, 2, 64});
  CHECK(std::ranges::all_of(result.micro_batches,
                            [](const ShapedMicroBatch& mb) { return mb.shape.rows * mb.shape.input <= 64; }));
  MESSAGE("30,000 samples of 1-8 tokens: ", result.micro_batches.size(), " micro-batches, objective ",
          result.objective);
  // A profiled grid forbids more than 4 rows: without a memory limit the band is still 4 wide.
  cost::RectilinearGrid<2> time({std::vector<double>{1, 4}, std::vector<double>{32, 128}}, {1, 2, 4, 8});
  cost::RectilinearGrid<2> memory({std::vector<double>{1, 4}, std::vector<double>{32, 128}}, {1, 4, 4, 16});
  const GridStageCost<2> grid(cost::GridCostModel<2>{time, memory});
  std::vector<Sample> gridded(samples.begin(), samples.begin() + 20'000);
  const Partition on_grid = partition(Span<const Sample>(gridded), grid, PartitionOptions{.stages = 4});
  validate(on_grid, Span<const Sample>(gridded), grid, PartitionContext{4, 1, inf});
  // Without a memory limit every prefix is a feasible run: 9,000 samples need 9,000 · 9,001 / 2 > 2^25 cells.
  std::vector<Sample> unlimited(samples.begin(), samples.begin() + 9'000);
  try {
    (void)partition(Span<const Sample>(unlimited), model, PartitionOptions{.stages = 4});
    FAIL("no exception for 9,000 samples without a memory limit");
  } catch (const sluice::invalid_input& error) {
    CHECK_MESSAGE(std::string(error.what()).find("max_run_table_cells") != std::string::npos, error.what());
  }
}

TEST_CASE("thinned tmax vs exact on random mini-batches: within (c - 1) * interval") {
#ifdef NDEBUG
  const int trials = 60;
#else
  const int trials = 12;
#endif
  Rng rng(5);
  double worst_gap = 0;
  double worst_bound_use = 0;
  int equal = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const std::size_t n = 20 + static_cast<std::size_t>(rng.below(40));
    const auto ordered = order_samples(random_samples(rng, n, false, 8192), Ordering::length);
    const QuadraticStageCost model(cost::QuadraticLatency(9.555e-10, 4.552e-05, 0.01427), 1.0);
    PartitionOptions options;
    options.stages = 2 + static_cast<int>(rng.below(7));
    options.replicas = 1 + static_cast<int>(rng.below(4));
    options.memory_limit = 16384.0 + rng.uniform() * 60000.0;
    options.tmax_interval = 0;
    const Partition exact = partition(Span<const Sample>(ordered), model, options);
    const PartitionContext context{options.stages, options.replicas, options.memory_limit};
    validate(exact, Span<const Sample>(ordered), model, context);
    for (const double interval : {5e-6, 1e-3, 2e-2}) {
      options.tmax_interval = interval;
      const Partition thinned = partition(Span<const Sample>(ordered), model, options);
      validate(thinned, Span<const Sample>(ordered), model, context);
      const double gap = thinned.objective - exact.objective;
      const double bound = (options.stages - 1) * interval;
      CHECK(gap >= -1e-12);
      CHECK(gap <= bound + 1e-12);
      worst_gap = std::max(worst_gap, gap);
      worst_bound_use = std::max(worst_bound_use, gap / bound);
      equal += gap <= 1e-12 ? 1 : 0;
    }
  }
  MESSAGE("thinned = exact in ", equal, " of ", 3 * trials, " runs; worst gap ", worst_gap, " s = ", worst_bound_use,
          " of the bound (c - 1) * interval");
}

TEST_CASE("thinning never loses feasibility (the authors' thinning does)") {
  Rng rng(3);
  int authors_lost = 0;
  const int trials = 200;
  for (int trial = 0; trial < trials; ++trial) {
    const auto ordered =
        order_samples(random_samples(rng, 2 + static_cast<std::size_t>(rng.below(30)), false, 4096), Ordering::length);
    const QuadraticStageCost model = random_model(rng);
    PartitionOptions options;
    options.stages = 4;
    options.replicas = 4;
    options.memory_limit = 4096.0 + rng.uniform() * 20000.0;
    // An interval as coarse as the largest run times: the authors' thinning keeps only the smallest.
    options.tmax_interval = 0.05 + rng.uniform() * 10.0;
    const Partition thinned = partition(Span<const Sample>(ordered), model, options);
    validate(thinned, Span<const Sample>(ordered), model,
             PartitionContext{options.stages, options.replicas, options.memory_limit});
    if (!authors_thinning_feasible(ordered, model, options.memory_limit, options.tmax_interval)) ++authors_lost;
  }
  MESSAGE("the authors' thinning reports ", authors_lost, " of ", trials, " feasible batches infeasible; sluice none");
  CHECK(authors_lost > 0);
}

TEST_CASE("recomputation escalation and infeasibility") {
  const std::vector<Sample> samples = {{0, 100, 0}, {1, 50, 0}, {2, 10, 0}};
  // Memory 1 byte per token without recomputation, 1/4 with: a limit of 60 needs the second model.
  const std::vector<QuadraticStageCost> models = {QuadraticStageCost({0, 1e-3, 0.01}, 1.0),
                                                  QuadraticStageCost({0, 1.3e-3, 0.01}, 0.25)};
  PartitionOptions options;
  options.stages = 2;
  options.memory_limit = 60;
  const auto ordered = order_samples(samples, Ordering::length);
  const Partition result = partition(Span<const Sample>(ordered), Span<const QuadraticStageCost>(models), options);
  CHECK(result.cost_model == 1);
  validate(result, Span<const Sample>(ordered), Span<const QuadraticStageCost>(models), PartitionContext{2, 1, 60});
  options.memory_limit = 20;  // sample 0 needs 25 bytes alone even with recomputation
  CHECK_THROWS_AS(partition(Span<const Sample>(ordered), Span<const QuadraticStageCost>(models), options),
                  sluice::infeasible);
  // A grid stage cost forbids shapes beyond its largest point.
  cost::RectilinearGrid<2> time({std::vector<double>{1, 4}, std::vector<double>{32, 128}}, {1, 2, 4, 8});
  cost::RectilinearGrid<2> memory({std::vector<double>{1, 4}, std::vector<double>{32, 128}}, {1, 4, 4, 16});
  const GridStageCost<2> grid(cost::GridCostModel<2>{time, memory});
  CHECK(grid.seconds({5, 32, 0}) == inf);
  CHECK(grid.seconds({1, 16, 0}) == 1);
  const std::vector<Sample> short_ones = {{0, 100, 0}, {1, 90, 0}, {2, 80, 0}, {3, 70, 0}, {4, 60, 0}};
  const Partition on_grid = partition(Span<const Sample>(short_ones), grid, PartitionOptions{.stages = 2});
  validate(on_grid, Span<const Sample>(short_ones), grid, PartitionContext{2, 1, inf});
  for (const ShapedMicroBatch& mb : on_grid.micro_batches) CHECK(mb.shape.rows <= 4);
  const std::vector<Sample> too_long = {{0, 200, 0}};
  CHECK_THROWS_AS(partition(Span<const Sample>(too_long), grid, PartitionOptions{}), sluice::infeasible);
}

TEST_CASE("Karmarkar-Karp and LPT vs brute force on <= 10 items") {
  Rng rng(17);
#ifdef NDEBUG
  const int trials = 300;
#else
  const int trials = 80;
#endif
  int kk_optimal = 0;
  int lpt_optimal = 0;
  int kk_better = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const std::size_t m = 1 + static_cast<std::size_t>(rng.below(10));
    const int d = 1 + static_cast<int>(rng.below(4));
    std::vector<double> times(m);
    for (double& t : times) t = 0.01 + rng.uniform();
    // Brute force with symmetry breaking: item i goes to one of the bins used so far or the next new one.
    double optimum = inf;
    std::vector<double> load(static_cast<std::size_t>(d), 0.0);
    auto search = [&](auto&& self, std::size_t i, int used) -> void {
      if (i == m) {
        optimum = std::min(optimum, *std::ranges::max_element(load));
        return;
      }
      for (int b = 0; b < std::min(d, used + 1); ++b) {
        load[static_cast<std::size_t>(b)] += times[i];
        if (load[static_cast<std::size_t>(b)] < optimum) self(self, i + 1, std::max(used, b + 1));
        load[static_cast<std::size_t>(b)] -= times[i];
      }
    };
    search(search, 0, 0);
    const ReplicaAssignment kk = balance_kk(times, d);
    const ReplicaAssignment lpt = balance_lpt(times, d);
    validate(kk, times, d);
    validate(lpt, times, d);
    const double ratio = 4.0 / 3.0 - 1.0 / (3.0 * d);
    CHECK(kk.max_load >= optimum * (1 - 1e-12));
    CHECK(kk.max_load <= ratio * optimum * (1 + 1e-12));
    CHECK(lpt.max_load <= ratio * optimum * (1 + 1e-12));
    if (m <= static_cast<std::size_t>(d) || d == 1) CHECK(close(kk.max_load, optimum));
    kk_optimal += close(kk.max_load, optimum) ? 1 : 0;
    lpt_optimal += close(lpt.max_load, optimum) ? 1 : 0;
    kk_better += kk.max_load < lpt.max_load * (1 - 1e-12) ? 1 : 0;
  }
  MESSAGE("KK optimal on ", kk_optimal, ", LPT on ", lpt_optimal, " of ", trials, "; KK strictly better than LPT on ",
          kk_better);
  // The classic case where differencing beats LPT: {8, 7, 6, 5, 4} in two bins: LPT 17, KK 16, OPT 15.
  const std::vector<double> classic = {8, 7, 6, 5, 4};
  CHECK(balance_lpt(classic, 2).max_load == 17);
  CHECK(balance_kk(classic, 2).max_load == 16);
}

TEST_CASE("baselines: token-based and fixed-length packing, and the DP is never worse than token-based") {
  Rng rng(23);
  const QuadraticStageCost model(cost::QuadraticLatency(9.555e-10, 4.552e-05, 0.01427), 1.0);
  for (int trial = 0; trial < 40; ++trial) {
    const auto samples = random_samples(rng, 10 + static_cast<std::size_t>(rng.below(40)), false, 8192);
    const auto ordered = order_samples(samples, Ordering::length);
    const PartitionContext context{4, 2, inf};
    const std::int64_t budget = 8192 * (1 + static_cast<std::int64_t>(rng.below(4)));
    const Partition tokens = token_based(Span<const Sample>(ordered), model, budget, context);
    validate(tokens, Span<const Sample>(ordered), model, context);
    for (const ShapedMicroBatch& mb : tokens.micro_batches)
      CHECK((mb.shape.rows == 1 || mb.shape.rows * (mb.shape.input + mb.shape.target) <= budget));
    const Partition packed = fixed_length_packing(Span<const Sample>(samples), model, FixedRows{8192, 0, 2}, context);
    validate(packed, Span<const Sample>(samples), model, context);
    PartitionOptions options{
        .stages = 4, .replicas = 2, .memory_limit = inf, .layout = Layout::padded, .tmax_interval = 0};
    const Partition dp = partition(Span<const Sample>(ordered), model, options);
    CHECK(dp.objective <= tokens.objective * (1 + 1e-12));
  }
  // Out of memory: the baselines raise infeasible rather than return a plan that cannot run.
  const std::vector<Sample> two = {{0, 100, 0}, {1, 100, 0}};
  CHECK_THROWS_AS(token_based(Span<const Sample>(two), model, 1000, PartitionContext{1, 1, 150}), sluice::infeasible);
  CHECK_THROWS_AS(
      fixed_length_packing(Span<const Sample>(two), model, FixedRows{200, 0, 1}, PartitionContext{1, 1, 150}),
      sluice::infeasible);
}

TEST_CASE("validators reject broken results") {
  const std::vector<Sample> samples = {{0, 100, 0}, {1, 80, 0}, {2, 60, 0}, {3, 40, 0}, {4, 20, 0}};
  const QuadraticStageCost model({1e-6, 1e-3, 0.05}, 1.0);
  const PartitionContext context{3, 2, 1000};
  const Partition good =
      partition(Span<const Sample>(samples), model, PartitionOptions{.stages = 3, .replicas = 2, .memory_limit = 1000});
  REQUIRE(good.micro_batches.size() >= 2);
  validate(good, Span<const Sample>(samples), model, context);
  auto rejects = [&](Partition broken) {
    CHECK_THROWS_AS(validate(broken, Span<const Sample>(samples), model, context), sluice::invalid_plan);
  };
  Partition p = good;
  p.micro_batches.clear();
  rejects(p);
  p = good;
  p.micro_batches[0].sample_ids.pop_back();
  rejects(p);  // a sample missing and a row count off
  p = good;
  p.micro_batches[0].sample_ids.back() = 99;
  rejects(p);  // unknown sample
  p = good;
  p.micro_batches[1].sample_ids[0] = p.micro_batches[0].sample_ids[0];
  rejects(p);  // duplicate
  p = good;
  p.micro_batches[0].seconds *= 1.01;
  rejects(p);
  p = good;
  p.micro_batches[0].bytes += 1;
  rejects(p);
  p = good;
  p.objective *= 0.99;
  rejects(p);
  p = good;
  p.micro_batches[0].shape.input += 8;
  rejects(p);  // padded shape is not the longest sample
  p = good;
  p.layout = Layout::packed;
  rejects(p);
  p = good;
  p.micro_batches[0].row_sizes.assign(p.micro_batches[0].row_sizes.size(), 2);
  rejects(p);
  CHECK_THROWS_AS(validate(good, Span<const Sample>(samples), model, PartitionContext{3, 2, 99}),
                  sluice::invalid_plan);  // over a tighter memory limit
  const std::vector<QuadraticStageCost> one = {model};
  p = good;
  p.cost_model = 1;
  CHECK_THROWS_AS(validate(p, Span<const Sample>(samples), Span<const QuadraticStageCost>(one), context),
                  sluice::invalid_plan);

  const std::vector<double> times = {3, 2, 2, 1};
  const ReplicaAssignment kk = balance_kk(times, 2);
  validate(kk, times, 2);
  auto rejects_assignment = [&](ReplicaAssignment broken) {
    CHECK_THROWS_AS(validate(broken, times, 2), sluice::invalid_plan);
  };
  ReplicaAssignment a = kk;
  a.replicas.pop_back();
  rejects_assignment(a);
  a = kk;
  a.replicas[0].push_back(a.replicas[1].front());
  rejects_assignment(a);
  a = kk;
  a.replicas[1].clear();
  a.loads[1] = 0;
  rejects_assignment(a);
  a = kk;
  a.loads[0] += 1;
  rejects_assignment(a);
  a = kk;
  a.max_load += 1;
  rejects_assignment(a);
  a = kk;
  std::ranges::reverse(a.replicas[0]);
  if (a.replicas[0].size() > 1) rejects_assignment(a);
  a = kk;
  a.replicas[0][0] = 9;
  rejects_assignment(a);
}

TEST_CASE("bad input raises invalid_input naming the field") {
  const QuadraticStageCost model({1e-6, 1e-3, 0.05}, 1.0);
  const std::vector<Sample> good = {{0, 10, 0}, {1, 20, 0}};
  auto raises = [](auto&& call, const char* field) {
    try {
      call();
      FAIL("no exception for ", field);
    } catch (const sluice::invalid_input& error) {
      CHECK_MESSAGE(std::string(error.what()).find(field) != std::string::npos, error.what());
    }
  };
  const std::vector<Sample> empty;
  raises([&] { (void)partition(Span<const Sample>(empty), model, PartitionOptions{}); }, "no samples");
  const std::vector<Sample> zero = {{0, 0, 0}};
  raises([&] { (void)partition(Span<const Sample>(zero), model, PartitionOptions{}); }, "input length");
  const std::vector<Sample> negative = {{0, -5, 0}};
  raises([&] { (void)order_samples(negative, Ordering::length); }, "input length");
  const std::vector<Sample> negative_target = {{0, 5, -1}};
  raises([&] { (void)order_samples(negative_target, Ordering::path); }, "target length");
  const std::vector<Sample> twice = {{0, 5, 0}, {0, 6, 0}};
  raises([&] { (void)partition(Span<const Sample>(twice), model, PartitionOptions{}); }, "appears twice");
  const std::vector<Sample> bad_id = {{-1, 5, 0}};
  raises([&] { (void)partition(Span<const Sample>(bad_id), model, PartitionOptions{}); }, "sample id");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  raises([&] { (void)partition(Span<const Sample>(good), ConstantCost{nan, 1}, PartitionOptions{}); }, "seconds");
  raises([&] { (void)partition(Span<const Sample>(good), ConstantCost{1, nan}, PartitionOptions{}); }, "bytes");
  raises([&] { (void)partition(Span<const Sample>(good), ConstantCost{-1, 1}, PartitionOptions{}); }, "seconds");
  raises([&] { (void)partition(Span<const Sample>(good), model, PartitionOptions{.stages = 0}); }, "stages");
  raises([&] { (void)partition(Span<const Sample>(good), model, PartitionOptions{.replicas = 0}); }, "replicas");
  raises([&] { (void)partition(Span<const Sample>(good), model, PartitionOptions{.memory_limit = 0}); },
         "memory_limit");
  raises([&] { (void)partition(Span<const Sample>(good), model, PartitionOptions{.memory_limit = nan}); },
         "memory_limit");
  raises([&] { (void)partition(Span<const Sample>(good), model, PartitionOptions{.tmax_interval = -1}); },
         "tmax_interval");
  raises([&] { (void)partition(Span<const Sample>(good), model, PartitionOptions{.tmax_interval = nan}); },
         "tmax_interval");
  raises([&] { (void)partition(Span<const Sample>(good), model, PartitionOptions{.layout = Layout::fixed_rows}); },
         "layout");
  const std::vector<QuadraticStageCost> none;
  raises([&] { (void)partition(Span<const Sample>(good), Span<const QuadraticStageCost>(none), PartitionOptions{}); },
         "no cost models");
  // A memory limit below any single sample is a well-formed problem without a solution.
  CHECK_THROWS_AS(partition(Span<const Sample>(good), model, PartitionOptions{.memory_limit = 5}), sluice::infeasible);

  const std::vector<double> times = {1, 2};
  const std::vector<double> nan_times = {1, nan};
  const std::vector<double> no_times;
  raises([&] { (void)balance_kk(times, 0); }, "replicas");
  raises([&] { (void)balance_lpt(times, 0); }, "replicas");
  raises([&] { (void)balance_kk(nan_times, 2); }, "time of micro-batch 1");
  raises([&] { (void)balance_lpt(no_times, 2); }, "no micro-batch times");
  const PartitionContext context{1, 1, inf};
  raises([&] { (void)token_based(Span<const Sample>(good), model, 0, context); }, "tokens_per_micro_batch");
  raises([&] { (void)token_based(Span<const Sample>(good), model, 10, PartitionContext{0, 1, inf}); }, "stages");
  raises(
      [&] {
        (void)fixed_length_packing(Span<const Sample>(good), model, FixedRows{15, 0, 1}, context);
      },
      "longer than a row");
  raises(
      [&] {
        (void)fixed_length_packing(Span<const Sample>(good), model, FixedRows{64, 0, 0}, context);
      },
      "rows per micro-batch");
  raises([&] { (void)QuadraticStageCost({1, 1, 1}, 0); }, "bytes_per_token");
  raises([&] { (void)layout_from("rows"); }, "layout");
}

TEST_CASE("JSON round trip of partitions and replica assignments; the bundled 7B stage cost") {
  const cost::Profile profile = io::read_document<cost::Profile>(io::resolve_data_file("llama2-7b", "profiles"));
  const StageCostSetup setup = stage_cost(profile.at(Scheme(1, 4)));
  CHECK(setup.memory_limit > 0);
  Rng rng(1);
  const std::vector<Sample> samples = random_samples(rng, 40, false, 8192);
  const auto ordered = order_samples(samples, Ordering::length);
  const PartitionOptions options{.stages = 4, .replicas = 4, .memory_limit = setup.memory_limit};
  const Partition result = partition(Span<const Sample>(ordered), setup.model, options);
  validate(result, Span<const Sample>(samples), setup.model, PartitionContext{4, 4, setup.memory_limit});
  // Every micro-batch fits the 1F1B per-micro-batch limit.
  CHECK(std::ranges::all_of(result.micro_batches,
                            [&](const ShapedMicroBatch& mb) { return mb.bytes <= setup.memory_limit; }));
  const auto document = io::to_document(result);
  CHECK(document.at("format") == "sluice.micro_batches");
  CHECK(io::from_document<Partition>(document) == result);
  const ReplicaAssignment replicas = balance_kk(micro_batch_times(result), 4);
  validate(replicas, micro_batch_times(result), 4);
  CHECK(io::from_document<ReplicaAssignment>(io::to_document(replicas)) == replicas);
  const Partition packed = fixed_length_packing(Span<const Sample>(samples), setup.model, FixedRows{8192, 0, 1},
                                                PartitionContext{4, 4, setup.memory_limit});
  CHECK(io::from_document<Partition>(io::to_document(packed)) == packed);
  MESSAGE("7B, c = 4, |D| = 4, 40 samples: DP objective ", result.objective, " s over ", result.micro_batches.size(),
          " micro-batches; fixed-length packing ", packed.objective, " s");
}
