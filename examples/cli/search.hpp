#pragma once
// `sluice search`: Galvatron-BMW's hybrid-parallel search for one model on one cluster: the per-layer
// strategies, the pipeline partition, the micro-batches and the estimated throughput, beside Base's and
// the baselines'.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <iomanip>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "options.hpp"
#include "progress.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/galvatron.hpp"
#include "sluice/io/search_json.hpp"
#include "sluice/search/search.hpp"

namespace sluice::cli {

inline constexpr std::string_view search_usage =
    "usage: sluice search --model M (--cluster C | --galvatron DIR [--time-mode fixed|batch|sequence]) [--memory E]\n"
    "                     [--galvatron-plan F] [--granularity G] [--batch B] [--batch-step S] [--max-batch B]\n"
    "                     [--schedule 1f1b|gpipe] [--dp-types T] [--split-types T] [--max-pp P] [--threads N]\n"
    "                     [--json]\n"
    "\n"
    "Searches per-layer hybrid strategies (DP, sharded DP, TP or Ulysses SP, PP, checkpointing) and the pipeline\n"
    "partition that maximise the estimated throughput under a per-device memory budget (Galvatron-BMW), and the\n"
    "same search restricted to the baselines' spaces (DP, SDP, TP, PP, DP+TP, DP+PP).\n"
    "\n"
    "  --model M        sluice.model JSON file or bundled name (gpt-48, bert-huge-32, vit-huge-32, ...)\n"
    "  --cluster C      sluice.cluster JSON file or bundled name (titan-8, a100-8, a100-64)\n"
    "  --galvatron DIR  Galvatron's profiles of the model and the cluster (its computation_profiling_, "
    "memory_profiling_\n"
    "                   and hardware files; a directory or a bundled set: llama2-7b) in place of --cluster: profiled\n"
    "                   times and parameters replace the model's, the hardware profile gives the cluster\n"
    "  --time-mode X    how Galvatron's computation profile gives a layer's time: batch (default; a line over batch\n"
    "                   sizes, with a cost per micro-batch), fixed (one batch size) or sequence (a fit over lengths)\n"
    "  --galvatron-plan F\n"
    "                   also cost the plan Galvatron's search wrote (its galvatron_config_*.json) with sluice's\n"
    "                   estimator, under the schedule it names, beside sluice's own\n"
    "  --memory E       per-device budget, bytes or with a unit: 16GiB, 512MiB (default: device memory; 24GiB with\n"
    "                   --galvatron, Galvatron's default)\n"
    "  --granularity G  memory step of the layer DP (default 16MiB)\n"
    "  --batch B        fixed global batch in samples (default: sweep B = S, 2S, ... while a plan fits)\n"
    "  --batch-step S   sweep step (default 8)\n"
    "  --max-batch B    sweep limit (default 1024)\n"
    "  --schedule X     1f1b (default) or gpipe\n"
    "  --dp-types T     the data-parallel kinds a layer may use, comma-separated: ddp, zero2, zero3 (default\n"
    "                   ddp,zero3; Galvatron's zero2 setting is zero2,zero3)\n"
    "  --split-types T  the kinds that split a sample over a layer's ranks, comma-separated: tp (Megatron's tensor\n"
    "                   parallelism), ulysses (Ulysses sequence parallelism) (default tp; Galvatron's sp_space tp+sp\n"
    "                   is tp,ulysses)\n"
    "  --max-pp P       the deepest pipeline searched (default: as deep as the GPUs and layers allow)\n"
    "  --threads N      batches of the sweep searched side by side (default 1; the result does not depend on it)\n"
    "  --json           print one sluice.search JSON document\n";

namespace search_inputs {

// "16GiB", "512MiB", "1.5GiB", "1000000": bytes, rounded down.
inline std::int64_t parse_bytes(std::string_view option, const std::string& text) {
  double number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  double scale = 0;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "KiB")
    scale = 0x1p10;
  else if (unit == "MiB")
    scale = 0x1p20;
  else if (unit == "GiB")
    scale = 0x1p30;
  else if (unit == "TiB")
    scale = 0x1p40;
  else if (unit == "KB")
    scale = 1e3;
  else if (unit == "MB")
    scale = 1e6;
  else if (unit == "GB")
    scale = 1e9;
  else if (unit == "TB")
    scale = 1e12;
  const double bytes = number * scale;
  sluice::require(error == std::errc{} && scale > 0 && bytes >= 1 && bytes < 0x1p62, "option --", option,
                  ": expected a positive size such as 16GiB or 512MiB, got '", text, "'");
  return static_cast<std::int64_t>(bytes);
}

// "ddp,zero3": the kinds an option names, each once; every kind not named is off.
inline void select_kinds(std::string_view option, std::string_view text,
                         std::initializer_list<std::pair<std::string_view, bool*>> kinds) {
  std::string names;
  for (const auto& [name, flag] : kinds) {
    *flag = false;
    names += names.empty() ? std::string(name) : ", " + std::string(name);
  }
  for (const std::string_view item : command_line::comma_items(text)) {
    const auto* kind = std::ranges::find_if(kinds, [&](const auto& entry) { return entry.first == item; });
    sluice::require(kind != kinds.end() && !*kind->second, "option --", option, ": expected distinct ", names,
                    " separated by commas, got '", text.substr(0, 60), "'");
    *kind->second = true;
  }
}

}  // namespace search_inputs

namespace search_report {

inline std::string gib(double bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << bytes / 0x1p30 << " GiB";
  return out.str();
}

inline void print_plan(std::ostream& out, std::string_view label, const search::Plan& plan) {
  out << "  " << label;
  if (plan.method != label) out << " (" << plan.method << "'s plan)";
  out << ": " << std::fixed << std::setprecision(3) << plan.throughput << " samples/s, batch " << plan.global_batch
      << ", pp " << plan.pp << ", " << plan.micro_batches << " micro-batches, " << std::setprecision(4)
      << plan.iteration_seconds << " s per iteration, partition [";
  const auto sizes = plan.partition();
  for (std::size_t i = 0; i < sizes.size(); ++i) out << (i ? "," : "") << sizes[i];
  out << "]";
  if (plan.vocabulary) out << ", vocabulary " << plan.vocabulary->name();
  out << "\n";
}

// The same strategies, partition, batch and micro-batches, whichever search found them.
inline bool same_plan(const search::Plan& x, const search::Plan& y) {
  return x.pp == y.pp && x.global_batch == y.global_batch && x.micro_batches == y.micro_batches &&
         x.stages == y.stages && x.vocabulary == y.vocabulary;
}

}  // namespace search_report

inline int search_command(std::span<const std::string_view> args, std::ostream& out, std::ostream* terminal = nullptr) {
  const Options options(
      args,
      {"model", "cluster", "galvatron", "time-mode", "galvatron-plan", "memory", "granularity", "batch", "batch-step",
       "max-batch", "schedule", "dp-types", "split-types", "max-pp", "threads"},
      {"json", "help"});
  if (options.flag("help")) {
    out << search_usage;
    return 0;
  }
  const auto model_name = options.text("model");
  const auto cluster_name = options.text("cluster");
  sluice::require(model_name.has_value(), "option --model is required (see sluice search --help)");
  const auto galvatron_dir = options.text("galvatron");
  sluice::require(cluster_name.has_value() != galvatron_dir.has_value(),
                  "give one of --cluster and --galvatron (see sluice search --help)");
  sluice::require(galvatron_dir.has_value() || !options.text("time-mode"), "option --time-mode needs --galvatron");
  search::SearchOptions settings;
  if (const auto memory = options.text("memory")) settings.memory_bytes = search_inputs::parse_bytes("memory", *memory);
  auto model = io::read_document<search::ModelSpec>(io::resolve_data_file(*model_name, "models"));
  search::ClusterSpec cluster;
  if (galvatron_dir) {
    search::GalvatronSettings galvatron;
    if (const auto mode = options.text("time-mode")) galvatron.time_mode = search::galvatron_time_mode(*mode);
    if (settings.memory_bytes > 0) galvatron.memory_bytes = settings.memory_bytes;
    const search::GalvatronProfile profile = io::read_galvatron(*galvatron_dir);
    model = search::galvatron_model(profile, std::move(model), galvatron);
    cluster = search::galvatron_cluster(profile, galvatron);
  } else {
    cluster = io::read_document<search::ClusterSpec>(io::resolve_data_file(*cluster_name, "clusters"));
  }
  // Read before the search, so that a bad file costs no search.
  std::optional<io::GalvatronPlan> galvatron_read;
  if (const auto plan_file = options.text("galvatron-plan"))
    galvatron_read = io::read_galvatron_plan(*plan_file, static_cast<int>(model.layers.size()), cluster.gpus);
  if (const auto granularity = options.text("granularity"))
    settings.granularity_bytes = search_inputs::parse_bytes("granularity", *granularity);
  settings.global_batch = options.integer("batch").value_or(0);
  settings.batch_step = options.integer("batch-step").value_or(settings.batch_step);
  settings.max_batch = options.integer("max-batch").value_or(settings.max_batch);
  if (const auto schedule = options.text("schedule")) {
    settings.schedule = value_in(search::schedule_names, *schedule, "option --schedule");
  }
  if (const auto kinds = options.text("dp-types"))
    search_inputs::select_kinds(
        "dp-types", *kinds,
        {{"ddp", &settings.space.dp}, {"zero2", &settings.space.zero2}, {"zero3", &settings.space.sdp}});
  if (const auto kinds = options.text("split-types"))
    search_inputs::select_kinds("split-types", *kinds,
                                {{"tp", &settings.space.tp}, {"ulysses", &settings.space.ulysses}});
  if (const auto max_pp = options.integer("max-pp")) settings.space.max_pp = static_cast<int>(*max_pp);
  settings.threads = static_cast<int>(options.integer("threads").value_or(settings.threads));

  search::SearchReport report;
  {
    Progress progress(terminal, "search", 0);
    report = search::search(model, cluster, settings, progress.callback());
  }
  search::validate(report, model, cluster, settings);
  // The sweep stops at --max-batch: a best plan there may have been beaten by a larger batch.
  // Galvatron's own plan, costed by the same estimator under its own schedule.
  std::optional<search::Plan> galvatron_plan;
  if (galvatron_read) {
    search::SearchOptions own = settings;
    own.schedule = galvatron_read->schedule;
    galvatron_plan = search::evaluate(galvatron_read->plan, model, cluster, own);
  }
  const double budget = static_cast<double>(settings.memory_bytes > 0 ? settings.memory_bytes : cluster.memory_bytes);
  auto fits = [&](const search::Plan& plan) {
    return std::ranges::all_of(plan.stages,
                               [&](const search::StagePlan& stage) { return stage.memory_bytes <= budget; });
  };
  const bool at_sweep_limit =
      settings.global_batch == 0 && report.best.global_batch + settings.batch_step > settings.max_batch;

  if (options.flag("json")) {
    io::json document = io::to_document(report);
    document["model"] = model.name;
    document["cluster"] = cluster.name;
    document["memory_bytes"] = settings.memory_bytes > 0 ? settings.memory_bytes : cluster.memory_bytes;
    document["at_sweep_limit"] = at_sweep_limit;
    if (galvatron_plan) document["galvatron_plan"] = {{"plan", *galvatron_plan}, {"fits", fits(*galvatron_plan)}};
    out << document.dump(2) << "\n";
    return 0;
  }

  const search::Plan& best = report.best;
  out << "search: " << model.name << " (" << model.layers.size() << " layers) on " << cluster.name << " ("
      << cluster.gpus << " GPUs), "
      << search_report::gib(
             static_cast<double>(settings.memory_bytes > 0 ? settings.memory_bytes : cluster.memory_bytes))
      << " per device\n\n";
  out << "best plan (" << best.method << "): " << std::fixed << std::setprecision(3) << best.throughput
      << " samples/s, global batch " << best.global_batch << ", pp " << best.pp << ", " << best.micro_batches
      << " micro-batches, " << std::setprecision(4) << best.iteration_seconds << " s per iteration\n";
  out << "  stage  layers   memory      time/mb (s)  strategies\n";
  for (std::size_t i = 0; i < best.stages.size(); ++i) {
    const search::StagePlan& stage = best.stages[i];
    const int last = stage.first_layer + static_cast<int>(stage.strategies.size()) - 1;
    out << std::setw(7) << i << std::setw(5) << stage.first_layer << "-" << std::left << std::setw(4) << last
        << std::right << std::setw(11) << search_report::gib(stage.memory_bytes) << std::setprecision(4)
        << std::setw(13) << stage.time_nosync << "  ";
    // Runs of equal strategies: "sdp8+ckpt x12, tp2*dp4 x4".
    for (std::size_t k = 0; k < stage.strategies.size();) {
      std::size_t j = k;
      while (j < stage.strategies.size() && stage.strategies[j] == stage.strategies[k]) ++j;
      out << (k ? ", " : "") << stage.strategies[k].name() << " x" << j - k;
      k = j;
    }
    out << "\n";
  }
  if (at_sweep_limit)
    out << "\nthe best plan's batch is the sweep's limit (--max-batch " << settings.max_batch
        << "): larger batches, not searched, may run faster\n";
  out << "\ncompared:\n";
  search_report::print_plan(out, "bmw", best);
  if (report.base) {
    search_report::print_plan(out, "base", *report.base);
    if (search_report::same_plan(best, *report.base))
      out << "    (bmw's plan is base's: "
          << (best.pp == 1 ? "one stage leaves no partition to balance"
                           : "its balanced partition is the even split base uses")
          << ")\n";
  }
  for (const search::Baseline& baseline : report.baselines) {
    if (baseline.plan) {
      search_report::print_plan(out, baseline.name, *baseline.plan);
    } else {
      out << "  " << baseline.name << ": out of memory\n";
    }
  }
  if (galvatron_plan) {
    search_report::print_plan(out, "galvatron", *galvatron_plan);
    double peak = 0;
    for (const search::StagePlan& stage : galvatron_plan->stages) peak = std::max(peak, stage.memory_bytes);
    out << "    (Galvatron's plan costed by sluice's estimator: " << search_report::gib(peak)
        << " on its fullest stage, " << (fits(*galvatron_plan) ? "within" : "over") << " the budget)\n";
  }
  return 0;
}

}  // namespace sluice::cli
