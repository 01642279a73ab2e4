// The executor's GPU kernels against the float64 CPU references, on random inputs with fixed seeds.
// Inputs are rounded to bf16 first and the references see exactly those values, so every difference
// comes from the kernels' own arithmetic: fp32 accumulation and the bf16 rounding of intermediates and
// outputs. bf16 keeps 8 significant bits, so one rounding moves a value by at most u = 2^-8 = 3.9e-3 of
// itself; the tolerances below are stated in terms of u.
//
// The GPU cases are the suite "gpu": without a CUDA device they are skipped (gpu_test_main.cpp), and the
// wrappers' argument checks run anyway (they throw before touching the device).
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "sluice/core/random.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"
#include "sluice_executor/reference.hpp"

namespace kernels = sluice::executor::kernels;
namespace ref = sluice::executor::reference;
using kernels::bf16;

namespace {

constexpr double kBf16Rounding = 0x1.0p-8;  // u: relative change of one round to nearest bf16

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

Bf16Values random_bf16(sluice::Rng& rng, std::size_t count, double scale = 1.0, double offset = 0.0) {
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

std::vector<bf16> to_bf16(std::span<const double> values) {
  std::vector<bf16> rounded(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) rounded[i] = __float2bfloat16(static_cast<float>(values[i]));
  return rounded;
}

std::vector<float> to_float(std::span<const double> values) {
  std::vector<float> narrowed(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) narrowed[i] = static_cast<float>(values[i]);
  return narrowed;
}

std::vector<double> to_double(const std::vector<bf16>& values) {
  std::vector<double> widened(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) widened[i] = static_cast<double>(__bfloat162float(values[i]));
  return widened;
}

std::vector<double> to_double(const std::vector<float>& values) { return {values.begin(), values.end()}; }

double max_abs(std::span<const double> values) {
  double largest = 0.0;
  for (double value : values) largest = std::max(largest, std::abs(value));
  return largest;
}

// Whole-tensor error measures of actual against expected.
struct Errors {
  double relative_l2 = 0.0;  // ||actual - expected|| / ||expected||
  double max_abs = 0.0;      // max |actual - expected|
};

Errors compare(std::span<const double> actual, std::span<const double> expected) {
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
void check_within_rounding(std::span<const double> actual, std::span<const double> expected, double cancellation) {
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

std::vector<std::int32_t> offsets_of(const std::vector<int>& lengths) {
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

// Lengths 1, 7 and 300, tile edges (the backward's 64-row tiles: 64, 65; the forward's 128-row tiles: 128, 129) and
// an empty sequence.
const std::vector<int> kAttentionLengths{7, 0, 300, 1, 65, 128, 64, 129};

std::string name_of(kernels::AttentionKernel kernel) {
  switch (kernel) {
    case kernels::AttentionKernel::mma: return "mma";
    case kernels::AttentionKernel::mma64: return "mma64";
    case kernels::AttentionKernel::mma_single_pass: return "mma_single_pass";
    case kernels::AttentionKernel::wmma: return "wmma";
  }
  return "unknown";
}

void check_attention_forward(int head_dim, kernels::AttentionKernel kernel) {
  CAPTURE(head_dim);
  CAPTURE(name_of(kernel));
  sluice::Rng rng(static_cast<std::uint64_t>(100 + head_dim));
  const Batch batch(kAttentionLengths);
  const ref::HeadShape heads{2, head_dim};
  const std::size_t tokens = batch.tokens();
  const auto hidden = static_cast<std::size_t>(2 * head_dim);
  const std::size_t stride = 3 * hidden;
  const Bf16Values qkv = random_bf16(rng, tokens * stride);

  const DeviceBuffer<bf16> device_qkv(qkv.rounded);
  DeviceBuffer<bf16> device_out(tokens * hidden);
  DeviceBuffer<float> device_lse(2 * tokens);
  kernels::attention_forward(batch.varlen, {2, head_dim}, device_qkv.get(), device_qkv.get() + hidden,
                             device_qkv.get() + 2 * hidden, static_cast<std::int64_t>(stride), device_out.get(),
                             device_lse.get(), nullptr, kernel);

  std::vector<double> out(tokens * hidden);
  std::vector<double> lse(2 * tokens);
  const std::span<const double> all(qkv.exact);
  ref::attention_forward(batch.cu_seqlens, heads, all, all.subspan(hidden), all.subspan(2 * hidden), stride, out, lse);

  // Each output is Σ p_j v_j / Σ p_j with p_j rounded to bf16 before the P·V product and the result
  // rounded once: |error| <= u·Σ p_j|v_j| / Σ p_j + u·|out| <= 2u·max|v| per element, and about u/2 in
  // the norm, since the roundings have random signs. LSE stays in fp32 throughout.
  const Errors out_errors = compare(to_double(device_out.download()), out);
  const Errors lse_errors = compare(to_double(device_lse.download()), lse);
  // Printed on success too: a GPU run records each kernel's errors, not only whether they passed.
  MESSAGE(name_of(kernel) << " forward, head_dim " << head_dim << ": out relative L2 " << out_errors.relative_l2
                          << ", max abs " << out_errors.max_abs << "; lse max abs " << lse_errors.max_abs);
  CHECK(out_errors.relative_l2 <= 1e-2);
  CHECK(out_errors.max_abs <= 2 * kBf16Rounding * max_abs(qkv.exact));
  CHECK(lse_errors.max_abs <= 1e-3);
}

// The attention test batch with random q | k | v and dO (two heads), and the reference's forward and backward of it.
// The backward starts from the forward's output rounded to bf16, as the GPU stores it, so that a kernel's backward
// is checked alone.
struct AttentionCase {
  Batch batch{kAttentionLengths};
  std::size_t tokens = batch.tokens();
  std::size_t hidden;
  std::size_t stride;
  Bf16Values qkv, dout;
  std::vector<double> out, lse;
  std::vector<bf16> stored_out;
  std::vector<double> dqkv;

  AttentionCase(int head_dim, sluice::Rng& rng)
      : hidden(static_cast<std::size_t>(2 * head_dim)),
        stride(3 * hidden),
        qkv(random_bf16(rng, tokens * stride)),
        dout(random_bf16(rng, tokens * hidden)),
        out(tokens * hidden),
        lse(2 * tokens),
        dqkv(tokens * stride) {
    const ref::HeadShape heads{2, head_dim};
    const std::span<const double> all(qkv.exact);
    ref::attention_forward(batch.cu_seqlens, heads, all, all.subspan(hidden), all.subspan(2 * hidden), stride, out,
                           lse);
    stored_out = to_bf16(out);
    const std::span<double> gradient(dqkv);
    ref::attention_backward(batch.cu_seqlens, heads, all, all.subspan(hidden), all.subspan(2 * hidden), stride,
                            to_double(stored_out), dout.exact, lse, gradient, gradient.subspan(hidden),
                            gradient.subspan(2 * hidden), stride);
  }
};

void check_attention_backward(int head_dim, kernels::AttentionKernel kernel) {
  CAPTURE(head_dim);
  CAPTURE(name_of(kernel));
  sluice::Rng rng(static_cast<std::uint64_t>(200 + head_dim));
  const AttentionCase reference(head_dim, rng);
  const Batch& batch = reference.batch;
  const std::size_t tokens = reference.tokens;
  const std::size_t hidden = reference.hidden;
  const std::size_t stride = reference.stride;
  const std::vector<double>& dqkv = reference.dqkv;

  const DeviceBuffer<bf16> device_qkv(reference.qkv.rounded);
  const DeviceBuffer<bf16> device_out(reference.stored_out);
  const DeviceBuffer<bf16> device_dout(reference.dout.rounded);
  const DeviceBuffer<float> device_lse(to_float(reference.lse));
  DeviceBuffer<bf16> device_dqkv(tokens * stride);
  DeviceBuffer<float> workspace(kernels::attention_backward_workspace_floats(batch.varlen, {2, head_dim}, kernel));
  const auto run = [&] {
    kernels::attention_backward(batch.varlen, {2, head_dim}, device_qkv.get(), device_qkv.get() + hidden,
                                device_qkv.get() + 2 * hidden, static_cast<std::int64_t>(stride), device_out.get(),
                                device_dout.get(), device_lse.get(), device_dqkv.get(), device_dqkv.get() + hidden,
                                device_dqkv.get() + 2 * hidden, static_cast<std::int64_t>(stride), workspace.get(),
                                nullptr, kernel);
    return device_dqkv.download();
  };
  const std::vector<bf16> first = run();
  const std::vector<double> actual = to_double(first);

  // dV = Σ Pᵀ dO with P rounded to bf16; dQ and dK go through dS = P ∘ (dP - delta) rounded to bf16, where
  // dP - delta can cancel: in the norm each is a few u off, so 2e-2 leaves a wide margin while a wrong tile,
  // mask or stride gives errors of order 1. The max-abs bound catches a single bad row that the norm hides.
  for (std::size_t part = 0; part < 3; ++part) {
    CAPTURE(part);  // 0 dq, 1 dk, 2 dv
    std::vector<double> actual_part;
    std::vector<double> expected_part;
    for (std::size_t t = 0; t < tokens; ++t) {
      for (std::size_t c = 0; c < hidden; ++c) {
        actual_part.push_back(actual[t * stride + part * hidden + c]);
        expected_part.push_back(dqkv[t * stride + part * hidden + c]);
      }
    }
    const Errors errors = compare(actual_part, expected_part);
    // A std::string: doctest's message stream writes a const char* as an address.
    const std::string part_name = part == 0 ? "dq" : part == 1 ? "dk" : "dv";
    MESSAGE(name_of(kernel) << " backward, head_dim " << head_dim << ": " << part_name << " relative L2 "
                            << errors.relative_l2 << ", max abs " << errors.max_abs << " of "
                            << max_abs(expected_part));
    CHECK(errors.relative_l2 <= 2e-2);
    CHECK(errors.max_abs <= 5e-2 * max_abs(expected_part));
  }
  // No atomics (the single pass's dQ shares add up in key-tile order): a second run gives the same bits.
  const std::vector<bf16> second = run();
  CHECK(std::memcmp(first.data(), second.data(), first.size() * sizeof(bf16)) == 0);
}

// Ring attention's blocks of a packed batch: ring rank r holds chunks r and 2R−1−r of every sequence cut into 2R
// (Liu et al.'s causal balance), its rows ascending.
struct RingBlock {
  std::vector<std::int32_t> rows;  // packed rows of the batch
  std::vector<std::int32_t> positions;
  std::vector<std::int32_t> cu_seqlens{0};
};

std::vector<RingBlock> ring_blocks(const std::vector<int>& lengths, int ring) {
  std::vector<RingBlock> blocks(static_cast<std::size_t>(ring));
  int start = 0;
  for (const int length : lengths) {
    const int chunks = 2 * ring;
    for (int r = 0; r < ring; ++r) {
      RingBlock& block = blocks[static_cast<std::size_t>(r)];
      for (const int chunk : {r, chunks - 1 - r})
        for (int p = length * chunk / chunks; p < length * (chunk + 1) / chunks; ++p) {
          block.rows.push_back(start + p);
          block.positions.push_back(p);
        }
      block.cu_seqlens.push_back(static_cast<std::int32_t>(block.rows.size()));
    }
    start += length;
  }
  return blocks;
}

// `columns` values per row of `values` at the given rows.
template <class T>
std::vector<T> take_rows(const std::vector<T>& values, std::size_t columns, const std::vector<std::int32_t>& rows) {
  std::vector<T> taken;
  for (const std::int32_t row : rows) {
    const auto first = values.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(row) * columns);
    taken.insert(taken.end(), first, first + static_cast<std::ptrdiff_t>(columns));
  }
  return taken;
}

// [heads, tokens] statistics at the given rows, as [heads, rows].
std::vector<double> take_stats(const std::vector<double>& stats, std::size_t heads, std::size_t tokens,
                               const std::vector<std::int32_t>& rows) {
  std::vector<double> taken;
  for (std::size_t head = 0; head < heads; ++head)
    for (const std::int32_t row : rows) taken.push_back(stats[head * tokens + static_cast<std::size_t>(row)]);
  return taken;
}

// One ring block on the device: its rows of q | k | v and where they sit.
struct DeviceRingBlock {
  DeviceBuffer<std::int32_t> cu_seqlens, positions;
  DeviceBuffer<bf16> qkv;
  kernels::PositionedBatch batch;
  std::size_t tokens;

  DeviceRingBlock(const RingBlock& block, const std::vector<bf16>& qkv_rows, int num_seqs)
      : cu_seqlens(block.cu_seqlens), positions(block.positions), qkv(qkv_rows), tokens(block.rows.size()) {
    int longest = 0;
    for (std::size_t s = 0; s + 1 < block.cu_seqlens.size(); ++s)
      longest = std::max(longest, block.cu_seqlens[s + 1] - block.cu_seqlens[s]);
    batch = {{cu_seqlens.get(), num_seqs, longest, static_cast<int>(tokens)}, positions.get()};
  }
};

// The causal attention of a batch computed as ring attention's steps: every block's queries against every block's
// keys, merged by log-sum-exp (forward), and each step's gradients summed (backward), against the reference of the
// whole batch. Also: a block whose keys all come after some queries leaves those at lse -inf and zeros.
void check_block_attention(int head_dim, kernels::AttentionKernel kernel) {
  CAPTURE(head_dim);
  CAPTURE(name_of(kernel));
  sluice::Rng rng(static_cast<std::uint64_t>(400 + head_dim));
  const AttentionCase reference(head_dim, rng);
  const std::vector<int>& lengths = kAttentionLengths;
  const auto num_seqs = static_cast<int>(lengths.size());
  const std::size_t tokens = reference.tokens;
  const std::size_t hidden = reference.hidden;
  const std::size_t stride = reference.stride;
  const Bf16Values& qkv = reference.qkv;
  const Bf16Values& dout = reference.dout;
  const std::vector<double>& out = reference.out;
  const std::vector<double>& lse = reference.lse;
  const std::vector<bf16>& stored_out = reference.stored_out;
  const std::vector<double>& dqkv = reference.dqkv;

  const std::vector<RingBlock> blocks = ring_blocks(lengths, 2);
  std::vector<std::unique_ptr<DeviceRingBlock>> device;
  for (const RingBlock& block : blocks)
    device.push_back(std::make_unique<DeviceRingBlock>(block, take_rows(qkv.rounded, stride, block.rows), num_seqs));
  const auto step_forward = [&](const DeviceRingBlock& queries, const DeviceRingBlock& keys, bf16* block_out,
                                float* block_lse) {
    kernels::block_attention_forward(queries.batch, keys.batch, {2, head_dim}, queries.qkv.get(),
                                     static_cast<std::int64_t>(stride), keys.qkv.get() + hidden,
                                     keys.qkv.get() + 2 * hidden, static_cast<std::int64_t>(stride), block_out,
                                     block_lse, nullptr, kernel);
  };
  for (std::size_t a = 0; a < blocks.size(); ++a) {
    CAPTURE(a);
    const DeviceRingBlock& queries = *device[a];
    DeviceBuffer<float> merged(queries.tokens * hidden);
    DeviceBuffer<float> merged_lse(2 * queries.tokens);
    kernels::fill_zero(merged.get(), static_cast<std::int64_t>(queries.tokens * hidden), nullptr);
    kernels::fill(merged_lse.get(), -INFINITY, static_cast<std::int64_t>(2 * queries.tokens), nullptr);
    DeviceBuffer<bf16> block_out(queries.tokens * hidden);
    DeviceBuffer<float> block_lse(2 * queries.tokens);
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      step_forward(queries, *device[b], block_out.get(), block_lse.get());
      if (a == 0 && b == 1) {
        // Block 0's first chunk comes before all of block 1: its queries see none of those keys.
        const std::vector<float> step_lse = block_lse.download();
        const std::vector<bf16> step_out = block_out.download();
        std::size_t unseen = 0;
        for (std::size_t i = 0; i < queries.tokens; ++i) {
          const std::size_t s = static_cast<std::size_t>(
              std::upper_bound(blocks[0].cu_seqlens.begin(), blocks[0].cu_seqlens.end(), static_cast<std::int32_t>(i)) -
              blocks[0].cu_seqlens.begin() - 1);
          const int length = lengths[s];
          if (blocks[0].positions[i] >= length / 4) continue;  // chunk 0 of four
          ++unseen;
          for (std::size_t head = 0; head < 2; ++head) CHECK(step_lse[head * queries.tokens + i] == -INFINITY);
          for (std::size_t c = 0; c < hidden; ++c) CHECK(__bfloat162float(step_out[i * hidden + c]) == 0.0f);
        }
        CHECK(unseen > 0);
      }
      kernels::attention_merge(block_out.get(), block_lse.get(), static_cast<int>(queries.tokens), {2, head_dim},
                               merged.get(), merged_lse.get(), nullptr);
    }
    const Errors out_errors = compare(to_double(merged.download()), take_rows(out, hidden, blocks[a].rows));
    const Errors lse_errors = compare(to_double(merged_lse.download()), take_stats(lse, 2, tokens, blocks[a].rows));
    MESSAGE(name_of(kernel) << " ring forward, head_dim " << head_dim << ", block " << a << ": out relative L2 "
                            << out_errors.relative_l2 << "; lse max abs " << lse_errors.max_abs);
    CHECK(out_errors.relative_l2 <= 1e-2);
    CHECK(out_errors.max_abs <= 2 * kBf16Rounding * max_abs(qkv.exact));
    CHECK(lse_errors.max_abs <= 1e-3);
  }

  // Backward: every step from the whole attention's out and lse; dq summed over key blocks, dk and dv over query
  // blocks.
  std::vector<std::unique_ptr<DeviceBuffer<float>>> dq, dkv;
  for (const auto& block : device) {
    dq.push_back(std::make_unique<DeviceBuffer<float>>(block->tokens * hidden));
    dkv.push_back(std::make_unique<DeviceBuffer<float>>(block->tokens * 2 * hidden));
    kernels::fill_zero(dq.back()->get(), static_cast<std::int64_t>(block->tokens * hidden), nullptr);
    kernels::fill_zero(dkv.back()->get(), static_cast<std::int64_t>(block->tokens * 2 * hidden), nullptr);
  }
  for (std::size_t a = 0; a < blocks.size(); ++a) {
    const DeviceRingBlock& queries = *device[a];
    const DeviceBuffer<bf16> block_out(take_rows(stored_out, hidden, blocks[a].rows));
    const DeviceBuffer<bf16> block_dout(take_rows(dout.rounded, hidden, blocks[a].rows));
    const DeviceBuffer<float> block_lse(to_float(take_stats(lse, 2, tokens, blocks[a].rows)));
    DeviceBuffer<float> workspace(
        kernels::attention_backward_workspace_floats(queries.batch.rows, {2, head_dim}, kernel));
    DeviceBuffer<bf16> step_dq(queries.tokens * hidden);
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const DeviceRingBlock& keys = *device[b];
      DeviceBuffer<bf16> step_dkv(keys.tokens * 2 * hidden);
      kernels::block_attention_backward(
          queries.batch, keys.batch, {2, head_dim}, queries.qkv.get(), static_cast<std::int64_t>(stride),
          keys.qkv.get() + hidden, keys.qkv.get() + 2 * hidden, static_cast<std::int64_t>(stride), block_out.get(),
          block_dout.get(), block_lse.get(), step_dq.get(), static_cast<std::int64_t>(hidden), step_dkv.get(),
          step_dkv.get() + hidden, static_cast<std::int64_t>(2 * hidden), workspace.get(), nullptr, kernel);
      kernels::add_inplace(dq[a]->get(), step_dq.get(), static_cast<std::int64_t>(queries.tokens * hidden), nullptr);
      kernels::add_inplace(dkv[b]->get(), step_dkv.get(), static_cast<std::int64_t>(keys.tokens * 2 * hidden), nullptr);
      SLUICE_CUDA_CHECK(cudaDeviceSynchronize());  // step_dkv is freed at the end of this iteration
    }
  }
  for (std::size_t part = 0; part < 3; ++part) {
    CAPTURE(part);  // 0 dq, 1 dk, 2 dv
    std::vector<double> actual_part, expected_part;
    for (std::size_t a = 0; a < blocks.size(); ++a) {
      const std::vector<float> values = part == 0 ? dq[a]->download() : dkv[a]->download();
      const std::size_t columns = part == 0 ? hidden : 2 * hidden;
      const std::size_t offset = part == 0 ? 0 : (part - 1) * hidden;
      for (std::size_t i = 0; i < blocks[a].rows.size(); ++i)
        for (std::size_t c = 0; c < hidden; ++c) {
          actual_part.push_back(values[i * columns + offset + c]);
          expected_part.push_back(dqkv[static_cast<std::size_t>(blocks[a].rows[i]) * stride + part * hidden + c]);
        }
    }
    const Errors errors = compare(actual_part, expected_part);
    const std::string part_name = part == 0 ? "dq" : part == 1 ? "dk" : "dv";
    MESSAGE(name_of(kernel) << " ring backward, head_dim " << head_dim << ": " << part_name << " relative L2 "
                            << errors.relative_l2 << ", max abs " << errors.max_abs << " of "
                            << max_abs(expected_part));
    CHECK(errors.relative_l2 <= 2e-2);
    CHECK(errors.max_abs <= 5e-2 * max_abs(expected_part));
  }
}
}  // namespace

// mma64 differs from mma in the forward alone, mma_single_pass in the backward alone: each is checked where it differs,
// and both in ring attention's block steps.
constexpr kernels::AttentionKernel kForwardKernels[] = {kernels::AttentionKernel::mma, kernels::AttentionKernel::mma64,
                                                        kernels::AttentionKernel::wmma};
constexpr kernels::AttentionKernel kBackwardKernels[] = {
    kernels::AttentionKernel::mma, kernels::AttentionKernel::mma_single_pass, kernels::AttentionKernel::wmma};
constexpr kernels::AttentionKernel kAttentionKernels[] = {
    kernels::AttentionKernel::mma, kernels::AttentionKernel::mma64, kernels::AttentionKernel::mma_single_pass,
    kernels::AttentionKernel::wmma};

TEST_CASE("attention forward kernels match the reference (mma, mma64 and wmma, head_dim 64 and 128)" *
          doctest::test_suite("gpu")) {
  for (const kernels::AttentionKernel kernel : kForwardKernels) {
    check_attention_forward(64, kernel);
    check_attention_forward(128, kernel);
  }
}

TEST_CASE("attention backward kernels match the reference (mma, mma_single_pass and wmma, head_dim 64 and 128)" *
          doctest::test_suite("gpu")) {
  for (const kernels::AttentionKernel kernel : kBackwardKernels) {
    check_attention_backward(64, kernel);
    check_attention_backward(128, kernel);
  }
}

TEST_CASE("ring attention's block steps, merged, match the reference (every kernel, head_dim 64 and 128)" *
          doctest::test_suite("gpu")) {
  for (const kernels::AttentionKernel kernel : kAttentionKernels) {
    check_block_attention(64, kernel);
    check_block_attention(128, kernel);
  }
}

TEST_CASE("RMSNorm kernels match the reference" * doctest::test_suite("gpu")) {
  sluice::Rng rng(300);
  const int rows = 37;
  const int cols = 1000;  // not a multiple of the block size
  const auto count = static_cast<std::size_t>(rows * cols);
  const float eps = 1e-5f;
  const Bf16Values x = random_bf16(rng, count);
  const Bf16Values weight = random_bf16(rng, static_cast<std::size_t>(cols), 0.1, 1.0);
  const Bf16Values dy = random_bf16(rng, count);

  std::vector<double> y(count);
  std::vector<double> rstd(static_cast<std::size_t>(rows));
  ref::rmsnorm_forward(x.exact, weight.exact, static_cast<double>(eps), y, rstd);
  constexpr double kEarlier = 0.25;  // the weight gradient is added to what the accumulator holds
  std::vector<double> dx(count);
  std::vector<double> dweight(static_cast<std::size_t>(cols), kEarlier);
  ref::rmsnorm_backward(x.exact, weight.exact, rstd, dy.exact, dx, dweight);

  const DeviceBuffer<bf16> device_x(x.rounded);
  const DeviceBuffer<bf16> device_weight(weight.rounded);
  const DeviceBuffer<bf16> device_dy(dy.rounded);
  DeviceBuffer<bf16> device_y(count);
  DeviceBuffer<float> device_rstd(static_cast<std::size_t>(rows));
  kernels::rmsnorm_forward(device_x.get(), device_weight.get(), rows, cols, eps, device_y.get(), device_rstd.get(),
                           nullptr);
  // y: products only, no cancellation. rstd: fp32 only.
  check_within_rounding(to_double(device_y.download()), y, 0.0);
  CHECK(compare(to_double(device_rstd.download()), rstd).relative_l2 <= 1e-5);

  // The backward gets the reference's rstd, so that it is checked alone.
  const DeviceBuffer<float> reference_rstd(to_float(rstd));
  DeviceBuffer<bf16> device_dx(count);
  DeviceBuffer<float> device_dweight(std::vector<float>(static_cast<std::size_t>(cols), static_cast<float>(kEarlier)));
  DeviceBuffer<float> workspace(kernels::rmsnorm_backward_workspace_floats(cols));
  kernels::rmsnorm_backward(device_x.get(), device_weight.get(), reference_rstd.get(), device_dy.get(), rows, cols,
                            device_dx.get(), device_dweight.get(), workspace.get(), nullptr);
  // dx = rstd (dy∘w - x̂ mean(dy∘w∘x̂)) cancels where the two terms meet: fp32 error there is about
  // 1e-6 of the terms, well inside 1e-4 of the largest dx.
  check_within_rounding(to_double(device_dx.download()), dx, 1e-4 * max_abs(dx));
  // dweight: fp32 sums of 37 products, no rounding to bf16.
  const Errors dweight_errors = compare(to_double(device_dweight.download()), dweight);
  CHECK(dweight_errors.max_abs <= 1e-4 * max_abs(dweight));
}

TEST_CASE("RoPE kernels match the reference and leave the v columns alone" * doctest::test_suite("gpu")) {
  sluice::Rng rng(400);
  const Batch batch({7, 0, 300, 1, 64});
  const int num_heads = 3;
  const int head_dim = 64;
  const ref::HeadShape heads{num_heads, head_dim};
  const auto hidden = static_cast<std::size_t>(num_heads * head_dim);
  const std::size_t stride = 3 * hidden;
  const std::size_t tokens = batch.tokens();
  const double theta = 10000.0;

  for (const bool backward : {false, true}) {
    CAPTURE(backward);
    const Bf16Values qkv = random_bf16(rng, tokens * stride);
    std::vector<double> expected = qkv.exact;
    const std::span<double> expected_all(expected);
    DeviceBuffer<bf16> device_qkv(qkv.rounded);
    if (backward) {
      ref::rope_backward(batch.cu_seqlens, heads, expected_all, expected_all.subspan(hidden), stride, theta);
      kernels::rope_backward(batch.varlen, {num_heads, head_dim}, device_qkv.get(), device_qkv.get() + hidden,
                             static_cast<std::int64_t>(stride), theta, nullptr);
    } else {
      ref::rope_forward(batch.cu_seqlens, heads, expected_all, expected_all.subspan(hidden), stride, theta);
      kernels::rope_forward(batch.varlen, {num_heads, head_dim}, device_qkv.get(), device_qkv.get() + hidden,
                            static_cast<std::int64_t>(stride), theta, nullptr);
    }
    const std::vector<bf16> actual = device_qkv.download();
    // Each output is x1 cos - x2 sin in fp32 from exact inputs (|x| < 8, so the cancellation error is
    // below 1e-6), rounded once; the angle is computed in double. v columns must come back bit for bit.
    check_within_rounding(to_double(actual), expected, 1e-5);
    std::size_t changed_v = 0;
    for (std::size_t t = 0; t < tokens; ++t) {
      changed_v +=
          static_cast<std::size_t>(std::memcmp(&actual[t * stride + 2 * hidden], &qkv.rounded[t * stride + 2 * hidden],
                                               hidden * sizeof(bf16)) != 0);
    }
    CHECK(changed_v == 0);
  }
}

TEST_CASE("SwiGLU kernels match the reference" * doctest::test_suite("gpu")) {
  sluice::Rng rng(500);
  const int rows = 19;
  const int ffn = 300;
  const auto count = static_cast<std::size_t>(rows * ffn);
  const Bf16Values gate_up = random_bf16(rng, 2 * count, 2.0);
  const Bf16Values dout = random_bf16(rng, count);
  std::vector<double> out(count);
  ref::swiglu_forward(gate_up.exact, static_cast<std::size_t>(ffn), out);
  std::vector<double> dgate_up(2 * count);
  ref::swiglu_backward(gate_up.exact, dout.exact, static_cast<std::size_t>(ffn), dgate_up);

  const DeviceBuffer<bf16> device_gate_up(gate_up.rounded);
  const DeviceBuffer<bf16> device_dout(dout.rounded);
  DeviceBuffer<bf16> device_out(count);
  DeviceBuffer<bf16> device_dgate_up(2 * count);
  kernels::swiglu_forward(device_gate_up.get(), rows, ffn, device_out.get(), nullptr);
  kernels::swiglu_backward(device_gate_up.get(), device_dout.get(), rows, ffn, device_dgate_up.get(), nullptr);
  // fp32 sigmoid and products from exact inputs, one rounding; silu'(gate) = σ(1 + gate(1 - σ)) cancels
  // near gate = -1.28, where its fp32 error is ~1e-7 of the gradient's scale.
  check_within_rounding(to_double(device_out.download()), out, 0.0);
  check_within_rounding(to_double(device_dgate_up.download()), dgate_up, 1e-5 * max_abs(dgate_up));
}

TEST_CASE("elementwise kernels: add, conversions, zero fill" * doctest::test_suite("gpu")) {
  sluice::Rng rng(600);
  const std::size_t count = 100'003;  // not a multiple of the block size
  const Bf16Values a = random_bf16(rng, count);
  const Bf16Values b = random_bf16(rng, count, 1e-2);
  std::vector<bf16> sum(count);
  for (std::size_t i = 0; i < count; ++i)
    sum[i] = __float2bfloat16(__bfloat162float(a.rounded[i]) + __bfloat162float(b.rounded[i]));
  const auto n = static_cast<std::int64_t>(count);

  // Same fp32 sum and the same round to nearest even as on the host: identical bits.
  DeviceBuffer<bf16> device_a(a.rounded);
  const DeviceBuffer<bf16> device_b(b.rounded);
  DeviceBuffer<bf16> device_out(count);
  kernels::add(device_a.get(), device_b.get(), device_out.get(), n, nullptr);
  std::vector<bf16> out = device_out.download();
  CHECK(std::memcmp(out.data(), sum.data(), count * sizeof(bf16)) == 0);
  kernels::add_inplace(device_a.get(), device_b.get(), n, nullptr);
  out = device_a.download();
  CHECK(std::memcmp(out.data(), sum.data(), count * sizeof(bf16)) == 0);

  std::vector<float> floats(count);
  for (std::size_t i = 0; i < count; ++i) floats[i] = static_cast<float>(rng.normal());
  const DeviceBuffer<float> device_floats(floats);
  kernels::convert(device_floats.get(), device_out.get(), n, nullptr);
  out = device_out.download();
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const bf16 expected = __float2bfloat16(floats[i]);
    mismatches += static_cast<std::size_t>(std::memcmp(&out[i], &expected, sizeof(bf16)) != 0);
  }
  CHECK(mismatches == 0);

  DeviceBuffer<float> widened(count);
  kernels::convert(device_a.get(), widened.get(), n, nullptr);
  const std::vector<float> widened_host = widened.download();
  mismatches = 0;
  for (std::size_t i = 0; i < count; ++i)
    mismatches += static_cast<std::size_t>(widened_host[i] != __bfloat162float(sum[i]));
  CHECK(mismatches == 0);

  kernels::fill_zero(device_a.get(), n, nullptr);
  kernels::fill_zero(widened.get(), n, nullptr);
  out = device_a.download();
  const std::vector<float> zeros = widened.download();
  CHECK(std::all_of(out.begin(), out.end(), [](bf16 value) { return __bfloat162float(value) == 0.0f; }));
  CHECK(std::all_of(zeros.begin(), zeros.end(), [](float value) { return value == 0.0f; }));
}

TEST_CASE("cross-entropy kernel matches the reference" * doctest::test_suite("gpu")) {
  sluice::Rng rng(700);
  const int rows = 13;
  const int vocab = 1000;  // not a multiple of the block size
  const Bf16Values logits = random_bf16(rng, static_cast<std::size_t>(rows * vocab), 2.0);
  std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < targets.size(); ++r) targets[r] = static_cast<std::int32_t>(rng.below(vocab));
  targets[0] = 0;
  targets[1] = vocab - 1;
  targets[2] = -1;
  targets[7] = -1;
  const double scale = 1.0 / 11.0;  // the counted targets

  std::vector<double> row_loss(targets.size());
  std::vector<double> dlogits(logits.exact.size());
  const double loss_sum =
      ref::cross_entropy(logits.exact, targets, static_cast<std::size_t>(vocab), scale, row_loss, dlogits);

  const DeviceBuffer<bf16> device_logits(logits.rounded);
  const DeviceBuffer<std::int32_t> device_targets(targets);
  DeviceBuffer<float> device_row_loss(targets.size());
  DeviceBuffer<bf16> device_dlogits(dlogits.size());
  constexpr float kEarlier = 1.5f;  // the loss sum is added to the accumulator
  DeviceBuffer<float> device_loss_sum(std::vector<float>{kEarlier});
  kernels::cross_entropy(device_logits.get(), device_targets.get(), rows, vocab, static_cast<float>(scale),
                         device_row_loss.get(), device_dlogits.get(), device_loss_sum.get(), nullptr);

  // Row losses and their sum stay in fp32 (losses of a few units, ~1e-6 relative); dlogits is fp32
  // softmax rounded once, with slack for the fp32 error of probabilities near 1 minus the one-hot.
  const Errors loss_errors = compare(to_double(device_row_loss.download()), row_loss);
  CHECK(loss_errors.max_abs <= 1e-4);
  CHECK(static_cast<double>(device_loss_sum.download()[0]) == doctest::Approx(kEarlier + loss_sum).epsilon(1e-5));
  check_within_rounding(to_double(device_dlogits.download()), dlogits, 1e-6 * scale);
}

TEST_CASE("vocab-parallel cross-entropy over four parts matches the reference" * doctest::test_suite("gpu")) {
  sluice::Rng rng(710);
  const int rows = 13;
  const int vocab = 1000;
  const int parts = 4;
  const int part = vocab / parts;
  const Bf16Values logits = random_bf16(rng, static_cast<std::size_t>(rows * vocab), 2.0);
  std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < targets.size(); ++r) targets[r] = static_cast<std::int32_t>(rng.below(vocab));
  targets[0] = 0;
  targets[1] = vocab - 1;
  targets[2] = part;  // the first column of the second part
  targets[7] = -1;
  const double scale = 1.0 / 12.0;
  std::vector<double> row_loss(targets.size());
  std::vector<double> dlogits(logits.exact.size());
  const double loss_sum =
      ref::cross_entropy(logits.exact, targets, static_cast<std::size_t>(vocab), scale, row_loss, dlogits);

  // Each part's columns on the device; the host reduces between the passes as the all-reduces would.
  const DeviceBuffer<std::int32_t> device_targets(targets);
  std::vector<std::vector<bf16>> slices(parts);
  for (int p = 0; p < parts; ++p)
    for (int r = 0; r < rows; ++r)
      slices[static_cast<std::size_t>(p)].insert(slices[static_cast<std::size_t>(p)].end(),
                                                 logits.rounded.begin() + r * vocab + p * part,
                                                 logits.rounded.begin() + r * vocab + (p + 1) * part);
  std::vector<std::unique_ptr<DeviceBuffer<bf16>>> device_logits;
  for (const std::vector<bf16>& slice : slices) device_logits.push_back(std::make_unique<DeviceBuffer<bf16>>(slice));
  std::vector<float> row_max(static_cast<std::size_t>(rows), -INFINITY);
  for (int p = 0; p < parts; ++p) {
    DeviceBuffer<float> part_max(static_cast<std::size_t>(rows));
    kernels::vocab_parallel_max(device_logits[static_cast<std::size_t>(p)]->get(), rows, part, part_max.get(), nullptr);
    const std::vector<float> values = part_max.download();
    for (int r = 0; r < rows; ++r)
      row_max[static_cast<std::size_t>(r)] =
          std::max(row_max[static_cast<std::size_t>(r)], values[static_cast<std::size_t>(r)]);
  }
  const DeviceBuffer<float> device_max(row_max);
  std::vector<float> sums(2 * static_cast<std::size_t>(rows), 0.0f);
  for (int p = 0; p < parts; ++p) {
    DeviceBuffer<float> part_sums(sums.size());
    kernels::vocab_parallel_sums(device_logits[static_cast<std::size_t>(p)]->get(), device_targets.get(), rows, part,
                                 p * part, device_max.get(), part_sums.get(), nullptr);
    const std::vector<float> values = part_sums.download();
    for (std::size_t i = 0; i < sums.size(); ++i) sums[i] += values[i];
  }
  const DeviceBuffer<float> device_sums(sums);
  double device_loss_sum = 0;
  for (int p = 0; p < parts; ++p) {
    const int own_begin = p * rows / parts;
    const int own_end = (p + 1) * rows / parts;
    DeviceBuffer<float> part_row_loss(static_cast<std::size_t>(rows));
    DeviceBuffer<bf16> part_dlogits(static_cast<std::size_t>(rows * part));
    DeviceBuffer<float> part_loss_sum(std::vector<float>{0.0f});
    kernels::vocab_parallel_loss(device_logits[static_cast<std::size_t>(p)]->get(), device_targets.get(), rows, part,
                                 p * part, device_max.get(), device_sums.get(), static_cast<float>(scale), own_begin,
                                 own_end, part_row_loss.get(), part_dlogits.get(), part_loss_sum.get(), nullptr);
    const std::vector<double> losses = to_double(part_row_loss.download());
    for (int r = 0; r < rows; ++r) {
      CAPTURE(r);
      const bool own = r >= own_begin && r < own_end;
      CHECK(std::abs(losses[static_cast<std::size_t>(r)] - (own ? row_loss[static_cast<std::size_t>(r)] : 0.0)) <=
            1e-4);
    }
    device_loss_sum += static_cast<double>(part_loss_sum.download()[0]);
    std::vector<double> expected;
    for (int r = 0; r < rows; ++r)
      expected.insert(expected.end(), dlogits.begin() + r * vocab + p * part,
                      dlogits.begin() + r * vocab + (p + 1) * part);
    check_within_rounding(to_double(part_dlogits.download()), expected, 1e-6 * scale);
  }
  CHECK(device_loss_sum == doctest::Approx(loss_sum).epsilon(1e-5));
}

TEST_CASE("sum_parts and max_parts reduce in part order, as fp32 on the host does" * doctest::test_suite("gpu")) {
  sluice::Rng rng(720);
  const int members = 3;
  const std::size_t count = 10'007;
  const Bf16Values values = random_bf16(rng, count * members);
  std::vector<float> floats(count * members);
  for (float& value : floats) value = static_cast<float>(rng.normal());
  std::vector<bf16> bf16_sum(count);
  std::vector<float> float_sum(count), float_max(count);
  for (std::size_t i = 0; i < count; ++i) {
    float sum = __bfloat162float(values.rounded[i]);
    float total = floats[i];
    float largest = floats[i];
    for (std::size_t j = 1; j < members; ++j) {
      sum += __bfloat162float(values.rounded[j * count + i]);
      total += floats[j * count + i];
      largest = std::max(largest, floats[j * count + i]);
    }
    bf16_sum[i] = __float2bfloat16(sum);
    float_sum[i] = total;
    float_max[i] = largest;
  }
  const DeviceBuffer<bf16> device_values(values.rounded);
  const DeviceBuffer<float> device_floats(floats);
  DeviceBuffer<bf16> bf16_out(count);
  DeviceBuffer<float> sum_out(count), max_out(count);
  const auto n = static_cast<std::int64_t>(count);
  kernels::sum_parts(device_values.get(), members, n, bf16_out.get(), nullptr);
  kernels::sum_parts(device_floats.get(), members, n, sum_out.get(), nullptr);
  kernels::max_parts(device_floats.get(), members, n, max_out.get(), nullptr);
  const std::vector<bf16> sums = bf16_out.download();
  CHECK(std::memcmp(sums.data(), bf16_sum.data(), count * sizeof(bf16)) == 0);
  CHECK(sum_out.download() == float_sum);
  CHECK(max_out.download() == float_max);
}

TEST_CASE("gather_rows and scatter_rows move rows by an index, and undo each other" * doctest::test_suite("gpu")) {
  sluice::Rng rng(730);
  const int rows = 37;
  const int cols = 200;
  const Bf16Values values = random_bf16(rng, static_cast<std::size_t>(rows * cols));
  std::vector<std::int32_t> index(static_cast<std::size_t>(rows));
  std::iota(index.begin(), index.end(), 0);
  for (std::size_t i = index.size() - 1; i > 0; --i)
    std::swap(index[i], index[static_cast<std::size_t>(rng.below(i + 1))]);
  std::vector<bf16> gathered(values.rounded.size());
  for (int i = 0; i < rows; ++i)
    std::copy_n(values.rounded.begin() + index[static_cast<std::size_t>(i)] * cols, cols, gathered.begin() + i * cols);
  const DeviceBuffer<bf16> device_values(values.rounded);
  const DeviceBuffer<std::int32_t> device_index(index);
  DeviceBuffer<bf16> device_gathered(gathered.size());
  DeviceBuffer<bf16> device_back(gathered.size());
  kernels::gather_rows(device_values.get(), device_index.get(), rows, cols, device_gathered.get(), nullptr);
  kernels::scatter_rows(device_gathered.get(), device_index.get(), rows, cols, device_back.get(), nullptr);
  const std::vector<bf16> out = device_gathered.download();
  const std::vector<bf16> back = device_back.download();
  CHECK(std::memcmp(out.data(), gathered.data(), out.size() * sizeof(bf16)) == 0);
  CHECK(std::memcmp(back.data(), values.rounded.data(), back.size() * sizeof(bf16)) == 0);
}

TEST_CASE("the attention backward's workspace: delta, and the single pass's fp32 dQ sums and turn counters") {
  const auto* fake_offsets = reinterpret_cast<const std::int32_t*>(std::uintptr_t{1} << 22);
  const kernels::VarlenBatch batch{fake_offsets, 3, 130, 301};  // 3 query tiles of 64 rows in the longest
  const kernels::HeadShape heads{4, 128};
  for (const kernels::AttentionKernel kernel :
       {kernels::AttentionKernel::mma, kernels::AttentionKernel::mma64, kernels::AttentionKernel::wmma}) {
    CHECK(kernels::attention_backward_workspace_floats(batch, heads, kernel) == 4u * 301u);
  }
  // delta's 1204 floats (a multiple of 4 already), dQ's 1204 * 128, then 3 sequences * 4 heads * 3 tiles.
  CHECK(kernels::attention_backward_workspace_floats(batch, heads, kernels::AttentionKernel::mma_single_pass) ==
        1204u + 1204u * 128u + 36u);
  // delta's 3 * 1 floats rounded up to 4, so that dQ's sums start 16-byte aligned.
  CHECK(kernels::attention_backward_workspace_floats({fake_offsets, 1, 3, 3}, {1, 64},
                                                     kernels::AttentionKernel::mma_single_pass) == 4u + 3u * 64u + 1u);
  CHECK_THROWS_WITH_AS(kernels::attention_backward_workspace_floats(batch, {4, 96}), doctest::Contains("head_dim"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::attention_backward_workspace_floats({fake_offsets, 3, 130, -1}, heads),
                       doctest::Contains("total_tokens"), std::invalid_argument);
  CHECK(kernels::attention_backward_workspace_floats({fake_offsets, 1, 0, 0}, heads,
                                                     kernels::AttentionKernel::mma_single_pass) == 0u);
}

TEST_CASE("kernel wrappers name bad arguments before touching the device") {
  // Plausible non-null device addresses: the wrappers reject the arguments before any CUDA call.
  auto* fake = reinterpret_cast<bf16*>(std::uintptr_t{1} << 20);
  auto* fake_floats = reinterpret_cast<float*>(std::uintptr_t{1} << 21);
  const auto* fake_offsets = reinterpret_cast<const std::int32_t*>(std::uintptr_t{1} << 22);
  const kernels::VarlenBatch batch{fake_offsets, 2, 300, 400};
  const kernels::HeadShape heads{4, 64};
  const std::int64_t stride = 3 * 256;

  CHECK_THROWS_WITH_AS(kernels::attention_forward(batch, {4, 96}, fake, fake, fake, stride, fake, fake_floats, nullptr),
                       doctest::Contains("head_dim"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      kernels::attention_forward(batch, heads, nullptr, fake, fake, stride, fake, fake_floats, nullptr),
      doctest::Contains("q:"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      kernels::attention_forward(batch, heads, fake + 1, fake, fake, stride, fake, fake_floats, nullptr),
      doctest::Contains("16-byte"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::attention_forward(batch, heads, fake, fake, fake, 200, fake, fake_floats, nullptr),
                       doctest::Contains("qkv_row_stride"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      kernels::attention_forward(batch, heads, fake, fake, fake, 3 * 256 + 4, fake, fake_floats, nullptr),
      doctest::Contains("multiple of 8"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      kernels::attention_forward({nullptr, 2, 300, 400}, heads, fake, fake, fake, stride, fake, fake_floats, nullptr),
      doctest::Contains("cu_seqlens"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::attention_backward(batch, heads, fake, fake, fake, stride, fake, fake, fake_floats,
                                                   fake, fake, fake, stride, nullptr, nullptr),
                       doctest::Contains("workspace"), std::invalid_argument);
  const kernels::PositionedBatch queries{batch, fake_offsets};
  CHECK_THROWS_WITH_AS(kernels::block_attention_forward(queries, {batch, nullptr}, heads, fake, stride, fake, fake,
                                                        stride, fake, fake_floats, nullptr),
                       doctest::Contains("keys.positions"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::block_attention_forward(queries, {{fake_offsets, 3, 300, 400}, fake_offsets}, heads,
                                                        fake, stride, fake, fake, stride, fake, fake_floats, nullptr),
                       doctest::Contains("keys.num_seqs"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::block_attention_forward(queries, queries, heads, fake, stride, fake, fake, 2 * 256 + 4,
                                                        fake, fake_floats, nullptr),
                       doctest::Contains("kv_row_stride"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      kernels::block_attention_backward(queries, queries, heads, fake, stride, fake, fake, stride, fake, fake,
                                        fake_floats, fake, 100, fake, fake, stride, fake_floats, nullptr),
      doctest::Contains("dq_row_stride"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::attention_merge(nullptr, fake_floats, 4, heads, fake_floats, fake_floats, nullptr),
                       doctest::Contains("block_out"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::fill(nullptr, 1.0f, 4, nullptr), doctest::Contains("data"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::add_inplace(fake_floats, nullptr, 4, nullptr), doctest::Contains("b:"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::rmsnorm_forward(fake, fake, 0, 16, 1e-5f, fake, fake_floats, nullptr),
                       doctest::Contains("rows"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      kernels::rmsnorm_backward(fake, fake, fake_floats, fake, 4, 16, fake, fake_floats, nullptr, nullptr),
      doctest::Contains("workspace"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::rope_forward(batch, {4, 63}, fake, fake, stride, 10000.0, nullptr),
                       doctest::Contains("even"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::rope_backward(batch, heads, fake, nullptr, stride, 10000.0, nullptr),
                       doctest::Contains("dk"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::swiglu_forward(fake, 4, 0, fake, nullptr), doctest::Contains("ffn"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::add(fake, nullptr, fake, 10, nullptr), doctest::Contains("b:"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::convert(fake_floats, fake, -1, nullptr), doctest::Contains("count"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(fake, fake_offsets, 4, 0, 1.0f, fake_floats, fake, fake_floats, nullptr),
                       doctest::Contains("vocab"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::vocab_parallel_max(fake, 4, 0, fake_floats, nullptr), doctest::Contains("part"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::vocab_parallel_loss(fake, fake_offsets, 4, 8, 0, fake_floats, fake_floats, 1.0f, 3, 5,
                                                    fake_floats, fake, fake_floats, nullptr),
                       doctest::Contains("own rows"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::sum_parts(fake_floats, 0, 10, fake_floats, nullptr), doctest::Contains("members"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::gather_rows(fake, nullptr, 4, 8, fake, nullptr), doctest::Contains("index"),
                       std::invalid_argument);
  CHECK(kernels::rmsnorm_backward_workspace_floats(1000) >= 1000);
}
