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
