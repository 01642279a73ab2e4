// Variable-length causal attention with register-resident accumulators (FlashAttention-2's structure on mma.sync):
// a block of 4 warps owns a 128-row query tile in the forward, each warp 32 rows as two 16-row mma tiles (so each K
// or V fragment loaded feeds two products; AttentionKernel::mma64 keeps the earlier 64-row tiles, one mma tile a
// warp, to measure what the second gives), and a 64-row tile in the backward, each warp 16 rows. Products are
// mma.sync.m16n8k16 (bf16 in, fp32 accumulate) with operands loaded from shared memory by ldmatrix; scores,
// probabilities and the output or gradient accumulators stay in registers, where the accumulator layout of one product
// is the operand layout of the next (a 16×16 block of P or dS in C fragments is an A fragment once packed to bf16). The
// next K/V (or Q/dO) tile is copied with cp.async while the current one is multiplied. The backward keeps
// attention.cu's deterministic split by default: dQ in one kernel over key tiles, dK and dV in another over query
// tiles, no atomics. AttentionKernel::mma_single_pass runs it in one pass instead: the dK/dV kernel also adds each
// query tile's dQ share to an fp32 accumulator, the key tiles taking turns in their order (so the sums, and the bits,
// are the same on every run). The kernels also run ring attention's block steps (attention_args.hpp): keys in a packed
// layout of their own and the mask by row position.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 with .bf16; lane = 4·g + t):
//   A 16×16: reg 0 (row g, k 2t..2t+1), reg 1 (row g+8, same k), reg 2 (row g, k 2t+8..), reg 3 (row g+8, k 2t+8..)
//   B 16×8:  reg 0 (k 2t..2t+1, col g), reg 1 (k 2t+8..2t+9, col g)
//   C 16×8:  c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g+8, cols 2t, 2t+1)
// ldmatrix.x4 fills register j from the 8×8 matrix whose rows lanes 8j..8j+7 address; each lane receives (row
// lane/4, cols 2·(lane%4)..+1) of each matrix, or with .trans (rows 2·(lane%4)..+1, col lane/4).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "attention_args.hpp"
#include "attention_ptx.cuh"
#include "attention_rows.cuh"
#include "host_checks.hpp"
#include "sluice_executor/cuda_check.hpp"

namespace sluice::executor::kernels::detail {
namespace {

constexpr int kTile = 64;  // rows of a key tile, and of a query tile in the backward
static_assert(kTile == kSinglePassTile);
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kPad = 8;  // bf16 per shared row: 16-byte aligned rows, and the 8 rows of an ldmatrix in distinct banks
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kFullMask = 0xffffffffu;

template <int kHeadDim>
struct Shape {
  static_assert(kHeadDim % 16 == 0);
  static constexpr int ld = kHeadDim + kPad;     // shared row length in bf16
  static constexpr int tile = kTile * ld;        // bf16 per shared tile
  static constexpr int k_steps = kHeadDim / 16;  // 16-wide steps over the head dimension
  static constexpr int n_tiles = kHeadDim / 8;   // 8-wide accumulator tiles over the head dimension
  static constexpr std::size_t tile_bytes = tile * sizeof(bf16);
  static constexpr std::size_t dq_bytes = 6 * tile_bytes;                                        // Q, dO, K×2, V×2
  static constexpr std::size_t dkdv_bytes = 6 * tile_bytes + 4 * kTile * sizeof(float);          // + lse, delta ×2
  static constexpr std::size_t dqkv_bytes = dkdv_bytes + kTile * (kTile + kPad) * sizeof(bf16);  // + dSᵀ
};

// Two floats as a bf16 pair, `low` in the low half (the lower column or k index).
__device__ std::uint32_t pack(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const std::uint32_t*>(&pair);
}

// Starts copying rows [first_row, first_row + kRows) of one side's sequence and one head into a shared tile; rows at
// or past its end become zeros (nothing is read for them). `source` points at the head's first column.
template <int kHeadDim, int kRows = kTile>
__device__ void copy_tile(bf16* tile, const bf16* source, std::int64_t row_stride, SideRows sequence, int first_row) {
  constexpr int kChunks = kHeadDim / 8;
  for (int i = static_cast<int>(threadIdx.x); i < kRows * kChunks; i += kThreads) {
    const int row = i / kChunks;
    const int col = (i % kChunks) * 8;
    const bool valid = first_row + row < sequence.length;
    const std::int64_t token = sequence.begin + (valid ? first_row + row : 0);
    copy_async(tile + row * Shape<kHeadDim>::ld + col, source + token * row_stride + col, valid);
  }
}

// Query rows of a forward block whose warps each own `mma_tiles` 16-row mma tiles, and its shared bytes (Q, K×2, V×2).
__host__ __device__ constexpr int forward_rows(int mma_tiles) { return kWarps * mma_tiles * 16; }
template <int kHeadDim>
constexpr std::size_t forward_bytes(int mma_tiles) {
  return (forward_rows(mma_tiles) * Shape<kHeadDim>::ld + 4 * Shape<kHeadDim>::tile) * sizeof(bf16);
}

__device__ int lane_id() { return static_cast<int>(threadIdx.x % 32); }

// Starts copying K and V rows [tile·kTile, (tile + 1)·kTile) of one head into buffer tile % 2 of the double-buffered
// k_tiles and v_tiles; k and v point at the head's first column.
template <int kHeadDim>
__device__ void copy_key_tile(bf16* k_tiles, bf16* v_tiles, const bf16* k, const bf16* v, std::int64_t row_stride,
                              SideRows sequence, int tile) {
  const int buffer = (tile & 1) * Shape<kHeadDim>::tile;
  copy_tile<kHeadDim>(k_tiles + buffer, k, row_stride, sequence, tile * kTile);
  copy_tile<kHeadDim>(v_tiles + buffer, v, row_stride, sequence, tile * kTile);
}

// The double-buffered loops' step: starts the next tile's copies (copy_next()) when there is a next tile, then waits
// until the current tile's copies have landed and every thread sees them.
template <typename CopyNext>
__device__ void await_tile(bool has_next, CopyNext copy_next) {
  if (has_next) {
    copy_next();
    commit_copies();
    wait_copies<1>();
  } else {
    wait_copies<0>();
  }
  __syncthreads();
}

// A fragment of rows [row0, row0 + 16) and columns [col0, col0 + 16) of a row-major shared tile.
__device__ void load_a(std::uint32_t (&a)[4], const bf16* tile, int ld, int row0, int col0) {
  const int lane = lane_id();
  const int matrix = lane / 8;
  ldmatrix_x4(a, tile + (row0 + (matrix & 1) * 8 + (lane & 7)) * ld + col0 + (matrix >> 1) * 8);
}

// The same fragment from a tile stored transposed ([k][m]), transposed by ldmatrix.
__device__ void load_a_trans(std::uint32_t (&a)[4], const bf16* tile, int ld, int row0, int col0) {
  const int lane = lane_id();
  const int matrix = lane / 8;
  ldmatrix_x4_trans(a, tile + (col0 + (matrix >> 1) * 8 + (lane & 7)) * ld + row0 + (matrix & 1) * 8);
}

// B fragments of two 8-wide n tiles (n0.., n0 + 8..) over k [k0, k0 + 16) from a tile stored [n][k]:
// b[0], b[1] for the first n tile, b[2], b[3] for the second.
__device__ void load_b_rows_n(std::uint32_t (&b)[4], const bf16* tile, int ld, int n0, int k0) {
  const int lane = lane_id();
  const int matrix = lane / 8;
  ldmatrix_x4(b, tile + (n0 + (matrix >> 1) * 8 + (lane & 7)) * ld + k0 + (matrix & 1) * 8);
}

// The same from a tile stored [k][n], transposed by ldmatrix.
__device__ void load_b_rows_k(std::uint32_t (&b)[4], const bf16* tile, int ld, int k0, int n0) {
  const int lane = lane_id();
  const int matrix = lane / 8;
  ldmatrix_x4_trans(b, tile + (k0 + (matrix & 1) * 8 + (lane & 7)) * ld + n0 + (matrix >> 1) * 8);
}

// scores[m] (16 × 64, C fragments) = A (rows a_row + 16·m.. of `a_tile`) · Bᵀ, B the 64 rows of `b_tile` (both
// [row][d]); each B fragment feeds the kMmaTiles products of its k step.
template <int kHeadDim, int kMmaTiles>
__device__ void row_products(float (&scores)[kMmaTiles][8][4], const bf16* a_tile, int a_row, const bf16* b_tile) {
  constexpr int ld = Shape<kHeadDim>::ld;
#pragma unroll
  for (int m = 0; m < kMmaTiles; ++m)
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) scores[m][n][e] = 0.0f;
#pragma unroll
  for (int k = 0; k < Shape<kHeadDim>::k_steps; ++k) {
    std::uint32_t a[kMmaTiles][4];
#pragma unroll
    for (int m = 0; m < kMmaTiles; ++m) load_a(a[m], a_tile, ld, a_row + 16 * m, k * 16);
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      std::uint32_t b[4];
      load_b_rows_n(b, b_tile, ld, n * 16, k * 16);
#pragma unroll
      for (int m = 0; m < kMmaTiles; ++m) {
        mma(scores[m][2 * n], a[m], b[0], b[1]);
        mma(scores[m][2 * n + 1], a[m], b[2], b[3]);
      }
    }
  }
}

// accumulator[m] (16 × head_dim) += P[m] (16 × 64, C fragments, packed to bf16 here) · the 64 rows of `tile`
// ([row][d]); each B fragment feeds the kMmaTiles products of its step.
template <int kHeadDim, int kMmaTiles>
__device__ void accumulate_products(float (&accumulator)[kMmaTiles][Shape<kHeadDim>::n_tiles][4],
                                    const float (&p)[kMmaTiles][8][4], const bf16* tile) {
  constexpr int ld = Shape<kHeadDim>::ld;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    std::uint32_t a[kMmaTiles][4];
#pragma unroll
    for (int m = 0; m < kMmaTiles; ++m) {
      a[m][0] = pack(p[m][2 * k][0], p[m][2 * k][1]);
      a[m][1] = pack(p[m][2 * k][2], p[m][2 * k][3]);
      a[m][2] = pack(p[m][2 * k + 1][0], p[m][2 * k + 1][1]);
      a[m][3] = pack(p[m][2 * k + 1][2], p[m][2 * k + 1][3]);
    }
#pragma unroll
    for (int n = 0; n < Shape<kHeadDim>::k_steps; ++n) {
      std::uint32_t b[4];
      load_b_rows_k(b, tile, ld, k * 16, n * 16);
#pragma unroll
      for (int m = 0; m < kMmaTiles; ++m) {
        mma(accumulator[m][2 * n], a[m], b[0], b[1]);
        mma(accumulator[m][2 * n + 1], a[m], b[2], b[3]);
      }
    }
  }
}

// Writes a 16 × head_dim accumulator times `factor` (per row half) as bf16 to rows mma_row + g (+ 8) of
// `destination` (row stride `row_stride`, the head's first column), rows past the sequence's end skipped.
template <int kHeadDim>
__device__ void store_rows(const float (&accumulator)[Shape<kHeadDim>::n_tiles][4], const float (&factor)[2],
                           bf16* destination, std::int64_t row_stride, SideRows sequence, int mma_row) {
  const int lane = lane_id();
  const int row0 = mma_row + lane / 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + 8 * half;
    if (row >= sequence.length) continue;
    bf16* out = destination + (sequence.begin + static_cast<std::int64_t>(row)) * row_stride + 2 * (lane % 4);
    // Element by element: a gradient buffer's row stride may be odd, so pairs need not be 4-byte aligned.
#pragma unroll
    for (int n = 0; n < Shape<kHeadDim>::n_tiles; ++n) {
      out[8 * n] = __float2bfloat16(accumulator[n][2 * half] * factor[half]);
      out[8 * n + 1] = __float2bfloat16(accumulator[n][2 * half + 1] * factor[half]);
    }
  }
}

// Grid (forward tiles of max_seqlen, heads, sequences). Warp w owns query rows [16·kM·w, 16·kM·(w + 1)) of the
// block's tile, mma tile m rows 16·(kM·w + m).. of them; each thread holds rows g and g + 8 of each mma tile.
template <int kHeadDim, int kM>
__global__ void __launch_bounds__(kThreads) forward_kernel(ForwardArgs args) {
  using S = Shape<kHeadDim>;
  constexpr int kForwardRows = forward_rows(kM);
  const SideRows queries = query_rows(args.rows);
  const int first_query = static_cast<int>(blockIdx.x) * kForwardRows;
  if (first_query >= queries.length) return;
  const SideRows keys = key_rows(args.rows);
  const int column = static_cast<int>(blockIdx.y) * kHeadDim;
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = lane_id();

  extern __shared__ __align__(128) unsigned char shared[];
  bf16* q_tile = reinterpret_cast<bf16*>(shared);  // kForwardRows rows
  bf16* k_tiles = q_tile + kForwardRows * S::ld;   // two buffers each
  bf16* v_tiles = k_tiles + 2 * S::tile;

  // Keys past those the tile's last query sees are masked for every row: the loop ends with the tile of the last.
  const int key_tiles = (tile_key_end(queries, first_query, kForwardRows, keys) + kTile - 1) / kTile;
  const bf16* k = args.k + column;
  const bf16* v = args.v + column;
  if (key_tiles > 0) {  // else no query of the tile sees a key: no copy to issue (nor to leave in flight)
    copy_tile<kHeadDim, kForwardRows>(q_tile, args.q + column, args.q_row_stride, queries, first_query);
    copy_key_tile<kHeadDim>(k_tiles, v_tiles, k, v, args.kv_row_stride, keys, 0);
    commit_copies();
  }

  const int warp_row = first_query + warp * kM * 16;  // the warp's first row
  int key_end[kM][2];  // the keys (a prefix of the sequence's) each of this thread's rows sees
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int query = warp_row + 16 * m + lane / 4 + 8 * half;
      key_end[m][half] = query < queries.length ? visible_keys(keys, queries.position(query)) : 0;
    }
  // Positions ascend, so the warp's first row sees the fewest keys: tiles wholly before that count need no mask (in
  // self-attention, those before the diagonal). Its last row sees the most: tiles from there on the warp skips.
  const int unmasked_keys = __shfl_sync(kFullMask, key_end[0][0], 0);
  const int warp_keys = tile_key_end(queries, warp_row, kM * 16, keys);
  const float scale_log2 = args.scale * kLog2e;
  float out[kM][S::n_tiles][4] = {};
  float row_max[kM][2];  // of scale·log2(e)·score
  float row_sum[kM][2];  // this thread's columns only; the quad's are added at the end
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      row_max[m][half] = -INFINITY;
      row_sum[m][half] = 0.0f;
    }

  for (int tile = 0; tile < key_tiles; ++tile) {
    await_tile(tile + 1 < key_tiles,
               [&] { copy_key_tile<kHeadDim>(k_tiles, v_tiles, k, v, args.kv_row_stride, keys, tile + 1); });
    const int first_key = tile * kTile;
    if (first_key < warp_keys) {  // warp-uniform: no __syncthreads inside
      const bf16* k_tile = k_tiles + (tile & 1) * S::tile;
      const bf16* v_tile = v_tiles + (tile & 1) * S::tile;
      float scores[kM][8][4];
      row_products<kHeadDim, kM>(scores, q_tile, warp_row - first_query, k_tile);
      const bool masked = first_key + kTile > unmasked_keys;
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        float tile_max[2] = {row_max[m][0], row_max[m][1]};
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = first_key + n * 8 + 2 * (lane % 4) + (e & 1);
            scores[m][n][e] = masked && key >= key_end[m][e >> 1] ? -INFINITY : scores[m][n][e] * scale_log2;
            tile_max[e >> 1] = fmaxf(tile_max[e >> 1], scores[m][n][e]);
          }
        // A row that has seen no key yet keeps the maximum -inf; its exponents are taken from 0 instead, giving 0
        // rather than the NaN of -inf - -inf. Its sum and output stay 0, so its later rescale exp2(-inf) = 0 loses
        // nothing.
        float rescale[2];
        float shift[2];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(kFullMask, tile_max[half], 1));
          tile_max[half] = fmaxf(tile_max[half], __shfl_xor_sync(kFullMask, tile_max[half], 2));
          shift[half] = tile_max[half] == -INFINITY ? 0.0f : tile_max[half];
          rescale[half] = exp2f(row_max[m][half] - shift[half]);
          row_max[m][half] = tile_max[half];
          row_sum[m][half] *= rescale[half];
        }
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            scores[m][n][e] = exp2f(scores[m][n][e] - shift[e >> 1]);
            row_sum[m][e >> 1] += scores[m][n][e];
          }
#pragma unroll
        for (int n = 0; n < S::n_tiles; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) out[m][n][e] *= rescale[e >> 1];
      }
      accumulate_products<kHeadDim, kM>(out, scores, v_tile);
    }
    __syncthreads();  // every warp is done with this buffer before the next iteration refills it
  }

  // A row that saw no key has maximum -inf and sum 0: it gets out 0 and lse -inf + log2(0) = -inf.
  const std::int64_t hidden = static_cast<std::int64_t>(args.num_heads) * kHeadDim;
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    float inverse[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      row_sum[m][half] += __shfl_xor_sync(kFullMask, row_sum[m][half], 1);
      row_sum[m][half] += __shfl_xor_sync(kFullMask, row_sum[m][half], 2);
      inverse[half] = row_sum[m][half] > 0.0f ? 1.0f / row_sum[m][half] : 0.0f;
    }
    store_rows<kHeadDim>(out[m], inverse, args.out + column, hidden, queries, warp_row + 16 * m);
    if (lane % 4 == 0)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int query = warp_row + 16 * m + lane / 4 + 8 * half;
        if (query < queries.length)
          args.lse[static_cast<std::int64_t>(blockIdx.y) * args.total_tokens + queries.begin + query] =
              (row_max[m][half] + log2f(row_sum[m][half])) * kLn2;
      }
  }
}

// dQ = scale · Σ over the key tiles the query tile sees of dS · K, dS = P ∘ (dO·Vᵀ − delta), P = exp(scale·Q·Kᵀ − lse).
template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) dq_kernel(BackwardArgs args) {
  using S = Shape<kHeadDim>;
  const SideRows queries = query_rows(args.rows);
  const int first_query = static_cast<int>(blockIdx.x) * kTile;
  if (first_query >= queries.length) return;
  const SideRows keys = key_rows(args.rows);
  const int head = static_cast<int>(blockIdx.y);
  const int column = head * kHeadDim;
  const std::int64_t hidden = static_cast<std::int64_t>(args.num_heads) * kHeadDim;
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = lane_id();

  extern __shared__ __align__(128) unsigned char shared[];
  bf16* q_tile = reinterpret_cast<bf16*>(shared);
  bf16* dout_tile = q_tile + S::tile;
  bf16* k_tiles = dout_tile + S::tile;
  bf16* v_tiles = k_tiles + 2 * S::tile;

  const int key_tiles = (tile_key_end(queries, first_query, kTile, keys) + kTile - 1) / kTile;
  const bf16* k = args.k + column;
  const bf16* v = args.v + column;
  if (key_tiles > 0) {  // else dQ is 0
    copy_tile<kHeadDim>(q_tile, args.q + column, args.q_row_stride, queries, first_query);
    copy_tile<kHeadDim>(dout_tile, args.dout + column, hidden, queries, first_query);
    copy_key_tile<kHeadDim>(k_tiles, v_tiles, k, v, args.kv_row_stride, keys, 0);
    commit_copies();
  }

  const int query0 = first_query + warp * 16 + lane / 4;
  float lse_log2[2];
  float delta[2];
  int key_end[2];  // the keys (a prefix of the sequence's) each row sees
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int query = query0 + 8 * half;
    const std::int64_t index = static_cast<std::int64_t>(head) * args.total_tokens + queries.begin + query;
    lse_log2[half] = query < queries.length ? args.lse[index] * kLog2e : 0.0f;
    delta[half] = query < queries.length ? args.delta[index] : 0.0f;
    key_end[half] = query < queries.length ? visible_keys(keys, queries.position(query)) : 0;
  }
  const float scale_log2 = args.scale * kLog2e;
  float dq[1][S::n_tiles][4] = {};

  for (int tile = 0; tile < key_tiles; ++tile) {
    await_tile(tile + 1 < key_tiles,
               [&] { copy_key_tile<kHeadDim>(k_tiles, v_tiles, k, v, args.kv_row_stride, keys, tile + 1); });
    const bf16* k_tile = k_tiles + (tile & 1) * S::tile;
    const bf16* v_tile = v_tiles + (tile & 1) * S::tile;

    float scores[1][8][4];
    float dprobs[1][8][4];
    row_products<kHeadDim, 1>(scores, q_tile, warp * 16, k_tile);
    row_products<kHeadDim, 1>(dprobs, dout_tile, warp * 16, v_tile);
    const int first_key = tile * kTile;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = first_key + n * 8 + 2 * (lane % 4) + (e & 1);
        const float p = key < key_end[e >> 1] ? exp2f(scores[0][n][e] * scale_log2 - lse_log2[e >> 1]) : 0.0f;
        scores[0][n][e] = p * (dprobs[0][n][e] - delta[e >> 1]);  // dS
      }
    accumulate_products<kHeadDim, 1>(dq, scores, k_tile);
    __syncthreads();
  }
  const float factor[2] = {args.scale, args.scale};
  store_rows<kHeadDim>(dq[0], factor, args.dq + column, args.dq_row_stride, queries, first_query + warp * 16);
}

// The single pass's share of dQ from one key tile for the query tile [first_query, first_query + kTile): dS·K, dS
// read from the block's dSᵀ tile, each warp 16 query rows, kDqChunk columns at a time. The key tile's turn: the first
// (key tile 0) stores its share in the fp32 accumulator, the next ones add theirs, the last writes scale·dQ as bf16.
constexpr int kDqChunk = 16;
constexpr int kDsLd = kTile + kPad;  // dSᵀ's shared row length in bf16

template <int kHeadDim>
__device__ void add_dq_share(const bf16* ds_tile, const bf16* k_tile, const BackwardArgs& args, const SideRows& queries,
                             int first_query, int head, bool first, bool last) {
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = lane_id();
  const int row0 = first_query + warp * 16 + lane / 4;
#pragma unroll
  for (int chunk = 0; chunk < kHeadDim; chunk += kDqChunk) {
    float share[kDqChunk / 8][4] = {};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      std::uint32_t a[4];
      load_a_trans(a, ds_tile, kDsLd, warp * 16, k * 16);
#pragma unroll
      for (int n = 0; n < kDqChunk / 16; ++n) {
        std::uint32_t b[4];
        load_b_rows_k(b, k_tile, Shape<kHeadDim>::ld, k * 16, chunk + n * 16);
        mma(share[2 * n], a, b[0], b[1]);
        mma(share[2 * n + 1], a, b[2], b[3]);
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + 8 * half;
      if (row >= queries.length) continue;
      const std::int64_t token = queries.begin + static_cast<std::int64_t>(row);
      const int col = chunk + 2 * (lane % 4);
      float* accumulator =
          args.dq_accumulator + (static_cast<std::int64_t>(head) * args.total_tokens + token) * kHeadDim + col;
      bf16* out = args.dq + token * args.dq_row_stride + head * kHeadDim + col;
#pragma unroll
      for (int n = 0; n < kDqChunk / 8; ++n) {
        float2 sum = make_float2(share[n][2 * half], share[n][2 * half + 1]);
        if (!first) {  // L2, not L1: the block before wrote it from another SM
          const float2 held = __ldcg(reinterpret_cast<const float2*>(accumulator + 8 * n));
          sum.x += held.x;
          sum.y += held.y;
        }
        if (last) {  // element by element: dq's row stride may be odd
          out[8 * n] = __float2bfloat16(sum.x * args.scale);
          out[8 * n + 1] = __float2bfloat16(sum.y * args.scale);
        } else {
          __stcg(reinterpret_cast<float2*>(accumulator + 8 * n), sum);
        }
      }
    }
  }
}

// dV = Σ over the query tiles that see the key tile of Pᵀ · dO and dK = scale · Σ dSᵀ · Q, the warp's rows being
// keys: Pᵀ = exp(scale·K·Qᵀ − lse) and dSᵀ = Pᵀ ∘ (V·dOᵀ − delta), lse and delta per query (column).
//
// kSinglePass: dQ too. Query tiles are then aligned to kTile (tile i is rows [i·kTile, (i + 1)·kTile) for every key
// tile), the key tiles that reach a query tile are a prefix of the sequence's (0 to the last whose first key its last
// query sees), and each adds its dS·K in turn: the turn counter of (sequence, head, query tile) counts the key tiles
// done. A key tile waits only on the one before it, which has a lower block index and so was scheduled first (as in
// CUTLASS's serial split-K): the wait always ends. Key tile 0 also zeroes the query rows of tiles no key tile reaches.
template <int kHeadDim, bool kSinglePass>
__global__ void __launch_bounds__(kThreads) dkdv_kernel(BackwardArgs args) {
  using S = Shape<kHeadDim>;
  const SideRows keys = key_rows(args.rows);
  const SideRows queries = query_rows(args.rows);
  const int key_tile = static_cast<int>(blockIdx.x);
  const int first_key = key_tile * kTile;
  const int head = static_cast<int>(blockIdx.y);
  const int column = head * kHeadDim;
  // Queries before the first that sees the tile's first key (its earliest) attend none of its keys: the loop starts
  // there (in self-attention, at the diagonal), with tiles [loop_start + i·kTile, ...).
  const int query_start =
      first_key < keys.length ? first_seeing_query(queries, keys.position(first_key)) : queries.length;
  const int loop_start = kSinglePass ? query_start / kTile * kTile : query_start;
  const int query_tiles = query_start < queries.length ? (queries.length - loop_start + kTile - 1) / kTile : 0;
  if constexpr (kSinglePass) {
    if (key_tile == 0) {
      const int reached = query_tiles > 0 ? loop_start : queries.length;  // rows [0, reached) get dQ 0
      for (int i = static_cast<int>(threadIdx.x); i < reached * kHeadDim; i += kThreads)
        args.dq[(queries.begin + static_cast<std::int64_t>(i / kHeadDim)) * args.dq_row_stride + column +
                i % kHeadDim] = __float2bfloat16(0.0f);
    }
  }
  if (first_key >= keys.length) return;
  const std::int64_t hidden = static_cast<std::int64_t>(args.num_heads) * kHeadDim;
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = lane_id();

  extern __shared__ __align__(128) unsigned char shared[];
  bf16* k_tile = reinterpret_cast<bf16*>(shared);
  bf16* v_tile = k_tile + S::tile;
  bf16* q_tiles = v_tile + S::tile;  // two buffers each
  bf16* dout_tiles = q_tiles + 2 * S::tile;
  float* lse_rows = reinterpret_cast<float*>(dout_tiles + 2 * S::tile);  // [2][kTile], log2 domain
  float* delta_rows = lse_rows + 2 * kTile;                              // [2][kTile]
  bf16* ds_tile = reinterpret_cast<bf16*>(delta_rows + 2 * kTile);       // [key][query], single pass only

  const auto fetch = [&](int buffer, int first_query) {
    copy_tile<kHeadDim>(q_tiles + buffer * S::tile, args.q + column, args.q_row_stride, queries, first_query);
    copy_tile<kHeadDim>(dout_tiles + buffer * S::tile, args.dout + column, hidden, queries, first_query);
    for (int row = static_cast<int>(threadIdx.x); row < kTile; row += kThreads) {
      const int query = first_query + row;
      const std::int64_t index = static_cast<std::int64_t>(head) * args.total_tokens + queries.begin + query;
      lse_rows[buffer * kTile + row] = query < queries.length ? args.lse[index] * kLog2e : 0.0f;
      delta_rows[buffer * kTile + row] = query < queries.length ? args.delta[index] : 0.0f;
    }
  };
  if (query_tiles > 0) {  // else dK and dV are 0
    copy_tile<kHeadDim>(k_tile, args.k + column, args.kv_row_stride, keys, first_key);
    copy_tile<kHeadDim>(v_tile, args.v + column, args.kv_row_stride, keys, first_key);
    fetch(0, loop_start);
    commit_copies();
  }

  const int key0 = first_key + warp * 16 + lane / 4;  // this thread's rows: key0 and key0 + 8
  int query_begin[2];                                 // the first query that sees each row (queries.length if none)
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int key = key0 + 8 * half;
    query_begin[half] = key < keys.length ? first_seeing_query(queries, keys.position(key)) : queries.length;
  }
  const float scale_log2 = args.scale * kLog2e;
  float dk[1][S::n_tiles][4] = {};
  float dv[1][S::n_tiles][4] = {};

  for (int tile = 0; tile < query_tiles; ++tile) {
    const int buffer = tile & 1;
    const int first_query = loop_start + tile * kTile;
    await_tile(tile + 1 < query_tiles, [&] { fetch(buffer ^ 1, first_query + kTile); });
    const bf16* q_tile = q_tiles + buffer * S::tile;
    const bf16* dout_tile = dout_tiles + buffer * S::tile;
    const float* lse_tile = lse_rows + buffer * kTile;
    const float* delta_tile = delta_rows + buffer * kTile;

    float probs[1][8][4];   // Pᵀ
    float dprobs[1][8][4];  // dPᵀ, then dSᵀ
    row_products<kHeadDim, 1>(probs, k_tile, warp * 16, q_tile);
    row_products<kHeadDim, 1>(dprobs, v_tile, warp * 16, dout_tile);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = n * 8 + 2 * (lane % 4) + (e & 1);
        const int query = first_query + col;
        const float p = query >= query_begin[e >> 1] && query < queries.length
                            ? exp2f(probs[0][n][e] * scale_log2 - lse_tile[col])
                            : 0.0f;
        probs[0][n][e] = p;
        dprobs[0][n][e] = p * (dprobs[0][n][e] - delta_tile[col]);
      }
    if constexpr (kSinglePass) {  // dSᵀ as bf16, the operand dQ's product reads transposed
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int half = 0; half < 2; ++half)
          *reinterpret_cast<std::uint32_t*>(ds_tile + (warp * 16 + lane / 4 + 8 * half) * kDsLd + n * 8 +
                                            2 * (lane % 4)) = pack(dprobs[0][n][2 * half], dprobs[0][n][2 * half + 1]);
    }
    accumulate_products<kHeadDim, 1>(dv, probs, dout_tile);
    accumulate_products<kHeadDim, 1>(dk, dprobs, q_tile);
    if constexpr (kSinglePass) {
      int* turn = args.dq_turns + (static_cast<std::int64_t>(blockIdx.z) * args.num_heads + head) * args.dq_turn_tiles +
                  first_query / kTile;
      if (threadIdx.x == 0)
        while (load_acquire(turn) != key_tile) {
        }
      __syncthreads();  // dSᵀ is whole, and the turn is this key tile's
      const int reaching_key_tiles = (tile_key_end(queries, first_query, kTile, keys) + kTile - 1) / kTile;
      add_dq_share<kHeadDim>(ds_tile, k_tile, args, queries, first_query, head, key_tile == 0,
                             key_tile + 1 == reaching_key_tiles);
      __threadfence();  // this block's dQ writes are visible on the GPU before the next key tile's turn
      __syncthreads();
      if (threadIdx.x == 0) store_release(turn, key_tile + 1);
    } else {
      __syncthreads();
    }
  }
  const float dk_factor[2] = {args.scale, args.scale};
  const float dv_factor[2] = {1.0f, 1.0f};
  store_rows<kHeadDim>(dk[0], dk_factor, args.dk + column, args.dkv_row_stride, keys, first_key + warp * 16);
  store_rows<kHeadDim>(dv[0], dv_factor, args.dv + column, args.dkv_row_stride, keys, first_key + warp * 16);
}

template <typename Kernel, typename Args>
void launch(Kernel kernel, std::size_t shared_bytes, int block_rows, const VarlenBatch& batch, int num_heads,
            const Args& args, cudaStream_t stream, const char* name) {
  SLUICE_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)));
  const dim3 grid(static_cast<unsigned int>(ceil_div(batch.max_seqlen, block_rows)),
                  static_cast<unsigned int>(num_heads), static_cast<unsigned int>(batch.num_seqs));
  kernel<<<grid, kThreads, shared_bytes, stream>>>(args);
  SLUICE_LAUNCH_CHECK(name);
}

template <int kMmaTiles>
void launch_forward(const VarlenBatch& queries, int head_dim, const ForwardArgs& args, cudaStream_t stream) {
  if (head_dim == 64) {
    launch(forward_kernel<64, kMmaTiles>, forward_bytes<64>(kMmaTiles), forward_rows(kMmaTiles), queries,
           args.num_heads, args, stream, "attention_forward");
  } else {
    launch(forward_kernel<128, kMmaTiles>, forward_bytes<128>(kMmaTiles), forward_rows(kMmaTiles), queries,
           args.num_heads, args, stream, "attention_forward");
  }
}

template <int kHeadDim>
void launch_backward(const VarlenBatch& queries, const VarlenBatch& keys, const BackwardArgs& args,
                     cudaStream_t stream) {
  using S = Shape<kHeadDim>;
  if (args.dq_turns != nullptr) {
    launch(dkdv_kernel<kHeadDim, true>, S::dqkv_bytes, kTile, keys, args.num_heads, args, stream,
           "attention_backward (dq, dk, dv)");
    return;
  }
  launch(dq_kernel<kHeadDim>, S::dq_bytes, kTile, queries, args.num_heads, args, stream, "attention_backward (dq)");
  launch(dkdv_kernel<kHeadDim, false>, S::dkdv_bytes, kTile, keys, args.num_heads, args, stream,
         "attention_backward (dk, dv)");
}

}  // namespace

void mma_attention_forward(const VarlenBatch& queries, int head_dim, int query_tile_rows, const ForwardArgs& args,
                           cudaStream_t stream) {
  if (query_tile_rows == forward_rows(1)) {
    launch_forward<1>(queries, head_dim, args, stream);
  } else {
    launch_forward<2>(queries, head_dim, args, stream);
  }
}

// dQ's grid covers the query rows, dK and dV's (and the single pass's) the key rows (the sequences are the same on
// both sides).
void mma_attention_backward(const VarlenBatch& queries, const VarlenBatch& keys, int head_dim, const BackwardArgs& args,
                            cudaStream_t stream) {
  if (head_dim == 64) {
    launch_backward<64>(queries, keys, args, stream);
  } else {
    launch_backward<128>(queries, keys, args, stream);
  }
}

}  // namespace sluice::executor::kernels::detail
