#pragma once
// The CPU's version of the wmma API (CUDA's <mma.h>) that attention.cu's fallback kernels use, found first on the
// emulated kernels' include path. A fragment's layout across the warp is unspecified in CUDA, and the kernels go
// through memory alone (load, mma, store), so here every lane holds a whole matrix: loads read all of it, while an
// accumulator's products and its store are the lane's share of the elements (every 32nd); loads and stores end at a
// barrier of the warp, as the _sync functions do.
#include <cuda_bf16.h>

#include <array>
#include <cstddef>
#include <type_traits>

#include "cuda_emulation.hpp"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static constexpr int rows = std::is_same_v<Use, matrix_b> ? K : M;
  static constexpr int cols = std::is_same_v<Use, matrix_a> ? K : N;
  std::array<float, static_cast<std::size_t>(rows* cols)> values;

  float& at(int row, int col) { return values[static_cast<std::size_t>(row * cols + col)]; }
  [[nodiscard]] float at(int row, int col) const { return values[static_cast<std::size_t>(row * cols + col)]; }
};

namespace emulated {

inline float to_float(float value) { return value; }
inline float to_float(__nv_bfloat16 value) { return __bfloat162float(value); }

// Element (row, col) of a matrix stored row-major or column-major with leading dimension ld.
template <class T>
T& element(T* matrix, unsigned ld, int row, int col, bool row_major) {
  return row_major ? matrix[static_cast<std::size_t>(row) * ld + static_cast<std::size_t>(col)]
                   : matrix[static_cast<std::size_t>(col) * ld + static_cast<std::size_t>(row)];
}

template <class Fragment, class T>
void load(Fragment& fragment, const T* matrix, unsigned ld, bool row_major) {
  for (int row = 0; row < Fragment::rows; ++row)
    for (int col = 0; col < Fragment::cols; ++col)
      fragment.at(row, col) = to_float(element(matrix, ld, row, col, row_major));
  ::sluice::executor::emulation::sync_warp();  // no lane stores over the matrix before every lane has read it
}

}  // namespace emulated

template <class Use, int M, int N, int K, class T, class Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& fragment, const T* matrix, unsigned ld) {
  emulated::load(fragment, matrix, ld, std::is_same_v<Layout, row_major>);
}

template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& fragment, const float* matrix, unsigned ld,
                      layout_t layout) {
  emulated::load(fragment, matrix, ld, layout == mem_row_major);
}

template <int M, int N, int K>
void store_matrix_sync(float* matrix, const fragment<accumulator, M, N, K, float>& fragment, unsigned ld,
                       layout_t layout) {
  const unsigned lane = ::sluice::executor::emulation::lane();
  for (int i = static_cast<int>(lane); i < M * N; i += static_cast<int>(::sluice::executor::emulation::kWarpSize)) {
    const int row = i / N;
    const int col = i % N;
    emulated::element(matrix, ld, row, col, layout == mem_row_major) = fragment.at(row, col);
  }
  ::sluice::executor::emulation::sync_warp();  // the whole matrix is written before any lane goes on
}

template <class Use, int M, int N, int K, class T, class Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& fragment, float value) {
  fragment.values.fill(value);
}

// d = a · b + c (d may be c), the products of exact bf16 values summed in double. Each lane computes the elements it
// stores (the only ones of an accumulator that leave it).
template <int M, int N, int K, class T, class LayoutA, class LayoutB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LayoutA>& a,
              const fragment<matrix_b, M, N, K, T, LayoutB>& b, const fragment<accumulator, M, N, K, float>& c) {
  const unsigned lane = ::sluice::executor::emulation::lane();
  for (int i = static_cast<int>(lane); i < M * N; i += static_cast<int>(::sluice::executor::emulation::kWarpSize)) {
    const int row = i / N;
    const int col = i % N;
    double sum = 0.0;
    for (int k = 0; k < K; ++k) sum += static_cast<double>(a.at(row, k)) * b.at(k, col);
    d.at(row, col) = static_cast<float>(static_cast<double>(c.at(row, col)) + sum);
  }
}

}  // namespace nvcuda::wmma
