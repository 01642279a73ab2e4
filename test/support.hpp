#pragma once
// Helpers that several test areas share. The areas compile together as unity builds (test/CMakeLists.txt), so a
// helper two files need lives here once rather than in each file's anonymous namespace.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <string_view>

#include "sluice/core/error.hpp"

// In a namespace of their own, made visible by a using-directive: a local `inf` in a library header then does not
// shadow a global declaration (-Wshadow) when the header is included after this one.
namespace test_support {

inline constexpr double inf = std::numeric_limits<double>::infinity();

// x and y agree within `tolerance` of the largest of 1, |x| and |y|.
inline bool close(double x, double y, double tolerance = 1e-9) {
  return std::abs(x - y) <= tolerance * std::max({1.0, std::abs(x), std::abs(y)});
}

// The message of the invalid_input that `action` raises; any other exception fails the test case.
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const sluice::invalid_input& error) {
    return error.what();
  }
  return "(no error)";
}

inline bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// JSON texts nested `depth` deep: [[[...]]] and {"a":{"a":...0}}.
inline std::string nested_arrays(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

inline std::string nested_objects(std::size_t depth) {
  std::string text;
  text.reserve(depth * 6 + 1);  // {"a": and } per level, and the 0
  for (std::size_t i = 0; i < depth; ++i) text += R"({"a":)";
  text += "0";
  return text + std::string(depth, '}');
}

}  // namespace test_support

using namespace test_support;
