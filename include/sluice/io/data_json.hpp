#pragma once
// JSON for the length-data types: statistics and histograms (as documents), sampler and synthetic options,
// and batches. Options read from JSON are validated where they are used (BatchSampler, synthetic_lengths).
#include <cstdint>
#include <limits>
#include <vector>

#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"

namespace sluice::io {
template <>
struct document_traits<data::LengthStats> {
  static constexpr std::string_view format = "sluice.length_stats";
  static constexpr int version = 1;
};

template <>
struct document_traits<data::LengthHistogram> {
  static constexpr std::string_view format = "sluice.length_histogram";
  static constexpr int version = 1;
};
}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::data::LengthStats> {
  static void to_json(json& out, const sluice::data::LengthStats& stats) {
    out = {{"count", stats.count}, {"tokens", stats.tokens}, {"min", stats.min},
           {"max", stats.max},     {"p50", stats.p50},       {"p90", stats.p90},
           {"p99", stats.p99},     {"truncated", stats.truncated}, {"mean", stats.mean}};
  }
  static sluice::data::LengthStats from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "length stats";
    return {.count = field<std::int64_t>(in, "count", where),
            .tokens = field<std::int64_t>(in, "tokens", where),
            .min = field<std::int64_t>(in, "min", where),
            .max = field<std::int64_t>(in, "max", where),
            .p50 = field<std::int64_t>(in, "p50", where),
            .p90 = field<std::int64_t>(in, "p90", where),
            .p99 = field<std::int64_t>(in, "p99", where),
            .truncated = field<std::int64_t>(in, "truncated", where),
            .mean = field<double>(in, "mean", where)};
  }
};

template <>
struct adl_serializer<sluice::data::HistogramBin> {
  static void to_json(json& out, const sluice::data::HistogramBin& bin) {
    out = {{"lower", bin.lower}, {"upper", bin.upper}, {"count", bin.count}};
  }
  static sluice::data::HistogramBin from_json(const json& in) {
    using sluice::io::field;
    return {.lower = field<std::int64_t>(in, "lower", "histogram bin"),
            .upper = field<std::int64_t>(in, "upper", "histogram bin"),
            .count = field<std::int64_t>(in, "count", "histogram bin")};
  }
};

template <>
struct adl_serializer<sluice::data::LengthHistogram> {
  static void to_json(json& out, const sluice::data::LengthHistogram& histogram) {
    out = {{"bin_width", histogram.bin_width}, {"bins", histogram.bins}};
  }
  // Consumers index bins by position, so a read histogram must have the shape LengthDataset makes.
  static sluice::data::LengthHistogram from_json(const json& in) {
    using sluice::io::field;
    sluice::data::LengthHistogram histogram{
        .bin_width = field<std::int64_t>(in, "bin_width", "length histogram"),
        .bins = field<std::vector<sluice::data::HistogramBin>>(in, "bins", "length histogram")};
    const std::int64_t width = histogram.bin_width;
    sluice::require(width >= 1, "length histogram: bin_width must be >= 1, got ", width);
    for (std::size_t i = 0; i < histogram.bins.size(); ++i) {
      const auto& bin = histogram.bins[i];
      const bool follows = i == 0 || bin.lower == histogram.bins[i - 1].upper;
      const bool aligned = bin.lower >= 0 && bin.lower % width == 0 &&
                           bin.lower <= std::numeric_limits<std::int64_t>::max() - width &&
                           bin.upper == bin.lower + width;
      sluice::require(aligned && follows, "length histogram: bin ", i, " (", bin.lower, ", ", bin.upper,
                      "] is not the next bin of width ", width);
      sluice::require(bin.count >= 0, "length histogram: bin ", i, ": count must be >= 0, got ", bin.count);
    }
    return histogram;
  }
};

template <>
struct adl_serializer<sluice::data::SamplerOptions> {
  static void to_json(json& out, const sluice::data::SamplerOptions& options) {
    out = {{"tokens_per_batch", options.tokens_per_batch}, {"seed", options.seed}, {"drop_last", options.drop_last}};
  }
  static sluice::data::SamplerOptions from_json(const json& in) {
    using sluice::io::field_or;
    const sluice::data::SamplerOptions defaults;
    constexpr std::string_view where = "sampler options";
    return {.tokens_per_batch = sluice::io::field<std::int64_t>(in, "tokens_per_batch", where),
            .seed = field_or<std::uint64_t>(in, "seed", defaults.seed, where),
            .drop_last = field_or<bool>(in, "drop_last", defaults.drop_last, where)};
  }
};

template <>
struct adl_serializer<sluice::data::SyntheticOptions> {
  static void to_json(json& out, const sluice::data::SyntheticOptions& options) {
    out = {{"count", options.count},
           {"median", options.median},
           {"sigma", options.sigma},
           {"tail_fraction", options.tail_fraction},
           {"tail_alpha", options.tail_alpha},
           {"tail_min", options.tail_min},
           {"min_length", options.min_length},
           {"max_length", options.max_length},
           {"seed", options.seed}};
  }
  // Absent fields take their defaults, so a document can name only what it changes.
  static sluice::data::SyntheticOptions from_json(const json& in) {
    using sluice::io::field_or;
    const sluice::data::SyntheticOptions defaults;
    constexpr std::string_view where = "synthetic options";
    return {.count = field_or(in, "count", defaults.count, where),
            .median = field_or(in, "median", defaults.median, where),
            .sigma = field_or(in, "sigma", defaults.sigma, where),
            .tail_fraction = field_or(in, "tail_fraction", defaults.tail_fraction, where),
            .tail_alpha = field_or(in, "tail_alpha", defaults.tail_alpha, where),
            .tail_min = field_or(in, "tail_min", defaults.tail_min, where),
            .min_length = field_or(in, "min_length", defaults.min_length, where),
            .max_length = field_or(in, "max_length", defaults.max_length, where),
            .seed = field_or(in, "seed", defaults.seed, where)};
  }
};

template <>
struct adl_serializer<sluice::data::Batch> {
  static void to_json(json& out, const sluice::data::Batch& batch) {
    out = {{"epoch", batch.epoch}, {"index", batch.index}, {"tokens", batch.tokens}, {"sequences", batch.sequences}};
  }
  static sluice::data::Batch from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "batch";
    return {.epoch = field<std::int64_t>(in, "epoch", where),
            .index = field<std::int64_t>(in, "index", where),
            .sequences = field<std::vector<sluice::Sequence>>(in, "sequences", where),
            .tokens = field<std::int64_t>(in, "tokens", where)};
  }
};

}  // namespace nlohmann
