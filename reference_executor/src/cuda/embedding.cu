// Token embedding kernels (embedding.hpp).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "embedding.hpp"
#include "sluice_executor/cuda_check.hpp"

namespace sluice::executor::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void embedding_forward_kernel(const __nv_bfloat16* table, int first_id, int part, const std::int32_t* ids,
                                         int hidden, __nv_bfloat16* out) {
  const std::int64_t token = blockIdx.x;
  const std::int64_t row = ids[token] - first_id;
  const bool held = row >= 0 && row < part;
  for (int c = static_cast<int>(threadIdx.x); c < hidden; c += static_cast<int>(blockDim.x))
    out[token * hidden + c] = held ? table[row * hidden + c] : __float2bfloat16(0.0f);
}

__global__ void embedding_backward_kernel(const __nv_bfloat16* dout, const std::int32_t* unique_ids,
                                          const std::int32_t* offsets, const std::int32_t* positions, int hidden,
                                          int first_id, int part, float* dtable) {
  const int u = static_cast<int>(blockIdx.x);
  const int c = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
  const std::int64_t row = unique_ids[u] - first_id;
  if (c >= hidden || row < 0 || row >= part) return;
  float sum = 0.0f;
  for (int k = offsets[u]; k < offsets[u + 1]; ++k)
    sum += __bfloat162float(dout[static_cast<std::int64_t>(positions[k]) * hidden + c]);
  dtable[row * hidden + c] += sum;
}

}  // namespace

void embedding_forward(const __nv_bfloat16* table, int first_id, int part, const std::int32_t* ids, int tokens,
                       int hidden, __nv_bfloat16* out, cudaStream_t stream) {
  if (tokens == 0) return;
  embedding_forward_kernel<<<static_cast<unsigned>(tokens), kThreads, 0, stream>>>(table, first_id, part, ids, hidden,
                                                                                   out);
  SLUICE_LAUNCH_CHECK("embedding_forward_kernel");
}

void embedding_backward(const __nv_bfloat16* dout, const std::int32_t* unique_ids, const std::int32_t* offsets,
                        const std::int32_t* positions, int unique, int hidden, int first_id, int part, float* dtable,
                        cudaStream_t stream) {
  if (unique == 0) return;
  const dim3 grid(static_cast<unsigned>(unique), static_cast<unsigned>((hidden + kThreads - 1) / kThreads));
  embedding_backward_kernel<<<grid, kThreads, 0, stream>>>(dout, unique_ids, offsets, positions, hidden, first_id, part,
                                                           dtable);
  SLUICE_LAUNCH_CHECK("embedding_backward_kernel");
}

}  // namespace sluice::executor::cuda
