#pragma once
// One pipeline stage of the model on a GPU: bf16 parameters, fp32 gradients accumulated over micro-batches,
// activations in bf16 with fp32 accumulation inside every GEMM (cuBLAS, CUBLAS_COMPUTE_32F) and kernel. The same
// layers as the host backend's host::Stage, op for op.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "device.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/kernels.hpp"
#include "sluice_executor/model.hpp"

namespace sluice::executor::cuda {

// A packed micro-batch's metadata on the device, and the CSR of its token positions grouped by token id for the
// embedding's backward.
struct DeviceMicroBatch {
  int tokens = 0;
  int sequences = 0;
  int max_seqlen = 0;
  int unique_tokens = 0;
  DeviceBuffer cu_seqlens, ids, targets, unique_ids, offsets, positions;  // int32
  [[nodiscard]] kernels::VarlenBatch varlen() const {
    return {cu_seqlens.as<const std::int32_t>(), sequences, max_seqlen, tokens};
  }
};

DeviceMicroBatch upload_micro_batch(const PackedMicroBatch& micro_batch, cudaStream_t stream);

// What one layer's backward needs from its forward.
struct LayerSaved {
  Scratch<bf16> input, normed1, qkv, attention, middle, normed2, gate_up, swiglu;
  Scratch<float> rstd1, lse, rstd2;
};

// What a stage's backward needs from its forward.
struct StageSaved {
  std::vector<LayerSaved> layers;
  Scratch<bf16> head_input, head_normed, dlogits;
  Scratch<float> head_rstd;
};

// Raises invalid_input when the attention kernels cannot run the model (head_dim must be 64 or 128).
void require_gpu_model(const ModelConfig& model);
// Raises invalid_input for the model, and for a job whose degrees the CUDA backend does not run: it runs TP 1 and
// CP 1, with or without full recompute.
void require_gpu_job(const Job& job);

class DeviceStage {
public:
  // Parameters get the model's initial values; gradients start at zero. Runs on `allocator`'s stream, on the
  // current device. With full recompute, the forward keeps each layer's input alone and the backward recomputes the
  // layer from it.
  DeviceStage(const ModelConfig& model, int first_layer, int end_layer, bool first, bool last, Recompute recompute,
              StreamAllocator& allocator);

  // input: int32 token ids on a first stage, else bf16 hidden states [tokens, hidden]. Writes the stage's output
  // into `output` [tokens, hidden], or on a last stage adds the sum of the micro-batch's cross-entropies to
  // *loss_sum and keeps dlogits (scaled by loss_scale) for the backward.
  void forward(const DeviceMicroBatch& micro_batch, const void* input, bf16* output, float loss_scale, float* loss_sum,
               StageSaved& saved);
  // grad_output: the gradient of the stage's output (unused on a last stage); writes the gradient of its input
  // into grad_input (on a first stage the embedding's gradient is accumulated instead). Releases `saved`.
  void backward(const DeviceMicroBatch& micro_batch, const bf16* grad_output, bf16* grad_input, StageSaved& saved);

  void zero_gradients();
  [[nodiscard]] TensorRange tensors() const noexcept { return tensors_; }
  [[nodiscard]] float* gradient(std::size_t tensor) const { return gradients_[tensor].as<float>(); }
  [[nodiscard]] std::size_t tensor_size(std::size_t tensor) const { return gradients_[tensor].bytes() / sizeof(float); }
  [[nodiscard]] cudaStream_t stream() const noexcept { return allocator_.stream(); }
  [[nodiscard]] cublasHandle_t cublas() const noexcept { return cublas_.get(); }

private:
  [[nodiscard]] const bf16* weight(std::size_t tensor) const { return parameters_[tensor].as<const bf16>(); }
  [[nodiscard]] const bf16* weight(int layer, ParameterKind kind) const { return weight(layer_tensor(layer, kind)); }
  [[nodiscard]] float* gradient(int layer, ParameterKind kind) const { return gradient(layer_tensor(layer, kind)); }
  [[nodiscard]] kernels::HeadShape heads() const noexcept;

  Scratch<bf16> layer_forward(int layer, const DeviceMicroBatch& micro_batch, Scratch<bf16> x, LayerSaved& saved);
  Scratch<bf16> layer_backward(int layer, const DeviceMicroBatch& micro_batch, LayerSaved& saved, Scratch<bf16> dy);
  void head_forward(const DeviceMicroBatch& micro_batch, Scratch<bf16> x, float loss_scale, float* loss_sum,
                    StageSaved& saved);
  Scratch<bf16> head_backward(const DeviceMicroBatch& micro_batch, StageSaved& saved);
  // C[m×n] = op(A)·op(B) (+ beta·C), row-major bf16 operands; C bf16 or fp32.
  void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, const bf16* a, const bf16* b, void* c,
            cudaDataType_t c_type, float beta) const;
  void rmsnorm_backward(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy, int rows, bf16* dx,
                        float* dweight) const;

  ModelConfig model_;
  int first_layer_;
  int end_layer_;
  bool first_;
  bool last_;
  Recompute recompute_;
  TensorRange tensors_;
  StreamAllocator& allocator_;
  CublasHandle cublas_;
  std::vector<DeviceBuffer> parameters_;  // bf16, by canonical tensor; empty outside tensors_
  std::vector<DeviceBuffer> gradients_;   // fp32
};

}  // namespace sluice::executor::cuda
