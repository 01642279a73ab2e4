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
                               "--context", "16384", "--relaxed", "--step", "0.5", "--length-step", "1024",
                               "--candidates", "4", "--eq2-cost", "--no-fill"});
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
  const auto from_file =
      run_cli({"plan", "--strategies", path_text, "--profile", "llama2-32b", "--gpus", "64", "--lengths",
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
      {{"propose", "--context", "64"},
       "--context 64 is shorter than the length grid's step 128 that strategies are proposed on"},
      {{"propose", "--tokens", "0"}, "--tokens: expected an integer from 1 to"},
      {{"propose", "--candidates", "-1"}, "--candidates: expected an integer from 1 to"},
      {{"propose", "--relaxed=1"}, "--relaxed takes no value"},
      {{"propose", "--profile", "llama2-32b", "--gpus", "64", "--context", "40000"},
       "no scheme of llama2-32b on 64 GPUs holds 40000 tokens with TP within a node (try --cross-node-tp); CP 2 "
       "holds it (try --cp 2 or --cp auto)"},
      {{"plan", "--propose", "--strategies", "4*tp16pp1"}, "--strategies and --propose cannot be combined"},
      {{"plan"}, "--strategies or --propose is required"},
  };
  sluice::test::check_bad_input(cases);
}

TEST_CASE("cli: propose --sampled chooses by planned time; plan takes its document") {
  // Small and quick: 13 batches of 20K tokens on 8 GPUs.
  const std::vector<std::string_view> base = {
      "propose",      "--sampled", "--gpus",    "8", "--context",  "8192", "--length-step", "512", "--tokens", "20000",
      "--candidates", "3",         "--batches", "8", "--held-out", "5",    "--trials",      "2",   "--seed",   "3"};
  const auto text = run_cli(base);
  REQUIRE(text.code == 0);
  CHECK(text.err.empty());
  CHECK(text.out.find("chosen on 8, measured on the next 5 (seed 3, 2 dispatch trials per plan)") != std::string::npos);
  CHECK(text.out.find("sampled set") != std::string::npos);
  CHECK(text.out.find("the DP's") != std::string::npos);
  CHECK(text.out.find("best homogeneous, ") != std::string::npos);

  std::vector<std::string_view> json_args = base;
  json_args.push_back("--json");
  const auto json = run_cli(json_args);
  REQUIRE(json.code == 0);
  const auto document = sluice::io::json::parse(json.out);
  CHECK(document.at("format") == "sluice.sampled_proposal");
  const auto result = sluice::io::from_document<sluice::proposal::SampledProposal>(document);
  CHECK(result.choosing_batches == 8);
  CHECK(result.held_out_batches == 5);
  CHECK(result.seed == 3);
  CHECK(result.trials == 2);
  CHECK(result.candidates.size() <= 3);
  CHECK(result.choosing_mean <= result.paper_choosing_mean);

  const auto path = std::filesystem::temp_directory_path() / "sluice_test_cli_sampled.json";
  {
    std::ofstream file(path);
    file << json.out;
  }
  const std::string path_text = path.string();
  const auto planned = run_cli({"plan", "--strategies", path_text, "--gpus", "8", "--context", "8192", "--tokens",
                                "20000", "--iterations", "1", "--trials", "2", "--json"});
  std::filesystem::remove(path);
  REQUIRE(planned.code == 0);
  CHECK(sluice::io::json::parse(planned.out).at("candidates").at("strategies").get<std::vector<sluice::Strategy>>() ==
        result.strategies());

  const std::vector<sluice::test::BadInput> cases = {
      {{"propose", "--batches", "4"}, "option --batches needs --sampled"},
      {{"propose", "--seed", "1"}, "option --seed needs --sampled"},
      {{"propose", "--sampled", "--batches", "0"}, "--batches: expected an integer from 1 to 1024"},
      {{"propose", "--sampled", "--held-out", "1025"}, "--held-out: expected an integer from 1 to 1024"},
      {{"propose", "--sampled", "--candidates", "65"}, "max_candidates must be in [1, 64], got 65"},
  };
  sluice::test::check_bad_input(cases);
}

TEST_CASE("cli: --cp auto takes the CP degrees the context needs; without --cp the error names them") {
  // LLaMA-2 7B on 32 GPUs: no ⟨TP, PP⟩ scheme within a node holds 128K tokens, CP 2 does.
  const auto none = run_cli({"propose", "--gpus", "32", "--context", "131072"});
  CHECK(none.code == 2);
  CHECK(none.err.find("no scheme of llama2-7b on 32 GPUs holds 131072 tokens with TP within a node (try "
                      "--cross-node-tp); CP 2 holds it (try --cp 2 or --cp auto)") != std::string::npos);
  const auto plan = run_cli({"plan", "--propose", "--gpus", "32", "--context", "131072", "--iterations", "1"});
  CHECK(plan.code == 2);
  CHECK(plan.err.find("; CP 2 holds it (try --cp 2 or --cp auto)") != std::string::npos);
  for (const std::string_view command : {"simulate", "trace"}) {
    const auto result = run_cli({command, "--gpus", "32", "--context", "131072"});
    CHECK(result.code == 2);
    CHECK(result.err.find("no scheme of llama2-7b on 32 GPUs holds 131072 tokens with TP within a node (try "
                          "--cross-node-tp); CP 2 holds it (try --cp 2 or --cp auto)") != std::string::npos);
  }
  const auto automatic = run_cli({"propose", "--gpus", "32", "--context", "131072", "--cp", "auto", "--json"});
  REQUIRE(automatic.code == 0);
  const auto document = sluice::io::json::parse(automatic.out);
  bool context_parallel = false;
  for (const auto& candidate : document.at("candidates"))
    context_parallel = context_parallel || candidate.at("name").get<std::string>().find("cp2") != std::string::npos;
  CHECK(context_parallel);
  // The same as naming the degree, with both kinds; with --cp-kinds, that kind alone.
  CHECK(automatic.out ==
        run_cli({"propose", "--gpus", "32", "--context", "131072", "--cp", "2", "--cp-kinds", "ring,ulysses", "--json"})
            .out);
  CHECK(
      run_cli({"propose", "--gpus", "32", "--context", "131072", "--cp", "auto", "--cp-kinds", "ring", "--json"}).out ==
      run_cli({"propose", "--gpus", "32", "--context", "131072", "--cp", "2", "--json"}).out);
  // A context no degree holds is bad input naming the option.
  const auto past = run_cli({"propose", "--gpus", "32", "--context", "1048576", "--cp", "auto"});
  CHECK(past.code == 2);
  CHECK(past.err.find("option --cp auto: no CP degree up to 32 GPUs holds the context 1048576") != std::string::npos);
}
