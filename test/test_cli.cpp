#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli_harness.hpp"
#include "progress.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/json.hpp"

using sluice::test::run_cli;

namespace {

// Bad input: exit 2, nothing on stdout, and one stderr line "sluice: error: ..." holding `fragment`.
void expect_error(const std::vector<std::string_view>& args, std::string_view fragment) {
  const auto result = run_cli(args);
  CAPTURE(args.front());
  CAPTURE(result.err);
  CHECK(result.code == 2);
  CHECK(result.out.empty());
  CHECK(sluice::test::one_line(result.err));
  CHECK(result.err.starts_with("sluice: error: "));
  CHECK(result.err.find(fragment) != std::string::npos);
}

// The bundled 7B profile with every scheme's latency replaced, written to `path`.
std::string profile_with_latency(const std::filesystem::path& path, double a, double b, double c) {
  sluice::io::json document = sluice::io::read_json_file(sluice::io::resolve_data_file("llama2-7b", "profiles"));
  for (auto& scheme : document.at("schemes")) scheme["latency"] = {{"a", a}, {"b", b}, {"c", c}};
  sluice::io::write_text_file(path, document.dump());
  return path.string();
}

}  // namespace

TEST_CASE("cli: inspect on the bundled defaults") {
  const auto result = run_cli({"inspect"});
  CHECK(result.code == 0);
  CHECK(result.err.empty());
  CHECK(result.out.find("man-pages") != std::string::npos);
  CHECK(result.out.find("sequences 21148") != std::string::npos);
  CHECK(result.out.find("llama2-7b") != std::string::npos);
  CHECK(result.out.find("tp8pp1") != std::string::npos);
}

TEST_CASE("cli: inspect --cp derives every scheme with context parallelism") {
  const auto table = run_cli({"inspect", "--cp", "4", "--heads", "32"});
  REQUIRE(table.code == 0);
  CHECK(table.out.find("context parallelism: CP 4 ring, 32 heads (32 KV)") != std::string::npos);
  CHECK(table.out.find("tp2cp4ringpp1") != std::string::npos);
  CHECK(table.out.find("not derived") != std::string::npos);  // tp8cp4ringpp2 needs 64 of the 16 GPUs

  const auto result = run_cli(
      {"inspect", "--cp", "8", "--cp-kind", "ulysses", "--heads", "32", "--kv-heads", "8", "--recompute", "--json"});
  REQUIRE(result.code == 0);
  const sluice::io::json document = sluice::io::json::parse(result.out);
  const sluice::io::json& derived = document.at("context_parallel");
  CHECK(derived.at("kind") == "ulysses");
  CHECK(derived.at("ulysses") == 8);
  CHECK(derived.at("recompute") == true);
  // TP 1 alone splits 8 KV heads 8 ways; ⟨1, 2⟩ with CP 8 holds far more than ⟨1, 2⟩ itself.
  REQUIRE(derived.at("schemes").size() == 1);
  const sluice::io::json& scheme = derived.at("schemes")[0];
  CHECK(scheme.at("scheme") == "tp1cp8ulyssespp2ac");
  CHECK(scheme.at("gpus") == 16);
  std::int64_t base_max_len = 0;
  for (const sluice::io::json& base : document.at("profile").at("schemes"))
    if (base.at("tp") == 1 && base.at("pp") == 2) base_max_len = base.at("max_len").get<std::int64_t>();
  CHECK(scheme.at("max_len").get<std::int64_t>() > 8 * base_max_len);
  CHECK(scheme.at("fit").at("relative_rms_error").get<double>() < 0.05);
  for (const sluice::io::json& time : scheme.at("times")) CHECK(time.at("seconds").get<double>() > 0);
  CHECK_FALSE(scheme.contains("last_stage"));
}

TEST_CASE("cli: inspect --cp shows the last stage's own work a derived scheme carries") {
  // ⟨1, 2⟩ with a head of a quarter of its b and half its c: its CP 2 ranks share the b over their tokens.
  const auto path = std::filesystem::temp_directory_path() / "sluice_test_cli_last_stage.json";
  sluice::io::json document = sluice::io::read_json_file(sluice::io::resolve_data_file("llama2-7b", "profiles"));
  double b = 0;
  double c = 0;
  for (auto& scheme : document.at("schemes"))
    if (scheme.at("tp") == 1 && scheme.at("pp") == 2) {
      b = scheme.at("latency").at("b").get<double>() / 4;
      c = scheme.at("latency").at("c").get<double>() / 2;
      scheme["last_stage"] = {{"b", b}, {"c", c}};
    }
  REQUIRE(b > 0);
  sluice::io::write_text_file(path, document.dump());
  const std::string profile = path.string();
  const auto result = run_cli({"inspect", "--profile", profile, "--cp", "2", "--heads", "32", "--json"});
  REQUIRE(result.code == 0);
  const sluice::io::json derived = sluice::io::json::parse(result.out);
  int with_work = 0;
  for (const sluice::io::json& scheme : derived.at("context_parallel").at("schemes")) {
    CAPTURE(scheme.at("scheme"));
    if (scheme.at("scheme") != "tp1cp2ringpp2") {
      CHECK_FALSE(scheme.contains("last_stage"));
      continue;
    }
    ++with_work;
    CHECK(scheme.at("last_stage").at("b").get<double>() == doctest::Approx(b / 2).epsilon(1e-12));
    CHECK(scheme.at("last_stage").at("c").get<double>() == doctest::Approx(c).epsilon(1e-12));
    CHECK(scheme.at("fit").at("c").get<double>() >= c);
  }
  CHECK(with_work == 1);
  const auto table = run_cli({"inspect", "--profile", profile, "--cp", "2", "--heads", "32"});
  REQUIRE(table.code == 0);
  CHECK(table.out.find("last stage's own work") != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("cli: inspect --cp refuses what it cannot derive, with one line") {
  // A profile that does not give the heads.
  const auto headless = std::filesystem::temp_directory_path() / "sluice_test_cli_headless.json";
  sluice::io::json document = sluice::io::read_json_file(sluice::io::resolve_data_file("llama2-7b", "profiles"));
  document.at("model").erase("heads");
  sluice::io::write_text_file(headless, document.dump());
  const std::string headless_name = headless.string();
  sluice::test::check_bad_input({
      {{"inspect", "--heads", "32"}, "option --heads needs --cp"},
      {{"inspect", "--recompute"}, "option --recompute needs --cp"},
      {{"inspect", "--cp", "4", "--profile", headless_name}, "option --cp needs --heads: profile llama2-7b does not"},
      {{"plan", "--cp", "4", "--profile", headless_name, "--strategies", "1*tp8pp2"},
       "does not give the model's attention heads"},
      {{"inspect", "--cp", "0", "--heads", "32"}, "--cp: expected an integer from 1 to 1024"},
      {{"inspect", "--cp", "4", "--heads", "32", "--cp-kind", "stripe"},
       "option --cp-kind: expected ulysses, ring or hybrid, got 'stripe'"},
      {{"inspect", "--cp", "4", "--heads", "32", "--ulysses", "2"}, "option --ulysses is for --cp-kind hybrid"},
      {{"inspect", "--cp", "4", "--heads", "32", "--cp-kind", "hybrid"}, "option --cp-kind hybrid needs --ulysses"},
      {{"inspect", "--cp", "4", "--heads", "32", "--cp-kind", "hybrid", "--ulysses", "3"},
       "option --ulysses: 3 must divide --cp 4"},
      {{"inspect", "--cp", "4", "--kv-heads", "5"}, "option --kv-heads: 5 must divide the 32 heads"},
      {{"plan", "--cp", "3", "--cp-kinds", "ulysses", "--strategies", "1*tp8pp2"},
       "CP 3 splits the 32 heads unevenly in every scheme"},
      {{"plan", "--cp", "32", "--strategies", "1*tp8pp2"}, "no scheme with CP 32 fits the 16 GPUs"},
      {{"plan", "--cp", "2,x", "--strategies", "1*tp8pp2"}, "option --cp: expected degrees from 2 to 1024"},
      {{"plan", "--cp", "1", "--strategies", "1*tp8pp2"}, "option --cp: expected degrees from 2 to 1024"},
      {{"plan", "--cp-kinds", "ring", "--strategies", "1*tp8pp2"}, "option --cp-kinds needs --cp"},
      {{"simulate", "--cp", "2", "--cp-kinds", "ring,stripe"}, "option --cp-kinds: expected ulysses, ring or hybrid"},
      {{"plan", "--strategies", "1*tp1cp4ringpp2"}, "no usable scheme tp1cp4ringpp2"},
      {{"plan", "--cp", "4", "--strategies", "2*tp4cp4ringpp1"}, "needs 32 GPUs"},
  });
  std::filesystem::remove(headless);
}

TEST_CASE("cli: inspect --json is one parseable document") {
  const auto result = run_cli({"inspect", "--profile", "llama2-32b", "--gpus=64", "--lengths", "cpython-stdlib",
                               "--context", "32768", "--bin-width", "4096", "--json"});
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("format") == "sluice.inspect");
  CHECK(document.at("dataset").at("context") == 32768);
  CHECK(document.at("dataset").at("stats").at("count") == 1762);
  CHECK(document.at("dataset").at("stats").at("max") == 32768);
  CHECK(document.at("dataset").at("stats").at("truncated").get<int>() > 0);
  CHECK(document.at("dataset").at("histogram").at("bin_width") == 4096);
  CHECK(document.at("profile").at("gpus") == 64);
  CHECK(document.at("profile").at("schemes").size() == 15);
  for (const auto& scheme : document.at("profile").at("schemes")) CHECK(scheme.at("times").size() == 4);
}

TEST_CASE("cli: plan over inline candidates, text and JSON") {
  const auto text = run_cli({"plan", "--profile", "llama2-32b", "--gpus", "64", "--tokens", "100000", "--iterations",
                             "3", "--strategies", "1*tp16pp1+6*tp8pp1,4*tp16pp1"});
  CHECK(text.code == 0);
  CHECK(text.err.empty());
  CHECK(text.out.find("tokens/s") != std::string::npos);
  const auto result = run_cli({"plan", "--profile", "llama2-32b", "--gpus", "64", "--tokens", "100000", "--iterations",
                               "3", "--strategies", "1*tp16pp1+6*tp8pp1,4*tp16pp1", "--seed", "0", "--json"});
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("format") == "sluice.plan_run");
  REQUIRE(document.at("iterations").size() == 3);
  for (const auto& iteration : document.at("iterations"))
    CHECK(iteration.at("plan").at("estimate") == iteration.at("estimate"));
  // The same seed gives the same plans; the thread count does not change them.
  const auto threaded =
      run_cli({"plan", "--profile", "llama2-32b", "--gpus", "64", "--tokens", "100000", "--iterations", "3",
               "--strategies", "1*tp16pp1+6*tp8pp1,4*tp16pp1", "--threads", "2", "--json"});
  REQUIRE(threaded.code == 0);
  const auto again = sluice::io::json::parse(threaded.out);
  for (std::size_t k = 0; k < 3; ++k)
    CHECK(again.at("iterations")[k].at("plan") == document.at("iterations")[k].at("plan"));
}

TEST_CASE("cli: --svg writes pictures") {
  const auto directory = std::filesystem::temp_directory_path() / "sluice_test_cli_svg";
  std::filesystem::create_directories(directory);
  const std::string histogram = (directory / "lengths.svg").string();
  const std::string loads = (directory / "loads.svg").string();
  CHECK(run_cli({"inspect", "--svg", histogram}).code == 0);
  CHECK(run_cli({"plan", "--strategies", "4*tp4pp1", "--iterations", "2", "--svg", loads}).code == 0);
  for (const std::string& path : {histogram, loads}) {
    const std::string svg = sluice::io::read_text_file(path);
    CHECK(svg.starts_with("<svg xmlns="));
    CHECK(svg.ends_with("</svg>\n"));
  }
  std::filesystem::remove_all(directory);
  const auto unwritable = run_cli({"inspect", "--svg", "/nonexistent/dir/out.svg"});
  CHECK(unwritable.code == 2);
  CHECK(unwritable.err.find("/nonexistent/dir/out.svg: cannot open file for writing") != std::string::npos);
}

TEST_CASE("cli: help and usage") {
  const auto usage = run_cli({"--help"});
  CHECK(usage.code == 0);
  // Every command is listed and answers --help.
  for (const std::string_view command :
       {"inspect", "plan", "propose", "schedule", "search", "shard", "simulate", "trace"}) {
    CAPTURE(command);
    CHECK(usage.out.find("  " + std::string(command) + " ") != std::string::npos);
    const auto command_help = run_cli({command, "--help"});
    CHECK(command_help.code == 0);
    CHECK(command_help.out.find("usage: sluice " + std::string(command)) != std::string::npos);
  }
  const auto help = run_cli({"inspect", "--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("--context") != std::string::npos);
  const auto bare = run_cli({});
  CHECK(bare.code == 2);
  CHECK(bare.err.find("--help") != std::string::npos);
}

TEST_CASE("cli: bad input exits 2 with one line naming the problem") {
  const std::vector<sluice::test::BadInput> cases = {
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"inspect", "--bogus"}, "unknown option --bogus"},
      {{"inspect", "--gpus"}, "--gpus needs a value"},
      {{"inspect", "--gpus", "x"}, "--gpus: expected an integer from 1 to 65536, got 'x'"},
      {{"inspect", "--gpus", "0"}, "--gpus: expected an integer from 1 to"},
      {{"inspect", "--context=-5"}, "--context: expected an integer from 1 to"},
      {{"inspect", "--bin-width", "12k"}, "--bin-width: expected an integer from 1 to"},
      {{"inspect", "--json=yes"}, "--json takes no value"},
      {{"inspect", "--json", "--json"}, "given twice"},
      {{"inspect", "stray"}, "unexpected argument 'stray'"},
      {{"inspect", "--profile", "no-such-profile"}, "no-such-profile: no such file"},
      {{"inspect", "--lengths", "/nonexistent/lengths.txt"}, "/nonexistent/lengths.txt: no such file"},
      {{"inspect", "--gpus", "1"}, "no scheme fits a cluster of 1 GPUs"},
      {{"plan"}, "--strategies or --propose is required"},
      {{"plan", "--strategies", "1*tp3pp1"}, "no usable scheme tp3pp1"},
      {{"plan", "--strategies", "4*tp16pp1", "--gpus", "32"}, "needs 64 GPUs"},
      {{"plan", "--strategies", "4*tp16pp1", "--profile", "llama2-32b", "--tokens", "0"}, "--tokens"},
      {{"plan", "--strategies", "4**tp16pp1"}, "cannot parse"},
      {{"plan", "--strategies", "4*tp16pp1", "--profile", "llama2-32b", "--seed", "-1"},
       "--seed: expected an integer from 0 to"},
  };
  sluice::test::check_bad_input(cases);
}

TEST_CASE("cli: the progress bar draws on a terminal once its delay has passed and erases itself") {
  std::ostringstream terminal;
  terminal << std::setprecision(3);
  {
    sluice::cli::Progress progress(&terminal, "simulate", 4, std::chrono::milliseconds(0));
    progress.advance(2);
    CHECK(terminal.str() == "\rsimulate [###############...............] 2/4  0 s");
  }
  CHECK(terminal.str() == "\rsimulate [###############...............] 2/4  0 s\r\033[K");
  CHECK(terminal.precision() == 3);

  std::ostringstream short_run;
  {
    sluice::cli::Progress progress(&short_run, "plan", 4);  // the default delay: a second
    progress.advance(4);
  }
  CHECK(short_run.str().empty());
}

TEST_CASE("cli: profiles whose stage times overflow or vanish are bad input in plan, schedule, simulate and trace") {
  // Found by fuzzing: a = 1e300 crashed plan (SIGSEGV) and hung schedule; coefficients of 1e-20 gave an internal
  // error ("send ... comes before the forward") in schedule and simulate.
  const auto dir = std::filesystem::temp_directory_path() / "sluice_test_cli_extreme_profiles";
  std::filesystem::create_directories(dir);
  const std::string huge = profile_with_latency(dir / "huge.json", 1e300, 1e-4, 1e-2);
  const std::string tiny = profile_with_latency(dir / "tiny.json", 1e-20, 1e-20, 1e-20);
  for (const auto& [profile, fragment] : {std::pair{huge, std::string_view(" s is above 1e+06 s")},
                                          std::pair{tiny, std::string_view("is below 1e-09 s")}}) {
    CAPTURE(profile);
    const std::string_view path = profile;
    expect_error({"plan", "--profile", path, "--strategies", "1*tp8pp2", "--iterations", "1"}, fragment);
    expect_error({"schedule", "--profile", path, "--stages", "2"}, fragment);
    expect_error({"simulate", "--profile", path, "--iterations", "1"}, fragment);
    expect_error({"trace", "--profile", path}, fragment);
    expect_error({"inspect", "--profile", path}, "profile llama2-7b: tp1pp2: latency T(");
  }
  // Extreme but valid: a vanishing activation constant lets 2^59 tokens fit, and T stays in range. schedule's
  // baselines once cast the tokens that fit a micro-batch (about 1e300) to an integer.
  sluice::io::json document = sluice::io::read_json_file(profile_with_latency(dir / "roomy.json", 0, 1e-13, 1e-2));
  for (auto& constant : document.at("memory").at("activation_bytes")) constant = 1e-300;
  sluice::io::write_text_file(dir / "roomy.json", document.dump());
  const std::string roomy = (dir / "roomy.json").string();
  const auto result = run_cli({"schedule", "--profile", roomy, "--stages", "2", "--tokens", "20000"});
  CHECK(result.code == 0);
  CHECK(result.err.empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("cli: --bandwidth and --latency are bounded to physical links in schedule, simulate and trace") {
  // Found by fuzzing: the documented minimum --bandwidth 1e-9 (1 byte/s) and --latency 1e6 made transfers of
  // months, and the simulator's own validator rejected its schedule. The options now take 1 MB/s to 10 TB/s and
  // up to one second.
  for (const std::string_view command : {"schedule", "simulate", "trace"}) {
    std::vector<std::string_view> args = {command};
    if (command == "schedule") args.insert(args.end(), {"--stages", "2"});
    auto with = [&](std::string_view option, std::string_view value) {
      std::vector<std::string_view> full = args;
      full.insert(full.end(), {option, value});
      return full;
    };
    expect_error(with("--bandwidth", "1e-9"), "option --bandwidth: expected a number from 0.001 to 10000");
    expect_error(with("--bandwidth", "20000"), "option --bandwidth");
    expect_error(with("--latency", "1e6"), "option --latency: expected a number from 0 to 1, got '1e6'");
    expect_error(with("--latency", "-1"), "option --latency");
  }
  // The slowest link allowed still plans, and its schedule passes the simulator's validator.
  const auto slow =
      run_cli({"schedule", "--stages", "4", "--tokens", "20000", "--bandwidth", "0.001", "--latency", "1"});
  CHECK(slow.code == 0);
  CHECK(slow.err.empty());
}
