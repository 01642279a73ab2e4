// Galvatron's profile files: the reader on the authors' own LLaMA2-7B profiles, broken copies of them, thousands of
// mutated ones, the fits against Galvatron's values, the model and cluster made from them, and the search on them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "sluice/core/error.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/galvatron.hpp"
#include "sluice/io/search_json.hpp"
#include "sluice/search/estimator.hpp"
#include "sluice/search/galvatron.hpp"
#include "sluice/search/search.hpp"

namespace {

namespace fs = std::filesystem;
using sluice::search::GalvatronTimeMode;

fs::path fixture() { return sluice::io::bundled_data_dir() / "galvatron" / "llama2-7b"; }

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A copy of the fixture in a fresh directory, with `file` replaced by `content` (or removed when `content` is null).
fs::path broken_copy(std::string_view name, std::string_view file, const std::string* content) {
  const fs::path dir = fs::temp_directory_path() / ("sluice-galvatron-" + std::string(name));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(fixture())) fs::copy(entry.path(), dir / entry.path().filename());
  fs::remove(dir / file);
  if (content != nullptr) std::ofstream(dir / file, std::ios::binary) << *content;
  return dir;
}

std::string error_of(const fs::path& dir) {
  try {
    (void)sluice::io::read_galvatron(dir);
  } catch (const sluice::invalid_input& error) {
    return error.what();
  }
  return {};
}

bool near(double x, double y, double relative = 1e-9) { return std::abs(x - y) <= relative * std::abs(y); }

sluice::search::ModelSpec llama_shape() {
  return sluice::io::read_document<sluice::search::ModelSpec>(sluice::io::resolve_data_file("llama2-7b", "models"));
}

sluice::search::ClusterSpec a100() {
  return sluice::io::read_document<sluice::search::ClusterSpec>(sluice::io::resolve_data_file("a100-8", "clusters"));
}

}  // namespace

TEST_CASE("galvatron: the authors' LLaMA2-7B profiles read whole, in sluice's units") {
  const auto profile = sluice::io::read_galvatron(fixture());
  CHECK(profile.model == "llama2-7b");
  CHECK(profile.precision == "bf16");
  REQUIRE(profile.layer_times.size() == 1);
  CHECK(profile.layer_times.at(0).size() == 12);
  CHECK(profile.other_times.size() == 12);
  // Processed memory keys exist only with sequence parallelism in this profile.
  CHECK(profile.memory.layers.empty());
  const auto& layer = profile.memory_sp.layers.at("0/2048");
  CHECK(layer.parameter_mib == 778.2236328125);
  CHECK(layer.activation_mib.at(1) == 514.5634765625);
  CHECK(layer.activation_mib.at(8) == 68.3204345703125);
  CHECK(layer.checkpoint_mib == 32.0);
  CHECK(profile.memory_sp.other.at("pp_on_first/2048").model_states_mib.at(1) == 2021.0048828125);
  CHECK(profile.memory_sp.other.at("pp_off/2048").activation_mib.at(8) == 78.13916015625);
  const auto& hardware = profile.hardware;
  CHECK(hardware.gpus() == 8);
  CHECK(hardware.allreduce_mib_per_ms.at({8, true}) == 154.203);
  CHECK(hardware.allreduce_mib_per_ms.at({2, false}) == 151.344);
  CHECK(hardware.p2p_mib_per_ms.at(4) == 138.581);
  CHECK(hardware.overlap_coefficient == 1.125552573612729);
  CHECK(hardware.allreduce_ms.at(8).at(1) == 0.07895);
  CHECK(hardware.allreduce_ms.at(2).size() == 11);
  CHECK(hardware.all_to_all_ms.at(8).size() == 11);
}

TEST_CASE("galvatron: the time modes give Galvatron's own fits") {
  const auto profile = sluice::io::read_galvatron(fixture());
  // Batch mode: Galvatron's curve_fit of ms·b over b, m = 3.8590168994623464 and c = 0.8329851396156087 per layer,
  // (2.6803283231241726, 2.354899244597462) for the vocabulary layers.
  const auto layer = sluice::search::galvatron_forward_time(profile, 0, GalvatronTimeMode::batch, 2048);
  CHECK(near(layer.per_sample_seconds, 3.8590168994623464e-3));
  CHECK(near(layer.per_micro_batch_seconds, 0.8329851396156087e-3));
  const auto other = sluice::search::galvatron_forward_time(profile, -1, GalvatronTimeMode::batch, 2048);
  CHECK(near(other.per_sample_seconds, 2.6803283231241726e-3));
  CHECK(near(other.per_micro_batch_seconds, 2.354899244597462e-3));
  // Fixed mode: the smallest profiled batch, which is the entry Galvatron's static mode takes from this file.
  const auto fixed = sluice::search::galvatron_forward_time(profile, 0, GalvatronTimeMode::fixed, 2048);
  CHECK(near(fixed.per_sample_seconds, 4.396252679824831e-3));
  CHECK(fixed.per_micro_batch_seconds == 0);
  // A sequence fit needs 3 lengths; this profile has one, and the error says so.
  CHECK_THROWS_WITH_AS(sluice::search::galvatron_forward_time(profile, 0, GalvatronTimeMode::sequence, 2048),
                       "galvatron profile: layertype_0: 1 sequence lengths at batch 1, the time mode needs 3",
                       sluice::invalid_input);
  CHECK_THROWS_WITH_AS(sluice::search::galvatron_forward_time(profile, 0, GalvatronTimeMode::batch, 4096),
                       "galvatron profile: layertype_0: 0 batch sizes at sequence 4096, the time mode needs 2",
                       sluice::invalid_input);
  CHECK_THROWS_WITH_AS(sluice::search::galvatron_forward_time(profile, 1, GalvatronTimeMode::batch, 2048),
                       "galvatron profile: no computation profile of layer type 1", sluice::invalid_input);
}

TEST_CASE("galvatron: a fit that gives a negative time is refused, naming the layer type") {
  sluice::search::GalvatronProfile profile;
  // Faster per sample at larger batches than the line through the origin allows: c < 0.
  profile.layer_times[0] = {{1, 2048, 1.0}, {2, 2048, 1.5}, {4, 2048, 1.75}};
  // Totals 1, 3 and 7 ms at batches 1, 2 and 4: the line 2·b − 1.
  std::string message;
  try {
    (void)sluice::search::galvatron_forward_time(profile, 0, GalvatronTimeMode::batch, 2048);
  } catch (const sluice::invalid_input& error) {
    message = error.what();
  }
  CHECK(message.starts_with("galvatron profile: layertype_0: the fitted time is 0.002"));
  CHECK(message.find("s per sample and -0.001") != std::string::npos);
  CHECK(message.ends_with("both must be >= 0 and the first > 0 (try another time mode)"));
}

TEST_CASE("galvatron: a sequence fit is exact on a quadratic, and the vocabulary layers' on a line") {
  sluice::search::GalvatronProfile profile;
  for (const std::int64_t s : {1024, 2048, 4096, 8192}) {
    const double x = static_cast<double>(s);
    profile.layer_times[0].push_back({1, s, 1e-7 * x * x + 2e-3 * x + 0.5});
    profile.other_times.push_back({1, s, 1e-3 * x + 0.25});
  }
  const auto layer = sluice::search::galvatron_forward_time(profile, 0, GalvatronTimeMode::sequence, 3000);
  CHECK(near(layer.per_sample_seconds, (1e-7 * 9e6 + 2e-3 * 3000 + 0.5) / 1e3, 1e-9));
  const auto other = sluice::search::galvatron_forward_time(profile, -1, GalvatronTimeMode::sequence, 3000);
  CHECK(near(other.per_sample_seconds, (3.0 + 0.25) / 1e3, 1e-9));
}

TEST_CASE("galvatron: the model and cluster made from the profiles") {
  const auto profile = sluice::io::read_galvatron(fixture());
  const auto shape = llama_shape();
  const sluice::search::GalvatronSettings settings{.memory_bytes = 36LL << 30};
  const auto model = sluice::search::galvatron_model(profile, shape, settings);
  REQUIRE(model.layers.size() == 32);
  for (const auto& layer : model.layers) {
    CHECK(near(layer.forward_seconds, 3.8590168994623464e-3));
    CHECK(near(layer.micro_batch_seconds, 0.8329851396156087e-3));
    CHECK(layer.params == std::llround(778.2236328125 * 1048576 / 4));  // 204,006,400
  }
  // 2021.0048828125 MiB of model states at 16 bytes a parameter: LLaMA's 32000 x 4096 embedding and a norm.
  CHECK(model.embedding_params == std::llround(2021.0048828125 * 1048576 / 16));
  CHECK(model.head_params == std::llround(2021.0673828125 * 1048576 / 16));

  const auto cluster = sluice::search::galvatron_cluster(profile, settings);
  CHECK(cluster.gpus == 8);
  CHECK(cluster.memory_bytes == 36LL << 30);
  // Galvatron's 1 GiB context, and a fifth of a budget above 20 GiB held back for the allocator.
  CHECK(cluster.reserved_bytes == (1LL << 30) + (36LL << 30) / 5);
  CHECK(sluice::search::galvatron_cluster(profile, {.memory_bytes = 20LL << 30}).reserved_bytes == 1LL << 30);
  CHECK(cluster.overlap_slowdown == 1.125552573612729);
  REQUIRE(cluster.levels.size() == 3);  // consecutive groups of 2, 4 and 8
  CHECK(cluster.levels[0].size == 2);
  CHECK(cluster.levels[0].bandwidth == 138.156 * 1048576 * 1e3);
  CHECK(cluster.levels[2].bandwidth == 154.203 * 1048576 * 1e3);

  // Strided groups of 2 and 4 ranks were measured too (consec_0); 8 ranks on 8 GPUs are always consecutive.
  REQUIRE(cluster.strided_levels.size() == 2);
  CHECK(cluster.strided_levels[0].size == 2);
  CHECK(cluster.strided_levels[1].bandwidth == 155.815 * 1048576 * 1e3);

  // Profiled activations per sample, the kept input split by TP under sequence parallelism.
  const double mib = 1048576;
  CHECK(model.layers[0].activation_bytes.at(1) == 514.5634765625 * mib);
  CHECK(model.layers[0].activation_bytes.at(8) == 68.3204345703125 * mib);
  CHECK(model.layers[0].checkpoint_bytes.at(1) == 32 * mib);
  CHECK(model.layers[0].checkpoint_bytes.at(4) == 8 * mib);
  CHECK(model.embedding_activation_bytes == 198.7357177734375 * mib);
  CHECK(model.head_activation_bytes == 717.560302734375 * mib);
  CHECK(model.single_stage_vocabulary_state_bytes == 4130.34765625 * mib);
  CHECK(model.single_stage_vocabulary_activation_bytes == 841.58203125 * mib);
  CHECK(near(model.vocabulary_forward_seconds, 2.6803283231241726e-3));
  CHECK(near(model.vocabulary_micro_batch_seconds, 2.354899244597462e-3));

  // Without the _sp keys there is no memory profile to take parameters from, and the error says which keys.
  CHECK_THROWS_WITH_AS(sluice::search::galvatron_model(profile, shape, {.sequence_parallel = false}),
                       "galvatron profile: no memory profile of layer type 0 at sequence 2048", sluice::invalid_input);
  CHECK_THROWS_WITH_AS(sluice::search::galvatron_cluster(profile, {.memory_bytes = 1LL << 30}),
                       "galvatron: memory 1073741824 bytes is not more than the 1 GiB context Galvatron reserves",
                       sluice::invalid_input);
}

TEST_CASE("galvatron: the per-micro-batch time enters forward and backward once per micro-batch") {
  auto shape = llama_shape();
  for (auto& layer : shape.layers) layer.forward_seconds = 4e-3;
  const auto cluster = a100();
  const sluice::search::AnalyticEstimator without(shape, cluster);
  for (auto& layer : shape.layers) layer.micro_batch_seconds = 1e-3;
  const sluice::search::AnalyticEstimator with(shape, cluster);
  // One device, no communication: forward τ·b + c, backward twice that (three times with checkpointing).
  const sluice::search::LayerStrategy alone{.tp = 1, .dp = 1};
  for (const std::int64_t b : {1, 4, 16}) {
    CHECK(near(with.layer(0, alone, b).time_nosync - without.layer(0, alone, b).time_nosync, 3e-3, 1e-12));
    sluice::search::LayerStrategy checkpointed = alone;
    checkpointed.ckpt = true;
    CHECK(
        near(with.layer(0, checkpointed, b).time_nosync - without.layer(0, checkpointed, b).time_nosync, 4e-3, 1e-12));
  }
  // Under TP the samples' time splits and the micro-batch's does not (Galvatron's m·b/tp + c).
  const sluice::search::LayerStrategy tensor{.tp = 2, .dp = 1};
  const auto split = with.layer(0, tensor, 8);
  const auto whole = without.layer(0, tensor, 8);
  CHECK(near(split.time_nosync - whole.time_nosync, 3e-3, 1e-12));
}

TEST_CASE("galvatron: profiled activations stand in for the count, by TP degree") {
  auto shape = llama_shape();
  for (auto& layer : shape.layers) {
    layer.activation_bytes = {{1, 1000.0}, {2, 600.0}, {8, 200.0}};
    layer.checkpoint_bytes = {{1, 100.0}, {2, 50.0}};
  }
  const auto cluster = a100();
  const sluice::search::AnalyticEstimator estimator(shape, cluster);
  CHECK(estimator.activation_bytes(0, 2) == 600.0);
  CHECK(estimator.activation_bytes(0, 4) == 300.0);   // from TP 2's, halved
  CHECK(estimator.activation_bytes(0, 16) == 100.0);  // from TP 8's
  CHECK(estimator.checkpoint_bytes(0, 8) == 12.5);    // from TP 2's
  // Four samples on each of 2 DP replicas: a micro-batch of 8.
  const auto whole = estimator.layer(0, {.tp = 2, .dp = 2}, 8);
  CHECK(whole.forward_bytes == 4 * 600.0);
  CHECK(whole.backward_bytes == 0);
  const auto kept = estimator.layer(0, {.tp = 2, .dp = 2, .ckpt = true}, 8);
  CHECK(kept.forward_bytes == 4 * 50.0);
  CHECK(kept.backward_bytes == 4 * (600.0 - 50.0));
  // Without a checkpoint table a checkpointed layer keeps its input, s·h·q per sample.
  for (auto& layer : shape.layers) layer.checkpoint_bytes.clear();
  const sluice::search::AnalyticEstimator inputs(shape, cluster);
  CHECK(inputs.layer(0, {.tp = 1, .dp = 1, .ckpt = true}, 1).forward_bytes == 2048.0 * 4096 * 2);
}

TEST_CASE("galvatron: the vocabulary layers' time and activations on the first and last stages") {
  auto shape = llama_shape();
  shape.vocabulary_forward_seconds = 2e-3;
  shape.vocabulary_micro_batch_seconds = 1e-3;
  shape.embedding_activation_bytes = 100;
  shape.head_activation_bytes = 400;
  const auto cluster = a100();
  const sluice::search::AnalyticEstimator estimator(shape, cluster);
  using sluice::search::LayerStrategy;
  const LayerStrategy ddp{.tp = 1, .dp = 4};
  const LayerStrategy zero3{.tp = 1, .dp = 4, .sdp = true};
  // A micro-batch of 16 samples over a stage of 4 GPUs in DDP: forward 2 ms · 4 + 1 ms, backward twice that; half on
  // each end stage of a pipeline, none in the middle.
  CHECK(near(estimator.stage_extra(0, 1, ddp, 16, 1, 1).time_nosync, 3 * 9e-3, 1e-12));
  CHECK(near(estimator.stage_extra(0, 2, ddp, 16, 1, 1).time_nosync, 1.5 * 9e-3, 1e-12));
  CHECK(near(estimator.stage_extra(3, 4, ddp, 16, 1, 1).time_nosync, 1.5 * 9e-3, 1e-12));
  CHECK(estimator.stage_extra(1, 4, ddp, 16, 1, 1).time_nosync == 0);
  // The gradient all-reduce of the embedding over the 4 replicas overlaps the backward on the last micro-batch.
  const double q = shape.dtype_bytes;
  const double embedding_sync = 2.0 * 3 / 4 * static_cast<double>(shape.embedding_params) * q / cluster.bandwidth(4);
  CHECK(near(estimator.stage_extra(0, 2, ddp, 16, 1, 1).time_sync, 4.5e-3 + estimator.overlap(9e-3, embedding_sync),
             1e-12));
  // ZeRO-3 gathers the parameters in forward and backward: DP's volume over 2 each.
  CHECK(near(estimator.stage_extra(0, 2, zero3, 16, 1, 1).time_nosync, 1.5 * 9e-3 + embedding_sync, 1e-12));
  // Ulysses SP 2 splits each of a micro-batch of 2's samples: forward 2 ms · 1/2 + 1 ms, and no collective.
  CHECK(near(estimator.stage_extra(0, 1, {.tp = 1, .dp = 2, .sp = 2}, 2, 1, 1).time_nosync, 3 * 2e-3, 1e-12));
  // TP 2 adds an all-reduce of the hidden state per pass, of each of the micro-batch's samples of its group.
  const double hidden = 2 * 2.0 * 1 / 2 * 2048.0 * 4096 * q / cluster.bandwidth(2);
  CHECK(near(estimator.stage_extra(0, 2, {.tp = 2, .dp = 2}, 4, 1, 1).time_nosync, 3 * 0.5 * 3e-3 + 2 * hidden, 1e-12));
  // Memory: the context, the model states, and the samples per device of each of the in-flight micro-batches.
  const double context = static_cast<double>(cluster.reserved_bytes);
  const double embedding = 16.0 * static_cast<double>(shape.embedding_params);
  const double head = 16.0 * static_cast<double>(shape.head_params);
  CHECK(near(estimator.stage_extra(0, 4, ddp, 16, 1, 4).bytes, context + embedding + 100.0 * 4 * 4, 1e-12));
  CHECK(near(estimator.stage_extra(0, 4, zero3, 16, 1, 4).bytes, context + embedding / 4 + 100.0 * 4 * 4, 1e-12));
  CHECK(near(estimator.stage_extra(3, 4, zero3, 16, 1, 1).bytes, context + head / 4 + 400.0 * 4, 1e-12));
  CHECK(estimator.stage_extra(1, 4, zero3, 16, 1, 3).bytes == context);
  CHECK(near(estimator.stage_extra(0, 1, zero3, 16, 1, 1).bytes, context + (embedding + head) / 4 + 500.0 * 4, 1e-12));
  // ZeRO-2 keeps the parameters whole; TP 4 splits states and activations.
  CHECK(near(estimator.stage_extra(0, 1, {.tp = 1, .dp = 4, .zero2 = true}, 16, 1, 1).bytes,
             context + (embedding + head) * (q / 16 + (16 - q) / 16 / 4) + 500.0 * 4, 1e-12));
  CHECK(near(estimator.stage_extra(0, 1, {.tp = 4, .dp = 1}, 1, 1, 1).bytes,
             context + (embedding + head) / 4 + 500.0 / 4, 1e-12));
  // A lone stage's own profile (Galvatron's other_memory_pp_off) replaces the two end stages' sum; ends keep theirs.
  shape.single_stage_vocabulary_state_bytes = 3e9;
  shape.single_stage_vocabulary_activation_bytes = 450;
  const sluice::search::AnalyticEstimator lone(shape, cluster);
  CHECK(near(lone.stage_extra(0, 1, zero3, 16, 1, 1).bytes, context + 3e9 / 4 + 450.0 * 4, 1e-12));
  CHECK(lone.stage_extra(0, 4, zero3, 16, 1, 4).bytes == estimator.stage_extra(0, 4, zero3, 16, 1, 4).bytes);
  // The fields travel through sluice.model JSON, and bad values are refused naming the field.
  const auto again = sluice::io::from_document<sluice::search::ModelSpec>(sluice::io::to_document(shape));
  CHECK(again == shape);
  shape.head_activation_bytes = -1;
  CHECK_THROWS_WITH_AS(require_valid(shape),
                       "model llama2-7b: head_activation_bytes must be finite and in [0, 2^60), got -1",
                       sluice::invalid_input);
  shape.head_activation_bytes = 0;
  shape.layers[3].activation_bytes = {{3, 10.0}};
  CHECK_THROWS_WITH_AS(require_valid(shape),
                       "model llama2-7b: layer 3: activation_bytes needs power-of-2 degrees in [1, 2^20] and bytes in "
                       "(0, 2^50), got 3: 10",
                       sluice::invalid_input);
  shape.layers[3].activation_bytes.clear();
  shape.layers[3].checkpoint_bytes = {{1, 10.0}};
  CHECK_THROWS_WITH_AS(require_valid(shape), "model llama2-7b: layer 3: checkpoint_bytes needs activation_bytes",
                       sluice::invalid_input);
  auto document = sluice::io::to_document(again);
  document["layers"][0]["activation_bytes"] = {{"two", 1.0}};
  CHECK_THROWS_WITH_AS(sluice::io::from_document<sluice::search::ModelSpec>(document),
                       "JSON document: model.layers[0].activation_bytes: key 'two' is not a TP degree",
                       sluice::invalid_input);
}

TEST_CASE("galvatron: strided groups communicate at their measured bandwidth, others at their span's") {
  auto shape = llama_shape();
  // Compute too short to hide the gradient all-reduce: the overlap costs all of the communication, γ·T_b + (T_c − T_b).
  for (auto& layer : shape.layers) layer.forward_seconds = 1e-6;
  auto cluster = a100();
  const sluice::search::AnalyticEstimator consecutive(shape, cluster);
  cluster.strided_levels = {{2, 50e9}, {4, 20e9}};
  const sluice::search::AnalyticEstimator strided(shape, cluster);
  CHECK(cluster.strided_bandwidth(4, 8) == 20e9);
  CHECK(cluster.strided_bandwidth(8, 8) == cluster.bandwidth(8));
  // tp2*dp4: DP's 4 ranks at stride 2 all-reduce W·q/tp bytes twice over (dp−1)/dp, at 20 GB/s instead of 200.
  const sluice::search::LayerStrategy dp_strided{.tp = 2, .dp = 4};
  const double bytes = 2.0 * 3 / 4 * 202383360.0 * 2 / 2;
  const double gradient_slower = bytes / 20e9 - bytes / 200e9;
  const auto slow = strided.layer(0, dp_strided, 8);
  const auto fast = consecutive.layer(0, dp_strided, 8);
  CHECK(slow.time_nosync == fast.time_nosync);  // no gradient sync without it
  CHECK(near(slow.time_sync - fast.time_sync, gradient_slower, 1e-9));
  // Pure DP is consecutive: nothing changes; so does TP inner.
  CHECK(strided.layer(0, {.tp = 1, .dp = 8}, 8).time_sync == consecutive.layer(0, {.tp = 1, .dp = 8}, 8).time_sync);
  // TP outer: its 2 ranks stride over the DP groups, at 50 GB/s.
  const sluice::search::LayerStrategy tp_outer{.tp = 2, .dp = 4, .tp_inner = false};
  CHECK(strided.layer(0, tp_outer, 8).time_nosync > consecutive.layer(0, tp_outer, 8).time_nosync);
  // Documents carry the levels; bad ones are refused.
  CHECK(sluice::io::from_document<sluice::search::ClusterSpec>(sluice::io::to_document(cluster)) == cluster);
  cluster.strided_levels = {{4, 1e9}, {2, 1e9}};
  CHECK_THROWS_WITH_AS(require_valid(cluster),
                       "cluster a100-8: strided level 1: size must be a power of 2 in [2, gpus], larger than the one "
                       "before, got 2",
                       sluice::invalid_input);
}

TEST_CASE("galvatron: measured collective times replace volume over bandwidth for TP and SP") {
  using sluice::search::CollectiveTime;
  using sluice::search::LayerStrategy;
  const std::vector<CollectiveTime> table{{2, 1e6, 1e-4}, {2, 3e6, 2e-4}, {4, 1e6, 5e-4}};
  // Interpolated between measured messages, proportional past the largest, the smallest's below it.
  CHECK(near(*sluice::search::detail::measured_seconds(table, 2, 2e6), 1.5e-4, 1e-15));
  CHECK(sluice::search::detail::measured_seconds(table, 2, 1e6) == 1e-4);
  CHECK(sluice::search::detail::measured_seconds(table, 2, 6e6) == 4e-4);
  CHECK(sluice::search::detail::measured_seconds(table, 2, 1e3) == 1e-4);
  CHECK_FALSE(sluice::search::detail::measured_seconds(table, 8, 1e6).has_value());
  const auto shape = llama_shape();
  auto cluster = a100();
  const sluice::search::AnalyticEstimator plain(shape, cluster);
  cluster.all_reduce_times = table;
  cluster.all_to_all_times = table;
  require_valid(cluster);
  const sluice::search::AnalyticEstimator measured(shape, cluster);
  // TP 2 on one sample (2048 x 4096 x 2 bytes = 16.8 MB on each rank), past the largest measured message: 2e-4 s ·
  // 16.8 / 3 per all-reduce, two per pass, four in all.
  const double message = 2048.0 * 4096 * 2;
  const double all_reduce = 2e-4 * message / 3e6;
  const LayerStrategy tp{.tp = 2, .dp = 4};
  CHECK(near(measured.layer(0, tp, 4).time_nosync - plain.layer(0, tp, 4).time_nosync,
             4 * all_reduce - 4 * 2.0 * 0.5 * message / cluster.bandwidth(2), 1e-9));
  // SP 4 on 4 samples: each rank's quarter of them is the message, 4 all-to-alls per pass.
  const LayerStrategy sp{.tp = 1, .dp = 2, .sp = 4};
  const double slice = 4 * message / 4;
  CHECK(near(measured.layer(0, sp, 8).time_nosync - plain.layer(0, sp, 8).time_nosync,
             8 * 5e-4 * slice / 1e6 - 8 * 3.0 / 4 * slice / cluster.bandwidth(4), 1e-9));
  // Groups on strided ranks keep volume over bandwidth: the tables are measured on consecutive ones.
  const LayerStrategy outer{.tp = 2, .dp = 4, .tp_inner = false};
  CHECK(measured.layer(0, outer, 4).time_nosync == plain.layer(0, outer, 4).time_nosync);
  // The tables travel in sluice.cluster documents; bad entries are refused naming the field.
  CHECK(sluice::io::from_document<sluice::search::ClusterSpec>(sluice::io::to_document(cluster)) == cluster);
  cluster.all_to_all_times.push_back({2, 1e6, 3e-4});
  CHECK_THROWS_WITH_AS(require_valid(cluster),
                       "cluster a100-8: all_to_all_times 3: a second time for 2 ranks and 1000000 bytes",
                       sluice::invalid_input);
  cluster.all_to_all_times.back() = {3, 1e6, 3e-4};
  CHECK_THROWS_AS(require_valid(cluster), sluice::invalid_input);
  cluster.all_to_all_times.back() = {2, 2e6, 0};
  CHECK_THROWS_AS(require_valid(cluster), sluice::invalid_input);
  // Pipelines of a listed PP degree send at its measured bandwidth; others at the span of two stages.
  cluster.all_to_all_times.pop_back();
  const double p2p = measured.p2p(3, 2, 8);
  cluster.pipeline_levels = {{4, 1e9}};
  const sluice::search::AnalyticEstimator piped(shape, cluster);
  CHECK(near(piped.p2p(3, 2, 8), 2.0 * 8 * message / 2 / 1e9, 1e-12));
  CHECK(piped.p2p(3, 4, 8) == measured.p2p(3, 4, 8));
  CHECK(near(p2p, 2.0 * 8 * message / 2 / cluster.bandwidth(4), 1e-12));
  CHECK(sluice::io::from_document<sluice::search::ClusterSpec>(sluice::io::to_document(cluster)) == cluster);
  cluster.pipeline_levels = {{4, 1e9}, {2, 1e9}};
  CHECK_THROWS_AS(require_valid(cluster), sluice::invalid_input);
  // Galvatron's sp_time_ profile, in seconds and bytes of each rank's message; its p2p bandwidths by PP degree.
  const auto profile = sluice::io::read_galvatron(fixture());
  const auto from_profile = sluice::search::galvatron_cluster(profile, {});
  REQUIRE(!profile.hardware.all_to_all_ms.empty());
  const auto& [size, by_message] = *profile.hardware.all_to_all_ms.rbegin();
  const auto& [mib, milliseconds] = *by_message.begin();
  CHECK(std::ranges::find(from_profile.all_to_all_times, CollectiveTime{size, mib * 1048576.0, milliseconds / 1e3}) !=
        from_profile.all_to_all_times.end());
  REQUIRE(!profile.hardware.p2p_mib_per_ms.empty());
  const auto& [pp, mib_per_ms] = *profile.hardware.p2p_mib_per_ms.rbegin();
  CHECK(from_profile.pipeline_bandwidth(pp, 8 / pp) == mib_per_ms * 1048576.0 * 1e3);
  CHECK(from_profile.all_reduce_times.size() == [&] {
    std::size_t count = 0;
    for (const auto& [group, entries] : profile.hardware.allreduce_ms) count += group >= 2 ? entries.size() : 0;
    return count;
  }());
}

TEST_CASE("galvatron: sluice search runs on the authors' profiles, and every plan validates") {
  // docs/search.md's example, with the bundled directory.
  const sluice::search::GalvatronProfile profile = sluice::io::read_galvatron(fixture());
  const sluice::search::GalvatronSettings settings{.memory_bytes = 36LL << 30};
  const auto model = sluice::search::galvatron_model(profile, llama_shape(), settings);
  const auto cluster = sluice::search::galvatron_cluster(profile, settings);
  const auto report =
      sluice::search::search(model, cluster, {.memory_bytes = settings.memory_bytes, .global_batch = 16});
  sluice::search::validate(report, model, cluster, {.memory_bytes = settings.memory_bytes, .global_batch = 16});
  CHECK(report.best.global_batch == 16);
  CHECK(report.best.throughput > 0);
  // With a cost per micro-batch, 16 one-sample micro-batches cost 16 c where one of 16 costs one: the plan takes
  // fewer, larger micro-batches than one per sample.
  CHECK(report.best.micro_batches < 16);
}

TEST_CASE("galvatron: the plan Galvatron's search wrote, costed by sluice's estimator") {
  const fs::path file = fixture() / "galvatron_config_llama2-7b_1nodes_8gpus_per_node_36GB_bf16.json";
  const auto read = sluice::io::read_galvatron_plan(file, 32, 8);
  CHECK(read.schedule == sluice::search::Schedule::one_f_one_b);
  CHECK(read.plan.vocabulary == sluice::search::LayerStrategy{.tp = 1, .dp = 4, .sdp = true, .sp = 2});
  CHECK(read.plan.vocabulary->name() == "sdp4*sp2");
  const auto& plan = read.plan;
  CHECK(plan.pp == 1);
  CHECK(plan.global_batch == 16);
  CHECK(plan.micro_batches == 1);
  REQUIRE(plan.stages.size() == 1);
  REQUIRE(plan.stages[0].strategies.size() == 32);
  // SDP 8 on every layer, the first 20 checkpointed.
  for (int l = 0; l < 32; ++l) {
    const auto& strategy = plan.stages[0].strategies[static_cast<std::size_t>(l)];
    CHECK(strategy == sluice::search::LayerStrategy{.tp = 1, .dp = 8, .sdp = true, .tp_inner = true, .ckpt = l < 20});
  }
  const auto profile = sluice::io::read_galvatron(fixture());
  const sluice::search::GalvatronSettings settings{.memory_bytes = 36LL << 30};
  const auto model = sluice::search::galvatron_model(profile, llama_shape(), settings);
  const auto cluster = sluice::search::galvatron_cluster(profile, settings);
  const sluice::search::SearchOptions options{.memory_bytes = settings.memory_bytes, .global_batch = 16};
  const auto costed = sluice::search::evaluate(plan, model, cluster, options);
  CHECK(costed.throughput > 0);
  CHECK(costed.stages[0].memory_bytes < static_cast<double>(settings.memory_bytes));
  // evaluate re-derives what the search reports, for every plan it found (to rounding: sums run in another order).
  const auto report = sluice::search::search(model, cluster, options);
  auto same = [&](const sluice::search::Plan& found) {
    const auto again = sluice::search::evaluate(found, model, cluster, options);
    CHECK(near(again.iteration_seconds, found.iteration_seconds, 1e-12));
    for (std::size_t i = 0; i < found.stages.size(); ++i) {
      CHECK(near(again.stages[i].memory_bytes, found.stages[i].memory_bytes, 1e-12));
      CHECK(near(again.stages[i].time_sync, found.stages[i].time_sync, 1e-12));
      CHECK(near(again.stages[i].time_nosync, found.stages[i].time_nosync, 1e-12));
    }
  };
  same(report.best);
  for (const auto& baseline : report.baselines)
    if (baseline.plan) same(*baseline.plan);
  // The vocabulary strategy travels in the plan's JSON; without one, evaluate takes the fastest of the space, which
  // is the search's own pick; one that does not fill the stage is refused.
  REQUIRE(report.best.vocabulary.has_value());
  CHECK(sluice::io::json(report.best).get<sluice::search::Plan>() == report.best);
  auto unset = report.best;
  unset.vocabulary.reset();
  CHECK(sluice::search::evaluate(unset, model, cluster, options).vocabulary == report.best.vocabulary);
  CHECK_FALSE(sluice::io::json(unset).contains("vocabulary"));
  auto wrong = report.best;
  wrong.vocabulary = sluice::search::LayerStrategy{.tp = 1, .dp = 4};
  CHECK_THROWS_AS(sluice::search::evaluate(wrong, model, cluster, options), sluice::invalid_input);
  wrong.vocabulary = sluice::search::LayerStrategy{.tp = 1, .dp = 8, .ckpt = true};
  CHECK_THROWS_AS(sluice::search::evaluate(wrong, model, cluster, options), sluice::invalid_input);
  // By sluice's estimator its own plan is at least as fast as Galvatron's.
  CHECK(report.best.throughput >= costed.throughput);

  // Broken plans: one line naming the file and what is wrong.
  const std::string text = slurp(file);
  auto refused = [&](std::string_view from, std::string_view to, int layers, std::int64_t gpus,
                     std::pair<std::string_view, std::string_view> also = {}) {
    std::string changed = text;
    for (const auto& [old_text, new_text] : {std::pair{from, to}, also}) {
      if (old_text.empty()) continue;
      const auto at = changed.find(old_text);
      REQUIRE(at != std::string::npos);
      changed.replace(at, old_text.size(), new_text);
    }
    const fs::path broken = fs::temp_directory_path() / "sluice-galvatron-plan.json";
    std::ofstream(broken, std::ios::binary) << changed;
    try {
      (void)sluice::io::read_galvatron_plan(broken, layers, gpus);
    } catch (const sluice::invalid_input& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  CHECK(refused("\"vtp\"", "\"vpp\"", 32, 8).find("unknown field 'vpp'") != std::string::npos);
  CHECK(refused("1,1,1,1\"", "1,1,1\"", 32, 8).find("tp_sizes_enc: expected 32 entries") != std::string::npos);
  CHECK(refused("\"vtp\": 2", "\"vtp\": 3", 32, 8).find("vtp 3 does not divide the stage's 8 GPUs") !=
        std::string::npos);
  CHECK(
      refused("\"tp_sizes_enc\": \"1,", "\"tp_sizes_enc\": \"3,", 32, 8).find("layer 0: TP degree 3 does not divide") !=
      std::string::npos);
  // Under default_dp_type zero2, a layer not on ZeRO-3 is on ZeRO-2.
  {
    std::string zero2 = text;
    zero2.replace(zero2.find("\"dp_types_enc\": \"1,"), 19, "\"dp_types_enc\": \"0,");
    const fs::path changed = fs::temp_directory_path() / "sluice-galvatron-plan-zero2.json";
    std::ofstream(changed, std::ios::binary) << zero2;
    const auto strategies = sluice::io::read_galvatron_plan(changed, 32, 8).plan.stages[0].strategies;
    CHECK(strategies[0] == sluice::search::LayerStrategy{.tp = 1, .dp = 8, .ckpt = true, .zero2 = true});
    CHECK(strategies[0].name() == "z2dp8+ckpt");
    CHECK(strategies[1].sdp);
  }
  // use_sp turns the layer's TP degree into Ulysses SP's.
  {
    std::string ulysses = text;
    ulysses.replace(ulysses.find("\"use_sp\": \"0,"), 13, "\"use_sp\": \"1,");
    ulysses.replace(ulysses.find("\"tp_sizes_enc\": \"1,"), 19, "\"tp_sizes_enc\": \"4,");
    const fs::path changed = fs::temp_directory_path() / "sluice-galvatron-plan-ulysses.json";
    std::ofstream(changed, std::ios::binary) << ulysses;
    const auto strategies = sluice::io::read_galvatron_plan(changed, 32, 8).plan.stages[0].strategies;
    CHECK(strategies[0].sp == 4);
    CHECK(strategies[0].tp == 1);
    CHECK(strategies[0].name().starts_with("sdp2*sp4"));
    CHECK(strategies[1].sp == 1);
  }
  CHECK(refused("\"pp_division\": \"32\"", "\"pp_division\": \"31\"", 32, 8)
            .find("pp_division sums to 31, not the model's 32 layers") != std::string::npos);
  CHECK(refused("\"chunks\": 1", "\"chunks\": 0", 32, 8).find("chunks: 0 is outside [1, 16]") != std::string::npos);
  CHECK(refused("\"pipeline_type\": \"pipedream_flush\"", "\"pipeline_type\": \"zb\"", 32, 8)
            .find("expected gpipe or pipedream_flush, got 'zb'") != std::string::npos);
  CHECK(refused("\"vtp\"", "\"vtp\"", 48, 8).find("tp_sizes_enc: expected 48 entries") != std::string::npos);
}

TEST_CASE("galvatron: broken files are refused with one line naming the file and the key") {
  struct Case {
    std::string_view name;
    std::string_view file;
    std::string content;
    std::string_view message;
  };
  const std::string computation = "computation_profiling_bf16_llama2-7b_all.json";
  const std::string memory = "memory_profiling_bf16_llama2-7b_all.json";
  const Case cases[] = {
      {"bad-json", computation, "{\"layertype_0_bsz1_seq2048\": ", "not valid JSON"},
      {"not-object", computation, "[1, 2]", "expected an object"},
      {"unknown-key", computation, R"({"layertype_0_bsz1_seq2048": 1, "speed": 3})",
       "key 'speed': not a computation profile key"},
      {"negative", computation, R"({"layertype_0_bsz1_seq2048": -1})", "expected a finite number >= 0, got -1"},
      {"string", computation, R"({"layertype_0_bsz1_seq2048": "fast"})", "expected a number"},
      {"zero-batch", computation, R"({"layertype_0_bsz0_seq2048": 1})", "0 is outside [1, 1048576]"},
      {"huge-sequence", computation, R"({"layertype_0_bsz1_seq99999999999": 1})", "is outside [1, 16777216]"},
      {"long-digits", computation, R"({"layertype_0_bsz1_seq99999999999999999999": 1})", "is not a number"},
      {"no-layers", computation, R"({"layertype_other_bsz1_seq2048": 1})", "no layertype_<type>_bsz<b>_seq<s>"},
      {"deep", computation, std::string(300, '[') + std::string(300, ']'), "nested deeper than 256"},
      {"memory-field", memory, R"({"layertype_0_sp": {"2048": {"parameter_size": 1}}})",
       "missing field 'tp_activation_per_bsz_dict'"},
      {"memory-extra", memory,
       R"({"layertype_0_sp": {"2048": {"parameter_size": 1, "tp_activation_per_bsz_dict": {"1": 1}, "x": 2}}})",
       "unknown field 'x'"},
      {"memory-degree", memory,
       R"({"layertype_0_sp": {"2048": {"parameter_size": 1, "tp_activation_per_bsz_dict": {"3": 1}}}})",
       "degree 3 is not a power of 2"},
      {"memory-sequence", memory,
       R"({"layertype_0_sp": {"long": {"parameter_size": 1, "tp_activation_per_bsz_dict": {"1": 1}}}})",
       "sequence key 'long' is not a sequence length"},
      {"memory-key", memory, R"({"weights": {}})", "key 'weights': not a memory profile key"},
      {"overlap-small", "overlap_coefficient.json", R"({"overlap_coe": 0.5})", "expected a finite number >= 1"},
      {"overlap-missing", "overlap_coefficient.json", R"({})", "missing field 'overlap_coe'"},
      {"allreduce-zero", "allreduce_bandwidth_1nodes_8gpus_per_node.json", R"({"allreduce_size_8_consec_1": 0})",
       "expected a finite number > 0, got 0"},
      {"allreduce-key", "allreduce_bandwidth_1nodes_8gpus_per_node.json", R"({"allreduce_size_8_consec_2": 1})",
       "not allreduce_size_<n>_consec_<0|1>"},
      {"sp-key", "sp_time_1nodes_8gpus_per_node.json", R"({"broadcast_size_8_1MB_time": 1})",
       "not <allreduce|all2all>_size_<n>_<m>MB_time"},
      {"p2p-key", "p2p_bandwidth_1nodes_8gpus_per_node.json", R"({"pp_size_3": 1})", "degree 3 is not a power of 2"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const std::string message = error_of(broken_copy(c.name, c.file, &c.content));
    CHECK(message.find(c.message) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
    CHECK(message.find(c.file.substr(0, 20)) != std::string::npos);
  }
  for (const std::string_view file : {std::string_view(memory), std::string_view("overlap_coefficient.json"),
                                      std::string_view("sp_time_1nodes_8gpus_per_node.json")}) {
    CAPTURE(file);
    const std::string message = error_of(broken_copy("missing", file, nullptr));
    CHECK(message.find(file.substr(0, 20)) != std::string::npos);
    CHECK(message.find("cannot open file") != std::string::npos);
  }
  CHECK(error_of(broken_copy("no-computation", computation, nullptr)).find("no computation_profiling_") !=
        std::string::npos);
  CHECK(error_of(fixture() / "overlap_coefficient.json").find("not a directory of Galvatron profiles") !=
        std::string::npos);
  // Two models in one directory: the reader asks which.
  const fs::path two = broken_copy("two-models", "x", nullptr);
  fs::copy(two / computation, two / "computation_profiling_bf16_other_all.json");
  CHECK(error_of(two).find("several computation_profiling_<precision>_<model>_all.json files") != std::string::npos);
  CHECK(sluice::io::read_galvatron(two, {.model = "llama2-7b"}).model == "llama2-7b");
  CHECK_THROWS_WITH_AS(sluice::io::read_galvatron(two, {.precision = "int8"}),
                       "galvatron: precision must be fp32, fp16 or bf16, got 'int8'", sluice::invalid_input);
}

TEST_CASE("galvatron: thousands of mutated profiles either read or fail with one line, never crash") {
  const std::string files[] = {"computation_profiling_bf16_llama2-7b_all.json",
                               "memory_profiling_bf16_llama2-7b_all.json", "sp_time_1nodes_8gpus_per_node.json",
                               "allreduce_bandwidth_1nodes_8gpus_per_node.json"};
  std::mt19937_64 random(20261130);
  int read = 0;
  int refused = 0;
  for (int round = 0; round < 1200; ++round) {
    const std::string& file = files[round % 4];
    std::string text = slurp(fixture() / file);
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = random() % text.size();
      switch (random() % 4) {
        case 0: text[at] = static_cast<char>(random() % 128); break;                   // flip a byte
        case 1: text.resize(at); break;                                                // truncate
        case 2: text.insert(at, std::string(1, "{}[]\",:-e9"[random() % 10])); break;  // insert structure
        default: text.erase(at, 1 + random() % 8); break;                              // delete a run
      }
      if (text.empty()) text = " ";
    }
    const fs::path dir = broken_copy("fuzz", file, &text);
    const std::string message = error_of(dir);
    if (message.empty()) {
      ++read;
    } else {
      ++refused;
      CHECK(message.find('\n') == std::string::npos);
    }
  }
  CHECK(read + refused == 1200);
  CHECK(refused > 600);

  // The plan file too.
  const std::string plan = slurp(fixture() / "galvatron_config_llama2-7b_1nodes_8gpus_per_node_36GB_bf16.json");
  const fs::path mutated = fs::temp_directory_path() / "sluice-galvatron-plan-fuzz.json";
  int plans_refused = 0;
  for (int round = 0; round < 400; ++round) {
    std::string text = plan;
    const std::size_t at = random() % text.size();
    if (round % 2 == 0) {
      text[at] = "0123456789,{}\"x-"[random() % 16];
    } else {
      text.erase(at, 1 + random() % 6);
    }
    std::ofstream(mutated, std::ios::binary) << text;
    try {
      (void)sluice::io::read_galvatron_plan(mutated, 32, 8);
    } catch (const sluice::invalid_input& error) {
      ++plans_refused;
      CHECK(std::string_view(error.what()).find('\n') == std::string_view::npos);
    }
  }
  CHECK(plans_refused > 200);
}
