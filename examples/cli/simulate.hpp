#pragma once
// `sluice simulate`: over K iterations of a dataset, the simulated iteration time of Megatron-LM, HotSPa,
// DynaPipe and sluice (compare::), with tokens per second, sluice's speedup over each and the load imbalance
// between pipelines; optionally the pictures of the run and a Chrome trace of its first iteration.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "options.hpp"
#include "outputs.hpp"
#include "progress.hpp"
#include "scenario.hpp"
#include "sluice/compare/compare.hpp"
#include "sluice/compare/statistics.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/chrome_trace.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/data_json.hpp"
#include "sluice/io/run_json.hpp"
#include "sluice/io/svg.hpp"

namespace sluice::cli {

inline constexpr std::string_view simulate_usage =
    "usage: sluice simulate [--profile P] [--lengths F] [--gpus N] [--tokens T] [--iterations K | --batch F]\n"
    "                       [--context L] [--seed X] [--trials T] [--threads N] [--bandwidth B] [--latency S]\n"
    "                       [--cross-node-tp] [--svg DIR] [--trace F]\n"
    "                       [--cp C1,C2|auto [--cp-kinds K]] [--ac] [--json]\n"
    "\n"
    "Simulates K iterations of the dataset under six systems, every iteration estimated the same way (the\n"
    "slowest pipeline's simulated makespan):\n"
    "  megatron     the best homogeneous <TP, PP> strategy, sequences packed into bins of the context, 1F1B\n"
    "  megatron_cp  the same with Megatron-LM's ring context parallelism (needs --cp with the ring kind)\n"
    "  deepspeed    the best ZeRO-3 DP x Ulysses SP strategy, packed into bins of the context, ZeRO-3's\n"
    "               collectives charged where compute does not hide them (Ulysses needs --cp with its kind)\n"
    "  hotspa       a homogeneous strategy per length range (<4K, 4K-16K, 16K-64K, ... up to the context), the\n"
    "               ranges run one after another, strategy switching charged\n"
    "  dynapipe     the best homogeneous strategy under DynaPipe: micro-batch DP, replica balancing, adaptive\n"
    "               schedule\n"
    "  sluice       proposed heterogeneous strategies, two-stage assignment, adaptive schedule, fastest kept;\n"
    "               its per-iteration parameter pull and gradient push (fully sharded optimizer states, Hydraulis\n"
    "               section 5) charged, less the part that hides under the forward and backward passes layer by\n"
    "               layer\n"
    "and reports each one's iteration time, tokens per second, sluice's speedup over it and the load imbalance\n"
    "(slowest / fastest busy pipeline), mean ± standard deviation over the iterations, and how far each is above\n"
    "a lower bound that no plan of the batches beats (the least T such that every sequence has a scheme whose\n"
    "trip through its pipeline takes at most T, and the GPU-time of the cheapest such schemes fits in the GPUs'\n"
    "T seconds; at least the least GPU-time over the GPUs and the longest sequence's fastest trip).\n"
    "\n"
    "  --profile P      profile JSON file or bundled name (default llama2-7b)\n"
    "  --lengths F      length file or bundled name (default man-pages)\n"
    "  --gpus N         cluster size (default: the profile's own)\n"
    "  --tokens T       tokens per iteration (default 100000)\n"
    "  --iterations K   iterations to simulate (default 10)\n"
    "  --batch F        simulate exactly this batch, once (F or - for standard input: as sluice plan --batch)\n"
    "  --context L      truncate longer sequences; every system must hold L tokens (default: the longest\n"
    "                   sequence, or the longest MaxLen of a usable scheme when shorter, as sluice propose)\n"
    "  --seed X         sampler, dispatch and schedule seed (default 0)\n"
    "  --trials T       sluice's dispatch trials (default 100)\n"
    "  --threads N      sluice's dispatch threads (default 1; the result does not depend on it)\n"
    "  --bandwidth B    stage-to-stage bandwidth in GB/s, 0.001 to 10000 (default 100)\n"
    "  --latency S      stage-to-stage latency in seconds, 0 to 1 (default 1e-5)\n"
    "  --cross-node-tp  allow schemes whose TP spans nodes, for every system\n"
    "  --cp C1,C2       also schemes with context parallelism of these degrees (2 to 1024), derived from\n"
    "                   the profile's ⟨TP, PP⟩ schemes (docs/cost-models.md; needs the profile's model.heads)\n"
    "                   auto: the powers of two from 2 to the smallest degree that holds the context, of\n"
    "                   ring and Ulysses unless --cp-kinds (none when the profile's schemes hold it)\n"
    "  --cp-kinds K     the CP kinds those may use: ring (the default), ulysses, hybrid, comma-separated\n"
    "  --ac             also every scheme with full activation recomputation\n"
    "  --svg DIR        write pictures into DIR: lengths.svg, loads-megatron.svg, loads-sluice.svg and\n"
    "                   timeline-<system>.svg (iteration 0 of each system)\n"
    "  --trace F        write iteration 0 of every system as Chrome-trace JSON to F (ui.perfetto.dev)\n"
    "  --json           print one sluice.simulate_run JSON document\n";

namespace simulate_report {

inline std::string plus_minus(double value, double stddev, int precision) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(precision) << value << " ± " << stddev;
  return text.str();
}

// Pictures into `directory` (created if missing); returns the files written.
inline std::vector<std::string> write_pictures(Outputs& outputs, const std::filesystem::path& directory,
                                               const Scenario& scenario, const compare::Comparison& comparison) {
  outputs.directory(directory);
  std::vector<std::string> written;
  auto write = [&](const std::string& name, const std::string& svg) {
    const std::filesystem::path path = directory / name;
    outputs.write(path, svg);
    written.push_back(path.string());
  };
  const std::string where = describe(scenario);
  const std::int64_t bin_width = std::max<std::int64_t>(scenario.settings.context / 64, 64);
  write("lengths.svg", io::histogram_svg(scenario.dataset.histogram(bin_width), "sequence lengths: " + where, true));
  for (const compare::SystemRun& run : comparison.systems) {
    if (run.failure) continue;
    if (!run.plans.empty())
      write("loads-" + run.name + ".svg",
            io::pipeline_loads_svg(run.plans, run.name + ": pipeline loads of the first iterations, " + where));
    if (!run.first.pipelines.empty())  // the flex CP systems simulate no pipelines
      write("timeline-" + run.name + ".svg",
            io::timeline_svg(run.first.pipelines, run.first.names, run.name + ": iteration 0, " + where));
  }
  return written;
}

inline void write_trace(Outputs& outputs, const std::filesystem::path& path, const compare::Comparison& comparison) {
  std::vector<schedule::Simulation> pipelines;
  std::vector<std::string> names;
  for (const compare::SystemRun& run : comparison.systems) {
    if (run.failure) continue;
    pipelines.insert(pipelines.end(), run.first.pipelines.begin(), run.first.pipelines.end());
    for (const std::string& name : run.first.names) names.push_back(run.name + ": " + name);
  }
  outputs.write(path, io::chrome_trace(pipelines, names).dump());
}

inline void print(std::ostream& out, const Scenario& scenario, const compare::Comparison& comparison,
                  const compare::BySystem<compare::Summary>& summaries) {
  const compare::Options& setup = scenario.settings;
  out << "simulate: " << describe(scenario) << "; ";
  if (scenario.batch)
    out << "the given batch of " << scenario.batch->sequences.size() << " sequences, " << scenario.batch->tokens
        << " tokens";
  else
    out << comparison.batches.size() << " iterations of about " << setup.tokens << " tokens";
  out << " (seed " << setup.seed << ")\n";
  out << "each iteration: the simulated makespan of its slowest pipeline; stage-to-stage links "
      << setup.problem.link.bandwidth / 1e9 << " GB/s, " << setup.problem.link.latency << " s; backward "
      << setup.problem.backward_ratio << " x forward\n\n";
  out << "  system      iteration (s)      tokens/s             sluice speedup    imbalance   idle  degree  bound  "
         "plan (ms)\n";
  for (const compare::System system : compare::all_systems) {
    const compare::SystemRun& run = comparison.systems[system];
    out << "  " << std::left << std::setw(12) << run.name << std::right;
    if (run.failure) {
      out << "infeasible: " << *run.failure << "\n";
      continue;
    }
    const compare::Summary& summary = summaries[system];
    out << std::left << std::setw(19) << plus_minus(summary.seconds, summary.seconds_stddev, 3) << std::setw(21)
        << plus_minus(summary.tokens_per_second, summary.tokens_per_second_stddev, 0) << std::setw(18)
        << (summary.speedup ? plus_minus(*summary.speedup, *summary.speedup_stddev, 3) : std::string("-")) << std::right
        << std::fixed << std::setprecision(3) << std::setw(9) << summary.imbalance << std::setw(7)
        << std::setprecision(0) << summary.idle * 100 << "%" << std::setprecision(3) << std::setw(8)
        << summary.micro_batch_imbalance << std::setprecision(2) << std::setw(6);
    if (summary.over_bound)
      out << *summary.over_bound << "×";
    else
      out << "-"
          << " ";
    out << std::setprecision(1) << std::setw(11) << summary.planning_seconds * 1e3 << "\n";
  }
  out << "\n";
  std::vector<double> bounds, areas, paths;
  for (const compare::BatchSize& batch : comparison.batches)
    if (batch.lower_bound) {
      bounds.push_back(batch.lower_bound->seconds);
      areas.push_back(batch.lower_bound->area_seconds);
      paths.push_back(batch.lower_bound->critical_path_seconds);
    }
  if (!bounds.empty() && bounds.size() == comparison.batches.size())
    out << std::setprecision(3) << "  no plan faster than " << compare::mean(bounds)
        << " s per iteration (lower bound, mean: the least GPU-time over the GPUs " << compare::mean(areas)
        << " s, the longest sequence's fastest trip " << compare::mean(paths)
        << " s, and the two together); bound: each system over it\n\n";
  for (const compare::SystemRun& run : comparison.systems)
    if (!run.failure) out << "  " << std::left << std::setw(12) << run.name << std::right << run.configuration << "\n";
  const compare::SystemRun& sluice = comparison.systems[compare::System::sluice];
  if (!sluice.failure) {
    std::map<std::string, int> chosen;
    for (const compare::IterationOutcome& outcome : sluice.iterations) ++chosen[outcome.strategy];
    out << "  sluice chose:";
    for (const auto& [name, count] : chosen) out << "  " << name << " x" << count;
    out << "\n";
  }
  const compare::Summary& hotspa = summaries[compare::System::hotspa];
  if (!comparison.systems[compare::System::hotspa].failure)
    out << std::setprecision(3) << "  hotspa's switching: " << hotspa.switching << " s per iteration on average\n";
  if (!sluice.failure) {
    const compare::Summary& charged = summaries[compare::System::sluice];
    out << std::setprecision(3)
        << "  sluice's pull and push beyond its strategies' own all-gather: " << charged.layout_move
        << " s per iteration before overlap, " << charged.switching << " s exposed; sluice without them "
        << charged.seconds - charged.switching << " s, with none of them overlapped "
        << charged.seconds - charged.switching + charged.layout_move << " s\n";
  }
  out << "\n  imbalance: slowest / fastest busy pipeline, mean over iterations; idle: pipelines without work;\n"
      << "  degree: WLB-LLM's imbalance degree, slowest micro-batch forward x micro-batches / their total forward,\n"
      << "  the worst pipeline's, mean over iterations; plan: wall-clock time spent planning an iteration (measured,\n"
      << "  mean; a static system's covers every strategy it tries, sluice's every candidate and flex CP domain)\n";
}

}  // namespace simulate_report

inline int simulate(std::span<const std::string_view> args, std::ostream& out, Outputs& outputs,
                    std::ostream* terminal) {
  std::set<std::string, std::less<>> valued = scenario_options;
  valued.insert({"iterations", "svg", "trace"});
  const Options options(args, valued, {"cross-node-tp", "ac", "json", "help"});
  if (options.flag("help")) {
    out << simulate_usage;
    return 0;
  }
  sluice::require(!options.text("batch") || !options.text("iterations"),
                  "options --batch and --iterations cannot be combined: a given batch is simulated once");
  const Scenario scenario = read_scenario(options);
  data::BatchSampler sampler = scenario.sampler();
  Progress progress(terminal, "simulate", 0);
  const auto iterations =
      scenario.batch ? std::size_t{1} : static_cast<std::size_t>(options.integer("iterations").value_or(10));
  const compare::Comparison comparison = compare::compare_systems(
      scenario.settings, scenario.dataset, iterations,
      [&] { return scenario.batch ? scenario.batch->sequences : sampler.next().sequences; }, progress.callback());
  if (!comparison.any_ran())
    throw infeasible(
        "simulate: no system can run this scenario: " + *comparison.systems[compare::System::sluice].failure +
        cp_advice(scenario.settings.profile, scenario.settings.context, scenario.settings.cross_node_tp));

  const compare::BySystem<compare::Summary> summaries = compare::summarize(comparison);
  std::vector<std::string> pictures;
  if (const auto svg = options.text("svg"))
    pictures = simulate_report::write_pictures(outputs, *svg, scenario, comparison);
  if (const auto trace = options.text("trace")) simulate_report::write_trace(outputs, *trace, comparison);

  if (options.flag("json")) {
    out << io::document_text(
        io::simulate_run(scenario.settings, scenario.dataset.source(), comparison, summaries, pictures));
    return 0;
  }
  simulate_report::print(out, scenario, comparison, summaries);
  if (!pictures.empty()) {
    out << "\npictures:";
    for (const std::string& picture : pictures) out << " " << picture;
    out << "\n";
  }
  return 0;
}

}  // namespace sluice::cli
