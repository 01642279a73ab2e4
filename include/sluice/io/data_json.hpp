#pragma once
// JSON for the length-data types: statistics and histograms (as documents), sampler and synthetic options,
// batches, and a trainer's batch as `plan --batch` reads it (read_batch). Options read from JSON are validated
// where they are used (BatchSampler, synthetic_lengths).
#include <cstdint>
#include <filesystem>
#include <istream>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <limits>
#include <vector>

#include "sluice/core/sequence.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/readers.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"

namespace sluice::io {
SLUICE_IO_DOCUMENT(data::LengthStats, "sluice.length_stats", 1);

SLUICE_IO_DOCUMENT(data::LengthHistogram, "sluice.length_histogram", 1);

SLUICE_IO_RECORD(data::LengthStats, "length stats",
                 SLUICE_IO_MEMBERS(count, tokens, min, max, p50, p90, p99, truncated, mean));

SLUICE_IO_RECORD(data::HistogramBin, "histogram bin", SLUICE_IO_MEMBERS(lower, upper, count));

template <>
struct record<data::LengthHistogram> {
  using T = data::LengthHistogram;
  static constexpr std::string_view name = "length histogram";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(bin_width, bins)};
  // Consumers index bins by position, so a read histogram must have the shape LengthDataset makes.
  static void check(const T& histogram) {
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
  }
};

SLUICE_IO_RECORD(data::SamplerOptions, "sampler options", SLUICE_IO_MEMBERS(tokens_per_batch),
                 SLUICE_IO_DEFAULTED(seed, drop_last));

// Absent fields take their defaults, so a document can name only what it changes.
SLUICE_IO_RECORD(data::SyntheticOptions, "synthetic options",
                 SLUICE_IO_DEFAULTED(count, median, sigma, tail_fraction, tail_alpha, tail_min, min_length, max_length,
                                     seed));

SLUICE_IO_RECORD(data::Batch, "batch", SLUICE_IO_MEMBERS(epoch, index, sequences, tokens));

// One batch is planned at once; 2^20 sequences is about 2^20 x (shortest sequence) tokens, far past any
// iteration a trainer runs, and bounds the planning time of one batch.
inline constexpr std::size_t max_batch_sequences = std::size_t{1} << 20;

namespace detail {

inline std::int64_t batch_integer(const json& value, std::string_view source, std::size_t entry,
                                  std::string_view what) {
  sluice::require(value.is_number_integer(), source, ": entry ", entry, ": ", what, " must be an integer, got ",
                  value.dump());
  if (value.is_number_unsigned())
    sluice::require(value.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX), source, ": entry ", entry,
                    ": ", what, " ", value.dump(), " is too large");
  return value.get<std::int64_t>();
}

}  // namespace detail

// A trainer's batch: one length per line ('#' comments, as data::parse_lengths_text reads them), a JSON array
// of lengths, or a JSON array of {"id": ..., "length": ...} objects whose ids are optional. A sequence without
// an id gets its position in the batch. Every error is invalid_input naming `source`: an empty batch, a length
// that is not a positive integer, a duplicate id, more than max_batch_sequences entries, malformed JSON.
inline std::vector<Sequence> parse_batch(std::string_view content, std::string_view source) {
  const auto first = content.find_first_not_of(" \t\r\n");
  std::vector<Sequence> batch;
  if (first != std::string_view::npos && content[first] == '[') {
    const json document = parse(content, source);
    sluice::require(document.size() <= max_batch_sequences, source, ": ", document.size(),
                    " sequences, more than the limit of ", max_batch_sequences);
    std::unordered_set<std::int64_t> ids;
    for (std::size_t i = 0; i < document.size(); ++i) {
      const json& entry = document[i];
      std::int64_t id = static_cast<std::int64_t>(i);
      std::int64_t length = 0;
      if (entry.is_object()) {
        for (const auto& [key, value] : entry.items())
          sluice::require(key == "id" || key == "length", source, ": entry ", i, ": unknown field '", key, "'");
        sluice::require(entry.contains("length"), source, ": entry ", i, ": missing field 'length'");
        length = detail::batch_integer(entry.at("length"), source, i, "length");
        if (entry.contains("id")) id = detail::batch_integer(entry.at("id"), source, i, "id");
      } else {
        length = detail::batch_integer(entry, source, i, "length");
      }
      sluice::require(length >= 1, source, ": entry ", i, ": length must be >= 1, got ", length);
      sluice::require(length <= data::max_plausible_length, source, ": entry ", i, ": length ", length,
                      " exceeds the plausible maximum ", data::max_plausible_length);
      sluice::require(id >= 0, source, ": entry ", i, ": id must be >= 0, got ", id);
      sluice::require(ids.insert(id).second, source, ": entry ", i, ": duplicate id ", id);
      batch.emplace_back(id, length);
    }
  } else {
    const std::vector<std::int64_t> lengths = data::parse_lengths_text(content, source);
    sluice::require(lengths.size() <= max_batch_sequences, source, ": ", lengths.size(),
                    " sequences, more than the limit of ", max_batch_sequences);
    for (std::size_t i = 0; i < lengths.size(); ++i) batch.emplace_back(static_cast<std::int64_t>(i), lengths[i]);
  }
  sluice::require(!batch.empty(), source, ": the batch is empty");
  return batch;
}

// `path` "-" reads standard input (named "standard input" in errors).
inline std::vector<Sequence> read_batch(const std::string& path, std::istream& standard_input) {
  if (path == "-") {
    return parse_batch(read_text(standard_input, "standard input"), "standard input");
  }
  return parse_batch(read_text_file(path), path);
}

}  // namespace sluice::io
