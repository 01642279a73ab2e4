// The emulator's grid runner and the CUDA runtime calls the kernels and their tests make, on host memory.
#include "cuda_emulation.hpp"

#include <array>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <thread>
#include <vector>

namespace sluice::executor::emulation {

thread_local dim3 thread_index;
thread_local dim3 block_index;
thread_local dim3 block_dim;
thread_local dim3 grid_dim;

namespace {

constexpr unsigned kWarpSize = 32;
constexpr unsigned kMaxThreads = 1024;
constexpr std::size_t kMaxSharedBytes = 227 * 1024;  // sm_90's most for one block

[[noreturn]] void fail(const char* why) {
  std::fprintf(stderr, "cuda emulation: %s\n", why);
  std::abort();
}

class Grid;

// The emulated thread running on this host thread: its launch, its index in the block, and which of the two shuffle
// slot sets its next exchange uses.
thread_local Grid* current_grid = nullptr;
thread_local unsigned current_thread = 0;
thread_local unsigned exchange_parity = 0;

// One launch: its threads run the blocks in order. Between blocks (the end barrier's completion, with every thread
// waiting) the block barriers are made anew, since threads that returned early dropped out of them.
class Grid {
public:
  Grid(const Config& config, const std::function<void()>& body)
      : config_(config),
        body_(body),
        threads_(config.block.x * config.block.y * config.block.z),
        slots_{std::vector<float>(threads_), std::vector<float>(threads_)},
        shared_(config.shared_bytes > 0 ? new (std::align_val_t{16}) std::byte[config.shared_bytes] : nullptr),
        block_end_(static_cast<std::ptrdiff_t>(threads_), BlockEnd{this}) {
    start_block();
  }

  void run() {
    std::vector<std::jthread> threads;
    threads.reserve(threads_);
    for (unsigned t = 0; t < threads_; ++t) threads.emplace_back([this, t] { work(t); });
  }

  void sync() { block_barrier_->arrive_and_wait(); }

  float shuffle_xor(unsigned thread, float value, int lane_mask) {
    const unsigned warp = thread / kWarpSize;
    const unsigned partner = thread ^ static_cast<unsigned>(lane_mask);
    if (lane_mask < 0 || lane_mask >= static_cast<int>(kWarpSize) || partner >= threads_)
      fail("__shfl_xor_sync with a lane outside the block's warp");
    // Two slot sets used in turn: a thread cannot write a set again before every thread of its warp has passed the
    // next exchange's barrier, by which time they have all read it.
    std::vector<float>& slots = slots_[exchange_parity];
    slots[thread] = value;
    warp_barriers_[warp]->arrive_and_wait();
    const float result = slots[partner];
    exchange_parity ^= 1;
    return result;
  }

  [[nodiscard]] void* shared() const { return shared_.get(); }

private:
  struct BlockEnd {
    Grid* grid;
    void operator()() noexcept { grid->start_block(); }
  };

  struct ArrayDelete {
    void operator()(std::byte* bytes) const { ::operator delete[](bytes, std::align_val_t{16}); }
  };

  void start_block() {
    block_barrier_.emplace(static_cast<std::ptrdiff_t>(threads_));
    warp_barriers_.clear();
    for (unsigned first = 0; first < threads_; first += kWarpSize)
      warp_barriers_.push_back(
          std::make_unique<std::barrier<>>(static_cast<std::ptrdiff_t>(std::min(kWarpSize, threads_ - first))));
    if (shared_) std::memset(shared_.get(), 0xff, config_.shared_bytes);
  }

  void work(unsigned thread) {
    const dim3 block = config_.block;
    const dim3 grid = config_.grid;
    block_dim = block;
    grid_dim = grid;
    thread_index = dim3(thread % block.x, thread / block.x % block.y, thread / (block.x * block.y));
    current_grid = this;
    current_thread = thread;
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          block_index = dim3(x, y, z);
          exchange_parity = 0;
          body_();
          // Returned: the block's barriers stop waiting for this thread.
          block_barrier_->arrive_and_drop();
          warp_barriers_[thread / kWarpSize]->arrive_and_drop();
          block_end_.arrive_and_wait();
        }
    current_grid = nullptr;
  }

  const Config& config_;
  const std::function<void()>& body_;
  const unsigned threads_;
  std::array<std::vector<float>, 2> slots_;
  std::unique_ptr<std::byte[], ArrayDelete> shared_;
  std::optional<std::barrier<>> block_barrier_;
  std::vector<std::unique_ptr<std::barrier<>>> warp_barriers_;
  std::barrier<BlockEnd> block_end_;
};

Grid& current() {
  if (current_grid == nullptr) fail("a device function called outside a kernel");
  return *current_grid;
}

}  // namespace

void sync_threads() { current().sync(); }

float shuffle_xor(float value, int lane_mask) { return current().shuffle_xor(current_thread, value, lane_mask); }

void* dynamic_shared() { return current().shared(); }

void run_grid(const Config& config, const std::function<void()>& body) {
  const std::uint64_t threads = std::uint64_t{config.block.x} * config.block.y * config.block.z;
  if (threads == 0 || threads > kMaxThreads || config.block.z > 64)
    fail("a block of no threads or more than 1024 (or z past 64)");
  if (config.grid.x == 0 || config.grid.y == 0 || config.grid.z == 0 || config.grid.y > 65535 || config.grid.z > 65535)
    fail("a grid with no blocks, or y or z past 65535");
  if (config.shared_bytes > kMaxSharedBytes) fail("more dynamic shared memory than a block may have");
  Grid(config, body).run();
}

}  // namespace sluice::executor::emulation

// The CUDA runtime calls of the kernels' wrappers and their tests, on host memory. Everything runs in order, at once:
// streams and synchronisation have nothing to wait for.
extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() { return cudaSuccess; }

const char* cudaGetErrorString(cudaError_t /*error*/) { return "cuda emulation: no such error can occur"; }

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  // 256-byte aligned, as cudaMalloc's are, and no larger than asked, so that AddressSanitizer sees any access past
  // the end; a zero-byte request still gets a distinct pointer.
  return posix_memalign(pointer, 256, std::max<size_t>(bytes, 1)) == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void* pointer) {
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* to, const void* from, size_t bytes, cudaMemcpyKind /*kind*/) {
  if (bytes > 0) std::memcpy(to, from, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t /*stream*/) {
  if (bytes > 0) std::memset(pointer, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaFuncSetAttribute(const void* /*function*/, cudaFuncAttribute /*attribute*/, int /*value*/) {
  return cudaSuccess;
}

}  // extern "C"
