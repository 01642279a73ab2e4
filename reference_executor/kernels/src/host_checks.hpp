#pragma once
// Host-side argument and launch checks shared by the kernel wrappers.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "sluice/core/error.hpp"

namespace sluice::executor::kernels::detail {

using sluice::detail::require;

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

inline void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
}

// Call right after a launch: a bad configuration is reported here rather than at the next synchronisation.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

inline std::int64_t ceil_div(std::int64_t value, std::int64_t divisor) { return (value + divisor - 1) / divisor; }

// Blocks for a grid-stride loop over `count` elements: one element per thread, capped at 2^20 blocks
// (the loop covers the rest), which keeps the grid legal and the GPU full.
inline unsigned int grid_stride_blocks(std::int64_t count, int threads) {
  return static_cast<unsigned int>(std::clamp<std::int64_t>(ceil_div(count, threads), 1, std::int64_t{1} << 20));
}

}  // namespace sluice::executor::kernels::detail
