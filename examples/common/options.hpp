#pragma once
// The command-line parsing core of the example programs: the sluice tool (cli/options.hpp, its option table and
// numeric ranges) and the executor programs (executor/options.hpp, their defaults). Every mistake is an
// invalid_input naming the option, so a program exits 2 with one line.
#include <charconv>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "sluice/core/error.hpp"

namespace sluice::command_line {

// How a program reads its words: `--flag`, `--name value` and, where allowed, `--name=value`.
struct OptionSyntax {
  std::set<std::string, std::less<>> flags;   // options without a value
  std::set<std::string, std::less<>> valued;  // options with one
  // Every option that is not a flag takes a value, and the program rejects those it never reads (the executor
  // programs); otherwise an option outside the two sets is an error here (the sluice tool).
  bool others_valued = false;
  bool inline_values = false;  // `--name=value` gives the value
  bool repeats = false;        // a repeated option keeps its last value; otherwise it is an error
};

// Option name -> its value ("" for a flag).
using OptionValues = std::map<std::string, std::string, std::less<>>;

inline OptionValues parse_options(std::span<const std::string_view> args, const OptionSyntax& syntax) {
  OptionValues values;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (syntax.others_valued)
      sluice::require(arg.starts_with("--"), "expected an option (--name), got '", arg, "'");
    else
      sluice::require(arg.starts_with("--") && arg.size() > 2, "unexpected argument '", arg, "'");
    arg.remove_prefix(2);
    std::optional<std::string_view> inline_value;
    if (const auto eq = arg.find('='); syntax.inline_values && eq != std::string_view::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    const std::string name(arg);
    sluice::require(syntax.repeats || !values.contains(name), "option --", name, " given twice");
    if (syntax.flags.contains(name)) {
      sluice::require(!inline_value, "option --", name, " takes no value");
      values[name] = "";
    } else if (syntax.others_valued || syntax.valued.contains(name)) {
      if (!inline_value) {
        sluice::require(i + 1 < args.size(), "option --", name, " needs a value");
        inline_value = args[++i];
      }
      values[name] = std::string(*inline_value);
    } else {
      sluice::fail("unknown option --", name);
    }
  }
  return values;
}

// The number the whole of `text` spells, or nullopt.
template <class Number>
std::optional<Number> parse_number(std::string_view text) {
  Number number{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return number;
}

// "a,b,,c": the comma-separated items of `text`, empty ones included (so that a caller can refuse them).
inline std::vector<std::string_view> comma_items(std::string_view text) {
  std::vector<std::string_view> parts;
  for (std::size_t comma = 0;; text.remove_prefix(comma + 1)) {
    comma = text.find(',');
    parts.push_back(text.substr(0, comma));
    if (comma == std::string_view::npos) return parts;
  }
}

}  // namespace sluice::command_line
