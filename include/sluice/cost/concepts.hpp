#pragma once
// What the planners need from a cost model. Planners are templates over these concepts so that cost
// evaluation inlines into their inner loops (no virtual calls there).
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
