#pragma once
// Sequence-length readers: plain text, NumPy .npy and Megatron-LM .idx (formats in docs/formats.md).
// Every reader takes the content and a source name for messages; the read_* functions read a file first.
// Files come from outside, so every count, offset and value is checked before it is used.
#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "sluice/core/error.hpp"

namespace sluice::data {

// No tokenizer run produces a document of 4 Gi tokens; a larger value means a misread file.
inline constexpr std::int64_t max_plausible_length = std::int64_t{1} << 32;

namespace detail {

using sluice::detail::fail;
using sluice::detail::require;

// `where` and `position` say where the value came from ("line", 12), to be named in the message.
inline void check_length(std::int64_t value, std::string_view source, std::string_view where, std::uint64_t position) {
  require(value >= 1, source, ": ", where, " ", position, ": length must be >= 1, got ", value);
  require(value <= max_plausible_length, source, ": ", where, " ", position, ": length ", value,
          " exceeds the plausible maximum ", max_plausible_length);
}

// Little-endian load, independent of the host's byte order and of alignment.
template <class T>
T load_le(const std::byte* bytes) noexcept {
  using U = std::make_unsigned_t<T>;
  U value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) value = static_cast<U>(value | (std::to_integer<U>(bytes[i]) << (8 * i)));
  return static_cast<T>(value);
}

// A quoted excerpt of bad text, kept short so that a binary file does not flood the message.
inline std::string excerpt(std::string_view text) {
  constexpr std::size_t limit = 40;
  std::string quoted(1, '\'');  // built by appending: GCC 12 warns falsely (-Wrestrict) on "'" + string
  quoted.append(text.substr(0, limit)).append(text.size() > limit ? "...'" : "'");
  return quoted;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  require(static_cast<bool>(in), path.string(), ": cannot open file");
  std::string content;
  std::error_code size_error;
  const auto size = std::filesystem::file_size(path, size_error);
  if (!size_error) content.reserve(size);  // a hint only: pipes and special files have no size
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer), in.gcount() > 0) content.append(buffer, static_cast<std::size_t>(in.gcount()));
  require(!in.bad(), path.string(), ": cannot read file");
  return content;
}

inline std::span<const std::byte> as_bytes(const std::string& content) noexcept {
  return std::as_bytes(std::span(content.data(), content.size()));
}

// The header of a .npy file is a Python dict literal; this reads the subset NumPy writes.
class NpyHeader {
public:
  NpyHeader(std::string_view text, std::string_view source) : text_(text), source_(source) {
    skip_space();
    expect('{');
    bool have_descr = false;
    bool have_order = false;
    bool have_shape = false;
    while (true) {
      skip_space();
      if (consume('}')) break;
      const std::string_view key = string_literal("key");
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        require(!have_descr, source_, ": header: duplicate key 'descr'");
        descr = string_literal("'descr'");
        have_descr = true;
      } else if (key == "fortran_order") {
        require(!have_order, source_, ": header: duplicate key 'fortran_order'");
        boolean();  // either order: a 1-D array has the same layout in both
        have_order = true;
      } else if (key == "shape") {
        require(!have_shape, source_, ": header: duplicate key 'shape'");
        tuple();
        have_shape = true;
      } else {
        fail(source_, ": header: unexpected key ", excerpt(key));
      }
      skip_space();
      if (consume('}')) break;
      expect(',');
    }
    skip_space();
    require(pos_ == text_.size(), source_, ": header: unexpected text after the dictionary at offset ", pos_);
    require(have_descr && have_order && have_shape, source_,
            ": header: needs the keys 'descr', 'fortran_order' and 'shape'");
  }

  std::string_view descr;
  std::vector<std::uint64_t> shape;
  std::string_view shape_text;
  bool shape_is_tuple = false;  // "(5)" is the integer 5 in Python, not a shape

private:
  void skip_space() noexcept {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n')) ++pos_;
  }
  bool consume(char c) noexcept {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    require(consume(c), source_, ": header: expected '", c, "' at offset ", pos_);
  }
  std::string_view string_literal(std::string_view what) {
    require(pos_ < text_.size() && (text_[pos_] == '\'' || text_[pos_] == '"'), source_, ": header: expected ",
            what, " as a quoted string at offset ", pos_);
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    require(end != std::string_view::npos, source_, ": header: unterminated string at offset ", pos_);
    const std::string_view value = text_.substr(pos_, end - pos_);
    require(value.find('\\') == std::string_view::npos, source_, ": header: escapes in strings are not supported");
    pos_ = end + 1;
    return value;
  }
  void boolean() {
    for (const std::string_view word : {"True", "False"}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return;
      }
    }
    fail(source_, ": header: 'fortran_order' must be True or False (offset ", pos_, ")");
  }
  void tuple() {
    const std::size_t start = pos_;
    expect('(');
    while (true) {
      skip_space();
      if (consume(')')) break;
      std::uint64_t extent = 0;
      const auto [end, error] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), extent);
      require(error == std::errc{} && end != text_.data() + pos_, source_,
              ": header: 'shape' must be a tuple of non-negative integers (offset ", pos_, ")");
      pos_ = static_cast<std::size_t>(end - text_.data());
      shape.push_back(extent);
      skip_space();
      shape_is_tuple = consume(',');
      if (!shape_is_tuple) {
        expect(')');
        shape_is_tuple = shape.size() > 1;
        break;
      }
    }
    shape_text = text_.substr(start, pos_ - start);
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t pos_ = 0;
};

template <class T>
void append_values(std::span<const std::byte> data, std::string_view source, std::string_view where,
                   std::vector<std::int64_t>& out) {
  for (std::size_t i = 0; i < data.size(); i += sizeof(T)) {
    const auto value = static_cast<std::int64_t>(load_le<T>(data.data() + i));
    check_length(value, source, where, i / sizeof(T));
    out.push_back(value);
  }
}

struct NpyDtype {
  std::string_view descr;
  std::size_t size;
  void (*append)(std::span<const std::byte>, std::string_view, std::string_view, std::vector<std::int64_t>&);
};

inline constexpr NpyDtype npy_dtypes[] = {{"<i2", 2, append_values<std::int16_t>},
                                          {"<i4", 4, append_values<std::int32_t>},
                                          {"<i8", 8, append_values<std::int64_t>},
                                          {"<u2", 2, append_values<std::uint16_t>},
                                          {"<u4", 4, append_values<std::uint32_t>}};

// Megatron-LM's DType codes and their element sizes (index 0 is unused).
inline constexpr std::size_t megatron_dtype_sizes[] = {0, 1, 1, 2, 4, 8, 8, 4, 2};

}  // namespace detail

// One length per line; '#' starts a comment; blank lines and surrounding whitespace are ignored.
inline std::vector<std::int64_t> parse_lengths_text(std::string_view content, std::string_view source) {
  std::vector<std::int64_t> lengths;
  lengths.reserve(static_cast<std::size_t>(std::ranges::count(content, '\n')) + 1);
  std::uint64_t line_number = 0;
  while (!content.empty()) {
    ++line_number;
    const std::size_t newline = content.find('\n');
    std::string_view line = content.substr(0, newline);
    content.remove_prefix(newline == std::string_view::npos ? content.size() : newline + 1);
    line = line.substr(0, line.find('#'));
    auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; };
    while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    if (line.empty()) continue;
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), value);
    detail::require(error != std::errc::result_out_of_range, source, ": line ", line_number, ": ",
                    detail::excerpt(line), " is out of range");
    detail::require(error == std::errc{} && end == line.data() + line.size(), source, ": line ", line_number, ": ",
                    detail::excerpt(line), " is not an integer length");
    detail::check_length(value, source, "line", line_number);
    lengths.push_back(value);
  }
  detail::require(!lengths.empty(), source, ": no lengths (the file is empty or holds only comments)");
  return lengths;
}

// NumPy .npy, versions 1.0, 2.0 and 3.0; a 1-D array of dtype <i2, <i4, <i8, <u2 or <u4.
inline std::vector<std::int64_t> parse_lengths_npy(std::span<const std::byte> bytes, std::string_view source) {
  constexpr std::string_view magic = "\x93NUMPY";
  detail::require(bytes.size() >= magic.size() + 2, source, ": too short for a .npy file (", bytes.size(), " bytes)");
  detail::require(std::ranges::equal(bytes.first(magic.size()), magic,
                                     [](std::byte b, char c) { return b == static_cast<std::byte>(c); }),
                  source, ": not a .npy file (bad magic)");
  const auto major = std::to_integer<int>(bytes[6]);
  const auto minor = std::to_integer<int>(bytes[7]);
  detail::require(major >= 1 && major <= 3 && minor == 0, source, ": unsupported .npy version ", major, ".", minor,
                  " (expected 1.0, 2.0 or 3.0)");
  const std::size_t length_size = major == 1 ? 2 : 4;
  detail::require(bytes.size() >= 8 + length_size, source, ": truncated .npy header");
  const std::size_t header_length = major == 1 ? detail::load_le<std::uint16_t>(bytes.data() + 8)
                                               : detail::load_le<std::uint32_t>(bytes.data() + 8);
  const std::size_t header_start = 8 + length_size;
  detail::require(header_length <= bytes.size() - header_start, source, ": header length ", header_length,
                  " runs past the end of the file (", bytes.size() - header_start, " bytes follow)");
  const auto header_bytes = bytes.subspan(header_start, header_length);
  const detail::NpyHeader header(
      std::string_view(reinterpret_cast<const char*>(header_bytes.data()), header_bytes.size()), source);

  detail::require(header.descr.empty() || header.descr.front() != '>', source, ": big-endian dtype ",
                  detail::excerpt(header.descr), " is not supported");
  const auto dtype = std::ranges::find(detail::npy_dtypes, header.descr, &detail::NpyDtype::descr);
  detail::require(dtype != std::end(detail::npy_dtypes), source, ": unsupported dtype ",
                  detail::excerpt(header.descr), " (expected <i2, <i4, <i8, <u2 or <u4)");
  detail::require(header.shape_is_tuple && header.shape.size() == 1, source,
                  ": shape must be one-dimensional, written (N,), got ", detail::excerpt(header.shape_text));
  const std::uint64_t count = header.shape.front();
  detail::require(count >= 1, source, ": no lengths (shape is (0,))");

  const auto data = bytes.subspan(header_start + header_length);
  const std::size_t held = data.size() / dtype->size;
  detail::require(count <= held, source, ": truncated data: header says ", count, " values, file holds ", held);
  detail::require(count == held && data.size() % dtype->size == 0, source, ": ",
                  data.size() - count * dtype->size, " trailing bytes after the ", count, " values");

  std::vector<std::int64_t> lengths;
  lengths.reserve(count);
  dtype->append(data, source, "index", lengths);
  return lengths;
}

// Megatron-LM indexed dataset index (.idx), version 1: returns the sequence lengths.
inline std::vector<std::int64_t> parse_lengths_megatron_idx(std::span<const std::byte> bytes,
                                                            std::string_view source) {
  constexpr std::string_view magic{"MMIDIDX\0\0", 9};
  constexpr std::size_t header_size = 9 + 8 + 1 + 8 + 8;
  detail::require(bytes.size() >= magic.size() &&
                      std::ranges::equal(bytes.first(magic.size()), magic,
                                         [](std::byte b, char c) { return b == static_cast<std::byte>(c); }),
                  source, ": not a Megatron .idx file (bad magic)");
  detail::require(bytes.size() >= header_size, source, ": truncated .idx header (", bytes.size(), " bytes, needs ",
                  header_size, ")");
  const auto version = detail::load_le<std::uint64_t>(bytes.data() + 9);
  detail::require(version == 1, source, ": unsupported .idx version ", version, " (expected 1)");
  const auto dtype_code = std::to_integer<std::size_t>(bytes[17]);
  detail::require(dtype_code >= 1 && dtype_code < std::size(detail::megatron_dtype_sizes), source,
                  ": unknown dtype code ", dtype_code, " (expected 1 to 8)");
  const auto dtype_size = static_cast<std::int64_t>(detail::megatron_dtype_sizes[dtype_code]);
  const auto sequences = detail::load_le<std::uint64_t>(bytes.data() + 18);
  const auto documents = detail::load_le<std::uint64_t>(bytes.data() + 26);
  detail::require(sequences >= 1, source, ": no lengths (sequence count is 0)");

  // Divide rather than multiply: the counts come from the file and their products could overflow.
  const std::size_t body = bytes.size() - header_size;
  detail::require(sequences <= body / 12 && documents <= (body - sequences * 12) / 8, source,
                  ": truncated: header says ", sequences, " sequences and ", documents, " documents, but only ", body,
                  " bytes follow the header");
  const std::size_t rest = body - sequences * 12 - documents * 8;
  detail::require(rest == 0 || rest == sequences, source, ": ", rest,
                  " unexpected bytes after the document indices (expected 0, or ", sequences,
                  " bytes of sequence modes)");

  const std::byte* const lengths_at = bytes.data() + header_size;
  const std::byte* const pointers_at = lengths_at + sequences * 4;
  const std::byte* const documents_at = pointers_at + sequences * 8;
  std::vector<std::int64_t> lengths;
  lengths.reserve(sequences);
  detail::append_values<std::int32_t>(std::span(lengths_at, sequences * 4), source, "sequence", lengths);

  // Pointers are byte offsets into the .bin file: each sequence starts where the previous one ends.
  std::int64_t expected = 0;
  for (std::size_t i = 0; i < sequences; ++i) {
    const auto pointer = detail::load_le<std::int64_t>(pointers_at + i * 8);
    detail::require(pointer == expected, source, ": sequence ", i, ": pointer ", pointer, " should be ", expected,
                    " (the previous pointer plus the previous length times ", dtype_size, " bytes)");
    const std::int64_t step = lengths[i] * dtype_size;  // <= 2^34: lengths are positive int32
    detail::require(pointer <= std::numeric_limits<std::int64_t>::max() - step, source, ": sequence ", i,
                    ": data offset overflows");
    expected = pointer + step;
  }

  std::int64_t previous = 0;
  for (std::size_t i = 0; i < documents; ++i) {
    const auto index = detail::load_le<std::int64_t>(documents_at + i * 8);
    detail::require(i > 0 || index == 0, source, ": document index 0 must be 0, got ", index);
    detail::require(index >= previous, source, ": document index ", i, " (", index,
                    ") is smaller than the one before it (", previous, ")");
    previous = index;
  }
  detail::require(documents >= 1 && static_cast<std::uint64_t>(previous) == sequences, source,
                  ": the last document index must equal the sequence count ", sequences, ", got ",
                  documents == 0 ? std::string("no document indices") : std::to_string(previous));
  return lengths;
}

inline std::vector<std::int64_t> read_lengths_text(const std::filesystem::path& path) {
  return parse_lengths_text(detail::read_file(path), path.string());
}

inline std::vector<std::int64_t> read_lengths_npy(const std::filesystem::path& path) {
  const std::string content = detail::read_file(path);
  return parse_lengths_npy(detail::as_bytes(content), path.string());
}

inline std::vector<std::int64_t> read_lengths_megatron_idx(const std::filesystem::path& path) {
  const std::string content = detail::read_file(path);
  return parse_lengths_megatron_idx(detail::as_bytes(content), path.string());
}

// By extension: .npy, .idx, anything else is text.
inline std::vector<std::int64_t> read_lengths(const std::filesystem::path& path) {
  const auto extension = path.extension();
  if (extension == ".npy") return read_lengths_npy(path);
  if (extension == ".idx") return read_lengths_megatron_idx(path);
  return read_lengths_text(path);
}

}  // namespace sluice::data
