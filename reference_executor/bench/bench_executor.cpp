// GPU benchmarks of the reference executor (docs/executor.md reports them). Each skips with an error when no CUDA
// device is present. Times are CUDA-event times of the GPU work (manual time); counters:
//   BM_AttentionForwardBackward/<tokens>  one causal sequence, 32 heads × 128 (LLaMA-7B's attention). Forward
//       FLOPs 2·tokens²·hidden (QKᵀ and PV are 2·tokens²·hidden each, halved by the causal mask), backward 2.5× the
//       forward (five products instead of two): TFLOP/s = 7·tokens²·hidden / time.
//   BM_AttentionVarlen/<tokens>           the same over `tokens` tokens packed from a fixed mix of sequence lengths
//       (128 to 4096): TFLOP/s = 7·hidden·Σ length² / time.
//   BM_AttentionMma/<tokens>, BM_AttentionMmaVarlen/<tokens>
//                                         the same two through the register-resident mma kernels.
//   BM_AttentionMmaForward/<tokens>, BM_AttentionMmaBackward/<tokens>
//                                         BM_AttentionMma's two halves alone, to show which one falls short:
//       forward 2·tokens²·hidden FLOPs, backward 5·tokens²·hidden (the useful products, not the recomputed ones).
//   BM_AttentionMma64Forward/<tokens>     BM_AttentionMmaForward with the earlier 64-row query tiles (16 rows a
//       warp, AttentionKernel::mma64): what the 128-row tiles give, measured in the same run.
//   BM_AttentionMmaSinglePassBackward/<tokens>, BM_AttentionMmaSinglePassVarlen/<tokens>
//                                         BM_AttentionMmaBackward and BM_AttentionMmaVarlen with the backward in one
//       pass (AttentionKernel::mma_single_pass: 5 products, not 7, and dQ's shares added in turn).
//   BM_RingAttentionSteps/<tokens>        one causal sequence as ring CP 4 computes it, serialized on this GPU: every
//       ring rank's queries against every block (block_attention_forward and attention_merge, then
//       block_attention_backward), the steps' dK, dV and dQ left unsummed; TFLOP/s counted as the whole
//       sequence's causal attention, so that BM_AttentionMma at the same tokens shows what the blocking costs.
//   BM_Gemm/8192                          bf16 × bf16 → bf16 with fp32 accumulation through cublasGemmEx,
//       2·n³ FLOPs: the device's GEMM rate to compare attention with.
//   BM_GemmLt/8192                        the same through cuBLASLt (heuristic's first algorithm, 32 MiB workspace).
//   BM_LayerStack/<tokens>                forward + backward of 4 LLaMA-7B-shaped decoder layers (hidden 4096,
//       32 heads, ffn 11008) on `tokens` tokens packed from sequences of 2048, with the attention kernels the
//       executor was built with (SLUICE_EXECUTOR_ATTENTION): tokens/s.
//   BM_LayerElementwise/<tokens>/<fused>  one such layer's elementwise kernels, forward and backward, as a stage runs
//       them (the two RMSNorms, RoPE, SwiGLU, the residual adds) on sequences of 2048: GB/s of the bytes they must
//       read and write, to hold against the HBM's rate. fused 0 runs each residual add as its own pass, as the
//       stage did before add_rmsnorm_forward and rmsnorm_backward's skip gradient.
//   BM_CrossEntropy/<tokens>/<tp>         the loss over a 32,000-word vocabulary, its gradient written over the
//       logits: tp 1 cross_entropy, tp > 1 one rank's vocab-parallel kernels over its 32,000 / tp words (without
//       the all-reduces between them). GB/s of two reads of the logits and one write.
#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice_executor/cuda_check.hpp"
#include "device.hpp"
#include "stage.hpp"
#include "sluice/core/random.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/kernels.hpp"
#include "sluice_executor/launch.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/shards.hpp"

namespace ex = sluice::executor;
namespace cu = sluice::executor::cuda;
namespace kn = sluice::executor::kernels;

namespace {

constexpr int heads = 32;
constexpr int head_dim = 128;
constexpr int hidden = heads * head_dim;

bool skip_without_gpu(benchmark::State& state) {
  if (cu::device_count() > 0) return false;
  state.SkipWithError("no CUDA device");
  return true;
}

// Times `work` (enqueued on `stream`) with CUDA events, one benchmark iteration each. The first timed iteration of
// each benchmark in a process runs between cudaProfilerStart and cudaProfilerStop, so that a profiler started with
// profiling off (`ncu --profile-from-start off`) sees exactly one iteration; without a profiler they do nothing.
template <class Work>
void time_on_stream(benchmark::State& state, cudaStream_t stream, Work&& work) {
  work();  // warm-up: cuBLAS heuristics, the allocator's pool
  SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream));
  const cu::Event start, end;
  static bool profiled = false;  // one per Work type: per benchmark function
  for (auto _ : state) {
    const bool profile = !std::exchange(profiled, true);
    if (profile) SLUICE_CUDA_CHECK(cudaProfilerStart());
    start.record(stream);
    work();
    end.record(stream);
    if (profile) SLUICE_CUDA_CHECK(cudaProfilerStop());
    SLUICE_CUDA_CHECK(cudaEventSynchronize(end.get()));
    state.SetIterationTime(cu::seconds_between(start, end));
  }
}

// Uniform in [-1, 1): random, since constant or zero data can run faster than real data does. Drawn on all host
// cores, one random stream per chunk, so that the 32K- and 64K-token cases (up to 800 M values) set up in seconds.
void fill_bf16(void* data, std::size_t elements, cudaStream_t stream) {
  constexpr std::size_t chunk = std::size_t{1} << 22;
  const std::size_t chunks = (elements + chunk - 1) / chunk;
  std::vector<float> values(elements);
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t c = next++; c < chunks; c = next++) {
      sluice::Rng rng = sluice::Rng::stream(elements, c);
      for (std::size_t i = c * chunk; i < std::min(elements, (c + 1) * chunk); ++i)
        values[i] = static_cast<float>(2.0 * rng.uniform() - 1.0);
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (unsigned k = 1; k < sluice::executor::usable_cpus(); ++k) helpers.emplace_back(work);
    work();
  }
  const cu::DeviceBuffer staged = cu::upload(values, stream);
  kn::convert(staged.as<const float>(), static_cast<cu::bf16*>(data), static_cast<std::int64_t>(elements), stream);
  SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// What one timed iteration runs, and its FLOPs in units of hidden·Σ length².
enum class AttentionPhase { forward = 2, backward = 5, both = 7 };

// Causal attention over the packed sequences `offsets` (cu_seqlens), 32 heads × 128; TFLOP/s counted as
// 2 (forward), 5 (backward) or 7 (both)·hidden·Σ length². The backward alone starts from a forward run untimed.
void time_attention(benchmark::State& state, const std::vector<std::int32_t>& offsets, kn::AttentionKernel kernel,
                    AttentionPhase phase = AttentionPhase::both) {
  const cu::Stream stream;
  const cu::DeviceBuffer cu_seqlens = cu::upload(offsets, stream.get());
  const int tokens = offsets.back();
  int longest = 0;
  double squares = 0;
  for (std::size_t i = 1; i < offsets.size(); ++i) {
    const int length = offsets[i] - offsets[i - 1];
    longest = std::max(longest, length);
    squares += static_cast<double>(length) * length;
  }
  const kn::VarlenBatch batch{cu_seqlens.as<const std::int32_t>(), static_cast<int>(offsets.size() - 1), longest,
                              tokens};
  const kn::HeadShape shape{heads, head_dim};
  const auto rows = static_cast<std::size_t>(tokens);
  const cu::DeviceBuffer qkv(rows * 3 * hidden * sizeof(cu::bf16)), dqkv(rows * 3 * hidden * sizeof(cu::bf16));
  const cu::DeviceBuffer out(rows * hidden * sizeof(cu::bf16)), dout(rows * hidden * sizeof(cu::bf16));
  const cu::DeviceBuffer lse(rows * heads * sizeof(float));
  const cu::DeviceBuffer workspace(kn::attention_backward_workspace_floats(batch, shape, kernel) * sizeof(float));
  fill_bf16(qkv.as<void>(), rows * 3 * hidden, stream.get());
  fill_bf16(dout.as<void>(), rows * hidden, stream.get());
  const cu::bf16* q = qkv.as<const cu::bf16>();
  cu::bf16* dq = dqkv.as<cu::bf16>();
  const auto forward = [&] {
    kn::attention_forward(batch, shape, q, q + hidden, q + 2 * hidden, 3 * hidden, out.as<cu::bf16>(), lse.as<float>(),
                          stream.get(), kernel);
  };
  const auto backward = [&] {
    kn::attention_backward(batch, shape, q, q + hidden, q + 2 * hidden, 3 * hidden, out.as<const cu::bf16>(),
                           dout.as<const cu::bf16>(), lse.as<const float>(), dq, dq + hidden, dq + 2 * hidden,
                           3 * hidden, workspace.as<float>(), stream.get(), kernel);
  };
  if (phase == AttentionPhase::backward) forward();
  time_on_stream(state, stream.get(), [&] {
    if (phase != AttentionPhase::backward) forward();
    if (phase != AttentionPhase::forward) backward();
  });
  const double flops = static_cast<double>(phase) * squares * hidden;
  state.counters["TFLOP/s"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_AttentionForwardBackward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  time_attention(state, {0, static_cast<std::int32_t>(state.range(0))}, kn::AttentionKernel::wmma);
}
BENCHMARK(BM_AttentionForwardBackward)
    ->Arg(4096)
    ->Arg(16384)
    ->Arg(32768)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Sequence lengths of BM_AttentionVarlen's packed micro-batch, repeated (the last cut) up to its token count: long
// and short documents mixed, as a long-tailed dataset packs. They sum to 16384; scripts/compare-torch.py packs the
// same list.
constexpr std::array<std::int32_t, 11> varlen_lengths{4096, 1024, 256, 2048, 512, 128, 3072, 768, 1536, 384, 2560};

// cu_seqlens of `tokens` tokens packed from varlen_lengths.
std::vector<std::int32_t> varlen_offsets(std::int32_t tokens) {
  std::vector<std::int32_t> offsets{0};
  for (std::size_t i = 0; offsets.back() < tokens; ++i)
    offsets.push_back(offsets.back() + std::min(varlen_lengths[i % varlen_lengths.size()], tokens - offsets.back()));
  return offsets;
}

void BM_AttentionVarlen(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  time_attention(state, varlen_offsets(static_cast<std::int32_t>(state.range(0))), kn::AttentionKernel::wmma);
}
BENCHMARK(BM_AttentionVarlen)->Arg(16384)->Arg(65536)->UseManualTime()->Unit(benchmark::kMillisecond);

// The register-resident mma kernels on the same shapes as the wmma ones, whole and by half.
void BM_AttentionMma(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  time_attention(state, {0, static_cast<std::int32_t>(state.range(0))}, kn::AttentionKernel::mma);
}
BENCHMARK(BM_AttentionMma)->Arg(4096)->Arg(16384)->Arg(32768)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_AttentionMmaForward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  time_attention(state, {0, static_cast<std::int32_t>(state.range(0))}, kn::AttentionKernel::mma,
                 AttentionPhase::forward);
}
BENCHMARK(BM_AttentionMmaForward)->Arg(4096)->Arg(16384)->Arg(32768)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_AttentionMma64Forward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  time_attention(state, {0, static_cast<std::int32_t>(state.range(0))}, kn::AttentionKernel::mma64,
                 AttentionPhase::forward);
}
BENCHMARK(BM_AttentionMma64Forward)->Arg(4096)->Arg(16384)->Arg(32768)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_AttentionMmaBackward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  time_attention(state, {0, static_cast<std::int32_t>(state.range(0))}, kn::AttentionKernel::mma,
                 AttentionPhase::backward);
}
BENCHMARK(BM_AttentionMmaBackward)->Arg(4096)->Arg(16384)->Arg(32768)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_AttentionMmaVarlen(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  time_attention(state, varlen_offsets(static_cast<std::int32_t>(state.range(0))), kn::AttentionKernel::mma);
}
BENCHMARK(BM_AttentionMmaVarlen)->Arg(16384)->Arg(65536)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_AttentionMmaSinglePassBackward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  time_attention(state, {0, static_cast<std::int32_t>(state.range(0))}, kn::AttentionKernel::mma_single_pass,
                 AttentionPhase::backward);
}
BENCHMARK(BM_AttentionMmaSinglePassBackward)
    ->Arg(4096)
    ->Arg(16384)
    ->Arg(32768)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_AttentionMmaSinglePassVarlen(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  time_attention(state, varlen_offsets(static_cast<std::int32_t>(state.range(0))),
                 kn::AttentionKernel::mma_single_pass);
}
BENCHMARK(BM_AttentionMmaSinglePassVarlen)->Arg(16384)->Arg(65536)->UseManualTime()->Unit(benchmark::kMillisecond);

// One ring rank's block of a sequence on the device: its rows of q | k | v, dO, and what its steps write.
struct RingBlock {
  std::size_t rows = 0;
  cu::DeviceBuffer cu_seqlens, positions, qkv, out, dout, lse, workspace, dq, dkv, merged;
  kn::PositionedBatch batch;
};

void BM_RingAttentionSteps(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  constexpr int ring = 4;
  const cu::Stream stream;
  const auto tokens = static_cast<std::int32_t>(state.range(0));
  const ex::CpSplit split = ex::cp_split(std::vector<std::int32_t>{0, tokens}, 1, ring);
  std::vector<RingBlock> blocks(ring);
  for (std::size_t r = 0; r < blocks.size(); ++r) {
    RingBlock& block = blocks[r];
    const ex::CpShard& shard = split.blocks[r];
    block.rows = static_cast<std::size_t>(shard.size());
    block.cu_seqlens = cu::upload(std::vector<std::int32_t>{0, static_cast<std::int32_t>(block.rows)}, stream.get());
    block.positions = cu::upload(shard.positions, stream.get());
    block.qkv = cu::DeviceBuffer(block.rows * 3 * hidden * sizeof(cu::bf16));
    block.out = cu::DeviceBuffer(block.rows * hidden * sizeof(cu::bf16));
    block.dout = cu::DeviceBuffer(block.rows * hidden * sizeof(cu::bf16));
    block.lse = cu::DeviceBuffer(block.rows * heads * sizeof(float));
    block.dq = cu::DeviceBuffer(block.rows * hidden * sizeof(cu::bf16));
    block.dkv = cu::DeviceBuffer(block.rows * 2 * hidden * sizeof(cu::bf16));
    block.merged = cu::DeviceBuffer(block.rows * hidden * sizeof(float));
    fill_bf16(block.qkv.as<void>(), block.rows * 3 * hidden, stream.get());
    fill_bf16(block.dout.as<void>(), block.rows * hidden, stream.get());
    const auto rows = static_cast<int>(block.rows);
    block.batch = {{block.cu_seqlens.as<const std::int32_t>(), 1, rows, rows},
                   block.positions.as<const std::int32_t>()};
    block.workspace =
        cu::DeviceBuffer(kn::attention_backward_workspace_floats(block.batch.rows, {heads, head_dim}) * sizeof(float));
  }
  const kn::HeadShape shape{heads, head_dim};
  std::size_t largest = 0;
  for (const RingBlock& block : blocks) largest = std::max(largest, block.rows);
  const cu::DeviceBuffer step_out(largest * hidden * sizeof(cu::bf16)), step_lse(largest * heads * sizeof(float));
  const auto run = [&] {
    for (RingBlock& queries : blocks) {
      const auto rows = static_cast<std::int64_t>(queries.rows);
      kn::fill_zero(queries.merged.as<float>(), rows * hidden, stream.get());
      kn::fill(queries.lse.as<float>(), -INFINITY, rows * heads, stream.get());
      const cu::bf16* q = queries.qkv.as<const cu::bf16>();
      for (const RingBlock& keys : blocks) {
        const cu::bf16* k = keys.qkv.as<const cu::bf16>() + hidden;
        kn::block_attention_forward(queries.batch, keys.batch, shape, q, 3 * hidden, k, k + hidden, 3 * hidden,
                                    step_out.as<cu::bf16>(), step_lse.as<float>(), stream.get());
        kn::attention_merge(step_out.as<const cu::bf16>(), step_lse.as<const float>(), static_cast<int>(rows), shape,
                            queries.merged.as<float>(), queries.lse.as<float>(), stream.get());
      }
      kn::convert(queries.merged.as<const float>(), queries.out.as<cu::bf16>(), rows * hidden, stream.get());
      for (const RingBlock& keys : blocks) {
        const cu::bf16* k = keys.qkv.as<const cu::bf16>() + hidden;
        cu::bf16* dk = keys.dkv.as<cu::bf16>();
        kn::block_attention_backward(queries.batch, keys.batch, shape, q, 3 * hidden, k, k + hidden, 3 * hidden,
                                     queries.out.as<const cu::bf16>(), queries.dout.as<const cu::bf16>(),
                                     queries.lse.as<const float>(), queries.dq.as<cu::bf16>(), hidden, dk, dk + hidden,
                                     2 * hidden, queries.workspace.as<float>(), stream.get());
      }
    }
  };
  time_on_stream(state, stream.get(), run);
  const double flops = static_cast<double>(AttentionPhase::both) * static_cast<double>(tokens) * tokens * hidden;
  state.counters["TFLOP/s"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_RingAttentionSteps)->Arg(16384)->Arg(32768)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_Gemm(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto n = static_cast<int>(state.range(0));
  const cu::Stream stream;
  const cu::CublasHandle cublas(stream.get());
  const auto elements = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  const cu::DeviceBuffer a(elements * sizeof(cu::bf16)), b(elements * sizeof(cu::bf16)), c(elements * sizeof(cu::bf16));
  fill_bf16(a.as<void>(), elements, stream.get());
  fill_bf16(b.as<void>(), elements, stream.get());
  const float alpha = 1.0f, beta = 0.0f;
  time_on_stream(state, stream.get(), [&] {
    SLUICE_CUBLAS_CHECK(cublasGemmEx(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.as<const void>(),
                                     CUDA_R_16BF, n, b.as<const void>(), CUDA_R_16BF, n, &beta, c.as<void>(),
                                     CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  });
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  state.counters["TFLOP/s"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Gemm)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);

// BM_Gemm's product through cuBLASLt with a 32 MiB workspace (what a framework's matmul gets): the algorithm its
// heuristic ranks `rank`th (0: the first, which a framework takes), labelled with its algorithm, tile and stages ids.
void time_gemm_lt(benchmark::State& state, int rank) {
  if (skip_without_gpu(state)) return;
  const auto n = static_cast<std::uint64_t>(state.range(0));
  const cu::Stream stream;
  const auto elements = static_cast<std::size_t>(n * n);
  const cu::DeviceBuffer a(elements * sizeof(cu::bf16)), b(elements * sizeof(cu::bf16)), c(elements * sizeof(cu::bf16));
  fill_bf16(a.as<void>(), elements, stream.get());
  fill_bf16(b.as<void>(), elements, stream.get());
  constexpr std::size_t workspace_bytes = std::size_t{32} << 20;
  const cu::DeviceBuffer workspace(workspace_bytes);

  // Owned so that a failed call frees them: each deleter is the library's destroy function.
  const auto owned = [](auto* object, auto destroy) {
    return std::unique_ptr<std::remove_pointer_t<decltype(object)>, decltype(destroy)>(object, destroy);
  };
  cublasLtHandle_t raw_handle = nullptr;
  SLUICE_CUBLAS_CHECK(cublasLtCreate(&raw_handle));
  const auto handle = owned(raw_handle, &cublasLtDestroy);
  cublasLtMatmulDesc_t raw_operation = nullptr;
  SLUICE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const auto operation = owned(raw_operation, &cublasLtMatmulDescDestroy);
  cublasLtMatrixLayout_t raw_layout = nullptr;  // every operand is n × n, column-major, leading dimension n
  SLUICE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw_layout, CUDA_R_16BF, n, n, static_cast<std::int64_t>(n)));
  const auto layout = owned(raw_layout, &cublasLtMatrixLayoutDestroy);
  cublasLtMatmulPreference_t raw_preference = nullptr;
  SLUICE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_preference));
  const auto preference = owned(raw_preference, &cublasLtMatmulPreferenceDestroy);
  SLUICE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &workspace_bytes, sizeof(workspace_bytes)));
  std::vector<cublasLtMatmulHeuristicResult_t> ranked(static_cast<std::size_t>(rank) + 1);
  int found = 0;
  SLUICE_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle.get(), operation.get(), layout.get(), layout.get(),
                                                     layout.get(), layout.get(), preference.get(), rank + 1,
                                                     ranked.data(), &found));
  if (found <= rank || ranked.back().state != CUBLAS_STATUS_SUCCESS) {
    state.SkipWithError("cuBLASLt's heuristic has no algorithm of this rank for this product");
    return;
  }
  const cublasLtMatmulHeuristicResult_t& heuristic = ranked.back();
  std::int32_t algorithm = 0;
  std::uint32_t tile = 0, stages = 0;
  SLUICE_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&heuristic.algo, CUBLASLT_ALGO_CONFIG_ID, &algorithm,
                                                           sizeof(algorithm), nullptr));
  SLUICE_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&heuristic.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                                           sizeof(tile), nullptr));
  SLUICE_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&heuristic.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                                           sizeof(stages), nullptr));
  state.SetLabel("algorithm " + std::to_string(algorithm) + ", tile " + std::to_string(tile) + ", stages " +
                 std::to_string(stages));
  const float alpha = 1.0f, beta = 0.0f;
  time_on_stream(state, stream.get(), [&] {
    SLUICE_CUBLAS_CHECK(cublasLtMatmul(handle.get(), operation.get(), &alpha, a.as<const void>(), layout.get(),
                                       b.as<const void>(), layout.get(), &beta, c.as<const void>(), layout.get(),
                                       c.as<void>(), layout.get(), &heuristic.algo, workspace.as<void>(),
                                       workspace_bytes, stream.get()));
  });
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  state.counters["TFLOP/s"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_GemmLt(benchmark::State& state) { time_gemm_lt(state, 0); }
BENCHMARK(BM_GemmLt)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);

// The heuristic's first 8 algorithms one by one: whether another than the first reaches torch.matmul's rate.
void BM_GemmLtRanked(benchmark::State& state) { time_gemm_lt(state, static_cast<int>(state.range(1))); }
BENCHMARK(BM_GemmLtRanked)
    ->ArgsProduct({{8192}, benchmark::CreateDenseRange(0, 7, 1)})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// BM_GemmLayer's operands on `tokens` tokens (0.74 G values drawn on the host's cores): built once per process and
// size.
struct GemmLayerOperands {
  struct Product {  // y[tokens × n] = x[tokens × k]·w[k × n]; dw holds fp32 or bf16
    int n, k;
    cu::DeviceBuffer x, w, dy, y, dx, dw;
  };
  explicit GemmLayerOperands(int tokens) {
    constexpr int ffn = 11008;
    constexpr std::array<std::pair<int, int>, 4> shapes{
        {{3 * hidden, hidden}, {hidden, hidden}, {2 * ffn, hidden}, {hidden, ffn}}};
    for (const auto& [n, k] : shapes) {
      const auto rows = static_cast<std::size_t>(tokens);
      const auto in = rows * static_cast<std::size_t>(k), out = rows * static_cast<std::size_t>(n);
      const auto weights = static_cast<std::size_t>(k) * static_cast<std::size_t>(n);
      Product& p = products.emplace_back(
          Product{n, k, cu::DeviceBuffer(in * sizeof(cu::bf16)), cu::DeviceBuffer(weights * sizeof(cu::bf16)),
                  cu::DeviceBuffer(out * sizeof(cu::bf16)), cu::DeviceBuffer(out * sizeof(cu::bf16)),
                  cu::DeviceBuffer(in * sizeof(cu::bf16)), cu::DeviceBuffer(weights * sizeof(float))});
      fill_bf16(p.x.as<void>(), in, stream.get());
      fill_bf16(p.w.as<void>(), weights, stream.get());
      fill_bf16(p.dy.as<void>(), out, stream.get());
    }
  }
  cu::Stream stream;
  cu::CublasHandle cublas{stream.get()};
  std::vector<Product> products;
};

// The GEMMs of one LLaMA-7B-shaped layer's forward and backward (QKV, attention output, gate|up, down: y = x·W, then
// dx = dy·Wᵀ and dW = xᵀ·dy) on the executor's shapes, through the call every stage makes (row_major_gemm). The
// second argument says how dW is written: 1, accumulated in fp32 (beta 1) as the executor keeps its gradients; 0, in
// bf16 (beta 0) as autograd writes it for bf16 parameters. The two measure what the fp32 accumulation costs.
void BM_GemmLayer(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto tokens = static_cast<int>(state.range(0));
  const bool fp32_gradients = state.range(1) != 0;
  // Never destroyed: freeing device memory after the CUDA runtime has shut down at exit would fail.
  static std::map<int, GemmLayerOperands*> built;
  GemmLayerOperands*& operands = built[tokens];
  if (operands == nullptr) operands = new GemmLayerOperands(tokens);
  const cudaStream_t stream = operands->stream.get();
  const cublasHandle_t cublas = operands->cublas.get();
  double flops = 0;
  for (const GemmLayerOperands::Product& p : operands->products) {
    flops += 3 * 2.0 * tokens * p.n * p.k;
    SLUICE_CUDA_CHECK(cudaMemsetAsync(p.dw.as<void>(), 0, p.dw.bytes(), stream));  // the other variant's dW
  }
  time_on_stream(state, stream, [&] {
    for (const GemmLayerOperands::Product& p : operands->products)
      cu::row_major_gemm(cublas, false, false, tokens, p.n, p.k, p.x.as<const cu::bf16>(), p.w.as<const cu::bf16>(),
                         p.y.as<void>(), CUDA_R_16BF, 0);
    for (const GemmLayerOperands::Product& p : operands->products) {
      cu::row_major_gemm(cublas, false, true, tokens, p.k, p.n, p.dy.as<const cu::bf16>(), p.w.as<const cu::bf16>(),
                         p.dx.as<void>(), CUDA_R_16BF, 0);
      cu::row_major_gemm(cublas, true, false, p.k, p.n, tokens, p.x.as<const cu::bf16>(), p.dy.as<const cu::bf16>(),
                         p.dw.as<void>(), fp32_gradients ? CUDA_R_32F : CUDA_R_16BF, fp32_gradients ? 1.0f : 0.0f);
    }
  });
  state.counters["TFLOP/s"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GemmLayer)->Args({8192, 1})->Args({8192, 0})->UseManualTime()->Unit(benchmark::kMillisecond);

// The layer benchmarks' batches: `tokens` packed from sequences of 2048.
constexpr std::int32_t kLayerSequence = 2048;
std::vector<std::int32_t> layer_sequence_offsets(std::int32_t tokens) {
  std::vector<std::int32_t> offsets{0};
  while (offsets.back() < tokens) offsets.push_back(std::min(tokens, offsets.back() + kLayerSequence));
  return offsets;
}

// 4 LLaMA-7B-shaped layers (0.8 G parameters, initialised on the host's cores): built once per process.
struct LayerStack {
  static ex::ModelConfig config() {
    ex::ModelConfig model;
    model.layers = 4;
    model.hidden = hidden;
    model.heads = heads;
    model.ffn = 11008;
    model.vocab = 32000;
    return model;
  }
  cu::Stream stream;
  cu::StreamAllocator allocator{stream.get()};
  cu::DeviceStage stage{config(), 0, config().layers, false, false, sluice::Recompute::none, allocator};
};

void BM_LayerStack(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto tokens = static_cast<std::int32_t>(state.range(0));
  // Never destroyed: freeing device memory after the CUDA runtime has shut down at exit would fail.
  static LayerStack* const fixture = new LayerStack;
  const cu::Stream& stream = fixture->stream;
  cu::DeviceStage& stage = fixture->stage;
  ex::PackedMicroBatch packed;
  packed.cu_seqlens = layer_sequence_offsets(tokens);
  packed.tokens.assign(static_cast<std::size_t>(tokens), 0);
  packed.targets.assign(static_cast<std::size_t>(tokens), -1);
  packed.max_seqlen = std::min(tokens, kLayerSequence);
  const cu::DeviceMicroBatch micro_batch = cu::upload_micro_batch(packed, stream.get());
  const auto elements = static_cast<std::size_t>(tokens) * hidden;
  const cu::DeviceBuffer input(elements * sizeof(cu::bf16)), output(elements * sizeof(cu::bf16));
  const cu::DeviceBuffer grad_output(elements * sizeof(cu::bf16)), grad_input(elements * sizeof(cu::bf16));
  fill_bf16(input.as<void>(), elements, stream.get());
  fill_bf16(grad_output.as<void>(), elements, stream.get());
  time_on_stream(state, stream.get(), [&] {
    cu::StageSaved saved;
    stage.forward(micro_batch, input.as<const void>(), output.as<cu::bf16>(), 0, nullptr, saved);
    stage.backward(micro_batch, grad_output.as<const cu::bf16>(), grad_input.as<cu::bf16>(), saved);
  });
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_LayerStack)->Arg(8192)->Arg(16384)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_LayerElementwise(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto tokens = static_cast<int>(state.range(0));
  const bool fused = state.range(1) != 0;
  constexpr int ffn = 11008;
  const cu::Stream stream;
  const std::vector<std::int32_t> offsets = layer_sequence_offsets(tokens);
  const cu::DeviceBuffer cu_seqlens = cu::upload(offsets, stream.get());
  const kn::VarlenBatch batch{cu_seqlens.as<const std::int32_t>(), static_cast<int>(offsets.size() - 1),
                              std::min(tokens, kLayerSequence), tokens};
  const auto rows = static_cast<std::size_t>(tokens);
  const auto activation = [&] { return cu::DeviceBuffer(rows * hidden * sizeof(cu::bf16)); };
  // x, the attention's projection and the MLP's down projection; middle, normed; their gradients.
  const cu::DeviceBuffer x = activation(), projected = activation(), down = activation(), middle = activation();
  const cu::DeviceBuffer normed = activation(), out = activation(), dy = activation(), dnormed = activation();
  const cu::DeviceBuffer dmiddle = activation(), dx = activation();
  const cu::DeviceBuffer qkv(rows * 3 * hidden * sizeof(cu::bf16)), dqkv(rows * 3 * hidden * sizeof(cu::bf16));
  const cu::DeviceBuffer gate_up(rows * 2 * ffn * sizeof(cu::bf16)), dgate_up(rows * 2 * ffn * sizeof(cu::bf16));
  const cu::DeviceBuffer swiglu(rows * ffn * sizeof(cu::bf16)), dswiglu(rows * ffn * sizeof(cu::bf16));
  const cu::DeviceBuffer weight(hidden * sizeof(cu::bf16)), rstd(rows * sizeof(float));
  const cu::DeviceBuffer dweight(hidden * sizeof(float));
  const cu::DeviceBuffer workspace(kn::rmsnorm_backward_workspace_floats(tokens, hidden) * sizeof(float));
  // RoPE's time does not depend on its values: q and k stay zero, and the host draws only the rest.
  for (const cu::DeviceBuffer* buffer : {&x, &projected, &down, &dy, &dnormed, &weight, &gate_up, &dswiglu})
    fill_bf16(buffer->as<void>(), buffer->bytes() / sizeof(cu::bf16), stream.get());
  for (const cu::DeviceBuffer* buffer : {&qkv, &dqkv})
    kn::fill_zero(buffer->as<cu::bf16>(), static_cast<std::int64_t>(buffer->bytes() / sizeof(cu::bf16)), stream.get());
  const kn::HeadShape shape{heads, head_dim};
  const auto elements = static_cast<std::int64_t>(rows * hidden);
  const auto* w = weight.as<const cu::bf16>();
  const float eps = 1e-5f;
  // x + branch into sum, and its norm; unfused, the add's own pass first.
  const auto add_norm = [&](const cu::bf16* branch, cu::bf16* sum) {
    if (fused) {
      kn::add_rmsnorm_forward(x.as<const cu::bf16>(), branch, w, tokens, hidden, eps, sum, normed.as<cu::bf16>(),
                              rstd.as<float>(), stream.get());
    } else {
      kn::add(x.as<const cu::bf16>(), branch, sum, elements, stream.get());
      kn::rmsnorm_forward(sum, w, tokens, hidden, eps, normed.as<cu::bf16>(), rstd.as<float>(), stream.get());
    }
  };
  // The norm's gradient plus the skip gradient, into dx.
  const auto norm_backward = [&](const cu::bf16* input, const cu::bf16* skip, cu::bf16* gradient) {
    kn::rmsnorm_backward(input, w, rstd.as<const float>(), dnormed.as<const cu::bf16>(), fused ? skip : nullptr, tokens,
                         hidden, gradient, dweight.as<float>(), workspace.as<float>(), stream.get());
    if (!fused) kn::add_inplace(gradient, skip, elements, stream.get());
  };
  cu::bf16* q = qkv.as<cu::bf16>();
  cu::bf16* dq = dqkv.as<cu::bf16>();
  time_on_stream(state, stream.get(), [&] {
    kn::rmsnorm_forward(x.as<const cu::bf16>(), w, tokens, hidden, eps, normed.as<cu::bf16>(), rstd.as<float>(),
                        stream.get());
    kn::rope_forward(batch, shape, q, q + hidden, 3 * hidden, 10000.0, stream.get());
    add_norm(projected.as<const cu::bf16>(), middle.as<cu::bf16>());
    kn::swiglu_forward(gate_up.as<const cu::bf16>(), tokens, ffn, swiglu.as<cu::bf16>(), stream.get());
    kn::add(middle.as<const cu::bf16>(), down.as<const cu::bf16>(), out.as<cu::bf16>(), elements, stream.get());
    kn::swiglu_backward(gate_up.as<const cu::bf16>(), dswiglu.as<const cu::bf16>(), tokens, ffn,
                        dgate_up.as<cu::bf16>(), stream.get());
    norm_backward(middle.as<const cu::bf16>(), dy.as<const cu::bf16>(), dmiddle.as<cu::bf16>());
    kn::rope_backward(batch, shape, dq, dq + hidden, 3 * hidden, 10000.0, stream.get());
    norm_backward(x.as<const cu::bf16>(), dmiddle.as<const cu::bf16>(), dx.as<cu::bf16>());
  });
  // The bytes the fused kernels must move, in [tokens, hidden] and [tokens, ffn] bf16 tensors: forward, the norm
  // (2), RoPE on q and k (4), the fused add and norm (4), SwiGLU (3 of ffn), the add (3); backward, SwiGLU (5 of
  // ffn), two norms with their skip gradients (4 each), RoPE (4).
  const double bytes = 2.0 * static_cast<double>(rows) * (25.0 * hidden + 8.0 * ffn);
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_LayerElementwise)->Args({8192, 1})->Args({8192, 0})->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_CrossEntropy(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto tokens = static_cast<int>(state.range(0));
  const auto tp = static_cast<int>(state.range(1));
  constexpr int vocab = 32000;
  const int part = vocab / tp;
  const cu::Stream stream;
  const auto rows = static_cast<std::size_t>(tokens);
  const cu::DeviceBuffer logits(rows * static_cast<std::size_t>(part) * sizeof(cu::bf16));
  std::vector<std::int32_t> target_ids(rows);
  for (std::size_t r = 0; r < rows; ++r) target_ids[r] = static_cast<std::int32_t>(r * 7919 % vocab);
  const cu::DeviceBuffer targets = cu::upload(target_ids, stream.get());
  const cu::DeviceBuffer row_loss(rows * sizeof(float)), loss_sum(sizeof(float));
  const cu::DeviceBuffer local(2 * rows * sizeof(float)), row_max(rows * sizeof(float));
  const cu::DeviceBuffer sums(2 * rows * sizeof(float));
  auto* values = logits.as<cu::bf16>();
  const auto* ids = targets.as<const std::int32_t>();
  const float scale = 1.0f / static_cast<float>(tokens);
  // The gradient is written over the logits, as a stage does: each iteration starts from the last one's gradient,
  // whose softmax costs the same. TP > 1 times one rank's three kernels, without the all-reduces between them.
  fill_bf16(values, rows * static_cast<std::size_t>(part), stream.get());
  time_on_stream(state, stream.get(), [&] {
    if (tp == 1) {
      kn::cross_entropy(values, ids, tokens, vocab, scale, row_loss.as<float>(), values, loss_sum.as<float>(),
                        stream.get());
      return;
    }
    kn::vocab_parallel_normalizer(values, tokens, part, local.as<float>(), row_max.as<float>(), stream.get());
    kn::vocab_parallel_sums(values, ids, tokens, part, 0, local.as<const float>(), row_max.as<const float>(),
                            sums.as<float>(), stream.get());
    kn::vocab_parallel_loss(values, ids, tokens, part, 0, row_max.as<const float>(), sums.as<const float>(), scale, 0,
                            tokens, row_loss.as<float>(), values, loss_sum.as<float>(), stream.get());
  });
  // Two reads of the logits and one write of their gradient.
  const double bytes = 3.0 * sizeof(cu::bf16) * static_cast<double>(rows) * part;
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CrossEntropy)->Args({8192, 1})->Args({8192, 4})->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
