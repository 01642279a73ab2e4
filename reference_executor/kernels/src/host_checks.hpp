#pragma once
// Host-side argument checks shared by the kernel wrappers (launches are checked with SLUICE_LAUNCH_CHECK).
#include <algorithm>
#include <cstdint>

#include "sluice/core/error.hpp"

namespace sluice::executor::kernels::detail {

using sluice::require;

inline void require_pointer(const void* pointer, const char* name) {
  require(pointer != nullptr, name, ": must not be a null pointer");
}

// Tiles move 16 bytes (8 bf16) per access, so such buffers must start on a 16-byte boundary.
inline void require_aligned16(const void* pointer, const char* name) {
  require_pointer(pointer, name);
  require(reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0, name, ": must be 16-byte aligned");
}

inline void require_positive(std::int64_t value, const char* name) {
  require(value > 0, name, ": must be > 0, got ", value);
}

inline std::int64_t ceil_div(std::int64_t value, std::int64_t divisor) { return (value + divisor - 1) / divisor; }

// Blocks for a grid-stride loop over `count` elements: one element per thread, capped at 2^20 blocks
// (the loop covers the rest), which keeps the grid legal and the GPU full.
inline unsigned int grid_stride_blocks(std::int64_t count, int threads) {
  return static_cast<unsigned int>(std::clamp<std::int64_t>(ceil_div(count, threads), 1, std::int64_t{1} << 20));
}

}  // namespace sluice::executor::kernels::detail
