// The CLI's reports (io/run_json.hpp, io/fit_run_json.hpp, io/inspect_json.hpp): each recorded output of
// test/golden reads and writes back byte for byte, values built as the CLI builds them round-trip, and broken
// documents are refused naming the member.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "document_checks.hpp"
#include "run_documents.hpp"
#include "sluice/compare/compare.hpp"
#include "sluice/core/error.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/fit_run_json.hpp"
#include "sluice/io/inspect_json.hpp"
#include "sluice/io/plan_run_json.hpp"
#include "sluice/io/run_json.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"

using namespace sluice;
using sluice::test::read_back;
using sluice::test::recorded_output;
using sluice::test::rejects_document;

namespace {

cost::Profile llama2_7b() { return io::read_document<cost::Profile>(io::resolve_data_file("llama2-7b", "profiles")); }

std::string golden_text(const char* name) {
  return io::read_text_file(std::filesystem::path(SLUICE_BUNDLED_DATA_DIR) / ".." / "test" / "golden" / name);
}

// A recorded CLI output, read as a T and written again, is the text the CLI wrote.
template <class T>
T golden_round_trip(const char* name) {
  const std::string text = recorded_output(name);
  const T value = io::from_document<T>(io::parse(text, name), name);
  CHECK(io::document_text(value) == text);
  CHECK(io::document_text(read_back(value)) == text);
  return value;
}

// What every report's reader refuses: another format, an unknown version, the text cut short.
template <class T>
void rejects_broken_envelope(const io::json& document) {
  io::json bad = document;
  bad["format"] = "sluice.profile";
  rejects_document<T>(bad, "expected format");
  bad = document;
  bad["version"] = 99;
  rejects_document<T>(bad, "version 99");
  bad = document;
  bad.erase("version");
  rejects_document<T>(bad, "missing field 'version'");
  const std::string text = document.dump(2);
  CHECK_THROWS_WITH_AS(io::parse(text.substr(0, text.size() / 2), "cut.json"), doctest::Contains("not valid JSON"),
                       invalid_input);
}

shard::Model small_model() { return {"m", 2, {{"w", 24}, {"x", 13}}, 2, 2}; }

// sluice shard --plans on a small model: every member, the plans included.
io::ShardRun shard_run_with_plans() {
  const Strategy strategy = Strategy::parse("1*tp2pp2+1*tp2pp1");
  const shard::Model model = small_model();
  const shard::Placement placement = shard::place(strategy, 6, 2, {.gpus_per_node = 2});
  const shard::OptimizerLayout layout = shard::sharded_layout(6, 2);
  shard::Cluster cluster;
  cluster.gpus_per_node = 2;
  return io::shard_run(6, strategy, Strategy::parse("3*tp2pp1"), model, cluster, placement, layout,
                       shard::plan_pull(placement, layout, model), shard::plan_push(placement, layout, model), true);
}

// sluice trace on a small synthetic batch, every candidate simulated.
io::TraceRun small_trace_run() {
  const cost::Profile profile = llama2_7b();
  const data::LengthDataset lengths(data::synthetic_lengths({.count = 200, .seed = 5}), "synthetic");
  data::BatchSampler sampler(lengths.truncated(16384), {.tokens_per_batch = 20'000, .seed = 5});
  const data::Batch batch = sampler.next();
  const plan::IterationPlanner planner(profile, {Strategy::parse("2*tp8pp1"), Strategy::parse("4*tp2pp2")});
  const plan::SimulatedIteration iteration = planner.plan(batch.sequences);
  io::TraceRun run = io::trace_run(planner, iteration);
  run.profile = profile.name();
  run.gpus = profile.gpus();
  run.lengths = lengths.source();
  run.context = 16384;
  run.sequences = batch.sequences.size();
  run.tokens = batch.tokens;
  return run;
}

}  // namespace

TEST_CASE("inspect: the recorded output reads and writes back byte for byte") {
  const io::Inspect report = golden_round_trip<io::Inspect>("inspect.json");
  CHECK(report.profile.name == "llama2-7b");
  CHECK(!report.context_parallel);
  CHECK(!report.dataset.context);
}

TEST_CASE("inspect: with schemes derived with context parallelism, round trip") {
  const io::Inspect report = test::inspect_with_context_parallel(llama2_7b());
  REQUIRE(report.context_parallel.has_value());
  REQUIRE(!report.context_parallel->schemes.empty());
  const std::string text = io::document_text(report);
  const io::Inspect read = read_back(report);
  CHECK(io::document_text(read) == text);
  CHECK(read.context_parallel->schemes == report.context_parallel->schemes);
  CHECK(read.dataset.context == 600);
}

TEST_CASE("inspect: broken documents name the member") {
  const io::json document = io::to_document(test::inspect_with_context_parallel(llama2_7b()));
  rejects_broken_envelope<io::Inspect>(document);
  auto broken = [&](auto&& edit, const char* fragment) {
    io::json bad = document;
    edit(bad);
    rejects_document<io::Inspect>(bad, fragment);
  };
  broken([](io::json& bad) { bad.erase("dataset"); }, "missing field 'dataset'");
  broken([](io::json& bad) { bad["dataset"]["context"] = -600; }, "field 'context' must be >= 1");
  broken([](io::json& bad) { bad["dataset"]["histogram"] = 3; }, "field 'histogram'");
  broken([](io::json& bad) { bad["profile"]["gpus"] = "16"; }, "field 'gpus'");
  broken([](io::json& bad) { bad["profile"]["schemes"][0]["times"].erase(0); }, "expected 4 times");
  broken([](io::json& bad) { bad["profile"]["schemes"][0]["times"][1]["length"] = 4097; }, "expected length 4096");
  broken([](io::json& bad) { bad["profile"]["schemes"][0]["times"][0]["fits"] = false; }, "'fits' is false");
  broken([](io::json& bad) { bad["profile"]["schemes"][0]["max_len"] = "long"; }, "field 'max_len'");
  broken([](io::json& bad) { bad["context_parallel"]["degree"] = 1; }, "field 'degree' must be in [2, 1024]");
  broken([](io::json& bad) { bad["context_parallel"]["kind"] = "star"; }, "field 'kind'");
  broken([](io::json& bad) { bad["context_parallel"]["kv_heads"] = 5; }, "must divide the heads");
  broken([](io::json& bad) { bad["context_parallel"]["schemes"][0]["scheme"] = "tp?"; }, "field 'scheme'");
  broken([](io::json& bad) { bad["context_parallel"]["schemes"][0]["gpus"] = 3; }, "field 'gpus' is 3");
  broken([](io::json& bad) { bad["context_parallel"]["schemes"][0]["max_len"] = -1; }, "'max_len' must be >= 0");
  broken([](io::json& bad) { bad["context_parallel"]["schemes"][0]["fit"].erase("b"); }, "missing field 'b'");
  broken([](io::json& bad) { bad["context_parallel"]["schemes"][0]["fit"]["relative_rms_error"] = -0.5; },
         "fit: field 'relative_rms_error' must be >= 0");
  broken([](io::json& bad) { bad["context_parallel"]["schemes"][0]["times"][2]["seconds"] = -1; },
         "derived scheme: field 'times'[2]: seconds must be >= 0");
  broken([](io::json& bad) { bad["context_parallel"]["schemes"][0]["last_stage"]["b"] = -1; },
         "coefficient b must be finite and >= 0");
  broken([](io::json& bad) { bad["context_parallel"]["schemes"][0]["last_stage"]["c"] = 1e9; },
         "derived scheme: field 'last_stage' exceeds the fit's b and c");
  broken([](io::json& bad) { bad["context_parallel"]["link"] = 5; }, "field 'link'");
  broken([](io::json& bad) { bad["context_parallel"]["kind"] = "ulysses"; }, "is not of CP 2 ulysses");
}

TEST_CASE("schedule_run: the recorded output reads and writes back byte for byte") {
  const io::ScheduleRun run = golden_round_trip<io::ScheduleRun>("schedule.json");
  CHECK(run.replicas == 2);
  CHECK(run.replica_schedules.size() == 2);
  CHECK(run.baselines.size() == 2);
}

TEST_CASE("schedule_run: a scheduled batch round-trips") {
  const io::ScheduleRun run = test::small_schedule_run(llama2_7b(), 11);
  const io::ScheduleRun read = read_back(run);
  CHECK(read == run);
  CHECK(io::document_text(read) == io::document_text(run));
}

TEST_CASE("schedule_run: broken documents name the member") {
  const io::json document = io::to_document(test::small_schedule_run(llama2_7b(), 11));
  rejects_broken_envelope<io::ScheduleRun>(document);
  auto broken = [&](auto&& edit, const char* fragment) {
    io::json bad = document;
    edit(bad);
    rejects_document<io::ScheduleRun>(bad, fragment);
  };
  broken([](io::json& bad) { bad.erase("partition"); }, "missing field 'partition'");
  broken([](io::json& bad) { bad["sequences"] = -1; }, "field 'sequences'");
  broken([](io::json& bad) { bad["replicas"] = 0; }, "field 'replicas' must be >= 1");
  broken([](io::json& bad) { bad["replicas"] = 3; }, "3 replicas, but 2 replica schedules");
  broken([](io::json& bad) { bad["scheme"] = "tp1pp4"; }, "field 'scheme'");
  broken([](io::json& bad) { bad["schedule"] = "zigzag"; }, "field 'schedule'");
  broken([](io::json& bad) { bad["tokens_per_second"] = 1.0; }, "not tokens / makespan");
  broken([](io::json& bad) { bad["makespan"] = 1e9; }, "the slowest replica's is");
  broken([](io::json& bad) { bad["replica_schedules"][0]["micro_batches"][0] = 999; }, "micro-batch 999 of");
  broken([](io::json& bad) { bad["replica_schedules"][0].erase("idle"); }, "missing field 'idle'");
  broken([](io::json& bad) { bad["replica_schedules"][0]["candidates"] = -2; }, "'candidates' must be >= 1");
  broken([](io::json& bad) { bad["replica_schedules"][0]["plan"]["version"] = 42; }, "version 42");
  broken([](io::json& bad) { bad["baselines"][0]["makespan"] = nullptr; }, "has a failure and no micro-batches");
  broken([](io::json& bad) { bad["baselines"][0]["micro_batches"] = -4; }, "field 'micro_batches'");
}

TEST_CASE("shard_run: the recorded output reads and writes back byte for byte") {
  const io::ShardRun run = golden_round_trip<io::ShardRun>("shard.json");
  CHECK(run.gpus == 16);
  CHECK(run.strategy == Strategy::parse("2*tp8pp1"));
  CHECK(!run.previous);
  CHECK(!run.pull);
}

TEST_CASE("shard_run: with its plans, round trip") {
  const io::ShardRun run = shard_run_with_plans();
  REQUIRE(run.pull.has_value());
  const io::ShardRun read = read_back(run);
  CHECK(read == run);
  CHECK(io::document_text(read) == io::document_text(run));
  CHECK(read.cost.seconds() > 0);
}

TEST_CASE("shard_run: broken documents name the member") {
  const io::json document = io::to_document(shard_run_with_plans());
  rejects_broken_envelope<io::ShardRun>(document);
  auto broken = [&](auto&& edit, const char* fragment) {
    io::json bad = document;
    edit(bad);
    rejects_document<io::ShardRun>(bad, fragment);
  };
  broken([](io::json& bad) { bad.erase("grid"); }, "missing field 'grid'");
  broken([](io::json& bad) { bad["pull_sends"] = -1; }, "field 'pull_sends'");
  broken([](io::json& bad) { bad["rs_groups"] = "8"; }, "field 'rs_groups'");
  broken([](io::json& bad) { bad["gpus"] = 0; }, "field 'gpus' must be in");
  broken([](io::json& bad) { bad["pipelines"] = 0; }, "field 'pipelines' must be in");
  broken([](io::json& bad) { bad["cost"]["pull"]["messages"] = -3; }, "'messages' must be >= 0");
  broken([](io::json& bad) { bad["cost"]["seconds"] = 1e9; }, "not the phases' sum");
  broken([](io::json& bad) { bad["cost"]["push"]["bytes"].erase("inter_node"); }, "missing field 'inter_node'");
  broken([](io::json& bad) { bad["blocks"][0]["layers"] = {1, 2}; }, "starts at layer 1");
  broken([](io::json& bad) { bad["blocks"] = io::json::array(); }, "cover 0 layers");
  broken([](io::json& bad) { bad["blocks"][0]["pull_granularity"] = 0; }, "granularities must be >= 1");
  broken([](io::json& bad) { bad.erase("layout"); }, "go together");
  broken([](io::json& bad) { bad["pull_sends"] = 12345; }, "field 'pull' does not hold");
  broken([](io::json& bad) { bad["pull"]["format"] = "sluice.push_plan"; }, "field 'pull': expected format");
  broken([](io::json& bad) { bad["strategy"] = "2*tp8pp1"; }, "field 'strategy'");
  broken([](io::json& bad) { bad["previous"] = 3; }, "field 'previous'");
  broken([](io::json& bad) { bad["cluster"]["gpus_per_node"] = 64; }, "exceeds gpus");
}

TEST_CASE("trace_run: the recorded output reads and writes back byte for byte") {
  const io::TraceRun run = golden_round_trip<io::TraceRun>("trace.json");
  CHECK(run.iteration == 1);
  CHECK(run.layout_moves == plan::LayoutMoves::exposed);
  CHECK(run.total == run.makespan + run.layout_move);
}

TEST_CASE("trace_run: a planned iteration round-trips") {
  const io::TraceRun run = small_trace_run();
  REQUIRE(!run.pipelines.empty());
  const io::TraceRun read = read_back(run);
  CHECK(read == run);
  CHECK(io::document_text(read) == io::document_text(run));
}

TEST_CASE("trace_run: broken documents name the member") {
  const io::json document = io::to_document(small_trace_run());
  rejects_broken_envelope<io::TraceRun>(document);
  auto broken = [&](auto&& edit, const char* fragment) {
    io::json bad = document;
    edit(bad);
    rejects_document<io::TraceRun>(bad, fragment);
  };
  broken([](io::json& bad) { bad.erase("plan"); }, "missing field 'plan'");
  broken([](io::json& bad) { bad["sequences"] = -1; }, "field 'sequences'");
  broken([](io::json& bad) { bad["tokens"] = -5; }, "field 'tokens' must be >= 0");
  broken([](io::json& bad) { bad["context"] = 1.5; }, "field 'context'");
  broken([](io::json& bad) { bad["schedule"] = "zigzag"; }, "field 'schedule'");
  broken([](io::json& bad) { bad["layout_moves"] = "some"; }, "field 'layout_moves'");
  broken([](io::json& bad) { bad["chosen"] = 7; }, "field 'chosen' is 7");
  broken([](io::json& bad) { bad["total"] = 1e9; }, "not makespan + layout_move");
  broken([](io::json& bad) { bad["candidates"][0]["layout_move"] = -1.0; }, "'layout_move' must be >= 0");
  broken([](io::json& bad) { bad["pipelines"][0]["kind"] = 3; }, "field 'kind'");
  broken([](io::json& bad) { bad["pipelines"][0]["index"] = 999; }, "out of the plan's range");
  broken([](io::json& bad) { bad["pipelines"][0]["micro_batches"] = 999; }, "micro-batches, the plan has");
  broken([](io::json& bad) { bad["pipelines"][0]["peak_memory"][0] = -1.0; }, "'peak_memory' must be >= 0");
  broken(
      [](io::json& bad) {
        const std::size_t chosen = bad["chosen"].get<std::size_t>();
        bad["candidates"][chosen]["makespan"] = nullptr;
      },
      "was not planned");
}

TEST_CASE("fit_run: the recorded output reads and writes back byte for byte") {
  const io::FitRun run = golden_round_trip<io::FitRun>("fit.json");
  CHECK(run.base == "llama2-7b");
  CHECK(!run.out);
  REQUIRE(!run.schemes.empty());
  CHECK(run.schemes[0].memory.has_value());
}

TEST_CASE("fit_run: broken documents name the member") {
  const io::json document = io::parse(golden_text("fit.json"), "fit.json");
  rejects_broken_envelope<io::FitRun>(document);
  auto broken = [&](auto&& edit, const char* fragment) {
    io::json bad = document;
    edit(bad);
    rejects_document<io::FitRun>(bad, fragment);
  };
  broken([](io::json& bad) { bad.erase("schemes"); }, "missing field 'schemes'");
  broken([](io::json& bad) { bad["max_error"] = "5%"; }, "field 'max_error'");
  broken([](io::json& bad) { bad["max_error"] = 2.0; }, "field 'max_error' must be in (0, 1]");
  broken([](io::json& bad) { bad["out"] = 3; }, "field 'out'");
  broken([](io::json& bad) { bad["schemes"][0]["samples"] = -1; }, "field 'samples'");
  broken([](io::json& bad) { bad["schemes"][0]["latency_error"] = 0.5; }, "exceeds max_error");
  broken([](io::json& bad) { bad["schemes"][0]["inner_error"] = 0.01; }, "'inner_latency' and 'inner_error' come");
  broken(
      [](io::json& bad) {
        bad["schemes"][0]["inner_latency"] = bad["schemes"][0]["latency"];
        bad["schemes"][0]["inner_error"] = 0.5;
      },
      "]: inner error 0.5 exceeds max_error");
  broken([](io::json& bad) { bad["schemes"][0]["usable"] = false; }, "field 'usable' is false");
  broken([](io::json& bad) { bad["schemes"][0]["max_len"] = 17; }, "are not the profile's");
  broken([](io::json& bad) { bad["schemes"][0]["memory"]["bytes_per_token"] = -2.0; }, "'bytes_per_token' must be");
  broken([](io::json& bad) { bad["schemes"][0]["tp"] = "one"; }, "field 'tp'");
  broken([](io::json& bad) { bad["profile"]["format"] = "sluice.fit_run"; }, "field 'profile': expected format");
  broken([](io::json& bad) { bad["profile"].erase("schemes"); }, "field 'profile'");
}

TEST_CASE("simulate_run: the recorded output reads and writes back byte for byte") {
  const io::SimulateRun run = golden_round_trip<io::SimulateRun>("simulate.json");
  CHECK(run.batches.size() == 2);
  REQUIRE(run.systems.size() == compare::all_systems.size());
  CHECK(run.systems.back().summary.has_value());
}

TEST_CASE("simulate_run: broken documents name the member") {
  const io::json document = io::parse(recorded_output("simulate.json"), "simulate.json");
  rejects_broken_envelope<io::SimulateRun>(document);
  auto broken = [&](auto&& edit, const char* fragment) {
    io::json bad = document;
    edit(bad);
    rejects_document<io::SimulateRun>(bad, fragment);
  };
  broken([](io::json& bad) { bad.erase("systems"); }, "missing field 'systems'");
  broken([](io::json& bad) { bad["seed"] = -1; }, "field 'seed'");
  broken([](io::json& bad) { bad["tokens"] = 0; }, "field 'tokens' must be >= 1");
  broken([](io::json& bad) { bad["cross_node_tp"] = 0; }, "field 'cross_node_tp'");
  broken([](io::json& bad) { bad["link"]["bandwidth_bytes_per_second"] = 0; }, "bandwidth > 0");
  broken([](io::json& bad) { bad["batches"][0]["sequences"] = -2; }, "field 'sequences'");
  broken([](io::json& bad) { bad["systems"].erase(0); }, "expected 8 systems");
  broken([](io::json& bad) { std::swap(bad["systems"][0], bad["systems"][7]); }, "expected system 'megatron'");
  broken([](io::json& bad) { bad["systems"][7].erase("summary"); }, "missing field 'summary'");
  broken([](io::json& bad) { bad["systems"][7]["iterations"].erase(0); }, "1 iterations for 2 batches");
  broken([](io::json& bad) { bad["systems"][7]["summary"]["mean_seconds"] = -1.0; }, "must be >= 0");
  broken([](io::json& bad) { bad["systems"][1]["summary"] = bad["systems"][0]["summary"]; }, "has no 'summary'");
  broken([](io::json& bad) { bad["candidates"] = io::json::array(); }, "field 'candidates'");
  broken([](io::json& bad) { bad["systems"][7]["summary"]["over_bound"] = 0.0; }, "'over_bound' must be > 0");
  broken([](io::json& bad) { bad["batches"][0].erase("lower_bound"); }, "missing field 'lower_bound'");
  broken([](io::json& bad) { bad["batches"][0]["lower_bound"]["critical_path_seconds"] = -1.0; }, "must be > 0");
  broken([](io::json& bad) { bad["systems"][7]["iterations"][0]["planning_seconds"] = -0.5; },
         "'planning_seconds' must be >= 0");
  broken([](io::json& bad) { bad["systems"][7]["iterations"][1].erase("planning_seconds"); },
         "missing field 'planning_seconds'");
  broken([](io::json& bad) { bad["systems"][0]["summary"]["mean_planning_seconds"] = -1.0; }, "must be >= 0");
}

TEST_CASE("plan_run: the recorded outputs read and write back byte for byte") {
  for (const char* name : {"plan.json", "plan_proposed.json", "plan_all.json"}) {
    CAPTURE(name);
    const std::string text = recorded_output(name);
    const io::PlanRun run = io::from_document<io::PlanRun>(io::parse(text, name), name);
    CHECK(io::document_text(run) == text);
    CHECK(io::document_text(read_back(run)) == text);
    CHECK(!run.iterations.empty());
    CHECK(run.iterations.front().planning_seconds == 0.25);
  }
}

TEST_CASE("plan_run: broken documents name the member") {
  const io::json document = io::parse(recorded_output("plan.json"), "plan.json");
  rejects_broken_envelope<io::PlanRun>(document);
  auto broken = [&](auto&& edit, const char* fragment) {
    io::json bad = document;
    edit(bad);
    rejects_document<io::PlanRun>(bad, fragment);
  };
  broken([](io::json& bad) { bad.erase("summary"); }, "missing field 'summary'");
  broken([](io::json& bad) { bad["context"] = 0; }, "field 'context' must be >= 1");
  broken([](io::json& bad) { bad["candidates"]["strategies"] = io::json::array(); }, "holds no strategy");
  broken([](io::json& bad) { bad["iterations"][0]["sequences"] = -1; }, "field 'sequences'");
  broken([](io::json& bad) { bad["iterations"][0]["tokens"] = -1; }, "must be >= 0");
  broken([](io::json& bad) { bad["iterations"][0]["planning_seconds"] = "measured"; }, "field 'planning_seconds'");
  broken([](io::json& bad) { bad["iterations"][0]["strategy"] = "1*tp1pp1"; }, "field 'strategy' is");
  broken([](io::json& bad) { bad["iterations"][0]["layout_move"] = 5.0; }, "must be the plan's overhead");
  broken([](io::json& bad) { bad["iterations"][0]["total"] = 1e9; }, "not makespan + layout_move");
  broken([](io::json& bad) { bad["iterations"][0]["placement"]["pipelines"] = io::json::array(); },
         "the placement has 0 pipelines");
  broken([](io::json& bad) { bad["summary"]["chosen"] = {{"1*tp1pp1", 3}}; }, "does not count");
  broken([](io::json& bad) { bad["summary"]["chosen"]["4*tp4pp1"] = "3"; }, "field 'chosen'.4*tp4pp1");
  broken([](io::json& bad) { bad["summary"]["mean_total"] = nullptr; }, "field 'mean_total'");
  broken([](io::json& bad) { bad["summary"]["over_bound"] = nullptr; }, "both numbers or both null");
  broken([](io::json& bad) { bad["summary"]["mean_lower_bound"] = -1.0; }, "must be > 0");
  broken([](io::json& bad) { bad["iterations"][0].erase("lower_bound"); }, "missing field 'lower_bound'");
  broken([](io::json& bad) { bad["iterations"][0]["lower_bound"]["seconds"] = 1e-9; }, "at least");
  broken([](io::json& bad) { bad["iterations"][0]["lower_bound"]["area_seconds"] = 0.0; }, "must be > 0");
}

TEST_CASE("plan_run: each iteration's lower bound is below its total, and the summary is their ratio") {
  const io::PlanRun run =
      io::from_document<io::PlanRun>(io::parse(recorded_output("plan.json"), "plan.json"), "plan.json");
  std::vector<double> bounds;
  for (const io::PlanRunIteration& iteration : run.iterations) {
    REQUIRE(iteration.lower_bound.has_value());
    CHECK(iteration.lower_bound->seconds <= iteration.total());
    bounds.push_back(iteration.lower_bound->seconds);
  }
  REQUIRE(run.summary.mean_lower_bound.has_value());
  CHECK(*run.summary.mean_lower_bound == doctest::Approx(sluice::compare::mean(bounds)).epsilon(1e-15));
  CHECK(*run.summary.over_bound == doctest::Approx(run.summary.mean_total / *run.summary.mean_lower_bound));
  CHECK(*run.summary.over_bound >= 1);
}
