#pragma once
// Choosing the candidate strategies, once and offline, on top of the planners: datasets of sequence lengths and the
// batches drawn from them (data/), the strategy proposal of Hydraulis (proposal/) and the strategy search of
// Galvatron-BMW (search/, but analytic_profile.hpp, which needs Eigen). Needs only the sluice::sluice target.

#include "sluice/planners.hpp"

#include "sluice/data/dataset.hpp"
#include "sluice/data/read_limits.hpp"
#include "sluice/data/readers.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"

#include "sluice/proposal/dp.hpp"
#include "sluice/proposal/homogeneous.hpp"
#include "sluice/proposal/intervals.hpp"
#include "sluice/proposal/max_len.hpp"
#include "sluice/proposal/propose.hpp"
#include "sluice/proposal/sampled.hpp"

#include "sluice/search/dp.hpp"
#include "sluice/search/estimator.hpp"
#include "sluice/search/model.hpp"
#include "sluice/search/partition.hpp"
#include "sluice/search/search.hpp"
#include "sluice/search/space.hpp"
#include "sluice/search/types.hpp"
