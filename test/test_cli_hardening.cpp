// The tool's contract on bad or extreme input: exit 2 with one line naming the input, exit 1 with one line when its
// output cannot be written, never a partial or stale output file; and generators that try every numeric and text
// option of every command with values at, inside and past their documented ranges.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli_harness.hpp"
#include "options.hpp"
#include "sluice/core/random.hpp"

using sluice::test::CliResult;
using sluice::test::one_line;
using sluice::test::run_cli;

namespace {

// A scratch directory, removed with everything in it.
struct ScratchDirectory {
  std::filesystem::path path;
  explicit ScratchDirectory(std::string_view name)
      : path(std::filesystem::temp_directory_path() / ("sluice-hardening-" + std::string(name))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDirectory() { std::filesystem::remove_all(path); }
  [[nodiscard]] std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(std::filesystem::recursive_directory_iterator(path), {}));
  }
};

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Exit 0 with nothing on stderr, or exit 2 with one `sluice: error:` line and nothing on stdout.
void check_contract(const CliResult& result) {
  CHECK((result.code == 0 || result.code == 2));
  if (result.code == 0) {
    CHECK(result.err.empty());
  } else {
    CHECK(one_line(result.err));
    CHECK(result.err.starts_with("sluice: error: "));
  }
}

}  // namespace

TEST_CASE("cli: no command is one line naming --help") {
  const CliResult result = run_cli({});
  CHECK(result.code == 2);
  CHECK(result.out.empty());
  CHECK(one_line(result.err));
  CHECK(result.err.find("--help") != std::string::npos);
}

TEST_CASE("cli: control characters from the input are escaped, so a message stays one line") {
  const std::vector<std::vector<std::string_view>> cases = {
      {"inspect", "--lengths", "bad\nname\x1b[31m\a.txt"},
      {"inspect", "--no\nsuch\toption"},
      {"plan", "--strategies", "4*tp4pp1\n,\r2*tp8pp1"},
      {"trace", "--schedule", "\x1b]0;title\a"},
      {"no\ncommand"},
  };
  for (const auto& args : cases) {
    const CliResult result = run_cli(args);
    CHECK(result.code == 2);
    CHECK(one_line(result.err));
    for (const char c : result.err.substr(0, result.err.size() - 1)) {
      CHECK(static_cast<unsigned char>(c) >= 0x20);
      CHECK(c != '\x7f');
    }
  }
  const CliResult escaped = run_cli({"inspect", "--lengths", "a\nb\x1b"});
  CHECK(escaped.err.find("a\\nb\\x1b") != std::string::npos);
}

TEST_CASE("cli: output that cannot be written is exit 1 and one line, and no output file is put in place") {
  const ScratchDirectory scratch("stdout");
  std::ostream broken(nullptr);  // every write fails, as on a full disk or a closed pipe
  std::ostringstream err;
  const std::string trace = (scratch.path / "trace.json").string();
  const std::vector<std::string_view> args = {"schedule", "--stages", "2", "--tokens", "8000", "--trace", trace};
  CHECK(sluice::cli::run(args, broken, err) == 1);
  CHECK(one_line(err.str()));
  CHECK(err.str().find("standard output") != std::string::npos);
  CHECK(scratch.entries() == 0);
  // The same run with a working stdout writes the file.
  const CliResult result = run_cli(args);
  CHECK(result.code == 0);
  CHECK(std::filesystem::is_regular_file(trace));
  CHECK(scratch.entries() == 1);
}

TEST_CASE("cli: a run that fails late leaves no file or directory it made, and keeps an existing output") {
  const ScratchDirectory scratch("late");
  const std::filesystem::path pictures = scratch.path / "new" / "pictures";
  const std::string missing = (scratch.path / "missing" / "trace.json").string();
  // The pictures are drawn before the trace fails: neither they nor their new directories may stay.
  const CliResult simulate = run_cli({"simulate", "--iterations", "1", "--tokens", "8000", "--trials", "2", "--svg",
                                      pictures.string(), "--trace", missing});
  CHECK(simulate.code == 2);
  CHECK(one_line(simulate.err));
  CHECK(simulate.err.find(missing) != std::string::npos);
  CHECK(scratch.entries() == 0);

  const std::filesystem::path existing = scratch.path / "loads.svg";
  std::ofstream(existing) << "old\n";
  std::ostream broken(nullptr);
  std::ostringstream err;
  const std::string svg = existing.string();
  const std::vector<std::string_view> args = {"plan", "--strategies", "4*tp4pp1", "--iterations", "2", "--tokens",
                                              "8000", "--svg",        svg};
  CHECK(sluice::cli::run(args, broken, err) == 1);
  CHECK(read(existing) == "old\n");
  CHECK(scratch.entries() == 1);
  CHECK(run_cli(args).code == 0);
  CHECK(read(existing).starts_with("<svg"));
  CHECK(scratch.entries() == 1);
}

TEST_CASE("cli: an output device that fails leaves the command's files as they were") {
  const ScratchDirectory scratch("device");
  const std::filesystem::path full = scratch.path / "full";
  // A node with /dev/full's numbers, made here so that the machine's own is never at risk.
  if (::mknod(full.c_str(), S_IFCHR | 0666, ::makedev(1, 7)) != 0) {
    MESSAGE("skipped: cannot make device nodes here (" << std::strerror(errno) << "; needs root)");
    return;
  }
  const std::string svg = (scratch.path / "t1.svg").string();
  const CliResult result =
      run_cli({"schedule", "--stages", "2", "--tokens", "8000", "--svg", svg, "--trace", full.string()});
  CHECK(result.code == 1);
  CHECK(one_line(result.err));
  CHECK(result.err.find("full: write error") != std::string::npos);
  CHECK(scratch.entries() == 1);  // the device alone: no picture, no temporary
}

TEST_CASE("cli: an empty output path is bad input naming its option, before any work") {
  for (const std::string_view option : {"--svg", "--trace"}) {
    CAPTURE(option);
    const CliResult result = run_cli({"schedule", "--stages", "2", "--tokens", "8000", option, ""});
    CHECK(result.code == 2);
    CHECK(one_line(result.err));
    CHECK(result.err.find(std::string("option ") + std::string(option) + ": an empty path") != std::string::npos);
  }
  const CliResult inspect = run_cli({"inspect", "--svg="});
  CHECK(inspect.code == 2);
  CHECK(inspect.err.find("option --svg: an empty path") != std::string::npos);
  const CliResult fit = run_cli({"fit", "--samples", "missing.json", "--out", ""});
  CHECK(fit.code == 2);
  CHECK(fit.err.find("option --out: an empty path") != std::string::npos);
}

TEST_CASE("cli: every numeric option has a documented range and is refused outside it") {
  for (const auto& [name, limit] : sluice::cli::option_limits) {
    CAPTURE(name);
    CHECK(limit.minimum <= limit.maximum);
  }
  const std::vector<sluice::test::BadInput> cases = {
      {{"simulate", "--iterations", "10001"}, "--iterations"},
      {{"plan", "--propose", "--trials", "10001"}, "--trials"},
      {{"plan", "--propose", "--threads", "257"}, "--threads"},
      {{"schedule", "--stages", "2", "--replicas", "65537"}, "--replicas"},
      {{"simulate", "--bandwidth", "1e-9"}, "--bandwidth"},
      {{"simulate", "--latency", "1e6"}, "--latency"},
      {{"simulate", "--gpus", "65537"}, "--gpus"},
      {{"simulate", "--tokens", "16777217"}, "--tokens"},
      {{"trace", "--iteration", "1048576"}, "--iteration"},
      {{"inspect", "--context", "1048577"}, "--context"},
      {{"propose", "--sampled", "--batches", "1025"}, "--batches"},
      {{"propose", "--sampled", "--held-out", "0"}, "--held-out"},
  };
  sluice::test::check_bad_input(cases);
}

// Each command with a cheap base run, and each of its numeric options set, one at a time, to values at, inside and
// past its range and to non-numbers: the contract holds, and a value outside the range is refused naming the option.
TEST_CASE("cli: generated numeric option values keep the contract") {
  struct Command {
    std::vector<std::string_view> base;
    std::vector<std::string_view> options;
  };
  const std::vector<std::string_view> scenario = {"gpus", "tokens", "context", "seed", "trials", "threads"};
  const std::vector<Command> commands = {
      {{"inspect"}, {"context", "gpus", "bin-width"}},
      {{"plan", "--strategies", "4*tp4pp1", "--iterations", "1", "--tokens", "4000", "--trials", "2"},
       {"gpus", "tokens", "iterations", "context", "seed", "trials", "threads"}},
      {{"propose", "--tokens", "4000"}, {"gpus", "context", "tokens", "length-step", "candidates"}},
      {{"schedule", "--stages", "2", "--tokens", "4000"},
       {"stages", "tp", "replicas", "tokens", "context", "seed", "interval", "bandwidth", "latency"}},
      {{"shard", "--gpus", "16", "--strategy", "2*tp8pp1", "--model", "llama2-7b"}, {"gpus", "gpus-per-node"}},
      {{"simulate", "--iterations", "1", "--tokens", "4000", "--trials", "2"},
       {"gpus", "tokens", "iterations", "context", "seed", "trials", "threads", "bandwidth", "latency"}},
      {{"trace", "--tokens", "4000", "--trials", "2"},
       {"iteration", "gpus", "tokens", "context", "seed", "trials", "bandwidth", "latency"}},
  };
  const std::vector<std::string> garbage = {"x",
                                            "",
                                            "1.5x",
                                            "nan",
                                            "inf",
                                            "-inf",
                                            "1e999",
                                            "0x10",
                                            " 1",
                                            "1 ",
                                            "+1",
                                            "--",
                                            "\n",
                                            "1e3",
                                            "2147483648",
                                            "-1",
                                            "0",
                                            "1",
                                            "2",
                                            "1e-3",
                                            "4.9e-324",
                                            "9223372036854775807",
                                            "9223372036854775808",
                                            "18446744073709551616",
                                            "-9223372036854775809"};
  std::size_t runs = 0;
  for (const Command& command : commands) {
    for (const std::string_view option : command.options) {
      const sluice::cli::OptionLimit& limit = sluice::cli::option_limits.at(std::string(option));
      std::vector<std::string> values = garbage;
      std::ostringstream past;
      past.precision(17);
      past << limit.maximum * 2 + 1;
      values.push_back(past.str());
      for (const std::string& value : values) {
        std::vector<std::string_view> args = command.base;
        const std::string flag = "--" + std::string(option);
        // Replace the base's own setting of the option, if any.
        for (std::size_t i = 0; i + 1 < args.size(); ++i)
          if (args[i] == flag)
            args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
                       args.begin() + static_cast<std::ptrdiff_t>(i) + 2);
        args.push_back(flag);
        args.push_back(value);
        CAPTURE(args);
        const CliResult result = run_cli(args);
        check_contract(result);
        ++runs;
        char* end = nullptr;
        const double number = std::strtod(value.c_str(), &end);
        const bool numeric =
            !value.empty() && end == value.c_str() + value.size() && value.find_first_of(" +x") == std::string::npos;
        if (!numeric || number < limit.minimum || number > limit.maximum) {
          CHECK(result.code == 2);
          CHECK(result.err.find(flag) != std::string::npos);
        }
      }
    }
  }
  CHECK(runs > 1000);
}

// Text options and file names: empty, control characters, very long, odd paths, malformed strategies and sizes.
TEST_CASE("cli: generated text option values keep the contract") {
  sluice::Rng rng(20261123);
  std::vector<std::string> values = {"",         "\n",        "\x1b[2J",   "a\nb",       std::string(5000, 'a'),
                                     "/",        "/dev/null", "-1",        "1*tp0pp1",   "99999999999*tp1pp1",
                                     "{}",       "[[[[",      "0GiB",      "1e400GiB",   "16GiB\n",
                                     "cyclic\n", "padded ",   "1*tp1pp1+", "4*tp4pp1,,", "\xff\xfe"};
  for (int k = 0; k < 40; ++k) {
    std::string random;
    const auto length = 1 + rng.uniform_int(0, 40);
    for (std::int64_t c = 0; c < length; ++c) random.push_back(static_cast<char>(rng.uniform_int(1, 255)));
    values.push_back(random);
  }
  const std::vector<std::vector<std::string_view>> templates = {
      {"inspect", "--profile"},
      {"inspect", "--lengths"},
      {"plan", "--iterations", "1", "--tokens", "4000", "--trials", "2", "--strategies"},
      {"propose", "--tokens", "4000", "--step"},
      {"schedule", "--stages", "2", "--tokens", "4000", "--layout"},
      {"schedule", "--stages", "2", "--tokens", "4000", "--schedule"},
      {"search", "--cluster", "a100-8", "--model"},
      {"search", "--model", "gpt-48", "--cluster"},
      {"search", "--model", "gpt-48", "--cluster", "a100-8", "--memory"},
      {"search", "--model", "gpt-48", "--cluster", "a100-8", "--memory", "16GiB", "--granularity"},
      {"shard", "--gpus", "16", "--model", "llama2-7b", "--strategy"},
      {"shard", "--gpus", "16", "--strategy", "2*tp8pp1", "--model"},
      {"trace", "--tokens", "4000", "--trials", "2", "--schedule"},
  };
  std::size_t runs = 0;
  for (const auto& head : templates) {
    for (const std::string& value : values) {
      std::vector<std::string_view> args = head;
      args.push_back(value);
      CAPTURE(args);
      const CliResult result = run_cli(args);
      check_contract(result);
      ++runs;
    }
  }
  CHECK(runs > 700);
}
