// Variable-length causal attention, forward and backward, in the manner of FlashAttention-2: each block
// owns one (tile of 64 rows, head, sequence), walks the other operand's tiles up to the causal diagonal,
// and never holds more than one 64×64 block of scores. The same kernels run ring attention's block steps, the
// keys in a layout of their own and the mask by position (attention_args.hpp). Products run on the tensor cores through
// wmma (bf16 16×16×16 fragments, fp32 accumulators); the softmax, its rescaling and its gradient run in fp32 on shared
// memory. Accumulators (O, dQ, dK, dV) live in shared memory as fp32, so that the per-row softmax rescaling can address
// them by row, which wmma's opaque fragments do not allow.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "attention_args.hpp"
#include "attention_rows.cuh"
#include "device_reduce.cuh"
#include "host_checks.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"

namespace sluice::executor::kernels {
namespace {

namespace wmma = nvcuda::wmma;
using detail::attends;
using detail::BackwardArgs;
using detail::first_seeing_query;
using detail::ForwardArgs;
using detail::key_rows;
using detail::query_rows;
using detail::SideRows;
using detail::tile_key_end;
using detail::warp_max;
using detail::warp_sum;

constexpr int kTile = 64;  // query rows per query tile and key rows per key tile
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = kTile / kWarps;  // forward softmax: each warp owns these query rows
constexpr int kFragment = 16;                 // wmma bf16 fragment edge
// Shared rows are padded by 16 bytes (8 bf16 or 4 floats): rows stay 16-byte aligned for vector copies,
// 16-row fragment steps stay 32-byte aligned for wmma, and consecutive rows start in different banks.
constexpr int kPadBf16 = 8;
constexpr int kPadFloat = 4;
constexpr std::size_t kMaxSharedBytes = 227 * 1024;  // sm_90's opt-in limit per block
static_assert(kTile == 2 * 32, "the forward softmax gives each lane two key columns");
static_assert(kTile % kWarps == 0 && kTile % kFragment == 0);

constexpr std::size_t align128(std::size_t bytes) { return (bytes + 127) / 128 * 128; }

// Shared-memory arrays of the attention kernels for one head dimension. Each array is 128-byte aligned
// (wmma needs 32). Leading dimensions are in elements.
template <int kHeadDim>
struct Tiles {
  static_assert(kHeadDim % kFragment == 0);
  static constexpr int ld_head = kHeadDim + kPadBf16;    // bf16 [kTile][head_dim]: Q, K, V, dO
  static constexpr int ld_scores = kTile + kPadFloat;    // fp32 [kTile][kTile]: S, dP
  static constexpr int ld_probs = kTile + kPadBf16;      // bf16 [kTile][kTile]: P, dS as mma operands
  static constexpr int ld_accum = kHeadDim + kPadFloat;  // fp32 [kTile][head_dim]: O, dQ, dK, dV
  static constexpr std::size_t head_bytes = align128(kTile * ld_head * sizeof(bf16));
  static constexpr std::size_t scores_bytes = align128(kTile * ld_scores * sizeof(float));
  static constexpr std::size_t probs_bytes = align128(kTile * ld_probs * sizeof(bf16));
  static constexpr std::size_t accum_bytes = align128(kTile * ld_accum * sizeof(float));
  static constexpr std::size_t rows_bytes = align128(kTile * sizeof(float));

  // What each kernel takes from the arena, in the order it takes it.
  static constexpr std::size_t forward_bytes = 3 * head_bytes + scores_bytes + probs_bytes + accum_bytes;
  static constexpr std::size_t dq_bytes =
      4 * head_bytes + 2 * scores_bytes + probs_bytes + accum_bytes + 2 * rows_bytes;
  static constexpr std::size_t dkdv_bytes =
      4 * head_bytes + 2 * scores_bytes + 2 * probs_bytes + 2 * accum_bytes + 2 * rows_bytes;
  static_assert(forward_bytes <= kMaxSharedBytes && dq_bytes <= kMaxSharedBytes && dkdv_bytes <= kMaxSharedBytes);
};

// Hands out consecutive slices of the dynamic shared memory.
class SharedArena {
public:
  __device__ explicit SharedArena(unsigned char* base) : next_(base) {}

  template <typename T>
  __device__ T* take(std::size_t bytes) {
    T* slice = reinterpret_cast<T*>(next_);
    next_ += bytes;
    return slice;
  }

private:
  unsigned char* next_;
};

// Copies rows [first_row, first_row + kTile) of one head of a sequence into a shared [kTile][ld_head] tile,
// 16 bytes per access. `source` points at the head's first column; row r of the sequence starts at
// source[(sequence.begin + r) * row_stride]. Rows at or past the sequence's end become zeros, so partial
// tiles compute on zeros and never read another sequence's tokens.
template <int kHeadDim>
__device__ void load_head_tile(bf16* tile, const bf16* source, std::int64_t row_stride, SideRows sequence,
                               int first_row) {
  constexpr int kChunksPerRow = kHeadDim / 8;
  for (int i = threadIdx.x; i < kTile * kChunksPerRow; i += kThreads) {
    const int row = i / kChunksPerRow;
    const int col = (i % kChunksPerRow) * 8;
    uint4 chunk = make_uint4(0u, 0u, 0u, 0u);
    if (first_row + row < sequence.length) {
      const std::int64_t token = sequence.begin + first_row + row;
      chunk = *reinterpret_cast<const uint4*>(source + token * row_stride + col);
    }
    *reinterpret_cast<uint4*>(tile + row * Tiles<kHeadDim>::ld_head + col) = chunk;
  }
}

// lse and delta ([num_heads, total_tokens]) of the tile's query rows; rows past the sequence's end get 0.
__device__ void load_row_stats(float* lse_rows, float* delta_rows, const BackwardArgs& args, int head,
                               SideRows sequence, int first_query) {
  for (int row = threadIdx.x; row < kTile; row += kThreads) {
    const int query = first_query + row;
    const std::int64_t index = static_cast<std::int64_t>(head) * args.total_tokens + sequence.begin + query;
    lse_rows[row] = query < sequence.length ? args.lse[index] : 0.0f;
    delta_rows[row] = query < sequence.length ? args.delta[index] : 0.0f;
  }
}

__device__ void zero_fill(float* data, int count) {
  for (int i = threadIdx.x; i < count; i += kThreads) data[i] = 0.0f;
}

// Address of element (row, col) of a matrix stored with wmma layout Layout and leading dimension ld.
template <typename Layout>
__device__ const bf16* element(const bf16* matrix, int ld, int row, int col) {
  if constexpr (std::is_same_v<Layout, wmma::row_major>) {
    return matrix + row * ld + col;
  } else {
    return matrix + col * ld + row;
  }
}

// C (kM×kN, fp32, row-major) = [C +] A (kM×kK) · B (kK×kN), everything in shared memory; A and B are bf16
// stored with layouts LayoutA and LayoutB (col_major reads a row-major array transposed). Each 16×16
// block of C belongs to one warp, so the callers' __syncthreads around the call are the only sync needed.
template <int kM, int kN, int kK, typename LayoutA, typename LayoutB>
__device__ void block_mma(const bf16* a, int lda, const bf16* b, int ldb, float* c, int ldc, bool accumulate) {
  constexpr int kTilesN = kN / kFragment;
  constexpr int kTilesC = (kM / kFragment) * kTilesN;
  for (int tile = static_cast<int>(threadIdx.x / 32); tile < kTilesC; tile += kWarps) {
    const int row = (tile / kTilesN) * kFragment;
    const int col = (tile % kTilesN) * kFragment;
    float* c_tile = c + row * ldc + col;
    wmma::fragment<wmma::accumulator, kFragment, kFragment, kFragment, float> accumulator;
    if (accumulate) {
      wmma::load_matrix_sync(accumulator, c_tile, ldc, wmma::mem_row_major);
    } else {
      wmma::fill_fragment(accumulator, 0.0f);
    }
#pragma unroll
    for (int inner = 0; inner < kK; inner += kFragment) {
      wmma::fragment<wmma::matrix_a, kFragment, kFragment, kFragment, bf16, LayoutA> a_fragment;
      wmma::fragment<wmma::matrix_b, kFragment, kFragment, kFragment, bf16, LayoutB> b_fragment;
      wmma::load_matrix_sync(a_fragment, element<LayoutA>(a, lda, row, inner), lda);
      wmma::load_matrix_sync(b_fragment, element<LayoutB>(b, ldb, inner, col), ldb);
      wmma::mma_sync(accumulator, a_fragment, b_fragment, accumulator);
    }
    wmma::store_matrix_sync(c_tile, accumulator, ldc, wmma::mem_row_major);
  }
}

// Grid (query tiles of max_seqlen, heads, sequences).
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(ForwardArgs args) {
  using T = Tiles<kHeadDim>;
  const SideRows sequence = query_rows(args.rows);
  const SideRows keys = key_rows(args.rows);
  const int first_query = static_cast<int>(blockIdx.x) * kTile;
  if (first_query >= sequence.length) return;
  const int head = static_cast<int>(blockIdx.y);
  const int column = head * kHeadDim;

  extern __shared__ __align__(128) unsigned char shared[];
  SharedArena arena(shared);
  bf16* q_tile = arena.take<bf16>(T::head_bytes);
  bf16* k_tile = arena.take<bf16>(T::head_bytes);
  bf16* v_tile = arena.take<bf16>(T::head_bytes);
  float* scores = arena.take<float>(T::scores_bytes);
  bf16* probs = arena.take<bf16>(T::probs_bytes);
  float* out_accum = arena.take<float>(T::accum_bytes);

  load_head_tile<kHeadDim>(q_tile, args.q + column, args.q_row_stride, sequence, first_query);
  zero_fill(out_accum, kTile * T::ld_accum);

  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  // Running max and sum of each owned row (row warp + i * kWarps), identical in every lane of the warp.
  float row_max[kRowsPerWarp];
  float row_sum[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    row_max[i] = -INFINITY;
    row_sum[i] = 0.0f;
  }

  // Keys the tile's last query does not see are masked for every row: the loop ends with the diagonal tile.
  const int key_end = tile_key_end(sequence, first_query, kTile, keys);
  for (int first_key = 0; first_key < key_end; first_key += kTile) {
    __syncthreads();  // the previous P·V product has finished with k_tile, v_tile and probs
    load_head_tile<kHeadDim>(k_tile, args.k + column, args.kv_row_stride, keys, first_key);
    load_head_tile<kHeadDim>(v_tile, args.v + column, args.kv_row_stride, keys, first_key);
    __syncthreads();
    block_mma<kTile, kTile, kHeadDim, wmma::row_major, wmma::col_major>(q_tile, T::ld_head, k_tile, T::ld_head, scores,
                                                                        T::ld_scores, false);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int row = warp + i * kWarps;
      const int query = first_query + row;
      float score[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int col = lane + 32 * half;
        score[half] =
            attends(sequence, query, keys, first_key + col) ? scores[row * T::ld_scores + col] * args.scale : -INFINITY;
      }
      const float new_max = fmaxf(row_max[i], warp_max(fmaxf(score[0], score[1])));
      // new_max is -inf only while no key of the row has been allowed yet: nothing to rescale, every p is 0.
      const float rescale = new_max == -INFINITY ? 1.0f : expf(row_max[i] - new_max);
      float tile_sum = 0.0f;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float p = score[half] == -INFINITY ? 0.0f : expf(score[half] - new_max);
        probs[row * T::ld_probs + lane + 32 * half] = __float2bfloat16(p);
        tile_sum += p;
      }
      row_sum[i] = row_sum[i] * rescale + warp_sum(tile_sum);
      row_max[i] = new_max;
      for (int col = lane; col < kHeadDim; col += 32) out_accum[row * T::ld_accum + col] *= rescale;
    }
    __syncthreads();
    block_mma<kTile, kHeadDim, kTile, wmma::row_major, wmma::row_major>(probs, T::ld_probs, v_tile, T::ld_head,
                                                                        out_accum, T::ld_accum, true);
  }
  __syncthreads();

  const std::int64_t hidden = static_cast<std::int64_t>(args.num_heads) * kHeadDim;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row = warp + i * kWarps;
    const int query = first_query + row;
    if (query >= sequence.length) continue;
    const std::int64_t token = sequence.begin + query;
    // A ring block may hold no key the row sees: zeros, and lse -inf so that merging ignores it.
    const bool seen = row_sum[i] > 0.0f;
    const float inverse_sum = seen ? 1.0f / row_sum[i] : 0.0f;
    for (int col = lane; col < kHeadDim; col += 32) {
      args.out[token * hidden + column + col] = __float2bfloat16(out_accum[row * T::ld_accum + col] * inverse_sum);
    }
    if (lane == 0)
      args.lse[static_cast<std::int64_t>(head) * args.total_tokens + token] =
          seen ? row_max[i] + logf(row_sum[i]) : -INFINITY;
  }
}

// One warp per (token, head): delta = rowsum(dout ∘ out), the softmax gradient's correction term.
__global__ void attention_delta_kernel(const bf16* out, const bf16* dout, int total_tokens, int num_heads, int head_dim,
                                       float* delta) {
  const std::int64_t warp_index = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp_index >= static_cast<std::int64_t>(total_tokens) * num_heads) return;  // whole warps leave together
  const std::int64_t token = warp_index / num_heads;
  const int head = static_cast<int>(warp_index % num_heads);
  const std::int64_t offset = (token * num_heads + head) * head_dim;
  float sum = 0.0f;
  for (int d = lane; d < head_dim; d += 32)
    sum += __bfloat162float(out[offset + d]) * __bfloat162float(dout[offset + d]);
  sum = warp_sum(sum);
  if (lane == 0) delta[static_cast<std::int64_t>(head) * total_tokens + token] = sum;
}

// P = exp(S·scale - lse) where the query attends the key, else 0; dS = P ∘ (dP - delta). Both become bf16
// mma operands (probs may be null when only dS is needed).
template <int kHeadDim>
__device__ void softmax_gradient_tile(const float* scores, const float* dprobs, const float* lse_rows,
                                      const float* delta_rows, const SideRows& queries, int first_query,
                                      const SideRows& keys, int first_key, float scale, bf16* probs, bf16* dscores) {
  using T = Tiles<kHeadDim>;
  for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
    const int row = i / kTile;
    const int col = i % kTile;
    float p = 0.0f;
    float ds = 0.0f;
    if (attends(queries, first_query + row, keys, first_key + col)) {
      p = expf(scores[row * T::ld_scores + col] * scale - lse_rows[row]);
      ds = p * (dprobs[row * T::ld_scores + col] - delta_rows[row]);
    }
    if (probs != nullptr) probs[row * T::ld_probs + col] = __float2bfloat16(p);
    dscores[row * T::ld_probs + col] = __float2bfloat16(ds);
  }
}

// dQ = scale · Σ_key-tiles dS · K, one block per (query tile, head, sequence), key tiles up to the diagonal.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) attention_backward_dq_kernel(BackwardArgs args) {
  using T = Tiles<kHeadDim>;
  const SideRows sequence = query_rows(args.rows);
  const SideRows keys = key_rows(args.rows);
  const int first_query = static_cast<int>(blockIdx.x) * kTile;
  if (first_query >= sequence.length) return;
  const int head = static_cast<int>(blockIdx.y);
  const int column = head * kHeadDim;
  const std::int64_t hidden = static_cast<std::int64_t>(args.num_heads) * kHeadDim;

  extern __shared__ __align__(128) unsigned char shared[];
  SharedArena arena(shared);
  bf16* q_tile = arena.take<bf16>(T::head_bytes);
  bf16* dout_tile = arena.take<bf16>(T::head_bytes);
  bf16* k_tile = arena.take<bf16>(T::head_bytes);
  bf16* v_tile = arena.take<bf16>(T::head_bytes);
  float* scores = arena.take<float>(T::scores_bytes);
  float* dprobs = arena.take<float>(T::scores_bytes);
  bf16* dscores = arena.take<bf16>(T::probs_bytes);
  float* dq_accum = arena.take<float>(T::accum_bytes);
  float* lse_rows = arena.take<float>(T::rows_bytes);
  float* delta_rows = arena.take<float>(T::rows_bytes);

  load_head_tile<kHeadDim>(q_tile, args.q + column, args.q_row_stride, sequence, first_query);
  load_head_tile<kHeadDim>(dout_tile, args.dout + column, hidden, sequence, first_query);
  load_row_stats(lse_rows, delta_rows, args, head, sequence, first_query);
  zero_fill(dq_accum, kTile * T::ld_accum);

  const int key_end = tile_key_end(sequence, first_query, kTile, keys);
  for (int first_key = 0; first_key < key_end; first_key += kTile) {
    __syncthreads();  // the previous dS·K product has finished with k_tile and dscores
    load_head_tile<kHeadDim>(k_tile, args.k + column, args.kv_row_stride, keys, first_key);
    load_head_tile<kHeadDim>(v_tile, args.v + column, args.kv_row_stride, keys, first_key);
    __syncthreads();
    block_mma<kTile, kTile, kHeadDim, wmma::row_major, wmma::col_major>(q_tile, T::ld_head, k_tile, T::ld_head, scores,
                                                                        T::ld_scores, false);
    block_mma<kTile, kTile, kHeadDim, wmma::row_major, wmma::col_major>(dout_tile, T::ld_head, v_tile, T::ld_head,
                                                                        dprobs, T::ld_scores, false);
    __syncthreads();
    softmax_gradient_tile<kHeadDim>(scores, dprobs, lse_rows, delta_rows, sequence, first_query, keys, first_key,
                                    args.scale, nullptr, dscores);
    __syncthreads();
    block_mma<kTile, kHeadDim, kTile, wmma::row_major, wmma::row_major>(dscores, T::ld_probs, k_tile, T::ld_head,
                                                                        dq_accum, T::ld_accum, true);
  }
  __syncthreads();

  for (int i = threadIdx.x; i < kTile * kHeadDim; i += kThreads) {
    const int row = i / kHeadDim;
    const int col = i % kHeadDim;
    if (first_query + row >= sequence.length) continue;
    const std::int64_t token = sequence.begin + first_query + row;
    args.dq[token * args.dq_row_stride + column + col] =
        __float2bfloat16(dq_accum[row * T::ld_accum + col] * args.scale);
  }
}

// dV = Σ_query-tiles Pᵀ · dO and dK = scale · Σ dSᵀ · Q, one block per (key tile, head, sequence), query
// tiles from the diagonal to the sequence's end.
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) attention_backward_dkdv_kernel(BackwardArgs args) {
  using T = Tiles<kHeadDim>;
  const SideRows queries = query_rows(args.rows);
  const SideRows sequence = key_rows(args.rows);
  const int first_key = static_cast<int>(blockIdx.x) * kTile;
  if (first_key >= sequence.length) return;
  const int head = static_cast<int>(blockIdx.y);
  const int column = head * kHeadDim;
  const std::int64_t hidden = static_cast<std::int64_t>(args.num_heads) * kHeadDim;

  extern __shared__ __align__(128) unsigned char shared[];
  SharedArena arena(shared);
  bf16* k_tile = arena.take<bf16>(T::head_bytes);
  bf16* v_tile = arena.take<bf16>(T::head_bytes);
  bf16* q_tile = arena.take<bf16>(T::head_bytes);
  bf16* dout_tile = arena.take<bf16>(T::head_bytes);
  float* scores = arena.take<float>(T::scores_bytes);
  float* dprobs = arena.take<float>(T::scores_bytes);
  bf16* probs = arena.take<bf16>(T::probs_bytes);
  bf16* dscores = arena.take<bf16>(T::probs_bytes);
  float* dk_accum = arena.take<float>(T::accum_bytes);
  float* dv_accum = arena.take<float>(T::accum_bytes);
  float* lse_rows = arena.take<float>(T::rows_bytes);
  float* delta_rows = arena.take<float>(T::rows_bytes);

  load_head_tile<kHeadDim>(k_tile, args.k + column, args.kv_row_stride, sequence, first_key);
  load_head_tile<kHeadDim>(v_tile, args.v + column, args.kv_row_stride, sequence, first_key);
  zero_fill(dk_accum, kTile * T::ld_accum);
  zero_fill(dv_accum, kTile * T::ld_accum);

  // Queries before the first that sees the tile's first key attend none of its keys: the loop starts with the
  // diagonal tile.
  for (int first_query = first_seeing_query(queries, sequence.position(first_key)); first_query < queries.length;
       first_query += kTile) {
    __syncthreads();  // the previous products have finished with q_tile, dout_tile, probs and dscores
    load_head_tile<kHeadDim>(q_tile, args.q + column, args.q_row_stride, queries, first_query);
    load_head_tile<kHeadDim>(dout_tile, args.dout + column, hidden, queries, first_query);
    load_row_stats(lse_rows, delta_rows, args, head, queries, first_query);
    __syncthreads();
    block_mma<kTile, kTile, kHeadDim, wmma::row_major, wmma::col_major>(q_tile, T::ld_head, k_tile, T::ld_head, scores,
                                                                        T::ld_scores, false);
    block_mma<kTile, kTile, kHeadDim, wmma::row_major, wmma::col_major>(dout_tile, T::ld_head, v_tile, T::ld_head,
                                                                        dprobs, T::ld_scores, false);
    __syncthreads();
    softmax_gradient_tile<kHeadDim>(scores, dprobs, lse_rows, delta_rows, queries, first_query, sequence, first_key,
                                    args.scale, probs, dscores);
    __syncthreads();
    // Pᵀ and dSᵀ: the row-major [query][key] tiles read as column-major [key][query] operands.
    block_mma<kTile, kHeadDim, kTile, wmma::col_major, wmma::row_major>(probs, T::ld_probs, dout_tile, T::ld_head,
                                                                        dv_accum, T::ld_accum, true);
    block_mma<kTile, kHeadDim, kTile, wmma::col_major, wmma::row_major>(dscores, T::ld_probs, q_tile, T::ld_head,
                                                                        dk_accum, T::ld_accum, true);
  }
  __syncthreads();

  for (int i = threadIdx.x; i < kTile * kHeadDim; i += kThreads) {
    const int row = i / kHeadDim;
    const int col = i % kHeadDim;
    if (first_key + row >= sequence.length) continue;
    const std::int64_t offset = (sequence.begin + first_key + row) * args.dkv_row_stride + column + col;
    args.dk[offset] = __float2bfloat16(dk_accum[row * T::ld_accum + col] * args.scale);
    args.dv[offset] = __float2bfloat16(dv_accum[row * T::ld_accum + col]);
  }
}

// One warp per (token, head): folds a block's output into the running one by their log-sum-exp. Every lane reads
// both lse values before lane 0 writes the merged one.
__global__ void attention_merge_kernel(const bf16* block_out, const float* block_lse, int tokens, int num_heads,
                                       int head_dim, float* out, float* lse) {
  const std::int64_t warp_index = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp_index >= static_cast<std::int64_t>(tokens) * num_heads) return;  // whole warps leave together
  const std::int64_t token = warp_index / num_heads;
  const int head = static_cast<int>(warp_index % num_heads);
  const std::int64_t stat = static_cast<std::int64_t>(head) * tokens + token;
  const float held = lse[stat];
  const float added = block_lse[stat];
  if (added == -INFINITY) return;  // the block holds no key the row sees
  const float top = fmaxf(held, added);
  const float merged = top + logf(expf(held - top) + expf(added - top));
  const float keep = expf(held - merged);
  const float weight = expf(added - merged);
  const std::int64_t offset = (token * num_heads + head) * head_dim;
  for (int d = lane; d < head_dim; d += 32)
    out[offset + d] = out[offset + d] * keep + __bfloat162float(block_out[offset + d]) * weight;
  __syncwarp();
  if (lane == 0) lse[stat] = merged;
}

template <typename Kernel, typename Args>
void launch_tiled(Kernel kernel, std::size_t shared_bytes, const VarlenBatch& batch, const HeadShape& heads,
                  const Args& args, cudaStream_t stream, const char* name) {
  // Blocks want more than the default 48 KB of dynamic shared memory.
  SLUICE_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)));
  const dim3 grid(static_cast<unsigned int>(detail::ceil_div(batch.max_seqlen, kTile)),
                  static_cast<unsigned int>(heads.num_heads), static_cast<unsigned int>(batch.num_seqs));
  kernel<<<grid, kThreads, shared_bytes, stream>>>(args);
  SLUICE_LAUNCH_CHECK(name);
}

void require_heads(const HeadShape& heads) {
  sluice::require(heads.num_heads >= 1 && heads.num_heads <= 65535, "num_heads: must be in [1, 65535], got ",
                  heads.num_heads);
  sluice::require(heads.head_dim == 64 || heads.head_dim == 128, "head_dim: must be 64 or 128, got ", heads.head_dim);
}

// `side` prefixes the names in errors ("" for self-attention's one batch, "queries." or "keys." for a block step's).
void check_batch(const VarlenBatch& batch, const std::string& side) {
  detail::require_pointer(batch.cu_seqlens, (side + "cu_seqlens").c_str());
  // Sequences and heads index the grid's z and y dimensions, at most 65535 each.
  sluice::require(batch.num_seqs >= 1 && batch.num_seqs <= 65535, side, "num_seqs: must be in [1, 65535], got ",
                  batch.num_seqs);
  detail::require_positive(batch.max_seqlen, (side + "max_seqlen").c_str());
  detail::require_positive(batch.total_tokens, (side + "total_tokens").c_str());
}

void check_shapes(const VarlenBatch& batch, const HeadShape& heads) {
  check_batch(batch, "");
  require_heads(heads);
}

void check_blocks(const PositionedBatch& queries, const PositionedBatch& keys, const HeadShape& heads) {
  check_batch(queries.rows, "queries.");
  check_batch(keys.rows, "keys.");
  sluice::require(queries.rows.num_seqs == keys.rows.num_seqs, "keys.num_seqs: must equal queries.num_seqs (",
                  queries.rows.num_seqs, "), got ", keys.rows.num_seqs);
  detail::require_pointer(queries.positions, "queries.positions");
  detail::require_pointer(keys.positions, "keys.positions");
  require_heads(heads);
}

void check_row_stride(std::int64_t row_stride, const HeadShape& heads, const char* name) {
  const std::int64_t hidden = static_cast<std::int64_t>(heads.num_heads) * heads.head_dim;
  sluice::require(row_stride >= hidden, name, ": must be >= num_heads * head_dim = ", hidden, ", got ", row_stride);
}

// q, k, v and dout are read 16 bytes at a time.
void check_vector_row_stride(std::int64_t row_stride, const HeadShape& heads, const char* name) {
  check_row_stride(row_stride, heads, name);
  sluice::require(row_stride % 8 == 0, name, ": must be a multiple of 8 elements (16 bytes), got ", row_stride);
}

float softmax_scale(const HeadShape& heads) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(heads.head_dim)));
}

// The forward's pointers and strides, checked, in args (rows and total_tokens are the caller's).
void set_forward(const HeadShape& heads, const bf16* q, std::int64_t q_row_stride, const bf16* k, const bf16* v,
                 std::int64_t kv_row_stride, bf16* out, float* lse, ForwardArgs& args) {
  detail::require_aligned16(q, "q");
  detail::require_aligned16(k, "k");
  detail::require_aligned16(v, "v");
  check_vector_row_stride(q_row_stride, heads, q_row_stride == kv_row_stride ? "qkv_row_stride" : "q_row_stride");
  check_vector_row_stride(kv_row_stride, heads, q_row_stride == kv_row_stride ? "qkv_row_stride" : "kv_row_stride");
  detail::require_pointer(out, "out");
  detail::require_pointer(lse, "lse");
  args.q = q;
  args.q_row_stride = q_row_stride;
  args.k = k;
  args.v = v;
  args.kv_row_stride = kv_row_stride;
  args.out = out;
  args.lse = lse;
  args.num_heads = heads.num_heads;
  args.scale = softmax_scale(heads);
}

void run_forward(const VarlenBatch& queries, const HeadShape& heads, const ForwardArgs& args, cudaStream_t stream,
                 AttentionKernel kernel) {
  if (kernel != AttentionKernel::wmma) {
    detail::mma_attention_forward(queries, heads.head_dim, kernel == AttentionKernel::mma64 ? 64 : 128, args, stream);
  } else if (heads.head_dim == 64) {
    launch_tiled(attention_forward_kernel<64>, Tiles<64>::forward_bytes, queries, heads, args, stream,
                 "attention_forward");
  } else {
    launch_tiled(attention_forward_kernel<128>, Tiles<128>::forward_bytes, queries, heads, args, stream,
                 "attention_forward");
  }
}

// Where the backward's parts of its workspace start, in floats, and its size: delta, then for the single pass dQ's fp32
// partial sums (from a multiple of 4 floats, for their 8-byte accesses) and the turn counters (int, 4 bytes each).
struct BackwardWorkspace {
  std::size_t dq_accumulator = 0;
  std::size_t dq_turns = 0;
  std::size_t floats = 0;
  int turn_tiles = 0;  // query tiles of the longest sequence: the counters are [num_seqs][num_heads][turn_tiles]
};

BackwardWorkspace backward_workspace(const VarlenBatch& queries, const HeadShape& heads, AttentionKernel kernel) {
  const auto tokens = static_cast<std::size_t>(queries.total_tokens);
  const auto num_heads = static_cast<std::size_t>(heads.num_heads);
  const std::size_t delta = num_heads * tokens;
  if (kernel != AttentionKernel::mma_single_pass) return {0, 0, delta};
  static_assert(sizeof(int) == sizeof(float));
  BackwardWorkspace workspace;
  workspace.turn_tiles = static_cast<int>(detail::ceil_div(queries.max_seqlen, detail::kSinglePassTile));
  workspace.dq_accumulator = (delta + 3) / 4 * 4;
  workspace.dq_turns = workspace.dq_accumulator + delta * static_cast<std::size_t>(heads.head_dim);
  workspace.floats = workspace.dq_turns + static_cast<std::size_t>(queries.num_seqs) * num_heads *
                                              static_cast<std::size_t>(workspace.turn_tiles);
  return workspace;
}

// The backward of `args`, whose rows, pointers and strides the caller set: checks them, fills delta from out and
// dout, and launches.
void run_backward(const VarlenBatch& queries, const VarlenBatch& keys, const HeadShape& heads, BackwardArgs args,
                  cudaStream_t stream, AttentionKernel kernel) {
  const bool one_stride = args.q_row_stride == args.kv_row_stride && args.dq_row_stride == args.dkv_row_stride;
  detail::require_aligned16(args.q, "q");
  detail::require_aligned16(args.k, "k");
  detail::require_aligned16(args.v, "v");
  check_vector_row_stride(args.q_row_stride, heads, one_stride ? "qkv_row_stride" : "q_row_stride");
  check_vector_row_stride(args.kv_row_stride, heads, one_stride ? "qkv_row_stride" : "kv_row_stride");
  detail::require_pointer(args.out, "out");
  detail::require_aligned16(args.dout, "dout");
  detail::require_pointer(args.lse, "lse");
  detail::require_pointer(args.dq, "dq");
  detail::require_pointer(args.dk, "dk");
  detail::require_pointer(args.dv, "dv");
  check_row_stride(args.dq_row_stride, heads, one_stride ? "dqkv_row_stride" : "dq_row_stride");
  check_row_stride(args.dkv_row_stride, heads, one_stride ? "dqkv_row_stride" : "dkv_row_stride");
  detail::require_pointer(args.delta, "workspace");

  constexpr int kDeltaThreads = 256;
  const std::int64_t delta_warps = static_cast<std::int64_t>(queries.total_tokens) * heads.num_heads;
  attention_delta_kernel<<<static_cast<unsigned int>(detail::ceil_div(delta_warps * 32, kDeltaThreads)), kDeltaThreads,
                           0, stream>>>(args.out, args.dout, queries.total_tokens, heads.num_heads, heads.head_dim,
                                        args.delta);
  SLUICE_LAUNCH_CHECK("attention_backward (delta)");

  args.total_tokens = queries.total_tokens;
  args.num_heads = heads.num_heads;
  args.scale = softmax_scale(heads);
  if (kernel == AttentionKernel::mma_single_pass) {
    const BackwardWorkspace workspace = backward_workspace(queries, heads, kernel);
    args.dq_accumulator = args.delta + workspace.dq_accumulator;
    args.dq_turns = reinterpret_cast<int*>(args.delta + workspace.dq_turns);
    args.dq_turn_tiles = workspace.turn_tiles;
    SLUICE_CUDA_CHECK(cudaMemsetAsync(args.dq_turns, 0, (workspace.floats - workspace.dq_turns) * sizeof(int), stream));
  }
  if (kernel != AttentionKernel::wmma) {
    detail::mma_attention_backward(queries, keys, heads.head_dim, args, stream);
  } else if (heads.head_dim == 64) {
    launch_tiled(attention_backward_dq_kernel<64>, Tiles<64>::dq_bytes, queries, heads, args, stream,
                 "attention_backward (dq)");
    launch_tiled(attention_backward_dkdv_kernel<64>, Tiles<64>::dkdv_bytes, keys, heads, args, stream,
                 "attention_backward (dk, dv)");
  } else {
    launch_tiled(attention_backward_dq_kernel<128>, Tiles<128>::dq_bytes, queries, heads, args, stream,
                 "attention_backward (dq)");
    launch_tiled(attention_backward_dkdv_kernel<128>, Tiles<128>::dkdv_bytes, keys, heads, args, stream,
                 "attention_backward (dk, dv)");
  }
}

}  // namespace

void attention_forward(const VarlenBatch& batch, const HeadShape& heads, const bf16* q, const bf16* k, const bf16* v,
                       std::int64_t qkv_row_stride, bf16* out, float* lse, cudaStream_t stream,
                       AttentionKernel kernel) {
  check_shapes(batch, heads);
  ForwardArgs args{};
  set_forward(heads, q, qkv_row_stride, k, v, qkv_row_stride, out, lse, args);
  args.rows = {batch.cu_seqlens, batch.cu_seqlens, nullptr, nullptr};
  args.total_tokens = batch.total_tokens;
  run_forward(batch, heads, args, stream, kernel);
}

void block_attention_forward(const PositionedBatch& queries, const PositionedBatch& keys, const HeadShape& heads,
                             const bf16* q, std::int64_t q_row_stride, const bf16* k, const bf16* v,
                             std::int64_t kv_row_stride, bf16* out, float* lse, cudaStream_t stream,
                             AttentionKernel kernel) {
  check_blocks(queries, keys, heads);
  ForwardArgs args{};
  set_forward(heads, q, q_row_stride, k, v, kv_row_stride, out, lse, args);
  args.rows = {queries.rows.cu_seqlens, keys.rows.cu_seqlens, queries.positions, keys.positions};
  args.total_tokens = queries.rows.total_tokens;
  run_forward(queries.rows, heads, args, stream, kernel);
}

void attention_backward(const VarlenBatch& batch, const HeadShape& heads, const bf16* q, const bf16* k, const bf16* v,
                        std::int64_t qkv_row_stride, const bf16* out, const bf16* dout, const float* lse, bf16* dq,
                        bf16* dk, bf16* dv, std::int64_t dqkv_row_stride, float* workspace, cudaStream_t stream,
                        AttentionKernel kernel) {
  check_shapes(batch, heads);
  run_backward(batch, batch, heads,
               {{batch.cu_seqlens, batch.cu_seqlens, nullptr, nullptr},
                q,
                qkv_row_stride,
                k,
                v,
                qkv_row_stride,
                out,
                dout,
                lse,
                workspace,
                dq,
                dqkv_row_stride,
                dk,
                dv,
                dqkv_row_stride,
                0,
                0,
                0.0f},
               stream, kernel);
}

void block_attention_backward(const PositionedBatch& queries, const PositionedBatch& keys, const HeadShape& heads,
                              const bf16* q, std::int64_t q_row_stride, const bf16* k, const bf16* v,
                              std::int64_t kv_row_stride, const bf16* out, const bf16* dout, const float* lse, bf16* dq,
                              std::int64_t dq_row_stride, bf16* dk, bf16* dv, std::int64_t dkv_row_stride,
                              float* workspace, cudaStream_t stream, AttentionKernel kernel) {
  check_blocks(queries, keys, heads);
  run_backward(queries.rows, keys.rows, heads,
               {{queries.rows.cu_seqlens, keys.rows.cu_seqlens, queries.positions, keys.positions},
                q,
                q_row_stride,
                k,
                v,
                kv_row_stride,
                out,
                dout,
                lse,
                workspace,
                dq,
                dq_row_stride,
                dk,
                dv,
                dkv_row_stride,
                0,
                0,
                0.0f},
               stream, kernel);
}

std::size_t attention_backward_workspace_floats(const VarlenBatch& queries, const HeadShape& heads,
                                                AttentionKernel kernel) {
  // A ring rank may hold no rows: an empty side needs no workspace, and gets none.
  require_heads(heads);
  sluice::require(queries.num_seqs >= 0 && queries.max_seqlen >= 0 && queries.total_tokens >= 0,
                  "num_seqs, max_seqlen, total_tokens: must not be negative, got ", queries.num_seqs, ", ",
                  queries.max_seqlen, ", ", queries.total_tokens);
  return backward_workspace(queries, heads, kernel).floats;
}

void attention_merge(const bf16* block_out, const float* block_lse, int tokens, const HeadShape& heads, float* out,
                     float* lse, cudaStream_t stream) {
  detail::require_pointer(block_out, "block_out");
  detail::require_pointer(block_lse, "block_lse");
  detail::require_positive(tokens, "tokens");
  detail::require_positive(heads.num_heads, "num_heads");
  detail::require_positive(heads.head_dim, "head_dim");
  detail::require_pointer(out, "out");
  detail::require_pointer(lse, "lse");
  constexpr int kMergeThreads = 256;
  const std::int64_t warps = static_cast<std::int64_t>(tokens) * heads.num_heads;
  attention_merge_kernel<<<static_cast<unsigned int>(detail::ceil_div(warps * 32, kMergeThreads)), kMergeThreads, 0,
                           stream>>>(block_out, block_lse, tokens, heads.num_heads, heads.head_dim, out, lse);
  SLUICE_LAUNCH_CHECK("attention_merge");
}

}  // namespace sluice::executor::kernels
