#pragma once
// Sequence-length readers: plain text, NumPy .npy and Megatron-LM .idx (formats and limits in docs/formats.md).
// Every reader takes the content (bytes in memory, or a stream) and a source name for messages; the read_*
// functions read a file. Files come from outside, so every count, offset and value is checked before it is used,
// sizes against the file's size before anything is allocated, and a file is read in chunks: memory follows the
// lengths kept, not the file's size, and a bad line is reported as soon as it is read.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/core/span.hpp"
#include "sluice/data/detail/readers.hpp"
#include "sluice/data/read_limits.hpp"

namespace sluice::data {

// One length per line; '#' starts a comment; blank lines and surrounding whitespace are ignored.
inline std::vector<std::int64_t> parse_lengths_text(std::string_view content, std::string_view source) {
  detail::SpanBytes bytes(Span(reinterpret_cast<const std::byte*>(content.data()), content.size()));
  return detail::text_lengths(bytes, detail::source_name(source));
}

// Reads to the end of the stream (stdin, a decompressor's output); the stream's exception mask must be clear.
inline std::vector<std::int64_t> parse_lengths_text(std::istream& in, std::string_view source) {
  const std::string name = detail::source_name(source);
  detail::StreamBytes bytes(in, name, std::nullopt);
  return detail::text_lengths(bytes, name);
}

// NumPy .npy, versions 1.0, 2.0 and 3.0; a 1-D array of dtype <i2, <i4, <i8, <u2 or <u4.
inline std::vector<std::int64_t> parse_lengths_npy(Span<const std::byte> bytes, std::string_view source) {
  detail::SpanBytes pieces(bytes);
  return detail::npy_lengths(pieces, detail::source_name(source));
}

// A stream has no size to check the header against: its values are gathered as they are read.
inline std::vector<std::int64_t> parse_lengths_npy(std::istream& in, std::string_view source) {
  const std::string name = detail::source_name(source);
  detail::StreamBytes bytes(in, name, std::nullopt);
  return detail::npy_lengths(bytes, name);
}

// Megatron-LM indexed dataset index (.idx), version 1: returns the sequence lengths.
inline std::vector<std::int64_t> parse_lengths_megatron_idx(Span<const std::byte> bytes, std::string_view source) {
  detail::SpanBytes pieces(bytes);
  return detail::megatron_idx_lengths(pieces, detail::source_name(source));
}

inline std::vector<std::int64_t> parse_lengths_megatron_idx(std::istream& in, std::string_view source) {
  const std::string name = detail::source_name(source);
  detail::StreamBytes bytes(in, name, std::nullopt);
  return detail::megatron_idx_lengths(bytes, name);
}

inline std::vector<std::int64_t> read_lengths_text(const std::filesystem::path& path) {
  return detail::read_file(path, [](auto& bytes, std::string_view name) { return detail::text_lengths(bytes, name); });
}

inline std::vector<std::int64_t> read_lengths_npy(const std::filesystem::path& path) {
  return detail::read_file(path, [](auto& bytes, std::string_view name) { return detail::npy_lengths(bytes, name); });
}

inline std::vector<std::int64_t> read_lengths_megatron_idx(const std::filesystem::path& path) {
  return detail::read_file(
      path, [](auto& bytes, std::string_view name) { return detail::megatron_idx_lengths(bytes, name); });
}

// By extension: .npy, .idx, anything else is text.
inline std::vector<std::int64_t> read_lengths(const std::filesystem::path& path) {
  const auto extension = path.extension();
  if (extension == ".npy") return read_lengths_npy(path);
  if (extension == ".idx") return read_lengths_megatron_idx(path);
  return read_lengths_text(path);
}

}  // namespace sluice::data
