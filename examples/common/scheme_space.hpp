#pragma once
// --cp, --cp-kinds and --ac, read the same way by the sluice tool and the executor programs: the scheme space a
// profile's ⟨TP, PP⟩ schemes are widened by (cost::with_scheme_space).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "options.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/cost/context_parallel.hpp"

namespace sluice::command_line {

// cp "C1,C2,...": context-parallel degrees (2 to 1024) the planners may use besides 1; kinds: which of ring (the
// default), ulysses and hybrid; ac: also every scheme with full activation recomputation.
inline cost::SchemeSpace scheme_space(std::optional<std::string_view> cp, std::optional<std::string_view> kinds,
                                      bool ac) {
  cost::SchemeSpace space;
  if (cp)
    for (const std::string_view item : comma_items(*cp)) {
      const auto degree = parse_number<std::int64_t>(item);
      sluice::require(degree && *degree >= 2 && *degree <= 1024,
                      "option --cp: expected degrees from 2 to 1024, "
                      "separated by commas, got '",
                      *cp, "'");
      if (std::ranges::find(space.cp_degrees, *degree) == space.cp_degrees.end())
        space.cp_degrees.push_back(static_cast<int>(*degree));
    }
  if (kinds) {
    sluice::require(!space.cp_degrees.empty(), "option --cp-kinds needs --cp");
    space.cp_kinds.clear();
    for (const std::string_view item : comma_items(*kinds)) {
      const CpKind kind = value_in(cp_kind_names, item, "option --cp-kinds");
      if (std::ranges::find(space.cp_kinds, kind) == space.cp_kinds.end()) space.cp_kinds.push_back(kind);
    }
  }
  space.recompute = ac;
  return space;
}

}  // namespace sluice::command_line
