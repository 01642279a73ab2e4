#pragma once
// What the executor's kernel tests share: device buffers, bf16 inputs drawn with their exact values, and the error
// measures their tolerances are stated in. The row kernels' cases (test_executor_kernels_rows.cpp) run on a GPU and,
// emulated thread by thread, on the CPU (emulation/cuda_emulation.hpp), with the same helpers: there, "device"
// memory is the host's.
//
// Inputs are rounded to bf16 first and the references see exactly those values, so every difference comes from the
// kernels' own arithmetic: fp32 accumulation and the bf16 rounding of intermediates and outputs. bf16 keeps 8
// significant bits, so one rounding moves a value by at most u = 2^-8 = 3.9e-3 of itself; the tolerances are stated
// in terms of u.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "sluice/core/random.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"

namespace sluice::executor::kernel_tests {

namespace kernels = sluice::executor::kernels;
using kernels::bf16;

inline constexpr double kBf16Rounding = 0x1.0p-8;  // u: relative change of one round to nearest bf16

template <class T>
class DeviceBuffer {
public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    SLUICE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), std::max<std::size_t>(count, 1) * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }

  T* get() const { return data_; }
  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() == count_);
    SLUICE_CUDA_CHECK(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    SLUICE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> host(count_);
    SLUICE_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

private:
  T* data_ = nullptr;
  std::size_t count_;
};

// Values drawn as scale * N(0, 1) and rounded to bf16, in both forms.
struct Bf16Values {
  std::vector<bf16> rounded;
  std::vector<double> exact;  // the rounded values, exactly
};

inline Bf16Values random_bf16(sluice::Rng& rng, std::size_t count, double scale = 1.0, double offset = 0.0) {
  Bf16Values values;
  values.rounded.reserve(count);
  values.exact.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const bf16 value = __float2bfloat16(static_cast<float>(offset + scale * rng.normal()));
    values.rounded.push_back(value);
    values.exact.push_back(static_cast<double>(__bfloat162float(value)));
  }
  return values;
}

inline std::vector<bf16> to_bf16(std::span<const double> values) {
  std::vector<bf16> rounded(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) rounded[i] = __float2bfloat16(static_cast<float>(values[i]));
  return rounded;
}

inline std::vector<float> to_float(std::span<const double> values) {
  std::vector<float> narrowed(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) narrowed[i] = static_cast<float>(values[i]);
  return narrowed;
}

inline std::vector<double> to_double(const std::vector<bf16>& values) {
  std::vector<double> widened(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) widened[i] = static_cast<double>(__bfloat162float(values[i]));
  return widened;
}

inline std::vector<double> to_double(const std::vector<float>& values) { return {values.begin(), values.end()}; }

inline double max_abs(std::span<const double> values) {
  double largest = 0.0;
  for (double value : values) largest = std::max(largest, std::abs(value));
  return largest;
}

// Whole-tensor error measures of actual against expected.
struct Errors {
  double relative_l2 = 0.0;  // ||actual - expected|| / ||expected||
  double max_abs = 0.0;      // max |actual - expected|
};

inline Errors compare(std::span<const double> actual, std::span<const double> expected) {
  REQUIRE(actual.size() == expected.size());
  double difference_squares = 0.0;
  double expected_squares = 0.0;
  Errors errors;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double difference = actual[i] - expected[i];
    REQUIRE(std::isfinite(actual[i]));
    difference_squares += difference * difference;
    expected_squares += expected[i] * expected[i];
    errors.max_abs = std::max(errors.max_abs, std::abs(difference));
  }
  errors.relative_l2 = std::sqrt(difference_squares / std::max(expected_squares, 1e-300));
  return errors;
}

// Every element within one bf16 rounding of the expected value, for kernels that compute in fp32 from
// exact inputs and round once: |actual - expected| <= u·|expected| + fp32 error. The fp32 error is a few
// ulps of the result (1e-5 relative leaves a wide margin) plus `cancellation`, the absolute error where
// the kernel subtracts nearly equal fp32 terms.
inline void check_within_rounding(std::span<const double> actual, std::span<const double> expected,
                                  double cancellation) {
  constexpr double kFp32Relative = 1e-5;
  REQUIRE(actual.size() == expected.size());
  std::size_t failures = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double bound = (kBf16Rounding + kFp32Relative) * std::abs(expected[i]) + cancellation;
    if (!(std::abs(actual[i] - expected[i]) <= bound)) {
      if (++failures <= 5) {
        CAPTURE(i);
        CAPTURE(actual[i]);
        CAPTURE(expected[i]);
        FAIL_CHECK("outside one bf16 rounding");
      }
    }
  }
  CHECK(failures == 0);
}

inline std::vector<std::int32_t> offsets_of(const std::vector<int>& lengths) {
  std::vector<std::int32_t> offsets{0};
  for (int length : lengths) offsets.push_back(offsets.back() + length);
  return offsets;
}

// A packed batch on the device and on the host.
struct Batch {
  std::vector<std::int32_t> cu_seqlens;
  DeviceBuffer<std::int32_t> device_cu_seqlens;
  kernels::VarlenBatch varlen;

  explicit Batch(const std::vector<int>& lengths)
      : cu_seqlens(offsets_of(lengths)),
        device_cu_seqlens(cu_seqlens),
        varlen{device_cu_seqlens.get(), static_cast<int>(lengths.size()),
               *std::max_element(lengths.begin(), lengths.end()), cu_seqlens.back()} {}

  [[nodiscard]] std::size_t tokens() const { return static_cast<std::size_t>(cu_seqlens.back()); }
};

// The same values on the device one bf16 past a 16-byte boundary: kernels that move 8 values per access take
// their one-value-at-a-time path on them, which must give the same bits.
inline DeviceBuffer<bf16> shifted(const std::vector<bf16>& values) {
  std::vector<bf16> padded(values.size() + 1, __float2bfloat16(0.0f));
  std::copy(values.begin(), values.end(), padded.begin() + 1);
  return DeviceBuffer<bf16>(padded);
}

inline std::vector<bf16> download_shifted(const DeviceBuffer<bf16>& buffer) {
  std::vector<bf16> padded = buffer.download();
  return {padded.begin() + 1, padded.end()};
}

inline bool same_bits(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)) == 0;
}

}  // namespace sluice::executor::kernel_tests
