// Elementwise kernels: SwiGLU forward and backward, additions, conversions, fills. Grid-stride
// loops over 64-bit indices, so any tensor size works with a bounded grid. SwiGLU and the bf16 additions move 8
// values per access (vector_access.cuh): they are the layer's widest elementwise passes.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "host_checks.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"
#include "vector_access.cuh"

namespace sluice::executor::kernels {
namespace {

constexpr int kThreads = 256;

__device__ std::int64_t first_index() { return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

using detail::first_vector_column;
using detail::kVector;
using detail::load_vector;
using detail::store_vector;

constexpr int kRowThreads = 128;  // SwiGLU: a block per row (grid-stride over rows), 8 columns per thread
constexpr int kColumnStep = detail::kVectorColumnStep<kRowThreads>;

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <bool kAligned>
__global__ void __launch_bounds__(kRowThreads)
    swiglu_forward_kernel(const bf16* gate_up, std::int64_t rows, int ffn, bf16* out) {
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const bf16* gate_row = gate_up + row * 2 * ffn;
    for (int c = first_vector_column(); c < ffn; c += kColumnStep) {
      float gate[kVector], up[kVector];
      load_vector<kAligned>(gate_row + c, ffn - c, gate);
      load_vector<kAligned>(gate_row + ffn + c, ffn - c, up);
#pragma unroll
      for (int e = 0; e < kVector; ++e) gate[e] = gate[e] * sigmoid(gate[e]) * up[e];
      store_vector<kAligned>(out + row * ffn + c, ffn - c, gate);
    }
  }
}

// dgate = dout * up * silu'(gate) with silu'(g) = σ(g) (1 + g (1 - σ(g))); dup = dout * silu(gate).
template <bool kAligned>
__global__ void __launch_bounds__(kRowThreads)
    swiglu_backward_kernel(const bf16* gate_up, const bf16* dout, std::int64_t rows, int ffn, bf16* dgate_up) {
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const bf16* gate_row = gate_up + row * 2 * ffn;
    bf16* dgate_row = dgate_up + row * 2 * ffn;
    for (int c = first_vector_column(); c < ffn; c += kColumnStep) {
      float gate[kVector], up[kVector], gradient[kVector];
      load_vector<kAligned>(gate_row + c, ffn - c, gate);
      load_vector<kAligned>(gate_row + ffn + c, ffn - c, up);
      load_vector<kAligned>(dout + row * ffn + c, ffn - c, gradient);
      float dgate[kVector], dup[kVector];
#pragma unroll
      for (int e = 0; e < kVector; ++e) {
        const float sig = sigmoid(gate[e]);
        dgate[e] = gradient[e] * up[e] * sig * (1.0f + gate[e] * (1.0f - sig));
        dup[e] = gradient[e] * gate[e] * sig;
      }
      store_vector<kAligned>(dgate_row + c, ffn - c, dgate);
      store_vector<kAligned>(dgate_row + ffn + c, ffn - c, dup);
    }
  }
}

// out[i] = a[i] + b[i], 8 values a thread per step.
template <bool kAligned>
__global__ void add_kernel(const bf16* a, const bf16* b, bf16* out, std::int64_t count) {
  for (std::int64_t i = first_index() * kVector; i < count; i += grid_stride() * kVector) {
    const int available = static_cast<int>(min(count - i, static_cast<std::int64_t>(kVector)));
    float left[kVector], right[kVector];
    load_vector<kAligned>(a + i, available, left);
    load_vector<kAligned>(b + i, available, right);
#pragma unroll
    for (int e = 0; e < kVector; ++e) left[e] += right[e];
    store_vector<kAligned>(out + i, available, left);
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
  const unsigned int blocks = detail::grid_stride_blocks(rows, 1);
  if (detail::rows_aligned(ffn, {gate_up, out})) {
    swiglu_forward_kernel<true><<<blocks, kRowThreads, 0, stream>>>(gate_up, rows, ffn, out);
  } else {
    swiglu_forward_kernel<false><<<blocks, kRowThreads, 0, stream>>>(gate_up, rows, ffn, out);
  }
  SLUICE_LAUNCH_CHECK("swiglu_forward");
}

void swiglu_backward(const bf16* gate_up, const bf16* dout, int rows, int ffn, bf16* dgate_up, cudaStream_t stream) {
  check_swiglu_shape(rows, ffn);
  detail::require_pointer(gate_up, "gate_up");
  detail::require_pointer(dout, "dout");
  detail::require_pointer(dgate_up, "dgate_up");
  const unsigned int blocks = detail::grid_stride_blocks(rows, 1);
  if (detail::rows_aligned(ffn, {gate_up, dout, dgate_up})) {
    swiglu_backward_kernel<true><<<blocks, kRowThreads, 0, stream>>>(gate_up, dout, rows, ffn, dgate_up);
  } else {
    swiglu_backward_kernel<false><<<blocks, kRowThreads, 0, stream>>>(gate_up, dout, rows, ffn, dgate_up);
  }
  SLUICE_LAUNCH_CHECK("swiglu_backward");
}

void add(const bf16* a, const bf16* b, bf16* out, std::int64_t count, cudaStream_t stream) {
  check_count(count);
  detail::require_pointer(a, "a");
  detail::require_pointer(b, "b");
  detail::require_pointer(out, "out");
  if (count == 0) return;
  const unsigned int blocks = detail::grid_stride_blocks(detail::ceil_div(count, kVector), kThreads);
  if (detail::rows_aligned(0, {a, b, out})) {
    add_kernel<true><<<blocks, kThreads, 0, stream>>>(a, b, out, count);
  } else {
    add_kernel<false><<<blocks, kThreads, 0, stream>>>(a, b, out, count);
  }
  SLUICE_LAUNCH_CHECK("add");
}

void add_inplace(bf16* accum, const bf16* b, std::int64_t count, cudaStream_t stream) {
  check_count(count);
  detail::require_pointer(accum, "accum");
  detail::require_pointer(b, "b");
  add(accum, b, accum, count, stream);
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
