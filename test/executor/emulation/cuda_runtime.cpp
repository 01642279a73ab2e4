// The CUDA runtime calls of the kernels' wrappers, the CUDA backend and their tests, on host memory, in place of
// libcudart. A stream is a host thread that runs the work queued on it in order; an event is a point in a stream's
// order that other streams and the host can wait for; copies and launches are queued as CUDA queues them, so that a
// missing wait between streams shows as a wrong result or a sanitizer's report, and a wait that can never end as a
// hang (ctest's timeout), as on a GPU. Devices are numbers: every one is the same host memory.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "cuda_emulation.hpp"

namespace sluice::executor::emulation {
namespace {

constexpr int kDevices = 8;                                        // an H200 node's
constexpr std::size_t kDeviceBytes = std::size_t{141} << 30;       // and an H200's memory
constexpr std::size_t kSharedBytesOptIn = std::size_t{227} << 10;  // sm_90's most for one block

thread_local int device_of_thread = 0;

}  // namespace

int current_device() { return device_of_thread; }

}  // namespace sluice::executor::emulation

namespace emulation = sluice::executor::emulation;

// A stream: its queue and the host thread that runs it.
struct CUstream_st {
  CUstream_st(int device_number, bool blocks_on_legacy) : device(device_number), blocking(blocks_on_legacy) {
    worker = std::thread([this] { serve(); });
  }

  void push(std::function<void()> work) {
    {
      const std::lock_guard lock(mutex);
      queue.push_back(std::move(work));
    }
    changed.notify_all();
  }

  // Waits until everything queued so far has run.
  void drain() {
    std::unique_lock lock(mutex);
    changed.wait(lock, [this] { return queue.empty() && !running; });
  }

  // Runs what is queued, then ends the thread.
  void stop() {
    {
      const std::lock_guard lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    worker.join();
  }

  const int device;
  const bool blocking;  // waits for, and is waited for by, the legacy default stream

private:
  void serve() {
    emulation::device_of_thread = device;
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [this] { return !queue.empty() || stopping; });
      if (queue.empty()) return;
      std::function<void()> work = std::move(queue.front());
      queue.pop_front();
      running = true;
      lock.unlock();
      work();
      work = nullptr;  // what it holds goes before the stream counts as idle
      lock.lock();
      running = false;
      changed.notify_all();
    }
  }

  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> queue;
  bool running = false;
  bool stopping = false;
  std::thread worker;
};

// An event's record count and how many of its records the streams have reached, shared with the work that waits for
// it or completes it, which may outlive the event's handle (CUDA lets an event be destroyed with records pending).
struct EventState {
  std::mutex mutex;
  std::condition_variable reached;
  std::uint64_t recorded = 0;
  std::uint64_t completed = 0;
  std::chrono::steady_clock::time_point when;

  void wait_for(std::uint64_t record) {
    std::unique_lock lock(mutex);
    reached.wait(lock, [&] { return completed >= record; });
  }
};

struct CUevent_st {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

struct CUmemPoolHandle_st {};

namespace sluice::executor::emulation {
namespace {

// Every live stream, for the waits that span a device (cudaDeviceSynchronize, the legacy stream).
std::mutex streams_mutex;
std::vector<CUstream_st*> streams;

bool is_legacy(cudaStream_t stream) {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

// Drains the current device's streams: all of them, or only those the legacy stream waits for.
void drain_device(bool blocking_only) {
  std::vector<CUstream_st*> device_streams;
  {
    const std::lock_guard lock(streams_mutex);
    for (CUstream_st* stream : streams)
      if (stream->device == device_of_thread && (stream->blocking || !blocking_only)) device_streams.push_back(stream);
  }
  for (CUstream_st* stream : device_streams) stream->drain();
}

// A pageable host copy's staging: a copy from host memory reads it when queued, as CUDA stages it before returning.
std::function<void()> staged_copy(void* to, const void* from, std::size_t bytes) {
  auto staged = std::make_shared<std::vector<std::byte>>(static_cast<const std::byte*>(from),
                                                         static_cast<const std::byte*>(from) + bytes);
  return [to, staged] { std::memcpy(to, staged->data(), staged->size()); };
}

// Queues `copy` of `kind` on `stream`. Copies to pageable host memory return once done, as CUDA's do.
cudaError_t queue_copy(cudaMemcpyKind kind, cudaStream_t stream, std::function<void()> copy) {
  if (kind == cudaMemcpyHostToHost) {
    copy();
    return cudaSuccess;
  }
  submit(stream, std::move(copy));
  if (kind == cudaMemcpyDeviceToHost && !is_legacy(stream)) stream->drain();
  return cudaSuccess;
}

}  // namespace

void submit(cudaStream_t stream, std::function<void()> work) {
  if (is_legacy(stream)) {
    drain_device(true);
    work();
    return;
  }
  stream->push(std::move(work));
}

}  // namespace sluice::executor::emulation

using emulation::submit;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = emulation::kDevices;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= emulation::kDevices) return cudaErrorInvalidDevice;
  emulation::device_of_thread = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = emulation::device_of_thread;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device) {
  if (device < 0 || device >= emulation::kDevices) return cudaErrorInvalidDevice;
  *properties = cudaDeviceProp{};
  std::strncpy(properties->name, "CUDA emulation on the host", sizeof(properties->name) - 1);
  properties->totalGlobalMem = emulation::kDeviceBytes;
  properties->sharedMemPerBlock = 48 << 10;
  properties->sharedMemPerBlockOptin = emulation::kSharedBytesOptIn;
  properties->warpSize = static_cast<int>(emulation::kWarpSize);
  properties->maxThreadsPerBlock = 1024;
  properties->multiProcessorCount = 132;
  properties->major = 9;
  properties->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = *total_bytes = emulation::kDeviceBytes;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  static CUmemPoolHandle_st pools[emulation::kDevices];
  if (device < 0 || device >= emulation::kDevices) return cudaErrorInvalidDevice;
  *pool = &pools[device];
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t /*pool*/, cudaMemPoolAttr /*attribute*/, void* /*value*/) {
  return cudaSuccess;
}

cudaError_t cudaGetLastError() { return cudaSuccess; }

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidDevice: return "invalid device ordinal (cuda emulation)";
    case cudaErrorMemoryAllocation: return "out of memory (cuda emulation)";
    case cudaErrorNotReady: return "device not ready (cuda emulation)";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle (cuda emulation)";
    default: return "an error the cuda emulation does not raise";
  }
}

cudaError_t cudaDeviceSynchronize() {
  emulation::drain_device(false);
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* /*function*/, cudaFuncAttribute /*attribute*/, int /*value*/) {
  return cudaSuccess;
}

// Streams.

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  auto* created = new CUstream_st(emulation::device_of_thread, (flags & cudaStreamNonBlocking) == 0);
  const std::lock_guard lock(emulation::streams_mutex);
  emulation::streams.push_back(created);
  *stream = created;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

// The stream's queued work still runs, as CUDA lets it, before its thread ends.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (emulation::is_legacy(stream)) return cudaErrorInvalidResourceHandle;
  {
    const std::lock_guard lock(emulation::streams_mutex);
    std::erase(emulation::streams, stream);
  }
  stream->stop();
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (emulation::is_legacy(stream))
    emulation::drain_device(true);
  else
    stream->drain();
  return cudaSuccess;
}

// Events.

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int /*flags*/) { return cudaEventCreate(event); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::shared_ptr<EventState> state = event->state;
  std::uint64_t record = 0;
  {
    const std::lock_guard lock(state->mutex);
    record = ++state->recorded;
  }
  submit(stream, [state, record] {
    {
      const std::lock_guard lock(state->mutex);
      if (record > state->completed) {
        state->completed = record;
        state->when = std::chrono::steady_clock::now();
      }
    }
    state->reached.notify_all();
  });
  return cudaSuccess;
}

// The stream waits for the event's latest record as of this call; one never recorded is no wait.
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int /*flags*/) {
  std::shared_ptr<EventState> state = event->state;
  std::uint64_t record = 0;
  {
    const std::lock_guard lock(state->mutex);
    record = state->recorded;
  }
  if (record > 0) submit(stream, [state, record] { state->wait_for(record); });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  EventState& state = *event->state;
  std::uint64_t record = 0;
  {
    const std::lock_guard lock(state.mutex);
    record = state.recorded;
  }
  state.wait_for(record);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  EventState& state = *event->state;
  const std::lock_guard lock(state.mutex);
  return state.completed >= state.recorded ? cudaSuccess : cudaErrorNotReady;
}

// Host time between the two events' latest records, both reached.
cudaError_t cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end) {
  std::chrono::steady_clock::time_point times[2];
  const cudaEvent_t events[2] = {start, end};
  for (int e = 0; e < 2; ++e) {
    EventState& state = *events[e]->state;
    const std::lock_guard lock(state.mutex);
    if (state.recorded == 0) return cudaErrorInvalidResourceHandle;
    if (state.completed < state.recorded) return cudaErrorNotReady;
    times[e] = state.when;
  }
  *milliseconds = std::chrono::duration<float, std::milli>(times[1] - times[0]).count();
  return cudaSuccess;
}

// Memory.

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  // 256-byte aligned, as cudaMalloc's are, and no larger than asked, so that AddressSanitizer sees any access past
  // the end; a zero-byte request still gets a distinct pointer.
  return posix_memalign(pointer, 256, std::max<size_t>(bytes, 1)) == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}

// Waits for the current device's work first, as cudaFree does: nothing queued may still use the memory.
cudaError_t cudaFree(void* pointer) {
  if (pointer == nullptr) return cudaSuccess;
  emulation::drain_device(false);
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void** pointer, size_t bytes, cudaStream_t /*stream*/) {
  return posix_memalign(pointer, 256, std::max<size_t>(bytes, 1)) == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream) {
  submit(stream, [pointer] { std::free(pointer); });
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* to, const void* from, size_t bytes, cudaMemcpyKind /*kind*/) {
  submit(nullptr, [&] {
    if (bytes > 0) std::memcpy(to, from, bytes);
  });
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* to, const void* from, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (kind == cudaMemcpyHostToDevice)
    return emulation::queue_copy(kind, stream, emulation::staged_copy(to, from, bytes));
  return emulation::queue_copy(kind, stream, [to, from, bytes] { std::memcpy(to, from, bytes); });
}

cudaError_t cudaMemcpy2DAsync(void* to, size_t to_pitch, const void* from, size_t from_pitch, size_t width,
                              size_t height, cudaMemcpyKind kind, cudaStream_t stream) {
  if (width > to_pitch || width > from_pitch) return cudaErrorInvalidPitchValue;
  if (width == 0 || height == 0) return cudaSuccess;
  if (kind == cudaMemcpyHostToDevice) return cudaErrorNotSupported;  // no caller copies rows from the host
  return emulation::queue_copy(kind, stream, [=] {
    for (size_t row = 0; row < height; ++row)
      std::memcpy(static_cast<std::byte*>(to) + row * to_pitch, static_cast<const std::byte*>(from) + row * from_pitch,
                  width);
  });
}

cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t stream) {
  if (bytes > 0) submit(stream, [=] { std::memset(pointer, value, bytes); });
  return cudaSuccess;
}

}  // extern "C"
