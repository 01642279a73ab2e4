#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli_harness.hpp"
#include "sluice/io/proposal_json.hpp"

using sluice::test::run_cli;

TEST_CASE("cli: propose --json is one sluice.proposal document") {
  const auto result = run_cli({"propose", "--profile", "llama2-32b", "--gpus", "64", "--lengths", "cpython-stdlib",
                           "--length-step", "1024", "--tokens", "200000", "--cross-node-tp", "--json"});
  REQUIRE(result.code == 0);
  CHECK(result.err.empty());
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("format") == "sluice.proposal");
  const auto proposal = sluice::io::from_document<sluice::proposal::Proposal>(document);
  // Default Lmax: the longest usable MaxLen (tp16pp1 on 64 GPUs), shorter than the longest sequence.
  CHECK(*proposal.options.max_len == 43520);
  CHECK(proposal.options.length_step == 1024);
  CHECK(!proposal.options.tp_within_node);
  CHECK(!proposal.candidates.empty());
  CHECK(proposal.candidates.size() <= 8);
  CHECK(!proposal.relaxed_optimum.has_value());
}

TEST_CASE("cli: propose prints a table, relaxed with a fractional step") {
  const auto result = run_cli({"propose", "--profile", "llama2-32b", "--gpus", "64", "--lengths", "cpython-stdlib",
                           "--context", "16384", "--relaxed", "--step", "0.5", "--length-step", "1024", "--candidates",
                           "4", "--eq2-cost", "--no-fill"});
  REQUIRE(result.code == 0);
  CHECK(result.out.find("relaxed optimum") != std::string::npos);
  CHECK(result.out.find("4 candidates of") != std::string::npos);
  CHECK(result.out.find("sequences truncated") != std::string::npos);
  const auto help = run_cli({"propose", "--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("--relaxed") != std::string::npos);
  CHECK(run_cli({"--help"}).out.find("propose") != std::string::npos);
}

TEST_CASE("cli: plan takes a proposal, from a file or with --propose") {
  const auto proposed = run_cli({"propose", "--profile", "llama2-32b", "--gpus", "64", "--lengths", "cpython-stdlib",
                             "--length-step", "1024", "--tokens", "200000", "--json"});
  REQUIRE(proposed.code == 0);
  const auto path = std::filesystem::temp_directory_path() / "sluice_test_cli_propose.json";
  {
    std::ofstream file(path);
    file << proposed.out;
  }
  const std::string path_text = path.string();
  const auto from_file = run_cli({"plan", "--strategies", path_text, "--profile", "llama2-32b", "--gpus", "64", "--lengths",
                              "cpython-stdlib", "--tokens", "200000", "--iterations", "2", "--trials", "4", "--json"});
  std::filesystem::remove(path);
  REQUIRE(from_file.code == 0);
  const auto proposal = sluice::io::from_document<sluice::proposal::Proposal>(sluice::io::json::parse(proposed.out));
  const auto plan_run = sluice::io::json::parse(from_file.out);
  CHECK(plan_run.at("candidates").at("strategies").get<std::vector<sluice::Strategy>>() == proposal.strategies());

  const auto direct = run_cli({"plan", "--propose", "--profile", "llama2-32b", "--gpus", "64", "--lengths",
                           "cpython-stdlib", "--tokens", "200000", "--iterations", "2", "--trials", "4", "--json"});
  REQUIRE(direct.code == 0);
  CHECK(sluice::io::json::parse(direct.out).at("iterations").size() == 2);
}

TEST_CASE("cli: propose and plan --propose reject bad input with exit 2 and one line") {
  const std::vector<sluice::test::BadInput> cases = {
      {{"propose", "--bogus"}, "unknown option --bogus"},
      {{"propose", "--gpus", "0"}, "--gpus: expected an integer from 1 to"},
      {{"propose", "--step", "0"}, "option --step: expected a positive number of GPUs"},
      {{"propose", "--step", "0.15"}, "option --step: expected a positive number of GPUs"},
      {{"propose", "--step", "abc"}, "got 'abc'"},
      {{"propose", "--step", "1.5"}, "gpu_step must be whole GPUs"},
      {{"propose", "--relaxed", "--step", "0.3"}, "or 1, 2 or 5 tenths when relaxed, got 3"},
      {{"propose", "--context", "64"}, "max_len must be >= length_step = 128"},
      {{"propose", "--tokens", "0"}, "--tokens: expected an integer from 1 to"},
      {{"propose", "--candidates", "-1"}, "--candidates: expected an integer from 1 to"},
      {{"propose", "--relaxed=1"}, "--relaxed takes no value"},
      {{"propose", "--profile", "llama2-32b", "--gpus", "64", "--context", "40000"},
       "exceeds the longest MaxLen of a usable scheme (27904, tp8pp4)"},
      {{"plan", "--propose", "--strategies", "4*tp16pp1"}, "--strategies and --propose cannot be combined"},
      {{"plan"}, "--strategies or --propose is required"},
  };
  sluice::test::check_bad_input(cases);
}
