// RMSNorm forward and backward, each with the residual connection beside it fused in: the forward may first add
// the residual branch to its input (writing the sum, which the next residual add needs), the backward may add the
// gradient that reaches x around the norm. One pass over the rows instead of two. Rows move 8 values per access
// (vector_access.cuh).
//
// The forward runs one block per row. The backward's blocks each take a fixed chunk of rows (the chunking depends
// on rows alone) and sum the weight gradient of their rows per column in shared memory; a second kernel adds the
// chunks' sums in chunk order, so that the result does not depend on scheduling.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "device_reduce.cuh"
#include "host_checks.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"
#include "vector_access.cuh"

namespace sluice::executor::kernels {
namespace {

using detail::block_sum;
using detail::first_vector_column;
using detail::kVector;
using detail::load_vector;
using detail::store_vector;

constexpr int kRowThreads = 256;
constexpr int kColumnThreads = 256;
constexpr int kMaxDweightChunks = 1024;
// The backward keeps a float per column in shared memory (rounded up to whole vectors of every thread); past the
// default 48 KB it opts in to more, up to 192 KB.
constexpr int kMaxBackwardCols = 48 * 1024;
constexpr int kDefaultSharedBytes = 48 * 1024;

// Rows are walked in vectors (first_vector_column). A thread reads each of its values before it writes that value's
// output, and touches no other thread's: outputs may overwrite inputs.
constexpr int kColumnStep = detail::kVectorColumnStep<kRowThreads>;

// x = a (+ b, rounded to bf16 and stored in sum); y = x · rstd · weight.
template <bool kAligned>
__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_forward_kernel(const bf16* a, const bf16* b, const bf16* weight, int cols, float eps, bf16* sum, bf16* y,
                           float* rstd) {
  __shared__ float scratch[32];
  const std::int64_t offset = static_cast<std::int64_t>(blockIdx.x) * cols;
  const bf16* x = b == nullptr ? a : sum;
  float square_sum = 0.0f;
  for (int c = first_vector_column(); c < cols; c += kColumnStep) {
    float values[kVector];
    load_vector<kAligned>(a + offset + c, cols - c, values);
    if (b != nullptr) {
      float residual[kVector];
      load_vector<kAligned>(b + offset + c, cols - c, residual);
#pragma unroll
      for (int e = 0; e < kVector; ++e) values[e] = __bfloat162float(__float2bfloat16(values[e] + residual[e]));
      store_vector<kAligned>(sum + offset + c, cols - c, values);
    }
#pragma unroll
    for (int e = 0; e < kVector; ++e)
      if (c + e < cols) square_sum += values[e] * values[e];
  }
  const float inverse_rms = 1.0f / sqrtf(block_sum(square_sum, scratch) / static_cast<float>(cols) + eps);
  for (int c = first_vector_column(); c < cols; c += kColumnStep) {
    float values[kVector];
    float scale[kVector];
    load_vector<kAligned>(x + offset + c, cols - c, values);  // this thread's own sums when fused
    load_vector<kAligned>(weight + c, cols - c, scale);
#pragma unroll
    for (int e = 0; e < kVector; ++e) values[e] = values[e] * inverse_rms * scale[e];
    store_vector<kAligned>(y + offset + c, cols - c, values);
  }
  if (threadIdx.x == 0) rstd[blockIdx.x] = inverse_rms;
}

// The backward's weight-gradient sums in shared memory: thread t's value e of its k-th vector at
// (k · kVector + e) · kRowThreads + t, so that a warp touches 32 consecutive floats at a time (no bank conflicts),
// ceil(cols / kColumnStep) · kColumnStep floats in all.
__device__ float& column_sum(float* sums, int k, int e) {
  return sums[(k * kVector + e) * kRowThreads + static_cast<int>(threadIdx.x)];
}

// Per row: dx = rstd · (dy∘w − x̂ · mean(dy∘w∘x̂)) (+ residual), x̂ = x · rstd; the block's rows' dy∘x̂ summed per
// column into workspace[chunk].
template <bool kAligned>
__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_backward_kernel(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy, const bf16* residual,
                            int rows, int cols, int rows_per_chunk, bf16* dx, float* workspace) {
  extern __shared__ float dweight_sums[];  // see column_sum
  __shared__ float scratch[32];
  for (int k = 0, c = first_vector_column(); c < cols; ++k, c += kColumnStep)
    for (int e = 0; e < kVector; ++e) column_sum(dweight_sums, k, e) = 0.0f;
  const int begin = static_cast<int>(blockIdx.x) * rows_per_chunk;
  const int end = min(rows, begin + rows_per_chunk);
  for (int row = begin; row < end; ++row) {
    const std::int64_t offset = static_cast<std::int64_t>(row) * cols;
    const float inverse_rms = rstd[row];
    float projection = 0.0f;  // Σ dy∘w∘x
    for (int c = first_vector_column(); c < cols; c += kColumnStep) {
      float input[kVector], gradient[kVector], scale[kVector];
      load_vector<kAligned>(x + offset + c, cols - c, input);
      load_vector<kAligned>(dy + offset + c, cols - c, gradient);
      load_vector<kAligned>(weight + c, cols - c, scale);
#pragma unroll
      for (int e = 0; e < kVector; ++e)
        if (c + e < cols) projection += gradient[e] * scale[e] * input[e];
    }
    const float mean_projection = block_sum(projection, scratch) * inverse_rms / static_cast<float>(cols);
    for (int k = 0, c = first_vector_column(); c < cols; ++k, c += kColumnStep) {
      float input[kVector], gradient[kVector], scale[kVector], skip[kVector] = {};
      load_vector<kAligned>(x + offset + c, cols - c, input);
      load_vector<kAligned>(dy + offset + c, cols - c, gradient);
      load_vector<kAligned>(weight + c, cols - c, scale);
      if (residual != nullptr) load_vector<kAligned>(residual + offset + c, cols - c, skip);
      float result[kVector];
#pragma unroll
      for (int e = 0; e < kVector; ++e) {
        const float normalized = input[e] * inverse_rms;
        result[e] = inverse_rms * (gradient[e] * scale[e] - normalized * mean_projection) + skip[e];
        if (c + e < cols) column_sum(dweight_sums, k, e) += gradient[e] * normalized;
      }
      store_vector<kAligned>(dx + offset + c, cols - c, result);
    }
  }
  float* chunk_sums = workspace + static_cast<std::int64_t>(blockIdx.x) * cols;
  for (int k = 0, c = first_vector_column(); c < cols; ++k, c += kColumnStep)
    for (int e = 0; e < kVector && c + e < cols; ++e) chunk_sums[c + e] = column_sum(dweight_sums, k, e);
}

// dweight_accum[col] += Σ_chunk workspace[chunk][col], chunks in order.
__global__ void __launch_bounds__(kColumnThreads)
    rmsnorm_dweight_finish_kernel(const float* workspace, int chunks, int cols, float* dweight_accum) {
  const int col = static_cast<int>(blockIdx.x) * kColumnThreads + static_cast<int>(threadIdx.x);
  if (col >= cols) return;
  float sum = 0.0f;
  for (int chunk = 0; chunk < chunks; ++chunk) sum += workspace[static_cast<std::int64_t>(chunk) * cols + col];
  dweight_accum[col] += sum;
}

void check_rows(int rows, int cols) {
  detail::require_positive(rows, "rows");
  detail::require_positive(cols, "cols");
}

// The backward's row chunks: at most kMaxDweightChunks of equal size but the last, fixed by rows alone.
struct DweightChunks {
  int rows_per_chunk;
  int chunks;
};

DweightChunks dweight_chunks(int rows) {
  const int rows_per_chunk = static_cast<int>(detail::ceil_div(rows, kMaxDweightChunks));
  return {rows_per_chunk, static_cast<int>(detail::ceil_div(rows, rows_per_chunk))};
}

void check_backward_shape(int rows, int cols) {
  check_rows(rows, cols);
  sluice::require(cols <= kMaxBackwardCols, "cols: the RMSNorm backward holds at most ", kMaxBackwardCols,
                  " columns, got ", cols);
}

template <bool kAligned>
void launch_backward(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy, const bf16* residual,
                     int rows, int cols, bf16* dx, float* workspace, cudaStream_t stream) {
  const DweightChunks chunks = dweight_chunks(rows);
  const auto shared_bytes =
      static_cast<int>(detail::ceil_div(cols, kColumnStep) * kColumnStep * static_cast<int>(sizeof(float)));
  if (shared_bytes > kDefaultSharedBytes)
    SLUICE_CUDA_CHECK(cudaFuncSetAttribute(rmsnorm_backward_kernel<kAligned>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes));
  rmsnorm_backward_kernel<kAligned>
      <<<static_cast<unsigned int>(chunks.chunks), kRowThreads, static_cast<std::size_t>(shared_bytes), stream>>>(
          x, weight, rstd, dy, residual, rows, cols, chunks.rows_per_chunk, dx, workspace);
}

}  // namespace

void add_rmsnorm_forward(const bf16* a, const bf16* b, const bf16* weight, int rows, int cols, float eps, bf16* sum,
                         bf16* y, float* rstd, cudaStream_t stream) {
  check_rows(rows, cols);
  sluice::require(eps >= 0.0f, "eps: must be >= 0, got ", eps);
  detail::require_pointer(a, b == nullptr ? "x" : "a");
  detail::require_pointer(weight, "weight");
  detail::require_pointer(y, "y");
  detail::require_pointer(rstd, "rstd");
  if (b != nullptr) detail::require_pointer(sum, "sum");
  const auto blocks = static_cast<unsigned int>(rows);
  if (detail::rows_aligned(cols, {a, b, weight, sum, y})) {
    rmsnorm_forward_kernel<true><<<blocks, kRowThreads, 0, stream>>>(a, b, weight, cols, eps, sum, y, rstd);
  } else {
    rmsnorm_forward_kernel<false><<<blocks, kRowThreads, 0, stream>>>(a, b, weight, cols, eps, sum, y, rstd);
  }
  SLUICE_LAUNCH_CHECK(b == nullptr ? "rmsnorm_forward" : "add_rmsnorm_forward");
}

void rmsnorm_forward(const bf16* x, const bf16* weight, int rows, int cols, float eps, bf16* y, float* rstd,
                     cudaStream_t stream) {
  add_rmsnorm_forward(x, nullptr, weight, rows, cols, eps, nullptr, y, rstd, stream);
}

std::size_t rmsnorm_backward_workspace_floats(int rows, int cols) {
  check_backward_shape(rows, cols);
  return static_cast<std::size_t>(dweight_chunks(rows).chunks) * static_cast<std::size_t>(cols);
}

void rmsnorm_backward(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy, const bf16* residual,
                      int rows, int cols, bf16* dx, float* dweight_accum, float* workspace, cudaStream_t stream) {
  check_backward_shape(rows, cols);
  detail::require_pointer(x, "x");
  detail::require_pointer(weight, "weight");
  detail::require_pointer(rstd, "rstd");
  detail::require_pointer(dy, "dy");
  detail::require_pointer(dx, "dx");
  detail::require_pointer(dweight_accum, "dweight_accum");
  detail::require_pointer(workspace, "workspace");
  if (detail::rows_aligned(cols, {x, weight, dy, residual, dx})) {
    launch_backward<true>(x, weight, rstd, dy, residual, rows, cols, dx, workspace, stream);
  } else {
    launch_backward<false>(x, weight, rstd, dy, residual, rows, cols, dx, workspace, stream);
  }
  SLUICE_LAUNCH_CHECK("rmsnorm_backward (dx)");
  const auto column_blocks = static_cast<unsigned int>(detail::ceil_div(cols, kColumnThreads));
  rmsnorm_dweight_finish_kernel<<<column_blocks, kColumnThreads, 0, stream>>>(workspace, dweight_chunks(rows).chunks,
                                                                              cols, dweight_accum);
  SLUICE_LAUNCH_CHECK("rmsnorm_backward (dweight)");
}

}  // namespace sluice::executor::kernels
