#include "sluice_executor/profiler.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sluice_executor/cuda_check.hpp"
#include "collectives.hpp"
#include "device.hpp"
#include "stage.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/kernels.hpp"
#include "sluice_executor/shards.hpp"

namespace sluice::executor::cuda {

namespace {

void require_device(const ProfilerOptions& options) {
  const int devices = device_count();
  if (options.device < 0 || options.device >= devices)
    throw std::runtime_error("profiler: no CUDA device " + std::to_string(options.device) + " (" +
                             std::to_string(devices) + " visible)");
}

// A [rows, cols] bf16 tensor of standard normal values from `rng`.
DeviceBuffer random_tensor(Rng& rng, std::size_t elements, cudaStream_t stream) {
  std::vector<float> values(elements);
  for (float& value : values) value = static_cast<float>(rng.normal());
  const DeviceBuffer staged = upload(values, stream);
  DeviceBuffer tensor(elements * sizeof(bf16));
  kernels::convert(staged.as<const float>(), tensor.as<bf16>(), static_cast<std::int64_t>(elements), stream);
  SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return tensor;
}

// The groups of one stage's lanes (lane c·TP + t is CP rank c's TP rank t), numbered as a job's layout numbers them:
// each lane's TP group, and its Ulysses and ring groups.
struct StageGroups {
  std::vector<std::vector<int>> members;  // by group id
  std::vector<int> tp, ulysses, ring;     // by lane: its group's id (-1 for a degree of 1)

  explicit StageGroups(const Scheme& scheme) {
    const int tp_degree = scheme.tp();
    executor::detail::GroupTable table;
    for (int lane = 0; lane < tp_degree * scheme.cp(); ++lane) {
      const int c = lane / tp_degree;
      const int t = lane % tp_degree;
      std::vector<int> tp_lanes, ulysses_lanes, ring_lanes;
      for (int k = 0; k < tp_degree; ++k) tp_lanes.push_back(c * tp_degree + k);
      const CpGroupMembers cp_members = cp_group_members(c, scheme.ulysses(), scheme.ring());
      for (const int member : cp_members.ulysses) ulysses_lanes.push_back(member * tp_degree + t);
      for (const int member : cp_members.ring) ring_lanes.push_back(member * tp_degree + t);
      tp.push_back(table.id(std::move(tp_lanes)));
      ulysses.push_back(table.id(std::move(ulysses_lanes)));
      ring.push_back(table.id(std::move(ring_lanes)));
    }
    members = table.take();
  }

  [[nodiscard]] Group group(int id, int lane) const { return group_of(members, id, lane); }
};

// Runs body(lane) for every lane on a thread of its own (their collectives meet across threads); the first failure
// stops the exchange, so that the other lanes stop waiting, and is rethrown.
void on_lane_threads(int lanes, LocalExchange& exchange, const std::function<void(int)>& body) {
  std::exception_ptr failure;
  std::mutex failure_mutex;
  {
    std::vector<std::jthread> threads;
    for (int lane = 0; lane < lanes; ++lane)
      threads.emplace_back([&, lane] {
        try {
          body(lane);
        } catch (...) {
          const std::lock_guard lock(failure_mutex);
          if (!failure) failure = std::current_exception();
          exchange.stop();
        }
      });
  }
  if (failure) std::rethrow_exception(failure);
}

// One lane of a profiled stage: its layers' TP shards, on the shared stream through an allocator of its own.
struct ProfiledLane {
  std::unique_ptr<StreamAllocator> allocator;
  std::unique_ptr<DeviceStage> stage;
};

// Every lane of one stage of `scheme` holding layers [first_layer, end_layer), its initial values from `initial` (by
// TP rank).
struct ProfiledStage {
  bool first = false;
  bool last = false;
  std::vector<ProfiledLane> lanes;

  ProfiledStage(const ModelConfig& model, const Scheme& scheme, const StageGroups& groups, LocalExchange& exchange,
                cudaStream_t stream, int first_layer, int end_layer, bool first_stage, bool last_stage,
                const std::vector<InitialShards>& initial)
      : first(first_stage), last(last_stage) {
    for (int lane = 0; lane < static_cast<int>(scheme.stage_gpus()); ++lane) {
      ProfiledLane profiled;
      profiled.allocator = std::make_unique<StreamAllocator>(stream);
      const int tp_rank = lane % scheme.tp();
      const TensorParallelLane tensor_parallel{
          scheme.tp(), tp_rank, groups.group(groups.tp[static_cast<std::size_t>(lane)], lane), &exchange};
      profiled.stage = std::make_unique<DeviceStage>(model, first_layer, end_layer, first, last, scheme.recompute(),
                                                     *profiled.allocator, tensor_parallel,
                                                     initial[static_cast<std::size_t>(tp_rank)]);
      lanes.push_back(std::move(profiled));
    }
  }
};

}  // namespace

void require_profilable(const ModelConfig& model, std::span<const Scheme> schemes, const ProfilerOptions& options) {
  using sluice::require;
  require_gpu_model(model);
  require(!schemes.empty(), "profiler: no schemes to profile");
  require(options.repetitions >= 1, "profiler: repetitions must be >= 1, got ", options.repetitions);
  require(options.warmup >= 0, "profiler: warmup must be >= 0, got ", options.warmup);
  const std::set<std::int64_t> distinct(options.lengths.begin(), options.lengths.end());
  require(distinct.size() >= 3, "profiler: lengths must hold 3 or more distinct values (the fit has 3 coefficients)");
  for (const Scheme& scheme : schemes) {
    require(scheme.pp() <= model.layers, "profiler: ", scheme.name(), " has more stages than the model's ",
            model.layers, " layers");
    executor::detail::require_scheme(model, scheme, "profiler");
    require(model.ffn / scheme.tp() % 8 == 0, "profiler: ", scheme.name(),
            " leaves each TP rank FFN columns the CUDA kernels cannot run (", model.ffn / scheme.tp(),
            ", not a multiple of 8)");
    for (const std::int64_t length : options.lengths) {
      require(length >= 1 && length <= (std::int64_t{1} << 30), "profiler: length ", length, " outside [1, 2^30]");
      // Every lane holds rows of the sequence: each CP rank at least two of its 2·CP chunks, each TP rank its part.
      require(length >= 2 * scheme.stage_gpus(), "profiler: length ", length, " leaves lanes of ", scheme.name(),
              " without tokens (it needs 2·TP·CP = ", 2 * scheme.stage_gpus(), " or more)");
    }
  }
}

StageProfile profile_stage(const ModelConfig& model, const Scheme& scheme, const ProfilerOptions& options) {
  require_profilable(model, std::span(&scheme, 1), options);
  require_device(options);
  const DeviceScope scope(options.device);
  const Stream stream;
  StageProfile profile;
  profile.scheme = scheme;
  profile.layers = (model.layers + scheme.pp() - 1) / scheme.pp();
  const int lanes = static_cast<int>(scheme.stage_gpus());
  const StageGroups groups(scheme);
  // Each lane waits for its collectives' peers; a minute covers any stage a GPU runs.
  LocalExchange exchange(60.0);
  // Timed: the pipeline's last stage, whose work sets a 1F1B iteration, with the most layers a stage holds, the
  // final norm, the LM head and the loss (and the embedding with PP 1). Its memory is not the model's A (the logits
  // live for one micro-batch only): that comes from a middle stage of the same layers, whose initial values are the
  // timed stage's. With PP > 1 the middle stage is timed too: the other stages' time.
  const int first_layer = model.layers - profile.layers;
  const bool first = scheme.pp() == 1;
  std::vector<InitialShards> initial;
  for (int tp_rank = 0; tp_rank < scheme.tp(); ++tp_rank)
    initial.push_back(
        initial_shards(model, stage_tensors(model, first_layer, model.layers, first, true), scheme.tp(), tp_rank));
  ProfiledStage timed(model, scheme, groups, exchange, stream.get(), first_layer, model.layers, first, true, initial);
  ProfiledStage middle(model, scheme, groups, exchange, stream.get(), first_layer, model.layers, false, false, initial);
  initial.clear();
  std::vector<DeviceBuffer> loss_sums;
  for (int lane = 0; lane < lanes; ++lane) {
    loss_sums.emplace_back(sizeof(float));
    kernels::fill_zero(loss_sums.back().as<float>(), 1, stream.get());
  }
  Rng rng(model.seed);
  const Event start, end;
  for (const auto& [length, sequences] : sample_shapes(options.lengths)) {
    // Packed sequences of random token ids, each token's target the next.
    std::vector<Sequence> packed;
    for (std::int64_t k = 0; k < sequences; ++k) packed.emplace_back(k, length);
    PackedMicroBatch sequence;
    for (const SequenceTokens& tokens : make_tokens(packed, model.vocab, model.seed))
      executor::detail::append_sequence(sequence, tokens.tokens);
    const std::int64_t tokens = length * sequences;
    const CpSplit split = cp_split(sequence.cu_seqlens, scheme.ulysses(), scheme.ring());
    std::vector<DeviceMicroBatch> micro_batches;
    std::vector<DeviceBuffer> inputs, grad_outputs, outputs, grad_inputs;
    for (int lane = 0; lane < lanes; ++lane) {
      const auto l = static_cast<std::size_t>(lane);
      micro_batches.push_back(upload_micro_batch(sequence, split, lane / scheme.tp(),
                                                 groups.group(groups.ulysses[l], lane),
                                                 groups.group(groups.ring[l], lane), stream.get()));
      const std::size_t elements =
          static_cast<std::size_t>(middle.lanes[l].stage->lane_rows(micro_batches.back().tokens).size()) *
          static_cast<std::size_t>(model.hidden);
      inputs.push_back(random_tensor(rng, elements, stream.get()));
      grad_outputs.push_back(random_tensor(rng, elements, stream.get()));
      outputs.emplace_back(elements * sizeof(bf16));
      grad_inputs.emplace_back(elements * sizeof(bf16));
    }
    const auto loss_scale = static_cast<float>(1.0 / static_cast<double>(tokens));
    const auto forward_backward = [&](ProfiledStage& stage) {
      on_lane_threads(lanes, exchange, [&](int lane) {
        const auto l = static_cast<std::size_t>(lane);
        const DeviceScope lane_scope(options.device);
        const DeviceMicroBatch& micro_batch = micro_batches[l];
        StageSaved saved;
        DeviceStage& lane_stage = *stage.lanes[l].stage;
        lane_stage.forward(micro_batch, stage.first ? micro_batch.ids.as<const void>() : inputs[l].as<const void>(),
                           stage.last ? nullptr : outputs[l].as<bf16>(), loss_scale,
                           stage.last ? loss_sums[l].as<float>() : nullptr, saved);
        lane_stage.backward(micro_batch, stage.last ? nullptr : grad_outputs[l].as<const bf16>(),
                            stage.first ? nullptr : grad_inputs[l].as<bf16>(), saved);
      });
    };
    for (int w = 0; w < options.warmup; ++w) forward_backward(middle);
    SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    std::vector<std::size_t> baselines;
    for (ProfiledLane& lane : middle.lanes) {
      lane.allocator->reset_peak();
      baselines.push_back(lane.allocator->in_use());
    }
    forward_backward(middle);
    SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    double bytes = 0;
    for (std::size_t l = 0; l < middle.lanes.size(); ++l)
      bytes = std::max(bytes, static_cast<double>(middle.lanes[l].allocator->peak() - baselines[l]));
    // The median over the repetitions of a lane's share of the stage's GPU time.
    const auto median_seconds = [&](ProfiledStage& stage) {
      for (int w = 0; w < options.warmup; ++w) forward_backward(stage);
      std::vector<double> times;
      for (int r = 0; r < options.repetitions; ++r) {
        start.record(stream.get());
        forward_backward(stage);
        end.record(stream.get());
        SLUICE_CUDA_CHECK(cudaEventSynchronize(end.get()));
        times.push_back(seconds_between(start, end) / lanes);
      }
      std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
      return times[times.size() / 2];
    };
    const double seconds = median_seconds(timed);
    profile.samples.push_back({length, seconds, bytes, scheme.pp() > 1 ? median_seconds(middle) : 0.0, sequences});
    profile.activation_bytes_per_token =
        std::max(profile.activation_bytes_per_token, bytes / static_cast<double>(tokens));
  }
  std::vector<cost::LatencySample> latencies, inner_latencies;
  for (const StageSample& sample : profile.samples) {
    latencies.push_back({sample.length, sample.seconds, sample.sequences});
    if (scheme.pp() > 1) inner_latencies.push_back({sample.length, sample.inner_seconds, sample.sequences});
  }
  if (inner_latencies.empty()) {
    profile.fit = cost::fit_quadratic(latencies);
  } else {
    const cost::StageFits fits = cost::fit_last_and_other_stage(latencies, inner_latencies);
    profile.fit = fits.last;
    profile.inner_fit = fits.other;
  }
  return profile;
}

cost::ProfileSpec profile_gpu(const ModelConfig& model, std::span<const Scheme> schemes, const ProfilerOptions& options,
                              std::vector<StageProfile>* measured) {
  require_profilable(model, schemes, options);
  require_device(options);
  DeviceMemory memory;
  {
    const DeviceScope scope(options.device);
    SLUICE_CUDA_CHECK(cudaFree(nullptr));  // creates the context, so that free memory accounts for it
    std::size_t free_bytes = 0, total_bytes = 0;
    SLUICE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    memory = {static_cast<double>(total_bytes), static_cast<double>(total_bytes - free_bytes)};
  }
  std::vector<StageProfile> stages;
  for (const Scheme& scheme : schemes) stages.push_back(profile_stage(model, scheme, options));
  cost::ProfileSpec spec = profile_spec(model, stages, memory, options, device_name(options.device));
  if (measured) *measured = std::move(stages);
  return spec;
}

}  // namespace sluice::executor::cuda
