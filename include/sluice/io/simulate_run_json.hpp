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
  std::optional<std::string> failure;  // why the system cannot run the scenario
  std::string configuration;
  std::vector<Strategy> strategies;
  std::vector<compare::IterationOutcome> iterations;
  std::optional<compare::Summary> summary;  // exactly when the system ran
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
  std::string lengths;  // the dataset's source
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
  std::vector<std::string> pictures;       // the SVG files written
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

}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::io::SimulateRun> {
  static void to_json(json& out, const sluice::io::SimulateRun& run) {
    out = {{"profile", run.profile},
           {"gpus", run.gpus},
           {"lengths", run.lengths},
           {"context", run.context},
           {"tokens", run.tokens},
           {"seed", run.seed},
           {"cross_node_tp", run.cross_node_tp},
           {"link",
            {{"latency_seconds", run.link.latency_seconds},
             {"bandwidth_bytes_per_second", run.link.bandwidth_bytes_per_second}}},
           {"backward_ratio", run.backward_ratio},
           {"batches", run.batches},
           {"length_ranges", run.length_ranges},
           {"candidates", sluice::assign::CandidateSet{run.candidates}},
           {"systems", run.systems},
           {"pictures", run.pictures}};
  }
  static sluice::io::SimulateRun from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "simulate run";
    const auto link = field<json>(in, "link", where);
    sluice::io::SimulateRun run{.profile = field<std::string>(in, "profile", where),
                                .gpus = field<std::int64_t>(in, "gpus", where),
                                .lengths = field<std::string>(in, "lengths", where),
                                .context = field<std::int64_t>(in, "context", where),
                                .tokens = field<std::int64_t>(in, "tokens", where),
                                .seed = field<std::uint64_t>(in, "seed", where),
                                .cross_node_tp = field<bool>(in, "cross_node_tp", where),
                                .link = {field<double>(link, "latency_seconds", "simulate run: link"),
                                         field<double>(link, "bandwidth_bytes_per_second", "simulate run: link")},
                                .backward_ratio = field<double>(in, "backward_ratio", where),
                                .batches = field<std::vector<sluice::compare::BatchSize>>(in, "batches", where),
                                .length_ranges = field<std::vector<std::int64_t>>(in, "length_ranges", where),
                                .candidates = field<sluice::assign::CandidateSet>(in, "candidates", where).strategies,
                                .systems = field<std::vector<sluice::io::SimulateRunSystem>>(in, "systems", where),
                                .pictures = field<std::vector<std::string>>(in, "pictures", where)};
    sluice::require(run.gpus >= 1, where, ": field 'gpus' must be >= 1, got ", run.gpus);
    sluice::require(run.context >= 1, where, ": field 'context' must be >= 1, got ", run.context);
    sluice::require(run.tokens >= 1, where, ": field 'tokens' must be >= 1, got ", run.tokens);
    sluice::require(run.link.latency_seconds >= 0 && run.link.bandwidth_bytes_per_second > 0, where,
                    ": field 'link': latency must be >= 0 and bandwidth > 0");
    sluice::require(run.backward_ratio > 0, where, ": field 'backward_ratio' must be > 0, got ", run.backward_ratio);
    for (const sluice::compare::BatchSize& batch : run.batches)
      sluice::require(batch.tokens >= 0, where, ": field 'batches': a batch of ", batch.tokens, " tokens");
    // Systems by position, as in a comparison; each that ran, once per batch.
    const auto& systems = sluice::compare::all_systems;
    sluice::require(run.systems.size() == systems.size(), where, ": field 'systems': expected ", systems.size(),
                    " systems, got ", run.systems.size());
    for (std::size_t s = 0; s < systems.size(); ++s) {
      const sluice::io::SimulateRunSystem& system = run.systems[s];
      sluice::require(system.name == sluice::compare::name(systems[s]), where, ": field 'systems'[", s,
                      "]: expected system '", sluice::compare::name(systems[s]), "', got ",
                      sluice::io::detail::describe(system.name));
      sluice::require(system.failure || system.iterations.size() == run.batches.size(), where, ": field 'systems'[", s,
                      "]: ", system.iterations.size(), " iterations for ", run.batches.size(), " batches");
    }
    return run;
  }
};

}  // namespace nlohmann
