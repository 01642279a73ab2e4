#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string_view>
#include <vector>

#include "cli.hpp"

int main(int argc, char** argv) {
  // An installed tool finds its bundled data beside it (bin/../share/sluice), wherever the install
  // tree was moved; a tool run from the build tree falls back to the source tree compiled in.
  std::error_code error;
  const auto executable = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error && std::getenv("SLUICE_DATA_DIR") == nullptr) {
    const auto installed = executable.parent_path().parent_path() / "share" / "sluice";
    if (std::filesystem::is_directory(installed / "profiles", error)) setenv("SLUICE_DATA_DIR", installed.c_str(), 0);
  }
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  return sluice::cli::run(args, std::cout, std::cerr, isatty(STDERR_FILENO) != 0 ? &std::cerr : nullptr);
}
