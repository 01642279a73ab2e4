// Cross-entropy over bf16 logits with fp32 softmax. One block per row reads the row twice: once for the softmax's
// maximum and sum together (an online normalizer), once for the gradient, which it writes; then one block sums the
// row losses in a fixed order into the caller's accumulator, so the loss sum is deterministic.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "device_reduce.cuh"
#include "host_checks.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"
#include "softmax_rows.cuh"

namespace sluice::executor::kernels {
namespace {

constexpr int kRowThreads = 256;
constexpr int kSumThreads = 1024;

template <bool kAligned>
__global__ void __launch_bounds__(kRowThreads)
    cross_entropy_kernel(const bf16* logits, const std::int32_t* targets, int vocab, float scale, float* row_loss,
                         bf16* dlogits) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const bf16* row_logits = logits + row * vocab;
  bf16* row_gradient = dlogits + row * vocab;
  const int target = targets[row];
  if (target == -1) {  // the same for the whole block
    detail::write_zero_row<kAligned, kRowThreads>(vocab, row_gradient);
    if (threadIdx.x == 0) row_loss[row] = 0.0f;
    return;
  }
  const detail::SoftmaxNormalizer normalizer =
      detail::row_normalizer<kAligned, kRowThreads>(row_logits, vocab, scratch);
  // Read before the gradient is written: dlogits may be logits.
  const bool known_target = target >= 0 && target < vocab;
  const float target_logit = known_target ? __bfloat162float(row_logits[target]) : NAN;
  __syncthreads();
  detail::write_softmax_gradient<kAligned, kRowThreads>(row_logits, vocab, normalizer.max, normalizer.sum, target,
                                                        scale, row_gradient);
  if (threadIdx.x == 0) row_loss[row] = normalizer.max + logf(normalizer.sum) - target_logit;
}

}  // namespace

void cross_entropy(const bf16* logits, const std::int32_t* targets, int rows, int vocab, float scale, float* row_loss,
                   bf16* dlogits, float* loss_sum_accum, cudaStream_t stream) {
  detail::require_positive(rows, "rows");
  detail::require_positive(vocab, "vocab");
  sluice::require(std::isfinite(scale), "scale: must be finite, got ", scale);
  detail::require_pointer(logits, "logits");
  detail::require_pointer(targets, "targets");
  detail::require_pointer(row_loss, "row_loss");
  detail::require_pointer(dlogits, "dlogits");
  detail::require_pointer(loss_sum_accum, "loss_sum_accum");
  const auto blocks = static_cast<unsigned int>(rows);
  if (detail::rows_aligned(vocab, {logits, dlogits}))
    cross_entropy_kernel<true><<<blocks, kRowThreads, 0, stream>>>(logits, targets, vocab, scale, row_loss, dlogits);
  else
    cross_entropy_kernel<false><<<blocks, kRowThreads, 0, stream>>>(logits, targets, vocab, scale, row_loss, dlogits);
  SLUICE_LAUNCH_CHECK("cross_entropy");
  detail::sum_into_kernel<kSumThreads><<<1, kSumThreads, 0, stream>>>(row_loss, rows, loss_sum_accum);
  SLUICE_LAUNCH_CHECK("cross_entropy (loss sum)");
}

}  // namespace sluice::executor::kernels
