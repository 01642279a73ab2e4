#pragma once
// One training sequence: an identifier (its index in the dataset or batch) and its length in tokens.
#include <algorithm>
#include <cstdint>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"

namespace sluice {

class Sequence {
public:
  Sequence(std::int64_t id, std::int64_t length) : id_(id), length_(length) {
    sluice::require(id >= 0, "sequence: id must be >= 0, got ", id);
    sluice::require(length > 0, "sequence ", id, ": length must be > 0, got ", length);
  }

  [[nodiscard]] std::int64_t id() const noexcept { return id_; }
  [[nodiscard]] std::int64_t length() const noexcept { return length_; }

  friend bool operator==(const Sequence&, const Sequence&) = default;

private:
  std::int64_t id_;
  std::int64_t length_;
};

// The length of a batch's longest sequence, 0 for an empty batch: what every scheme a batch may run on must hold.
[[nodiscard]] inline std::int64_t longest_length(Span<const Sequence> batch) noexcept {
  std::int64_t longest = 0;
  for (const Sequence& sequence : batch) longest = std::max(longest, sequence.length());
  return longest;
}

}  // namespace sluice
