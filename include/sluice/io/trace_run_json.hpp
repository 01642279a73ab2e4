#pragma once
// JSON for what `sluice trace --json` prints: "sluice.trace_run" (version 2, its CP variant 3; 1 had no layout moves
// and is refused by its version), a TraceRun built by trace_run and written with io::to_document. Its reader,
// io::from_document, checks every member and the invariants between members that cost nothing to check.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/plan/layout_moves.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/pipeline.hpp"

namespace sluice::io {

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
  std::size_t index = 0;
  std::size_t micro_batches = 0;
  schedule::ScheduleKind kind = schedule::ScheduleKind::cyclic;
  bool memory_aware = false;
  double makespan = 0;
  double estimate = 0;
  std::vector<double> peak_memory;
  friend bool operator==(const TraceRunPipeline&, const TraceRunPipeline&) = default;
};

// What `sluice trace` reports: one iteration planned over every candidate, the fastest kept.
struct TraceRun {
  std::string profile;
  std::int64_t gpus = 0;
  std::string lengths;
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
  double total = 0;
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
  const Span<const Strategy> candidates = planner.candidates();
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

SLUICE_IO_DOCUMENT(TraceRun, "sluice.trace_run", 2);

template <>
struct record<TraceRunCandidate> {
  using T = TraceRunCandidate;
  static constexpr std::string_view name = "trace run candidate";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(strategy, makespan, layout_move)};
  static void check(const T& candidate) {
    if (candidate.makespan) detail::require_non_negative(*candidate.makespan, "makespan", name);
    detail::require_non_negative(candidate.layout_move, "layout_move", name);
  }
};
SLUICE_IO_DOCS(TraceRunCandidate,
               {"makespan", "Simulated seconds; empty: no pipeline holds the batch's longest sequence"},
               {"layout_move", "The layout move it is charged"});

template <>
struct record<TraceRunPipeline> {
  using T = TraceRunPipeline;
  static constexpr std::string_view name = "trace run pipeline";
  static constexpr auto fields =
      std::tuple{SLUICE_IO_MEMBERS(index, micro_batches), named_member("kind", &T::kind, schedule::schedule_kind_names),
                 SLUICE_IO_MEMBERS(memory_aware, makespan, estimate, peak_memory)};
  static void check(const T& pipeline) {
    detail::require_non_negative(pipeline.makespan, "makespan", name);
    detail::require_non_negative(pipeline.estimate, "estimate", name);
    for (const double bytes : pipeline.peak_memory) detail::require_non_negative(bytes, "peak_memory", name);
  }
};
SLUICE_IO_DOCS(TraceRunPipeline, {"index", "Into the plan's pipelines"}, {"peak_memory", "Bytes per stage"});

// The total is the chosen plan's (or the flex CP plan's, where it runs); the busy pipelines are the plan's, in its
// order.
template <>
struct record<TraceRun> {
  using T = TraceRun;
  static constexpr std::string_view name = "trace run";
  static constexpr auto fields =
      std::tuple{SLUICE_IO_MEMBERS(profile, gpus, lengths, context, iteration, sequences, tokens),
                 named_member("schedule", &T::schedule, schedule::schedule_kind_names),
                 named_member("layout_moves", &T::layout_moves, plan::layout_moves_names),
                 SLUICE_IO_MEMBERS(candidates, chosen, makespan, layout_move, total, plan, pipelines),
                 member("flex", &T::flex, Presence::omitted_when_empty)};
  static void check(const T& run) {
    sluice::require(run.gpus >= 1, name, ": field 'gpus' must be >= 1, got ", run.gpus);
    sluice::require(run.context >= 1, name, ": field 'context' must be >= 1, got ", run.context);
    sluice::require(run.iteration >= 0, name, ": field 'iteration' must be >= 0, got ", run.iteration);
    sluice::require(run.tokens >= 0, name, ": field 'tokens' must be >= 0, got ", run.tokens);
    detail::require_non_negative(run.makespan, "makespan", name);
    detail::require_non_negative(run.layout_move, "layout_move", name);
    const double candidate_total = run.makespan + run.layout_move;
    const bool runs_flex = plan::flex_plan_runs(run.flex, candidate_total);
    const double total = plan::iteration_total(run.flex, candidate_total);
    sluice::require(run.total == total, name, ": field 'total' is ", run.total,
                    runs_flex ? ", not the flex CP plan's " : ", not makespan + layout_move = ", total);
    sluice::require(run.chosen < run.candidates.size(), name, ": field 'chosen' is ", run.chosen, " of ",
                    run.candidates.size(), " candidates");
    sluice::require(run.candidates[run.chosen].makespan.has_value(), name, ": the chosen candidate ", run.chosen,
                    " was not planned");
    sluice::require(run.candidates[run.chosen].strategy == run.plan.strategy, name,
                    ": the plan's strategy is not the chosen candidate's");
    for (std::size_t k = 0; k < run.pipelines.size(); ++k) {
      const TraceRunPipeline& pipeline = run.pipelines[k];
      const bool in_order = k == 0 || pipeline.index > run.pipelines[k - 1].index;
      sluice::require(pipeline.index < run.plan.pipelines.size() && in_order, name, ": field 'pipelines'[", k,
                      "]: index ", pipeline.index, " is out of the plan's range or out of order");
      sluice::require(pipeline.micro_batches == run.plan.pipelines[pipeline.index].micro_batches.size(), name,
                      ": field 'pipelines'[", k, "]: ", pipeline.micro_batches, " micro-batches, the plan has ",
                      run.plan.pipelines[pipeline.index].micro_batches.size());
    }
  }
};
SLUICE_IO_DOCS(TraceRun, {"lengths", "The dataset's source"}, {"chosen", "The kept candidate's index"},
               {"total", "makespan + layout_move, or the flex CP plan's time where it runs"},
               {"flex", "The flex CP domain's plan; empty unless the planner offers one"});

}  // namespace sluice::io
