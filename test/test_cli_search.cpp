#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cli_harness.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/search_json.hpp"

using sluice::test::one_line;
using sluice::test::run_cli;

TEST_CASE("cli: search on a bundled model and cluster, text") {
  const auto result = run_cli({"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--memory", "16GiB",
                               "--granularity", "64MiB", "--max-batch", "64"});
  CHECK(result.code == 0);
  CHECK(result.err.empty());
  CHECK(result.out.find("bert-huge-32 (32 layers) on titan-8 (8 GPUs), 16.00 GiB per device") != std::string::npos);
  CHECK(result.out.find("best plan (") != std::string::npos);
  CHECK(result.out.find("samples/s") != std::string::npos);
  for (const std::string_view name : {"bmw", "base", "dp+tp", "dp+pp", "sdp"})
    CHECK(result.out.find(name) != std::string::npos);
  // The best batch is the sweep's limit here, and BMW's balanced partition is the even split: both are said.
  CHECK(result.out.find("the best plan's batch is the sweep's limit (--max-batch 64)") != std::string::npos);
  CHECK(result.out.find("(bmw's plan is base's: its balanced partition is the even split base uses)") !=
        std::string::npos);
}

TEST_CASE("cli: search --json is one sluice.search document whose plans validate") {
  const auto result = run_cli({"search", "--model", "t5-large-32", "--cluster", "titan-8", "--memory=12GiB",
                               "--granularity", "64MiB", "--batch", "32", "--json"});
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("format") == "sluice.search");
  CHECK(document.at("model") == "t5-large-32");
  CHECK(document.at("memory_bytes") == 12LL << 30);
  CHECK(document.at("best").at("global_batch") == 32);
  CHECK(document.at("baselines").size() == 6);
  const auto report = sluice::io::from_document<sluice::search::SearchReport>(document);
  const auto model = sluice::io::read_document<sluice::search::ModelSpec>(sluice::io::bundled_data_dir() / "models" /
                                                                          "t5-large-32.json");
  const auto cluster = sluice::io::read_document<sluice::search::ClusterSpec>(sluice::io::bundled_data_dir() /
                                                                              "clusters" / "titan-8.json");
  sluice::search::SearchOptions options;
  options.memory_bytes = 12LL << 30;
  options.granularity_bytes = 64LL << 20;
  options.global_batch = 32;
  sluice::search::validate(report, model, cluster, options);
  // Round trip.
  CHECK(sluice::io::json(report) ==
        sluice::io::json(sluice::io::from_document<sluice::search::SearchReport>(sluice::io::to_document(report))));
  CHECK(sluice::io::json(model) ==
        sluice::io::json(sluice::io::from_document<sluice::search::ModelSpec>(sluice::io::to_document(model))));
}

TEST_CASE("cli: search --help and bad input") {
  const auto help = run_cli({"search", "--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("usage: sluice search") != std::string::npos);
  const std::vector<std::vector<std::string_view>> bad = {
      {"search"},
      {"search", "--model", "bert-huge-32"},
      {"search", "--model", "no-such-model", "--cluster", "titan-8"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--memory", "16XB"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--memory", "0"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--memory", "64GiB"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--memory", "1GiB", "--batch", "8"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--granularity", "1"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--schedule", "zb"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--batch", "0"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--frobnicate"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--dp-types", "zero1"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--dp-types", "ddp,ddp"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--dp-types", ""},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--max-pp", "0"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--split-types", "sp"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--split-types", "tp,ulysses,tp"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--split-types", "ulysses,"},
  };
  for (const auto& args : bad) {
    CAPTURE(args.size());
    const auto result = run_cli(args);
    CHECK(result.code == 2);
    CHECK(one_line(result.err));
    CHECK(result.out.empty());
  }
  const auto missing = run_cli({"search", "--model", "no-such-model", "--cluster", "titan-8"});
  CHECK(missing.err.find("bert-huge-32") != std::string::npos);  // lists the bundled models
  const auto small =
      run_cli({"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--memory", "1GiB", "--batch", "8"});
  CHECK(small.err.find("no strategy fits") != std::string::npos);
  // A malformed model file names the field.
  const auto path = std::filesystem::temp_directory_path() / "sluice-test-bad-model.json";
  sluice::io::write_text_file(path,
                              R"({"format": "sluice.model", "version": 1, "layers": [{"count": 2, "hidden": 64}]})");
  const std::string file = path.string();
  const auto malformed = run_cli({"search", "--model", file, "--cluster", "titan-8"});
  CHECK(malformed.code == 2);
  CHECK(malformed.err.find("heads") != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("cli: search --galvatron on the authors' LLaMA2-7B profiles") {
  const auto result = run_cli({"search", "--model", "llama2-7b", "--galvatron", "llama2-7b", "--memory", "36GiB",
                               "--batch", "16", "--granularity", "64MiB", "--json"});
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("cluster") == "galvatron-1x8");
  CHECK(document.at("memory_bytes") == 36LL << 30);
  CHECK(document.at("best").at("global_batch") == 16);
  // The same profiles given as a directory, and the fixed time mode: a different per-layer time, another estimate.
  const std::string dir = (sluice::io::bundled_data_dir() / "galvatron" / "llama2-7b").string();
  const auto fixed = run_cli({"search", "--model", "llama2-7b", "--galvatron", dir, "--memory", "36GiB", "--batch",
                              "16", "--granularity", "64MiB", "--time-mode", "fixed", "--json"});
  REQUIRE(fixed.code == 0);
  CHECK(sluice::io::json::parse(fixed.out).at("best").at("throughput") != document.at("best").at("throughput"));
  // Galvatron's own plan, costed beside sluice's: within the budget, and no faster by sluice's estimator than the
  // plan sluice finds at its default 16 MiB granularity (a coarser one may round Galvatron's plan out of the budget).
  const std::string plan = dir + "/galvatron_config_llama2-7b_1nodes_8gpus_per_node_36GB_bf16.json";
  const auto both = run_cli({"search", "--model", "llama2-7b", "--galvatron", "llama2-7b", "--memory", "36GiB",
                             "--batch", "16", "--galvatron-plan", plan, "--json"});
  REQUIRE(both.code == 0);
  const auto compared = sluice::io::json::parse(both.out);
  const auto& costed = compared.at("galvatron_plan");
  CHECK(costed.at("fits") == true);
  CHECK(costed.at("plan").at("method") == "galvatron");
  CHECK(costed.at("plan").at("throughput").get<double>() <= compared.at("best").at("throughput").get<double>());
  // Galvatron's zero2 setting (ZeRO-2 in place of DDP), as its plan file names it, and its PP limit.
  const auto zero2 =
      run_cli({"search", "--model", "llama2-7b", "--galvatron", "llama2-7b", "--memory", "36GiB", "--batch", "16",
               "--dp-types", "zero2,zero3", "--max-pp", "2", "--galvatron-plan", plan, "--json"});
  REQUIRE(zero2.code == 0);
  const auto zero2_document = sluice::io::json::parse(zero2.out);
  const auto& zero2_best = zero2_document.at("best");
  CHECK(zero2_best.at("pp").get<int>() <= 2);
  CHECK(zero2_best.at("throughput").get<double>() >= compared.at("best").at("throughput").get<double>());
  bool uses_zero2 = false;
  for (const auto& stage : zero2_best.at("stages"))
    for (const auto& strategy : stage.at("strategies")) {
      CHECK_FALSE(
          (strategy.at("dp").get<int>() > 1 && !strategy.at("sdp").get<bool>() && !strategy.value("zero2", false)));
      uses_zero2 = uses_zero2 || strategy.value("zero2", false);
    }
  CHECK(uses_zero2);
  // Ulysses SP alone in TP's place: a batch of 4 on 8 GPUs must split samples, so some layer runs SP.
  const auto ulysses = run_cli({"search", "--model", "llama2-7b", "--galvatron", "llama2-7b", "--memory", "24GiB",
                                "--batch", "4", "--split-types", "ulysses", "--json"});
  REQUIRE(ulysses.code == 0);
  const auto ulysses_document = sluice::io::json::parse(ulysses.out);
  bool uses_sp = false;
  for (const auto& stage : ulysses_document.at("best").at("stages"))
    for (const auto& strategy : stage.at("strategies")) {
      CHECK(strategy.at("tp") == 1);
      uses_sp = uses_sp || strategy.value("sp", 1) > 1;
    }
  CHECK(uses_sp);
  const auto side = run_cli({"search", "--model", "llama2-7b", "--galvatron", "llama2-7b", "--memory", "36GiB",
                             "--batch", "16", "--granularity", "64MiB", "--galvatron-plan", plan});
  CHECK(side.out.find("  galvatron: ") != std::string::npos);
  CHECK(side.out.find("(Galvatron's plan costed by sluice's estimator: ") != std::string::npos);
  const auto wrong = run_cli({"search", "--model", "gpt-48", "--cluster", "a100-8", "--galvatron-plan", plan});
  CHECK(wrong.code == 2);
  CHECK(wrong.err.find("tp_sizes_enc: expected 48 entries") != std::string::npos);

  // Without --memory, Galvatron's default of 24 GB.
  const auto text =
      run_cli({"search", "--model", "llama2-7b", "--galvatron", "llama2-7b", "--batch", "8", "--granularity", "64MiB"});
  CHECK(text.code == 0);
  CHECK(text.out.find("llama2-7b (32 layers) on galvatron-1x8 (8 GPUs), 24.00 GiB per device") != std::string::npos);

  const std::vector<std::vector<std::string_view>> bad = {
      {"search", "--model", "llama2-7b", "--galvatron", "llama2-7b", "--cluster", "a100-8"},
      {"search", "--model", "llama2-7b", "--cluster", "a100-8", "--time-mode", "batch"},
      {"search", "--model", "llama2-7b", "--galvatron", "llama2-7b", "--time-mode", "hybrid"},
      {"search", "--model", "llama2-7b", "--galvatron", "llama2-7b", "--time-mode", "sequence"},
      {"search", "--model", "llama2-7b", "--galvatron", "no-such-profiles"},
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    CAPTURE(i);
    const auto refused = run_cli(bad[i]);
    CHECK(refused.code == 2);
    CHECK(one_line(refused.err));
    CHECK(refused.out.empty());
  }
  CHECK(run_cli(bad[3]).err.find("1 sequence lengths at batch 1, the time mode needs 3") != std::string::npos);
  CHECK(run_cli(bad[4]).err.find("no-such-profiles: not a directory of Galvatron profiles") != std::string::npos);
}
