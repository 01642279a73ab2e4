// The emulator's grid runner: a launch's threads as fibers on one host thread.
#include "cuda_emulation.hpp"

#include <ucontext.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define SLUICE_EMULATION_ASAN 1
#endif

namespace sluice::executor::emulation {

thread_local dim3 thread_index;
thread_local dim3 block_index;
thread_local dim3 block_dim;
thread_local dim3 grid_dim;

namespace {

constexpr unsigned kMaxThreads = 1024;
constexpr std::size_t kMaxSharedBytes = 227 * 1024;  // sm_90's most for one block
constexpr std::size_t kSharedAlignment = 128;        // the most a kernel asks of its dynamic shared memory
// A CUDA thread's stack: the kernels' register arrays and the emulated mma's matrices, with AddressSanitizer's
// redzones around them.
constexpr std::size_t kStackBytes = 256 * 1024;

// AddressSanitizer keeps a shadow of each stack, so it is told of every switch between them (its fiber interface).
void start_switch([[maybe_unused]] void** fake_stack, [[maybe_unused]] const void* bottom,
                  [[maybe_unused]] std::size_t size) {
#ifdef SLUICE_EMULATION_ASAN
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#endif
}

void finish_switch([[maybe_unused]] void* fake_stack, [[maybe_unused]] const void** bottom,
                   [[maybe_unused]] std::size_t* size) {
#ifdef SLUICE_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
#endif
}

// A fiber's saved registers, and the switch between two fibers' stacks. On x86-64 a switch saves the callee-saved
// registers on the stack it leaves and loads them from the one it enters: no system call, unlike swapcontext's
// signal mask, which made the fibers slower than host threads. Elsewhere it is ucontext.
#if defined(__x86_64__)
struct Context {
  void* stack_pointer = nullptr;
};

extern "C" void sluice_emulation_switch(void** save, void* load);
asm(R"(
    .pushsection .text
    .globl sluice_emulation_switch
    .type sluice_emulation_switch, @function
sluice_emulation_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size sluice_emulation_switch, .-sluice_emulation_switch
    .popsection
)");

void switch_context(Context& from, Context& to) { sluice_emulation_switch(&from.stack_pointer, to.stack_pointer); }

// A stack that the switch enters as if leaving `entry`'s caller: the saved registers (the floating-point control
// words as the host's, the others zero), then `entry` as the return address, placed so that `entry` starts with the
// stack aligned as a call leaves it.
void make_context(Context& context, std::byte* stack, std::size_t bytes, void (*entry)()) {
  auto top = reinterpret_cast<std::uintptr_t>(stack + bytes) & ~std::uintptr_t{15};
  auto* slots = reinterpret_cast<std::uint64_t*>(top - 72);
  std::memset(slots, 0, 72);
  std::uint32_t mxcsr = 0;
  std::uint16_t x87_control = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(x87_control));
  std::memcpy(slots, &mxcsr, sizeof(mxcsr));
  std::memcpy(reinterpret_cast<std::byte*>(slots) + 4, &x87_control, sizeof(x87_control));
  slots[7] = reinterpret_cast<std::uint64_t>(entry);
  context.stack_pointer = slots;
}
#else
struct Context {
  ucontext_t registers{};
};

void switch_context(Context& from, Context& to) { swapcontext(&from.registers, &to.registers); }

void make_context(Context& context, std::byte* stack, std::size_t bytes, void (*entry)()) {
  getcontext(&context.registers);
  context.registers.uc_stack.ss_sp = stack;
  context.registers.uc_stack.ss_size = bytes;
  context.registers.uc_link = nullptr;
  makecontext(&context.registers, entry, 0);
}
#endif

class Grid;

// The launch running on this host thread, and the emulated thread it is running.
thread_local Grid* current_grid = nullptr;
thread_local unsigned current_thread = 0;

// A barrier of a block's or a warp's threads: the last of those still running to arrive opens it (a new
// generation) for the others, which wait by yielding; a thread that returns stops counting.
struct Barrier {
  unsigned expected = 0;
  unsigned arrived = 0;
  std::uint64_t generation = 0;

  // Whether the arrival (or the drop) was the last the barrier waited for, which opens it.
  bool open_if_complete() {
    if (arrived < expected || arrived == 0) return false;
    arrived = 0;
    ++generation;
    return true;
  }
};

// One launch. Its blocks run one after another on its stream's host thread, each CUDA thread a fiber with a stack of
// its own: a fiber runs until it waits at a barrier or returns, then the next one runs, round after round, until the
// block's threads have all returned. Switching fibers costs far less than waking host threads, and a round in which
// no thread moves is a deadlock, which fails at once instead of hanging.
class Grid {
public:
  Grid(const Config& config, const std::function<void()>& body)
      : config_(config),
        body_(body),
        threads_(config.block.x * config.block.y * config.block.z),
        fibers_(threads_),
        warp_barriers_((threads_ + kWarpSize - 1) / kWarpSize),
        // Whole warps, zeros where the block has no lane: those slots are never written.
        slots_{std::vector<std::byte>(warp_barriers_.size() * kWarpSize * kExchangeBytes),
               std::vector<std::byte>(warp_barriers_.size() * kWarpSize * kExchangeBytes)},
        shared_(config.shared_bytes > 0 ? new (std::align_val_t{kSharedAlignment}) std::byte[config.shared_bytes]
                                        : nullptr) {
    // The stacks serve every launch (one runs at a time): allocating and touching fresh ones each time would cost
    // more than the small kernels' work.
    static std::vector<std::unique_ptr<std::byte[]>> stacks;
    while (stacks.size() < threads_) stacks.push_back(std::unique_ptr<std::byte[]>(new std::byte[kStackBytes]));
    for (unsigned thread = 0; thread < threads_; ++thread) fibers_[thread].stack = stacks[thread].get();
  }

  void run() {
    Grid* const enclosing = current_grid;
    current_grid = this;
    block_dim = config_.block;
    grid_dim = config_.grid;
    for (unsigned z = 0; z < config_.grid.z; ++z)
      for (unsigned y = 0; y < config_.grid.y; ++y)
        for (unsigned x = 0; x < config_.grid.x; ++x) {
          block_index = dim3(x, y, z);
          run_block();
        }
    current_grid = enclosing;
  }

  void sync() { wait(block_barrier_); }

  void sync_warp(unsigned thread) { wait(warp_barriers_[thread / kWarpSize]); }

  const std::byte* publish(unsigned thread, const void* value, std::size_t bytes) {
    if (bytes > kExchangeBytes) fail("a warp exchange of more bytes than a slot holds");
    // Two slot sets used in turn: a thread cannot write a set again before every thread of its warp has passed the
    // next exchange's barrier, by which time they have all read it.
    unsigned& parity = fibers_[thread].exchange_parity;
    std::byte* const slots = slots_[parity].data();
    std::memcpy(slots + thread * kExchangeBytes, value, bytes);
    sync_warp(thread);
    parity ^= 1;
    return slots + thread / kWarpSize * kWarpSize * kExchangeBytes;
  }

  [[nodiscard]] void* shared() const { return shared_.get(); }

private:
  struct Fiber {
    Context context;
    std::byte* stack = nullptr;
    void* fake_stack = nullptr;  // AddressSanitizer's, while the fiber is switched out
    unsigned exchange_parity = 0;
    bool done = false;
  };

  struct ArrayDelete {
    void operator()(std::byte* bytes) const { ::operator delete[](bytes, std::align_val_t{kSharedAlignment}); }
  };

  static void fiber_entry() { current_grid->fiber_main(); }

  void fiber_main() {
    finish_switch(nullptr, &host_stack_bottom_, &host_stack_size_);
    body_();
    Fiber& fiber = fibers_[current_thread];
    fiber.done = true;
    ++progress_;
    --block_barrier_.expected;
    block_barrier_.open_if_complete();
    Barrier& warp = warp_barriers_[current_thread / kWarpSize];
    --warp.expected;
    warp.open_if_complete();
    start_switch(nullptr, host_stack_bottom_, host_stack_size_);  // null: this stack is done with
    switch_context(fiber.context, host_context_);
  }

  void wait(Barrier& barrier) {
    const std::uint64_t generation = barrier.generation;
    ++barrier.arrived;
    ++progress_;
    if (barrier.open_if_complete()) return;
    while (barrier.generation == generation) yield();
  }

  void yield() {
    Fiber& fiber = fibers_[current_thread];
    start_switch(&fiber.fake_stack, host_stack_bottom_, host_stack_size_);
    switch_context(fiber.context, host_context_);
    finish_switch(fiber.fake_stack, &host_stack_bottom_, &host_stack_size_);
  }

  void resume(unsigned thread) {
    const dim3 block = config_.block;
    thread_index = dim3(thread % block.x, thread / block.x % block.y, thread / (block.x * block.y));
    current_thread = thread;
    Fiber& fiber = fibers_[thread];
    void* host_fake_stack = nullptr;
    start_switch(&host_fake_stack, fiber.stack, kStackBytes);
    switch_context(host_context_, fiber.context);
    finish_switch(host_fake_stack, nullptr, nullptr);
  }

  void run_block() {
    for (Fiber& fiber : fibers_) {
      make_context(fiber.context, fiber.stack, kStackBytes, &Grid::fiber_entry);
      fiber.exchange_parity = 0;
      fiber.done = false;
    }
    block_barrier_ = Barrier{threads_, 0, 0};
    for (unsigned w = 0; w < warp_barriers_.size(); ++w)
      warp_barriers_[w] = Barrier{std::min(kWarpSize, threads_ - w * kWarpSize), 0, 0};
    if (shared_) std::memset(shared_.get(), 0xff, config_.shared_bytes);
    for (unsigned running = threads_; running > 0;) {
      const std::uint64_t before = progress_;
      for (unsigned thread = 0; thread < threads_; ++thread) {
        if (fibers_[thread].done) continue;
        resume(thread);
        if (fibers_[thread].done) --running;
      }
      if (running > 0 && progress_ == before)
        fail("deadlock: threads wait at a barrier that the block's other threads never reach");
    }
  }

  const Config& config_;
  const std::function<void()>& body_;
  const unsigned threads_;
  std::vector<Fiber> fibers_;
  Barrier block_barrier_;
  std::vector<Barrier> warp_barriers_;
  std::array<std::vector<std::byte>, 2> slots_;
  std::unique_ptr<std::byte[], ArrayDelete> shared_;
  Context host_context_;
  const void* host_stack_bottom_ = nullptr;
  std::size_t host_stack_size_ = 0;
  std::uint64_t progress_ = 0;  // arrivals at barriers and returns: a round of the block without any is a deadlock
};

Grid& current() {
  if (current_grid == nullptr) fail("a device function called outside a kernel");
  return *current_grid;
}

}  // namespace

void fail(const char* why) {
  std::fprintf(stderr, "cuda emulation: %s\n", why);
  std::abort();
}

void sync_threads() { current().sync(); }

void sync_warp() { current().sync_warp(current_thread); }

unsigned lane() { return current_thread % kWarpSize; }

const std::byte* warp_publish(const void* value, std::size_t bytes) {
  return current().publish(current_thread, value, bytes);
}

void* dynamic_shared() { return current().shared(); }

void launch(const Config& config, std::function<void()> body) {
  const std::uint64_t threads = std::uint64_t{config.block.x} * config.block.y * config.block.z;
  if (threads == 0 || threads > kMaxThreads || config.block.z > 64)
    fail("a block of no threads or more than 1024 (or z past 64)");
  if (config.grid.x == 0 || config.grid.y == 0 || config.grid.z == 0 || config.grid.y > 65535 || config.grid.z > 65535)
    fail("a grid with no blocks, or y or z past 65535");
  if (config.shared_bytes > kMaxSharedBytes) fail("more dynamic shared memory than a block may have");
  submit(config.stream, [config, body = std::move(body)] {
    static std::mutex one_launch_at_a_time;
    const std::lock_guard lock(one_launch_at_a_time);
    Grid(config, body).run();
  });
}

}  // namespace sluice::executor::emulation
