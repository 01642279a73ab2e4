#pragma once
// JSON for micro-batch planning: partitions ("sluice.micro_batches") and replica assignments
// ("sluice.replica_assignment"), both version 1.
#include <string_view>
#include <tuple>

#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"
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

template <>
struct record<microbatch::Sample> {
  using T = microbatch::Sample;
  static constexpr std::string_view name = "sample";
  static constexpr auto fields =
      std::tuple{member("id", &T::id), member("input", &T::input), member("target", &T::target, Presence::defaulted)};
};

template <>
struct record<microbatch::Shape> {
  using T = microbatch::Shape;
  static constexpr std::string_view name = "shape";
  static constexpr auto fields =
      std::tuple{member("rows", &T::rows), member("input", &T::input), member("target", &T::target)};
};

template <>
struct record<microbatch::ShapedMicroBatch> {
  using T = microbatch::ShapedMicroBatch;
  static constexpr std::string_view name = "micro-batch";
  static constexpr auto fields =
      std::tuple{member("samples", &T::sample_ids), member("row_sizes", &T::row_sizes), member("shape", &T::shape),
                 member("seconds", &T::seconds), member("bytes", &T::bytes)};
};

template <>
struct record<microbatch::Partition> {
  using T = microbatch::Partition;
  static constexpr std::string_view name = "micro-batch partition";
  static constexpr auto fields = std::tuple{named_member("layout", &T::layout, microbatch::layout_names),
                                            member("micro_batches", &T::micro_batches),
                                            member("objective", &T::objective), member("cost_model", &T::cost_model)};
};

template <>
struct record<microbatch::ReplicaAssignment> {
  using T = microbatch::ReplicaAssignment;
  static constexpr std::string_view name = "replica assignment";
  static constexpr auto fields =
      std::tuple{member("replicas", &T::replicas), member("loads", &T::loads), member("max_load", &T::max_load)};
};

}  // namespace sluice::io
