#pragma once
// The scenario `simulate` and `trace` share: the options that set up compare:: (profile, lengths, cluster,
// tokens, context, seeds, dispatch, links), read the same way in both, and its seeded batches.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>

#include "inputs.hpp"
#include "options.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/core/error.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/proposal/propose.hpp"

namespace sluice::cli {

// The options simulate and trace share.
inline const std::set<std::string, std::less<>> scenario_options = {
    "profile", "lengths", "gpus", "tokens", "context", "seed", "trials", "threads", "bandwidth", "latency"};

struct Scenario {
  compare::Options settings;
  data::LengthDataset dataset;  // truncated to the context
  // The seeded sampler of the scenario's iterations, one batch at a time.
  [[nodiscard]] data::BatchSampler sampler() const {
    return data::BatchSampler(dataset, {.tokens_per_batch = settings.tokens, .seed = settings.seed});
  }
};

inline Scenario read_scenario(const Options& options) {
  const std::int64_t context = options.integer("context").value_or(32768);
  // sluice proposes its candidates on a length grid of this step, up to the context.
  const std::int64_t length_step = proposal::ProposeOptions{}.length_step;
  sluice::require(context >= length_step, "--context ", context, " is shorter than the length grid's step ", length_step,
                  " that sluice proposes strategies on");
  data::LengthDataset dataset = load_lengths(options).truncated(context);
  cost::Profile profile = load_profile(options);
  const std::int64_t hidden = std::max<std::int64_t>(profile.spec().model.hidden, 1);
  compare::Options settings{.profile = std::move(profile),
                            .context = context,
                            .tokens = options.integer("tokens").value_or(100'000),
                            .cross_node_tp = options.flag("cross-node-tp"),
                            .problem = {.hidden = hidden, .link = link_of(options)},
                            .plan = {.dispatch = dispatch_options(options), .candidate_overhead = {}},
                            .seed = seed_of(options)};
  return {.settings = std::move(settings), .dataset = std::move(dataset)};
}

inline std::string describe(const Scenario& scenario) {
  const compare::Options& settings = scenario.settings;
  return sluice::concat(settings.profile.name(), " on ", settings.profile.gpus(), " GPUs; ",
                        std::filesystem::path(scenario.dataset.source()).filename().string(), ", context ",
                        settings.context, settings.cross_node_tp ? ", TP across nodes allowed" : "");
}

}  // namespace sluice::cli
