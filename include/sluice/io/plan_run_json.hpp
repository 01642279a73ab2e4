#pragma once
// JSON for what `sluice plan --json` prints ("sluice.plan_run", version 5, its CP variant 6; 3 and 4 had no lower
// bound, 1 and 2 chose plans by their packing estimate; all are refused by their version). The tool streams the
// document, an iteration at a time (io::JsonObjectStream), from the same pieces PlanRun is written from, so PlanRun's
// reader reads it whole.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/compare/statistics.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/compare_json.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/shard/ranks.hpp"

namespace sluice::io {

// What an iteration ran, as a plan run's summary counts it: the kept candidate, or the flex CP domain whose plan
// runs.
inline std::string ran_name(const Strategy& candidate, const plan::FlexIteration* running_flex) {
  if (!running_flex) return candidate.name();
  return sluice::concat(running_flex->strategy.name(), " (flex CP domain ", running_flex->domain, ")");
}

// One iteration planned: its batch, the plan kept and the ranks it runs on, and the flex CP domains' plan where
// offered. Its strategy, estimate and layout move are the plan's, its total makespan + layout move (or the flex
// plan's total where that runs); all are written beside for a reader's convenience.
struct PlanRunIteration {
  std::int64_t iteration = 0;
  std::int64_t epoch = 0;
  std::size_t sequences = 0;
  std::int64_t tokens = 0;
  double makespan = 0;
  double planning_seconds = 0;
  assign::IterationPlan plan;
  shard::RankPlacement placement;
  std::optional<plan::FlexIteration> flex{};  // where the planner offers flex CP domains
  // With `flex`: its domain's ranks (shard::flex_domain_ranks), which a trainer places the flex plan's groups on.
  std::optional<shard::RankPlacement> flex_placement{};
  // No plan of the batch is faster, on any scheme of the profile's space (compare/bound.hpp); empty where no
  // scheme holds one of its sequences.
  std::optional<compare::IterationBound> lower_bound{};
  [[nodiscard]] bool runs_flex() const noexcept { return plan::flex_plan_runs(flex, makespan + plan.overhead); }
  [[nodiscard]] double total() const noexcept { return plan::iteration_total(flex, makespan + plan.overhead); }
  [[nodiscard]] std::string ran() const { return ran_name(plan.strategy, runs_flex() ? &*flex : nullptr); }
  friend bool operator==(const PlanRunIteration&, const PlanRunIteration&) = default;
};

struct PlanRunSummary {
  double mean_total = 0;
  double stddev_total = 0;
  double tokens_per_second = 0;
  double mean_planning_seconds = 0;
  std::map<std::string, int> chosen;
  std::optional<double> mean_lower_bound{};  // the iterations' lower bounds' mean; empty where one has none
  std::optional<double> over_bound{};        // mean_total / mean_lower_bound
  friend bool operator==(const PlanRunSummary&, const PlanRunSummary&) = default;
};

struct PlanRun {
  std::optional<std::string> batch;
  std::vector<Strategy> candidates;
  std::int64_t context = 0;
  std::int64_t gpus = 0;
  std::vector<PlanRunIteration> iterations;
  std::string profile;
  PlanRunSummary summary;
  friend bool operator==(const PlanRun&, const PlanRun&) = default;
};

// The summary of iterations whose totals, planning times, lower bounds (nullopt where an iteration has none) and
// tokens are given, and the strategies chosen.
inline PlanRunSummary plan_run_summary(const std::vector<double>& totals, const std::vector<double>& planning,
                                       const std::vector<std::optional<double>>& lower_bounds,
                                       const std::map<std::string, int>& chosen, double tokens) {
  const double seconds = compare::mean(totals) * static_cast<double>(totals.size());
  PlanRunSummary summary{compare::mean(totals), compare::deviation(totals), tokens / seconds, compare::mean(planning),
                         chosen};
  std::vector<double> bounds;
  for (const std::optional<double>& bound : lower_bounds)
    if (bound) bounds.push_back(*bound);
  if (!bounds.empty() && bounds.size() == lower_bounds.size()) {
    summary.mean_lower_bound = compare::mean(bounds);
    summary.over_bound = summary.mean_total / *summary.mean_lower_bound;
  }
  return summary;
}

SLUICE_IO_DOCUMENT(PlanRun, "sluice.plan_run", 5);

// The strategy, layout move, estimate and total are the plan's (or the flex CP plan's), written beside it and
// checked against it when read.
template <>
struct record<PlanRunIteration> {
  using T = PlanRunIteration;
  static constexpr std::string_view name = "planned iteration";
  static constexpr auto fields = std::tuple{
      SLUICE_IO_MEMBERS(iteration, epoch, sequences, tokens, makespan, planning_seconds, plan, placement),
      member("flex", &T::flex, Presence::omitted_when_empty),
      member("flex_placement", &T::flex_placement, Presence::omitted_when_empty), SLUICE_IO_MEMBERS(lower_bound)};
  static void write_derived(json& out, const T& iteration) {
    out["strategy"] = iteration.plan.strategy.name();
    out["layout_move"] = iteration.plan.overhead;
    out["total"] = iteration.total();
    out["estimate"] = iteration.plan.estimate;
  }
  static void check(const T& iteration, const json& document) {
    sluice::require(iteration.flex_placement.has_value() == iteration.flex.has_value(), name,
                    iteration.flex ? ": 'flex' has no 'flex_placement'" : ": 'flex_placement' without 'flex'");
    if (iteration.flex) {
      // The domain placed as its one CP pipeline: ⟨TP, CP = units, PP⟩ of the domain's base.
      const StrategyPart& domain = iteration.flex->strategy.parts().front();
      const auto& placed = iteration.flex_placement->placement.pipelines;
      sluice::require(iteration.flex->strategy.parts().size() == 1 && placed.size() == 1 &&
                          placed.front().scheme.tp() == domain.scheme.tp() &&
                          placed.front().scheme.pp() == domain.scheme.pp() &&
                          placed.front().scheme.cp() == domain.pipelines,
                      name, ": 'flex_placement' does not place the domain ", iteration.flex->strategy.name(),
                      " as one CP pipeline of its units");
    }
    sluice::require(iteration.iteration >= 0 && iteration.epoch >= 0 && iteration.tokens >= 0, name,
                    ": 'iteration', 'epoch' and 'tokens' must be >= 0");
    sluice::require(iteration.makespan >= 0 && iteration.planning_seconds >= 0, name,
                    ": 'makespan' and 'planning_seconds' must be >= 0");
    const auto strategy = field<std::string>(document, "strategy", name);
    sluice::require(strategy == iteration.plan.strategy.name(), name, ": field 'strategy' is ",
                    detail::describe(strategy), ", the plan's is ", iteration.plan.strategy.name());
    const auto layout_move = field<double>(document, "layout_move", name);
    const auto estimate = field<double>(document, "estimate", name);
    const auto total = field<double>(document, "total", name);
    sluice::require(layout_move == iteration.plan.overhead && estimate == iteration.plan.estimate, name,
                    ": 'layout_move' and 'estimate' must be the plan's overhead and estimate");
    sluice::require(
        total == iteration.total(), name, ": field 'total' is ", total,
        iteration.runs_flex() ? ", not the flex CP plan's " : ", not makespan + layout_move = ", iteration.total());
    sluice::require(iteration.placement.plan_order.size() == iteration.plan.pipelines.size(), name,
                    ": the placement has ", iteration.placement.plan_order.size(), " pipelines, the plan ",
                    iteration.plan.pipelines.size());
  }
};
SLUICE_IO_DOCS(PlanRunIteration, {"sequences", "Sequences in the batch"},
               {"makespan", "The kept plan's simulated seconds"},
               {"planning_seconds", "Measured seconds to plan the batch"},
               {"placement", "The kept plan's global ranks"},
               {"flex", "The flex CP domains' plan; empty unless the planner offers domains"},
               {"flex_placement", "The flex domain's ranks; empty without flex"},
               {"lower_bound", "No plan of the batch is faster; empty where no scheme holds a sequence"});

template <>
struct record<PlanRunSummary> {
  using T = PlanRunSummary;
  static constexpr std::string_view name = "plan summary";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(
      mean_total, stddev_total, tokens_per_second, mean_planning_seconds, chosen, mean_lower_bound, over_bound)};
  static void check(const T& summary) {
    sluice::require(summary.mean_lower_bound.has_value() == summary.over_bound.has_value(), name,
                    ": 'mean_lower_bound' and 'over_bound' are both numbers or both null");
    sluice::require(!summary.mean_lower_bound || (*summary.mean_lower_bound > 0 && *summary.over_bound > 0), name,
                    ": 'mean_lower_bound' and 'over_bound' must be > 0");
  }
};
SLUICE_IO_DOCS(PlanRunSummary, {"chosen", "Iterations per name of what ran"},
               {"mean_lower_bound", "The lower bounds' mean; empty where one has none"},
               {"over_bound", "mean_total / mean_lower_bound; empty without bounds"});

template <>
struct record<PlanRun> {
  using T = PlanRun;
  static constexpr std::string_view name = "plan run";
  static constexpr auto fields = std::tuple{member("batch", &T::batch, Presence::omitted_when_empty),
                                            wrapped_member<assign::CandidateSet>("candidates", &T::candidates),
                                            SLUICE_IO_MEMBERS(context, gpus, iterations, profile, summary)};
  static void check(const T& run) {
    sluice::require(run.context >= 1, name, ": field 'context' must be >= 1, got ", run.context);
    sluice::require(run.gpus >= 1, name, ": field 'gpus' must be >= 1, got ", run.gpus);
    sluice::require(!run.candidates.empty(), name, ": field 'candidates' holds no strategy");
    // The summary counts what each iteration ran once.
    std::map<std::string, int> chosen;
    for (const PlanRunIteration& iteration : run.iterations) ++chosen[iteration.ran()];
    sluice::require(chosen == run.summary.chosen, name,
                    ": field 'summary'.chosen does not count the iterations' strategies");
  }
};
SLUICE_IO_DOCS(PlanRun, {"batch", "The batch file planned; empty: batches drawn from the data"});

}  // namespace sluice::io
