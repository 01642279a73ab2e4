#pragma once
// Where the executor programs' profile comes from: a sluice profile file (or bundled name, or Hetu strategy pool),
// or this machine's GPU profiled on the spot (sluice_profile_gpu's measurement).
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/cost/profile.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/strategy_pool.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/profiler.hpp"

namespace examples {

// `path` empty: profile <1, PP> for PP 1, 2 and 4 (those not deeper than the model) on this machine's GPU.
inline sluice::cost::Profile load_profile(const std::string& path, const sluice::executor::ModelConfig& model,
                                          std::int64_t gpus) {
  if (path.empty()) {
    std::vector<int> pps;
    for (const int pp : {1, 2, 4})
      if (pp <= model.layers) pps.push_back(pp);
    sluice::executor::cuda::ProfilerOptions options;
    options.cluster_gpus = gpus;
    return sluice::cost::Profile(sluice::executor::cuda::profile_gpu(model, pps, options));
  }
  return sluice::io::read_profile(sluice::io::resolve_data_file(path, "profiles"), gpus);
}

}  // namespace examples
