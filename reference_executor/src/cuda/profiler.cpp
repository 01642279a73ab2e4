#include "sluice_executor/profiler.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sluice_executor/cuda_check.hpp"
#include "device.hpp"
#include "stage.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/kernels.hpp"

namespace sluice::executor::cuda {

namespace {

void require_options(const ModelConfig& model, int pp, const ProfilerOptions& options) {
  using sluice::require;
  require_gpu_model(model);
  require(pp >= 1 && pp <= model.layers, "profiler: pp must be in [1, layers = ", model.layers, "], got ", pp);
  require(options.repetitions >= 1, "profiler: repetitions must be >= 1, got ", options.repetitions);
  require(options.warmup >= 0, "profiler: warmup must be >= 0, got ", options.warmup);
  const std::set<std::int64_t> distinct(options.lengths.begin(), options.lengths.end());
  require(distinct.size() >= 3, "profiler: lengths must hold 3 or more distinct values (the fit has 3 coefficients)");
  for (const std::int64_t length : options.lengths)
    require(length >= 1 && length <= (std::int64_t{1} << 30), "profiler: length ", length, " outside [1, 2^30]");
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

}  // namespace

StageProfile profile_stage(const ModelConfig& model, int pp, const ProfilerOptions& options, Recompute recompute) {
  require_options(model, pp, options);
  const DeviceScope scope(options.device);
  const Stream stream;
  StreamAllocator allocator(stream.get());
  StageProfile profile;
  profile.pp = pp;
  profile.recompute = recompute;
  profile.layers = (model.layers + pp - 1) / pp;
  // A middle stage: its layers only, hidden states in and gradients in from the neighbours.
  DeviceStage stage(model, 0, profile.layers, false, false, recompute, allocator);
  Rng rng(model.seed);
  const Event start, end;
  for (const std::int64_t length : options.lengths) {
    const auto tokens = static_cast<std::int32_t>(length);
    const PackedMicroBatch sequence{{0, tokens},
                                    std::vector<std::int32_t>(static_cast<std::size_t>(length), 0),
                                    std::vector<std::int32_t>(static_cast<std::size_t>(length), -1),
                                    tokens};
    const DeviceMicroBatch micro_batch = upload_micro_batch(sequence, stream.get());
    const auto elements = static_cast<std::size_t>(length * model.hidden);
    const DeviceBuffer input = random_tensor(rng, elements, stream.get());
    const DeviceBuffer grad_output = random_tensor(rng, elements, stream.get());
    const DeviceBuffer output(elements * sizeof(bf16));
    const DeviceBuffer grad_input(elements * sizeof(bf16));
    auto forward_backward = [&] {
      StageSaved saved;
      stage.forward(micro_batch, input.as<const void>(), output.as<bf16>(), 0, nullptr, saved);
      stage.backward(micro_batch, grad_output.as<const bf16>(), grad_input.as<bf16>(), saved);
    };
    for (int w = 0; w < options.warmup; ++w) forward_backward();
    SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    allocator.reset_peak();
    const std::size_t baseline = allocator.in_use();
    std::vector<double> times;
    for (int r = 0; r < options.repetitions; ++r) {
      start.record(stream.get());
      forward_backward();
      end.record(stream.get());
      SLUICE_CUDA_CHECK(cudaEventSynchronize(end.get()));
      times.push_back(seconds_between(start, end));
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    const double bytes = static_cast<double>(allocator.peak() - baseline);
    profile.samples.push_back({length, times[times.size() / 2], bytes});
    profile.activation_bytes_per_token =
        std::max(profile.activation_bytes_per_token, bytes / static_cast<double>(length));
  }
  std::vector<cost::LatencySample> latencies;
  for (const StageSample& sample : profile.samples) latencies.push_back({sample.length, sample.seconds});
  profile.fit = cost::fit_quadratic(latencies);
  return profile;
}

cost::ProfileSpec profile_gpu(const ModelConfig& model, std::span<const int> pps, const ProfilerOptions& options,
                              std::vector<StageProfile>* measured, bool recompute) {
  sluice::require(!pps.empty(), "profiler: no PP degrees to profile");
  require_options(model, pps.front(), options);
  DeviceMemory memory;
  {
    const DeviceScope scope(options.device);
    SLUICE_CUDA_CHECK(cudaFree(nullptr));  // creates the context, so that free memory accounts for it
    std::size_t free_bytes = 0, total_bytes = 0;
    SLUICE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    memory = {static_cast<double>(total_bytes), static_cast<double>(total_bytes - free_bytes)};
  }
  std::vector<StageProfile> stages;
  for (const int pp : pps) stages.push_back(profile_stage(model, pp, options));
  if (recompute)
    for (const int pp : pps) stages.push_back(profile_stage(model, pp, options, Recompute::full));
  cost::ProfileSpec spec = profile_spec(model, stages, memory, options, device_name(options.device));
  if (measured) *measured = std::move(stages);
  return spec;
}

}  // namespace sluice::executor::cuda
