#pragma once
// Umbrella header: everything in sluice that needs no compiled library.
// The CBC backend is separate: include "sluice/solver/cbc.hpp" (or assign/*_cbc.hpp) and link sluice::cbc.

#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/strategy.hpp"

#include "sluice/cost/concepts.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice/cost/grid.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/memory.hpp"
#include "sluice/cost/profile.hpp"

#include "sluice/data/dataset.hpp"
#include "sluice/data/readers.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"

#include "sluice/solver/milp.hpp"

#include "sluice/assign/dispatch.hpp"
#include "sluice/assign/packing.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/assign/types.hpp"

#include "sluice/proposal/dp.hpp"
#include "sluice/proposal/intervals.hpp"
#include "sluice/proposal/propose.hpp"

#include "sluice/io/assign_json.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/data_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/proposal_json.hpp"
#include "sluice/io/solver_json.hpp"
#include "sluice/io/strategy_pool.hpp"
#include "sluice/io/svg.hpp"
