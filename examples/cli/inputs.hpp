#pragma once
// The inputs the planning commands read the same way, so that an option means the same in every command:
// --profile (resolved for --gpus; for planning, with the scheme space of --cp, --cp-kinds and --ac), --lengths,
// sluice's dispatch (--trials, --threads, --seed) and the stage-to-stage link of simulated pipelines (--bandwidth,
// --latency).
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../common/scheme_space.hpp"
#include "options.hpp"
#include "sluice/assign/dispatch.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/data_json.hpp"
#include "sluice/io/strategy_pool.hpp"
#include "sluice/plan/layout_moves.hpp"
#include "sluice/schedule/instructions.hpp"
#include "sluice/schedule/pipeline.hpp"

namespace sluice::cli {

// A sluice.profile or a Hetu strategy_pool file (io::read_profile tells them apart).
inline cost::Profile load_profile(const Options& options) {
  return io::read_profile(
      io::resolve_data_file(options.text("profile").value_or(std::string(io::default_profile)), "profiles"),
      options.integer("gpus"));
}

// When nothing the command may use holds `context` tokens: "; CP D holds it (try --cp D or --cp auto)" with the
// smallest such degree (ring or Ulysses), or empty when none would or the profile cannot derive CP schemes.
inline std::string cp_advice(const cost::Profile& profile, std::int64_t context, bool cross_node_tp) {
  const std::optional<int> degree =
      cost::smallest_cp_holding(profile.spec(), context, cost::hint_space(profile.spec()), !cross_node_tp);
  return degree ? sluice::concat("; CP ", *degree, " holds it (try --cp ", *degree, " or --cp auto)") : "";
}

inline data::LengthDataset load_lengths(const Options& options) {
  return data::LengthDataset::load(
      io::resolve_data_file(options.text("lengths").value_or(std::string(io::default_lengths)), "lengths"));
}

// The profile with the scheme space of --cp, --cp-kinds and --ac (common/scheme_space.hpp) derived from its
// ⟨TP, PP⟩ schemes. `--cp auto` takes the CP degrees that the context needs (cost::auto_scheme_space): the context
// of --context, else `lengths`' longest sequence; its kinds are --cp-kinds', else ring and Ulysses (where the
// heads split).
inline cost::Profile load_planning_profile(const Options& options, const data::LengthDataset& lengths) {
  cost::Profile profile = load_profile(options);
  const std::optional<std::string> cp = options.text("cp");
  const std::optional<std::string> kinds = options.text("cp-kinds");
  const bool automatic = cp == "auto";
  const auto view = [](const std::optional<std::string>& text) {
    return text ? std::optional<std::string_view>(*text) : std::nullopt;
  };
  // "auto" is read as one degree so that --cp-kinds is checked as with any --cp; the degrees are chosen below.
  cost::SchemeSpace space = command_line::scheme_space(automatic ? std::optional<std::string_view>("2") : view(cp),
                                                       view(kinds), options.flag("ac"));
  if (automatic) {
    if (!kinds) space.cp_kinds = {CpKind::ring, CpKind::ulysses};
    const std::int64_t context = options.integer("context").value_or(std::ranges::max(lengths.lengths()));
    space = cost::auto_scheme_space(profile.spec(), context, space, !options.flag("cross-node-tp"));
  }
  if (space.empty()) return profile;
  return cost::Profile(cost::with_scheme_space(profile.spec(), space));
}

inline std::uint64_t seed_of(const Options& options) {
  return static_cast<std::uint64_t>(options.integer("seed").value_or(0));
}

inline assign::DispatchOptions dispatch_options(const Options& options) {
  assign::DispatchOptions dispatch;
  dispatch.trials = static_cast<int>(options.integer("trials").value_or(100));
  dispatch.threads = static_cast<int>(options.integer("threads").value_or(1));
  dispatch.seed = seed_of(options);
  return dispatch;
}

// --schedule: cyclic (the default) or 1f1b.
inline schedule::ScheduleKind schedule_kind_of(const Options& options) {
  return schedule::schedule_kind_from(options.text("schedule").value_or("cyclic"), "option --schedule");
}

// --layout-moves: what a candidate's plan is charged for its pull and push (plan::LayoutMoves), exposed by default.
inline plan::LayoutMoves layout_moves_of(const Options& options) {
  return plan::layout_moves_from(options.text("layout-moves").value_or("exposed"), "option --layout-moves");
}

// --batch F: the batch as given ("-": standard input), never truncated, so no sequence may be longer than
// `longest`, which `holder` names ("any candidate holds (widest MaxLen 44160)").
inline data::Batch given_batch(const std::string& file, std::int64_t longest, std::string_view holder) {
  data::Batch batch{.sequences = io::read_batch(file, std::cin)};
  for (const Sequence& sequence : batch.sequences) {
    sluice::require(sequence.length() <= longest, "option --batch: ", file == "-" ? "standard input" : file,
                    ": sequence ", sequence.id(), " has length ", sequence.length(), ", longer than ", holder);
    batch.tokens += sequence.length();
  }
  return batch;
}

// --latency in seconds and --bandwidth in GB/s, within cost::Link's physical ranges (option_limits).
inline cost::Link link_of(const Options& options) {
  return {options.real("latency").value_or(1e-5), options.real("bandwidth").value_or(100) * 1e9};
}

}  // namespace sluice::cli
