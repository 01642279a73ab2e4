#pragma once
// Runs the sluice tool in-process, capturing its exit code and both streams.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli.hpp"

namespace sluice::test {

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

inline CliResult run_cli(std::vector<std::string_view> args) {
  std::ostringstream out;
  std::ostringstream err;
  const int code = sluice::cli::run(args, out, err);
  return {code, out.str(), err.str()};
}

// Bad input must produce exactly one line on stderr.
inline bool one_line(const std::string& text) {
  return !text.empty() && text.back() == '\n' && text.find('\n') == text.size() - 1;
}

// Each case's arguments must exit 2 with nothing on stdout and one line on stderr holding the fragment.
using BadInput = std::pair<std::vector<std::string_view>, std::string_view>;

inline void check_bad_input(const std::vector<BadInput>& cases) {
  for (const auto& [args, fragment] : cases) {
    CAPTURE(fragment);
    const CliResult result = run_cli(args);
    CHECK(result.code == 2);
    CHECK(result.out.empty());
    CHECK(one_line(result.err));
    CHECK(result.err.find(fragment) != std::string::npos);
  }
}

}  // namespace sluice::test
