#pragma once
// JSON for the sequence-assignment types: candidate sets ("sluice.candidates") and iteration plans
// ("sluice.iteration_plan"), both version 1.
#include <optional>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"

namespace sluice::io {
template <>
struct document_traits<assign::CandidateSet> {
  static constexpr std::string_view format = "sluice.candidates";
  static constexpr int version = 1;
};
template <>
struct document_traits<assign::IterationPlan> {
  static constexpr std::string_view format = "sluice.iteration_plan";
  static constexpr int version = 1;
};
}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::assign::MicroBatch> {
  static void to_json(json& out, const sluice::assign::MicroBatch& micro_batch) {
    out = {{"sequences", micro_batch.sequence_ids}, {"tokens", micro_batch.tokens}, {"seconds", micro_batch.seconds}};
  }
  static sluice::assign::MicroBatch from_json(const json& in) {
    using sluice::io::field;
    return {field<std::vector<std::int64_t>>(in, "sequences", "micro-batch"),
            field<std::int64_t>(in, "tokens", "micro-batch"), field<double>(in, "seconds", "micro-batch")};
  }
};

template <>
struct adl_serializer<sluice::assign::Packing> {
  static void to_json(json& out, const sluice::assign::Packing& packing) {
    out = {{"micro_batches", packing.micro_batches}, {"estimate", packing.estimate}};
  }
  static sluice::assign::Packing from_json(const json& in) {
    using sluice::io::field;
    return {field<std::vector<sluice::assign::MicroBatch>>(in, "micro_batches", "packing"),
            field<double>(in, "estimate", "packing")};
  }
};

template <>
struct adl_serializer<sluice::assign::Dispatch> {
  static void to_json(json& out, const sluice::assign::Dispatch& dispatch) {
    out = {{"pipeline_of", dispatch.pipeline_of},
           {"pipeline_bounds", dispatch.pipeline_bounds},
           {"objective", dispatch.objective},
           {"lower_bound", dispatch.lower_bound},
           {"v_step", dispatch.v_step}};
  }
  static sluice::assign::Dispatch from_json(const json& in) {
    using sluice::io::field;
    return {field<std::vector<int>>(in, "pipeline_of", "dispatch"),
            field<std::vector<double>>(in, "pipeline_bounds", "dispatch"), field<double>(in, "objective", "dispatch"),
            field<double>(in, "lower_bound", "dispatch"), sluice::io::field_or<bool>(in, "v_step", true, "dispatch")};
  }
};

template <>
struct adl_serializer<sluice::assign::DispatchOptions> {
  static void to_json(json& out, const sluice::assign::DispatchOptions& options) {
    out = {{"trials", options.trials},
           {"threads", options.threads},
           {"seed", options.seed},
           {"local_search", options.local_search}};
  }
  static sluice::assign::DispatchOptions from_json(const json& in) {
    using sluice::io::field_or;
    const sluice::assign::DispatchOptions defaults;
    return {field_or<int>(in, "trials", defaults.trials, "dispatch options"),
            field_or<int>(in, "threads", defaults.threads, "dispatch options"),
            field_or<std::uint64_t>(in, "seed", defaults.seed, "dispatch options"),
            field_or<bool>(in, "local_search", defaults.local_search, "dispatch options")};
  }
};

template <>
struct adl_serializer<sluice::assign::CandidateSet> {
  static void to_json(json& out, const sluice::assign::CandidateSet& set) { out = {{"strategies", set.strategies}}; }
  static sluice::assign::CandidateSet from_json(const json& in) {
    return {sluice::io::field<std::vector<sluice::Strategy>>(in, "strategies", "candidates")};
  }
};

template <>
struct adl_serializer<sluice::assign::PipelinePlan> {
  static void to_json(json& out, const sluice::assign::PipelinePlan& pipeline) {
    out = json(pipeline.scheme);
    out["index"] = pipeline.index;
    out["max_len"] = pipeline.max_len;
    out["micro_batches"] = pipeline.micro_batches;
    out["estimate"] = pipeline.estimate;
  }
  static sluice::assign::PipelinePlan from_json(const json& in) {
    using sluice::io::field;
    return {field<int>(in, "index", "pipeline plan"), in.get<sluice::Scheme>(),
            field<std::int64_t>(in, "max_len", "pipeline plan"),
            field<std::vector<sluice::assign::MicroBatch>>(in, "micro_batches", "pipeline plan"),
            field<double>(in, "estimate", "pipeline plan")};
  }
};

template <>
struct adl_serializer<sluice::assign::CandidateEstimate> {
  static void to_json(json& out, const sluice::assign::CandidateEstimate& candidate) {
    out = {{"strategy", candidate.strategy}, {"estimate", nullptr}, {"overhead", candidate.overhead}};
    if (candidate.estimate) out["estimate"] = *candidate.estimate;
  }
  static sluice::assign::CandidateEstimate from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::field_or;
    sluice::assign::CandidateEstimate candidate{field<sluice::Strategy>(in, "strategy", "candidate"), std::nullopt,
                                                field_or<double>(in, "overhead", 0.0, "candidate")};
    if (in.contains("estimate") && !in.at("estimate").is_null())
      candidate.estimate = field<double>(in, "estimate", "candidate");
    return candidate;
  }
};

template <>
struct adl_serializer<sluice::assign::IterationPlan> {
  static void to_json(json& out, const sluice::assign::IterationPlan& plan) {
    out = {{"strategy", plan.strategy},
           {"pipelines", plan.pipelines},
           {"estimate", plan.estimate},
           {"dispatch_objective", plan.dispatch_objective},
           {"dispatch_lower_bound", plan.dispatch_lower_bound},
           {"chosen", plan.chosen},
           {"candidates", plan.candidates},
           {"overhead", plan.overhead}};
  }
  static sluice::assign::IterationPlan from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::field_or;
    return {field<sluice::Strategy>(in, "strategy", "plan"),
            field<std::vector<sluice::assign::PipelinePlan>>(in, "pipelines", "plan"),
            field<double>(in, "estimate", "plan"),
            field<double>(in, "dispatch_objective", "plan"),
            field<double>(in, "dispatch_lower_bound", "plan"),
            field<std::size_t>(in, "chosen", "plan"),
            field<std::vector<sluice::assign::CandidateEstimate>>(in, "candidates", "plan"),
            field_or<double>(in, "overhead", 0.0, "plan")};
  }
};

}  // namespace nlohmann
