#pragma once
// The scenario `simulate` and `trace` share: the options that set up compare:: (profile, lengths, cluster,
// tokens, context, seeds, dispatch, links), read the same way in both, and its seeded batches or the one batch
// given with --batch.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>

#include "candidates.hpp"
#include "context.hpp"
#include "inputs.hpp"
#include "options.hpp"
#include "propose.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/core/error.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/proposal/propose.hpp"

namespace sluice::cli {

// The options simulate and trace share.
inline const std::set<std::string, std::less<>> scenario_options = {
    "profile", "lengths",   "gpus",    "tokens", "context", "seed",    "trials",
    "threads", "bandwidth", "latency", "batch",  "cp",      "cp-kinds"};

struct Scenario {
  compare::Options settings;
  data::LengthDataset dataset;       // truncated to the context
  std::optional<data::Batch> batch;  // --batch: the one batch to run, as given (no longer than the context)
  // The seeded sampler of the scenario's iterations, one batch at a time.
  [[nodiscard]] data::BatchSampler sampler() const {
    return data::BatchSampler(dataset, {.tokens_per_batch = settings.tokens, .seed = settings.seed});
  }
};

// The comparison's settings that these options give, on `profile` and `context`.
inline compare::Options comparison_options(const Options& options, cost::Profile profile, std::int64_t context) {
  const std::int64_t hidden = std::max<std::int64_t>(profile.spec().model.hidden, 1);
  return {.profile = std::move(profile),
          .context = context,
          .tokens = options.integer("tokens").value_or(100'000),
          .cross_node_tp = options.flag("cross-node-tp"),
          .problem = {.hidden = hidden, .link = link_of(options)},
          .dispatch = dispatch_options(options),
          .seed = seed_of(options)};
}

// `given`: the candidates of --strategies (trace), which the context's default follows (context.hpp).
inline Scenario read_scenario(const Options& options, const Candidates* given = nullptr) {
  const data::LengthDataset loaded = load_lengths(options);
  cost::Profile profile = load_planning_profile(options, loaded);
  const std::int64_t context = context_of(options, loaded, profile, given);
  require_context_on_grid(context, proposal::ProposeOptions{}.length_step);
  data::LengthDataset dataset = loaded.truncated(context);
  std::optional<data::Batch> batch;
  if (const auto file = options.text("batch"))
    batch = given_batch(*file, context, sluice::concat("the context ", context, " every system must hold"));
  compare::Options settings = comparison_options(options, std::move(profile), context);
  return {.settings = std::move(settings), .dataset = std::move(dataset), .batch = std::move(batch)};
}

inline std::string describe(const Scenario& scenario) {
  const compare::Options& settings = scenario.settings;
  return sluice::concat(settings.profile.name(), " on ", settings.profile.gpus(), " GPUs; ",
                        std::filesystem::path(scenario.dataset.source()).filename().string(), ", context ",
                        settings.context, settings.cross_node_tp ? ", TP across nodes allowed" : "");
}

}  // namespace sluice::cli
