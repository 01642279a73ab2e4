#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cli_harness.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/shard/check.hpp"

using sluice::test::run_cli;

TEST_CASE("cli: shard prints the cost of each phase") {
  const auto result = run_cli({"shard", "--gpus", "64", "--strategy", "1*tp16pp1+6*tp8pp1", "--model", "llama2-32b"});
  CHECK(result.code == 0);
  CHECK(result.err.empty());
  CHECK(result.out.find("1*tp16pp1+6*tp8pp1 on 64 GPUs") != std::string::npos);
  CHECK(result.out.find("LLaMA-32B (60 layers") != std::string::npos);
  CHECK(result.out.find("mutual slices: pull 64, push 448") != std::string::npos);
  CHECK(result.out.find("reduce-scatter") != std::string::npos);
  CHECK(result.out.find("fully sharded") != std::string::npos);
}

TEST_CASE("cli: shard --json is one parseable document whose plans validate") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "sluice_test_cli_shard";
  std::filesystem::create_directories(dir);
  const sluice::shard::Model model{"tiny", 3, {{"w", 40}, {"v", 9}}, 2, 4};
  const std::string model_path = (dir / "model.json").string();
  sluice::io::write_document(model_path, model);
  const std::string strategy_path = (dir / "strategy.json").string();
  sluice::io::write_document(strategy_path, sluice::Strategy::parse("1*tp4pp1+2*tp2pp2"));

  const auto result = run_cli({"shard", "--gpus", "16", "--strategy", strategy_path, "--model", model_path,
                               "--gpus-per-node", "4", "--json", "--plans"});
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("format") == "sluice.shard_run");
  CHECK(document.at("gpus") == 16);
  CHECK(document.at("grid") == 4);
  CHECK(document.at("pipelines") == 3);
  CHECK(document.at("model").at("name") == "tiny");
  CHECK(document.at("previous").is_null());
  const auto placement = sluice::io::from_document<sluice::shard::Placement>(document.at("placement"));
  const auto layout = sluice::io::from_document<sluice::shard::OptimizerLayout>(document.at("layout"));
  const auto pull = sluice::io::from_document<sluice::shard::PullPlan>(document.at("pull"));
  const auto push = sluice::io::from_document<sluice::shard::PushPlan>(document.at("push"));
  sluice::shard::validate(pull, placement, layout, model);
  sluice::shard::validate(push, placement, layout, model);
  sluice::shard::check_pull(pull, placement, layout, model, 1);
  sluice::shard::check_push(push, placement, layout, model, 2);
  CHECK(document.at("cost").at("pull").at("bytes").at("local") == pull.local_bytes);

  // Switching from the same strategy: no push LNK crosses a link.
  const auto same = run_cli({"shard", "--gpus", "16", "--strategy", "1*tp4pp1+2*tp2pp2", "--model", model_path,
                             "--previous", "1*tp4pp1+2*tp2pp2", "--json"});
  REQUIRE(same.code == 0);
  const auto switched = sluice::io::json::parse(same.out);
  CHECK(switched.at("push_sends") == 0);
  CHECK(switched.at("previous").at("parts").size() == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("cli: shard help and bad input") {
  const auto help = run_cli({"shard", "--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("--strategy") != std::string::npos);
  CHECK(run_cli({"--help"}).out.find("shard") != std::string::npos);

  const std::vector<sluice::test::BadInput> cases = {
      {{"shard", "--strategy", "1*tp8pp1"}, "option --gpus is required"},
      {{"shard", "--gpus", "8"}, "option --strategy is required"},
      {{"shard", "--gpus", "0", "--strategy", "1*tp8pp1"}, "--gpus: expected an integer from 1 to"},
      {{"shard", "--gpus", "8", "--strategy", "2*tp8pp1"}, "needs 16 GPUs but the cluster has 8"},
      {{"shard", "--gpus", "8", "--strategy", "1*tq8pp1"}, "cannot parse 'tq8pp1'"},
      {{"shard", "--gpus", "8", "--strategy", "1*tp8pp1", "--model", "no-such-model"}, "no-such-model: no such file"},
      {{"shard", "--gpus", "64", "--strategy", "1*tp1pp64"}, "more stages than the 32 layers"},
      {{"shard", "--gpus", "12", "--strategy", "4*tp3pp1", "--gpus-per-node", "4"}, "does not fit 12 GPUs keeping TP"},
      {{"shard", "--gpus", "8", "--strategy", "1*tp8pp1", "--gpus-per-node", "16"}, "--gpus-per-node: 16 exceeds"},
      {{"shard", "--gpus", "8", "--strategy", "1*tp8pp1", "--plans"}, "--plans needs --json"},
      {{"shard", "--gpus", "8", "--strategy", "1*tp8pp1", "--previous", "2*tp8pp1"}, "needs 16 GPUs"},
      {{"shard", "--gpus", "8", "--strategy", "1*tp8pp1", "--bogus"}, "unknown option --bogus"},
      {{"shard", "--gpus", "16385", "--strategy", "1*tp8pp1"},
       "--gpus: 16385 exceeds the shard planner's maximum of 16384"},
      {{"shard", "--gpus", "16384", "--strategy", "16384*tp1pp1"},
       "the plan would cut 268435456 pieces (before merging), more than the maximum 67108864"},
  };
  sluice::test::check_bad_input(cases);
}
