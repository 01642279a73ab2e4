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
  friend bool operator==(const InspectScheme&, const InspectScheme&) = default;
};

struct InspectDataset {
  std::string source;
  std::optional<std::int64_t> context;
  data::LengthStats stats;
  data::LengthHistogram histogram;
  friend bool operator==(const InspectDataset&, const InspectDataset&) = default;
};

struct InspectProfile {
  std::string name;
  cost::ModelInfo model;
  std::int64_t gpus = 0;
  std::vector<InspectScheme> schemes;
  friend bool operator==(const InspectProfile&, const InspectProfile&) = default;
};

// The quadratic fitted to a derived scheme's times, and its relative RMS error.
struct InspectFit {
  cost::QuadraticLatency latency;
  double relative_rms_error = 0;
  friend bool operator==(const InspectFit&, const InspectFit&) = default;
};

// A scheme derived with context parallelism: its MaxLen, the quadratic fitted to its derived times, its times, and the
// last stage's own work when its base states some.
struct InspectCpScheme {
  Scheme scheme;
  std::int64_t max_len = 0;
  InspectFit fit;
  std::vector<InspectTime> times;
  std::optional<cost::LastStageWork> last_stage{};
  friend bool operator==(const InspectCpScheme&, const InspectCpScheme&) = default;
};

struct InspectContextParallel {
  int degree = 2;
  CpKind kind = CpKind::ring;
  int ulysses = 1;
  bool recompute = false;
  int heads = 0;
  int kv_heads = 0;
  cost::Link link = cost::Links{}.intra_node;
  cost::Link cross_node_link = cost::Links{}.inter_node;
  std::vector<InspectCpScheme> schemes;
  std::vector<std::string> not_derived;
  friend bool operator==(const InspectContextParallel&, const InspectContextParallel&) = default;
};

struct Inspect {
  InspectDataset dataset;
  InspectProfile profile;
  std::optional<InspectContextParallel> context_parallel;
  friend bool operator==(const Inspect&, const Inspect&) = default;
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

namespace detail {

// Times at inspect_lengths, each fitting exactly when its length is at most `max_len`.
inline void check_inspect_times(const std::vector<InspectTime>& times, std::int64_t max_len, std::string_view where) {
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
}

}  // namespace detail

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
SLUICE_IO_DOCS(InspectDataset, {"source", "The dataset's source"},
               {"context", "The length sequences were truncated to; empty: not truncated"});

SLUICE_IO_RECORD(InspectTime, "time", SLUICE_IO_MEMBERS(length, seconds, fits));
SLUICE_IO_DOCS(InspectTime, {"fits", "Whether a micro-batch of the length fits (length <= MaxLen)"});

// The scheme's cost as a profile writes it, with its times beside.
template <>
struct record<InspectScheme> {
  using T = InspectScheme;
  static constexpr std::string_view name = "inspected scheme";
  static constexpr auto fields = std::tuple{SLUICE_IO_INLINE(cost), SLUICE_IO_MEMBERS(times)};
  static void check(const T& value) { detail::check_inspect_times(value.times, value.cost.max_len, name); }
};

template <>
struct record<InspectProfile> {
  using T = InspectProfile;
  static constexpr std::string_view name = "profile";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(name, model, gpus, schemes)};
  static void check(const T& value) {
    sluice::require(value.gpus >= 1, name, ": field 'gpus' must be >= 1, got ", value.gpus);
  }
};

// The coefficients as a latency writes them, the error beside.
template <>
struct record<InspectFit> {
  using T = InspectFit;
  static constexpr std::string_view name = "fit";
  static constexpr auto fields = std::tuple{SLUICE_IO_INLINE(latency), SLUICE_IO_MEMBERS(relative_rms_error)};
  static void check(const T& value) {
    sluice::require(value.relative_rms_error >= 0, name, ": field 'relative_rms_error' must be >= 0, got ",
                    value.relative_rms_error);
  }
};

// Written by name, with its GPUs beside.
template <>
struct record<InspectCpScheme> {
  using T = InspectCpScheme;
  static constexpr std::string_view name = "derived scheme";
  static constexpr auto fields = std::tuple{text_member("scheme", &T::scheme), SLUICE_IO_MEMBERS(max_len, fit, times),
                                            member("last_stage", &T::last_stage, Presence::omitted_when_empty)};
  static void write_derived(json& out, const T& value) { out["gpus"] = value.scheme.gpus(); }
  static void check(const T& value, const json& document) {
    const auto gpus = field<std::int64_t>(document, "gpus", name);
    sluice::require(gpus == value.scheme.gpus(), name, ": field 'gpus' is ", gpus, ", ", value.scheme.name(),
                    " runs on ", value.scheme.gpus());
    sluice::require(value.max_len >= 0, name, ": field 'max_len' must be >= 0, got ", value.max_len);
    detail::check_inspect_times(value.times, value.max_len, name);
    const cost::QuadraticLatency& fit = value.fit.latency;
    sluice::require(!value.last_stage || (value.last_stage->b() <= fit.b() && value.last_stage->c() <= fit.c()), name,
                    ": field 'last_stage' exceeds the fit's b and c");
  }
};

SLUICE_IO_DOCS(InspectCpScheme, {"last_stage",
                                 "The last stage's own work, b·tokens + c seconds (the other stages run T less it); "
                                 "absent when the base scheme states none"});

template <>
struct record<InspectContextParallel> {
  using T = InspectContextParallel;
  static constexpr std::string_view name = "context parallel";
  static constexpr auto fields =
      std::tuple{SLUICE_IO_MEMBERS(degree), named_member("kind", &T::kind, cp_kind_names),
                 SLUICE_IO_MEMBERS(ulysses, recompute, heads, kv_heads, link, cross_node_link, schemes, not_derived)};
  static void check(const T& report) {
    sluice::require(report.degree >= 2 && report.degree <= 1024, name, ": field 'degree' must be in [2, 1024], got ",
                    report.degree);
    sluice::require(report.ulysses >= 1 && report.degree % report.ulysses == 0, name, ": field 'ulysses' ",
                    report.ulysses, " must divide the degree ", report.degree);
    sluice::require(report.heads >= 1 && report.kv_heads >= 1 && report.heads % report.kv_heads == 0, name,
                    ": the kv_heads ", report.kv_heads, " must divide the heads ", report.heads);
    for (std::size_t k = 0; k < report.schemes.size(); ++k) {
      const Scheme& scheme = report.schemes[k].scheme;
      sluice::require(scheme.cp() == report.degree && scheme.cp_kind() == report.kind, name, ": field 'schemes'[", k,
                      "]: ", scheme.name(), " is not of CP ", report.degree, " ", name_in(cp_kind_names, report.kind));
    }
  }
};
SLUICE_IO_DOCS(InspectContextParallel, {"ulysses", "The Ulysses degree: the hybrid's, C for Ulysses alone, 1 for ring"},
               {"link", "The link in a node the derivation used"}, {"cross_node_link", "The link across nodes"},
               {"not_derived", "Schemes whose heads do not split, or too wide for the cluster"});

// "context_parallel" only with --cp, so that a document without it is the one it always was.
SLUICE_IO_RECORD(Inspect, "inspect", SLUICE_IO_MEMBERS(dataset, profile),
                 member("context_parallel", &T::context_parallel, Presence::omitted_when_empty));
SLUICE_IO_DOCS(Inspect, {"context_parallel", "The schemes derived with context parallelism; empty without --cp"});

}  // namespace sluice::io
