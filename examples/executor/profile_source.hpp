#pragma once
// Where the executor programs' profile comes from: a sluice profile file (or bundled name, or Hetu strategy pool),
// or this machine's GPU profiled on the spot (sluice_profile_gpu's measurement); widened, as the sluice tool widens
// it, by the CP and recompute schemes of --cp, --cp-kinds and --ac.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "../common/scheme_space.hpp"
#include "options.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/strategy_pool.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/profiler.hpp"

namespace examples {

// `path` empty: profile <1, PP> for PP 1, 2 and 4 (those not deeper than the model) on this machine's GPU, with the
// lengths doubled past the profiler's longest until they reach `context` (at most 65,536 tokens, which bounds the
// profiling's time and memory): fitted up to 8,192 tokens, T(l) predicted a 16,384-token sequence 11% slow on an
// H200 (120.5 ms against 108.5 ms measured).
inline sluice::cost::Profile load_profile(const std::string& path, const sluice::executor::ModelConfig& model,
                                          std::int64_t gpus, std::int64_t context) {
  if (path.empty()) {
    std::vector<int> pps;
    for (const int pp : {1, 2, 4})
      if (pp <= model.layers) pps.push_back(pp);
    sluice::executor::cuda::ProfilerOptions options;
    options.cluster_gpus = gpus;
    constexpr std::int64_t longest_sample = 65536;
    while (options.lengths.back() < std::min(context, longest_sample))
      options.lengths.push_back(options.lengths.back() * 2);
    return sluice::cost::Profile(
        sluice::executor::cuda::profile_gpu(model, sluice::executor::cuda::pipeline_schemes(pps, false), options));
  }
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
                                                const sluice::executor::ModelConfig& model,
                                                const sluice::cost::SchemeSpace& space, std::int64_t gpus,
                                                std::int64_t context, std::int64_t tokens, std::uint64_t seed) {
  return {.profile = with_space(load_profile(profile_path, model, gpus, context), space, model),
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
