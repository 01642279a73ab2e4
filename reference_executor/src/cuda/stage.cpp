#include "stage.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
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
#include "sluice_executor/shards.hpp"

namespace sluice::executor::cuda {

namespace {

constexpr std::size_t bf16_bytes = sizeof(bf16);

std::size_t count(std::int64_t rows, std::int64_t cols) { return static_cast<std::size_t>(rows * cols); }

void copy_device(void* to, const void* from, std::size_t bytes, cudaStream_t stream) {
  SLUICE_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

DeviceMicroBatch upload_micro_batch(const PackedMicroBatch& micro_batch, cudaStream_t stream) {
  return upload_micro_batch(micro_batch, cp_split(micro_batch.cu_seqlens, 1, 1), 0, Group{}, Group{}, stream);
}

DeviceMicroBatch upload_micro_batch(const PackedMicroBatch& micro_batch, const CpSplit& split, int cp_rank,
                                    Group ulysses, Group ring, cudaStream_t stream) {
  sluice::require(ulysses.size() == split.ulysses && ring.size() == split.ring, "micro-batch: a split of Ulysses ",
                  split.ulysses, " and ring ", split.ring, " in groups of ", ulysses.size(), " and ", ring.size());
  const CpShard& shard = split.shards[static_cast<std::size_t>(cp_rank)];
  DeviceMicroBatch result;
  result.tokens = static_cast<int>(shard.size());
  result.sequences = static_cast<int>(micro_batch.cu_seqlens.size()) - 1;
  result.ulysses = ulysses;
  result.ring = ring;
  result.ring_rank = cp_rank / split.ulysses;
  // Each block's packed rows in sequence and position order; without ring CP the block is the micro-batch, whose
  // rows are their own positions.
  std::vector<std::vector<std::int32_t>> block_rows;
  for (const CpShard& block : split.blocks) {
    std::vector<std::int32_t> rows = block.rows;
    std::sort(rows.begin(), rows.end());
    DeviceBlock device;
    device.tokens = static_cast<int>(rows.size());
    std::vector<std::int32_t> cu_seqlens{0}, positions;
    for (std::size_t s = 0; s + 1 < micro_batch.cu_seqlens.size(); ++s) {
      const auto first = std::lower_bound(rows.begin(), rows.end(), micro_batch.cu_seqlens[s]);
      const auto end = std::lower_bound(first, rows.end(), micro_batch.cu_seqlens[s + 1]);
      for (auto row = first; row != end; ++row) positions.push_back(*row - micro_batch.cu_seqlens[s]);
      cu_seqlens.push_back(static_cast<std::int32_t>(end - rows.begin()));
      device.max_seqlen = std::max(device.max_seqlen, static_cast<int>(end - first));
    }
    device.cu_seqlens = upload(cu_seqlens, stream);
    if (split.ring > 1) device.positions = upload(positions, stream);
    SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vectors die with this iteration
    result.blocks.push_back(std::move(device));
    block_rows.push_back(std::move(rows));
  }
  result.attention_tokens = result.own_block().tokens;
  std::vector<std::int32_t> ids, targets;
  for (const std::int32_t row : shard.rows) {
    ids.push_back(micro_batch.tokens[static_cast<std::size_t>(row)]);
    targets.push_back(micro_batch.targets[static_cast<std::size_t>(row)]);
  }
  // The CP rank's positions grouped by token id (stable, so each group is in position order): the embedding
  // backward sums each group in that fixed order.
  std::vector<std::int32_t> positions(ids.size());
  std::iota(positions.begin(), positions.end(), 0);
  std::stable_sort(positions.begin(), positions.end(), [&](std::int32_t x, std::int32_t y) {
    return ids[static_cast<std::size_t>(x)] < ids[static_cast<std::size_t>(y)];
  });
  std::vector<std::int32_t> unique_ids, offsets;
  for (std::size_t k = 0; k < positions.size(); ++k) {
    const std::int32_t token = ids[static_cast<std::size_t>(positions[k])];
    if (unique_ids.empty() || unique_ids.back() != token) {
      unique_ids.push_back(token);
      offsets.push_back(static_cast<std::int32_t>(k));
    }
  }
  offsets.push_back(static_cast<std::int32_t>(positions.size()));
  result.unique_tokens = static_cast<int>(unique_ids.size());
  // Without Ulysses the lane's tokens are its block's, in its order: no all-to-all, no order.
  std::vector<std::int32_t> order;
  const int first = cp_rank - cp_rank % split.ulysses;  // the Ulysses group's first CP rank
  const std::vector<std::int32_t>& own_rows = block_rows[static_cast<std::size_t>(result.ring_rank)];
  if (split.ulysses > 1)
    for (int u = 0; u < split.ulysses; ++u) {
      const CpShard& member = split.shards[static_cast<std::size_t>(first + u)];
      result.ulysses_tokens.push_back(static_cast<int>(member.size()));
      for (const std::int32_t row : member.rows)
        order.push_back(
            static_cast<std::int32_t>(std::lower_bound(own_rows.begin(), own_rows.end(), row) - own_rows.begin()));
    }
  result.ids = upload(ids, stream);
  result.targets = upload(targets, stream);
  result.unique_ids = upload(unique_ids, stream);
  result.offsets = upload(offsets, stream);
  result.positions = upload(positions, stream);
  result.order = upload(order, stream);
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
    require_tp(job.model, scheme.tp());
    sluice::require(job.model.ffn / scheme.tp() % 8 == 0, "job: pipeline ", p, " runs ", scheme.name(),
                    ", and the CUDA kernels need each TP rank's FFN columns (", job.model.ffn / scheme.tp(),
                    ") to be a multiple of 8");
  }
}

InitialShards initial_shards(const ModelConfig& model, TensorRange range, int tp, int tp_rank) {
  require_tp(model, tp);
  sluice::require(range.begin <= range.end && range.end <= tensor_count(model), "initial shards: tensors [",
                  range.begin, ", ", range.end, ") outside [0, ", tensor_count(model), ")");
  InitialShards shards{range, tp, tp_rank, std::vector<std::vector<float>>(range.end - range.begin)};
  std::atomic<std::size_t> next{range.begin};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto work = [&] {
    for (std::size_t tensor = next++; tensor < range.end; tensor = next++) {
      try {
        shards.values[tensor - range.begin] = initial_shard<float>(model, tensor, tp, tp_rank);
      } catch (...) {
        const std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  {
    const std::size_t threads = std::min<std::size_t>(usable_cpus(), shards.values.size());
    std::vector<std::jthread> helpers;
    for (std::size_t k = 1; k < threads; ++k) helpers.emplace_back(work);
    work();
  }
  if (failure) std::rethrow_exception(failure);
  return shards;
}

DeviceStage::DeviceStage(const ModelConfig& model, int first_layer, int end_layer, bool first, bool last,
                         Recompute recompute, StreamAllocator& allocator, TensorParallelLane lane,
                         const InitialShards& initial)
    : model_(model),
      first_layer_(first_layer),
      end_layer_(end_layer),
      first_(first),
      last_(last),
      recompute_(recompute),
      lane_(lane),
      tensors_(stage_tensors(model, first_layer, end_layer, first, last)),
      allocator_(allocator),
      cublas_(allocator.stream()),
      collectives_(lane.exchange, allocator) {
  require_gpu_model(model);
  require_tp(model, lane.tp);
  sluice::require(lane.tp_rank >= 0 && lane.tp_rank < lane.tp && lane.group.size() == lane.tp &&
                      (lane.tp == 1 || lane.exchange != nullptr),
                  "stage: TP rank ", lane.tp_rank, " of ", lane.tp, " in a group of ", lane.group.size());
  sluice::require(initial.tp == lane.tp && initial.tp_rank == lane.tp_rank && initial.range.begin <= tensors_.begin &&
                      tensors_.end <= initial.range.end &&
                      initial.values.size() == initial.range.end - initial.range.begin,
                  "stage: initial values of TP rank ", initial.tp_rank, " of ", initial.tp, " for tensors [",
                  initial.range.begin, ", ", initial.range.end, ") do not cover TP rank ", lane.tp_rank, " of ",
                  lane.tp, "'s tensors [", tensors_.begin, ", ", tensors_.end, ")");
  const std::vector<ParameterTensor> shapes = parameter_tensors(model);
  parameters_.resize(shapes.size());
  gradients_.resize(shapes.size());
  for (std::size_t t = tensors_.begin; t < tensors_.end; ++t) {
    const std::vector<float>& values = initial.values[t - initial.range.begin];
    const auto [rows, cols] = shard_shape(shapes[t], lane.tp);
    sluice::require(values.size() == count(rows, cols), "stage: initial values of tensor ", t, " hold ", values.size(),
                    " values, its shard ", rows, " x ", cols);
    const DeviceBuffer staged = upload(values, stream());
    parameters_[t] = DeviceBuffer(values.size() * bf16_bytes);
    kernels::convert(staged.as<const float>(), parameters_[t].as<bf16>(), static_cast<std::int64_t>(values.size()),
                     stream());
    gradients_[t] = DeviceBuffer(values.size() * sizeof(float));
    // `staged` is freed at the end of this iteration: the conversion must have read it.
    SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }
  zero_gradients();
}

DeviceStage::DeviceStage(const ModelConfig& model, int first_layer, int end_layer, bool first, bool last,
                         Recompute recompute, StreamAllocator& allocator, TensorParallelLane lane)
    : DeviceStage(
          model, first_layer, end_layer, first, last, recompute, allocator, lane,
          initial_shards(model, stage_tensors(model, first_layer, end_layer, first, last), lane.tp, lane.tp_rank)) {}

kernels::HeadShape DeviceStage::heads(int ulysses) const noexcept {
  return {model_.heads / lane_.tp / ulysses, static_cast<int>(head_dim(model_))};
}

namespace {

// Ulysses' shares of a lane's rows: x [rows, parts · h_t] holds `parts` blocks of the lane's heads' columns, and
// member u's share is columns [u · width, (u + 1) · width) of each block, packed [rows, parts · width] at
// u · rows · parts · width of `shares`. Copies every share out of x (to_shares), or back into it.
void copy_shares(const bf16* from, bf16* to, bool to_shares, int members, int h_t, int parts, std::size_t rows,
                 cudaStream_t stream) {
  if (rows == 0) return;
  const int width = h_t / members;
  const std::size_t share_pitch = count(parts, width) * bf16_bytes;
  const std::size_t lane_pitch = count(parts, h_t) * bf16_bytes;
  for (int u = 0; u < members; ++u)
    for (int p = 0; p < parts; ++p) {
      const std::size_t share = static_cast<std::size_t>(u) * rows * count(parts, width) + count(p, width);
      const std::size_t lane = count(p, h_t) + count(u, width);
      SLUICE_CUDA_CHECK(cudaMemcpy2DAsync(to + (to_shares ? share : lane), to_shares ? share_pitch : lane_pitch,
                                          from + (to_shares ? lane : share), to_shares ? lane_pitch : share_pitch,
                                          count(1, width) * bf16_bytes, rows, cudaMemcpyDeviceToDevice, stream));
    }
}

// Ulysses' all-to-all between the lane's side (each member's share of the lane's rows, as copy_shares packs them)
// and the block's side (the rows every member holds of the ring rank's block, member after member): to_block sends
// the lane's side and receives the block's, else the reverse. Rows hold `row_elements` values.
void exchange_shares(DeviceExchange& exchange, const DeviceMicroBatch& micro_batch, const bf16* sends, bf16* receives,
                     bool to_block, std::size_t row_elements, cudaStream_t stream) {
  const auto lane_rows = static_cast<std::size_t>(micro_batch.tokens);
  const std::size_t row_bytes = row_elements * bf16_bytes;
  std::vector<SendPart> send_parts;
  std::vector<ReceivePart> receive_parts;
  std::size_t block_row = 0;
  for (std::size_t u = 0; u < micro_batch.ulysses_tokens.size(); ++u) {
    const auto held = static_cast<std::size_t>(micro_batch.ulysses_tokens[u]);
    const std::size_t lane_offset = u * lane_rows * row_elements;
    const std::size_t block_offset = block_row * row_elements;
    if (to_block) {
      send_parts.push_back({sends + lane_offset, lane_rows * row_bytes});
      receive_parts.push_back({receives + block_offset, held * row_bytes});
    } else {
      send_parts.push_back({sends + block_offset, held * row_bytes});
      receive_parts.push_back({receives + lane_offset, lane_rows * row_bytes});
    }
    block_row += held;
  }
  exchange.all_to_all(micro_batch.ulysses, send_parts, receive_parts, stream);
}

}  // namespace

Scratch<bf16> DeviceStage::to_heads(const DeviceMicroBatch& micro_batch, const bf16* x, int parts) const {
  const int members = micro_batch.ulysses.size();
  const int h_t = static_cast<int>(model_.hidden) / lane_.tp;
  const std::size_t row_elements = count(parts, h_t / members);
  const auto rows = static_cast<std::size_t>(micro_batch.tokens);
  const Scratch<bf16> sends(allocator_, static_cast<std::size_t>(members) * rows * row_elements);
  copy_shares(x, sends.get(), true, members, h_t, parts, rows, stream());
  const auto all = static_cast<std::size_t>(micro_batch.attention_tokens);
  const Scratch<bf16> received(allocator_, all * row_elements);
  exchange_shares(*lane_.exchange, micro_batch, sends.get(), received.get(), true, row_elements, stream());
  Scratch<bf16> ordered(allocator_, all * row_elements);
  if (all > 0)  // a ring rank's block may hold no token of a short micro-batch
    kernels::scatter_rows(received.get(), micro_batch.order.as<const std::int32_t>(), micro_batch.attention_tokens,
                          static_cast<int>(row_elements), ordered.get(), stream());
  return ordered;
}

Scratch<bf16> DeviceStage::from_heads(const DeviceMicroBatch& micro_batch, const bf16* heads, int parts) const {
  const int members = micro_batch.ulysses.size();
  const int h_t = static_cast<int>(model_.hidden) / lane_.tp;
  const std::size_t row_elements = count(parts, h_t / members);
  const auto rows = static_cast<std::size_t>(micro_batch.tokens);
  const auto all = static_cast<std::size_t>(micro_batch.attention_tokens);
  const Scratch<bf16> held_order(allocator_, all * row_elements);
  if (all > 0)
    kernels::gather_rows(heads, micro_batch.order.as<const std::int32_t>(), micro_batch.attention_tokens,
                         static_cast<int>(row_elements), held_order.get(), stream());
  const Scratch<bf16> received(allocator_, static_cast<std::size_t>(members) * rows * row_elements);
  exchange_shares(*lane_.exchange, micro_batch, held_order.get(), received.get(), false, row_elements, stream());
  Scratch<bf16> result(allocator_, rows * count(parts, h_t));
  copy_shares(received.get(), result.get(), false, members, h_t, parts, rows, stream());
  return result;
}

void DeviceStage::zero_gradients() {
  for (std::size_t t = tensors_.begin; t < tensors_.end; ++t)
    kernels::fill_zero(gradients_[t].as<float>(), static_cast<std::int64_t>(tensor_size(t)), stream());
}

// Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS gets B first, with each operand's row length as its leading
// dimension.
void row_major_gemm(cublasHandle_t cublas, bool transpose_a, bool transpose_b, int m, int n, int k, const bf16* a,
                    const bf16* b, void* c, cudaDataType_t c_type, float beta) {
  const float alpha = 1.0f;
  const int lda = transpose_a ? m : k;
  const int ldb = transpose_b ? k : n;
  SLUICE_CUBLAS_CHECK(cublasGemmEx(cublas, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF, ldb, a,
                                   CUDA_R_16BF, lda, &beta, c, c_type, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void DeviceStage::gemm(bool transpose_a, bool transpose_b, int m, int n, int k, const bf16* a, const bf16* b, void* c,
                       cudaDataType_t c_type, float beta) const {
  row_major_gemm(cublas_.get(), transpose_a, transpose_b, m, n, k, a, b, c, c_type, beta);
}

// A lane with no rows of a short micro-batch (fewer tokens than TP) has nothing to normalise.
void DeviceStage::rmsnorm_forward(const bf16* x, const bf16* branch, const bf16* weight, int rows, bf16* sum, bf16* y,
                                  float* rstd) const {
  if (rows == 0) return;
  kernels::add_rmsnorm_forward(x, branch, weight, rows, static_cast<int>(model_.hidden),
                               static_cast<float>(model_.norm_eps), sum, y, rstd, stream());
}

void DeviceStage::rmsnorm_backward(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy,
                                   const bf16* skip, int rows, bf16* dx, float* dweight) const {
  if (rows == 0) return;
  const int hidden = static_cast<int>(model_.hidden);
  Scratch<float> workspace(allocator_, kernels::rmsnorm_backward_workspace_floats(rows, hidden));
  kernels::rmsnorm_backward(x, weight, rstd, dy, skip, rows, hidden, dx, dweight, workspace.get(), stream());
}

Scratch<bf16> DeviceStage::gathered(const bf16* mine, int tokens, int cols) const {
  Scratch<bf16> all(allocator_, count(tokens, cols));
  collectives_.all_gather(lane_.group, mine, tokens, cols, all.get());
  return all;
}

Scratch<bf16> DeviceStage::gather(Scratch<bf16> mine, int tokens, int cols) const {
  if (lane_.tp == 1) return mine;
  return gathered(mine.get(), tokens, cols);
}

Scratch<bf16> DeviceStage::scatter(Scratch<bf16> partial, int tokens, int cols) const {
  if (lane_.tp == 1) return partial;
  Scratch<bf16> mine(allocator_, count(lane_rows(tokens).size(), cols));
  collectives_.reduce_scatter(lane_.group, partial.get(), tokens, cols, mine.get());
  return mine;
}

void DeviceStage::forward(const DeviceMicroBatch& micro_batch, const void* input, bf16* output, float loss_scale,
                          float* loss_sum, StageSaved& saved) {
  const int tokens = micro_batch.tokens;
  const int h = static_cast<int>(model_.hidden);
  const std::size_t elements = count(lane_rows(tokens).size(), h);
  Scratch<bf16> x;
  if (first_) {
    const auto vocab_part = static_cast<int>(model_.vocab / lane_.tp);
    Scratch<bf16> looked_up(allocator_, count(tokens, h));
    embedding_forward(weight(embedding_tensor()), vocab_part * lane_.tp_rank, vocab_part,
                      static_cast<const std::int32_t*>(input), tokens, h, looked_up.get(), stream());
    x = scatter(std::move(looked_up), tokens, h);
  } else {
    x = Scratch<bf16>(allocator_, elements);
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
  const int tokens = micro_batch.tokens;
  const int h = static_cast<int>(model_.hidden);
  const std::size_t elements = count(lane_rows(tokens).size(), h);
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
    // The lookup's reduce-scatter turns back into an all-gather: every lane adds the rows of its vocabulary part.
    const Scratch<bf16> all = gather(std::move(dx), tokens, h);
    const auto vocab_part = static_cast<int>(model_.vocab / lane_.tp);
    embedding_backward(all.get(), micro_batch.unique_ids.as<const std::int32_t>(),
                       micro_batch.offsets.as<const std::int32_t>(), micro_batch.positions.as<const std::int32_t>(),
                       micro_batch.unique_tokens, h, vocab_part * lane_.tp_rank, vocab_part,
                       gradient(embedding_tensor()), stream());
  } else {
    copy_device(grad_input, dx.get(), elements * bf16_bytes, stream());
  }
  saved = {};
}

Scratch<bf16> DeviceStage::layer_forward(int layer, const DeviceMicroBatch& micro_batch, Scratch<bf16> x,
                                         LayerSaved& s) {
  const int t = micro_batch.tokens;
  const int rows = static_cast<int>(lane_rows(t).size());
  const int h = static_cast<int>(model_.hidden);
  const int h_t = h / lane_.tp;  // the lane's heads' columns
  const int f_t = static_cast<int>(model_.ffn) / lane_.tp;
  const kernels::VarlenBatch batch = micro_batch.varlen();
  s.input = std::move(x);
  Scratch<bf16> normed(allocator_, count(rows, h));
  s.rstd1 = Scratch<float>(allocator_, static_cast<std::size_t>(rows));
  rmsnorm_forward(s.input.get(), nullptr, weight(layer, ParameterKind::attention_norm), rows, nullptr, normed.get(),
                  s.rstd1.get());
  s.normed1 = gather(std::move(normed), t, h);
  Scratch<bf16> qkv(allocator_, count(t, 3 * h_t));
  gemm(false, false, t, 3 * h_t, h, s.normed1.get(), weight(layer, ParameterKind::qkv), qkv.get(), CUDA_R_16BF, 0);
  // With Ulysses CP, attention runs on this Ulysses rank's heads of every token of the micro-batch.
  const int ulysses = micro_batch.ulysses.size();
  const int width = h_t / ulysses;
  const int all = micro_batch.attention_tokens;
  s.qkv = ulysses == 1 ? std::move(qkv) : to_heads(micro_batch, qkv.get(), 3);
  bf16* q = s.qkv.get();
  const std::int32_t* positions = micro_batch.own_block().positions.as<const std::int32_t>();
  if (all > 0)
    kernels::rope_forward(batch, heads(ulysses), q, q + width, 3 * width, model_.rope_theta, stream(), positions);
  Scratch<bf16> attended(allocator_, count(all, width));
  s.lse = Scratch<float>(allocator_, count(heads(ulysses).num_heads, all));
  if (micro_batch.ring.size() > 1) {
    ring_forward(micro_batch, q, width, attended.get(), s.lse.get());
  } else {
    kernels::attention_forward(batch, heads(ulysses), q, q + width, q + 2 * width, 3 * width, attended.get(),
                               s.lse.get(), stream());
  }
  if (ulysses == 1) {
    s.attention = std::move(attended);
  } else {
    s.attention = from_heads(micro_batch, attended.get(), 1);
    s.heads_out = std::move(attended);
  }
  Scratch<bf16> partial(allocator_, count(t, h));
  gemm(false, false, t, h, h_t, s.attention.get(), weight(layer, ParameterKind::attention_output), partial.get(),
       CUDA_R_16BF, 0);
  const Scratch<bf16> projected = scatter(std::move(partial), t, h);
  s.middle = Scratch<bf16>(allocator_, count(rows, h));
  normed = Scratch<bf16>(allocator_, count(rows, h));
  s.rstd2 = Scratch<float>(allocator_, static_cast<std::size_t>(rows));
  rmsnorm_forward(s.input.get(), projected.get(), weight(layer, ParameterKind::mlp_norm), rows, s.middle.get(),
                  normed.get(), s.rstd2.get());
  s.normed2 = gather(std::move(normed), t, h);
  s.gate_up = Scratch<bf16>(allocator_, count(t, 2 * f_t));
  gemm(false, false, t, 2 * f_t, h, s.normed2.get(), weight(layer, ParameterKind::gate_up), s.gate_up.get(),
       CUDA_R_16BF, 0);
  s.swiglu = Scratch<bf16>(allocator_, count(t, f_t));
  if (t > 0) kernels::swiglu_forward(s.gate_up.get(), t, f_t, s.swiglu.get(), stream());
  partial = Scratch<bf16>(allocator_, count(t, h));
  gemm(false, false, t, h, f_t, s.swiglu.get(), weight(layer, ParameterKind::down), partial.get(), CUDA_R_16BF, 0);
  const Scratch<bf16> down = scatter(std::move(partial), t, h);
  Scratch<bf16> out(allocator_, count(rows, h));
  kernels::add(s.middle.get(), down.get(), out.get(), count(rows, h), stream());
  return out;
}

Scratch<bf16> DeviceStage::layer_backward(int layer, const DeviceMicroBatch& micro_batch, LayerSaved& s,
                                          Scratch<bf16> dy) {
  const int t = micro_batch.tokens;
  const int rows = static_cast<int>(lane_rows(t).size());
  const int h = static_cast<int>(model_.hidden);
  const int h_t = h / lane_.tp;
  const int f_t = static_cast<int>(model_.ffn) / lane_.tp;
  const kernels::VarlenBatch batch = micro_batch.varlen();
  // MLP branch: out = middle + swiglu(norm(middle)·Wgu)·Wdown. A reduce-scatter's gradient is an all-gather of the
  // rows' gradients, an all-gather's a reduce-scatter of the partial ones.
  const Scratch<bf16> dy_gathered = lane_.tp == 1 ? Scratch<bf16>() : gathered(dy.get(), t, h);
  const bf16* dy_all = lane_.tp == 1 ? dy.get() : dy_gathered.get();
  Scratch<bf16> dswiglu(allocator_, count(t, f_t));
  gemm(false, true, t, f_t, h, dy_all, weight(layer, ParameterKind::down), dswiglu.get(), CUDA_R_16BF, 0);
  gemm(true, false, f_t, h, t, s.swiglu.get(), dy_all, gradient(layer, ParameterKind::down), CUDA_R_32F, 1);
  Scratch<bf16> dgate_up(allocator_, count(t, 2 * f_t));
  if (t > 0) kernels::swiglu_backward(s.gate_up.get(), dswiglu.get(), t, f_t, dgate_up.get(), stream());
  Scratch<bf16> dpartial(allocator_, count(t, h));
  gemm(false, true, t, h, 2 * f_t, dgate_up.get(), weight(layer, ParameterKind::gate_up), dpartial.get(), CUDA_R_16BF,
       0);
  gemm(true, false, h, 2 * f_t, t, s.normed2.get(), dgate_up.get(), gradient(layer, ParameterKind::gate_up), CUDA_R_32F,
       1);
  Scratch<bf16> dnormed = scatter(std::move(dpartial), t, h);
  Scratch<bf16> dmiddle(allocator_, count(rows, h));
  rmsnorm_backward(s.middle.get(), weight(layer, ParameterKind::mlp_norm), s.rstd2.get(), dnormed.get(), dy.get(), rows,
                   dmiddle.get(), gradient(layer, ParameterKind::mlp_norm));
  // Attention branch: middle = input + attention(rope(norm(input)·Wqkv))·Wo.
  const Scratch<bf16> dmiddle_gathered = lane_.tp == 1 ? Scratch<bf16>() : gathered(dmiddle.get(), t, h);
  const bf16* dmiddle_all = lane_.tp == 1 ? dmiddle.get() : dmiddle_gathered.get();
  Scratch<bf16> dattention(allocator_, count(t, h_t));
  gemm(false, true, t, h_t, h, dmiddle_all, weight(layer, ParameterKind::attention_output), dattention.get(),
       CUDA_R_16BF, 0);
  gemm(true, false, h_t, h, t, s.attention.get(), dmiddle_all, gradient(layer, ParameterKind::attention_output),
       CUDA_R_32F, 1);
  const int ulysses = micro_batch.ulysses.size();
  const int width = h_t / ulysses;
  const int all = micro_batch.attention_tokens;
  const Scratch<bf16> dout_heads = ulysses == 1 ? Scratch<bf16>() : to_heads(micro_batch, dattention.get(), 1);
  const bf16* q = s.qkv.get();
  const bf16* out = ulysses == 1 ? s.attention.get() : s.heads_out.get();
  const bf16* dout = ulysses == 1 ? dattention.get() : dout_heads.get();
  Scratch<bf16> dheads;
  if (micro_batch.ring.size() > 1) {
    dheads = ring_backward(micro_batch, q, out, dout, s.lse.get(), width);
  } else {
    dheads = Scratch<bf16>(allocator_, count(all, 3 * width));
    Scratch<float> workspace(allocator_, kernels::attention_backward_workspace_floats(batch, heads(ulysses)));
    bf16* dq = dheads.get();
    kernels::attention_backward(batch, heads(ulysses), q, q + width, q + 2 * width, 3 * width, out, dout, s.lse.get(),
                                dq, dq + width, dq + 2 * width, 3 * width, workspace.get(), stream());
  }
  bf16* dq = dheads.get();
  const std::int32_t* positions = micro_batch.own_block().positions.as<const std::int32_t>();
  if (all > 0)
    kernels::rope_backward(batch, heads(ulysses), dq, dq + width, 3 * width, model_.rope_theta, stream(), positions);
  const Scratch<bf16> dqkv = ulysses == 1 ? std::move(dheads) : from_heads(micro_batch, dheads.get(), 3);
  dpartial = Scratch<bf16>(allocator_, count(t, h));
  gemm(false, true, t, h, 3 * h_t, dqkv.get(), weight(layer, ParameterKind::qkv), dpartial.get(), CUDA_R_16BF, 0);
  gemm(true, false, h, 3 * h_t, t, s.normed1.get(), dqkv.get(), gradient(layer, ParameterKind::qkv), CUDA_R_32F, 1);
  dnormed = scatter(std::move(dpartial), t, h);
  rmsnorm_backward(s.input.get(), weight(layer, ParameterKind::attention_norm), s.rstd1.get(), dnormed.get(),
                   dmiddle.get(), rows, dy.get(), gradient(layer, ParameterKind::attention_norm));
  s = {};
  return dy;
}

namespace {

// Sends `count` values to the next ring rank and returns the `received_count` the previous one sends.
template <class T>
Scratch<T> pass_on(DeviceExchange& exchange, StreamAllocator& allocator, const Group& ring, const T* values,
                   std::size_t count, std::size_t received_count) {
  const int size = ring.size();
  Scratch<T> received(allocator, received_count);
  std::vector<SendPart> sends(static_cast<std::size_t>(size));
  std::vector<ReceivePart> receives(static_cast<std::size_t>(size));
  sends[static_cast<std::size_t>((ring.index + 1) % size)] = {values, count * sizeof(T)};
  receives[static_cast<std::size_t>((ring.index + size - 1) % size)] = {received.get(), received_count * sizeof(T)};
  exchange.all_to_all(ring, sends, receives, allocator.stream());
  return received;
}

// K | V [rows, 2 · width] side by side, from the qkv [rows, 3 · width] of a block.
Scratch<bf16> keys_and_values(StreamAllocator& allocator, const bf16* qkv, int rows, int width) {
  Scratch<bf16> result(allocator, count(rows, 2 * width));
  if (rows > 0)
    SLUICE_CUDA_CHECK(cudaMemcpy2DAsync(result.get(), count(2, width) * bf16_bytes, qkv + width,
                                        count(3, width) * bf16_bytes, count(2, width) * bf16_bytes,
                                        static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, allocator.stream()));
  return result;
}

}  // namespace

void DeviceStage::ring_forward(const DeviceMicroBatch& micro_batch, const bf16* qkv, int width, bf16* out,
                               float* lse) const {
  const kernels::HeadShape shape = heads(micro_batch.ulysses.size());
  const int ring = micro_batch.ring.size();
  const int rows = micro_batch.attention_tokens;
  const std::size_t stats = count(shape.num_heads, rows);
  Scratch<float> merged(allocator_, count(rows, width));
  kernels::fill_zero(merged.get(), count(rows, width), stream());
  kernels::fill(lse, -INFINITY, static_cast<std::int64_t>(stats), stream());
  const Scratch<bf16> block_out(allocator_, count(rows, width));
  const Scratch<float> block_lse(allocator_, stats);
  Scratch<bf16> keys = keys_and_values(allocator_, qkv, rows, width);
  int owner = micro_batch.ring_rank;
  for (int step = 0; step < ring; ++step) {
    const int held = micro_batch.blocks[static_cast<std::size_t>(owner)].tokens;
    if (rows > 0 && held > 0) {
      kernels::block_attention_forward(micro_batch.positioned(micro_batch.ring_rank), micro_batch.positioned(owner),
                                       shape, qkv, 3 * width, keys.get(), keys.get() + width, 2 * width,
                                       block_out.get(), block_lse.get(), stream());
      kernels::attention_merge(block_out.get(), block_lse.get(), rows, shape, merged.get(), lse, stream());
    }
    if (step + 1 == ring) break;
    owner = (owner + ring - 1) % ring;
    keys = pass_on(*lane_.exchange, allocator_, micro_batch.ring, keys.get(), count(held, 2 * width),
                   count(micro_batch.blocks[static_cast<std::size_t>(owner)].tokens, 2 * width));
  }
  kernels::convert(merged.get(), out, static_cast<std::int64_t>(count(rows, width)), stream());
}

Scratch<bf16> DeviceStage::ring_backward(const DeviceMicroBatch& micro_batch, const bf16* qkv, const bf16* out,
                                         const bf16* dout, const float* lse, int width) const {
  const kernels::HeadShape shape = heads(micro_batch.ulysses.size());
  const int ring = micro_batch.ring.size();
  const int rows = micro_batch.attention_tokens;
  Scratch<float> dq(allocator_, count(rows, width));
  kernels::fill_zero(dq.get(), count(rows, width), stream());
  const Scratch<bf16> block_dq(allocator_, count(rows, width));
  const Scratch<float> workspace(allocator_, kernels::attention_backward_workspace_floats(micro_batch.varlen(), shape));
  Scratch<bf16> keys = keys_and_values(allocator_, qkv, rows, width);
  // The dK | dV partial sums of the block in hand, in fp32: they travel with it.
  Scratch<float> dkv(allocator_, count(rows, 2 * width));
  kernels::fill_zero(dkv.get(), count(rows, 2 * width), stream());
  int owner = micro_batch.ring_rank;
  for (int step = 0; step < ring; ++step) {
    const int held = micro_batch.blocks[static_cast<std::size_t>(owner)].tokens;
    if (rows > 0 && held > 0) {
      const Scratch<bf16> block_dkv(allocator_, count(held, 2 * width));
      kernels::block_attention_backward(micro_batch.positioned(micro_batch.ring_rank), micro_batch.positioned(owner),
                                        shape, qkv, 3 * width, keys.get(), keys.get() + width, 2 * width, out, dout,
                                        lse, block_dq.get(), width, block_dkv.get(), block_dkv.get() + width, 2 * width,
                                        workspace.get(), stream());
      kernels::add_inplace(dq.get(), block_dq.get(), static_cast<std::int64_t>(count(rows, width)), stream());
      kernels::add_inplace(dkv.get(), block_dkv.get(), static_cast<std::int64_t>(count(held, 2 * width)), stream());
    }
    // The block and its partial sums move on; after the last step only the sums travel, home to their owner.
    const int next_owner = (owner + ring - 1) % ring;
    const int arriving = micro_batch.blocks[static_cast<std::size_t>(next_owner)].tokens;
    dkv = pass_on(*lane_.exchange, allocator_, micro_batch.ring, dkv.get(), count(held, 2 * width),
                  count(arriving, 2 * width));
    if (step + 1 < ring)
      keys = pass_on(*lane_.exchange, allocator_, micro_batch.ring, keys.get(), count(held, 2 * width),
                     count(arriving, 2 * width));
    owner = next_owner;
  }
  // dq | dk | dv of the block's tokens, side by side.
  Scratch<bf16> result(allocator_, count(rows, 3 * width));
  if (rows > 0) {
    const Scratch<bf16> dq_bf16(allocator_, count(rows, width));
    const Scratch<bf16> dkv_bf16(allocator_, count(rows, 2 * width));
    kernels::convert(dq.get(), dq_bf16.get(), static_cast<std::int64_t>(count(rows, width)), stream());
    kernels::convert(dkv.get(), dkv_bf16.get(), static_cast<std::int64_t>(count(rows, 2 * width)), stream());
    const std::size_t pitch = count(3, width) * bf16_bytes;
    SLUICE_CUDA_CHECK(cudaMemcpy2DAsync(result.get(), pitch, dq_bf16.get(), count(1, width) * bf16_bytes,
                                        count(1, width) * bf16_bytes, static_cast<std::size_t>(rows),
                                        cudaMemcpyDeviceToDevice, stream()));
    SLUICE_CUDA_CHECK(cudaMemcpy2DAsync(result.get() + width, pitch, dkv_bf16.get(), count(2, width) * bf16_bytes,
                                        count(2, width) * bf16_bytes, static_cast<std::size_t>(rows),
                                        cudaMemcpyDeviceToDevice, stream()));
  }
  return result;
}

void DeviceStage::head_forward(const DeviceMicroBatch& micro_batch, Scratch<bf16> x, float loss_scale, float* loss_sum,
                               StageSaved& saved) {
  const int t = micro_batch.tokens;
  const RowRange own = lane_rows(t);
  const auto rows = static_cast<int>(own.size());
  const int h = static_cast<int>(model_.hidden);
  const int v_t = static_cast<int>(model_.vocab) / lane_.tp;
  saved.head_input = std::move(x);
  Scratch<bf16> normed(allocator_, count(rows, h));
  saved.head_rstd = Scratch<float>(allocator_, static_cast<std::size_t>(rows));
  rmsnorm_forward(saved.head_input.get(), nullptr, weight(final_norm_tensor(model_)), rows, nullptr, normed.get(),
                  saved.head_rstd.get());
  saved.head_normed = gather(std::move(normed), t, h);
  // The loss writes the logits' gradient over them: they are not needed after it.
  saved.dlogits = Scratch<bf16>(allocator_, count(t, v_t));
  bf16* logits = saved.dlogits.get();
  gemm(false, false, t, v_t, h, saved.head_normed.get(), weight(lm_head_tensor(model_)), logits, CUDA_R_16BF, 0);
  Scratch<float> row_loss(allocator_, static_cast<std::size_t>(t));
  const auto* targets = micro_batch.targets.as<const std::int32_t>();
  if (t == 0) return;  // a CP rank without tokens of the micro-batch (its TP group's lanes all skip alike)
  if (lane_.tp == 1) {
    kernels::cross_entropy(logits, targets, t, v_t, loss_scale, row_loss.get(), logits, loss_sum, stream());
    return;
  }
  // Each row's maximum, exp-sum and target logit over the whole vocabulary, every lane holding a part of it.
  const int first_id = v_t * lane_.tp_rank;
  Scratch<float> local(allocator_, 2 * static_cast<std::size_t>(t));
  Scratch<float> row_max(allocator_, static_cast<std::size_t>(t));
  kernels::vocab_parallel_normalizer(logits, t, v_t, local.get(), row_max.get(), stream());
  collectives_.all_reduce_max(lane_.group, row_max.get(), t);
  Scratch<float> sums(allocator_, 2 * static_cast<std::size_t>(t));
  kernels::vocab_parallel_sums(logits, targets, t, v_t, first_id, local.get(), row_max.get(), sums.get(), stream());
  collectives_.all_reduce_sum(lane_.group, sums.get(), 2 * static_cast<std::int64_t>(t));
  kernels::vocab_parallel_loss(logits, targets, t, v_t, first_id, row_max.get(), sums.get(), loss_scale,
                               static_cast<int>(own.begin), static_cast<int>(own.end), row_loss.get(), logits, loss_sum,
                               stream());
}

Scratch<bf16> DeviceStage::head_backward(const DeviceMicroBatch& micro_batch, StageSaved& saved) {
  const int t = micro_batch.tokens;
  const int rows = static_cast<int>(lane_rows(t).size());
  const int h = static_cast<int>(model_.hidden);
  const int v_t = static_cast<int>(model_.vocab) / lane_.tp;
  Scratch<bf16> dpartial(allocator_, count(t, h));
  gemm(false, true, t, h, v_t, saved.dlogits.get(), weight(lm_head_tensor(model_)), dpartial.get(), CUDA_R_16BF, 0);
  gemm(true, false, h, v_t, t, saved.head_normed.get(), saved.dlogits.get(), gradient(lm_head_tensor(model_)),
       CUDA_R_32F, 1);
  const Scratch<bf16> dnormed = scatter(std::move(dpartial), t, h);
  Scratch<bf16> dx(allocator_, count(rows, h));
  rmsnorm_backward(saved.head_input.get(), weight(final_norm_tensor(model_)), saved.head_rstd.get(), dnormed.get(),
                   nullptr, rows, dx.get(), gradient(final_norm_tensor(model_)));
  return dx;
}

}  // namespace sluice::executor::cuda
