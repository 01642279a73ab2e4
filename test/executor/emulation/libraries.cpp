// The parts of cuBLAS and NCCL the CUDA backend calls, on the emulation's streams (cuda_runtime.cpp), in place of
// libcublas and libnccl: a GEMM of bf16 operands, and NCCL's point-to-point sends and receives, which meet as NCCL's
// do: a send completes once its receive has taken the data, and the operations of a group are posted together.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <nccl.h>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda_emulation.hpp"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace sluice::executor::emulation {
namespace {

// Column-major `rows` × `cols` operand op(M) of a bf16 matrix stored with leading dimension `ld`, as doubles laid
// out row after row (so that each of the product's dot products reads two contiguous rows).
std::vector<double> rows_of(const __nv_bfloat16* stored, cublasOperation_t operation, int rows, int cols, int ld,
                            bool transposed_layout) {
  std::vector<double> values(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const bool plain = operation == CUBLAS_OP_N;
      const std::size_t at = plain ? static_cast<std::size_t>(r) + static_cast<std::size_t>(c) * ld
                                   : static_cast<std::size_t>(c) + static_cast<std::size_t>(r) * ld;
      const std::size_t to =
          transposed_layout ? static_cast<std::size_t>(c) * rows + r : static_cast<std::size_t>(r) * cols + c;
      values[to] = static_cast<double>(__bfloat162float(stored[at]));
    }
  return values;
}

}  // namespace
}  // namespace sluice::executor::emulation

namespace emulation = sluice::executor::emulation;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "success" : "not supported by the cuda emulation";
}

// C = α·op(A)·op(B) + β·C, column-major, with bf16 operands and a bf16 or fp32 result: the one form the backend
// uses. The sums are in double (cuBLAS's are fp32 in its own order), rounded once into C's type.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t /*algo*/) {
  if (Atype != CUDA_R_16BF || Btype != CUDA_R_16BF || (Ctype != CUDA_R_16BF && Ctype != CUDA_R_32F) ||
      computeType != CUBLAS_COMPUTE_32F || transa == CUBLAS_OP_C || transb == CUBLAS_OP_C)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m < 0 || n < 0 || k < 0 || ldc < std::max(1, m)) return CUBLAS_STATUS_INVALID_VALUE;
  const double scale = *static_cast<const float*>(alpha);  // host pointers, read when called, as cuBLAS reads them
  const double keep = *static_cast<const float*>(beta);
  emulation::submit(handle->stream, [=] {
    // op(A) is m × k, one row per result row; op(B) is k × n, kept as its n columns.
    const std::vector<double> a = emulation::rows_of(static_cast<const __nv_bfloat16*>(A), transa, m, k, lda, false);
    const std::vector<double> b = emulation::rows_of(static_cast<const __nv_bfloat16*>(B), transb, k, n, ldb, true);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double sum = 0;
        for (int p = 0; p < k; ++p)
          sum += a[static_cast<std::size_t>(i) * k + p] * b[static_cast<std::size_t>(j) * k + p];
        const std::size_t at = static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * ldc;
        if (Ctype == CUDA_R_32F) {
          float* c = static_cast<float*>(C) + at;
          *c = static_cast<float>(scale * sum + (keep == 0 ? 0.0 : keep * *c));
        } else {
          __nv_bfloat16* c = static_cast<__nv_bfloat16*>(C) + at;
          const double old = keep == 0 ? 0.0 : keep * static_cast<double>(__bfloat162float(*c));
          *c = __float2bfloat16(static_cast<float>(scale * sum + old));
        }
      }
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"

// NCCL: the ranks of a communicator share a clique, in which each send waits, posted, for its receive.
namespace sluice::executor::emulation {
namespace {

struct PostedSend {
  const void* data;
  std::size_t bytes;
  bool taken = false;
};

struct Clique {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<PostedSend>>> sends;  // (from, to), in posting order
  bool aborted = false;
};

struct Operation {
  bool send;
  void* data;
  std::size_t bytes;
  int peer;
  std::shared_ptr<Clique> clique;
  int rank;
  cudaStream_t stream;
};

// Sends posted first and received last, so that a group's operations toward and from one peer meet as NCCL's fused
// ones do. An abort (ncclCommAbort) ends every wait.
void run_operations(const std::vector<Operation>& operations) {
  std::vector<std::pair<Clique*, std::shared_ptr<PostedSend>>> posted;
  for (const Operation& operation : operations) {
    if (!operation.send) continue;
    auto send = std::make_shared<PostedSend>(PostedSend{operation.data, operation.bytes});
    {
      const std::lock_guard lock(operation.clique->mutex);
      operation.clique->sends[{operation.rank, operation.peer}].push_back(send);
    }
    operation.clique->changed.notify_all();
    posted.emplace_back(operation.clique.get(), send);
  }
  for (const Operation& operation : operations) {
    if (operation.send) continue;
    Clique& clique = *operation.clique;
    std::unique_lock lock(clique.mutex);
    auto& queue = clique.sends[{operation.peer, operation.rank}];
    clique.changed.wait(lock, [&] { return clique.aborted || !queue.empty(); });
    if (clique.aborted) return;
    const std::shared_ptr<PostedSend> send = queue.front();
    queue.pop_front();
    if (send->bytes != operation.bytes) fail("an NCCL receive whose byte count differs from its send's");
    std::memcpy(operation.data, send->data, send->bytes);
    send->taken = true;
    clique.changed.notify_all();
  }
  for (const auto& [clique, send] : posted) {
    std::unique_lock lock(clique->mutex);
    clique->changed.wait(lock, [&] { return clique->aborted || send->taken; });
  }
}

thread_local int group_depth = 0;
thread_local std::vector<Operation> grouped;

ncclResult_t queue_operation(Operation operation) {
  if (group_depth > 0) {
    grouped.push_back(std::move(operation));
    return ncclSuccess;
  }
  const cudaStream_t stream = operation.stream;
  submit(stream, [operations = std::vector{std::move(operation)}] { run_operations(operations); });
  return ncclSuccess;
}

std::size_t type_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

}  // namespace
}  // namespace sluice::executor::emulation

struct ncclComm {
  std::shared_ptr<emulation::Clique> clique;
  int rank;
  int size;
};

extern "C" {

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int count, const int* /*devices*/) {
  if (count < 1) return ncclInvalidArgument;
  auto clique = std::make_shared<emulation::Clique>();
  for (int rank = 0; rank < count; ++rank) comms[rank] = new ncclComm{clique, rank, count};
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  {
    const std::lock_guard lock(comm->clique->mutex);
    comm->clique->aborted = true;
  }
  comm->clique->changed.notify_all();
  delete comm;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  return result == ncclSuccess ? "no error" : "an invalid NCCL call (cuda emulation)";
}

ncclResult_t ncclGroupStart() {
  ++emulation::group_depth;
  return ncclSuccess;
}

// A group's operations run together, as one piece of work on each stream they were issued on.
ncclResult_t ncclGroupEnd() {
  if (emulation::group_depth == 0) return ncclInvalidUsage;
  if (--emulation::group_depth > 0) return ncclSuccess;
  const std::vector<emulation::Operation> operations = std::exchange(emulation::grouped, {});
  std::vector<cudaStream_t> streams;
  for (const emulation::Operation& operation : operations)
    if (std::find(streams.begin(), streams.end(), operation.stream) == streams.end())
      streams.push_back(operation.stream);
  for (const cudaStream_t stream : streams) {
    std::vector<emulation::Operation> on_stream;
    std::copy_if(operations.begin(), operations.end(), std::back_inserter(on_stream),
                 [stream](const emulation::Operation& operation) { return operation.stream == stream; });
    emulation::submit(stream, [on_stream = std::move(on_stream)] { emulation::run_operations(on_stream); });
  }
  return ncclSuccess;
}

ncclResult_t ncclSend(const void* data, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  if (peer < 0 || peer >= comm->size) return ncclInvalidArgument;
  return emulation::queue_operation(
      {true, const_cast<void*>(data), count * emulation::type_bytes(type), peer, comm->clique, comm->rank, stream});
}

ncclResult_t ncclRecv(void* data, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  if (peer < 0 || peer >= comm->size) return ncclInvalidArgument;
  return emulation::queue_operation(
      {false, data, count * emulation::type_bytes(type), peer, comm->clique, comm->rank, stream});
}

}  // extern "C"
