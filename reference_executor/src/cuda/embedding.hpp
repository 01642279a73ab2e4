#pragma once
// The token embedding on the device: a gather forward and a deterministic backward (each table row summed by one
// thread per column over the row's positions in a fixed order, no atomics).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace sluice::executor::cuda {

// out[t, :] = table[ids[t], :] for t < tokens; table [vocab, hidden], out [tokens, hidden].
void embedding_forward(const __nv_bfloat16* table, const std::int32_t* ids, int tokens, int hidden, __nv_bfloat16* out,
                       cudaStream_t stream);

// dtable[unique_ids[u], :] += Σ dout[positions[k], :] over k in [offsets[u], offsets[u + 1]), for u < unique:
// the positions of every distinct token of the micro-batch, grouped by token (a CSR built on the host).
void embedding_backward(const __nv_bfloat16* dout, const std::int32_t* unique_ids, const std::int32_t* offsets,
                        const std::int32_t* positions, int unique, int hidden, float* dtable, cudaStream_t stream);

}  // namespace sluice::executor::cuda
