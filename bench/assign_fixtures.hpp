#pragma once
// The assignment benchmarks' scenarios (dispatch, packing, per-iteration planning): the bundled LLaMA-32B
// profile, synthetic long-tailed lengths truncated to a 32K context, a token-budget batch and a heterogeneous
// strategy after Hydraulis' 64-GPU example (§7: [(16,1), (8,1)×6]), scaled ×16 for 1024 GPUs.
#include <cstdint>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"

namespace sluice::bench {

struct AssignScenario {
  cost::Profile profile;                    // llama2-32b resolved for the scenario's GPU count
  Strategy strategy;                        // 1×<16,1> + 6×<8,1> per 64 GPUs
  std::vector<Sequence> batch;              // ids are dataset indices
  std::vector<cost::SchemeCost> pipelines;  // profile.pipelines(strategy), MaxLen order, as dispatch takes them
};

inline constexpr std::int64_t scenario_context = 32768;
inline constexpr std::int64_t scenario_tokens_per_64_gpus = 200'000;

// The synthetic dataset every scenario samples from (100,000 lengths, seed 1, truncated to the context).
inline data::LengthDataset scenario_dataset() {
  return data::LengthDataset(data::synthetic_lengths({.count = 100'000, .seed = 1}), "synthetic")
      .truncated(scenario_context);
}

// `gpus` = 64 or 1024: 200K resp. 3.2M tokens per batch. `batch_number` counts the sampler's batches
// (seed 1) from 1, so scenario(64, k) for k = 1..10 are ten consecutive iterations.
inline AssignScenario scenario(int gpus, int batch_number = 1) {
  sluice::require(gpus == 64 || gpus == 1024, "bench scenario: gpus must be 64 or 1024, got ", gpus);
  sluice::require(batch_number >= 1, "bench scenario: batch_number must be >= 1, got ", batch_number);
  const int scale = gpus / 64;
  cost::Profile profile =
      io::read_document<cost::Profile>(io::resolve_data_file("llama2-32b", "profiles")).with_gpus(gpus);
  Strategy strategy({{Scheme(16, 1), scale}, {Scheme(8, 1), 6 * scale}});
  data::BatchSampler sampler(scenario_dataset(), {.tokens_per_batch = scenario_tokens_per_64_gpus * scale, .seed = 1});
  for (int b = 1; b < batch_number; ++b) sampler.next();
  std::vector<Sequence> batch = sampler.next().sequences;
  std::vector<cost::SchemeCost> pipelines;
  for (const Pipeline& pipeline : profile.pipelines(strategy)) pipelines.push_back(profile.at(pipeline.scheme));
  return {std::move(profile), std::move(strategy), std::move(batch), std::move(pipelines)};
}

// Four candidates that all hold the 32K context (each keeps at least one <16,1> pipeline), scaled with the cluster.
inline std::vector<Strategy> scenario_candidates(int gpus) {
  const int scale = gpus / 64;
  return {Strategy({{Scheme(16, 1), scale}, {Scheme(8, 1), 6 * scale}}), Strategy({{Scheme(16, 1), 4 * scale}}),
          Strategy({{Scheme(16, 1), 2 * scale}, {Scheme(8, 1), 4 * scale}}),
          Strategy({{Scheme(16, 1), 3 * scale}, {Scheme(8, 1), 2 * scale}})};
}

}  // namespace sluice::bench
