#pragma once
// `sluice trace`: one iteration's sluice plan (plan::IterationPlanner over proposed or given candidates, as
// sluice simulate's sluice system plans it), and its pipeline timeline as an SVG picture and as Chrome-trace JSON.
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <optional>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "candidates.hpp"
#include "options.hpp"
#include "outputs.hpp"
#include "scenario.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/compare/sluice.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/chrome_trace.hpp"
#include "sluice/io/run_json.hpp"
#include "sluice/io/svg.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/plan/layout_moves.hpp"
#include "sluice/plan/simulated_iteration.hpp"

namespace sluice::cli {

inline constexpr std::string_view trace_usage =
    "usage: sluice trace [--profile P] [--lengths F] [--gpus N] [--tokens T] [--context L] [--seed X]\n"
    "                    [--iteration I | --batch F] [--strategies S] [--schedule cyclic|1f1b] [--trials T]\n"
    "                    [--threads N] [--bandwidth B] [--latency S] [--layout-moves M] [--cross-node-tp]\n"
    "                    [--svg F] [--trace F]\n"
    "                    [--cp C1,C2|auto [--cp-kinds K]] [--ac] [--json]\n"
    "\n"
    "Plans iteration I of the dataset with the sluice plan that sluice simulate's sluice system runs (every\n"
    "candidate dispatched, packed and scheduled, with and without the V step, charged its layout move, the\n"
    "fastest kept), prints its pipelines, and writes their timeline: per rank its forward, backward and sends,\n"
    "with micro-batch ids.\n"
    "\n"
    "  --profile P      profile JSON file or bundled name (default llama2-7b)\n"
    "  --lengths F      length file or bundled name (default man-pages)\n"
    "  --gpus N         cluster size (default: the profile's own)\n"
    "  --tokens T       tokens per iteration (default 100000)\n"
    "  --context L      truncate longer sequences (default: a proposal file's max_len; else the longest\n"
    "                   sequence, or the longest MaxLen of a usable scheme (of the --strategies given) when shorter)\n"
    "  --batch F        trace exactly this batch (F or - for standard input: as sluice plan --batch reads it)\n"
    "  --seed X         sampler, dispatch and schedule seed (default 0)\n"
    "  --iteration I    which iteration of the seeded sampler, from 0 (default 0; as in sluice simulate)\n"
    "  --strategies S   candidates as for sluice plan (default: proposed for the dataset, as sluice simulate)\n"
    "  --schedule K     cyclic (adaptive, 1F1B kept when faster; the default) or 1f1b\n"
    "  --trials T       dispatch trials (default 100)\n"
    "  --threads N      dispatch threads (default 1; the plan does not depend on it)\n"
    "  --bandwidth B    stage-to-stage bandwidth in GB/s, 0.001 to 10000 (default 100)\n"
    "  --latency S      stage-to-stage latency in seconds, 0 to 1 (default 1e-5)\n"
    "  --layout-moves M what each candidate is charged for its parameter pull and gradient push: none, exposed\n"
    "                   (the part no overlap hides; the default, as sluice simulate) or all\n"
    "  --cross-node-tp  let proposed candidates use schemes whose TP spans nodes\n"
    "  --cp C1,C2       also schemes with context parallelism of these degrees (2 to 1024), derived from\n"
    "                   the profile's ⟨TP, PP⟩ schemes (docs/cost-models.md; needs the profile's model.heads)\n"
    "                   auto: the powers of two from 2 to the smallest degree that holds the context, of\n"
    "                   ring and Ulysses unless --cp-kinds (none when the profile's schemes hold it)\n"
    "  --cp-kinds K     the CP kinds those may use: ring (the default), ulysses, hybrid, comma-separated\n"
    "  --ac             also every scheme with full activation recomputation\n"
    "  --svg F          write the timeline as a self-contained SVG picture to F\n"
    "  --trace F        write the timeline as Chrome-trace JSON to F (ui.perfetto.dev)\n"
    "  --json           print one sluice.trace_run JSON document\n";

namespace trace_inputs {

// The candidates as given, or proposed as sluice simulate proposes them.
inline std::vector<Strategy> candidates_of(const std::optional<Candidates>& given, const Scenario& scenario) {
  if (given) return given->strategies;
  compare::SluiceCandidates proposed = compare::propose_candidates(scenario.settings, scenario.dataset);
  if (proposed.failure)
    throw infeasible("trace: " + *proposed.failure +
                     cp_advice(scenario.settings.profile, scenario.settings.context, scenario.settings.cross_node_tp));
  return std::move(proposed.strategies);
}

}  // namespace trace_inputs

namespace trace_report {

// What candidate k's plan is charged for its layout move (nothing under --layout-moves none).
inline double charged(const plan::IterationPlanner& planner, std::size_t k) {
  return planner.charged().empty() ? 0.0 : planner.charged()[k];
}

inline io::TraceRun run(const Scenario& scenario, std::int64_t index, const data::Batch& batch,
                        const plan::IterationPlanner& planner, const plan::SimulatedIteration& iteration) {
  io::TraceRun run = io::trace_run(planner, iteration);
  run.profile = scenario.settings.profile.name();
  run.gpus = scenario.settings.profile.gpus();
  run.lengths = scenario.dataset.source();
  run.context = scenario.settings.context;
  run.iteration = index;
  run.sequences = batch.sequences.size();
  run.tokens = batch.tokens;
  return run;
}

// The fastest flex CP domain's plan: each micro-batch's groups as "CP degree × sequences".
inline void print_flex(std::ostream& out, const plan::FlexIteration& flex, bool runs) {
  out << "flex CP domain " << flex.domain << ", " << flex.strategy.name() << ": " << flex.plan.seconds << " s in "
      << flex.plan.micro_batches.size() << " micro-batches + " << flex.overhead << " s layout move = " << flex.total()
      << " s" << (runs ? "  <- runs" : "") << "\n";
  for (std::size_t m = 0; m < flex.plan.micro_batches.size(); ++m) {
    out << "  micro-batch " << m << ":";
    for (const assign::FlexCpGroup& group : flex.plan.micro_batches[m].groups)
      out << " " << flex.schemes[static_cast<std::size_t>(group.degree_index)].name() << "×" << group.sequences.size();
    out << "\n";
  }
}

inline void print(std::ostream& out, const Scenario& scenario, std::int64_t index, const data::Batch& batch,
                  const plan::IterationPlanner& planner, const plan::SimulatedIteration& iteration) {
  const std::span<const Strategy> candidates = planner.candidates();
  out << "trace: " << describe(scenario) << "; iteration " << index << ": " << batch.sequences.size() << " sequences, "
      << batch.tokens << " tokens; layout moves charged: " << plan::name(planner.options().layout_moves) << "\n\n";
  out << "  candidate  simulated (s)  layout move (s)  strategy\n" << std::fixed << std::setprecision(3);
  bool unplanned = false;
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    out << std::setw(11) << k << std::setw(15);
    if (iteration.makespans[k])
      out << *iteration.makespans[k];
    else
      out << "-";
    out << std::setw(17) << charged(planner, k);
    unplanned = unplanned || !iteration.makespans[k];
    out << "  " << candidates[k].name() << (k == iteration.chosen ? "  <- chosen" : "") << "\n";
  }
  if (unplanned)
    out << "  -: not planned, no pipeline of the candidate holds the batch's longest sequence ("
        << longest_length(batch.sequences) << " tokens)\n";
  out << "\n  pipeline  scheme     micro-batches  schedule               makespan (s)  estimate (s)  peak GiB\n";
  for (std::size_t j = 0; j < iteration.schedule.pipelines.size(); ++j) {
    const assign::PipelinePlan& pipeline = iteration.plan.pipelines[j];
    out << std::setw(10) << j << "  " << std::left << std::setw(11) << pipeline.scheme.name() << std::right
        << std::setw(13) << pipeline.micro_batches.size();
    const auto& scheduled = iteration.schedule.pipelines[j];
    if (!scheduled) {
      out << "  (idle)\n";
      continue;
    }
    const schedule::PipelineSchedule& s = scheduled->schedule;
    double peak = 0;
    for (const double bytes : s.simulation.peak_memory) peak = std::max(peak, bytes);
    out << "  " << std::left << std::setw(21)
        << (s.kind == schedule::ScheduleKind::one_f_one_b ? "1F1B"
            : s.memory_aware                              ? "cyclic, memory-aware"
                                                          : "cyclic")
        << std::right << std::setw(14) << s.simulation.makespan << std::setw(14) << pipeline.estimate << std::setw(10)
        << peak / 0x1p30 << "\n";
  }
  out << (iteration.flex ? "\nchosen candidate " : "\niteration ") << iteration.schedule.makespan
      << " s simulated (packing estimate " << iteration.plan.estimate << " s) + " << iteration.plan.overhead
      << " s layout move = " << iteration.candidate_total() << " s";
  if (iteration.flex) {
    out << "\n";
    print_flex(out, *iteration.flex, iteration.runs_flex());
    out << "iteration " << iteration.total() << " s";
  }
  out << ", " << std::setprecision(0) << static_cast<double>(batch.tokens) / iteration.total() << " tokens/s\n";
}

}  // namespace trace_report

inline int trace(std::span<const std::string_view> args, std::ostream& out, Outputs& outputs) {
  std::set<std::string, std::less<>> valued = scenario_options;
  valued.insert({"iteration", "strategies", "schedule", "layout-moves", "svg", "trace"});
  const Options options(args, valued, {"cross-node-tp", "ac", "json", "help"});
  if (options.flag("help")) {
    out << trace_usage;
    return 0;
  }
  sluice::require(!options.text("batch") || !options.text("iteration"),
                  "options --batch and --iteration cannot be combined: a given batch is its own iteration");
  const std::int64_t index = options.integer("iteration").value_or(0);
  const auto strategies = options.text("strategies");
  const std::optional<Candidates> given = strategies ? std::optional(read_candidates(*strategies)) : std::nullopt;
  const Scenario scenario = read_scenario(options, given ? &*given : nullptr);
  const compare::Options& setup = scenario.settings;
  data::BatchSampler sampler = scenario.sampler();
  if (!scenario.batch)
    for (std::int64_t k = 0; k < index; ++k) sampler.next();  // the iterations before it, drawn and dropped
  const data::Batch batch = scenario.batch ? *scenario.batch : sampler.next();

  plan::Options planning = compare::planner_options(setup);
  planning.schedule.kind = schedule_kind_of(options);
  planning.layout_moves = layout_moves_of(options);
  const plan::IterationPlanner planner(
      setup.profile, trace_inputs::candidates_of(given, scenario), planning,
      plan::offered_flex_domains(setup.profile, compare::flex_scope(setup), planning).domains);
  const plan::SimulatedIteration iteration = planner.plan(batch.sequences);
  planner.validate(iteration, batch.sequences);
  const compare::Timeline timeline = compare::timeline_of(iteration.plan, iteration.schedule);
  const std::string title =
      sluice::concat("sluice: iteration ", index, ", ", iteration.plan.strategy.name(), ", ", describe(scenario));
  if (const auto svg = options.text("svg"))
    outputs.write(*svg, io::timeline_svg(timeline.pipelines, timeline.names, title));
  if (const auto trace_file = options.text("trace"))
    outputs.write(*trace_file, io::chrome_trace(timeline.pipelines, timeline.names).dump());
  if (options.flag("json"))
    out << io::document_text(trace_report::run(scenario, index, batch, planner, iteration));
  else
    trace_report::print(out, scenario, index, batch, planner, iteration);
  return 0;
}

}  // namespace sluice::cli
