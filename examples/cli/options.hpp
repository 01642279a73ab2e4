#pragma once
// Command-line parsing for the sluice tool: `--name value`, `--name=value` and boolean `--flag`s.
// Every mistake is an invalid_input naming the option, so the tool exits 2 with one line.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>

#include "sluice/core/error.hpp"

namespace sluice::cli {

// The range of every numeric option, the same in every command. Maxima keep each command's time and memory
// bounded (docs/limits.md gives what a run takes at them); an option past its range is an error, never clamped.
struct OptionLimit {
  double minimum;
  double maximum;
};

inline const std::map<std::string, OptionLimit, std::less<>> option_limits = {
    {"bandwidth", {1e-3, 1e4}},         // GB/s: schedule::Link's physical range (1e6 to 1e13 bytes/s)
    {"batch", {1, 1 << 20}},            // samples per global batch (search)
    {"batch-step", {1, 1 << 20}},
    {"batches", {1, 1024}},             // choosing batches (propose --sampled): one plan per pool strategy each
    {"bin-width", {1, 1 << 30}},        // tokens
    {"candidates", {1, 1024}},
    {"context", {1, 1 << 20}},          // tokens
    {"gpus", {1, 1 << 16}},
    {"gpus-per-node", {1, 1024}},
    {"held-out", {1, 1024}},            // held-out batches (propose --sampled)
    {"iteration", {0, (1 << 20) - 1}},  // which sampled iteration (trace)
    {"iterations", {1, 10'000}},
    {"interval", {0, 1}},               // seconds (schedule's tmax thinning)
    {"latency", {0, 1}},                // seconds: schedule::Link::max_latency
    {"length-step", {1, 1 << 20}},      // tokens
    {"max-batch", {1, 1 << 20}},
    {"replicas", {1, 1 << 16}},
    {"seed", {0, 0x1p63}},              // any non-negative 64-bit integer
    {"stages", {1, 1024}},
    {"threads", {1, 256}},
    {"tokens", {1, 1 << 24}},           // per iteration
    {"tp", {1, 1024}},
    {"trials", {1, 10'000}},
};

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

  // The value of a numeric option within its documented range (option_limits), or nullopt when absent.
  [[nodiscard]] std::optional<std::int64_t> integer(std::string_view name) const {
    const auto value = text(name);
    if (!value) return std::nullopt;
    const OptionLimit& limit = limit_of(name);
    const auto minimum = static_cast<std::int64_t>(limit.minimum);
    const std::int64_t maximum = limit.maximum >= 0x1p63 ? INT64_MAX : static_cast<std::int64_t>(limit.maximum);
    std::int64_t number = 0;
    const auto [end, error] = std::from_chars(value->data(), value->data() + value->size(), number);
    if (error != std::errc{} || end != value->data() + value->size() || number < minimum || number > maximum)
      detail::fail("option --", name, ": expected an integer from ", minimum, " to ", maximum, ", got '", *value, "'");
    return number;
  }

  [[nodiscard]] std::optional<double> real(std::string_view name) const {
    const auto value = text(name);
    if (!value) return std::nullopt;
    const OptionLimit& limit = limit_of(name);
    double number = 0;
    const auto [end, error] = std::from_chars(value->data(), value->data() + value->size(), number);
    if (error != std::errc{} || end != value->data() + value->size() || !std::isfinite(number) ||
        number < limit.minimum || number > limit.maximum)
      detail::fail("option --", name, ": expected a number from ", limit.minimum, " to ", limit.maximum, ", got '",
                   *value, "'");
    return number;
  }

private:
  static const OptionLimit& limit_of(std::string_view name) {
    const auto it = option_limits.find(name);
    if (it == option_limits.end()) throw std::logic_error("option --" + std::string(name) + " has no documented range");
    return it->second;
  }

  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace sluice::cli
