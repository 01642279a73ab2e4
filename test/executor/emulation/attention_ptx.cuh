#pragma once
// The CPU's versions of the PTX wrappers in reference_executor/kernels/src/attention_ptx.cuh, found first on the
// emulated kernels' include path. ldmatrix and mma.sync exchange the warp's operands (cuda_emulation.hpp), then each
// lane takes its part of the result as the PTX ISA lays it out (the layouts are written out in attention_mma.cu);
// cp.async copies at once; the single pass's turn counter is an atomic.
#include <cuda_bf16.h>

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>

#include "cuda_emulation.hpp"

namespace sluice::executor::kernels::detail {

namespace ptx_emulation {

using emulation::kWarpSize;

inline std::uint32_t bits(__nv_bfloat16 value) { return static_cast<__nv_bfloat16_raw>(value).x; }

// A bf16 is a float's upper 16 bits.
inline float low_half(std::uint32_t pair) { return std::bit_cast<float>(pair << 16); }

inline float high_half(std::uint32_t pair) { return std::bit_cast<float>(pair & 0xffff0000u); }

inline std::uint32_t pair_of(__nv_bfloat16 low, __nv_bfloat16 high) { return bits(low) | bits(high) << 16; }

// ldmatrix.x4: lanes 8j..8j+7 address the rows of matrix j.
template <bool kTransposed>
void load_matrices(std::uint32_t (&r)[4], const __nv_bfloat16* pointer) {
  const std::array<const __nv_bfloat16*, kWarpSize> rows = emulation::warp_values(pointer);
  const unsigned lane = emulation::lane();
  for (unsigned j = 0; j < 4; ++j) {
    if (kTransposed) {  // rows 2·(lane%4) and the next, column lane/4
      const unsigned row = 8 * j + 2 * (lane % 4);
      r[j] = pair_of(rows[row][lane / 4], rows[row + 1][lane / 4]);
    } else {  // row lane/4, columns 2·(lane%4) and the next
      const __nv_bfloat16* row = rows[8 * j + lane / 4];
      r[j] = pair_of(row[2 * (lane % 4)], row[2 * (lane % 4) + 1]);
    }
  }
}

struct MmaOperands {
  std::uint32_t a[4];
  std::uint32_t b[2];
};

}  // namespace ptx_emulation

inline void ldmatrix_x4(std::uint32_t (&r)[4], const __nv_bfloat16* pointer) {
  ptx_emulation::load_matrices<false>(r, pointer);
}

inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], const __nv_bfloat16* pointer) {
  ptx_emulation::load_matrices<true>(r, pointer);
}

// c += a · b for one 16×8 tile: lane 4g + t holds A (rows g, g+8; k 2t.., 2t+8..), B (k 2t.., 2t+8..; column g) and
// C (rows g, g+8; columns 2t, 2t+1). The products of exact bf16 values are summed in double, then added to c.
inline void mma(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  using namespace ptx_emulation;
  const MmaOperands mine{{a[0], a[1], a[2], a[3]}, {b0, b1}};
  const std::byte* const slots = emulation::warp_publish(&mine, sizeof(mine));
  const auto operands = [slots](unsigned source) {
    MmaOperands of_lane;
    std::memcpy(&of_lane, slots + source * emulation::kExchangeBytes, sizeof(of_lane));
    return of_lane;
  };
  // A's (row, k) is in lane 4·(row % 8) + (k % 8) / 2, register (row / 8) + 2·(k / 8), half k % 2; B's (k, col) in
  // lane 4·col + (k % 8) / 2, register k / 8, half k % 2. This lane's rows of A and columns of B, then their products.
  const unsigned lane = emulation::lane();
  const auto half = [](std::uint32_t pair, unsigned k) { return k % 2 == 0 ? low_half(pair) : high_half(pair); };
  float rows[2][16];
  float cols[2][16];
  for (unsigned quad = 0; quad < 4; ++quad) {  // the lanes holding k = 2·quad, 2·quad + 1 and those + 8
    const MmaOperands row_lane = operands(4 * (lane / 4) + quad);
    const MmaOperands col_lanes[2] = {operands(4 * (2 * (lane % 4)) + quad), operands(4 * (2 * (lane % 4) + 1) + quad)};
    for (unsigned k : {2 * quad, 2 * quad + 1, 2 * quad + 8, 2 * quad + 9})
      for (unsigned h = 0; h < 2; ++h) {
        rows[h][k] = half(row_lane.a[h + 2 * (k / 8)], k);
        cols[h][k] = half(col_lanes[h].b[k / 8], k);
      }
  }
  for (unsigned i = 0; i < 4; ++i) {  // c[i]: row lane/4 + 8·(i/2), column 2·(lane%4) + i%2
    double sum = 0.0;
    for (unsigned k = 0; k < 16; ++k) sum += static_cast<double>(rows[i / 2][k]) * cols[i % 2][k];
    c[i] = static_cast<float>(static_cast<double>(c[i]) + sum);
  }
}

// Blocks run one at a time, so a turn that is not the reader's at once never will be: a wait that sees the same
// count this often fails instead of hanging.
inline int load_acquire(const int* counter) {
  constexpr int kHopelessReads = 1 << 20;
  thread_local const int* last_counter = nullptr;
  thread_local int last_value = 0;
  thread_local int same_reads = 0;
  const int value = std::atomic_ref<int>(*const_cast<int*>(counter)).load(std::memory_order_acquire);
  same_reads = counter == last_counter && value == last_value ? same_reads + 1 : 0;
  last_counter = counter;
  last_value = value;
  if (same_reads > kHopelessReads) emulation::fail("a spin wait on a turn no block can give (blocks run in order)");
  return value;
}

inline void store_release(int* counter, int value) {
  std::atomic_ref<int>(*counter).store(value, std::memory_order_release);
}

inline void copy_async(__nv_bfloat16* destination, const __nv_bfloat16* source, bool valid) {
  if (valid)
    std::memcpy(destination, source, 16);
  else
    std::memset(destination, 0, 16);
}

inline void commit_copies() {}

template <int kPending>
void wait_copies() {}

}  // namespace sluice::executor::kernels::detail
