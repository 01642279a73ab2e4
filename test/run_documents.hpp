#pragma once
// Values of the CLI's reports built as the CLI builds them, shared by the io and fuzz suites.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sluice/compare/microbatching.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/io/inspect_json.hpp"
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

// sluice inspect --cp 2 on a small dataset: every scheme of `profile` (llama2-7b in the suites), and each derived with
// ring CP of degree 2, the first with half its fit's b and c as the last stage's work (7B's fits state none) to carry
// that field too.
inline io::Inspect inspect_with_context_parallel(const cost::Profile& profile) {
  const data::LengthDataset dataset = data::LengthDataset({5, 1, 9, 3, 700, 64, 300}, "mem").truncated(600);
  io::InspectContextParallel derived{
      .degree = 2,
      .kind = CpKind::ring,
      .ulysses = 1,
      .recompute = false,
      .heads = profile.spec().model.heads,
      // 0 in a profile: as many as the heads, which the tool writes out
      .kv_heads = profile.spec().model.kv_heads > 0 ? profile.spec().model.kv_heads : profile.spec().model.heads,
      .schemes = {},
      .not_derived = {}};
  for (const cost::SchemeCost& base : profile.schemes()) {
    const Scheme scheme({.tp = base.scheme.tp(), .pp = base.scheme.pp(), .cp = 2});
    if (const auto cp = cost::derive_cp_scheme(profile, base, scheme)) {
      derived.schemes.push_back(
          {cp->scheme,
           cp->max_len,
           {cp->fit.model, cp->fit.relative_rms_error},
           io::inspect_times(cp->max_len, [&](std::int64_t length) { return cp->seconds(length); }),
           std::nullopt});
    } else {
      derived.not_derived.push_back(scheme.name());
    }
  }
  sluice::require(!derived.schemes.empty(), "inspect_with_context_parallel: no scheme of ", profile.name(),
                  " derives with CP 2");
  const cost::QuadraticLatency& fit = derived.schemes.front().fit.latency;
  derived.schemes.front().last_stage = cost::LastStageWork(fit.b() / 2, fit.c() / 2);
  return io::inspect(dataset, dataset.histogram(100), profile, derived);
}

}  // namespace sluice::test
