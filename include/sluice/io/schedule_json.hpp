#pragma once
// JSON for execution plans ("sluice.execution_plan", version 1): per-rank instruction lists, each instruction
// {"op", "micro_batch", "stage", "peer", "buffer", "output", "shape": [rows, cols]} with op one of
// schedule::instruction_names.
#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "sluice/io/json.hpp"
#include "sluice/schedule/instructions.hpp"

namespace sluice::io {
template <>
struct document_traits<schedule::ExecutionPlan> {
  static constexpr std::string_view format = "sluice.execution_plan";
  static constexpr int version = 1;
};
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

}  // namespace nlohmann
