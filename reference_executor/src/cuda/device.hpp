#pragma once
// Owning wrappers of CUDA objects for the executor's runtime. Destructors cannot throw: a failure there (which
// means the device is already broken) is reported on stderr.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "sluice_executor/cuda_check.hpp"

namespace sluice::executor::cuda {

using bf16 = __nv_bfloat16;

namespace detail {
inline void report_in_destructor(cudaError_t status, const char* call) {
  if (status != cudaSuccess) std::fprintf(stderr, "sluice executor: %s failed: %s\n", call, cudaGetErrorString(status));
}
}  // namespace detail

// cudaMalloc'd memory of the device current at construction.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) SLUICE_CUDA_CHECK(cudaMalloc(&data_, bytes));
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (data_ != nullptr) detail::report_in_destructor(cudaFree(data_), "cudaFree");
  }

  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(data_);
  }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

template <class T>
DeviceBuffer upload(const std::vector<T>& values, cudaStream_t stream) {
  DeviceBuffer buffer(values.size() * sizeof(T));
  if (!values.empty())
    SLUICE_CUDA_CHECK(
        cudaMemcpyAsync(buffer.as<void>(), values.data(), buffer.bytes(), cudaMemcpyHostToDevice, stream));
  return buffer;
}

class Stream {
public:
  Stream() { SLUICE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (stream_ != nullptr) detail::report_in_destructor(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  }
  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }

private:
  cudaStream_t stream_ = nullptr;
};

// A timing event.
class Event {
public:
  Event() { SLUICE_CUDA_CHECK(cudaEventCreate(&event_)); }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (event_ != nullptr) detail::report_in_destructor(cudaEventDestroy(event_), "cudaEventDestroy");
  }
  [[nodiscard]] cudaEvent_t get() const noexcept { return event_; }
  void record(cudaStream_t stream) const { SLUICE_CUDA_CHECK(cudaEventRecord(event_, stream)); }

private:
  cudaEvent_t event_ = nullptr;
};

// Seconds from `origin` to `event`, both recorded on one device and complete.
inline double seconds_between(const Event& origin, const Event& event) {
  float milliseconds = 0;
  SLUICE_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, origin.get(), event.get()));
  return static_cast<double>(milliseconds) * 1e-3;
}

class CublasHandle {
public:
  explicit CublasHandle(cudaStream_t stream) {
    SLUICE_CUBLAS_CHECK(cublasCreate(&handle_));
    SLUICE_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  }
  CublasHandle(CublasHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  CublasHandle& operator=(CublasHandle&&) = delete;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle() {
    if (handle_ != nullptr && cublasDestroy(handle_) != CUBLAS_STATUS_SUCCESS)
      std::fprintf(stderr, "sluice executor: cublasDestroy failed\n");
  }
  [[nodiscard]] cublasHandle_t get() const noexcept { return handle_; }

private:
  cublasHandle_t handle_ = nullptr;
};

// Stream-ordered allocations (cudaMallocAsync from the device's default pool) used on one stream, with a
// high-water mark of the bytes they hold: the profiler's activation memory. Memory freed on the stream is reused by
// later work on it without synchronising.
class StreamAllocator {
public:
  explicit StreamAllocator(cudaStream_t stream) : stream_(stream) {
    int device = 0;
    SLUICE_CUDA_CHECK(cudaGetDevice(&device));
    cudaMemPool_t pool = nullptr;
    SLUICE_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    // Keep freed memory in the pool across synchronisations instead of returning it to the driver each time.
    std::uint64_t keep_everything = UINT64_MAX;
    SLUICE_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
  }

  [[nodiscard]] void* allocate(std::size_t bytes) {
    void* pointer = nullptr;
    SLUICE_CUDA_CHECK(cudaMallocAsync(&pointer, bytes == 0 ? 1 : bytes, stream_));
    in_use_ += bytes;
    peak_ = in_use_ > peak_ ? in_use_ : peak_;
    return pointer;
  }
  void release(void* pointer, std::size_t bytes) noexcept {
    detail::report_in_destructor(cudaFreeAsync(pointer, stream_), "cudaFreeAsync");
    in_use_ -= bytes;
  }

  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
  [[nodiscard]] std::size_t in_use() const noexcept { return in_use_; }
  [[nodiscard]] std::size_t peak() const noexcept { return peak_; }
  void reset_peak() noexcept { peak_ = in_use_; }

private:
  cudaStream_t stream_;
  std::size_t in_use_ = 0;
  std::size_t peak_ = 0;
};

// `count` elements of T from a StreamAllocator, released on its stream when destroyed.
template <class T>
class Scratch {
public:
  Scratch() = default;
  Scratch(StreamAllocator& allocator, std::size_t count)
      : allocator_(&allocator), data_(static_cast<T*>(allocator.allocate(count * sizeof(T)))), count_(count) {}
  Scratch(Scratch&& other) noexcept
      : allocator_(std::exchange(other.allocator_, nullptr)),
        data_(std::exchange(other.data_, nullptr)),
        count_(std::exchange(other.count_, 0)) {}
  Scratch& operator=(Scratch&& other) noexcept {
    std::swap(allocator_, other.allocator_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (data_ != nullptr) allocator_->release(data_, count_ * sizeof(T));
  }

  [[nodiscard]] T* get() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }

private:
  StreamAllocator* allocator_ = nullptr;
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

// Makes `device` current for the scope.
class DeviceScope {
public:
  explicit DeviceScope(int device) {
    SLUICE_CUDA_CHECK(cudaGetDevice(&previous_));
    SLUICE_CUDA_CHECK(cudaSetDevice(device));
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope() { detail::report_in_destructor(cudaSetDevice(previous_), "cudaSetDevice"); }

private:
  int previous_ = 0;
};

}  // namespace sluice::executor::cuda
