#pragma once
// `sluice plan`: K iterations of a dataset, each planned by plan_iteration over a candidate set: the
// chosen strategy, the estimated propagation time and the planning time, then a summary.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "inputs.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "propose.hpp"
#include "statistics.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/proposal_json.hpp"
#include "sluice/io/svg.hpp"
#include "sluice/shard/cost.hpp"

namespace sluice::cli {

inline constexpr std::string_view plan_usage =
    "usage: sluice plan (--strategies S | --propose) [--profile P] [--lengths F] [--gpus N] [--tokens T]\n"
    "                   [--iterations K] [--context L] [--seed X] [--trials T] [--threads N] [--svg F]\n"
    "                   [--cross-node-tp] [--lnk] [--json]\n"
    "\n"
    "Plans K iterations: each draws a batch of about T tokens from the dataset, dispatches and packs it for\n"
    "every candidate strategy, and keeps the candidate with the lowest estimated propagation time.\n"
    "\n"
    "  --strategies S  a sluice.candidates or sluice.proposal JSON file, or strategies written like\n"
    "                  '1*tp16pp1+6*tp8pp1,4*tp16pp1' (comma-separated)\n"
    "  --propose       use the candidates of `sluice propose` on the same profile, lengths, GPUs, tokens,\n"
    "                  context and --cross-node-tp (default options otherwise)\n"
    "  --profile P     profile JSON file or bundled name (default llama2-7b)\n"
    "  --lengths F     length file or bundled name (default man-pages)\n"
    "  --gpus N        cluster size (default: the profile's own)\n"
    "  --tokens T      tokens per iteration (default 100000)\n"
    "  --iterations K  iterations to plan (default 10)\n"
    "  --context L     truncate longer sequences (default: the largest MaxLen among the candidates)\n"
    "  --seed X        sampler and dispatch seed (default 0)\n"
    "  --trials T      dispatch trials (default 100)\n"
    "  --threads N     dispatch threads (default 1; the plan does not depend on it)\n"
    "  --svg F         also write a picture of every iteration's pipeline loads (micro-batches) to F\n"
    "  --cross-node-tp with --propose, allow schemes whose TP spans nodes\n"
    "  --lnk           add each candidate's parameter pull and gradient push (Hydraulis §5: fully sharded\n"
    "                  optimizer states, the profile's model as LLaMA-like layers, sluice shard's default\n"
    "                  links) to its estimate before choosing\n"
    "  --json          print one sluice.plan_run JSON document, with every iteration's full plan\n";

namespace detail_plan {

inline std::vector<Strategy> read_candidates(const std::string& text) {
  std::error_code error;
  if (std::filesystem::is_regular_file(text, error)) {
    const io::json document = io::read_json_file(text);
    if (document.is_object() && document.contains("format") &&
        document.at("format") == io::document_traits<proposal::Proposal>::format)
      return io::from_document<proposal::Proposal>(document, text).strategies();
    return io::from_document<assign::CandidateSet>(document, text).strategies;
  }
  std::vector<Strategy> strategies;
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    strategies.push_back(Strategy::parse(rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return strategies;
}

struct IterationRecord {
  data::Batch batch;
  assign::IterationPlan plan;
  double planning_seconds = 0;
};

}  // namespace detail_plan

inline int plan(std::span<const std::string_view> args, std::ostream& out, std::ostream* terminal = nullptr) {
  const Options options(args,
                        {"strategies", "profile", "lengths", "gpus", "tokens", "iterations", "context", "seed", "trials",
                         "threads", "svg"},
                        {"propose", "cross-node-tp", "lnk", "json", "help"});
  if (options.flag("help")) {
    out << plan_usage;
    return 0;
  }
  const auto strategies_text = options.text("strategies");
  sluice::detail::require(strategies_text.has_value() || options.flag("propose"),
                          "option --strategies or --propose is required (see sluice plan --help)");
  sluice::detail::require(!strategies_text.has_value() || !options.flag("propose"),
                          "options --strategies and --propose cannot be combined");

  const cost::Profile profile = load_profile(options);
  const data::LengthDataset loaded = load_lengths(options);

  std::vector<Strategy> candidates;
  if (strategies_text) {
    candidates = detail_plan::read_candidates(*strategies_text);
  } else {
    proposal::ProposeOptions settings = propose_options(options, profile);
    settings.max_len = detail_propose::choose_max_len(options.positive("context"), loaded, profile, settings);
    candidates = proposal::propose(loaded.truncated(*settings.max_len), profile, settings).strategies();
  }

  std::int64_t widest = 0;
  for (const Strategy& strategy : candidates) widest = std::max(widest, profile.pipelines(strategy).front().max_len);
  sluice::detail::require(widest > 0, "no candidate strategy can hold any sequence (every MaxLen is 0)");
  const std::int64_t context = options.positive("context").value_or(widest);

  const data::LengthDataset dataset = loaded.truncated(context);
  data::BatchSampler sampler(dataset,
                             {.tokens_per_batch = options.positive("tokens").value_or(100'000), .seed = seed_of(options)});
  assign::PlanOptions plan_options;
  plan_options.dispatch = dispatch_options(options);
  if (options.flag("lnk")) {
    const shard::Model model = shard::llama_like(profile.spec().model);
    plan_options.candidate_overhead = shard::iteration_costs(shard::sharded_layout(profile.gpus(), model.layers),
                                                             candidates, model, shard::Cluster{});
  }

  const std::int64_t iterations = options.positive("iterations").value_or(10);
  std::vector<detail_plan::IterationRecord> records;
  Progress progress(terminal, "plan", iterations);
  for (std::int64_t k = 0; k < iterations; ++k) {
    data::Batch batch = sampler.next();
    const auto start = std::chrono::steady_clock::now();
    assign::IterationPlan plan = assign::plan_iteration(batch.sequences, candidates, profile, plan_options);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    assign::validate(plan, batch.sequences, profile);
    records.push_back({std::move(batch), std::move(plan), elapsed.count()});
    progress.advance();
  }

  if (const auto svg = options.text("svg")) {
    std::vector<assign::IterationPlan> plans;
    for (const auto& record : records) plans.push_back(record.plan);
    io::write_text_file(*svg, io::pipeline_loads_svg(plans, "sluice plan: " + profile.name() + " on " +
                                                                std::to_string(profile.gpus()) + " GPUs"));
  }

  std::vector<double> estimates;
  std::vector<double> planning;
  std::map<std::string, int> chosen;
  double tokens = 0;
  for (const auto& record : records) {
    estimates.push_back(record.plan.total());
    planning.push_back(record.planning_seconds);
    ++chosen[record.plan.strategy.name()];
    tokens += static_cast<double>(record.batch.tokens);
  }
  const double seconds = mean(estimates) * static_cast<double>(records.size());

  if (options.flag("json")) {
    io::json iterations_json = io::json::array();
    for (std::size_t k = 0; k < records.size(); ++k)
      iterations_json.push_back({{"iteration", k},
                                 {"epoch", records[k].batch.epoch},
                                 {"sequences", records[k].batch.sequences.size()},
                                 {"tokens", records[k].batch.tokens},
                                 {"strategy", records[k].plan.strategy.name()},
                                 {"estimate", records[k].plan.estimate},
                                 {"overhead", records[k].plan.overhead},
                                 {"planning_seconds", records[k].planning_seconds},
                                 {"plan", records[k].plan}});
    out << io::json{{"format", "sluice.plan_run"},
                    {"version", 1},
                    {"profile", profile.name()},
                    {"gpus", profile.gpus()},
                    {"context", context},
                    {"candidates", assign::CandidateSet{candidates}},
                    {"iterations", std::move(iterations_json)},
                    {"summary",
                     {{"mean_estimate", mean(estimates)},
                      {"stddev_estimate", deviation(estimates)},
                      {"tokens_per_second", tokens / seconds},
                      {"mean_planning_seconds", mean(planning)},
                      {"chosen", chosen}}}}
               .dump(2)
        << "\n";
    return 0;
  }

  out << "plan: " << profile.name() << " on " << profile.gpus() << " GPUs, " << candidates.size()
      << " candidates, context " << context << ", " << dataset.source() << "\n\n";
  out << "  iter  sequences    tokens  estimate (s)  lnk (s)  dispatch bound (s)  plan (ms)  strategy\n";
  out << std::fixed;
  for (std::size_t k = 0; k < records.size(); ++k) {
    const auto& record = records[k];
    out << std::setw(6) << k << std::setw(11) << record.batch.sequences.size() << std::setw(10) << record.batch.tokens
        << std::setprecision(3) << std::setw(14) << record.plan.estimate << std::setw(9) << record.plan.overhead
        << std::setw(20)
        << record.plan.dispatch_lower_bound << std::setprecision(2) << std::setw(11) << record.planning_seconds * 1e3
        << "  " << record.plan.strategy.name() << "\n";
  }
  out << std::setprecision(3) << (options.flag("lnk") ? "\nestimate + lnk " : "\nestimate ") << mean(estimates) << " ± "
      << deviation(estimates) << " s per iteration, " << std::setprecision(0) << tokens / seconds
      << " tokens/s; planning " << std::setprecision(2) << mean(planning) * 1e3 << " ms per iteration\n";
  out << "chosen:";
  for (const auto& [name, count] : chosen) out << "  " << name << " ×" << count;
  out << "\n";
  return 0;
}

}  // namespace sluice::cli
