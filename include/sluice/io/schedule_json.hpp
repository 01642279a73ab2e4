#pragma once
// JSON for pipeline scheduling, every format version 1:
//   "sluice.execution_plan": per-rank instruction lists, each instruction {"op", "micro_batch", "stage", "peer",
//     "buffer", "output", "shape": [rows, cols]} with op one of schedule::instruction_names;
//   "sluice.scheduling_problem": {stages, micro_batches[{forward, backward, activation, tokens}], memory_limit,
//     hidden, element_bytes, link{latency, bandwidth}}; a memory limit or bandwidth may be "inf" (an extended
//     number, io::detail::extended_number);
//   "sluice.schedule_order": {stages[[{micro_batch, pass}]]}, pass "forward" or "backward";
//   "sluice.schedule_simulation": {stages[[{micro_batch, pass, start, end, send_start, arrival}]], makespan,
//     peak_memory, idle};
//   "sluice.pipeline_schedule": {kind ("cyclic" or "1f1b"), memory_aware, injection, order, simulation, plan,
//     candidates}, the order, simulation and plan as the payloads of their own documents;
//   "sluice.pipeline_run_plan": {partition, assignment, replica_schedules[{micro_batches, problem, schedule}],
//     makespan} (what `sluice schedule` plans; the partition and assignment as sluice.micro_batches and
//     sluice.replica_assignment payloads);
//   "sluice.iteration_schedule": {pipelines[null | {problem, schedule}], makespan}, null for an idle pipeline;
//   "sluice.simulated_iteration": {plan (a sluice.iteration_plan payload), schedule, chosen, makespans[number |
//     null]} (what `sluice trace` plans).
// Every value is written, so a document reads back equal to the value it was written from.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "sluice/io/assign_json.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/microbatch_json.hpp"
#include "sluice/io/record.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice/schedule/simulate.hpp"

namespace sluice::io {
SLUICE_IO_DOCUMENT(schedule::ExecutionPlan, "sluice.execution_plan", 1);
SLUICE_IO_DOCUMENT(schedule::Problem, "sluice.scheduling_problem", 1);
SLUICE_IO_DOCUMENT(schedule::Order, "sluice.schedule_order", 1);
SLUICE_IO_DOCUMENT(schedule::Simulation, "sluice.schedule_simulation", 1);
SLUICE_IO_DOCUMENT(schedule::PipelineSchedule, "sluice.pipeline_schedule", 1);
SLUICE_IO_DOCUMENT(schedule::PipelineRunPlan, "sluice.pipeline_run_plan", 1);
SLUICE_IO_DOCUMENT(plan::IterationSchedule, "sluice.iteration_schedule", 1);
SLUICE_IO_DOCUMENT(plan::SimulatedIteration, "sluice.simulated_iteration", 1);

namespace detail {

// An array field of extended numbers (finite numbers, "inf" or "-inf").
inline std::vector<double> extended_numbers(const json& object, std::string_view key, std::string_view where) {
  const auto values = field<std::vector<json>>(object, key, where);
  std::vector<double> out;
  out.reserve(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    out.push_back(extended_number(values[i], sluice::concat(where, ": field '", key, "'[", i, "]")));
  return out;
}

}  // namespace detail

SLUICE_IO_RECORD(schedule::ExecutionPlan, "execution plan",
                 SLUICE_IO_MEMBERS(stages, micro_batches, buffer_slots, ranks));

SLUICE_IO_RECORD(schedule::MicroBatchCost, "micro-batch cost",
                 SLUICE_IO_MEMBERS(forward, backward, activation, tokens));

SLUICE_IO_RECORD(schedule::Op, "op", SLUICE_IO_MEMBERS(micro_batch),
                 named_member("pass", &T::pass, schedule::pass_names));

SLUICE_IO_RECORD(schedule::Order, "schedule order", SLUICE_IO_MEMBERS(stages));

SLUICE_IO_RECORD(schedule::OpTiming, "op timing", SLUICE_IO_MEMBERS(micro_batch),
                 named_member("pass", &T::pass, schedule::pass_names),
                 SLUICE_IO_MEMBERS(start, end, send_start, arrival));
SLUICE_IO_DOCS(schedule::OpTiming, {"pass", "'forward' or 'backward'."});

SLUICE_IO_RECORD(schedule::Simulation, "simulation", SLUICE_IO_MEMBERS(stages, makespan, peak_memory, idle));

SLUICE_IO_RECORD(schedule::PipelineSchedule, "pipeline schedule",
                 named_member("kind", &T::kind, schedule::schedule_kind_names),
                 SLUICE_IO_MEMBERS(memory_aware, injection, order, simulation, plan, candidates));
SLUICE_IO_DOCS(schedule::PipelineSchedule, {"kind", "'cyclic' or '1f1b': the kind of the order kept."},
               {"candidates", "Orders simulated."});

SLUICE_IO_RECORD(schedule::ReplicaSchedule, "replica schedule", SLUICE_IO_MEMBERS(micro_batches, problem, schedule));
SLUICE_IO_DOCS(schedule::ReplicaSchedule,
               {"micro_batches", "Indices into the partition, in the schedule's micro-batch ids."},
               {"schedule", "Empty when the replica got no micro-batch."});

SLUICE_IO_RECORD(schedule::PipelineRunPlan, "pipeline run plan", SLUICE_IO_MEMBERS(partition, assignment),
                 member("replica_schedules", &T::replicas), SLUICE_IO_MEMBERS(makespan));
SLUICE_IO_DOCS(schedule::PipelineRunPlan, {"makespan", "The slowest replica's simulated iteration."});

SLUICE_IO_RECORD(plan::ScheduledPipeline, "scheduled pipeline", SLUICE_IO_MEMBERS(problem, schedule));

SLUICE_IO_RECORD(assign::FlexCpGroup, "flex CP group", SLUICE_IO_MEMBERS(degree_index, first_unit, sequences));
SLUICE_IO_DOCS(assign::FlexCpGroup, {"degree_index", "Index into the problem's degrees"},
               {"first_unit", "Its units are first_unit … first_unit + degree − 1"},
               {"sequences", "Indices into the problem's lengths, ascending"});

// A Strategy has no default: the table lists every member, in declaration order.
SLUICE_IO_RECORD(plan::FlexIteration, "flex CP iteration",
                 SLUICE_IO_MEMBERS(domain, strategy, schemes, plan, overhead));
SLUICE_IO_DOCS(plan::FlexIteration, {"domain", "Which of the planner's domains (FlexDomains)"},
               {"strategy", "The domain: replicas of one ⟨TP, PP⟩ scheme"},
               {"schemes", "Per degree of the plan, the scheme its groups run"},
               {"overhead", "What the domain is charged besides its groups"});

// "flex" only where the planner offered a flex CP domain, so that other plans keep the text they always had.
SLUICE_IO_RECORD(plan::SimulatedIteration, "simulated iteration", SLUICE_IO_MEMBERS(plan, schedule, chosen, makespans),
                 member("flex", &T::flex, Presence::omitted_when_empty));
SLUICE_IO_DOCS(
    plan::SimulatedIteration, {"plan", "The kept candidate, planned alone."},
    {"makespans", "Per candidate its simulated makespan; empty where it cannot hold the batch."},
    {"flex", "The fastest flex CP domain's plan, where the planner offers domains that hold the batch; else empty."});

}  // namespace sluice::io

namespace nlohmann {

// The op is a name from instruction_names (no NameTable) and the shape is written as an array.
template <>
struct adl_serializer<sluice::schedule::Instruction> {
  static void to_json(json& out, const sluice::schedule::Instruction& in) {
    out = {{"op", std::string(sluice::schedule::name(in.kind))},
           {"micro_batch", in.micro_batch},
           {"stage", in.stage},
           {"peer", in.peer},
           {"buffer", in.buffer},
           {"output", in.output},
           {"shape", std::array<std::int64_t, 2>{in.shape.rows, in.shape.cols}}};
  }
  static sluice::schedule::Instruction from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "instruction";
    const auto op = field<std::string>(in, "op", where);
    const auto& names = sluice::schedule::instruction_names;
    const auto it = std::find(std::begin(names), std::end(names), op);
    sluice::require(it != std::end(names), where, ": unknown op ", sluice::io::detail::describe(op));
    const auto shape = field<std::array<std::int64_t, 2>>(in, "shape", where);
    return {static_cast<sluice::schedule::InstructionKind>(it - std::begin(names)),
            field<int>(in, "micro_batch", where),
            field<int>(in, "stage", where),
            field<int>(in, "peer", where),
            field<int>(in, "buffer", where),
            field<int>(in, "output", where),
            {shape[0], shape[1]}};
  }
};

// The memory limits are an array of extended numbers.
template <>
struct adl_serializer<sluice::schedule::Problem> {
  static void to_json(json& out, const sluice::schedule::Problem& problem) {
    json limits = json::array();
    for (const double limit : problem.memory_limit) limits.push_back(sluice::io::detail::extended_number(limit));
    out = {{"stages", problem.stages}, {"micro_batches", problem.micro_batches}, {"memory_limit", std::move(limits)},
           {"hidden", problem.hidden}, {"element_bytes", problem.element_bytes}, {"link", problem.link}};
  }
  static sluice::schedule::Problem from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "scheduling problem";
    return {field<int>(in, "stages", where),
            field<std::vector<sluice::schedule::MicroBatchCost>>(in, "micro_batches", where),
            sluice::io::detail::extended_numbers(in, "memory_limit", where),
            field<std::int64_t>(in, "hidden", where),
            field<int>(in, "element_bytes", where),
            field<sluice::cost::Link>(in, "link", where)};
  }
};

// An idle pipeline is written null, element by element (nlohmann writes no std::optional).
template <>
struct adl_serializer<sluice::plan::IterationSchedule> {
  static void to_json(json& out, const sluice::plan::IterationSchedule& schedule) {
    json pipelines = json::array();
    for (const auto& pipeline : schedule.pipelines) pipelines.push_back(pipeline ? json(*pipeline) : json(nullptr));
    out = {{"pipelines", std::move(pipelines)}, {"makespan", schedule.makespan}};
  }
  static sluice::plan::IterationSchedule from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "iteration schedule";
    return {field<std::vector<std::optional<sluice::plan::ScheduledPipeline>>>(in, "pipelines", where),
            field<double>(in, "makespan", where)};
  }
};

// A micro-batch is written as its list of groups.
template <>
struct adl_serializer<sluice::assign::FlexCpPlan> {
  static void to_json(json& out, const sluice::assign::FlexCpPlan& plan) {
    json micro_batches = json::array();
    for (const auto& micro_batch : plan.micro_batches) micro_batches.push_back(micro_batch.groups);
    out = {{"micro_batches", std::move(micro_batches)}, {"seconds", plan.seconds}, {"lower_bound", plan.lower_bound}};
  }
  static sluice::assign::FlexCpPlan from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "flex CP plan";
    sluice::assign::FlexCpPlan plan;
    for (auto& groups : field<std::vector<std::vector<sluice::assign::FlexCpGroup>>>(in, "micro_batches", where))
      plan.micro_batches.push_back({std::move(groups)});
    plan.seconds = field<double>(in, "seconds", where);
    plan.lower_bound = field<double>(in, "lower_bound", where);
    return plan;
  }
};

}  // namespace nlohmann
