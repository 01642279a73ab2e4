#pragma once
// One lane of a pipeline stage of the model on a GPU: bf16 parameters (the lane's TP shards, shards.hpp), fp32
// gradients accumulated over micro-batches, activations in bf16 with fp32 accumulation inside every GEMM (cuBLAS,
// CUBLAS_COMPUTE_32F) and kernel. The same layers as the host backend's host::Stage, op for op, and with TP the same
// Megatron-LM tensor parallelism with sequence parallelism: between layers the lane holds its TP rank's rows of the
// micro-batch; an all-gather precedes each column-parallel GEMM and a reduce-scatter follows each row-parallel one;
// the embedding and the LM head are vocab-parallel, the cross-entropy too (kernels.hpp). With Ulysses CP the lane
// computes with its CP rank's tokens, and attention with its Ulysses rank's heads of all the micro-batch's tokens.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives.hpp"
#include "device.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/kernels.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/shards.hpp"

namespace sluice::executor::cuda {

// C[m×n] = op(A)·op(B) (+ beta·C) on `cublas`'s stream, row-major bf16 operands, C bf16 or fp32, fp32 accumulation:
// every GEMM of a stage, and the bench's GEMMs on the executor's shapes.
void row_major_gemm(cublasHandle_t cublas, bool transpose_a, bool transpose_b, int m, int n, int k, const bf16* a,
                    const bf16* b, void* c, cudaDataType_t c_type, float beta);

// A ring rank's block of a micro-batch as attention sees it: its tokens (the whole micro-batch without ring CP),
// sequence by sequence in position order.
struct DeviceBlock {
  int tokens = 0;
  int max_seqlen = 0;       // most tokens of one sequence
  DeviceBuffer cu_seqlens;  // int32, sequences + 1 offsets
  DeviceBuffer positions;   // int32, each token's position in its sequence; empty without ring CP
};

// What a lane computes with of a packed micro-batch, on the device: its CP rank's tokens (ids, targets, and the CSR
// of their positions grouped by token id for the embedding's backward); every ring rank's block, its own being the
// tokens its Ulysses group's attention covers; and the order in which the Ulysses ranks hold those.
struct DeviceMicroBatch {
  int tokens = 0;            // the CP rank's
  int attention_tokens = 0;  // its ring rank's block's
  int sequences = 0;
  int unique_tokens = 0;
  DeviceBuffer ids, targets, unique_ids, offsets, positions;  // int32
  Group ulysses{};
  // With Ulysses CP: by Ulysses rank, how many tokens it holds, and where each goes in the block (int32, rank after
  // rank); empty without.
  std::vector<int> ulysses_tokens;
  DeviceBuffer order;
  Group ring{};
  int ring_rank = 0;
  std::vector<DeviceBlock> blocks;  // by ring rank
  [[nodiscard]] const DeviceBlock& own_block() const { return blocks[static_cast<std::size_t>(ring_rank)]; }
  [[nodiscard]] kernels::VarlenBatch varlen() const {
    const DeviceBlock& block = own_block();
    return {block.cu_seqlens.as<const std::int32_t>(), sequences, block.max_seqlen, block.tokens};
  }
  [[nodiscard]] kernels::PositionedBatch positioned(int ring_rank_of_block) const {
    const DeviceBlock& block = blocks[static_cast<std::size_t>(ring_rank_of_block)];
    return {{block.cu_seqlens.as<const std::int32_t>(), sequences, block.max_seqlen, block.tokens},
            block.positions.as<const std::int32_t>()};
  }
};

// The whole micro-batch (CP 1).
DeviceMicroBatch upload_micro_batch(const PackedMicroBatch& micro_batch, cudaStream_t stream);
// CP rank `cp_rank`'s tokens of the micro-batch split as `split`, in the Ulysses group `ulysses` and the ring group
// `ring` (their sizes the split's degrees).
DeviceMicroBatch upload_micro_batch(const PackedMicroBatch& micro_batch, const CpSplit& split, int cp_rank,
                                    Group ulysses, Group ring, cudaStream_t stream);

// What one layer's backward needs from its forward.
// With Ulysses CP, qkv is the attention's side: this Ulysses rank's heads of its ring rank's block, and heads_out the
// attention's output there.
struct LayerSaved {
  Scratch<bf16> input, normed1, qkv, attention, heads_out, middle, normed2, gate_up, swiglu;
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
// Raises invalid_input for the model, and for a job whose TP the kernels cannot run: each TP rank's FFN columns must
// be a multiple of 8. Every CP kind, flex CP groups and full recompute run.
void require_gpu_job(const Job& job);

// A lane's TP rank in its TP group, and the exchange that moves the data of its collectives (TP's, Ulysses'
// all-to-alls and the ring's passes in the groups its micro-batches name); a lane of TP 1 and CP 1 needs none.
struct TensorParallelLane {
  int tp = 1;
  int tp_rank = 0;
  Group group{};
  DeviceExchange* exchange = nullptr;
};

// TP rank `tp_rank`'s shards of the initial values (model.hpp) of the tensors in `range`, as floats.
struct InitialShards {
  TensorRange range;
  int tp = 1;
  int tp_rank = 0;
  std::vector<std::vector<float>> values;  // by tensor - range.begin
};

// Drawn on every CPU the process may use, each tensor from its own random stream, so that the values do not depend
// on the thread count. Four LLaMA-7B-shaped layers (a billion values) take tens of seconds on one core: a backend
// draws once for all the lanes that hold the same shards (replicas, CP ranks).
InitialShards initial_shards(const ModelConfig& model, TensorRange range, int tp, int tp_rank);

class DeviceStage {
public:
  // Parameters get the lane's shards of the model's initial values, taken from `initial` (which must hold the lane's
  // TP shards of every tensor of the stage); gradients start at zero. Runs on `allocator`'s stream, on the current
  // device. With full recompute, the forward keeps each layer's input alone and the backward recomputes the layer
  // from it, collectives included.
  DeviceStage(const ModelConfig& model, int first_layer, int end_layer, bool first, bool last, Recompute recompute,
              StreamAllocator& allocator, TensorParallelLane lane, const InitialShards& initial);
  // The same, drawing the initial values itself.
  DeviceStage(const ModelConfig& model, int first_layer, int end_layer, bool first, bool last, Recompute recompute,
              StreamAllocator& allocator, TensorParallelLane lane = {});

  // input: int32 token ids of the CP rank's tokens on a first stage, else the lane's rows of the bf16 hidden states
  // [lane_rows, hidden]. Writes the lane's rows of the stage's output into `output`, or on a last stage adds the sum
  // of the cross-entropies of the lane's rows to *loss_sum and keeps dlogits (scaled by loss_scale) for the
  // backward.
  void forward(const DeviceMicroBatch& micro_batch, const void* input, bf16* output, float loss_scale, float* loss_sum,
               StageSaved& saved);
  // grad_output: the gradient of the lane's rows of the stage's output (unused on a last stage); writes that of its
  // input rows into grad_input (on a first stage the embedding's gradient is accumulated instead). Releases `saved`.
  void backward(const DeviceMicroBatch& micro_batch, const bf16* grad_output, bf16* grad_input, StageSaved& saved);

  // The lane's rows between layers of its CP rank's `tokens` tokens.
  [[nodiscard]] RowRange lane_rows(int tokens) const noexcept { return even_part(tokens, lane_.tp, lane_.tp_rank); }

  void zero_gradients();
  [[nodiscard]] TensorRange tensors() const noexcept { return tensors_; }
  [[nodiscard]] float* gradient(std::size_t tensor) const { return gradients_[tensor].as<float>(); }
  // The values of the lane's shard of a tensor it holds.
  [[nodiscard]] std::size_t tensor_size(std::size_t tensor) const { return gradients_[tensor].bytes() / sizeof(float); }
  [[nodiscard]] cudaStream_t stream() const noexcept { return allocator_.stream(); }

private:
  [[nodiscard]] const bf16* weight(std::size_t tensor) const { return parameters_[tensor].as<const bf16>(); }
  [[nodiscard]] const bf16* weight(int layer, ParameterKind kind) const { return weight(layer_tensor(layer, kind)); }
  [[nodiscard]] float* gradient(int layer, ParameterKind kind) const { return gradient(layer_tensor(layer, kind)); }
  // The heads of the lane's attention: its TP rank's, divided by the Ulysses degree.
  [[nodiscard]] kernels::HeadShape heads(int ulysses) const noexcept;
  // Ulysses' all-to-alls (Jacobs et al., arXiv 2309.14509, §3). to_heads: x [tokens, parts · h_t] (`parts` blocks
  // of the lane's heads' columns) to this Ulysses rank's columns of each block for every token of its ring rank's
  // block, in block order [attention_tokens, parts · h_t / U]; from_heads the reverse.
  [[nodiscard]] Scratch<bf16> to_heads(const DeviceMicroBatch& micro_batch, const bf16* x, int parts) const;
  [[nodiscard]] Scratch<bf16> from_heads(const DeviceMicroBatch& micro_batch, const bf16* heads, int parts) const;
  // Ring attention (Liu et al., arXiv 2310.01889, §3) over the block's qkv [attention_tokens, 3 · width] (the
  // lane's heads' q | k | v, roped): K and V pass around the ring, each step's block merged by log-sum-exp into out
  // [attention_tokens, width] and lse. The backward passes K and V round again with their dK and dV partial sums,
  // which end on the ring rank that holds the block; returns dq | dk | dv [attention_tokens, 3 · width].
  void ring_forward(const DeviceMicroBatch& micro_batch, const bf16* qkv, int width, bf16* out, float* lse) const;
  [[nodiscard]] Scratch<bf16> ring_backward(const DeviceMicroBatch& micro_batch, const bf16* qkv, const bf16* out,
                                            const bf16* dout, const float* lse, int width) const;
  // With TP 1 these return their input: the CP rank's [tokens, cols] from every lane's rows of it, and the lane's
  // rows of the sum over the group of [tokens, cols] partial sums.
  [[nodiscard]] Scratch<bf16> gather(Scratch<bf16> mine, int tokens, int cols) const;
  [[nodiscard]] Scratch<bf16> gathered(const bf16* mine, int tokens, int cols) const;  // TP > 1
  [[nodiscard]] Scratch<bf16> scatter(Scratch<bf16> partial, int tokens, int cols) const;
  // y = rmsnorm(x + branch), sum = x + branch; with branch null, y = rmsnorm(x) (sum unused).
  void rmsnorm_forward(const bf16* x, const bf16* branch, const bf16* weight, int rows, bf16* sum, bf16* y,
                       float* rstd) const;

  Scratch<bf16> layer_forward(int layer, const DeviceMicroBatch& micro_batch, Scratch<bf16> x, LayerSaved& saved);
  Scratch<bf16> layer_backward(int layer, const DeviceMicroBatch& micro_batch, LayerSaved& saved, Scratch<bf16> dy);
  void head_forward(const DeviceMicroBatch& micro_batch, Scratch<bf16> x, float loss_scale, float* loss_sum,
                    StageSaved& saved);
  Scratch<bf16> head_backward(const DeviceMicroBatch& micro_batch, StageSaved& saved);
  // C[m×n] = op(A)·op(B) (+ beta·C), row-major bf16 operands; C bf16 or fp32.
  void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, const bf16* a, const bf16* b, void* c,
            cudaDataType_t c_type, float beta) const;
  // dx = the norm's gradient + skip (null: none), the gradient that reaches x around the norm.
  void rmsnorm_backward(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy, const bf16* skip,
                        int rows, bf16* dx, float* dweight) const;

  ModelConfig model_;
  int first_layer_;
  int end_layer_;
  bool first_;
  bool last_;
  Recompute recompute_;
  TensorParallelLane lane_;
  TensorRange tensors_;
  StreamAllocator& allocator_;
  CublasHandle cublas_;
  DeviceCollectives collectives_;
  std::vector<DeviceBuffer> parameters_;  // bf16, by canonical tensor; empty outside tensors_
  std::vector<DeviceBuffer> gradients_;   // fp32
};

}  // namespace sluice::executor::cuda
