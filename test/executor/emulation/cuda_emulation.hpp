#pragma once
// CUDA's execution model on the CPU, for testing kernels where there is no GPU. The kernels' own sources are compiled
// as C++ (rewrite.cmake turns `kernel<<<grid, block, shared, stream>>>(args)` into `kernel | Config{...}(args)` and
// `extern __shared__` arrays into the launch's dynamic shared memory) with this header included first. A launch runs
// its blocks one after another on its stream's host thread; each CUDA thread is a fiber with a stack of its own, so
// that __syncthreads and the warp shuffles are real barriers (a fiber waits there while the others run), and every
// access the kernels make goes to host memory, where AddressSanitizer and UndefinedBehaviorSanitizer see it. "Device"
// memory is host memory. cuda_runtime.cpp replaces libcudart: streams are host threads that run their work in
// order, events mark points in them, and copies and launches are queued as CUDA queues them. libraries.cpp replaces
// the parts of cuBLAS and NCCL the CUDA backend calls, so that it runs whole plans here as on GPUs.
//
// The attention kernels' tensor-core code runs too: the PTX wrappers (attention_ptx.cuh) and wmma (mma.h) have
// versions here, found first on the include path, that exchange the lanes' operands and compute each lane's part of
// the result as the PTX ISA lays it out.
//
// What it cannot show: speed, the GPU's own rounding of fused operations (the host compiler decides where to fuse a
// multiply-add) and of the tensor cores' sums, races between blocks (they never overlap), and races on cp.async's
// copies (they complete at once). Kernels of different streams never overlap either (one launch runs at a time), but
// everything else on the streams does: copies, waits, cuBLAS and NCCL.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace sluice::executor::emulation {

// The running thread's coordinates, set by the emulator in each of its host threads.
extern thread_local dim3 thread_index;
extern thread_local dim3 block_index;
extern thread_local dim3 block_dim;
extern thread_local dim3 grid_dim;

constexpr unsigned kWarpSize = 32;
// The most bytes a lane hands to one warp exchange (an mma.sync's A and B fragments take 24).
constexpr std::size_t kExchangeBytes = 32;

// Ends the test program with a message on what CUDA would not do (an abort: a kernel's error has no caller to go to).
[[noreturn]] void fail(const char* why);

// Waits for every thread of the block still running (CUDA's __syncthreads; a thread that has returned no longer
// counts).
void sync_threads();
// Waits for every thread of the warp still running (__syncwarp).
void sync_warp();
// The running thread's lane in its warp.
unsigned lane();
// Publishes the calling lane's `bytes` of `value` and waits at a barrier of the warp's threads for the others':
// lane l's bytes then lie at the result + l · kExchangeBytes (zeros for a lane the block lacks), readable until the
// caller's next exchange. The shuffles and the warp-wide PTX are built on it.
const std::byte* warp_publish(const void* value, std::size_t bytes);

// Every lane's `value`.
template <class T>
std::array<T, kWarpSize> warp_values(const T& value) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kExchangeBytes);
  const std::byte* const slots = warp_publish(&value, sizeof(T));
  std::array<T, kWarpSize> lanes;
  for (unsigned l = 0; l < kWarpSize; ++l) std::memcpy(&lanes[l], slots + l * kExchangeBytes, sizeof(T));
  return lanes;
}

// __shfl_sync and __shfl_xor_sync: the value of lane `source`, or of lane `lane() ^ lane_mask`.
template <class T>
T shuffle(T value, int source) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kExchangeBytes);
  const std::byte* const slots = warp_publish(&value, sizeof(T));
  T result;
  std::memcpy(&result, slots + static_cast<unsigned>(source) % kWarpSize * kExchangeBytes, sizeof(T));
  return result;
}
template <class T>
T shuffle_xor(T value, int lane_mask) {
  return shuffle(value, static_cast<int>(lane() ^ static_cast<unsigned>(lane_mask)));
}

// The launch's dynamic shared memory, 128-byte aligned, filled with 0xff bytes (NaN as floats) before each block.
void* dynamic_shared();

struct Config;

template <class... Args>
struct Launch {
  const Config& config;
  std::tuple<Args...> args;
};

// A launch's configuration, and with its arguments, the launch.
struct Config {
  dim3 grid;
  dim3 block;
  std::size_t shared_bytes = 0;
  cudaStream_t stream = nullptr;

  template <class... Args>
  Launch<std::decay_t<Args>...> operator()(Args&&... args) const {
    return {*this, std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...)};
  }
};

// Checks a launch's configuration as CUDA would (aborting with a message on a grid CUDA refuses) and queues it on its
// stream, where it runs `body` once for every thread of every block of the grid. Launches run one at a time in the
// process, whatever their stream: a block's __shared__ variables are statics, and the fibers' stacks are shared.
void launch(const Config& config, std::function<void()> body);

// Runs `work` in `stream`'s order: on the stream's own host thread, after the work queued before it there. On the
// legacy default stream (null) it runs at once on the calling thread, after the current device's blocking streams
// have drained, as the legacy stream waits for them.
void submit(cudaStream_t stream, std::function<void()> work);

// The device current on the calling thread (cudaSetDevice's).
int current_device();

template <class... Params, class... Args>
void operator|(void (*kernel)(Params...), const Launch<Args...>& launch_with) {
  launch(launch_with.config, [kernel, args = launch_with.args] {
    std::apply([kernel](const Args&... values) { kernel(values...); }, args);
  });
}

}  // namespace sluice::executor::emulation

// nvcc's overload for a kernel itself (cuda_runtime.h declares it for nvcc alone); every attribute is accepted.
template <class... Params>
cudaError_t cudaFuncSetAttribute(void (* /*kernel*/)(Params...), cudaFuncAttribute /*attribute*/, int /*value*/) {
  return cudaSuccess;
}

// CUDA's device-side names, as the kernels use them.
#define threadIdx (::sluice::executor::emulation::thread_index)
#define blockIdx (::sluice::executor::emulation::block_index)
#define blockDim (::sluice::executor::emulation::block_dim)
#define gridDim (::sluice::executor::emulation::grid_dim)
#define __syncthreads() ::sluice::executor::emulation::sync_threads()
#define __shfl_xor_sync(mask, value, lane_mask) ::sluice::executor::emulation::shuffle_xor((value), (lane_mask))
#define __shfl_sync(mask, value, source) ::sluice::executor::emulation::shuffle((value), (source))
#define __syncwarp() ::sluice::executor::emulation::sync_warp()
// Blocks run one at a time: the cache hints are plain accesses, and a fence orders the host thread's own.
#define __ldcg(pointer) (*(pointer))
#define __stcg(pointer, value) (*(pointer) = (value))
#define __threadfence() std::atomic_thread_fence(std::memory_order_seq_cst)
#define __launch_bounds__(...)
#undef __shared__
#define __shared__ static  // one instance for the block's threads; blocks run one at a time
using std::max;
using std::min;
