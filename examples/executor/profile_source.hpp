#pragma once
// Where the executor programs' profile comes from: a sluice profile file (or bundled name, or Hetu strategy pool),
// or this machine's GPU profiled on the spot (sluice_profile_gpu's measurement, with the TP degrees of --tp); widened,
// as the sluice tool widens it, by the CP and recompute schemes of --cp, --cp-kinds and --ac.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "../common/scheme_space.hpp"
#include "options.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/core/error.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/strategy_pool.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/profiler.hpp"

namespace examples {

// The profile measured on the spot when no file is given: ⟨TP, PP⟩ for every TP of `tps` (--tp) and PP 1, 2 and 4
// (those not deeper than the model), a stage's TP lanes serialized on the GPU, with the lengths doubled past the
// profiler's longest until they reach `context` (at most 65,536 tokens, which bounds the profiling's time and
// memory): fitted up to 8,192 tokens, T(l) predicted a 16,384-token sequence 11% slow on an H200 (120.5 ms against
// 108.5 ms measured). Raises invalid_input for a TP the model or `gpus` cannot run, before any device is looked for.
struct SpotProfile {
  std::vector<sluice::Scheme> schemes;
  sluice::executor::cuda::ProfilerOptions options;
};

inline SpotProfile spot_profile(const sluice::executor::ModelConfig& model, const std::vector<int>& tps,
                                std::int64_t gpus, std::int64_t context) {
  SpotProfile spot;
  for (const int tp : tps) {
    sluice::require(tp >= 1 && tp <= gpus, "--tp ", tp, " is not a TP degree of ", gpus, " GPUs");
    sluice::require(std::count(tps.begin(), tps.end(), tp) == 1, "--tp names ", tp, " twice");
    for (const int pp : {1, 2, 4})
      if (pp <= model.layers) spot.schemes.emplace_back(tp, pp);
  }
  spot.options.cluster_gpus = gpus;
  constexpr std::int64_t longest_sample = 65536;
  while (spot.options.lengths.back() < std::min(context, longest_sample))
    spot.options.lengths.push_back(spot.options.lengths.back() * 2);
  sluice::executor::cuda::require_profilable(model, spot.schemes, spot.options);
  return spot;
}

// --tp shapes the spot profile alone: a profile file (`path`) has schemes of its own.
inline void require_tps_for(const std::string& path, const std::vector<int>& tps) {
  sluice::require(path.empty() || tps == std::vector{1},
                  "--tp sets the schemes of the profile measured on the GPU; a --profile file has its own");
}

// `path` empty: this machine's GPU profiled on the spot (spot_profile); otherwise the file's profile.
inline sluice::cost::Profile load_profile(const std::string& path, const sluice::executor::ModelConfig& model,
                                          const std::vector<int>& tps, std::int64_t gpus, std::int64_t context) {
  if (path.empty()) {
    const SpotProfile spot = spot_profile(model, tps, gpus, context);
    return sluice::cost::Profile(sluice::executor::cuda::profile_gpu(model, spot.schemes, spot.options));
  }
  require_tps_for(path, tps);
  return sluice::io::read_profile(sluice::io::resolve_data_file(path, "profiles"), gpus);
}

// --cp, --cp-kinds and --ac as the sluice tool reads them.
inline sluice::cost::SchemeSpace scheme_space_from(Arguments& arguments) {
  const std::string cp = arguments.text("cp", "");
  const std::string kinds = arguments.text("cp-kinds", "");
  return sluice::command_line::scheme_space(cp.empty() ? std::nullopt : std::optional<std::string_view>(cp),
                                            kinds.empty() ? std::nullopt : std::optional<std::string_view>(kinds),
                                            arguments.flag("ac"));
}

// The profile with the schemes of `space` derived from its ⟨TP, PP⟩ ones; CP needs the model's heads, the executed
// model's where the profile does not give them.
inline sluice::cost::Profile with_space(const sluice::cost::Profile& profile, const sluice::cost::SchemeSpace& space,
                                        const sluice::executor::ModelConfig& model) {
  if (space.empty()) return profile;
  sluice::cost::ProfileSpec spec = profile.spec();
  if (spec.model.heads == 0) spec.model.heads = model.heads;
  return sluice::cost::Profile(sluice::cost::with_scheme_space(spec, space));
}

// The comparison's options for the executed model on `gpus` GPUs: load_profile's profile widened by `space`, the
// model's hidden size for every simulated pipeline, TP within a node.
inline sluice::compare::Options compare_options(const std::string& profile_path,
                                                const sluice::executor::ModelConfig& model, const std::vector<int>& tps,
                                                const sluice::cost::SchemeSpace& space, std::int64_t gpus,
                                                std::int64_t context, std::int64_t tokens, std::uint64_t seed) {
  return {.profile = with_space(load_profile(profile_path, model, tps, gpus, context), space, model),
          .context = context,
          .tokens = tokens,
          .cross_node_tp = false,
          .problem = {.hidden = model.hidden},
          .dispatch = {},
          .seed = seed};
}

// What a program's JSON document says of the run it describes: the model, the profile and the batches' source.
inline sluice::io::json run_description(const sluice::executor::ModelConfig& model,
                                        const sluice::compare::Options& options, const std::string& lengths) {
  return {{"model",
           {{"layers", model.layers},
            {"hidden", model.hidden},
            {"heads", model.heads},
            {"ffn", model.ffn},
            {"vocab", model.vocab}}},
          {"profile", options.profile.name()},
          {"gpus", options.profile.gpus()},
          {"lengths", lengths},
          {"context", options.context},
          {"tokens", options.tokens}};
}

}  // namespace examples
