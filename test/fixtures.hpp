#pragma once
// Inputs that several areas build their cases from: the bundled LLaMA-2 7B profile and seeded synthetic batches.
#include <cstdint>
#include <vector>

#include "sluice/core/sequence.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "support.hpp"

namespace test_support {

inline const sluice::cost::Profile& profile7b() {
  static const sluice::cost::Profile profile =
      sluice::io::read_document<sluice::cost::Profile>(sluice::io::resolve_data_file("llama2-7b", "profiles"));
  return profile;
}

// One batch of `tokens` tokens sampled from 5,000 synthetic lengths truncated to `context`.
inline std::vector<sluice::Sequence> batch_of(std::uint64_t seed, std::int64_t tokens, std::int64_t context = 32768) {
  const sluice::data::LengthDataset dataset =
      sluice::data::LengthDataset(sluice::data::synthetic_lengths({.count = 5000, .seed = seed}), "synthetic")
          .truncated(context);
  sluice::data::BatchSampler sampler(dataset, {.tokens_per_batch = tokens, .seed = seed});
  return sampler.next().sequences;
}

}  // namespace test_support
