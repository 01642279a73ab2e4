#pragma once
// One lane of a pipeline stage in float64: the lane's TP shard of the stage's parameters (shards.hpp) and their
// gradients, and its forward and backward of a micro-batch with the TP and CP collectives inside them (exchange.hpp).
// With TP, Megatron-LM's tensor parallelism with sequence parallelism: between layers a lane holds its TP rank's rows
// of its CP rank's tokens; an all-gather brings the CP rank's tokens before each column-parallel projection and a
// reduce-scatter sums the row-parallel one's partial products back to the rows (Korthikanti et al., §4.2.2); the
// vocab-parallel embedding reduce-scatters its lookups, the vocab-parallel cross-entropy all-reduces each row's
// maximum, exp-sum and target logit (the full logits are never gathered). With CP, attention by the micro-batch's
// split: Ulysses' all-to-alls turn "this rank's tokens × the TP rank's heads" into "the ring rank's tokens × 1/U of
// them" and back (Jacobs et al., arXiv 2309.14509, §3), and ring attention passes K and V around the ring ranks,
// merging the blocks' results through their log-sum-exp, and in the backward passes them again with their dK and
// dV partial sums, which end on the ring rank that holds them (Liu et al., arXiv 2310.01889). Full recompute keeps a
// layer's input alone and recomputes the layer, collectives included, in the backward.
//
// A lane with CP 1 runs attention by the kernels' CPU reference (reference.hpp), so that the block arithmetic of
// CP is checked against an independent computation.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice_executor/host/exchange.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/reference.hpp"
#include "sluice_executor/shards.hpp"

namespace sluice::executor::host {

// Deliberate defects the tests inject to show that their equality checks catch broken TP, CP and recompute code.
enum class Mutation : std::uint8_t {
  none,
  missing_tp_reduce,         // the attention output projection's partial products are not summed over TP
  wrong_ring_step,           // the last ring step computes with the block of the step before
  cp_chunk_on_wrong_rank,    // a CP rank embeds the next CP rank's tokens
  recompute_drops_residual,  // recomputation forgets the attention branch's residual
};

namespace detail {

// c[m×n] = a[m×k] · b[k×n], row-major.
inline void matmul(std::span<const double> a, std::span<const double> b, std::span<double> c, std::size_t m,
                   std::size_t k, std::size_t n) {
  std::fill(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(m * n), 0.0);
  for (std::size_t i = 0; i < m; ++i) {
    double* row = &c[i * n];
    for (std::size_t p = 0; p < k; ++p) {
      const double x = a[i * k + p];
      const double* b_row = &b[p * n];
      for (std::size_t j = 0; j < n; ++j) row[j] += x * b_row[j];
    }
  }
}

// c[m×k] = a[m×n] · bᵀ where b is [k×n]: the input gradient dY · Wᵀ. b is transposed first so that the inner loop
// runs along rows (a dot-product inner loop would be a serial reduction).
inline void matmul_transposed(std::span<const double> a, std::span<const double> b, std::span<double> c, std::size_t m,
                              std::size_t n, std::size_t k) {
  std::vector<double> transposed(n * k);
  for (std::size_t p = 0; p < k; ++p)
    for (std::size_t j = 0; j < n; ++j) transposed[j * k + p] = b[p * n + j];
  matmul(a, transposed, c, m, n, k);
}

// c[k×n] += aᵀ · b where a is [m×k] and b is [m×n]: the weight gradient Xᵀ · dY, accumulated.
inline void accumulate_transposed(std::span<const double> a, std::span<const double> b, std::span<double> c,
                                  std::size_t m, std::size_t k, std::size_t n) {
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t i = 0; i < k; ++i) {
      const double x = a[r * k + i];
      const double* b_row = &b[r * n];
      double* c_row = &c[i * n];
      for (std::size_t j = 0; j < n; ++j) c_row[j] += x * b_row[j];
    }
}

inline void add(std::span<const double> a, std::span<const double> b, std::span<double> out) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = a[i] + b[i];
}

// Columns [first, first + count) of every row of a [rows, cols] matrix.
inline std::vector<double> columns(std::span<const double> x, std::size_t rows, std::size_t cols, std::size_t first,
                                   std::size_t count) {
  std::vector<double> result(rows * count);
  for (std::size_t r = 0; r < rows; ++r) std::copy_n(&x[r * cols + first], count, &result[r * count]);
  return result;
}

inline void set_columns(std::span<double> x, std::size_t rows, std::size_t cols, std::size_t first,
                        std::span<const double> values, std::size_t count) {
  for (std::size_t r = 0; r < rows; ++r) std::copy_n(&values[r * count], count, &x[r * cols + first]);
}

}  // namespace detail

// What one lane computes with for one micro-batch: the packed micro-batch, its CP split and this lane's CP rank, and
// the groups of its Ulysses rank and ring rank (their sizes the split's degrees).
struct LaneBatch {
  const PackedMicroBatch* packed = nullptr;
  const CpSplit* split = nullptr;
  int cp_rank = 0;
  Group ulysses{};
  Group ring{};
  [[nodiscard]] const CpShard& shard() const { return split->shards[static_cast<std::size_t>(cp_rank)]; }
  [[nodiscard]] int ring_rank() const { return cp_rank / split->ulysses; }
  [[nodiscard]] int ulysses_rank() const { return cp_rank % split->ulysses; }
};

// The lane's forward of a micro-batch's attention, which its backward needs: with CP, q, k and v of the ring rank's
// tokens and this Ulysses rank's heads, in the ring rank's block order, with the output and log-sum-exp there.
struct AttentionActivations {
  std::vector<double> q, k, v, out, lse;
};

// What one layer's backward needs from its forward (only `input` with full recompute).
struct LayerActivations {
  std::vector<double> input, rstd1, normed1, qkv, attention, middle, rstd2, normed2, gate_up, swiglu;
  AttentionActivations cp;
  [[nodiscard]] std::size_t values() const {
    std::size_t total = cp.q.size() + cp.k.size() + cp.v.size() + cp.out.size() + cp.lse.size();
    for (const std::vector<double>* x :
         {&input, &rstd1, &normed1, &qkv, &attention, &middle, &rstd2, &normed2, &gate_up, &swiglu})
      total += x->size();
    return total;
  }
};

// What a stage's backward needs from its forward.
struct StageActivations {
  std::vector<std::int32_t> ids;  // first stage: the CP rank's token ids
  std::vector<LayerActivations> layers;
  std::vector<double> head_input, head_rstd, head_normed, dlogits;  // last stage
  [[nodiscard]] std::size_t values() const {
    std::size_t total = ids.size() + head_input.size() + head_rstd.size() + head_normed.size() + dlogits.size();
    for (const LayerActivations& layer : layers) total += layer.values();
    return total;
  }
};

// Where a lane sits: layers [first_layer, end_layer), with the embedding when `first` and the head when `last`, TP
// rank tp_rank of tp, and whether it recomputes.
struct LaneSpec {
  int first_layer = 0;
  int end_layer = 0;
  bool first = false;
  bool last = false;
  int tp = 1;
  int tp_rank = 0;
  Recompute recompute = Recompute::none;
  Mutation mutation = Mutation::none;
};

class Stage {
public:
  // Where a lane's parameters come from: every tensor of the model in canonical order, full (the lane keeps its TP
  // shard of those it holds), or the lane's shards already (empty outside the tensors it holds).
  enum class Given : std::uint8_t { full, shards };

  // `parameters`: as `given` says, or empty for the initial values. `tp_group`: the TP group (default: TP 1);
  // `collectives` moves data in it and in the CP groups of each micro-batch.
  Stage(const ModelConfig& model, LaneSpec spec, Group tp_group, Collectives collectives,
        std::span<const std::vector<double>> parameters = {}, Given given = Given::full)
      : model_(model),
        spec_(spec),
        tensors_(stage_tensors(model, spec.first_layer, spec.end_layer, spec.first, spec.last)),
        tp_group_(tp_group),
        collectives_(collectives) {
    require_valid(model);
    require_tp(model, spec.tp);
    sluice::require(spec.first_layer >= 0 && spec.first_layer <= spec.end_layer && spec.end_layer <= model.layers,
                    "stage: layers [", spec.first_layer, ", ", spec.end_layer, ") outside [0, ", model.layers, "]");
    sluice::require(spec.tp_rank >= 0 && spec.tp_rank < spec.tp && tp_group.size() == spec.tp, "stage: TP rank ",
                    spec.tp_rank, " of ", spec.tp, " in a group of ", tp_group.size());
    const std::vector<ParameterTensor> shapes = parameter_tensors(model);
    sluice::require(parameters.empty() || parameters.size() == shapes.size(), "stage: ", parameters.size(),
                    " parameter tensors given, the model has ", shapes.size());
    parameters_.resize(shapes.size());
    gradients_.resize(shapes.size());
    for (std::size_t t = tensors_.begin; t < tensors_.end; ++t) {
      if (given == Given::shards && !parameters.empty()) {
        const auto [rows, cols] = shard_shape(shapes[t], spec.tp);
        sluice::require(parameters[t].size() == static_cast<std::size_t>(rows * cols), "stage: the shard of tensor ",
                        shapes[t].name(), " has ", parameters[t].size(), " values, expected ", rows * cols);
        parameters_[t] = parameters[t];
      } else if (parameters.empty()) {
        parameters_[t] = initial_shard(model, t, spec.tp, spec.tp_rank);
      } else {
        sluice::require(parameters[t].size() == shapes[t].size(), "stage: tensor ", shapes[t].name(), " has ",
                        parameters[t].size(), " values, expected ", shapes[t].size());
        parameters_[t] = shard_of(shapes[t], parameters[t], spec.tp, spec.tp_rank);
      }
      gradients_[t].assign(parameters_[t].size(), 0.0);
    }
  }

  [[nodiscard]] TensorRange tensors() const noexcept { return tensors_; }
  [[nodiscard]] const LaneSpec& spec() const noexcept { return spec_; }
  // The lane's TP shard of each tensor's gradient (shards.hpp), indexed by canonical tensor; empty outside tensors().
  [[nodiscard]] const std::vector<std::vector<double>>& gradients() const noexcept { return gradients_; }

  // input: on a first stage the CP rank's token ids (as exact doubles), else the lane's rows of the hidden states
  // [rows, hidden]. Writes the lane's rows for the next stage into `output`, or on a last stage returns the sum of
  // the cross-entropies of the lane's rows (dlogits scaled by loss_scale are kept for the backward).
  double forward(const LaneBatch& batch, std::span<const double> input, std::span<double> output, double loss_scale,
                 StageActivations& saved) const {
    const std::size_t h = hidden();
    std::vector<double> x;
    if (spec_.first) {
      x = embed(batch, input, saved);
    } else {
      x.assign(input.begin(), input.begin() + static_cast<std::ptrdiff_t>(lane_rows(batch) * h));
    }
    saved.layers.resize(static_cast<std::size_t>(spec_.end_layer - spec_.first_layer));
    for (int l = spec_.first_layer; l < spec_.end_layer; ++l) {
      LayerActivations& layer = saved.layers[static_cast<std::size_t>(l - spec_.first_layer)];
      if (spec_.recompute == Recompute::full) {
        LayerActivations discarded;
        layer.input = x;
        layer_forward(l, batch, x, discarded, false);
      } else {
        layer_forward(l, batch, x, layer, false);
      }
    }
    if (!spec_.last) {
      std::copy(x.begin(), x.end(), output.begin());
      return 0;
    }
    return head_forward(batch, std::move(x), loss_scale, saved);
  }

  // grad_output: the gradient of the lane's output rows (ignored on a last stage, whose gradient starts at the
  // loss). Writes the gradient of the lane's input rows into grad_input (not on a first stage, which accumulates the
  // embedding's gradient instead). Returns the most activation values it held besides `saved` (a recomputed layer's).
  std::size_t backward(const LaneBatch& batch, std::span<const double> grad_output, std::span<double> grad_input,
                       const StageActivations& saved) {
    const std::size_t h = hidden();
    std::vector<double> dx;
    if (spec_.last)
      dx = head_backward(batch, saved);
    else
      dx.assign(grad_output.begin(), grad_output.begin() + static_cast<std::ptrdiff_t>(lane_rows(batch) * h));
    std::size_t transient = 0;
    for (int l = spec_.end_layer - 1; l >= spec_.first_layer; --l) {
      const LayerActivations& layer = saved.layers[static_cast<std::size_t>(l - spec_.first_layer)];
      if (spec_.recompute == Recompute::full) {
        LayerActivations recomputed;
        std::vector<double> x = layer.input;
        layer_forward(l, batch, x, recomputed, true);
        transient = std::max(transient, recomputed.values());
        layer_backward(l, batch, recomputed, dx);
      } else {
        layer_backward(l, batch, layer, dx);
      }
    }
    if (spec_.first)
      embed_backward(batch, dx, saved);
    else
      std::copy(dx.begin(), dx.end(), grad_input.begin());
    return transient;
  }

  // The lane's rows between layers: its TP rank's part of its CP rank's tokens.
  [[nodiscard]] std::size_t lane_rows(const LaneBatch& batch) const {
    return static_cast<std::size_t>(even_part(batch.shard().size(), spec_.tp, spec_.tp_rank).size());
  }

private:
  [[nodiscard]] std::size_t hidden() const noexcept { return static_cast<std::size_t>(model_.hidden); }
  [[nodiscard]] std::size_t tp() const noexcept { return static_cast<std::size_t>(spec_.tp); }
  [[nodiscard]] const std::vector<double>& weight(int layer, ParameterKind kind) const {
    return parameters_[layer_tensor(layer, kind)];
  }
  std::vector<double>& gradient(int layer, ParameterKind kind) { return gradients_[layer_tensor(layer, kind)]; }
  [[nodiscard]] int lane_heads() const noexcept { return model_.heads / spec_.tp; }
  [[nodiscard]] std::size_t head_dimension() const noexcept { return static_cast<std::size_t>(head_dim(model_)); }

  // The CP rank's rows [n, cols] from every TP rank's part of them.
  [[nodiscard]] std::vector<double> gather(std::vector<double> mine) const {
    return collectives_.all_gather(tp_group_, std::move(mine));
  }
  // The lane's rows of the sum over TP ranks of [n, cols] partial products.
  [[nodiscard]] std::vector<double> scatter(const std::vector<double>& partial, std::size_t n) const {
    return collectives_.reduce_scatter(tp_group_, partial, static_cast<std::int64_t>(n),
                                       static_cast<std::int64_t>(hidden()));
  }

  // The vocab-parallel embedding of the CP rank's ids, reduce-scattered to the lane's rows.
  std::vector<double> embed(const LaneBatch& batch, std::span<const double> input, StageActivations& saved) const {
    const std::size_t n = static_cast<std::size_t>(batch.shard().size());
    const std::size_t h = hidden();
    const auto vocab_part = static_cast<std::int32_t>(model_.vocab / spec_.tp);
    const std::int32_t first_id = vocab_part * spec_.tp_rank;
    const std::vector<double>& table = parameters_[embedding_tensor()];
    saved.ids.resize(n);
    std::vector<double> partial(n * h, 0.0);
    for (std::size_t t = 0; t < n; ++t) {
      saved.ids[t] = static_cast<std::int32_t>(input[t]);
      const std::int32_t row = saved.ids[t] - first_id;
      if (row >= 0 && row < vocab_part) std::copy_n(&table[static_cast<std::size_t>(row) * h], h, &partial[t * h]);
    }
    return scatter(partial, n);
  }

  void embed_backward(const LaneBatch& batch, const std::vector<double>& dx, const StageActivations& saved) {
    const std::size_t n = static_cast<std::size_t>(batch.shard().size());
    const std::size_t h = hidden();
    const std::vector<double> full = gather(dx);
    const auto vocab_part = static_cast<std::int32_t>(model_.vocab / spec_.tp);
    const std::int32_t first_id = vocab_part * spec_.tp_rank;
    std::vector<double>& table = gradients_[embedding_tensor()];
    for (std::size_t t = 0; t < n; ++t) {
      const std::int32_t row = saved.ids[t] - first_id;
      if (row < 0 || row >= vocab_part) continue;
      double* out = &table[static_cast<std::size_t>(row) * h];
      for (std::size_t c = 0; c < h; ++c) out[c] += full[t * h + c];
    }
  }

  // x: the layer's input rows, replaced by its output rows.
  void layer_forward(int layer, const LaneBatch& batch, std::vector<double>& x, LayerActivations& a,
                     bool recomputing) const {
    const std::size_t s = x.size() / hidden();
    const std::size_t n = static_cast<std::size_t>(batch.shard().size());
    const std::size_t h = hidden();
    const std::size_t h_t = h / tp();
    const std::size_t f_t = static_cast<std::size_t>(model_.ffn) / tp();
    a.input = x;
    std::vector<double> normed(s * h);
    a.rstd1.resize(s);
    reference::rmsnorm_forward(a.input, weight(layer, ParameterKind::attention_norm), model_.norm_eps, normed, a.rstd1);
    a.normed1 = gather(std::move(normed));
    a.qkv.resize(n * 3 * h_t);
    detail::matmul(a.normed1, weight(layer, ParameterKind::qkv), a.qkv, n, h, 3 * h_t);
    std::span<double> qkv(a.qkv);
    const reference::HeadShape heads{lane_heads(), static_cast<int>(head_dimension())};
    reference::rope_forward_at(batch.shard().positions, heads, qkv, qkv.subspan(h_t), 3 * h_t, model_.rope_theta);
    a.attention.resize(n * h_t);
    attention_forward(batch, a);
    std::vector<double> projected(n * h);
    detail::matmul(a.attention, weight(layer, ParameterKind::attention_output), projected, n, h_t, h);
    std::vector<double> attention_rows =
        spec_.mutation == Mutation::missing_tp_reduce ? own_rows(projected, n) : scatter(projected, n);
    a.middle.resize(s * h);
    if (recomputing && spec_.mutation == Mutation::recompute_drops_residual)
      a.middle = attention_rows;
    else
      detail::add(a.input, attention_rows, a.middle);
    normed.assign(s * h, 0.0);
    a.rstd2.resize(s);
    reference::rmsnorm_forward(a.middle, weight(layer, ParameterKind::mlp_norm), model_.norm_eps, normed, a.rstd2);
    a.normed2 = gather(std::move(normed));
    a.gate_up.resize(n * 2 * f_t);
    detail::matmul(a.normed2, weight(layer, ParameterKind::gate_up), a.gate_up, n, h, 2 * f_t);
    a.swiglu.resize(n * f_t);
    reference::swiglu_forward(a.gate_up, f_t, a.swiglu);
    detail::matmul(a.swiglu, weight(layer, ParameterKind::down), projected, n, f_t, h);
    const std::vector<double> mlp_rows = scatter(projected, n);
    detail::add(a.middle, mlp_rows, x);
  }

  // The lane's own rows of a [n, hidden] partial product, unsummed (Mutation::missing_tp_reduce).
  [[nodiscard]] std::vector<double> own_rows(const std::vector<double>& partial, std::size_t n) const {
    const RowRange rows = even_part(static_cast<std::int64_t>(n), spec_.tp, spec_.tp_rank);
    const auto h = static_cast<std::int64_t>(hidden());
    return {partial.begin() + rows.begin * h, partial.begin() + rows.end * h};
  }

  // dx: the gradient of the layer's output rows, replaced by the gradient of its input rows.
  void layer_backward(int layer, const LaneBatch& batch, const LayerActivations& a, std::vector<double>& dx) {
    const std::size_t s = dx.size() / hidden();
    const std::size_t n = static_cast<std::size_t>(batch.shard().size());
    const std::size_t h = hidden();
    const std::size_t h_t = h / tp();
    const std::size_t f_t = static_cast<std::size_t>(model_.ffn) / tp();
    // MLP branch: out = middle + swiglu(norm(middle)·Wgu)·Wdown.
    const std::vector<double> dy = gather(dx);
    std::vector<double> dswiglu(n * f_t);
    detail::matmul_transposed(dy, weight(layer, ParameterKind::down), dswiglu, n, h, f_t);
    detail::accumulate_transposed(a.swiglu, dy, gradient(layer, ParameterKind::down), n, f_t, h);
    std::vector<double> dgate_up(n * 2 * f_t);
    reference::swiglu_backward(a.gate_up, dswiglu, f_t, dgate_up);
    std::vector<double> dnormed(n * h);
    detail::matmul_transposed(dgate_up, weight(layer, ParameterKind::gate_up), dnormed, n, 2 * f_t, h);
    detail::accumulate_transposed(a.normed2, dgate_up, gradient(layer, ParameterKind::gate_up), n, h, 2 * f_t);
    std::vector<double> dmiddle(s * h);
    reference::rmsnorm_backward(a.middle, weight(layer, ParameterKind::mlp_norm), a.rstd2, scatter(dnormed, n), dmiddle,
                                gradient(layer, ParameterKind::mlp_norm));
    detail::add(dmiddle, dx, dmiddle);
    // Attention branch: middle = input + attention(rope(norm(input)·Wqkv))·Wo.
    const std::vector<double> dprojected = gather(dmiddle);
    std::vector<double> dattention(n * h_t);
    detail::matmul_transposed(dprojected, weight(layer, ParameterKind::attention_output), dattention, n, h, h_t);
    detail::accumulate_transposed(a.attention, dprojected, gradient(layer, ParameterKind::attention_output), n, h_t, h);
    std::vector<double> dqkv = attention_backward(batch, a, dattention);
    std::span<double> dq(dqkv);
    const reference::HeadShape heads{lane_heads(), static_cast<int>(head_dimension())};
    reference::rope_backward_at(batch.shard().positions, heads, dq, dq.subspan(h_t), 3 * h_t, model_.rope_theta);
    detail::matmul_transposed(dqkv, weight(layer, ParameterKind::qkv), dnormed, n, 3 * h_t, h);
    detail::accumulate_transposed(a.normed1, dqkv, gradient(layer, ParameterKind::qkv), n, h, 3 * h_t);
    reference::rmsnorm_backward(a.input, weight(layer, ParameterKind::attention_norm), a.rstd1, scatter(dnormed, n), dx,
                                gradient(layer, ParameterKind::attention_norm));
    detail::add(dx, dmiddle, dx);
  }

  // Attention of the lane's heads over the CP rank's tokens (a.qkv, roped) into a.attention.
  void attention_forward(const LaneBatch& batch, LayerActivations& a) const {
    const std::size_t n = static_cast<std::size_t>(batch.shard().size());
    const std::size_t h_t = hidden() / tp();
    const std::span<const double> qkv(a.qkv);
    if (batch.split->degree() == 1) {
      a.cp.lse.resize(static_cast<std::size_t>(lane_heads()) * n);
      reference::attention_forward(batch.shard().cu_seqlens, {lane_heads(), static_cast<int>(head_dimension())}, qkv,
                                   qkv.subspan(h_t), qkv.subspan(2 * h_t), 3 * h_t, a.attention, a.cp.lse);
      return;
    }
    const std::size_t width = h_t / static_cast<std::size_t>(batch.split->ulysses);  // this Ulysses rank's columns
    to_heads(batch, qkv, 3 * h_t, h_t, {&a.cp.q, &a.cp.k, &a.cp.v});
    const CpShard& queries = batch.split->blocks[static_cast<std::size_t>(batch.ring_rank())];
    const auto m = static_cast<std::size_t>(queries.size());
    const std::size_t heads = width / head_dimension();
    a.cp.out.assign(m * width, 0.0);
    a.cp.lse.assign(heads * m, -std::numeric_limits<double>::infinity());
    const int ring = batch.split->ring;
    const int rho = batch.ring_rank();
    std::vector<double> keys = a.cp.k;
    std::vector<double> values = a.cp.v;
    int owner = rho;
    for (int k = 0; k < ring; ++k) {
      block_forward(queries, a.cp.q, batch.split->blocks[static_cast<std::size_t>(owner)], keys, values, width,
                    a.cp.out, a.cp.lse);
      if (k + 1 == ring) break;
      // Mutation::wrong_ring_step: the last step computes with the block the ring passed before it again.
      if (spec_.mutation == Mutation::wrong_ring_step && k + 2 == ring) continue;
      keys.insert(keys.end(), values.begin(), values.end());
      std::vector<double> received =
          collectives_.shift(batch.ring, (rho + 1) % ring, std::move(keys), (rho + ring - 1) % ring);
      owner = (owner + ring - 1) % ring;
      const std::size_t half = received.size() / 2;
      keys.assign(received.begin(), received.begin() + static_cast<std::ptrdiff_t>(half));
      values.assign(received.begin() + static_cast<std::ptrdiff_t>(half), received.end());
    }
    a.attention = from_heads(batch, a.cp.out, width);
  }

  // The gradient of attention_forward's qkv [n, 3·h_t] from that of its output [n, h_t].
  std::vector<double> attention_backward(const LaneBatch& batch, const LayerActivations& a,
                                         const std::vector<double>& dout) const {
    const std::size_t n = static_cast<std::size_t>(batch.shard().size());
    const std::size_t h_t = hidden() / tp();
    std::vector<double> dqkv(n * 3 * h_t);
    const std::span<const double> qkv(a.qkv);
    if (batch.split->degree() == 1) {
      std::span<double> dq(dqkv);
      reference::attention_backward(batch.shard().cu_seqlens, {lane_heads(), static_cast<int>(head_dimension())}, qkv,
                                    qkv.subspan(h_t), qkv.subspan(2 * h_t), 3 * h_t, a.attention, dout, a.cp.lse, dq,
                                    dq.subspan(h_t), dq.subspan(2 * h_t), 3 * h_t);
      return dqkv;
    }
    const std::size_t width = h_t / static_cast<std::size_t>(batch.split->ulysses);
    std::vector<double> block_dout;
    to_heads(batch, dout, h_t, h_t, {&block_dout});
    const CpShard& queries = batch.split->blocks[static_cast<std::size_t>(batch.ring_rank())];
    const auto m = static_cast<std::size_t>(queries.size());
    const std::size_t d = head_dimension();
    const std::size_t heads = width / d;
    std::vector<double> delta(heads * m);  // rowsum(dO ∘ O) per head and query
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t head = 0; head < heads; ++head)
        delta[head * m + i] =
            reference::detail::dot(&block_dout[i * width + head * d], &a.cp.out[i * width + head * d], d);
    std::vector<double> dq(m * width, 0.0);
    const int ring = batch.split->ring;
    const int rho = batch.ring_rank();
    std::vector<double> keys = a.cp.k, values = a.cp.v;
    std::vector<double> dk(keys.size(), 0.0), dv(values.size(), 0.0);
    int owner = rho;
    for (int k = 0; k < ring; ++k) {
      block_backward(queries, a.cp.q, block_dout, a.cp.lse, delta, batch.split->blocks[static_cast<std::size_t>(owner)],
                     keys, values, width, dq, dk, dv);
      if (ring == 1) break;
      // The block and its partial sums move on; after the last step only the sums travel, home to their owner.
      const bool last = k + 1 == ring;
      std::vector<double> moving = std::move(dk);
      moving.insert(moving.end(), dv.begin(), dv.end());
      if (!last) {
        moving.insert(moving.end(), keys.begin(), keys.end());
        moving.insert(moving.end(), values.begin(), values.end());
      }
      const std::vector<double> received =
          collectives_.shift(batch.ring, (rho + 1) % ring, std::move(moving), (rho + ring - 1) % ring);
      owner = (owner + ring - 1) % ring;
      const std::size_t part = received.size() / (last ? 2 : 4);
      auto piece = [&](std::size_t i) {
        return std::vector<double>(received.begin() + static_cast<std::ptrdiff_t>(i * part),
                                   received.begin() + static_cast<std::ptrdiff_t>((i + 1) * part));
      };
      dk = piece(0);
      dv = piece(1);
      if (!last) {
        keys = piece(2);
        values = piece(3);
      }
    }
    // dq, dk and dv of the ring rank's tokens back to the Ulysses ranks that hold them.
    std::vector<double> block_dqkv(m * 3 * width);
    detail::set_columns(block_dqkv, m, 3 * width, 0, dq, width);
    detail::set_columns(block_dqkv, m, 3 * width, width, dk, width);
    detail::set_columns(block_dqkv, m, 3 * width, 2 * width, dv, width);
    const std::vector<double> grads = from_heads(batch, block_dqkv, 3 * width);
    // from_heads returns, per row, each Ulysses rank's [dq | dk | dv] columns in Ulysses order: regroup into q | k | v.
    const int ulysses = batch.split->ulysses;
    for (std::size_t i = 0; i < n; ++i)
      for (int u = 0; u < ulysses; ++u)
        for (std::size_t part = 0; part < 3; ++part)
          std::copy_n(&grads[i * 3 * h_t + static_cast<std::size_t>(u) * 3 * width + part * width], width,
                      &dqkv[i * 3 * h_t + part * h_t + static_cast<std::size_t>(u) * width]);
    return dqkv;
  }

  // Ulysses' first all-to-all: every Ulysses rank gets, for its 1/U of the heads, the ring rank's tokens in block
  // order. x: [n, row_stride], `parts.size()` matrices of `part_cols` columns side by side from column 0 (q | k | v,
  // or dO); each is returned in block order, [m, part_cols / U].
  void to_heads(const LaneBatch& batch, std::span<const double> x, std::size_t row_stride, std::size_t part_cols,
                std::initializer_list<std::vector<double>*> parts) const {
    const int ulysses = batch.split->ulysses;
    const std::size_t width = part_cols / static_cast<std::size_t>(ulysses);
    const std::size_t n = static_cast<std::size_t>(batch.shard().size());
    const std::size_t count = parts.size();
    std::vector<std::vector<double>> sends(static_cast<std::size_t>(ulysses));
    for (int u = 0; u < ulysses; ++u) {
      std::vector<double>& send = sends[static_cast<std::size_t>(u)];
      send.resize(n * count * width);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t p = 0; p < count; ++p)
          std::copy_n(&x[i * row_stride + p * part_cols + static_cast<std::size_t>(u) * width], width,
                      &send[(i * count + p) * width]);
    }
    const std::vector<std::vector<double>> received = collectives_.all_to_all(batch.ulysses, std::move(sends));
    const CpShard& block = batch.split->blocks[static_cast<std::size_t>(batch.ring_rank())];
    const auto m = static_cast<std::size_t>(block.size());
    std::size_t p = 0;
    for (std::vector<double>* part : parts) {
      part->assign(m * width, 0.0);
      std::size_t row = 0;
      for (std::size_t s = 0; s + 1 < block.cu_seqlens.size(); ++s)
        for (int u = 0; u < ulysses; ++u) {
          const CpShard& source = batch.split->shards[static_cast<std::size_t>(batch.ring_rank() * ulysses + u)];
          for (auto i = static_cast<std::size_t>(source.cu_seqlens[s]);
               i < static_cast<std::size_t>(source.cu_seqlens[s + 1]); ++i, ++row)
            std::copy_n(&received[static_cast<std::size_t>(u)][(i * count + p) * width], width, &(*part)[row * width]);
        }
      ++p;
    }
  }

  // Ulysses' second all-to-all: a block-order [m, cols] matrix of this Ulysses rank's heads back to the ranks that
  // hold its tokens; returns [n, U·cols], each Ulysses rank's columns side by side in Ulysses order.
  std::vector<double> from_heads(const LaneBatch& batch, const std::vector<double>& block_values,
                                 std::size_t cols) const {
    const int ulysses = batch.split->ulysses;
    const CpShard& block = batch.split->blocks[static_cast<std::size_t>(batch.ring_rank())];
    std::vector<std::vector<double>> sends(static_cast<std::size_t>(ulysses));
    std::size_t row = 0;
    for (std::size_t s = 0; s + 1 < block.cu_seqlens.size(); ++s)
      for (int u = 0; u < ulysses; ++u) {
        const CpShard& target = batch.split->shards[static_cast<std::size_t>(batch.ring_rank() * ulysses + u)];
        const auto rows = static_cast<std::size_t>(target.cu_seqlens[s + 1] - target.cu_seqlens[s]);
        std::vector<double>& send = sends[static_cast<std::size_t>(u)];
        send.insert(send.end(), block_values.begin() + static_cast<std::ptrdiff_t>(row * cols),
                    block_values.begin() + static_cast<std::ptrdiff_t>((row + rows) * cols));
        row += rows;
      }
    const std::vector<std::vector<double>> received = collectives_.all_to_all(batch.ulysses, std::move(sends));
    const std::size_t n = static_cast<std::size_t>(batch.shard().size());
    std::vector<double> result(n * cols * static_cast<std::size_t>(ulysses));
    for (int u = 0; u < ulysses; ++u)
      detail::set_columns(result, n, cols * static_cast<std::size_t>(ulysses), static_cast<std::size_t>(u) * cols,
                          received[static_cast<std::size_t>(u)], cols);
    return result;
  }

  // Calls visit(i, first, end) for every query row i of block `queries` with the rows [first, end) of block `keys`
  // of the same sequence (a key is visible when its position is not after the query's).
  template <class Visit>
  static void for_each_query(const CpShard& queries, const CpShard& keys, Visit visit) {
    for (std::size_t s = 0; s + 1 < queries.cu_seqlens.size(); ++s)
      for (auto i = static_cast<std::size_t>(queries.cu_seqlens[s]);
           i < static_cast<std::size_t>(queries.cu_seqlens[s + 1]); ++i)
        visit(i, static_cast<std::size_t>(keys.cu_seqlens[s]), static_cast<std::size_t>(keys.cu_seqlens[s + 1]));
  }

  // A ring step's arithmetic: the queries of block `queries` against the keys and values of block `keys`, causal by
  // position within each sequence, merged into out and lse by their log-sum-exp. q, k, v, out: [rows, width].
  void block_forward(const CpShard& queries, const std::vector<double>& q, const CpShard& keys,
                     const std::vector<double>& k, const std::vector<double>& v, std::size_t width,
                     std::vector<double>& out, std::vector<double>& lse) const {
    const std::size_t d = head_dimension();
    const std::size_t heads = width / d;
    const auto m = static_cast<std::size_t>(queries.size());
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    std::vector<double> weights, accumulator(d);
    for_each_query(queries, keys, [&](std::size_t i, std::size_t first, std::size_t end) {
      for (std::size_t head = 0; head < heads; ++head) {
        const double* query = &q[i * width + head * d];
        weights.clear();
        double max_score = -std::numeric_limits<double>::infinity();
        for (std::size_t j = first; j < end; ++j) {
          if (keys.positions[j] > queries.positions[i]) continue;
          weights.push_back(scale * reference::detail::dot(query, &k[j * width + head * d], d));
          max_score = std::max(max_score, weights.back());
        }
        if (weights.empty()) continue;
        double sum = 0;
        std::fill(accumulator.begin(), accumulator.end(), 0.0);
        std::size_t w = 0;
        for (std::size_t j = first; j < end; ++j) {
          if (keys.positions[j] > queries.positions[i]) continue;
          const double weight = std::exp(weights[w++] - max_score);
          sum += weight;
          for (std::size_t c = 0; c < d; ++c) accumulator[c] += weight * v[j * width + head * d + c];
        }
        const double block_lse = max_score + std::log(sum);
        double& row_lse = lse[head * m + i];
        double* row_out = &out[i * width + head * d];
        if (row_lse == -std::numeric_limits<double>::infinity()) {
          for (std::size_t c = 0; c < d; ++c) row_out[c] = accumulator[c] / sum;
          row_lse = block_lse;
          continue;
        }
        const double top = std::max(row_lse, block_lse);
        const double merged = top + std::log(std::exp(row_lse - top) + std::exp(block_lse - top));
        const double keep = std::exp(row_lse - merged);
        const double add = std::exp(block_lse - merged) / sum;
        for (std::size_t c = 0; c < d; ++c) row_out[c] = row_out[c] * keep + accumulator[c] * add;
        row_lse = merged;
      }
    });
  }

  // A ring step's gradients: given the final lse of the queries and delta = rowsum(dO ∘ O), adds the block's share
  // into dq and the block's dk and dv.
  void block_backward(const CpShard& queries, const std::vector<double>& q, const std::vector<double>& dout,
                      const std::vector<double>& lse, const std::vector<double>& delta, const CpShard& keys,
                      const std::vector<double>& k, const std::vector<double>& v, std::size_t width,
                      std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv) const {
    const std::size_t d = head_dimension();
    const std::size_t heads = width / d;
    const auto m = static_cast<std::size_t>(queries.size());
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for_each_query(queries, keys, [&](std::size_t i, std::size_t first, std::size_t end) {
      for (std::size_t head = 0; head < heads; ++head) {
        const double* query = &q[i * width + head * d];
        const double* dout_row = &dout[i * width + head * d];
        double* dq_row = &dq[i * width + head * d];
        for (std::size_t j = first; j < end; ++j) {
          if (keys.positions[j] > queries.positions[i]) continue;
          const double* key = &k[j * width + head * d];
          const double probability = std::exp(scale * reference::detail::dot(query, key, d) - lse[head * m + i]);
          const double dprobability = reference::detail::dot(dout_row, &v[j * width + head * d], d);
          const double dscore = probability * (dprobability - delta[head * m + i]);
          double* dk_row = &dk[j * width + head * d];
          double* dv_row = &dv[j * width + head * d];
          for (std::size_t c = 0; c < d; ++c) {
            dq_row[c] += scale * dscore * key[c];
            dk_row[c] += scale * dscore * query[c];
            dv_row[c] += probability * dout_row[c];
          }
        }
      }
    });
  }

  // The final norm, the column-parallel LM head and the vocab-parallel cross-entropy of the CP rank's tokens; returns
  // the sum over the lane's rows.
  double head_forward(const LaneBatch& batch, std::vector<double> x, double loss_scale, StageActivations& saved) const {
    const std::size_t s = x.size() / hidden();
    const std::size_t n = static_cast<std::size_t>(batch.shard().size());
    const std::size_t h = hidden();
    const auto v_t = static_cast<std::size_t>(model_.vocab) / tp();
    saved.head_input = std::move(x);
    std::vector<double> normed(s * h);
    saved.head_rstd.resize(s);
    reference::rmsnorm_forward(saved.head_input, parameters_[final_norm_tensor(model_)], model_.norm_eps, normed,
                               saved.head_rstd);
    saved.head_normed = gather(std::move(normed));
    std::vector<double> logits(n * v_t);
    detail::matmul(saved.head_normed, parameters_[lm_head_tensor(model_)], logits, n, h, v_t);
    // Each row's maximum, exp-sum and target logit over the whole vocabulary, every TP rank holding a slice of it.
    const auto first_id = static_cast<std::int32_t>(v_t) * spec_.tp_rank;
    std::vector<std::int32_t> targets(n);
    std::vector<double> row_max(n);
    for (std::size_t i = 0; i < n; ++i) {
      targets[i] = batch.packed->targets[static_cast<std::size_t>(batch.shard().rows[i])];
      row_max[i] = *std::max_element(&logits[i * v_t], &logits[i * v_t] + v_t);
    }
    row_max = collectives_.all_reduce_max(tp_group_, std::move(row_max));
    std::vector<double> sums(2 * n, 0.0);  // exp-sum, then target logit
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t c = 0; c < v_t; ++c) sums[i] += std::exp(logits[i * v_t + c] - row_max[i]);
      const std::int32_t local = targets[i] - first_id;
      if (targets[i] >= 0 && local >= 0 && static_cast<std::size_t>(local) < v_t)
        sums[n + i] = logits[i * v_t + static_cast<std::size_t>(local)];
    }
    sums = collectives_.all_reduce_sum(tp_group_, std::move(sums));
    saved.dlogits.assign(n * v_t, 0.0);
    const RowRange own = even_part(static_cast<std::int64_t>(n), spec_.tp, spec_.tp_rank);
    double loss = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (targets[i] < 0) continue;
      if (static_cast<std::int64_t>(i) >= own.begin && static_cast<std::int64_t>(i) < own.end)
        loss += row_max[i] + std::log(sums[i]) - sums[n + i];
      for (std::size_t c = 0; c < v_t; ++c)
        saved.dlogits[i * v_t + c] = std::exp(logits[i * v_t + c] - row_max[i]) / sums[i] * loss_scale;
      const std::int32_t local = targets[i] - first_id;
      if (local >= 0 && static_cast<std::size_t>(local) < v_t)
        saved.dlogits[i * v_t + static_cast<std::size_t>(local)] -= loss_scale;
    }
    return loss;
  }

  std::vector<double> head_backward(const LaneBatch& batch, const StageActivations& saved) {
    const std::size_t s = saved.head_rstd.size();
    const std::size_t n = static_cast<std::size_t>(batch.shard().size());
    const std::size_t h = hidden();
    const auto v_t = static_cast<std::size_t>(model_.vocab) / tp();
    std::vector<double> dnormed(n * h);
    detail::matmul_transposed(saved.dlogits, parameters_[lm_head_tensor(model_)], dnormed, n, v_t, h);
    detail::accumulate_transposed(saved.head_normed, saved.dlogits, gradients_[lm_head_tensor(model_)], n, h, v_t);
    std::vector<double> dx(s * h);
    reference::rmsnorm_backward(saved.head_input, parameters_[final_norm_tensor(model_)], saved.head_rstd,
                                scatter(dnormed, n), dx, gradients_[final_norm_tensor(model_)]);
    return dx;
  }

  ModelConfig model_;
  LaneSpec spec_;
  TensorRange tensors_;
  Group tp_group_;
  Collectives collectives_;
  std::vector<std::vector<double>> parameters_;  // the lane's TP shards, by canonical tensor
  std::vector<std::vector<double>> gradients_;
};

}  // namespace sluice::executor::host
