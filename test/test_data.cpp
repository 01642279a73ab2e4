#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <istream>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <sstream>
#include <streambuf>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sluice/core/random.hpp"
#include "sluice/core/span.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/readers.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/data_json.hpp"
#include "support.hpp"

using namespace sluice;
using namespace sluice::data;

namespace {

using Bytes = std::vector<std::byte>;

Bytes bytes_of(std::string_view text) {
  const auto view = std::as_bytes(std::span(text.data(), text.size()));
  return {view.begin(), view.end()};
}

template <class T>
void put_le(Bytes& out, T value) {
  using U = std::make_unsigned_t<T>;
  const auto bits = static_cast<U>(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<std::byte>((bits >> (8 * i)) & 0xffU));
}

template <class T>
Bytes encode(const std::vector<T>& values) {
  Bytes out;
  for (const T value : values) put_le(out, value);
  return out;
}

std::string npy_dict(std::string_view descr, std::string_view shape) {
  return "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + std::string(shape) + ", }";
}

// A .npy file as NumPy writes it: the header padded with spaces to a 64-byte boundary, ending in '\n'.
Bytes make_npy(std::string_view dict, const Bytes& data, int major = 1) {
  std::string header(dict);
  const std::size_t prefix = major == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  Bytes out = bytes_of("\x93NUMPY");
  out.push_back(static_cast<std::byte>(major));
  out.push_back(std::byte{0});
  if (major == 1) {
    put_le(out, static_cast<std::uint16_t>(header.size()));
  } else {
    put_le(out, static_cast<std::uint32_t>(header.size()));
  }
  const Bytes header_bytes = bytes_of(header);
  out.insert(out.end(), header_bytes.begin(), header_bytes.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

constexpr std::int64_t megatron_sizes[] = {0, 1, 1, 2, 4, 8, 8, 4, 2};

// A Megatron .idx file; pointers and document indices default to the consistent ones.
struct Idx {
  std::uint64_t version = 1;
  std::uint8_t dtype = 4;
  std::vector<std::int32_t> lengths{};
  std::optional<std::vector<std::int64_t>> pointers{};
  std::optional<std::vector<std::int64_t>> documents{};
  std::optional<std::uint64_t> sequence_count{};
  std::optional<std::uint64_t> document_count{};
  std::size_t trailer = 0;  // bytes after the document indices (sequence modes when == lengths.size())
};

Bytes make_idx(const Idx& spec) {
  std::vector<std::int64_t> pointers;
  std::int64_t pointer = 0;
  for (const std::int32_t length : spec.lengths) {
    pointers.push_back(pointer);
    pointer += length * (spec.dtype < 9 ? megatron_sizes[spec.dtype] : 1);
  }
  std::vector<std::int64_t> documents(spec.lengths.size() + 1);
  std::iota(documents.begin(), documents.end(), std::int64_t{0});
  if (spec.pointers) pointers = *spec.pointers;
  if (spec.documents) documents = *spec.documents;
  Bytes out = bytes_of(std::string_view("MMIDIDX\0\0", 9));
  put_le(out, spec.version);
  put_le(out, spec.dtype);
  put_le(out, spec.sequence_count.value_or(spec.lengths.size()));
  put_le(out, spec.document_count.value_or(documents.size()));
  for (const auto value : spec.lengths) put_le(out, value);
  for (const auto value : pointers) put_le(out, value);
  for (const auto value : documents) put_le(out, value);
  out.resize(out.size() + spec.trailer, std::byte{1});
  return out;
}

class TempDir {
public:
  TempDir()
      : path_(std::filesystem::temp_directory_path() /
              ("sluice-test-data-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::filesystem::path write(const std::string& name, const Bytes& content) const {
    const auto path = path_ / name;
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(content.data()), static_cast<std::streamsize>(content.size()));
    return path;
  }

private:
  std::filesystem::path path_;
};

// Byte flips (biased towards the header, where counts and sizes live), truncations, splices and garbage lines.
Bytes mutate(const Bytes& valid, Rng& rng) {
  Bytes out = valid;
  auto random_byte = [&rng] { return static_cast<std::byte>(rng.below(256)); };
  auto position = [&rng](std::size_t size) {
    return static_cast<std::size_t>(rng.below(2) == 0 ? rng.below(std::min<std::size_t>(size, 48)) : rng.below(size));
  };
  switch (rng.below(5)) {
    case 0:
      for (std::uint64_t flips = 1 + rng.below(4); flips > 0; --flips) out[position(out.size())] = random_byte();
      break;
    case 1: out.resize(static_cast<std::size_t>(rng.below(out.size()))); break;
    case 2: {
      const std::size_t at = static_cast<std::size_t>(rng.below(out.size() + 1));
      Bytes chunk(static_cast<std::size_t>(1 + rng.below(16)));
      for (std::byte& b : chunk) b = random_byte();
      out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), chunk.begin(), chunk.end());
      break;
    }
    case 3: {  // a garbage line after a line end (or first): signs, words, control and high bytes
      constexpr std::string_view pieces[] = {"-",
                                             "+",
                                             ".",
                                             "e",
                                             "nan",
                                             "NaN",
                                             "inf",
                                             "0x",
                                             "#",
                                             " ",
                                             "\t",
                                             "\r",
                                             "\x1b[2J",
                                             "\x7f",
                                             "\x85",
                                             "\xe2\x80\xa8",
                                             "9223372036854775808",
                                             "0"};
      std::string line;
      for (std::uint64_t parts = rng.below(6); parts > 0; --parts) {
        line += rng.below(3) == 0 ? std::string(1, static_cast<char>(rng.below(256)))
                                  : std::string(pieces[rng.below(std::size(pieces))]);
      }
      line += '\n';
      std::size_t at = static_cast<std::size_t>(rng.below(out.size() + 1));
      while (at > 0 && out[at - 1] != std::byte{'\n'}) --at;
      const Bytes inserted = bytes_of(line);
      out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), inserted.begin(), inserted.end());
      break;
    }
    default: {  // an extreme value over 8 bytes: the overflow cases of counts and offsets
      const std::size_t at = position(out.size());
      const std::byte fill = rng.below(2) == 0 ? std::byte{0xff} : std::byte{0x7f};
      for (std::size_t i = at; i < std::min(out.size(), at + 8); ++i) out[i] = fill;
      break;
    }
  }
  return out;
}

// A message fit for one line of any terminal: printable ASCII only (no line break, control or non-ASCII byte).
bool one_line(std::string_view message) {
  return std::ranges::all_of(message, [](char c) { return c >= 0x20 && c < 0x7f; });
}

// A reader's lengths, or the message of the invalid_input it raised; any other exception fails the test case.
struct Outcome {
  std::vector<std::int64_t> lengths;
  std::string error;
};

template <class Read>
Outcome outcome_of(Read&& read) {
  try {
    return {read(), {}};
  } catch (const invalid_input& error) {
    return {{}, error.what()};
  }
}

// The three ways into a format's reader: bytes in memory and a file (sizes known in advance), and a stream (size
// unknown, so that counts are checked as the data arrives).
struct Reader {
  std::vector<std::int64_t> (*bytes)(Span<const std::byte>, std::string_view);
  std::vector<std::int64_t> (*stream)(std::istream&, std::string_view);
  std::string extension;
};

std::vector<std::int64_t> text_from_bytes(Span<const std::byte> bytes, std::string_view source) {
  return parse_lengths_text(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), source);
}

const Reader text_reader{text_from_bytes, parse_lengths_text, ".txt"};
const Reader npy_reader{parse_lengths_npy, parse_lengths_npy, ".npy"};
const Reader idx_reader{parse_lengths_megatron_idx, parse_lengths_megatron_idx, ".idx"};

// Reads `input` the three ways (the file way every `file_every`-th call): all accept it with the same lengths, or
// all reject it with a one-line message that starts with the source name. Returns whether it was accepted.
class ReadAllWays {
public:
  ReadAllWays(const Reader& reader, std::uint64_t file_every) : reader_(reader), file_every_(file_every) {}

  bool operator()(const Bytes& input) {
    constexpr std::string_view source = "fuzz.input";
    const Outcome in_memory = outcome_of([&] { return reader_.bytes(input, source); });
    std::istringstream stream(std::string(reinterpret_cast<const char*>(input.data()), input.size()));
    const Outcome streamed = outcome_of([&] { return reader_.stream(stream, source); });
    for (const Outcome* outcome : {&in_memory, &streamed}) check(*outcome, source);
    REQUIRE(in_memory.error.empty() == streamed.error.empty());
    REQUIRE(in_memory.lengths == streamed.lengths);
    if (++calls_ % file_every_ == 0) {
      const auto path = dir_.write("fuzz" + reader_.extension, input);
      const Outcome from_file = outcome_of([&] { return read_lengths(path); });
      check(from_file, path.string());
      REQUIRE(from_file.error.empty() == in_memory.error.empty());
      REQUIRE(from_file.lengths == in_memory.lengths);
    }
    return in_memory.error.empty();
  }

private:
  static void check(const Outcome& outcome, std::string_view source) {
    if (outcome.error.empty()) {
      REQUIRE_FALSE(outcome.lengths.empty());
      for (const std::int64_t length : outcome.lengths) REQUIRE((length >= 1 && length <= max_plausible_length));
      return;
    }
    INFO(outcome.error);
    REQUIRE(outcome.error.starts_with(std::string(source) + ": "));
    REQUIRE(one_line(outcome.error));
  }

  const Reader& reader_;
  std::uint64_t file_every_;
  std::uint64_t calls_ = 0;
  TempDir dir_;
};

// Random bytes, then valid files mutated (truncations, byte flips biased to the header, spliced garbage, garbage
// lines, extreme counts): every input gives lengths or invalid_input, the same each way in (see ReadAllWays).
void fuzz(const Reader& reader, const std::vector<Bytes>& valid, std::string_view alphabet, std::uint64_t seed) {
  Rng rng(seed);
  ReadAllWays read(reader, 25);
  int accepted = 0;
  int rejected = 0;
  auto run = [&](const Bytes& input) { ++(read(input) ? accepted : rejected); };
  auto random_byte = [&] {
    return alphabet.empty() || rng.below(8) == 0 ? static_cast<std::byte>(rng.below(256))
                                                 : static_cast<std::byte>(alphabet[rng.below(alphabet.size())]);
  };
  // Random bytes, alone or behind a valid file's opening (so that they reach the later checks).
  for (int i = 0; i < 6000; ++i) {
    const Bytes& base = valid[static_cast<std::size_t>(rng.below(valid.size()))];
    Bytes input(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(i % 2 == 0 ? 0 : rng.below(base.size())));
    for (std::uint64_t extra = rng.below(96); extra > 0; --extra) input.push_back(random_byte());
    run(input);
  }
  for (int i = 0; i < 14000; ++i) {
    Bytes input = valid[static_cast<std::size_t>(rng.below(valid.size()))];
    for (std::uint64_t rounds = 1 + rng.below(3); rounds > 0 && !input.empty(); --rounds) input = mutate(input, rng);
    run(input);
  }
  CHECK(accepted + rejected == 20000);
  CHECK(accepted > 0);
  CHECK(rejected > 0);
}

// A stream of `head`, then `filler` repeated over `filler_bytes`, then `tail`, made as it is read: a file of any
// size without the memory. Counts the bytes it hands out, to show how far a reader went.
class GeneratedStream : public std::streambuf {
public:
  GeneratedStream(std::string head, std::string filler, std::uint64_t filler_bytes, std::string tail)
      : head_(std::move(head)), filler_(std::move(filler)), filler_bytes_(filler_bytes), tail_(std::move(tail)) {}
  [[nodiscard]] std::uint64_t handed_out() const noexcept { return handed_out_; }

protected:
  int_type underflow() override {
    const std::uint64_t size = head_.size() + filler_bytes_ + tail_.size();
    std::size_t count = 0;
    for (; count < buffer_.size() && handed_out_ < size; ++count, ++handed_out_) buffer_[count] = at(handed_out_);
    if (count == 0) return traits_type::eof();
    setg(buffer_.data(), buffer_.data(), buffer_.data() + count);
    return traits_type::to_int_type(buffer_.front());
  }

private:
  char at(std::uint64_t position) const {
    if (position < head_.size()) return head_[position];
    position -= head_.size();
    if (position < filler_bytes_) return filler_[position % filler_.size()];
    return tail_[position - filler_bytes_];
  }

  std::string head_;
  std::string filler_;
  std::uint64_t filler_bytes_;
  std::string tail_;
  std::uint64_t handed_out_ = 0;
  std::array<char, 4096> buffer_{};
};

// Rejections of `input` read from memory, from a stream and from a file: each message holds `message` and is
// one line.
void check_rejected_all_ways(const Reader& reader, const Bytes& input, std::string_view message) {
  const TempDir dir;
  const auto path = dir.write("bad" + reader.extension, input);
  std::istringstream stream(std::string(reinterpret_cast<const char*>(input.data()), input.size()));
  const std::string errors[] = {error_of([&] { (void)reader.bytes(input, "bad"); }),
                                error_of([&] { (void)reader.stream(stream, "bad"); }),
                                error_of([&] { (void)read_lengths(path); })};
  for (const std::string& error : errors) {
    CAPTURE(error);
    CHECK(contains(error, message));
    CHECK(one_line(error));
  }
  CHECK(errors[0].starts_with("bad: "));
  CHECK(errors[1].starts_with("bad: "));
  CHECK(errors[2].starts_with(path.string() + ": "));
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Text

TEST_CASE("text lengths: comments, blank lines, whitespace and CRLF") {
  const std::string text = "# header comment\n100\n  200  \n\n\t300 # trailing\r\n4294967296\r\n# end\n7";
  CHECK(parse_lengths_text(text, "a.txt") == std::vector<std::int64_t>{100, 200, 300, 4294967296, 7});
  CHECK(parse_lengths_text("5\n", "a.txt") == std::vector<std::int64_t>{5});
}

TEST_CASE("text lengths: bad content names the source and the line") {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"10\n\n# c\n12abc\n", "bad.txt: line 4: '12abc' is not an integer"},
      {"1.5\n", "bad.txt: line 1: '1.5' is not an integer"},
      {"1\n-3\n", "bad.txt: line 2: length must be >= 1, got -3"},
      {"0\n", "bad.txt: line 1: length must be >= 1, got 0"},
      {"1\n2\n99999999999999999999\n", "bad.txt: line 3: '99999999999999999999' is out of range"},
      {"4294967297\n", "bad.txt: line 1: length 4294967297 exceeds the plausible maximum"},
      {"+5\n", "bad.txt: line 1: '+5' is not an integer"},
      {"1 2\n", "bad.txt: line 1: '1 2' is not an integer"},
      {"", "bad.txt: no lengths"},
      {"# only a comment\n\n   \n", "bad.txt: no lengths"},
  };
  for (const auto& [text, message] : cases) {
    CAPTURE(text);
    CHECK(contains(error_of([&] { parse_lengths_text(text, "bad.txt"); }), message));
  }
}

TEST_CASE("text lengths: files, dispatch by extension, missing file") {
  const TempDir dir;
  const auto path = dir.write("lengths.txt", bytes_of("3\n1\n2\n"));
  CHECK(read_lengths_text(path) == std::vector<std::int64_t>{3, 1, 2});
  CHECK(read_lengths(path) == std::vector<std::int64_t>{3, 1, 2});
  CHECK(read_lengths(dir.write("lengths.dat", bytes_of("9\n"))) == std::vector<std::int64_t>{9});
  const auto missing = (std::filesystem::temp_directory_path() / "sluice-no-such-file.txt").string();
  CHECK(contains(error_of([&] { read_lengths(missing); }), missing + ": cannot open file"));
  CHECK(contains(error_of([&] { read_lengths_npy(missing); }), missing + ": cannot open file"));
  CHECK(contains(error_of([&] { LengthDataset::load(missing); }), missing + ": cannot open file"));
  const auto empty = dir.write("empty.txt", {});
  CHECK(contains(error_of([&] { read_lengths(empty); }), empty.string() + ": no lengths"));
  CHECK(error_of([&] { read_lengths(path.parent_path()); }) == path.parent_path().string() + ": is a directory");
}

TEST_CASE("text lengths: random and mutated inputs give lengths or invalid_input") {
  const std::vector<Bytes> valid = {bytes_of("# c\n12\n 34 \r\n\n5 # x\n"), bytes_of("1\n2\n3\n4294967296\n")};
  fuzz(text_reader, valid, "0123456789 \t\r\n#-+.e", 101);
}

TEST_CASE("text lengths: zero, negative, past int64, NaN and other non-numbers name the line") {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"7\n0\n", "bad.txt: line 2: length must be >= 1, got 0"},
      {"-0\n", "bad.txt: line 1: length must be >= 1, got 0"},
      {"-9223372036854775808\n", "bad.txt: line 1: length must be >= 1, got -9223372036854775808"},
      {"9223372036854775807\n", "bad.txt: line 1: length 9223372036854775807 exceeds the plausible maximum 4294967296"},
      {"9223372036854775808\n", "bad.txt: line 1: '9223372036854775808' is out of range"},
      {"-9223372036854775809\n", "bad.txt: line 1: '-9223372036854775809' is out of range"},
      {"nan\n", "bad.txt: line 1: 'nan' is not an integer length"},
      {"NaN\n", "bad.txt: line 1: 'NaN' is not an integer length"},
      {"inf\n", "bad.txt: line 1: 'inf' is not an integer length"},
      {"1e3\n", "bad.txt: line 1: '1e3' is not an integer length"},
      {"0x10\n", "bad.txt: line 1: '0x10' is not an integer length"},
      {"12 # ok\n13 14 # no\n", "bad.txt: line 2: '13 14' is not an integer length"},
      {"5\n\n\n1,024\n", "bad.txt: line 4: '1,024' is not an integer length"},
      // 40 characters are allowed (leading zeros); 41 are not, whatever they are.
      {"0000000000000000000000000000000000000042\n00000000000000000000000000000000000000042\n",
       "bad.txt: line 2: '0000000000000000000000000000000000000004...' is not an integer length"},
  };
  for (const auto& [text, message] : cases) {
    CAPTURE(text);
    CHECK(error_of([&] { parse_lengths_text(text, "bad.txt"); }) == message);
  }
  CHECK(parse_lengths_text("0000000000000000000000000000000000000042\n", "a.txt") == std::vector<std::int64_t>{42});
}

TEST_CASE("text lengths: a bad line is reported before the rest of a 4 GiB stream is read") {
  constexpr std::uint64_t huge = std::uint64_t{1} << 32;
  struct Case {
    std::string head;
    std::string filler;
    std::string message;
  };
  const Case cases[] = {
      {"oops\n", "1\n", "huge.txt: line 1: 'oops' is not an integer length"},
      {"12\n# c\n\n0\n", "1\n", "huge.txt: line 4: length must be >= 1, got 0"},
      // No line end at all, or garbage after a value: rejected once the value passes 40 characters.
      {"", "7", "huge.txt: line 1: '" + std::string(40, '7') + "...' is not an integer length"},
      {"5 ", "x", "huge.txt: line 1: '5 " + std::string(38, 'x') + "...' is not an integer length"},
      {"", std::string(1, '\0'),
       "huge.txt: line 1: '" +
           [] {
             std::string zeros;
             for (int i = 0; i < 40; ++i) zeros += "\\x00";
             return zeros;
           }() +
           "...' is not an integer length"},
  };
  for (const Case& bad : cases) {
    CAPTURE(bad.message);
    GeneratedStream file(bad.head, bad.filler, huge, "");
    std::istream in(&file);
    CHECK(error_of([&] { parse_lengths_text(in, "huge.txt"); }) == bad.message);
    CHECK(file.handed_out() <= 128 * 1024);  // a chunk or two of the 4 GiB
  }
}

TEST_CASE("text lengths: long whitespace, comments and blank runs are read in constant memory") {
  constexpr std::uint64_t long_run = std::uint64_t{1} << 20;  // 16 chunks
  auto read = [](std::string head, std::string filler, std::string tail) {
    GeneratedStream file(std::move(head), std::move(filler), long_run, std::move(tail));
    std::istream in(&file);
    return outcome_of([&] { return parse_lengths_text(in, "long.txt"); });
  };
  CHECK(read("5", " \t", "\r\n6\n").lengths == std::vector<std::int64_t>{5, 6});
  CHECK(read("# ", "comment", "\n9").lengths == std::vector<std::int64_t>{9});
  CHECK(read("4\n", "\n", "3").lengths == std::vector<std::int64_t>{4, 3});
  CHECK(read("", "\n", "x").error == "long.txt: line 1048577: 'x' is not an integer length");
  CHECK(read("5", " ", "6\n").error == "long.txt: line 1: '5" + std::string(39, ' ') + "...' is not an integer length");
}

TEST_CASE("text lengths: the result does not depend on where the reader's chunks split lines") {
  // `text` after a comment line that puts the first chunk boundary `offset` bytes into it.
  auto split_at = [](const std::string& text, std::size_t offset) {
    std::string content(1, '#');  // appended: GCC 12 warns falsely (-Wrestrict) on "#" + string
    return content.append(data::detail::chunk_bytes - offset - 2, 'x').append("\n").append(text);
  };
  // Lines that carry state across a split: a 40-character value padded on both sides, a value followed by long
  // whitespace, a long comment, a value and a comment.
  const std::string tricky = "  " + std::string(38, '0') + "42 \t # c\n7" + std::string(100, ' ') + "\r\n# " +
                             std::string(100, '#') + "\n\t 8#9\n";
  for (std::size_t offset = 0; offset <= tricky.size(); ++offset) {
    CAPTURE(offset);
    REQUIRE(parse_lengths_text(split_at(tricky, offset), "a.txt") == std::vector<std::int64_t>{42, 7, 8});
  }
  const std::pair<std::string, std::string> bad[] = {
      {" " + std::string(39, '0') + "42 \n", "'" + std::string(39, '0') + "4...' is not an integer length"},
      {"7" + std::string(100, ' ') + "5\n", "'7" + std::string(39, ' ') + "...' is not an integer length"},
      {"5\n" + std::string(100, ' ') + "1 2\n", "'1 2' is not an integer length"},
  };
  for (const auto& [text, message] : bad) {
    for (std::size_t offset = 0; offset <= text.size(); ++offset) {
      CAPTURE(offset);
      const std::string line = text.starts_with("5\n") ? "3" : "2";
      REQUIRE(error_of([&] { parse_lengths_text(split_at(text, offset), "a.txt"); }) ==
              "a.txt: line " + line + ": " + message);
    }
  }
}

TEST_CASE("text lengths: a bad first line of a 32 MiB file is reported with its line number") {
  const TempDir dir;
  std::string body(32 << 20, '\n');
  for (std::size_t i = 0; i < body.size(); i += 2) body[i] = '1';
  const auto first = dir.write("first.txt", bytes_of("oops\n" + body));
  CHECK(error_of([&] { read_lengths(first); }) == first.string() + ": line 1: 'oops' is not an integer length");
  CHECK(error_of([&] { LengthDataset::load(first); }) == first.string() + ": line 1: 'oops' is not an integer length");
  const auto third = dir.write("third.txt", bytes_of("1\n2\n-5\n" + body));
  CHECK(error_of([&] { read_lengths(third); }) == third.string() + ": line 3: length must be >= 1, got -5");
  body.resize(2 << 20);  // 1 Mi lines, read to the end
  const auto last = dir.write("last.txt", bytes_of(body + "abc"));
  CHECK(error_of([&] { read_lengths(last); }) ==
        last.string() + ": line " + std::to_string((1 << 20) + 1) + ": 'abc' is not an integer length");
  CHECK(read_lengths(dir.write("good.txt", bytes_of(body))).size() == (1 << 20));
}

TEST_CASE("lengths: control characters from the content or the file name are escaped, messages stay one line") {
  const std::pair<std::string_view, std::string_view> text_cases[] = {
      {"\x1b[2J5\n", "bad.txt: line 1: '\\x1b[2J5' is not an integer length"},
      {std::string_view("1\n2\r\n3\0\n", 8), "bad.txt: line 3: '3\\x00' is not an integer length"},
      {"5\v6\n", "bad.txt: line 1: '5\\x0b6' is not an integer length"},
      {"5\r6\n", "bad.txt: line 1: '5\\x0d6' is not an integer length"},
      {"\xe2\x80\xa8"
       "7\n",
       "bad.txt: line 1: '\\xe2\\x80\\xa87' is not an integer length"},
      {"\x7f\x85\n", "bad.txt: line 1: '\\x7f\\x85' is not an integer length"},
  };
  for (const auto& [text, message] : text_cases) {
    CAPTURE(message);
    CHECK(error_of([&] { parse_lengths_text(text, "bad.txt"); }) == message);
  }
  const Bytes three = encode<std::int32_t>({1, 2, 3});
  check_rejected_all_ways(npy_reader, make_npy("{'de\nscr': '<i4', 'fortran_order': False, 'shape': (3,)}", three),
                          ": header: unexpected key 'de\\x0ascr'");
  check_rejected_all_ways(npy_reader, make_npy(npy_dict("<i4\x1b[0m", "(3,)"), three),
                          ": unsupported dtype '<i4\\x1b[0m'");
  check_rejected_all_ways(npy_reader, make_npy(npy_dict("<i4", "(3,\t1)"), three), "got '(3,\\x091)'");
  const TempDir dir;
  const auto odd_name = dir.write("bad\nname\x1b.txt", bytes_of("x\n"));
  const std::string error = error_of([&] { read_lengths(odd_name); });
  CHECK(contains(error, "bad\\x0aname\\x1b.txt: line 1: 'x' is not an integer length"));
  CHECK(one_line(error));
}

// ---------------------------------------------------------------------------------------------------------------
// NumPy

TEST_CASE("npy lengths: every accepted dtype and version") {
  const std::vector<std::int64_t> expected = {1, 300, 32767};
  CHECK(parse_lengths_npy(make_npy(npy_dict("<i2", "(3,)"), encode<std::int16_t>({1, 300, 32767})), "a.npy") ==
        expected);
  CHECK(parse_lengths_npy(make_npy(npy_dict("<u2", "(3,)"), encode<std::uint16_t>({1, 300, 32767})), "a.npy") ==
        expected);
  CHECK(parse_lengths_npy(make_npy(npy_dict("<i4", "(3,)"), encode<std::int32_t>({1, 300, 32767})), "a.npy") ==
        expected);
  CHECK(parse_lengths_npy(make_npy(npy_dict("<u4", "(2,)"), encode<std::uint32_t>({4294967295U, 2})), "a.npy") ==
        std::vector<std::int64_t>{4294967295, 2});
  CHECK(parse_lengths_npy(make_npy(npy_dict("<i8", "(2,)"), encode<std::int64_t>({4294967296, 9})), "a.npy") ==
        std::vector<std::int64_t>{4294967296, 9});
  for (const int major : {1, 2, 3}) {
    CAPTURE(major);
    CHECK(parse_lengths_npy(make_npy(npy_dict("<i4", "(3,)"), encode<std::int32_t>({1, 300, 32767}), major), "a.npy") ==
          expected);
  }
}

TEST_CASE("npy lengths: header spellings NumPy and hand-written files use") {
  const Bytes data = encode<std::int32_t>({7, 8});
  for (const std::string_view dict : {
           "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
           "{'shape': (2,), 'fortran_order': True, 'descr': '<i4'}",
           "{\"descr\":\"<i4\",\"fortran_order\":False,\"shape\":( 2 , )}",
           "  {  'descr' : '<i4' , 'fortran_order' : False , 'shape' : (2,) ,  }  ",
       }) {
    CAPTURE(dict);
    CHECK(parse_lengths_npy(make_npy(dict, data), "a.npy") == std::vector<std::int64_t>{7, 8});
  }
}

TEST_CASE("npy lengths: bad files name the source and the problem") {
  const Bytes three = encode<std::int32_t>({1, 2, 3});
  const Bytes good = make_npy(npy_dict("<i4", "(3,)"), three);
  Bytes bad_magic = good;
  bad_magic[1] = std::byte{'X'};
  Bytes bad_version = good;
  bad_version[6] = std::byte{4};
  Bytes bad_minor = good;
  bad_minor[7] = std::byte{1};
  Bytes long_header = good;
  long_header[8] = std::byte{0xff};
  long_header[9] = std::byte{0xff};
  Bytes trailing = good;
  trailing.push_back(std::byte{0});
  const Bytes truncated(good.begin(), good.end() - 5);
  const std::pair<Bytes, std::string_view> cases[] = {
      {bytes_of("\x93NUM"), "too short"},
      {bad_magic, "bad magic"},
      {bad_version, "unsupported .npy version 4.0"},
      {bad_minor, "unsupported .npy version 1.1"},
      {long_header, "header length 65535 runs past the end of the file"},
      {truncated, "truncated data: header says 3 values, file holds 1"},
      {trailing, "1 trailing bytes after the 3 values"},
      {make_npy(npy_dict("<i4", "(5,)"), three), "truncated data: header says 5 values, file holds 3"},
      {make_npy(npy_dict(">i4", "(3,)"), three), "big-endian dtype '>i4' is not supported"},
      {make_npy(npy_dict("<f4", "(3,)"), three), "unsupported dtype '<f4'"},
      {make_npy(npy_dict("|u1", "(3,)"), three), "unsupported dtype '|u1'"},
      {make_npy(npy_dict("<i4", "(3, 1)"), three), "shape must be one-dimensional, written (N,), got '(3, 1)'"},
      {make_npy(npy_dict("<i4", "()"), three), "shape must be one-dimensional, written (N,), got '()'"},
      {make_npy(npy_dict("<i4", "(3)"), three), "got '(3)'"},
      {make_npy(npy_dict("<i4", "(0,)"), {}), "no lengths"},
      {make_npy(npy_dict("<i4", "(-3,)"), three), "'shape' must be a tuple of non-negative integers"},
      {make_npy(npy_dict("<i4", "(99999999999999999999999,)"), three), "'shape' must be a tuple"},
      {make_npy("{'descr': '<i4', 'shape': (3,)}", three), "needs the keys"},
      {make_npy("{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': (3,)}", three),
       "duplicate key 'descr'"},
      {make_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), 'extra': 1}", three),
       "unexpected key 'extra'"},
      {make_npy("{'descr': '<i4', 'fortran_order': 0, 'shape': (3,)}", three), "must be True or False"},
      {make_npy("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (3,)}", three), "quoted string"},
      {make_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (3,)} x", three), "unexpected text"},
      {make_npy("{'descr': '<i4, 'fortran_order': False, 'shape': (3,)}", three), "header: expected ','"},
      {make_npy(npy_dict("<i4", "(3,)"), encode<std::int32_t>({1, 0, 3})), "index 1: length must be >= 1, got 0"},
      {make_npy(npy_dict("<i2", "(2,)"), encode<std::int16_t>({5, -2})), "index 1: length must be >= 1, got -2"},
      {make_npy(npy_dict("<i8", "(1,)"), encode<std::int64_t>({std::int64_t{1} << 40})),
       "index 0: length 1099511627776 exceeds the plausible maximum"},
  };
  for (const auto& [bytes, message] : cases) {
    CAPTURE(message);
    const std::string error = error_of([&] { parse_lengths_npy(bytes, "bad.npy"); });
    CHECK(contains(error, "bad.npy: "));
    CHECK(contains(error, message));
  }
}

TEST_CASE("npy lengths: files and dispatch by extension") {
  const TempDir dir;
  const auto path = dir.write("lengths.npy", make_npy(npy_dict("<u2", "(2,)"), encode<std::uint16_t>({65535, 1})));
  CHECK(read_lengths_npy(path) == std::vector<std::int64_t>{65535, 1});
  CHECK(read_lengths(path) == std::vector<std::int64_t>{65535, 1});
  const auto bad = dir.write("bad.npy", bytes_of("12\n"));
  CHECK(contains(error_of([&] { read_lengths(bad); }), bad.string() + ": too short"));
}

TEST_CASE("npy lengths: random and mutated inputs give lengths or invalid_input") {
  const std::vector<Bytes> valid = {
      make_npy(npy_dict("<i4", "(3,)"), encode<std::int32_t>({1, 2, 3})),
      make_npy(npy_dict("<i8", "(2,)"), encode<std::int64_t>({4096, 77}), 2),
      make_npy(npy_dict("<u2", "(4,)"), encode<std::uint16_t>({1, 2, 3, 4}), 3),
      make_npy("{'shape':(1,),'descr':'<u4','fortran_order':True}", encode<std::uint32_t>({9})),
  };
  fuzz(npy_reader, valid, "", 202);
}

TEST_CASE("npy lengths: every truncation is rejected, from memory, a stream and a file") {
  const Bytes good = make_npy(npy_dict("<i4", "(3,)"), encode<std::int32_t>({1, 2, 3}));
  const std::size_t data_start = good.size() - 12;
  for (std::size_t size = 0; size < good.size(); ++size) {
    CAPTURE(size);
    const Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(size));
    if (size < 8) {
      check_rejected_all_ways(npy_reader, cut, ": too short for a .npy file (" + std::to_string(size) + " bytes)");
    } else if (size < 10) {
      check_rejected_all_ways(npy_reader, cut, ": truncated .npy header");
    } else if (size < data_start) {
      check_rejected_all_ways(npy_reader, cut, "runs past the end of the file");
    } else {
      const std::string held = std::to_string((size - data_start) / 4);
      check_rejected_all_ways(npy_reader, cut, "truncated data: header says 3 values, file holds " + held);
    }
  }
}

TEST_CASE("npy lengths: counts past the file or the limit, absurd headers, values out of range") {
  const Bytes three = encode<std::int32_t>({1, 2, 3});
  const std::string limit = std::to_string(max_length_count);
  const std::pair<Bytes, std::string> cases[] = {
      {make_npy(npy_dict("<i4", "(" + limit + ",)"), three),
       ": truncated data: header says " + limit + " values, file holds 3"},
      {make_npy(npy_dict("<i4", "(" + std::to_string(max_length_count + 1) + ",)"), three),
       ": header says 268435457 values, more than the limit of 268435456 lengths per file"},
      {make_npy(npy_dict("<i4", "(18446744073709551615,)"), three),
       ": header says 18446744073709551615 values, more than the limit"},
      {make_npy(npy_dict("<i4", "(" + std::string(4000, '9') + ",)"), three, 2), "'shape' must be a tuple"},
      {make_npy(npy_dict("<u8", "(3,)"), three), "unsupported dtype '<u8'"},
      {make_npy(npy_dict("<f8", "(3,)"), three), "unsupported dtype '<f8'"},
      {make_npy(npy_dict("<i4", "(1, 3)"), three), "shape must be one-dimensional"},
      {make_npy(npy_dict("<i4", "(3,)") + std::string(70000, ' '), three, 2), "exceeds the limit of 65535 bytes"},
      {make_npy(npy_dict("<i8", "(3,)"), encode<std::int64_t>({5, std::numeric_limits<std::int64_t>::min(), 1})),
       ": index 1: length must be >= 1, got -9223372036854775808"},
      {make_npy(npy_dict("<i8", "(1,)"), encode<std::int64_t>({std::numeric_limits<std::int64_t>::max()})),
       ": index 0: length 9223372036854775807 exceeds the plausible maximum"},
      {make_npy(npy_dict("<u4", "(2,)"), encode<std::uint32_t>({7, 0})), ": index 1: length must be >= 1, got 0"},
  };
  for (const auto& [bytes, message] : cases) {
    CAPTURE(message);
    check_rejected_all_ways(npy_reader, bytes, message);
  }
  Bytes huge_header = make_npy(npy_dict("<i4", "(3,)"), three, 2);
  huge_header[8] = huge_header[9] = huge_header[10] = huge_header[11] = std::byte{0xff};
  check_rejected_all_ways(npy_reader, huge_header, ": header length 4294967295 exceeds the limit of 65535 bytes");
}

// ---------------------------------------------------------------------------------------------------------------
// Megatron .idx

TEST_CASE("megatron idx lengths: every dtype code, with and without sequence modes") {
  for (std::uint8_t dtype = 1; dtype <= 8; ++dtype) {
    CAPTURE(int{dtype});
    CHECK(parse_lengths_megatron_idx(make_idx({.dtype = dtype, .lengths = {5, 1, 2047}}), "a.idx") ==
          std::vector<std::int64_t>{5, 1, 2047});
  }
  CHECK(parse_lengths_megatron_idx(make_idx({.lengths = {5, 1, 9}, .trailer = 3}), "a.idx") ==
        std::vector<std::int64_t>{5, 1, 9});
  // Several sequences per document: the document indices skip.
  CHECK(parse_lengths_megatron_idx(make_idx({.lengths = {4, 4, 4, 4}, .documents = std::vector<std::int64_t>{0, 3, 4}}),
                                   "a.idx") == std::vector<std::int64_t>{4, 4, 4, 4});
}

TEST_CASE("megatron idx lengths: bad files name the source and the problem") {
  const std::vector<std::int32_t> three = {5, 6, 7};
  Bytes bad_magic = make_idx({.lengths = three});
  bad_magic[0] = std::byte{'X'};
  const Bytes good = make_idx({.lengths = three});
  const Bytes header_only(good.begin(), good.begin() + 20);
  const Bytes truncated(good.begin(), good.end() - 1);
  const std::pair<Bytes, std::string_view> cases[] = {
      {bad_magic, "bad magic"},
      {bytes_of("MMI"), "bad magic"},
      {header_only, "truncated .idx header (20 bytes, needs 34)"},
      {make_idx({.version = 2, .lengths = three}), "unsupported .idx version 2"},
      {make_idx({.dtype = 0, .lengths = three}), "unknown dtype code 0"},
      {make_idx({.dtype = 9, .lengths = three}), "unknown dtype code 9"},
      {make_idx({.lengths = {}}), "no lengths (sequence count is 0)"},
      {truncated, "header says 3 sequences and 4 documents, but only"},
      {make_idx({.lengths = three, .sequence_count = std::uint64_t{1} << 62}),
       "header says 4611686018427387904 sequences, more than the limit of 268435456 lengths per file"},
      {make_idx({.lengths = three, .document_count = ~std::uint64_t{0}}), "truncated: header says 3 sequences and"},
      {make_idx({.lengths = three, .trailer = 2}), "2 unexpected bytes after the document indices"},
      {make_idx({.lengths = three, .trailer = 4}), "4 unexpected bytes"},
      {make_idx({.lengths = three, .pointers = std::vector<std::int64_t>{8, 28, 52}}),
       "sequence 0: pointer 8 should be 0"},
      {make_idx({.lengths = three, .pointers = std::vector<std::int64_t>{0, 20, 45}}),
       "sequence 2: pointer 45 should be 44"},
      {make_idx({.lengths = three, .documents = std::vector<std::int64_t>{1, 2, 3, 3}}), "document index 0 must be 0"},
      {make_idx({.lengths = three, .documents = std::vector<std::int64_t>{0, 2, 1, 3}}),
       "document index 2 (1) is smaller than the one before it (2)"},
      {make_idx({.lengths = three, .documents = std::vector<std::int64_t>{0, 1, 2, 2}}),
       "the last document index must equal the sequence count 3, got 2"},
      {make_idx({.lengths = three, .documents = std::vector<std::int64_t>{}}), "got no document indices"},
      {make_idx({.lengths = {5, 0, 7}}), "sequence 1: length must be >= 1, got 0"},
      {make_idx({.lengths = {5, -7}}), "sequence 1: length must be >= 1, got -7"},
  };
  for (const auto& [bytes, message] : cases) {
    CAPTURE(message);
    const std::string error = error_of([&] { parse_lengths_megatron_idx(bytes, "bad.idx"); });
    CHECK(contains(error, "bad.idx: "));
    CHECK(contains(error, message));
  }
}

TEST_CASE("megatron idx lengths: files and dispatch by extension") {
  const TempDir dir;
  const auto path = dir.write("corpus_text_document.idx", make_idx({.dtype = 8, .lengths = {100, 200}, .trailer = 2}));
  CHECK(read_lengths_megatron_idx(path) == std::vector<std::int64_t>{100, 200});
  CHECK(read_lengths(path) == std::vector<std::int64_t>{100, 200});
  CHECK(LengthDataset::load(path).tokens() == 300);
  const auto bad = dir.write("bad.idx", bytes_of("100\n200\n"));
  CHECK(contains(error_of([&] { read_lengths(bad); }), bad.string() + ": not a Megatron .idx file"));
}

TEST_CASE("megatron idx lengths: random and mutated inputs give lengths or invalid_input") {
  const std::vector<Bytes> valid = {
      make_idx({.lengths = {5, 6, 7}}),
      make_idx({.dtype = 8, .lengths = {1, 2, 3, 4}, .trailer = 4}),
      make_idx({.dtype = 5, .lengths = {100}, .documents = std::vector<std::int64_t>{0, 0, 1}}),
  };
  fuzz(idx_reader, valid, "", 303);
}

TEST_CASE("megatron idx lengths: every truncation is rejected, from memory, a stream and a file") {
  const Bytes good = make_idx({.lengths = {5, 6, 7}});
  for (std::size_t size = 0; size < good.size(); ++size) {
    CAPTURE(size);
    const Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(size));
    if (size < 9) {
      check_rejected_all_ways(idx_reader, cut, ": not a Megatron .idx file (bad magic)");
    } else if (size < 34) {
      const std::string header = std::to_string(size);
      check_rejected_all_ways(idx_reader, cut, ": truncated .idx header (" + header + " bytes, needs 34)");
    } else {
      check_rejected_all_ways(idx_reader, cut,
                              ": truncated: header says 3 sequences and 4 documents, but only " +
                                  std::to_string(size - 34) + " bytes follow the header");
    }
  }
}

TEST_CASE("megatron idx lengths: counts past the file or the limit, lengths out of range") {
  const std::vector<std::int32_t> three = {5, 6, 7};
  const std::string limit = std::to_string(max_length_count);
  const std::pair<Bytes, std::string> cases[] = {
      {make_idx({.lengths = three, .sequence_count = max_length_count}),
       ": truncated: header says " + limit + " sequences and 4 documents, but only 68 bytes follow the header"},
      {make_idx({.lengths = three, .sequence_count = max_length_count + 1}),
       ": header says 268435457 sequences, more than the limit of 268435456 lengths per file"},
      {make_idx({.lengths = three, .sequence_count = ~std::uint64_t{0}}),
       ": header says 18446744073709551615 sequences, more than the limit"},
      {make_idx({.lengths = three, .document_count = std::uint64_t{1} << 61}),
       ": truncated: header says 3 sequences and 2305843009213693952 documents"},
      {make_idx({.lengths = {5, std::numeric_limits<std::int32_t>::min()}}),
       ": sequence 1: length must be >= 1, got -2147483648"},
      {make_idx({.lengths = {0}}), ": sequence 0: length must be >= 1, got 0"},
  };
  for (const auto& [bytes, message] : cases) {
    CAPTURE(message);
    check_rejected_all_ways(idx_reader, bytes, message);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Dataset

TEST_CASE("dataset: validation names the source and the index") {
  CHECK(contains(error_of([] { LengthDataset({}, "mem"); }), "mem: no lengths"));
  CHECK(contains(error_of([] { LengthDataset({4, 0}, "mem"); }), "mem: index 1: length must be >= 1, got 0"));
  CHECK(contains(error_of([] { LengthDataset({-1}, "mem"); }), "mem: index 0: length must be >= 1"));
  CHECK(contains(error_of([] {
                   LengthDataset({1, 2, max_plausible_length + 1}, "mem");
                 }),
                 "mem: index 2: length 4294967297 exceeds the plausible maximum"));
  CHECK_NOTHROW(LengthDataset({max_plausible_length}, "mem"));
}

TEST_CASE("dataset: stats by nearest rank") {
  const LengthDataset dataset({5, 1, 9, 3, 7, 2, 8, 10, 4, 6}, "mem");
  CHECK(dataset.size() == 10);
  CHECK(dataset.tokens() == 55);
  CHECK(dataset.source() == "mem");
  CHECK_FALSE(dataset.context().has_value());
  const LengthStats stats = dataset.stats();
  CHECK(
      stats ==
      LengthStats{
          .count = 10, .tokens = 55, .min = 1, .max = 10, .p50 = 5, .p90 = 9, .p99 = 10, .truncated = 0, .mean = 5.5});
  CHECK(std::ranges::equal(dataset.lengths(), std::vector<std::int64_t>{5, 1, 9, 3, 7, 2, 8, 10, 4, 6}));

  // 1..200 shuffled: rank ceil(p * 200 / 100) is the value itself.
  std::vector<std::int64_t> lengths(200);
  std::iota(lengths.begin(), lengths.end(), std::int64_t{1});
  Rng(3).shuffle(std::span(lengths));
  const LengthStats big = LengthDataset(lengths, "mem").stats();
  CHECK(big.p50 == 100);
  CHECK(big.p90 == 180);
  CHECK(big.p99 == 198);
  CHECK(big.mean == doctest::Approx(100.5));
  const LengthStats one = LengthDataset({42}, "mem").stats();
  CHECK(one == LengthStats{.count = 1,
                           .tokens = 42,
                           .min = 42,
                           .max = 42,
                           .p50 = 42,
                           .p90 = 42,
                           .p99 = 42,
                           .truncated = 0,
                           .mean = 42.0});
}

TEST_CASE("dataset: truncation to a context") {
  const LengthDataset dataset({100, 2000, 5000, 300, 1000}, "mem");
  const LengthDataset cut = dataset.truncated(1000);
  CHECK(std::ranges::equal(cut.lengths(), std::vector<std::int64_t>{100, 1000, 1000, 300, 1000}));
  CHECK(cut.truncated_count() == 2);  // 1000 itself is not cut
  CHECK(cut.context() == 1000);
  CHECK(cut.tokens() == 3400);
  CHECK(cut.stats().truncated == 2);
  CHECK(cut.source() == "mem");
  const LengthDataset tighter = cut.truncated(250);
  CHECK(std::ranges::equal(tighter.lengths(), std::vector<std::int64_t>{100, 250, 250, 250, 250}));
  CHECK(tighter.truncated_count() == 4);
  CHECK(tighter.context() == 250);
  const LengthDataset looser = cut.truncated(4000);  // keeps the tighter context already applied
  CHECK(looser.context() == 1000);
  CHECK(looser.truncated_count() == 2);
  CHECK(std::ranges::equal(looser.lengths(), cut.lengths()));
  CHECK(dataset.truncated(max_plausible_length).truncated_count() == 0);
  CHECK(contains(error_of([&] { (void)dataset.truncated(0); }), "mem: context must be >= 1, got 0"));
  CHECK_THROWS_AS((void)dataset.truncated(-5), invalid_input);
}

TEST_CASE("dataset: histogram bins are (lower, upper]") {
  const LengthDataset dataset({1, 128, 129, 256, 257, 1000}, "mem");
  const LengthHistogram histogram = dataset.histogram(128);
  CHECK(histogram.bin_width == 128);
  const std::vector<HistogramBin> expected = {{0, 128, 2},   {128, 256, 2}, {256, 384, 1}, {384, 512, 0},
                                              {512, 640, 0}, {640, 768, 0}, {768, 896, 0}, {896, 1024, 1}};
  CHECK(histogram.bins == expected);
  // The first bin is the first non-empty one, not bin 0.
  CHECK(LengthDataset({300, 310}, "mem").histogram(100).bins ==
        std::vector<HistogramBin>{{200, 300, 1}, {300, 400, 1}});
  CHECK(LengthDataset({7, 7, 7}, "mem").histogram(1).bins == std::vector<HistogramBin>{{6, 7, 3}});
  const auto wide = LengthDataset({1, max_plausible_length}, "mem").histogram(std::numeric_limits<std::int64_t>::max());
  CHECK(wide.bins == std::vector<HistogramBin>{{0, std::numeric_limits<std::int64_t>::max(), 2}});
  CHECK(contains(error_of([&] { (void)dataset.histogram(0); }), "mem: histogram bin width must be >= 1, got 0"));
  CHECK(contains(error_of([] {
                   (void)LengthDataset({1, max_plausible_length}, "mem").histogram(1);
                 }),
                 "use a wider bin"));
}

TEST_CASE("dataset: bundled length files") {
  const std::filesystem::path dir = std::filesystem::path(SLUICE_BUNDLED_DATA_DIR) / "lengths";
  const LengthDataset man = LengthDataset::load(dir / "man-pages.lengths.txt");
  CHECK(man.size() == 21148);
  CHECK(man.stats().max == 239191);
  const LengthDataset cpython = LengthDataset::load(dir / "cpython-stdlib.lengths.txt");
  CHECK(cpython.size() == 1762);
  CHECK(cpython.stats().max == 160249);
  // Long documents: 48 past 128K tokens.
  const LengthDataset changelogs = LengthDataset::load(dir / "debian-changelogs.lengths.txt");
  CHECK(changelogs.size() == 1167);
  CHECK(changelogs.stats().max == 2390753);
  CHECK(std::ranges::count_if(changelogs.lengths(), [](std::int64_t length) { return length > 131072; }) == 48);
  std::int64_t binned = 0;
  for (const HistogramBin& bin : man.histogram(1024).bins) binned += bin.count;
  CHECK(binned == 21148);
}

// ---------------------------------------------------------------------------------------------------------------
// Sampler

namespace {

// Draws batches until `epochs` epochs are complete.
std::vector<Batch> draw(BatchSampler& sampler, std::int64_t epochs) {
  std::vector<Batch> batches;
  while (true) {
    Batch batch = sampler.next();
    if (batch.epoch == epochs) return batches;
    batches.push_back(std::move(batch));
  }
}

}  // namespace

TEST_CASE("sampler: every index once per epoch, budget respected, greedy, deterministic") {
  Rng rng(11);
  std::vector<std::int64_t> lengths(300);
  for (std::int64_t& length : lengths) length = rng.uniform_int(1, 120);
  lengths[17] = 500;  // longer than the budget
  const LengthDataset dataset(lengths, "mem");
  const SamplerOptions options{.tokens_per_batch = 200, .seed = 9};
  BatchSampler sampler(dataset, options);
  const std::vector<Batch> batches = draw(sampler, 3);

  std::vector<std::vector<std::int64_t>> orders(3);
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const Batch& batch = batches[b];
    REQUIRE_FALSE(batch.sequences.empty());
    std::int64_t tokens = 0;
    for (const Sequence& sequence : batch.sequences) {
      CHECK(sequence.length() == lengths[static_cast<std::size_t>(sequence.id())]);
      tokens += sequence.length();
      orders[static_cast<std::size_t>(batch.epoch)].push_back(sequence.id());
    }
    CHECK(batch.tokens == tokens);
    CHECK((batch.tokens <= 200 || batch.sequences.size() == 1));
    if (batch.sequences.front().id() == 17) CHECK(batch.sequences.size() == 1);
    const bool epoch_start = b == 0 || batches[b - 1].epoch != batch.epoch;
    CHECK(batch.index == (epoch_start ? 0 : batches[b - 1].index + 1));
    // Greedy: a batch closed only because the next sequence did not fit.
    if (b + 1 < batches.size() && batches[b + 1].epoch == batch.epoch) {
      CHECK(batch.tokens + batches[b + 1].sequences.front().length() > 200);
    }
  }
  for (const auto& order : orders) {
    std::vector<std::int64_t> sorted = order;
    std::ranges::sort(sorted);
    std::vector<std::int64_t> all(lengths.size());
    std::iota(all.begin(), all.end(), std::int64_t{0});
    CHECK(sorted == all);
  }
  CHECK(orders[0] != orders[1]);

  BatchSampler again(dataset, options);
  CHECK(draw(again, 3) == batches);
  BatchSampler other(dataset, {.tokens_per_batch = 200, .seed = 10});
  CHECK(draw(other, 1).front().sequences != batches.front().sequences);
}

TEST_CASE("sampler: oversize sequences form batches alone") {
  BatchSampler sampler(LengthDataset({10, 500, 10}, "mem"), {.tokens_per_batch = 100, .seed = 1});
  const std::vector<Batch> batches = draw(sampler, 1);
  std::int64_t oversize = 0;
  for (const Batch& batch : batches) {
    if (batch.tokens == 500) {
      ++oversize;
      CHECK(batch.sequences.size() == 1);
    }
  }
  CHECK(oversize == 1);
}

TEST_CASE("sampler: drop_last skips the smaller batch at the end of each epoch") {
  BatchSampler kept(LengthDataset({60, 60, 60}, "mem"), {.tokens_per_batch = 100, .seed = 4});
  CHECK(draw(kept, 2).size() == 6);
  BatchSampler dropped(LengthDataset({60, 60, 60}, "mem"), {.tokens_per_batch = 100, .seed = 4, .drop_last = true});
  const std::vector<Batch> batches = draw(dropped, 2);
  REQUIRE(batches.size() == 4);
  CHECK(batches[0].epoch == 0);
  CHECK(batches[1].epoch == 0);
  CHECK(batches[1].index == 1);
  CHECK(batches[2].epoch == 1);
  CHECK(batches[2].index == 0);
  BatchSampler pairs(LengthDataset({60, 60, 60}, "mem"), {.tokens_per_batch = 120, .seed = 4, .drop_last = true});
  for (const Batch& batch : draw(pairs, 3)) CHECK(batch.tokens == 120);
  // A last batch that fills the budget exactly is not a remainder.
  BatchSampler full(LengthDataset({50, 50, 50, 50}, "mem"), {.tokens_per_batch = 100, .drop_last = true});
  CHECK(draw(full, 2).size() == 4);
  // Nor is a last batch holding one oversize sequence.
  BatchSampler big(LengthDataset({500}, "mem"), {.tokens_per_batch = 100, .drop_last = true});
  CHECK(draw(big, 2).size() == 2);
}

TEST_CASE("sampler: bad options") {
  const LengthDataset dataset({60, 60, 60}, "mem");
  CHECK(contains(error_of([&] { BatchSampler(dataset, {}); }), "mem: sampler: tokens_per_batch must be >= 1, got 0"));
  CHECK_THROWS_AS(BatchSampler(dataset, {.tokens_per_batch = -4}), invalid_input);
  CHECK(contains(error_of([&] { BatchSampler(dataset, {.tokens_per_batch = 181, .drop_last = true}); }),
                 "would drop every batch"));
  CHECK_NOTHROW(BatchSampler(dataset, {.tokens_per_batch = 180, .drop_last = true}));
}

// ---------------------------------------------------------------------------------------------------------------
// Synthetic

TEST_CASE("synthetic: deterministic, bounded, long-tailed") {
  const SyntheticOptions options{.count = 20000, .sigma = 0.5, .tail_fraction = 0.2, .seed = 5};
  const auto lengths = synthetic_lengths(options);
  REQUIRE(lengths.size() == 20000);
  CHECK(synthetic_lengths(options) == lengths);
  CHECK(synthetic_lengths({.count = 20000, .sigma = 0.5, .tail_fraction = 0.2, .seed = 6}) != lengths);
  CHECK(std::ranges::all_of(lengths, [](std::int64_t length) { return length >= 16 && length <= 131072; }));
  // With sigma 0.5 the body almost never reaches tail_min (8 times the median is 4.2 sigma away).
  const auto tail = std::ranges::count_if(lengths, [](std::int64_t length) { return length >= 8192; });
  CHECK(std::abs(static_cast<double>(tail) / 20000.0 - 0.2) < 0.015);
  CHECK(std::ranges::count(lengths, 131072) > 0);  // the Pareto tail runs into max_length

  auto body = synthetic_lengths({.count = 20001, .tail_fraction = 0.0, .min_length = 1, .seed = 7});
  std::ranges::nth_element(body, body.begin() + 10000);
  CHECK(std::abs(static_cast<double>(body[10000]) / 1024.0 - 1.0) < 0.05);
  const auto constant = synthetic_lengths({.count = 10, .median = 300, .sigma = 0, .tail_fraction = 0});
  CHECK(std::ranges::all_of(constant, [](std::int64_t length) { return length == 300; }));
  const auto limited = synthetic_lengths({.count = 1000, .median = 5000, .min_length = 100, .max_length = 200});
  CHECK(std::ranges::all_of(limited, [](std::int64_t length) { return length >= 100 && length <= 200; }));
  CHECK(synthetic_lengths({.count = 1, .tail_fraction = 1.0}).front() >= 8192);
  CHECK_NOTHROW(LengthDataset(synthetic_lengths({}), "synthetic"));
}

TEST_CASE("synthetic: bad options name the field") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::pair<SyntheticOptions, std::string_view> cases[] = {
      {{.count = 0}, "count must be >= 1"},
      {{.median = 0}, "median must be finite and > 0"},
      {{.median = inf}, "median must be finite"},
      {{.sigma = -1}, "sigma must be finite and >= 0"},
      {{.sigma = nan}, "sigma must be finite"},
      {{.tail_fraction = 1.5}, "tail_fraction must be in [0, 1]"},
      {{.tail_fraction = nan}, "tail_fraction must be in [0, 1]"},
      {{.tail_alpha = 0}, "tail_alpha must be finite and > 0"},
      {{.tail_min = 0}, "tail_min must be >= 1"},
      {{.min_length = 0}, "min_length must be >= 1"},
      {{.min_length = 10, .max_length = 9}, "max_length must be in [min_length = 10"},
      {{.max_length = max_plausible_length + 1}, "max_length must be in"},
  };
  for (const auto& [options, message] : cases) {
    CAPTURE(message);
    CHECK(contains(error_of([&] { synthetic_lengths(options); }), message));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// JSON

TEST_CASE("data JSON round trips") {
  const LengthDataset dataset = LengthDataset({5, 1, 9, 3, 700}, "mem").truncated(600);
  const LengthStats stats = dataset.stats();
  const io::json stats_document = io::to_document(stats);
  CHECK(stats_document.at("format") == "sluice.length_stats");
  CHECK(stats_document.at("truncated") == 1);
  CHECK(io::from_document<LengthStats>(io::json::parse(stats_document.dump())) == stats);

  const LengthHistogram histogram = dataset.histogram(4);
  const io::json histogram_document = io::to_document(histogram);
  CHECK(histogram_document.at("format") == "sluice.length_histogram");
  CHECK(io::from_document<LengthHistogram>(histogram_document) == histogram);

  const SamplerOptions sampler{.tokens_per_batch = 4096, .seed = 0xffffffffffffffffULL, .drop_last = true};
  CHECK(io::json(sampler).get<SamplerOptions>() == sampler);
  CHECK(io::json::parse(R"({"tokens_per_batch": 8})").get<SamplerOptions>() == SamplerOptions{.tokens_per_batch = 8});

  const SyntheticOptions synthetic{.count = 7, .median = 2.5, .tail_fraction = 0.125, .seed = 99};
  CHECK(io::json(synthetic).get<SyntheticOptions>() == synthetic);
  CHECK(io::json::parse(R"({"count": 3})").get<SyntheticOptions>() == SyntheticOptions{.count = 3});

  BatchSampler batches(dataset, {.tokens_per_batch = 10});
  const Batch batch = batches.next();
  CHECK(io::json::parse(io::json(batch).dump()).get<Batch>() == batch);
}

TEST_CASE("data JSON: bad documents name the field") {
  CHECK(contains(error_of([] { (void)io::json::parse(R"({"tokens_per_batch": "x"})").get<SamplerOptions>(); }),
                 "sampler options: field 'tokens_per_batch'"));
  CHECK(contains(error_of([] { (void)io::json::parse("{}").get<SamplerOptions>(); }),
                 "missing field 'tokens_per_batch'"));
  CHECK(contains(error_of([] { (void)io::json::parse(R"({"median": "big"})").get<SyntheticOptions>(); }),
                 "synthetic options: field 'median'"));
  CHECK(contains(error_of([] {
                   (void)io::from_document<LengthStats>(
                       io::json::parse(R"({"format": "sluice.length_stats", "version": 1, "count": 1})"));
                 }),
                 "missing field 'tokens'"));
  const auto histogram = [](std::string_view bins) {
    return io::json::parse(R"({"format": "sluice.length_histogram", "version": 1, "bin_width": 10, "bins": )" +
                           std::string(bins) + "}");
  };
  CHECK_NOTHROW(io::from_document<LengthHistogram>(histogram(R"([{"lower": 10, "upper": 20, "count": 3}])")));
  for (const std::string_view bins : {
           R"([{"lower": 10, "upper": 25, "count": 3}])",
           R"([{"lower": 5, "upper": 15, "count": 3}])",
           R"([{"lower": -10, "upper": 0, "count": 3}])",
           R"([{"lower": 0, "upper": 10, "count": 1}, {"lower": 20, "upper": 30, "count": 1}])",
           R"([{"lower": 0, "upper": 10, "count": -1}])",
           R"([{"lower": 9223372036854775800, "upper": -9223372036854775806, "count": 1}])",
       }) {
    CAPTURE(bins);
    CHECK(contains(error_of([&] { (void)io::from_document<LengthHistogram>(histogram(bins)); }),
                   "length histogram: bin "));
  }
}
