#pragma once
// DynaPipe's micro-batching inside one pipeline against the baselines of its §7: the same pipeline and schedule
// search with token-based micro-batching and with Megatron-style fixed-length packing. `sluice schedule` prints
// them; docs/schedule.md's study is made of them.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/microbatch/baselines.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/microbatch/order.hpp"
#include "sluice/microbatch/types.hpp"
#include "sluice/schedule/plan_pipeline.hpp"

namespace sluice::compare {

struct MicrobatchingBaseline {
  std::string name{};                               // "token-based" or "fixed-length packing"
  std::optional<schedule::PipelineRunPlan> plan{};  // empty: a micro-batch does not fit (out of memory)
  std::string failure{};                            // why, when `plan` is empty
};

// Token-based micro-batching and fixed-length packing of `samples` on the pipeline of `options`, each with the most
// tokens a micro-batch may hold (the context, or fewer when the memory limit allows fewer), each under the same
// schedule search as schedule::plan_pipeline.
inline std::vector<MicrobatchingBaseline> microbatching_baselines(Span<const microbatch::Sample> samples,
                                                                  const microbatch::QuadraticStageCost& model,
                                                                  const schedule::PipelinePlanOptions& options,
                                                                  std::int64_t context) {
  const microbatch::PartitionContext partition_context{
      .stages = options.stages, .replicas = options.replicas, .memory_limit = options.micro_batch_memory};
  const std::vector<microbatch::Sample> ordered = microbatch::order_samples(samples, options.ordering);
  // Compared in double first: a tiny bytes_per_token makes the quotient exceed any int64.
  const double fits = std::floor(options.micro_batch_memory / model.bytes_per_token());
  const std::int64_t capacity = fits >= static_cast<double>(context) ? context : static_cast<std::int64_t>(fits);
  std::vector<MicrobatchingBaseline> result;
  auto run = [&](std::string name, auto make_partition) {
    MicrobatchingBaseline baseline{.name = std::move(name)};
    try {
      baseline.plan = schedule::schedule_partition(make_partition(), options);
    } catch (const infeasible& error) {
      baseline.failure = error.what();
    }
    result.push_back(std::move(baseline));
  };
  run("token-based", [&] {
    return microbatch::token_based(Span<const microbatch::Sample>(ordered), model, capacity, partition_context);
  });
  run("fixed-length packing", [&] {
    const microbatch::FixedRows rows{.input = capacity, .target = 0, .rows = 1};
    return microbatch::fixed_length_packing(samples, model, rows, partition_context);
  });
  return result;
}

}  // namespace sluice::compare
