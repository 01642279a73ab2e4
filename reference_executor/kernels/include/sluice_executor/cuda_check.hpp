#pragma once
// The one CUDA error check of the executor, its kernels and their tests: every CUDA runtime, cuBLAS and NCCL call and
// every kernel launch goes through one of these, and a failure throws std::runtime_error naming the call (or the
// kernel), the file and the line.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace sluice::executor::cuda::detail {

[[noreturn]] inline void fail_call(const char* call, const char* file, int line, const std::string& why) {
  throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + why);
}

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) fail_call(call, file, line, cudaGetErrorString(status));
}

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) fail_call(call, file, line, cublasGetStatusString(status));
}

}  // namespace sluice::executor::cuda::detail

#define SLUICE_CUDA_CHECK(call) ::sluice::executor::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)
// Right after a kernel launch: a bad configuration is reported here rather than at the next synchronisation.
#define SLUICE_LAUNCH_CHECK(kernel) \
  ::sluice::executor::cuda::detail::check_cuda(cudaGetLastError(), kernel, __FILE__, __LINE__)
#define SLUICE_CUBLAS_CHECK(call) ::sluice::executor::cuda::detail::check_cublas((call), #call, __FILE__, __LINE__)
