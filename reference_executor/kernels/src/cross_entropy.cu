// Cross-entropy over bf16 logits with fp32 softmax. One block per row, three passes over the row (max,
// sum of exponentials, gradient), then one block sums the row losses in a fixed order into the caller's
// accumulator, so the loss sum is deterministic.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "device_reduce.cuh"
#include "host_checks.hpp"
#include "sluice_executor/cuda_check.hpp"
#include "sluice_executor/kernels.hpp"

namespace sluice::executor::kernels {
namespace {

using detail::block_max;
using detail::block_sum;

constexpr int kRowThreads = 256;
constexpr int kSumThreads = 1024;

__global__ void __launch_bounds__(kRowThreads)
    cross_entropy_kernel(const bf16* logits, const std::int32_t* targets, int vocab, float scale, float* row_loss,
                         bf16* dlogits) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const bf16* row_logits = logits + row * vocab;
  bf16* row_gradient = dlogits + row * vocab;
  const int target = targets[row];
  if (target == -1) {  // the same for the whole block
    for (int c = threadIdx.x; c < vocab; c += kRowThreads) row_gradient[c] = __float2bfloat16(0.0f);
    if (threadIdx.x == 0) row_loss[row] = 0.0f;
    return;
  }
  float local_max = -INFINITY;
  for (int c = threadIdx.x; c < vocab; c += kRowThreads) local_max = fmaxf(local_max, __bfloat162float(row_logits[c]));
  const float max_logit = block_max(local_max, scratch);
  float local_sum = 0.0f;
  for (int c = threadIdx.x; c < vocab; c += kRowThreads) local_sum += expf(__bfloat162float(row_logits[c]) - max_logit);
  const float sum = block_sum(local_sum, scratch);
  const float inverse_sum = 1.0f / sum;
  for (int c = threadIdx.x; c < vocab; c += kRowThreads) {
    const float probability = expf(__bfloat162float(row_logits[c]) - max_logit) * inverse_sum;
    row_gradient[c] = __float2bfloat16((probability - (c == target ? 1.0f : 0.0f)) * scale);
  }
  if (threadIdx.x == 0) {
    const bool known_target = target >= 0 && target < vocab;
    row_loss[row] = known_target ? max_logit + logf(sum) - __bfloat162float(row_logits[target]) : NAN;
  }
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
  cross_entropy_kernel<<<static_cast<unsigned int>(rows), kRowThreads, 0, stream>>>(logits, targets, vocab, scale,
                                                                                    row_loss, dlogits);
  SLUICE_LAUNCH_CHECK("cross_entropy");
  detail::sum_into_kernel<kSumThreads><<<1, kSumThreads, 0, stream>>>(row_loss, rows, loss_sum_accum);
  SLUICE_LAUNCH_CHECK("cross_entropy (loss sum)");
}

}  // namespace sluice::executor::kernels
