#pragma once
// JSON for micro-batch planning: partitions ("sluice.micro_batches") and replica assignments
// ("sluice.replica_assignment"), both version 1.
#include <string_view>
#include <tuple>

#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"
#include "sluice/microbatch/types.hpp"

namespace sluice::io {
SLUICE_IO_DOCUMENT(microbatch::Partition, "sluice.micro_batches", 1);
SLUICE_IO_DOCUMENT(microbatch::ReplicaAssignment, "sluice.replica_assignment", 1);

SLUICE_IO_RECORD(microbatch::Sample, "sample", SLUICE_IO_MEMBERS(id, input), SLUICE_IO_DEFAULTED(target));

SLUICE_IO_RECORD(microbatch::Shape, "shape", SLUICE_IO_MEMBERS(rows, input, target));

SLUICE_IO_RECORD(microbatch::ShapedMicroBatch, "micro-batch", member("samples", &T::sample_ids),
                 SLUICE_IO_MEMBERS(row_sizes, shape, seconds, bytes));
SLUICE_IO_DOCS(microbatch::ShapedMicroBatch, {"samples", "Sample ids, row by row."});

SLUICE_IO_RECORD(microbatch::Partition, "micro-batch partition",
                 named_member("layout", &T::layout, microbatch::layout_names),
                 SLUICE_IO_MEMBERS(micro_batches, objective, cost_model));

SLUICE_IO_RECORD(microbatch::ReplicaAssignment, "replica assignment", SLUICE_IO_MEMBERS(replicas, loads, max_load));

}  // namespace sluice::io
