#pragma once
// JSON for the comparison of systems ("sluice.comparison", version 11, its CP variant 12; 1 and 2 held four systems,
// 3 and 4 six, before Megatron-LM's dynamic CP and FlexSP, 5 and 6 no imbalance degree, 7 and 8 no lower bound,
// 9 and 10 no planning times,
// and are refused by their version):
// `batches[{sequences, tokens, lower_bound (null or {seconds, area_seconds, critical_path_seconds})}]`, `systems` (one
// per system in compare::all_systems order, each {name, failure (null or why it cannot run), configuration, strategies,
// layout_moves, iterations[{seconds, switching, layout_move, imbalance, idle, micro_batch_imbalance, strategy,
// planning_seconds (measured)}], plans (sluice.iteration_plan payloads), first{names, pipelines}}), `candidates`
// (strategies) and `bounds`. A pipeline of `first` is its simulation, a sluice.schedule_simulation payload
// (schedule_json.hpp). Every time is finite (an unlimited bandwidth leaves a transfer its latency), so numbers are read
// strictly. Also a system's summary over its iterations (compare::Summary), which a sluice.simulate_run holds.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <vector>

#include "sluice/compare/compare.hpp"
#include "sluice/compare/summary.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"
#include "sluice/io/schedule_json.hpp"

namespace sluice::io {
SLUICE_IO_DOCUMENT(compare::Comparison, "sluice.comparison", 11);

template <>
struct record<compare::IterationOutcome> {
  using T = compare::IterationOutcome;
  static constexpr std::string_view name = "iteration outcome";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(seconds, switching, layout_move, imbalance, idle,
                                                              micro_batch_imbalance, strategy, planning_seconds)};
  static void check(const T& outcome) {
    sluice::require(outcome.planning_seconds >= 0, name, ": 'planning_seconds' must be >= 0, got ",
                    outcome.planning_seconds);
  }
};
SLUICE_IO_DOCS(compare::IterationOutcome,
               {"seconds", "Simulated iteration time (HotSPa: its length ranges' times and switches, summed)"},
               {"switching", "Share of `seconds` spent moving parameters and gradients between layouts"},
               {"layout_move", "The α–β time of those moves before any overlap"},
               {"imbalance", "Slowest / fastest busy pipeline"}, {"idle", "Share of pipelines without work"},
               {"micro_batch_imbalance",
                "WLB-LLM's imbalance degree (max forward × micro-batches / total), the worst pipeline's"},
               {"strategy", "What ran, by name"},
               {"planning_seconds", "Measured wall-clock seconds spent planning the iteration for the system"});

template <>
struct record<compare::Timeline> {
  using T = compare::Timeline;
  static constexpr std::string_view name = "timeline";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(pipelines, names)};
  static void check(const T& timeline) {
    sluice::require(timeline.names.size() == timeline.pipelines.size(), name, ": ", timeline.names.size(),
                    " names for ", timeline.pipelines.size(), " pipelines");
  }
};

SLUICE_IO_RECORD(compare::SystemRun, "system run",
                 SLUICE_IO_MEMBERS(name, failure, configuration, strategies, layout_moves, iterations, plans, first));
SLUICE_IO_DOCS(compare::SystemRun, {"failure", "Why the system cannot run; empty when it ran"},
               {"configuration", "What it was configured with, in words"},
               {"strategies", "Its static strategies (HotSPa: one per length range; sluice: its candidates)"},
               {"layout_moves",
                "sluice: each candidate's pull and push beyond its own layout's all-gather, before overlap"},
               {"plans", "The first few iterations' plans, where the system makes them"});

template <>
struct record<compare::IterationBound> {
  using T = compare::IterationBound;
  static constexpr std::string_view name = "lower bound";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(seconds, area_seconds, critical_path_seconds)};
  static void check(const T& bound) {
    sluice::require(bound.area_seconds > 0 && bound.critical_path_seconds > 0, name,
                    ": 'area_seconds' and 'critical_path_seconds' must be > 0");
    sluice::require(
        std::isfinite(bound.seconds) && bound.seconds >= std::max(bound.area_seconds, bound.critical_path_seconds),
        name, ": 'seconds' must be finite and at least 'area_seconds' and 'critical_path_seconds'");
  }
};
SLUICE_IO_DOCS(compare::IterationBound,
               {"seconds", "No plan of the batch is faster: the two arguments together, at least either alone"},
               {"area_seconds",
                "Every sequence's least GPU-time (with micro-batch constants, fill and drain) over the GPUs"},
               {"critical_path_seconds", "The slowest sequence's least trip through a pipeline"});

SLUICE_IO_RECORD(compare::BatchSize, "batch", SLUICE_IO_MEMBERS(sequences, tokens, lower_bound));
SLUICE_IO_DOCS(compare::BatchSize, {"lower_bound", "Empty where no scheme holds one of its sequences"});

template <>
struct record<compare::Summary> {
  using T = compare::Summary;
  static constexpr std::string_view name = "summary";
  static constexpr auto fields =
      std::tuple{member("mean_seconds", &T::seconds),
                 member("stddev_seconds", &T::seconds_stddev),
                 member("mean_tokens_per_second", &T::tokens_per_second),
                 member("stddev_tokens_per_second", &T::tokens_per_second_stddev),
                 SLUICE_IO_MEMBERS(speedup, speedup_stddev, imbalance, idle, micro_batch_imbalance),
                 member("switching_seconds", &T::switching),
                 member("layout_move_seconds", &T::layout_move),
                 SLUICE_IO_MEMBERS(over_bound),
                 member("mean_planning_seconds", &T::planning_seconds)};
  static void check(const T& summary) {
    sluice::require(!summary.over_bound || *summary.over_bound > 0, name, ": 'over_bound' must be > 0");
    for (const double value :
         {summary.seconds, summary.seconds_stddev, summary.tokens_per_second, summary.tokens_per_second_stddev,
          summary.switching, summary.layout_move, summary.planning_seconds})
      sluice::require(value >= 0, name, ": times, rates and their deviations must be >= 0, got ", value);
    sluice::require(summary.speedup.has_value() == summary.speedup_stddev.has_value(), name,
                    ": 'speedup' and 'speedup_stddev' are both numbers or both null");
  }
};
SLUICE_IO_DOCS(compare::Summary, {"speedup", "sluice over this system; empty when either failed"},
               {"micro_batch_imbalance", "Mean imbalance degree"},
               {"switching_seconds", "Mean seconds charged for layout moves"},
               {"layout_move_seconds", "Mean α–β seconds of those moves before overlap"},
               {"over_bound", "Mean seconds over the mean lower bound; empty when a batch has no bound"},
               {"mean_planning_seconds", "Mean measured wall-clock seconds spent planning an iteration"});

}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::compare::Comparison> {
  static void to_json(json& out, const sluice::compare::Comparison& comparison) {
    out = {{"batches", comparison.batches},
           {"systems", comparison.systems.values},
           {"candidates", comparison.candidates},
           {"bounds", comparison.bounds}};
  }
  static sluice::compare::Comparison from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "comparison";
    sluice::compare::Comparison comparison;
    comparison.batches = field<std::vector<sluice::compare::BatchSize>>(in, "batches", where);
    // Systems are stored by position; each must be the system its position stands for.
    const auto systems = field<std::vector<sluice::compare::SystemRun>>(in, "systems", where);
    sluice::require(systems.size() == sluice::compare::all_systems.size(), where, ": field 'systems': expected ",
                    sluice::compare::all_systems.size(), " systems, got ", systems.size());
    for (std::size_t s = 0; s < systems.size(); ++s) {
      const sluice::compare::System system = sluice::compare::all_systems[s];
      sluice::require(systems[s].name == sluice::compare::name(system), where, ": field 'systems'[", s,
                      "]: expected system '", sluice::compare::name(system), "', got ",
                      sluice::io::detail::describe(systems[s].name));
      comparison.systems[system] = systems[s];
    }
    comparison.candidates = field<std::vector<sluice::Strategy>>(in, "candidates", where);
    comparison.bounds = field<std::vector<std::int64_t>>(in, "bounds", where);
    return comparison;
  }
};

}  // namespace nlohmann
