// The float64 CPU references of the executor kernels: hand-checked values, and every backward against
// central finite differences of its forward (in double, step 1e-6: truncation ~1e-12, cancellation ~1e-10).
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numbers>
#include <span>
#include <vector>

#include "sluice/core/random.hpp"
#include "sluice_executor/reference.hpp"

namespace ref = sluice::executor::reference;

namespace {

std::vector<double> random_normal(sluice::Rng& rng, std::size_t count, double scale = 1.0) {
  std::vector<double> values(count);
  for (double& value : values) value = scale * rng.normal();
  return values;
}

double weighted_sum(std::span<const double> values, std::span<const double> weights) {
  double sum = 0.0;
  for (std::size_t i = 0; i < values.size(); ++i) sum += values[i] * weights[i];
  return sum;
}

// d loss / d x[i] by central differences; `loss` reads x.
double numerical_derivative(const std::function<double()>& loss, std::vector<double>& x, std::size_t i) {
  constexpr double kStep = 1e-6;
  const double saved = x[i];
  x[i] = saved + kStep;
  const double plus = loss();
  x[i] = saved - kStep;
  const double minus = loss();
  x[i] = saved;
  return (plus - minus) / (2 * kStep);
}

// Checks every entry of `analytic` against the numerical derivative of `loss` with respect to x.
void check_gradient(const std::function<double()>& loss, std::vector<double>& x, std::span<const double> analytic) {
  REQUIRE(analytic.size() == x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i);
    CHECK(analytic[i] == doctest::Approx(numerical_derivative(loss, x, i)).epsilon(1e-6));
  }
}

}  // namespace

TEST_CASE("reference attention: hand-checked two-token sequence, read through a row stride") {
  // One head of dimension 2; rows hold q | k | v (stride 6). Scale 1/sqrt(2).
  const std::vector<std::int32_t> cu_seqlens{0, 2};
  const std::vector<double> qkv{
      1, 0, 1, 0, 1, 2,  // token 0: q0 = (1, 0), k0 = (1, 0), v0 = (1, 2)
      0, 1, 0, 2, 3, 4,  // token 1: q1 = (0, 1), k1 = (0, 2), v1 = (3, 4)
  };
  const std::span<const double> all(qkv);
  std::vector<double> out(4);
  std::vector<double> lse(2);
  ref::attention_forward(cu_seqlens, {1, 2}, all, all.subspan(2), all.subspan(4), 6, out, lse);

  // Token 0 sees only itself.
  CHECK(out[0] == doctest::Approx(1.0));
  CHECK(out[1] == doctest::Approx(2.0));
  CHECK(lse[0] == doctest::Approx(1.0 / std::numbers::sqrt2));
  // Token 1: scores (0, 2/sqrt(2)) -> weights (1 - p, p) with p = e^√2 / (1 + e^√2).
  const double p = std::exp(std::numbers::sqrt2) / (1.0 + std::exp(std::numbers::sqrt2));
  CHECK(out[2] == doctest::Approx((1 - p) * 1 + p * 3));
  CHECK(out[3] == doctest::Approx((1 - p) * 2 + p * 4));
  CHECK(lse[1] == doctest::Approx(std::log(1.0 + std::exp(std::numbers::sqrt2))));
}

TEST_CASE("reference attention: packed sequences do not see each other") {
  sluice::Rng rng(7);
  const ref::HeadShape heads{2, 4};
  const std::size_t hidden = 8;
  const std::vector<double> first = random_normal(rng, 3 * 3 * hidden);   // 3 tokens of q | k | v
  const std::vector<double> second = random_normal(rng, 2 * 3 * hidden);  // 2 tokens
  std::vector<double> packed = first;
  packed.insert(packed.end(), second.begin(), second.end());

  auto run = [&](const std::vector<std::int32_t>& cu_seqlens, std::span<const double> qkv) {
    const auto tokens = static_cast<std::size_t>(cu_seqlens.back());
    std::vector<double> out(tokens * hidden);
    std::vector<double> lse(2 * tokens);
    ref::attention_forward(cu_seqlens, heads, qkv, qkv.subspan(hidden), qkv.subspan(2 * hidden), 3 * hidden, out, lse);
    return out;
  };
  const std::vector<double> together = run({0, 3, 5}, packed);
  const std::vector<double> alone_first = run({0, 3}, first);
  const std::vector<double> alone_second = run({0, 2}, second);
  for (std::size_t i = 0; i < alone_first.size(); ++i) CHECK(together[i] == doctest::Approx(alone_first[i]));
  for (std::size_t i = 0; i < alone_second.size(); ++i) {
    CHECK(together[alone_first.size() + i] == doctest::Approx(alone_second[i]));
  }
  // A sequence's first token attends only itself: its output is its own v.
  for (std::size_t d = 0; d < hidden; ++d) CHECK(together[3 * hidden + d] == doctest::Approx(second[2 * hidden + d]));
}

TEST_CASE("reference attention backward matches finite differences of the forward") {
  sluice::Rng rng(11);
  const std::vector<std::int32_t> cu_seqlens{0, 3, 4, 9};  // lengths 3, 1, 5
  const ref::HeadShape heads{2, 4};
  const std::size_t tokens = 9;
  const std::size_t hidden = 8;
  const std::size_t stride = 3 * hidden + 2;  // two unused columns per row
  std::vector<double> qkv = random_normal(rng, tokens * stride);
  const std::vector<double> dout = random_normal(rng, tokens * hidden);

  auto forward = [&](std::vector<double>& out, std::vector<double>& lse) {
    const std::span<const double> all(qkv);
    ref::attention_forward(cu_seqlens, heads, all, all.subspan(hidden), all.subspan(2 * hidden), stride, out, lse);
  };
  std::vector<double> out(tokens * hidden);
  std::vector<double> lse(2 * tokens);
  forward(out, lse);

  constexpr double kUntouched = 42.0;
  std::vector<double> dqkv(tokens * stride, kUntouched);
  const std::span<const double> all(qkv);
  const std::span<double> gradient(dqkv);
  ref::attention_backward(cu_seqlens, heads, all, all.subspan(hidden), all.subspan(2 * hidden), stride, out, dout, lse,
                          gradient, gradient.subspan(hidden), gradient.subspan(2 * hidden), stride);

  // L = Σ out ∘ dout, so dL/dqkv is what the backward returns for dout.
  const auto loss = [&] {
    std::vector<double> current_out(tokens * hidden);
    std::vector<double> current_lse(2 * tokens);
    forward(current_out, current_lse);
    return weighted_sum(current_out, dout);
  };
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t c = 0; c < stride; ++c) {
      CAPTURE(t);
      CAPTURE(c);
      const std::size_t i = t * stride + c;
      if (c >= 3 * hidden) {
        CHECK(dqkv[i] == kUntouched);
      } else {
        CHECK(dqkv[i] == doctest::Approx(numerical_derivative(loss, qkv, i)).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("reference RMSNorm: hand-checked row and finite differences") {
  std::vector<double> y(2);
  std::vector<double> rstd(1);
  ref::rmsnorm_forward(std::vector<double>{3, 4}, std::vector<double>{1, 2}, 0.0, y, rstd);
  // mean(x^2) = 12.5
  CHECK(rstd[0] == doctest::Approx(1.0 / std::sqrt(12.5)));
  CHECK(y[0] == doctest::Approx(3.0 / std::sqrt(12.5)));
  CHECK(y[1] == doctest::Approx(8.0 / std::sqrt(12.5)));

  sluice::Rng rng(3);
  const std::size_t rows = 3;
  const std::size_t cols = 5;
  const double eps = 1e-5;
  std::vector<double> x = random_normal(rng, rows * cols);
  std::vector<double> weight = random_normal(rng, cols);
  const std::vector<double> dy = random_normal(rng, rows * cols);
  const auto loss = [&] {
    std::vector<double> out(rows * cols);
    std::vector<double> inverse_rms(rows);
    ref::rmsnorm_forward(x, weight, eps, out, inverse_rms);
    return weighted_sum(out, dy);
  };
  std::vector<double> out(rows * cols);
  std::vector<double> inverse_rms(rows);
  ref::rmsnorm_forward(x, weight, eps, out, inverse_rms);
  std::vector<double> dx(rows * cols);
  constexpr double kEarlier = 0.5;  // the weight gradient is added to what is there
  std::vector<double> dweight(cols, kEarlier);
  ref::rmsnorm_backward(x, weight, inverse_rms, dy, dx, dweight);
  check_gradient(loss, x, dx);
  for (double& value : dweight) value -= kEarlier;
  check_gradient(loss, weight, dweight);
}

TEST_CASE("reference RoPE: hand-checked rotations; positions restart per sequence") {
  // One head of dimension 2 (angle = position), sequences of 1 and 2 tokens; q | k per row.
  const std::vector<std::int32_t> cu_seqlens{0, 1, 3};
  std::vector<double> qk{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4};
  const std::span<double> all(qk);
  ref::rope_forward(cu_seqlens, {1, 2}, all, all.subspan(2), 4);
  const std::vector<double> unrotated{1, 2, 3, 4};
  for (std::size_t i = 0; i < 8; ++i) CHECK(qk[i] == doctest::Approx(unrotated[i % 4]));  // positions 0 and 0
  // Token 2 is at position 1: (x1, x2) -> (x1 cos 1 - x2 sin 1, x2 cos 1 + x1 sin 1).
  CHECK(qk[8] == doctest::Approx(std::cos(1.0) - 2 * std::sin(1.0)));
  CHECK(qk[9] == doctest::Approx(2 * std::cos(1.0) + std::sin(1.0)));
  CHECK(qk[10] == doctest::Approx(3 * std::cos(1.0) - 4 * std::sin(1.0)));
  CHECK(qk[11] == doctest::Approx(4 * std::cos(1.0) + 3 * std::sin(1.0)));

  // Head dimension 4: the second pair turns by position * theta^(-1/2).
  std::vector<double> wide{0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0};  // two tokens of q | k
  const std::span<double> wide_all(wide);
  ref::rope_forward(std::vector<std::int32_t>{0, 2}, {1, 4}, wide_all, wide_all.subspan(4), 8, 100.0);
  CHECK(wide[8] == 0.0);
  CHECK(wide[9] == doctest::Approx(std::cos(0.1)));
  CHECK(wide[10] == 0.0);
  CHECK(wide[11] == doctest::Approx(std::sin(0.1)));
}

TEST_CASE("reference RoPE backward matches finite differences") {
  sluice::Rng rng(5);
  const std::vector<std::int32_t> cu_seqlens{0, 4, 5, 11};  // lengths 4, 1, 6
  const ref::HeadShape heads{2, 6};
  const std::size_t stride = 30;  // q at column 0, k at column 12, 6 other columns
  std::vector<double> x = random_normal(rng, 11 * stride);
  const std::vector<double> upstream = random_normal(rng, 11 * stride);
  const auto loss = [&] {
    std::vector<double> rotated = x;
    const std::span<double> rotated_all(rotated);
    ref::rope_forward(cu_seqlens, heads, rotated_all, rotated_all.subspan(12), stride, 10.0);
    return weighted_sum(rotated, upstream);
  };
  std::vector<double> gradient = upstream;
  const std::span<double> gradient_all(gradient);
  ref::rope_backward(cu_seqlens, heads, gradient_all, gradient_all.subspan(12), stride, 10.0);
  check_gradient(loss, x, gradient);  // untouched columns pass the upstream gradient through
}

TEST_CASE("reference SwiGLU: hand-checked values and finite differences") {
  std::vector<double> out(2);
  ref::swiglu_forward(std::vector<double>{0, 1, 5, 2}, 2, out);  // gate (0, 1), up (5, 2)
  CHECK(out[0] == 0.0);
  CHECK(out[1] == doctest::Approx(2.0 / (1.0 + std::exp(-1.0))));

  sluice::Rng rng(9);
  const std::size_t rows = 3;
  const std::size_t ffn = 4;
  std::vector<double> gate_up = random_normal(rng, rows * 2 * ffn, 2.0);
  const std::vector<double> dout = random_normal(rng, rows * ffn);
  const auto loss = [&] {
    std::vector<double> current(rows * ffn);
    ref::swiglu_forward(gate_up, ffn, current);
    return weighted_sum(current, dout);
  };
  std::vector<double> dgate_up(rows * 2 * ffn);
  ref::swiglu_backward(gate_up, dout, ffn, dgate_up);
  check_gradient(loss, gate_up, dgate_up);
}

TEST_CASE("reference cross-entropy: uniform logits, ignored rows, finite differences") {
  const std::vector<double> uniform(8, 0.0);
  std::vector<double> row_loss(2);
  std::vector<double> dlogits(8);
  const double sum = ref::cross_entropy(uniform, std::vector<std::int32_t>{2, -1}, 4, 0.5, row_loss, dlogits);
  CHECK(row_loss[0] == doctest::Approx(std::log(4.0)));
  CHECK(row_loss[1] == 0.0);
  CHECK(sum == doctest::Approx(std::log(4.0)));
  const std::vector<double> expected{0.125, 0.125, 0.125 - 0.5, 0.125, 0, 0, 0, 0};
  for (std::size_t i = 0; i < 8; ++i) CHECK(dlogits[i] == doctest::Approx(expected[i]));

  sluice::Rng rng(13);
  const std::size_t vocab = 7;
  const std::vector<std::int32_t> targets{3, -1, 0, 6};
  const double scale = 1.0 / 3.0;  // three counted targets
  std::vector<double> logits = random_normal(rng, targets.size() * vocab, 3.0);
  std::vector<double> losses(targets.size());
  std::vector<double> gradient(logits.size());
  ref::cross_entropy(logits, targets, vocab, scale, losses, gradient);
  const auto loss = [&] {
    std::vector<double> current_losses(targets.size());
    std::vector<double> current_gradient(logits.size());
    return scale * ref::cross_entropy(logits, targets, vocab, scale, current_losses, current_gradient);
  };
  check_gradient(loss, logits, gradient);
}

TEST_CASE("reference: bad arguments are named") {
  std::vector<double> out(4);
  std::vector<double> lse(2);
  const std::vector<double> qkv(12);
  CHECK_THROWS_WITH_AS(ref::attention_forward(std::vector<std::int32_t>{1, 2}, {1, 2}, qkv, qkv, qkv, 6, out, lse),
                       doctest::Contains("cu_seqlens[0]"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(ref::attention_forward(std::vector<std::int32_t>{0, 2, 1}, {1, 2}, qkv, qkv, qkv, 6, out, lse),
                       doctest::Contains("cu_seqlens[2]"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(ref::attention_forward(std::vector<std::int32_t>{0, 3}, {1, 2}, qkv, qkv, qkv, 6, out, lse),
                       doctest::Contains("q:"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(ref::attention_forward(std::vector<std::int32_t>{0, 2}, {0, 2}, qkv, qkv, qkv, 6, out, lse),
                       doctest::Contains("num_heads"), std::invalid_argument);
  std::vector<double> y(3);
  std::vector<double> rstd(1);
  CHECK_THROWS_WITH_AS(ref::rmsnorm_forward(std::vector<double>{1, 2}, std::vector<double>{1, 1}, 0.0, y, rstd),
                       doctest::Contains("y:"), std::invalid_argument);
  std::vector<double> loss(1);
  std::vector<double> dlogits(2);
  CHECK_THROWS_WITH_AS(
      ref::cross_entropy(std::vector<double>{0, 0}, std::vector<std::int32_t>{2}, 2, 1.0, loss, dlogits),
      doctest::Contains("targets[0]"), std::invalid_argument);
  std::vector<double> odd(3);
  CHECK_THROWS_WITH_AS(ref::rope_forward(std::vector<std::int32_t>{0, 1}, {1, 3}, odd, odd, 3),
                       doctest::Contains("even"), std::invalid_argument);
}
