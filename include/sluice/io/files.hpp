#pragma once
// Files written whole or not at all. The text goes to a temporary file beside the target and is renamed over it
// only once all of it was written and closed, so a reader never sees a truncated file and a failed write (a full
// disk, a file-size limit, a missing directory) leaves the target as it was and no temporary behind.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "sluice/core/error.hpp"

namespace sluice::io {

// A file written to a temporary beside `target`; commit() renames it into place, destruction without a commit
// removes it. Move-only.
class StagedFile {
public:
  StagedFile(std::filesystem::path target, std::string_view text) : target_(std::move(target)) {
    const std::filesystem::path directory = target_.has_parent_path() ? target_.parent_path() : ".";
    std::string hidden(".");  // appended, not `"." + name`: GCC 12 warns (-Wrestrict) on that falsely
    hidden += target_.filename().string();
    hidden += ".sluice-XXXXXX";
    std::string name = (directory / hidden).string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0) fail("cannot open file for writing");
    temporary_ = name;
    // mkstemp makes the file private; an output keeps the target's permissions, or gets the usual 0644.
    struct stat existing {};
    ::fchmod(fd, ::stat(target_.c_str(), &existing) == 0 ? existing.st_mode & 07777 : 0644);
    while (!text.empty()) {
      const ::ssize_t written = ::write(fd, text.data(), text.size());
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) {
        const int error = errno;
        ::close(fd);
        errno = error;
        fail("write error");
      }
      text.remove_prefix(static_cast<std::size_t>(written));
    }
    if (::close(fd) != 0) fail("write error");
  }
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  StagedFile(StagedFile&& other) noexcept
      : target_(std::move(other.target_)), temporary_(std::exchange(other.temporary_, {})) {}
  StagedFile& operator=(StagedFile&&) = delete;
  ~StagedFile() { discard(); }

  [[nodiscard]] const std::filesystem::path& target() const noexcept { return target_; }

  void commit() {
    std::error_code error;
    std::filesystem::rename(temporary_, target_, error);
    if (error) {
      discard();
      sluice::fail(target_.string(), ": cannot write file (", error.message(), ")");
    }
    temporary_.clear();
  }

private:
  [[noreturn]] void fail(std::string_view what) {
    const int error = errno;
    discard();
    sluice::fail(target_.string(), ": ", what, " (", std::strerror(error), ")");
  }

  void discard() noexcept {
    if (temporary_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove(temporary_, ignored);
    temporary_.clear();
  }

  std::filesystem::path target_;
  std::filesystem::path temporary_;  // empty once committed or discarded
};

inline void write_text_file(const std::filesystem::path& path, std::string_view text) {
  StagedFile(path, text).commit();
}

}  // namespace sluice::io
