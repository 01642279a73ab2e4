// Rotary embedding in place on the q and k columns of a packed QKV buffer. One block per token: its threads
// compute the token's head_dim / 2 angles once (in double, so that positions of long sequences keep their
// precision) into shared memory, then rotate 8 pairs each at a time, in every head of q and of k, 8 values per
// access where the rows allow it (vector_access.cuh).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "host_checks.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"
#include "vector_access.cuh"

namespace sluice::executor::kernels {
namespace {

using detail::kVector;
using detail::load_vector;
using detail::store_vector;

constexpr int kThreads = 128;
constexpr int kMaxHalf = 128;  // head_dim at most 256: the angles' shared arrays

struct RopeArgs {
  bf16* q;
  bf16* k;
  std::int64_t row_stride;
  const std::int32_t* cu_seqlens;
  const std::int32_t* positions;  // null: the index within the sequence
  int num_seqs;
  int num_heads;
  int head_dim;
  double theta;
  double direction;  // +1 forward, -1 backward (the transpose of a rotation is the rotation back)
};

// The token's index within its own sequence: the last sequence whose first offset is <= token (sequences
// of length 0 share their offset with the next one and are skipped by taking the last).
__device__ int position_in_sequence(const std::int32_t* cu_seqlens, int num_seqs, int token) {
  int low = 0;
  int high = num_seqs - 1;
  while (low < high) {
    const int middle = (low + high + 1) / 2;
    if (cu_seqlens[middle] <= token) {
      low = middle;
    } else {
      high = middle - 1;
    }
  }
  return token - cu_seqlens[low];
}

template <bool kAligned>
__global__ void __launch_bounds__(kThreads) rope_kernel(RopeArgs args) {
  __shared__ float cosines[kMaxHalf];
  __shared__ float sines[kMaxHalf];
  const int token = static_cast<int>(blockIdx.x);
  const double position =
      args.positions != nullptr ? args.positions[token] : position_in_sequence(args.cu_seqlens, args.num_seqs, token);
  const int half = args.head_dim / 2;
  for (int i = threadIdx.x; i < half; i += kThreads) {
    const double angle = args.direction * position * pow(args.theta, -2.0 * i / args.head_dim);
    double sin_angle = 0.0;
    double cos_angle = 0.0;
    sincos(angle, &sin_angle, &cos_angle);
    cosines[i] = static_cast<float>(cos_angle);
    sines[i] = static_cast<float>(sin_angle);
  }
  __syncthreads();
  // Work items: q's heads, then k's, each in vectors of 8 pairs (x_i, x_{i + half}).
  const int vectors = (half + kVector - 1) / kVector;
  const std::int64_t row = static_cast<std::int64_t>(token) * args.row_stride;
  for (int item = threadIdx.x; item < 2 * args.num_heads * vectors; item += kThreads) {
    const int head = item / vectors;
    const int i = item % vectors * kVector;
    bf16* first_half = (head < args.num_heads ? args.q : args.k) + row +
                       static_cast<std::int64_t>(head % args.num_heads) * args.head_dim + i;
    float first[kVector];
    float second[kVector];
    load_vector<kAligned>(first_half, half - i, first);
    load_vector<kAligned>(first_half + half, half - i, second);
#pragma unroll
    for (int e = 0; e < kVector; ++e) {
      const float cos_angle = i + e < half ? cosines[i + e] : 0.0f;
      const float sin_angle = i + e < half ? sines[i + e] : 0.0f;
      const float x = first[e];
      first[e] = x * cos_angle - second[e] * sin_angle;
      second[e] = second[e] * cos_angle + x * sin_angle;
    }
    store_vector<kAligned>(first_half, half - i, first);
    store_vector<kAligned>(first_half + half, half - i, second);
  }
}

void launch_rope(const VarlenBatch& batch, const HeadShape& heads, bf16* q, bf16* k, std::int64_t row_stride,
                 double theta, const std::int32_t* positions, double direction, cudaStream_t stream, const char* name,
                 const char* q_name, const char* k_name) {
  detail::require_pointer(batch.cu_seqlens, "cu_seqlens");
  detail::require_positive(batch.num_seqs, "num_seqs");
  detail::require_positive(batch.total_tokens, "total_tokens");
  detail::require_positive(heads.num_heads, "num_heads");
  detail::require_positive(heads.head_dim, "head_dim");
  sluice::require(heads.head_dim % 2 == 0, "head_dim: must be even for rotary embedding, got ", heads.head_dim);
  sluice::require(heads.head_dim <= 2 * kMaxHalf, "head_dim: rotary embedding takes at most ", 2 * kMaxHalf, ", got ",
                  heads.head_dim);
  detail::require_pointer(q, q_name);
  detail::require_pointer(k, k_name);
  const std::int64_t hidden = static_cast<std::int64_t>(heads.num_heads) * heads.head_dim;
  sluice::require(row_stride >= hidden, "row_stride: must be >= num_heads * head_dim = ", hidden, ", got ", row_stride);
  sluice::require(theta > 0.0, "theta: must be > 0, got ", theta);
  RopeArgs args{};
  args.q = q;
  args.k = k;
  args.row_stride = row_stride;
  args.cu_seqlens = batch.cu_seqlens;
  args.positions = positions;
  args.num_seqs = batch.num_seqs;
  args.num_heads = heads.num_heads;
  args.head_dim = heads.head_dim;
  args.theta = theta;
  args.direction = direction;
  const auto blocks = static_cast<unsigned int>(batch.total_tokens);
  if (heads.head_dim / 2 % kVector == 0 && detail::rows_aligned(row_stride, {q, k})) {
    rope_kernel<true><<<blocks, kThreads, 0, stream>>>(args);
  } else {
    rope_kernel<false><<<blocks, kThreads, 0, stream>>>(args);
  }
  SLUICE_LAUNCH_CHECK(name);
}

}  // namespace

void rope_forward(const VarlenBatch& batch, const HeadShape& heads, bf16* q, bf16* k, std::int64_t row_stride,
                  double theta, cudaStream_t stream, const std::int32_t* positions) {
  launch_rope(batch, heads, q, k, row_stride, theta, positions, 1.0, stream, "rope_forward", "q", "k");
}

void rope_backward(const VarlenBatch& batch, const HeadShape& heads, bf16* dq, bf16* dk, std::int64_t row_stride,
                   double theta, cudaStream_t stream, const std::int32_t* positions) {
  launch_rope(batch, heads, dq, dk, row_stride, theta, positions, -1.0, stream, "rope_backward", "dq", "dk");
}

}  // namespace sluice::executor::kernels
