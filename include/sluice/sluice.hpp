#pragma once
// Umbrella header: everything in sluice that needs no compiled library; link sluice::all (the planners,
// sluice::fit for Eigen and sluice::io for JSON). A trainer that only plans includes "sluice/planners.hpp"
// (and "sluice/strategies.hpp" to choose its candidates itself) and links sluice::sluice. The CBC backend is
// separate: include "sluice/solver/cbc.hpp" (or assign/*_cbc.hpp) and link sluice::cbc.

#include "sluice/comparison.hpp"

#include "sluice/cost/context_parallel.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice/search/analytic_profile.hpp"
#include "sluice/search/galvatron.hpp"

#include "sluice/io/assign_json.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/chrome_trace.hpp"
#include "sluice/io/compare_json.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/data_json.hpp"
#include "sluice/io/fit_run_json.hpp"
#include "sluice/io/galvatron.hpp"
#include "sluice/io/inspect_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/microbatch_json.hpp"
#include "sluice/io/plan_run_json.hpp"
#include "sluice/io/proposal_json.hpp"
#include "sluice/io/run_json.hpp"
#include "sluice/io/samples.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/io/search_json.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/io/solver_json.hpp"
#include "sluice/io/strategy_pool.hpp"
#include "sluice/io/svg.hpp"
