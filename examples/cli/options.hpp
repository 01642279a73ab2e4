#pragma once
// Command-line parsing for the sluice tool: `--name value`, `--name=value` and boolean `--flag`s.
// Every mistake is an invalid_input naming the option, so the tool exits 2 with one line.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "sluice/core/error.hpp"

namespace sluice::cli {

class Options {
public:
  // `valued` options take a value, `flags` do not; anything else is an error.
  Options(std::span<const std::string_view> args, const std::set<std::string, std::less<>>& valued,
          const std::set<std::string, std::less<>>& flags) {
    for (std::size_t i = 0; i < args.size(); ++i) {
      std::string_view arg = args[i];
      detail::require(arg.starts_with("--") && arg.size() > 2, "unexpected argument '", arg, "'");
      arg.remove_prefix(2);
      std::optional<std::string_view> inline_value;
      if (const auto eq = arg.find('='); eq != std::string_view::npos) {
        inline_value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      }
      const std::string name(arg);
      detail::require(!values_.contains(name), "option --", name, " given twice");
      if (flags.contains(name)) {
        detail::require(!inline_value, "option --", name, " takes no value");
        values_[name] = "";
      } else if (valued.contains(name)) {
        if (!inline_value) {
          detail::require(i + 1 < args.size(), "option --", name, " needs a value");
          inline_value = args[++i];
        }
        values_[name] = std::string(*inline_value);
      } else {
        detail::fail("unknown option --", name);
      }
    }
  }

  [[nodiscard]] bool flag(std::string_view name) const { return values_.contains(std::string(name)); }

  [[nodiscard]] std::optional<std::string> text(std::string_view name) const {
    const auto it = values_.find(std::string(name));
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }

  // An integer >= `minimum`, or nullopt when absent.
  [[nodiscard]] std::optional<std::int64_t> integer(std::string_view name, std::int64_t minimum) const {
    const auto value = text(name);
    if (!value) return std::nullopt;
    std::int64_t number = 0;
    const auto [end, error] = std::from_chars(value->data(), value->data() + value->size(), number);
    if (error != std::errc{} || end != value->data() + value->size() || number < minimum) {
      if (minimum == 1) detail::fail("option --", name, ": expected a positive integer, got '", *value, "'");
      detail::fail("option --", name, ": expected an integer >= ", minimum, ", got '", *value, "'");
    }
    return number;
  }

  [[nodiscard]] std::optional<std::int64_t> positive(std::string_view name) const { return integer(name, 1); }

  // A finite real >= `minimum`, or nullopt when absent.
  [[nodiscard]] std::optional<double> real(std::string_view name, double minimum) const {
    const auto value = text(name);
    if (!value) return std::nullopt;
    const std::optional<double> number = parse_real(*value);
    if (!number || *number < minimum)
      detail::fail("option --", name, ": expected a number >= ", minimum, ", got '", *value, "'");
    return number;
  }

  // A finite real in [minimum, maximum] (in `unit`), or nullopt when absent.
  [[nodiscard]] std::optional<double> real(std::string_view name, double minimum, double maximum,
                                           std::string_view unit) const {
    const auto value = text(name);
    if (!value) return std::nullopt;
    const std::optional<double> number = parse_real(*value);
    if (!number || *number < minimum || *number > maximum)
      detail::fail("option --", name, ": expected a number >= ", detail::shortest(minimum), " and <= ",
                   detail::shortest(maximum), " (", unit, "), got '", *value, "'");
    return number;
  }

private:
  static std::optional<double> parse_real(std::string_view text) {
    double number = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (error != std::errc{} || end != text.data() + text.size() || !std::isfinite(number)) return std::nullopt;
    return number;
  }

  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace sluice::cli
