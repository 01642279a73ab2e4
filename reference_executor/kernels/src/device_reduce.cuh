#pragma once
// Warp and block reductions. Every lane (thread) gets the same result: the butterfly combines the same
// operands in every lane, and IEEE addition and max are commutative, so the results are bitwise equal
// and the order of summation is fixed (deterministic).
#include <cmath>

namespace sluice::executor::kernels::detail {

constexpr unsigned int kFullWarp = 0xffffffffu;

__device__ inline float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullWarp, value, offset);
  return value;
}

__device__ inline float warp_max(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(kFullWarp, value, offset));
  return value;
}

// Block-wide reductions for blockDim.x a multiple of 32 (at most 1024); `scratch` holds 32 floats of
// shared memory and may be reused by the next call.
__device__ inline float block_sum(float value, float* scratch) {
  const unsigned int lane = threadIdx.x % 32;
  const unsigned int warp = threadIdx.x / 32;
  value = warp_sum(value);
  __syncthreads();  // a previous call may still be reading scratch
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  return warp_sum(lane < blockDim.x / 32 ? scratch[lane] : 0.0f);
}

__device__ inline float block_max(float value, float* scratch) {
  const unsigned int lane = threadIdx.x % 32;
  const unsigned int warp = threadIdx.x / 32;
  value = warp_max(value);
  __syncthreads();  // a previous call may still be reading scratch
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  return warp_max(lane < blockDim.x / 32 ? scratch[lane] : -INFINITY);
}

// The softmax's normalizer over values seen one at a time (Milakov and Gimelshein, "Online normalizer calculation
// for softmax", 2018, Algorithm 3): the largest value and the sum of exponentials relative to it, rescaled when the
// largest grows, so that one read of a row gives both. A NaN makes the sum NaN; a +inf beside another +inf too.
struct SoftmaxNormalizer {
  float max = -INFINITY;
  float sum = 0.0f;

  __device__ void add(float value) {
    if (value > max) {
      sum = sum * expf(max - value) + 1.0f;
      max = value;
    } else if (value != -INFINITY) {  // exp(-inf - max) adds 0, also where max is still -inf
      sum += expf(value - max);
    }
  }
};

// The block's normalizer: each thread's rescaled to the block's maximum, summed in a fixed order. A thread that saw
// no value but -inf adds 0, also where the block saw nothing else (a vocab-parallel rank's part may be all -inf).
__device__ inline SoftmaxNormalizer block_normalizer(SoftmaxNormalizer local, float* scratch) {
  SoftmaxNormalizer result;
  result.max = block_max(local.max, scratch);
  result.sum = block_sum(local.max == -INFINITY ? 0.0f : local.sum * expf(local.max - result.max), scratch);
  return result;
}

// *accum += Σ values[i < count], one block of kThreads, in a fixed order (a loss sum, deterministic).
template <int kThreads>
__global__ void __launch_bounds__(kThreads) sum_into_kernel(const float* values, int count, float* accum) {
  __shared__ float scratch[32];
  float local = 0.0f;
  for (int i = threadIdx.x; i < count; i += kThreads) local += values[i];
  const float total = block_sum(local, scratch);
  if (threadIdx.x == 0) *accum += total;
}

}  // namespace sluice::executor::kernels::detail
