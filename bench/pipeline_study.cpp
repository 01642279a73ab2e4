// What DynaPipe's pieces buy inside one pipeline, simulated: on the bundled length data and the bundled
// LLaMA2-7B profile, 20 mini-batches (seed 1) per setting are micro-batched and scheduled by
// schedule::plan_pipeline (the DP, then the best of the adaptive cyclic and 1F1B candidates), and compared with
// the DP's micro-batches under 1F1B only, and with token-based micro-batching and fixed-length packing, each
// under the same schedule search. docs/schedule.md reports the output (`sluice_pipeline_study`).
#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "sluice/compare/microbatching.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/microbatch/types.hpp"
#include "sluice/schedule/plan_pipeline.hpp"

namespace {

using namespace sluice;

constexpr int batches = 20;

struct Ratios {
  double sum = 0;
  double max = 0;
  int count = 0;
  void add(double ratio) {
    sum += ratio;
    max = std::max(max, ratio);
    ++count;
  }
  [[nodiscard]] std::string text() const {
    if (count == 0) return "OOM";
    std::ostringstream out;
    out << std::fixed << std::setprecision(3) << sum / count << " (max " << max << ")";
    if (count < batches) out << ", " << batches - count << " OOM";
    return out.str();
  }
};

void study(const std::string& lengths, const cost::Profile& profile, int stages, int replicas, std::int64_t tokens,
           std::int64_t context) {
  const cost::SchemeCost& scheme = profile.at(Scheme(1, stages));
  const microbatch::StageCostSetup setup = microbatch::stage_cost(scheme);
  const data::LengthDataset dataset =
      data::LengthDataset::load(io::resolve_data_file(lengths, "lengths")).truncated(context);
  data::BatchSampler sampler(dataset, {.tokens_per_batch = tokens, .seed = 1});

  schedule::PipelinePlanOptions options;
  options.stages = stages;
  options.replicas = replicas;
  options.micro_batch_memory = setup.memory_limit;
  options.problem = {.hidden = profile.spec().model.hidden, .element_bytes = 2, .link = {1e-5, 1e11}};
  schedule::PipelinePlanOptions one_f_one_b = options;
  one_f_one_b.schedule.kind = schedule::ScheduleKind::one_f_one_b;

  Ratios adaptive, token_based, packing;
  double seconds = 0;
  for (int b = 0; b < batches; ++b) {
    const data::Batch batch = sampler.next();
    const std::vector<microbatch::Sample> samples = microbatch::samples_of(batch.sequences);
    const std::span<const microbatch::Sample> span(samples);
    const schedule::PipelineRunPlan plan = schedule::plan_pipeline(span, setup.model, options);
    schedule::validate(plan, span, setup.model, options);
    seconds += plan.makespan / batches;
    adaptive.add(schedule::plan_pipeline(span, setup.model, one_f_one_b).makespan / plan.makespan);
    const auto alternatives = compare::microbatching_baselines(span, setup.model, options, context);
    if (alternatives[0].plan) token_based.add(alternatives[0].plan->makespan / plan.makespan);
    if (alternatives[1].plan) packing.add(alternatives[1].plan->makespan / plan.makespan);
  }
  std::cout << "| " << lengths << " | <1," << stages << "> × " << replicas << " | " << tokens << " | " << context
            << " | " << std::fixed << std::setprecision(3) << seconds << " | " << adaptive.text() << " | "
            << token_based.text() << " | " << packing.text() << " |\n";
}

}  // namespace

int main() {
  const cost::Profile profile = io::read_document<cost::Profile>(io::resolve_data_file("llama2-7b", "profiles"));
  std::cout << "| lengths | pipeline | tokens per batch | context | DynaPipe iteration (s) | adaptive over 1F1B "
               "(DP micro-batches) | DynaPipe over token-based | DynaPipe over packing |\n"
               "|---|---|---|---|---|---|---|---|\n";
  for (const std::string lengths : {"man-pages", "cpython-stdlib"})
    for (const std::int64_t tokens : {65'536, 262'144}) {
      study(lengths, profile, 4, 4, tokens, 8192);
      study(lengths, profile, 8, 2, tokens, 8192);
      study(lengths, profile, 4, 4, tokens, profile.at(Scheme(1, 4)).max_len);
    }
}
