// Rotary embedding in place on the q and k columns of a packed QKV buffer. One block per token: each
// thread computes the angle of one rotation pair once (in double, so that positions of long sequences
// keep their precision) and applies it to that pair in every head of q and of k.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "host_checks.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"

namespace sluice::executor::kernels {
namespace {

constexpr int kThreads = 64;

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

__device__ void rotate_pair(bf16* head, int i, int half, float cos_angle, float sin_angle) {
  const float first = __bfloat162float(head[i]);
  const float second = __bfloat162float(head[i + half]);
  head[i] = __float2bfloat16(first * cos_angle - second * sin_angle);
  head[i + half] = __float2bfloat16(second * cos_angle + first * sin_angle);
}

__global__ void __launch_bounds__(kThreads) rope_kernel(RopeArgs args) {
  const int token = static_cast<int>(blockIdx.x);
  const double position =
      args.positions != nullptr ? args.positions[token] : position_in_sequence(args.cu_seqlens, args.num_seqs, token);
  const int half = args.head_dim / 2;
  const std::int64_t row = static_cast<std::int64_t>(token) * args.row_stride;
  for (int i = threadIdx.x; i < half; i += kThreads) {
    const double angle = args.direction * position * pow(args.theta, -2.0 * i / args.head_dim);
    double sin_angle = 0.0;
    double cos_angle = 0.0;
    sincos(angle, &sin_angle, &cos_angle);
    for (int head = 0; head < args.num_heads; ++head) {
      const std::int64_t column = row + static_cast<std::int64_t>(head) * args.head_dim;
      rotate_pair(args.q + column, i, half, static_cast<float>(cos_angle), static_cast<float>(sin_angle));
      rotate_pair(args.k + column, i, half, static_cast<float>(cos_angle), static_cast<float>(sin_angle));
    }
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
  rope_kernel<<<static_cast<unsigned int>(batch.total_tokens), kThreads, 0, stream>>>(args);
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
