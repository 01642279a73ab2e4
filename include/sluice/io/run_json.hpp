#pragma once
// JSON for the reports of the CLI's commands, so that a program reads what `sluice <command> --json` prints:
// "sluice.schedule_run" (version 1, its CP variant 2), "sluice.shard_run" (version 1, its CP variant 2),
// "sluice.simulate_run" (version 12, its CP variant 13; see simulate_run_version) and "sluice.trace_run" (version 2,
// its CP variant 3; 1 had no layout moves and is refused by its version). Each report is a value type built from
// the library's results (schedule_run, shard_run, simulate_run, trace_run) and written with
// io::to_document; its reader, io::from_document, checks every member and the invariants between members that
// cost nothing to check.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/compare/compare.hpp"
#include "sluice/compare/microbatching.hpp"
#include "sluice/compare/summary.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/compare_json.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/microbatch_json.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/plan/layout_moves.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"

namespace sluice::io {

// One layer block of a shard run: its layers and the mutual slice granularity of each plan.
struct ShardRunBlock {
  int layer_begin = 0;
  int layer_end = 0;
  std::int64_t pull_granularity = 0;
  std::int64_t push_granularity = 0;
  friend bool operator==(const ShardRunBlock&, const ShardRunBlock&) = default;
};

// What `sluice shard` reports: one strategy's pull and push plans, counted and costed; with --plans, the plans.
struct ShardRun {
  std::int64_t gpus = 0;
  Strategy strategy;
  std::optional<Strategy> previous;  // the strategy whose layout the optimizer keeps; none: fully sharded
  shard::Model model;
  shard::Cluster cluster;
  std::int64_t grid = 0;
  int pipelines = 0;
  std::vector<ShardRunBlock> blocks;
  std::size_t pull_sends = 0;
  std::size_t pull_local_moves = 0;
  std::size_t push_sends = 0;
  std::size_t push_local_moves = 0;
  std::size_t rs_groups = 0;
  shard::ShardCost cost;
  // The full plans: all four or none.
  std::optional<shard::Placement> placement;
  std::optional<shard::OptimizerLayout> layout;
  std::optional<shard::PullPlan> pull;
  std::optional<shard::PushPlan> push;
  friend bool operator==(const ShardRun&, const ShardRun&) = default;
};

// The report of a pull and a push planned for `strategy`; `with_plans` keeps the plans themselves.
inline ShardRun shard_run(std::int64_t gpus, const Strategy& strategy, const std::optional<Strategy>& previous,
                          const shard::Model& model, const shard::Cluster& cluster, const shard::Placement& placement,
                          const shard::OptimizerLayout& layout, const shard::PullPlan& pull,
                          const shard::PushPlan& push, bool with_plans) {
  ShardRun run{.gpus = gpus,
               .strategy = strategy,
               .previous = previous,
               .model = model,
               .cluster = cluster,
               .grid = push.grid,
               .pipelines = push.pipelines,
               .blocks = {},
               .pull_sends = pull.sends.size(),
               .pull_local_moves = pull.local_moves.size(),
               .push_sends = push.sends.size(),
               .push_local_moves = push.local_moves.size(),
               .rs_groups = push.rs_groups.size(),
               .cost = shard::plan_cost(pull, push, cluster),
               .placement = {},
               .layout = {},
               .pull = {},
               .push = {}};
  for (std::size_t b = 0; b < pull.blocks.size(); ++b)
    run.blocks.push_back({pull.blocks[b].layer_begin, pull.blocks[b].layer_end, pull.blocks[b].granularity,
                          push.blocks.at(b).granularity});
  if (with_plans) {
    run.placement = placement;
    run.layout = layout;
    run.pull = pull;
    run.push = push;
  }
  return run;
}

// One candidate of a trace run: its simulated makespan (none: no pipeline holds the batch's longest sequence)
// and the layout move it is charged.
struct TraceRunCandidate {
  Strategy strategy;
  std::optional<double> makespan;
  double layout_move = 0;
  friend bool operator==(const TraceRunCandidate&, const TraceRunCandidate&) = default;
};

// One busy pipeline of the chosen plan, as scheduled.
struct TraceRunPipeline {
  std::size_t index = 0;  // into the plan's pipelines
  std::size_t micro_batches = 0;
  schedule::ScheduleKind kind = schedule::ScheduleKind::cyclic;
  bool memory_aware = false;
  double makespan = 0;
  double estimate = 0;
  std::vector<double> peak_memory;  // bytes per stage
  friend bool operator==(const TraceRunPipeline&, const TraceRunPipeline&) = default;
};

// What `sluice trace` reports: one iteration planned over every candidate, the fastest kept.
struct TraceRun {
  std::string profile;
  std::int64_t gpus = 0;
  std::string lengths;  // the dataset's source
  std::int64_t context = 0;
  std::int64_t iteration = 0;
  std::size_t sequences = 0;
  std::int64_t tokens = 0;
  schedule::ScheduleKind schedule = schedule::ScheduleKind::cyclic;
  plan::LayoutMoves layout_moves = plan::LayoutMoves::exposed;
  std::vector<TraceRunCandidate> candidates;
  std::size_t chosen = 0;
  double makespan = 0;
  double layout_move = 0;
  double total = 0;  // makespan + layout_move, or the flex CP plan's time where it runs
  assign::IterationPlan plan;
  std::vector<TraceRunPipeline> pipelines;
  std::optional<plan::FlexIteration> flex{};  // where the planner offers a flex CP domain
  friend bool operator==(const TraceRun&, const TraceRun&) = default;
};

// The candidates, the choice and the pipelines of `iteration` as `planner` planned it; the caller fills in the
// setup (profile, lengths, context, batch).
inline TraceRun trace_run(const plan::IterationPlanner& planner, const plan::SimulatedIteration& iteration) {
  TraceRun run{.profile = {},
               .gpus = 0,
               .lengths = {},
               .context = 0,
               .iteration = 0,
               .sequences = 0,
               .tokens = 0,
               .schedule = planner.options().schedule.kind,
               .layout_moves = planner.options().layout_moves,
               .candidates = {},
               .chosen = iteration.chosen,
               .makespan = iteration.schedule.makespan,
               .layout_move = iteration.plan.overhead,
               .total = iteration.total(),
               .plan = iteration.plan,
               .pipelines = {},
               .flex = iteration.flex};
  const std::span<const Strategy> candidates = planner.candidates();
  for (std::size_t k = 0; k < candidates.size(); ++k)
    run.candidates.push_back(
        {candidates[k], iteration.makespans[k], planner.charged().empty() ? 0.0 : planner.charged()[k]});
  for (std::size_t j = 0; j < iteration.schedule.pipelines.size(); ++j) {
    const auto& scheduled = iteration.schedule.pipelines[j];
    if (!scheduled) continue;
    const schedule::PipelineSchedule& s = scheduled->schedule;
    run.pipelines.push_back({j, iteration.plan.pipelines[j].micro_batches.size(), s.kind, s.memory_aware,
                             s.simulation.makespan, iteration.plan.pipelines[j].estimate, s.simulation.peak_memory});
  }
  return run;
}

// A busy replica's schedule in a schedule run.
struct ScheduleRunSchedule {
  schedule::ScheduleKind kind = schedule::ScheduleKind::cyclic;
  bool memory_aware = false;
  std::vector<int> injection;
  double makespan = 0;
  std::vector<double> peak_memory;  // bytes per stage
  std::vector<double> idle;         // seconds per stage
  int candidates = 0;               // orders simulated
  schedule::ExecutionPlan plan;
  friend bool operator==(const ScheduleRunSchedule&, const ScheduleRunSchedule&) = default;
};

struct ScheduleRunReplica {
  std::vector<std::size_t> micro_batches;       // indices into the partition
  std::optional<ScheduleRunSchedule> schedule;  // none: the replica got no micro-batch
  friend bool operator==(const ScheduleRunReplica&, const ScheduleRunReplica&) = default;
};

// A micro-batching baseline of a schedule run: its makespan, or why it cannot run.
struct ScheduleRunBaseline {
  std::string name;
  std::optional<double> makespan;
  std::size_t micro_batches = 0;
  std::string failure;  // empty when it runs
  friend bool operator==(const ScheduleRunBaseline&, const ScheduleRunBaseline&) = default;
};

// What `sluice schedule` reports: one batch partitioned, balanced over a scheme's replicas and scheduled.
struct ScheduleRun {
  std::string profile;
  Scheme scheme;
  int replicas = 0;
  schedule::ScheduleKind schedule = schedule::ScheduleKind::cyclic;
  std::int64_t context = 0;
  std::size_t sequences = 0;
  std::int64_t tokens = 0;
  double micro_batch_memory = 0;
  microbatch::Partition partition;
  microbatch::ReplicaAssignment assignment;
  std::vector<ScheduleRunReplica> replica_schedules;
  double makespan = 0;
  std::vector<ScheduleRunBaseline> baselines;
  [[nodiscard]] double tokens_per_second() const noexcept { return static_cast<double>(tokens) / makespan; }
  friend bool operator==(const ScheduleRun&, const ScheduleRun&) = default;
};

// The report of `plan`, run on the replicas of `scheme`, beside the micro-batching baselines; the caller fills
// in the setup (profile, context, batch).
inline ScheduleRun schedule_run(Scheme scheme, const schedule::PipelinePlanOptions& options,
                                const schedule::PipelineRunPlan& plan,
                                std::span<const compare::MicrobatchingBaseline> baselines) {
  ScheduleRun run{.profile = {},
                  .scheme = scheme,
                  .replicas = options.replicas,
                  .schedule = options.schedule.kind,
                  .context = 0,
                  .sequences = 0,
                  .tokens = 0,
                  .micro_batch_memory = options.micro_batch_memory,
                  .partition = plan.partition,
                  .assignment = plan.assignment,
                  .replica_schedules = {},
                  .makespan = plan.makespan,
                  .baselines = {}};
  for (const schedule::ReplicaSchedule& replica : plan.replicas) {
    ScheduleRunReplica& added = run.replica_schedules.emplace_back(ScheduleRunReplica{replica.micro_batches, {}});
    if (replica.micro_batches.empty()) continue;
    const schedule::PipelineSchedule& s = replica.schedule;
    added.schedule = ScheduleRunSchedule{
        s.kind,       s.memory_aware, s.injection, s.simulation.makespan, s.simulation.peak_memory, s.simulation.idle,
        s.candidates, s.plan};
  }
  for (const compare::MicrobatchingBaseline& baseline : baselines)
    run.baselines.push_back({baseline.name, baseline.plan ? std::optional(baseline.plan->makespan) : std::nullopt,
                             baseline.plan ? baseline.plan->partition.micro_batches.size() : 0, baseline.failure});
  return run;
}

template <>
struct document_traits<ScheduleRun> {
  static constexpr std::string_view format = "sluice.schedule_run";
  static constexpr int version = 1;
};
// One system of a simulate run: its outcome per iteration and, when it ran, their summary.
struct SimulateRunSystem {
  std::string name;
  std::optional<std::string> failure;  // why the system cannot run the scenario
  std::string configuration;
  std::vector<Strategy> strategies;
  std::vector<compare::IterationOutcome> iterations;
  std::optional<compare::Summary> summary;  // exactly when the system ran
};

// The stage-to-stage link of a simulate run, in the units its members name.
struct SimulateRunLink {
  double latency_seconds = 0;
  double bandwidth_bytes_per_second = 0;
  friend bool operator==(const SimulateRunLink&, const SimulateRunLink&) = default;
};

// What `sluice simulate` reports: every system on the same batches.
struct SimulateRun {
  std::string profile;
  std::int64_t gpus = 0;
  std::string lengths;  // the dataset's source
  std::int64_t context = 0;
  std::int64_t tokens = 0;
  std::uint64_t seed = 0;
  bool cross_node_tp = false;
  SimulateRunLink link;
  double backward_ratio = 0;
  std::vector<compare::BatchSize> batches;
  std::vector<std::int64_t> length_ranges;
  std::vector<Strategy> candidates;
  std::vector<SimulateRunSystem> systems;  // in compare::all_systems order
  std::vector<std::string> pictures;       // the SVG files written
};

// 12: each iteration's and system's measured planning time added (10 had none; 10: each batch's lower bound and
// each system's ratio to it added; 8 had neither; 6 held eight systems without the
// imbalance degree between micro-batches; 4 six, before Megatron-LM's dynamic CP and FlexSP; 2 four; each
// version's CP variant is one above it).
inline constexpr int simulate_run_version = 12;

// The report of `comparison` under `setup` on the dataset read from `lengths`.
inline SimulateRun simulate_run(const compare::Options& setup, const std::string& lengths,
                                const compare::Comparison& comparison,
                                const compare::BySystem<compare::Summary>& summaries,
                                const std::vector<std::string>& pictures) {
  SimulateRun run{.profile = setup.profile.name(),
                  .gpus = setup.profile.gpus(),
                  .lengths = lengths,
                  .context = setup.context,
                  .tokens = setup.tokens,
                  .seed = setup.seed,
                  .cross_node_tp = setup.cross_node_tp,
                  .link = {setup.problem.link.latency, setup.problem.link.bandwidth},
                  .backward_ratio = setup.problem.backward_ratio,
                  .batches = comparison.batches,
                  .length_ranges = comparison.bounds,
                  .candidates = comparison.candidates,
                  .systems = {},
                  .pictures = pictures};
  for (const compare::System system : compare::all_systems) {
    const compare::SystemRun& ran = comparison.systems[system];
    run.systems.push_back({ran.name, ran.failure, ran.configuration, ran.strategies, ran.iterations,
                           ran.failure ? std::nullopt : std::optional(summaries[system])});
  }
  return run;
}

template <>
struct document_traits<SimulateRun> {
  static constexpr std::string_view format = "sluice.simulate_run";
  static constexpr int version = simulate_run_version;
};
template <>
struct document_traits<ShardRun> {
  static constexpr std::string_view format = "sluice.shard_run";
  static constexpr int version = 1;
};
template <>
struct document_traits<TraceRun> {
  static constexpr std::string_view format = "sluice.trace_run";
  static constexpr int version = 2;
};

namespace detail {

// A document nested in a report (a plan with its own format and version), read when present.
template <Document T>
std::optional<T> nested_document(const json& in, std::string_view key, std::string_view where) {
  const auto nested = field_or<json>(in, key, json(nullptr), where);
  if (nested.is_null()) return std::nullopt;
  return from_document<T>(nested, sluice::concat(where, ": field '", key, "'"));
}

inline void require_non_negative(double value, std::string_view key, std::string_view where) {
  sluice::require(value >= 0, where, ": field '", key, "' must be >= 0, got ", value);
}

}  // namespace detail
}  // namespace sluice::io

namespace nlohmann {

// A busy replica's object holds its micro-batches and its schedule side by side; an idle one only the former.
template <>
struct adl_serializer<sluice::io::ScheduleRunReplica> {
  static void to_json(json& out, const sluice::io::ScheduleRunReplica& replica) {
    out = {{"micro_batches", replica.micro_batches}};
    if (!replica.schedule) return;
    const sluice::io::ScheduleRunSchedule& s = *replica.schedule;
    out.update({{"kind", std::string(sluice::schedule::name(s.kind))},
                {"memory_aware", s.memory_aware},
                {"injection", s.injection},
                {"makespan", s.makespan},
                {"peak_memory", s.peak_memory},
                {"idle", s.idle},
                {"candidates", s.candidates},
                {"plan", sluice::io::to_document(s.plan)}});
  }
  static sluice::io::ScheduleRunReplica from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::detail::require_non_negative;
    constexpr std::string_view where = "replica schedule";
    sluice::io::ScheduleRunReplica replica{field<std::vector<std::size_t>>(in, "micro_batches", where), {}};
    if (replica.micro_batches.empty()) return replica;
    sluice::io::ScheduleRunSchedule s{sluice::io::name_field(in, "kind", sluice::schedule::schedule_kind_names, where),
                                      field<bool>(in, "memory_aware", where),
                                      field<std::vector<int>>(in, "injection", where),
                                      field<double>(in, "makespan", where),
                                      field<std::vector<double>>(in, "peak_memory", where),
                                      field<std::vector<double>>(in, "idle", where),
                                      field<int>(in, "candidates", where),
                                      sluice::io::from_document<sluice::schedule::ExecutionPlan>(
                                          field<json>(in, "plan", where), sluice::concat(where, ": field 'plan'"))};
    require_non_negative(s.makespan, "makespan", where);
    for (const double bytes : s.peak_memory) require_non_negative(bytes, "peak_memory", where);
    for (const double seconds : s.idle) require_non_negative(seconds, "idle", where);
    sluice::require(s.candidates >= 1, where, ": field 'candidates' must be >= 1, got ", s.candidates);
    sluice::require(s.injection.size() == replica.micro_batches.size(), where, ": field 'injection' orders ",
                    s.injection.size(), " micro-batches, the replica has ", replica.micro_batches.size());
    replica.schedule = std::move(s);
    return replica;
  }
};

template <>
struct adl_serializer<sluice::io::ScheduleRunBaseline> {
  static void to_json(json& out, const sluice::io::ScheduleRunBaseline& baseline) {
    out = {{"name", baseline.name},
           {"makespan", baseline.makespan ? json(*baseline.makespan) : json(nullptr)},
           {"micro_batches", baseline.micro_batches},
           {"failure", baseline.failure}};
  }
  static sluice::io::ScheduleRunBaseline from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "micro-batching baseline";
    sluice::io::ScheduleRunBaseline baseline{
        field<std::string>(in, "name", where), field<std::optional<double>>(in, "makespan", where),
        field<std::size_t>(in, "micro_batches", where), field<std::string>(in, "failure", where)};
    if (baseline.makespan) {
      sluice::io::detail::require_non_negative(*baseline.makespan, "makespan", where);
    } else {
      sluice::require(!baseline.failure.empty() && baseline.micro_batches == 0, where,
                      ": a baseline without a makespan has a failure and no micro-batches");
    }
    return baseline;
  }
};

template <>
struct adl_serializer<sluice::io::ScheduleRun> {
  static void to_json(json& out, const sluice::io::ScheduleRun& run) {
    out = {{"profile", run.profile},
           {"scheme", run.scheme},
           {"replicas", run.replicas},
           {"schedule", std::string(sluice::schedule::name(run.schedule))},
           {"context", run.context},
           {"sequences", run.sequences},
           {"tokens", run.tokens},
           {"micro_batch_memory", run.micro_batch_memory},
           {"partition", run.partition},
           {"assignment", run.assignment},
           {"replica_schedules", run.replica_schedules},
           {"makespan", run.makespan},
           {"tokens_per_second", run.tokens_per_second()},
           {"baselines", run.baselines}};
  }
  static sluice::io::ScheduleRun from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "schedule run";
    sluice::io::ScheduleRun run{
        .profile = field<std::string>(in, "profile", where),
        .scheme = field<sluice::Scheme>(in, "scheme", where),
        .replicas = field<int>(in, "replicas", where),
        .schedule = sluice::io::name_field(in, "schedule", sluice::schedule::schedule_kind_names, where),
        .context = field<std::int64_t>(in, "context", where),
        .sequences = field<std::size_t>(in, "sequences", where),
        .tokens = field<std::int64_t>(in, "tokens", where),
        .micro_batch_memory = field<double>(in, "micro_batch_memory", where),
        .partition = field<sluice::microbatch::Partition>(in, "partition", where),
        .assignment = field<sluice::microbatch::ReplicaAssignment>(in, "assignment", where),
        .replica_schedules = field<std::vector<sluice::io::ScheduleRunReplica>>(in, "replica_schedules", where),
        .makespan = field<double>(in, "makespan", where),
        .baselines = field<std::vector<sluice::io::ScheduleRunBaseline>>(in, "baselines", where)};
    sluice::require(run.replicas >= 1, where, ": field 'replicas' must be >= 1, got ", run.replicas);
    sluice::require(run.context >= 1, where, ": field 'context' must be >= 1, got ", run.context);
    sluice::require(run.tokens >= 1, where, ": field 'tokens' must be >= 1, got ", run.tokens);
    sluice::require(run.micro_batch_memory > 0, where, ": field 'micro_batch_memory' must be > 0, got ",
                    run.micro_batch_memory);
    sluice::require(run.makespan > 0, where, ": field 'makespan' must be > 0, got ", run.makespan);
    const auto replicas = static_cast<std::size_t>(run.replicas);
    sluice::require(run.replica_schedules.size() == replicas && run.assignment.replicas.size() == replicas, where, ": ",
                    run.replicas, " replicas, but ", run.replica_schedules.size(), " replica schedules and ",
                    run.assignment.replicas.size(), " assigned");
    // The slowest replica sets the makespan; every micro-batch index points into the partition.
    double slowest = 0;
    for (std::size_t r = 0; r < replicas; ++r) {
      const sluice::io::ScheduleRunReplica& replica = run.replica_schedules[r];
      if (replica.schedule) slowest = std::max(slowest, replica.schedule->makespan);
      for (const std::size_t m : replica.micro_batches)
        sluice::require(m < run.partition.micro_batches.size(), where, ": field 'replica_schedules'[", r,
                        "]: micro-batch ", m, " of ", run.partition.micro_batches.size());
    }
    sluice::require(slowest == run.makespan, where, ": field 'makespan' is ", run.makespan,
                    ", the slowest replica's is ", slowest);
    const auto rate = field<double>(in, "tokens_per_second", where);
    sluice::require(rate == run.tokens_per_second(), where, ": field 'tokens_per_second' is ", rate,
                    ", not tokens / makespan = ", run.tokens_per_second());
    return run;
  }
};

template <>
struct adl_serializer<sluice::compare::Summary> {
  static void to_json(json& out, const sluice::compare::Summary& summary) {
    out = {{"mean_seconds", summary.seconds},
           {"stddev_seconds", summary.seconds_stddev},
           {"mean_tokens_per_second", summary.tokens_per_second},
           {"stddev_tokens_per_second", summary.tokens_per_second_stddev},
           {"speedup", summary.speedup ? json(*summary.speedup) : json(nullptr)},
           {"speedup_stddev", summary.speedup_stddev ? json(*summary.speedup_stddev) : json(nullptr)},
           {"imbalance", summary.imbalance},
           {"idle", summary.idle},
           {"micro_batch_imbalance", summary.micro_batch_imbalance},
           {"switching_seconds", summary.switching},
           {"layout_move_seconds", summary.layout_move},
           {"over_bound", summary.over_bound ? json(*summary.over_bound) : json(nullptr)},
           {"mean_planning_seconds", summary.planning_seconds}};
  }
  static sluice::compare::Summary from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "summary";
    sluice::compare::Summary summary;
    summary.seconds = field<double>(in, "mean_seconds", where);
    summary.seconds_stddev = field<double>(in, "stddev_seconds", where);
    summary.tokens_per_second = field<double>(in, "mean_tokens_per_second", where);
    summary.tokens_per_second_stddev = field<double>(in, "stddev_tokens_per_second", where);
    summary.speedup = field<std::optional<double>>(in, "speedup", where);
    summary.speedup_stddev = field<std::optional<double>>(in, "speedup_stddev", where);
    summary.imbalance = field<double>(in, "imbalance", where);
    summary.idle = field<double>(in, "idle", where);
    summary.micro_batch_imbalance = field<double>(in, "micro_batch_imbalance", where);
    summary.switching = field<double>(in, "switching_seconds", where);
    summary.layout_move = field<double>(in, "layout_move_seconds", where);
    summary.over_bound = field<std::optional<double>>(in, "over_bound", where);
    summary.planning_seconds = field<double>(in, "mean_planning_seconds", where);
    sluice::require(!summary.over_bound || *summary.over_bound > 0, where, ": 'over_bound' must be > 0");
    for (const double value :
         {summary.seconds, summary.seconds_stddev, summary.tokens_per_second, summary.tokens_per_second_stddev,
          summary.switching, summary.layout_move, summary.planning_seconds})
      sluice::require(value >= 0, where, ": times, rates and their deviations must be >= 0, got ", value);
    sluice::require(summary.speedup.has_value() == summary.speedup_stddev.has_value(), where,
                    ": 'speedup' and 'speedup_stddev' are both numbers or both null");
    return summary;
  }
};

// A system that ran has a summary; one that failed has none.
template <>
struct adl_serializer<sluice::io::SimulateRunSystem> {
  static void to_json(json& out, const sluice::io::SimulateRunSystem& system) {
    out = {{"name", system.name},
           {"failure", system.failure ? json(*system.failure) : json(nullptr)},
           {"configuration", system.configuration},
           {"strategies", system.strategies},
           {"iterations", system.iterations}};
    if (system.summary) out["summary"] = *system.summary;
  }
  static sluice::io::SimulateRunSystem from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "system";
    sluice::io::SimulateRunSystem system{
        field<std::string>(in, "name", where),
        field<std::optional<std::string>>(in, "failure", where),
        field<std::string>(in, "configuration", where),
        field<std::vector<sluice::Strategy>>(in, "strategies", where),
        field<std::vector<sluice::compare::IterationOutcome>>(in, "iterations", where),
        sluice::io::field_or<std::optional<sluice::compare::Summary>>(in, "summary", std::nullopt, where)};
    sluice::require(system.failure.has_value() != system.summary.has_value(), where, " ", system.name,
                    system.failure ? ": a failed system has no 'summary'" : ": missing field 'summary'");
    return system;
  }
};

template <>
struct adl_serializer<sluice::io::SimulateRun> {
  static void to_json(json& out, const sluice::io::SimulateRun& run) {
    out = {{"profile", run.profile},
           {"gpus", run.gpus},
           {"lengths", run.lengths},
           {"context", run.context},
           {"tokens", run.tokens},
           {"seed", run.seed},
           {"cross_node_tp", run.cross_node_tp},
           {"link",
            {{"latency_seconds", run.link.latency_seconds},
             {"bandwidth_bytes_per_second", run.link.bandwidth_bytes_per_second}}},
           {"backward_ratio", run.backward_ratio},
           {"batches", run.batches},
           {"length_ranges", run.length_ranges},
           {"candidates", sluice::assign::CandidateSet{run.candidates}},
           {"systems", run.systems},
           {"pictures", run.pictures}};
  }
  static sluice::io::SimulateRun from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "simulate run";
    const auto link = field<json>(in, "link", where);
    sluice::io::SimulateRun run{.profile = field<std::string>(in, "profile", where),
                                .gpus = field<std::int64_t>(in, "gpus", where),
                                .lengths = field<std::string>(in, "lengths", where),
                                .context = field<std::int64_t>(in, "context", where),
                                .tokens = field<std::int64_t>(in, "tokens", where),
                                .seed = field<std::uint64_t>(in, "seed", where),
                                .cross_node_tp = field<bool>(in, "cross_node_tp", where),
                                .link = {field<double>(link, "latency_seconds", "simulate run: link"),
                                         field<double>(link, "bandwidth_bytes_per_second", "simulate run: link")},
                                .backward_ratio = field<double>(in, "backward_ratio", where),
                                .batches = field<std::vector<sluice::compare::BatchSize>>(in, "batches", where),
                                .length_ranges = field<std::vector<std::int64_t>>(in, "length_ranges", where),
                                .candidates = field<sluice::assign::CandidateSet>(in, "candidates", where).strategies,
                                .systems = field<std::vector<sluice::io::SimulateRunSystem>>(in, "systems", where),
                                .pictures = field<std::vector<std::string>>(in, "pictures", where)};
    sluice::require(run.gpus >= 1, where, ": field 'gpus' must be >= 1, got ", run.gpus);
    sluice::require(run.context >= 1, where, ": field 'context' must be >= 1, got ", run.context);
    sluice::require(run.tokens >= 1, where, ": field 'tokens' must be >= 1, got ", run.tokens);
    sluice::require(run.link.latency_seconds >= 0 && run.link.bandwidth_bytes_per_second > 0, where,
                    ": field 'link': latency must be >= 0 and bandwidth > 0");
    sluice::require(run.backward_ratio > 0, where, ": field 'backward_ratio' must be > 0, got ", run.backward_ratio);
    for (const sluice::compare::BatchSize& batch : run.batches)
      sluice::require(batch.tokens >= 0, where, ": field 'batches': a batch of ", batch.tokens, " tokens");
    // Systems by position, as in a comparison; each that ran, once per batch.
    const auto& systems = sluice::compare::all_systems;
    sluice::require(run.systems.size() == systems.size(), where, ": field 'systems': expected ", systems.size(),
                    " systems, got ", run.systems.size());
    for (std::size_t s = 0; s < systems.size(); ++s) {
      const sluice::io::SimulateRunSystem& system = run.systems[s];
      sluice::require(system.name == sluice::compare::name(systems[s]), where, ": field 'systems'[", s,
                      "]: expected system '", sluice::compare::name(systems[s]), "', got ",
                      sluice::io::detail::describe(system.name));
      sluice::require(system.failure || system.iterations.size() == run.batches.size(), where, ": field 'systems'[", s,
                      "]: ", system.iterations.size(), " iterations for ", run.batches.size(), " batches");
    }
    return run;
  }
};

template <>
struct adl_serializer<sluice::io::ShardRunBlock> {
  static void to_json(json& out, const sluice::io::ShardRunBlock& block) {
    out = {{"layers", {block.layer_begin, block.layer_end}},
           {"pull_granularity", block.pull_granularity},
           {"push_granularity", block.push_granularity}};
  }
  static sluice::io::ShardRunBlock from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "shard run block";
    const auto [begin, end] = sluice::io::detail::layer_range(in, where);
    sluice::io::ShardRunBlock block{begin, end, field<std::int64_t>(in, "pull_granularity", where),
                                    field<std::int64_t>(in, "push_granularity", where)};
    sluice::require(0 <= begin && begin < end, where,
                    ": field 'layers' must be [begin, end) with 0 <= begin < end, "
                    "got [",
                    begin, ", ", end, "]");
    sluice::require(block.pull_granularity >= 1 && block.push_granularity >= 1, where, ": granularities must be >= 1");
    return block;
  }
};

template <>
struct adl_serializer<sluice::io::ShardRun> {
  static void to_json(json& out, const sluice::io::ShardRun& run) {
    out = {{"gpus", run.gpus},
           {"strategy", run.strategy},
           {"previous", run.previous ? json(*run.previous) : json(nullptr)},
           {"model", run.model},
           {"cluster", run.cluster},
           {"grid", run.grid},
           {"pipelines", run.pipelines},
           {"blocks", run.blocks},
           {"pull_sends", run.pull_sends},
           {"pull_local_moves", run.pull_local_moves},
           {"push_sends", run.push_sends},
           {"push_local_moves", run.push_local_moves},
           {"rs_groups", run.rs_groups},
           {"cost", run.cost}};
    // Plans are whole documents of their own, so that each can be cut out and read alone.
    if (run.placement) out["placement"] = sluice::io::to_document(*run.placement);
    if (run.layout) out["layout"] = sluice::io::to_document(*run.layout);
    if (run.pull) out["pull"] = sluice::io::to_document(*run.pull);
    if (run.push) out["push"] = sluice::io::to_document(*run.push);
  }
  static sluice::io::ShardRun from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::detail::nested_document;
    constexpr std::string_view where = "shard run";
    sluice::io::ShardRun run{.gpus = field<std::int64_t>(in, "gpus", where),
                             .strategy = field<sluice::Strategy>(in, "strategy", where),
                             .previous = field<std::optional<sluice::Strategy>>(in, "previous", where),
                             .model = field<sluice::shard::Model>(in, "model", where),
                             .cluster = field<sluice::shard::Cluster>(in, "cluster", where),
                             .grid = field<std::int64_t>(in, "grid", where),
                             .pipelines = field<int>(in, "pipelines", where),
                             .blocks = field<std::vector<sluice::io::ShardRunBlock>>(in, "blocks", where),
                             .pull_sends = field<std::size_t>(in, "pull_sends", where),
                             .pull_local_moves = field<std::size_t>(in, "pull_local_moves", where),
                             .push_sends = field<std::size_t>(in, "push_sends", where),
                             .push_local_moves = field<std::size_t>(in, "push_local_moves", where),
                             .rs_groups = field<std::size_t>(in, "rs_groups", where),
                             .cost = field<sluice::shard::ShardCost>(in, "cost", where),
                             .placement = nested_document<sluice::shard::Placement>(in, "placement", where),
                             .layout = nested_document<sluice::shard::OptimizerLayout>(in, "layout", where),
                             .pull = nested_document<sluice::shard::PullPlan>(in, "pull", where),
                             .push = nested_document<sluice::shard::PushPlan>(in, "push", where)};
    sluice::require(run.gpus >= 1 && run.gpus <= sluice::shard::max_gpus, where, ": field 'gpus' must be in [1, ",
                    sluice::shard::max_gpus, "], got ", run.gpus);
    sluice::require(run.cluster.gpus_per_node <= run.gpus, where, ": cluster.gpus_per_node ", run.cluster.gpus_per_node,
                    " exceeds gpus ", run.gpus);
    sluice::require(run.grid >= 1 && run.grid <= run.gpus, where, ": field 'grid' must be in [1, ", run.gpus, "], got ",
                    run.grid);
    sluice::require(run.pipelines >= 1 && run.pipelines <= run.gpus, where, ": field 'pipelines' must be in [1, ",
                    run.gpus, "], got ", run.pipelines);
    // The blocks cut the model's layers in order, without gaps.
    int layer = 0;
    for (std::size_t b = 0; b < run.blocks.size(); ++b) {
      sluice::require(run.blocks[b].layer_begin == layer, where, ": field 'blocks'[", b, "] starts at layer ",
                      run.blocks[b].layer_begin, ", expected ", layer);
      layer = run.blocks[b].layer_end;
    }
    sluice::require(layer == run.model.layers, where, ": field 'blocks' cover ", layer, " layers, the model has ",
                    run.model.layers);
    const int plans = int{run.placement.has_value()} + int{run.layout.has_value()} + int{run.pull.has_value()} +
                      int{run.push.has_value()};
    sluice::require(plans == 0 || plans == 4, where, ": 'placement', 'layout', 'pull' and 'push' go together, got ",
                    plans, " of them");
    if (run.pull) {
      sluice::require(run.pull->sends.size() == run.pull_sends && run.pull->local_moves.size() == run.pull_local_moves,
                      where, ": field 'pull' does not hold the counted sends and local moves");
      sluice::require(run.push->sends.size() == run.push_sends &&
                          run.push->local_moves.size() == run.push_local_moves &&
                          run.push->rs_groups.size() == run.rs_groups,
                      where, ": field 'push' does not hold the counted sends, local moves and groups");
    }
    return run;
  }
};

template <>
struct adl_serializer<sluice::io::TraceRunCandidate> {
  static void to_json(json& out, const sluice::io::TraceRunCandidate& candidate) {
    out = {{"strategy", candidate.strategy},
           {"makespan", candidate.makespan ? json(*candidate.makespan) : json(nullptr)},
           {"layout_move", candidate.layout_move}};
  }
  static sluice::io::TraceRunCandidate from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "trace run candidate";
    sluice::io::TraceRunCandidate candidate{field<sluice::Strategy>(in, "strategy", where),
                                            field<std::optional<double>>(in, "makespan", where),
                                            field<double>(in, "layout_move", where)};
    if (candidate.makespan) sluice::io::detail::require_non_negative(*candidate.makespan, "makespan", where);
    sluice::io::detail::require_non_negative(candidate.layout_move, "layout_move", where);
    return candidate;
  }
};

template <>
struct adl_serializer<sluice::io::TraceRunPipeline> {
  static void to_json(json& out, const sluice::io::TraceRunPipeline& pipeline) {
    out = {{"index", pipeline.index},
           {"micro_batches", pipeline.micro_batches},
           {"kind", std::string(sluice::schedule::name(pipeline.kind))},
           {"memory_aware", pipeline.memory_aware},
           {"makespan", pipeline.makespan},
           {"estimate", pipeline.estimate},
           {"peak_memory", pipeline.peak_memory}};
  }
  static sluice::io::TraceRunPipeline from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::detail::require_non_negative;
    constexpr std::string_view where = "trace run pipeline";
    sluice::io::TraceRunPipeline pipeline{
        field<std::size_t>(in, "index", where),
        field<std::size_t>(in, "micro_batches", where),
        sluice::io::name_field(in, "kind", sluice::schedule::schedule_kind_names, where),
        field<bool>(in, "memory_aware", where),
        field<double>(in, "makespan", where),
        field<double>(in, "estimate", where),
        field<std::vector<double>>(in, "peak_memory", where)};
    require_non_negative(pipeline.makespan, "makespan", where);
    require_non_negative(pipeline.estimate, "estimate", where);
    for (const double bytes : pipeline.peak_memory) require_non_negative(bytes, "peak_memory", where);
    return pipeline;
  }
};

template <>
struct adl_serializer<sluice::io::TraceRun> {
  static void to_json(json& out, const sluice::io::TraceRun& run) {
    out = {{"profile", run.profile},
           {"gpus", run.gpus},
           {"lengths", run.lengths},
           {"context", run.context},
           {"iteration", run.iteration},
           {"sequences", run.sequences},
           {"tokens", run.tokens},
           {"schedule", std::string(sluice::schedule::name(run.schedule))},
           {"layout_moves", sluice::plan::name(run.layout_moves)},
           {"candidates", run.candidates},
           {"chosen", run.chosen},
           {"makespan", run.makespan},
           {"layout_move", run.layout_move},
           {"total", run.total},
           {"plan", run.plan},
           {"pipelines", run.pipelines}};
    if (run.flex) out["flex"] = *run.flex;
  }
  static sluice::io::TraceRun from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::detail::require_non_negative;
    constexpr std::string_view where = "trace run";
    sluice::io::TraceRun run{
        .profile = field<std::string>(in, "profile", where),
        .gpus = field<std::int64_t>(in, "gpus", where),
        .lengths = field<std::string>(in, "lengths", where),
        .context = field<std::int64_t>(in, "context", where),
        .iteration = field<std::int64_t>(in, "iteration", where),
        .sequences = field<std::size_t>(in, "sequences", where),
        .tokens = field<std::int64_t>(in, "tokens", where),
        .schedule = sluice::io::name_field(in, "schedule", sluice::schedule::schedule_kind_names, where),
        .layout_moves = sluice::io::name_field(in, "layout_moves", sluice::plan::layout_moves_names, where),
        .candidates = field<std::vector<sluice::io::TraceRunCandidate>>(in, "candidates", where),
        .chosen = field<std::size_t>(in, "chosen", where),
        .makespan = field<double>(in, "makespan", where),
        .layout_move = field<double>(in, "layout_move", where),
        .total = field<double>(in, "total", where),
        .plan = field<sluice::assign::IterationPlan>(in, "plan", where),
        .pipelines = field<std::vector<sluice::io::TraceRunPipeline>>(in, "pipelines", where),
        .flex =
            in.contains("flex") ? std::optional(field<sluice::plan::FlexIteration>(in, "flex", where)) : std::nullopt};
    sluice::require(run.gpus >= 1, where, ": field 'gpus' must be >= 1, got ", run.gpus);
    sluice::require(run.context >= 1, where, ": field 'context' must be >= 1, got ", run.context);
    sluice::require(run.iteration >= 0, where, ": field 'iteration' must be >= 0, got ", run.iteration);
    sluice::require(run.tokens >= 0, where, ": field 'tokens' must be >= 0, got ", run.tokens);
    require_non_negative(run.makespan, "makespan", where);
    require_non_negative(run.layout_move, "layout_move", where);
    const double candidate_total = run.makespan + run.layout_move;
    const bool runs_flex = sluice::plan::flex_plan_runs(run.flex, candidate_total);
    const double total = sluice::plan::iteration_total(run.flex, candidate_total);
    sluice::require(run.total == total, where, ": field 'total' is ", run.total,
                    runs_flex ? ", not the flex CP plan's " : ", not makespan + layout_move = ", total);
    sluice::require(run.chosen < run.candidates.size(), where, ": field 'chosen' is ", run.chosen, " of ",
                    run.candidates.size(), " candidates");
    sluice::require(run.candidates[run.chosen].makespan.has_value(), where, ": the chosen candidate ", run.chosen,
                    " was not planned");
    sluice::require(run.candidates[run.chosen].strategy == run.plan.strategy, where,
                    ": the plan's strategy is not the chosen candidate's");
    // Busy pipelines of the plan, in its order.
    for (std::size_t k = 0; k < run.pipelines.size(); ++k) {
      const sluice::io::TraceRunPipeline& pipeline = run.pipelines[k];
      const bool in_order = k == 0 || pipeline.index > run.pipelines[k - 1].index;
      sluice::require(pipeline.index < run.plan.pipelines.size() && in_order, where, ": field 'pipelines'[", k,
                      "]: index ", pipeline.index, " is out of the plan's range or out of order");
      sluice::require(pipeline.micro_batches == run.plan.pipelines[pipeline.index].micro_batches.size(), where,
                      ": field 'pipelines'[", k, "]: ", pipeline.micro_batches, " micro-batches, the plan has ",
                      run.plan.pipelines[pipeline.index].micro_batches.size());
    }
    return run;
  }
};

}  // namespace nlohmann
