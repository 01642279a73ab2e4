#pragma once
// The length readers' machinery: byte sources (memory or a stream, read in chunks), the text, .npy and Megatron
// .idx parsers, and the checks on what a file says. Not for callers: readers.hpp is their interface.
#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <istream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/data/read_limits.hpp"

namespace sluice::data::detail {

using sluice::fail;
using sluice::require;

// At most this many bytes are read at a time.
inline constexpr std::size_t chunk_bytes = std::size_t{1} << 16;

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

// Control bytes as \xHH, so that a message stays one line and sends no terminal escape sequence; with
// `ascii_only`, bytes from 0x80 up too (file content, which need not be UTF-8).
inline std::string escaped(std::string_view text, bool ascii_only) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f && (byte < 0x80 || !ascii_only)) {
      out.push_back(c);
      continue;
    }
    constexpr std::string_view hex = "0123456789abcdef";
    out.append("\\x").push_back(hex[byte >> 4]);
    out.push_back(hex[byte & 0xfU]);
  }
  return out;
}

// A source name for messages: file names may hold control characters too.
inline std::string source_name(std::string_view source) { return escaped(source, false); }

// A quoted excerpt of bad text, kept short so that a binary file does not flood the message.
inline std::string excerpt(std::string_view text) {
  constexpr std::size_t limit = 40;
  std::string quoted(1, '\'');  // built by appending: GCC 12 warns falsely (-Wrestrict) on "'" + string
  quoted.append(escaped(text.substr(0, limit), true)).append(text.size() > limit ? "...'" : "'");
  return quoted;
}

inline std::string_view as_chars(Span<const std::byte> bytes) noexcept {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Bytes in memory, handed out in pieces as a stream's are.
class SpanBytes {
public:
  explicit SpanBytes(Span<const std::byte> bytes) noexcept : rest_(bytes) {}
  // Up to `count` bytes; fewer only at the end.
  Span<const std::byte> next(std::size_t count) noexcept {
    const auto piece = rest_.first(std::min(count, rest_.size()));
    rest_ = rest_.subspan(piece.size());
    return piece;
  }
  [[nodiscard]] std::optional<std::uint64_t> left() const noexcept { return rest_.size(); }

private:
  Span<const std::byte> rest_;
};

// A stream read through one buffer: a piece is valid until the next call. `size` is the stream's length where
// known (a regular file's), so that counts can be checked against it before anything is read or allocated.
class StreamBytes {
public:
  StreamBytes(std::istream& in, std::string_view source, std::optional<std::uint64_t> size)
      : in_(in), source_(source), size_(size) {}
  Span<const std::byte> next(std::size_t count) {
    if (buffer_.size() < count) buffer_.resize(count);
    in_.read(reinterpret_cast<char*>(buffer_.data()), static_cast<std::streamsize>(count));
    require(!in_.bad(), source_, ": cannot read file");
    const auto piece = Span<const std::byte>(buffer_).first(static_cast<std::size_t>(in_.gcount()));
    read_ += piece.size();
    return piece;
  }
  // The file may have changed since its size was taken: the readers still check every read.
  [[nodiscard]] std::optional<std::uint64_t> left() const noexcept {
    if (!size_) return std::nullopt;
    return *size_ > read_ ? *size_ - read_ : 0;
  }

private:
  std::istream& in_;
  std::string_view source_;
  std::optional<std::uint64_t> size_;
  std::uint64_t read_ = 0;
  std::vector<std::byte> buffer_;
};

// Reads to the end; returns how many bytes were left.
template <class Bytes>
std::uint64_t skip_rest(Bytes& bytes) {
  std::uint64_t count = 0;
  for (auto piece = bytes.next(chunk_bytes); !piece.empty(); piece = bytes.next(chunk_bytes)) count += piece.size();
  return count;
}

// Reads `count` items of `item_size` bytes in chunks of whole items, calling use(chunk, index of its first item);
// on a short read calls truncated(bytes of these items read), which must throw.
template <class Bytes, class Use, class Truncated>
void read_items(Bytes& bytes, std::uint64_t count, std::size_t item_size, Use&& use, Truncated&& truncated) {
  const std::uint64_t per_chunk = chunk_bytes / item_size;
  for (std::uint64_t index = 0; index < count;) {
    const auto items = static_cast<std::size_t>(std::min(count - index, per_chunk));
    const auto chunk = bytes.next(items * item_size);
    if (chunk.size() < items * item_size) truncated(index * item_size + chunk.size());
    use(chunk, index);
    index += items;
  }
}

// Gathers checked lengths. A count verified against the file's size is reserved at once. A count not known in
// advance grows in blocks, so that growing never copies what is held, of length - 1 in 32 bits (lengths are in
// [1, 2^32]); each block is freed once copied out, so the peak is at most 1.5 times the lengths returned, where
// a doubling vector reaches 3 times.
class LengthCollector {
public:
  // `verified_count`: a count already checked against the file's size (0: not known).
  LengthCollector(std::string_view source, std::uint64_t verified_count)
      : source_(source), verified_(verified_count > 0) {
    lengths_.reserve(static_cast<std::size_t>(verified_count));
  }

  void push(std::int64_t value, std::string_view where, std::uint64_t position) {
    check_length(value, source_, where, position);
    require(count_ < max_length_count, source_, ": ", where, " ", position, ": more than ", max_length_count,
            " lengths, the limit per file");
    ++count_;
    if (verified_) {
      lengths_.push_back(value);
      return;
    }
    if (blocks_.empty() || blocks_.back().size() == blocks_.back().capacity()) {
      constexpr std::uint64_t smallest = std::uint64_t{1} << 12;
      constexpr std::uint64_t largest = std::uint64_t{1} << 20;  // 4 MiB
      blocks_.emplace_back().reserve(static_cast<std::size_t>(std::clamp(count_, smallest, largest)));
    }
    static_assert(max_plausible_length - 1 <= std::numeric_limits<std::uint32_t>::max());
    blocks_.back().push_back(static_cast<std::uint32_t>(value - 1));
  }

  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }

  std::vector<std::int64_t> take() {
    if (verified_) return std::move(lengths_);
    lengths_.reserve(static_cast<std::size_t>(count_));
    for (std::vector<std::uint32_t>& block : blocks_) {
      for (const std::uint32_t below : block) lengths_.push_back(std::int64_t{below} + 1);
      std::vector<std::uint32_t>().swap(block);  // frees it (assigning {} would keep the capacity)
    }
    return std::move(lengths_);
  }

private:
  std::string_view source_;
  bool verified_;
  std::vector<std::int64_t> lengths_;
  std::vector<std::vector<std::uint32_t>> blocks_;
  std::uint64_t count_ = 0;
};

// One length per line, fed in pieces that may split lines anywhere: the result does not depend on where.
// A line's value keeps at most max_text_value_chars characters, and whitespace after it is counted, not kept,
// so a line of any length needs constant memory; an overlong value is rejected as soon as it is seen.
class TextLengthParser {
public:
  explicit TextLengthParser(std::string_view source) : source_(source), lengths_(source, 0) {}

  void feed(std::string_view piece) {
    while (true) {
      const std::size_t newline = piece.find('\n');
      if (newline == std::string_view::npos) {
        add_to_line(piece);
        return;
      }
      if (value_.empty() && !in_comment_) {
        end_value(value_of(piece.substr(0, newline)));  // the whole line is in this piece: no copy
      } else {
        add_to_line(piece.substr(0, newline));
        end_value(value_);
      }
      next_line();
      piece.remove_prefix(newline + 1);
    }
  }

  std::vector<std::int64_t> finish() {
    end_value(value_);  // the last line needs no line end
    require(lengths_.count() > 0, source_, ": no lengths (the file is empty or holds only comments)");
    return lengths_.take();
  }

private:
  static bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

  // A whole line's value: before any '#', without surrounding whitespace.
  static std::string_view value_of(std::string_view line) noexcept {
    line = line.substr(0, line.find('#'));
    while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
    while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
    return line;
  }

  void reject(std::string_view value) const {
    fail(source_, ": line ", line_, ": ", excerpt(value), " is not an integer length");
  }

  // A piece of a line split over two reads: the value is gathered in value_, its length capped.
  void add_to_line(std::string_view piece) {
    if (in_comment_) return;
    if (const std::size_t hash = piece.find('#'); hash != std::string_view::npos) {
      piece = piece.substr(0, hash);
      in_comment_ = true;
    }
    if (value_.empty()) {
      while (!piece.empty() && is_space(piece.front())) piece.remove_prefix(1);
    }
    std::size_t body = piece.size();
    while (body > 0 && is_space(piece[body - 1])) --body;
    if (body > 0) {
      if (value_.size() + space_count_ + body > max_text_value_chars) reject(value_ + spaces_ + std::string(piece));
      value_.append(spaces_).append(piece.substr(0, body));
      spaces_.clear();
      space_count_ = 0;
    }
    // Whitespace after the value so far: kept only as far as a value could still reach.
    const std::string_view trailing = piece.substr(body);
    spaces_.append(trailing.substr(0, std::min(trailing.size(), max_text_value_chars + 1 - spaces_.size())));
    space_count_ += trailing.size();
  }

  void end_value(std::string_view value) {
    if (value.empty()) return;
    if (value.size() > max_text_value_chars) reject(value);
    std::int64_t length = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), length);
    require(error != std::errc::result_out_of_range, source_, ": line ", line_, ": ", excerpt(value),
            " is out of range");
    if (error != std::errc{} || end != value.data() + value.size()) reject(value);
    lengths_.push(length, "line", line_);
  }

  void next_line() {
    value_.clear();
    spaces_.clear();
    space_count_ = 0;
    in_comment_ = false;
    ++line_;
  }

  std::string_view source_;
  LengthCollector lengths_;
  std::uint64_t line_ = 1;
  std::string value_;   // from the first to the last non-space character before any '#'
  std::string spaces_;  // whitespace after value_, up to max_text_value_chars + 1 characters
  std::uint64_t space_count_ = 0;
  bool in_comment_ = false;
};

template <class Bytes>
std::vector<std::int64_t> text_lengths(Bytes& bytes, std::string_view source) {
  TextLengthParser parser(source);
  for (auto piece = bytes.next(chunk_bytes); !piece.empty(); piece = bytes.next(chunk_bytes)) {
    parser.feed(as_chars(piece));
  }
  return parser.finish();
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
  void expect(char c) { require(consume(c), source_, ": header: expected '", c, "' at offset ", pos_); }
  std::string_view string_literal(std::string_view what) {
    require(pos_ < text_.size() && (text_[pos_] == '\'' || text_[pos_] == '"'), source_, ": header: expected ", what,
            " as a quoted string at offset ", pos_);
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
void append_values(Span<const std::byte> data, std::string_view where, std::uint64_t first, LengthCollector& out) {
  for (std::size_t i = 0; i < data.size(); i += sizeof(T)) {
    out.push(static_cast<std::int64_t>(load_le<T>(data.data() + i)), where, first + i / sizeof(T));
  }
}

struct NpyDtype {
  std::string_view descr;
  std::size_t size;
  void (*append)(Span<const std::byte>, std::string_view, std::uint64_t, LengthCollector&);
};

inline constexpr NpyDtype npy_dtypes[] = {{"<i2", 2, append_values<std::int16_t>},
                                          {"<i4", 4, append_values<std::int32_t>},
                                          {"<i8", 8, append_values<std::int64_t>},
                                          {"<u2", 2, append_values<std::uint16_t>},
                                          {"<u4", 4, append_values<std::uint32_t>}};

template <class Bytes>
std::vector<std::int64_t> npy_lengths(Bytes& bytes, std::string_view source) {
  constexpr std::string_view magic = "\x93NUMPY";
  const auto start = bytes.next(magic.size() + 2);
  require(start.size() == magic.size() + 2, source, ": too short for a .npy file (", start.size(), " bytes)");
  require(as_chars(start.first(magic.size())) == magic, source, ": not a .npy file (bad magic)");
  const auto major = std::to_integer<int>(start[6]);
  const auto minor = std::to_integer<int>(start[7]);
  require(major >= 1 && major <= 3 && minor == 0, source, ": unsupported .npy version ", major, ".", minor,
          " (expected 1.0, 2.0 or 3.0)");
  const std::size_t length_size = major == 1 ? 2 : 4;
  const auto length_field = bytes.next(length_size);
  require(length_field.size() == length_size, source, ": truncated .npy header");
  const std::uint32_t header_length =
      major == 1 ? load_le<std::uint16_t>(length_field.data()) : load_le<std::uint32_t>(length_field.data());
  require(header_length <= max_npy_header_bytes, source, ": header length ", header_length, " exceeds the limit of ",
          max_npy_header_bytes, " bytes");
  const std::string header_text(as_chars(bytes.next(header_length)));  // a copy: the next read reuses the buffer
  require(header_text.size() == header_length, source, ": header length ", header_length,
          " runs past the end of the file (", header_text.size(), " bytes follow)");
  const NpyHeader header(header_text, source);

  require(header.descr.empty() || header.descr.front() != '>', source, ": big-endian dtype ", excerpt(header.descr),
          " is not supported");
  const auto dtype = std::ranges::find(npy_dtypes, header.descr, &NpyDtype::descr);
  require(dtype != std::end(npy_dtypes), source, ": unsupported dtype ", excerpt(header.descr),
          " (expected <i2, <i4, <i8, <u2 or <u4)");
  require(header.shape_is_tuple && header.shape.size() == 1, source,
          ": shape must be one-dimensional, written (N,), got ", excerpt(header.shape_text));
  const std::uint64_t count = header.shape.front();
  require(count >= 1, source, ": no lengths (shape is (0,))");
  require(count <= max_length_count, source, ": header says ", count, " values, more than the limit of ",
          max_length_count, " lengths per file");

  auto truncated = [&](std::uint64_t held) {
    fail(source, ": truncated data: header says ", count, " values, file holds ", held);
  };
  auto trailing = [&](std::uint64_t extra) {
    require(extra == 0, source, ": ", extra, " trailing bytes after the ", count, " values");
  };
  const auto left = bytes.left();
  if (left) {
    if (count > *left / dtype->size) truncated(*left / dtype->size);
    trailing(*left - count * dtype->size);
  }
  LengthCollector lengths(source, left ? count : 0);
  read_items(
      bytes, count, dtype->size,
      [&](Span<const std::byte> chunk, std::uint64_t first) { dtype->append(chunk, "index", first, lengths); },
      [&](std::uint64_t read) { truncated(read / dtype->size); });
  trailing(skip_rest(bytes));
  return lengths.take();
}

// Megatron-LM's DType codes and their element sizes (index 0 is unused).
inline constexpr std::size_t megatron_dtype_sizes[] = {0, 1, 1, 2, 4, 8, 8, 4, 2};

template <class Bytes>
std::vector<std::int64_t> megatron_idx_lengths(Bytes& bytes, std::string_view source) {
  constexpr std::string_view magic{"MMIDIDX\0\0", 9};
  constexpr std::size_t header_size = 9 + 8 + 1 + 8 + 8;
  const auto header = bytes.next(header_size);
  require(header.size() >= magic.size() && as_chars(header.first(magic.size())) == magic, source,
          ": not a Megatron .idx file (bad magic)");
  require(header.size() == header_size, source, ": truncated .idx header (", header.size(), " bytes, needs ",
          header_size, ")");
  const auto version = load_le<std::uint64_t>(header.data() + 9);
  require(version == 1, source, ": unsupported .idx version ", version, " (expected 1)");
  const auto dtype_code = std::to_integer<std::size_t>(header[17]);
  require(dtype_code >= 1 && dtype_code < std::size(megatron_dtype_sizes), source, ": unknown dtype code ", dtype_code,
          " (expected 1 to 8)");
  const auto dtype_size = static_cast<std::int64_t>(megatron_dtype_sizes[dtype_code]);
  const auto sequences = load_le<std::uint64_t>(header.data() + 18);
  const auto documents = load_le<std::uint64_t>(header.data() + 26);
  require(sequences >= 1, source, ": no lengths (sequence count is 0)");
  require(sequences <= max_length_count, source, ": header says ", sequences, " sequences, more than the limit of ",
          max_length_count, " lengths per file");

  auto truncated = [&](std::uint64_t body) {
    fail(source, ": truncated: header says ", sequences, " sequences and ", documents, " documents, but only ", body,
         " bytes follow the header");
  };
  auto check_rest = [&](std::uint64_t rest) {
    require(rest == 0 || rest == sequences, source, ": ", rest,
            " unexpected bytes after the document indices (expected 0, or ", sequences, " bytes of sequence modes)");
  };
  const auto left = bytes.left();
  if (left) {
    // Divide rather than multiply: the document count comes from the file and its product could overflow.
    if (sequences > *left / 12 || documents > (*left - sequences * 12) / 8) truncated(*left);
    check_rest(*left - sequences * 12 - documents * 8);
  }

  LengthCollector collector(source, left ? sequences : 0);
  read_items(
      bytes, sequences, 4,
      [&](Span<const std::byte> chunk, std::uint64_t first) {
        append_values<std::int32_t>(chunk, "sequence", first, collector);
      },
      truncated);
  std::vector<std::int64_t> lengths = collector.take();

  // Pointers are byte offsets into the .bin file: each sequence starts where the previous one ends.
  std::int64_t expected = 0;
  read_items(
      bytes, sequences, 8,
      [&](Span<const std::byte> chunk, std::uint64_t first) {
        for (std::size_t at = 0; at < chunk.size(); at += 8) {
          const std::uint64_t i = first + at / 8;
          const auto pointer = load_le<std::int64_t>(chunk.data() + at);
          require(pointer == expected, source, ": sequence ", i, ": pointer ", pointer, " should be ", expected,
                  " (the previous pointer plus the previous length times ", dtype_size, " bytes)");
          // No overflow: at most 2^28 lengths below 2^31 tokens of at most 8 bytes stay below 2^62.
          expected = pointer + lengths[static_cast<std::size_t>(i)] * dtype_size;
        }
      },
      [&](std::uint64_t read) { truncated(sequences * 4 + read); });

  std::int64_t previous = 0;
  read_items(
      bytes, documents, 8,
      [&](Span<const std::byte> chunk, std::uint64_t first) {
        for (std::size_t at = 0; at < chunk.size(); at += 8) {
          const std::uint64_t i = first + at / 8;
          const auto index = load_le<std::int64_t>(chunk.data() + at);
          require(i > 0 || index == 0, source, ": document index 0 must be 0, got ", index);
          require(index >= previous, source, ": document index ", i, " (", index,
                  ") is smaller than the one before it (", previous, ")");
          previous = index;
        }
      },
      [&](std::uint64_t read) { truncated(sequences * 12 + read); });
  check_rest(skip_rest(bytes));
  require(documents >= 1 && static_cast<std::uint64_t>(previous) == sequences, source,
          ": the last document index must equal the sequence count ", sequences, ", got ",
          documents == 0 ? std::string("no document indices") : std::to_string(previous));
  return lengths;
}

// A file opened for reading, with its size where it has one (pipes and devices have none).
struct OpenFile {
  explicit OpenFile(const std::filesystem::path& path)
      : name(source_name(path.string())), stream(path, std::ios::binary) {
    require(static_cast<bool>(stream), name, ": cannot open file");
    std::error_code error;
    require(!std::filesystem::is_directory(path, error), name, ": is a directory");
    if (const auto bytes = std::filesystem::file_size(path, error); !error) size = bytes;
  }
  std::string name;
  std::ifstream stream;
  std::optional<std::uint64_t> size;
};

template <class Read>
std::vector<std::int64_t> read_file(const std::filesystem::path& path, Read read) {
  OpenFile file(path);
  StreamBytes bytes(file.stream, file.name, file.size);
  return read(bytes, file.name);
}

}  // namespace sluice::data::detail
