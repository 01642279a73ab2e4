#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"

namespace {
struct Result {
  int code;
  std::string out;
  std::string err;
};

Result run(std::vector<std::string_view> args) {
  std::ostringstream out;
  std::ostringstream err;
  const int code = sluice::cli::run(args, out, err);
  return {code, out.str(), err.str()};
}

bool one_line(const std::string& text) {
  return !text.empty() && text.back() == '\n' && text.find('\n') == text.size() - 1;
}
}  // namespace

TEST_CASE("cli: inspect on the bundled defaults") {
  const auto result = run({"inspect"});
  CHECK(result.code == 0);
  CHECK(result.err.empty());
  CHECK(result.out.find("man-pages") != std::string::npos);
  CHECK(result.out.find("sequences 21148") != std::string::npos);
  CHECK(result.out.find("llama2-7b") != std::string::npos);
  CHECK(result.out.find("tp8pp1") != std::string::npos);
}

TEST_CASE("cli: inspect --json is one parseable document") {
  const auto result = run({"inspect", "--profile", "llama2-32b", "--gpus=64", "--lengths", "cpython-stdlib",
                           "--context", "32768", "--bin-width", "4096", "--json"});
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("format") == "sluice.inspect");
  CHECK(document.at("dataset").at("context") == 32768);
  CHECK(document.at("dataset").at("stats").at("count") == 1762);
  CHECK(document.at("dataset").at("stats").at("max") == 32768);
  CHECK(document.at("dataset").at("stats").at("truncated").get<int>() > 0);
  CHECK(document.at("dataset").at("histogram").at("bin_width") == 4096);
  CHECK(document.at("profile").at("gpus") == 64);
  CHECK(document.at("profile").at("schemes").size() == 15);
  for (const auto& scheme : document.at("profile").at("schemes")) CHECK(scheme.at("times").size() == 4);
}

TEST_CASE("cli: help and usage") {
  CHECK(run({"--help"}).code == 0);
  const auto help = run({"inspect", "--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("--context") != std::string::npos);
  const auto bare = run({});
  CHECK(bare.code == 2);
  CHECK(bare.err.find("usage") != std::string::npos);
}

TEST_CASE("cli: bad input exits 2 with one line naming the problem") {
  const std::vector<std::pair<std::vector<std::string_view>, std::string_view>> cases = {
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"inspect", "--bogus"}, "unknown option --bogus"},
      {{"inspect", "--gpus"}, "--gpus needs a value"},
      {{"inspect", "--gpus", "x"}, "--gpus: expected a positive integer, got 'x'"},
      {{"inspect", "--gpus", "0"}, "--gpus: expected a positive integer"},
      {{"inspect", "--context=-5"}, "--context: expected a positive integer"},
      {{"inspect", "--bin-width", "12k"}, "--bin-width: expected a positive integer"},
      {{"inspect", "--json=yes"}, "--json takes no value"},
      {{"inspect", "--json", "--json"}, "given twice"},
      {{"inspect", "stray"}, "unexpected argument 'stray'"},
      {{"inspect", "--profile", "no-such-profile"}, "no-such-profile: no such file"},
      {{"inspect", "--lengths", "/nonexistent/lengths.txt"}, "/nonexistent/lengths.txt: no such file"},
      {{"inspect", "--gpus", "1"}, "no scheme fits a cluster of 1 GPUs"},
  };
  for (const auto& [args, fragment] : cases) {
    CAPTURE(fragment);
    const auto result = run(args);
    CHECK(result.code == 2);
    CHECK(result.out.empty());
    CHECK(one_line(result.err));
    CHECK(result.err.find(fragment) != std::string::npos);
  }
}
