// Training on the host backend (sluice_executor/training.hpp): steps whose strategy changes every time, each pulling
// the parameters from the fixed sharded layout into its placement and pushing the gradients back through the
// shard:: plans, equal the single-device reference trainer; injected defects in the layout move are caught; a
// checkpoint resumes a run; what the cost model prices is what moves.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "plan_fixtures.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/io/json.hpp"
#include "sluice_executor/layout_move.hpp"
#include "sluice_executor/training.hpp"

using namespace sluice;
using namespace sluice::executor;

namespace {

// Packing, pipelining, TP, CP and the reduce-scatter reorder float64 sums; Adam turns the gradients' rounding into
// the parameters' at the learning rate's scale.
constexpr double training_tolerance = 1e-10;

TrainingOptions options_with(MoveMutation mutation = MoveMutation::none) {
  TrainingOptions options;
  options.adam.learning_rate = 1e-2;
  options.mutation = mutation;
  return options;
}

double worst_parameter_difference(const std::vector<std::vector<double>>& parameters,
                                  const std::vector<std::vector<double>>& reference) {
  double worst = 0;
  for (std::size_t t = 0; t < reference.size(); ++t)
    worst = std::max(worst, fixtures::relative_difference(parameters[t], reference[t]));
  return worst;
}

}  // namespace

TEST_CASE("training: six steps, a new strategy each, equal the single-device reference trainer") {
  std::set<std::string> strategies;
  bool tensor_parallel = false, context_parallel = false, recompute = false, flex = false;
  for (const std::uint64_t seed : {1, 2, 3}) {
    CAPTURE(seed);
    Rng rng(seed);
    const ModelConfig model = fixtures::training_model(rng);
    std::vector<std::vector<SequenceTokens>> batches;
    const std::vector<PlacedIteration> steps = fixtures::training_steps(model, rng, 6, batches);
    Trainer trainer(model, 8, options_with());
    ReferenceTrainer reference(model, options_with().adam);
    std::string previous;
    for (std::size_t k = 0; k < steps.size(); ++k) {
      CAPTURE(k);
      const TrainedIteration result = trainer.step(steps[k]);
      const double expected = reference.step(batches[k]);
      CHECK(std::abs(result.loss - expected) <= training_tolerance * std::abs(expected));
      CHECK(result.strategy != previous);
      previous = result.strategy;
      strategies.insert(result.strategy);
      CHECK(result.pull_seconds > 0);
      CHECK(result.push_seconds > 0);
      CHECK(result.predicted_move.seconds() > 0);
      CHECK(result.measured > 0);
      flex = flex || !steps[k].job.cp_groups.empty();
      for (const PipelineJob& pipeline : steps[k].job.pipelines) {
        tensor_parallel = tensor_parallel || pipeline.scheme.tp() > 1;
        context_parallel = context_parallel || pipeline.scheme.cp() > 1;
        recompute = recompute || pipeline.scheme.recompute() == Recompute::full;
      }
    }
    CHECK(trainer.steps() == 6);
    CHECK(worst_parameter_difference(trainer.parameters(), reference.parameters()) <= training_tolerance);
  }
  CHECK(strategies.size() >= 5);
  CHECK(tensor_parallel);
  CHECK(context_parallel);
  CHECK(recompute);
  CHECK(flex);
}

TEST_CASE("training: a broken layout move is caught by the equality with the reference") {
  Rng rng(8);
  const ModelConfig model = fixtures::training_model(rng);
  std::vector<std::vector<SequenceTokens>> batches;
  const std::vector<PlacedIteration> steps = fixtures::training_steps(model, rng, 2, batches);
  ReferenceTrainer reference(model, options_with().adam);
  for (const std::vector<SequenceTokens>& batch : batches) reference.step(batch);
  for (const MoveMutation mutation : {MoveMutation::dropped_pull_message, MoveMutation::slice_off_by_one,
                                      MoveMutation::push_skips_replica, MoveMutation::adam_on_wrong_segment}) {
    CAPTURE(static_cast<int>(mutation));
    Trainer trainer(model, 8, options_with(mutation));
    for (const PlacedIteration& step : steps) trainer.step(step);
    CHECK(worst_parameter_difference(trainer.parameters(), reference.parameters()) > 1e-6);
  }
  Trainer sound(model, 8, options_with());
  for (const PlacedIteration& step : steps) sound.step(step);
  CHECK(worst_parameter_difference(sound.parameters(), reference.parameters()) <= training_tolerance);
}

TEST_CASE("training: a checkpoint written and read back resumes with the same next loss") {
  Rng rng(13);
  const ModelConfig model = fixtures::training_model(rng);
  std::vector<std::vector<SequenceTokens>> batches;
  const std::vector<PlacedIteration> steps = fixtures::training_steps(model, rng, 4, batches);
  Trainer trainer(model, 8, options_with());
  for (std::size_t k = 0; k < 3; ++k) trainer.step(steps[k]);
  const std::string text = io::document_text(trainer.checkpoint());
  const auto read = io::from_document<TrainingCheckpoint>(io::parse(text, "checkpoint"), "checkpoint");
  CHECK(read.steps == 3);
  Trainer resumed(read, 8, options_with());
  CHECK(resumed.parameters() == trainer.parameters());
  const TrainedIteration next = trainer.step(steps[3]);
  CHECK(resumed.step(steps[3]).loss == next.loss);
  CHECK(resumed.parameters() == trainer.parameters());
  // Resharded over more ranks, the parameters pulled are the same numbers: so is the loss.
  Trainer wider(read, 16, options_with());
  Trainer narrow(read, 8, options_with());
  CHECK(wider.parameters() == narrow.parameters());
  const cost::Profile sixteen = fixtures::small_profile();
  const plan::IterationPlanner planner(sixteen, {fixtures::strategies()[0]});
  std::vector<Sequence> batch;
  for (const SequenceTokens& sequence : batches[3])
    batch.emplace_back(sequence.id, static_cast<std::int64_t>(sequence.tokens.size()));
  const PlacedIteration on_sixteen = place_iteration(model, batches[3], planner.plan(batch), sixteen);
  const PlacedIteration on_eight = place_iteration(model, batches[3], planner.plan(batch), sixteen.with_gpus(8));
  CHECK(wider.step(on_sixteen).loss == narrow.step(on_eight).loss);

  // Documents that do not fit the model are refused by name.
  io::json document = io::parse(text, "checkpoint");
  const auto refused = [&](io::json broken, const char* fragment) {
    CAPTURE(fragment);
    CHECK_THROWS_WITH_AS(io::from_document<TrainingCheckpoint>(broken, "checkpoint"), doctest::Contains(fragment),
                         invalid_input);
  };
  io::json broken = document;
  broken["tensors"][1]["name"] = "layer9.qkv";
  refused(broken, "is 'layer9.qkv'");
  broken = document;
  broken["tensors"][0]["m"].erase(0);
  refused(broken, "values, expected");
  broken = document;
  broken["tensors"][2]["v"][0] = -1.0;
  refused(broken, "negative second moment");
  broken = document;
  broken.erase("steps");
  refused(broken, "missing field 'steps'");
  broken = document;
  broken["model"]["heads"] = 3;
  refused(broken, "model");
  broken = document;
  broken["tensors"].erase(4);
  refused(broken, "tensors, the model has");
  broken = document;
  broken["adam"]["beta2"] = 1.0;
  refused(broken, "beta2");
}

TEST_CASE("training: optimizer states aligned to a strategy's placement train the same numbers") {
  Rng rng(34);
  const ModelConfig model = fixtures::training_model(rng);
  std::vector<std::vector<SequenceTokens>> batches;
  const std::vector<PlacedIteration> steps = fixtures::training_steps(model, rng, 3, batches);
  TrainingOptions aligned = options_with();
  aligned.aligned_to = steps[0].placement;
  Trainer trainer(model, 8, aligned);
  ReferenceTrainer reference(model, aligned.adam);
  for (std::size_t k = 0; k < steps.size(); ++k) {
    CAPTURE(k);
    const TrainedIteration result = trainer.step(steps[k]);
    const double expected = reference.step(batches[k]);
    CHECK(std::abs(result.loss - expected) <= training_tolerance * std::abs(expected));
    // On the placement its states are aligned to, the push is the reduce-scatter alone: no LNK message leaves a rank.
    if (k == 0)
      CHECK(result.predicted_move.push.bytes.intra_node + result.predicted_move.push.bytes.inter_node == 0);
    else
      CHECK(result.predicted_move.push.bytes.total() > 0);
  }
  CHECK(worst_parameter_difference(trainer.parameters(), reference.parameters()) <= training_tolerance);
  // Its checkpoint resumes in Hydraulis' sharded layout with the same parameters.
  const Trainer resumed(trainer.checkpoint(), 8, options_with());
  CHECK(resumed.parameters() == trainer.parameters());
}

TEST_CASE("training: what the cost model prices is what moves") {
  Rng rng(21);
  const ModelConfig model = fixtures::training_model(rng);
  std::vector<std::vector<SequenceTokens>> batches;
  for (const PlacedIteration& step : fixtures::training_steps(model, rng, 3, batches)) {
    const LayoutMove move(model, step.placement, optimizer_layouts(model, 8), 8);
    std::vector<RankShards> shards(8);
    std::vector<RankShards*> held;
    for (RankShards& rank : shards) held.push_back(&rank);
    move.hold(held);
    // The pull delivers every lane its fraction of every tensor it holds, once: its bytes are their sizes.
    std::int64_t held_values = 0;
    for (const RankShards& rank : shards)
      for (const std::vector<double>& fraction : rank.parameters)
        held_values += static_cast<std::int64_t>(fraction.size());
    const shard::ShardCost cost = move.predicted({});
    CHECK(cost.pull.bytes.total() == 8 * held_values);
    // The push's reduce-scatter moves gradients of every lane, and its LNK every element of the model once.
    std::int64_t model_values = 0;
    for (const ParameterTensor& tensor : parameter_tensors(model))
      model_values += static_cast<std::int64_t>(tensor.size());
    CHECK(cost.push.bytes.total() == 8 * model_values);
    CHECK(cost.reduce_scatter.bytes.total() > 0);
  }
  // A placement of other layers than the model's is refused.
  shard::Placement other = fixtures::training_steps(model, rng, 1, batches).front().placement;
  other.layers += 1;
  CHECK_THROWS_WITH_AS(LayoutMove(model, other, optimizer_layouts(model, 8)), doctest::Contains("layers, the model"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(optimizer_layouts(model, 8, &other), doctest::Contains("it is aligned to has"), invalid_input);
  CHECK_THROWS_WITH_AS(Trainer(model, 0, options_with()), doctest::Contains("gpus must be in"), invalid_input);
  TrainingOptions bad = options_with();
  bad.adam.learning_rate = -1;
  CHECK_THROWS_WITH_AS(Trainer(model, 8, bad), doctest::Contains("learning_rate"), invalid_input);
}
