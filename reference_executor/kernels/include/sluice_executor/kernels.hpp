#pragma once
// The reference executor's custom GPU kernels (sm_90): bf16 storage, fp32 arithmetic. Each function
// checks its arguments on the host (sluice::invalid_input, a std::invalid_argument, naming the argument),
// enqueues its work on `stream` and throws std::runtime_error if the launch fails; nothing synchronises.
// Device-side data (cu_seqlens values, targets) cannot be checked on the host: their preconditions are
// stated below. sluice_executor/reference.hpp holds the float64 CPU version of every operation here.
//
// Layouts: the tokens of a micro-batch's sequences are packed back to back; cu_seqlens is a device
// int32 array of num_seqs + 1 offsets {0, l0, l0 + l1, ...}. Activations are row-major [tokens, cols].
// q, k and v (and dq, dk, dv) take a row stride so that they can be the column ranges of one packed QKV
// buffer [tokens, 3 * hidden]: q = qkv, k = qkv + hidden, v = qkv + 2 * hidden, stride 3 * hidden.
// Head h occupies columns [h * head_dim, (h + 1) * head_dim).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace sluice::executor::kernels {

using bf16 = __nv_bfloat16;

// The packed sequences of one micro-batch. Preconditions on the device data: cu_seqlens[0] == 0, offsets
// never decrease, cu_seqlens[num_seqs] == total_tokens, and no sequence is longer than max_seqlen (tokens of
// a longer one past max_seqlen would be left unwritten by attention).
struct VarlenBatch {
  const std::int32_t* cu_seqlens = nullptr;  // device, num_seqs + 1 offsets
  int num_seqs = 0;
  int max_seqlen = 0;
  int total_tokens = 0;
};

// The attention heads of one layer: hidden = num_heads * head_dim.
struct HeadShape {
  int num_heads = 0;
  int head_dim = 0;
};

// ---- Attention (FlashAttention-2 style, causal within each sequence, scale 1 / sqrt(head_dim)) ----
// head_dim must be 64 or 128. Tiles are read 8 bf16 (16 bytes) at a time, so q, k, v and dout must be
// 16-byte aligned and qkv_row_stride a multiple of 8 elements. Row strides are at least hidden.

// The implementation: mma keeps scores and accumulators in registers (mma.sync, ldmatrix, cp.async), wmma keeps
// them in shared memory (3.5-4x slower; the fallback and the reference mma is tested against). mma64 is mma with
// the forward's earlier 64-row query tiles (16 rows a warp, not 32), kept to measure what the wider tiles give and
// as a fallback should they not. mma_single_pass is mma with the backward in one pass (5 products instead of 7; dQ
// summed in a fixed order through an fp32 workspace, so still deterministic). All need sm_80+.
enum class AttentionKernel { wmma, mma, mma64, mma_single_pass };

// The executor's choice, fixed when it is built (CMake option SLUICE_EXECUTOR_ATTENTION, default mma).
#ifndef SLUICE_EXECUTOR_ATTENTION
#error "SLUICE_EXECUTOR_ATTENTION (wmma, mma, mma64 or mma_single_pass) comes from the sluice_executor_kernels target"
#endif
inline constexpr AttentionKernel kDefaultAttentionKernel = AttentionKernel::SLUICE_EXECUTOR_ATTENTION;

// out: [total_tokens, hidden] (row stride hidden); lse: [num_heads, total_tokens] fp32, the natural
// log-sum-exp of each query's scaled scores, kept for the backward.
void attention_forward(const VarlenBatch& batch, const HeadShape& heads, const bf16* q, const bf16* k, const bf16* v,
                       std::int64_t qkv_row_stride, bf16* out, float* lse, cudaStream_t stream,
                       AttentionKernel kernel = kDefaultAttentionKernel);

// Floats of device workspace attention_backward and block_attention_backward need for these queries (the batch, or
// the block's query side): num_heads * total_tokens (delta = rowsum(dout ∘ out) per head and token), and for
// mma_single_pass dQ's fp32 partial sums (num_heads * total_tokens * head_dim more) and a counter per sequence, head
// and 64-row query tile.
std::size_t attention_backward_workspace_floats(const VarlenBatch& queries, const HeadShape& heads,
                                                AttentionKernel kernel = kDefaultAttentionKernel);

// Gradients given dout [total_tokens, hidden] and the forward's out and lse. dq, dk, dv (row stride
// dqkv_row_stride; they may be the column ranges of one packed buffer, but must not overlap the inputs)
// are overwritten, not accumulated. workspace: attention_backward_workspace_floats(batch, heads, kernel) floats.
// Deterministic: no atomics. dq is computed in its own pass over key tiles, dk and dv in a pass over query tiles;
// mma_single_pass computes all three in the second, its key tiles adding their dQ shares in turn.
void attention_backward(const VarlenBatch& batch, const HeadShape& heads, const bf16* q, const bf16* k, const bf16* v,
                        std::int64_t qkv_row_stride, const bf16* out, const bf16* dout, const float* lse, bf16* dq,
                        bf16* dk, bf16* dv, std::int64_t dqkv_row_stride, float* workspace, cudaStream_t stream,
                        AttentionKernel kernel = kDefaultAttentionKernel);

// ---- Ring attention's block steps (Liu et al., "Ring Attention with Blockwise Transformers", arXiv 2310.01889) ----
// The queries of one block against the keys and values of another: each side packed as a VarlenBatch over the same
// sequences (a sequence may have no rows on a side), every row with its position in its sequence (`positions`, device
// int32, ascending within each sequence). A key is visible to the queries of its sequence whose position is not
// before its own. q has row stride q_row_stride, k and v (and dk, dv) kv_row_stride / dkv_row_stride, out and dout
// num_heads * head_dim; alignment and head_dim as attention_forward's.
struct PositionedBatch {
  VarlenBatch rows;
  const std::int32_t* positions = nullptr;  // device, rows.total_tokens entries
};

// out [queries, hidden] and lse [num_heads, queries]: this block's attention alone; a query that sees none of its
// keys gets zeros and lse -inf. attention_merge folds the blocks together.
void block_attention_forward(const PositionedBatch& queries, const PositionedBatch& keys, const HeadShape& heads,
                             const bf16* q, std::int64_t q_row_stride, const bf16* k, const bf16* v,
                             std::int64_t kv_row_stride, bf16* out, float* lse, cudaStream_t stream,
                             AttentionKernel kernel = kDefaultAttentionKernel);

// This block's share of the gradients, given the whole attention's out, lse (merged over every block) and dout:
// dq [queries] and dk, dv [keys] are overwritten (zeros where no pair of the block is visible); workspace:
// attention_backward_workspace_floats(queries.rows, heads, kernel) floats.
void block_attention_backward(const PositionedBatch& queries, const PositionedBatch& keys, const HeadShape& heads,
                              const bf16* q, std::int64_t q_row_stride, const bf16* k, const bf16* v,
                              std::int64_t kv_row_stride, const bf16* out, const bf16* dout, const float* lse, bf16* dq,
                              std::int64_t dq_row_stride, bf16* dk, bf16* dv, std::int64_t dkv_row_stride,
                              float* workspace, cudaStream_t stream, AttentionKernel kernel = kDefaultAttentionKernel);

// Folds one block's out [tokens, hidden] and lse [num_heads, tokens] into the running out (fp32) and lse by their
// log-sum-exp: out = out·e^(lse − new) + block_out·e^(block_lse − new), new = log(e^lse + e^block_lse). Start
// from out = 0, lse = -inf (fill); rows at -inf on both sides stay so.
void attention_merge(const bf16* block_out, const float* block_lse, int tokens, const HeadShape& heads, float* out,
                     float* lse, cudaStream_t stream);

// ---- RMSNorm ----

// y = x / sqrt(mean(x^2) + eps) * weight; x, y: [rows, cols]; weight: [cols]; rstd: [rows] fp32. y may be x.
void rmsnorm_forward(const bf16* x, const bf16* weight, int rows, int cols, float eps, bf16* y, float* rstd,
                     cudaStream_t stream);

// A residual add and the norm after it in one pass: sum = a + b (rounded to bf16), then rmsnorm_forward of sum,
// with the same bits as add then rmsnorm_forward. sum may be a or b. With b null it is rmsnorm_forward of a (sum
// unused).
void add_rmsnorm_forward(const bf16* a, const bf16* b, const bf16* weight, int rows, int cols, float eps, bf16* sum,
                         bf16* y, float* rstd, cudaStream_t stream);

// Floats of workspace rmsnorm_backward needs for [rows, cols]; cols at most 49,152 (its shared memory).
std::size_t rmsnorm_backward_workspace_floats(int rows, int cols);

// dx: [rows, cols] (overwritten) = the norm's gradient + residual, where residual (null: none) is the gradient that
// reaches x around the norm, added before the one rounding to bf16; dx may be x, dy or residual.
// dweight_accum: [cols] fp32, added to (micro-batches accumulate; zero it with fill_zero first for a fresh
// gradient). The weight gradient is a deterministic two-stage reduction over row chunks fixed by `rows`, through
// `workspace` (rmsnorm_backward_workspace_floats(rows, cols) floats).
void rmsnorm_backward(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy, const bf16* residual,
                      int rows, int cols, bf16* dx, float* dweight_accum, float* workspace, cudaStream_t stream);

// ---- Rotary embedding ("rotate_half", LLaMA) ----
// In every head, the pair (x_i, x_{i + head_dim/2}) turns by position * theta^(-2i / head_dim), where a
// token's position is its index within its own sequence. In place on the first hidden columns of each of
// the batch.total_tokens rows of q and of k (which share row_stride); head_dim must be even. `positions` (device
// int32, a position per row) overrides the index for rows that are not a sequence's prefix (a ring block).

void rope_forward(const VarlenBatch& batch, const HeadShape& heads, bf16* q, bf16* k, std::int64_t row_stride,
                  double theta, cudaStream_t stream, const std::int32_t* positions = nullptr);

// The gradient: rotation by the negative angle, in place on dq and dk.
void rope_backward(const VarlenBatch& batch, const HeadShape& heads, bf16* dq, bf16* dk, std::int64_t row_stride,
                   double theta, cudaStream_t stream, const std::int32_t* positions = nullptr);

// ---- SwiGLU ----

// gate_up: [rows, 2 * ffn] (gate in the first ffn columns, up in the second); out = silu(gate) * up: [rows, ffn].
void swiglu_forward(const bf16* gate_up, int rows, int ffn, bf16* out, cudaStream_t stream);

// dgate_up: [rows, 2 * ffn] from dout [rows, ffn].
void swiglu_backward(const bf16* gate_up, const bf16* dout, int rows, int ffn, bf16* dgate_up, cudaStream_t stream);

// ---- Elementwise ----

// out = a + b (out may be a or b).
void add(const bf16* a, const bf16* b, bf16* out, std::int64_t count, cudaStream_t stream);
// accum += b.
void add_inplace(bf16* accum, const bf16* b, std::int64_t count, cudaStream_t stream);
void add_inplace(float* accum, const bf16* b, std::int64_t count, cudaStream_t stream);
// Round to nearest even.
void convert(const float* in, bf16* out, std::int64_t count, cudaStream_t stream);
void convert(const bf16* in, float* out, std::int64_t count, cudaStream_t stream);
void fill_zero(bf16* data, std::int64_t count, cudaStream_t stream);
void fill_zero(float* data, std::int64_t count, cudaStream_t stream);
void fill(float* data, float value, std::int64_t count, cudaStream_t stream);

// ---- Loss ----

// Cross-entropy over logits [rows, vocab] with targets [rows] (int32, -1 = ignored row), softmax in fp32:
// row_loss[r] = logsumexp(logits_r) - logits_r[target] (0 for ignored rows); dlogits = (softmax -
// onehot(target)) * scale (zero rows for ignored ones); *loss_sum_accum += Σ row_loss, summed in a fixed
// order (deterministic). A target outside [0, vocab) other than -1 makes that row's loss NaN (so that it
// shows in the sum) and its dlogits softmax * scale. dlogits may be logits (the logits are not needed after).
void cross_entropy(const bf16* logits, const std::int32_t* targets, int rows, int vocab, float scale, float* row_loss,
                   bf16* dlogits, float* loss_sum_accum, cudaStream_t stream);

// ---- Tensor and context parallelism ----

// The vocab-parallel cross-entropy of Megatron-LM (Shoeybi et al., "Megatron-LM", §3): each TP rank holds logits
// [rows, part] of the vocabulary's columns [first_id, first_id + part), and the full logits are never gathered. The
// caller all-reduces between the kernels: the maxima of vocab_parallel_normalizer (max), then the sums of
// vocab_parallel_sums (sum). Targets as cross_entropy's (-1 = ignored row). The logits are read twice in all (by
// the first and the last kernel).

// Each row's softmax normalizer over this rank's columns, in one read: local[r] the largest logit, local[rows + r]
// Σ exp(logit - local[r]) (local: 2 * rows floats); row_max[r] = local[r], for the caller to all-reduce.
void vocab_parallel_normalizer(const bf16* logits, int rows, int part, float* local, float* row_max,
                               cudaStream_t stream);

// Given every rank's maxima reduced: sums[r] = Σ exp(logit - row_max[r]) over this rank's columns (local's sum
// rescaled), and sums[rows + r] the target's logit where this rank holds its column, else 0 (so the sum over ranks
// is the target's logit). Reads no logit but the targets'. sums: 2 * rows floats.
void vocab_parallel_sums(const bf16* logits, const std::int32_t* targets, int rows, int part, int first_id,
                         const float* local, const float* row_max, float* sums, cudaStream_t stream);

// Given the sums reduced: dlogits = (softmax - onehot(target)) * scale over this rank's columns (zero rows for
// ignored ones); row_loss[r] = row_max + log(sum) - target logit for the rows [own_begin, own_end) with a target, 0
// elsewhere (each row's loss is counted by the one rank that owns it); *loss_sum_accum += Σ row_loss in a fixed order.
// dlogits may be logits.
void vocab_parallel_loss(const bf16* logits, const std::int32_t* targets, int rows, int part, int first_id,
                         const float* row_max, const float* sums, float scale, int own_begin, int own_end,
                         float* row_loss, bf16* dlogits, float* loss_sum_accum, cudaStream_t stream);

// The end of a reduce-scatter or an all-reduce: parts holds `members` arrays of `count` values back to back, and
// out[i] is their sum in part order (fp32 arithmetic) or their maximum. out may be parts (the first array).
void sum_parts(const bf16* parts, int members, std::int64_t count, bf16* out, cudaStream_t stream);
void sum_parts(const float* parts, int members, std::int64_t count, float* out, cudaStream_t stream);
void max_parts(const float* parts, int members, std::int64_t count, float* out, cudaStream_t stream);

// Rows [*, cols] moved by a device int32 index of `rows` entries (distinct, within the other side's rows):
// gather_rows: out[i] = in[index[i]]; scatter_rows: out[index[i]] = in[i].
void gather_rows(const bf16* in, const std::int32_t* index, int rows, int cols, bf16* out, cudaStream_t stream);
void scatter_rows(const bf16* in, const std::int32_t* index, int rows, int cols, bf16* out, cudaStream_t stream);

}  // namespace sluice::executor::kernels
