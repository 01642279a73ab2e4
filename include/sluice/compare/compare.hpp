#pragma once
// The headline comparison of Hydraulis §8 (Fig. 10–12): Megatron-LM-style fixed-length packing (⟨TP, PP⟩, and
// with context parallelism), DeepSpeed (ZeRO-3 × Ulysses), CP degrees per micro-batch (Megatron-LM's dynamic CP,
// FlexSP), HotSPa-style length ranges, DynaPipe and sluice on the
// same batches, every iteration estimated the same way (the simulated
// makespan of its slowest pipeline, stage-to-stage links in Options::problem), every plan validated; with each
// system's summary. `sluice simulate` prints it; docs/study.md is made of it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/compare/bound.hpp"
#include "sluice/compare/deepspeed.hpp"
#include "sluice/compare/dynapipe.hpp"
#include "sluice/compare/flex_cp.hpp"
#include "sluice/compare/hotspa.hpp"
#include "sluice/compare/iteration_plans.hpp"
#include "sluice/compare/megatron.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/compare/sluice.hpp"
#include "sluice/compare/summary.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/plan_pipeline.hpp"

namespace sluice::compare {

struct Comparison {
  std::vector<BatchSize> batches;  // per iteration
  BySystem<SystemRun> systems;
  std::vector<Strategy> candidates;  // sluice's proposed strategies
  std::vector<std::int64_t> bounds;  // HotSPa's length ranges (0, b0], (b0, b1], ...
  [[nodiscard]] bool any_ran() const {
    for (const SystemRun& run : systems)
      if (!run.failure) return true;
    return false;
  }
  friend bool operator==(const Comparison&, const Comparison&) = default;
};

// The systems on `iterations` batches drawn one at a time from `next_batch`: every system plans a batch, then
// it is dropped, so memory does not grow with the batches' size times their number. `dataset` (truncated to the
// context) is what sluice proposes from.
// Every iteration's plan as the Megatron-LM-style system, DynaPipe and sluice chose it, for a caller that runs
// them (the reference executor). HotSPa's are not kept: each of its iterations is several plans, one per range.
struct ChosenPlans {
  std::vector<ScheduledPlan> megatron;
  std::vector<schedule::PipelineRunPlan> dynapipe;
  std::vector<plan::SimulatedIteration> sluice;
};

// `chosen`, if given, gets the systems' plans; a system that cannot run leaves its list empty.
inline Comparison compare_systems(const Options& options, const data::LengthDataset& dataset, std::size_t iterations,
                                  const std::function<std::vector<Sequence>()>& next_batch,
                                  const Progress& progress = {}, ChosenPlans* chosen = nullptr) {
  sluice::require(iterations > 0, "compare: no iterations to compare");
  Comparison comparison;
  SluiceCandidates candidates = propose_candidates(options, dataset);
  comparison.candidates = candidates.strategies;
  Megatron megatron(options, chosen ? &chosen->megatron : nullptr);
  Megatron megatron_cp(options, nullptr, System::megatron_cp);
  DeepSpeed deepspeed(options);
  FlexCp dynamic_cp(options, System::dynamic_cp);
  FlexCp flexsp(options, System::flexsp);
  HotSpa hotspa(options);
  DynaPipe dynapipe(options, chosen ? &chosen->dynapipe : nullptr);
  std::optional<Sluice> sluice;
  if (!candidates.strategies.empty())
    sluice.emplace(options, candidates.strategies, chosen ? &chosen->sluice : nullptr);
  comparison.bounds = hotspa.bounds();
  // Each system's planning time per iteration, measured around its planner (the iterations' records get it below).
  BySystem<std::vector<double>> planning;
  auto timed = [&](System system, auto& planner, Span<const Sequence> batch) {
    const auto start = std::chrono::steady_clock::now();
    planner.add(batch);
    planning[system].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };

  for (std::size_t k = 0; k < iterations; ++k) {
    const std::vector<Sequence> batch = next_batch();
    std::int64_t tokens = 0;
    for (const Sequence& sequence : batch) tokens += sequence.length();
    comparison.batches.push_back(
        {.sequences = batch.size(), .tokens = tokens, .lower_bound = iteration_bound(options, batch)});
    timed(System::megatron, megatron, batch);
    timed(System::megatron_cp, megatron_cp, batch);
    timed(System::deepspeed, deepspeed, batch);
    timed(System::dynamic_cp, dynamic_cp, batch);
    timed(System::flexsp, flexsp, batch);
    timed(System::hotspa, hotspa, batch);
    timed(System::dynapipe, dynapipe, batch);
    if (sluice) timed(System::sluice, *sluice, batch);
    if (progress) progress(k + 1, iterations);
  }

  comparison.systems[System::megatron] = std::move(megatron).result();
  comparison.systems[System::megatron_cp] = std::move(megatron_cp).result();
  comparison.systems[System::deepspeed] = std::move(deepspeed).result();
  comparison.systems[System::dynamic_cp] = std::move(dynamic_cp).result();
  comparison.systems[System::flexsp] = std::move(flexsp).result();
  comparison.systems[System::hotspa] = std::move(hotspa).result();
  comparison.systems[System::dynapipe] = std::move(dynapipe).result();
  comparison.systems[System::sluice] =
      sluice ? std::move(*sluice).result() : detail::failed(System::sluice, *std::move(candidates.failure));
  for (const System system : all_systems) {
    std::vector<IterationOutcome>& outcomes = comparison.systems[system].iterations;
    if (outcomes.size() != planning[system].size()) continue;  // a failed system has no iterations
    for (std::size_t k = 0; k < outcomes.size(); ++k) outcomes[k].planning_seconds = planning[system][k];
  }
  return comparison;
}

// The systems on given batches.
inline Comparison compare_systems(const Options& options, const data::LengthDataset& dataset,
                                  Span<const std::vector<Sequence>> batches, const Progress& progress = {},
                                  ChosenPlans* chosen = nullptr) {
  std::size_t next = 0;
  return compare_systems(
      options, dataset, batches.size(), [&] { return batches[next++]; }, progress, chosen);
}

// Each system's summary over the comparison's iterations (a failed system's is left empty), speedups of sluice's
// and how far each is above the lower bound.
inline BySystem<Summary> summarize(const Comparison& comparison) {
  BySystem<Summary> summaries;
  const SystemRun& sluice = comparison.systems[System::sluice];
  for (const System system : all_systems)
    if (!comparison.systems[system].failure)
      summaries[system] = summarize(comparison.systems[system], comparison.batches, sluice);
  return summaries;
}

}  // namespace sluice::compare
