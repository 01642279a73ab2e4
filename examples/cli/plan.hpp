#pragma once
// `sluice plan`: K iterations of a dataset, each planned by plan_iteration over a candidate set: the
// chosen strategy, the estimated propagation time and the planning time, then a summary.
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
#include <vector>

#include "candidates.hpp"
#include "context.hpp"
#include "inputs.hpp"
#include "options.hpp"
#include "outputs.hpp"
#include "progress.hpp"
#include "propose.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/compare/statistics.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/data_json.hpp"
#include "sluice/io/json_stream.hpp"
#include "sluice/io/proposal_json.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/io/svg.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/ranks.hpp"

namespace sluice::cli {

inline constexpr std::string_view plan_usage =
    "usage: sluice plan (--strategies S | --propose) [--profile P] [--lengths F] [--gpus N] [--tokens T]\n"
    "                   [--iterations K | --batch F] [--context L] [--seed X] [--trials T] [--threads N]\n"
    "                   [--svg F] [--cross-node-tp] [--lnk] [--json]\n"
    "\n"
    "Plans K iterations: each draws a batch of about T tokens from the dataset, dispatches and packs it for\n"
    "every candidate strategy, and keeps the candidate with the lowest estimated propagation time. With --json,\n"
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
    "  --cross-node-tp with --propose, allow schemes whose TP spans nodes\n"
    "  --lnk           add each candidate's parameter pull and gradient push (Hydraulis §5: fully sharded\n"
    "                  optimizer states, the profile's model as LLaMA-like layers, sluice shard's default\n"
    "                  links) to its estimate before choosing\n"
    "  --json          print one sluice.plan_run JSON document, with every iteration's full plan\n";

namespace plan_inputs {

// The candidates with the context they were chosen for (proposed ones: the rule's context, context.hpp).
inline Candidates candidates_of(const Options& options, const cost::Profile& profile,
                                const data::LengthDataset& loaded) {
  if (const auto text = options.text("strategies")) return read_candidates(*text);
  proposal::ProposeOptions settings = propose_options(options, profile);
  settings.max_len = context_of(options, loaded, profile);
  return {proposal::propose(loaded.truncated(*settings.max_len), profile, settings).strategies(), settings.max_len};
}


inline assign::PlanOptions plan_options_of(const Options& options, const cost::Profile& profile,
                                           std::span<const Strategy> candidates) {
  assign::PlanOptions plan_options;
  plan_options.dispatch = dispatch_options(options);
  if (options.flag("lnk")) {
    const shard::Model model = shard::llama_like(profile.spec().model);
    plan_options.candidate_overhead = shard::iteration_costs(shard::sharded_layout(profile.gpus(), model.layers),
                                                             candidates, model, shard::Cluster{});
  }
  return plan_options;
}

}  // namespace plan_inputs

namespace plan_report {

// Iterations are streamed: each is sampled, planned, written and dropped, so memory does not grow with K. What
// stays per iteration is three numbers for the summary.
struct Tally {
  std::vector<double> estimates;
  std::vector<double> planning;
  std::map<std::string, int> chosen;
  double tokens = 0;
};

inline void begin(io::JsonObjectStream& document, std::ostream& out, bool json, bool lnk, const cost::Profile& profile,
                  std::span<const Strategy> candidates, std::int64_t context, const data::LengthDataset& dataset,
                  const std::optional<std::string>& batch_file) {
  if (json) {
    if (batch_file) document.member("batch", *batch_file);
    document.member("candidates", assign::CandidateSet{{candidates.begin(), candidates.end()}});
    document.member("context", context);
    document.member("format", "sluice.plan_run");
    document.member("gpus", profile.gpus());
    document.open_array("iterations");
    return;
  }
  out << "plan: " << profile.name() << " on " << profile.gpus() << " GPUs, " << candidates.size()
      << " candidates, context " << context << ", "
      << (batch_file ? "batch " + *batch_file : dataset.source()) << "\n\n";
  out << "  iter  sequences    tokens  " << (lnk ? "propagation (s)  pull/push (s)  " : "")
      << "estimate (s)  dispatch bound (s)  plan (ms)  strategy\n";
  out << std::fixed;
}

// `estimate`: what the plan was chosen by, the propagation plus (with --lnk) the parameter pull and gradient push.
inline void iteration(io::JsonObjectStream& document, std::ostream& out, bool json, bool lnk, std::int64_t k,
                      const data::Batch& batch, const assign::IterationPlan& plan, double seconds,
                      const shard::RankPlacement* ranks) {
  if (json) {
    document.element(io::json{{"iteration", k},
                              {"epoch", batch.epoch},
                              {"sequences", batch.sequences.size()},
                              {"tokens", batch.tokens},
                              {"strategy", plan.strategy.name()},
                              {"estimate", plan.total()},
                              {"propagation", plan.estimate},
                              {"pull_push", plan.overhead},
                              {"planning_seconds", seconds},
                              {"plan", plan},
                              {"placement", *ranks}});
    return;
  }
  out << std::setw(6) << k << std::setw(11) << batch.sequences.size() << std::setw(10) << batch.tokens
      << std::setprecision(3);
  if (lnk) out << std::setw(17) << plan.estimate << std::setw(15) << plan.overhead;
  out << std::setw(14) << plan.total() << std::setw(20) << plan.dispatch_lower_bound << std::setprecision(2) << std::setw(11) << seconds * 1e3 << "  "
      << plan.strategy.name() << "\n";
}

inline void summary(io::JsonObjectStream& document, std::ostream& out, bool json, bool lnk,
                    const cost::Profile& profile, const Tally& tally) {
  const double seconds = compare::mean(tally.estimates) * static_cast<double>(tally.estimates.size());
  if (json) {
    document.close_array();
    document.member("profile", profile.name());
    document.member("summary", io::json{{"mean_estimate", compare::mean(tally.estimates)},
                                        {"stddev_estimate", compare::deviation(tally.estimates)},
                                        {"tokens_per_second", tally.tokens / seconds},
                                        {"mean_planning_seconds", compare::mean(tally.planning)},
                                        {"chosen", tally.chosen}});
    document.member("version", 2);
    document.close();
    return;
  }
  out << std::setprecision(3) << (lnk ? "\nestimate + lnk " : "\nestimate ") << compare::mean(tally.estimates)
      << " ± " << compare::deviation(tally.estimates) << " s per iteration, " << std::setprecision(0)
      << tally.tokens / seconds << " tokens/s; planning " << std::setprecision(2) << compare::mean(tally.planning) * 1e3
      << " ms per iteration\n";
  out << "chosen:";
  for (const auto& [name, count] : tally.chosen) out << "  " << name << " ×" << count;
  out << "\n";
}

}  // namespace plan_report

inline int plan(std::span<const std::string_view> args, std::ostream& out, Outputs& outputs,
                std::ostream* terminal = nullptr) {
  const Options options(args,
                        {"strategies", "profile", "lengths", "gpus", "tokens", "iterations", "batch", "context",
                         "seed", "trials", "threads", "svg"},
                        {"propose", "cross-node-tp", "lnk", "json", "help"});
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

  const cost::Profile profile = load_profile(options);
  const data::LengthDataset loaded = load_lengths(options);
  const Candidates chosen = plan_inputs::candidates_of(options, profile, loaded);
  const std::vector<Strategy>& candidates = chosen.strategies;
  std::int64_t widest = 0;
  for (const Strategy& strategy : candidates) widest = std::max(widest, profile.pipelines(strategy).front().max_len);
  sluice::require(widest > 0, "no candidate strategy can hold any sequence (every MaxLen is 0)");
  const std::int64_t context = context_of(options, loaded, profile, &chosen);
  const data::LengthDataset dataset = loaded.truncated(context);
  data::BatchSampler sampler(
      dataset, {.tokens_per_batch = options.integer("tokens").value_or(100'000), .seed = seed_of(options)});
  const std::optional<data::Batch> trainer_batch =
      batch_file ? std::optional(given_batch(*batch_file, widest,
                                              sluice::concat("any candidate holds (widest MaxLen ", widest, ")")))
                 : std::nullopt;
  const assign::PlanOptions plan_options = plan_inputs::plan_options_of(options, profile, candidates);

  const std::int64_t iterations = trainer_batch ? 1 : options.integer("iterations").value_or(10);
  const bool json = options.flag("json");
  plan_report::Tally tally;
  std::vector<assign::IterationPlan> pictured;
  constexpr std::size_t pictured_iterations = 100;  // enough to see the loads vary, few enough to read
  io::JsonObjectStream document(out);
  const bool lnk = options.flag("lnk");
  plan_report::begin(document, out, json, lnk, profile, candidates, context, dataset, batch_file);
  Progress progress(terminal, "plan", iterations);
  for (std::int64_t k = 0; k < iterations; ++k) {
    const data::Batch batch = trainer_batch ? *trainer_batch : sampler.next();
    const auto start = std::chrono::steady_clock::now();
    assign::IterationPlan plan = assign::plan_iteration(batch.sequences, candidates, profile, plan_options);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    assign::validate(plan, batch.sequences, profile);
    std::optional<shard::RankPlacement> ranks;
    if (json) {
      ranks = shard::rank_placement(plan.strategy, profile);
      shard::validate(*ranks, plan.strategy, profile);
    }
    tally.estimates.push_back(plan.total());
    tally.planning.push_back(elapsed.count());
    ++tally.chosen[plan.strategy.name()];
    tally.tokens += static_cast<double>(batch.tokens);
    plan_report::iteration(document, out, json, lnk, k, batch, plan, elapsed.count(), ranks ? &*ranks : nullptr);
    if (options.text("svg") && pictured.size() < pictured_iterations) pictured.push_back(std::move(plan));
    progress.advance();
  }
  if (const auto svg = options.text("svg"))
    outputs.write(*svg, io::pipeline_loads_svg(pictured, "sluice plan: " + profile.name() + " on " +
                                                             std::to_string(profile.gpus()) + " GPUs"));
  plan_report::summary(document, out, json, lnk, profile, tally);
  return 0;
}

}  // namespace sluice::cli
