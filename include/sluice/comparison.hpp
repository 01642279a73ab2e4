#pragma once
// The comparison of systems (compare/): sluice against Megatron-LM (with and without context parallelism),
// DeepSpeed-Ulysses, per-sequence CP, FlexSP, HotSPa and DynaPipe on the same batches and the same simulator.
// Needs only the sluice::sluice target.

#include "sluice/strategies.hpp"

#include "sluice/compare/compare.hpp"
#include "sluice/compare/deepspeed.hpp"
#include "sluice/compare/dynapipe.hpp"
#include "sluice/compare/flex_cp.hpp"
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
