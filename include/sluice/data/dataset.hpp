#pragma once
// A validated list of sequence lengths, with summary statistics and length histograms.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/data/readers.hpp"

namespace sluice::data {

struct LengthStats {
  std::int64_t count = 0;
  std::int64_t tokens = 0;
  std::int64_t min = 0;
  std::int64_t max = 0;
  std::int64_t p50 = 0;  // percentiles by nearest rank: the smallest length with at least p% of lengths <= it
  std::int64_t p90 = 0;
  std::int64_t p99 = 0;
  std::int64_t truncated = 0;  // lengths cut to the context
  double mean = 0;
  friend bool operator==(const LengthStats&, const LengthStats&) = default;
};

// Holds the lengths in (lower, upper]: left-open like the intervals (l - l', l] of Hydraulis's proposal DP.
struct HistogramBin {
  std::int64_t lower = 0;
  std::int64_t upper = 0;
  std::int64_t count = 0;
  friend bool operator==(const HistogramBin&, const HistogramBin&) = default;
};

// Bins from the first to the last non-empty one; empty bins in between are kept with count 0.
struct LengthHistogram {
  std::int64_t bin_width = 0;
  std::vector<HistogramBin> bins;
  friend bool operator==(const LengthHistogram&, const LengthHistogram&) = default;
};

// More bins than this means a bin width far too small for the data (a width of 1 over lengths up to 4 Gi).
inline constexpr std::int64_t max_histogram_bins = std::int64_t{1} << 22;

// The limits on count and length keep the token total at most 2^60: it cannot overflow.
static_assert(max_plausible_length <=
              std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(max_length_count));

class LengthDataset {
public:
  LengthDataset(std::vector<std::int64_t> lengths, std::string source)
      : lengths_(std::move(lengths)), source_(std::move(source)) {
    sluice::require(!lengths_.empty(), source_, ": no lengths");
    sluice::require(lengths_.size() <= max_length_count, source_, ": ", lengths_.size(),
                    " lengths, more than the limit of ", max_length_count);
    for (std::size_t i = 0; i < lengths_.size(); ++i) {
      detail::check_length(lengths_[i], source_, "index", i);
      tokens_ += lengths_[i];
    }
  }

  // Reads a length file chosen by extension (see read_lengths); the path becomes the source name.
  static LengthDataset load(const std::filesystem::path& path) { return {read_lengths(path), path.string()}; }

  // Lengths above `context` become `context`, as a trainer truncates documents. Truncating an already
  // truncated dataset keeps the tighter context, and the count stays relative to the original lengths.
  [[nodiscard]] LengthDataset truncated(std::int64_t context) const {
    sluice::require(context >= 1, source_, ": context must be >= 1, got ", context);
    if (context_ && *context_ <= context) return *this;
    std::vector<std::int64_t> cut(lengths_);
    std::int64_t count = 0;
    for (std::int64_t& length : cut) {
      if (length > context) {
        length = context;
        ++count;
      }
    }
    LengthDataset result(std::move(cut), source_);
    result.context_ = context;
    result.truncated_count_ = count;
    return result;
  }

  [[nodiscard]] Span<const std::int64_t> lengths() const noexcept { return lengths_; }
  [[nodiscard]] std::size_t size() const noexcept { return lengths_.size(); }
  [[nodiscard]] std::int64_t tokens() const noexcept { return tokens_; }
  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  [[nodiscard]] std::optional<std::int64_t> context() const noexcept { return context_; }
  [[nodiscard]] std::int64_t truncated_count() const noexcept { return truncated_count_; }

  [[nodiscard]] LengthStats stats() const {
    std::vector<std::int64_t> sorted(lengths_);
    const auto count = static_cast<std::int64_t>(sorted.size());
    // Nearest rank ceil(p * n / 100), written so that p * n cannot overflow.
    auto rank_index = [count](std::int64_t percent) {
      return static_cast<std::size_t>((count / 100) * percent + ((count % 100) * percent + 99) / 100 - 1);
    };
    // Selecting the ranks in increasing order lets each search start where the previous one ended.
    auto select = [&sorted](std::size_t from, std::size_t index) {
      const auto first = sorted.begin() + static_cast<std::ptrdiff_t>(from);
      std::nth_element(first, sorted.begin() + static_cast<std::ptrdiff_t>(index), sorted.end());
      return sorted[index];
    };
    const std::size_t i50 = rank_index(50);
    const std::size_t i90 = rank_index(90);
    const std::size_t i99 = rank_index(99);
    const auto [min, max] = std::ranges::minmax(lengths_);
    LengthStats stats{.count = count, .tokens = tokens_, .min = min, .max = max};
    stats.p50 = select(0, i50);
    stats.p90 = select(i50, i90);
    stats.p99 = select(i90, i99);
    stats.truncated = truncated_count_;
    stats.mean = static_cast<double>(tokens_) / static_cast<double>(count);
    return stats;
  }

  // Bin k holds the lengths in (k * bin_width, (k + 1) * bin_width].
  [[nodiscard]] LengthHistogram histogram(std::int64_t bin_width) const {
    sluice::require(bin_width >= 1, source_, ": histogram bin width must be >= 1, got ", bin_width);
    const auto [min, max] = std::ranges::minmax(lengths_);
    const std::int64_t first = (min - 1) / bin_width;
    const std::int64_t last = (max - 1) / bin_width;
    sluice::require(last - first < max_histogram_bins, source_, ": bin width ", bin_width, " gives ", last - first + 1,
                    " bins (at most ", max_histogram_bins, "); use a wider bin");
    // A plain count per bin index: the bins are dense and exact, and the planners that take a dataset
    // stay free of Boost (Boost.Histogram gave these same counts).
    std::vector<std::int64_t> counts(static_cast<std::size_t>(last - first + 1), 0);
    for (const std::int64_t length : lengths_) ++counts[static_cast<std::size_t>((length - 1) / bin_width - first)];
    LengthHistogram result{.bin_width = bin_width, .bins = {}};
    result.bins.reserve(counts.size());
    for (std::size_t i = 0; i < counts.size(); ++i) {
      const std::int64_t k = first + static_cast<std::int64_t>(i);
      result.bins.push_back({.lower = k * bin_width, .upper = (k + 1) * bin_width, .count = counts[i]});
    }
    return result;
  }

private:
  std::vector<std::int64_t> lengths_;
  std::string source_;
  std::int64_t tokens_ = 0;
  std::optional<std::int64_t> context_;
  std::int64_t truncated_count_ = 0;
};

}  // namespace sluice::data
