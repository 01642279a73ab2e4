#pragma once
// The interface of a profile's per-sequence cost models, checked against QuadraticLatency and LinearMemory
// (cost/profile.hpp). Dispatch, packing and proposal are not templates over these: each has one latency model,
// QuadraticLatency, a concrete class whose calls inline. The planner with two model types, the micro-batch DP
// (the quadratic closed form and the profiled grid), is a template over microbatch::MicroBatchCostModel
// (microbatch/types.hpp), which prices a whole micro-batch shape.
#include <concepts>
#include <cstdint>

namespace sluice::cost {

// Time of a packed micro-batch = Σ sequence_time(lᵢ) + microbatch_overhead(), in seconds.
template <class M>
concept LatencyModel = requires(const M& model, std::int64_t length) {
  { model.sequence_time(length) } -> std::convertible_to<double>;
  { model.microbatch_overhead() } -> std::convertible_to<double>;
};

// Peak bytes of a micro-batch of `length` tokens, and the longest length that fits.
template <class M>
concept MemoryModel = requires(const M& model, std::int64_t length) {
  { model.bytes(length) } -> std::convertible_to<double>;
  { model.max_len() } -> std::convertible_to<std::int64_t>;
};

}  // namespace sluice::cost
