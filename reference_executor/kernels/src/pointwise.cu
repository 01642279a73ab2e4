// Elementwise kernels: SwiGLU forward and backward, additions, conversions, fills. Grid-stride
// loops over 64-bit indices, so any tensor size works with a bounded grid.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "host_checks.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"

namespace sluice::executor::kernels {
namespace {

constexpr int kThreads = 256;

__device__ std::int64_t first_index() { return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void swiglu_forward_kernel(const bf16* gate_up, std::int64_t rows, int ffn, bf16* out) {
  for (std::int64_t i = first_index(); i < rows * ffn; i += grid_stride()) {
    const std::int64_t row = i / ffn;
    const std::int64_t gate_index = row * 2 * ffn + i % ffn;
    const float gate = __bfloat162float(gate_up[gate_index]);
    const float up = __bfloat162float(gate_up[gate_index + ffn]);
    out[i] = __float2bfloat16(gate * sigmoid(gate) * up);
  }
}

// dgate = dout * up * silu'(gate) with silu'(g) = σ(g) (1 + g (1 - σ(g))); dup = dout * silu(gate).
__global__ void swiglu_backward_kernel(const bf16* gate_up, const bf16* dout, std::int64_t rows, int ffn,
                                       bf16* dgate_up) {
  for (std::int64_t i = first_index(); i < rows * ffn; i += grid_stride()) {
    const std::int64_t row = i / ffn;
    const std::int64_t gate_index = row * 2 * ffn + i % ffn;
    const float gate = __bfloat162float(gate_up[gate_index]);
    const float up = __bfloat162float(gate_up[gate_index + ffn]);
    const float gradient = __bfloat162float(dout[i]);
    const float sig = sigmoid(gate);
    dgate_up[gate_index] = __float2bfloat16(gradient * up * sig * (1.0f + gate * (1.0f - sig)));
    dgate_up[gate_index + ffn] = __float2bfloat16(gradient * gate * sig);
  }
}

__global__ void add_kernel(const bf16* a, const bf16* b, bf16* out, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
  }
}

__global__ void accumulate_kernel(float* accum, const bf16* b, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) accum[i] += __bfloat162float(b[i]);
}

__global__ void fill_kernel(float* data, float value, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) data[i] = value;
}

__global__ void float_to_bf16_kernel(const float* in, bf16* out, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) out[i] = __float2bfloat16(in[i]);
}

__global__ void bf16_to_float_kernel(const bf16* in, float* out, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) out[i] = __bfloat162float(in[i]);
}

void check_swiglu_shape(int rows, int ffn) {
  detail::require_positive(rows, "rows");
  detail::require_positive(ffn, "ffn");
}

void check_count(std::int64_t count) { sluice::require(count >= 0, "count: must be >= 0, got ", count); }

}  // namespace

void swiglu_forward(const bf16* gate_up, int rows, int ffn, bf16* out, cudaStream_t stream) {
  check_swiglu_shape(rows, ffn);
  detail::require_pointer(gate_up, "gate_up");
  detail::require_pointer(out, "out");
  const std::int64_t count = static_cast<std::int64_t>(rows) * ffn;
  swiglu_forward_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(gate_up, rows, ffn, out);
  SLUICE_LAUNCH_CHECK("swiglu_forward");
}

void swiglu_backward(const bf16* gate_up, const bf16* dout, int rows, int ffn, bf16* dgate_up, cudaStream_t stream) {
  check_swiglu_shape(rows, ffn);
  detail::require_pointer(gate_up, "gate_up");
  detail::require_pointer(dout, "dout");
  detail::require_pointer(dgate_up, "dgate_up");
  const std::int64_t count = static_cast<std::int64_t>(rows) * ffn;
  swiglu_backward_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(gate_up, dout, rows, ffn,
                                                                                               dgate_up);
  SLUICE_LAUNCH_CHECK("swiglu_backward");
}

void add(const bf16* a, const bf16* b, bf16* out, std::int64_t count, cudaStream_t stream) {
  check_count(count);
  detail::require_pointer(a, "a");
  detail::require_pointer(b, "b");
  detail::require_pointer(out, "out");
  if (count == 0) return;
  add_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(a, b, out, count);
  SLUICE_LAUNCH_CHECK("add");
}

void add_inplace(bf16* accum, const bf16* b, std::int64_t count, cudaStream_t stream) {
  check_count(count);
  detail::require_pointer(accum, "accum");
  detail::require_pointer(b, "b");
  if (count == 0) return;
  add_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(accum, b, accum, count);
  SLUICE_LAUNCH_CHECK("add_inplace");
}

void add_inplace(float* accum, const bf16* b, std::int64_t count, cudaStream_t stream) {
  check_count(count);
  detail::require_pointer(accum, "accum");
  detail::require_pointer(b, "b");
  if (count == 0) return;
  accumulate_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(accum, b, count);
  SLUICE_LAUNCH_CHECK("add_inplace");
}

void convert(const float* in, bf16* out, std::int64_t count, cudaStream_t stream) {
  check_count(count);
  detail::require_pointer(in, "in");
  detail::require_pointer(out, "out");
  if (count == 0) return;
  float_to_bf16_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(in, out, count);
  SLUICE_LAUNCH_CHECK("convert (float to bf16)");
}

void convert(const bf16* in, float* out, std::int64_t count, cudaStream_t stream) {
  check_count(count);
  detail::require_pointer(in, "in");
  detail::require_pointer(out, "out");
  if (count == 0) return;
  bf16_to_float_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(in, out, count);
  SLUICE_LAUNCH_CHECK("convert (bf16 to float)");
}

// All-zero bits are +0.0 in both bf16 and fp32, so a byte fill is the zero fill.
void fill_zero(bf16* data, std::int64_t count, cudaStream_t stream) {
  check_count(count);
  detail::require_pointer(data, "data");
  SLUICE_CUDA_CHECK(cudaMemsetAsync(data, 0, static_cast<std::size_t>(count) * sizeof(bf16), stream));
}

void fill_zero(float* data, std::int64_t count, cudaStream_t stream) {
  check_count(count);
  detail::require_pointer(data, "data");
  SLUICE_CUDA_CHECK(cudaMemsetAsync(data, 0, static_cast<std::size_t>(count) * sizeof(float), stream));
}

void fill(float* data, float value, std::int64_t count, cudaStream_t stream) {
  check_count(count);
  detail::require_pointer(data, "data");
  if (count == 0) return;
  fill_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(data, value, count);
  SLUICE_LAUNCH_CHECK("fill");
}

}  // namespace sluice::executor::kernels
