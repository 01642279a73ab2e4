#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli_harness.hpp"
#include "xml_check.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/schedule/deadlock.hpp"

using sluice::test::run_cli;

TEST_CASE("cli: schedule prints the replicas and the baselines") {
  const auto result = run_cli({"schedule", "--stages", "4", "--replicas", "2", "--tokens", "65536"});
  CHECK(result.code == 0);
  CHECK(result.err.empty());
  CHECK(result.out.find("llama2-7b tp1pp4, 2 replicas, cyclic") != std::string::npos);
  CHECK(result.out.find("DP (DynaPipe)") != std::string::npos);
  CHECK(result.out.find("token-based") != std::string::npos);
  CHECK(result.out.find("fixed-length packing") != std::string::npos);
}

TEST_CASE("cli: schedule --json is one document whose execution plans finish; --trace and --svg draw the replicas") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "sluice_test_cli_schedule";
  std::filesystem::create_directories(dir);
  const std::string trace = (dir / "trace.json").string();
  const std::string svg = (dir / "timeline.svg").string();
  const auto result = run_cli({"schedule", "--stages", "2", "--replicas", "3", "--schedule", "1f1b", "--tokens",
                               "40000", "--lengths", "cpython-stdlib", "--json", "--trace", trace, "--svg", svg});
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("format") == "sluice.schedule_run");
  CHECK(document.at("schedule") == "1f1b");
  REQUIRE(document.at("replica_schedules").size() == 3);
  double slowest = 0;
  for (const auto& replica : document.at("replica_schedules")) {
    if (replica.at("micro_batches").empty()) continue;
    CHECK(replica.at("kind") == "1f1b");
    const auto plan = sluice::io::from_document<sluice::schedule::ExecutionPlan>(replica.at("plan"));
    CHECK(plan.stages == 2);
    CHECK(sluice::schedule::check_deadlock(plan).ok());
    slowest = std::max(slowest, replica.at("makespan").get<double>());
  }
  CHECK(document.at("makespan").get<double>() == slowest);
  CHECK(document.at("baselines").size() == 2);
  const auto events = sluice::io::read_json_file(trace).at("traceEvents");
  CHECK(events.size() > 10);
  const std::string picture = sluice::io::read_text_file(svg);
  CHECK(sluice::test::xml_problem(picture) == "");
  CHECK(sluice::test::text_outside(picture) == "");
  CHECK(picture.find("replica 0, stage 1") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("cli: schedule help and bad input") {
  const auto help = run_cli({"schedule", "--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("--stages") != std::string::npos);
  CHECK(run_cli({"--help"}).out.find("schedule") != std::string::npos);

  std::vector<sluice::test::BadInput> cases = {
      {{"schedule"}, "option --stages is required"},
      {{"schedule", "--stages", "0"}, "--stages: expected an integer from 1 to"},
      {{"schedule", "--stages", "3"}, "tp1pp3"},
      {{"schedule", "--stages", "4", "--schedule", "gpipe"}, "expected cyclic or 1f1b"},
      {{"schedule", "--stages", "4", "--layout", "fixed_rows"}, "expected padded or packed"},
      {{"schedule", "--stages", "4", "--layout", "rows"}, "expected padded, packed or fixed_rows"},
      {{"schedule", "--stages", "4", "--interval", "-1"}, "--interval: expected a number from 0 to 1"},
      {{"schedule", "--stages", "4", "--bandwidth", "fast"}, "--bandwidth: expected a number"},
      {{"schedule", "--stages", "4", "--lengths", "no-such-lengths"}, "no-such-lengths"},
      {{"schedule", "--stages", "4", "--tokens", "-5"}, "--tokens: expected an integer from 1 to"},
      {{"schedule", "--stages", "4", "--bogus"}, "unknown option --bogus"},
  };
  // A sequence longer than the scheme can hold at all: no partition exists.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "sluice_test_cli_schedule_bad";
  std::filesystem::create_directories(dir);
  const std::string lengths = (dir / "long.txt").string();
  sluice::io::write_text_file(lengths, "1048576\n");
  const std::string context = "1048576";
  cases.push_back({{"schedule", "--stages", "4", "--lengths", lengths, "--context", context}, "alone needs"});
  sluice::test::check_bad_input(cases);
  std::filesystem::remove_all(dir);
}
