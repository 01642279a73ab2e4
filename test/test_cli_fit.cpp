// `sluice fit` and profiles read from Hetu strategy_pool files: known coefficients recovered, the fitted profile
// read back by --profile, bad samples refused with one line, the output written whole or not at all.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli_harness.hpp"
#include "sluice/core/random.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/fit_run_json.hpp"
#include "sluice/io/samples.hpp"
#include "sluice/io/strategy_pool.hpp"

using sluice::test::check_bad_input;
using sluice::test::run_cli;
namespace cost = sluice::cost;
namespace io = sluice::io;

namespace {

std::filesystem::path scratch() {
  const auto dir = std::filesystem::temp_directory_path() / "sluice_test_cli_fit";
  std::filesystem::create_directories(dir);
  return dir;
}

std::string write(const std::string& name, std::string_view text) {
  const std::string path = (scratch() / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

struct Truth {
  sluice::Scheme scheme;
  double a, b, c;
  double fixed, per_token;  // per_token 0: no peak bytes
};

const std::vector<Truth> truths = {{sluice::Scheme(1, 2), 1.372e-9, 9.465e-5, 0.01505, 2.4e10, 4.98e6},
                                   {sluice::Scheme(2, 2), 1.027e-9, 4.907e-5, 0.03187, 1.5e10, 2.1e6},
                                   {sluice::Scheme(4, 1), 1.03e-9, 5.648e-5, 0.0567, 0, 0}};
const std::vector<std::int64_t> lengths = {256, 512, 1024, 2048, 4096, 8192, 16384};

std::vector<cost::ProfileSample> exact_samples() {
  std::vector<cost::ProfileSample> samples;
  for (const Truth& truth : truths)
    for (const std::int64_t length : lengths) {
      const auto l = static_cast<double>(length);
      cost::ProfileSample sample{truth.scheme, length, truth.a * l * l + truth.b * l + truth.c, std::nullopt,
                                 std::nullopt};
      if (truth.per_token > 0) sample.peak_bytes = truth.fixed + truth.per_token * l;
      samples.push_back(sample);
    }
  return samples;
}

// A strategy_pool file in the Hetu/Hydraulis layout (milliseconds, MiB), made by hand.
// Two schemes of a 16-layer model on 40 GB GPUs; tp2 has no measured UtilLen, so it is derived.
const char* const pool_text = R"({
  "strategies": [{"tp": 2, "pp": 1, "a": 2e-6, "b": 0.1, "c": 30},
                 {"tp": 1, "pp": 4, "a": 1e-6, "b": 0.05, "c": 10}],
  "memory_regression": {"A": {"tp1": 40, "tp2": 44, "tp4": 48}, "B": 200, "alpha": 0.75, "gap": 2000,
                        "safe_bound": 4096},
  "model_config": {"H": 2048, "L": 16, "V": 32000},
  "cluster_config": {"gpus_per_node": 4, "gpu_memory_bound": 40960, "utilization_seqlen": {"tp1": 256}}
})";

bool near(double x, double y, double relative) { return std::abs(x - y) <= relative * std::abs(y); }

}  // namespace

TEST_CASE("cli: fit recovers known coefficients, and --profile reads the fitted profile back") {
  const auto samples = exact_samples();
  const std::string csv = write("exact.csv", io::profile_samples_csv(samples));
  const std::string out = (scratch() / "fitted.json").string();
  std::filesystem::remove(out);
  const auto result = run_cli({"fit", "--samples", csv, "--base", "llama2-7b", "--out", out, "--json"});
  REQUIRE(result.code == 0);
  CHECK(result.err.empty());
  const auto document = io::json::parse(result.out);
  CHECK(document.at("format") == "sluice.fit_run");
  CHECK(document.at("out") == out);
  REQUIRE(document.at("schemes").size() == 3);

  const cost::Profile fitted = io::read_profile(out);
  CHECK(fitted.name() == "exact");
  CHECK(fitted.gpus() == 16);
  const cost::Profile base = io::read_profile(io::resolve_data_file("llama2-7b", "profiles"));
  CHECK(fitted.spec().model == base.spec().model);
  for (const Truth& truth : truths) {
    CAPTURE(truth.scheme.name());
    const cost::SchemeCost& scheme = fitted.at(truth.scheme);
    CHECK(near(scheme.latency.a(), truth.a, 1e-9));
    CHECK(near(scheme.latency.b(), truth.b, 1e-9));
    CHECK(near(scheme.latency.c(), truth.c, 1e-9));
    if (truth.per_token > 0) {
      // MaxLen stated from the fitted memory against the base's budget.
      const cost::LinearMemory memory(truth.fixed, truth.per_token, base.spec().memory->budget_bytes(), 128);
      CHECK(scheme.max_len == memory.max_len());
      CHECK(scheme.max_len > 0);
    } else {
      CHECK(scheme.max_len == base.max_len(truth.scheme));  // from the base's memory model
    }
  }
  for (const auto& row : document.at("schemes")) {
    CHECK(row.at("latency_error").get<double>() < 1e-12);
    CHECK(row.at("samples") == lengths.size());
    if (!row.at("memory").is_null()) CHECK(row.at("memory").at("relative_rms_error").get<double>() < 1e-12);
  }
  CHECK(io::from_document<cost::Profile>(document.at("profile")).spec().schemes == fitted.spec().schemes);

  // The fitted profile through --profile gives the latency the samples were made from.
  const auto inspected = run_cli({"inspect", "--profile", out, "--json"});
  REQUIRE(inspected.code == 0);
  int checked = 0;
  const auto inspection = io::json::parse(inspected.out);
  for (const auto& scheme : inspection.at("profile").at("schemes")) {
    const auto it = std::ranges::find_if(truths, [&](const Truth& truth) {
      return truth.scheme.tp() == scheme.at("tp").get<int>() && truth.scheme.pp() == scheme.at("pp").get<int>();
    });
    REQUIRE(it != truths.end());
    for (const auto& time : scheme.at("times")) {
      const auto l = time.at("length").get<double>();
      CHECK(near(time.at("seconds").get<double>(), it->a * l * l + it->b * l + it->c, 1e-9));
      ++checked;
    }
  }
  CHECK(checked == 12);

  // The same samples as a sluice.profile_samples document fit to the same profile.
  const std::string json_path = (scratch() / "exact.json").string();
  io::write_document(json_path, cost::ProfileSamples{samples});
  const std::string out_json = (scratch() / "fitted_from_json.json").string();
  REQUIRE(run_cli({"fit", "--samples", json_path, "--base", "llama2-7b", "--name", "exact", "--out", out_json}).code ==
          0);
  CHECK(io::read_profile(out_json).spec().schemes == fitted.spec().schemes);
}

TEST_CASE("cli: fit prints a table with each scheme's error") {
  const std::string csv = write("table.csv", io::profile_samples_csv(exact_samples()));
  const auto result = run_cli({"fit", "--samples", csv, "--base", "llama2-7b", "--gpus", "8"});
  REQUIRE(result.code == 0);
  CHECK(result.out.find("profile table: LLaMA2-7B, 8 GPUs") != std::string::npos);
  CHECK(result.out.find("  tp1pp2") != std::string::npos);
  CHECK(result.out.find("0.00%") != std::string::npos);
  CHECK(result.out.find("no --out: the profile was not written") != std::string::npos);
}

TEST_CASE("cli: fit reads the executor profiler's samples (no peak bytes) to the profiler's own fit") {
  // What sluice_profile_gpu --samples writes: io::profile_samples_csv of its measured (length, seconds), without
  // peak bytes, which measure one stage's activations only. Seeded noise of ±2% on a known quadratic.
  sluice::Rng rng(7);
  std::vector<cost::ProfileSample> samples;
  std::vector<cost::LatencySample> latencies;
  for (const int pp : {1, 2, 4})
    for (const std::int64_t length : {256, 512, 1024, 2048, 4096, 8192}) {
      const auto l = static_cast<double>(length);
      const double seconds = (2e-10 * l * l + 3e-6 * l + 4e-4) / pp * (1 + 0.02 * (2 * rng.uniform() - 1));
      samples.push_back({sluice::Scheme(1, pp), length, seconds, std::nullopt, std::nullopt});
      if (pp == 2) latencies.push_back({length, seconds});
    }
  const std::string csv = write("executor.csv", io::profile_samples_csv(samples));
  CHECK(io::parse_profile_samples_csv(io::read_text_file(csv), csv).samples == samples);
  const std::string out = (scratch() / "executor_fitted.json").string();
  const auto result = run_cli({"fit", "--samples", csv, "--base", "llama2-7b", "--out", out});
  REQUIRE(result.code == 0);
  CHECK(io::read_profile(out).at(sluice::Scheme(1, 2)).latency == cost::fit_quadratic(latencies).model);
}

TEST_CASE("cli: fit takes a middle stage's inner seconds as the last stage's own work") {
  // A ⟨1, 2⟩ stage of known layers, and the last stage with a head linear in the tokens besides: the profiler's CSV.
  const cost::QuadraticLatency inner(1.1e-9, 5e-5, 3e-3);
  const cost::LastStageWork head(2e-5, 1.5e-3);
  std::vector<cost::ProfileSample> samples;
  std::vector<cost::LatencySample> last_latencies, inner_latencies;
  for (const std::int64_t length : lengths) {
    samples.push_back(
        {sluice::Scheme(1, 2), length, inner(length) + head.seconds(length), std::nullopt, inner(length)});
    last_latencies.push_back({length, samples.back().seconds});
    inner_latencies.push_back({length, inner(length)});
  }
  const std::string text = io::profile_samples_csv(samples);
  CHECK(text.starts_with("tp,pp,tokens,seconds,peak_bytes,inner_seconds\n"));
  const std::string csv = write("inner.csv", text);
  CHECK(io::parse_profile_samples_csv(io::read_text_file(csv), csv).samples == samples);
  const io::json document = io::to_document(cost::ProfileSamples{samples});
  CHECK(io::from_document<cost::ProfileSamples>(document).samples == samples);
  const std::string out = (scratch() / "inner_fitted.json").string();
  REQUIRE(run_cli({"fit", "--samples", csv, "--base", "llama2-7b", "--out", out}).code == 0);
  const cost::LastStageWork work = io::read_profile(out).at(sluice::Scheme(1, 2)).last_stage;
  CHECK(near(work.b(), head.b(), 1e-9));
  CHECK(near(work.c(), head.c(), 1e-9));
  const auto table = run_cli({"fit", "--samples", csv, "--base", "llama2-7b"});
  CHECK(table.out.find("last stage's own work b*tokens + c") != std::string::npos);
  const auto report = run_cli({"fit", "--samples", csv, "--base", "llama2-7b", "--json"});
  REQUIRE(report.code == 0);
  const auto run = io::from_document<io::FitRun>(io::json::parse(report.out));
  REQUIRE(run.schemes.size() == 1);
  CHECK(run.schemes.front().inner_latency ==
        cost::fit_last_and_other_stage(last_latencies, inner_latencies).other.model);
  CHECK(run.profile.at(sluice::Scheme(1, 2)).last_stage == work);
  const std::string header = "tp,pp,tokens,seconds,inner_seconds\n";
  check_bad_input({
      {{"fit", "--samples", write("inner_nan.csv", header + "1,2,512,0.1,nan\n"), "--base", "llama2-7b"},
       "inner_nan.csv: line 2: inner_seconds must be finite and > 0"},
      {{"fit", "--samples", write("inner_text.csv", header + "1,2,512,0.1,fast\n"), "--base", "llama2-7b"},
       "inner_text.csv: line 2: inner_seconds: 'fast' is not a number"},
      {{"fit", "--samples", write("inner_one.csv", header + "1,1,512,0.1,0.1\n1,1,1024,0.2,0.2\n1,1,2048,0.4,0.4\n"),
        "--base", "llama2-7b"},
       "fit: scheme tp1pp1: inner seconds are given but the pipeline has one stage"},
  });
}

TEST_CASE("cli: fit refuses a fit that does not explain the samples") {
  sluice::Rng rng(11);
  std::vector<cost::ProfileSample> samples = exact_samples();
  for (cost::ProfileSample& sample : samples)
    if (sample.scheme == sluice::Scheme(2, 2)) sample.seconds *= 1 + 0.5 * (2 * rng.uniform() - 1);
  const std::string csv = write("noisy.csv", io::profile_samples_csv(samples));
  const std::string out = write("kept.json", "unchanged\n");
  check_bad_input({{{"fit", "--samples", csv, "--base", "llama2-7b", "--out", out},
                    "fit: scheme tp2pp2: latency fit's relative RMS error"}});
  std::ifstream kept(out);
  std::string text;
  std::getline(kept, text);
  CHECK(text == "unchanged");  // a refused fit leaves the output as it was
  // A looser limit accepts the same samples.
  CHECK(run_cli({"fit", "--samples", csv, "--base", "llama2-7b", "--max-error", "1"}).code == 0);

  std::vector<cost::ProfileSample> memory = exact_samples();
  for (std::size_t i = 0; i < memory.size(); ++i)
    if (memory[i].peak_bytes) *memory[i].peak_bytes *= i % 2 == 0 ? 1.3 : 0.7;
  const std::string memory_csv = write("noisy_memory.csv", io::profile_samples_csv(memory));
  check_bad_input({{{"fit", "--samples", memory_csv, "--base", "llama2-7b"},
                    "fit: scheme tp1pp2: memory fit's relative RMS error"}});
}

TEST_CASE("cli: fit's bad inputs exit 2 with one line naming the input") {
  const std::string header = "tp,pp,tokens,seconds,peak_bytes\n";
  const std::string good = write("good.csv", io::profile_samples_csv(exact_samples()));
  const std::string nan = write("nan.csv", header + "1,1,512,nan,\n1,1,1024,0.2,\n1,1,2048,0.3,\n");
  const std::string negative = write("negative.csv", header + "1,1,512,-0.1,\n1,1,1024,0.2,\n1,1,2048,0.3,\n");
  const std::string negative_bytes = write("negative_bytes.csv", header + "1,1,512,0.1,-5\n");
  const std::string empty = write("empty.csv", "");
  const std::string header_only = write("header_only.csv", header);
  const std::string two_lengths = write("two.csv", header + "1,1,512,0.1,\n1,1,1024,0.2,\n1,1,1024,0.21,\n");
  const std::string bad_scheme = write("scheme.csv", header + "0,1,512,0.1,\n");
  // TP 3: the base's memory model has no activation constant for it, and the samples no peak bytes.
  const std::string no_memory = write("tp3.csv", header + "3,1,512,0.1,\n3,1,1024,0.2,\n3,1,2048,0.4,\n");
  const std::string huge_scheme = write("huge.csv", header + "1,99999999,512,0.1,\n");
  const std::string short_row = write("short.csv", header + "1,1,512\n");
  const std::string text_cell = write("text.csv", header + "1,1,abc,0.1,\n");
  const std::string unknown_column = write("column.csv", "tp,pp,tokens,seconds,watts\n");
  const std::string missing_column = write("missing.csv", "tp,pp,seconds\n1,1,0.1\n");
  const std::string mixed = write("mixed.csv", header + "1,1,512,0.1,1e9\n1,1,1024,0.2,\n1,1,2048,0.3,3e9\n");
  const std::string flat = write("flat.csv", header + "1,1,512,0.1,1e9\n1,1,1024,0.2,1e9\n1,1,2048,0.4,1e9\n");
  const std::string truncated = write("truncated.json", R"({"format": "sluice.profile_samples", "version": 1, "sam)");
  const std::string no_samples =
      write("none.json", R"({"format": "sluice.profile_samples", "version": 1, "samples": []})");
  const std::string json_negative = write("json_negative.json", R"({"format": "sluice.profile_samples", "version": 1,
                                                                    "samples": [{"tokens": 5, "seconds": -1}]})");
  check_bad_input({
      {{"fit", "--base", "llama2-7b"}, "option --samples is required"},
      {{"fit", "--samples", good}, "option --base is required"},
      {{"fit", "--samples", good, "--base", "llama2-7b", "--max-error", "0"}, "option --max-error"},
      {{"fit", "--samples", good, "--base", "llama2-7b", "--max-error", "nan"}, "option --max-error"},
      {{"fit", "--samples", good, "--base", "no-such-profile"}, "no-such-profile: no such file"},
      {{"fit", "--samples", (scratch() / "absent.csv").string(), "--base", "llama2-7b"}, "absent.csv: cannot open"},
      {{"fit", "--samples", nan, "--base", "llama2-7b"}, "nan.csv: line 2: seconds must be finite and > 0"},
      {{"fit", "--samples", negative, "--base", "llama2-7b"}, "negative.csv: line 2: seconds must be finite and > 0"},
      {{"fit", "--samples", negative_bytes, "--base", "llama2-7b"}, "line 2: peak_bytes must be finite and > 0"},
      {{"fit", "--samples", empty, "--base", "llama2-7b"}, "empty.csv: empty samples file"},
      {{"fit", "--samples", header_only, "--base", "llama2-7b"}, "header_only.csv: no samples after the header"},
      {{"fit", "--samples", two_lengths, "--base", "llama2-7b"},
       "fit: scheme tp1pp1: fit: needs samples at 3 or more distinct lengths, got 2"},
      {{"fit", "--samples", bad_scheme, "--base", "llama2-7b"}, "scheme.csv: line 2: scheme: tp must be in"},
      {{"fit", "--samples", huge_scheme, "--base", "llama2-7b"}, "huge.csv: line 2: scheme: pp must be in"},
      {{"fit", "--samples", no_memory, "--base", "llama2-7b"},
       "tp3pp1: memory model: no activation constant A for tp 3"},
      {{"fit", "--samples", short_row, "--base", "llama2-7b"}, "short.csv: line 2: expected 5 comma-separated"},
      {{"fit", "--samples", text_cell, "--base", "llama2-7b"}, "text.csv: line 2: tokens: 'abc' is not an integer"},
      {{"fit", "--samples", unknown_column, "--base", "llama2-7b"}, "column.csv: line 1: unknown column 'watts'"},
      {{"fit", "--samples", missing_column, "--base", "llama2-7b"}, "missing.csv: line 1: the header has no column"},
      {{"fit", "--samples", mixed, "--base", "llama2-7b"}, "fit: scheme tp1pp1: peak bytes are given for 2 of its 3"},
      {{"fit", "--samples", flat, "--base", "llama2-7b"}, "fit: scheme tp1pp1: peak bytes do not grow"},
      {{"fit", "--samples", truncated, "--base", "llama2-7b"}, "truncated.json: not valid JSON"},
      {{"fit", "--samples", no_samples, "--base", "llama2-7b"}, "none.json: profile_samples: field 'samples' is empty"},
      {{"fit", "--samples", json_negative, "--base", "llama2-7b"}, "seconds must be finite and > 0, got -1"},
      {{"fit", "--samples", good, "--base", "llama2-7b", "--out", (scratch() / "no" / "dir.json").string()},
       "dir.json"},
  });
  CHECK_FALSE(std::filesystem::exists(scratch() / "no"));
}

TEST_CASE("cli: --profile and fit --base read Hetu strategy_pool files") {
  const std::string pool = write("strategy_pool_small.json", pool_text);
  const auto inspected = run_cli({"inspect", "--profile", pool, "--gpus", "8", "--json"});
  REQUIRE(inspected.code == 0);
  const cost::Profile imported(io::import_strategy_pool(io::parse(pool_text, pool), pool, 8));
  const auto schemes = io::json::parse(inspected.out).at("profile").at("schemes");
  REQUIRE(schemes.size() == imported.schemes().size());
  for (std::size_t i = 0; i < schemes.size(); ++i) {
    CHECK(schemes[i].at("max_len") == imported.schemes()[i].max_len);
    CHECK(schemes[i].at("util_len") == imported.schemes()[i].util_len);
    CHECK(schemes[i].at("latency").at("a").get<double>() == imported.schemes()[i].latency.a());
  }
  CHECK(imported.at(sluice::Scheme(1, 4)).util_len == 256);
  CHECK(imported.at(sluice::Scheme(2, 1)).util_len == imported.at(sluice::Scheme(2, 1)).latency.util_len(0.85));
  // Without --gpus a pool, which states no cluster size, is resolved for its largest scheme.
  CHECK(io::read_profile(pool).gpus() == 4);

  const std::string csv = write("pool_base.csv", io::profile_samples_csv(exact_samples()));
  const auto fitted = run_cli({"fit", "--samples", csv, "--base", pool, "--gpus", "16", "--json"});
  REQUIRE(fitted.code == 0);
  const auto profile = io::from_document<cost::Profile>(io::json::parse(fitted.out).at("profile"));
  CHECK(profile.gpus() == 16);
  CHECK(profile.spec().model.layers == 16);
  CHECK(profile.spec().gpus_per_node == 4);
  CHECK(profile.schemes().size() == 3);

  // A pool with a bad field is reported by --profile like any profile.
  const std::string bad = write("bad_pool.json", R"({"strategies": [], "memory_regression": {}})");
  check_bad_input({{{"inspect", "--profile", bad}, "bad_pool.json: missing field 'model_config'"}});
}

TEST_CASE("cli: fit --help, and fit among the commands") {
  const auto help = run_cli({"fit", "--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("--max-error E") != std::string::npos);
  CHECK(run_cli({"--help"}).out.find("  fit ") != std::string::npos);
  check_bad_input({{{"fit", "--no-such-option"}, "unknown option --no-such-option"}});
}

TEST_CASE("cli: fit takes samples of CP and AC schemes, named in a scheme column") {
  std::vector<cost::ProfileSample> samples = exact_samples();
  for (const char* name : {"tp2cp4ringpp1", "tp1cp2ulyssespp2ac"})
    for (const std::int64_t length : lengths) {
      const auto l = static_cast<double>(length);
      samples.push_back(
          {sluice::Scheme::parse(name), length, 3e-10 * l * l + 2e-5 * l + 0.02, std::nullopt, std::nullopt});
    }
  const std::string text = io::profile_samples_csv(samples);
  CHECK(text.starts_with("scheme,tokens,seconds,peak_bytes\n"));
  const std::string csv = write("cp.csv", text);
  CHECK(io::parse_profile_samples_csv(io::read_text_file(csv), csv).samples == samples);
  const auto result = run_cli({"fit", "--samples", csv, "--base", "llama2-7b", "--json"});
  REQUIRE(result.code == 0);
  const io::json document = io::json::parse(result.out);
  CHECK(document.at("version") == 2);  // it holds CP schemes
  const cost::Profile fitted = io::from_document<cost::Profile>(document.at("profile"));
  const cost::SchemeCost& ring = fitted.at(sluice::Scheme::parse("tp2cp4ringpp1"));
  CHECK(near(ring.latency.a(), 3e-10, 1e-6));
  // MaxLen from the base's memory model, which divides activations by C.
  CHECK(ring.max_len > fitted.at(sluice::Scheme(2, 2)).max_len);
  const std::string both = write("both.csv", "scheme,tp,tokens,seconds\ntp1pp1,1,512,0.1\n");
  const std::string bad = write("bad_name.csv", "scheme,tokens,seconds\ntp1cp4stripepp1,512,0.1\n");
  check_bad_input({{{"fit", "--samples", both, "--base", "llama2-7b"}, "names the scheme twice"},
                   {{"fit", "--samples", bad, "--base", "llama2-7b"}, "bad_name.csv: line 2: scheme: cannot parse"}});
}

TEST_CASE("cli: fit takes packed micro-batches in a sequences column") {
  // The executor profiler's shapes: one sequence of each length, then the longer lengths' tokens as packed sequences
  // of the shortest (a sample of k sequences of l tokens costs k·(a·l² + b·l) + c).
  const cost::QuadraticLatency truth(2e-10, 2e-6, 4.5e-3);
  std::vector<cost::ProfileSample> samples;
  for (const std::int64_t length : lengths)
    samples.push_back({sluice::Scheme::parse("tp2cp2ringpp1"), length, truth(length), std::nullopt, std::nullopt});
  for (std::int64_t sequences = 2; sequences <= 64; sequences *= 2)
    samples.push_back({sluice::Scheme::parse("tp2cp2ringpp1"), 256, cost::predicted_seconds(truth, {256, 0, sequences}),
                       std::nullopt, std::nullopt, sequences});
  const std::string text = io::profile_samples_csv(samples);
  CHECK(text.starts_with("scheme,tokens,seconds,peak_bytes,sequences\n"));
  const std::string csv = write("packed.csv", text);
  CHECK(io::parse_profile_samples_csv(io::read_text_file(csv), csv).samples == samples);
  const io::json document = io::to_document(cost::ProfileSamples{samples});
  CHECK_FALSE(document.at("samples").front().contains("sequences"));  // one sequence: the field is left out
  CHECK(document.at("samples").back().at("sequences") == 64);
  CHECK(io::from_document<cost::ProfileSamples>(document).samples == samples);
  const auto result = run_cli({"fit", "--samples", csv, "--base", "llama2-7b", "--json"});
  REQUIRE(result.code == 0);
  const cost::Profile fitted = io::from_document<cost::Profile>(io::json::parse(result.out).at("profile"));
  const cost::QuadraticLatency& fit = fitted.at(sluice::Scheme::parse("tp2cp2ringpp1")).latency;
  CHECK(near(fit.a(), truth.a(), 1e-6));
  CHECK(near(fit.b(), truth.b(), 1e-6));
  CHECK(near(fit.c(), truth.c(), 1e-6));
  // An empty cell is one sequence, as a CSV without the column has it.
  const std::string header = "tp,pp,tokens,seconds,sequences\n";
  CHECK(io::parse_profile_samples_csv(header + "1,1,512,0.1,\n", "empty cell").samples.front().sequences == 1);
  check_bad_input({
      {{"fit", "--samples", write("packed_zero.csv", header + "1,1,512,0.1,0\n"), "--base", "llama2-7b"},
       "packed_zero.csv: line 2: sequences must be in [1, 2^20], got 0"},
      {{"fit", "--samples", write("packed_negative.csv", header + "1,1,512,0.1,-3\n"), "--base", "llama2-7b"},
       "packed_negative.csv: line 2: sequences must be in [1, 2^20], got -3"},
      {{"fit", "--samples", write("packed_huge.csv", header + "1,1,512,0.1,1048577\n"), "--base", "llama2-7b"},
       "packed_huge.csv: line 2: sequences must be in [1, 2^20], got 1048577"},
      {{"fit", "--samples", write("packed_past.csv", header + "1,1,4294967296,0.1,2\n"), "--base", "llama2-7b"},
       "packed_past.csv: line 2: 2 sequences of 4294967296 tokens exceed 2^32 tokens in a micro-batch"},
      {{"fit", "--samples", write("packed_range.csv", header + "1,1,512,0.1,99999999999999999999\n"), "--base",
        "llama2-7b"},
       "packed_range.csv: line 2: sequences: '99999999999999999999' is not an integer"},
      {{"fit", "--samples", write("packed_text.csv", header + "1,1,512,0.1,two\n"), "--base", "llama2-7b"},
       "packed_text.csv: line 2: sequences: 'two' is not an integer"},
      {{"fit", "--samples", write("packed.json", R"({"format": "sluice.profile_samples", "version": 1,
                                 "samples": [{"tp": 1, "pp": 1, "tokens": 5, "seconds": 1, "sequences": 0}]})"),
        "--base", "llama2-7b"},
       "sequences must be in [1, 2^20], got 0"},
  });
}
