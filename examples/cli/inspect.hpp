#pragma once
// `sluice inspect`: a length dataset's statistics and histogram, and per scheme of a profile its
// MaxLen, UtilLen and T(l) at a few lengths.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <optional>
#include <sstream>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "inputs.hpp"
#include "options.hpp"
#include "outputs.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/data_json.hpp"
#include "sluice/io/inspect_json.hpp"
#include "sluice/io/svg.hpp"

namespace sluice::cli {

inline constexpr std::string_view inspect_usage =
    "usage: sluice inspect [--profile P] [--lengths F] [--context L] [--gpus N] [--bin-width W] [--svg F]\n"
    "                      [--cp C [--heads H] [--kv-heads K] [--cp-kind ring|ulysses|hybrid] [--ulysses U]\n"
    "                      [--recompute]] [--json]\n"
    "\n"
    "Statistics and histogram of a length dataset, and per parallel scheme of a profile its MaxLen,\n"
    "UtilLen and forward+backward time T(l) of one stage at a few lengths. With --cp, also each scheme\n"
    "with context parallelism of degree C (and --recompute: full activation recomputation) as derived\n"
    "from it: MaxLen, the derived time and the error of its quadratic fit.\n"
    "\n"
    "  --profile P    profile JSON file, or a bundled profile name (default llama2-7b)\n"
    "  --lengths F    length file (.txt, .npy, Megatron .idx), or a bundled name (default man-pages)\n"
    "  --context L    truncate sequences longer than L tokens, as a trainer would\n"
    "  --gpus N       cluster size the profile is resolved for (default: the profile's own)\n"
    "  --bin-width W  histogram bin width in tokens (default 1024)\n"
    "  --svg F        also write the histogram as a picture (counts on a log scale) to F\n"
    "  --cp C         context-parallel degree to derive each scheme with, 2 to 1024\n"
    "  --heads H      the model's attention heads (default: the profile's model.heads)\n"
    "  --kv-heads K   its key/value heads (grouped-query attention; default: the profile's, else H)\n"
    "  --cp-kind K    ring (default), ulysses or hybrid (Ulysses within U ranks, the ring across C/U)\n"
    "  --ulysses U    the hybrid's Ulysses degree, dividing C\n"
    "  --recompute    with full activation recomputation\n"
    "  --json         print one sluice.inspect JSON document instead of tables\n";

using io::inspect_lengths;

namespace inspect_report {

struct ContextParallelReport {
  int degree = 1;
  CpKind kind = CpKind::ring;
  int ulysses = 0;  // the hybrid's
  Recompute recompute = Recompute::none;
  cost::ModelInfo model;
  std::vector<cost::CpScheme> schemes;
  std::vector<std::string> not_derived;  // schemes whose heads do not split, or too wide for the cluster
};

// Every scheme of the profile derived with context parallelism (cost/context_parallel.hpp), or nothing.
inline std::optional<ContextParallelReport> context_parallel_report(const Options& options,
                                                                    const cost::Profile& profile) {
  const auto degree = options.integer("cp");
  for (const char* name : {"heads", "kv-heads", "cp-kind", "ulysses", "recompute"})
    sluice::require(degree || !options.flag(name), "option --", name, " needs --cp");
  if (!degree) return std::nullopt;
  ContextParallelReport report;
  report.model = profile.spec().model;
  if (const auto heads = options.integer("heads")) {
    report.model.heads = static_cast<int>(*heads);
    report.model.kv_heads = 0;
  }
  if (const auto kv_heads = options.integer("kv-heads")) report.model.kv_heads = static_cast<int>(*kv_heads);
  sluice::require(report.model.heads >= 1, "option --cp needs --heads: profile ", profile.name(),
                  " does not give the attention heads");
  if (report.model.kv_heads == 0) report.model.kv_heads = report.model.heads;
  sluice::require(report.model.kv_heads >= 1 && report.model.heads % report.model.kv_heads == 0,
                  "option --kv-heads: ", report.model.kv_heads, " must divide the ", report.model.heads, " heads");
  sluice::require(profile.spec().memory.has_value(), "option --cp: profile ", profile.name(),
                  " has no memory model to derive MaxLen from");
  sluice::require(*degree >= 2 && *degree <= 1024, "option --cp: the degree must be in [2, 1024], got ", *degree);
  report.degree = static_cast<int>(*degree);
  report.kind = value_in(cp_kind_names, options.text("cp-kind").value_or("ring"), "option --cp-kind");
  const auto ulysses = options.integer("ulysses");
  sluice::require(!ulysses || report.kind == CpKind::hybrid, "option --ulysses is for --cp-kind hybrid");
  sluice::require(ulysses || report.kind != CpKind::hybrid, "option --cp-kind hybrid needs --ulysses");
  report.ulysses = static_cast<int>(ulysses.value_or(0));
  sluice::require(!ulysses || (*ulysses > 1 && *ulysses < *degree && *degree % *ulysses == 0),
                  "option --ulysses: ", *ulysses, " must divide --cp ", *degree, " and lie strictly between 1 and it");
  report.recompute = options.flag("recompute") ? Recompute::full : Recompute::none;
  cost::ProfileSpec spec = profile.spec();
  spec.model = report.model;
  const cost::Profile with_heads(std::move(spec));
  for (const cost::SchemeCost& base : with_heads.schemes()) {
    if (!base.scheme.is_base()) continue;
    const Scheme scheme({.tp = base.scheme.tp(),
                         .pp = base.scheme.pp(),
                         .cp = report.degree,
                         .cp_kind = report.kind,
                         .ulysses = report.ulysses,
                         .recompute = report.recompute});
    if (auto derived = cost::derive_cp_scheme(with_heads, base, scheme))
      report.schemes.push_back(std::move(*derived));
    else
      report.not_derived.push_back(scheme.name());
  }
  return report;
}

// The schemes derived with context parallelism as the document holds them: their times, not their setup.
inline io::InspectContextParallel context_parallel_document(const ContextParallelReport& report) {
  // The links are the document's defaults: inspect derives with the default links.
  io::InspectContextParallel document{.degree = report.degree,
                                      .kind = report.kind,
                                      .ulysses = report.kind == CpKind::hybrid    ? report.ulysses
                                                 : report.kind == CpKind::ulysses ? report.degree
                                                                                  : 1,
                                      .recompute = report.recompute == Recompute::full,
                                      .heads = report.model.heads,
                                      .kv_heads = report.model.kv_heads,
                                      .schemes = {},
                                      .not_derived = report.not_derived};
  for (const cost::CpScheme& derived : report.schemes)
    document.schemes.push_back(
        {derived.scheme,
         derived.max_len,
         {derived.fit.model, derived.fit.relative_rms_error},
         io::inspect_times(derived.max_len, [&](std::int64_t length) { return derived.seconds(length); }),
         derived.last_stage.is_zero() ? std::nullopt : std::optional(derived.last_stage)});
  return document;
}

inline void print_context_parallel(std::ostream& out, const ContextParallelReport& report) {
  const cost::Links links;
  out << "\ncontext parallelism: CP " << report.degree << " " << name_in(cp_kind_names, report.kind);
  if (report.kind == CpKind::hybrid) out << " (Ulysses " << report.ulysses << ")";
  if (report.recompute == Recompute::full) out << ", full recomputation";
  out << ", " << report.model.heads << " heads (" << report.model.kv_heads << " KV), links "
      << links.intra_node.bandwidth / 1e9 << " GB/s and " << links.intra_node.latency * 1e6 << " us in a node ("
      << links.inter_node.bandwidth / 1e9 << " GB/s and " << links.inter_node.latency * 1e6
      << " us across), derived from each scheme\n";
  out << "  scheme              GPUs   MaxLen  fit err";
  for (const std::int64_t length : inspect_lengths)
    out << std::setw(10) << ("T(" + std::to_string(length / 1024) + "K)");
  out << "\n";
  for (const cost::CpScheme& derived : report.schemes) {
    std::ostringstream error;
    error << std::fixed << std::setprecision(1) << derived.fit.relative_rms_error * 100 << "%";
    out << "  " << std::left << std::setw(18) << derived.scheme.name() << std::right << std::setw(6)
        << derived.scheme.gpus() << std::setw(9) << derived.max_len << std::setw(9) << error.str();
    for (const std::int64_t length : inspect_lengths) {
      std::ostringstream cell;
      cell << std::fixed << std::setprecision(1) << derived.seconds(length) * 1e3
           << (length <= derived.max_len ? " " : "*");
      out << std::setw(10) << cell.str();
    }
    out << "\n";
  }
  if (std::ranges::any_of(report.schemes,
                          [](const cost::CpScheme& derived) { return !derived.last_stage.is_zero(); })) {
    out << "  last stage's own work b*tokens + c (the other stages run T less it)\n";
    for (const cost::CpScheme& derived : report.schemes)
      if (!derived.last_stage.is_zero())
        out << "    " << std::left << std::setw(18) << derived.scheme.name() << std::right << std::defaultfloat
            << std::setprecision(4) << " b " << derived.last_stage.b() << ", c " << derived.last_stage.c() << "\n";
  }
  if (!report.not_derived.empty()) {
    out << "  not derived (wider than the cluster, or heads that do not split):";
    for (const std::string& name : report.not_derived) out << " " << name;
    out << "\n";
  }
  out << "  T derived (ms), not the fit; fit err: its quadratic's relative RMS error from 256 tokens to MaxLen\n";
}

inline void print_tables(std::ostream& out, const data::LengthDataset& dataset, const data::LengthHistogram& histogram,
                         const cost::Profile& profile) {
  const data::LengthStats stats = dataset.stats();
  out << "dataset " << dataset.source() << "\n";
  out << "  sequences " << stats.count << "  tokens " << stats.tokens << "  mean " << std::fixed << std::setprecision(1)
      << stats.mean << "  min " << stats.min << "  p50 " << stats.p50 << "  p90 " << stats.p90 << "  p99 " << stats.p99
      << "  max " << stats.max << "\n";
  if (dataset.context())
    out << "  truncated to " << *dataset.context() << " tokens: " << stats.truncated << " sequences\n";

  out << "\nhistogram (bin width " << histogram.bin_width << " tokens; empty bins omitted)\n";
  std::int64_t peak = 1;
  for (const auto& bin : histogram.bins) peak = std::max(peak, bin.count);
  for (const auto& bin : histogram.bins) {
    if (bin.count == 0) continue;
    const auto bar = static_cast<std::size_t>(std::max<std::int64_t>(1, bin.count * 40 / peak));
    out << "  (" << std::setw(7) << bin.lower << ", " << std::setw(7) << bin.upper << "] " << std::setw(8) << bin.count
        << " " << std::string(bar, '#') << "\n";
  }

  const auto& model = profile.spec().model;
  out << "\nprofile " << profile.name() << " (" << model.name << ", " << model.layers << " layers, hidden "
      << model.hidden << ") on " << profile.gpus() << " GPUs\n";
  out << "  scheme     GPUs   MaxLen  UtilLen";
  for (const std::int64_t length : inspect_lengths)
    out << std::setw(10) << ("T(" + std::to_string(length / 1024) + "K)");
  out << "\n";
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    out << "  " << std::left << std::setw(10) << scheme.scheme.name() << std::right << std::setw(5)
        << scheme.scheme.gpus() << std::setw(9) << scheme.max_len << std::setw(9) << scheme.util_len;
    for (const std::int64_t length : inspect_lengths) {
      std::ostringstream cell;
      cell << std::fixed << std::setprecision(1) << scheme.latency(length) * 1e3
           << (length <= scheme.max_len ? " " : "*");
      out << std::setw(10) << cell.str();
    }
    out << "\n";
  }
  out << "  T in ms for one sequence on one stage; * = longer than the scheme's MaxLen\n";
}

}  // namespace inspect_report

inline int inspect(std::span<const std::string_view> args, std::ostream& out, Outputs& outputs) {
  const Options options(
      args,
      {"profile", "lengths", "context", "gpus", "bin-width", "svg", "cp", "heads", "kv-heads", "cp-kind", "ulysses"},
      {"json", "help", "recompute"});
  if (options.flag("help")) {
    out << inspect_usage;
    return 0;
  }
  const cost::Profile profile = load_profile(options);
  const std::optional<inspect_report::ContextParallelReport> derived =
      inspect_report::context_parallel_report(options, profile);
  data::LengthDataset dataset = load_lengths(options);
  if (const auto context = options.integer("context")) dataset = dataset.truncated(*context);
  const auto histogram = dataset.histogram(options.integer("bin-width").value_or(1024));

  if (const auto svg = options.text("svg")) {
    const std::string name = std::filesystem::path(dataset.source()).filename().string();
    outputs.write(*svg, io::histogram_svg(histogram, "sequence lengths: " + name, true));
  }
  if (options.flag("json")) {
    out << io::document_text(
        io::inspect(dataset, histogram, profile,
                    derived ? std::optional(inspect_report::context_parallel_document(*derived)) : std::nullopt));
  } else {
    inspect_report::print_tables(out, dataset, histogram, profile);
    if (derived) inspect_report::print_context_parallel(out, *derived);
  }
  return 0;
}

}  // namespace sluice::cli
