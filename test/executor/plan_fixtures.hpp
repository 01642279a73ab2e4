#pragma once
// Small models, batches and sluice plans for the executor tests: a hand-made profile whose MaxLen (40–64 tokens)
// makes the planners pack a batch of a few hundred tokens into several micro-batches per pipeline.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/schedule/iteration.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/model.hpp"

namespace fixtures {

namespace ex = sluice::executor;

// ‖values − reference‖ / ‖reference‖: how every test compares gradients.
inline double relative_difference(const std::vector<double>& values, const std::vector<double>& reference) {
  double difference = 0, norm = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    difference += (values[i] - reference[i]) * (values[i] - reference[i]);
    norm += reference[i] * reference[i];
  }
  return std::sqrt(difference) / std::max(std::sqrt(norm), 1e-300);
}

// layers 2–6, heads 2–4 with an even head dimension, hidden 16–64, ffn 8–2·hidden, vocab 8–64.
inline ex::ModelConfig random_model(sluice::Rng& rng) {
  ex::ModelConfig model;
  model.layers = static_cast<int>(rng.uniform_int(2, 6));
  model.heads = static_cast<int>(rng.uniform_int(2, 4));
  const std::int64_t lowest = (16 + 2 * model.heads - 1) / (2 * model.heads);  // head_dim / 2 bounds
  const std::int64_t highest = 64 / (2 * model.heads);
  model.hidden = model.heads * 2 * rng.uniform_int(lowest, highest);
  model.ffn = rng.uniform_int(8, 2 * model.hidden);
  model.vocab = rng.uniform_int(8, 64);
  model.rope_theta = rng.uniform() < 0.5 ? 10000.0 : 500.0;
  model.norm_eps = 1e-5;
  model.seed = rng();
  return model;
}

// A model the CUDA backend runs: head dimension 64, as the attention kernels need.
inline ex::ModelConfig gpu_model() {
  ex::ModelConfig model;
  model.layers = 3;
  model.hidden = 128;
  model.heads = 2;
  model.ffn = 192;
  model.vocab = 96;
  model.seed = 11;
  return model;
}

// 3–12 sequences of 1–40 tokens (ids 0, 1, ...), at least one with a next-token target.
inline std::vector<sluice::Sequence> random_batch(sluice::Rng& rng) {
  std::vector<sluice::Sequence> batch;
  const std::int64_t count = rng.uniform_int(3, 12);
  for (std::int64_t id = 0; id < count; ++id) batch.emplace_back(id, rng.uniform_int(1, 40));
  if (batch.front().length() == 1) batch.front() = sluice::Sequence(0, 2);
  return batch;
}

// Schemes <1,1> to <1,4> and <2,1> with stated MaxLen; latencies per stage shrink with PP.
inline sluice::cost::Profile small_profile() {
  sluice::cost::ProfileSpec spec;
  spec.name = "executor-test";
  spec.model = {"toy", 8, 64, 64};
  spec.gpus = 16;
  sluice::cost::TransformerMemorySpec memory;
  memory.layers = 8;
  memory.hidden = 64;
  memory.vocab = 64;
  memory.activation_bytes = {{1, 1.0}, {2, 1.0}};
  memory.state_bytes = 16;
  memory.gpu_memory_bytes = 1e9;
  memory.granularity = 1;
  spec.memory = memory;
  using sluice::Scheme;
  using sluice::cost::QuadraticLatency;
  spec.schemes = {{Scheme(1, 1), QuadraticLatency(2e-6, 1e-4, 1e-3), 40, 1},
                  {Scheme(1, 2), QuadraticLatency(1e-6, 5e-5, 8e-4), 48, 1},
                  {Scheme(1, 3), QuadraticLatency(7e-7, 3.5e-5, 7e-4), 56, 1},
                  {Scheme(1, 4), QuadraticLatency(5e-7, 2.5e-5, 6e-4), 64, 1},
                  {Scheme(2, 1), QuadraticLatency(1.1e-6, 6e-5, 1.2e-3), 44, 1},
                  // Measured CP and AC schemes: the executor runs each stage on one device, as it does TP.
                  {Scheme::parse("tp1cp2ringpp2"), QuadraticLatency(5e-7, 2.6e-5, 9e-4), 64, 1},
                  {Scheme::parse("tp1pp2ac"), QuadraticLatency(1.3e-6, 6.6e-5, 1e-3), 60, 1}};
  return sluice::cost::Profile(spec);
}

// Strategies of several pipelines with PP from 1 to 4, one with CP and AC schemes (the <2,1> pipeline, and the CP
// one, run each stage on one device).
inline std::vector<sluice::Strategy> strategies() {
  std::vector<sluice::Strategy> result;
  for (const char* name : {"1*tp1pp4+1*tp1pp2+2*tp1pp1", "2*tp1pp3+1*tp2pp1", "1*tp1pp4+1*tp1pp3+1*tp1pp1",
                           "2*tp1pp2+2*tp1pp1", "1*tp1pp4+2*tp1pp2",
                           "1*tp1cp2ringpp2+1*tp1pp2ac+2*tp1pp1"})
    result.push_back(sluice::Strategy::parse(name));
  return result;
}

// A Hydraulis iteration plan for the batch (plan_iteration over `candidates`), scheduled as `kind`.
inline ex::Job hydraulis_job(const ex::ModelConfig& model, std::span<const sluice::Sequence> batch,
                             std::uint64_t token_seed, std::span<const sluice::Strategy> candidates,
                             sluice::schedule::ScheduleKind kind) {
  const sluice::cost::Profile profile = small_profile();
  const sluice::assign::IterationPlan plan = sluice::assign::plan_iteration(batch, candidates, profile);
  sluice::assign::validate(plan, batch, profile);
  sluice::schedule::ProblemOptions problem;
  problem.hidden = model.hidden;
  const sluice::schedule::IterationSchedule schedule =
      sluice::schedule::schedule_iteration(plan, profile, {kind, 1, 0}, problem);
  sluice::schedule::validate(schedule, plan, profile, problem);
  return ex::job_from_iteration(model, ex::make_tokens(batch, model.vocab, token_seed), plan, schedule);
}

// A DynaPipe pipeline plan for the batch: `stages` stages, `replicas` replicas, micro-batches of at most 48 tokens
// (packed) or 48 padded token slots.
inline ex::Job dynapipe_job(const ex::ModelConfig& model, std::span<const sluice::Sequence> batch,
                            std::uint64_t token_seed, int stages, int replicas, sluice::microbatch::Layout layout,
                            sluice::schedule::ScheduleKind kind) {
  const std::vector<sluice::microbatch::Sample> samples = sluice::microbatch::samples_of(batch);
  const sluice::microbatch::QuadraticStageCost cost(sluice::cost::QuadraticLatency(1e-6, 1e-4, 1e-3), 1.0);
  sluice::schedule::PipelinePlanOptions options;
  options.stages = stages;
  options.replicas = replicas;
  options.micro_batch_memory = 48;
  options.layout = layout;
  options.schedule.kind = kind;
  const sluice::schedule::PipelineRunPlan plan =
      sluice::schedule::plan_pipeline(std::span<const sluice::microbatch::Sample>(samples), cost, options);
  sluice::schedule::validate(plan, std::span<const sluice::microbatch::Sample>(samples), cost, options);
  return ex::job_from_pipeline_plan(model, ex::make_tokens(batch, model.vocab, token_seed), plan);
}

// One pipeline of `stages` stages over micro-batches of the given sequences, scheduled by schedule_pipeline.
inline ex::Job single_pipeline_job(const ex::ModelConfig& model, std::span<const sluice::Sequence> batch,
                                   std::uint64_t token_seed, int stages, sluice::schedule::ScheduleKind kind) {
  sluice::schedule::Problem problem;
  problem.stages = stages;
  problem.memory_limit.assign(static_cast<std::size_t>(stages), std::numeric_limits<double>::infinity());
  problem.hidden = model.hidden;
  ex::PipelineJob pipeline;
  for (const sluice::Sequence& sequence : batch) {
    const auto length = static_cast<double>(sequence.length());
    problem.micro_batches.push_back({std::vector<double>(static_cast<std::size_t>(stages), 1e-4 * length),
                                     std::vector<double>(static_cast<std::size_t>(stages), 2e-4 * length),
                                     std::vector<double>(static_cast<std::size_t>(stages), length), sequence.length()});
    pipeline.micro_batches.push_back({sequence.id()});
  }
  const sluice::schedule::PipelineSchedule schedule = sluice::schedule::schedule_pipeline(problem, {kind, 1, 0});
  sluice::schedule::validate(schedule, problem);
  pipeline.plan = schedule.plan;
  pipeline.layer_boundaries = ex::even_layer_split(model.layers, stages);
  pipeline.predicted = schedule.simulation;
  ex::Job job{model, ex::make_tokens(batch, model.vocab, token_seed), {pipeline}};
  ex::validate(job);
  return job;
}

}  // namespace fixtures
