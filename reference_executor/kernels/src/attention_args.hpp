#pragma once
// What the attention kernels of attention.cu (wmma, shared-memory accumulators) and attention_mma.cu (mma.sync,
// register accumulators) take, and the mma launchers attention.cu's wrappers dispatch to after checking arguments.
//
// Both kernels run causal self-attention (keys are the queries' rows, a row's position its index in its sequence)
// and ring attention's block steps (Liu et al., "Ring Attention with Blockwise Transformers", arXiv 2310.01889, §3):
// the keys in a packed layout of their own over the same sequences, every row with its position in its sequence.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "sluice_executor/kernels.hpp"

namespace sluice::executor::kernels::detail {

// Where the rows of one side are and which key a query sees. Positions are null for self-attention (a row's
// position is then its index in its sequence, and key_cu_seqlens is cu_seqlens); otherwise positions ascend within
// each sequence on both sides. A key is visible to the queries of its sequence whose position is not before its own.
struct RowLayout {
  const std::int32_t* cu_seqlens;       // the queries' sequence offsets
  const std::int32_t* key_cu_seqlens;   // the keys'
  const std::int32_t* query_positions;  // null, or each query row's position in its sequence
  const std::int32_t* key_positions;    // null, or each key row's
};

struct ForwardArgs {
  RowLayout rows;
  const bf16* q;
  std::int64_t q_row_stride;
  const bf16* k;
  const bf16* v;
  std::int64_t kv_row_stride;
  bf16* out;  // row stride num_heads · head_dim; a query that sees no key gets zeros and lse -inf
  float* lse;
  int total_tokens;  // query rows
  int num_heads;
  float scale;
};

// Rows of the single pass's query (and key) tiles, which its workspace counts turns by.
inline constexpr int kSinglePassTile = 64;

struct BackwardArgs {
  RowLayout rows;
  const bf16* q;
  std::int64_t q_row_stride;
  const bf16* k;
  const bf16* v;
  std::int64_t kv_row_stride;
  const bf16* out;  // the forward's output, from which the caller fills delta before the launch
  const bf16* dout;
  const float* lse;  // the whole attention's (finite for every query row)
  float* delta;
  bf16* dq;
  std::int64_t dq_row_stride;
  bf16* dk;
  bf16* dv;
  std::int64_t dkv_row_stride;
  int total_tokens;  // query rows
  int num_heads;
  float scale;
  // The single pass's workspace (AttentionKernel::mma_single_pass; null otherwise): dQ's fp32 partial sums
  // [num_heads][total_tokens][head_dim], and a turn counter per sequence, head and query tile of kSinglePassTile rows
  // [num_seqs][num_heads][dq_turn_tiles].
  float* dq_accumulator = nullptr;
  int* dq_turns = nullptr;
  int dq_turn_tiles = 0;
};

// The register-resident kernels: checked arguments, head_dim 64 or 128. The forward's and dQ's grids cover the
// query rows, dK and dV's the key rows (for self-attention, keys is queries). The forward's blocks own 128 query rows
// (32 a warp), or 64 (16 a warp) when query_tile_rows is 64. The backward is two kernels (dQ; dK and dV), or the
// single pass when args' dq_turns is set (with dq_accumulator, and the counters zeroed before the launch).
void mma_attention_forward(const VarlenBatch& queries, int head_dim, int query_tile_rows, const ForwardArgs& args,
                           cudaStream_t stream);
void mma_attention_backward(const VarlenBatch& queries, const VarlenBatch& keys, int head_dim, const BackwardArgs& args,
                            cudaStream_t stream);

}  // namespace sluice::executor::kernels::detail
