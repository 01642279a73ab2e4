#pragma once
// sluice's plans measured instead of simulated: the Megatron-LM-style system, DynaPipe and sluice of Hydraulis §8
// plan the same batches in sluice::compare (what `sluice simulate` compares), which hands over the plans each chose
// (compare::ChosenPlans); each plan is executed by the caller's runner (the CUDA backend, or the float64 host
// backend in tests), and its measured time is set beside the simulator's prediction for the same plan. The systems
// choose among the profile's schemes, TP, CP and recompute included, and sluice's iterations may run a flex CP
// domain's groups; every one of them is executed as planned.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sluice/compare/compare.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/microbatch/types.hpp"
#include "sluice_executor/builders.hpp"
#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/trace.hpp"

namespace sluice::executor {

struct MeasureOptions {
  // How DynaPipe's planner charges a micro-batch. The executor runs every micro-batch packed, so packed makes the
  // prediction about what runs; padded is DynaPipe's own shape (the comparison's).
  microbatch::Layout dynapipe_layout = microbatch::Layout::packed;
  std::uint64_t token_seed = 1;  // iteration k's token ids are drawn from token_seed + k
};

struct MeasuredIteration {
  std::string strategy;
  double predicted = 0;    // the simulator's makespan of the plan
  double replayed = 0;     // the plan's orders replayed on its measured op times: the iteration with a GPU per rank
  double measured = 0;     // the run's wall-clock makespan (ranks sharing one device take turns or contend)
  double layout_move = 0;  // sluice: the modelled pull and push its makespan leaves exposed; not executed
  double activation_peak_bytes = 0;  // the most any rank held at once
  double loss = 0;
};

struct MeasuredSystem {
  compare::System system = compare::System::megatron;
  std::string configuration;
  std::vector<MeasuredIteration> iterations;
  [[nodiscard]] double mean_predicted() const { return mean(&MeasuredIteration::predicted); }
  [[nodiscard]] double mean_replayed() const { return mean(&MeasuredIteration::replayed); }
  // The prediction's relative error against the replayed iteration, over the run.
  [[nodiscard]] double error() const { return (mean_predicted() - mean_replayed()) / mean_replayed(); }

private:
  [[nodiscard]] double mean(double MeasuredIteration::*field) const {
    double sum = 0;
    for (const MeasuredIteration& iteration : iterations) sum += iteration.*field;
    return iterations.empty() ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(iterations.size());
  }
};

struct SystemsMeasurement {
  std::vector<compare::BatchSize> batches;
  std::vector<Strategy> candidates;     // sluice's
  std::vector<MeasuredSystem> systems;  // Megatron-LM, DynaPipe, sluice
};

namespace detail {

// Runs `job` and sets its measured times beside `predicted`.
template <class Runner>
MeasuredIteration measure(const Job& job, Runner& run, std::string strategy, double predicted) {
  const RunReport report = run(job);
  const TimingTable table = timing_table(job, report);
  return {.strategy = std::move(strategy),
          .predicted = predicted,
          .replayed = table.replayed,
          .measured = table.measured,
          .layout_move = 0,
          .activation_peak_bytes =
              report.activation_peak_bytes.empty()
                  ? 0.0
                  : *std::max_element(report.activation_peak_bytes.begin(), report.activation_peak_bytes.end()),
          .loss = report.result.loss};
}

}  // namespace detail

// The three systems on `batches` (each not empty, no sequence longer than options.context), every plan executed by
// `run(const Job&) -> RunReport`. sluice proposes its candidates from `dataset` (truncated to the context), as the
// comparison does. Raises invalid_input when a system cannot hold the context.
template <class Runner>
SystemsMeasurement measure_systems(const compare::Options& options, const ModelConfig& model,
                                   const data::LengthDataset& dataset, std::span<const std::vector<Sequence>> batches,
                                   Runner&& run, const MeasureOptions& measure = {}) {
  require_valid(model);
  sluice::require(!batches.empty(), "measure: no batches");
  SystemsMeasurement result;
  std::vector<std::vector<SequenceTokens>> tokens;
  for (std::size_t k = 0; k < batches.size(); ++k) {
    sluice::require(!batches[k].empty(), "measure: batch ", k, " is empty");
    tokens.push_back(make_tokens(batches[k], model.vocab, measure.token_seed + k));
  }

  compare::Options settings = options;
  settings.dynapipe_layout = measure.dynapipe_layout;
  compare::ChosenPlans chosen;
  const compare::Comparison comparison = compare::compare_systems(settings, dataset, batches, {}, &chosen);
  result.batches = comparison.batches;
  result.candidates = comparison.candidates;
  constexpr std::array measured_systems{compare::System::megatron, compare::System::dynapipe, compare::System::sluice};
  for (const compare::System system : measured_systems) {
    const compare::SystemRun& simulated = comparison.systems[system];
    if (simulated.failure) sluice::fail("measure: ", compare::name(system), ": ", *simulated.failure);
    result.systems.push_back({.system = system, .configuration = simulated.configuration, .iterations = {}});
  }
  const Strategy& dynapipe_strategy = comparison.systems[compare::System::dynapipe].strategies.front();
  // sluice's flex CP domains, made as its planner made them, for the problems of the iterations that run one.
  const plan::OfferedFlex flex =
      plan::offered_flex_domains(settings.profile, compare::flex_scope(settings), compare::planner_options(settings));
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const compare::ScheduledPlan& megatron = chosen.megatron[k];
    result.systems[0].iterations.push_back(
        detail::measure(job_from_iteration(model, tokens[k], megatron.plan, megatron.schedule), run,
                        megatron.plan.strategy.name(), megatron.schedule.makespan));
    const schedule::PipelineRunPlan& dynapipe = chosen.dynapipe[k];
    result.systems[1].iterations.push_back(detail::measure(
        job_from_pipeline_plan(model, tokens[k], dynapipe, dynapipe_strategy.parts().front().scheme.degrees()), run,
        dynapipe_strategy.name(), dynapipe.makespan));
    const plan::SimulatedIteration& sluice = chosen.sluice[k];
    MeasuredIteration measured;
    if (sluice.runs_flex()) {
      const plan::FlexIteration& iteration = *sluice.flex;
      const assign::FlexCpProblem problem = flex.domains->domains()[iteration.domain]->problem_of(batches[k]);
      measured =
          detail::measure(job_from_flex(model, tokens[k], iteration, problem), run,
                          comparison.systems[compare::System::sluice].iterations[k].strategy, iteration.plan.seconds);
    } else {
      measured = detail::measure(job_from_iteration(model, tokens[k], sluice.plan, sluice.schedule), run,
                                 sluice.plan.strategy.name(), sluice.schedule.makespan);
    }
    // The share of the kept candidate's pull and push that its makespan leaves exposed: modelled, not run.
    measured.layout_move = comparison.systems[compare::System::sluice].iterations[k].switching;
    result.systems[2].iterations.push_back(std::move(measured));
  }
  return result;
}

}  // namespace sluice::executor
