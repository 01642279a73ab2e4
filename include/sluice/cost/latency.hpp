#pragma once
// Quadratic latency model (Hydraulis App. B.2): the forward+backward time of one sequence of length l
// on one pipeline stage is T(l) = a·l² + b·l + c seconds. The quadratic term is attention, the linear
// term the rest of the compute and the activation communication, the constant per-launch overhead.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "sluice/core/error.hpp"

namespace sluice::cost {

class QuadraticLatency {
public:
  QuadraticLatency() = default;
  QuadraticLatency(double a, double b, double c) : a_(a), b_(b), c_(c) {
    sluice::require(std::isfinite(a) && a >= 0, "latency: coefficient a must be finite and >= 0, got ", a);
    sluice::require(std::isfinite(b) && b >= 0, "latency: coefficient b must be finite and >= 0, got ", b);
    sluice::require(std::isfinite(c) && c >= 0, "latency: coefficient c must be finite and >= 0, got ", c);
  }

  [[nodiscard]] double a() const noexcept { return a_; }
  [[nodiscard]] double b() const noexcept { return b_; }
  [[nodiscard]] double c() const noexcept { return c_; }

  // a·l² + b·l: a sequence's share of a packed micro-batch. Packing with FlashAttention's varlen kernels
  // makes attention cost Σ lᵢ², not (Σ lᵢ)², so a packed micro-batch costs Σ (a·lᵢ² + b·lᵢ) ...
  [[nodiscard]] double sequence_time(std::int64_t length) const noexcept {
    const auto l = static_cast<double>(length);
    return (a_ * l + b_) * l;
  }
  // ... plus c once per micro-batch (launch overhead is paid per kernel, not per packed sequence).
  [[nodiscard]] double microbatch_overhead() const noexcept { return c_; }

  // T(l): one sequence run alone as a micro-batch.
  [[nodiscard]] double operator()(std::int64_t length) const noexcept { return sequence_time(length) + c_; }

  // Lengths: any range of integers, such as a vector or a Span.
  template <class Lengths>
  [[nodiscard]] double microbatch_time(const Lengths& lengths) const {
    double total = c_;
    for (const auto length : lengths) total += sequence_time(static_cast<std::int64_t>(length));
    return total;
  }

  // UtilLen: the shortest length whose kernel efficiency b·l / (b·l + c) reaches `threshold` of its
  // asymptote (the share of time not lost to fixed overhead). Attention's a·l² is real work, not
  // inefficiency, so it is left out; with it, throughput would have no asymptote.
  [[nodiscard]] std::int64_t util_len(double threshold = 0.85) const {
    sluice::require(std::isfinite(threshold) && threshold > 0 && threshold < 1,
                    "latency: UtilLen threshold must be in (0, 1), got ", threshold);
    if (c_ == 0) return 1;
    sluice::require(b_ > 0, "latency: UtilLen is undefined when b = 0 and c > 0 (no per-token asymptote)");
    const double length = threshold * c_ / ((1 - threshold) * b_);
    sluice::require(length < 0x1p62, "latency: UtilLen overflows (c / b too large)");
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(length)));
  }

  friend bool operator==(const QuadraticLatency&, const QuadraticLatency&) = default;

private:
  double a_ = 0;
  double b_ = 0;
  double c_ = 0;
};

// The last pipeline stage's work beyond any other stage's (the final norm, the LM head and the loss over the
// vocabulary): b·tokens + c seconds per micro-batch, forward + backward. A profile's T(l) is the last stage's, whose
// work sets a 1F1B iteration (DynaPipe, EuroSys'24, §4); a pipeline's other stages run T less this. Linear in the
// tokens: the head is a GEMM over the micro-batch's tokens, with no attention. Zero (the default) prices every
// stage alike.
class LastStageWork {
public:
  LastStageWork() = default;
  LastStageWork(double b, double c) : b_(b), c_(c) {
    sluice::require(std::isfinite(b) && b >= 0, "last stage work: coefficient b must be finite and >= 0, got ", b);
    sluice::require(std::isfinite(c) && c >= 0, "last stage work: coefficient c must be finite and >= 0, got ", c);
  }

  [[nodiscard]] double b() const noexcept { return b_; }
  [[nodiscard]] double c() const noexcept { return c_; }
  [[nodiscard]] bool is_zero() const noexcept { return b_ == 0 && c_ == 0; }
  [[nodiscard]] double seconds(std::int64_t tokens) const noexcept { return b_ * static_cast<double>(tokens) + c_; }

  friend bool operator==(const LastStageWork&, const LastStageWork&) = default;

private:
  double b_ = 0;
  double c_ = 0;
};

// A measured micro-batch of `sequences` packed sequences of `length` tokens each and its seconds, and the fit made
// from such samples (cost/fit.hpp). They live here, not beside the fit, so that reading and writing them needs no
// Eigen. A packed sample's tokens grow while its attention does not, which tells a·l² and b·l apart where single
// sequences, with a large c, leave them confounded.
struct LatencySample {
  std::int64_t length = 0;
  double seconds = 0;
  std::int64_t sequences = 1;
};

// The latency a model predicts for a sample's micro-batch: Σ (a·lᵢ² + b·lᵢ) + c over its packed sequences.
inline double predicted_seconds(const QuadraticLatency& model, const LatencySample& sample) {
  return static_cast<double>(sample.sequences) * model.sequence_time(sample.length) + model.microbatch_overhead();
}

struct FitResult {
  QuadraticLatency model;
  double relative_rms_error = 0;  // sqrt(mean(((predicted - t) / t)²)) over the samples
  std::size_t samples = 0;
};

}  // namespace sluice::cost
