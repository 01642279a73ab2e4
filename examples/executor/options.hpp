#pragma once
// Command-line options of the executor examples, read by the examples' parsing core: "--name value" pairs and
// "--flag" switches with each program's defaults, the model's sizes, --help, and one-line errors (exit code 2).
#include <cstdint>
#include <exception>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../common/options.hpp"
#include "../common/version.hpp"
#include "sluice/core/error.hpp"
#include "sluice_executor/model.hpp"

namespace examples {

class Arguments {
public:
  // `flags` (and --help) take no value; every other option takes one, the last given counting.
  Arguments(int argc, char** argv, std::set<std::string, std::less<>> flags) {
    flags.insert("help");
    flags.insert("version");
    const std::vector<std::string_view> words(argv + 1, argv + argc);
    values_ = sluice::command_line::parse_options(
        words,
        {.flags = std::move(flags), .valued = {}, .others_valued = true, .inline_values = false, .repeats = true});
  }

  [[nodiscard]] bool flag(const std::string& name) { return take(name).has_value(); }

  [[nodiscard]] std::string text(const std::string& name, std::string fallback) {
    const auto value = take(name);
    return value ? *value : fallback;
  }

  template <class Integer>
  [[nodiscard]] Integer integer(const std::string& name, Integer fallback) {
    const auto value = take(name);
    return value ? parse<Integer>(name, *value) : fallback;
  }

  // A comma-separated list of integers.
  template <class Integer>
  [[nodiscard]] std::vector<Integer> integers(const std::string& name, std::vector<Integer> fallback) {
    const auto value = take(name);
    if (!value) return fallback;
    std::vector<Integer> result;
    std::string_view rest = *value;
    while (true) {
      const auto comma = rest.find(',');
      result.push_back(parse<Integer>(name, rest.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    return result;
  }

  // Raises invalid_input naming any option nobody asked for.
  void require_all_used() const {
    for (const auto& [name, value] : values_) sluice::require(used_.contains(name), "unknown option --", name);
  }

private:
  std::optional<std::string> take(const std::string& name) {
    used_.insert(name);
    const auto it = values_.find(name);
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }

  template <class Integer>
  static Integer parse(const std::string& name, std::string_view text) {
    const auto value = sluice::command_line::parse_number<Integer>(text);
    sluice::require(value.has_value(), "option --", name, ": '", text, "' is not an integer");
    return *value;
  }

  sluice::command_line::OptionValues values_;
  std::set<std::string> used_;
};

// A 1024-wide, 8-layer decoder with 128-wide heads (what the CUDA attention kernels take).
inline sluice::executor::ModelConfig small_decoder() {
  return {.layers = 8, .hidden = 1024, .heads = 8, .ffn = 2816, .vocab = 32000};
}

// --layers --hidden --heads --ffn --vocab --model-seed, each defaulting to `defaults`' field.
inline sluice::executor::ModelConfig model_from(Arguments& arguments,
                                                const sluice::executor::ModelConfig& defaults = small_decoder()) {
  sluice::executor::ModelConfig model = defaults;
  model.layers = arguments.integer<int>("layers", defaults.layers);
  model.hidden = arguments.integer<std::int64_t>("hidden", defaults.hidden);
  model.heads = arguments.integer<int>("heads", defaults.heads);
  model.ffn = arguments.integer<std::int64_t>("ffn", defaults.ffn);
  model.vocab = arguments.integer<std::int64_t>("vocab", defaults.vocab);
  model.seed = arguments.integer<std::uint64_t>("model-seed", defaults.seed);
  sluice::executor::require_valid(model);
  return model;
}

// Prints `usage` when --help was given, else the version when --version was: the program then exits 0 without
// reading its other options.
inline bool print_help_or_version(Arguments& arguments, std::string_view usage) {
  if (arguments.flag("help")) {
    std::cout << usage;
  } else if (arguments.flag("version")) {
    std::cout << sluice::command_line::version << "\n";
  } else {
    return false;
  }
  return true;
}

// Runs a program's body with the examples' exit codes: 2 for bad input, 1 for anything else, one line on stderr.
template <typename Body>
int run_program(std::string_view program, Body&& body) {
  try {
    return body();
  } catch (const sluice::invalid_input& error) {
    std::cerr << program << ": " << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << program << ": " << error.what() << "\n";
    return 1;
  }
}

}  // namespace examples
