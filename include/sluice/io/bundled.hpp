#pragma once
// The profiles and length files shipped with sluice, found at run time: $SLUICE_DATA_DIR if set, else
// the directory the build or the install recorded (source tree when built in place, share/sluice once installed).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/core/error.hpp"

namespace sluice::io {

inline constexpr std::string_view default_profile = "llama2-7b";
inline constexpr std::string_view default_lengths = "man-pages";

inline std::filesystem::path bundled_data_dir() {
  if (const char* from_environment = std::getenv("SLUICE_DATA_DIR"); from_environment && *from_environment)
    return from_environment;
#ifdef SLUICE_BUNDLED_DATA_DIR
  return SLUICE_BUNDLED_DATA_DIR;
#else
  sluice::fail("sluice: bundled data directory unknown; set SLUICE_DATA_DIR");
#endif
}

namespace detail {
// The file name suffix of a bundled kind: *.lengths.txt for "lengths", *.json for "profiles", "models" and "clusters".
inline std::string bundled_suffix(std::string_view kind) { return kind == "lengths" ? ".lengths.txt" : ".json"; }
// One file of the kind, in words.
inline std::string bundled_noun(std::string_view kind) {
  if (kind == "lengths") return "length file";
  return std::string(kind.substr(0, kind.size() - (kind.ends_with('s') ? 1 : 0)));
}
}  // namespace detail

// Bundled file names of one kind ("profiles", "models", "clusters" → *.json, "lengths" → *.lengths.txt), without
// the suffix.
inline std::vector<std::string> bundled_names(std::string_view kind) {
  const std::string suffix = detail::bundled_suffix(kind);
  std::vector<std::string> names;
  const auto dir = bundled_data_dir() / kind;
  std::error_code error;
  for (const auto& file : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = file.path().filename().string();
    if (name.size() > suffix.size() && name.ends_with(suffix))
      names.push_back(name.substr(0, name.size() - suffix.size()));
  }
  std::sort(names.begin(), names.end());
  return names;
}

// `name_or_path` is an existing file, or the name of a bundled one ("llama2-7b", "man-pages", "gpt-48").
inline std::filesystem::path resolve_data_file(std::string_view name_or_path, std::string_view kind) {
  const std::filesystem::path given(name_or_path);
  std::error_code error;
  if (std::filesystem::is_regular_file(given, error)) return given;
  const bool plain_name = given.filename() == given && !name_or_path.empty();
  if (plain_name) {
    const auto bundled = bundled_data_dir() / kind / (std::string(name_or_path) + detail::bundled_suffix(kind));
    if (std::filesystem::is_regular_file(bundled, error)) return bundled;
  }
  std::string known;
  for (const auto& name : bundled_names(kind)) known += (known.empty() ? "" : ", ") + name;
  const std::string what = detail::bundled_noun(kind);
  if (!known.empty()) sluice::fail(name_or_path, ": no such file, and not a bundled ", what, " (bundled: ", known, ")");
  // Nothing bundled where we looked: name the place and what chose it, usually a wrong SLUICE_DATA_DIR.
  const char* const from_environment = std::getenv("SLUICE_DATA_DIR");
  sluice::fail(name_or_path, ": no such file, and no bundled ", kind, " in ", (bundled_data_dir() / kind).string(),
               from_environment && *from_environment ? " (the directory SLUICE_DATA_DIR names)"
                                                     : " (the data directory recorded at build time)");
}

}  // namespace sluice::io
