// The executor's attention kernels against the float64 CPU references, on random inputs with fixed seeds
// (kernel_test_support.hpp says how the tolerances are set; the row kernels' cases are in
// test_executor_kernels_rows.cpp). The GPU cases are the suite "gpu": without a CUDA device they are skipped
// (gpu_test_main.cpp), and the wrappers' argument checks run anyway (they throw before touching the device).
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

#include "kernel_test_support.hpp"
#include "sluice/core/random.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"
#include "sluice_executor/reference.hpp"

using namespace sluice::executor::kernel_tests;
namespace ref = sluice::executor::reference;

namespace {

// Lengths 1, 7 and 300, tile edges (the backward's 64-row tiles: 64, 65; the forward's 128-row tiles: 128, 129) and
// an empty sequence.
const std::vector<int> kAttentionLengths{7, 0, 300, 1, 65, 128, 64, 129};
// Emulated on the CPU (test_executor_kernels_emulated) blocks never overlap: a second run could not differ.
#ifdef SLUICE_CUDA_EMULATION
constexpr bool kBlocksOverlap = false;
#else
constexpr bool kBlocksOverlap = true;
#endif

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
  if (kBlocksOverlap) {
    const std::vector<bf16> second = run();
    CHECK(std::memcmp(first.data(), second.data(), first.size() * sizeof(bf16)) == 0);
  }
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
      kernels::rmsnorm_backward(fake, fake, fake_floats, fake, nullptr, 4, 16, fake, fake_floats, nullptr, nullptr),
      doctest::Contains("workspace"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::rmsnorm_backward(fake, fake, fake_floats, fake, nullptr, 4, 50'000, fake, fake_floats,
                                                 fake_floats, nullptr),
                       doctest::Contains("cols: the RMSNorm backward holds at most 49152"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      kernels::add_rmsnorm_forward(fake, fake, fake, 4, 16, 1e-5f, nullptr, fake, fake_floats, nullptr),
      doctest::Contains("sum"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::rope_forward(batch, {4, 63}, fake, fake, stride, 10000.0, nullptr),
                       doctest::Contains("even"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::rope_forward(batch, {1, 258}, fake, fake, stride, 10000.0, nullptr),
                       doctest::Contains("head_dim: rotary embedding takes at most 256"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::rope_backward(batch, heads, fake, nullptr, stride, 10000.0, nullptr),
                       doctest::Contains("dk"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::swiglu_forward(fake, 4, 0, fake, nullptr), doctest::Contains("ffn"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::add(fake, nullptr, fake, 10, nullptr), doctest::Contains("b:"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::convert(fake_floats, fake, -1, nullptr), doctest::Contains("count"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::cross_entropy(fake, fake_offsets, 4, 0, 1.0f, fake_floats, fake, fake_floats, nullptr),
                       doctest::Contains("vocab"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::vocab_parallel_normalizer(fake, 4, 0, fake_floats, fake_floats, nullptr),
                       doctest::Contains("part"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      kernels::vocab_parallel_sums(fake, fake_offsets, 4, 8, 0, nullptr, fake_floats, fake_floats, nullptr),
      doctest::Contains("local"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::vocab_parallel_loss(fake, fake_offsets, 4, 8, 0, fake_floats, fake_floats, 1.0f, 3, 5,
                                                    fake_floats, fake, fake_floats, nullptr),
                       doctest::Contains("own rows"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::sum_parts(fake_floats, 0, 10, fake_floats, nullptr), doctest::Contains("members"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(kernels::gather_rows(fake, nullptr, 4, 8, fake, nullptr), doctest::Contains("index"),
                       std::invalid_argument);
  // The backward's weight-gradient chunks: a row each up to 1024 rows, then at most 1024 chunks.
  CHECK(kernels::rmsnorm_backward_workspace_floats(37, 1000) == 37u * 1000u);
  CHECK(kernels::rmsnorm_backward_workspace_floats(1024, 8) == 1024u * 8u);
  CHECK(kernels::rmsnorm_backward_workspace_floats(1025, 8) == 513u * 8u);
  CHECK(kernels::rmsnorm_backward_workspace_floats(8192, 4096) == 1024u * 4096u);
  CHECK_THROWS_WITH_AS(static_cast<void>(kernels::rmsnorm_backward_workspace_floats(0, 8)), doctest::Contains("rows"),
                       std::invalid_argument);
}
