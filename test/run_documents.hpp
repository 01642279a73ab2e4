#pragma once
// Values of the CLI's reports built as the CLI builds them, shared by the io and fuzz suites.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "sluice/compare/microbatching.hpp"
#include "sluice/core/random.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/run_json.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/schedule/plan_pipeline.hpp"

namespace sluice::test {

// A recorded CLI output (test/golden) with its measured planning times, blanked in the recording, put back as numbers.
inline std::string recorded_output(const char* name) {
  std::string text =
      io::read_text_file(std::filesystem::path(SLUICE_BUNDLED_DATA_DIR) / ".." / "test" / "golden" / name);
  const std::string blank = "\"measured\"";
  for (auto at = text.find(blank); at != std::string::npos; at = text.find(blank, at))
    text.replace(at, blank.size(), "0.25");
  return text;
}

// sluice schedule on eight samples drawn with `seed` over two replicas of a four-stage scheme, beside the baselines.
inline io::ScheduleRun small_schedule_run(const cost::Profile& profile, std::uint64_t seed) {
  const microbatch::StageCostSetup setup = microbatch::stage_cost(profile.at(Scheme(1, 4)));
  std::vector<microbatch::Sample> samples;
  Rng rng(seed);
  for (std::int64_t i = 0; i < 8; ++i) samples.push_back({i, rng.uniform_int(1, 8192), 0});
  schedule::PipelinePlanOptions options;
  options.stages = 4;
  options.replicas = 2;
  options.micro_batch_memory = setup.memory_limit;
  options.problem = {.hidden = 4096, .element_bytes = 2, .link = {1e-5, 1e11}};
  const std::span<const microbatch::Sample> span(samples);
  io::ScheduleRun run = io::schedule_run(Scheme(1, 4), options, schedule::plan_pipeline(span, setup.model, options),
                                         compare::microbatching_baselines(span, setup.model, options, 8192));
  run.profile = profile.name();
  run.context = 8192;
  run.sequences = samples.size();
  for (const microbatch::Sample& sample : samples) run.tokens += sample.input;
  return run;
}

}  // namespace sluice::test
