#pragma once
// Output files, written the way a Unix tool writes them:
//   - a regular file (or a new one) whole or not at all: the text goes to a temporary beside it and is renamed over
//     it only once all of it was written and closed, so a reader never sees a truncated file and a failed write (a
//     full disk, a file-size limit) leaves it as it was and no temporary behind; it keeps its permission bits;
//   - a symbolic link through: its final target is written as above and the link stays;
//   - a stream directly, with no temporary: "-" and /dev/stdout (standard output), /dev/stderr, a FIFO or a
//     character device such as /dev/null;
//   - a directory or any other kind of file not at all: bad input.
// A path that cannot be opened (a missing directory, no permission) is bad input (sluice::invalid_input); a write
// that fails once open is a sluice::write_error.
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

namespace detail {

// Writes all of `text` to `fd`; false with errno set when a write fails.
inline bool write_all(int fd, std::string_view text) noexcept {
  while (!text.empty()) {
    const ::ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      if (written == 0) errno = EIO;
      return false;
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
  return true;
}

// The file a write to `path` lands on: its symbolic links followed to the end, at most 40 of them as Linux does.
inline std::filesystem::path write_destination(const std::filesystem::path& path) {
  std::filesystem::path current = path;
  for (int links = 0;; ++links) {
    struct stat info {};
    if (::lstat(current.c_str(), &info) != 0 || !S_ISLNK(info.st_mode)) return current;
    sluice::require(links < 40, path.string(), ": too many levels of symbolic links");
    std::error_code error;
    const std::filesystem::path target = std::filesystem::read_symlink(current, error);
    sluice::require(!error, path.string(), ": cannot read symbolic link (", error.message(), ")");
    current = target.is_absolute() ? target : current.parent_path() / target;
  }
}

}  // namespace detail

// One output: staged on construction, put in place by commit(); destruction without a commit leaves the
// destination as it was. A stream is held in memory and written by commit(). Move-only.
class StagedFile {
public:
  StagedFile(std::filesystem::path target, std::string_view text) : target_(std::move(target)) {
    sluice::require(!target_.empty(), "an output path is empty");
    const std::string& name = target_.native();
    if (name == "-" || name == "/dev/stdout" || name == "/dev/stderr") {
      stream_fd_ = name == "/dev/stderr" ? STDERR_FILENO : STDOUT_FILENO;
      text_ = text;
      return;
    }
    destination_ = detail::write_destination(target_);
    struct stat existing {};
    const bool exists = ::stat(destination_.c_str(), &existing) == 0;
    if (exists && (S_ISFIFO(existing.st_mode) || S_ISCHR(existing.st_mode))) {
      text_ = text;
      return;
    }
    sluice::require(!exists || !S_ISDIR(existing.st_mode), target_.string(), ": is a directory");
    sluice::require(!exists || S_ISREG(existing.st_mode), target_.string(),
                    ": not a regular file, a FIFO or a character device");
    stage(text, exists ? existing.st_mode & 07777 : 0644);
  }
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  StagedFile(StagedFile&& other) noexcept
      : target_(std::move(other.target_)),
        destination_(std::move(other.destination_)),
        temporary_(std::exchange(other.temporary_, {})),
        text_(std::move(other.text_)),
        stream_fd_(other.stream_fd_) {}
  StagedFile& operator=(StagedFile&&) = delete;
  ~StagedFile() { discard(); }

  [[nodiscard]] const std::filesystem::path& target() const noexcept { return target_; }
  // True until commit() for a regular file (staged in a temporary, renamed into place); false for a stream.
  [[nodiscard]] bool renames() const noexcept { return !temporary_.empty(); }

  void commit() {
    if (!temporary_.empty()) {
      std::error_code error;
      std::filesystem::rename(temporary_, destination_, error);
      if (error) {
        discard();
        throw write_error(target_.string() + ": cannot write file (" + error.message() + ")");
      }
      temporary_.clear();
      return;
    }
    const int fd = stream_fd_ >= 0 ? stream_fd_ : ::open(destination_.c_str(), O_WRONLY | O_CLOEXEC);
    sluice::require(fd >= 0, target_.string(), ": cannot open for writing (", std::strerror(errno), ")");
    const bool written = detail::write_all(fd, text_);
    const int error = errno;
    const bool closed = stream_fd_ >= 0 || ::close(fd) == 0;
    if (!written || !closed)
      throw write_error(target_.string() + ": write error (" + std::strerror(written ? errno : error) + ")");
  }

private:
  // The text into a private temporary beside the destination, given `mode`.
  void stage(std::string_view text, ::mode_t mode) {
    const std::filesystem::path directory = destination_.has_parent_path() ? destination_.parent_path() : ".";
    std::string hidden(".");  // appended, not `"." + name`: GCC 12 warns (-Wrestrict) on that falsely
    hidden += destination_.filename().string();
    hidden += ".sluice-XXXXXX";
    std::string name = (directory / hidden).string();
    const int fd = ::mkstemp(name.data());
    sluice::require(fd >= 0, target_.string(), ": cannot open file for writing (", std::strerror(errno), ")");
    temporary_ = name;
    const bool written = ::fchmod(fd, mode) == 0 && detail::write_all(fd, text);
    const int error = errno;
    if (::close(fd) != 0 || !written) {
      discard();
      throw write_error(target_.string() + ": write error (" + std::strerror(written ? errno : error) + ")");
    }
  }

  void discard() noexcept {
    if (temporary_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove(temporary_, ignored);
    temporary_.clear();
  }

  std::filesystem::path target_;       // as the caller named it, for messages
  std::filesystem::path destination_;  // the file written: target_ with its symbolic links followed
  std::filesystem::path temporary_;    // a regular file's staged text; empty for a stream or once committed
  std::string text_;                   // a stream's text, written by commit()
  int stream_fd_ = -1;                 // standard output or error, when the target names one
};

inline void write_text_file(const std::filesystem::path& path, std::string_view text) {
  StagedFile(path, text).commit();
}

}  // namespace sluice::io
