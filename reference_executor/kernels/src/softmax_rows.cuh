#pragma once
// The row walks a cross-entropy is made of, shared by the whole-vocabulary kernel (cross_entropy.cu) and the
// vocab-parallel one (parallel.cu): a row's softmax normalizer in one read, and the gradient softmax − one-hot in
// a second read and one write. A block of kThreads takes a row, 8 values per access (vector_access.cuh).
#include <cuda_bf16.h>

#include "device_reduce.cuh"
#include "vector_access.cuh"

namespace sluice::executor::kernels::detail {

// The normalizer of row[0, cols), the same in every thread of the block.
template <bool kAligned, int kThreads>
__device__ inline SoftmaxNormalizer row_normalizer(const __nv_bfloat16* row, int cols, float* scratch) {
  SoftmaxNormalizer local;
  for (int c = first_vector_column(); c < cols; c += kVectorColumnStep<kThreads>) {
    float values[kVector];
    load_vector<kAligned>(row + c, cols - c, values);
#pragma unroll
    for (int e = 0; e < kVector; ++e)
      if (c + e < cols) local.add(values[e]);
  }
  return block_normalizer(local, scratch);
}

// gradient = (exp(row − max) / sum − onehot(target_column)) · scale over [0, cols); target_column −1 when the
// target's column is not in the row. gradient may be row.
template <bool kAligned, int kThreads>
__device__ inline void write_softmax_gradient(const __nv_bfloat16* row, int cols, float max, float sum,
                                              int target_column, float scale, __nv_bfloat16* gradient) {
  const float inverse_sum = 1.0f / sum;
  for (int c = first_vector_column(); c < cols; c += kVectorColumnStep<kThreads>) {
    float values[kVector];
    load_vector<kAligned>(row + c, cols - c, values);
#pragma unroll
    for (int e = 0; e < kVector; ++e)
      values[e] = (expf(values[e] - max) * inverse_sum - (c + e == target_column ? 1.0f : 0.0f)) * scale;
    store_vector<kAligned>(gradient + c, cols - c, values);
  }
}

template <bool kAligned, int kThreads>
__device__ inline void write_zero_row(int cols, __nv_bfloat16* row) {
  const float zeros[kVector] = {};
  for (int c = first_vector_column(); c < cols; c += kVectorColumnStep<kThreads>)
    store_vector<kAligned>(row + c, cols - c, zeros);
}

}  // namespace sluice::executor::kernels::detail
