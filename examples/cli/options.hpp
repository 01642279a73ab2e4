#pragma once
// Command-line options of the sluice tool: `--name value`, `--name=value` and boolean `--flag`s, read by the
// examples' parsing core, with the documented range of every numeric option.
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>

#include "../common/options.hpp"
#include "sluice/core/error.hpp"

namespace sluice::cli {

// The range of every numeric option, the same in every command. Maxima keep each command's time and memory
// bounded (docs/limits.md gives what a run takes at them); an option past its range is an error, never clamped.
struct OptionLimit {
  double minimum;
  double maximum;
};

inline const std::map<std::string, OptionLimit, std::less<>> option_limits = {
    {"bandwidth", {1e-3, 1e4}},  // GB/s: cost::Link's physical range (1e6 to 1e13 bytes/s)
    {"batch", {1, 1 << 20}},     // samples per global batch (search)
    {"batch-step", {1, 1 << 20}},
    {"batches", {1, 1024}},       // choosing batches (propose --sampled): one plan per pool strategy each
    {"bin-width", {1, 1 << 30}},  // tokens
    {"candidates", {1, 1024}},
    {"context", {1, 1 << 20}},  // tokens
    {"cp", {1, 1024}},          // context-parallel degree (inspect)
    {"gpus", {1, 1 << 16}},
    {"gpus-per-node", {1, 1024}},
    {"heads", {1, 1 << 16}},            // attention heads (inspect --cp)
    {"held-out", {1, 1024}},            // held-out batches (propose --sampled)
    {"iteration", {0, (1 << 20) - 1}},  // which sampled iteration (trace)
    {"iterations", {1, 10'000}},
    {"kv-heads", {1, 1 << 16}},
    {"interval", {0, 1}},           // seconds (schedule's tmax thinning)
    {"latency", {0, 1}},            // seconds: cost::Link::max_latency
    {"length-step", {1, 1 << 20}},  // tokens
    {"max-batch", {1, 1 << 20}},
    {"max-error", {1e-6, 1}},  // relative RMS error a fit may leave (fit)
    {"max-pp", {1, 1 << 20}},  // pipeline degree (search)
    {"replicas", {1, 1 << 16}},
    {"seed", {0, 0x1p63}},  // any non-negative 64-bit integer
    {"stages", {1, 1024}},
    {"threads", {1, 256}},
    {"tokens", {1, 1 << 24}},  // per iteration
    {"tp", {1, 1024}},
    {"trials", {1, 10'000}},
    {"ulysses", {1, 1024}},  // the Ulysses degree of a hybrid CP (inspect)
};

class Options {
public:
  // `valued` options take a value, `flags` do not; anything else is an error.
  Options(std::span<const std::string_view> args, const std::set<std::string, std::less<>>& valued,
          const std::set<std::string, std::less<>>& flags)
      : values_(command_line::parse_options(
            args,
            {.flags = flags, .valued = valued, .others_valued = false, .inline_values = true, .repeats = false})) {
    // An output path is checked before any work: found empty only when the outputs are written, it would fail late.
    for (const std::string_view output : {"out", "svg", "trace"})
      if (const auto path = text(output)) sluice::require(!path->empty(), "option --", output, ": an empty path");
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
    const auto number = command_line::parse_number<std::int64_t>(*value);
    if (!number || *number < minimum || *number > maximum)
      sluice::fail("option --", name, ": expected an integer from ", minimum, " to ", maximum, ", got '", *value, "'");
    return number;
  }

  [[nodiscard]] std::optional<double> real(std::string_view name) const {
    const auto value = text(name);
    if (!value) return std::nullopt;
    const OptionLimit& limit = limit_of(name);
    const auto number = command_line::parse_number<double>(*value);
    if (!number || !std::isfinite(*number) || *number < limit.minimum || *number > limit.maximum)
      sluice::fail("option --", name, ": expected a number from ", limit.minimum, " to ", limit.maximum, ", got '",
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
