#pragma once
// What a trainer includes to plan the batches it draws: core, the cost models (not the fit), assign, microbatch,
// schedule, shard and the sluice plan (plan/), with the MILP model type. Needs only the sluice::sluice target: no
// Eigen, no JSON. Reading a dataset's lengths and choosing the candidate strategies from them, once and offline
// (data/, proposal/, search/), is in <sluice/strategies.hpp>; the comparison of systems (compare/) in
// <sluice/comparison.hpp>. Not here either: cost/fit.hpp, cost/context_parallel.hpp and search/analytic_profile.hpp
// (sluice::fit, Eigen), the JSON layer in io/ (sluice::io), the CBC backend (sluice::cbc), and shard/check.hpp
// (plans run on host memory, for tests and small models).

#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/strategy.hpp"

#include "sluice/cost/concepts.hpp"
#include "sluice/cost/grid.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/memory.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/cost/samples.hpp"

#include "sluice/solver/milp.hpp"

#include "sluice/assign/choose.hpp"
#include "sluice/assign/dispatch.hpp"
#include "sluice/assign/flex_cp_types.hpp"
#include "sluice/assign/packing.hpp"
#include "sluice/assign/packing_estimate.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/assign/types.hpp"

#include "sluice/microbatch/balance.hpp"
#include "sluice/microbatch/baselines.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/microbatch/order.hpp"
#include "sluice/microbatch/partition.hpp"
#include "sluice/microbatch/partition_options.hpp"
#include "sluice/microbatch/types.hpp"

#include "sluice/schedule/comm.hpp"
#include "sluice/schedule/deadlock.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/interpreter.hpp"
#include "sluice/schedule/orders.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice/schedule/problems.hpp"
#include "sluice/schedule/simulate.hpp"

#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"
#include "sluice/shard/ranks.hpp"
#include "sluice/shard/slices.hpp"

#include "sluice/plan/iteration.hpp"
#include "sluice/plan/layout_moves.hpp"
#include "sluice/plan/planner.hpp"
#include "sluice/plan/simulated_iteration.hpp"
