#pragma once
// A parallel scheme: the shape of one pipeline (one data-parallel replica).
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/core/error.hpp"

namespace sluice {

// Degrees are named fields so that adding a degree (context parallelism, say) later keeps every
// caller that writes Scheme{{.tp = 4, .pp = 2}} compiling with the same meaning.
struct Degrees {
  int tp = 1;
  int pp = 1;
};

class Scheme {
public:
  static constexpr int max_degree = 1 << 16;

  constexpr Scheme() = default;
  explicit Scheme(Degrees degrees) : tp_(degrees.tp), pp_(degrees.pp) {
    sluice::require(tp_ >= 1 && tp_ <= max_degree, "scheme: tp must be in [1, ", max_degree, "], got ", tp_);
    sluice::require(pp_ >= 1 && pp_ <= max_degree, "scheme: pp must be in [1, ", max_degree, "], got ", pp_);
  }
  Scheme(int tp, int pp) : Scheme(Degrees{.tp = tp, .pp = pp}) {}

  [[nodiscard]] int tp() const noexcept { return tp_; }
  [[nodiscard]] int pp() const noexcept { return pp_; }
  [[nodiscard]] Degrees degrees() const noexcept { return {.tp = tp_, .pp = pp_}; }
  [[nodiscard]] std::int64_t gpus() const noexcept { return std::int64_t{tp_} * pp_; }

  // "tp4pp2": the spelling used in profiles, JSON keys and the command line.
  [[nodiscard]] std::string name() const { return "tp" + std::to_string(tp_) + "pp" + std::to_string(pp_); }

  // Accepts "tp4pp2" and "<4,2>".
  static Scheme parse(std::string_view text) {
    auto number = [&](std::string_view& rest) {
      std::int64_t value = 0;
      std::size_t digits = 0;
      while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9' && value <= max_degree) {
        value = value * 10 + (rest[digits] - '0');
        ++digits;
      }
      sluice::require(digits > 0, "scheme: cannot parse '", text, "' (expected tpNppM or <N,M>)");
      rest.remove_prefix(digits);
      return static_cast<int>(value > max_degree ? max_degree + 1 : value);
    };
    auto expect = [&](std::string_view& rest, std::string_view token) {
      sluice::require(rest.substr(0, token.size()) == token, "scheme: cannot parse '", text,
                      "' (expected tpNppM or <N,M>)");
      rest.remove_prefix(token.size());
    };
    std::string_view rest = text;
    int tp = 0;
    int pp = 0;
    if (!rest.empty() && rest.front() == '<') {
      expect(rest, "<");
      tp = number(rest);
      expect(rest, ",");
      pp = number(rest);
      expect(rest, ">");
    } else {
      expect(rest, "tp");
      tp = number(rest);
      expect(rest, "pp");
      pp = number(rest);
    }
    sluice::require(rest.empty(), "scheme: trailing characters in '", text, "'");
    return Scheme(tp, pp);
  }

  friend constexpr auto operator<=>(const Scheme&, const Scheme&) = default;

private:
  int tp_ = 1;
  int pp_ = 1;
};

}  // namespace sluice
