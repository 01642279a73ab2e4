// The executor's row kernels (RMSNorm, RoPE, SwiGLU, the elementwise ones, cross-entropy, the TP reductions and
// row moves) against the float64 CPU references, on random inputs with fixed seeds (kernel_test_support.hpp says
// how the tolerances are set). The cases are the suite "gpu": test_executor_kernels runs them on a CUDA device
// (skipped without one), and test_executor_kernels_emulated runs the same cases on the CPU, every CUDA thread a host
// thread (emulation/cuda_emulation.hpp), so that they also run where there is no GPU.
#include <doctest/doctest.h>

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <vector>

#include "kernel_test_support.hpp"
#include "sluice/core/random.hpp"
#include "sluice_executor/kernels.hpp"
#include "sluice_executor/reference.hpp"

using namespace sluice::executor::kernel_tests;
namespace ref = sluice::executor::reference;

namespace {

// Which of check_rmsnorm's runs to make: every one, or the backward from aligned buffers alone (for many rows, where
// what differs is the backward's chunks of rows; the forward runs a row a block whatever the rows).
enum class NormRuns { all, backward };

// RMSNorm on [rows, cols]: the forward alone and fused with its residual add (which must give add's and the plain
// norm's bits), the backward with and without the gradient around the norm, each from aligned and shifted buffers.
void check_rmsnorm(int rows, int cols, std::uint64_t seed, NormRuns runs = NormRuns::all) {
  CAPTURE(rows);
  CAPTURE(cols);
  sluice::Rng rng(seed);
  const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  const float eps = 1e-5f;
  const Bf16Values x = random_bf16(rng, count);
  const Bf16Values branch = random_bf16(rng, count, 0.5);
  const Bf16Values weight = random_bf16(rng, static_cast<std::size_t>(cols), 0.1, 1.0);
  const Bf16Values dy = random_bf16(rng, count);
  const Bf16Values skip = random_bf16(rng, count);

  std::vector<double> y(count);
  std::vector<double> rstd(static_cast<std::size_t>(rows));
  ref::rmsnorm_forward(x.exact, weight.exact, static_cast<double>(eps), y, rstd);
  constexpr double kEarlier = 0.25;  // the weight gradient is added to what the accumulator holds
  std::vector<double> dx(count);
  std::vector<double> dweight(static_cast<std::size_t>(cols), kEarlier);
  ref::rmsnorm_backward(x.exact, weight.exact, rstd, dy.exact, dx, dweight);

  const DeviceBuffer<bf16> device_x(x.rounded);
  const DeviceBuffer<bf16> device_weight(weight.rounded);
  if (runs == NormRuns::all) {
    DeviceBuffer<bf16> device_y(count);
    DeviceBuffer<float> device_rstd(static_cast<std::size_t>(rows));
    kernels::rmsnorm_forward(device_x.get(), device_weight.get(), rows, cols, eps, device_y.get(), device_rstd.get(),
                             nullptr);
    // y: products only, no cancellation. rstd: fp32 only.
    const std::vector<bf16> y_bits = device_y.download();
    check_within_rounding(to_double(y_bits), y, 0.0);
    CHECK(compare(to_double(device_rstd.download()), rstd).relative_l2 <= 1e-5);
    {
      const DeviceBuffer<bf16> shifted_x = shifted(x.rounded);
      const DeviceBuffer<bf16> shifted_weight = shifted(weight.rounded);
      DeviceBuffer<bf16> shifted_y(count + 1);
      kernels::rmsnorm_forward(shifted_x.get() + 1, shifted_weight.get() + 1, rows, cols, eps, shifted_y.get() + 1,
                               device_rstd.get(), nullptr);
      CHECK(same_bits(download_shifted(shifted_y), y_bits));
    }

    // Fused: sum = x + branch, then the norm of sum, against add and the plain forward.
    const DeviceBuffer<bf16> device_branch(branch.rounded);
    DeviceBuffer<bf16> device_sum(count);
    kernels::add(device_x.get(), device_branch.get(), device_sum.get(), static_cast<std::int64_t>(count), nullptr);
    const std::vector<bf16> sum_bits = device_sum.download();
    kernels::rmsnorm_forward(device_sum.get(), device_weight.get(), rows, cols, eps, device_y.get(), device_rstd.get(),
                             nullptr);
    const std::vector<bf16> norm_of_sum = device_y.download();
    const std::vector<float> rstd_of_sum = device_rstd.download();
    DeviceBuffer<bf16> fused_sum(count);
    kernels::add_rmsnorm_forward(device_x.get(), device_branch.get(), device_weight.get(), rows, cols, eps,
                                 fused_sum.get(), device_y.get(), device_rstd.get(), nullptr);
    CHECK(same_bits(fused_sum.download(), sum_bits));
    CHECK(same_bits(device_y.download(), norm_of_sum));
    CHECK(device_rstd.download() == rstd_of_sum);
    {
      // Shifted, and the sum written over a (in place), as a stage may.
      DeviceBuffer<bf16> shifted_a = shifted(x.rounded);
      const DeviceBuffer<bf16> shifted_branch = shifted(branch.rounded);
      const DeviceBuffer<bf16> shifted_weight = shifted(weight.rounded);
      DeviceBuffer<bf16> shifted_y(count + 1);
      kernels::add_rmsnorm_forward(shifted_a.get() + 1, shifted_branch.get() + 1, shifted_weight.get() + 1, rows, cols,
                                   eps, shifted_a.get() + 1, shifted_y.get() + 1, device_rstd.get(), nullptr);
      CHECK(same_bits(download_shifted(shifted_a), sum_bits));
      CHECK(same_bits(download_shifted(shifted_y), norm_of_sum));
    }
  }

  // The backward gets the reference's rstd, so that it is checked alone.
  const DeviceBuffer<float> reference_rstd(to_float(rstd));
  const DeviceBuffer<bf16> device_dy(dy.rounded);
  const std::vector<float> earlier(static_cast<std::size_t>(cols), static_cast<float>(kEarlier));
  DeviceBuffer<float> workspace(kernels::rmsnorm_backward_workspace_floats(rows, cols));
  const auto backward = [&](const bf16* x_in, const bf16* weight_in, const bf16* dy_in, const bf16* skip_in,
                            bf16* dx_out) {
    DeviceBuffer<float> device_dweight(earlier);
    kernels::rmsnorm_backward(x_in, weight_in, reference_rstd.get(), dy_in, skip_in, rows, cols, dx_out,
                              device_dweight.get(), workspace.get(), nullptr);
    return device_dweight.download();
  };
  DeviceBuffer<bf16> device_dx(count);
  const std::vector<float> dweight_bits =
      backward(device_x.get(), device_weight.get(), device_dy.get(), nullptr, device_dx.get());
  const std::vector<bf16> dx_bits = device_dx.download();
  // dx = rstd (dy∘w - x̂ mean(dy∘w∘x̂)) cancels where the two terms meet: fp32 error there is about
  // 1e-6 of the terms, well inside 1e-4 of the largest dx.
  check_within_rounding(to_double(dx_bits), dx, 1e-4 * max_abs(dx));
  // dweight: fp32 sums of `rows` products in row chunks, no rounding to bf16.
  const Errors dweight_errors = compare(to_double(dweight_bits), dweight);
  CHECK(dweight_errors.max_abs <= 1e-4 * max_abs(dweight));

  // With the gradient around the norm: dx + skip, rounded once; written over skip's buffer, as a stage does.
  std::vector<double> dx_with_skip(count);
  for (std::size_t i = 0; i < count; ++i) dx_with_skip[i] = dx[i] + skip.exact[i];
  DeviceBuffer<bf16> device_skip(skip.rounded);
  CHECK(backward(device_x.get(), device_weight.get(), device_dy.get(), device_skip.get(), device_skip.get()) ==
        dweight_bits);
  const std::vector<bf16> dx_with_skip_bits = device_skip.download();
  check_within_rounding(to_double(dx_with_skip_bits), dx_with_skip, 1e-4 * max_abs(dx));
  if (runs == NormRuns::all) {
    const DeviceBuffer<bf16> shifted_x = shifted(x.rounded);
    const DeviceBuffer<bf16> shifted_weight = shifted(weight.rounded);
    const DeviceBuffer<bf16> shifted_dy = shifted(dy.rounded);
    const DeviceBuffer<bf16> shifted_skip = shifted(skip.rounded);
    DeviceBuffer<bf16> shifted_dx(count + 1);
    CHECK(backward(shifted_x.get() + 1, shifted_weight.get() + 1, shifted_dy.get() + 1, nullptr,
                   shifted_dx.get() + 1) == dweight_bits);
    CHECK(same_bits(download_shifted(shifted_dx), dx_bits));
    CHECK(backward(shifted_x.get() + 1, shifted_weight.get() + 1, shifted_dy.get() + 1, shifted_skip.get() + 1,
                   shifted_dx.get() + 1) == dweight_bits);
    CHECK(same_bits(download_shifted(shifted_dx), dx_with_skip_bits));
  }
}

}  // namespace

TEST_CASE("RMSNorm kernels match the reference, fused with their residual connections" * doctest::test_suite("gpu")) {
  check_rmsnorm(37, 1000, 300);  // a row a chunk; 125 vectors a row, fewer than the block's threads
  check_rmsnorm(37, 1001, 301);  // rows off 16-byte boundaries, one value at a time; a thread's last vector short
  check_rmsnorm(3, 16384, 302);  // 8 vectors a thread; the backward's 64 KB of column sums past the default 48 KB
  // 2 rows a chunk, the last chunk 1 row. The backward alone: the emulation runs a block's 256 threads as host
  // threads, and 1029 blocks of the forward, 5 times, would take it minutes.
  check_rmsnorm(1029, 24, 303, NormRuns::backward);
}

namespace {

// RoPE forward and backward in place on q and k of a packed QKV buffer; the same from the buffer shifted one value
// off its 16-byte boundary must give the same bits.
void check_rope(int num_heads, int head_dim, std::uint64_t seed) {
  CAPTURE(head_dim);
  sluice::Rng rng(seed);
  const Batch batch({7, 0, 300, 1, 64});
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
    (backward ? ref::rope_backward : ref::rope_forward)(batch.cu_seqlens, heads, expected_all,
                                                        expected_all.subspan(hidden), stride, theta);
    const auto rotate = [&](bf16* q) {
      (backward ? kernels::rope_backward : kernels::rope_forward)(batch.varlen, {num_heads, head_dim}, q, q + hidden,
                                                                  static_cast<std::int64_t>(stride), theta, nullptr,
                                                                  nullptr);
    };
    DeviceBuffer<bf16> device_qkv(qkv.rounded);
    rotate(device_qkv.get());
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
    DeviceBuffer<bf16> shifted_qkv = shifted(qkv.rounded);
    rotate(shifted_qkv.get() + 1);
    CHECK(same_bits(download_shifted(shifted_qkv), actual));

    // At given positions (a ring block's rows are no sequence's prefix), up to 100,000.
    std::vector<std::int32_t> positions(tokens);
    for (std::size_t t = 0; t < tokens; ++t) positions[t] = static_cast<std::int32_t>(rng.below(100'000));
    std::vector<double> expected_at = qkv.exact;
    const std::span<double> expected_at_all(expected_at);
    (backward ? ref::rope_backward_at : ref::rope_forward_at)(positions, heads, expected_at_all,
                                                              expected_at_all.subspan(hidden), stride, theta);
    const DeviceBuffer<std::int32_t> device_positions(positions);
    device_qkv.upload(qkv.rounded);
    (backward ? kernels::rope_backward : kernels::rope_forward)(
        batch.varlen, {num_heads, head_dim}, device_qkv.get(), device_qkv.get() + hidden,
        static_cast<std::int64_t>(stride), theta, nullptr, device_positions.get());
    check_within_rounding(to_double(device_qkv.download()), expected_at, 1e-5);
  }
}

}  // namespace

TEST_CASE("RoPE kernels match the reference and leave the v columns alone" * doctest::test_suite("gpu")) {
  check_rope(3, 64, 400);   // 8 values an access: 4 vectors of pairs a head
  check_rope(2, 20, 401);   // 10 pairs a head: one value at a time, the second vector short
  check_rope(1, 256, 402);  // the largest head, 128 angles
}

namespace {

void check_swiglu(int rows, int ffn, std::uint64_t seed) {
  CAPTURE(ffn);
  sluice::Rng rng(seed);
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
  const std::vector<bf16> out_bits = device_out.download();
  const std::vector<bf16> dgate_up_bits = device_dgate_up.download();
  check_within_rounding(to_double(out_bits), out, 0.0);
  check_within_rounding(to_double(dgate_up_bits), dgate_up, 1e-5 * max_abs(dgate_up));

  const DeviceBuffer<bf16> shifted_gate_up = shifted(gate_up.rounded);
  const DeviceBuffer<bf16> shifted_dout = shifted(dout.rounded);
  DeviceBuffer<bf16> shifted_out(count + 1);
  DeviceBuffer<bf16> shifted_dgate_up(2 * count + 1);
  kernels::swiglu_forward(shifted_gate_up.get() + 1, rows, ffn, shifted_out.get() + 1, nullptr);
  kernels::swiglu_backward(shifted_gate_up.get() + 1, shifted_dout.get() + 1, rows, ffn, shifted_dgate_up.get() + 1,
                           nullptr);
  CHECK(same_bits(download_shifted(shifted_out), out_bits));
  CHECK(same_bits(download_shifted(shifted_dgate_up), dgate_up_bits));
}

}  // namespace

TEST_CASE("SwiGLU kernels match the reference" * doctest::test_suite("gpu")) {
  check_swiglu(19, 300, 500);   // rows off 16-byte boundaries: one value at a time
  check_swiglu(19, 1384, 501);  // 8 values an access; 173 vectors a row, more than the block's 128 threads
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
  {
    // One value at a time where the buffers are off 16-byte boundaries: the same bits.
    const DeviceBuffer<bf16> shifted_a = shifted(a.rounded);
    const DeviceBuffer<bf16> shifted_b = shifted(b.rounded);
    DeviceBuffer<bf16> shifted_out(count + 1);
    kernels::add(shifted_a.get() + 1, shifted_b.get() + 1, shifted_out.get() + 1, n, nullptr);
    CHECK(same_bits(download_shifted(shifted_out), sum));
  }

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
  const int vocab = 1000;  // not a multiple of the block's columns
  Bf16Values logits = random_bf16(rng, static_cast<std::size_t>(rows * vocab), 2.0);
  // Row 3 starts with -inf (a masked word): the online normalizer must add nothing for it, nor for one later.
  for (const int column : {0, 1, 2, 500}) {
    logits.rounded[3 * vocab + column] = __float2bfloat16(-INFINITY);
    logits.exact[3 * vocab + column] = -INFINITY;
  }
  std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < targets.size(); ++r) targets[r] = static_cast<std::int32_t>(rng.below(vocab));
  targets[0] = 0;
  targets[1] = vocab - 1;
  targets[2] = -1;
  targets[3] = 7;
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
  const std::vector<float> row_loss_values = device_row_loss.download();
  const Errors loss_errors = compare(to_double(row_loss_values), row_loss);
  CHECK(loss_errors.max_abs <= 1e-4);
  CHECK(static_cast<double>(device_loss_sum.download()[0]) == doctest::Approx(kEarlier + loss_sum).epsilon(1e-5));
  const std::vector<bf16> dlogits_bits = device_dlogits.download();
  check_within_rounding(to_double(dlogits_bits), dlogits, 1e-6 * scale);

  // Unaligned rows (one value at a time) and the gradient written over the logits give the same bits.
  DeviceBuffer<bf16> shifted_logits = shifted(logits.rounded);
  DeviceBuffer<float> loss_again(std::vector<float>{kEarlier});
  kernels::cross_entropy(shifted_logits.get() + 1, device_targets.get(), rows, vocab, static_cast<float>(scale),
                         device_row_loss.get(), shifted_logits.get() + 1, loss_again.get(), nullptr);
  CHECK(same_bits(download_shifted(shifted_logits), dlogits_bits));
  CHECK(device_row_loss.download() == row_loss_values);
  CHECK(loss_again.download() == device_loss_sum.download());
}

namespace {

// Parts of 250 columns move one value at a time, parts of 256 a vector at a time, with the gradient written over
// the logits.
void check_vocab_parallel_cross_entropy(int vocab) {
  CAPTURE(vocab);
  sluice::Rng rng(710);
  const int rows = 13;
  const int parts = 4;
  const int part = vocab / parts;
  const bool in_place = vocab % (parts * 8) == 0;
  Bf16Values logits = random_bf16(rng, static_cast<std::size_t>(rows * vocab), 2.0);
  // Row 4's second part is all -inf: that rank's normalizer adds nothing to the row's sum.
  for (int c = part; c < 2 * part; ++c) {
    logits.rounded[static_cast<std::size_t>(4 * vocab + c)] = __float2bfloat16(-INFINITY);
    logits.exact[static_cast<std::size_t>(4 * vocab + c)] = -INFINITY;
  }
  std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < targets.size(); ++r) targets[r] = static_cast<std::int32_t>(rng.below(vocab));
  targets[0] = 0;
  targets[1] = vocab - 1;
  targets[2] = part;  // the first column of the second part
  targets[4] = 3 * part;
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
  std::vector<std::unique_ptr<DeviceBuffer<float>>> local;
  for (int p = 0; p < parts; ++p) {
    local.push_back(std::make_unique<DeviceBuffer<float>>(2 * static_cast<std::size_t>(rows)));
    DeviceBuffer<float> part_max(static_cast<std::size_t>(rows));
    kernels::vocab_parallel_normalizer(device_logits[static_cast<std::size_t>(p)]->get(), rows, part,
                                       local.back()->get(), part_max.get(), nullptr);
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
                                 p * part, local[static_cast<std::size_t>(p)]->get(), device_max.get(), part_sums.get(),
                                 nullptr);
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
                                 own_end, part_row_loss.get(),
                                 in_place ? device_logits[static_cast<std::size_t>(p)]->get() : part_dlogits.get(),
                                 part_loss_sum.get(), nullptr);
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
    check_within_rounding(
        to_double(in_place ? device_logits[static_cast<std::size_t>(p)]->download() : part_dlogits.download()),
        expected, 1e-6 * scale);
  }
  CHECK(device_loss_sum == doctest::Approx(loss_sum).epsilon(1e-5));
}

}  // namespace

TEST_CASE("vocab-parallel cross-entropy over four parts matches the reference" * doctest::test_suite("gpu")) {
  check_vocab_parallel_cross_entropy(1000);
  check_vocab_parallel_cross_entropy(1024);
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
