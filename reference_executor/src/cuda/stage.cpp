#include "stage.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "embedding.hpp"
#include "sluice/core/error.hpp"
#include "sluice_executor/kernels.hpp"
#include "sluice_executor/launch.hpp"

namespace sluice::executor::cuda {

namespace {

constexpr std::size_t bf16_bytes = sizeof(bf16);

std::size_t count(std::int64_t rows, std::int64_t cols) { return static_cast<std::size_t>(rows * cols); }

void copy_device(void* to, const void* from, std::size_t bytes, cudaStream_t stream) {
  SLUICE_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream));
}

// The initial values of the tensors in `range`, as floats, computed on all host cores: each tensor draws from its
// own random stream, so the values do not depend on the thread count. Four LLaMA-7B-shaped layers (a billion
// values) take tens of seconds on one core: a process its launcher bound to one core pays that per plan.
std::vector<std::vector<float>> initial_parameters(const ModelConfig& model, TensorRange range) {
  std::vector<std::vector<float>> values(range.end - range.begin);
  std::atomic<std::size_t> next{range.begin};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto work = [&] {
    for (std::size_t tensor = next++; tensor < range.end; tensor = next++) {
      try {
        const std::vector<double> exact = initial_values(model, tensor);
        values[tensor - range.begin].assign(exact.begin(), exact.end());
      } catch (...) {
        const std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  {
    const std::size_t threads = std::min<std::size_t>(usable_cpus(), values.size());
    std::vector<std::jthread> helpers;
    for (std::size_t k = 1; k < threads; ++k) helpers.emplace_back(work);
    work();
  }
  if (failure) std::rethrow_exception(failure);
  return values;
}

}  // namespace

DeviceMicroBatch upload_micro_batch(const PackedMicroBatch& micro_batch, cudaStream_t stream) {
  DeviceMicroBatch result;
  result.tokens = static_cast<int>(micro_batch.size());
  result.sequences = static_cast<int>(micro_batch.cu_seqlens.size()) - 1;
  result.max_seqlen = micro_batch.max_seqlen;
  // Positions grouped by token id (stable, so each group is in position order): the embedding backward sums each
  // group in that fixed order.
  std::vector<std::int32_t> positions(micro_batch.tokens.size());
  std::iota(positions.begin(), positions.end(), 0);
  std::stable_sort(positions.begin(), positions.end(), [&](std::int32_t x, std::int32_t y) {
    return micro_batch.tokens[static_cast<std::size_t>(x)] < micro_batch.tokens[static_cast<std::size_t>(y)];
  });
  std::vector<std::int32_t> unique_ids, offsets;
  for (std::size_t k = 0; k < positions.size(); ++k) {
    const std::int32_t token = micro_batch.tokens[static_cast<std::size_t>(positions[k])];
    if (unique_ids.empty() || unique_ids.back() != token) {
      unique_ids.push_back(token);
      offsets.push_back(static_cast<std::int32_t>(k));
    }
  }
  offsets.push_back(static_cast<std::int32_t>(positions.size()));
  result.unique_tokens = static_cast<int>(unique_ids.size());
  result.cu_seqlens = upload(micro_batch.cu_seqlens, stream);
  result.ids = upload(micro_batch.tokens, stream);
  result.targets = upload(micro_batch.targets, stream);
  result.unique_ids = upload(unique_ids, stream);
  result.offsets = upload(offsets, stream);
  result.positions = upload(positions, stream);
  // The host vectors die at return: finish the copies from them first.
  SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return result;
}

void require_gpu_model(const ModelConfig& model) {
  require_valid(model);
  const std::int64_t dimension = head_dim(model);
  sluice::require(dimension == 64 || dimension == 128,
                  "model: the CUDA attention kernels need a head dimension (hidden / heads) of 64 or 128, got ",
                  dimension);
  sluice::require(model.hidden % 8 == 0 && model.ffn % 8 == 0, "model: the CUDA kernels need hidden (", model.hidden,
                  ") and ffn (", model.ffn, ") to be multiples of 8");
}

void require_gpu_job(const Job& job) {
  require_gpu_model(job.model);
  for (std::size_t p = 0; p < job.pipelines.size(); ++p) {
    const Scheme& scheme = job.pipelines[p].scheme;
    sluice::require(scheme.tp() == 1 && scheme.cp() == 1, "job: pipeline ", p, " runs ", scheme.name(),
                    ", and the CUDA backend runs TP 1 and CP 1 (the host backend runs every degree)");
  }
  sluice::require(job.cp_groups.empty(), "job: the CUDA backend does not run CP groups across pipelines (the host ",
                  "backend does)");
}

DeviceStage::DeviceStage(const ModelConfig& model, int first_layer, int end_layer, bool first, bool last,
                         Recompute recompute, StreamAllocator& allocator)
    : model_(model),
      first_layer_(first_layer),
      end_layer_(end_layer),
      first_(first),
      last_(last),
      recompute_(recompute),
      tensors_(stage_tensors(model, first_layer, end_layer, first, last)),
      allocator_(allocator),
      cublas_(allocator.stream()) {
  require_gpu_model(model);
  const std::vector<ParameterTensor> shapes = parameter_tensors(model);
  parameters_.resize(shapes.size());
  gradients_.resize(shapes.size());
  std::vector<std::vector<float>> initial = initial_parameters(model, tensors_);
  for (std::size_t t = tensors_.begin; t < tensors_.end; ++t) {
    std::vector<float>& values = initial[t - tensors_.begin];
    const DeviceBuffer staged = upload(values, stream());
    parameters_[t] = DeviceBuffer(values.size() * bf16_bytes);
    kernels::convert(staged.as<const float>(), parameters_[t].as<bf16>(), static_cast<std::int64_t>(values.size()),
                     stream());
    gradients_[t] = DeviceBuffer(values.size() * sizeof(float));
    // `staged` is freed at the end of this iteration: the conversion must have read it.
    SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream()));
    std::vector<float>().swap(values);
  }
  zero_gradients();
}

kernels::HeadShape DeviceStage::heads() const noexcept { return {model_.heads, static_cast<int>(head_dim(model_))}; }

void DeviceStage::zero_gradients() {
  for (std::size_t t = tensors_.begin; t < tensors_.end; ++t)
    kernels::fill_zero(gradients_[t].as<float>(), static_cast<std::int64_t>(tensor_size(t)), stream());
}

// Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS gets B first, with each operand's row length as its leading
// dimension.
void DeviceStage::gemm(bool transpose_a, bool transpose_b, int m, int n, int k, const bf16* a, const bf16* b, void* c,
                       cudaDataType_t c_type, float beta) const {
  const float alpha = 1.0f;
  const int lda = transpose_a ? m : k;
  const int ldb = transpose_b ? k : n;
  SLUICE_CUBLAS_CHECK(cublasGemmEx(cublas_.get(), transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF, ldb, a,
                                   CUDA_R_16BF, lda, &beta, c, c_type, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void DeviceStage::rmsnorm_backward(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy, int rows,
                                   bf16* dx, float* dweight) const {
  const int hidden = static_cast<int>(model_.hidden);
  Scratch<float> workspace(allocator_, kernels::rmsnorm_backward_workspace_floats(hidden));
  kernels::rmsnorm_backward(x, weight, rstd, dy, rows, hidden, dx, dweight, workspace.get(), stream());
}

void DeviceStage::forward(const DeviceMicroBatch& micro_batch, const void* input, bf16* output, float loss_scale,
                          float* loss_sum, StageSaved& saved) {
  const std::int64_t tokens = micro_batch.tokens;
  const std::size_t elements = count(tokens, model_.hidden);
  Scratch<bf16> x(allocator_, elements);
  if (first_) {
    embedding_forward(weight(embedding_tensor()), static_cast<const std::int32_t*>(input), micro_batch.tokens,
                      static_cast<int>(model_.hidden), x.get(), stream());
  } else {
    copy_device(x.get(), input, elements * bf16_bytes, stream());
  }
  saved.layers.resize(static_cast<std::size_t>(end_layer_ - first_layer_));
  for (int l = first_layer_; l < end_layer_; ++l) {
    LayerSaved& layer = saved.layers[static_cast<std::size_t>(l - first_layer_)];
    if (recompute_ == Recompute::full) {
      layer.input = Scratch<bf16>(allocator_, elements);
      copy_device(layer.input.get(), x.get(), elements * bf16_bytes, stream());
      LayerSaved discarded;
      x = layer_forward(l, micro_batch, std::move(x), discarded);
    } else {
      x = layer_forward(l, micro_batch, std::move(x), layer);
    }
  }
  if (last_)
    head_forward(micro_batch, std::move(x), loss_scale, loss_sum, saved);
  else
    copy_device(output, x.get(), elements * bf16_bytes, stream());
}

void DeviceStage::backward(const DeviceMicroBatch& micro_batch, const bf16* grad_output, bf16* grad_input,
                           StageSaved& saved) {
  const std::size_t elements = count(micro_batch.tokens, model_.hidden);
  Scratch<bf16> dx;
  if (last_) {
    dx = head_backward(micro_batch, saved);
  } else {
    dx = Scratch<bf16>(allocator_, elements);
    copy_device(dx.get(), grad_output, elements * bf16_bytes, stream());
  }
  for (int l = end_layer_ - 1; l >= first_layer_; --l) {
    LayerSaved& layer = saved.layers[static_cast<std::size_t>(l - first_layer_)];
    if (recompute_ == Recompute::full) {
      Scratch<bf16> input(allocator_, elements);
      copy_device(input.get(), layer.input.get(), elements * bf16_bytes, stream());
      LayerSaved recomputed;
      static_cast<void>(layer_forward(l, micro_batch, std::move(input), recomputed));
      dx = layer_backward(l, micro_batch, recomputed, std::move(dx));
    } else {
      dx = layer_backward(l, micro_batch, layer, std::move(dx));
    }
  }
  if (first_) {
    embedding_backward(dx.get(), micro_batch.unique_ids.as<const std::int32_t>(),
                       micro_batch.offsets.as<const std::int32_t>(), micro_batch.positions.as<const std::int32_t>(),
                       micro_batch.unique_tokens, static_cast<int>(model_.hidden), gradient(embedding_tensor()),
                       stream());
  } else {
    copy_device(grad_input, dx.get(), elements * bf16_bytes, stream());
  }
  saved = {};
}

Scratch<bf16> DeviceStage::layer_forward(int layer, const DeviceMicroBatch& micro_batch, Scratch<bf16> x,
                                         LayerSaved& s) {
  const int t = micro_batch.tokens;
  const int h = static_cast<int>(model_.hidden);
  const int f = static_cast<int>(model_.ffn);
  const auto eps = static_cast<float>(model_.norm_eps);
  const kernels::VarlenBatch batch = micro_batch.varlen();
  s.input = std::move(x);
  s.normed1 = Scratch<bf16>(allocator_, count(t, h));
  s.rstd1 = Scratch<float>(allocator_, static_cast<std::size_t>(t));
  kernels::rmsnorm_forward(s.input.get(), weight(layer, ParameterKind::attention_norm), t, h, eps, s.normed1.get(),
                           s.rstd1.get(), stream());
  s.qkv = Scratch<bf16>(allocator_, count(t, 3 * h));
  gemm(false, false, t, 3 * h, h, s.normed1.get(), weight(layer, ParameterKind::qkv), s.qkv.get(), CUDA_R_16BF, 0);
  bf16* q = s.qkv.get();
  kernels::rope_forward(batch, heads(), q, q + h, 3 * h, model_.rope_theta, stream());
  s.attention = Scratch<bf16>(allocator_, count(t, h));
  s.lse = Scratch<float>(allocator_, count(model_.heads, t));
  kernels::attention_forward(batch, heads(), q, q + h, q + 2 * h, 3 * h, s.attention.get(), s.lse.get(), stream());
  Scratch<bf16> projected(allocator_, count(t, h));
  gemm(false, false, t, h, h, s.attention.get(), weight(layer, ParameterKind::attention_output), projected.get(),
       CUDA_R_16BF, 0);
  s.middle = Scratch<bf16>(allocator_, count(t, h));
  kernels::add(s.input.get(), projected.get(), s.middle.get(), count(t, h), stream());
  s.normed2 = Scratch<bf16>(allocator_, count(t, h));
  s.rstd2 = Scratch<float>(allocator_, static_cast<std::size_t>(t));
  kernels::rmsnorm_forward(s.middle.get(), weight(layer, ParameterKind::mlp_norm), t, h, eps, s.normed2.get(),
                           s.rstd2.get(), stream());
  s.gate_up = Scratch<bf16>(allocator_, count(t, 2 * f));
  gemm(false, false, t, 2 * f, h, s.normed2.get(), weight(layer, ParameterKind::gate_up), s.gate_up.get(), CUDA_R_16BF,
       0);
  s.swiglu = Scratch<bf16>(allocator_, count(t, f));
  kernels::swiglu_forward(s.gate_up.get(), t, f, s.swiglu.get(), stream());
  gemm(false, false, t, h, f, s.swiglu.get(), weight(layer, ParameterKind::down), projected.get(), CUDA_R_16BF, 0);
  Scratch<bf16> out(allocator_, count(t, h));
  kernels::add(s.middle.get(), projected.get(), out.get(), count(t, h), stream());
  return out;
}

Scratch<bf16> DeviceStage::layer_backward(int layer, const DeviceMicroBatch& micro_batch, LayerSaved& s,
                                          Scratch<bf16> dy) {
  const int t = micro_batch.tokens;
  const int h = static_cast<int>(model_.hidden);
  const int f = static_cast<int>(model_.ffn);
  const kernels::VarlenBatch batch = micro_batch.varlen();
  // MLP branch: out = middle + swiglu(norm(middle)·Wgu)·Wdown.
  Scratch<bf16> dswiglu(allocator_, count(t, f));
  gemm(false, true, t, f, h, dy.get(), weight(layer, ParameterKind::down), dswiglu.get(), CUDA_R_16BF, 0);
  gemm(true, false, f, h, t, s.swiglu.get(), dy.get(), gradient(layer, ParameterKind::down), CUDA_R_32F, 1);
  Scratch<bf16> dgate_up(allocator_, count(t, 2 * f));
  kernels::swiglu_backward(s.gate_up.get(), dswiglu.get(), t, f, dgate_up.get(), stream());
  Scratch<bf16> dnormed(allocator_, count(t, h));
  gemm(false, true, t, h, 2 * f, dgate_up.get(), weight(layer, ParameterKind::gate_up), dnormed.get(), CUDA_R_16BF, 0);
  gemm(true, false, h, 2 * f, t, s.normed2.get(), dgate_up.get(), gradient(layer, ParameterKind::gate_up), CUDA_R_32F,
       1);
  Scratch<bf16> dmiddle(allocator_, count(t, h));
  rmsnorm_backward(s.middle.get(), weight(layer, ParameterKind::mlp_norm), s.rstd2.get(), dnormed.get(), t,
                   dmiddle.get(), gradient(layer, ParameterKind::mlp_norm));
  kernels::add_inplace(dmiddle.get(), dy.get(), count(t, h), stream());
  // Attention branch: middle = input + attention(rope(norm(input)·Wqkv))·Wo.
  Scratch<bf16> dattention(allocator_, count(t, h));
  gemm(false, true, t, h, h, dmiddle.get(), weight(layer, ParameterKind::attention_output), dattention.get(),
       CUDA_R_16BF, 0);
  gemm(true, false, h, h, t, s.attention.get(), dmiddle.get(), gradient(layer, ParameterKind::attention_output),
       CUDA_R_32F, 1);
  Scratch<bf16> dqkv(allocator_, count(t, 3 * h));
  Scratch<float> delta(allocator_, count(model_.heads, t));
  const bf16* q = s.qkv.get();
  bf16* dq = dqkv.get();
  kernels::attention_backward(batch, heads(), q, q + h, q + 2 * h, 3 * h, s.attention.get(), dattention.get(),
                              s.lse.get(), dq, dq + h, dq + 2 * h, 3 * h, delta.get(), stream());
  kernels::rope_backward(batch, heads(), dq, dq + h, 3 * h, model_.rope_theta, stream());
  gemm(false, true, t, h, 3 * h, dqkv.get(), weight(layer, ParameterKind::qkv), dnormed.get(), CUDA_R_16BF, 0);
  gemm(true, false, h, 3 * h, t, s.normed1.get(), dqkv.get(), gradient(layer, ParameterKind::qkv), CUDA_R_32F, 1);
  rmsnorm_backward(s.input.get(), weight(layer, ParameterKind::attention_norm), s.rstd1.get(), dnormed.get(), t,
                   dy.get(), gradient(layer, ParameterKind::attention_norm));
  kernels::add_inplace(dy.get(), dmiddle.get(), count(t, h), stream());
  s = {};
  return dy;
}

void DeviceStage::head_forward(const DeviceMicroBatch& micro_batch, Scratch<bf16> x, float loss_scale, float* loss_sum,
                               StageSaved& saved) {
  const int t = micro_batch.tokens;
  const int h = static_cast<int>(model_.hidden);
  const int v = static_cast<int>(model_.vocab);
  saved.head_input = std::move(x);
  saved.head_normed = Scratch<bf16>(allocator_, count(t, h));
  saved.head_rstd = Scratch<float>(allocator_, static_cast<std::size_t>(t));
  kernels::rmsnorm_forward(saved.head_input.get(), weight(final_norm_tensor(model_)), t, h,
                           static_cast<float>(model_.norm_eps), saved.head_normed.get(), saved.head_rstd.get(),
                           stream());
  Scratch<bf16> logits(allocator_, count(t, v));
  gemm(false, false, t, v, h, saved.head_normed.get(), weight(lm_head_tensor(model_)), logits.get(), CUDA_R_16BF, 0);
  Scratch<float> row_loss(allocator_, static_cast<std::size_t>(t));
  saved.dlogits = Scratch<bf16>(allocator_, count(t, v));
  kernels::cross_entropy(logits.get(), micro_batch.targets.as<const std::int32_t>(), t, v, loss_scale, row_loss.get(),
                         saved.dlogits.get(), loss_sum, stream());
}

Scratch<bf16> DeviceStage::head_backward(const DeviceMicroBatch& micro_batch, StageSaved& saved) {
  const int t = micro_batch.tokens;
  const int h = static_cast<int>(model_.hidden);
  const int v = static_cast<int>(model_.vocab);
  Scratch<bf16> dnormed(allocator_, count(t, h));
  gemm(false, true, t, h, v, saved.dlogits.get(), weight(lm_head_tensor(model_)), dnormed.get(), CUDA_R_16BF, 0);
  gemm(true, false, h, v, t, saved.head_normed.get(), saved.dlogits.get(), gradient(lm_head_tensor(model_)), CUDA_R_32F,
       1);
  Scratch<bf16> dx(allocator_, count(t, h));
  rmsnorm_backward(saved.head_input.get(), weight(final_norm_tensor(model_)), saved.head_rstd.get(), dnormed.get(), t,
                   dx.get(), gradient(final_norm_tensor(model_)));
  return dx;
}

}  // namespace sluice::executor::cuda
