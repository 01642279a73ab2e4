// The kernels of tensor and context parallelism: the vocab-parallel cross-entropy (three kernels around the caller's
// all-reduces, two reads of the logits), the member-order sums and maxima that finish a reduce-scatter or an
// all-reduce, and the rows an index moves (Ulysses' reordering between a CP rank's tokens and a sequence's order).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "device_reduce.cuh"
#include "host_checks.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"
#include "softmax_rows.cuh"

namespace sluice::executor::kernels {
namespace {

constexpr int kRowThreads = 256;
constexpr int kSumThreads = 1024;
constexpr int kThreads = 256;

// The column of `target` in this rank's part [first_id, first_id + part), or -1.
__device__ int local_column(int target, int first_id, int part) {
  const int column = target - first_id;
  return target >= 0 && column >= 0 && column < part ? column : -1;
}

template <bool kAligned>
__global__ void __launch_bounds__(kRowThreads)
    vocab_parallel_normalizer_kernel(const bf16* logits, int rows, int part, float* local, float* row_max) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const detail::SoftmaxNormalizer normalizer =
      detail::row_normalizer<kAligned, kRowThreads>(logits + row * part, part, scratch);
  if (threadIdx.x == 0) {
    local[row] = normalizer.max;
    local[rows + row] = normalizer.sum;
    row_max[row] = normalizer.max;
  }
}

// A thread per row.
__global__ void vocab_parallel_sums_kernel(const bf16* logits, const std::int32_t* targets, int rows, int part,
                                           int first_id, const float* local, const float* row_max, float* sums) {
  const int row = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (row >= rows) return;
  sums[row] = local[rows + row] * expf(local[row] - row_max[row]);  // 0 where this rank saw only -inf
  const int column = local_column(targets[row], first_id, part);
  sums[rows + row] = column >= 0 ? __bfloat162float(logits[static_cast<std::int64_t>(row) * part + column]) : 0.0f;
}

template <bool kAligned>
__global__ void __launch_bounds__(kRowThreads)
    vocab_parallel_loss_kernel(const bf16* logits, const std::int32_t* targets, int rows, int part, int first_id,
                               const float* row_max, const float* sums, float scale, int own_begin, int own_end,
                               float* row_loss, bf16* dlogits) {
  const std::int64_t row = blockIdx.x;
  const int target = targets[row];
  bf16* row_gradient = dlogits + row * part;
  if (target < 0) {  // the same for the whole block
    detail::write_zero_row<kAligned, kRowThreads>(part, row_gradient);
    if (threadIdx.x == 0) row_loss[row] = 0.0f;
    return;
  }
  detail::write_softmax_gradient<kAligned, kRowThreads>(logits + row * part, part, row_max[row], sums[row],
                                                        local_column(target, first_id, part), scale, row_gradient);
  if (threadIdx.x == 0) {
    const bool own = row >= own_begin && row < own_end;
    row_loss[row] = own ? row_max[row] + logf(sums[row]) - sums[rows + row] : 0.0f;
  }
}

__device__ float to_float(float x) { return x; }
__device__ float to_float(bf16 x) { return __bfloat162float(x); }
__device__ void store(float x, float* out) { *out = x; }
__device__ void store(float x, bf16* out) { *out = __float2bfloat16(x); }

template <class T, bool kMaximum>
__global__ void reduce_parts_kernel(const T* parts, int members, std::int64_t count, T* out) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float value = to_float(parts[i]);
    for (int j = 1; j < members; ++j) {
      const float next = to_float(parts[j * count + i]);
      value = kMaximum ? fmaxf(value, next) : value + next;
    }
    store(value, out + i);
  }
}

template <bool kScatter>
__global__ void move_rows_kernel(const bf16* in, const std::int32_t* index, int cols, bf16* out) {
  const std::int64_t row = blockIdx.x;
  const std::int64_t from = kScatter ? row : index[row];
  const std::int64_t to = kScatter ? index[row] : row;
  for (int c = threadIdx.x; c < cols; c += kThreads) out[to * cols + c] = in[from * cols + c];
}

template <bool kScatter>
void move_rows(const bf16* in, const std::int32_t* index, int rows, int cols, bf16* out, cudaStream_t stream,
               const char* name) {
  sluice::require(rows >= 0, "rows: must be >= 0, got ", rows);
  detail::require_positive(cols, "cols");
  detail::require_pointer(in, "in");
  detail::require_pointer(index, "index");
  detail::require_pointer(out, "out");
  if (rows == 0) return;
  move_rows_kernel<kScatter><<<static_cast<unsigned int>(rows), kThreads, 0, stream>>>(in, index, cols, out);
  SLUICE_LAUNCH_CHECK(name);
}

void require_part(int rows, int part, const void* logits) {
  detail::require_positive(rows, "rows");
  detail::require_positive(part, "part");
  detail::require_pointer(logits, "logits");
}

template <class T, bool kMaximum>
void reduce_parts(const T* parts, int members, std::int64_t count, T* out, cudaStream_t stream, const char* name) {
  detail::require_positive(members, "members");
  sluice::require(count >= 0, "count: must be >= 0, got ", count);
  detail::require_pointer(parts, "parts");
  detail::require_pointer(out, "out");
  if (count == 0) return;
  reduce_parts_kernel<T, kMaximum>
      <<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(parts, members, count, out);
  SLUICE_LAUNCH_CHECK(name);
}

}  // namespace

void vocab_parallel_normalizer(const bf16* logits, int rows, int part, float* local, float* row_max,
                               cudaStream_t stream) {
  require_part(rows, part, logits);
  detail::require_pointer(local, "local");
  detail::require_pointer(row_max, "row_max");
  const auto blocks = static_cast<unsigned int>(rows);
  if (detail::rows_aligned(part, {logits}))
    vocab_parallel_normalizer_kernel<true><<<blocks, kRowThreads, 0, stream>>>(logits, rows, part, local, row_max);
  else
    vocab_parallel_normalizer_kernel<false><<<blocks, kRowThreads, 0, stream>>>(logits, rows, part, local, row_max);
  SLUICE_LAUNCH_CHECK("vocab_parallel_normalizer");
}

void vocab_parallel_sums(const bf16* logits, const std::int32_t* targets, int rows, int part, int first_id,
                         const float* local, const float* row_max, float* sums, cudaStream_t stream) {
  require_part(rows, part, logits);
  detail::require_pointer(targets, "targets");
  detail::require_pointer(local, "local");
  detail::require_pointer(row_max, "row_max");
  detail::require_pointer(sums, "sums");
  vocab_parallel_sums_kernel<<<static_cast<unsigned int>(detail::ceil_div(rows, kThreads)), kThreads, 0, stream>>>(
      logits, targets, rows, part, first_id, local, row_max, sums);
  SLUICE_LAUNCH_CHECK("vocab_parallel_sums");
}

void vocab_parallel_loss(const bf16* logits, const std::int32_t* targets, int rows, int part, int first_id,
                         const float* row_max, const float* sums, float scale, int own_begin, int own_end,
                         float* row_loss, bf16* dlogits, float* loss_sum_accum, cudaStream_t stream) {
  require_part(rows, part, logits);
  sluice::require(std::isfinite(scale), "scale: must be finite, got ", scale);
  sluice::require(0 <= own_begin && own_begin <= own_end && own_end <= rows, "own rows: [", own_begin, ", ", own_end,
                  ") is not within [0, ", rows, "]");
  detail::require_pointer(targets, "targets");
  detail::require_pointer(row_max, "row_max");
  detail::require_pointer(sums, "sums");
  detail::require_pointer(row_loss, "row_loss");
  detail::require_pointer(dlogits, "dlogits");
  detail::require_pointer(loss_sum_accum, "loss_sum_accum");
  const auto blocks = static_cast<unsigned int>(rows);
  if (detail::rows_aligned(part, {logits, dlogits}))
    vocab_parallel_loss_kernel<true><<<blocks, kRowThreads, 0, stream>>>(
        logits, targets, rows, part, first_id, row_max, sums, scale, own_begin, own_end, row_loss, dlogits);
  else
    vocab_parallel_loss_kernel<false><<<blocks, kRowThreads, 0, stream>>>(
        logits, targets, rows, part, first_id, row_max, sums, scale, own_begin, own_end, row_loss, dlogits);
  SLUICE_LAUNCH_CHECK("vocab_parallel_loss");
  detail::sum_into_kernel<kSumThreads><<<1, kSumThreads, 0, stream>>>(row_loss, rows, loss_sum_accum);
  SLUICE_LAUNCH_CHECK("vocab_parallel_loss (loss sum)");
}

void sum_parts(const bf16* parts, int members, std::int64_t count, bf16* out, cudaStream_t stream) {
  reduce_parts<bf16, false>(parts, members, count, out, stream, "sum_parts (bf16)");
}

void sum_parts(const float* parts, int members, std::int64_t count, float* out, cudaStream_t stream) {
  reduce_parts<float, false>(parts, members, count, out, stream, "sum_parts (fp32)");
}

void max_parts(const float* parts, int members, std::int64_t count, float* out, cudaStream_t stream) {
  reduce_parts<float, true>(parts, members, count, out, stream, "max_parts");
}

void gather_rows(const bf16* in, const std::int32_t* index, int rows, int cols, bf16* out, cudaStream_t stream) {
  move_rows<false>(in, index, rows, cols, out, stream, "gather_rows");
}

void scatter_rows(const bf16* in, const std::int32_t* index, int rows, int cols, bf16* out, cudaStream_t stream) {
  move_rows<true>(in, index, rows, cols, out, stream, "scatter_rows");
}

}  // namespace sluice::executor::kernels
