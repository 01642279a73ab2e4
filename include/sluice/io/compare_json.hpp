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
// strictly.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/compare/compare.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/schedule/simulate.hpp"

namespace sluice::io {
template <>
struct document_traits<compare::Comparison> {
  static constexpr std::string_view format = "sluice.comparison";
  static constexpr int version = 11;
};
}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::compare::IterationOutcome> {
  static void to_json(json& out, const sluice::compare::IterationOutcome& outcome) {
    out = {{"seconds", outcome.seconds},
           {"switching", outcome.switching},
           {"layout_move", outcome.layout_move},
           {"imbalance", outcome.imbalance},
           {"idle", outcome.idle},
           {"micro_batch_imbalance", outcome.micro_batch_imbalance},
           {"strategy", outcome.strategy},
           {"planning_seconds", outcome.planning_seconds}};
  }
  static sluice::compare::IterationOutcome from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "iteration outcome";
    sluice::compare::IterationOutcome outcome{
        field<double>(in, "seconds", where),       field<double>(in, "switching", where),
        field<double>(in, "layout_move", where),   field<double>(in, "imbalance", where),
        field<double>(in, "idle", where),          field<double>(in, "micro_batch_imbalance", where),
        field<std::string>(in, "strategy", where), field<double>(in, "planning_seconds", where)};
    sluice::require(outcome.planning_seconds >= 0, where, ": 'planning_seconds' must be >= 0, got ",
                    outcome.planning_seconds);
    return outcome;
  }
};

template <>
struct adl_serializer<sluice::compare::Timeline> {
  static void to_json(json& out, const sluice::compare::Timeline& timeline) {
    out = {{"names", timeline.names}, {"pipelines", timeline.pipelines}};
  }
  static sluice::compare::Timeline from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "timeline";
    sluice::compare::Timeline timeline{field<std::vector<sluice::schedule::Simulation>>(in, "pipelines", where),
                                       field<std::vector<std::string>>(in, "names", where)};
    sluice::require(timeline.names.size() == timeline.pipelines.size(), where, ": ", timeline.names.size(),
                    " names for ", timeline.pipelines.size(), " pipelines");
    return timeline;
  }
};

template <>
struct adl_serializer<sluice::compare::SystemRun> {
  static void to_json(json& out, const sluice::compare::SystemRun& run) {
    out = {{"name", run.name},
           {"failure", run.failure ? json(*run.failure) : json(nullptr)},
           {"configuration", run.configuration},
           {"strategies", run.strategies},
           {"layout_moves", run.layout_moves},
           {"iterations", run.iterations},
           {"plans", run.plans},
           {"first", run.first}};
  }
  static sluice::compare::SystemRun from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "system run";
    return {field<std::string>(in, "name", where),
            field<std::optional<std::string>>(in, "failure", where),
            field<std::string>(in, "configuration", where),
            field<std::vector<sluice::Strategy>>(in, "strategies", where),
            field<std::vector<double>>(in, "layout_moves", where),
            field<std::vector<sluice::compare::IterationOutcome>>(in, "iterations", where),
            field<std::vector<sluice::assign::IterationPlan>>(in, "plans", where),
            field<sluice::compare::Timeline>(in, "first", where)};
  }
};

template <>
struct adl_serializer<sluice::compare::IterationBound> {
  static void to_json(json& out, const sluice::compare::IterationBound& bound) {
    out = {{"seconds", bound.seconds},
           {"area_seconds", bound.area_seconds},
           {"critical_path_seconds", bound.critical_path_seconds}};
  }
  static sluice::compare::IterationBound from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "lower bound";
    const sluice::compare::IterationBound bound{field<double>(in, "seconds", where),
                                                field<double>(in, "area_seconds", where),
                                                field<double>(in, "critical_path_seconds", where)};
    sluice::require(bound.area_seconds > 0 && bound.critical_path_seconds > 0, where,
                    ": 'area_seconds' and 'critical_path_seconds' must be > 0");
    sluice::require(bound.seconds == std::max(bound.area_seconds, bound.critical_path_seconds), where,
                    ": 'seconds' must be the larger of 'area_seconds' and 'critical_path_seconds'");
    return bound;
  }
};

template <>
struct adl_serializer<sluice::compare::BatchSize> {
  static void to_json(json& out, const sluice::compare::BatchSize& batch) {
    out = {{"sequences", batch.sequences},
           {"tokens", batch.tokens},
           {"lower_bound", batch.lower_bound ? json(*batch.lower_bound) : json(nullptr)}};
  }
  static sluice::compare::BatchSize from_json(const json& in) {
    using sluice::io::field;
    return {field<std::size_t>(in, "sequences", "batch"), field<std::int64_t>(in, "tokens", "batch"),
            field<std::optional<sluice::compare::IterationBound>>(in, "lower_bound", "batch")};
  }
};

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
