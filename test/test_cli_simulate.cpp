// sluice simulate and sluice trace, and the contract every subcommand keeps: --help, --json, exit code 2 with
// one line for bad options.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli_harness.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/trace_run_json.hpp"
#include "xml_check.hpp"

using sluice::test::one_line;
using sluice::test::run_cli;
using sluice::test::xml_problem;

namespace {

// Small enough to stay quick under the sanitizers: three iterations of 40,000 tokens.
const std::vector<std::string_view> small = {"--iterations", "3", "--tokens", "40000", "--trials", "8"};

std::vector<std::string_view> with(std::vector<std::string_view> args, const std::vector<std::string_view>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

TEST_CASE("cli: simulate compares the systems on the bundled data") {
  const auto result = run_cli(with({"simulate"}, small));
  REQUIRE(result.code == 0);
  CHECK(result.err.empty());
  for (const std::string_view name :
       {"megatron", "megatron_cp", "deepspeed", "dynamic_cp", "flexsp", "hotspa", "dynapipe", "sluice"})
    CHECK(result.out.find("\n  " + std::string(name) + " ") != std::string::npos);
  CHECK(result.out.find("llama2-7b on 16 GPUs") != std::string::npos);
  CHECK(result.out.find("sluice speedup") != std::string::npos);
  CHECK(result.out.find("sluice chose:") != std::string::npos);
}

// A report without its measured planning times, which differ from run to run (each is checked to be >= 0).
sluice::io::json without_measured(sluice::io::json tree) {
  if (tree.is_object()) {
    for (const char* key : {"planning_seconds", "mean_planning_seconds"}) {
      if (!tree.contains(key)) continue;
      CHECK(tree.at(key).get<double>() >= 0);
      tree.erase(key);
    }
  }
  if (tree.is_structured())
    for (auto& value : tree) value = without_measured(value);
  return tree;
}

TEST_CASE("cli: simulate --json: every system, its iterations and summary; deterministic for a seed") {
  const auto result = run_cli(with({"simulate", "--json", "--seed", "3"}, small));
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("format") == "sluice.simulate_run");
  // The default context: the longest MaxLen of a usable scheme, shorter than the longest sequence (239,191).
  CHECK(document.at("context") == 84224);
  CHECK(document.at("length_ranges") == sluice::io::json({4096, 16384, 65536, 84224}));
  CHECK(document.at("version") == 12);
  REQUIRE(document.at("systems").size() == 8);
  const auto& sluice_run = document.at("systems")[7];
  CHECK(sluice_run.at("name") == "sluice");
  CHECK(sluice_run.at("summary").at("speedup").get<double>() == 1.0);
  // Without --cp, Megatron-LM's context parallelism has no scheme, ZeRO-3 without Ulysses holds no 84K, and the
  // flex CP systems have no CP degree to choose.
  CHECK(document.at("systems")[1].at("failure") ==
        "the scheme space has no ring context-parallel scheme (--cp with the ring kind)");
  CHECK(document.at("systems")[2].at("failure").get<std::string>().starts_with(
      "no ZeRO-3 × Ulysses strategy of llama2-7b on 16 GPUs holds 84224 tokens"));
  CHECK(document.at("systems")[3].at("failure") ==
        "no ⟨TP, PP⟩ × ring CP domain of llama2-7b on 16 GPUs has CP groups and holds 84224 tokens in one (the "
        "scheme space's ring degrees: --cp with that kind)");
  CHECK(document.at("systems")[4].at("failure").get<std::string>().starts_with("no ZeRO-3 × Ulysses domain"));
  for (const auto& system : document.at("systems")) {
    CAPTURE(system.at("name"));
    if (!system.at("failure").is_null()) continue;
    CHECK(system.at("failure").is_null());
    REQUIRE(system.at("iterations").size() == 3);
    for (const auto& iteration : system.at("iterations")) {
      CHECK(iteration.at("seconds").get<double>() > 0);
      CHECK(iteration.at("imbalance").get<double>() >= 1.0);
      CHECK(iteration.at("micro_batch_imbalance").get<double>() >= 1.0);
      CHECK(iteration.at("switching").get<double>() <= iteration.at("seconds").get<double>());
    }
  }
  // The chosen homogeneous strategies use every GPU.
  for (const std::size_t s : {0, 6}) {
    const auto strategy = document.at("systems")[s].at("strategies")[0].get<sluice::Strategy>();
    CHECK(strategy.gpus() == 16);
  }
  // The same seed gives the same document; the dispatch threads do not change it.
  const auto again = run_cli(with({"simulate", "--json", "--seed", "3", "--threads", "2"}, small));
  REQUIRE(again.code == 0);
  CHECK(without_measured(sluice::io::json::parse(again.out)) == without_measured(document));
}

TEST_CASE("cli: simulate with CP and AC: Megatron-LM's CP, DeepSpeed, dynamic CP and FlexSP run beside the rest") {
  const auto result = run_cli({"simulate", "--json", "--iterations", "1", "--tokens", "40000", "--trials", "4",
                               "--context", "32768", "--cp", "2,4,8", "--cp-kinds", "ring,ulysses", "--ac"});
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("version") == 13);  // 12, and one above for its CP and AC schemes
  for (const auto& system : document.at("systems")) {
    CAPTURE(system.at("name"));
    CHECK(system.at("failure").is_null());
  }
  const auto scheme_of = [&](std::size_t s) {
    return document.at("systems")[s].at("strategies")[0].get<sluice::Strategy>().parts().front().scheme;
  };
  CHECK(scheme_of(0).cp() == 1);
  CHECK((scheme_of(1).cp() == 1 || scheme_of(1).cp_kind() == sluice::CpKind::ring));
  const sluice::Scheme deepspeed = scheme_of(2);
  CHECK((deepspeed.tp() == 1 && deepspeed.pp() == 1));
  CHECK((deepspeed.cp() == 1 || deepspeed.cp_kind() == sluice::CpKind::ulysses));
  CHECK(document.at("systems")[2].at("configuration").get<std::string>().find("ZeRO-3 collectives of") !=
        std::string::npos);
  // The flex CP systems: ring groups on a ⟨TP, PP⟩ domain, and ZeRO-3 Ulysses groups on ⟨1, 1⟩.
  CHECK(scheme_of(3).cp() == 1);
  CHECK(scheme_of(4) == sluice::Scheme(1, 1));
  CHECK(document.at("systems")[4]
            .at("configuration")
            .get<std::string>()
            .find("Ulysses groups of 2, 4, 8 GPUs formed per micro-batch with every GPU busy") != std::string::npos);
}

TEST_CASE("cli: simulate writes well-formed pictures and a Chrome trace") {
  const auto dir = std::filesystem::temp_directory_path() / "sluice_test_cli_simulate";
  std::filesystem::remove_all(dir);
  const std::string pictures = (dir / "pictures").string();
  const std::string trace = (dir / "trace.json").string();
  std::filesystem::create_directories(dir);
  const auto result = run_cli(with({"simulate", "--svg", pictures, "--trace", trace}, small));
  REQUIRE(result.code == 0);
  for (const std::string_view name : {"lengths.svg", "loads-megatron.svg", "loads-sluice.svg", "timeline-megatron.svg",
                                      "timeline-hotspa.svg", "timeline-dynapipe.svg", "timeline-sluice.svg"}) {
    CAPTURE(name);
    const std::string svg = sluice::io::read_text_file(std::filesystem::path(pictures) / name);
    CHECK(xml_problem(svg) == "");
    CHECK(result.out.find(name) != std::string::npos);
  }
  const auto events = sluice::io::read_json_file(trace).at("traceEvents");
  bool every_system = true;
  for (const std::string_view name : {"megatron: ", "hotspa: ", "dynapipe: ", "sluice: "})
    every_system = every_system && events.dump().find(name) != std::string::npos;
  CHECK(every_system);
  std::filesystem::remove_all(dir);
}

TEST_CASE("cli: simulate reports a system that cannot run the scenario, and fails when none can") {
  // 40 GPUs: the schemes holding 22000 tokens within a node (tp8pp2, tp8pp3, tp8pp4) do not divide 40 GPUs.
  const auto partial = run_cli({"simulate", "--profile", "llama2-32b", "--gpus", "40", "--context", "22000",
                                "--iterations", "2", "--tokens", "30000", "--trials", "4", "--json"});
  REQUIRE(partial.code == 0);
  const auto document = sluice::io::json::parse(partial.out);
  for (const std::size_t s : {0, 5, 6}) {  // megatron, hotspa, dynapipe
    const auto& failure = document.at("systems")[s].at("failure");
    REQUIRE(failure.is_string());
    CHECK(failure.get<std::string>().find("holds 22000 tokens (one scheme, replicated") != std::string::npos);
  }
  CHECK(document.at("systems")[7].at("failure").is_null());
  // The default context is one a usable scheme holds; 32768 is past every scheme of 32 GPUs within a node.
  const auto none =
      run_cli({"simulate", "--profile", "llama2-32b", "--gpus", "32", "--iterations", "1", "--context", "32768"});
  CHECK(none.code == 2);
  CHECK(one_line(none.err));
  CHECK(none.err.find("no system can run this scenario") != std::string::npos);
}

TEST_CASE("cli: trace plans one iteration and writes its timeline") {
  const auto dir = std::filesystem::temp_directory_path() / "sluice_test_cli_trace";
  std::filesystem::create_directories(dir);
  const std::string svg = (dir / "timeline.svg").string();
  const std::string trace = (dir / "trace.json").string();
  const auto text = run_cli({"trace", "--tokens", "40000", "--trials", "8", "--svg", svg, "--trace", trace});
  REQUIRE(text.code == 0);
  CHECK(text.out.find("<- chosen") != std::string::npos);
  CHECK(text.out.find("tokens/s") != std::string::npos);
  CHECK(xml_problem(sluice::io::read_text_file(svg)) == "");
  CHECK(sluice::io::read_json_file(trace).at("traceEvents").size() > 4);
  // A candidate that cannot hold the batch shows "-", and the table says what that means.
  const auto unplanned = run_cli({"trace", "--tokens", "50000", "--strategies", "4*tp4pp1,8*tp1pp2"});
  REQUIRE(unplanned.code == 0);
  CHECK(unplanned.out.find("1              -            0.000  8*tp1pp2") != std::string::npos);
  CHECK(unplanned.out.find("-: not planned, no pipeline of the candidate holds the batch's longest sequence (12344 "
                           "tokens)") != std::string::npos);

  const auto result = run_cli({"trace", "--tokens", "40000", "--context", "16384", "--iteration", "2", "--strategies",
                               "2*tp2pp4,4*tp1pp4", "--schedule", "1f1b", "--json"});
  REQUIRE(result.code == 0);
  const auto document = sluice::io::json::parse(result.out);
  CHECK(document.at("format") == "sluice.trace_run");
  CHECK(document.at("iteration") == 2);
  REQUIRE(document.at("candidates").size() == 2);
  const auto chosen = document.at("chosen").get<std::size_t>();
  for (const auto& candidate : document.at("candidates"))
    if (!candidate.at("makespan").is_null())
      CHECK(candidate.at("makespan").get<double>() >= document.at("makespan").get<double>());
  CHECK(document.at("candidates")[chosen].at("makespan") == document.at("makespan"));
  for (const auto& pipeline : document.at("pipelines")) CHECK(pipeline.at("kind") == "1f1b");
  const auto plan = document.at("plan").get<sluice::assign::IterationPlan>();
  CHECK(plan.strategy.name() == document.at("candidates")[chosen].at("strategy").get<sluice::Strategy>().name());
  std::filesystem::remove_all(dir);
}

TEST_CASE("cli: with CP, trace gives the flex CP plan that simulate ran for sluice where it ran one") {
  const std::vector<std::string_view> scenario = {"--tokens",   "40000",        "--trials",  "4",     "--seed",
                                                  "3",          "--gpus",       "8",         "--cp",  "2,4,8",
                                                  "--cp-kinds", "ulysses,ring", "--context", "16384", "--json"};
  const auto simulated = run_cli(with({"simulate", "--iterations", "3"}, scenario));
  REQUIRE(simulated.code == 0);
  const auto comparison = sluice::io::json::parse(simulated.out);
  const auto& sluice_run = comparison.at("systems").at(7);
  REQUIRE(sluice_run.at("name") == "sluice");
  int flexed = 0;
  for (const std::string_view k : {"0", "1", "2"}) {
    CAPTURE(k);
    const auto traced = run_cli(with({"trace", "--iteration", k}, scenario));
    REQUIRE(traced.code == 0);
    const auto run = sluice::io::from_document<sluice::io::TraceRun>(sluice::io::json::parse(traced.out));
    const auto& ran = sluice_run.at("iterations")[static_cast<std::size_t>(k[0] - '0')];
    REQUIRE(run.flex.has_value());
    const bool runs_flex = run.flex->total() < run.makespan + run.layout_move;
    flexed += runs_flex ? 1 : 0;
    // simulate charges the plan that runs plus the part of its layout move that it leaves exposed.
    CHECK((runs_flex ? run.flex->plan.seconds : run.makespan) + ran.at("switching").get<double>() ==
          ran.at("seconds").get<double>());
    CHECK((ran.at("strategy").get<std::string>().find(" CP") != std::string::npos) == runs_flex);
  }
  CHECK(flexed > 0);
}

TEST_CASE("cli: trace --iteration k draws the plan simulate ran for sluice at iteration k") {
  const std::vector<std::string_view> scenario = {"--tokens", "30000", "--trials", "4", "--seed", "2", "--json"};
  const auto simulated = run_cli(with({"simulate", "--iterations", "3"}, scenario));
  REQUIRE(simulated.code == 0);
  const auto comparison = sluice::io::json::parse(simulated.out);
  const auto& sluice_run = comparison.at("systems").at(7);
  REQUIRE(sluice_run.at("name") == "sluice");
  REQUIRE(sluice_run.at("iterations").size() == 3);
  for (const std::string_view k : {"0", "1", "2"}) {
    CAPTURE(k);
    const auto traced = run_cli(with({"trace", "--iteration", k}, scenario));
    REQUIRE(traced.code == 0);
    const auto document = sluice::io::json::parse(traced.out);
    const auto& ran = sluice_run.at("iterations")[static_cast<std::size_t>(k[0] - '0')];
    CHECK(document.at("candidates").size() == comparison.at("candidates").at("strategies").size());
    CHECK(document.at("plan").at("strategy").get<sluice::Strategy>().name() == ran.at("strategy"));
    // simulate charges the makespan plus the part of the kept candidate's layout move that it leaves exposed.
    CHECK(document.at("makespan").get<double>() + ran.at("switching").get<double>() == ran.at("seconds").get<double>());
    CHECK(document.at("layout_moves") == "exposed");
  }
}

TEST_CASE("cli: every subcommand takes --help and --json, and rejects a bad option with one line") {
  const std::vector<std::vector<std::string_view>> runs = {
      {"inspect", "--bin-width", "8192"},
      {"propose", "--length-step", "1024"},
      {"plan", "--strategies", "4*tp4pp1", "--iterations", "1", "--tokens", "20000", "--trials", "4"},
      {"schedule", "--stages", "2", "--tokens", "20000"},
      {"search", "--model", "bert-huge-32", "--cluster", "titan-8", "--batch", "8"},
      {"shard", "--gpus", "16", "--strategy", "4*tp4pp1"},
      {"simulate", "--iterations", "1", "--tokens", "20000", "--trials", "4"},
      {"trace", "--tokens", "20000", "--trials", "4"},
  };
  for (const auto& args : runs) {
    const std::string command(args.front());
    CAPTURE(command);
    const auto help = run_cli({args.front(), "--help"});
    CHECK(help.code == 0);
    CHECK(help.out.starts_with("usage: sluice " + command));
    CHECK(help.out.find("--json") != std::string::npos);
    const auto document = run_cli(with(args, {"--json"}));
    REQUIRE(document.code == 0);
    CHECK(sluice::io::json::parse(document.out).at("format").get<std::string>().starts_with("sluice."));
    const auto bad = run_cli({args.front(), "--no-such-option"});
    CHECK(bad.code == 2);
    CHECK(bad.out.empty());
    CHECK(one_line(bad.err));
    CHECK(bad.err.find("unknown option --no-such-option") != std::string::npos);
  }
}

TEST_CASE("cli: simulate and trace bad input") {
  const std::vector<sluice::test::BadInput> cases = {
      {{"simulate", "--iterations", "0"}, "--iterations: expected an integer from 1 to"},
      {{"simulate", "--context", "-1"}, "--context: expected an integer from 1 to"},
      {{"simulate", "--context", "10"}, "--context 10 is shorter than the length grid's step 128"},
      {{"simulate", "--bandwidth", "0"}, "--bandwidth: expected a number from"},
      {{"simulate", "--lengths", "no-such-lengths"}, "no-such-lengths"},
      {{"simulate", "--svg"}, "--svg needs a value"},
      {{"simulate", "--svg", "/proc/sluice-test"}, "/proc/sluice-test: cannot create directory"},
      {{"simulate", "--profile", "llama2-32b", "--gpus", "1"}, "no scheme fits a cluster of 1 GPUs"},
      {{"trace", "--schedule", "gpipe"}, "expected cyclic or 1f1b"},
      {{"trace", "--iteration", "-1"}, "--iteration: expected an integer from 0 to"},
      {{"trace", "--strategies", "2*tp3pp1"}, "no usable scheme tp3pp1"},
      {{"trace", "--strategies", "4*tp1pp4", "--context", "32768"}, "no candidate holds more than"},
      {{"trace", "--profile", "llama2-32b", "--gpus", "32", "--context", "32768"},
       "holds 32768 tokens with TP within a node"},
  };
  sluice::test::check_bad_input(cases);
}
