#pragma once
// The one table of an enumeration's names, for every enumeration that crosses a boundary (documents, the command
// line, pictures, Python): each value's name and each name's value come from it, and a wrong name is an error that
// lists the right ones.
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "sluice/core/error.hpp"

namespace sluice {

// One entry of a table: an aggregate, not a std::pair, whose constructors' constraints the compiler would check for
// every enumeration.
template <class Enum>
struct NamedValue {
  Enum value;
  std::string_view name;
};

template <class Enum, std::size_t Size>
using NameTable = std::array<NamedValue<Enum>, Size>;

// The name of `value` in `table` (empty if it has none, which a complete table rules out).
template <class Enum, std::size_t Size>
constexpr std::string_view name_in(const NameTable<Enum, Size>& table, Enum value) {
  for (const auto& [entry, name] : table)
    if (entry == value) return name;
  return {};
}

// The names of `table` as "a, b or c".
template <class Enum, std::size_t Size>
std::string names_of(const NameTable<Enum, Size>& table) {
  std::string names;
  for (std::size_t k = 0; k < Size; ++k) {
    if (k > 0) names += k + 1 == Size ? " or " : ", ";
    names += table[k].name;
  }
  return names;
}

// The value named `text`; raises invalid_input naming `what` and the valid names otherwise.
template <class Enum, std::size_t Size>
Enum value_in(const NameTable<Enum, Size>& table, std::string_view text, std::string_view what) {
  for (const auto& [entry, name] : table)
    if (name == text) return entry;
  sluice::fail(what, ": expected ", names_of(table), ", got '", text, "'");
}

}  // namespace sluice
