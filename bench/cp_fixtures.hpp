#pragma once
// The CP benchmarks' scheme space and candidates (they derive schemes with sluice::fit, which the assignment
// studies do not link).
#include <vector>

#include "sluice/core/scheme.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/context_parallel.hpp"

namespace sluice::bench {

// The scheme space of the CP benchmarks: CP 2, 4 and 8 of every kind, and full recomputation.
inline cost::SchemeSpace wide_space() {
  cost::SchemeSpace space;
  space.cp_degrees = {2, 4, 8};
  space.cp_kinds = {CpKind::ulysses, CpKind::ring, CpKind::hybrid};
  space.recompute = true;
  return space;
}

// Four candidates for scenario(gpus) over wide_space(), whose context-holding pipelines use CP or AC
// where scenario_candidates uses <16,1> (LLaMA-32B's 52 heads split over TP·U of at most 4).
inline std::vector<Strategy> scenario_cp_candidates(int gpus) {
  const int scale = gpus / 64;
  const Scheme ring = Scheme::parse("tp8cp2ringpp1");
  return {Strategy({{ring, scale}, {Scheme(8, 1), 6 * scale}}), Strategy({{Scheme::parse("tp4cp4ringpp1"), 4 * scale}}),
          Strategy({{Scheme(16, 1), 2 * scale}, {Scheme::parse("tp8pp1ac"), 4 * scale}}),
          Strategy({{ring, 3 * scale}, {Scheme::parse("tp1cp4hybrid2pp4"), scale}})};
}

}  // namespace sluice::bench
