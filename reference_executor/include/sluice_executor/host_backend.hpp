#pragma once
// The host backend: the model in float64 on the CPU, with the kernels' CPU references
// (sluice_executor/reference.hpp) and plain-loop GEMMs, run by the interpreter on one host thread that steps the
// ranks round-robin. It is the executor's ground truth: a plan run here must give the loss and gradients of
// running every sequence unpacked on one device (reference_run.hpp), up to float64 rounding.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/reference.hpp"

namespace sluice::executor::host {

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

}  // namespace detail

// What one layer's backward needs from its forward.
struct LayerActivations {
  std::vector<double> input, normed1, rstd1, qkv, attention, lse, middle, normed2, rstd2, gate_up, swiglu;
};

// What a stage's backward needs from its forward.
struct StageActivations {
  std::vector<std::int32_t> ids;  // first stage
  std::vector<LayerActivations> layers;
  std::vector<double> head_input, head_normed, head_rstd, dlogits;  // last stage
};

// Layers [first_layer, end_layer) of the model, with the embedding when `first` and the head when `last`: the
// parameters it holds (initial values, or given ones) and their float64 gradients, accumulated over micro-batches.
class Stage {
public:
  Stage(const ModelConfig& model, int first_layer, int end_layer, bool first, bool last,
        std::span<const std::vector<double>> parameters = {})
      : model_(model),
        first_layer_(first_layer),
        end_layer_(end_layer),
        first_(first),
        last_(last),
        tensors_(stage_tensors(model, first_layer, end_layer, first, last)) {
    require_valid(model);
    sluice::require(first_layer >= 0 && first_layer <= end_layer && end_layer <= model.layers, "stage: layers [",
                    first_layer, ", ", end_layer, ") outside [0, ", model.layers, "]");
    const std::vector<ParameterTensor> shapes = parameter_tensors(model);
    sluice::require(parameters.empty() || parameters.size() == shapes.size(), "stage: ", parameters.size(),
                    " parameter tensors given, the model has ", shapes.size());
    parameters_.resize(shapes.size());
    gradients_.resize(shapes.size());
    for (std::size_t t = tensors_.begin; t < tensors_.end; ++t) {
      if (parameters.empty()) {
        parameters_[t] = initial_values(model, t);
      } else {
        sluice::require(parameters[t].size() == shapes[t].size(), "stage: tensor ", shapes[t].name(), " has ",
                        parameters[t].size(), " values, expected ", shapes[t].size());
        parameters_[t] = parameters[t];
      }
      gradients_[t].assign(shapes[t].size(), 0.0);
    }
  }

  [[nodiscard]] TensorRange tensors() const noexcept { return tensors_; }
  // Indexed by canonical tensor; empty outside tensors().
  [[nodiscard]] const std::vector<std::vector<double>>& gradients() const noexcept { return gradients_; }

  // input: the micro-batch's ids (as exact doubles) on a first stage, else its hidden states [tokens, hidden].
  // Writes the hidden states for the next stage into `output`, or on a last stage returns the sum of the
  // cross-entropies of the micro-batch's targets (dlogits scaled by loss_scale are kept for the backward).
  double forward(const PackedMicroBatch& mb, std::span<const double> input, std::span<double> output, double loss_scale,
                 StageActivations& saved) const {
    const auto tokens = static_cast<std::size_t>(mb.size());
    const auto hidden = static_cast<std::size_t>(model_.hidden);
    std::vector<double> x(tokens * hidden);
    if (first_) {
      saved.ids.resize(tokens);
      const std::vector<double>& table = parameters_[embedding_tensor()];
      for (std::size_t t = 0; t < tokens; ++t) {
        saved.ids[t] = static_cast<std::int32_t>(input[t]);
        std::copy_n(&table[static_cast<std::size_t>(saved.ids[t]) * hidden], hidden, &x[t * hidden]);
      }
    } else {
      std::copy_n(input.begin(), tokens * hidden, x.begin());
    }
    saved.layers.resize(static_cast<std::size_t>(end_layer_ - first_layer_));
    for (int l = first_layer_; l < end_layer_; ++l)
      layer_forward(l, mb, x, saved.layers[static_cast<std::size_t>(l - first_layer_)]);
    if (!last_) {
      std::copy(x.begin(), x.end(), output.begin());
      return 0;
    }
    return head_forward(mb, x, loss_scale, saved);
  }

  // grad_output: the gradient of the stage's output [tokens, hidden] (ignored on a last stage, whose gradient
  // starts at the loss). Writes the gradient of the stage's input into grad_input (not on a first stage, which
  // accumulates the embedding's gradient instead).
  void backward(const PackedMicroBatch& mb, std::span<const double> grad_output, std::span<double> grad_input,
                const StageActivations& saved) {
    const auto tokens = static_cast<std::size_t>(mb.size());
    const auto hidden = static_cast<std::size_t>(model_.hidden);
    std::vector<double> dx(tokens * hidden);
    if (last_) head_backward(saved, dx);
    else std::copy_n(grad_output.begin(), tokens * hidden, dx.begin());
    for (int l = end_layer_ - 1; l >= first_layer_; --l)
      layer_backward(l, mb, saved.layers[static_cast<std::size_t>(l - first_layer_)], dx);
    if (!first_) {
      std::copy(dx.begin(), dx.end(), grad_input.begin());
      return;
    }
    std::vector<double>& table = gradients_[embedding_tensor()];
    for (std::size_t t = 0; t < tokens; ++t) {
      double* row = &table[static_cast<std::size_t>(saved.ids[t]) * hidden];
      for (std::size_t c = 0; c < hidden; ++c) row[c] += dx[t * hidden + c];
    }
  }

private:
  [[nodiscard]] const std::vector<double>& weight(int layer, ParameterKind kind) const {
    return parameters_[layer_tensor(layer, kind)];
  }
  std::vector<double>& gradient(int layer, ParameterKind kind) { return gradients_[layer_tensor(layer, kind)]; }
  [[nodiscard]] reference::HeadShape heads() const { return {model_.heads, static_cast<int>(head_dim(model_))}; }

  // x: the layer's input, replaced by its output.
  void layer_forward(int layer, const PackedMicroBatch& mb, std::vector<double>& x, LayerActivations& a) const {
    const auto t = static_cast<std::size_t>(mb.size());
    const auto h = static_cast<std::size_t>(model_.hidden);
    const auto f = static_cast<std::size_t>(model_.ffn);
    a.input = x;
    a.normed1.resize(t * h);
    a.rstd1.resize(t);
    reference::rmsnorm_forward(a.input, weight(layer, ParameterKind::attention_norm), model_.norm_eps, a.normed1,
                               a.rstd1);
    a.qkv.resize(t * 3 * h);
    detail::matmul(a.normed1, weight(layer, ParameterKind::qkv), a.qkv, t, h, 3 * h);
    std::span<double> qkv(a.qkv);
    reference::rope_forward(mb.cu_seqlens, heads(), qkv, qkv.subspan(h), 3 * h, model_.rope_theta);
    a.attention.resize(t * h);
    a.lse.resize(static_cast<std::size_t>(model_.heads) * t);
    reference::attention_forward(mb.cu_seqlens, heads(), qkv, qkv.subspan(h), qkv.subspan(2 * h), 3 * h, a.attention,
                                 a.lse);
    std::vector<double> projected(t * h);
    detail::matmul(a.attention, weight(layer, ParameterKind::attention_output), projected, t, h, h);
    a.middle.resize(t * h);
    detail::add(a.input, projected, a.middle);
    a.normed2.resize(t * h);
    a.rstd2.resize(t);
    reference::rmsnorm_forward(a.middle, weight(layer, ParameterKind::mlp_norm), model_.norm_eps, a.normed2, a.rstd2);
    a.gate_up.resize(t * 2 * f);
    detail::matmul(a.normed2, weight(layer, ParameterKind::gate_up), a.gate_up, t, h, 2 * f);
    a.swiglu.resize(t * f);
    reference::swiglu_forward(a.gate_up, f, a.swiglu);
    detail::matmul(a.swiglu, weight(layer, ParameterKind::down), projected, t, f, h);
    detail::add(a.middle, projected, x);
  }

  // dx: the gradient of the layer's output, replaced by the gradient of its input.
  void layer_backward(int layer, const PackedMicroBatch& mb, const LayerActivations& a, std::vector<double>& dx) {
    const auto t = static_cast<std::size_t>(mb.size());
    const auto h = static_cast<std::size_t>(model_.hidden);
    const auto f = static_cast<std::size_t>(model_.ffn);
    // MLP branch: out = middle + swiglu(norm(middle)·Wgu)·Wdown.
    std::vector<double> dswiglu(t * f);
    detail::matmul_transposed(dx, weight(layer, ParameterKind::down), dswiglu, t, h, f);
    detail::accumulate_transposed(a.swiglu, dx, gradient(layer, ParameterKind::down), t, f, h);
    std::vector<double> dgate_up(t * 2 * f);
    reference::swiglu_backward(a.gate_up, dswiglu, f, dgate_up);
    std::vector<double> dnormed(t * h);
    detail::matmul_transposed(dgate_up, weight(layer, ParameterKind::gate_up), dnormed, t, 2 * f, h);
    detail::accumulate_transposed(a.normed2, dgate_up, gradient(layer, ParameterKind::gate_up), t, h, 2 * f);
    std::vector<double> dmiddle(t * h);
    reference::rmsnorm_backward(a.middle, weight(layer, ParameterKind::mlp_norm), a.rstd2, dnormed, dmiddle,
                                gradient(layer, ParameterKind::mlp_norm));
    detail::add(dmiddle, dx, dmiddle);
    // Attention branch: middle = input + attention(rope(norm(input)·Wqkv))·Wo.
    std::vector<double> dattention(t * h);
    detail::matmul_transposed(dmiddle, weight(layer, ParameterKind::attention_output), dattention, t, h, h);
    detail::accumulate_transposed(a.attention, dmiddle, gradient(layer, ParameterKind::attention_output), t, h, h);
    std::vector<double> dqkv(t * 3 * h);
    std::span<double> dq(dqkv);
    const std::span<const double> qkv(a.qkv);
    reference::attention_backward(mb.cu_seqlens, heads(), qkv, qkv.subspan(h), qkv.subspan(2 * h), 3 * h, a.attention,
                                  dattention, a.lse, dq, dq.subspan(h), dq.subspan(2 * h), 3 * h);
    reference::rope_backward(mb.cu_seqlens, heads(), dq, dq.subspan(h), 3 * h, model_.rope_theta);
    detail::matmul_transposed(dqkv, weight(layer, ParameterKind::qkv), dnormed, t, 3 * h, h);
    detail::accumulate_transposed(a.normed1, dqkv, gradient(layer, ParameterKind::qkv), t, h, 3 * h);
    reference::rmsnorm_backward(a.input, weight(layer, ParameterKind::attention_norm), a.rstd1, dnormed, dx,
                                gradient(layer, ParameterKind::attention_norm));
    detail::add(dx, dmiddle, dx);
  }

  double head_forward(const PackedMicroBatch& mb, std::vector<double>& x, double loss_scale,
                      StageActivations& saved) const {
    const auto t = static_cast<std::size_t>(mb.size());
    const auto h = static_cast<std::size_t>(model_.hidden);
    const auto v = static_cast<std::size_t>(model_.vocab);
    saved.head_input = std::move(x);
    saved.head_normed.resize(t * h);
    saved.head_rstd.resize(t);
    reference::rmsnorm_forward(saved.head_input, parameters_[final_norm_tensor(model_)], model_.norm_eps,
                               saved.head_normed, saved.head_rstd);
    std::vector<double> logits(t * v);
    detail::matmul(saved.head_normed, parameters_[lm_head_tensor(model_)], logits, t, h, v);
    std::vector<double> row_loss(t);
    saved.dlogits.resize(t * v);
    return reference::cross_entropy(logits, mb.targets, v, loss_scale, row_loss, saved.dlogits);
  }

  void head_backward(const StageActivations& saved, std::vector<double>& dx) {
    const std::size_t t = saved.head_rstd.size();
    const auto h = static_cast<std::size_t>(model_.hidden);
    const auto v = static_cast<std::size_t>(model_.vocab);
    std::vector<double> dnormed(t * h);
    detail::matmul_transposed(saved.dlogits, parameters_[lm_head_tensor(model_)], dnormed, t, v, h);
    detail::accumulate_transposed(saved.head_normed, saved.dlogits, gradients_[lm_head_tensor(model_)], t, h, v);
    reference::rmsnorm_backward(saved.head_input, parameters_[final_norm_tensor(model_)], saved.head_rstd, dnormed, dx,
                                gradients_[final_norm_tensor(model_)]);
  }

  ModelConfig model_;
  int first_layer_;
  int end_layer_;
  bool first_;
  bool last_;
  TensorRange tensors_;
  std::vector<std::vector<double>> parameters_;
  std::vector<std::vector<double>> gradients_;
};

// The loss and the parameter gradients of a run, from each pipeline's per-micro-batch cross-entropy sums and each
// rank's gradients of the tensors it holds (`gradient(rank, tensor)`): the loss summed in pipeline and micro-batch
// order, the gradients summed over ranks in rank order (the data-parallel reduction). One function, so that a run
// gathered from many processes adds exactly as a run in one process does.
template <class Gradient>
ModelResult combine(const Job& job, const JobLayout& layout, std::span<const std::vector<double>> loss_sums,
                    Gradient gradient) {
  ModelResult result;
  for (const std::vector<double>& sums : loss_sums)
    for (const double sum : sums) result.loss += sum;
  result.loss /= static_cast<double>(layout.total_targets);
  const std::vector<ParameterTensor> tensors = parameter_tensors(job.model);
  result.gradients.resize(tensors.size());
  for (std::size_t t = 0; t < tensors.size(); ++t) result.gradients[t].assign(tensors[t].size(), 0.0);
  for (std::size_t r = 0; r < layout.ranks.size(); ++r) {
    const RankInfo& info = layout.ranks[r];
    const TensorRange range = stage_tensors(job.model, info.first_layer, info.end_layer, info.first, info.last);
    for (std::size_t t = range.begin; t < range.end; ++t)
      detail::add(result.gradients[t], gradient(static_cast<int>(r), t), result.gradients[t]);
  }
  return result;
}

// The stages, static slots and saved activations of the ranks it runs, on the host.
class Backend {
public:
  using Stamp = double;

  // Runs the global ranks in `ranks`, or every rank when it is empty (a process of a multi-process run holds only
  // its own); the interpreter must step only those.
  Backend(const Job& job, const JobLayout& layout, std::span<const int> ranks = {})
      : job_(job), layout_(layout), origin_(Clock::now()), ranks_(layout.ranks.size()) {
    for (std::size_t r = 0; r < layout.ranks.size(); ++r) {
      if (!ranks.empty() && std::ranges::find(ranks, static_cast<int>(r)) == ranks.end()) continue;
      const RankInfo& info = layout.ranks[r];
      const PipelineJob& pipeline = job.pipelines[static_cast<std::size_t>(info.pipeline)];
      const auto elements = static_cast<std::size_t>(layout.slot_elements[static_cast<std::size_t>(info.pipeline)]);
      ranks_[r].emplace(RankState{Stage(job.model, info.first_layer, info.end_layer, info.first, info.last),
                                  std::vector<std::vector<double>>(static_cast<std::size_t>(pipeline.plan.buffer_slots),
                                                                   std::vector<double>(elements)),
                                  std::vector<StageActivations>(pipeline.micro_batches.size())});
    }
    for (const auto& micro_batches : layout.micro_batches) loss_sums_.emplace_back(micro_batches.size(), 0.0);
  }

  void load_input(int rank, int micro_batch, int slot) {
    const std::vector<std::int32_t>& ids = packed(rank, micro_batch).tokens;
    std::copy(ids.begin(), ids.end(), data(rank, slot).begin());
  }

  void forward(int rank, int micro_batch, int input_slot, int output_slot) {
    RankState& state = at(rank);
    const RankInfo& info = layout_.ranks[static_cast<std::size_t>(rank)];
    const double loss = state.stage.forward(
        packed(rank, micro_batch), data(rank, input_slot),
        output_slot >= 0 ? std::span<double>(data(rank, output_slot)) : std::span<double>(),
        1.0 / static_cast<double>(layout_.total_targets), state.saved[static_cast<std::size_t>(micro_batch)]);
    if (info.last) loss_sums_[static_cast<std::size_t>(info.pipeline)][static_cast<std::size_t>(micro_batch)] = loss;
  }

  void backward(int rank, int micro_batch, int grad_slot, int output_slot) {
    RankState& state = at(rank);
    StageActivations& saved = state.saved[static_cast<std::size_t>(micro_batch)];
    state.stage.backward(packed(rank, micro_batch),
                         grad_slot >= 0 ? std::span<const double>(data(rank, grad_slot)) : std::span<const double>(),
                         output_slot >= 0 ? std::span<double>(data(rank, output_slot)) : std::span<double>(), saved);
    saved = {};
  }

  [[nodiscard]] Stamp stamp(int /*rank*/) const {
    return std::chrono::duration<double>(Clock::now() - origin_).count();
  }
  [[nodiscard]] double seconds(Stamp stamp) const { return stamp; }

  [[nodiscard]] std::vector<double>& data(int rank, int slot) { return at(rank).slots[static_cast<std::size_t>(slot)]; }

  // The loss and gradients of the whole run (combine); every rank must be held.
  [[nodiscard]] ModelResult result() const {
    return combine(job_, layout_, loss_sums_,
                   [this](int rank, std::size_t tensor) -> const std::vector<double>& {
                     return stage(rank).gradients()[tensor];
                   });
  }

  // A held rank's stage, with its gradients.
  [[nodiscard]] const Stage& stage(int rank) const { return at(rank).stage; }
  // Per micro-batch of the pipeline, the sum of its cross-entropies, written by its last stage.
  [[nodiscard]] const std::vector<double>& loss_sums(int pipeline) const {
    return loss_sums_[static_cast<std::size_t>(pipeline)];
  }

private:
  using Clock = std::chrono::steady_clock;
  struct RankState {
    Stage stage;
    std::vector<std::vector<double>> slots;
    std::vector<StageActivations> saved;  // per micro-batch, from its forward to its backward
  };

  RankState& at(int rank) { return const_cast<RankState&>(std::as_const(*this).at(rank)); }
  [[nodiscard]] const RankState& at(int rank) const {
    const std::optional<RankState>& state = ranks_[static_cast<std::size_t>(rank)];
    sluice::require(state.has_value(), "host backend: rank ", rank, " runs in another process");
    return *state;
  }
  [[nodiscard]] const PackedMicroBatch& packed(int rank, int micro_batch) const {
    const RankInfo& info = layout_.ranks[static_cast<std::size_t>(rank)];
    return layout_.micro_batches[static_cast<std::size_t>(info.pipeline)][static_cast<std::size_t>(micro_batch)];
  }

  const Job& job_;
  const JobLayout& layout_;
  Clock::time_point origin_;
  std::vector<std::optional<RankState>> ranks_;  // by global rank; empty for a rank another process runs
  std::vector<std::vector<double>> loss_sums_;   // [pipeline][micro-batch]
};

// Copies a sent slot into the receiving slot when the send and the receive pair.
class Transport {
public:
  explicit Transport(Backend& backend) : backend_(backend) {}
  void post(const Transfer& /*transfer*/) {}
  void transfer(const Transfer& send, const Transfer& receive) {
    const auto count = static_cast<std::ptrdiff_t>(send.shape.rows * send.shape.cols);
    const std::vector<double>& from = backend_.data(send.rank, send.slot);
    std::copy(from.begin(), from.begin() + count, backend_.data(receive.rank, receive.slot).begin());
  }
  void wait(const Transfer& /*transfer*/) {}

private:
  Backend& backend_;
};

}  // namespace sluice::executor::host

namespace sluice::executor {

// Runs the job on the host: raises invalid_input / invalid_plan for a bad job or a plan the interpreter rejects.
inline RunReport run_on_host(const Job& job) {
  const JobLayout job_layout = layout(job);
  host::Backend backend(job, job_layout);
  host::Transport transport(backend);
  auto interpreter = make_interpreter(job, backend, transport);
  interpreter.run();
  RunReport report;
  report.result = backend.result();
  report.instructions = interpreter.timings();
  fill_makespans(job_layout, report);
  report.device = "host (float64)";
  return report;
}

}  // namespace sluice::executor
