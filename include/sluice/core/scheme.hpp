#pragma once
// A parallel scheme: the shape of one pipeline (one data-parallel replica): tensor parallelism (TP), context
// parallelism (CP: C ranks share every sequence of a stage, by Ulysses' all-to-alls, a ring of K/V blocks, or the
// hybrid of the two) and pipeline stages (PP), and whether the stages recompute their activations (AC).
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"

namespace sluice {

// How the C ranks of a stage share its sequences: DeepSpeed-Ulysses (Jacobs et al., arXiv 2309.14509) splits the
// heads by all-to-alls; ring attention (Liu et al., arXiv 2310.01889; Megatron-LM's context parallelism) passes K and
// V around the ranks; the hybrid (USP: Fang and Zhao, arXiv 2405.07719) runs Ulysses within U ranks and the ring
// across C / U.
enum class CpKind : std::uint8_t { ulysses, ring, hybrid };
inline constexpr NameTable<CpKind, 3> cp_kind_names{
    {{CpKind::ulysses, "ulysses"}, {CpKind::ring, "ring"}, {CpKind::hybrid, "hybrid"}}};

// Activation checkpointing: none, or full recomputation of every layer's forward in the backward.
enum class Recompute : std::uint8_t { none, full };
inline constexpr NameTable<Recompute, 2> recompute_names{{{Recompute::none, "none"}, {Recompute::full, "full"}}};

// Degrees are named fields so that every caller that writes Scheme{{.tp = 4, .pp = 2}} keeps its meaning as degrees
// are added.
struct Degrees {
  int tp = 1;
  int pp = 1;
  int cp = 1;
  CpKind cp_kind = CpKind::ring;
  int ulysses = 0;  // the hybrid's Ulysses degree U (1 < U < C, U divides C); Ulysses and ring imply theirs
  Recompute recompute = Recompute::none;
};

class Scheme {
public:
  static constexpr int max_degree = 1 << 16;

  constexpr Scheme() = default;
  explicit Scheme(Degrees degrees)
      : tp_(degrees.tp), pp_(degrees.pp), cp_(degrees.cp), kind_(degrees.cp_kind), recompute_(degrees.recompute) {
    sluice::require(tp_ >= 1 && tp_ <= max_degree, "scheme: tp must be in [1, ", max_degree, "], got ", tp_);
    sluice::require(pp_ >= 1 && pp_ <= max_degree, "scheme: pp must be in [1, ", max_degree, "], got ", pp_);
    sluice::require(cp_ >= 1 && cp_ <= max_degree, "scheme: cp must be in [1, ", max_degree, "], got ", cp_);
    sluice::require(kind_ == CpKind::ulysses || kind_ == CpKind::ring || kind_ == CpKind::hybrid,
                    "scheme: unknown CP kind");
    sluice::require(recompute_ == Recompute::none || recompute_ == Recompute::full, "scheme: unknown recompute");
    if (kind_ == CpKind::hybrid) {
      sluice::require(degrees.ulysses > 1 && degrees.ulysses < cp_ && cp_ % degrees.ulysses == 0,
                      "scheme: a hybrid CP of degree ", cp_,
                      " needs a Ulysses degree that divides it, strictly "
                      "between 1 and ",
                      cp_, ", got ", degrees.ulysses);
      ulysses_ = degrees.ulysses;
    } else {
      sluice::require(degrees.ulysses == 0, "scheme: only a hybrid CP takes a Ulysses degree");
      ulysses_ = kind_ == CpKind::ulysses ? cp_ : 1;
    }
    // CP 1 has no kind: one spelling, one value.
    if (cp_ == 1) {
      kind_ = CpKind::ring;
      ulysses_ = 1;
    }
  }
  Scheme(int tp, int pp) : Scheme(Degrees{.tp = tp, .pp = pp}) {}

  [[nodiscard]] int tp() const noexcept { return tp_; }
  [[nodiscard]] int pp() const noexcept { return pp_; }
  [[nodiscard]] int cp() const noexcept { return cp_; }
  [[nodiscard]] CpKind cp_kind() const noexcept { return kind_; }
  // The Ulysses degree U (C for Ulysses, 1 for the ring) and the ring's, C / U.
  [[nodiscard]] int ulysses() const noexcept { return ulysses_; }
  [[nodiscard]] int ring() const noexcept { return cp_ / ulysses_; }
  [[nodiscard]] Recompute recompute() const noexcept { return recompute_; }
  [[nodiscard]] Degrees degrees() const noexcept {
    return {.tp = tp_,
            .pp = pp_,
            .cp = cp_,
            .cp_kind = kind_,
            .ulysses = kind_ == CpKind::hybrid ? ulysses_ : 0,
            .recompute = recompute_};
  }
  // The ranks of one stage, TP·C, and of the pipeline, TP·C·PP.
  [[nodiscard]] std::int64_t stage_gpus() const noexcept { return std::int64_t{tp_} * cp_; }
  [[nodiscard]] std::int64_t gpus() const noexcept { return stage_gpus() * pp_; }
  // ⟨TP, PP⟩ alone: the scheme without CP and AC, whose measured cost a CP or AC scheme's is derived from.
  [[nodiscard]] Scheme base() const { return Scheme(tp_, pp_); }
  [[nodiscard]] bool is_base() const noexcept { return cp_ == 1 && recompute_ == Recompute::none; }

  // The spelling used in profiles, JSON keys and the command line: ⟨TP, PP⟩'s "tp4pp2" for CP 1 without AC, else
  // "tp{TP}cp{C}{kind}pp{PP}", the hybrid's kind with its Ulysses degree, and "ac" last: "tp2cp4ringpp1",
  // "tp1cp8hybrid2pp1", "tp8pp2ac".
  [[nodiscard]] std::string name() const {
    std::string text = "tp" + std::to_string(tp_);
    if (cp_ > 1) {
      text += "cp" + std::to_string(cp_) + std::string(name_in(cp_kind_names, kind_));
      if (kind_ == CpKind::hybrid) text += std::to_string(ulysses_);
    }
    text += "pp" + std::to_string(pp_);
    if (recompute_ == Recompute::full) text += "ac";
    return text;
  }

  // Accepts name()'s spelling ("cp4" alone means the ring, Megatron-LM's context parallelism) and "<4,2>" for
  // ⟨TP, PP⟩.
  static Scheme parse(std::string_view text) {
    const auto malformed = [&] {
      return sluice::concat("scheme: cannot parse '", text,
                            "' (expected tpNppM, tpNcpC{ring|ulysses|hybridU}ppM, "
                            "either with 'ac' last, or <N,M>)");
    };
    auto number = [&](std::string_view& rest) {
      std::int64_t value = 0;
      std::size_t digits = 0;
      while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9' && value <= max_degree) {
        value = value * 10 + (rest[digits] - '0');
        ++digits;
      }
      sluice::require(digits > 0, malformed());
      rest.remove_prefix(digits);
      return static_cast<int>(value > max_degree ? max_degree + 1 : value);
    };
    auto take = [](std::string_view& rest, std::string_view token) {
      if (!rest.starts_with(token)) return false;
      rest.remove_prefix(token.size());
      return true;
    };
    std::string_view rest = text;
    Degrees degrees;
    if (take(rest, "<")) {
      degrees.tp = number(rest);
      sluice::require(take(rest, ","), malformed());
      degrees.pp = number(rest);
      sluice::require(take(rest, ">"), malformed());
    } else {
      sluice::require(take(rest, "tp"), malformed());
      degrees.tp = number(rest);
      if (take(rest, "cp")) {
        degrees.cp = number(rest);
        for (const auto& [kind, name] : cp_kind_names)
          if (take(rest, name)) degrees.cp_kind = kind;
        if (degrees.cp_kind == CpKind::hybrid) degrees.ulysses = number(rest);
      }
      sluice::require(take(rest, "pp"), malformed());
      degrees.pp = number(rest);
      if (take(rest, "ac")) degrees.recompute = Recompute::full;
    }
    sluice::require(rest.empty(), "scheme: trailing characters in '", text, "'");
    return Scheme(degrees);
  }

  // ⟨TP, PP⟩ first, so that schemes without CP and AC keep their order among themselves.
  friend constexpr auto operator<=>(const Scheme&, const Scheme&) = default;

private:
  int tp_ = 1;
  int pp_ = 1;
  int cp_ = 1;
  CpKind kind_ = CpKind::ring;
  int ulysses_ = 1;
  Recompute recompute_ = Recompute::none;
};

}  // namespace sluice
