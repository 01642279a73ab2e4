#pragma once
// `sluice shard`: what optimization–propagation disaggregation costs one strategy: its placement, the pull
// and push LNK plans against the fixed optimizer layout, bytes per link class and α–β times.
#include <filesystem>
#include <iomanip>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "options.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/run_json.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/io/strategy_pool.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/model.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"

namespace sluice::cli {

inline constexpr std::string_view shard_usage =
    "usage: sluice shard --gpus N --strategy S [--model M] [--previous S] [--gpus-per-node G] [--no-match]\n"
    "                    [--json] [--plans]\n"
    "\n"
    "Plans the pull (parameters from the optimizer layout into the strategy's placement) and the push\n"
    "(reduce-scatter across pipelines, then gradients to their optimizer owners) of one iteration, and\n"
    "reports the bytes per link class and the α–β time of each phase.\n"
    "\n"
    "  --gpus N           cluster size, at most 16384; the optimizer states are sharded over all N GPUs\n"
    "  --strategy S       a strategy like '1*tp16pp1+6*tp8pp1', or a sluice.strategy JSON file\n"
    "  --model M          a sluice.shard_model JSON file, or a profile (JSON file or bundled name) whose model\n"
    "                     is taken as a LLaMA-like stack of layers (default llama2-7b)\n"
    "  --previous S       keep the optimizer states in strategy S's own layout instead of fully sharded: the\n"
    "                     cost of switching from S\n"
    "  --gpus-per-node G  GPUs per node, for placement and link classes (default 8)\n"
    "  --no-match         reduce-scatter pieces in pipeline order, not matched to their optimizer owners\n"
    "  --json             print one sluice.shard_run JSON document\n"
    "  --plans            with --json, include the placement, the layout and both full plans\n"
    "\n"
    "A plan may cut at most 67108864 pieces (about N^2/TP for the pull): past that, or past 16384 GPUs,\n"
    "the command exits 2 naming the value.\n";

static_assert(shard::max_gpus == 16384 && shard::max_plan_pieces == 67108864, "shard_usage states the shard limits");

namespace shard_inputs {

inline Strategy read_strategy(const std::string& text) {
  std::error_code error;
  if (std::filesystem::is_regular_file(text, error)) return io::read_document<Strategy>(text);
  return Strategy::parse(text);
}

inline shard::Model read_model(const std::string& text) {
  std::error_code error;
  if (std::filesystem::is_regular_file(text, error)) {
    const io::json document = io::read_json_file(text);
    if (document.is_object() && document.contains("format") &&
        document.at("format") == io::document_traits<shard::Model>::format)
      return io::from_document<shard::Model>(document, text);
  }
  const cost::Profile profile = io::read_profile(io::resolve_data_file(text, "profiles"));
  return shard::llama_like(profile.spec().model);
}

}  // namespace shard_inputs

namespace shard_report {

inline void phase_row(std::ostream& out, std::string_view name, const shard::PhaseCost& phase) {
  out << "  " << std::left << std::setw(16) << name << std::right << std::setw(10) << phase.messages << std::setw(12)
      << static_cast<double>(phase.bytes.local) * 1e-9 << std::setw(12)
      << static_cast<double>(phase.bytes.intra_node) * 1e-9 << std::setw(12)
      << static_cast<double>(phase.bytes.inter_node) * 1e-9 << std::setw(12) << phase.seconds << "\n";
}

}  // namespace shard_report

inline int shard(std::span<const std::string_view> args, std::ostream& out) {
  const Options options(args, {"gpus", "strategy", "model", "previous", "gpus-per-node"},
                        {"no-match", "json", "plans", "help"});
  if (options.flag("help")) {
    out << shard_usage;
    return 0;
  }
  const auto gpus = options.integer("gpus");
  sluice::require(gpus.has_value(), "option --gpus is required (see sluice shard --help)");
  sluice::require(*gpus <= shard::max_gpus, "option --gpus: ", *gpus, " exceeds the shard planner's maximum of ",
                  shard::max_gpus, " GPUs");
  const auto strategy_text = options.text("strategy");
  sluice::require(strategy_text.has_value(), "option --strategy is required (see sluice shard --help)");
  sluice::require(!options.flag("plans") || options.flag("json"), "option --plans needs --json");
  const Strategy strategy = shard_inputs::read_strategy(*strategy_text);
  const shard::Model model = shard_inputs::read_model(options.text("model").value_or(std::string(io::default_profile)));
  const std::int64_t per_node = options.integer("gpus-per-node").value_or(8);
  sluice::require(per_node <= *gpus, "option --gpus-per-node: ", per_node, " exceeds --gpus ", *gpus);
  const shard::PlacementOptions placement_options{.gpus_per_node = static_cast<int>(per_node)};
  shard::Cluster cluster;
  cluster.gpus_per_node = static_cast<int>(per_node);

  // A strategy that cannot be placed raises sluice::infeasible: exit 2, like any bad input.
  auto place = [&](const Strategy& placed) { return shard::place(placed, *gpus, model.layers, placement_options); };
  const shard::Placement placement = place(strategy);
  const std::optional<Strategy> previous =
      options.text("previous") ? std::optional(shard_inputs::read_strategy(*options.text("previous"))) : std::nullopt;
  const shard::OptimizerLayout layout =
      previous ? shard::aligned_layout(place(*previous)) : shard::sharded_layout(*gpus, model.layers);
  const shard::PullPlan pull = shard::plan_pull(placement, layout, model);
  const shard::PushPlan push = shard::plan_push(placement, layout, model, {.match_owners = !options.flag("no-match")});
  shard::validate(pull, placement, layout, model);
  shard::validate(push, placement, layout, model);
  const shard::ShardCost cost = shard::plan_cost(pull, push, cluster);

  if (options.flag("json")) {
    out << io::document_text(
        io::shard_run(*gpus, strategy, previous, model, cluster, placement, layout, pull, push, options.flag("plans")));
    return 0;
  }

  out << "shard: " << strategy.name() << " on " << *gpus << " GPUs (" << per_node << " per node), model " << model.name
      << " (" << model.layers << " layers, " << std::fixed << std::setprecision(2)
      << static_cast<double>(model.layer_elements() * model.layers) * 1e-9 << " G parameters)\n";
  out << "optimizer layout: " << (previous ? "aligned to " + previous->name() : std::string("fully sharded")) << "; "
      << push.pipelines << " pipelines, TP grid " << push.grid << ", " << pull.blocks.size()
      << (pull.blocks.size() == 1 ? " layer block" : " layer blocks");
  if (pull.blocks.size() == 1)
    out << ", mutual slices: pull " << pull.blocks[0].granularity << ", push " << push.blocks[0].granularity;
  out << "\n\n  phase             messages    local GB    intra GB    inter GB    time (s)\n" << std::setprecision(3);
  shard_report::phase_row(out, "pull", cost.pull);
  shard_report::phase_row(out, "reduce-scatter", cost.reduce_scatter);
  shard_report::phase_row(out, "push", cost.push);
  out << "\n  total " << cost.seconds() << " s per iteration if nothing overlaps computation\n";
  return 0;
}

}  // namespace sluice::cli
