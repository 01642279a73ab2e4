#pragma once
// CUDA's execution model on the CPU, for testing kernels where there is no GPU. The kernels' own sources are compiled
// as C++ (rewrite.cmake turns `kernel<<<grid, block, shared, stream>>>(args)` into `kernel | Config{...}(args)` and
// `extern __shared__` arrays into the launch's dynamic shared memory) with this header included first. A launch runs
// its blocks one after another; each block's threads are host threads, so that __syncthreads and the warp shuffles
// are real barriers, and every access the kernels make goes to host memory, where AddressSanitizer and
// UndefinedBehaviorSanitizer see it. "Device" memory is host memory, and the runtime calls the kernels and their tests
// make (cudaMalloc, cudaMemcpy, cudaMemsetAsync, ...) are defined in cuda_emulation.cpp, which replaces libcudart.
//
// What it cannot show: speed, the GPU's own rounding of fused operations (the host compiler decides where to fuse a
// multiply-add), races between blocks (they never overlap), and PTX or tensor-core code (the attention kernels).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
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

// Waits for every thread of the block still running (CUDA's __syncthreads; a thread that has returned no longer
// counts).
void sync_threads();
// The value `lane_mask` lanes away within the warp: a barrier of the warp's threads around an exchange.
float shuffle_xor(float value, int lane_mask);
// The launch's dynamic shared memory, 16-byte aligned, filled with 0xff bytes (NaN as floats) before each block.
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

// Runs `body` once for every thread of every block of the grid; aborts with a message on a grid CUDA would refuse.
void run_grid(const Config& config, const std::function<void()>& body);

template <class... Params, class... Args>
void operator|(void (*kernel)(Params...), const Launch<Args...>& launch) {
  run_grid(launch.config, [&] { std::apply([&](const Args&... args) { kernel(args...); }, launch.args); });
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
#define __launch_bounds__(...)
#undef __shared__
#define __shared__ static  // one instance for the block's threads; blocks run one at a time
using std::max;
using std::min;
