#pragma once
// What every program's --version prints: the project's version, which the build passes as SLUICE_VERSION
// (CMake's PROJECT_VERSION, examples/CMakeLists.txt).
#include <string_view>

#ifndef SLUICE_VERSION
#error "SLUICE_VERSION is defined by the build (examples/CMakeLists.txt)"
#endif

namespace sluice::command_line {

inline constexpr std::string_view version = "sluice " SLUICE_VERSION;

}  // namespace sluice::command_line
