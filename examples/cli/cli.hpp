#pragma once
// The sluice command-line tool as a function, so that tests run it in-process. Compiled once, in cli.cpp:
// every command's code is heavy to compile and every test executable would otherwise compile it again.
// Exit codes: 0 success, 2 bad input (one line on stderr naming the problem), 1 internal error.
#include <ostream>
#include <span>
#include <string_view>

namespace sluice::cli {

// `terminal`: stderr when it is a terminal, for progress bars of long runs; nullptr otherwise.
int run(std::span<const std::string_view> args, std::ostream& out, std::ostream& err, std::ostream* terminal = nullptr);

}  // namespace sluice::cli
