#pragma once
// Rows of bf16 read and written 8 values (16 bytes) at a time. A memory-bound kernel moves the most bytes per
// instruction this way; where a buffer or a row pitch is not 16-byte aligned, the same loops fall back to one value
// at a time, which gives the same bits, since each value's arithmetic does not depend on how it was loaded.
#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>

namespace sluice::executor::kernels::detail {

constexpr int kVector = 8;  // bf16 values per 16-byte access

// A block of kThreads walks a row in vectors, thread t taking the vectors t, t + kThreads, ...: every loop over a row
// visits a thread's values in the same order, so its partial sums come out the same whichever way they were loaded.
__device__ inline int first_vector_column() { return static_cast<int>(threadIdx.x) * kVector; }
template <int kThreads>
constexpr int kVectorColumnStep = kThreads* kVector;

// values[e] = p[e] for e < available (at most kVector); a whole vector in one load where kAligned says p is
// 16-byte aligned.
template <bool kAligned>
__device__ inline void load_vector(const __nv_bfloat16* p, int available, float (&values)[kVector]) {
  if (kAligned && available >= kVector) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const auto* halves = reinterpret_cast<const __nv_bfloat16*>(&raw);
#pragma unroll
    for (int e = 0; e < kVector; ++e) values[e] = __bfloat162float(halves[e]);
    return;
  }
#pragma unroll
  for (int e = 0; e < kVector; ++e) values[e] = e < available ? __bfloat162float(p[e]) : 0.0f;
}

// p[e] = values[e] rounded to nearest even, for e < available.
template <bool kAligned>
__device__ inline void store_vector(__nv_bfloat16* p, int available, const float (&values)[kVector]) {
  if (kAligned && available >= kVector) {
    uint4 raw;
    auto* halves = reinterpret_cast<__nv_bfloat16*>(&raw);
#pragma unroll
    for (int e = 0; e < kVector; ++e) halves[e] = __float2bfloat16(values[e]);
    *reinterpret_cast<uint4*>(p) = raw;
    return;
  }
#pragma unroll
  for (int e = 0; e < kVector; ++e)
    if (e < available) p[e] = __float2bfloat16(values[e]);
}

// Whether every row of every buffer starts on a 16-byte boundary: the bases aligned and the pitch (in bf16 values)
// a whole number of vectors. Null pointers (absent optional buffers) do not count.
inline bool rows_aligned(std::int64_t pitch, std::initializer_list<const void*> buffers) {
  if (pitch % kVector != 0) return false;
  for (const void* buffer : buffers)
    if (reinterpret_cast<std::uintptr_t>(buffer) % 16 != 0) return false;
  return true;
}

}  // namespace sluice::executor::kernels::detail
