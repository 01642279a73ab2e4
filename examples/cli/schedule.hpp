#pragma once
// `sluice schedule`: DynaPipe inside one pipeline scheme. A mini-batch is drawn from a dataset, cut into
// micro-batches by the DP, balanced over the data-parallel replicas and scheduled per replica; the same
// pipeline is then run with token-based micro-batching and with fixed-length packing for comparison.
#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "context.hpp"
#include "inputs.hpp"
#include "options.hpp"
#include "outputs.hpp"
#include "sluice/compare/microbatching.hpp"
#include "sluice/core/error.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/chrome_trace.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/microbatch_json.hpp"
#include "sluice/io/run_json.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/io/svg.hpp"
#include "sluice/microbatch/baselines.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/schedule/plan_pipeline.hpp"

namespace sluice::cli {

inline constexpr std::string_view schedule_usage =
    "usage: sluice schedule --stages C [--profile P] [--lengths F] [--tp T] [--replicas D]\n"
    "                       [--schedule cyclic|1f1b] [--tokens T] [--context L] [--seed X] [--layout L]\n"
    "                       [--interval S] [--bandwidth B] [--latency S] [--json] [--trace F] [--svg F]\n"
    "\n"
    "Plans one mini-batch on the profile's <T, C> pipeline as DynaPipe does: orders the sequences, cuts them\n"
    "into micro-batches with the DP under the per-micro-batch memory limit (1/C of what a stage has left),\n"
    "balances them over D data-parallel replicas (Karmarkar-Karp) and schedules every replica (adaptive cyclic\n"
    "or 1F1B, best injection order), then simulates the same pipeline with token-based micro-batching and with\n"
    "fixed-length packing.\n"
    "\n"
    "  --stages C      pipeline stages (the scheme's PP), required\n"
    "  --profile P     profile JSON file or bundled name (default llama2-7b)\n"
    "  --lengths F     length file or bundled name (default man-pages)\n"
    "  --tp T          the scheme's tensor-parallel degree (default 1)\n"
    "  --replicas D    data-parallel replicas of the pipeline (default 1)\n"
    "  --schedule K    cyclic (adaptive, the default) or 1f1b\n"
    "  --tokens T      tokens in the mini-batch (default 65536)\n"
    "  --context L     truncate longer sequences (default: the longest sequence, or the scheme's MaxLen when\n"
    "                  shorter: the rule of every command, with this scheme as the one candidate)\n"
    "  --seed X        sampler and injection-order seed (default 0)\n"
    "  --layout L      padded (one sequence per row, DynaPipe; the default) or packed (one row)\n"
    "  --interval S    tmax thinning interval of the DP in seconds (default 5e-6; 0 = exact)\n"
    "  --bandwidth B   stage-to-stage bandwidth in GB/s, 0.001 to 10000 (default 100)\n"
    "  --latency S     stage-to-stage latency in seconds, 0 to 1 (default 1e-5)\n"
    "  --json          print one sluice.schedule_run JSON document, with every replica's execution plan\n"
    "  --trace F       write the replicas' simulated timelines as Chrome-trace JSON to F\n"
    "  --svg F         draw the replicas' simulated timelines as a self-contained SVG picture in F\n";

namespace schedule_report {

inline void print_replicas(std::ostream& out, const schedule::PipelineRunPlan& plan, int stages) {
  // The last timing column is plain 1F1B in the micro-batches' input order: what the chosen schedule and
  // injection order gain over it.
  out << "  replica  micro-batches  load (s)  schedule               makespan (s)  1F1B in input order (s)  peak GiB"
         "  instructions\n";
  for (std::size_t r = 0; r < plan.replicas.size(); ++r) {
    const schedule::ReplicaSchedule& replica = plan.replicas[r];
    out << std::setw(9) << r << std::setw(15) << replica.micro_batches.size() << std::setw(10)
        << plan.assignment.loads[r];
    if (replica.micro_batches.empty()) {
      out << "  (idle)\n";
      continue;
    }
    const schedule::PipelineSchedule& s = replica.schedule;
    const std::string kind = s.kind == schedule::ScheduleKind::cyclic
                                 ? (s.memory_aware ? "cyclic, memory-aware" : "cyclic")
                                 : "1F1B, best order";
    const schedule::Simulation one_f_one_b = schedule::simulate(
        replica.problem, schedule::one_f_one_b(schedule::identity_injection(replica.micro_batches.size()), stages));
    double peak = 0;
    for (const double bytes : s.simulation.peak_memory) peak = std::max(peak, bytes);
    std::size_t instructions = 0;
    for (const auto& rank : s.plan.ranks) instructions += rank.size();
    out << "  " << std::left << std::setw(21) << kind << std::right << std::setw(14) << s.simulation.makespan
        << std::setw(25) << one_f_one_b.makespan << std::setw(10) << peak / 0x1p30 << std::setw(14) << instructions
        << "\n";
  }
}

// One `sluice schedule` run, for its JSON document and its printout.
struct Run {
  const cost::Profile& profile;
  Scheme scheme;
  const schedule::PipelinePlanOptions& options;
  std::string_view kind;
  std::int64_t context = 0;
  const data::LengthDataset& dataset;
  const data::Batch& batch;
  double memory_limit = 0;
  const schedule::PipelineRunPlan& plan;
  std::span<const compare::MicrobatchingBaseline> alternatives;
};

inline io::ScheduleRun document(const Run& run) {
  io::ScheduleRun report = io::schedule_run(run.scheme, run.options, run.plan, run.alternatives);
  report.profile = run.profile.name();
  report.context = run.context;
  report.sequences = run.batch.sequences.size();
  report.tokens = run.batch.tokens;
  return report;
}

inline void print(std::ostream& out, const Run& run) {
  out << "schedule: " << run.profile.name() << " " << run.scheme.name() << ", " << run.options.replicas << " replica"
      << (run.options.replicas == 1 ? "" : "s") << ", " << run.kind << "; " << run.dataset.source() << ", context "
      << run.context << "\n";
  out << std::fixed << std::setprecision(3);
  out << "batch: " << run.batch.sequences.size() << " sequences, " << run.batch.tokens << " tokens; "
      << run.plan.partition.micro_batches.size() << " micro-batches (" << microbatch::name(run.plan.partition.layout)
      << "), DP objective " << run.plan.partition.objective << " s, limit " << run.memory_limit / 0x1p30
      << " GiB per micro-batch\n\n";
  schedule_report::print_replicas(out, run.plan, run.scheme.pp());
  out << "\niteration " << run.plan.makespan << " s (slowest replica), " << std::setprecision(0)
      << static_cast<double>(run.batch.tokens) / run.plan.makespan << " tokens/s\n\n";
  out << std::setprecision(3) << "  micro-batching                  micro-batches  iteration (s)  DP speedup\n";
  out << "  " << std::left << std::setw(30) << "DP (DynaPipe)" << std::right << std::setw(15)
      << run.plan.partition.micro_batches.size() << std::setw(15) << run.plan.makespan << std::setw(12) << 1.0 << "\n";
  for (const auto& alternative : run.alternatives) {
    out << "  " << std::left << std::setw(30) << alternative.name << std::right;
    if (alternative.plan)
      out << std::setw(15) << alternative.plan->partition.micro_batches.size() << std::setw(15)
          << alternative.plan->makespan << std::setw(12) << alternative.plan->makespan / run.plan.makespan << "\n";
    else
      out << "  out of memory: " << alternative.failure << "\n";
  }
}

// The simulated timelines of the replicas that have work, as a Chrome trace (--trace) and an SVG picture (--svg).
inline void write_timelines(Outputs& outputs, const Options& options, const schedule::PipelineRunPlan& plan,
                            std::string_view title) {
  std::vector<schedule::Simulation> timelines;
  std::vector<std::string> names;
  for (std::size_t r = 0; r < plan.replicas.size(); ++r)
    if (!plan.replicas[r].micro_batches.empty()) {
      timelines.push_back(plan.replicas[r].schedule.simulation);
      names.push_back("replica " + std::to_string(r));
    }
  if (const auto trace = options.text("trace")) outputs.write(*trace, io::chrome_trace(timelines, names).dump());
  if (const auto svg = options.text("svg")) outputs.write(*svg, io::timeline_svg(timelines, names, title));
}

}  // namespace schedule_report

namespace schedule_inputs {

inline schedule::PipelinePlanOptions plan_options_of(const Options& options, const cost::Profile& profile,
                                                     const Scheme& scheme, const microbatch::StageCostSetup& setup) {
  schedule::PipelinePlanOptions plan_options;
  plan_options.stages = scheme.pp();
  plan_options.replicas = static_cast<int>(options.integer("replicas").value_or(1));
  plan_options.micro_batch_memory = setup.memory_limit;
  plan_options.last_stage = setup.last_stage;
  plan_options.schedule.kind = schedule_kind_of(options);
  plan_options.schedule.seed = seed_of(options);
  plan_options.layout = microbatch::layout_from(options.text("layout").value_or("padded"), "option --layout");
  sluice::require(plan_options.layout != microbatch::Layout::fixed_rows,
                  "option --layout: expected padded or packed, got 'fixed_rows'");
  plan_options.tmax_interval = options.real("interval").value_or(5e-6);
  plan_options.problem.hidden = std::max<std::int64_t>(profile.spec().model.hidden, 1);
  plan_options.problem.link = link_of(options);
  return plan_options;
}

}  // namespace schedule_inputs

inline int schedule_command(std::span<const std::string_view> args, std::ostream& out, Outputs& outputs) {
  const Options options(args,
                        {"stages", "profile", "lengths", "tp", "replicas", "schedule", "tokens", "context", "seed",
                         "layout", "interval", "bandwidth", "latency", "trace", "svg"},
                        {"json", "help"});
  if (options.flag("help")) {
    out << schedule_usage;
    return 0;
  }
  const auto stages = options.integer("stages");
  sluice::require(stages.has_value(), "option --stages is required (see sluice schedule --help)");
  const cost::Profile profile = load_profile(options);
  const auto tp = options.integer("tp").value_or(1);
  const Scheme scheme(static_cast<int>(tp), static_cast<int>(*stages));
  const cost::SchemeCost& scheme_cost = profile.at(scheme);
  sluice::require(scheme_cost.max_len > 0, "scheme ", scheme.name(), " of profile ", profile.name(),
                  " cannot hold any sequence (MaxLen 0)");
  const microbatch::StageCostSetup setup = microbatch::stage_cost(scheme_cost);
  const schedule::PipelinePlanOptions plan_options = schedule_inputs::plan_options_of(options, profile, scheme, setup);

  const data::LengthDataset loaded = load_lengths(options);
  const Candidates only{{Strategy::parse("1*" + scheme.name())}, std::nullopt};
  const std::int64_t context = context_of(options, loaded, profile, &only);
  const data::LengthDataset dataset = loaded.truncated(context);
  data::BatchSampler sampler(
      dataset, {.tokens_per_batch = options.integer("tokens").value_or(65'536), .seed = plan_options.schedule.seed});
  const data::Batch batch = sampler.next();
  const std::vector<microbatch::Sample> samples = microbatch::samples_of(batch.sequences);
  const std::span<const microbatch::Sample> span(samples);

  const schedule::PipelineRunPlan plan = schedule::plan_pipeline(span, setup.model, plan_options);
  schedule::validate(plan, span, setup.model, plan_options);
  const std::vector<compare::MicrobatchingBaseline> alternatives =
      compare::microbatching_baselines(span, setup.model, plan_options, context);
  schedule_report::write_timelines(outputs, options, plan,
                                   sluice::concat("sluice schedule: ", profile.name(), " ", scheme.name(), ", ",
                                                  plan.replicas.size(), " replicas, ", batch.tokens, " tokens"));

  const std::string kind = options.text("schedule").value_or("cyclic");
  const schedule_report::Run run{.profile = profile,
                                 .scheme = scheme,
                                 .options = plan_options,
                                 .kind = kind,
                                 .context = context,
                                 .dataset = dataset,
                                 .batch = batch,
                                 .memory_limit = setup.memory_limit,
                                 .plan = plan,
                                 .alternatives = alternatives};
  if (options.flag("json"))
    out << io::document_text(schedule_report::document(run));
  else
    schedule_report::print(out, run);
  return 0;
}

}  // namespace sluice::cli
