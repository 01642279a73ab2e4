#pragma once
// JSON for micro-batch planning: partitions ("sluice.micro_batches") and replica assignments
// ("sluice.replica_assignment"), both version 1.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/io/json.hpp"
#include "sluice/microbatch/types.hpp"

namespace sluice::io {
template <>
struct document_traits<microbatch::Partition> {
  static constexpr std::string_view format = "sluice.micro_batches";
  static constexpr int version = 1;
};
template <>
struct document_traits<microbatch::ReplicaAssignment> {
  static constexpr std::string_view format = "sluice.replica_assignment";
  static constexpr int version = 1;
};
}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::microbatch::Sample> {
  static void to_json(json& out, const sluice::microbatch::Sample& sample) {
    out = {{"id", sample.id}, {"input", sample.input}, {"target", sample.target}};
  }
  static sluice::microbatch::Sample from_json(const json& in) {
    using sluice::io::field;
    return {field<std::int64_t>(in, "id", "sample"), field<std::int64_t>(in, "input", "sample"),
            sluice::io::field_or<std::int64_t>(in, "target", 0, "sample")};
  }
};

template <>
struct adl_serializer<sluice::microbatch::Shape> {
  static void to_json(json& out, const sluice::microbatch::Shape& shape) {
    out = {{"rows", shape.rows}, {"input", shape.input}, {"target", shape.target}};
  }
  static sluice::microbatch::Shape from_json(const json& in) {
    using sluice::io::field;
    return {field<std::int64_t>(in, "rows", "shape"), field<std::int64_t>(in, "input", "shape"),
            field<std::int64_t>(in, "target", "shape")};
  }
};

template <>
struct adl_serializer<sluice::microbatch::ShapedMicroBatch> {
  static void to_json(json& out, const sluice::microbatch::ShapedMicroBatch& micro_batch) {
    out = {{"samples", micro_batch.sample_ids},
           {"row_sizes", micro_batch.row_sizes},
           {"shape", micro_batch.shape},
           {"seconds", micro_batch.seconds},
           {"bytes", micro_batch.bytes}};
  }
  static sluice::microbatch::ShapedMicroBatch from_json(const json& in) {
    using sluice::io::field;
    return {field<std::vector<std::int64_t>>(in, "samples", "micro-batch"),
            field<std::vector<std::int64_t>>(in, "row_sizes", "micro-batch"),
            field<sluice::microbatch::Shape>(in, "shape", "micro-batch"), field<double>(in, "seconds", "micro-batch"),
            field<double>(in, "bytes", "micro-batch")};
  }
};

template <>
struct adl_serializer<sluice::microbatch::Partition> {
  static void to_json(json& out, const sluice::microbatch::Partition& partition) {
    out = {{"layout", std::string(sluice::microbatch::name(partition.layout))},
           {"micro_batches", partition.micro_batches},
           {"objective", partition.objective},
           {"cost_model", partition.cost_model}};
  }
  static sluice::microbatch::Partition from_json(const json& in) {
    using sluice::io::field;
    return {sluice::io::name_field(in, "layout", sluice::microbatch::layout_names, "micro-batch partition"),
            field<std::vector<sluice::microbatch::ShapedMicroBatch>>(in, "micro_batches", "micro-batch partition"),
            field<double>(in, "objective", "micro-batch partition"),
            field<std::size_t>(in, "cost_model", "micro-batch partition")};
  }
};

template <>
struct adl_serializer<sluice::microbatch::ReplicaAssignment> {
  static void to_json(json& out, const sluice::microbatch::ReplicaAssignment& assignment) {
    out = {{"replicas", assignment.replicas}, {"loads", assignment.loads}, {"max_load", assignment.max_load}};
  }
  static sluice::microbatch::ReplicaAssignment from_json(const json& in) {
    using sluice::io::field;
    return {field<std::vector<std::vector<std::size_t>>>(in, "replicas", "replica assignment"),
            field<std::vector<double>>(in, "loads", "replica assignment"),
            field<double>(in, "max_load", "replica assignment")};
  }
};

}  // namespace nlohmann
