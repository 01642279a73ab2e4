#pragma once
// JSON for the sequence-assignment types: candidate sets ("sluice.candidates") and iteration plans
// ("sluice.iteration_plan"), both version 1.
#include <string_view>
#include <tuple>

#include "sluice/assign/plan.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"

namespace sluice::io {
SLUICE_IO_DOCUMENT(assign::CandidateSet, "sluice.candidates", 1);
SLUICE_IO_DOCUMENT(assign::IterationPlan, "sluice.iteration_plan", 1);

SLUICE_IO_RECORD(assign::MicroBatch, "micro-batch", member("sequences", &T::sequence_ids),
                 SLUICE_IO_MEMBERS(tokens, seconds));
SLUICE_IO_DOCS(assign::MicroBatch, {"sequences", "Its sequences' ids"});

SLUICE_IO_RECORD(assign::Packing, "packing", SLUICE_IO_MEMBERS(micro_batches, estimate));

SLUICE_IO_RECORD(assign::Dispatch, "dispatch", SLUICE_IO_MEMBERS(pipeline_of, pipeline_bounds, objective, lower_bound),
                 SLUICE_IO_DEFAULTED(v_step));

// The longest-first order and the V step are a planner's choice, not a dispatch file's.
SLUICE_IO_RECORD(assign::DispatchOptions, "dispatch options", SLUICE_IO_DEFAULTED(trials, threads, seed, local_search));

SLUICE_IO_RECORD(assign::CandidateSet, "candidates", SLUICE_IO_MEMBERS(strategies));

// The scheme's own fields, with the pipeline's beside them.
SLUICE_IO_RECORD(assign::PipelinePlan, "pipeline plan", SLUICE_IO_MEMBERS(index), SLUICE_IO_INLINE(scheme),
                 SLUICE_IO_MEMBERS(max_len, micro_batches, estimate));

SLUICE_IO_RECORD(assign::CandidateEstimate, "candidate", SLUICE_IO_MEMBERS(strategy),
                 SLUICE_IO_DEFAULTED(estimate, overhead));
SLUICE_IO_DOCS(assign::CandidateEstimate,
               {"estimate", "Its estimated seconds; empty when it cannot hold the batch's longest sequence"});

SLUICE_IO_RECORD(assign::IterationPlan, "plan",
                 SLUICE_IO_MEMBERS(strategy, pipelines, estimate, dispatch_objective, dispatch_lower_bound, chosen,
                                   candidates),
                 SLUICE_IO_DEFAULTED(overhead));
SLUICE_IO_DOCS(assign::IterationPlan, {"estimate", "Propagation time of the slowest pipeline (s)"});

}  // namespace sluice::io
