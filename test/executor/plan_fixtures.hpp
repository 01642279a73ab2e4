#pragma once
// Small models, batches and plans for the executor tests: a hand-made profile whose MaxLen (40–128 tokens) makes
// the planners pack a batch of a few hundred tokens into several micro-batches per pipeline, with schemes of TP 1, 2
// and 4, CP 2 and 4 of every kind, and full recompute; and a seeded set of jobs from every planner (Hydraulis'
// plan_iteration, the sluice plan, DynaPipe, the Megatron-LM-style fixed-length packing, FlexSP's flex CP domain
// and Megatron-LM's dynamic CP) on 2 to 8 ranks.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/plan/flex_domain.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice/shard/ranks.hpp"
#include "sluice_executor/builders.hpp"
#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/training.hpp"

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

// The largest relative difference of the loss and of every gradient tensor (relative_difference).
inline double worst_difference(const ex::ModelResult& run, const ex::ModelResult& reference) {
  double worst = std::abs(run.loss - reference.loss) / std::abs(reference.loss);
  if (run.gradients.size() != reference.gradients.size()) return std::numeric_limits<double>::infinity();
  for (std::size_t t = 0; t < reference.gradients.size(); ++t) {
    if (run.gradients[t].size() != reference.gradients[t].size()) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, relative_difference(run.gradients[t], reference.gradients[t]));
  }
  return worst;
}

// layers 2–6, 4 or 8 heads with an even head dimension, hidden 16–64, ffn 8–2·hidden and vocab 8–64 in multiples of
// 4: every TP of the test profile (1, 2, 4) and every Ulysses degree it pairs with divides them.
inline ex::ModelConfig random_model(sluice::Rng& rng) {
  ex::ModelConfig model;
  model.layers = static_cast<int>(rng.uniform_int(2, 6));
  model.heads = rng.uniform() < 0.5 ? 4 : 8;
  const std::int64_t lowest = (16 + 2 * model.heads - 1) / (2 * model.heads);  // head_dim / 2 bounds
  const std::int64_t highest = 64 / (2 * model.heads);
  model.hidden = model.heads * 2 * rng.uniform_int(lowest, highest);
  model.ffn = 4 * rng.uniform_int(2, model.hidden / 2);
  model.vocab = 4 * rng.uniform_int(2, 16);
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

// Schemes of TP 1, 2 and 4, PP 1 to 4, CP 2 and 4 of every kind and full recompute, with stated MaxLen; latencies
// per stage shrink with the GPUs a sequence has.
inline sluice::cost::Profile small_profile() {
  sluice::cost::ProfileSpec spec;
  spec.name = "executor-test";
  spec.model = {"toy", 8, 64, 64};
  spec.gpus = 16;
  spec.gpus_per_node = 8;
  sluice::cost::TransformerMemorySpec memory;
  memory.layers = 8;
  memory.hidden = 64;
  memory.vocab = 64;
  memory.activation_bytes = {{1, 1.0}, {2, 1.0}, {4, 1.0}};
  memory.state_bytes = 16;
  memory.gpu_memory_bytes = 1e9;
  memory.granularity = 1;
  spec.memory = memory;
  using sluice::Scheme;
  using sluice::cost::QuadraticLatency;
  const auto scheme = [](const char* name, double speed, std::int64_t max_len) {
    return sluice::cost::SchemeEntry{Scheme::parse(name),
                                     QuadraticLatency(2e-6 / speed, 1e-4 / speed, 1e-3 / std::sqrt(speed)), max_len, 1};
  };
  spec.schemes = {scheme("tp1pp1", 1, 40),
                  scheme("tp1pp2", 2, 48),
                  scheme("tp1pp3", 2.8, 56),
                  scheme("tp1pp4", 4, 64),
                  scheme("tp2pp1", 1.8, 44),
                  scheme("tp2pp2", 3.4, 52),
                  scheme("tp4pp1", 3.2, 48),
                  scheme("tp1pp2ac", 1.5, 60),
                  scheme("tp2pp1ac", 1.4, 56),
                  scheme("tp1cp2ringpp1", 1.9, 80),
                  scheme("tp1cp2ulyssespp1", 1.9, 80),
                  scheme("tp1cp4ringpp1", 3.5, 128),
                  scheme("tp1cp4ulyssespp1", 3.6, 128),
                  scheme("tp1cp4hybrid2pp1", 3.6, 128),
                  scheme("tp2cp2ringpp1", 3.4, 96),
                  scheme("tp2cp2ulyssespp1", 3.5, 96),
                  scheme("tp1cp2ringpp2", 3.6, 96),
                  scheme("tp1cp2ulyssespp1ac", 1.5, 100)};
  return sluice::cost::Profile(spec);
}

// Heterogeneous strategies of at most 8 GPUs mixing TP 1/2/4, CP 2/4 of every kind, recompute and PP 1 to 4.
inline std::vector<sluice::Strategy> strategies() {
  std::vector<sluice::Strategy> result;
  for (const char* name :
       {"1*tp2pp2+1*tp1cp2ringpp1+2*tp1pp1", "1*tp1cp4hybrid2pp1+1*tp2pp1ac+1*tp1pp2",
        "1*tp4pp1+1*tp1cp2ulyssespp1+1*tp1pp1", "1*tp2cp2ulyssespp1+2*tp1pp2ac", "1*tp1cp4ringpp1+1*tp1pp3+1*tp1pp1",
        "2*tp2pp1+1*tp1cp2ringpp2", "1*tp1cp4ulyssespp1+1*tp2cp2ringpp1", "1*tp1pp4+1*tp1pp2+2*tp1pp1",
        "1*tp1cp2ulyssespp1ac+1*tp4pp1+1*tp1pp2"})
    result.push_back(sluice::Strategy::parse(name));
  return result;
}

// A Hydraulis iteration plan for the batch (plan_iteration over `candidates`), scheduled as `kind`; placed by
// shard::rank_placement when `placed`.
inline ex::Job hydraulis_job(const ex::ModelConfig& model, std::span<const sluice::Sequence> batch,
                             std::uint64_t token_seed, std::span<const sluice::Strategy> candidates,
                             sluice::schedule::ScheduleKind kind, bool placed = false) {
  const sluice::cost::Profile profile = small_profile();
  const sluice::assign::IterationPlan plan = sluice::assign::plan_iteration(batch, candidates, profile);
  sluice::assign::validate(plan, batch, profile);
  sluice::schedule::ProblemOptions problem;
  problem.hidden = model.hidden;
  const sluice::plan::IterationSchedule schedule =
      sluice::plan::schedule_iteration(plan, profile, {kind, 1, 0}, problem);
  sluice::plan::validate(schedule, plan, profile, problem);
  if (!placed) return ex::job_from_iteration(model, ex::make_tokens(batch, model.vocab, token_seed), plan, schedule);
  const sluice::shard::RankPlacement placement = sluice::shard::rank_placement(plan.strategy, profile);
  return ex::job_from_iteration(model, ex::make_tokens(batch, model.vocab, token_seed), plan, schedule, &placement);
}

// A DynaPipe pipeline plan for the batch: `stages` stages, `replicas` replicas of `degrees`' TP, CP and recompute,
// micro-batches of at most 48 tokens (packed) or 48 padded token slots.
inline ex::Job dynapipe_job(const ex::ModelConfig& model, std::span<const sluice::Sequence> batch,
                            std::uint64_t token_seed, int stages, int replicas, sluice::microbatch::Layout layout,
                            sluice::schedule::ScheduleKind kind, sluice::Degrees degrees = {}) {
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
  return ex::job_from_pipeline_plan(model, ex::make_tokens(batch, model.vocab, token_seed), plan, degrees);
}

// The Megatron-LM-style plan: one homogeneous strategy of `scheme` on at most 8 GPUs, sequences packed best-fit into
// bins of its MaxLen, scheduled 1F1B.
inline ex::Job megatron_job(const ex::ModelConfig& model, std::span<const sluice::Sequence> batch,
                            std::uint64_t token_seed, const sluice::Scheme& scheme) {
  const sluice::cost::Profile profile = small_profile();
  const auto pipelines = static_cast<int>(std::max<std::int64_t>(1, 8 / scheme.gpus()));
  const sluice::Strategy strategy = sluice::Strategy::homogeneous(scheme, pipelines);
  const sluice::assign::IterationPlan plan =
      sluice::assign::plan_fixed_length(batch, strategy, profile, profile.at(scheme).max_len);
  sluice::schedule::ProblemOptions problem;
  problem.hidden = model.hidden;
  const sluice::plan::IterationSchedule schedule =
      sluice::plan::schedule_iteration(plan, profile, {sluice::schedule::ScheduleKind::one_f_one_b, 1, 0}, problem);
  return ex::job_from_iteration(model, ex::make_tokens(batch, model.vocab, token_seed), plan, schedule);
}

// A flex CP domain of `units` replicas of `base` on the test profile, with its CP schemes of `kind` (any kind when
// none), FlexSP's groups of mixed degrees or, with `one_degree`, Megatron-LM's dynamic CP.
inline std::shared_ptr<const sluice::plan::FlexDomain> flex_domain(const sluice::Scheme& base, int units,
                                                                   std::optional<sluice::CpKind> kind,
                                                                   bool one_degree) {
  return sluice::plan::flex_domain(
      small_profile(), base, units, [kind](const sluice::Scheme& scheme) { return !kind || scheme.cp_kind() == *kind; },
      one_degree);
}

// The domain's plan of the batch as a job: every unit a pipeline, each group of a micro-batch a CP group.
inline ex::Job flex_job(const ex::ModelConfig& model, std::span<const sluice::Sequence> batch, std::uint64_t token_seed,
                        const sluice::plan::FlexDomain& domain) {
  const sluice::plan::FlexIteration iteration = domain.plan(batch);
  domain.validate(iteration, batch);
  return ex::job_from_flex(model, ex::make_tokens(batch, model.vocab, token_seed), iteration, domain.problem_of(batch));
}

// One pipeline of `stages` stages over micro-batches of the given sequences, scheduled by schedule_pipeline.
inline ex::Job single_pipeline_job(const ex::ModelConfig& model, std::span<const sluice::Sequence> batch,
                                   std::uint64_t token_seed, int stages, sluice::schedule::ScheduleKind kind,
                                   sluice::Degrees degrees = {}) {
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
  degrees.pp = stages;
  pipeline.scheme = sluice::Scheme(degrees);
  pipeline.layer_boundaries = ex::even_layer_split(model.layers, stages);
  pipeline.predicted = schedule.simulation;
  ex::Job job{model, ex::make_tokens(batch, model.vocab, token_seed), {pipeline}};
  ex::validate(job);
  return job;
}

// A model for training: random_model's with at least 4 layers, as every stage of the placement must hold one.
inline ex::ModelConfig training_model(sluice::Rng& rng) {
  ex::ModelConfig model = random_model(rng);
  model.layers = std::max(model.layers, 4);
  return model;
}

// A training run's steps on an 8-GPU cluster of the test profile: the sluice plan of each batch with one candidate
// a step, the strategies cycling so that the strategy changes every step (TP, CP, PP and recompute differ across
// pipelines and steps), and every third step a flex CP domain's plan (FlexSP's Ulysses groups of 4 ⟨1, 1⟩ units).
// batches[k] gets step k's tokens.
inline std::vector<ex::PlacedIteration> training_steps(const ex::ModelConfig& model, sluice::Rng& rng, int steps,
                                                       std::vector<std::vector<ex::SequenceTokens>>& batches) {
  const sluice::cost::Profile profile = small_profile().with_gpus(8);
  const std::vector<sluice::Strategy> all = strategies();
  std::vector<ex::PlacedIteration> placed;
  for (int k = 0; k < steps; ++k) {
    const std::vector<sluice::Sequence> batch = random_batch(rng);
    batches.push_back(ex::make_tokens(batch, model.vocab, rng()));
    if (k % 3 == 2) {
      const auto domain = flex_domain(sluice::Scheme(1, 1), 4, sluice::CpKind::ulysses, false);
      placed.push_back(ex::place_iteration(model, batches.back(), domain->plan(batch), *domain, profile));
      continue;
    }
    const sluice::plan::IterationPlanner planner(profile, {all[static_cast<std::size_t>(k) % all.size()]});
    placed.push_back(ex::place_iteration(model, batches.back(), planner.plan(batch), profile));
  }
  return placed;
}

// The ranks a job runs on: one more than its largest.
inline int rank_count(const ex::Job& job) { return ex::layout(job, ex::JobChecks::structure).rank_count(); }

// Job k of the seeded set, its planner named: the planner cycles with k, the model and batch are drawn from `rng`.
inline std::pair<ex::Job, std::string> seeded_job(int k, sluice::Rng& rng) {
  using sluice::CpKind;
  using sluice::Scheme;
  using sluice::schedule::ScheduleKind;
  const ex::ModelConfig model = random_model(rng);
  const std::vector<sluice::Sequence> batch = random_batch(rng);
  const std::uint64_t seed = rng();
  const std::vector<sluice::Strategy> all = strategies();
  const std::vector<sluice::Strategy> candidates{all[static_cast<std::size_t>(k) % all.size()]};
  const auto pick = [&](std::initializer_list<const char*> names) {
    return Scheme::parse(*(names.begin() + static_cast<std::ptrdiff_t>(rng.below(names.size()))));
  };
  switch (k % 8) {
    case 0: return {hydraulis_job(model, batch, seed, candidates, ScheduleKind::cyclic), "hydraulis cyclic"};
    case 1:
      return {hydraulis_job(model, batch, seed, candidates, ScheduleKind::one_f_one_b, true), "hydraulis 1f1b, placed"};
    case 2: {
      const sluice::plan::IterationPlanner planner(small_profile(), all, {},
                                                   flex_domain(Scheme(1, 1), 4, std::nullopt, false));
      const sluice::plan::SimulatedIteration iteration = planner.plan(batch);
      if (iteration.runs_flex()) {
        const auto domain = flex_domain(Scheme(1, 1), 4, std::nullopt, false);
        return {ex::job_from_flex(model, ex::make_tokens(batch, model.vocab, seed), *iteration.flex,
                                  domain->problem_of(batch)),
                "sluice plan"};
      }
      return {
          ex::job_from_iteration(model, ex::make_tokens(batch, model.vocab, seed), iteration.plan, iteration.schedule),
          "sluice plan"};
    }
    case 3: {
      const Scheme scheme =
          pick({"tp2pp1", "tp1cp2ringpp1", "tp1cp2ulyssespp1ac", "tp4pp1", "tp1cp4hybrid2pp1", "tp2cp2ulyssespp1"});
      const int stages = static_cast<int>(std::clamp<std::int64_t>(8 / (2 * scheme.stage_gpus()), 1, 3));
      return {dynapipe_job(model, batch, seed, stages, 2,
                           k % 16 < 8 ? sluice::microbatch::Layout::packed : sluice::microbatch::Layout::padded,
                           ScheduleKind::one_f_one_b, scheme.degrees()),
              "dynapipe"};
    }
    case 4:
      return {megatron_job(model, batch, seed,
                           pick({"tp2pp2", "tp4pp1", "tp1cp2ringpp2", "tp2cp2ringpp1", "tp1cp4ringpp1", "tp2pp1ac"})),
              "megatron"};
    case 5: {
      const bool wide = rng.uniform() < 0.5;
      return {flex_job(model, batch, seed,
                       *flex_domain(wide ? Scheme(1, 1) : Scheme(2, 1), wide ? 4 : 2, CpKind::ulysses, false)),
              "flexsp"};
    }
    case 6: {
      const bool deep = rng.uniform() < 0.5;
      return {flex_job(model, batch, seed, *flex_domain(deep ? Scheme(1, 2) : Scheme(1, 1), 4, CpKind::ring, true)),
              "dynamic cp"};
    }
    default: {
      const char* const names[] = {"tp2pp1", "tp1cp2ringpp1", "tp1cp2ulyssespp1ac", "tp2cp2ringpp1"};
      const Scheme scheme = Scheme::parse(names[(k / 8) % 4]);
      const auto stages = static_cast<int>(std::min<std::int64_t>(1 + (k / 32) % 4, 8 / scheme.stage_gpus()));
      return {single_pipeline_job(model, batch, seed, stages, ScheduleKind::cyclic, scheme.degrees()), "one pipeline"};
    }
  }
}

}  // namespace fixtures
