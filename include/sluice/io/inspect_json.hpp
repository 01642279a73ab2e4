#pragma once
// JSON for what `sluice inspect --json` prints ("sluice.inspect", version 1, its CP variant 2): a length dataset's
// statistics and histogram, a profile's schemes with T(l) at inspect_lengths, and with --cp each scheme derived
// with context parallelism. Inspect holds the report as written (a derived scheme's times, not its setup), so
// that a reader gets back every number the tool printed, and reading it needs no Eigen.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "sluice/core/scheme.hpp"
#include "sluice/cost/links.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/data_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"

namespace sluice::io {

// The lengths at which `sluice inspect` reports each scheme's time.
inline constexpr std::array<std::int64_t, 4> inspect_lengths = {1024, 4096, 16384, 32768};

// A scheme's forward+backward time of one stage at `length`, and whether a micro-batch of it fits (length <= MaxLen).
struct InspectTime {
  std::int64_t length = 0;
  double seconds = 0;
  bool fits = false;
  friend bool operator==(const InspectTime&, const InspectTime&) = default;
};

struct InspectScheme {
  cost::SchemeCost cost;
  std::vector<InspectTime> times;
};

struct InspectDataset {
  std::string source;
  std::optional<std::int64_t> context;  // sequences truncated to it
  data::LengthStats stats;
  data::LengthHistogram histogram;
};

struct InspectProfile {
  std::string name;
  cost::ModelInfo model;
  std::int64_t gpus = 0;
  std::vector<InspectScheme> schemes;
};

// A scheme derived with context parallelism: its MaxLen, the quadratic fitted to its derived times and its times.
struct InspectCpScheme {
  Scheme scheme;
  std::int64_t max_len = 0;
  cost::QuadraticLatency fit;
  double fit_error = 0;  // the fit's relative RMS error
  std::vector<InspectTime> times;
  friend bool operator==(const InspectCpScheme&, const InspectCpScheme&) = default;
};

struct InspectContextParallel {
  int degree = 2;
  CpKind kind = CpKind::ring;
  int ulysses = 1;  // the Ulysses degree: the hybrid's, C for Ulysses alone, 1 for the ring
  bool recompute = false;
  int heads = 0;
  int kv_heads = 0;
  cost::Links links;
  std::vector<InspectCpScheme> schemes;
  std::vector<std::string> not_derived;  // schemes whose heads do not split, or too wide for the cluster
};

struct Inspect {
  InspectDataset dataset;
  InspectProfile profile;
  std::optional<InspectContextParallel> context_parallel;  // with --cp only
};

template <class Seconds>
std::vector<InspectTime> inspect_times(std::int64_t max_len, const Seconds& seconds) {
  std::vector<InspectTime> times;
  for (const std::int64_t length : inspect_lengths) times.push_back({length, seconds(length), length <= max_len});
  return times;
}

// The report of `dataset` and `profile`; `context_parallel` with --cp. Deriving CP schemes needs Eigen
// (cost/context_parallel.hpp), so their report is the caller's to build.
inline Inspect inspect(const data::LengthDataset& dataset, const data::LengthHistogram& histogram,
                       const cost::Profile& profile, std::optional<InspectContextParallel> context_parallel) {
  Inspect report{{dataset.source(), dataset.context(), dataset.stats(), histogram},
                 {profile.name(), profile.spec().model, profile.gpus(), {}},
                 std::move(context_parallel)};
  for (const cost::SchemeCost& scheme : profile.schemes())
    report.profile.schemes.push_back(
        {scheme, inspect_times(scheme.max_len, [&](std::int64_t length) { return scheme.latency(length); })});
  return report;
}

SLUICE_IO_DOCUMENT(Inspect, "sluice.inspect", 1);

// Described before detail::inspect_times reads it.
// "context" only where the sequences were truncated.
template <>
struct record<InspectDataset> {
  using T = InspectDataset;
  static constexpr std::string_view name = "dataset";
  static constexpr auto fields =
      std::tuple{SLUICE_IO_MEMBERS(source), member("context", &T::context, Presence::omitted_when_empty),
                 SLUICE_IO_MEMBERS(stats, histogram)};
  static void check(const T& dataset) {
    sluice::require(!dataset.context || *dataset.context >= 1, name, ": field 'context' must be >= 1, got ",
                    dataset.context.value_or(0));
  }
};

SLUICE_IO_RECORD(InspectTime, "time", SLUICE_IO_MEMBERS(length, seconds, fits));

template <>
struct record<InspectProfile> {
  using T = InspectProfile;
  static constexpr std::string_view name = "profile";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(name, model, gpus, schemes)};
  static void check(const T& value) {
    sluice::require(value.gpus >= 1, name, ": field 'gpus' must be >= 1, got ", value.gpus);
  }
};

namespace detail {

// Times at inspect_lengths, each fitting exactly when its length is at most `max_len`.
inline std::vector<InspectTime> inspect_times(const json& in, std::int64_t max_len, std::string_view where) {
  const auto times = field<std::vector<InspectTime>>(in, "times", where);
  sluice::require(times.size() == inspect_lengths.size(), where, ": field 'times': expected ", inspect_lengths.size(),
                  " times, got ", times.size());
  for (std::size_t k = 0; k < times.size(); ++k) {
    sluice::require(times[k].length == inspect_lengths[k], where, ": field 'times'[", k, "]: expected length ",
                    inspect_lengths[k], ", got ", times[k].length);
    sluice::require(times[k].fits == (times[k].length <= max_len), where, ": field 'times'[", k, "]: 'fits' is ",
                    times[k].fits ? "true" : "false", " at length ", times[k].length, " for MaxLen ", max_len);
    sluice::require(times[k].seconds >= 0, where, ": field 'times'[", k, "]: seconds must be >= 0, got ",
                    times[k].seconds);
  }
  return times;
}

}  // namespace detail
}  // namespace sluice::io

namespace nlohmann {

// The scheme's cost as a profile writes it, with its times beside.
template <>
struct adl_serializer<sluice::io::InspectScheme> {
  static void to_json(json& out, const sluice::io::InspectScheme& scheme) {
    out = scheme.cost;
    out["times"] = scheme.times;
  }
  static sluice::io::InspectScheme from_json(const json& in) {
    const auto cost = in.get<sluice::cost::SchemeCost>();
    return {cost, sluice::io::detail::inspect_times(in, cost.max_len, "inspected scheme")};
  }
};

// Written by name, with its GPUs beside.
template <>
struct adl_serializer<sluice::io::InspectCpScheme> {
  static void to_json(json& out, const sluice::io::InspectCpScheme& derived) {
    out = {{"scheme", derived.scheme.name()},
           {"gpus", derived.scheme.gpus()},
           {"max_len", derived.max_len},
           {"fit",
            {{"a", derived.fit.a()},
             {"b", derived.fit.b()},
             {"c", derived.fit.c()},
             {"relative_rms_error", derived.fit_error}}},
           {"times", derived.times}};
  }
  static sluice::io::InspectCpScheme from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "derived scheme";
    const auto name = field<std::string>(in, "scheme", where);
    const sluice::Scheme scheme = [&] {
      try {
        return sluice::Scheme::parse(name);
      } catch (const sluice::invalid_input& error) {
        sluice::fail(where, ": field 'scheme': ", error.what());
      }
    }();
    const auto gpus = field<std::int64_t>(in, "gpus", where);
    sluice::require(gpus == scheme.gpus(), where, ": field 'gpus' is ", gpus, ", ", name, " runs on ", scheme.gpus());
    const auto fit = field<json>(in, "fit", where);
    const auto max_len = field<std::int64_t>(in, "max_len", where);
    sluice::require(max_len >= 0, where, ": field 'max_len' must be >= 0, got ", max_len);
    sluice::io::InspectCpScheme derived{scheme, max_len, fit.get<sluice::cost::QuadraticLatency>(),
                                        field<double>(fit, "relative_rms_error", "derived scheme: fit"),
                                        sluice::io::detail::inspect_times(in, max_len, where)};
    sluice::require(derived.fit_error >= 0, where, ": the fit's relative_rms_error must be >= 0, got ",
                    derived.fit_error);
    return derived;
  }
};

template <>
struct adl_serializer<sluice::io::InspectContextParallel> {
  static void to_json(json& out, const sluice::io::InspectContextParallel& report) {
    out = {
        {"degree", report.degree},         {"kind", std::string(sluice::name_in(sluice::cp_kind_names, report.kind))},
        {"ulysses", report.ulysses},       {"recompute", report.recompute},
        {"heads", report.heads},           {"kv_heads", report.kv_heads},
        {"link", report.links.intra_node}, {"cross_node_link", report.links.inter_node},
        {"schemes", report.schemes},       {"not_derived", report.not_derived}};
  }
  static sluice::io::InspectContextParallel from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "context parallel";
    sluice::io::InspectContextParallel report{field<int>(in, "degree", where),
                                              sluice::io::name_field(in, "kind", sluice::cp_kind_names, where),
                                              field<int>(in, "ulysses", where),
                                              field<bool>(in, "recompute", where),
                                              field<int>(in, "heads", where),
                                              field<int>(in, "kv_heads", where),
                                              {.local = sluice::cost::Links{}.local,
                                               .intra_node = field<sluice::cost::Link>(in, "link", where),
                                               .inter_node = field<sluice::cost::Link>(in, "cross_node_link", where)},
                                              field<std::vector<sluice::io::InspectCpScheme>>(in, "schemes", where),
                                              field<std::vector<std::string>>(in, "not_derived", where)};
    sluice::require(report.degree >= 2 && report.degree <= 1024, where, ": field 'degree' must be in [2, 1024], got ",
                    report.degree);
    sluice::require(report.ulysses >= 1 && report.degree % report.ulysses == 0, where, ": field 'ulysses' ",
                    report.ulysses, " must divide the degree ", report.degree);
    sluice::require(report.heads >= 1 && report.kv_heads >= 1 && report.heads % report.kv_heads == 0, where,
                    ": the kv_heads ", report.kv_heads, " must divide the heads ", report.heads);
    for (std::size_t k = 0; k < report.schemes.size(); ++k) {
      const sluice::Scheme& scheme = report.schemes[k].scheme;
      sluice::require(scheme.cp() == report.degree && scheme.cp_kind() == report.kind, where, ": field 'schemes'[", k,
                      "]: ", scheme.name(), " is not of CP ", report.degree, " ",
                      sluice::name_in(sluice::cp_kind_names, report.kind));
    }
    return report;
  }
};

template <>
struct adl_serializer<sluice::io::Inspect> {
  static void to_json(json& out, const sluice::io::Inspect& report) {
    out = {{"dataset", report.dataset}, {"profile", report.profile}};
    // Absent without --cp, so that such a document is the one it always was.
    if (report.context_parallel) out["context_parallel"] = *report.context_parallel;
  }
  static sluice::io::Inspect from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "inspect";
    return {field<sluice::io::InspectDataset>(in, "dataset", where),
            field<sluice::io::InspectProfile>(in, "profile", where),
            sluice::io::field_or<std::optional<sluice::io::InspectContextParallel>>(in, "context_parallel",
                                                                                    std::nullopt, where)};
  }
};

}  // namespace nlohmann
