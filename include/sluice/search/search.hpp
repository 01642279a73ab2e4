#pragma once
// Galvatron-Base (Algorithm 1) and Galvatron-BMW (Algorithm 2): for each global batch, PP degree and
// micro-batch count, a partition of the layers into stages and, per stage, the layer DP's strategies;
// pipeline cost by Eq. 9, throughput B / C. BMW starts from the memory-balanced partition p_m and moves
// the slowest stage's boundary layers towards time balance while Eq. 7/8 hold (Validate), keeping the
// best partition seen. Baselines run the same search over the limited spaces of DDP, ZeRO-3, Megatron
// TP, GPipe, Megatron DP+TP and DeepSpeed DP+PP.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/search/detail/context.hpp"
#include "sluice/search/detail/searcher.hpp"
#include "sluice/search/estimator.hpp"
#include "sluice/search/model.hpp"
#include "sluice/search/space.hpp"
#include "sluice/search/types.hpp"

namespace sluice::search {

struct Baseline {
  std::string name;
  std::optional<Plan> plan;  // nullopt: nothing in this space fits
};

struct SearchReport {
  Plan best;                 // Galvatron-BMW (never below Base)
  std::optional<Plan> base;  // Galvatron-Base (never below a baseline)
  std::vector<Baseline> baselines;
};

// The limited spaces the paper compares against, searched with the same estimator.
inline std::vector<std::pair<std::string, SpaceOptions>> baseline_spaces(std::int64_t gpus) {
  const int n = static_cast<int>(gpus);
  SpaceOptions none{.dp = false, .sdp = false, .tp = false, .ckpt = false, .tp_outer = false, .pp_degrees = {1}};
  SpaceOptions dp = none;
  dp.dp = true;
  SpaceOptions sdp = none;
  sdp.sdp = true;
  SpaceOptions tp = none;
  tp.tp = true;
  SpaceOptions pp = none;
  pp.pp_degrees = {n};
  SpaceOptions dp_tp = dp;
  dp_tp.tp = true;
  SpaceOptions dp_pp = dp;
  dp_pp.pp_degrees.clear();
  return {{"dp", dp}, {"sdp", sdp}, {"tp", tp}, {"pp", pp}, {"dp+tp", dp_tp}, {"dp+pp", dp_pp}};
}

// Galvatron-Base (Alg. 1) over `space`: even partitions, every P and m, the batch sweep.
inline std::optional<Plan> search_base(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options,
                                       const std::string& method = "base") {
  detail::Searcher searcher(model, cluster, options);
  return searcher.sweep(options.space, false, method);
}

// The BMW partition search of one (B, P, m) over the options' space (for inspection and tests).
inline BalanceTrace balance_trace(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options,
                                  int pp, std::int64_t batch, int micro_batches) {
  detail::Searcher searcher(model, cluster, options);
  sluice::require(
      pp >= 1 && pp <= static_cast<int>(model.layers.size()) && cluster.gpus % pp == 0 && (pp & (pp - 1)) == 0,
      "balance: pp must be a power of 2 dividing the GPU count and <= layers, got ", pp);
  sluice::require(micro_batches >= 1 && batch >= 1 && batch % micro_batches == 0 &&
                      !detail::micro_batch_strategies(static_cast<int>(cluster.gpus / pp), options.space,
                                                      detail::heads_gcd(model), batch / micro_batches)
                           .empty(),
                  "balance: batch ", batch, " / micro_batches ", micro_batches,
                  " leaves a micro-batch no DP degree of the space divides");
  detail::Context context = searcher.context(options.space, pp, batch, micro_batches);
  return detail::balance_partition(context, static_cast<int>(model.layers.size()));
}

// Base, the baselines and BMW. Base keeps the best of its own search and the baselines' (those inside
// the options' space), BMW the best of its own and Base's, so BMW >= Base >= every such baseline. Raises
// sluice::infeasible when nothing in the space fits.
// `progress`, when given, is called after each of the searches (Base, every baseline, BMW) with the searches
// done and their number.
inline SearchReport search(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options,
                           const std::function<void(std::size_t done, std::size_t searches)>& progress = {}) {
  detail::Searcher searcher(model, cluster, options);
  SearchReport report;
  std::vector<std::pair<std::string, SpaceOptions>> spaces = baseline_spaces(cluster.gpus);
  const std::size_t searches = spaces.size() + 2;
  std::size_t done = 0;
  auto advance = [&] {
    if (progress) progress(++done, searches);
  };
  std::optional<Plan> base = searcher.sweep(options.space, false, "base");
  advance();
  for (auto& [name, space] : spaces) {
    space.max_tp = options.space.max_tp;
    Baseline baseline{name, searcher.sweep(space, false, name)};
    advance();
    // A baseline outside a restricted search space is compared, never adopted.
    if (baseline.plan && detail::within(*baseline.plan, options.space, model)) detail::keep_better(base, baseline.plan);
    report.baselines.push_back(std::move(baseline));
  }
  report.base = base;
  std::optional<Plan> best = searcher.sweep(options.space, true, "bmw");
  advance();
  detail::keep_better(best, base);
  if (!best)
    throw infeasible(sluice::concat("search: no strategy fits ", model.name, " on the ", cluster.gpus,
                                    " GPUs of cluster ", cluster.name, " within ", detail::budget(options, cluster),
                                    " bytes per device"));
  report.best = std::move(*best);
  return report;
}

// `plan` (its PP degree, batch, micro-batches, partition and strategies) costed by the estimator: every stage's
// times and memory, Eq. 9's iteration time and the throughput, whichever search or system chose it. The partition
// must cover the model's layers and every strategy use the stage's GPUs. A plan without a vocabulary strategy gets
// the fastest of the options' space whose stages fit the budget (the first of equals, as the search picks), or the
// fastest when none fits.
inline Plan evaluate(Plan plan, const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options) {
  const AnalyticEstimator estimator(model, cluster);
  const int layers = estimator.layers();
  sluice::require(
      plan.pp >= 1 && cluster.gpus % plan.pp == 0 && plan.stages.size() == static_cast<std::size_t>(plan.pp),
      "evaluate: ", plan.stages.size(), " stages for pp ", plan.pp, " on ", cluster.gpus, " GPUs");
  sluice::require(plan.global_batch >= 1 && plan.micro_batches >= 1 && plan.global_batch % plan.micro_batches == 0,
                  "evaluate: global batch ", plan.global_batch, " is not a multiple of ", plan.micro_batches,
                  " micro-batches");
  const std::int64_t group = cluster.gpus / plan.pp;
  const std::int64_t micro_batch = plan.global_batch / plan.micro_batches;
  auto fits_a_stage = [&](const LayerStrategy& strategy) {
    return strategy.group() == group && micro_batch % strategy.dp == 0;
  };
  plan.gpus = cluster.gpus;
  // The layers' share of every stage: times without the vocabulary layers, model states and activation peak.
  struct Layers {
    double sync = 0, nosync = 0, memory = 0;
  };
  std::vector<Layers> parts;
  int next = 0;
  for (int i = 0; i < plan.pp; ++i) {
    StagePlan& stage = plan.stages[static_cast<std::size_t>(i)];
    sluice::require(stage.first_layer == next && !stage.strategies.empty() &&
                        next + static_cast<int>(stage.strategies.size()) <= layers,
                    "evaluate: stage ", i, " must start at layer ", next, " and hold at least one of the model's ",
                    layers, " layers");
    next += static_cast<int>(stage.strategies.size());
    const double factor = detail::in_flight(options.schedule, i, plan.pp, plan.micro_batches);
    double sync = 0, nosync = 0, states = 0, forward = 0, peak = 0;
    for (std::size_t k = 0; k < stage.strategies.size(); ++k) {
      const LayerStrategy& strategy = stage.strategies[k];
      const int layer = stage.first_layer + static_cast<int>(k);
      sluice::require(fits_a_stage(strategy), "evaluate: layer ", layer, ": strategy ", strategy.name(),
                      " does not use the ", group, " GPUs of a stage or divide its ", micro_batch,
                      "-sample micro-batch");
      const LayerCost c = estimator.layer(layer, strategy, micro_batch, plan.micro_batches);
      const double move = k > 0 ? estimator.transition(layer, stage.strategies[k - 1], strategy, micro_batch) : 0.0;
      sync += c.time_sync + move;
      nosync += c.time_nosync + move;
      states += c.state_bytes;
      forward += factor * c.forward_bytes;
      peak = std::max(peak, forward + c.backward_bytes);
    }
    if (i + 1 < plan.pp) {
      const double p2p = estimator.p2p(next - 1, group, micro_batch);
      sync += p2p;
      nosync += p2p;
    }
    parts.push_back({sync, nosync, states + peak});
  }
  sluice::require(next == layers, "evaluate: the stages hold ", next, " of the model's ", layers, " layers");

  std::vector<LayerStrategy> candidates;
  if (plan.vocabulary) {
    sluice::require(fits_a_stage(*plan.vocabulary) && !plan.vocabulary->ckpt, "evaluate: vocabulary strategy ",
                    plan.vocabulary->name(), " does not use the ", group, " GPUs of a stage, divide its ", micro_batch,
                    "-sample micro-batch, or is checkpointed");
    candidates.push_back(*plan.vocabulary);
  } else {
    for (const LayerStrategy& strategy :
         detail::micro_batch_strategies(static_cast<int>(group), options.space, detail::heads_gcd(model), micro_batch))
      if (!strategy.ckpt) candidates.push_back(strategy);
    sluice::require(!candidates.empty(), "evaluate: the space has no strategy for the vocabulary layers of a ", group,
                    "-GPU stage");
  }
  // Each candidate's extras per stage; the plan takes the fastest whose stages fit the budget, else the fastest.
  const double budget = static_cast<double>(detail::budget(options, cluster));
  std::vector<StageExtra> extras;
  std::vector<StageExtra> best_extras;
  double best_iteration = 0;
  bool best_fits = false;
  for (const LayerStrategy& vocabulary : candidates) {
    extras.clear();
    double slowest = 0;
    double total = 0;
    bool fits = true;
    for (int i = 0; i < plan.pp; ++i) {
      const double factor = detail::in_flight(options.schedule, i, plan.pp, plan.micro_batches);
      const StageExtra& extra =
          extras.emplace_back(estimator.stage_extra(i, plan.pp, vocabulary, micro_batch, plan.micro_batches, factor));
      const Layers& part = parts[static_cast<std::size_t>(i)];
      slowest = std::max(slowest, part.nosync + extra.time_nosync);
      total += part.sync + extra.time_sync;
      fits = fits && part.memory + extra.bytes <= budget;
    }
    const double iteration = (plan.micro_batches - 1) * slowest + total;  // Eq. 9
    if (best_extras.empty() || (fits && !best_fits) || (fits == best_fits && iteration < best_iteration)) {
      best_extras = extras;
      best_iteration = iteration;
      best_fits = fits;
      plan.vocabulary = vocabulary;
    }
  }
  for (int i = 0; i < plan.pp; ++i) {
    StagePlan& stage = plan.stages[static_cast<std::size_t>(i)];
    const Layers& part = parts[static_cast<std::size_t>(i)];
    const StageExtra& extra = best_extras[static_cast<std::size_t>(i)];
    stage.time_sync = part.sync + extra.time_sync;
    stage.time_nosync = part.nosync + extra.time_nosync;
    stage.memory_bytes = part.memory + extra.bytes;
  }
  plan.iteration_seconds = best_iteration;
  plan.throughput = static_cast<double>(plan.global_batch) / plan.iteration_seconds;
  return plan;
}

// Checks every invariant of a plan against the model, the cluster and the options it was searched with:
// the GPU count, PP degree and micro-batches, a contiguous partition of every layer, strategies from the
// stage's space, and every time and memory figure re-derived from the estimator (memory within budget).
inline void validate(const Plan& plan, const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options,
                     const SpaceOptions& space) {
  const PlanCheck check("search plan: ");
  const auto layers = static_cast<int>(model.layers.size());
  if (plan.gpus != cluster.gpus) check.fail("gpus ", plan.gpus, " != cluster's ", cluster.gpus);
  const std::vector<int> degrees = detail::pp_degrees(space, cluster.gpus, layers);
  if (std::ranges::find(degrees, plan.pp) == degrees.end()) check.fail("pp ", plan.pp, " is not an allowed degree");
  const std::int64_t group = cluster.gpus / plan.pp;
  if (!detail::tried_micro_batches(plan.global_batch, plan.pp, plan.micro_batches, detail::accumulates(options)))
    check.fail("global batch ", plan.global_batch, " and ", plan.micro_batches, " micro-batches: not a count the ",
               plan.pp == 1 ? "one-stage " : "", "search tries");
  if (plan.stages.size() != static_cast<std::size_t>(plan.pp))
    check.fail(plan.stages.size(), " stages for pp ", plan.pp);
  const std::vector<LayerStrategy> allowed = detail::micro_batch_strategies(
      static_cast<int>(group), space, detail::heads_gcd(model), plan.global_batch / std::max(plan.micro_batches, 1));
  int next = 0;
  for (int i = 0; i < plan.pp; ++i) {
    const StagePlan& stage = plan.stages[static_cast<std::size_t>(i)];
    if (stage.first_layer != next) check.fail("stage ", i, " starts at layer ", stage.first_layer, ", expected ", next);
    if (stage.strategies.empty()) check.fail("stage ", i, " has no layers");
    next += static_cast<int>(stage.strategies.size());
    if (next > layers) check.fail("the stages hold more than the model's ", layers, " layers");
    for (std::size_t k = 0; k < stage.strategies.size(); ++k)
      if (std::ranges::find(allowed, stage.strategies[k]) == allowed.end())
        check.fail("stage ", i, " layer ", stage.first_layer + static_cast<int>(k), ": strategy ",
                   stage.strategies[k].name(), " is not in the space of a ", group,
                   "-GPU stage or does not divide its ", plan.global_batch / std::max(plan.micro_batches, 1),
                   "-sample micro-batch");
  }
  if (next != layers) check.fail("the stages hold ", next, " of ", layers, " layers");
  if (plan.vocabulary && (plan.vocabulary->ckpt || std::ranges::find(allowed, *plan.vocabulary) == allowed.end()))
    check.fail("vocabulary strategy ", plan.vocabulary->name(), " is not in the space of a ", group,
               "-GPU stage without checkpointing");
  const Plan derived = evaluate(plan, model, cluster, options);
  const double budget = static_cast<double>(detail::budget(options, cluster));
  for (int i = 0; i < plan.pp; ++i) {
    const StagePlan& stage = plan.stages[static_cast<std::size_t>(i)];
    const StagePlan& expected = derived.stages[static_cast<std::size_t>(i)];
    if (!nearly_equal(expected.memory_bytes, stage.memory_bytes))
      check.fail("stage ", i, ": memory ", stage.memory_bytes, " != ", expected.memory_bytes);
    if (expected.memory_bytes > budget * (1 + 1e-12))
      check.fail("stage ", i, ": memory ", expected.memory_bytes, " exceeds the budget ", budget);
    if (!nearly_equal(expected.time_sync, stage.time_sync) || !nearly_equal(expected.time_nosync, stage.time_nosync))
      check.fail("stage ", i, ": times ", stage.time_sync, "/", stage.time_nosync, " != ", expected.time_sync, "/",
                 expected.time_nosync);
  }
  if (!nearly_equal(derived.iteration_seconds, plan.iteration_seconds))
    check.fail("iteration ", plan.iteration_seconds, " != Eq. 9's ", derived.iteration_seconds);
  if (!nearly_equal(plan.throughput, static_cast<double>(plan.global_batch) / derived.iteration_seconds))
    check.fail("throughput ", plan.throughput,
               " != B / C = ", static_cast<double>(plan.global_batch) / derived.iteration_seconds);
}

// A report's plans, each against the space that produced it.
inline void validate(const SearchReport& report, const ModelSpec& model, const ClusterSpec& cluster,
                     const SearchOptions& options) {
  const auto spaces = baseline_spaces(cluster.gpus);
  auto space_of = [&](const Plan& plan) {
    for (auto [name, space] : spaces)
      if (name == plan.method) {
        space.max_tp = options.space.max_tp;
        return space;
      }
    return options.space;
  };
  validate(report.best, model, cluster, options, space_of(report.best));
  if (report.base) validate(*report.base, model, cluster, options, space_of(*report.base));
  for (const Baseline& baseline : report.baselines) {
    if (baseline.plan) validate(*baseline.plan, model, cluster, options, space_of(*baseline.plan));
    if (baseline.plan && detail::within(*baseline.plan, options.space, model) &&
        (!report.base || baseline.plan->throughput > report.base->throughput))
      throw invalid_plan(sluice::concat("search report: baseline ", baseline.name, " beats Base"));
  }
  if (report.base && report.base->throughput > report.best.throughput)
    throw invalid_plan("search report: Base beats BMW");
}

}  // namespace sluice::search
