#pragma once
// Runs the sluice tool in-process, capturing its exit code and both streams.
#include <sstream>
#include <string>
#include <string_view>
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

}  // namespace sluice::test
