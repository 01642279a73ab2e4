// Output files (io::StagedFile, io::write_text_file) on every kind of destination: a regular file is replaced whole
// and keeps its permission bits, a symbolic link is written through and stays, a FIFO, a character device and
// standard output are written directly, a directory or a loop of links is bad input, and a write that fails once
// open is a write_error that leaves nothing behind.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/io/files.hpp"

namespace fs = std::filesystem;
using sluice::invalid_input;
using sluice::write_error;
using sluice::io::StagedFile;
using sluice::io::write_text_file;

namespace {

struct ScratchDirectory {
  fs::path path;
  ScratchDirectory() {
    std::string name = (fs::temp_directory_path() / "sluice-files-XXXXXX").string();
    REQUIRE(::mkdtemp(name.data()) != nullptr);
    path = name;
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  ~ScratchDirectory() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> entries(const fs::path& directory) {
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

::mode_t kind(const fs::path& path) {
  struct stat info {};
  REQUIRE(::lstat(path.c_str(), &info) == 0);
  return info.st_mode & S_IFMT;
}

// Runs `body` with file descriptor `fd` going to `file`, then puts it back.
template <class Body>
void redirected(int fd, const fs::path& file, Body body) {
  std::cout.flush();
  std::cerr.flush();
  const int saved = ::dup(fd);
  REQUIRE(saved >= 0);
  const int target = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(target >= 0);
  ::dup2(target, fd);
  ::close(target);
  body();
  ::dup2(saved, fd);
  ::close(saved);
}

}  // namespace

TEST_CASE("output files: a regular file is replaced whole and keeps its permission bits") {
  const ScratchDirectory scratch;
  const fs::path file = scratch.path / "out.json";
  write_text_file(file, "old");
  CHECK((fs::status(file).permissions() & fs::perms::mask) == static_cast<fs::perms>(0644));
  fs::permissions(file, static_cast<fs::perms>(0600));
  write_text_file(file, "new");
  CHECK(read_file(file) == "new");
  CHECK((fs::status(file).permissions() & fs::perms::mask) == static_cast<fs::perms>(0600));
  CHECK(entries(scratch.path) == std::vector<std::string>{"out.json"});
}

TEST_CASE("output files: a symbolic link is written through and stays a link") {
  const ScratchDirectory scratch;
  fs::create_directory(scratch.path / "sub");
  write_text_file(scratch.path / "sub" / "target.svg", "old");
  fs::create_symlink("sub/target.svg", scratch.path / "link.svg");  // relative to the link's directory
  fs::create_symlink(scratch.path / "link.svg", scratch.path / "chain.svg");
  write_text_file(scratch.path / "link.svg", "through the link");
  CHECK(kind(scratch.path / "link.svg") == S_IFLNK);
  CHECK(read_file(scratch.path / "sub" / "target.svg") == "through the link");
  write_text_file(scratch.path / "chain.svg", "through two links");
  CHECK(kind(scratch.path / "chain.svg") == S_IFLNK);
  CHECK(kind(scratch.path / "link.svg") == S_IFLNK);
  CHECK(read_file(scratch.path / "sub" / "target.svg") == "through two links");
  CHECK(entries(scratch.path / "sub") == std::vector<std::string>{"target.svg"});

  // A dangling link: its target is created, the link kept.
  fs::create_symlink("missing.svg", scratch.path / "dangling.svg");
  write_text_file(scratch.path / "dangling.svg", "created");
  CHECK(kind(scratch.path / "dangling.svg") == S_IFLNK);
  CHECK(read_file(scratch.path / "missing.svg") == "created");
}

TEST_CASE(
    "output files: a directory, a loop of links, a missing directory and an empty path are bad input that changes "
    "nothing") {
  const ScratchDirectory scratch;
  fs::create_directory(scratch.path / "dir");
  CHECK_THROWS_WITH_AS(write_text_file(scratch.path / "dir", "x"), doctest::Contains("dir: is a directory"),
                       invalid_input);
  fs::create_symlink("dir", scratch.path / "to-dir");
  CHECK_THROWS_WITH_AS(write_text_file(scratch.path / "to-dir", "x"), doctest::Contains("is a directory"),
                       invalid_input);
  CHECK(fs::is_empty(scratch.path / "dir"));
  fs::create_symlink("b", scratch.path / "a");
  fs::create_symlink("a", scratch.path / "b");
  CHECK_THROWS_WITH_AS(write_text_file(scratch.path / "a", "x"),
                       doctest::Contains("a: too many levels of symbolic links"), invalid_input);
  CHECK(kind(scratch.path / "a") == S_IFLNK);
  CHECK_THROWS_WITH_AS(write_text_file(scratch.path / "no" / "such" / "out.svg", "x"),
                       doctest::Contains("out.svg: cannot open file for writing"), invalid_input);
  CHECK(entries(scratch.path) == std::vector<std::string>{"a", "b", "dir", "to-dir"});
  CHECK_THROWS_WITH_AS(write_text_file("", "x"), doctest::Contains("an output path is empty"), invalid_input);
}

TEST_CASE("output files: a FIFO is written directly, only on commit, and stays a FIFO") {
  const ScratchDirectory scratch;
  const fs::path fifo = scratch.path / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  { const StagedFile dropped(fifo, "never written"); }  // no reader: opening it would block, so it must not open
  std::future<std::string> reader = std::async(std::launch::async, [&] { return read_file(fifo); });
  const std::string text(100000, 'x');  // more than a pipe's buffer
  write_text_file(fifo, text);
  CHECK(reader.get() == text);
  CHECK(kind(fifo) == S_IFIFO);
  CHECK(entries(scratch.path) == std::vector<std::string>{"fifo"});
}

TEST_CASE("output files: character devices are written directly: /dev/null's takes the text, /dev/full's fails") {
  const ScratchDirectory scratch;
  const fs::path null_device = scratch.path / "null";
  const fs::path full_device = scratch.path / "full";
  // Nodes with /dev/null's and /dev/full's numbers, made here so that the machine's own are never at risk.
  if (::mknod(null_device.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) != 0 ||
      ::mknod(full_device.c_str(), S_IFCHR | 0666, ::makedev(1, 7)) != 0) {
    MESSAGE("skipped: cannot make device nodes here (" << std::strerror(errno) << "; needs root)");
    return;
  }
  write_text_file(null_device, "discarded");
  CHECK(kind(null_device) == S_IFCHR);
  CHECK_THROWS_WITH_AS(write_text_file(full_device, "no space"), doctest::Contains("full: write error"), write_error);
  CHECK(kind(full_device) == S_IFCHR);
  fs::create_symlink("full", scratch.path / "to-full");
  CHECK_THROWS_AS(write_text_file(scratch.path / "to-full", "no space"), write_error);
  CHECK(kind(full_device) == S_IFCHR);
  CHECK(entries(scratch.path) == std::vector<std::string>{"full", "null", "to-full"});
}

TEST_CASE("output files: '-' and /dev/stdout are standard output, /dev/stderr standard error") {
  const ScratchDirectory scratch;
  redirected(STDOUT_FILENO, scratch.path / "stdout", [] {
    write_text_file("-", "dash ");
    write_text_file("/dev/stdout", "stdout");
  });
  redirected(STDERR_FILENO, scratch.path / "stderr", [] { write_text_file("/dev/stderr", "stderr"); });
  CHECK(read_file(scratch.path / "stdout") == "dash stdout");
  CHECK(read_file(scratch.path / "stderr") == "stderr");
  CHECK(kind(scratch.path / "stdout") == S_IFREG);
}

TEST_CASE("output files: a dropped StagedFile leaves the destination as it was and no temporary") {
  const ScratchDirectory scratch;
  const fs::path file = scratch.path / "out.json";
  write_text_file(file, "old");
  {
    StagedFile staged(file, "new");
    CHECK(read_file(file) == "old");
    CHECK(entries(scratch.path).size() == 2);  // the file and its temporary
  }
  CHECK(read_file(file) == "old");
  CHECK(entries(scratch.path) == std::vector<std::string>{"out.json"});
}

TEST_CASE("output files: a write that fails once open (a file-size limit) is a write_error that leaves no trace") {
  const ScratchDirectory scratch;
  const fs::path file = scratch.path / "out.json";
  write_text_file(file, "old");
  struct rlimit saved {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  struct rlimit limited = saved;
  limited.rlim_cur = 1024;
  // Past the limit write() fails with EFBIG instead of raising SIGXFSZ.
  const auto previous = ::signal(SIGXFSZ, SIG_IGN);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  CHECK_THROWS_WITH_AS(write_text_file(file, std::string(4096, 'x')), doctest::Contains("out.json: write error"),
                       write_error);
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, previous);
  CHECK(read_file(file) == "old");
  CHECK(entries(scratch.path) == std::vector<std::string>{"out.json"});
}
