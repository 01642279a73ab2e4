// sluice plan --batch (a trainer's own batch, planned as it is), the rank placement in plan --json, and the one
// rule for --context's default across propose, plan, simulate and trace.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli_harness.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/plan_run_json.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/io/strategy_pool.hpp"
#include "sluice/shard/ranks.hpp"

using sluice::Strategy;
using sluice::StrategyPart;
using sluice::test::BadInput;
using sluice::test::run_cli;

namespace {

const std::string_view candidates = "4*tp4pp1,1*tp4pp1+1*tp2pp1+5*tp1pp2";

struct TempFile {
  std::filesystem::path path;
  std::string name = path.string();  // kept: the commands' arguments are views of it
  TempFile(std::string_view file, std::string_view content)
      : path(std::filesystem::temp_directory_path() / ("sluice_test_cli_plan_" + std::string(file))) {
    std::ofstream(path, std::ios::binary) << content;
  }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  [[nodiscard]] const std::string& text() const { return name; }
};

// Replaces std::cin's buffer while alive.
struct StandardInput {
  std::istringstream content;
  std::streambuf* saved;
  explicit StandardInput(const std::string& text) : content(text), saved(std::cin.rdbuf(content.rdbuf())) {}
  ~StandardInput() { std::cin.rdbuf(saved); }
  StandardInput(const StandardInput&) = delete;
  StandardInput& operator=(const StandardInput&) = delete;
};

// Every sequence id of a plan_run iteration's plan, with the tokens of its micro-batches.
std::multiset<std::int64_t> planned_ids(const sluice::io::json& iteration) {
  std::multiset<std::int64_t> ids;
  for (const auto& pipeline : iteration.at("plan").at("pipelines"))
    for (const auto& micro_batch : pipeline.at("micro_batches"))
      for (const auto& id : micro_batch.at("sequences")) ids.insert(id.get<std::int64_t>());
  return ids;
}

}  // namespace

TEST_CASE("cli: plan --batch plans exactly the given batch, once, with its ids") {
  const TempFile objects("objects.json", R"([{"id": 70, "length": 9000}, {"id": 3, "length": 12}, {"length": 400},
                                             {"id": 11, "length": 30000}])");
  const auto result = run_cli({"plan", "--strategies", candidates, "--batch", objects.text(), "--json"});
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("batch") == objects.text());
  REQUIRE(document.at("iterations").size() == 1);
  const auto& iteration = document.at("iterations")[0];
  CHECK(iteration.at("sequences") == 4);
  CHECK(iteration.at("tokens") == 9000 + 12 + 400 + 30000);
  // The entry without an id gets its position, 2.
  CHECK(planned_ids(iteration) == std::multiset<std::int64_t>{2, 3, 11, 70});

  // The same lengths as text (ids are positions) and from standard input as a JSON array: one plan each.
  const TempFile text("lengths.txt", "# a trainer's batch\n9000\n12\n400\n30000\n");
  const auto from_text = run_cli({"plan", "--strategies", candidates, "--batch", text.text(), "--json"});
  REQUIRE(from_text.code == 0);
  const auto text_iteration = sluice::io::json::parse(from_text.out).at("iterations")[0];
  CHECK(planned_ids(text_iteration) == std::multiset<std::int64_t>{0, 1, 2, 3});
  CHECK(text_iteration.at("estimate") == iteration.at("estimate"));
  StandardInput input("[9000, 12, 400, 30000]");
  const auto from_stdin = run_cli({"plan", "--strategies", candidates, "--batch", "-", "--json"});
  REQUIRE(from_stdin.code == 0);
  CHECK(sluice::io::json::parse(from_stdin.out).at("iterations")[0].at("plan") == text_iteration.at("plan"));
}

TEST_CASE("cli: plan --json places a CP scheme before narrower stages; simulate --batch names the batch it ran") {
  // tp1cp4ringpp1's stages (4 GPUs) are wider than tp2pp1's, so the placement puts it first of the two, though the
  // strategy lists schemes by TP: its rank placement must still validate.
  const TempFile batch("batch.txt", "12000\n900\n3100\n250\n7000\n");
  const auto planned = run_cli({"plan", "--gpus", "16", "--strategies", "1*tp8pp1+2*tp2pp1+1*tp1cp4ringpp1", "--cp",
                                "4", "--context", "16384", "--batch", batch.text(), "--json"});
  REQUIRE(planned.code == 0);
  const auto document = sluice::io::json::parse(planned.out);
  const auto& pipelines = document.at("iterations")[0].at("placement").at("pipelines");
  REQUIRE(pipelines.size() == 4);
  for (const auto& pipeline : pipelines) {
    CAPTURE(pipeline.dump());
    const bool cp = pipeline.contains("cp");
    const int index = pipeline.at("index").get<int>();
    CHECK(pipeline.at("placement_index").get<int>() == (pipeline.at("tp") == 8 ? 0 : cp ? 1 : index));
    if (cp) CHECK(pipeline.at("stages")[0].at("ranks") == sluice::io::json({8, 9, 10, 11}));
  }

  const auto simulated =
      run_cli({"simulate", "--gpus", "16", "--context", "16384", "--trials", "2", "--batch", batch.text()});
  REQUIRE(simulated.code == 0);
  CHECK(simulated.out.find("; the given batch of 5 sequences, 23250 tokens (seed 0)") != std::string::npos);
}

TEST_CASE("cli: plan, simulate and trace refuse a bad --batch with one line naming it") {
  const TempFile empty("empty.txt", "# nothing\n");
  const TempFile zero("zero.json", "[100, 0]");
  const TempFile negative("negative.txt", "100\n-5\n");
  const TempFile fraction("fraction.json", "[100, 2.5]");
  const TempFile nan("nan.txt", "nan\n");
  const TempFile duplicate("duplicate.json", R"([{"id": 4, "length": 10}, {"id": 4, "length": 20}])");
  const TempFile malformed("malformed.json", "[100, 200");
  const TempFile too_long("too_long.txt", "100\n50000\n");
  const TempFile unknown("unknown.json", R"([{"id": 1, "len": 10}])");
  std::string many = "[";
  for (std::size_t i = 0; i <= (std::size_t{1} << 20); ++i) many += i == 0 ? "1" : ",1";
  many += "]";
  const TempFile too_many("too_many.json", many);
  const std::vector<BadInput> cases = {
      {{"plan", "--strategies", candidates, "--batch", empty.text()}, "empty.txt: no lengths"},
      {{"plan", "--strategies", candidates, "--batch", zero.text()}, "entry 1: length must be >= 1, got 0"},
      {{"plan", "--strategies", candidates, "--batch", negative.text()}, "negative.txt"},
      {{"plan", "--strategies", candidates, "--batch", fraction.text()}, "entry 1: length must be an integer"},
      {{"plan", "--strategies", candidates, "--batch", nan.text()}, "nan.txt"},
      {{"plan", "--strategies", candidates, "--batch", duplicate.text()}, "entry 1: duplicate id 4"},
      {{"plan", "--strategies", candidates, "--batch", malformed.text()}, "malformed.json: not valid JSON"},
      {{"plan", "--strategies", candidates, "--batch", unknown.text()}, "unknown field 'len'"},
      {{"plan", "--strategies", candidates, "--batch", too_long.text()},
       "sequence 1 has length 50000, longer than any candidate holds (widest MaxLen 44160)"},
      {{"plan", "--strategies", candidates, "--batch", too_many.text()}, "more than the limit of 1048576"},
      {{"plan", "--strategies", candidates, "--batch", "/nonexistent/batch.txt"}, "/nonexistent/batch.txt"},
      {{"plan", "--strategies", candidates, "--batch", zero.text(), "--iterations", "2"},
       "--batch and --iterations cannot be combined"},
      {{"simulate", "--batch", zero.text()}, "entry 1: length must be >= 1"},
      {{"simulate", "--batch", too_long.text(), "--context", "40000"}, "longer than the context 40000"},
      {{"trace", "--batch", duplicate.text()}, "duplicate id 4"},
      {{"trace", "--batch", zero.text(), "--iteration", "1"}, "--batch and --iteration cannot be combined"},
  };
  sluice::test::check_bad_input(cases);
}

TEST_CASE("cli: simulate and trace --batch run the given batch") {
  const TempFile batch("run.json", R"([{"id": 900, "length": 20000}, {"id": 5, "length": 700}, 300])");
  const auto simulated = run_cli({"simulate", "--batch", batch.text(), "--trials", "2", "--json"});
  REQUIRE(simulated.code == 0);
  const auto document = sluice::io::json::parse(simulated.out);
  REQUIRE(document.at("batches").size() == 1);
  CHECK(document.at("batches")[0].at("sequences") == 3);
  CHECK(document.at("batches")[0].at("tokens") == 21000);
  // 20000 tokens on llama2-7b's 16 GPUs: the sequence's trip through its fastest pipeline bounds the batch.
  const auto& bound = document.at("batches")[0].at("lower_bound");
  CHECK(bound.at("seconds") == bound.at("critical_path_seconds"));
  CHECK(bound.at("seconds").get<double>() <= document.at("systems")[7].at("iterations")[0].at("seconds").get<double>());
  const auto traced = run_cli({"trace", "--batch", batch.text(), "--trials", "2", "--json"});
  REQUIRE(traced.code == 0);
  const auto trace = sluice::io::json::parse(traced.out);
  CHECK(trace.at("tokens") == 21000);
  CHECK(planned_ids(trace) == std::multiset<std::int64_t>{2, 5, 900});
}

TEST_CASE("cli: plan --json gives each iteration the chosen strategy's ranks and process groups") {
  const auto result = run_cli({"plan", "--strategies", candidates, "--iterations", "3", "--tokens", "30000", "--json"});
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  const sluice::cost::Profile profile = sluice::io::read_document<sluice::cost::Profile>(
      sluice::io::resolve_data_file(std::string(sluice::io::default_profile), "profiles"));
  for (const auto& iteration : document.at("iterations")) {
    const auto& placement = iteration.at("placement");
    const auto ranks = placement.get<sluice::shard::RankPlacement>();
    const auto strategy = sluice::Strategy::parse(iteration.at("strategy").get<std::string>());
    sluice::shard::validate(ranks, strategy, profile);
    // Plan pipeline j runs on placement pipeline j's ranks, with the plan's scheme.
    const auto& pipelines = iteration.at("plan").at("pipelines");
    REQUIRE(placement.at("pipelines").size() == pipelines.size());
    for (std::size_t j = 0; j < pipelines.size(); ++j) {
      CHECK(placement.at("pipelines")[j].at("index") == j);
      CHECK(placement.at("pipelines")[j].at("tp") == pipelines[j].at("tp"));
      CHECK(placement.at("pipelines")[j].at("pp") == pipelines[j].at("pp"));
    }
    // Every one of the 16 GPUs is in exactly one TP group: the candidates use the whole cluster.
    std::multiset<int> used;
    for (const auto& group : placement.at("groups").at("tp"))
      for (const auto& rank : group) used.insert(rank.get<int>());
    CHECK(used.size() == 16);
    CHECK(std::set<int>(used.begin(), used.end()).size() == 16);
  }
}

TEST_CASE("cli: --context defaults by one rule in propose, plan, simulate and trace") {
  // No candidates: the longest MaxLen of a usable scheme (84,224), shorter than the longest sequence.
  const auto proposed = run_cli({"propose", "--tokens", "20000", "--json"});
  REQUIRE(proposed.code == 0);
  const auto proposal = sluice::io::json::parse(proposed.out);
  CHECK(proposal.at("options").at("max_len") == 84224);
  for (const std::vector<std::string_view>& args :
       {std::vector<std::string_view>{"simulate", "--iterations", "1", "--tokens", "20000", "--trials", "2", "--json"},
        std::vector<std::string_view>{"trace", "--tokens", "20000", "--trials", "2", "--json"},
        std::vector<std::string_view>{"plan", "--propose", "--iterations", "1", "--tokens", "20000", "--json"}}) {
    CAPTURE(args.front());
    const auto result = run_cli(args);
    REQUIRE(result.code == 0);
    CHECK(sluice::io::json::parse(result.out).at("context") == 84224);
  }
  // Given candidates: the longest MaxLen among them (4*tp4pp1's and tp1pp2's pipelines hold 44,160 at most).
  const auto planned =
      run_cli({"plan", "--strategies", candidates, "--iterations", "1", "--tokens", "20000", "--json"});
  REQUIRE(planned.code == 0);
  CHECK(sluice::io::json::parse(planned.out).at("context") == 44160);
  // A proposal file carries its context, here one proposed for 16,384 tokens, into plan and trace.
  const auto short_proposal = run_cli({"propose", "--tokens", "20000", "--context", "16384", "--json"});
  REQUIRE(short_proposal.code == 0);
  const TempFile file("proposal.json", short_proposal.out);
  for (const std::string_view command : {"plan", "trace"}) {
    CAPTURE(command);
    const auto result = run_cli({command, "--strategies", file.text(), "--tokens", "20000", "--trials", "2", "--json"});
    REQUIRE(result.code == 0);
    CHECK(sluice::io::json::parse(result.out).at("context") == 16384);
  }
  // A dataset shorter than every MaxLen: its longest sequence, in every command (schedule's candidate is its scheme).
  std::string lengths;
  for (int i = 1; i <= 200; ++i) lengths += std::to_string(i * 25) + "\n";
  const TempFile short_lengths("short.txt", lengths);
  for (const std::vector<std::string_view>& args :
       {std::vector<std::string_view>{"schedule", "--stages", "2", "--tokens", "20000", "--json"},
        std::vector<std::string_view>{"simulate", "--iterations", "1", "--tokens", "20000", "--trials", "2", "--json"},
        std::vector<std::string_view>{"plan", "--strategies", candidates, "--iterations", "1", "--json"}}) {
    CAPTURE(args.front());
    std::vector<std::string_view> with_lengths = args;
    with_lengths.insert(with_lengths.end(), {"--lengths", short_lengths.text()});
    const auto result = run_cli(with_lengths);
    REQUIRE(result.code == 0);
    CHECK(sluice::io::json::parse(result.out).at("context") == 5000);
  }
  // --context still wins.
  const auto explicit_context = run_cli(
      {"plan", "--strategies", file.text(), "--context", "8192", "--iterations", "1", "--tokens", "20000", "--json"});
  REQUIRE(explicit_context.code == 0);
  CHECK(sluice::io::json::parse(explicit_context.out).at("context") == 8192);
}

TEST_CASE("cli: plan over the CP and AC scheme space: valid plans, CP groups, the version that says so") {
  // LLaMA-2 7B on 16 GPUs, one candidate of each kind and one with recomputation beside a ⟨TP, PP⟩ one.
  const std::string_view wide = "1*tp2cp4ringpp2,2*tp1cp4ulyssespp2,1*tp1cp8hybrid2pp2,2*tp8pp1ac,2*tp8pp1";
  const auto result = run_cli({"plan", "--cp", "4,8", "--cp-kinds", "ring,ulysses,hybrid", "--ac", "--strategies", wide,
                               "--iterations", "2", "--tokens", "60000", "--json"});
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("version") == 6);
  for (const auto& iteration : document.at("iterations")) {
    const Strategy strategy = Strategy::parse(iteration.at("strategy").get<std::string>());
    const auto placement = iteration.at("placement").get<sluice::shard::RankPlacement>();
    for (const auto& pipeline : placement.placement.pipelines)
      for (const auto& stage : pipeline.stages) CHECK(stage.ranks.size() == pipeline.scheme.stage_gpus());
    const bool has_cp =
        std::ranges::any_of(strategy.parts(), [](const StrategyPart& part) { return part.scheme.cp() > 1; });
    CHECK(placement.groups.cp.empty() == !has_cp);
  }
  // Without the space, those schemes are not in the profile; and ⟨TP, PP⟩ plans keep version 5.
  const auto plain = run_cli({"plan", "--strategies", "2*tp8pp1", "--iterations", "1", "--tokens", "20000", "--json"});
  REQUIRE(plain.code == 0);
  CHECK(sluice::io::json::parse(plain.out).at("version") == 5);
  // The same ⟨TP, PP⟩ candidates with the space on: their plans are the same, and the flex CP domains that the space
  // gives ride beside them, in version 6, each iteration's total the faster of the two.
  const auto spaced = run_cli(
      {"plan", "--strategies", "2*tp8pp1", "--iterations", "1", "--tokens", "20000", "--cp", "2,4", "--ac", "--json"});
  REQUIRE(spaced.code == 0);
  const auto with_flex = sluice::io::json::parse(spaced.out);
  const auto without_flex = sluice::io::json::parse(plain.out);
  CHECK(with_flex.at("version") == 6);
  const auto& flexed = with_flex.at("iterations").at(0);
  const auto& candidate = without_flex.at("iterations").at(0);
  for (const char* key : {"plan", "makespan", "layout_move", "placement"}) CHECK(flexed.at(key) == candidate.at(key));
  const auto flex = flexed.at("flex").get<sluice::plan::FlexIteration>();
  CHECK(flexed.at("total").get<double>() == std::min(candidate.at("total").get<double>(), flex.total()));
  CHECK_NOTHROW(sluice::io::from_document<sluice::io::PlanRun>(with_flex));
  // The domain's ranks ride beside its plan, placed as the one CP pipeline of its units; a document that drops or
  // misplaces them is refused.
  const sluice::cost::Profile profile =
      sluice::io::read_profile(sluice::io::resolve_data_file(sluice::io::default_profile, "profiles"));
  CHECK(flexed.at("flex_placement").get<sluice::shard::RankPlacement>() ==
        sluice::shard::flex_domain_ranks(flex.strategy, profile));
  auto dropped = with_flex;
  dropped.at("iterations").at(0).erase("flex_placement");
  CHECK_THROWS_WITH_AS(sluice::io::from_document<sluice::io::PlanRun>(dropped),
                       doctest::Contains("'flex' has no 'flex_placement'"), sluice::invalid_input);
  auto misplaced = with_flex;
  misplaced.at("iterations").at(0).at("flex_placement") = flexed.at("placement");
  CHECK_THROWS_WITH_AS(sluice::io::from_document<sluice::io::PlanRun>(misplaced),
                       doctest::Contains("does not place the domain"), sluice::invalid_input);
}
