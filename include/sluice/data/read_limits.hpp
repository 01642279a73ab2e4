#pragma once
// The limits every length reader checks (readers.hpp, docs/formats.md): a file past them is misread or hostile.
#include <cstddef>
#include <cstdint>

namespace sluice::data {

// No tokenizer run produces a document of 4 Gi tokens; a larger value means a misread file.
inline constexpr std::int64_t max_plausible_length = std::int64_t{1} << 32;

// The most lengths one file (or LengthDataset) may hold: 268,435,456, more documents than a corpus shard holds.
// At this count the lengths take 2 GiB, reading a text file peaks at 3 GiB and takes 13 s of CPU, an .npy file
// 2 GiB and 3 s, and LengthDataset::stats sorts a 2 GiB copy (measurements in docs/formats.md).
inline constexpr std::uint64_t max_length_count = std::uint64_t{1} << 28;

// The longest value a text line may hold (after trimming, before a comment): 2^32 has 10 digits, and the cap
// keeps a file without line ends from filling memory.
inline constexpr std::size_t max_text_value_chars = 40;

// NumPy pads a 1-D integer array's header to 128 bytes; a much longer one is a misread or hostile file.
inline constexpr std::uint32_t max_npy_header_bytes = 65535;

}  // namespace sluice::data
