#pragma once
// Every planner and its vocabulary: core, cost models, data, assign, microbatch, schedule, shard, the sluice plan
// (plan/), proposal, search, the comparison of systems and the MILP model type. Needs only the sluice::sluice
// target: no Eigen, no JSON. Not here: cost/fit.hpp, cost/context_parallel.hpp and search/analytic_profile.hpp
// (sluice::fit, Eigen), the JSON layer in io/ (sluice::io), the CBC backend (sluice::cbc), and shard/check.hpp (plans
// run on host memory, for tests and small models).

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

#include "sluice/data/dataset.hpp"
#include "sluice/data/read_limits.hpp"
#include "sluice/data/readers.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"

#include "sluice/solver/milp.hpp"

#include "sluice/assign/choose.hpp"
#include "sluice/assign/dispatch.hpp"
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
#include "sluice/schedule/iteration.hpp"
#include "sluice/schedule/orders.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice/schedule/planner.hpp"
#include "sluice/schedule/problems.hpp"
#include "sluice/schedule/simulate.hpp"

#include "sluice/search/dp.hpp"
#include "sluice/search/estimator.hpp"
#include "sluice/search/model.hpp"
#include "sluice/search/partition.hpp"
#include "sluice/search/search.hpp"
#include "sluice/search/space.hpp"
#include "sluice/search/types.hpp"

#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"
#include "sluice/shard/ranks.hpp"
#include "sluice/shard/slices.hpp"

#include "sluice/plan/iteration.hpp"
#include "sluice/plan/layout_moves.hpp"
#include "sluice/plan/planner.hpp"

#include "sluice/proposal/dp.hpp"
#include "sluice/proposal/homogeneous.hpp"
#include "sluice/proposal/intervals.hpp"
#include "sluice/proposal/max_len.hpp"
#include "sluice/proposal/propose.hpp"
#include "sluice/proposal/sampled.hpp"

#include "sluice/compare/compare.hpp"
#include "sluice/compare/dynapipe.hpp"
#include "sluice/compare/hotspa.hpp"
#include "sluice/compare/iteration_plans.hpp"
#include "sluice/compare/layout_move.hpp"
#include "sluice/compare/megatron.hpp"
#include "sluice/compare/microbatching.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/compare/sluice.hpp"
#include "sluice/compare/statistics.hpp"
#include "sluice/compare/summary.hpp"
