#pragma once
// The PTX the mma attention kernels (attention_mma.cu) are built on, each instruction in a function of its own:
// ldmatrix, mma.sync, cp.async and the single pass's acquire and release. The CUDA emulation of the tests supplies
// the same functions for the CPU (test/executor/emulation/attention_ptx.cuh), so that the kernels run there unchanged.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace sluice::executor::kernels::detail {

__device__ inline std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

__device__ inline void ldmatrix_x4(std::uint32_t (&r)[4], const __nv_bfloat16* pointer) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(pointer)));
}

__device__ inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], const __nv_bfloat16* pointer) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(pointer)));
}

// c += a · b for one 16×8 tile.
__device__ inline void mma(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The single pass's turns: a counter in global memory that one block releases after its dQ writes and the next
// acquires before its own (gpu scope, so the writes of the block before are visible to every thread of the next
// once its thread 0 has seen the count and the block has passed a barrier).
__device__ inline int load_acquire(const int* counter) {
  int value;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(value) : "l"(counter) : "memory");
  return value;
}

__device__ inline void store_release(int* counter, int value) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(counter), "r"(value) : "memory");
}

// 16 bytes from global to shared memory, asynchronously; zeros when !valid (nothing is read then).
__device__ inline void copy_async(__nv_bfloat16* destination, const __nv_bfloat16* source, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(destination)), "l"(source),
               "r"(valid ? 16 : 0));
}

__device__ inline void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `kPending` committed groups of this thread's copies are still in flight.
template <int kPending>
__device__ inline void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace sluice::executor::kernels::detail
