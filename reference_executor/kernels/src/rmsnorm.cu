// RMSNorm forward and backward. One block per row for y and dx; the weight gradient is a deterministic
// two-stage reduction: each of kDweightChunks fixed row chunks sums its rows per column into the
// workspace, then one pass adds the chunks in order, so the result does not depend on scheduling.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "device_reduce.cuh"
#include "host_checks.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"

namespace sluice::executor::kernels {
namespace {

using detail::block_sum;

constexpr int kRowThreads = 256;
constexpr int kColumnThreads = 256;
constexpr int kDweightChunks = 64;

__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_forward_kernel(const bf16* x, const bf16* weight, int cols, float eps, bf16* y, float* rstd) {
  __shared__ float scratch[32];
  const std::int64_t offset = static_cast<std::int64_t>(blockIdx.x) * cols;
  float square_sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += kRowThreads) {
    const float value = __bfloat162float(x[offset + c]);
    square_sum += value * value;
  }
  const float inverse_rms = 1.0f / sqrtf(block_sum(square_sum, scratch) / static_cast<float>(cols) + eps);
  for (int c = threadIdx.x; c < cols; c += kRowThreads) {
    y[offset + c] = __float2bfloat16(__bfloat162float(x[offset + c]) * inverse_rms * __bfloat162float(weight[c]));
  }
  if (threadIdx.x == 0) rstd[blockIdx.x] = inverse_rms;
}

// dx = rstd * (dy∘w - x̂ * mean(dy∘w∘x̂)), x̂ = x * rstd.
__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_backward_dx_kernel(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy, int cols,
                               bf16* dx) {
  __shared__ float scratch[32];
  const std::int64_t offset = static_cast<std::int64_t>(blockIdx.x) * cols;
  const float inverse_rms = rstd[blockIdx.x];
  float projection = 0.0f;  // Σ dy∘w∘x
  for (int c = threadIdx.x; c < cols; c += kRowThreads) {
    projection += __bfloat162float(dy[offset + c]) * __bfloat162float(weight[c]) * __bfloat162float(x[offset + c]);
  }
  const float mean_projection = block_sum(projection, scratch) * inverse_rms / static_cast<float>(cols);
  for (int c = threadIdx.x; c < cols; c += kRowThreads) {
    const float normalized = __bfloat162float(x[offset + c]) * inverse_rms;
    const float scaled_gradient = __bfloat162float(dy[offset + c]) * __bfloat162float(weight[c]);
    dx[offset + c] = __float2bfloat16(inverse_rms * (scaled_gradient - normalized * mean_projection));
  }
}

// Grid (column blocks, kDweightChunks): workspace[chunk][col] = Σ_{rows of the chunk} dy * x * rstd.
__global__ void __launch_bounds__(kColumnThreads)
    rmsnorm_dweight_partial_kernel(const bf16* x, const float* rstd, const bf16* dy, int rows, int cols,
                                   float* workspace) {
  const int col = static_cast<int>(blockIdx.x) * kColumnThreads + static_cast<int>(threadIdx.x);
  if (col >= cols) return;
  const int rows_per_chunk = (rows + kDweightChunks - 1) / kDweightChunks;
  const int chunk = static_cast<int>(blockIdx.y);
  const int begin = chunk * rows_per_chunk;
  const int end = min(rows, begin + rows_per_chunk);
  float sum = 0.0f;
  for (int row = begin; row < end; ++row) {
    const std::int64_t index = static_cast<std::int64_t>(row) * cols + col;
    sum += __bfloat162float(dy[index]) * __bfloat162float(x[index]) * rstd[row];
  }
  workspace[static_cast<std::int64_t>(chunk) * cols + col] = sum;
}

// dweight_accum[col] += Σ_chunk workspace[chunk][col], chunks in order.
__global__ void __launch_bounds__(kColumnThreads)
    rmsnorm_dweight_finish_kernel(const float* workspace, int cols, float* dweight_accum) {
  const int col = static_cast<int>(blockIdx.x) * kColumnThreads + static_cast<int>(threadIdx.x);
  if (col >= cols) return;
  float sum = 0.0f;
  for (int chunk = 0; chunk < kDweightChunks; ++chunk) sum += workspace[static_cast<std::int64_t>(chunk) * cols + col];
  dweight_accum[col] += sum;
}

void check_rows(int rows, int cols) {
  detail::require_positive(rows, "rows");
  detail::require_positive(cols, "cols");
}

}  // namespace

void rmsnorm_forward(const bf16* x, const bf16* weight, int rows, int cols, float eps, bf16* y, float* rstd,
                     cudaStream_t stream) {
  check_rows(rows, cols);
  sluice::require(eps >= 0.0f, "eps: must be >= 0, got ", eps);
  detail::require_pointer(x, "x");
  detail::require_pointer(weight, "weight");
  detail::require_pointer(y, "y");
  detail::require_pointer(rstd, "rstd");
  rmsnorm_forward_kernel<<<static_cast<unsigned int>(rows), kRowThreads, 0, stream>>>(x, weight, cols, eps, y, rstd);
  SLUICE_LAUNCH_CHECK("rmsnorm_forward");
}

std::size_t rmsnorm_backward_workspace_floats(int cols) {
  detail::require_positive(cols, "cols");
  return static_cast<std::size_t>(kDweightChunks) * static_cast<std::size_t>(cols);
}

void rmsnorm_backward(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy, int rows, int cols,
                      bf16* dx, float* dweight_accum, float* workspace, cudaStream_t stream) {
  check_rows(rows, cols);
  detail::require_pointer(x, "x");
  detail::require_pointer(weight, "weight");
  detail::require_pointer(rstd, "rstd");
  detail::require_pointer(dy, "dy");
  detail::require_pointer(dx, "dx");
  detail::require_pointer(dweight_accum, "dweight_accum");
  detail::require_pointer(workspace, "workspace");
  rmsnorm_backward_dx_kernel<<<static_cast<unsigned int>(rows), kRowThreads, 0, stream>>>(x, weight, rstd, dy, cols,
                                                                                          dx);
  SLUICE_LAUNCH_CHECK("rmsnorm_backward (dx)");
  const auto column_blocks = static_cast<unsigned int>(detail::ceil_div(cols, kColumnThreads));
  rmsnorm_dweight_partial_kernel<<<dim3(column_blocks, kDweightChunks), kColumnThreads, 0, stream>>>(x, rstd, dy, rows,
                                                                                                     cols, workspace);
  SLUICE_LAUNCH_CHECK("rmsnorm_backward (dweight partial sums)");
  rmsnorm_dweight_finish_kernel<<<column_blocks, kColumnThreads, 0, stream>>>(workspace, cols, dweight_accum);
  SLUICE_LAUNCH_CHECK("rmsnorm_backward (dweight)");
}

}  // namespace sluice::executor::kernels
