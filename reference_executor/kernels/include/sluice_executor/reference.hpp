#pragma once
// Float64 CPU references of the executor's GPU kernels (sluice_executor/kernels.hpp): the same math on
// the same layouts, with no rounding beyond double's. The kernel tests compare the GPU against these,
// and the executor's host backend runs on them.
//
// Layouts match the kernels: the tokens of a micro-batch's sequences are packed back to back, and
// cu_seqlens holds num_seqs + 1 offsets {0, l0, l0 + l1, ...}; activations are row-major
// [tokens, cols]. Matrices that may be columns of a wider buffer (q, k, v of a packed QKV projection,
// and their gradients) take a row stride: row t of q starts at q[t * row_stride], so
// q = qkv, k = qkv.subspan(hidden), v = qkv.subspan(2 * hidden) with row_stride = 3 * hidden.
// Head h occupies columns [h * head_dim, (h + 1) * head_dim) of q, k, v and of the attention output.
//
// Bad arguments raise sluice::invalid_input (a std::invalid_argument) naming the argument.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "sluice/core/error.hpp"

namespace sluice::executor::reference {

// The attention heads of one layer: hidden = num_heads * head_dim.
struct HeadShape {
  int num_heads = 0;
  int head_dim = 0;
};

namespace detail {

using sluice::require;

// Tokens in the packed batch, after checking that cu_seqlens starts at 0 and never decreases.
inline std::size_t packed_tokens(std::span<const std::int32_t> cu_seqlens) {
  require(cu_seqlens.size() >= 2, "cu_seqlens: needs num_seqs + 1 >= 2 offsets, got ", cu_seqlens.size());
  require(cu_seqlens[0] == 0, "cu_seqlens[0]: must be 0, got ", cu_seqlens[0]);
  for (std::size_t s = 1; s < cu_seqlens.size(); ++s) {
    require(cu_seqlens[s] >= cu_seqlens[s - 1], "cu_seqlens[", s, "]: offsets must not decrease, got ", cu_seqlens[s],
            " after ", cu_seqlens[s - 1]);
  }
  return static_cast<std::size_t>(cu_seqlens.back());
}

inline std::size_t positive(long long value, const char* name) {
  require(value > 0, name, ": must be > 0, got ", value);
  return static_cast<std::size_t>(value);
}

// Checks that `rows` rows of `cols` values, `row_stride` apart, fit in `size` values.
inline void require_rows(std::size_t size, std::size_t rows, std::size_t cols, std::size_t row_stride,
                         const char* name) {
  require(row_stride >= cols, name, ": row stride ", row_stride, " is smaller than the row width ", cols);
  require(rows == 0 || (rows - 1) * row_stride + cols <= size, name, ": ", size, " values cannot hold ", rows,
          " rows of ", cols, " at stride ", row_stride);
}

inline void require_size(std::size_t size, std::size_t expected, const char* name) {
  require(size == expected, name, ": expected ", expected, " values, got ", size);
}

inline double dot(const double* a, const double* b, std::size_t count) {
  double sum = 0.0;
  for (std::size_t i = 0; i < count; ++i) sum += a[i] * b[i];
  return sum;
}

inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Rotates every head's pairs (i, i + head_dim / 2) of the first num_heads * head_dim columns of row r by
// sign * positions[r] * theta^(-2i / head_dim).
inline void rope_rotate_at(std::span<const std::int32_t> positions, HeadShape heads, std::span<double> x,
                           std::size_t row_stride, double theta, double sign, const char* name) {
  const std::size_t num_heads = positive(heads.num_heads, "num_heads");
  const std::size_t head_dim = positive(heads.head_dim, "head_dim");
  require(head_dim % 2 == 0, "head_dim: must be even for rotary embedding, got ", head_dim);
  require(theta > 0.0, "theta: must be > 0, got ", theta);
  require_rows(x.size(), positions.size(), num_heads * head_dim, row_stride, name);
  const std::size_t half = head_dim / 2;
  for (std::size_t token = 0; token < positions.size(); ++token) {
    const auto position = static_cast<double>(positions[token]);
    for (std::size_t i = 0; i < half; ++i) {
      const double angle =
          sign * position * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      const double cos_angle = std::cos(angle);
      const double sin_angle = std::sin(angle);
      for (std::size_t h = 0; h < num_heads; ++h) {
        double* head = &x[token * row_stride + h * head_dim];
        const double first = head[i];
        const double second = head[i + half];
        head[i] = first * cos_angle - second * sin_angle;
        head[i + half] = second * cos_angle + first * sin_angle;
      }
    }
  }
}

// Each token's index within its own sequence.
inline std::vector<std::int32_t> sequence_positions(std::span<const std::int32_t> cu_seqlens) {
  std::vector<std::int32_t> positions(packed_tokens(cu_seqlens));
  for (std::size_t s = 0; s + 1 < cu_seqlens.size(); ++s)
    for (std::int32_t token = cu_seqlens[s]; token < cu_seqlens[s + 1]; ++token)
      positions[static_cast<std::size_t>(token)] = token - cu_seqlens[s];
  return positions;
}

struct AttentionSizes {
  std::size_t tokens;
  std::size_t num_heads;
  std::size_t head_dim;
  std::size_t hidden;
};

// The checks attention_forward and attention_backward share: q, k, v rows and the out and lse sizes.
inline AttentionSizes attention_sizes(std::span<const std::int32_t> cu_seqlens, HeadShape heads, std::size_t q_size,
                                      std::size_t k_size, std::size_t v_size, std::size_t qkv_row_stride,
                                      std::size_t out_size, std::size_t lse_size) {
  const std::size_t tokens = packed_tokens(cu_seqlens);
  const std::size_t num_heads = positive(heads.num_heads, "num_heads");
  const std::size_t head_dim = positive(heads.head_dim, "head_dim");
  const std::size_t hidden = num_heads * head_dim;
  require_rows(q_size, tokens, hidden, qkv_row_stride, "q");
  require_rows(k_size, tokens, hidden, qkv_row_stride, "k");
  require_rows(v_size, tokens, hidden, qkv_row_stride, "v");
  require_size(out_size, tokens * hidden, "out");
  require_size(lse_size, num_heads * tokens, "lse");
  return {tokens, num_heads, head_dim, hidden};
}

}  // namespace detail

// Causal attention within each packed sequence, softmax scale 1 / sqrt(head_dim).
// out: [tokens, num_heads * head_dim]; lse: [num_heads, tokens], the natural log-sum-exp of each query's
// scaled scores, which attention_backward needs.
inline void attention_forward(std::span<const std::int32_t> cu_seqlens, HeadShape heads, std::span<const double> q,
                              std::span<const double> k, std::span<const double> v, std::size_t qkv_row_stride,
                              std::span<double> out, std::span<double> lse) {
  const auto [tokens, num_heads, head_dim, hidden] =
      detail::attention_sizes(cu_seqlens, heads, q.size(), k.size(), v.size(), qkv_row_stride, out.size(), lse.size());

  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  std::vector<double> weights;  // one query's scores, then its softmax numerators
  std::vector<double> accumulator(head_dim);
  for (std::size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
    const auto begin = static_cast<std::size_t>(cu_seqlens[s]);
    const auto end = static_cast<std::size_t>(cu_seqlens[s + 1]);
    for (std::size_t h = 0; h < num_heads; ++h) {
      const std::size_t column = h * head_dim;
      for (std::size_t i = begin; i < end; ++i) {
        const double* query = &q[i * qkv_row_stride + column];
        weights.resize(i - begin + 1);
        double max_score = -std::numeric_limits<double>::infinity();
        for (std::size_t j = begin; j <= i; ++j) {
          weights[j - begin] = scale * detail::dot(query, &k[j * qkv_row_stride + column], head_dim);
          max_score = std::max(max_score, weights[j - begin]);
        }
        double sum = 0.0;
        for (double& weight : weights) {
          weight = std::exp(weight - max_score);
          sum += weight;
        }
        std::fill(accumulator.begin(), accumulator.end(), 0.0);
        for (std::size_t j = begin; j <= i; ++j) {
          const double* value = &v[j * qkv_row_stride + column];
          for (std::size_t d = 0; d < head_dim; ++d) accumulator[d] += weights[j - begin] * value[d];
        }
        for (std::size_t d = 0; d < head_dim; ++d) out[i * hidden + column + d] = accumulator[d] / sum;
        lse[h * tokens + i] = max_score + std::log(sum);
      }
    }
  }
}

// Gradients of attention_forward given dout = dL/dout and the forward's out and lse. dq, dk and dv share
// dqkv_row_stride (so they may be the three column ranges of one packed buffer); their first
// num_heads * head_dim columns are overwritten, other columns are left alone.
inline void attention_backward(std::span<const std::int32_t> cu_seqlens, HeadShape heads, std::span<const double> q,
                               std::span<const double> k, std::span<const double> v, std::size_t qkv_row_stride,
                               std::span<const double> out, std::span<const double> dout, std::span<const double> lse,
                               std::span<double> dq, std::span<double> dk, std::span<double> dv,
                               std::size_t dqkv_row_stride) {
  const auto [tokens, num_heads, head_dim, hidden] =
      detail::attention_sizes(cu_seqlens, heads, q.size(), k.size(), v.size(), qkv_row_stride, out.size(), lse.size());
  detail::require_size(dout.size(), tokens * hidden, "dout");
  detail::require_rows(dq.size(), tokens, hidden, dqkv_row_stride, "dq");
  detail::require_rows(dk.size(), tokens, hidden, dqkv_row_stride, "dk");
  detail::require_rows(dv.size(), tokens, hidden, dqkv_row_stride, "dv");

  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::span<double> gradient : {dq, dk, dv}) {
      std::fill_n(gradient.begin() + static_cast<std::ptrdiff_t>(t * dqkv_row_stride), hidden, 0.0);
    }
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  for (std::size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
    const auto begin = static_cast<std::size_t>(cu_seqlens[s]);
    const auto end = static_cast<std::size_t>(cu_seqlens[s + 1]);
    for (std::size_t h = 0; h < num_heads; ++h) {
      const std::size_t column = h * head_dim;
      for (std::size_t i = begin; i < end; ++i) {
        const double* query = &q[i * qkv_row_stride + column];
        const double* dout_row = &dout[i * hidden + column];
        // rowsum(dP ∘ P) = dout_i · out_i: the softmax backward's correction term.
        const double delta = detail::dot(dout_row, &out[i * hidden + column], head_dim);
        const double log_sum = lse[h * tokens + i];
        double* dq_row = &dq[i * dqkv_row_stride + column];
        for (std::size_t j = begin; j <= i; ++j) {
          const double* key = &k[j * qkv_row_stride + column];
          const double probability = std::exp(scale * detail::dot(query, key, head_dim) - log_sum);
          const double dprobability = detail::dot(dout_row, &v[j * qkv_row_stride + column], head_dim);
          const double dscore = probability * (dprobability - delta);
          double* dk_row = &dk[j * dqkv_row_stride + column];
          double* dv_row = &dv[j * dqkv_row_stride + column];
          for (std::size_t d = 0; d < head_dim; ++d) {
            dq_row[d] += scale * dscore * key[d];
            dk_row[d] += scale * dscore * query[d];
            dv_row[d] += probability * dout_row[d];
          }
        }
      }
    }
  }
}

// y = x / sqrt(mean(x^2) + eps) * weight per row; rstd[row] = 1 / sqrt(mean(x^2) + eps).
// x, y: [rows, cols] with rows = rstd.size(), cols = weight.size().
inline void rmsnorm_forward(std::span<const double> x, std::span<const double> weight, double eps, std::span<double> y,
                            std::span<double> rstd) {
  const std::size_t rows = rstd.size();
  const std::size_t cols = weight.size();
  sluice::require(cols > 0, "weight: must not be empty");
  sluice::require(eps >= 0.0, "eps: must be >= 0, got ", eps);
  detail::require_size(x.size(), rows * cols, "x");
  detail::require_size(y.size(), rows * cols, "y");
  for (std::size_t r = 0; r < rows; ++r) {
    const double* row = &x[r * cols];
    const double inverse_rms = 1.0 / std::sqrt(detail::dot(row, row, cols) / static_cast<double>(cols) + eps);
    for (std::size_t c = 0; c < cols; ++c) y[r * cols + c] = row[c] * inverse_rms * weight[c];
    rstd[r] = inverse_rms;
  }
}

// dx = rstd * (dy∘w - x̂ * mean(dy∘w∘x̂)) with x̂ = x * rstd; dweight_accum += Σ_rows dy∘x̂ (added to, so that
// micro-batches accumulate, as the GPU kernel does).
inline void rmsnorm_backward(std::span<const double> x, std::span<const double> weight, std::span<const double> rstd,
                             std::span<const double> dy, std::span<double> dx, std::span<double> dweight_accum) {
  const std::size_t rows = rstd.size();
  const std::size_t cols = weight.size();
  sluice::require(cols > 0, "weight: must not be empty");
  detail::require_size(x.size(), rows * cols, "x");
  detail::require_size(dy.size(), rows * cols, "dy");
  detail::require_size(dx.size(), rows * cols, "dx");
  detail::require_size(dweight_accum.size(), cols, "dweight_accum");
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t offset = r * cols;
    double mean_projection = 0.0;  // mean(dy∘w∘x̂)
    for (std::size_t c = 0; c < cols; ++c) mean_projection += dy[offset + c] * weight[c] * x[offset + c] * rstd[r];
    mean_projection /= static_cast<double>(cols);
    for (std::size_t c = 0; c < cols; ++c) {
      const double normalized = x[offset + c] * rstd[r];
      dx[offset + c] = rstd[r] * (dy[offset + c] * weight[c] - normalized * mean_projection);
      dweight_accum[c] += dy[offset + c] * normalized;
    }
  }
}

// Rotary embedding ("rotate_half", LLaMA): in every head, the pair (x_i, x_{i + head_dim/2}) turns by
// position * theta^(-2i / head_dim), where position restarts at 0 for each packed sequence. In place on
// the first num_heads * head_dim columns of each row of q and of k, which share row_stride.
inline void rope_forward(std::span<const std::int32_t> cu_seqlens, HeadShape heads, std::span<double> q,
                         std::span<double> k, std::size_t row_stride, double theta = 10000.0) {
  const std::vector<std::int32_t> positions = detail::sequence_positions(cu_seqlens);
  detail::rope_rotate_at(positions, heads, q, row_stride, theta, 1.0, "q");
  detail::rope_rotate_at(positions, heads, k, row_stride, theta, 1.0, "k");
}

// Gradient of rope_forward: the rotation is orthogonal, so its transpose is the rotation by the negative angle.
inline void rope_backward(std::span<const std::int32_t> cu_seqlens, HeadShape heads, std::span<double> dq,
                          std::span<double> dk, std::size_t row_stride, double theta = 10000.0) {
  const std::vector<std::int32_t> positions = detail::sequence_positions(cu_seqlens);
  detail::rope_rotate_at(positions, heads, dq, row_stride, theta, -1.0, "dq");
  detail::rope_rotate_at(positions, heads, dk, row_stride, theta, -1.0, "dk");
}

// The same for rows whose positions within their sequences are given (a CP rank's tokens).
inline void rope_forward_at(std::span<const std::int32_t> positions, HeadShape heads, std::span<double> q,
                            std::span<double> k, std::size_t row_stride, double theta) {
  detail::rope_rotate_at(positions, heads, q, row_stride, theta, 1.0, "q");
  detail::rope_rotate_at(positions, heads, k, row_stride, theta, 1.0, "k");
}

inline void rope_backward_at(std::span<const std::int32_t> positions, HeadShape heads, std::span<double> dq,
                             std::span<double> dk, std::size_t row_stride, double theta) {
  detail::rope_rotate_at(positions, heads, dq, row_stride, theta, -1.0, "dq");
  detail::rope_rotate_at(positions, heads, dk, row_stride, theta, -1.0, "dk");
}

// out = silu(gate) * up, where each row of gate_up [rows, 2 * ffn] holds gate then up; out: [rows, ffn].
inline void swiglu_forward(std::span<const double> gate_up, std::size_t ffn, std::span<double> out) {
  sluice::require(ffn > 0, "ffn: must be > 0");
  sluice::require(gate_up.size() % (2 * ffn) == 0, "gate_up: ", gate_up.size(),
                  " values is not a whole number of rows of 2 * ffn = ", 2 * ffn);
  const std::size_t rows = gate_up.size() / (2 * ffn);
  detail::require_size(out.size(), rows * ffn, "out");
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t j = 0; j < ffn; ++j) {
      const double gate = gate_up[r * 2 * ffn + j];
      const double up = gate_up[r * 2 * ffn + ffn + j];
      out[r * ffn + j] = gate * detail::sigmoid(gate) * up;
    }
  }
}

// dgate_up [rows, 2 * ffn] from dout [rows, ffn]: dgate = dout * up * silu'(gate), dup = dout * silu(gate).
inline void swiglu_backward(std::span<const double> gate_up, std::span<const double> dout, std::size_t ffn,
                            std::span<double> dgate_up) {
  sluice::require(ffn > 0, "ffn: must be > 0");
  sluice::require(gate_up.size() % (2 * ffn) == 0, "gate_up: ", gate_up.size(),
                  " values is not a whole number of rows of 2 * ffn = ", 2 * ffn);
  const std::size_t rows = gate_up.size() / (2 * ffn);
  detail::require_size(dout.size(), rows * ffn, "dout");
  detail::require_size(dgate_up.size(), rows * 2 * ffn, "dgate_up");
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t j = 0; j < ffn; ++j) {
      const double gate = gate_up[r * 2 * ffn + j];
      const double up = gate_up[r * 2 * ffn + ffn + j];
      const double sig = detail::sigmoid(gate);
      const double gradient = dout[r * ffn + j];
      dgate_up[r * 2 * ffn + j] = gradient * up * sig * (1.0 + gate * (1.0 - sig));
      dgate_up[r * 2 * ffn + ffn + j] = gradient * gate * sig;
    }
  }
}

// Cross-entropy of logits [rows, vocab] against targets [rows] (-1 = ignored row): row_loss[r] =
// logsumexp(logits_r) - logits_r[target] (0 when ignored), dlogits = (softmax - onehot(target)) * scale
// (0 rows when ignored). Returns the sum of row_loss.
inline double cross_entropy(std::span<const double> logits, std::span<const std::int32_t> targets, std::size_t vocab,
                            double scale, std::span<double> row_loss, std::span<double> dlogits) {
  const std::size_t rows = targets.size();
  sluice::require(vocab > 0, "vocab: must be > 0");
  detail::require_size(logits.size(), rows * vocab, "logits");
  detail::require_size(row_loss.size(), rows, "row_loss");
  detail::require_size(dlogits.size(), rows * vocab, "dlogits");
  double loss_sum = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::int32_t target = targets[r];
    sluice::require(target == -1 || (target >= 0 && static_cast<std::size_t>(target) < vocab), "targets[", r,
                    "]: must be -1 or in [0, ", vocab, "), got ", target);
    const auto row = logits.subspan(r * vocab, vocab);
    const auto gradient = dlogits.subspan(r * vocab, vocab);
    if (target == -1) {
      row_loss[r] = 0.0;
      std::fill(gradient.begin(), gradient.end(), 0.0);
      continue;
    }
    const double max_logit = *std::max_element(row.begin(), row.end());
    double sum = 0.0;
    for (double logit : row) sum += std::exp(logit - max_logit);
    const auto target_index = static_cast<std::size_t>(target);
    row_loss[r] = max_logit + std::log(sum) - row[target_index];
    loss_sum += row_loss[r];
    for (std::size_t c = 0; c < vocab; ++c) gradient[c] = std::exp(row[c] - max_logit) / sum * scale;
    gradient[target_index] -= scale;
  }
  return loss_sum;
}

}  // namespace sluice::executor::reference
