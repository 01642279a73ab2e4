#pragma once
// Training over iterations on the host backend: each iteration runs the strategy its sluice plan chose, pulling the
// parameters from the fixed sharded layout into that strategy's placement and pushing the gradients back
// (layout_move.hpp), then stepping Adam on every owned segment; the strategy may change every iteration. A
// reference trainer runs the same steps on one device over unpacked batches; a checkpoint of the sharded states
// resumes a run where it stopped.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/json.hpp"
#include "sluice/plan/flex_domain.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/shard/cost.hpp"
#include "sluice/shard/ranks.hpp"
#include "sluice_executor/builders.hpp"
#include "sluice_executor/host/local.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/layout_move.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/reference_run.hpp"
#include "sluice_executor/run_options.hpp"
#include "sluice_executor/views.hpp"

namespace sluice::executor {

struct TrainingOptions {
  AdamOptions adam{};
  RunOptions run{};
  shard::Cluster cluster{};                    // what the layout move's predicted time is priced on
  int move_bytes = 8;                          // bytes per element moved, as priced: the host backend's float64
  MoveMutation mutation = MoveMutation::none;  // for the tests that inject defects into the layout move
  // The fixed layout of the optimizer states: Hydraulis' sharded one, or, when set, this placement's own
  // (shard::aligned_layout), as a static strategy keeps its states.
  std::optional<shard::Placement> aligned_to;
};

inline void require_valid(const TrainingOptions& options) {
  require_valid(options.adam);
  require_valid(options.run);
  sluice::shard::require_valid(options.cluster);
  sluice::require(options.move_bytes >= 1 && options.move_bytes <= 16, "training: move_bytes must be in [1, 16], got ",
                  options.move_bytes);
}

// One iteration's job and the placement of its whole strategy (idle pipelines included: they pull and push too).
struct PlacedIteration {
  Job job;
  shard::Placement placement;
  std::string strategy;
  double predicted = 0;  // the plan's simulated time of the iteration
};

namespace detail {

// The placement options that split every PP of `strategy` as the executor's jobs split layers (even_layer_split).
inline shard::PlacementOptions placement_options(const ModelConfig& model, const Strategy& strategy,
                                                 const cost::Profile& profile) {
  shard::PlacementOptions options{.gpus_per_node = profile.spec().gpus_per_node, .tp_within_node = true};
  for (const StrategyPart& part : strategy.parts()) {
    const std::vector<int> bounds = even_layer_split(model.layers, part.scheme.pp());
    std::vector<int> counts;
    for (std::size_t s = 0; s + 1 < bounds.size(); ++s) counts.push_back(bounds[s + 1] - bounds[s]);
    options.stage_layers[part.scheme.pp()] = counts;
  }
  return options;
}

}  // namespace detail

// A flex CP domain's plan of a batch (`domain`'s, over `profile`'s cluster) as a training iteration: its units placed
// by shard::flex_domain_ranks, stages split as the jobs split them. tokens[i] holds the batch's sequence i.
inline PlacedIteration place_iteration(const ModelConfig& model, std::vector<SequenceTokens> tokens,
                                       const plan::FlexIteration& plan, const plan::FlexDomain& domain,
                                       const cost::Profile& profile) {
  std::vector<Sequence> batch;
  for (const SequenceTokens& sequence : tokens)
    batch.emplace_back(sequence.id, static_cast<std::int64_t>(sequence.tokens.size()));
  const shard::RankPlacement placement = shard::flex_domain_ranks(
      plan.strategy, profile, model.layers, detail::placement_options(model, plan.strategy, profile));
  Job job = job_from_flex(model, std::move(tokens), plan, domain.problem_of(batch), &placement);
  return {std::move(job), placement.placement, sluice::concat(plan.strategy.name(), " flex CP"), plan.plan.seconds};
}

// The sluice plan of a batch (plan::IterationPlanner's, over `profile`'s cluster) as a training iteration: the
// kept candidate's plan placed by shard::rank_placement, or, where the iteration runs a flex CP domain of `flex`
// (the planner's domains), as above; stages split as the jobs split them. tokens[i] holds the batch's sequence i.
inline PlacedIteration place_iteration(const ModelConfig& model, std::vector<SequenceTokens> tokens,
                                       const plan::SimulatedIteration& iteration, const cost::Profile& profile,
                                       const plan::FlexDomains* flex = nullptr) {
  if (iteration.runs_flex()) {
    sluice::require(flex != nullptr, "training: the iteration runs a flex CP domain, and no domains were given");
    const plan::FlexIteration& plan = *iteration.flex;
    sluice::require(plan.domain < flex->domains().size(), "training: the iteration runs flex CP domain ", plan.domain,
                    " of ", flex->domains().size());
    return place_iteration(model, std::move(tokens), plan, *flex->domains()[plan.domain], profile);
  }
  const shard::RankPlacement placement =
      shard::rank_placement(iteration.plan.strategy, profile, model.layers,
                            detail::placement_options(model, iteration.plan.strategy, profile));
  Job job = job_from_iteration(model, std::move(tokens), iteration.plan, iteration.schedule, &placement);
  return {std::move(job), placement.placement, iteration.plan.strategy.name(), iteration.schedule.makespan};
}

struct TrainedIteration {
  std::string strategy;
  double loss = 0;
  double predicted = 0;             // the plan's simulated time of the propagation
  double measured = 0;              // the run's wall-clock makespan
  double pull_seconds = 0;          // measured
  double push_seconds = 0;          // measured: reduce-scatter, LNK and Adam
  shard::ShardCost predicted_move;  // the cost model's pull, reduce-scatter and push on the options' cluster
};

// The sharded states of a run as one document (sluice.training_checkpoint): the model, the step count, Adam's
// options and every tensor's masters, m and v as full views, so that a run resumes on any number of ranks.
struct TrainingCheckpoint {
  ModelConfig model;
  std::int64_t steps = 0;
  AdamOptions adam;
  struct Tensor {
    std::string name;
    std::vector<double> master, m, v;  // the tensor's view
  };
  std::vector<Tensor> tensors;  // canonical order
};

// Where the ranks of a training run live: every rank in this process (LocalCohort), or one per MPI process
// (host::MpiCohort). A cohort moves the layout's routes, runs a job's ranks it holds and shares values among them.
class Cohort {
public:
  Cohort() = default;
  Cohort(const Cohort&) = delete;
  Cohort& operator=(const Cohort&) = delete;
  virtual ~Cohort() = default;
  [[nodiscard]] virtual bool holds(int rank) const = 0;
  virtual Mover& mover() = 0;
  // Runs the job's ranks held here, each from its `parameters`; then calls visit(rank, stage, loss_sums, timings)
  // for each of them.
  using Visit = std::function<void(int, const host::Stage&, std::span<const double>, std::vector<InstructionTiming>)>;
  virtual void run(const Job& job, const JobLayout& job_layout, const host::Backend::ParameterShards& parameters,
                   const RunOptions& options, const Visit& visit) = 0;
  // Every rank's values (by rank, `held` filled where this process holds the rank), on every process.
  virtual std::vector<std::vector<double>> share(std::vector<std::vector<double>> held) = 0;
};

// Every rank in this process: moves are copies, a job runs a thread per rank.
class LocalCohort final : public Cohort {
public:
  [[nodiscard]] bool holds(int /*rank*/) const override { return true; }
  Mover& mover() override { return mover_; }
  void run(const Job& job, const JobLayout& job_layout, const host::Backend::ParameterShards& parameters,
           const RunOptions& options, const Visit& visit) override {
    host::Mailboxes mailboxes(options.timeout_seconds);
    host::LocalExchange exchange(mailboxes);
    host::Backend backend(job, job_layout, exchange, {}, host::Mutation::none, parameters);
    std::vector<std::vector<InstructionTiming>> timings = host::run_ranks(job, job_layout, backend, mailboxes);
    for (int r = 0; r < job_layout.rank_count(); ++r)
      if (job_layout.ranks[static_cast<std::size_t>(r)].runs)
        visit(r, backend.stage(r), backend.loss_sums(r), std::move(timings[static_cast<std::size_t>(r)]));
  }
  std::vector<std::vector<double>> share(std::vector<std::vector<double>> held) override { return held; }

private:
  LocalMover mover_;
};

// The ranks of the fixed layout a cohort holds: each iteration pulls, runs, pushes and steps Adam.
class Trainer {
public:
  // Every rank in this process. `gpus`: the ranks the optimizer states are sharded over (the cluster's N);
  // `initial`: every tensor row-major, or empty for the model's initial values.
  Trainer(const ModelConfig& model, std::int64_t gpus, TrainingOptions options,
          std::span<const std::vector<double>> initial = {})
      : Trainer(model, gpus, std::move(options), std::make_unique<LocalCohort>(), initial) {}

  // The ranks `cohort` holds (under MPI, this process's).
  Trainer(const ModelConfig& model, std::int64_t gpus, TrainingOptions options, std::unique_ptr<Cohort> cohort,
          std::span<const std::vector<double>> initial = {})
      : model_(model), gpus_(gpus), options_(std::move(options)), cohort_(std::move(cohort)) {
    require_valid(model);
    require_valid(options_);
    sluice::require(gpus >= 1 && gpus <= shard::max_gpus, "training: gpus must be in [1, ", shard::max_gpus, "], got ",
                    gpus);
    layouts_ = optimizer_layouts(model, gpus, options_.aligned_to ? &*options_.aligned_to : nullptr);
    const std::vector<std::vector<double>> start =
        initial.empty() ? initial_parameters(model) : std::vector<std::vector<double>>(initial.begin(), initial.end());
    sluice::require(start.size() == tensor_count(model), "training: ", start.size(), " initial tensors, the model has ",
                    tensor_count(model));
    ranks_.resize(static_cast<std::size_t>(gpus));
    for (int r = 0; r < gpus; ++r)
      if (cohort_->holds(r)) ranks_[static_cast<std::size_t>(r)] = owned_shards(model, start, layouts_, r);
  }

  // Resumes from a checkpoint, sharded over `gpus` in `cohort`.
  Trainer(const TrainingCheckpoint& checkpoint, std::int64_t gpus, TrainingOptions options,
          std::unique_ptr<Cohort> cohort = std::make_unique<LocalCohort>())
      : Trainer(checkpoint.model, gpus, std::move(options), std::move(cohort)) {
    restore(checkpoint);
  }

  // One iteration: pull, run, push, Adam. The iteration's placement must be over this trainer's ranks and the
  // model's layers. The loss and the measured makespan are every process's; the times, this process's.
  TrainedIteration step(const PlacedIteration& iteration) {
    using Clock = std::chrono::steady_clock;
    const LayoutMove move(model_, iteration.placement, layouts_, options_.move_bytes);
    std::vector<RankShards*> held;
    for (std::optional<RankShards>& shards : ranks_) held.push_back(shards ? &*shards : nullptr);
    move.hold(held);
    TrainedIteration result{iteration.strategy, 0, iteration.predicted, 0, 0, 0, move.predicted(options_.cluster)};

    const auto pulling = Clock::now();
    move.pull(held, cohort_->mover(), options_.mutation);
    result.pull_seconds = std::chrono::duration<double>(Clock::now() - pulling).count();

    const JobLayout job_layout = layout(iteration.job, options_.run.checks);
    sluice::require(job_layout.rank_count() <= gpus_, "training: the job runs on ", job_layout.rank_count(),
                    " ranks, the layout has ", gpus_);
    std::vector<std::vector<double>> loss_sums(static_cast<std::size_t>(gpus_));
    std::vector<std::vector<double>> times(static_cast<std::size_t>(gpus_));
    cohort_->run(
        iteration.job, job_layout, [&](int rank) { return lane_shards(job_layout, rank); }, options_.run,
        [&](int rank, const host::Stage& stage, std::span<const double> sums, std::vector<InstructionTiming> timings) {
          take_gradients(job_layout, rank, stage);
          loss_sums[static_cast<std::size_t>(rank)].assign(sums.begin(), sums.end());
          for (const InstructionTiming& timing : timings) {
            times[static_cast<std::size_t>(rank)].push_back(timing.start);
            times[static_cast<std::size_t>(rank)].push_back(timing.end);
          }
        });
    // Added in rank order on every process, so that every process has the one-process run's loss bit for bit.
    for (const std::vector<double>& sums : cohort_->share(std::move(loss_sums)))
      for (const double sum : sums) result.loss += sum;
    result.loss /= static_cast<double>(job_layout.total_targets);
    RunReport report;
    const std::vector<std::vector<double>> all_times = cohort_->share(std::move(times));
    for (int r = 0; r < job_layout.rank_count(); ++r) {
      std::vector<InstructionTiming>& timings = report.instructions.emplace_back();
      const std::vector<double>& values = all_times[static_cast<std::size_t>(r)];
      for (std::size_t k = 0; k + 1 < values.size(); k += 2) timings.push_back({values[k], values[k + 1]});
    }
    fill_makespans(job_layout, report);
    result.measured = report.makespan;

    const auto pushing = Clock::now();
    move.push(held, cohort_->mover(), options_.mutation);
    ++steps_;
    for (std::optional<RankShards>& shards : ranks_)
      if (shards) adam_on_owned(*shards, options_.adam, steps_, options_.mutation);
    result.push_seconds = std::chrono::duration<double>(Clock::now() - pushing).count();
    return result;
  }

  // Every tensor, row-major, from its owners' masters; on every process.
  [[nodiscard]] std::vector<std::vector<double>> parameters() const {
    std::vector<std::vector<double>> result;
    const std::vector<ParameterTensor> tensors = parameter_tensors(model_);
    for (std::size_t t = 0; t < tensors.size(); ++t)
      result.push_back(full_of(tensors[t], gather(t, &RankShards::Segment::master)));
    return result;
  }

  [[nodiscard]] std::int64_t steps() const noexcept { return steps_; }

  // The sharded states as one document; on every process.
  [[nodiscard]] TrainingCheckpoint checkpoint() const {
    TrainingCheckpoint result{model_, steps_, options_.adam, {}};
    const std::vector<ParameterTensor> tensors = parameter_tensors(model_);
    for (std::size_t t = 0; t < tensors.size(); ++t)
      result.tensors.push_back({tensors[t].name(), gather(t, &RankShards::Segment::master),
                                gather(t, &RankShards::Segment::m), gather(t, &RankShards::Segment::v)});
    return result;
  }

private:
  // Tensor t's view assembled from every owner's segments of `part`, each shared as (begin, count, values...).
  [[nodiscard]] std::vector<double> gather(std::size_t t, std::vector<double> RankShards::Segment::*part) const {
    std::vector<std::vector<double>> encoded(ranks_.size());
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      if (ranks_[r])
        for (const RankShards::Segment& segment : ranks_[r]->owned[t]) {
          const std::vector<double>& values = segment.*part;
          encoded[r].push_back(static_cast<double>(segment.begin));
          encoded[r].push_back(static_cast<double>(values.size()));
          encoded[r].insert(encoded[r].end(), values.begin(), values.end());
        }
    std::vector<double> view(parameter_tensors(model_)[t].size());
    for (const std::vector<double>& segments : cohort_->share(std::move(encoded)))
      for (std::size_t at = 0; at < segments.size();) {
        const auto begin = static_cast<std::ptrdiff_t>(segments[at]);
        const auto count = static_cast<std::ptrdiff_t>(segments[at + 1]);
        const auto first = segments.begin() + static_cast<std::ptrdiff_t>(at) + 2;
        std::copy(first, first + count, view.begin() + begin);
        at += 2 + static_cast<std::size_t>(count);
      }
    return view;
  }

  void restore(const TrainingCheckpoint& checkpoint) {
    const std::vector<ParameterTensor> tensors = parameter_tensors(model_);
    sluice::require(checkpoint.tensors.size() == tensors.size(), "checkpoint: ", checkpoint.tensors.size(),
                    " tensors, the model has ", tensors.size());
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const TrainingCheckpoint::Tensor& saved = checkpoint.tensors[t];
      sluice::require(saved.name == tensors[t].name(), "checkpoint: tensor ", t, " is '", saved.name, "', expected '",
                      tensors[t].name(), "'");
      for (const std::vector<double>* values : {&saved.master, &saved.m, &saved.v})
        sluice::require(values->size() == tensors[t].size(), "checkpoint: tensor '", saved.name, "' has ",
                        values->size(), " values, expected ", tensors[t].size());
      for (std::optional<RankShards>& shards : ranks_) {
        if (!shards) continue;
        for (RankShards::Segment& segment : shards->owned[t])
          for (const auto& [part, values] :
               {std::pair{&RankShards::Segment::master, &saved.master}, std::pair{&RankShards::Segment::m, &saved.m},
                std::pair{&RankShards::Segment::v, &saved.v}})
            (segment.*part).assign(values->begin() + segment.begin, values->begin() + segment.end());
      }
    }
    sluice::require(checkpoint.steps >= 0, "checkpoint: steps must be >= 0, got ", checkpoint.steps);
    steps_ = checkpoint.steps;
  }

  // The TP rank whose fraction of tensor t the lane holds: (1, 0) for a replicated tensor.
  [[nodiscard]] static std::pair<int, int> fraction_of(const RankInfo& info, const ParameterTensor& tensor) {
    if (tensor_split(tensor.kind).axis == TensorSplit::Axis::replicated) return {1, 0};
    return {info.tp, info.tp_rank};
  }

  // A job rank's parameter shards from what the pull left it.
  [[nodiscard]] std::vector<std::vector<double>> lane_shards(const JobLayout& job_layout, int rank) const {
    const RankInfo& info = job_layout.ranks[static_cast<std::size_t>(rank)];
    const RankShards& shards = *ranks_.at(static_cast<std::size_t>(rank));
    const std::vector<ParameterTensor> tensors = parameter_tensors(model_);
    const TensorRange range = stage_tensors(model_, info.first_layer, info.end_layer, info.first, info.last);
    std::vector<std::vector<double>> result(tensors.size());
    for (std::size_t t = range.begin; t < range.end; ++t) {
      sluice::require(!shards.parameters[t].empty(), "training: rank ", rank, " runs tensor ", tensors[t].name(),
                      ", which its placement does not give it");
      const auto [tp, tp_rank] = fraction_of(info, tensors[t]);
      result[t] = shard_from_fraction(tensors[t], tp, tp_rank, shards.parameters[t]);
    }
    return result;
  }

  void take_gradients(const JobLayout& job_layout, int rank, const host::Stage& stage) {
    const RankInfo& info = job_layout.ranks[static_cast<std::size_t>(rank)];
    RankShards& shards = *ranks_.at(static_cast<std::size_t>(rank));
    const std::vector<ParameterTensor> tensors = parameter_tensors(model_);
    const TensorRange range = stage.tensors();
    for (std::size_t t = range.begin; t < range.end; ++t) {
      const auto [tp, tp_rank] = fraction_of(info, tensors[t]);
      shards.gradients[t] = fraction_from_shard(tensors[t], tp, tp_rank, stage.gradients()[t]);
    }
  }

  ModelConfig model_;
  std::int64_t gpus_;
  TrainingOptions options_;
  std::unique_ptr<Cohort> cohort_;
  std::vector<shard::OptimizerLayout> layouts_;   // by parameter group
  std::vector<std::optional<RankShards>> ranks_;  // by rank; held ones only
  std::int64_t steps_ = 0;
};

// The same training on one device: every sequence of a batch unpacked (run_unpacked), Adam on whole tensors.
class ReferenceTrainer {
public:
  ReferenceTrainer(const ModelConfig& model, AdamOptions adam, std::span<const std::vector<double>> initial = {})
      : model_(model),
        adam_(adam),
        parameters_(initial.empty() ? initial_parameters(model)
                                    : std::vector<std::vector<double>>(initial.begin(), initial.end())) {
    require_valid(adam_);
    for (const std::vector<double>& tensor : parameters_) {
      m_.emplace_back(tensor.size(), 0.0);
      v_.emplace_back(tensor.size(), 0.0);
    }
  }

  // Returns the batch's loss at the parameters before the step.
  double step(std::span<const SequenceTokens> batch) {
    const ModelResult result = run_unpacked(model_, batch, parameters_);
    ++steps_;
    for (std::size_t t = 0; t < parameters_.size(); ++t)
      adam_step(adam_, steps_, parameters_[t], result.gradients[t], m_[t], v_[t]);
    return result.loss;
  }

  [[nodiscard]] const std::vector<std::vector<double>>& parameters() const noexcept { return parameters_; }

private:
  ModelConfig model_;
  AdamOptions adam_;
  std::vector<std::vector<double>> parameters_, m_, v_;
  std::int64_t steps_ = 0;
};

}  // namespace sluice::executor

namespace sluice::io {

template <>
struct document_traits<executor::TrainingCheckpoint> {
  static constexpr std::string_view format = "sluice.training_checkpoint";
  static constexpr int version = 1;
};

}  // namespace sluice::io

namespace sluice::executor {

inline void to_json(io::json& out, const TrainingCheckpoint& checkpoint) {
  const ModelConfig& model = checkpoint.model;
  io::json tensors = io::json::array();
  for (const TrainingCheckpoint::Tensor& tensor : checkpoint.tensors)
    tensors.push_back({{"name", tensor.name}, {"master", tensor.master}, {"m", tensor.m}, {"v", tensor.v}});
  out = {{"model",
          {{"layers", model.layers},
           {"hidden", model.hidden},
           {"heads", model.heads},
           {"ffn", model.ffn},
           {"vocab", model.vocab},
           {"rope_theta", model.rope_theta},
           {"norm_eps", model.norm_eps},
           {"seed", model.seed}}},
         {"steps", checkpoint.steps},
         {"adam",
          {{"learning_rate", checkpoint.adam.learning_rate},
           {"beta1", checkpoint.adam.beta1},
           {"beta2", checkpoint.adam.beta2},
           {"epsilon", checkpoint.adam.epsilon}}},
         {"tensors", std::move(tensors)}};
}

inline void from_json(const io::json& in, TrainingCheckpoint& checkpoint) {
  constexpr std::string_view where = "training checkpoint";
  const auto model = io::field<io::json>(in, "model", where);
  checkpoint.model = {.layers = io::field<int>(model, "layers", "model"),
                      .hidden = io::field<std::int64_t>(model, "hidden", "model"),
                      .heads = io::field<int>(model, "heads", "model"),
                      .ffn = io::field<std::int64_t>(model, "ffn", "model"),
                      .vocab = io::field<std::int64_t>(model, "vocab", "model"),
                      .rope_theta = io::field<double>(model, "rope_theta", "model"),
                      .norm_eps = io::field<double>(model, "norm_eps", "model"),
                      .seed = io::field<std::uint64_t>(model, "seed", "model")};
  require_valid(checkpoint.model);
  checkpoint.steps = io::field<std::int64_t>(in, "steps", where);
  sluice::require(checkpoint.steps >= 0, where, ": steps must be >= 0, got ", checkpoint.steps);
  const auto adam = io::field<io::json>(in, "adam", where);
  checkpoint.adam = {io::field<double>(adam, "learning_rate", "adam"), io::field<double>(adam, "beta1", "adam"),
                     io::field<double>(adam, "beta2", "adam"), io::field<double>(adam, "epsilon", "adam")};
  require_valid(checkpoint.adam);
  const auto tensors = io::field<std::vector<io::json>>(in, "tensors", where);
  const std::vector<ParameterTensor> shapes = parameter_tensors(checkpoint.model);
  sluice::require(tensors.size() == shapes.size(), where, ": ", tensors.size(), " tensors, the model has ",
                  shapes.size());
  checkpoint.tensors.clear();
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const std::string name = sluice::concat("tensor ", t);
    TrainingCheckpoint::Tensor tensor{
        io::field<std::string>(tensors[t], "name", name), io::field<std::vector<double>>(tensors[t], "master", name),
        io::field<std::vector<double>>(tensors[t], "m", name), io::field<std::vector<double>>(tensors[t], "v", name)};
    sluice::require(tensor.name == shapes[t].name(), where, ": ", name, " is '", tensor.name, "', expected '",
                    shapes[t].name(), "'");
    for (const std::vector<double>* values : {&tensor.master, &tensor.m, &tensor.v})
      sluice::require(values->size() == shapes[t].size(), where, ": tensor '", tensor.name, "' has ", values->size(),
                      " values, expected ", shapes[t].size());
    for (const double value : tensor.v)
      sluice::require(value >= 0, where, ": tensor '", tensor.name, "' has a negative second moment ", value);
    checkpoint.tensors.push_back(std::move(tensor));
  }
}

}  // namespace sluice::executor
