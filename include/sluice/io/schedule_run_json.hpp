#pragma once
// JSON for what `sluice schedule --json` prints: "sluice.schedule_run" (version 1, its CP variant 2), a ScheduleRun
// built by schedule_run and written with io::to_document; each busy replica's execution plan is a whole
// "sluice.execution_plan" document. Its reader, io::from_document, checks every member and the invariants between
// members that cost nothing to check.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/compare/microbatching.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/microbatch_json.hpp"
#include "sluice/io/record.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/plan_pipeline.hpp"

namespace sluice::io {

// A busy replica's schedule in a schedule run.
struct ScheduleRunSchedule {
  schedule::ScheduleKind kind = schedule::ScheduleKind::cyclic;
  bool memory_aware = false;
  std::vector<int> injection;
  double makespan = 0;
  std::vector<double> peak_memory;
  std::vector<double> idle;
  int candidates = 0;
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
  std::string failure;
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
                                Span<const compare::MicrobatchingBaseline> baselines) {
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

SLUICE_IO_DOCUMENT(ScheduleRun, "sluice.schedule_run", 1);

// The execution plan is a whole document of its own, so that it can be cut out and read alone.
template <>
struct record<ScheduleRunSchedule> {
  using T = ScheduleRunSchedule;
  static constexpr std::string_view name = "replica schedule";
  static constexpr auto fields =
      std::tuple{named_member("kind", &T::kind, schedule::schedule_kind_names),
                 SLUICE_IO_MEMBERS(memory_aware, injection, makespan, peak_memory, idle, candidates),
                 document_member("plan", &T::plan)};
  static void check(const T& s) {
    detail::require_non_negative(s.makespan, "makespan", name);
    for (const double bytes : s.peak_memory) detail::require_non_negative(bytes, "peak_memory", name);
    for (const double seconds : s.idle) detail::require_non_negative(seconds, "idle", name);
    sluice::require(s.candidates >= 1, name, ": field 'candidates' must be >= 1, got ", s.candidates);
  }
};
SLUICE_IO_DOCS(ScheduleRunSchedule, {"peak_memory", "Bytes per stage"}, {"idle", "Seconds per stage"},
               {"candidates", "Orders simulated"});

template <>
struct record<ScheduleRunBaseline> {
  using T = ScheduleRunBaseline;
  static constexpr std::string_view name = "micro-batching baseline";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(name, makespan, micro_batches, failure)};
  static void check(const T& baseline) {
    if (baseline.makespan) {
      detail::require_non_negative(*baseline.makespan, "makespan", name);
    } else {
      sluice::require(!baseline.failure.empty() && baseline.micro_batches == 0, name,
                      ": a baseline without a makespan has a failure and no micro-batches");
    }
  }
};
SLUICE_IO_DOCS(ScheduleRunBaseline, {"failure", "Why it cannot run; empty when it runs"});

template <>
struct record<ScheduleRun> {
  using T = ScheduleRun;
  static constexpr std::string_view name = "schedule run";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(profile, scheme, replicas),
                                            named_member("schedule", &T::schedule, schedule::schedule_kind_names),
                                            SLUICE_IO_MEMBERS(context, sequences, tokens, micro_batch_memory, partition,
                                                              assignment, replica_schedules, makespan, baselines)};
  static void write_derived(json& out, const T& run) { out["tokens_per_second"] = run.tokens_per_second(); }
  static void check(const T& run, const json& document) {
    sluice::require(run.replicas >= 1, name, ": field 'replicas' must be >= 1, got ", run.replicas);
    sluice::require(run.context >= 1, name, ": field 'context' must be >= 1, got ", run.context);
    sluice::require(run.tokens >= 1, name, ": field 'tokens' must be >= 1, got ", run.tokens);
    sluice::require(run.micro_batch_memory > 0, name, ": field 'micro_batch_memory' must be > 0, got ",
                    run.micro_batch_memory);
    sluice::require(run.makespan > 0, name, ": field 'makespan' must be > 0, got ", run.makespan);
    const auto replicas = static_cast<std::size_t>(run.replicas);
    sluice::require(run.replica_schedules.size() == replicas && run.assignment.replicas.size() == replicas, name, ": ",
                    run.replicas, " replicas, but ", run.replica_schedules.size(), " replica schedules and ",
                    run.assignment.replicas.size(), " assigned");
    // The slowest replica sets the makespan; every micro-batch index points into the partition.
    double slowest = 0;
    for (std::size_t r = 0; r < replicas; ++r) {
      const ScheduleRunReplica& replica = run.replica_schedules[r];
      if (replica.schedule) slowest = std::max(slowest, replica.schedule->makespan);
      for (const std::size_t m : replica.micro_batches)
        sluice::require(m < run.partition.micro_batches.size(), name, ": field 'replica_schedules'[", r,
                        "]: micro-batch ", m, " of ", run.partition.micro_batches.size());
    }
    sluice::require(slowest == run.makespan, name, ": field 'makespan' is ", run.makespan,
                    ", the slowest replica's is ", slowest);
    const auto rate = field<double>(document, "tokens_per_second", name);
    sluice::require(rate == run.tokens_per_second(), name, ": field 'tokens_per_second' is ", rate,
                    ", not tokens / makespan = ", run.tokens_per_second());
  }
};

}  // namespace sluice::io

namespace nlohmann {

// A busy replica's object holds its micro-batches and its schedule side by side; an idle one only the former.
template <>
struct adl_serializer<sluice::io::ScheduleRunReplica> {
  static void to_json(json& out, const sluice::io::ScheduleRunReplica& replica) {
    out = {{"micro_batches", replica.micro_batches}};
    if (replica.schedule) out.update(json(*replica.schedule));
  }
  static sluice::io::ScheduleRunReplica from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "replica schedule";
    sluice::io::ScheduleRunReplica replica{field<std::vector<std::size_t>>(in, "micro_batches", where), {}};
    if (replica.micro_batches.empty()) return replica;
    auto s = in.get<sluice::io::ScheduleRunSchedule>();
    sluice::require(s.injection.size() == replica.micro_batches.size(), where, ": field 'injection' orders ",
                    s.injection.size(), " micro-batches, the replica has ", replica.micro_batches.size());
    replica.schedule = std::move(s);
    return replica;
  }
};

}  // namespace nlohmann
