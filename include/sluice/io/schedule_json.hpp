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
#include <vector>

#include "sluice/io/assign_json.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/microbatch_json.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice/schedule/simulate.hpp"

namespace sluice::io {
template <>
struct document_traits<schedule::ExecutionPlan> {
  static constexpr std::string_view format = "sluice.execution_plan";
  static constexpr int version = 1;
};
template <>
struct document_traits<schedule::Problem> {
  static constexpr std::string_view format = "sluice.scheduling_problem";
  static constexpr int version = 1;
};
template <>
struct document_traits<schedule::Order> {
  static constexpr std::string_view format = "sluice.schedule_order";
  static constexpr int version = 1;
};
template <>
struct document_traits<schedule::Simulation> {
  static constexpr std::string_view format = "sluice.schedule_simulation";
  static constexpr int version = 1;
};
template <>
struct document_traits<schedule::PipelineSchedule> {
  static constexpr std::string_view format = "sluice.pipeline_schedule";
  static constexpr int version = 1;
};
template <>
struct document_traits<schedule::PipelineRunPlan> {
  static constexpr std::string_view format = "sluice.pipeline_run_plan";
  static constexpr int version = 1;
};
template <>
struct document_traits<plan::IterationSchedule> {
  static constexpr std::string_view format = "sluice.iteration_schedule";
  static constexpr int version = 1;
};
template <>
struct document_traits<plan::SimulatedIteration> {
  static constexpr std::string_view format = "sluice.simulated_iteration";
  static constexpr int version = 1;
};

namespace detail {

inline schedule::Pass pass_field(const json& in, std::string_view where) {
  return name_field(in, "pass", schedule::pass_names, where);
}

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
}  // namespace sluice::io

namespace nlohmann {

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

template <>
struct adl_serializer<sluice::schedule::ExecutionPlan> {
  static void to_json(json& out, const sluice::schedule::ExecutionPlan& plan) {
    out = {{"stages", plan.stages},
           {"micro_batches", plan.micro_batches},
           {"buffer_slots", plan.buffer_slots},
           {"ranks", plan.ranks}};
  }
  static sluice::schedule::ExecutionPlan from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "execution plan";
    return {field<int>(in, "stages", where), field<int>(in, "micro_batches", where),
            field<int>(in, "buffer_slots", where),
            field<std::vector<std::vector<sluice::schedule::Instruction>>>(in, "ranks", where)};
  }
};

template <>
struct adl_serializer<sluice::schedule::MicroBatchCost> {
  static void to_json(json& out, const sluice::schedule::MicroBatchCost& cost) {
    out = {{"forward", cost.forward},
           {"backward", cost.backward},
           {"activation", cost.activation},
           {"tokens", cost.tokens}};
  }
  static sluice::schedule::MicroBatchCost from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "micro-batch cost";
    return {field<std::vector<double>>(in, "forward", where), field<std::vector<double>>(in, "backward", where),
            field<std::vector<double>>(in, "activation", where), field<std::int64_t>(in, "tokens", where)};
  }
};

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

template <>
struct adl_serializer<sluice::schedule::Op> {
  static void to_json(json& out, const sluice::schedule::Op& op) {
    out = {{"micro_batch", op.micro_batch}, {"pass", std::string(sluice::schedule::name(op.pass))}};
  }
  static sluice::schedule::Op from_json(const json& in) {
    constexpr std::string_view where = "op";
    return {sluice::io::field<int>(in, "micro_batch", where), sluice::io::detail::pass_field(in, where)};
  }
};

template <>
struct adl_serializer<sluice::schedule::Order> {
  static void to_json(json& out, const sluice::schedule::Order& order) { out = {{"stages", order.stages}}; }
  static sluice::schedule::Order from_json(const json& in) {
    return {sluice::io::field<std::vector<std::vector<sluice::schedule::Op>>>(in, "stages", "schedule order")};
  }
};

template <>
struct adl_serializer<sluice::schedule::OpTiming> {
  static void to_json(json& out, const sluice::schedule::OpTiming& op) {
    out = {{"micro_batch", op.micro_batch},
           {"pass", std::string(sluice::schedule::name(op.pass))},
           {"start", op.start},
           {"end", op.end},
           {"send_start", op.send_start},
           {"arrival", op.arrival}};
  }
  static sluice::schedule::OpTiming from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "op timing";
    return {field<int>(in, "micro_batch", where),   sluice::io::detail::pass_field(in, where),
            field<double>(in, "start", where),      field<double>(in, "end", where),
            field<double>(in, "send_start", where), field<double>(in, "arrival", where)};
  }
};

template <>
struct adl_serializer<sluice::schedule::Simulation> {
  static void to_json(json& out, const sluice::schedule::Simulation& simulation) {
    out = {{"stages", simulation.stages},
           {"makespan", simulation.makespan},
           {"peak_memory", simulation.peak_memory},
           {"idle", simulation.idle}};
  }
  static sluice::schedule::Simulation from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "simulation";
    return {field<std::vector<std::vector<sluice::schedule::OpTiming>>>(in, "stages", where),
            field<double>(in, "makespan", where), field<std::vector<double>>(in, "peak_memory", where),
            field<std::vector<double>>(in, "idle", where)};
  }
};

template <>
struct adl_serializer<sluice::schedule::PipelineSchedule> {
  static void to_json(json& out, const sluice::schedule::PipelineSchedule& schedule) {
    out = {{"kind", std::string(sluice::schedule::name(schedule.kind))},
           {"memory_aware", schedule.memory_aware},
           {"injection", schedule.injection},
           {"order", schedule.order},
           {"simulation", schedule.simulation},
           {"plan", schedule.plan},
           {"candidates", schedule.candidates}};
  }
  static sluice::schedule::PipelineSchedule from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "pipeline schedule";
    return {sluice::io::name_field(in, "kind", sluice::schedule::schedule_kind_names, where),
            field<bool>(in, "memory_aware", where),
            field<std::vector<int>>(in, "injection", where),
            field<sluice::schedule::Order>(in, "order", where),
            field<sluice::schedule::Simulation>(in, "simulation", where),
            field<sluice::schedule::ExecutionPlan>(in, "plan", where),
            field<int>(in, "candidates", where)};
  }
};

template <>
struct adl_serializer<sluice::schedule::ReplicaSchedule> {
  static void to_json(json& out, const sluice::schedule::ReplicaSchedule& replica) {
    out = {{"micro_batches", replica.micro_batches}, {"problem", replica.problem}, {"schedule", replica.schedule}};
  }
  static sluice::schedule::ReplicaSchedule from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "replica schedule";
    return {field<std::vector<std::size_t>>(in, "micro_batches", where),
            field<sluice::schedule::Problem>(in, "problem", where),
            field<sluice::schedule::PipelineSchedule>(in, "schedule", where)};
  }
};

template <>
struct adl_serializer<sluice::schedule::PipelineRunPlan> {
  static void to_json(json& out, const sluice::schedule::PipelineRunPlan& plan) {
    out = {{"partition", plan.partition},
           {"assignment", plan.assignment},
           {"replica_schedules", plan.replicas},
           {"makespan", plan.makespan}};
  }
  static sluice::schedule::PipelineRunPlan from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "pipeline run plan";
    return {field<sluice::microbatch::Partition>(in, "partition", where),
            field<sluice::microbatch::ReplicaAssignment>(in, "assignment", where),
            field<std::vector<sluice::schedule::ReplicaSchedule>>(in, "replica_schedules", where),
            field<double>(in, "makespan", where)};
  }
};

template <>
struct adl_serializer<sluice::plan::ScheduledPipeline> {
  static void to_json(json& out, const sluice::plan::ScheduledPipeline& pipeline) {
    out = {{"problem", pipeline.problem}, {"schedule", pipeline.schedule}};
  }
  static sluice::plan::ScheduledPipeline from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "scheduled pipeline";
    return {field<sluice::schedule::Problem>(in, "problem", where),
            field<sluice::schedule::PipelineSchedule>(in, "schedule", where)};
  }
};

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

template <>
struct adl_serializer<sluice::assign::FlexCpGroup> {
  static void to_json(json& out, const sluice::assign::FlexCpGroup& group) {
    out = {{"degree_index", group.degree_index}, {"first_unit", group.first_unit}, {"sequences", group.sequences}};
  }
  static sluice::assign::FlexCpGroup from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "flex CP group";
    return {field<int>(in, "degree_index", where), field<int>(in, "first_unit", where),
            field<std::vector<int>>(in, "sequences", where)};
  }
};

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

template <>
struct adl_serializer<sluice::plan::FlexIteration> {
  static void to_json(json& out, const sluice::plan::FlexIteration& iteration) {
    out = {{"domain", iteration.domain},
           {"strategy", iteration.strategy},
           {"schemes", iteration.schemes},
           {"plan", iteration.plan},
           {"overhead", iteration.overhead}};
  }
  static sluice::plan::FlexIteration from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "flex CP iteration";
    return {field<std::size_t>(in, "domain", where), field<sluice::Strategy>(in, "strategy", where),
            field<std::vector<sluice::Scheme>>(in, "schemes", where),
            field<sluice::assign::FlexCpPlan>(in, "plan", where), field<double>(in, "overhead", where)};
  }
};

template <>
struct adl_serializer<sluice::plan::SimulatedIteration> {
  // "flex" only where the planner offered a flex CP domain, so that other plans keep the text they always had.
  static void to_json(json& out, const sluice::plan::SimulatedIteration& iteration) {
    json makespans = json::array();
    for (const auto& makespan : iteration.makespans) makespans.push_back(makespan ? json(*makespan) : json(nullptr));
    out = {{"plan", iteration.plan},
           {"schedule", iteration.schedule},
           {"chosen", iteration.chosen},
           {"makespans", std::move(makespans)}};
    if (iteration.flex) out["flex"] = *iteration.flex;
  }
  static sluice::plan::SimulatedIteration from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "simulated iteration";
    return {field<sluice::assign::IterationPlan>(in, "plan", where),
            field<sluice::plan::IterationSchedule>(in, "schedule", where), field<std::size_t>(in, "chosen", where),
            field<std::vector<std::optional<double>>>(in, "makespans", where),
            in.contains("flex") ? std::optional(field<sluice::plan::FlexIteration>(in, "flex", where)) : std::nullopt};
  }
};

}  // namespace nlohmann
