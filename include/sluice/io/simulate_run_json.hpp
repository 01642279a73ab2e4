#pragma once
// JSON for what `sluice simulate --json` prints: "sluice.simulate_run" (version 12, its CP variant 13; see
// simulate_run_version), a SimulateRun built by simulate_run and written with io::to_document. Its reader,
// io::from_document, checks every member and the invariants between members that cost nothing to check.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/compare/compare.hpp"
#include "sluice/compare/summary.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/compare_json.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"

namespace sluice::io {

// One system of a simulate run: its outcome per iteration and, when it ran, their summary.
struct SimulateRunSystem {
  std::string name;
  std::optional<std::string> failure;
  std::string configuration;
  std::vector<Strategy> strategies;
  std::vector<compare::IterationOutcome> iterations;
  std::optional<compare::Summary> summary;
  friend bool operator==(const SimulateRunSystem&, const SimulateRunSystem&) = default;
};

// The stage-to-stage link of a simulate run, in the units its members name.
struct SimulateRunLink {
  double latency_seconds = 0;
  double bandwidth_bytes_per_second = 0;
  friend bool operator==(const SimulateRunLink&, const SimulateRunLink&) = default;
};

// What `sluice simulate` reports: every system on the same batches.
struct SimulateRun {
  std::string profile;
  std::int64_t gpus = 0;
  std::string lengths;
  std::int64_t context = 0;
  std::int64_t tokens = 0;
  std::uint64_t seed = 0;
  bool cross_node_tp = false;
  SimulateRunLink link;
  double backward_ratio = 0;
  std::vector<compare::BatchSize> batches;
  std::vector<std::int64_t> length_ranges;
  std::vector<Strategy> candidates;
  std::vector<SimulateRunSystem> systems;  // in compare::all_systems order
  std::vector<std::string> pictures;
  friend bool operator==(const SimulateRun&, const SimulateRun&) = default;
};

// 12: each iteration's and system's measured planning time added (10 had none; 10: each batch's lower bound and
// each system's ratio to it added; 8 had neither; 6 held eight systems without the
// imbalance degree between micro-batches; 4 six, before Megatron-LM's dynamic CP and FlexSP; 2 four; each
// version's CP variant is one above it).
inline constexpr int simulate_run_version = 12;

// The report of `comparison` under `setup` on the dataset read from `lengths`.
inline SimulateRun simulate_run(const compare::Options& setup, const std::string& lengths,
                                const compare::Comparison& comparison,
                                const compare::BySystem<compare::Summary>& summaries,
                                const std::vector<std::string>& pictures) {
  SimulateRun run{.profile = setup.profile.name(),
                  .gpus = setup.profile.gpus(),
                  .lengths = lengths,
                  .context = setup.context,
                  .tokens = setup.tokens,
                  .seed = setup.seed,
                  .cross_node_tp = setup.cross_node_tp,
                  .link = {setup.problem.link.latency, setup.problem.link.bandwidth},
                  .backward_ratio = setup.problem.backward_ratio,
                  .batches = comparison.batches,
                  .length_ranges = comparison.bounds,
                  .candidates = comparison.candidates,
                  .systems = {},
                  .pictures = pictures};
  for (const compare::System system : compare::all_systems) {
    const compare::SystemRun& ran = comparison.systems[system];
    run.systems.push_back({ran.name, ran.failure, ran.configuration, ran.strategies, ran.iterations,
                           ran.failure ? std::nullopt : std::optional(summaries[system])});
  }
  return run;
}

SLUICE_IO_DOCUMENT(SimulateRun, "sluice.simulate_run", simulate_run_version);

// A system that ran has a summary; one that failed has none.
template <>
struct record<SimulateRunSystem> {
  using T = SimulateRunSystem;
  static constexpr std::string_view name = "system";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(name, failure, configuration, strategies, iterations),
                                            member("summary", &T::summary, Presence::omitted_when_empty)};
  static void check(const T& system) {
    sluice::require(system.failure.has_value() != system.summary.has_value(), name, " ", system.name,
                    system.failure ? ": a failed system has no 'summary'" : ": missing field 'summary'");
  }
};
SLUICE_IO_DOCS(SimulateRunSystem, {"failure", "Why the system cannot run the scenario; empty when it ran"},
               {"configuration", "How the system was set up"}, {"strategies", "The strategies it ran"},
               {"summary", "Its iterations summed up; empty when the system failed"});

SLUICE_IO_RECORD(SimulateRunLink, "link", SLUICE_IO_MEMBERS(latency_seconds, bandwidth_bytes_per_second));

// Systems by position, as in a comparison; each that ran, once per batch.
template <>
struct record<SimulateRun> {
  using T = SimulateRun;
  static constexpr std::string_view name = "simulate run";
  static constexpr auto fields = std::tuple{
      SLUICE_IO_MEMBERS(profile, gpus, lengths, context, tokens, seed, cross_node_tp, link, backward_ratio, batches,
                        length_ranges),
      wrapped_member<assign::CandidateSet>("candidates", &T::candidates), SLUICE_IO_MEMBERS(systems, pictures)};
  static void check(const T& run) {
    sluice::require(run.gpus >= 1, name, ": field 'gpus' must be >= 1, got ", run.gpus);
    sluice::require(run.context >= 1, name, ": field 'context' must be >= 1, got ", run.context);
    sluice::require(run.tokens >= 1, name, ": field 'tokens' must be >= 1, got ", run.tokens);
    sluice::require(run.link.latency_seconds >= 0 && run.link.bandwidth_bytes_per_second > 0, name,
                    ": field 'link': latency must be >= 0 and bandwidth > 0");
    sluice::require(run.backward_ratio > 0, name, ": field 'backward_ratio' must be > 0, got ", run.backward_ratio);
    for (const compare::BatchSize& batch : run.batches)
      sluice::require(batch.tokens >= 0, name, ": field 'batches': a batch of ", batch.tokens, " tokens");
    const auto& systems = compare::all_systems;
    sluice::require(run.systems.size() == systems.size(), name, ": field 'systems': expected ", systems.size(),
                    " systems, got ", run.systems.size());
    for (std::size_t s = 0; s < systems.size(); ++s) {
      const SimulateRunSystem& system = run.systems[s];
      sluice::require(system.name == compare::name(systems[s]), name, ": field 'systems'[", s, "]: expected system '",
                      compare::name(systems[s]), "', got ", detail::describe(system.name));
      sluice::require(system.failure || system.iterations.size() == run.batches.size(), name, ": field 'systems'[", s,
                      "]: ", system.iterations.size(), " iterations for ", run.batches.size(), " batches");
    }
  }
};
SLUICE_IO_DOCS(SimulateRun, {"lengths", "The dataset's source"},
               {"length_ranges", "HotSPa's length ranges (0, b0], (b0, b1], ...: their upper ends"},
               {"pictures", "The SVG files written"});

}  // namespace sluice::io
