#pragma once
// `sluice plan`: K iterations of a dataset, each given the sluice plan (plan::IterationPlanner) over a candidate
// set: the chosen strategy, its simulated time, layout move and planning time, then a summary.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <optional>
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "candidates.hpp"
#include "context.hpp"
#include "inputs.hpp"
#include "options.hpp"
#include "outputs.hpp"
#include "progress.hpp"
#include "propose.hpp"
#include "scenario.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/compare/bound.hpp"
#include "sluice/compare/statistics.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/data_json.hpp"
#include "sluice/io/json_stream.hpp"
#include "sluice/io/plan_run_json.hpp"
#include "sluice/io/proposal_json.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/io/svg.hpp"
#include "sluice/plan/flex_domain.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/shard/ranks.hpp"

namespace sluice::cli {

inline constexpr std::string_view plan_usage =
    "usage: sluice plan (--strategies S | --propose) [--profile P] [--lengths F] [--gpus N] [--tokens T]\n"
    "                   [--iterations K | --batch F] [--context L] [--seed X] [--trials T] [--threads N]\n"
    "                   [--bandwidth B] [--latency S] [--layout-moves M] [--svg F] [--cross-node-tp]\n"
    "                   [--cp C1,C2|auto [--cp-kinds K]] [--ac] [--json]\n"
    "\n"
    "Plans K iterations: each draws a batch of about T tokens from the dataset, dispatches and packs it for\n"
    "every candidate strategy (with and without the V step), schedules every pipeline, and keeps the candidate\n"
    "with the lowest simulated time plus its layout move: the sluice plan that sluice simulate, sluice trace\n"
    "and the Planner a trainer runs give. Each batch also gets a lower bound that no plan on the profile's\n"
    "schemes beats (as sluice simulate's), and the summary says how far above it the plans are. With --json,\n"
    "each iteration also holds the chosen strategy's rank placement and the process groups a trainer creates.\n"
    "\n"
    "  --strategies S  a sluice.candidates, sluice.proposal or sluice.sampled_proposal JSON file, or strategies\n"
    "                  written like '1*tp16pp1+6*tp8pp1,4*tp16pp1' (comma-separated)\n"
    "  --propose       use the candidates of `sluice propose` on the same profile, lengths, GPUs, tokens,\n"
    "                  context and --cross-node-tp (default options otherwise)\n"
    "  --profile P     profile JSON file or bundled name (default llama2-7b)\n"
    "  --lengths F     length file or bundled name (default man-pages)\n"
    "  --gpus N        cluster size (default: the profile's own)\n"
    "  --tokens T      tokens per iteration (default 100000)\n"
    "  --iterations K  iterations to plan (default 10)\n"
    "  --batch F       plan exactly this batch, once, instead of sampling: F (or - for standard input) holds one\n"
    "                  length per line, a JSON array of lengths, or a JSON array of {\"id\": I, \"length\": L}\n"
    "                  (ids optional: a position by default); at most 2^20 sequences, none truncated\n"
    "  --context L     truncate longer sequences (default: a proposal file's max_len; else the longest\n"
    "                  sequence, or the largest MaxLen among the candidates when shorter; with --propose, of a\n"
    "                  usable scheme, as sluice propose)\n"
    "  --seed X        sampler and dispatch seed (default 0)\n"
    "  --trials T      dispatch trials (default 100)\n"
    "  --threads N     dispatch threads (default 1; the plan does not depend on it)\n"
    "  --svg F         also write a picture of the pipeline loads (micro-batches) of the first 100 iterations\n"
    "  --bandwidth B   stage-to-stage bandwidth in GB/s, 0.001 to 10000 (default 100)\n"
    "  --latency S     stage-to-stage latency in seconds, 0 to 1 (default 1e-5)\n"
    "  --layout-moves M what each candidate is charged for its parameter pull and gradient push (Hydraulis §5:\n"
    "                  fully sharded optimizer states, the profile's model as LLaMA-like layers on the profile's\n"
    "                  cluster): none, exposed (the part no overlap hides; the default) or all\n"
    "  --cross-node-tp with --propose, allow schemes whose TP spans nodes\n"
    "  --cp C1,C2     also schemes with context parallelism of these degrees (2 to 1024), derived from\n"
    "                 the profile's ⟨TP, PP⟩ schemes (docs/cost-models.md; needs the profile's model.heads)\n"
    "                 auto: the powers of two from 2 to the smallest degree that holds the context, of\n"
    "                 ring and Ulysses unless --cp-kinds (none when the profile's schemes hold it)\n"
    "  --cp-kinds K   the CP kinds those may use: ring (the default), ulysses, hybrid, comma-separated\n"
    "  --ac           also every scheme with full activation recomputation\n"
    "  --json          print one sluice.plan_run JSON document, with every iteration's full plan\n";

namespace plan_inputs {

// The candidates with the context they were chosen for (proposed ones: the rule's context, context.hpp).
inline Candidates candidates_of(const Options& options, const cost::Profile& profile,
                                const data::LengthDataset& loaded) {
  if (const auto text = options.text("strategies")) return read_candidates(*text);
  proposal::ProposeOptions settings = propose_options(options, profile);
  settings.max_len = context_of(options, loaded, profile);
  require_context_held(profile, settings);
  return {proposal::propose(loaded.truncated(*settings.max_len), profile, settings).strategies(), settings.max_len};
}

// The sluice plan's options: this command's dispatch, links and layout-move policy, the adaptive cyclic search
// seeded with --seed.
inline plan::Options planner_options_of(const Options& options, const cost::Profile& profile) {
  return {.dispatch = dispatch_options(options),
          .schedule = {.kind = schedule::ScheduleKind::cyclic, .seed = seed_of(options), .clusters = 0},
          .problem = {.hidden = std::max<std::int64_t>(profile.spec().model.hidden, 1), .link = link_of(options)},
          .layout_moves = layout_moves_of(options),
          .v_step = plan::VStep::best};
}

}  // namespace plan_inputs

namespace plan_report {

// Iterations are streamed: each is sampled, planned, written and dropped, so memory does not grow with K. What
// stays per iteration is three numbers for the summary. The pieces are io::PlanRun's, so io reads the whole.
struct Tally {
  std::vector<double> totals;
  std::vector<double> planning;
  std::map<std::string, int> chosen;
  std::vector<std::optional<double>> lower_bounds;
  double tokens = 0;
};

inline void begin(io::JsonObjectStream& document, std::ostream& out, bool json, const plan::IterationPlanner& planner,
                  std::int64_t context, const data::LengthDataset& dataset,
                  const std::optional<std::string>& batch_file) {
  const cost::Profile& profile = planner.profile();
  if (json) {
    if (batch_file) document.member("batch", *batch_file);
    document.member("candidates", assign::CandidateSet{{planner.candidates().begin(), planner.candidates().end()}});
    document.member("context", context);
    document.member("format", io::document_traits<io::PlanRun>::format);
    document.member("gpus", profile.gpus());
    document.open_array("iterations");
    return;
  }
  out << "plan: " << profile.name() << " on " << profile.gpus() << " GPUs, " << planner.candidates().size()
      << " candidates, context " << context << ", " << (batch_file ? "batch " + *batch_file : dataset.source())
      << "; layout moves charged: " << plan::name(planner.options().layout_moves) << "\n\n";
  out << "  iter  sequences    tokens  simulated (s)  layout move (s)  total (s)  plan (ms)  strategy\n";
  out << std::fixed;
}

inline std::string chosen_name(const plan::SimulatedIteration& iteration) {
  return io::ran_name(iteration.plan.strategy, iteration.runs_flex() ? &*iteration.flex : nullptr);
}

// `total`: what the plan was chosen by, the simulated makespan plus the charged layout move (or the flex CP plan's
// time plus its charge, where that runs).
inline void iteration(io::JsonObjectStream& document, std::ostream& out, bool json, std::int64_t k,
                      const data::Batch& batch, const plan::SimulatedIteration& iteration, double seconds,
                      const shard::RankPlacement* ranks, const cost::Profile& profile,
                      const std::optional<compare::IterationBound>& lower_bound) {
  const assign::IterationPlan& plan = iteration.plan;
  if (json) {
    std::optional<shard::RankPlacement> flex_ranks;
    if (iteration.flex) flex_ranks = shard::flex_domain_ranks(iteration.flex->strategy, profile);
    document.element(io::PlanRunIteration{k, batch.epoch, batch.sequences.size(), batch.tokens,
                                          iteration.schedule.makespan, seconds, plan, *ranks, iteration.flex,
                                          std::move(flex_ranks), lower_bound});
    return;
  }
  const bool flex = iteration.runs_flex();
  out << std::setw(6) << k << std::setw(11) << batch.sequences.size() << std::setw(10) << batch.tokens
      << std::setprecision(3) << std::setw(15) << (flex ? iteration.flex->plan.seconds : iteration.schedule.makespan)
      << std::setw(17) << (flex ? iteration.flex->overhead : plan.overhead) << std::setw(11) << iteration.total()
      << std::setprecision(2) << std::setw(11) << seconds * 1e3 << "  " << chosen_name(iteration) << "\n";
}

inline void summary(io::JsonObjectStream& document, std::ostream& out, bool json, const plan::IterationPlanner& planner,
                    const Tally& tally) {
  const cost::Profile& profile = planner.profile();
  const double seconds = compare::mean(tally.totals) * static_cast<double>(tally.totals.size());
  if (json) {
    document.close_array();
    document.member("profile", profile.name());
    document.member("summary",
                    io::plan_run_summary(tally.totals, tally.planning, tally.lower_bounds, tally.chosen, tally.tokens));
    // Every plan's schemes are its candidates' or, with flex CP domains, CP schemes, so they decide the version,
    // as io::to_document would.
    const assign::CandidateSet candidates{{planner.candidates().begin(), planner.candidates().end()}};
    const int version = io::document_traits<io::PlanRun>::version;
    document.member("version", planner.flex() ? version + 1 : io::document_version(version, io::json(candidates)));
    document.close();
    return;
  }
  out << std::setprecision(3) << "\nsimulated + layout move " << compare::mean(tally.totals) << " ± "
      << compare::deviation(tally.totals) << " s per iteration, " << std::setprecision(0) << tally.tokens / seconds
      << " tokens/s; planning " << std::setprecision(2) << compare::mean(tally.planning) * 1e3 << " ms per iteration\n";
  const io::PlanRunSummary bounded =
      io::plan_run_summary(tally.totals, tally.planning, tally.lower_bounds, tally.chosen, tally.tokens);
  if (bounded.mean_lower_bound)
    out << std::setprecision(3) << "no plan faster than " << *bounded.mean_lower_bound
        << " s per iteration (lower bound on the profile's schemes, mean); this plan " << std::setprecision(2)
        << *bounded.over_bound << "× above it\n";
  out << "chosen:";
  for (const auto& [name, count] : tally.chosen) out << "  " << name << " ×" << count;
  out << "\n";
}

}  // namespace plan_report

inline int plan(std::span<const std::string_view> args, std::ostream& out, Outputs& outputs,
                std::ostream* terminal = nullptr) {
  const Options options(args,
                        {"strategies", "profile", "lengths", "gpus", "tokens", "iterations", "batch", "context", "seed",
                         "trials", "threads", "bandwidth", "latency", "layout-moves", "svg", "cp", "cp-kinds"},
                        {"propose", "cross-node-tp", "ac", "json", "help"});
  if (options.flag("help")) {
    out << plan_usage;
    return 0;
  }
  const bool given = options.text("strategies").has_value();
  sluice::require(given || options.flag("propose"),
                  "option --strategies or --propose is required (see sluice plan --help)");
  sluice::require(!given || !options.flag("propose"), "options --strategies and --propose cannot be combined");
  const auto batch_file = options.text("batch");
  sluice::require(!batch_file || !options.text("iterations"),
                  "options --batch and --iterations cannot be combined: a given batch is planned once");

  const data::LengthDataset loaded = load_lengths(options);
  const cost::Profile profile = load_planning_profile(options, loaded);
  const Candidates chosen = plan_inputs::candidates_of(options, profile, loaded);
  std::int64_t widest = 0;
  for (const Strategy& strategy : chosen.strategies)
    widest = std::max(widest, profile.pipelines(strategy).front().max_len);
  sluice::require(widest > 0, "no candidate strategy can hold any sequence (every MaxLen is 0)");
  const std::int64_t context = context_of(options, loaded, profile, &chosen);
  const data::LengthDataset dataset = loaded.truncated(context);
  data::BatchSampler sampler(
      dataset, {.tokens_per_batch = options.integer("tokens").value_or(100'000), .seed = seed_of(options)});
  const std::optional<data::Batch> trainer_batch =
      batch_file ? std::optional(given_batch(*batch_file, widest,
                                             sluice::concat("any candidate holds (widest MaxLen ", widest, ")")))
                 : std::nullopt;
  const plan::Options planning = plan_inputs::planner_options_of(options, profile);
  // The flex CP domains `simulate` offers sluice, on this command's profile and context.
  const bool cross_node_tp = options.flag("cross-node-tp");
  const plan::OfferedFlex flex =
      plan::offered_flex_domains(profile, {.context = context, .cross_node_tp = cross_node_tp}, planning);
  const plan::IterationPlanner planner(profile, chosen.strategies, planning, flex.domains);

  const std::int64_t iterations = trainer_batch ? 1 : options.integer("iterations").value_or(10);
  const bool json = options.flag("json");
  plan_report::Tally tally;
  std::vector<assign::IterationPlan> pictured;
  constexpr std::size_t pictured_iterations = 100;  // enough to see the loads vary, few enough to read
  io::JsonObjectStream document(out);
  plan_report::begin(document, out, json, planner, context, dataset, batch_file);
  Progress progress(terminal, "plan", iterations);
  for (std::int64_t k = 0; k < iterations; ++k) {
    const data::Batch batch = trainer_batch ? *trainer_batch : sampler.next();
    const auto start = std::chrono::steady_clock::now();
    plan::SimulatedIteration iteration = planner.plan(batch.sequences);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    planner.validate(iteration, batch.sequences);
    std::optional<shard::RankPlacement> ranks;
    if (json) {
      ranks = shard::rank_placement(iteration.plan.strategy, profile);
      shard::validate(*ranks, iteration.plan.strategy, profile);
    }
    tally.totals.push_back(iteration.total());
    tally.planning.push_back(elapsed.count());
    ++tally.chosen[plan_report::chosen_name(iteration)];
    tally.tokens += static_cast<double>(batch.tokens);
    const std::optional<compare::IterationBound> bound =
        compare::iteration_bound(profile, cross_node_tp, batch.sequences);
    tally.lower_bounds.push_back(bound ? std::optional(bound->seconds) : std::nullopt);
    plan_report::iteration(document, out, json, k, batch, iteration, elapsed.count(), ranks ? &*ranks : nullptr,
                           profile, bound);
    if (options.text("svg") && pictured.size() < pictured_iterations && !iteration.runs_flex())
      pictured.push_back(std::move(iteration.plan));
    progress.advance();
  }
  if (const auto svg = options.text("svg"))
    outputs.write(*svg, io::pipeline_loads_svg(pictured, "sluice plan: " + profile.name() + " on " +
                                                             std::to_string(profile.gpus()) + " GPUs"));
  plan_report::summary(document, out, json, planner, tally);
  return 0;
}

}  // namespace sluice::cli
