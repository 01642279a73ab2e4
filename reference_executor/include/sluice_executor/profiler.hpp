#pragma once
// Profiling the executor's model on a GPU to close the cost-model loop: for each scheme <TP, CP, PP> (with or without
// full recompute), the pipeline's last stage of ceil(layers / PP) layers, with the final norm, the LM head and the loss
// (and the embedding when PP is 1), runs forward and backward on single sequences over a sweep of lengths and on
// micro-batches packed with sequences of the shortest length (sample_shapes; median of several repetitions, timed with
// CUDA events). Under 1F1B the last stage's work sets the iteration (DynaPipe,
// EuroSys'24, §4 and Fig. 10), so its time is the scheme's T(l); with PP > 1 a middle stage of as many layers is timed
// too, and the two are fitted together (one attention term): the last stage's b and c above the other's are its own
// work, which the schedule takes off the other stages (cost::LastStageWork). The activation memory is read from the
// allocators' high-water marks of a middle stage of as many layers (the memory model's A is per layer, and the logits
// live for one micro-batch only). A stage of TP·CP lanes runs them all on the one GPU, serialized on one stream with
// their collectives as device copies: a sample is the GPU time of every lane divided by the lanes, the time a lane
// takes on a GPU of its own when the lanes are balanced (TP's even shards, CP's causal balance), without the time its
// collectives would spend on links. The samples are fitted by cost::fit_quadratic (by cost::fit_last_and_other_stage
// with PP > 1) and assembled into a sluice profile (profile_spec), which the planners read like any other
// (io::write_document writes it as sluice.profile JSON).
//
// profile_stage and profile_gpu need sluice::executor (CUDA); profile_spec is plain C++.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice/cost/memory.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/cost/samples.hpp"
#include "sluice_executor/model.hpp"

namespace sluice::executor::cuda {

struct ProfilerOptions {
  std::vector<std::int64_t> lengths{256, 512, 1024, 2048, 4096, 8192};
  int repetitions = 5;  // timed runs per length; the median is kept
  int warmup = 2;       // untimed runs per length first
  int device = 0;
  double safety_margin_bytes = 4.0 * (1 << 30);  // kept free by the memory model (fragmentation, NCCL buffers)
  std::int64_t cluster_gpus = 0;                 // GPUs the profile is resolved for; 0: the largest PP profiled
};

struct StageSample {
  std::int64_t length = 0;      // of each sequence of the micro-batch
  double seconds = 0;           // forward + backward of the last stage
  double activation_bytes = 0;  // a middle stage's peak allocation during forward + backward
  double inner_seconds = 0;     // forward + backward of the middle stage; 0 (not timed) with PP 1
  std::int64_t sequences = 1;   // packed into the micro-batch
};

// The micro-batches the profiler times, as (length of each sequence, sequences): one sequence of every length, then
// every length past the shortest again as that many tokens of packed sequences of the shortest length. Attention is
// quadratic in a sequence's length, the rest linear in the micro-batch's tokens: the packed micro-batches grow the
// tokens without the attention, so the fit tells b·l from a·l² apart, which single sequences under a large fixed cost
// (the serialized lanes' launches) confound. On an H200, the single sequences of four LLaMA-7B-shaped layers fitted
// ⟨TP 2, ring CP 2⟩ a b of 0.55× its per-lane share of ⟨1, 1⟩'s, and a plan packing a batch of short documents onto
// that scheme ran 30% slower than predicted.
inline std::vector<std::pair<std::int64_t, std::int64_t>> sample_shapes(std::span<const std::int64_t> lengths) {
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes;
  for (const std::int64_t length : lengths) shapes.emplace_back(length, 1);
  const std::int64_t shortest = *std::ranges::min_element(lengths);
  for (const std::int64_t length : lengths)
    if (length / shortest >= 2) shapes.emplace_back(shortest, length / shortest);
  return shapes;
}

struct StageProfile {
  Scheme scheme;
  int layers = 0;  // layers of the profiled stages: ceil(model layers / PP)
  std::vector<StageSample> samples;
  cost::FitResult fit;                       // the last stage's
  std::optional<cost::FitResult> inner_fit;  // the middle stage's, with PP > 1
  double activation_bytes_per_token = 0;     // a lane's, the largest bytes / length over the samples
};

// Raises invalid_input for bad options, a model the CUDA kernels cannot run, or a scheme the model cannot (job.hpp's
// require_scheme) or whose lanes some length leaves without tokens; needs no device.
void require_profilable(const ModelConfig& model, std::span<const Scheme> schemes, const ProfilerOptions& options);

// Measures one stage of `scheme`; raises invalid_input as require_profilable does, std::runtime_error without a
// device.
StageProfile profile_stage(const ModelConfig& model, const Scheme& scheme, const ProfilerOptions& options);

// <1, PP> for every PP, and with `recompute` each of them recomputing too.
inline std::vector<Scheme> pipeline_schemes(std::span<const int> pps, bool recompute) {
  std::vector<Scheme> schemes;
  for (const int pp : pps) schemes.emplace_back(1, pp);
  if (recompute)
    for (const int pp : pps) schemes.push_back(Scheme({.tp = 1, .pp = pp, .recompute = Recompute::full}));
  return schemes;
}

// What the memory model needs from the device: its memory, and what the CUDA context and libraries take.
struct DeviceMemory {
  double total_bytes = 0;
  double context_bytes = 0;
};

// The sluice profile of the measured stages: each stage's scheme with its fitted latency (and last-stage work), and the
// Hydraulis memory model with A for each TP degree (activation bytes per token, hidden unit and layer, the lane's bytes
// times TP·CP: the model divides by them) the largest measured without recompute (the memory model derives a
// recomputing stage's from it; every TP profiled needs a stage without recompute) and B the mixed-precision Adam states
// (16 bytes per parameter) of a layer. When a fit has no linear term the UtilLen is stated as the longest length
// profiled (the fixed cost never amortises within the sweep).
inline cost::ProfileSpec profile_spec(const ModelConfig& model, std::span<const StageProfile> stages,
                                      const DeviceMemory& memory, const ProfilerOptions& options,
                                      const std::string& device) {
  require_valid(model);
  sluice::require(!stages.empty(), "profile: no stages measured");
  sluice::require(memory.total_bytes > 0 && memory.context_bytes >= 0, "profile: device memory ", memory.total_bytes,
                  " bytes with ", memory.context_bytes, " bytes of context is not valid");
  const auto h = static_cast<double>(model.hidden);
  const auto f = static_cast<double>(model.ffn);
  cost::ProfileSpec spec;
  spec.name = "executor";
  spec.source =
      "sluice reference executor profiler on " + device +
      ": forward + backward of one sequence, and of packed sequences of the shortest length, through a "
      "pipeline's last stage: ceil(layers / PP) decoder "
      "layers, the final norm, the LM head and the loss, and the embedding with PP 1 (bf16, cuBLAS GEMMs, "
      "the executor's attention kernels), median of " +
      std::to_string(options.repetitions) +
      " runs per length; with PP > 1 a middle stage too, for the last stage's own work; activation bytes from "
      "a middle stage's allocator high-water mark";
  spec.model = {"executor decoder", model.layers, model.hidden, model.vocab};
  std::int64_t widest = 1;
  std::map<int, double> activation_constants;  // by TP
  std::int64_t longest = 1;
  for (const StageProfile& stage : stages) {
    sluice::require(stage.layers >= 1 && !stage.samples.empty(), "profile: stage of ", stage.scheme.name(),
                    " has no layers or samples");
    widest = std::max(widest, stage.scheme.gpus());
    double& constant = activation_constants[stage.scheme.tp()];
    if (stage.scheme.recompute() == Recompute::none)
      constant = std::max(constant, stage.activation_bytes_per_token * static_cast<double>(stage.scheme.stage_gpus()) /
                                        (stage.layers * h));
    for (const StageSample& sample : stage.samples) longest = std::max(longest, sample.length);
  }
  for (const auto& [tp, constant] : activation_constants)
    sluice::require(constant > 0, "profile: no activation memory was measured without recompute at TP ", tp);
  spec.gpus = options.cluster_gpus > 0 ? options.cluster_gpus : widest;
  cost::TransformerMemorySpec memory_model;
  memory_model.layers = model.layers;
  memory_model.hidden = model.hidden;
  memory_model.vocab = model.vocab;
  memory_model.activation_bytes = activation_constants;
  // Per layer: 4H² (q, k, v, output) + 3HF (gate, up, down) + 2H (norms) parameters, 16 bytes each.
  memory_model.state_bytes = 16 * (4 * h * h + 3 * h * f + 2 * h) / (h * h);
  memory_model.gpu_memory_bytes = memory.total_bytes;
  memory_model.context_overhead_bytes = memory.context_bytes;
  memory_model.safety_margin_bytes = options.safety_margin_bytes;
  spec.memory = memory_model;
  for (const StageProfile& stage : stages) {
    std::optional<std::int64_t> util_len;
    if (stage.fit.model.b() == 0 && stage.fit.model.c() > 0) util_len = longest;
    spec.schemes.push_back(
        {stage.scheme, stage.fit.model, std::nullopt, util_len,
         stage.inner_fit ? cost::last_stage_work(stage.fit.model, stage.inner_fit->model) : cost::LastStageWork{}});
  }
  return spec;
}

// The stages' (length, seconds, the middle stage's seconds with PP > 1, and the packed sequences) as the samples
// `sluice fit` reads (docs/profiling.md). Peak bytes are left out: one stage's activations are not the training
// iteration's peak that the memory fit needs.
inline std::vector<cost::ProfileSample> profile_samples(std::span<const StageProfile> stages) {
  std::vector<cost::ProfileSample> samples;
  for (const StageProfile& stage : stages)
    for (const StageSample& sample : stage.samples)
      samples.push_back({stage.scheme, sample.length, sample.seconds, std::nullopt,
                         sample.inner_seconds > 0 ? std::optional(sample.inner_seconds) : std::nullopt,
                         sample.sequences});
  return samples;
}

// profile_stage for every scheme, and the profile of them on that device; the stages measured go to `measured` when
// given.
cost::ProfileSpec profile_gpu(const ModelConfig& model, std::span<const Scheme> schemes, const ProfilerOptions& options,
                              std::vector<StageProfile>* measured = nullptr);

}  // namespace sluice::executor::cuda
