#pragma once
// What a compared system returns (one SystemRun per system): per iteration the simulated time, the strategy
// that ran, the time charged for moving parameters between layouts and the load imbalance between pipelines,
// the measures of Hydraulis §8 (Fig. 10 and 12); and iteration 0's pipelines for pictures.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/simulate.hpp"

namespace sluice::compare {

struct IterationOutcome {
  double seconds = 0;      // simulated iteration time; HotSPa: its length ranges' times and switching, summed
  double switching = 0;    // share of `seconds` spent moving parameters and gradients between layouts (HotSPa's
                           // switches; sluice's pull and push, the part not overlapped)
  double layout_move = 0;  // the α–β time of those moves before any overlap (switching <= layout_move)
  double imbalance = 1;    // slowest / fastest busy pipeline (HotSPa: weighted by each range's time)
  double idle = 0;         // share of pipelines without work (HotSPa: weighted likewise)
  // WLB-LLM's imbalance degree (Wang et al., OSDI'25, §3): the slowest micro-batch's forward time times the
  // number of micro-batches over their total forward time; 1 when every micro-batch takes as long. The worst
  // busy pipeline's (HotSPa: weighted by each range's time).
  double micro_batch_imbalance = 1;
  std::string strategy{};  // what ran
  // Measured: the wall-clock seconds the comparison spent planning this iteration for the system (for a static
  // system, every strategy it tries; for sluice, every candidate and flex CP domain).
  double planning_seconds = 0;
  friend bool operator==(const IterationOutcome&, const IterationOutcome&) = default;
};

// The pipelines of one simulated iteration, for pictures and traces.
struct Timeline {
  std::vector<schedule::Simulation> pipelines;
  std::vector<std::string> names;
  friend bool operator==(const Timeline&, const Timeline&) = default;
};

struct SystemRun {
  std::string name;
  std::optional<std::string> failure;  // why the system cannot run this scenario
  std::string configuration;           // what it was configured with, in words
  std::vector<Strategy> strategies;    // its static strategies (HotSPa: one per length range); sluice: candidates
  std::vector<double> layout_moves;    // sluice: each candidate's pull and push beyond its own all-gather
  std::vector<IterationOutcome> iterations;
  std::vector<assign::IterationPlan> plans;  // the first few iterations' plans, where the system makes them
  Timeline first;                            // iteration 0's pipelines
  [[nodiscard]] std::vector<double> seconds() const {
    std::vector<double> result;
    for (const IterationOutcome& outcome : iterations) result.push_back(outcome.seconds);
    return result;
  }
  friend bool operator==(const SystemRun&, const SystemRun&) = default;
};

// A lower bound on any plan's iteration time of one batch (compare/bound.hpp makes it).
struct IterationBound {
  double seconds = 0;                // no plan of the batch is faster: the two arguments together, at least either
  double area_seconds = 0;           // every sequence's least GPU-time over the GPUs, with fill and drain
  double critical_path_seconds = 0;  // the slowest sequence's least trip through a pipeline
  friend bool operator==(const IterationBound&, const IterationBound&) = default;
};

// What a compared batch held, and how fast any plan of it could run (empty where no scheme holds a sequence).
struct BatchSize {
  std::size_t sequences = 0;
  std::int64_t tokens = 0;
  std::optional<IterationBound> lower_bound{};
  friend bool operator==(const BatchSize&, const BatchSize&) = default;
};

// Iterations whose plans a SystemRun keeps for pictures (Hydraulis Fig. 12b shows five).
inline constexpr std::size_t pictured_iterations = 5;

inline std::string pipeline_name(std::size_t index, const Scheme& scheme) {
  return "pipeline " + std::to_string(index) + " (" + scheme.name() + ")";
}

// The busy pipelines of a scheduled iteration plan, named by index and scheme.
inline Timeline timeline_of(const assign::IterationPlan& plan, const plan::IterationSchedule& schedule) {
  Timeline timeline;
  for (std::size_t j = 0; j < schedule.pipelines.size(); ++j)
    if (schedule.pipelines[j]) {
      timeline.pipelines.push_back(schedule.pipelines[j]->schedule.simulation);
      timeline.names.push_back(pipeline_name(j, plan.pipelines[j].scheme));
    }
  return timeline;
}

}  // namespace sluice::compare
