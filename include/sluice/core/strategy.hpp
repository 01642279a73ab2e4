#pragma once
// A heterogeneous strategy: a multiset of parallel schemes, each run by some number of pipelines.
#include <algorithm>
#include <charconv>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"

namespace sluice {

struct StrategyPart {
  Scheme scheme;
  int pipelines = 1;
  friend bool operator==(const StrategyPart&, const StrategyPart&) = default;
};

// One pipeline of a strategy, with the longest sequence it can hold.
struct Pipeline {
  int index = 0;  // position in MaxLen order (0 holds the longest sequences)
  Scheme scheme;
  std::int64_t max_len = 0;
  friend bool operator==(const Pipeline&, const Pipeline&) = default;
};

class Strategy {
public:
  static constexpr int max_pipelines = 1 << 20;

  // Parts naming the same scheme are merged; the stored order is canonical (TP, then PP, descending),
  // so equal multisets compare equal whatever order they were written in.
  explicit Strategy(std::vector<StrategyPart> parts) {
    sluice::require(!parts.empty(), "strategy: needs at least one scheme");
    std::sort(parts.begin(), parts.end(),
              [](const StrategyPart& x, const StrategyPart& y) { return x.scheme > y.scheme; });
    for (const StrategyPart& part : parts) {
      sluice::require(part.pipelines >= 1 && part.pipelines <= max_pipelines, "strategy: pipeline count of ",
                      part.scheme.name(), " must be in [1, ", max_pipelines, "], got ", part.pipelines);
      if (!parts_.empty() && parts_.back().scheme == part.scheme) {
        parts_.back().pipelines += part.pipelines;
        sluice::require(parts_.back().pipelines <= max_pipelines, "strategy: too many pipelines of ",
                        part.scheme.name());
      } else {
        parts_.push_back(part);
      }
    }
    for (const StrategyPart& part : parts_) {
      gpus_ += part.scheme.gpus() * part.pipelines;
      pipeline_count_ += part.pipelines;
    }
  }

  // A homogeneous strategy: `pipelines` copies of one scheme.
  static Strategy homogeneous(Scheme scheme, int pipelines) { return Strategy({{scheme, pipelines}}); }

  [[nodiscard]] const std::vector<StrategyPart>& parts() const noexcept { return parts_; }
  [[nodiscard]] std::int64_t gpus() const noexcept { return gpus_; }
  [[nodiscard]] int pipeline_count() const noexcept { return pipeline_count_; }
  [[nodiscard]] bool is_homogeneous() const noexcept { return parts_.size() == 1; }

  // Raises invalid_input when the strategy needs more GPUs than the cluster has.
  void require_fits(std::int64_t cluster_gpus) const {
    sluice::require(cluster_gpus >= 1, "strategy: cluster GPU count must be >= 1, got ", cluster_gpus);
    sluice::require(gpus_ <= cluster_gpus, "strategy ", name(), " needs ", gpus_, " GPUs but the cluster has ",
                    cluster_gpus);
  }

  // "2*tp4pp2+1*tp1pp8"
  [[nodiscard]] std::string name() const {
    std::string text;
    for (const StrategyPart& part : parts_) {
      if (!text.empty()) text += '+';
      text += std::to_string(part.pipelines) + '*' + part.scheme.name();
    }
    return text;
  }

  // Inverse of name(): "2*tp4pp2+1*tp1pp8"; a part without "N*" counts one pipeline.
  static Strategy parse(std::string_view text) {
    std::vector<StrategyPart> parts;
    std::string_view rest = text;
    while (true) {
      const auto plus = rest.find('+');
      std::string_view part = rest.substr(0, plus);
      int pipelines = 1;
      if (const auto star = part.find('*'); star != std::string_view::npos) {
        const std::string_view count = part.substr(0, star);
        const auto [end, error] = std::from_chars(count.data(), count.data() + count.size(), pipelines);
        sluice::require(error == std::errc{} && end == count.data() + count.size() && !count.empty(),
                        "strategy: cannot parse pipeline count '", count, "' in '", text, "'");
        part.remove_prefix(star + 1);
      }
      parts.push_back({Scheme::parse(part), pipelines});
      if (plus == std::string_view::npos) break;
      rest.remove_prefix(plus + 1);
    }
    return Strategy(std::move(parts));
  }

  // Every pipeline, ordered by MaxLen descending (ties keep the canonical scheme order), as the
  // dispatch stage needs them: pipeline 0 can hold every sequence any pipeline can.
  template <class MaxLenOf>
  requires std::convertible_to<std::invoke_result_t<MaxLenOf&, const Scheme&>, std::int64_t>
  [[nodiscard]] std::vector<Pipeline> pipelines(MaxLenOf&& max_len_of) const {
    std::vector<Pipeline> result;
    result.reserve(static_cast<std::size_t>(pipeline_count_));
    for (const StrategyPart& part : parts_) {
      const std::int64_t max_len = max_len_of(part.scheme);
      for (int copy = 0; copy < part.pipelines; ++copy) result.push_back({0, part.scheme, max_len});
    }
    std::stable_sort(result.begin(), result.end(),
                     [](const Pipeline& x, const Pipeline& y) { return x.max_len > y.max_len; });
    for (std::size_t i = 0; i < result.size(); ++i) result[i].index = static_cast<int>(i);
    return result;
  }

  friend bool operator==(const Strategy&, const Strategy&) = default;

private:
  std::vector<StrategyPart> parts_;
  std::int64_t gpus_ = 0;
  int pipeline_count_ = 0;
};

}  // namespace sluice
