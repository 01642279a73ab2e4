#pragma once
// The token embedding on the device: a gather forward and a deterministic backward (each table row summed by one
// thread per column over the row's positions in a fixed order, no atomics). With TP the table is vocab-parallel: a
// lane holds rows [first_id, first_id + part) of it, and a token outside them embeds as zeros (the reduce-scatter
// after the lookup sums the lanes' rows).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace sluice::executor::cuda {

// out[t, :] = table[ids[t] - first_id, :] for t < tokens, zeros where ids[t] is outside [first_id, first_id + part);
// table [part, hidden], out [tokens, hidden].
void embedding_forward(const __nv_bfloat16* table, int first_id, int part, const std::int32_t* ids, int tokens,
                       int hidden, __nv_bfloat16* out, cudaStream_t stream);

// dtable[unique_ids[u] - first_id, :] += Σ dout[positions[k], :] over k in [offsets[u], offsets[u + 1]), for u <
// unique whose id is in [first_id, first_id + part): the positions of every distinct token of the micro-batch,
// grouped by token (a CSR built on the host).
void embedding_backward(const __nv_bfloat16* dout, const std::int32_t* unique_ids, const std::int32_t* offsets,
                        const std::int32_t* positions, int unique, int hidden, int first_id, int part, float* dtable,
                        cudaStream_t stream);

}  // namespace sluice::executor::cuda
