#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "sluice/io/bundled.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/data_json.hpp"
#include "sluice/io/microbatch_json.hpp"
#include "sluice/io/proposal_json.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/io/search_json.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/io/solver_json.hpp"
#include "sluice/io/strategy_pool.hpp"
#include "support.hpp"

using namespace sluice;
using namespace sluice::cost;

namespace {
Profile bundled(std::string_view name) { return io::read_document<Profile>(io::resolve_data_file(name, "profiles")); }

// A strategy_pool file in the Hetu/Hydraulis layout (milliseconds, MiB).
const char* const strategy_pool_text = R"({
  "strategies": [
    {"tp": 1, "pp": 2, "a": 1.372e-6, "b": 0.09465, "c": 15.05},
    {"tp": 4, "pp": 1, "a": 1.030e-6, "b": 0.05648, "c": 56.70},
    {"tp": 8, "pp": 1, "a": 5.069e-7, "b": 0.03662, "c": 44.32}
  ],
  "memory_regression": {"A": {"tp1": 38, "tp2": 39, "tp4": 42, "tp8": 48}, "B": 210, "alpha": 0.75,
                        "gap": 5000, "safe_bound": 6144},
  "model_config": {"H": 4096, "L": 32, "V": 30592},
  "cluster_config": {"gpus_per_node": 8, "gpu_memory_bound": 81252,
                     "utilization_seqlen": {"tp1": 384, "tp4": 768, "tp8": 1024}},
  "comm_cost": {"hetero_dp": 0.1}
})";
}  // namespace

TEST_CASE("bundled profiles load and resolve") {
  const auto names = io::bundled_names("profiles");
  CHECK(names == std::vector<std::string>{"llama2-13b", "llama2-32b", "llama2-7b"});
  const Profile p7 = bundled("llama2-7b");
  CHECK(p7.gpus() == 16);
  CHECK(p7.schemes().size() == 13);
  CHECK(bundled("llama2-13b").schemes().size() == 5);
  CHECK(bundled("llama2-32b").schemes().size() == 15);
  // Coefficients converted from the published milliseconds to seconds.
  const SchemeCost& tp8 = p7.at(Scheme(8, 1));
  CHECK(tp8.latency.a() == doctest::Approx(5.069e-10));
  CHECK(tp8.latency.b() == doctest::Approx(3.662e-5));
  CHECK(tp8.latency.c() == doctest::Approx(4.432e-2));
  CHECK(tp8.util_len == 1024);
  for (const Profile& profile : {p7, bundled("llama2-13b"), bundled("llama2-32b")}) {
    for (const SchemeCost& scheme : profile.schemes()) {
      CAPTURE(profile.name());
      CAPTURE(scheme.scheme.name());
      CHECK(scheme.max_len % 128 == 0);
      REQUIRE(scheme.memory.has_value());
      CHECK(scheme.max_len == scheme.memory->max_len());
      if (scheme.max_len > 0) {
        CHECK(scheme.memory->bytes(scheme.max_len) <= scheme.memory->budget_bytes());
      } else {
        CHECK(scheme.memory->bytes(scheme.memory->granularity()) > scheme.memory->budget_bytes());
      }
    }
  }
  // 32B model states alone overflow 80 GB at TP·PP = 2: those schemes hold nothing.
  CHECK(bundled("llama2-32b").max_len(Scheme(1, 2)) == 0);
  CHECK(bundled("llama2-32b").max_len(Scheme(2, 1)) == 0);
  // More TP splits activations further: MaxLen grows with TP at a fixed PP.
  CHECK(p7.max_len(Scheme(8, 1)) > p7.max_len(Scheme(4, 1)));
  CHECK(p7.max_len(Scheme(4, 1)) > p7.max_len(Scheme(2, 1)));
}

TEST_CASE("profile: resolved for another cluster size") {
  const Profile p16 = bundled("llama2-7b");
  const Profile p8 = p16.with_gpus(8);
  CHECK(p8.find(Scheme(16, 1)) == nullptr);  // needs 16 GPUs
  CHECK(p16.find(Scheme(16, 1)) != nullptr);
  CHECK_THROWS_WITH_AS(p8.at(Scheme(16, 1)), doctest::Contains("no usable scheme tp16pp1"), invalid_input);
  // Fewer GPUs shard the optimizer states less: MaxLen never grows.
  for (const SchemeCost& scheme : p8.schemes()) CHECK(scheme.max_len <= p16.max_len(scheme.scheme));
  CHECK_THROWS_AS(p16.with_gpus(0), invalid_input);
}

TEST_CASE("profile: strategy pipelines ordered by MaxLen and checked against the cluster") {
  const Profile profile = bundled("llama2-7b");
  const Strategy strategy({{Scheme(1, 4), 2}, {Scheme(8, 1), 1}});
  const auto pipelines = profile.pipelines(strategy);
  REQUIRE(pipelines.size() == 3);
  CHECK(pipelines[0].scheme == Scheme(8, 1));
  CHECK(pipelines[0].max_len == profile.max_len(Scheme(8, 1)));
  CHECK(pipelines[1].max_len >= pipelines[2].max_len);
  CHECK_THROWS_WITH_AS(profile.pipelines(Strategy({{Scheme(8, 1), 3}})), doctest::Contains("needs 24 GPUs"),
                       invalid_input);
  CHECK_THROWS_AS(profile.pipelines(Strategy({{Scheme(3, 1), 1}})), invalid_input);
}

TEST_CASE("profile JSON round trip") {
  const Profile profile = bundled("llama2-32b");
  const auto document = io::to_document(profile);
  CHECK(document.at("format") == "sluice.profile");
  CHECK(document.at("version") == 1);
  const auto again = io::from_document<Profile>(document);
  CHECK(io::json(again) == io::json(profile));
  REQUIRE(again.schemes().size() == profile.schemes().size());
  for (std::size_t i = 0; i < profile.schemes().size(); ++i) {
    CHECK(again.schemes()[i].max_len == profile.schemes()[i].max_len);
    CHECK(again.schemes()[i].latency == profile.schemes()[i].latency);
  }
  const auto path = std::filesystem::temp_directory_path() / "sluice_test_profile.json";
  io::write_document(path, profile);
  CHECK(io::json(io::read_document<Profile>(path)) == io::json(profile));
  std::filesystem::remove(path);
}

TEST_CASE("cost types JSON round trip") {
  const QuadraticLatency latency(1e-9, 2e-5, 3e-2);
  CHECK(io::json(latency).get<QuadraticLatency>() == latency);
  const LinearMemory memory(1e9, 1e5, 7e10, 128);
  CHECK(io::json(memory).get<LinearMemory>() == memory);
  const FitResult fit{latency, 0.01, 12};
  const auto fit_again = io::from_document<FitResult>(io::to_document(fit));
  CHECK(fit_again.model == latency);
  CHECK(fit_again.samples == 12);
  const LatencySample sample{4096, 0.5};
  CHECK(io::json(sample).get<LatencySample>().seconds == 0.5);
  const RectilinearGrid<2> grid({std::vector<double>{1, 2}, std::vector<double>{32, 64, 128}}, {1, 2, 3, 4, 5, 6});
  const auto grid_again = io::json(grid).get<RectilinearGrid<2>>();
  CHECK(grid_again.values() == grid.values());
  CHECK(grid_again({1.5, 100}) == grid({1.5, 100}));
  const DecoderGridCostModel model{grid, grid};
  CHECK(io::json(io::json(model).get<DecoderGridCostModel>()) == io::json(model));
  const Profile profile = bundled("llama2-7b");
  const SchemeCost& cost = profile.at(Scheme(2, 2));
  const auto cost_again = io::json(cost).get<SchemeCost>();
  CHECK(cost_again.max_len == cost.max_len);
  CHECK(cost_again.memory == cost.memory);
}

TEST_CASE("profile: bad documents name the problem") {
  auto document = io::to_document(bundled("llama2-7b"));
  auto expect_error = [&](io::json bad, const char* fragment) {
    CAPTURE(fragment);
    CHECK_THROWS_WITH_AS(io::from_document<Profile>(bad, "p.json"), doctest::Contains(fragment), invalid_input);
  };
  auto bad = document;
  bad["schemes"][0]["latency"]["a"] = -1.0;
  expect_error(bad, "coefficient a");
  bad = document;
  bad["schemes"][0]["latency"]["b"] = "fast";
  expect_error(bad, "field 'b'");
  bad = document;
  bad["schemes"].push_back(bad["schemes"][0]);
  expect_error(bad, "listed twice");
  bad = document;
  bad["schemes"] = io::json::array();
  expect_error(bad, "no schemes");
  bad = document;
  bad["cluster"]["gpus"] = 0;
  expect_error(bad, "GPU count");
  bad = document;
  bad["memory"]["activation_bytes"]["x"] = 3;
  expect_error(bad, "not a TP degree");
  bad = document;
  bad["memory"]["alpha"] = 2;
  expect_error(bad, "alpha");
  bad = document;
  bad.erase("memory");
  expect_error(bad, "no memory model");
  bad = document;
  bad["cluster"]["gpus"] = 1;
  expect_error(bad, "no scheme fits");
  bad = document;
  bad.erase("model");
  expect_error(bad, "missing field 'model'");
  bad = document;
  bad["version"] = 3;
  expect_error(bad, "version 3");
  CHECK_THROWS_WITH_AS(io::read_document<Profile>("/nonexistent/profile.json"), doctest::Contains("cannot open"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(io::resolve_data_file("no-such-profile", "profiles"), doctest::Contains("llama2-7b"),
                       invalid_input);
}

TEST_CASE("profile JSON: last-stage work round-trips, is written only when given, and bad values are named") {
  auto document = io::to_document(bundled("llama2-7b"));
  std::size_t pipelined = 0;
  while (document["schemes"][pipelined].value("pp", 1) == 1) ++pipelined;
  for (const auto& scheme : document["schemes"]) CHECK_FALSE(scheme.contains("last_stage"));
  const double b = document["schemes"][pipelined]["latency"]["b"];
  const double c = document["schemes"][pipelined]["latency"]["c"];
  document["schemes"][pipelined]["last_stage"] = {{"b", b / 4}, {"c", c / 2}};
  const Profile profile = io::from_document<Profile>(document);
  const auto scheme = document["schemes"][pipelined].get<Scheme>();
  CHECK(profile.at(scheme).last_stage == LastStageWork(b / 4, c / 2));
  CHECK(io::to_document(profile) == document);
  CHECK(io::json(profile.at(scheme)).get<SchemeCost>() == profile.at(scheme));
  auto expect_error = [&](io::json bad, const char* fragment) {
    CAPTURE(fragment);
    CHECK_THROWS_WITH_AS(io::from_document<Profile>(bad, "p.json"), doctest::Contains(fragment), invalid_input);
  };
  auto bad = document;
  bad["schemes"][pipelined]["last_stage"]["b"] = -1.0;
  expect_error(bad, "last stage work: coefficient b must be finite and >= 0, got -1");
  bad = document;
  bad["schemes"][pipelined]["last_stage"].erase("c");
  expect_error(bad, "missing field 'c'");
  bad = document;
  bad["schemes"][pipelined]["last_stage"]["b"] = 2 * b;
  expect_error(bad, "exceeds the stage's own");
  bad = document;
  std::size_t unpipelined = 0;
  while (bad["schemes"][unpipelined].value("pp", 1) != 1) ++unpipelined;
  bad["schemes"][unpipelined]["last_stage"] = {{"b", 0}, {"c", 1e-6}};
  expect_error(bad, "last_stage work is given but the pipeline has one stage");
}

TEST_CASE("bundled data: a SLUICE_DATA_DIR without the data is named in the error") {
  const std::string empty = (std::filesystem::temp_directory_path() / "sluice-test-empty-data-dir").string();
  std::filesystem::create_directories(empty);
  REQUIRE(::setenv("SLUICE_DATA_DIR", empty.c_str(), 1) == 0);
  CHECK_THROWS_WITH_AS(io::resolve_data_file("llama2-7b", "profiles"),
                       ("llama2-7b: no such file, and no bundled profiles in " + empty +
                        "/profiles (the directory SLUICE_DATA_DIR names)")
                           .c_str(),
                       invalid_input);
  REQUIRE(::unsetenv("SLUICE_DATA_DIR") == 0);
  CHECK(std::filesystem::is_regular_file(io::resolve_data_file("llama2-7b", "profiles")));
}

TEST_CASE("profile: MaxLen given outright needs no memory model") {
  ProfileSpec spec;
  spec.name = "measured";
  spec.gpus = 8;
  spec.schemes = {{Scheme(8, 1), QuadraticLatency(1e-9, 1e-5, 1e-2), 65536, 1024},
                  {Scheme(2, 2), QuadraticLatency(2e-9, 2e-5, 1e-2), 16384, std::nullopt}};
  const Profile profile(spec);
  CHECK(profile.max_len(Scheme(8, 1)) == 65536);
  CHECK(profile.at(Scheme(8, 1)).util_len == 1024);
  CHECK(profile.at(Scheme(2, 2)).util_len == QuadraticLatency(2e-9, 2e-5, 1e-2).util_len());
  CHECK_FALSE(profile.at(Scheme(2, 2)).memory.has_value());
  spec.schemes[0].max_len = -1;
  CHECK_THROWS_AS(Profile{spec}, invalid_input);
}

TEST_CASE("strategy_pool import: units converted, memory and UtilLen carried over") {
  const auto spec = io::import_strategy_pool(io::parse(strategy_pool_text, "pool.json"), "pool.json", 8);
  const Profile imported(spec);
  CHECK(imported.schemes().size() == 3);
  const SchemeCost& tp1 = imported.at(Scheme(1, 2));
  CHECK(tp1.latency.a() == doctest::Approx(1.372e-9));
  CHECK(tp1.latency.c() == doctest::Approx(1.505e-2));
  CHECK(tp1.util_len == 384);
  // The same numbers as the bundled 7B profile (whose safety margin is 6 GiB = 6144 MiB).
  const Profile reference = bundled("llama2-7b").with_gpus(8);
  for (const SchemeCost& scheme : imported.schemes()) CHECK(scheme.max_len == reference.max_len(scheme.scheme));
}

TEST_CASE("strategy_pool import: bad files") {
  auto pool = io::parse(strategy_pool_text, "pool.json");
  auto expect_error = [](const io::json& bad, const char* fragment) {
    CAPTURE(fragment);
    CHECK_THROWS_WITH_AS(Profile(io::import_strategy_pool(bad, "pool.json", 8)), doctest::Contains(fragment),
                         invalid_input);
  };
  auto bad = pool;
  bad.erase("model_config");
  expect_error(bad, "model_config");
  bad = pool;
  bad["strategies"][1]["c"] = -3;
  expect_error(bad, "coefficient c");
  bad = pool;
  bad["strategies"] = 5;
  expect_error(bad, "must be an array");
  bad = pool;
  bad["memory_regression"]["A"] = io::json::array();
  expect_error(bad, "keyed by TP");
  bad = pool;
  bad["strategies"][0]["tp"] = 0;
  expect_error(bad, "tp must be");
  bad = pool;
  bad["cluster_config"]["utilization_seqlen"]["tp8"] = 0;
  expect_error(bad, "utilization_seqlen");
}

TEST_CASE("MILP model and solution JSON round trip, infinities included") {
  solver::Model model;
  model.set_sense(solver::Sense::maximize);
  model.set_objective_offset(2.5);
  const int x = model.add_variable(0, solver::infinity, solver::VarType::integer, 3, "x");
  const int y = model.add_binary(-1, "y");
  const int z = model.add_variable(-solver::infinity, 4, solver::VarType::continuous, 0.5);
  model.add_less_equal({{x, 2.0}, {y, 1.0}}, 7, "cap");
  model.add_constraint(std::vector<int>{x, z}, std::vector<double>{1.0, -1.0}, -3, solver::infinity);
  const auto document = io::to_document(model);
  CHECK(document.at("format") == "sluice.milp");
  CHECK(document.at("variables")[0].at("upper") == "inf");
  const auto again = io::from_document<solver::Model>(document);
  CHECK(io::json(again) == io::json(model));
  CHECK(again.sense() == solver::Sense::maximize);
  CHECK(again.upper_bounds()[0] == solver::infinity);
  CHECK(again.lower_bounds()[2] == -solver::infinity);
  CHECK(again.variable_name(1) == "y");
  CHECK(again.num_nonzeros() == model.num_nonzeros());
  const std::vector<double> point = {3, 1, 4};
  CHECK(again.evaluate_objective(point) == model.evaluate_objective(point));
  CHECK(again.is_feasible(point, 1e-9) == model.is_feasible(point, 1e-9));

  const solver::Solution solution{solver::SolveStatus::feasible, 12.5, solver::infinity, {3, 1, 4}, 0.25};
  const auto solution_again = io::from_document<solver::Solution>(io::to_document(solution));
  CHECK(solution_again.status == solver::SolveStatus::feasible);
  CHECK(solution_again.objective == 12.5);
  CHECK(solution_again.best_bound == solver::infinity);
  CHECK(solution_again.values == solution.values);
}

TEST_CASE("MILP JSON: bad documents") {
  solver::Model model;
  model.add_binary(1, "b");
  model.add_less_equal({{0, 1.0}}, 1);
  const auto document = io::to_document(model);
  auto bad = document;
  bad["variables"][0]["type"] = "boolean";
  CHECK_THROWS_WITH_AS(io::from_document<solver::Model>(bad), doctest::Contains("unknown variable type"),
                       invalid_input);
  bad = document;
  bad["variables"][0]["lower"] = "-infinity";
  CHECK_THROWS_WITH_AS(io::from_document<solver::Model>(bad), doctest::Contains("\"inf\""), invalid_input);
  bad = document;
  bad["constraints"][0]["terms"][0] = io::json::array({5, 1.0});
  CHECK_THROWS_AS(io::from_document<solver::Model>(bad), invalid_input);
  bad = document;
  bad["constraints"][0]["terms"][0] = "x";
  CHECK_THROWS_WITH_AS(io::from_document<solver::Model>(bad), doctest::Contains("[variable index, coefficient]"),
                       invalid_input);
  bad = document;
  bad["variables"][0]["objective"] = nullptr;
  CHECK_THROWS_AS(io::from_document<solver::Model>(bad), invalid_input);
  auto solution = io::to_document(solver::Solution{});
  solution["status"] = "great";
  CHECK_THROWS_WITH_AS(io::from_document<solver::Solution>(solution), doctest::Contains("unknown status"),
                       invalid_input);
}

// ---------------------------------------------------------------------------------------------------------------
// Hardening: nesting, strict numbers, ranges checked before converting, one-line messages.

namespace {

io::json bundled_json(std::string_view kind, std::string_view file) {
  return io::read_json_file(io::bundled_data_dir() / kind / file);
}

// `document` with the value at `pointer` replaced by the JSON text `literal`, read as a T from "doc.json".
template <class T>
std::string read_error(io::json document, const std::string& pointer, std::string_view literal) {
  document[io::json::json_pointer(pointer)] = "@slot@";
  std::string text = document.dump();
  text.replace(text.find("\"@slot@\""), 8, literal);
  return error_of([&] { (void)io::from_document<T>(io::parse(text, "doc.json"), "doc.json"); });
}

}  // namespace

TEST_CASE("JSON nesting: 100k objects or 1M arrays in any document are rejected naming the source") {
  const std::string objects = nested_objects(100'000);
  const std::string arrays = nested_arrays(1'000'000);
  for (const std::string_view format :
       {"sluice.profile", "sluice.strategy", "sluice.candidates", "sluice.proposal", "sluice.model", "sluice.cluster",
        "sluice.shard_model", "sluice.execution_plan"}) {
    CAPTURE(format);
    for (const std::string* deep : {&objects, &arrays}) {
      const std::string text = R"({"format": ")" + std::string(format) + R"(", "version": 1, "parts": )" + *deep + "}";
      CHECK_THROWS_WITH_AS(io::parse(text, "deep.json"),
                           doctest::Contains("deep.json: JSON nested deeper than 256 levels"), invalid_input);
    }
  }
  const auto path = std::filesystem::temp_directory_path() / "sluice_test_deep.json";
  io::write_text_file(path, R"({"format": "sluice.profile", "version": 1, "model": )" + arrays + "}");
  CHECK(contains(error_of([&] { (void)io::read_document<Profile>(path); }), path.string() + ": JSON nested deeper"));
  std::filesystem::remove(path);
}

TEST_CASE("JSON inputs: a file past the size limit or not starting like JSON is refused before it is read whole") {
  const auto path = std::filesystem::temp_directory_path() / "sluice_test_huge.json";
  {
    // A sparse file one byte past the limit: refused by its size, before a byte is read.
    io::write_text_file(path, "{");
    std::filesystem::resize_file(path, io::max_input_bytes + 1);
  }
  CHECK(contains(error_of([&] { (void)io::read_document<Profile>(path); }),
                 path.string() + ": 1073741825 bytes, past the 1073741824-byte limit"));
  CHECK_THROWS_WITH_AS(io::read_batch(path.string(), std::cin), doctest::Contains("-byte limit"), invalid_input);
  std::filesystem::remove(path);

  // A stream past the limit is refused as it passes it.
  std::istringstream long_stream(std::string(1000, ' '));
  CHECK_THROWS_WITH_AS(io::read_text(long_stream, "pipe", io::TextKind::any, 999),
                       doctest::Contains("pipe: more than 999 bytes"), invalid_input);

  // A first byte no JSON value starts with is refused after the first 64 KiB, however long the input.
  std::istringstream binary(
      "\x7f"
      "ELF" +
      std::string(1 << 20, 'x'));
  CHECK_THROWS_WITH_AS(io::read_text(binary, "model.bin", io::TextKind::json_text),
                       doctest::Contains("model.bin: not JSON: it starts with '\\x7fELF"), invalid_input);
  CHECK(binary.tellg() == 1 << 16);
  // White space, a byte-order mark and every kind of value still read.
  for (const std::string& text : {std::string("  \n{}"), std::string("\xEF\xBB\xBF[1]"), std::string("\"s\""),
                                  std::string("-1"), std::string("true"), std::string("null")}) {
    std::istringstream in(text);
    CHECK(io::read_text(in, "ok", io::TextKind::json_text) == text);
  }
  std::istringstream blank(std::string(1 << 17, ' '));
  CHECK(io::read_text(blank, "blank", io::TextKind::json_text).size() == 1 << 17);
}

TEST_CASE("JSON nesting: the limit is 256 levels, the document object being the first") {
  // 1 (document) + 255 arrays = 256 levels parse; one more is rejected.
  const auto document = [](std::size_t arrays) { return R"({"parts": )" + nested_arrays(arrays) + "}"; };
  CHECK(io::max_json_depth == 256);
  CHECK_NOTHROW(io::parse(document(255), "at.json"));
  CHECK_THROWS_WITH_AS(io::parse(document(256), "past.json"), doctest::Contains("past.json: JSON nested deeper"),
                       invalid_input);
  // Brackets inside strings, escaped quotes included, do not count.
  CHECK_NOTHROW(io::parse(R"({"s": "\")" + std::string(1000, '[') + R"("})", "string.json"));
  // At the limit a document is read (and rejected for its content) without running out of stack.
  CHECK(contains(error_of([&] {
                   (void)io::from_document<Strategy>(
                       io::parse(R"({"format": "sluice.strategy", "version": 1, "parts": )" + nested_arrays(255) + "}",
                                 "at.json"),
                       "at.json");
                 }),
                 "at.json: strategy: field 'parts'[0]"));
  // A value built in memory, not parsed by io::parse, is checked too; so is a strategy_pool file.
  const io::json deep =
      io::json::parse(R"({"format": "sluice.strategy", "version": 1, "parts": )" + nested_arrays(300) + "}");
  CHECK_THROWS_WITH_AS(io::from_document<Strategy>(deep, "memory"), doctest::Contains("memory: JSON nested deeper"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(io::import_strategy_pool(deep, "pool.json", 8), doctest::Contains("pool.json: JSON nested"),
                       invalid_input);
}

TEST_CASE("JSON numbers: integers are integers of their type's range, never narrowed, rounded or coerced") {
  const io::json strategy = io::to_document(Strategy::parse("2*tp4pp2"));
  CHECK(contains(read_error<Strategy>(strategy, "/parts/0/pipelines", "4294967298"),
                 "doc.json: strategy: field 'parts'[0]: strategy part: field 'pipelines': expected an integer in "
                 "[-2147483648, 2147483647], got 4294967298"));
  CHECK(contains(read_error<Strategy>(strategy, "/parts/0/tp", "4294967304"), "field 'tp': expected an integer"));
  CHECK(contains(read_error<Strategy>(strategy, "/parts/0/pp", "1.9"), "field 'pp': expected an integer"));
  CHECK(contains(read_error<Strategy>(strategy, "/parts/0/pp", "1.9"), "got 1.9"));
  CHECK(contains(read_error<Strategy>(strategy, "/parts/0/pipelines", "true"), "got true"));
  // Integral floats are not integers either: sluice writes integers without a fraction or exponent.
  CHECK(contains(read_error<Strategy>(strategy, "/parts/0/pipelines", "2.0"), "got 2.0"));
  CHECK(contains(read_error<Strategy>(strategy, "/parts/0/pipelines", "2e0"), "got 2.0"));
  for (const std::string_view version : {"1.9", "true", "1.0", "\"1\"", "4294967297"})
    CHECK(contains(read_error<Strategy>(strategy, "/version", version), "doc.json: field 'version'"));

  const io::json profile = io::to_document(bundled("llama2-7b"));
  CHECK(contains(read_error<Profile>(profile, "/cluster/gpus", "16.9"), "profile.cluster: field 'gpus'"));
  CHECK(contains(read_error<Profile>(profile, "/cluster/gpus", "16.9"), "got 16.9"));
  // int64 fields: past the range, whether the parser holds the value as unsigned or as a float.
  CHECK(contains(read_error<Profile>(profile, "/cluster/gpus", "9223372036854775808"),
                 "expected an integer in [-9223372036854775808, 9223372036854775807], got 9223372036854775808"));
  CHECK(contains(read_error<Profile>(profile, "/cluster/gpus", "18446744073709551616"), "field 'gpus'"));
  // Numbers are numbers, booleans booleans, strings strings.
  CHECK(contains(read_error<Profile>(profile, "/util_threshold", "true"), "field 'util_threshold': expected a number"));
  CHECK(contains(read_error<Profile>(profile, "/memory/alpha", "\"0.5\""), "got \"0.5\""));
  CHECK(contains(read_error<Profile>(profile, "/name", "5"), "field 'name': expected a string, got 5"));
  CHECK(contains(read_error<Profile>(profile, "/memory/activation_bytes/8", "true"), "value for \"8\""));
  CHECK(read_error<Profile>(profile, "/memory/alpha", "1") == "(no error)");  // an integer is a number
  CHECK(contains(
      error_of([] { (void)io::json::parse(R"({"tokens_per_batch": 8, "drop_last": 1})").get<data::SamplerOptions>(); }),
      "field 'drop_last': expected true or false, got 1"));
  CHECK(io::json::parse(R"({"tokens_per_batch": 8, "seed": 18446744073709551615})").get<data::SamplerOptions>().seed ==
        std::numeric_limits<std::uint64_t>::max());
  CHECK(contains(
      error_of([] { (void)io::json::parse(R"({"tokens_per_batch": 8, "seed": -1})").get<data::SamplerOptions>(); }),
      "expected an integer in [0, 18446744073709551615], got -1"));

  // Element by element: vectors, nested vectors, arrays, optionals, TP-keyed maps, pieces and MILP terms.
  CHECK(contains(error_of([] { (void)io::as<std::vector<int>>(io::json::parse("[1, 2.5]"), "list"); }),
                 "list[1]: expected an integer"));
  CHECK(contains(error_of([] {
                   (void)io::json::parse(R"({"replicas": [[0, -1]], "loads": [1.0], "max_load": 1.0})")
                       .get<microbatch::ReplicaAssignment>();
                 }),
                 "field 'replicas'[0][1]: expected an integer in [0, 18446744073709551615], got -1"));
  const io::json plan = io::json::parse(R"({"format": "sluice.execution_plan", "version": 1, "stages": 1,
      "micro_batches": 1, "buffer_slots": 0, "ranks": [[{"op": "forward", "micro_batch": 0, "stage": 0, "peer": -1,
      "buffer": -1, "output": -1, "shape": [64, 16]}]]})");
  CHECK(read_error<schedule::ExecutionPlan>(plan, "/ranks/0/0/shape/1", "16") == "(no error)");
  CHECK(contains(read_error<schedule::ExecutionPlan>(plan, "/ranks/0/0/shape/1", "16.5"), "field 'shape'[1]"));
  CHECK(contains(read_error<schedule::ExecutionPlan>(plan, "/ranks/0/0/shape", "[64]"),
                 "expected an array of 2 elements, got 1 elements"));
  CHECK(contains(error_of([] {
                   (void)io::json::parse(R"({"max_len": 8, "integer": 1, "relaxed": true, "share": 1})")
                       .get<proposal::LengthOptimum>();
                 }),
                 "field 'relaxed': expected a number, got true"));
  CHECK_FALSE(io::json::parse(R"({"max_len": 8, "integer": 1, "relaxed": null, "share": 1})")
                  .get<proposal::LengthOptimum>()
                  .relaxed.has_value());
  CHECK(contains(error_of([] { (void)io::json::parse("[0, 1.5, 2]").get<shard::Piece>(); }), "piece: begin"));
  auto pool = io::parse(strategy_pool_text, "pool.json");
  pool["cluster_config"]["utilization_seqlen"]["tp8"] = 1024.5;
  CHECK(contains(error_of([&] { (void)io::import_strategy_pool(pool, "pool.json", 8); }),
                 "pool.json.cluster_config.utilization_seqlen: value for \"tp8\": expected an integer"));
  solver::Model milp;
  milp.add_binary(1, "b");
  auto milp_document = io::to_document(milp);
  milp_document["sense"] = "maximise";  // once read as minimize without a word
  CHECK(contains(error_of([&] { (void)io::from_document<solver::Model>(milp_document); }),
                 "sense must be \"minimize\" or \"maximize\", got \"maximise\""));
}

TEST_CASE("profile: util_threshold must be in (0, 1) even when every scheme states its UtilLen") {
  ProfileSpec spec;
  spec.name = "stated";
  spec.gpus = 8;
  spec.schemes = {{Scheme(8, 1), QuadraticLatency(1e-9, 1e-5, 1e-2), 65536, 1024}};
  const io::json document = io::to_document(Profile(spec));
  for (const std::string_view threshold : {"0", "1", "0.0", "1.0", "-0.5", "1.5"}) {
    CAPTURE(threshold);
    CHECK(contains(read_error<Profile>(document, "/util_threshold", threshold), "util_threshold must be in (0, 1)"));
  }
  spec.util_threshold = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(Profile{spec}, doctest::Contains("util_threshold must be in (0, 1), got nan"), invalid_input);
  spec.util_threshold = 0.5;
  CHECK_NOTHROW(Profile{spec});
}

TEST_CASE("JSON numbers: errors quote the value as written, not as converted") {
  const io::json cluster = bundled_json("clusters", "a100-8.json");
  const std::string memory = read_error<search::ClusterSpec>(cluster, "/memory_bytes", "1e308");
  CHECK(contains(memory, "doc.json: cluster: field 'memory_bytes': expected an integer"));
  CHECK(contains(memory, "got 1e+308"));
  CHECK_FALSE(contains(memory, "got -9223372036854775808"));
  CHECK(contains(read_error<search::ClusterSpec>(cluster, "/gpus", "1099511627776"),
                 "gpus must be a power of 2 in [1, 2^20], got 1099511627776"));
  CHECK(contains(read_error<search::ClusterSpec>(cluster, "/gpus", "1099511627776"), "doc.json: "));
  // A huge GPU memory gives a MaxLen capped at 2^52 tokens, never a wrapped one, whatever the granularity; no
  // scheme runs that many tokens within the profile's time range, so the profile is refused naming the scheme.
  io::json profile = io::to_document(bundled("llama2-7b"));
  profile["memory"]["gpu_memory_bytes"] = 1e308;
  for (const std::int64_t granularity : {std::int64_t{128}, std::int64_t{1} << 40, std::int64_t{3}}) {
    CAPTURE(granularity);
    profile["memory"]["granularity"] = granularity;
    const std::string error = read_error<Profile>(profile, "/name", "\"huge\"");
    CHECK(contains(error, "profile huge: tp"));
    CHECK(contains(error, "latency T(max_len = "));
    CHECK_FALSE(contains(error, "max_len = -"));
  }
  // 2^31 − 1 layers: the per-stage layer count does not wrap to a negative memory.
  profile = io::to_document(bundled("llama2-7b"));
  profile["model"]["layers"] = std::numeric_limits<int>::max();
  const Profile layered = io::from_document<Profile>(profile, "layers.json");
  for (const SchemeCost& scheme : layered.schemes()) CHECK(scheme.max_len == 0);
  // Errors from the memory and latency models name the profile and the scheme.
  profile = io::to_document(bundled("llama2-7b"));
  profile["memory"]["activation_bytes"].erase("8");
  CHECK(contains(read_error<Profile>(profile, "/name", "\"p7\""),
                 "doc.json: profile p7: tp8pp1: memory model: no "
                 "activation constant A for tp 8"));
}

TEST_CASE("JSON errors stay on one line whatever the strings in the file hold") {
  const io::json strategy = io::to_document(Strategy::parse("1*tp1pp1"));
  const std::string format = read_error<Strategy>(strategy, "/format", R"("sluice.strategy\nversion: 2")");
  CHECK(format.find('\n') == std::string::npos);
  CHECK(contains(format, R"(got "sluice.strategy\nversion: 2")"));
  auto profile = io::to_document(bundled("llama2-7b"));
  profile["memory"]["activation_bytes"]["tp\n8"] = 1;
  const std::string key = error_of([&] { (void)io::from_document<Profile>(profile, "p.json"); });
  CHECK(key.find('\n') == std::string::npos);
  CHECK(contains(key, R"(key "tp\n8" is not a TP degree)"));
  const std::string long_string = read_error<Strategy>(strategy, "/format", '"' + std::string(10'000, 'x') + '"');
  CHECK(long_string.size() < 200);
}

TEST_CASE("every bundled JSON file reads") {
  for (const auto& name : io::bundled_names("profiles")) CHECK_NOTHROW(bundled(name));
  for (const auto& file : std::filesystem::directory_iterator(io::bundled_data_dir() / "models")) {
    CAPTURE(file.path());
    CHECK_NOTHROW(io::read_document<search::ModelSpec>(file.path()));
  }
  for (const auto& file : std::filesystem::directory_iterator(io::bundled_data_dir() / "clusters")) {
    CAPTURE(file.path());
    CHECK_NOTHROW(io::read_document<search::ClusterSpec>(file.path()));
  }
}
