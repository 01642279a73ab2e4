#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "cbc_leak_suppression.hpp"
#include "sluice/assign/dispatch.hpp"
#if SLUICE_HAVE_CBC
#include "sluice/assign/dispatch_cbc.hpp"
#endif
#include "sluice/assign/packing.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "support.hpp"

using namespace sluice;
using assign::Dispatch;
using assign::DispatchOptions;
using cost::QuadraticLatency;
using cost::SchemeCost;

namespace {

struct Instance {
  std::vector<Sequence> batch;
  std::vector<SchemeCost> pipelines;
};

SchemeCost pipeline(int tp, int pp, double a, double b, double c, std::int64_t max_len) {
  return {Scheme(tp, pp), QuadraticLatency(a, b, c), max_len, 1, std::nullopt};
}

std::vector<Sequence> sequences(const std::vector<std::int64_t>& lengths) {
  std::vector<Sequence> batch;
  for (std::size_t i = 0; i < lengths.size(); ++i) batch.emplace_back(static_cast<std::int64_t>(100 + i), lengths[i]);
  return batch;
}

const cost::Profile& profile_32b() {
  static const cost::Profile profile =
      io::read_document<cost::Profile>(io::resolve_data_file("llama2-32b", "profiles"));
  return profile;
}

// Eq. 2–3 written out independently of the library.
std::vector<double> reference_bounds(const Instance& instance, const std::vector<int>& pipeline_of) {
  const std::size_t pipelines = instance.pipelines.size();
  std::vector<double> sum(pipelines, 0.0);
  std::vector<std::int64_t> tokens(pipelines, 0);
  std::vector<std::int64_t> longest(pipelines, 0);
  for (std::size_t i = 0; i < instance.batch.size(); ++i) {
    const auto p = static_cast<std::size_t>(pipeline_of[i]);
    const std::int64_t length = instance.batch[i].length();
    sum[p] += instance.pipelines[p].latency.sequence_time(length);
    tokens[p] += length;
    longest[p] = std::max(longest[p], length);
  }
  std::vector<double> bounds(pipelines, 0.0);
  for (std::size_t p = 0; p < pipelines; ++p) {
    if (tokens[p] == 0) continue;
    const SchemeCost& cost = instance.pipelines[p];
    const double c = cost.latency.microbatch_overhead();
    const std::int64_t v = std::max<std::int64_t>(1, (tokens[p] + cost.max_len - 1) / cost.max_len);
    const double slowest = cost.latency.sequence_time(longest[p]) + c;
    bounds[p] = std::max(sum[p] + c * static_cast<double>(v) + slowest * (cost.scheme.pp() - 1),
                         slowest * static_cast<double>(cost.scheme.pp() - 1 + v));
  }
  return bounds;
}

double reference_objective(const Instance& instance, const std::vector<int>& pipeline_of) {
  const std::vector<double> bounds = reference_bounds(instance, pipeline_of);
  return *std::ranges::max_element(bounds);
}

int feasible_count(const Instance& instance, std::size_t i) {
  int count = 0;
  for (const SchemeCost& cost : instance.pipelines) count += cost.max_len >= instance.batch[i].length() ? 1 : 0;
  return count;
}

// Calls visit(pipeline_of) for every feasible assignment.
template <typename Visit>
void for_each_assignment(const Instance& instance, Visit visit) {
  const std::size_t n = instance.batch.size();
  std::vector<int> limit(n);
  for (std::size_t i = 0; i < n; ++i) limit[i] = feasible_count(instance, i);
  std::vector<int> pipeline_of(n, 0);
  while (true) {
    visit(pipeline_of);
    std::size_t k = 0;
    while (k < n && ++pipeline_of[k] == limit[k]) pipeline_of[k++] = 0;
    if (k == n) return;
  }
}

// The optimum of Eq. 3 by enumerating every feasible assignment.
double brute_force(const Instance& instance) {
  double best = std::numeric_limits<double>::infinity();
  for_each_assignment(instance, [&](const std::vector<int>& pipeline_of) {
    best = std::min(best, reference_objective(instance, pipeline_of));
  });
  return best;
}

bool same(const Dispatch& x, const Dispatch& y) {
  return x.pipeline_of == y.pipeline_of && x.pipeline_bounds == y.pipeline_bounds && x.objective == y.objective &&
         x.lower_bound == y.lower_bound;
}

// 1..3 pipelines sorted by MaxLen; from the bundled 32B profile or synthetic; repeated schemes are common.
Instance random_instance(Rng& rng, int max_sequences) {
  Instance instance;
  const int count = static_cast<int>(rng.uniform_int(1, 3));
  if (rng.uniform() < 0.5) {
    std::vector<SchemeCost> usable;
    for (const SchemeCost& cost : profile_32b().schemes())
      if (cost.max_len > 0) usable.push_back(cost);
    for (int p = 0; p < count; ++p)
      instance.pipelines.push_back(usable[static_cast<std::size_t>(rng.below(usable.size()))]);
  } else {
    std::vector<SchemeCost> kinds;
    for (int k = 0; k < 2; ++k) {
      kinds.push_back(pipeline(static_cast<int>(rng.uniform_int(1, 8)), static_cast<int>(rng.uniform_int(1, 4)),
                               rng.uniform() < 0.3 ? 0.0 : 1e-6 * rng.uniform(), 1e-3 * rng.uniform(),
                               rng.uniform() < 0.2 ? 0.0 : 0.3 * rng.uniform(), rng.uniform_int(20, 200)));
    }
    for (int p = 0; p < count; ++p) instance.pipelines.push_back(kinds[static_cast<std::size_t>(rng.below(2))]);
  }
  std::ranges::stable_sort(instance.pipelines,
                           [](const SchemeCost& x, const SchemeCost& y) { return x.max_len > y.max_len; });
  const int n = static_cast<int>(rng.uniform_int(1, max_sequences));
  std::vector<std::int64_t> lengths;
  for (int i = 0; i < n; ++i) {
    // A random pipeline's MaxLen as the ceiling spreads J_i over 1..D.
    const std::size_t chosen = static_cast<std::size_t>(rng.below(instance.pipelines.size()));
    const std::int64_t ceiling = instance.pipelines[chosen].max_len;
    lengths.push_back(rng.uniform_int(std::max<std::int64_t>(1, ceiling / 4), ceiling));
  }
  instance.batch = sequences(lengths);
  return instance;
}

// Each pipeline `copies` times in a row (MaxLen order kept).
void repeat_pipelines(Instance& instance, std::int64_t copies) {
  std::vector<SchemeCost> many;
  for (const SchemeCost& cost : instance.pipelines)
    for (std::int64_t c = 0; c < copies; ++c) many.push_back(cost);
  instance.pipelines = std::move(many);
}

// Like the benchmarks' 64-GPU scenario (from a smaller dataset): 1×<16,1> + 6×<8,1>, 200K-token batches.
Instance scenario_64(int batch_number) {
  const cost::Profile profile = profile_32b().with_gpus(64);
  const Strategy strategy({{Scheme(16, 1), 1}, {Scheme(8, 1), 6}});
  Instance instance;
  for (const Pipeline& p : profile.pipelines(strategy)) instance.pipelines.push_back(profile.at(p.scheme));
  const data::LengthDataset dataset =
      data::LengthDataset(data::synthetic_lengths({.count = 20'000, .seed = 1}), "synthetic").truncated(32768);
  data::BatchSampler sampler(dataset, {.tokens_per_batch = 200'000, .seed = 1});
  for (int b = 1; b < batch_number; ++b) sampler.next();
  instance.batch = sampler.next().sequences;
  return instance;
}

// The order of dispatch_greedy's random trial `trial`: pinned sequences first, each part in a forward
// Fisher–Yates order drawn from Rng::stream(seed, trial).
std::vector<int> random_order(const Instance& instance, std::uint64_t seed, std::uint64_t trial) {
  const std::size_t n = instance.batch.size();
  int top = 0;
  for (const SchemeCost& cost : instance.pipelines) top += cost.max_len == instance.pipelines.front().max_len ? 1 : 0;
  std::vector<int> order;
  std::vector<int> rest;
  for (std::size_t i = 0; i < n; ++i) {
    const bool pin = top < static_cast<int>(instance.pipelines.size()) && feasible_count(instance, i) == top;
    (pin ? order : rest).push_back(static_cast<int>(i));
  }
  const std::size_t split = order.size();
  order.insert(order.end(), rest.begin(), rest.end());
  Rng rng = Rng::stream(seed, trial);
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t end = k < split ? split : n;
    std::swap(order[k], order[k + static_cast<std::size_t>(rng.below(end - k))]);
  }
  return order;
}

// Length descending, then batch order.
std::vector<int> longest_first_order(const Instance& instance) {
  std::vector<int> order(instance.batch.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::ranges::stable_sort(order, [&](int x, int y) {
    return instance.batch[static_cast<std::size_t>(x)].length() > instance.batch[static_cast<std::size_t>(y)].length();
  });
  return order;
}

struct Trial {
  std::vector<int> pipeline_of;
  double objective = 0;  // the running maximum of the bounds as placed
};

// Alg. 1 with the rule argmin_j (new_j, j), evaluated plainly on every feasible pipeline, in `order`. Bounds
// are kept as dispatch_greedy keeps them (base = ΣT' + c·V + c·(PP − 1), T' of the longest, V, tokens left in
// the last micro-batch), so that exact ties in real arithmetic round alike.
Trial plain_greedy(const Instance& instance, const std::vector<int>& order) {
  const std::size_t n = instance.batch.size();
  const std::size_t pipelines = instance.pipelines.size();
  std::vector<double> base(pipelines, 0.0);
  std::vector<double> longest(pipelines, 0.0);
  std::vector<std::int64_t> micro_batches(pipelines, 0);
  std::vector<std::int64_t> room(pipelines, 0);
  std::vector<bool> used(pipelines, false);
  Trial trial{std::vector<int>(n, -1), 0.0};
  for (const int i : order) {
    const std::int64_t length = instance.batch[static_cast<std::size_t>(i)].length();
    double best = std::numeric_limits<double>::infinity();
    std::size_t chosen = 0;
    for (std::size_t p = 0; p < static_cast<std::size_t>(feasible_count(instance, static_cast<std::size_t>(i))); ++p) {
      const SchemeCost& cost = instance.pipelines[p];
      const double t = cost.latency.sequence_time(length);
      const double c = cost.latency.microbatch_overhead();
      const double pm1 = cost.scheme.pp() - 1;
      double value = t + c + pm1 * c + pm1 * t;
      if (used[p]) {
        const bool next = length > room[p];
        const double slowest = std::max(longest[p], t);
        value = std::max(base[p] + t + (next ? c : 0.0) + pm1 * slowest,
                         (slowest + c) * (pm1 + static_cast<double>(micro_batches[p] + (next ? 1 : 0))));
      }
      if (value < best) {
        best = value;
        chosen = p;
      }
    }
    const SchemeCost& cost = instance.pipelines[chosen];
    const double t = cost.latency.sequence_time(length);
    const double c = cost.latency.microbatch_overhead();
    const double pm1 = cost.scheme.pp() - 1;
    if (!used[chosen]) {
      used[chosen] = true;
      base[chosen] = t + c + pm1 * c;
      longest[chosen] = t;
      micro_batches[chosen] = 1;
      room[chosen] = cost.max_len - length;
    } else {
      const bool next = length > room[chosen];
      base[chosen] = base[chosen] + t + (next ? c : 0.0);
      micro_batches[chosen] += next ? 1 : 0;
      room[chosen] += next ? cost.max_len - length : -length;
      longest[chosen] = std::max(longest[chosen], t);
    }
    trial.pipeline_of[static_cast<std::size_t>(i)] = static_cast<int>(chosen);
    trial.objective = std::max(trial.objective, best);
  }
  return trial;
}

// What the plan reports for a dispatch: every pipeline packed (stage 2), the slowest 1F1B estimate.
double packed_objective(const Instance& instance, const std::vector<int>& pipeline_of) {
  std::vector<std::vector<Sequence>> assigned(instance.pipelines.size());
  for (std::size_t i = 0; i < instance.batch.size(); ++i)
    assigned[static_cast<std::size_t>(pipeline_of[i])].push_back(instance.batch[i]);
  double slowest = 0;
  for (std::size_t p = 0; p < assigned.size(); ++p)
    if (!assigned[p].empty()) slowest = std::max(slowest, assign::pack(assigned[p], instance.pipelines[p]).estimate);
  return slowest;
}

// Eq. 3 without the V step (the bound's first term only), as dispatch charged before the step was added.
double first_term_objective(const Instance& instance, const std::vector<int>& pipeline_of) {
  std::vector<double> sum(instance.pipelines.size(), 0.0);
  std::vector<std::int64_t> tokens(instance.pipelines.size(), 0), longest(instance.pipelines.size(), 0);
  for (std::size_t i = 0; i < instance.batch.size(); ++i) {
    const auto p = static_cast<std::size_t>(pipeline_of[i]);
    sum[p] += instance.pipelines[p].latency.sequence_time(instance.batch[i].length());
    tokens[p] += instance.batch[i].length();
    longest[p] = std::max(longest[p], instance.batch[i].length());
  }
  double worst = 0;
  for (std::size_t p = 0; p < sum.size(); ++p) {
    if (tokens[p] == 0) continue;
    const SchemeCost& cost = instance.pipelines[p];
    const double c = cost.latency.microbatch_overhead();
    const auto v = static_cast<double>((tokens[p] + cost.max_len - 1) / cost.max_len);
    worst = std::max(worst, sum[p] + c * v + (cost.latency.sequence_time(longest[p]) + c) * (cost.scheme.pp() - 1));
  }
  return worst;
}

// Tiny instances where the V step matters: 2-3 pipelines of one PP, MaxLen 1000, one sequence of 850-1000
// tokens and short ones whose total keeps every pipeline busy.
Instance near_max_len_instance(Rng& rng, int pp) {
  Instance instance;
  const int count = static_cast<int>(rng.uniform_int(2, 3));
  const double a = 1e-6 * (0.5 + rng.uniform());
  const double b = 1e-4 * rng.uniform();
  const double c = 0.1 * rng.uniform();
  for (int p = 0; p < count; ++p) instance.pipelines.push_back(pipeline(4, pp, a, b, c, 1000));
  std::vector<std::int64_t> lengths = {rng.uniform_int(850, 1000)};
  const int shorter = static_cast<int>(rng.uniform_int(count + 1, 6));
  for (int i = 0; i < shorter; ++i) lengths.push_back(rng.uniform_int(50, 450));
  instance.batch = sequences(lengths);
  return instance;
}

}  // namespace

TEST_CASE("dispatch: Eq. 2-3 on a hand-computed example") {
  // P0 <4,2>: T'(l) = 1e-3·l, c = 0.5, MaxLen 100.  P1 <2,1>: T'(l) = 2e-3·l, c = 0.25, MaxLen 50.
  const std::vector<SchemeCost> pipelines = {pipeline(4, 2, 0, 1e-3, 0.5, 100), pipeline(2, 1, 0, 2e-3, 0.25, 50)};
  const std::vector<Sequence> batch = sequences({80, 40, 30, 20});
  // P0 {80, 40}: max(0.12 + 0.5·⌈120/100⌉ + (0.08 + 0.5)·1, (0.08 + 0.5)·(1 + 2)) = max(1.70, 1.74) = 1.74: two
  // micro-batches, the slower one at least 0.58 s, take at least 0.58·3 in 1F1B.  P1 {30, 20}: 0.10 + 0.25·1 = 0.35.
  const std::vector<int> split = {0, 0, 1, 1};
  const std::vector<double> bounds = assign::dispatch_pipeline_bounds(batch, pipelines, split);
  REQUIRE(bounds.size() == 2);
  CHECK(bounds[0] == doctest::Approx(1.74).epsilon(1e-12));
  CHECK(bounds[1] == doctest::Approx(0.35).epsilon(1e-12));
  CHECK(assign::dispatch_objective(batch, pipelines, split) == doctest::Approx(1.74).epsilon(1e-12));
  // Everything on P0: max(0.17 + 0.5·2 + 0.58, 0.58·3) = 1.75; P1 is empty and costs 0.
  const std::vector<int> all_first = {0, 0, 0, 0};
  const std::vector<double> first_only = assign::dispatch_pipeline_bounds(batch, pipelines, all_first);
  CHECK(first_only[0] == doctest::Approx(1.75).epsilon(1e-12));
  CHECK(first_only[1] == 0.0);

  // The optimum keeps 80 alone on P0 (1.16); P1 {40, 30, 20} needs two micro-batches: 0.18 + 0.5 = 0.68.
  // The longest sequence alone already costs 1.16 on the only pipeline that can hold it: the bound is tight.
  const Dispatch greedy = assign::dispatch_greedy(batch, pipelines);
  assign::validate(greedy, batch, pipelines);
  CHECK(greedy.pipeline_of == std::vector<int>{0, 1, 1, 1});
  CHECK(greedy.objective == doctest::Approx(1.16).epsilon(1e-12));
  CHECK(greedy.lower_bound == doctest::Approx(1.16).epsilon(1e-12));
  CHECK(greedy.lower_bound <= greedy.objective);
#if SLUICE_HAVE_CBC
  const assign::ExactDispatch exact = assign::dispatch_exact(batch, pipelines, {.time_limit_seconds = 10});
  CHECK(exact.status == solver::SolveStatus::optimal);
  CHECK(exact.dispatch.objective == doctest::Approx(1.16).epsilon(1e-12));
  assign::validate(exact.dispatch, batch, pipelines);
#endif
}

TEST_CASE("dispatch: greedy, local search, lower bound and exact agree with brute force") {
  Rng rng(20240611);
#ifdef NDEBUG
  const int instances = 600;
#else
  const int instances = 150;
#endif
  int solved = 0;
  int improved = 0;
  int tight = 0;
  double ratio = 0;
  for (int k = 0; k < instances; ++k) {
    const Instance instance = random_instance(rng, 8);
    CAPTURE(k);
    const double optimum = brute_force(instance);
    const auto seed = static_cast<std::uint64_t>(k);
    const DispatchOptions options{.trials = 4, .threads = 1, .seed = seed, .local_search = false};
    const Dispatch plain = assign::dispatch_greedy(instance.batch, instance.pipelines, options);
    DispatchOptions with_search = options;
    with_search.local_search = true;
    const Dispatch searched = assign::dispatch_greedy(instance.batch, instance.pipelines, with_search);
    assign::validate(plain, instance.batch, instance.pipelines);
    assign::validate(searched, instance.batch, instance.pipelines);
    CHECK(close(plain.objective, reference_objective(instance, plain.pipeline_of), 1e-12));
    CHECK(plain.objective >= optimum);
    CHECK(searched.objective >= optimum);
    CHECK(searched.objective <= plain.objective);
    improved += searched.objective < plain.objective ? 1 : 0;
    CHECK(plain.lower_bound <= optimum);
    CHECK(plain.lower_bound == searched.lower_bound);
    CHECK(plain.lower_bound == assign::dispatch_lower_bound(instance.batch, instance.pipelines));
    tight += close(plain.lower_bound, optimum, 1e-6) ? 1 : 0;
    ratio += plain.lower_bound / optimum;

#if SLUICE_HAVE_CBC
#ifndef NDEBUG
    // CBC's root cuts make 7-8 sequences slow under the sanitizers; Release checks them all.
    if (instance.batch.size() > 6) continue;
#endif
    ++solved;
    const assign::ExactDispatch exact =
        assign::dispatch_exact(instance.batch, instance.pipelines, {.time_limit_seconds = 20});
    assign::validate(exact.dispatch, instance.batch, instance.pipelines);
    CHECK(exact.status == solver::SolveStatus::optimal);
    CHECK(close(exact.dispatch.objective, optimum, 1e-9));
    CHECK(exact.best_bound <= optimum * (1 + 1e-6));
    CHECK(exact.dispatch.objective <= assign::dispatch_greedy(instance.batch, instance.pipelines).objective);
#endif
  }
  MESSAGE("local search improved ", improved, " and the lower bound was tight on ", tight, " of ", instances,
          " instances; mean lower bound / optimum ", ratio / instances, "; CBC solved ", solved);
#if SLUICE_HAVE_CBC
  CHECK(solved >= 100);
#endif
  CHECK(improved > 0);
  CHECK(tight > 0);
}

TEST_CASE("dispatch: the sorted-bound search makes the plain Alg. 1 choices") {
  Rng rng(7);
#ifdef NDEBUG
  const int instances = 400;
#else
  const int instances = 60;
#endif
  for (int k = 0; k < instances; ++k) {
    CAPTURE(k);
    Instance instance = random_instance(rng, 60);
    // More pipelines, several of each kind, so that groups and pruning matter.
    repeat_pipelines(instance, rng.uniform_int(1, 5));
    // One random trial per seed, with and without the longest-first trial.
    const auto seed = static_cast<std::uint64_t>(k);
    const Trial random = plain_greedy(instance, random_order(instance, seed, 0));
    const Trial longest = plain_greedy(instance, longest_first_order(instance));
    DispatchOptions options{.trials = 1, .threads = 1, .seed = seed, .local_search = false, .longest_first = false};
    CHECK(assign::dispatch_greedy(instance.batch, instance.pipelines, options).pipeline_of == random.pipeline_of);
    options.longest_first = true;
    // The longest-first trial runs first; at the lower bound (within 1e-9) it ends the search.
    const double certain = assign::dispatch_lower_bound(instance.batch, instance.pipelines) * (1 + 1e-9);
    const bool first_wins = longest.objective <= certain || longest.objective <= random.objective;
    const std::vector<int>& better = first_wins ? longest.pipeline_of : random.pipeline_of;
    CHECK(assign::dispatch_greedy(instance.batch, instance.pipelines, options).pipeline_of == better);
  }
}

TEST_CASE("dispatch: local search leaves no move or swap that lowers the slowest pipeline") {
  // Every move and every swap with a shorter sequence, tried one by one with the bounds recomputed: the local
  // search, which finds the best swap per pipeline pair by binary search, must have missed none that improves.
  Rng rng(31);
#ifdef NDEBUG
  const int instances = 200;
#else
  const int instances = 30;
#endif
  int searched = 0;
  for (int k = 0; k < instances; ++k) {
    CAPTURE(k);
    Instance instance = random_instance(rng, 80);
    repeat_pipelines(instance, rng.uniform_int(1, 4));
    const DispatchOptions options{
        .trials = 1, .threads = 1, .seed = static_cast<std::uint64_t>(k), .local_search = true, .longest_first = false};
    const Dispatch dispatch = assign::dispatch_greedy(instance.batch, instance.pipelines, options);
    assign::validate(dispatch, instance.batch, instance.pipelines);
    if (dispatch.objective <= dispatch.lower_bound * (1 + 1e-9)) continue;  // certified: no search ran
    ++searched;
    const auto p =
        static_cast<int>(std::ranges::max_element(dispatch.pipeline_bounds) - dispatch.pipeline_bounds.begin());
    const double current = dispatch.pipeline_bounds[static_cast<std::size_t>(p)];
    const auto fits = [&](std::size_t i, int q) {
      return instance.pipelines[static_cast<std::size_t>(q)].max_len >= instance.batch[i].length();
    };
    std::vector<int> trial = dispatch.pipeline_of;
    const auto value_of = [&](int q) {
      const std::vector<double> bounds = assign::dispatch_pipeline_bounds(instance.batch, instance.pipelines, trial);
      return std::max(bounds[static_cast<std::size_t>(p)], bounds[static_cast<std::size_t>(q)]);
    };
    for (std::size_t i = 0; i < trial.size(); ++i) {
      if (dispatch.pipeline_of[i] != p) continue;
      for (int q = 0; q < static_cast<int>(instance.pipelines.size()); ++q) {
        if (q == p || !fits(i, q)) continue;
        trial[i] = q;
        CHECK(value_of(q) >= current * (1 - 1e-9));
        for (std::size_t j = 0; j < trial.size(); ++j) {
          if (dispatch.pipeline_of[j] != q || instance.batch[j].length() >= instance.batch[i].length() || !fits(j, p))
            continue;
          trial[j] = p;
          CHECK(value_of(q) >= current * (1 - 1e-9));
          trial[j] = q;
        }
        trial[i] = p;
      }
    }
  }
  MESSAGE("checked ", searched, " searched dispatches of ", instances);
  CHECK(searched >= instances / 2);
}

TEST_CASE("dispatch: the 64-GPU scenario respects J_i, pins long sequences and is deterministic") {
  int certified = 0;
  int searched = 0;
  for (int batch = 1; batch <= 4; ++batch) {
    for (const bool longest_first : {true, false}) {
      CAPTURE(batch);
      CAPTURE(longest_first);
      const Instance instance = scenario_64(batch);
      REQUIRE(instance.pipelines.size() == 7);
      const std::int64_t second = instance.pipelines[1].max_len;
      const DispatchOptions options{
          .trials = 40, .threads = 1, .seed = 11, .local_search = true, .longest_first = longest_first};
      const Dispatch one = assign::dispatch_greedy(instance.batch, instance.pipelines, options);
      assign::validate(one, instance.batch, instance.pipelines);
      for (std::size_t i = 0; i < instance.batch.size(); ++i) {
        if (instance.batch[i].length() > second) CHECK(one.pipeline_of[i] == 0);
      }
      CHECK(one.lower_bound > 0.9 * one.objective);
      (one.objective <= one.lower_bound * (1 + 1e-9) ? certified : searched) += 1;

      CHECK(same(one, assign::dispatch_greedy(instance.batch, instance.pipelines, options)));
      for (const int threads : {2, 3, 7, 64}) {
        CAPTURE(threads);
        DispatchOptions parallel = options;
        parallel.threads = threads;
        CHECK(same(one, assign::dispatch_greedy(instance.batch, instance.pipelines, parallel)));
      }
      DispatchOptions plain = options;
      plain.local_search = false;
      const Dispatch greedy_only = assign::dispatch_greedy(instance.batch, instance.pipelines, plain);
      CHECK(one.objective <= greedy_only.objective);
      plain.threads = 3;
      CHECK(same(greedy_only, assign::dispatch_greedy(instance.batch, instance.pipelines, plain)));
      // More trials never do worse: the first 40 trials are among the 100.
      DispatchOptions more = plain;
      more.trials = 100;
      CHECK(assign::dispatch_greedy(instance.batch, instance.pipelines, more).objective <= greedy_only.objective);
    }
  }
  // Both paths ran: a trial at the lower bound ending the search, and all trials plus local search.
  CHECK(certified > 0);
  CHECK(searched > 0);
}

TEST_CASE("dispatch: the V step keeps a sequence near MaxLen from being joined past it (PP = 1 and PP > 1)") {
  // One 980-token sequence and n of 240 on two pipelines of MaxLen 1000. Without the V step the best bound
  // puts a 240 beside the 980 when the other pipeline is loaded enough (PP = 1: 1.2608 s against 1.3424 s with
  // none there); packed, that pipeline needs two micro-batches and its 1F1B estimate jumps. The pipelines and
  // the 240s are interchangeable, so an assignment is k, the 240s beside the 980.
  for (const auto& [pp, shorter, stepped] : {std::tuple{1, 14, true}, {2, 28, true}, {4, 40, false}}) {
    CAPTURE(pp);
    Instance instance;
    for (int p = 0; p < 2; ++p) instance.pipelines.push_back(pipeline(4, pp, 1e-6, 1e-4, 0.05, 1000));
    std::vector<std::int64_t> lengths = {980};
    lengths.insert(lengths.end(), static_cast<std::size_t>(shorter), 240);
    instance.batch = sequences(lengths);
    double best_packed = std::numeric_limits<double>::infinity();
    double first_term_best = std::numeric_limits<double>::infinity();
    double first_term_packed = 0;  // the packed objective of the assignment the first term alone prefers
    for (int beside = 0; beside <= shorter; ++beside) {
      std::vector<int> pipeline_of(lengths.size(), 1);
      for (int i = 0; i <= beside; ++i) pipeline_of[static_cast<std::size_t>(i)] = 0;
      const double packed = packed_objective(instance, pipeline_of);
      best_packed = std::min(best_packed, packed);
      const double first_term = first_term_objective(instance, pipeline_of);
      if (first_term < first_term_best) {
        first_term_best = first_term;
        first_term_packed = packed;
      }
    }
    const Dispatch dispatch = assign::dispatch_greedy(instance.batch, instance.pipelines);
    assign::validate(dispatch, instance.batch, instance.pipelines);
    CHECK(packed_objective(instance, dispatch.pipeline_of) == doctest::Approx(best_packed).epsilon(1e-12));
    if (stepped) {
      std::int64_t beside = 0;  // tokens on the 980's pipeline
      for (std::size_t i = 0; i < instance.batch.size(); ++i)
        if (dispatch.pipeline_of[i] == dispatch.pipeline_of[0]) beside += instance.batch[i].length();
      CHECK(beside == 980);
      CHECK(first_term_packed > 1.1 * best_packed);  // the defect the step fixes
    }
  }
}

TEST_CASE(
    "dispatch: near MaxLen, Eq. 2 bounds every packing, and greedy + local search plans within 1% of brute force and "
    "CBC") {
  Rng rng(20261123);
#ifdef NDEBUG
  const int instances = 300;
#else
  const int instances = 60;
#endif
  int stepped = 0;  // instances where the first term alone prefers an assignment that packs worse
  int exact_checked = 0;
  double worst_ratio = 1;
  for (int k = 0; k < instances; ++k) {
    CAPTURE(k);
    const int pp = std::array{1, 2, 4}[static_cast<std::size_t>(k % 3)];
    const Instance instance = near_max_len_instance(rng, pp);
    double best_bound = std::numeric_limits<double>::infinity();
    double best_packed = std::numeric_limits<double>::infinity();
    double first_term_best = std::numeric_limits<double>::infinity();
    double first_term_packed = 0;
    for_each_assignment(instance, [&](const std::vector<int>& pipeline_of) {
      const double bound = assign::dispatch_objective(instance.batch, instance.pipelines, pipeline_of);
      const double packed = packed_objective(instance, pipeline_of);
      REQUIRE(bound <= packed * (1 + 1e-9));  // Eq. 2 is a lower bound on the packed 1F1B estimate
      best_bound = std::min(best_bound, bound);
      best_packed = std::min(best_packed, packed);
      const double first_term = first_term_objective(instance, pipeline_of);
      if (first_term < first_term_best) {
        first_term_best = first_term;
        first_term_packed = packed;
      }
    });
    const Dispatch dispatch =
        assign::dispatch_greedy(instance.batch, instance.pipelines, {.trials = 8, .threads = 1, .seed = 3});
    assign::validate(dispatch, instance.batch, instance.pipelines);
    CHECK(dispatch.objective >= best_bound * (1 - 1e-12));
    CHECK(dispatch.lower_bound <= best_bound * (1 + 1e-9));
    const double planned = packed_objective(instance, dispatch.pipeline_of);
    CHECK(planned <= 1.01 * best_packed);
    // Without the V step, Eq. 2 is its first term alone, and the result says so.
    const Dispatch first_term = assign::dispatch_greedy(instance.batch, instance.pipelines,
                                                        {.trials = 8, .threads = 1, .seed = 3, .v_step = false});
    assign::validate(first_term, instance.batch, instance.pipelines);
    CHECK_FALSE(first_term.v_step);
    CHECK(close(first_term.objective, first_term_objective(instance, first_term.pipeline_of), 1e-12));
    CHECK(first_term.objective >= first_term_best * (1 - 1e-12));
    CHECK(first_term.lower_bound <= first_term_best * (1 + 1e-9));
    worst_ratio = std::max(worst_ratio, planned / best_packed);
    stepped += first_term_packed > best_packed * (1 + 1e-9) ? 1 : 0;
#if SLUICE_HAVE_CBC
    if (k % 5 == 0) {
      ++exact_checked;
      const assign::ExactDispatch exact =
          assign::dispatch_exact(instance.batch, instance.pipelines, {.time_limit_seconds = 20});
      CHECK(exact.status == solver::SolveStatus::optimal);
      CHECK(close(exact.dispatch.objective, best_bound, 1e-9));
      CHECK(planned <= 1.01 * packed_objective(instance, exact.dispatch.pipeline_of));
    }
#endif
  }
  MESSAGE("the first term alone packs worse on ", stepped, " of ", instances, " instances; greedy + local search's ",
          "plan is at most ", worst_ratio, "x the best packing; CBC checked ", exact_checked);
  CHECK(stepped > 0);
}

TEST_CASE("dispatch: empty pipelines are allowed and cost nothing") {
  const std::vector<SchemeCost> pipelines = {pipeline(4, 1, 0, 1e-3, 0.5, 100), pipeline(4, 1, 0, 1e-3, 0.5, 100),
                                             pipeline(2, 2, 0, 2e-3, 0.1, 50)};
  const std::vector<Sequence> batch = sequences({60});
  const Dispatch dispatch = assign::dispatch_greedy(batch, pipelines);
  assign::validate(dispatch, batch, pipelines);
  CHECK(dispatch.pipeline_of == std::vector<int>{0});
  REQUIRE(dispatch.pipeline_bounds.size() == 3);
  CHECK(dispatch.pipeline_bounds[0] == doctest::Approx(0.56).epsilon(1e-12));
  CHECK(dispatch.pipeline_bounds[1] == 0.0);
  CHECK(dispatch.pipeline_bounds[2] == 0.0);
  CHECK(dispatch.lower_bound == doctest::Approx(0.56).epsilon(1e-12));
  // A pipeline too small for every sequence (MaxLen 0: the scheme does not fit) stays empty.
  const std::vector<SchemeCost> with_unusable = {pipeline(4, 1, 0, 1e-3, 0.5, 100), pipeline(1, 2, 0, 1e-3, 0.1, 0)};
  const Dispatch unusable = assign::dispatch_greedy(sequences({30, 40}), with_unusable);
  CHECK(unusable.pipeline_of == std::vector<int>{0, 0});
  CHECK(unusable.pipeline_bounds[1] == 0.0);
#if SLUICE_HAVE_CBC
  const assign::ExactDispatch exact = assign::dispatch_exact(sequences({30, 40}), with_unusable);
  CHECK(exact.dispatch.pipeline_of == std::vector<int>{0, 0});
#endif
}

TEST_CASE("dispatch: bad input is rejected, naming the field and value") {
  const std::vector<SchemeCost> pipelines = {pipeline(4, 1, 0, 1e-3, 0.5, 100), pipeline(2, 1, 0, 2e-3, 0.1, 50)};
  const std::vector<Sequence> batch = sequences({80, 40});
  CHECK_THROWS_WITH_AS(assign::dispatch_greedy({}, pipelines), doctest::Contains("batch is empty"), invalid_input);
  CHECK_THROWS_WITH_AS(assign::dispatch_greedy(batch, {}), doctest::Contains("no pipelines"), invalid_input);
  const std::vector<SchemeCost> unsorted = {pipelines[1], pipelines[0]};
  CHECK_THROWS_WITH_AS(assign::dispatch_greedy(sequences({10}), unsorted), doctest::Contains("ordered by max_len"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(assign::dispatch_lower_bound(sequences({10}), unsorted), doctest::Contains("pipeline 1"),
                       invalid_input);
  const std::vector<Sequence> too_long = {Sequence(7, 30), Sequence(42, 101)};
  CHECK_THROWS_WITH_AS(assign::dispatch_greedy(too_long, pipelines), doctest::Contains("sequence 42 has length 101"),
                       invalid_input);
#if SLUICE_HAVE_CBC
  CHECK_THROWS_AS(assign::dispatch_exact(too_long, pipelines), invalid_input);
#endif
  const std::vector<SchemeCost> negative = {pipeline(4, 1, 0, 1e-3, 0.5, -1)};
  CHECK_THROWS_WITH_AS(assign::dispatch_greedy(batch, negative), doctest::Contains("max_len must be >= 0"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(assign::dispatch_greedy(batch, pipelines, {.trials = 0}), doctest::Contains("trials"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(assign::dispatch_greedy(batch, pipelines, {.threads = 0}), doctest::Contains("threads"),
                       invalid_input);

  const std::vector<int> too_short = {0};
  CHECK_THROWS_WITH_AS(assign::dispatch_objective(batch, pipelines, too_short), doctest::Contains("1 entries"),
                       invalid_input);
  const std::vector<int> out_of_range = {0, 2};
  CHECK_THROWS_AS(assign::dispatch_objective(batch, pipelines, out_of_range), invalid_input);
  const std::vector<int> negative_index = {-1, 0};
  CHECK_THROWS_AS(assign::dispatch_pipeline_bounds(batch, pipelines, negative_index), invalid_input);
  // Length 80 fits only pipeline 0 (J = 1).
  const std::vector<int> infeasible = {1, 0};
  CHECK_THROWS_WITH_AS(assign::dispatch_objective(batch, pipelines, infeasible),
                       doctest::Contains("only pipelines 0..0 can hold it"), invalid_input);

#if SLUICE_HAVE_CBC
  solver::CbcOptions with_start{.time_limit_seconds = 5};
  with_start.warm_start = std::vector<double>{0.0};
  CHECK_THROWS_WITH_AS(assign::dispatch_exact(batch, pipelines, with_start), doctest::Contains("warm_start"),
                       invalid_input);
#endif
}

TEST_CASE("dispatch: validate catches a broken dispatch") {
  const std::vector<SchemeCost> pipelines = {pipeline(4, 2, 0, 1e-3, 0.5, 100), pipeline(2, 1, 0, 2e-3, 0.25, 50)};
  const std::vector<Sequence> batch = sequences({80, 40, 30, 20});
  const Dispatch good = assign::dispatch_greedy(batch, pipelines);
  assign::validate(good, batch, pipelines);
  auto broken = [&](auto&& edit) {
    Dispatch copy = good;
    edit(copy);
    return copy;
  };
  CHECK_THROWS_WITH_AS(assign::validate(broken([](Dispatch& d) { d.pipeline_of.pop_back(); }), batch, pipelines),
                       doctest::Contains("pipeline_of has 3 entries"), invalid_plan);
  CHECK_THROWS_WITH_AS(assign::validate(broken([](Dispatch& d) { d.pipeline_of[0] = 1; }), batch, pipelines),
                       doctest::Contains("sequence 100 (length 80) is on pipeline 1"), invalid_plan);
  CHECK_THROWS_WITH_AS(assign::validate(broken([](Dispatch& d) { d.pipeline_bounds[1] += 0.01; }), batch, pipelines),
                       doctest::Contains("pipeline 1 bound"), invalid_plan);
  CHECK_THROWS_WITH_AS(assign::validate(broken([](Dispatch& d) { d.pipeline_bounds.pop_back(); }), batch, pipelines),
                       doctest::Contains("pipeline_bounds has 1 entries"), invalid_plan);
  CHECK_THROWS_WITH_AS(assign::validate(broken([](Dispatch& d) { d.objective *= 0.9; }), batch, pipelines),
                       doctest::Contains("objective"), invalid_plan);
  CHECK_THROWS_WITH_AS(
      assign::validate(broken([](Dispatch& d) { d.lower_bound = d.objective * 1.01; }), batch, pipelines),
      doctest::Contains("exceeds the objective"), invalid_plan);
  CHECK_THROWS_WITH_AS(
      assign::validate(broken([](Dispatch& d) { d.lower_bound = std::numeric_limits<double>::quiet_NaN(); }), batch,
                       pipelines),
      doctest::Contains("lower_bound"), invalid_plan);
}
