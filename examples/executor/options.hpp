#pragma once
// Command-line parsing shared by the executor examples: "--name value" pairs and "--flag" switches, the model's
// sizes, and one-line errors (exit code 2).
#include <charconv>
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

#include "sluice/core/error.hpp"
#include "sluice_executor/model.hpp"

namespace examples {

class Arguments {
public:
  // `flags` take no value; every other option takes one.
  Arguments(int argc, char** argv, std::set<std::string> flags) : flags_(std::move(flags)) {
    for (int i = 1; i < argc; ++i) {
      const std::string_view word = argv[i];
      sluice::detail::require(word.starts_with("--"), "expected an option (--name), got '", word, "'");
      const std::string name(word.substr(2));
      if (flags_.contains(name)) {
        values_[name] = "1";
        continue;
      }
      sluice::detail::require(i + 1 < argc, "option --", name, " needs a value");
      values_[name] = argv[++i];
    }
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
    for (const auto& [name, value] : values_) sluice::detail::require(used_.contains(name), "unknown option --", name);
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
    Integer value{};
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    sluice::detail::require(error == std::errc{} && end == text.data() + text.size() && !text.empty(), "option --",
                            name, ": '", text, "' is not an integer");
    return value;
  }

  std::set<std::string> flags_;
  std::map<std::string, std::string> values_;
  std::set<std::string> used_;
};

// --layers --hidden --heads --ffn --vocab --model-seed; the defaults are a 1024-wide, 8-layer decoder with
// 128-wide heads (what the CUDA attention kernels take).
inline sluice::executor::ModelConfig model_from(Arguments& arguments) {
  sluice::executor::ModelConfig model;
  model.layers = arguments.integer<int>("layers", 8);
  model.hidden = arguments.integer<std::int64_t>("hidden", 1024);
  model.heads = arguments.integer<int>("heads", 8);
  model.ffn = arguments.integer<std::int64_t>("ffn", 2816);
  model.vocab = arguments.integer<std::int64_t>("vocab", 32000);
  model.seed = arguments.integer<std::uint64_t>("model-seed", 1);
  sluice::executor::validate(model);
  return model;
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
