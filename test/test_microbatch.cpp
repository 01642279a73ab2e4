#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/microbatch_json.hpp"
#include "sluice/microbatch/balance.hpp"
#include "sluice/microbatch/baselines.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/microbatch/order.hpp"
#include "sluice/microbatch/partition.hpp"

using namespace sluice;
using namespace sluice::microbatch;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

bool close(double x, double y, double tolerance = 1e-9) {
  return std::abs(x - y) <= tolerance * std::max({1.0, std::abs(x), std::abs(y)});
}

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
double brute_force(std::span<const Sample> ordered, const Model& model, const PartitionOptions& options) {
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
bool authors_thinning_feasible(std::span<const Sample> ordered, const QuadraticStageCost& model, double limit,
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
        std::reverse(moved.begin() + static_cast<std::ptrdiff_t>(i), moved.begin() + static_cast<std::ptrdiff_t>(j) + 1);
        CHECK(path_length(moved) >= length);
      }
  }
}

TEST_CASE("partition DP equals brute force over all cuts of <= 10 ordered samples") {
  Rng rng(11);
  int instances = 0;
  int infeasible_cases = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const std::size_t n = 1 + static_cast<std::size_t>(rng.below(10));
    const bool encoder_decoder = rng.below(3) == 0;
    const auto ordering = encoder_decoder ? (rng.below(2) == 0 ? Ordering::path : Ordering::input_target)
                                          : Ordering::length;
    const auto ordered = order_samples(random_samples(rng, n, encoder_decoder, 2000), ordering);
    const QuadraticStageCost model = random_model(rng);
    PartitionOptions options;
    options.stages = 1 + static_cast<int>(rng.below(6));
    options.replicas = 1 + static_cast<int>(rng.below(4));
    options.layout = rng.below(3) == 0 ? Layout::packed : Layout::padded;
    options.memory_limit = rng.below(4) == 0 ? inf : 500.0 + rng.uniform() * 8000.0;
    options.tmax_interval = 0;
    const double expected = brute_force(std::span<const Sample>(ordered), model, options);
    const PartitionContext context{options.stages, options.replicas, options.memory_limit};
    if (expected == inf) {
      CHECK_THROWS_AS(partition(std::span<const Sample>(ordered), model, options), sluice::infeasible);
      ++infeasible_cases;
      continue;
    }
    const Partition exact = partition(std::span<const Sample>(ordered), model, options);
    validate(exact, std::span<const Sample>(ordered), model, context);
    CHECK(close(exact.objective, expected));
    // Thinned: never infeasible, and within (c − 1)·interval of the exact objective.
    options.tmax_interval = rng.uniform() * 0.2;
    const Partition thinned = partition(std::span<const Sample>(ordered), model, options);
    validate(thinned, std::span<const Sample>(ordered), model, context);
    CHECK(thinned.objective >= exact.objective * (1 - 1e-12));
    CHECK(thinned.objective <= exact.objective + (options.stages - 1) * options.tmax_interval + 1e-12);
    ++instances;
  }
  MESSAGE("DP = brute force on ", instances, " feasible instances; ", infeasible_cases, " infeasible ones raised");
  CHECK(instances > 300);
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
    const Partition exact = partition(std::span<const Sample>(ordered), model, options);
    const PartitionContext context{options.stages, options.replicas, options.memory_limit};
    validate(exact, std::span<const Sample>(ordered), model, context);
    for (const double interval : {5e-6, 1e-3, 2e-2}) {
      options.tmax_interval = interval;
      const Partition thinned = partition(std::span<const Sample>(ordered), model, options);
      validate(thinned, std::span<const Sample>(ordered), model, context);
      const double gap = thinned.objective - exact.objective;
      const double bound = (options.stages - 1) * interval;
      CHECK(gap >= -1e-12);
      CHECK(gap <= bound + 1e-12);
      worst_gap = std::max(worst_gap, gap);
      worst_bound_use = std::max(worst_bound_use, gap / bound);
      equal += gap <= 1e-12 ? 1 : 0;
    }
  }
  MESSAGE("thinned = exact in ", equal, " of ", 3 * trials, " runs; worst gap ", worst_gap, " s = ",
          worst_bound_use, " of the bound (c - 1) * interval");
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
    const Partition thinned = partition(std::span<const Sample>(ordered), model, options);
    validate(thinned, std::span<const Sample>(ordered), model,
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
  const Partition result = partition(std::span<const Sample>(ordered), std::span<const QuadraticStageCost>(models), options);
  CHECK(result.cost_model == 1);
  validate(result, std::span<const Sample>(ordered), std::span<const QuadraticStageCost>(models),
           PartitionContext{2, 1, 60});
  options.memory_limit = 20;  // sample 0 needs 25 bytes alone even with recomputation
  CHECK_THROWS_AS(partition(std::span<const Sample>(ordered), std::span<const QuadraticStageCost>(models), options),
                  sluice::infeasible);
  // A grid stage cost forbids shapes beyond its largest point.
  cost::RectilinearGrid<2> time({std::vector<double>{1, 4}, std::vector<double>{32, 128}}, {1, 2, 4, 8});
  cost::RectilinearGrid<2> memory({std::vector<double>{1, 4}, std::vector<double>{32, 128}}, {1, 4, 4, 16});
  const GridStageCost<2> grid(cost::GridCostModel<2>{time, memory});
  CHECK(grid.seconds({5, 32, 0}) == inf);
  CHECK(grid.seconds({1, 16, 0}) == 1);
  const std::vector<Sample> short_ones = {{0, 100, 0}, {1, 90, 0}, {2, 80, 0}, {3, 70, 0}, {4, 60, 0}};
  const Partition on_grid = partition(std::span<const Sample>(short_ones), grid, PartitionOptions{.stages = 2});
  validate(on_grid, std::span<const Sample>(short_ones), grid, PartitionContext{2, 1, inf});
  for (const MicroBatch& mb : on_grid.micro_batches) CHECK(mb.shape.rows <= 4);
  const std::vector<Sample> too_long = {{0, 200, 0}};
  CHECK_THROWS_AS(partition(std::span<const Sample>(too_long), grid, PartitionOptions{}), sluice::infeasible);
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
    const Partition tokens = token_based(std::span<const Sample>(ordered), model, budget, context);
    validate(tokens, std::span<const Sample>(ordered), model, context);
    for (const MicroBatch& mb : tokens.micro_batches)
      CHECK((mb.shape.rows == 1 || mb.shape.rows * (mb.shape.input + mb.shape.target) <= budget));
    const Partition packed = fixed_length_packing(std::span<const Sample>(samples), model, FixedRows{8192, 0, 2}, context);
    validate(packed, std::span<const Sample>(samples), model, context);
    PartitionOptions options{.stages = 4, .replicas = 2, .memory_limit = inf, .layout = Layout::padded,
                             .tmax_interval = 0};
    const Partition dp = partition(std::span<const Sample>(ordered), model, options);
    CHECK(dp.objective <= tokens.objective * (1 + 1e-12));
  }
  // Out of memory: the baselines raise infeasible rather than return a plan that cannot run.
  const std::vector<Sample> two = {{0, 100, 0}, {1, 100, 0}};
  CHECK_THROWS_AS(token_based(std::span<const Sample>(two), model, 1000, PartitionContext{1, 1, 150}), sluice::infeasible);
  CHECK_THROWS_AS(fixed_length_packing(std::span<const Sample>(two), model, FixedRows{200, 0, 1}, PartitionContext{1, 1, 150}),
                  sluice::infeasible);
}

TEST_CASE("validators reject broken results") {
  const std::vector<Sample> samples = {{0, 100, 0}, {1, 80, 0}, {2, 60, 0}, {3, 40, 0}, {4, 20, 0}};
  const QuadraticStageCost model({1e-6, 1e-3, 0.05}, 1.0);
  const PartitionContext context{3, 2, 1000};
  const Partition good = partition(std::span<const Sample>(samples), model,
                                   PartitionOptions{.stages = 3, .replicas = 2, .memory_limit = 1000});
  REQUIRE(good.micro_batches.size() >= 2);
  validate(good, std::span<const Sample>(samples), model, context);
  auto rejects = [&](Partition broken) {
    CHECK_THROWS_AS(validate(broken, std::span<const Sample>(samples), model, context), sluice::invalid_plan);
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
  CHECK_THROWS_AS(validate(good, std::span<const Sample>(samples), model, PartitionContext{3, 2, 99}),
                  sluice::invalid_plan);  // over a tighter memory limit
  const std::vector<QuadraticStageCost> one = {model};
  p = good;
  p.cost_model = 1;
  CHECK_THROWS_AS(validate(p, std::span<const Sample>(samples), std::span<const QuadraticStageCost>(one), context),
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
  raises([&] { (void)partition(std::span<const Sample>(empty), model, PartitionOptions{}); }, "no samples");
  const std::vector<Sample> zero = {{0, 0, 0}};
  raises([&] { (void)partition(std::span<const Sample>(zero), model, PartitionOptions{}); }, "input length");
  const std::vector<Sample> negative = {{0, -5, 0}};
  raises([&] { (void)order_samples(negative, Ordering::length); }, "input length");
  const std::vector<Sample> negative_target = {{0, 5, -1}};
  raises([&] { (void)order_samples(negative_target, Ordering::path); }, "target length");
  const std::vector<Sample> twice = {{0, 5, 0}, {0, 6, 0}};
  raises([&] { (void)partition(std::span<const Sample>(twice), model, PartitionOptions{}); }, "appears twice");
  const std::vector<Sample> bad_id = {{-1, 5, 0}};
  raises([&] { (void)partition(std::span<const Sample>(bad_id), model, PartitionOptions{}); }, "sample id");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  raises([&] { (void)partition(std::span<const Sample>(good), ConstantCost{nan, 1}, PartitionOptions{}); }, "seconds");
  raises([&] { (void)partition(std::span<const Sample>(good), ConstantCost{1, nan}, PartitionOptions{}); }, "bytes");
  raises([&] { (void)partition(std::span<const Sample>(good), ConstantCost{-1, 1}, PartitionOptions{}); }, "seconds");
  raises([&] { (void)partition(std::span<const Sample>(good), model, PartitionOptions{.stages = 0}); }, "stages");
  raises([&] { (void)partition(std::span<const Sample>(good), model, PartitionOptions{.replicas = 0}); }, "replicas");
  raises([&] { (void)partition(std::span<const Sample>(good), model, PartitionOptions{.memory_limit = 0}); },
         "memory_limit");
  raises([&] { (void)partition(std::span<const Sample>(good), model, PartitionOptions{.memory_limit = nan}); },
         "memory_limit");
  raises([&] { (void)partition(std::span<const Sample>(good), model, PartitionOptions{.tmax_interval = -1}); },
         "tmax_interval");
  raises([&] { (void)partition(std::span<const Sample>(good), model, PartitionOptions{.tmax_interval = nan}); },
         "tmax_interval");
  raises([&] { (void)partition(std::span<const Sample>(good), model, PartitionOptions{.layout = Layout::fixed_rows}); },
         "layout");
  const std::vector<QuadraticStageCost> none;
  raises([&] { (void)partition(std::span<const Sample>(good), std::span<const QuadraticStageCost>(none), PartitionOptions{}); },
         "no cost models");
  // A memory limit below any single sample is a well-formed problem without a solution.
  CHECK_THROWS_AS(partition(std::span<const Sample>(good), model, PartitionOptions{.memory_limit = 5}), sluice::infeasible);

  const std::vector<double> times = {1, 2};
  const std::vector<double> nan_times = {1, nan};
  const std::vector<double> no_times;
  raises([&] { (void)balance_kk(times, 0); }, "replicas");
  raises([&] { (void)balance_lpt(times, 0); }, "replicas");
  raises([&] { (void)balance_kk(nan_times, 2); }, "time of micro-batch 1");
  raises([&] { (void)balance_lpt(no_times, 2); }, "no micro-batch times");
  const PartitionContext context{1, 1, inf};
  raises([&] { (void)token_based(std::span<const Sample>(good), model, 0, context); }, "tokens_per_micro_batch");
  raises([&] { (void)token_based(std::span<const Sample>(good), model, 10, PartitionContext{0, 1, inf}); }, "stages");
  raises([&] { (void)fixed_length_packing(std::span<const Sample>(good), model, FixedRows{15, 0, 1}, context); },
         "longer than a row");
  raises([&] { (void)fixed_length_packing(std::span<const Sample>(good), model, FixedRows{64, 0, 0}, context); },
         "rows per micro-batch");
  raises([&] { (void)QuadraticStageCost({1, 1, 1}, 0); }, "bytes_per_token");
  raises([&] { (void)parse_layout("rows"); }, "layout");
}

TEST_CASE("JSON round trip of partitions and replica assignments; the bundled 7B stage cost") {
  const cost::Profile profile = io::read_document<cost::Profile>(io::resolve_data_file("llama2-7b", "profiles"));
  const StageCostSetup setup = stage_cost(profile.at(Scheme(1, 4)));
  CHECK(setup.memory_limit > 0);
  Rng rng(1);
  const std::vector<Sample> samples = random_samples(rng, 40, false, 8192);
  const auto ordered = order_samples(samples, Ordering::length);
  const PartitionOptions options{.stages = 4, .replicas = 4, .memory_limit = setup.memory_limit};
  const Partition result = partition(std::span<const Sample>(ordered), setup.model, options);
  validate(result, std::span<const Sample>(samples), setup.model, PartitionContext{4, 4, setup.memory_limit});
  // Every micro-batch fits the 1F1B per-micro-batch limit.
  CHECK(std::ranges::all_of(result.micro_batches, [&](const MicroBatch& mb) { return mb.bytes <= setup.memory_limit; }));
  const auto document = io::to_document(result);
  CHECK(document.at("format") == "sluice.micro_batches");
  CHECK(io::from_document<Partition>(document) == result);
  const ReplicaAssignment replicas = balance_kk(micro_batch_times(result), 4);
  validate(replicas, micro_batch_times(result), 4);
  CHECK(io::from_document<ReplicaAssignment>(io::to_document(replicas)) == replicas);
  const Partition packed = fixed_length_packing(std::span<const Sample>(samples), setup.model, FixedRows{8192, 0, 1},
                                                PartitionContext{4, 4, setup.memory_limit});
  CHECK(io::from_document<Partition>(io::to_document(packed)) == packed);
  MESSAGE("7B, c = 4, |D| = 4, 40 samples: DP objective ", result.objective, " s over ", result.micro_batches.size(),
          " micro-batches; fixed-length packing ", packed.objective, " s");
}
