#pragma once
// JSON for what `sluice fit --json` prints ("sluice.fit_run", version 1, its CP variant 2): the fitted profile (a
// whole sluice.profile document) and each scheme's fit. FitRun holds the fit as written, so that reading it
// needs neither cost/fit.hpp nor Eigen; the CLI builds it from cost::fit_profile's result.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "sluice/core/scheme.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"

namespace sluice::io {

// A scheme's peak memory, fitted as fixed + per_token·l.
struct FitRunMemory {
  double fixed_bytes = 0;
  double bytes_per_token = 0;
  double relative_rms_error = 0;
  friend bool operator==(const FitRunMemory&, const FitRunMemory&) = default;
};

// One scheme's fit; MaxLen and UtilLen only for a scheme the fitted profile keeps (one that fits the cluster).
struct FitRunScheme {
  Scheme scheme;
  std::size_t samples = 0;
  cost::QuadraticLatency latency;
  double latency_error = 0;
  std::optional<FitRunMemory> memory;
  std::optional<std::int64_t> max_len;
  std::optional<std::int64_t> util_len;
  // Another stage's latency, when the samples carry inner seconds (the last stage's work is the profile's).
  std::optional<cost::QuadraticLatency> inner_latency;
  std::optional<double> inner_error;
  [[nodiscard]] bool usable() const noexcept { return max_len.has_value(); }
  friend bool operator==(const FitRunScheme&, const FitRunScheme&) = default;
};

struct FitRun {
  std::string samples;
  std::string base;
  double max_error = 0;
  std::vector<FitRunScheme> schemes;
  cost::Profile profile;
  std::optional<std::string> out;
};

SLUICE_IO_DOCUMENT(FitRun, "sluice.fit_run", 1);

template <>
struct record<FitRunMemory> {
  using T = FitRunMemory;
  static constexpr std::string_view name = "memory fit";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(fixed_bytes, bytes_per_token, relative_rms_error)};
  static void check(const T& value) {
    sluice::require(value.bytes_per_token > 0, name, ": field 'bytes_per_token' must be > 0, got ",
                    value.bytes_per_token);
    sluice::require(value.relative_rms_error >= 0, name, ": field 'relative_rms_error' must be >= 0, got ",
                    value.relative_rms_error);
  }
};

// The scheme's keys, then its fit's, side by side in one object; "usable" is written for readers and checked when
// read.
template <>
struct record<FitRunScheme> {
  using T = FitRunScheme;
  static constexpr std::string_view name = "scheme fit";
  static constexpr auto fields = std::tuple{
      SLUICE_IO_INLINE(scheme), SLUICE_IO_MEMBERS(samples, latency, latency_error, memory, max_len, util_len),
      member("inner_latency", &T::inner_latency, Presence::omitted_when_empty),
      member("inner_error", &T::inner_error, Presence::omitted_when_empty)};
  static void check(const T& fit) {
    sluice::require(fit.samples >= 1, name, ": field 'samples' must be >= 1, got ", fit.samples);
    sluice::require(fit.latency_error >= 0, name, ": field 'latency_error' must be >= 0, got ", fit.latency_error);
    sluice::require(fit.inner_latency.has_value() == fit.inner_error.has_value(), name,
                    ": fields 'inner_latency' and 'inner_error' come together");
    sluice::require(fit.inner_error.value_or(0) >= 0, name, ": field 'inner_error' must be >= 0, got ",
                    fit.inner_error.value_or(0));
  }
  static void write_derived(json& out, const T& fit) { out["usable"] = fit.usable(); }
  static void check(const T& fit, const json& document) {
    const auto usable = field<bool>(document, "usable", name);
    sluice::require(usable == fit.max_len.has_value() && usable == fit.util_len.has_value(), name,
                    ": field 'usable' is ", usable ? "true" : "false", ", so 'max_len' and 'util_len' must be ",
                    usable ? "numbers" : "null");
  }
};
SLUICE_IO_DOCS(FitRunScheme, {"samples", "How many samples the fit was made from"},
               {"latency_error", "The latency fit's relative RMS error"},
               {"memory", "The peak memory's fit; empty when the samples carry no peak bytes"},
               {"max_len", "Empty when the scheme is not usable"}, {"util_len", "Empty when the scheme is not usable"},
               {"inner_latency", "Another stage's fitted latency; absent when the samples carry no inner seconds"},
               {"inner_error", "The inner latency fit's relative RMS error; absent with inner_latency"});

// The profile is a whole document of its own, so that it can be cut out and read alone.
template <>
struct record<FitRun> {
  using T = FitRun;
  static constexpr std::string_view name = "fit run";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(samples, base, max_error, schemes),
                                            document_member("profile", &T::profile), SLUICE_IO_MEMBERS(out)};
  static void check(const T& run) {
    sluice::require(run.max_error > 0 && run.max_error <= 1, name, ": field 'max_error' must be in (0, 1], got ",
                    run.max_error);
    // Each fit within the bound, and usable exactly when the profile keeps the scheme, with the profile's lengths.
    for (std::size_t k = 0; k < run.schemes.size(); ++k) {
      const FitRunScheme& fit = run.schemes[k];
      sluice::require(fit.latency_error <= run.max_error, name, ": field 'schemes'[", k, "]: latency error ",
                      fit.latency_error, " exceeds max_error ", run.max_error);
      sluice::require(fit.inner_error.value_or(0) <= run.max_error, name, ": field 'schemes'[", k, "]: inner error ",
                      fit.inner_error.value_or(0), " exceeds max_error ", run.max_error);
      const cost::SchemeCost* kept = run.profile.find(fit.scheme);
      sluice::require(fit.usable() == (kept != nullptr), name, ": field 'schemes'[", k, "]: ", fit.scheme.name(),
                      fit.usable() ? " is usable but not in the profile" : " is in the profile but not usable");
      sluice::require(!kept || (kept->max_len == *fit.max_len && kept->util_len == *fit.util_len), name,
                      ": field 'schemes'[", k, "]: ", fit.scheme.name(),
                      "'s max_len and util_len are not the profile's");
    }
  }
};
SLUICE_IO_DOCS(FitRun, {"samples", "The samples file"}, {"base", "The base profile's name"},
               {"out", "Where the profile was written; empty: not written"});

}  // namespace sluice::io
