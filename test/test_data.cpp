#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sluice/core/random.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/readers.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/data_json.hpp"

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

// The message of the invalid_input that `action` raises; any other exception fails the test case.
std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const invalid_input& error) {
    return error.what();
  }
  return "(no error)";
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

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

// Byte flips (biased towards the header, where counts and sizes live), truncations and splices.
Bytes mutate(const Bytes& valid, Rng& rng) {
  Bytes out = valid;
  auto random_byte = [&rng] { return static_cast<std::byte>(rng.below(256)); };
  auto position = [&rng](std::size_t size) {
    return static_cast<std::size_t>(rng.below(2) == 0 ? rng.below(std::min<std::size_t>(size, 48)) : rng.below(size));
  };
  switch (rng.below(4)) {
    case 0:
      for (std::uint64_t flips = 1 + rng.below(4); flips > 0; --flips) out[position(out.size())] = random_byte();
      break;
    case 1:
      out.resize(static_cast<std::size_t>(rng.below(out.size())));
      break;
    case 2: {
      const std::size_t at = static_cast<std::size_t>(rng.below(out.size() + 1));
      Bytes chunk(static_cast<std::size_t>(1 + rng.below(16)));
      for (std::byte& b : chunk) b = random_byte();
      out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), chunk.begin(), chunk.end());
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

// Every input must give a valid result or raise invalid_input naming the source: nothing else (a crash,
// undefined behaviour, another exception type).
void fuzz(const std::function<std::vector<std::int64_t>(std::span<const std::byte>, std::string_view)>& parse,
          const std::vector<Bytes>& valid, std::string_view alphabet, std::uint64_t seed) {
  constexpr std::string_view source = "fuzz.input";
  Rng rng(seed);
  int accepted = 0;
  int rejected = 0;
  int unnamed = 0;
  auto run = [&](const Bytes& input) {
    try {
      const auto lengths = parse(input, source);
      REQUIRE_FALSE(lengths.empty());
      for (const std::int64_t length : lengths) REQUIRE((length >= 1 && length <= max_plausible_length));
      ++accepted;
    } catch (const invalid_input& error) {
      ++rejected;
      if (!std::string_view(error.what()).starts_with(std::string(source) + ": ")) ++unnamed;
    }
  };
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
  CHECK(unnamed == 0);
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
}

TEST_CASE("text lengths: random and mutated inputs give lengths or invalid_input") {
  const std::vector<Bytes> valid = {bytes_of("# c\n12\n 34 \r\n\n5 # x\n"), bytes_of("1\n2\n3\n4294967296\n")};
  fuzz([](std::span<const std::byte> bytes, std::string_view source) {
    return parse_lengths_text(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), source);
  },
       valid, "0123456789 \t\r\n#-+.e", 101);
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
    CHECK(parse_lengths_npy(make_npy(npy_dict("<i4", "(3,)"), encode<std::int32_t>({1, 300, 32767}), major),
                            "a.npy") == expected);
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
  fuzz(parse_lengths_npy, valid, "", 202);
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
       "truncated: header says 4611686018427387904"},
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
  fuzz(parse_lengths_megatron_idx, valid, "", 303);
}

// ---------------------------------------------------------------------------------------------------------------
// Dataset

TEST_CASE("dataset: validation names the source and the index") {
  CHECK(contains(error_of([] { LengthDataset({}, "mem"); }), "mem: no lengths"));
  CHECK(contains(error_of([] { LengthDataset({4, 0}, "mem"); }), "mem: index 1: length must be >= 1, got 0"));
  CHECK(contains(error_of([] { LengthDataset({-1}, "mem"); }), "mem: index 0: length must be >= 1"));
  CHECK(contains(error_of([] { LengthDataset({1, 2, max_plausible_length + 1}, "mem"); }),
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
  CHECK(stats == LengthStats{.count = 10, .tokens = 55, .min = 1, .max = 10, .p50 = 5, .p90 = 9, .p99 = 10,
                             .truncated = 0, .mean = 5.5});
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
  CHECK(one == LengthStats{.count = 1, .tokens = 42, .min = 42, .max = 42, .p50 = 42, .p90 = 42, .p99 = 42,
                           .truncated = 0, .mean = 42.0});
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
  CHECK(contains(error_of([] { (void)LengthDataset({1, max_plausible_length}, "mem").histogram(1); }),
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
  CHECK(io::json::parse(R"({"tokens_per_batch": 8})").get<SamplerOptions>() ==
        SamplerOptions{.tokens_per_batch = 8});

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
