#pragma once
// Measured samples for `sluice fit` (cost/samples.hpp), as CSV or as a "sluice.profile_samples" JSON document;
// both are documented in docs/formats.md. read_profile_samples tells them apart by the first character that is
// not blank: '{' is JSON, anything else CSV.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/span.hpp"
#include "sluice/cost/samples.hpp"
#include "sluice/data/readers.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"

namespace sluice::io {

SLUICE_IO_DOCUMENT(cost::ProfileSamples, "sluice.profile_samples", 1);

// More samples than any sweep takes (schemes × lengths × repetitions); bounds what a file can make sluice hold.
inline constexpr std::size_t max_profile_samples = std::size_t{1} << 20;

namespace detail {

inline void check_sample(const cost::ProfileSample& sample, const std::string& where) {
  sluice::require(sample.tokens >= 1 && sample.tokens <= (std::int64_t{1} << 32), where,
                  ": tokens must be in [1, 2^32], got ", sample.tokens);
  sluice::require(std::isfinite(sample.seconds) && sample.seconds > 0, where, ": seconds must be finite and > 0, got ",
                  sample.seconds);
  sluice::require(sample.sequences >= 1 && sample.sequences <= (std::int64_t{1} << 20), where,
                  ": sequences must be in [1, 2^20], got ", sample.sequences);
  sluice::require(sample.tokens * sample.sequences <= (std::int64_t{1} << 32), where, ": ", sample.sequences,
                  " sequences of ", sample.tokens, " tokens exceed 2^32 tokens in a micro-batch");
  if (sample.peak_bytes)
    sluice::require(std::isfinite(*sample.peak_bytes) && *sample.peak_bytes > 0, where,
                    ": peak_bytes must be finite and > 0, got ", *sample.peak_bytes);
  if (sample.inner_seconds)
    sluice::require(std::isfinite(*sample.inner_seconds) && *sample.inner_seconds > 0, where,
                    ": inner_seconds must be finite and > 0, got ", *sample.inner_seconds);
}

inline std::string_view trimmed(std::string_view text) {
  constexpr std::string_view blanks = " \t\r\v\f";
  const std::size_t first = text.find_first_not_of(blanks);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(blanks) - first + 1);
}

// One CSV cell as a T, the whole cell or an error naming the line, the column and the text.
template <class T>
T csv_value(std::string_view cell, std::string_view where, std::string_view column) {
  T value{};
  const auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
  if (error != std::errc{} || end != cell.data() + cell.size() || cell.empty())
    sluice::fail(where, ": ", column, ": ", data::detail::excerpt(cell), " is not ",
                 std::is_integral_v<T> ? "an integer" : "a number");
  return value;
}

template <class Make>
Scheme scheme_at(Make&& make, std::string_view where) {
  try {
    return make();
  } catch (const invalid_input& error) {
    sluice::fail(where, ": ", error.what());
  }
}

}  // namespace detail

// CSV: a header naming the columns tp, pp (or instead scheme, spelt as Scheme::name, for schemes with context
// parallelism or recomputation), tokens, seconds and optionally peak_bytes, inner_seconds and sequences (any order),
// then one sample per line. Blank lines and lines starting with '#' are skipped; blanks around a cell are ignored; an
// empty peak_bytes or inner_seconds cell means not measured, an empty sequences cell one sequence. Errors name the
// source, the 1-based line and the column.
inline cost::ProfileSamples parse_profile_samples_csv(std::string_view text, std::string_view source) {
  const std::string name = data::detail::source_name(source);
  static constexpr std::string_view known[] = {"tp",      "pp",         "scheme",        "tokens",
                                               "seconds", "peak_bytes", "inner_seconds", "sequences"};
  std::map<std::string, std::size_t, std::less<>> columns;
  std::size_t width = 0;
  cost::ProfileSamples result;
  std::size_t line_number = 0;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = detail::trimmed(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    const std::string where = name + ": line " + std::to_string(line_number);
    std::vector<std::string_view> cells;
    for (std::string_view rest = line;;) {
      const std::size_t comma = rest.find(',');
      cells.push_back(detail::trimmed(rest.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
    if (columns.empty()) {  // the header
      for (std::size_t i = 0; i < cells.size(); ++i) {
        sluice::require(std::ranges::find(known, cells[i]) != std::end(known), where, ": unknown column ",
                        data::detail::excerpt(cells[i]),
                        " (expected tp, pp, scheme, tokens, seconds, peak_bytes, inner_seconds, sequences)");
        sluice::require(columns.emplace(std::string(cells[i]), i).second, where, ": column ", cells[i],
                        " is named twice");
      }
      const bool by_name = columns.contains("scheme");
      sluice::require(!by_name || (!columns.contains("tp") && !columns.contains("pp")), where,
                      ": the header names the scheme twice (scheme, and tp or pp)");
      const std::array<std::string_view, 4> required_columns{by_name ? "scheme" : "tp", by_name ? "scheme" : "pp",
                                                             "tokens", "seconds"};
      for (const std::string_view required : required_columns)
        sluice::require(columns.contains(required), where, ": the header has no column '", required, "'");
      width = cells.size();
      continue;
    }
    sluice::require(cells.size() == width, where, ": expected ", width, " comma-separated values, got ", cells.size());
    sluice::require(result.samples.size() < max_profile_samples, where, ": more than ", max_profile_samples,
                    " samples");
    auto cell = [&](std::string_view column) { return cells[columns.find(column)->second]; };
    const Scheme scheme = columns.contains("scheme")
                              ? detail::scheme_at([&] { return Scheme::parse(cell("scheme")); }, where)
                              : detail::scheme_at(
                                    [&] {
                                      return Scheme(detail::csv_value<int>(cell("tp"), where, "tp"),
                                                    detail::csv_value<int>(cell("pp"), where, "pp"));
                                    },
                                    where);
    cost::ProfileSample sample{scheme, detail::csv_value<std::int64_t>(cell("tokens"), where, "tokens"),
                               detail::csv_value<double>(cell("seconds"), where, "seconds"), std::nullopt,
                               std::nullopt};
    for (const auto& [column, value] :
         {std::pair{"peak_bytes", &sample.peak_bytes}, std::pair{"inner_seconds", &sample.inner_seconds}})
      if (columns.contains(column) && !cell(column).empty())
        *value = detail::csv_value<double>(cell(column), where, column);
    if (columns.contains("sequences") && !cell("sequences").empty())
      sample.sequences = detail::csv_value<std::int64_t>(cell("sequences"), where, "sequences");
    detail::check_sample(sample, where);
    result.samples.push_back(sample);
  }
  sluice::require(!columns.empty(), name,
                  ": no header line (expected tp,pp,tokens,seconds[,peak_bytes][,inner_seconds][,sequences])");
  sluice::require(!result.samples.empty(), name, ": no samples after the header");
  return result;
}

// The CSV that parse_profile_samples_csv reads back exactly (numbers in their shortest round-trip form).
// Schemes go by tp and pp while all are ⟨TP, PP⟩, by name otherwise; inner_seconds and sequences are columns when a
// sample has them.
inline std::string profile_samples_csv(Span<const cost::ProfileSample> samples) {
  const bool by_name = std::ranges::any_of(samples, [](const cost::ProfileSample& x) { return !x.scheme.is_base(); });
  const bool inner =
      std::ranges::any_of(samples, [](const cost::ProfileSample& x) { return x.inner_seconds.has_value(); });
  const bool packed = std::ranges::any_of(samples, [](const cost::ProfileSample& x) { return x.sequences > 1; });
  const auto optional = [](const std::optional<double>& value) { return value ? sluice::shortest(*value) : ""; };
  std::string text = sluice::concat(by_name ? "scheme" : "tp,pp", ",tokens,seconds,peak_bytes",
                                    inner ? ",inner_seconds" : "", packed ? ",sequences" : "", "\n");
  for (const cost::ProfileSample& sample : samples)
    text += sluice::concat(by_name ? sample.scheme.name() : sluice::concat(sample.scheme.tp(), ",", sample.scheme.pp()),
                           ",", sample.tokens, ",", sluice::shortest(sample.seconds), ",", optional(sample.peak_bytes),
                           inner ? "," + optional(sample.inner_seconds) : "",
                           packed ? sluice::concat(",", sample.sequences) : "", "\n");
  return text;
}

}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::cost::ProfileSample> {
  static void to_json(json& out, const sluice::cost::ProfileSample& sample) {
    out = json(sample.scheme);
    out["tokens"] = sample.tokens;
    out["seconds"] = sample.seconds;
    if (sample.peak_bytes) out["peak_bytes"] = *sample.peak_bytes;
    if (sample.inner_seconds) out["inner_seconds"] = *sample.inner_seconds;
    if (sample.sequences > 1) out["sequences"] = sample.sequences;
  }
  static sluice::cost::ProfileSample from_json(const json& in) {
    using sluice::io::field;
    sluice::cost::ProfileSample sample{in.get<sluice::Scheme>(), field<std::int64_t>(in, "tokens", "sample"),
                                       field<double>(in, "seconds", "sample"), std::nullopt, std::nullopt};
    if (in.contains("peak_bytes")) sample.peak_bytes = field<double>(in, "peak_bytes", "sample");
    if (in.contains("inner_seconds")) sample.inner_seconds = field<double>(in, "inner_seconds", "sample");
    if (in.contains("sequences")) sample.sequences = field<std::int64_t>(in, "sequences", "sample");
    sluice::io::detail::check_sample(sample, "sample");
    return sample;
  }
};

}  // namespace nlohmann

namespace sluice::io {

template <>
struct record<cost::ProfileSamples> {
  using T = cost::ProfileSamples;
  static constexpr std::string_view name = "profile_samples";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(samples)};
  static void check(const cost::ProfileSamples& value) {
    sluice::require(!value.samples.empty(), "profile_samples: field 'samples' is empty");
    sluice::require(value.samples.size() <= max_profile_samples, "profile_samples: more than ", max_profile_samples,
                    " samples");
  }
};

// A samples file, CSV or sluice.profile_samples JSON (see the top of this file).
inline cost::ProfileSamples read_profile_samples(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);
  const std::size_t first = text.find_first_not_of(" \t\r\n\v\f");
  sluice::require(first != std::string::npos, data::detail::source_name(path.string()), ": empty samples file");
  if (text[first] == '{') return from_document<cost::ProfileSamples>(parse(text, path.string()), path.string());
  return parse_profile_samples_csv(text, path.string());
}

}  // namespace sluice::io
