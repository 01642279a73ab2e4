#pragma once
// A seeded random engine with sluice's own distributions. The standard library's distributions
// are implementation-defined, so a plan made with libstdc++ would differ from one made with libc++;
// these produce the same numbers everywhere (xoshiro256** seeded through SplitMix64).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <span>
#include <utility>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"

namespace sluice {

namespace detail {
__extension__ using uint128 = unsigned __int128;  // GCC/Clang extension; wide multiply for Lemire's method
}  // namespace detail

class Rng {
public:
  using result_type = std::uint64_t;

  explicit Rng(std::uint64_t seed) noexcept {
    std::uint64_t mix = seed;
    for (std::uint64_t& word : state_) word = splitmix64(mix);
  }

  // An independent stream for (seed, stream): used per trial and per epoch so that results do not
  // depend on how work is split across threads.
  static Rng stream(std::uint64_t seed, std::uint64_t stream_index) noexcept {
    std::uint64_t mix = seed ^ 0x6a09e667f3bcc909ULL;
    const std::uint64_t a = splitmix64(mix);
    mix = stream_index + 0xbb67ae8584caa73bULL;
    const std::uint64_t b = splitmix64(mix);
    return Rng(a ^ std::rotl(b, 17));
  }

  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return std::numeric_limits<result_type>::max(); }

  result_type operator()() noexcept {
    const std::uint64_t result = std::rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = std::rotl(state_[3], 45);
    return result;
  }

  // Uniform integer in [0, bound), unbiased (Lemire's multiply-and-reject).
  std::uint64_t below(std::uint64_t bound) {
    sluice::require(bound > 0, "rng: bound must be > 0");
    detail::uint128 product = static_cast<detail::uint128>((*this)()) * bound;
    auto low = static_cast<std::uint64_t>(product);
    if (low < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        product = static_cast<detail::uint128>((*this)()) * bound;
        low = static_cast<std::uint64_t>(product);
      }
    }
    return static_cast<std::uint64_t>(product >> 64);
  }

  // Uniform integer in [lo, hi].
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi) {
    sluice::require(lo <= hi, "rng: empty range [", lo, ", ", hi, "]");
    const auto span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
    if (span == std::numeric_limits<std::uint64_t>::max()) return static_cast<std::int64_t>((*this)());
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + below(span + 1));
  }

  // Uniform double in [0, 1) with 53 random bits.
  double uniform() noexcept { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }

  // Standard normal by Box–Muller (one value per call; no cached state, so streams stay simple).
  double normal() noexcept {
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

  // Fisher–Yates with this engine's own bounded integers.
  template <class T>
  void shuffle(Span<T> items) {
    for (std::size_t i = items.size(); i > 1; --i) {
      const auto j = static_cast<std::size_t>(below(i));
      std::swap(items[i - 1], items[j]);
    }
  }
  template <class T, std::size_t Extent>
  void shuffle(std::span<T, Extent> items) {
    shuffle(Span<T>(items.data(), items.size()));
  }

private:
  static std::uint64_t splitmix64(std::uint64_t& x) noexcept {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  std::uint64_t state_[4]{};
};

}  // namespace sluice
