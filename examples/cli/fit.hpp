#pragma once
// `sluice fit`: measured samples of one's own model and cluster → a sluice profile (cost::fit_profile), with the
// fit's error per scheme.
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>

#include "options.hpp"
#include "outputs.hpp"
#include "sluice/core/error.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/fit_run_json.hpp"
#include "sluice/io/samples.hpp"
#include "sluice/io/strategy_pool.hpp"

namespace sluice::cli {

inline constexpr std::string_view fit_usage =
    "usage: sluice fit --samples F --base P [--gpus N] [--gpus-per-node G] [--max-error E] [--name S]\n"
    "                  [--out F] [--json]\n"
    "\n"
    "Fits measured samples to a sluice profile: per scheme, T(l) = a*l^2 + b*l + c to the seconds and, where\n"
    "the samples carry peak bytes, fixed + per_token*l to the memory, which states MaxLen against the GPU's\n"
    "memory budget. Reports each fit's relative RMS error (docs/profiling.md).\n"
    "\n"
    "  --samples F        CSV (tp,pp,tokens,seconds[,peak_bytes]) or sluice.profile_samples JSON\n"
    "  --base P           profile or strategy_pool file, or a bundled name, giving what samples do not: the\n"
    "                     model shape, the cluster, the memory budget and, for schemes without peak bytes,\n"
    "                     the memory model; its schemes are replaced by the fitted ones\n"
    "  --gpus N           cluster size of the fitted profile (default: the base's)\n"
    "  --gpus-per-node G  GPUs per node (default: the base's)\n"
    "  --max-error E      refuse a fit whose relative RMS error exceeds E, in [0.000001, 1] (default 0.05)\n"
    "  --name S           the fitted profile's name (default: the samples file's name without extension)\n"
    "  --out F            write the fitted profile (sluice.profile JSON, what --profile reads) to F\n"
    "  --json             print one sluice.fit_run JSON document instead of the table\n";

namespace fit_report {

inline std::string percent(double error) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(2) << error * 100 << "%";
  return text.str();
}

inline io::FitRun fit_run(const cost::ProfileFit& fit, const std::string& samples, const std::string& base,
                          double max_error, const std::optional<std::string>& out) {
  io::FitRun run{samples, base, max_error, {}, fit.profile, out};
  for (const cost::SchemeFit& scheme : fit.schemes) {
    const cost::SchemeCost* cost = fit.profile.find(scheme.scheme);
    run.schemes.push_back(
        {scheme.scheme, scheme.latency.samples, scheme.latency.model, scheme.latency.relative_rms_error,
         scheme.memory ? std::optional(io::FitRunMemory{scheme.memory->fixed_bytes, scheme.memory->bytes_per_token,
                                                        scheme.memory->relative_rms_error})
                       : std::nullopt,
         cost ? std::optional(cost->max_len) : std::nullopt, cost ? std::optional(cost->util_len) : std::nullopt,
         scheme.inner ? std::optional(scheme.inner->model) : std::nullopt,
         scheme.inner ? std::optional(scheme.inner->relative_rms_error) : std::nullopt});
  }
  return run;
}

inline void print_table(std::ostream& out, const cost::ProfileFit& fit, const std::string& samples,
                        const std::string& base, double max_error) {
  const cost::Profile& profile = fit.profile;
  out << "fit of " << samples << ": " << fit.schemes.size() << " schemes; model, cluster and memory budget from "
      << base << "\n"
      << "profile " << profile.name() << ": " << profile.spec().model.name << ", " << profile.gpus()
      << " GPUs; fits refused above a relative RMS error of " << percent(max_error) << "\n\n"
      << std::left << std::setw(10) << "  scheme" << std::right << std::setw(8) << "samples" << std::setw(13) << "a"
      << std::setw(13) << "b" << std::setw(11) << "c" << std::setw(9) << "error" << std::setw(10) << "fixed GB"
      << std::setw(12) << "bytes/tok" << std::setw(9) << "error" << std::setw(9) << "MaxLen" << std::setw(9)
      << "UtilLen"
      << "\n";
  for (const cost::SchemeFit& scheme : fit.schemes) {
    const cost::SchemeCost* cost = profile.find(scheme.scheme);
    const cost::QuadraticLatency& t = scheme.latency.model;
    out << "  " << std::left << std::setw(8) << scheme.scheme.name() << std::right << std::setw(8)
        << scheme.latency.samples << std::setprecision(4) << std::setw(13) << t.a() << std::setw(13) << t.b()
        << std::setw(11) << t.c() << std::setw(9) << percent(scheme.latency.relative_rms_error);
    if (scheme.memory) {
      out << std::setw(10) << std::setprecision(4) << scheme.memory->fixed_bytes * 1e-9 << std::setw(12)
          << std::setprecision(6) << scheme.memory->bytes_per_token << std::setw(9)
          << percent(scheme.memory->relative_rms_error);
    } else {
      out << std::setw(10) << "-" << std::setw(12) << "-" << std::setw(9) << "-";
    }
    if (cost) {
      out << std::setw(9) << cost->max_len << std::setw(9) << cost->util_len << "\n";
    } else {
      out << "  needs more GPUs than the cluster\n";
    }
  }
  if (std::ranges::any_of(fit.schemes, [](const cost::SchemeFit& scheme) { return scheme.inner.has_value(); })) {
    out << "\n  last stage's own work b*tokens + c, from the inner seconds (error: the inner fit's)\n"
        << std::left << std::setw(10) << "  scheme" << std::right << std::setw(13) << "b" << std::setw(11) << "c"
        << std::setw(9) << "error\n";
    for (const cost::SchemeFit& scheme : fit.schemes) {
      if (!scheme.inner) continue;
      const cost::LastStageWork work = cost::last_stage_work(scheme.latency.model, scheme.inner->model);
      out << "  " << std::left << std::setw(8) << scheme.scheme.name() << std::right << std::setprecision(4)
          << std::setw(13) << work.b() << std::setw(11) << work.c() << std::setw(9)
          << percent(scheme.inner->relative_rms_error) << "\n";
    }
  }
  out << "  T(l) = a*l^2 + b*l + c seconds per stage; error: relative RMS error; memory '-': MaxLen from the base's\n"
      << "  memory model\n";
}

}  // namespace fit_report

inline int fit_command(std::span<const std::string_view> args, std::ostream& out, Outputs& outputs) {
  const Options options(args, {"samples", "base", "gpus", "gpus-per-node", "max-error", "name", "out"},
                        {"json", "help"});
  if (options.flag("help")) {
    out << fit_usage;
    return 0;
  }
  const auto samples_path = options.text("samples");
  sluice::require(samples_path.has_value(), "option --samples is required (see sluice fit --help)");
  const auto base_name = options.text("base");
  sluice::require(base_name.has_value(),
                  "option --base is required: a profile giving the model, cluster and memory budget (see sluice fit "
                  "--help)");
  const cost::Profile base = io::read_profile(io::resolve_data_file(*base_name, "profiles"), options.integer("gpus"));
  cost::ProfileSpec spec = base.spec();
  if (const auto per_node = options.integer("gpus-per-node")) spec.gpus_per_node = static_cast<int>(*per_node);
  const cost::ProfileSamples samples = io::read_profile_samples(*samples_path);

  cost::FitProfileOptions settings;
  settings.name = options.text("name").value_or(std::filesystem::path(*samples_path).stem().string());
  settings.source = "sluice fit of " + *samples_path + "; model, cluster and memory budget from " + base.name();
  settings.max_error = options.real("max-error").value_or(settings.max_error);
  const cost::ProfileFit fit = cost::fit_profile(samples.samples, spec, settings);

  const auto destination = options.text("out");
  if (destination) outputs.write(*destination, io::to_document(fit.profile).dump(2) + "\n");
  if (options.flag("json")) {
    out << io::document_text(fit_report::fit_run(fit, *samples_path, base.name(), settings.max_error, destination));
  } else {
    fit_report::print_table(out, fit, *samples_path, base.name(), settings.max_error);
    out << (destination ? "profile: " + *destination : "no --out: the profile was not written") << "\n";
  }
  return 0;
}

}  // namespace sluice::cli
