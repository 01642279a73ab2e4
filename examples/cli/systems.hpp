#pragma once
// The four systems `sluice simulate` and the study compare on the same batches, estimated the same way: an
// iteration takes the simulated makespan of schedule:: (the slowest pipeline; stage-to-stage links in
// Setup::problem), every plan validated. docs/cli.md defines them:
//   megatron  the best homogeneous strategy, fixed-length packing into bins of the context, 1F1B;
//   hotspa    a homogeneous strategy per length range, the ranges run one after another, switching charged;
//   dynapipe  DynaPipe's micro-batch DP, replica balancing and adaptive schedule on the best homogeneous strategy;
//   sluice    proposed heterogeneous candidates, two-stage assignment, adaptive schedule, the fastest kept;
//             its per-iteration parameter pull and gradient push charged, less a modelled overlap.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "progress.hpp"
#include "statistics.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/core/error.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/proposal/propose.hpp"
#include "sluice/proposal/sampled.hpp"
#include "sluice/schedule/iteration.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"

namespace sluice::cli::systems {

struct Setup {
  cost::Profile profile;      // resolved for the cluster: every system uses all profile.gpus() GPUs at most
  std::int64_t context = 0;   // the batches' sequences are at most this long; every system must hold it
  std::int64_t tokens = 0;    // per iteration (the proposal's normalisation)
  bool cross_node_tp = false;  // allow schemes whose TP exceeds a node, for every system alike
  schedule::ProblemOptions problem;  // hidden size and stage-to-stage link of every simulated pipeline
  assign::PlanOptions plan;          // sluice's dispatch (trials, seed, threads)
  std::uint64_t seed = 0;            // the schedule search's k-means seed
};

struct IterationOutcome {
  double seconds = 0;    // simulated iteration time; HotSPa: its length ranges' times and switching, summed
  double switching = 0;  // share of `seconds` spent moving parameters and gradients between layouts (HotSPa's
                         // switches; sluice's pull and push, the part not overlapped)
  double layout_move = 0;  // the α–β time of those moves before any overlap (switching <= layout_move)
  double imbalance = 1;  // slowest / fastest busy pipeline (HotSPa: weighted by each range's time)
  double idle = 0;       // share of pipelines without work (HotSPa: weighted likewise)
  std::string strategy;  // what ran
};

// The pipelines of one simulated iteration, for pictures and traces.
struct Timeline {
  std::vector<schedule::Simulation> pipelines;
  std::vector<std::string> names;
};

struct SystemRun {
  std::string name;
  std::optional<std::string> failure;  // why the system cannot run this scenario
  std::string configuration;           // what it was configured with, in words
  std::vector<Strategy> strategies;    // its static strategies (HotSPa: one per length range); sluice: candidates
  std::vector<double> layout_moves;    // sluice: each candidate's pull-and-push seconds before overlap
  std::vector<IterationOutcome> iterations;
  std::vector<assign::IterationPlan> plans;  // the first few iterations' plans, where the system makes them
  Timeline first;                            // iteration 0's pipelines
  [[nodiscard]] std::vector<double> seconds() const {
    std::vector<double> result;
    for (const IterationOutcome& outcome : iterations) result.push_back(outcome.seconds);
    return result;
  }
};

// What a compared batch held.
struct BatchSize {
  std::size_t sequences = 0;
  std::int64_t tokens = 0;
};

struct Comparison {
  std::vector<BatchSize> batches;    // per iteration
  std::vector<SystemRun> systems;    // megatron, hotspa, dynapipe, sluice
  std::vector<Strategy> candidates;  // sluice's proposed strategies
  std::vector<std::int64_t> bounds;  // HotSPa's length ranges (0, b0], (b0, b1], ...
};

// Iterations whose plans a SystemRun keeps for pictures (Hydraulis Fig. 12b shows five).
inline constexpr std::size_t pictured_iterations = 5;

// Homogeneous strategies Megatron-LM can run: DP·TP·PP = N (every GPU used), a scheme whose MaxLen holds
// `length` tokens and, unless allowed, whose TP stays within a node. In the profile's canonical order.
inline std::vector<Strategy> homogeneous_strategies(const Setup& setup, std::int64_t length) {
  std::vector<Strategy> result;
  const cost::Profile& profile = setup.profile;
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    if (profile.gpus() % scheme.scheme.gpus() != 0 || scheme.max_len < length) continue;
    if (!setup.cross_node_tp && scheme.scheme.tp() > profile.spec().gpus_per_node) continue;
    result.push_back(Strategy::homogeneous(scheme.scheme, static_cast<int>(profile.gpus() / scheme.scheme.gpus())));
  }
  return result;
}

// HotSPa's length ranges: upper bounds 4K, 16K, 64K, ... (×4) below the context, then the context; the paper's
// (Appendix F) <4K, 4K–16K for a 16K context and <4K, 4K–16K, 16K–32K for 32K.
inline std::vector<std::int64_t> bucket_bounds(std::int64_t context) {
  std::vector<std::int64_t> bounds;
  for (std::int64_t bound = 4096; bound < context; bound *= 4) bounds.push_back(bound);
  bounds.push_back(context);
  return bounds;
}

inline double imbalance(std::span<const double> busy_seconds) {
  double slowest = 0, fastest = std::numeric_limits<double>::infinity();
  for (const double seconds : busy_seconds) {
    slowest = std::max(slowest, seconds);
    fastest = std::min(fastest, seconds);
  }
  return busy_seconds.empty() ? 1.0 : slowest / fastest;
}

inline std::string pipeline_name(std::size_t index, const Scheme& scheme) {
  return "pipeline " + std::to_string(index) + " (" + scheme.name() + ")";
}

inline Timeline timeline_of(const assign::IterationPlan& plan, const schedule::IterationSchedule& schedule) {
  Timeline timeline;
  for (std::size_t j = 0; j < schedule.pipelines.size(); ++j)
    if (schedule.pipelines[j]) {
      timeline.pipelines.push_back(schedule.pipelines[j]->schedule.simulation);
      timeline.names.push_back(pipeline_name(j, plan.pipelines[j].scheme));
    }
  return timeline;
}

// The busy pipelines' makespans, their imbalance and idle share, of a scheduled iteration plan.
inline IterationOutcome outcome_of(const schedule::IterationSchedule& schedule, const Strategy& strategy) {
  std::vector<double> busy;
  for (const auto& pipeline : schedule.pipelines)
    if (pipeline) busy.push_back(pipeline->schedule.simulation.makespan);
  const double idle = 1.0 - static_cast<double>(busy.size()) / static_cast<double>(schedule.pipelines.size());
  return {schedule.makespan, 0, 0, imbalance(busy), idle, strategy.name()};
}

inline SystemRun failed(std::string name, std::string reason) {
  SystemRun run;
  run.name = std::move(name);
  run.failure = std::move(reason);
  return run;
}

namespace detail_systems {

// Every system runs iteration by iteration (so that a long run streams its batches): a SystemRun per strategy
// accumulates the iterations, and the system's choice among its strategies is made once all have run.
inline std::vector<SystemRun> runs_of(std::span<const Strategy> strategies) {
  std::vector<SystemRun> runs(strategies.size());
  for (std::size_t s = 0; s < strategies.size(); ++s) runs[s].strategies = {strategies[s]};
  return runs;
}

inline shard::Cluster cluster_of(const Setup& setup) {
  shard::Cluster cluster;
  cluster.gpus_per_node = setup.profile.spec().gpus_per_node;
  return cluster;
}

// The α–β seconds of a pull of the parameters into `cost`'s strategy and the push of its gradients back. The
// reduce-scatter is left out: every system synchronises gradients once and none is charged for it.
inline double pull_and_push(const shard::ShardCost& cost) { return cost.pull.seconds + cost.push.seconds; }

// What running a range on `to` adds when the optimizer states stay in `home`'s layout (shard::switching_cost);
// nothing when `to` is `home`. HotSPa switches between its ranges, so the whole move is exposed.
inline double switching_seconds(const Setup& setup, const Strategy& home, const Strategy& to) {
  if (to == home) return 0;
  const shard::Cluster cluster = cluster_of(setup);
  return pull_and_push(shard::switching_cost(home, to, setup.profile.gpus(),
                                             shard::llama_like(setup.profile.spec().model), cluster,
                                             {.gpus_per_node = cluster.gpus_per_node}));
}

// sluice's pull and push per candidate: Hydraulis §5 keeps the optimizer states fully sharded over every GPU
// (shard::sharded_layout) and each iteration pulls the parameters into the chosen strategy's layout and pushes
// its gradients back.
inline std::vector<double> sluice_layout_moves(const Setup& setup, std::span<const Strategy> candidates) {
  const shard::Model model = shard::llama_like(setup.profile.spec().model);
  const shard::OptimizerLayout layout = shard::sharded_layout(setup.profile.gpus(), model.layers);
  const shard::Cluster cluster = cluster_of(setup);
  std::vector<double> seconds;
  for (const Strategy& candidate : candidates)
    seconds.push_back(pull_and_push(
        shard::iteration_cost(layout, candidate, model, cluster, {.gpus_per_node = cluster.gpus_per_node})));
  return seconds;
}

// The part of a pull-and-push of `move` seconds that an iteration of `compute` seconds cannot hide. Hydraulis
// (§5) pulls layer by layer ahead of the forward pass and pushes each layer's gradients as the backward pass
// produces them. Modelled with the move split evenly over the model's layers and over pull and push: the first
// layer's pull precedes all compute and the last gradients' push follows it; every other layer's share hides
// under the forward pass (the pull, a third of the compute) or the backward pass (the push, two thirds) as far
// as that pass is long enough. Links are taken as free of the pipelines' own traffic.
inline double exposed_layout_move(double move, double compute, int layers) {
  const double half = move / 2;
  const double per_layer = half / layers;
  const double hidden = half - per_layer;
  return 2 * per_layer + std::max(0.0, hidden - compute / 3) + std::max(0.0, hidden - 2 * compute / 3);
}

// Iteration k of one homogeneous strategy (run.strategies[0]): fixed-length packing into `capacity`-token bins, 1F1B.
inline void fixed_length_iteration(const Setup& setup, std::span<const Sequence> batch, std::size_t k,
                                   std::int64_t capacity, SystemRun& run) {
  const Strategy& strategy = run.strategies.front();
  if (batch.empty()) {  // a length range this batch has nothing in
    run.iterations.push_back({0, 0, 0, 1, 0, strategy.name()});
    return;
  }
  const schedule::ScheduleOptions one_f_one_b{schedule::ScheduleKind::one_f_one_b, setup.seed, 0};
  const assign::IterationPlan plan = assign::plan_fixed_length(batch, strategy, setup.profile, capacity);
  assign::validate(plan, batch, setup.profile);
  const schedule::IterationSchedule scheduled =
      schedule::schedule_iteration(plan, setup.profile, one_f_one_b, setup.problem);
  schedule::validate(scheduled, plan, setup.profile, setup.problem);
  run.iterations.push_back(outcome_of(scheduled, strategy));
  if (k == 0) run.first = timeline_of(plan, scheduled);
  if (k < pictured_iterations) run.plans.push_back(plan);
}

// Iteration k of DynaPipe on one homogeneous strategy (run.strategies[0]): its pipelines are the data-parallel
// replicas.
inline void dynapipe_iteration(const Setup& setup, std::span<const Sequence> batch, std::size_t k, SystemRun& run) {
  const Strategy& strategy = run.strategies.front();
  const StrategyPart& part = strategy.parts().front();
  const microbatch::StageCostSetup cost = microbatch::stage_cost(setup.profile.at(part.scheme));
  schedule::PipelinePlanOptions options;
  options.stages = part.scheme.pp();
  options.replicas = part.pipelines;
  options.micro_batch_memory = cost.memory_limit;
  options.schedule = {schedule::ScheduleKind::cyclic, setup.seed, 0};
  options.problem = setup.problem;
  std::vector<microbatch::Sample> samples;
  for (const Sequence& sequence : batch) samples.push_back({sequence.id(), sequence.length(), 0});
  const std::span<const microbatch::Sample> span(samples);
  const schedule::PipelineRunPlan plan = schedule::plan_pipeline(span, cost.model, options);
  schedule::validate(plan, span, cost.model, options);
  std::vector<double> busy;
  for (std::size_t r = 0; r < plan.replicas.size(); ++r) {
    if (plan.replicas[r].micro_batches.empty()) continue;
    const schedule::Simulation& simulation = plan.replicas[r].schedule.simulation;
    busy.push_back(simulation.makespan);
    if (k == 0) {
      run.first.pipelines.push_back(simulation);
      run.first.names.push_back(pipeline_name(r, part.scheme));
    }
  }
  const double idle = 1.0 - static_cast<double>(busy.size()) / static_cast<double>(plan.replicas.size());
  run.iterations.push_back({plan.makespan, 0, 0, imbalance(busy), idle, strategy.name()});
}

// Iteration k of sluice over its candidates (run.strategies). The choice adds each candidate's pull-and-push share
// that no overlap can hide (exposed_layout_move with unbounded compute); the iteration is then charged what its
// simulated makespan leaves exposed. Every candidate is dispatched twice: charging the V step agrees with
// packing's 1F1B estimate, leaving it out with a schedule that overlaps unequal micro-batches; the simulator
// judges (ties to the V step).
inline void sluice_iteration(const Setup& setup, std::span<const Sequence> batch, std::size_t k, SystemRun& run) {
  const schedule::ScheduleOptions cyclic{schedule::ScheduleKind::cyclic, setup.seed, 0};
  const int layers = shard::llama_like(setup.profile.spec().model).layers;
  assign::PlanOptions plan = setup.plan;
  plan.candidate_overhead.clear();
  for (const double move : run.layout_moves)
    plan.candidate_overhead.push_back(exposed_layout_move(move, std::numeric_limits<double>::infinity(), layers));
  std::optional<schedule::SimulatedIteration> kept;
  bool kept_v_step = true;
  for (const bool v_step : {true, false}) {
    plan.dispatch.v_step = v_step;
    schedule::SimulatedIteration candidate =
        schedule::plan_simulated_iteration(batch, run.strategies, setup.profile, plan, cyclic, setup.problem);
    if (!kept || candidate.total() < kept->total()) {
      kept = std::move(candidate);
      kept_v_step = v_step;
    }
  }
  plan.dispatch.v_step = kept_v_step;
  const schedule::SimulatedIteration& iteration = *kept;
  schedule::validate(iteration, batch, run.strategies, setup.profile, plan, setup.problem);
  IterationOutcome outcome = outcome_of(iteration.schedule, iteration.plan.strategy);
  outcome.layout_move = run.layout_moves[iteration.chosen];
  outcome.switching = exposed_layout_move(outcome.layout_move, outcome.seconds, layers);
  outcome.seconds += outcome.switching;
  run.iterations.push_back(std::move(outcome));
  if (k == 0) run.first = timeline_of(iteration.plan, iteration.schedule);
  if (k < pictured_iterations) run.plans.push_back(iteration.plan);
}

// The run with the lowest mean iteration (ties to the earlier).
inline std::optional<SystemRun> best_of(std::vector<SystemRun> runs) {
  std::optional<SystemRun> best;
  double best_mean = std::numeric_limits<double>::infinity();
  for (SystemRun& run : runs) {
    const double seconds = mean(run.seconds());
    if (!best || seconds < best_mean) {
      best_mean = seconds;
      best = std::move(run);
    }
  }
  return best;
}

// The sequences of `batch` in the length range (lower, upper].
inline std::vector<Sequence> bucket(std::span<const Sequence> batch, std::int64_t lower, std::int64_t upper) {
  std::vector<Sequence> result;
  for (const Sequence& sequence : batch)
    if (sequence.length() > lower && sequence.length() <= upper) result.push_back(sequence);
  return result;
}

inline std::string no_homogeneous(const Setup& setup, std::int64_t length) {
  return sluice::detail::concat("no homogeneous strategy of ", setup.profile.name(), " on ", setup.profile.gpus(),
                                " GPUs holds ", length, " tokens",
                                setup.cross_node_tp ? "" : " with TP within a node (try --cross-node-tp)");
}

}  // namespace detail_systems

// (1) Megatron-LM: one static homogeneous strategy, the best by mean over the batches of those holding the
// context; sequences packed best-fit-decreasing into bins of the context (assign::plan_fixed_length), bins dealt
// round-robin to the pipelines; 1F1B. `runs`: each homogeneous strategy's run over every batch.
inline SystemRun megatron_of(const Setup& setup, std::vector<SystemRun> runs) {
  const std::size_t considered = runs.size();
  auto best = detail_systems::best_of(std::move(runs));
  if (!best) return failed("megatron", detail_systems::no_homogeneous(setup, setup.context));
  best->name = "megatron";
  best->configuration = sluice::detail::concat(best->strategies.front().name(), ", the fastest of ", considered,
                                               " homogeneous strategies holding ", setup.context,
                                               " tokens; fixed-length packing into ", setup.context,
                                               "-token bins; 1F1B");
  return *std::move(best);
}

inline SystemRun megatron(const Setup& setup, std::span<const std::vector<Sequence>> batches,
                          std::span<const Strategy> strategies, Progress& progress) {
  std::vector<SystemRun> runs = detail_systems::runs_of(strategies);
  for (SystemRun& run : runs)
    for (std::size_t k = 0; k < batches.size(); ++k) {
      progress.advance();
      detail_systems::fixed_length_iteration(setup, batches[k], k, setup.context, run);
    }
  return megatron_of(setup, std::move(runs));
}

// (2) HotSPa: each iteration's sequences bucketed by length range, each range run on its own homogeneous
// strategy (the best by mean of those holding the range's upper bound, fixed-length packing into bins of that
// bound, 1F1B), the ranges one after another. The optimizer states stay in the first range's strategy's layout;
// a range on another strategy pays the switch there and back (detail_systems::switching_seconds). `ranges[b]`:
// the runs of range b's strategies over every batch's bucket.
inline SystemRun hotspa_of(const Setup& setup, std::span<const std::int64_t> bounds,
                           std::vector<std::vector<SystemRun>> ranges_runs) {
  std::vector<SystemRun> ranges;
  std::vector<Strategy> chosen;
  std::string configuration;
  std::int64_t lower = 0;
  for (std::size_t b = 0; b < bounds.size(); ++b) {
    const std::int64_t upper = bounds[b];
    auto best = detail_systems::best_of(std::move(ranges_runs[b]));
    if (!best) return failed("hotspa", detail_systems::no_homogeneous(setup, upper));
    chosen.push_back(best->strategies.front());
    configuration += sluice::detail::concat(b == 0 ? "" : " | ", "(", lower, ", ", upper, "]: ", chosen.back().name());
    ranges.push_back(*std::move(best));
    lower = upper;
  }
  std::vector<double> switch_seconds;
  for (const Strategy& strategy : chosen) switch_seconds.push_back(detail_systems::switching_seconds(setup, chosen[0], strategy));

  SystemRun run;
  run.name = "hotspa";
  run.configuration = configuration + "; fixed-length packing, 1F1B; switching charged";
  run.strategies = chosen;
  for (std::size_t k = 0; k < ranges.front().iterations.size(); ++k) {
    IterationOutcome total{0, 0, 0, 0, 0, {}};
    double weighted_imbalance = 0, weighted_idle = 0, busy_seconds = 0;
    for (std::size_t b = 0; b < ranges.size(); ++b) {
      const IterationOutcome& range = ranges[b].iterations[k];
      if (range.seconds == 0) continue;  // nothing of this batch in the range
      total.seconds += range.seconds + switch_seconds[b];
      total.switching += switch_seconds[b];
      total.layout_move += switch_seconds[b];
      weighted_imbalance += range.seconds * range.imbalance;
      weighted_idle += range.seconds * range.idle;
      busy_seconds += range.seconds;
      total.strategy += (total.strategy.empty() ? "" : " | ") + range.strategy;
    }
    total.imbalance = weighted_imbalance / busy_seconds;
    total.idle = weighted_idle / busy_seconds;
    run.iterations.push_back(std::move(total));
  }
  // Pictures show the range that holds the most of iteration 0's time.
  std::size_t widest = 0;
  for (std::size_t b = 1; b < ranges.size(); ++b)
    if (ranges[b].iterations.front().seconds > ranges[widest].iterations.front().seconds) widest = b;
  run.first = std::move(ranges[widest].first);
  return run;
}

// (3) DynaPipe on the best homogeneous strategy (by mean, of those holding the context): per iteration the
// mini-batch is ordered, cut into micro-batches by the DP under the per-micro-batch memory limit of the profile's
// ⟨TP, PP⟩ scheme (microbatch::stage_cost), balanced over the strategy's pipelines as data-parallel replicas
// (Karmarkar–Karp), and every replica scheduled by the adaptive cyclic search (1F1B kept when faster).
inline SystemRun dynapipe_of(const Setup& setup, std::vector<SystemRun> runs) {
  const std::size_t considered = runs.size();
  auto best = detail_systems::best_of(std::move(runs));
  if (!best) return failed("dynapipe", detail_systems::no_homogeneous(setup, setup.context));
  best->name = "dynapipe";
  best->configuration = sluice::detail::concat(best->strategies.front().name(), ", the fastest of ", considered,
                                               " homogeneous strategies under DynaPipe; micro-batch DP (padded), ",
                                               "Karmarkar-Karp over its pipelines, adaptive schedule");
  return *std::move(best);
}

// (4) sluice: every iteration, each candidate (propose_candidates) dispatched and packed (two-stage assignment) and its
// pipelines scheduled by the adaptive cyclic search (1F1B kept when faster); the candidate with the lowest
// simulated makespan plus pull and push is kept (schedule::plan_simulated_iteration). Iterations are added by
// sluice_iteration.
inline SystemRun sluice_system(const Setup& setup, std::span<const Strategy> candidates) {
  SystemRun run;
  run.name = "sluice";
  run.configuration = sluice::detail::concat(candidates.size(), " candidates (proposed, and the homogeneous ",
                                             "strategies holding the context); two-stage assignment, adaptive ",
                                             "schedule; the fastest simulated candidate per iteration; pull and ",
                                             "push charged, less the modelled overlap");
  run.strategies.assign(candidates.begin(), candidates.end());
  if (!candidates.empty()) run.layout_moves = detail_systems::sluice_layout_moves(setup, candidates);
  return run;
}

inline SystemRun sluice_run(const Setup& setup, std::span<const std::vector<Sequence>> batches,
                            std::span<const Strategy> candidates, Progress& progress) {
  SystemRun run = sluice_system(setup, candidates);
  for (std::size_t k = 0; k < batches.size(); ++k) {
    detail_systems::sluice_iteration(setup, batches[k], k, run);
    progress.advance(static_cast<std::int64_t>(candidates.size()));
  }
  return run;
}

// sluice's candidates: proposal::propose_sampled on the dataset for the context, the cluster and the token budget
// (the set of at most 8 strategies with the lowest mean planned time over sampled batches, from a pool seeded by the
// paper's DP), then every homogeneous strategy holding the context that the set left out; or nothing (with the
// reason) when no usable scheme holds the context. The homogeneous strategies give batches unlike the sampled ones
// a fallback, as the authors' code always adds its homogeneous layout.
inline std::vector<Strategy> propose_candidates(const Setup& setup, const data::LengthDataset& dataset,
                                                std::string& failure) {
  proposal::ProposeOptions options;
  options.gpus = setup.profile.gpus();
  options.max_len = setup.context;
  options.tokens_per_iteration = static_cast<double>(setup.tokens);
  options.tp_within_node = !setup.cross_node_tp;
  bool held = false;
  for (const cost::SchemeCost& scheme : setup.profile.schemes())
    held = held || (scheme.max_len >= setup.context &&
                    (setup.cross_node_tp || scheme.scheme.tp() <= setup.profile.spec().gpus_per_node));
  if (!held) {
    failure = sluice::detail::concat("no scheme of ", setup.profile.name(), " on ", setup.profile.gpus(),
                                     " GPUs holds ", setup.context, " tokens",
                                     setup.cross_node_tp ? "" : " with TP within a node (try --cross-node-tp)");
    return {};
  }
  proposal::SampledOptions sampling;
  sampling.paper = options;
  sampling.seed = setup.seed + 1;  // batches other than the simulated ones (drawn with setup.seed)
  sampling.dispatch.seed = setup.seed;
  const proposal::SampledProposal result = proposal::propose_sampled(dataset, setup.profile, sampling);
  proposal::validate(result, setup.profile);
  std::vector<Strategy> candidates = result.strategies();
  for (const Strategy& strategy : homogeneous_strategies(setup, setup.context))
    if (std::ranges::find(candidates, strategy) == candidates.end()) candidates.push_back(strategy);
  return candidates;
}

// The four systems on `iterations` batches drawn one at a time from `next_batch`: every system plans a batch, then
// it is dropped, so memory does not grow with the batches' size times their number. `dataset` (truncated to the
// context) is what sluice proposes from. `terminal`: where a progress bar may be drawn, or nullptr.
inline Comparison compare(const Setup& setup, const data::LengthDataset& dataset, std::size_t iterations,
                          const std::function<std::vector<Sequence>()>& next_batch, std::ostream* terminal) {
  sluice::detail::require(iterations > 0, "simulate: no iterations to simulate");
  Comparison comparison;
  comparison.bounds = bucket_bounds(setup.context);
  const std::vector<Strategy> homogeneous = homogeneous_strategies(setup, setup.context);
  std::vector<std::vector<Strategy>> by_range;
  for (const std::int64_t bound : comparison.bounds) by_range.push_back(homogeneous_strategies(setup, bound));
  std::string sluice_failure;
  comparison.candidates = propose_candidates(setup, dataset, sluice_failure);

  // Steps: one per (strategy, batch) evaluated, a sluice iteration counting one per candidate.
  std::int64_t steps = 2 * static_cast<std::int64_t>(homogeneous.size()) +
                       static_cast<std::int64_t>(comparison.candidates.size());
  if (!homogeneous.empty())
    for (const auto& strategies : by_range) steps += static_cast<std::int64_t>(strategies.size());
  Progress progress(terminal, "simulate", steps * static_cast<std::int64_t>(iterations));

  std::vector<SystemRun> megatron_runs = detail_systems::runs_of(homogeneous);
  std::vector<std::vector<SystemRun>> hotspa_runs;
  if (!homogeneous.empty())  // else the last range, the context's, has no strategy either
    for (const auto& strategies : by_range) hotspa_runs.push_back(detail_systems::runs_of(strategies));
  std::vector<SystemRun> dynapipe_runs = detail_systems::runs_of(homogeneous);
  SystemRun sluice = sluice_system(setup, comparison.candidates);
  for (std::size_t k = 0; k < iterations; ++k) {
    const std::vector<Sequence> batch = next_batch();
    std::int64_t tokens = 0;
    for (const Sequence& sequence : batch) tokens += sequence.length();
    comparison.batches.push_back({batch.size(), tokens});
    for (SystemRun& run : megatron_runs) {
      progress.advance();
      detail_systems::fixed_length_iteration(setup, batch, k, setup.context, run);
    }
    std::int64_t lower = 0;
    for (std::size_t b = 0; b < hotspa_runs.size(); ++b) {
      const std::vector<Sequence> range = detail_systems::bucket(batch, lower, comparison.bounds[b]);
      for (SystemRun& run : hotspa_runs[b]) {
        progress.advance();
        detail_systems::fixed_length_iteration(setup, range, k, comparison.bounds[b], run);
      }
      lower = comparison.bounds[b];
    }
    for (SystemRun& run : dynapipe_runs) {
      progress.advance();
      detail_systems::dynapipe_iteration(setup, batch, k, run);
    }
    if (!comparison.candidates.empty()) {
      detail_systems::sluice_iteration(setup, batch, k, sluice);
      progress.advance(static_cast<std::int64_t>(comparison.candidates.size()));
    }
  }

  comparison.systems.push_back(megatron_of(setup, std::move(megatron_runs)));
  if (homogeneous.empty())
    comparison.systems.push_back(failed("hotspa", detail_systems::no_homogeneous(setup, setup.context)));
  else
    comparison.systems.push_back(hotspa_of(setup, comparison.bounds, std::move(hotspa_runs)));
  comparison.systems.push_back(dynapipe_of(setup, std::move(dynapipe_runs)));
  comparison.systems.push_back(comparison.candidates.empty() ? failed("sluice", sluice_failure) : std::move(sluice));
  return comparison;
}

inline Comparison compare(const Setup& setup, const data::LengthDataset& dataset,
                          std::span<const std::vector<Sequence>> batches, std::ostream* terminal) {
  std::size_t next = 0;
  return compare(setup, dataset, batches.size(), [&] { return batches[next++]; }, terminal);
}

}  // namespace sluice::cli::systems
