#pragma once
// What the attention kernels of attention.cu (wmma, shared-memory accumulators) and attention_mma.cu (mma.sync,
// register accumulators) take, and the mma launchers attention.cu's wrappers dispatch to after checking arguments.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "sluice_executor/kernels.hpp"

namespace sluice::executor::kernels::detail {

struct ForwardArgs {
  const std::int32_t* cu_seqlens;
  const bf16* q;
  const bf16* k;
  const bf16* v;
  std::int64_t qkv_row_stride;
  bf16* out;
  float* lse;
  int total_tokens;
  int num_heads;
  float scale;
};

struct BackwardArgs {
  const std::int32_t* cu_seqlens;
  const bf16* q;
  const bf16* k;
  const bf16* v;
  std::int64_t qkv_row_stride;
  const bf16* dout;
  const float* lse;
  const float* delta;  // filled by the caller before the launch
  bf16* dq;
  bf16* dk;
  bf16* dv;
  std::int64_t dqkv_row_stride;
  int total_tokens;
  int num_heads;
  float scale;
};

// The register-resident kernels: checked arguments, head_dim 64 or 128.
void mma_attention_forward(const VarlenBatch& batch, int head_dim, const ForwardArgs& args, cudaStream_t stream);
void mma_attention_backward(const VarlenBatch& batch, int head_dim, const BackwardArgs& args, cudaStream_t stream);

}  // namespace sluice::executor::kernels::detail
