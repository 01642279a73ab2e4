#pragma once
// `sluice inspect`: a length dataset's statistics and histogram, and per scheme of a profile its
// MaxLen, UtilLen and T(l) at a few lengths.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "inputs.hpp"
#include "options.hpp"
#include "outputs.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/data_json.hpp"
#include "sluice/io/svg.hpp"

namespace sluice::cli {

inline constexpr std::string_view inspect_usage =
    "usage: sluice inspect [--profile P] [--lengths F] [--context L] [--gpus N] [--bin-width W] [--svg F]\n"
    "                      [--json]\n"
    "\n"
    "Statistics and histogram of a length dataset, and per parallel scheme of a profile its MaxLen,\n"
    "UtilLen and forward+backward time T(l) of one stage at a few lengths.\n"
    "\n"
    "  --profile P    profile JSON file, or a bundled profile name (default llama2-7b)\n"
    "  --lengths F    length file (.txt, .npy, Megatron .idx), or a bundled name (default man-pages)\n"
    "  --context L    truncate sequences longer than L tokens, as a trainer would\n"
    "  --gpus N       cluster size the profile is resolved for (default: the profile's own)\n"
    "  --bin-width W  histogram bin width in tokens (default 1024)\n"
    "  --svg F        also write the histogram as a picture (counts on a log scale) to F\n"
    "  --json         print one sluice.inspect JSON document instead of tables\n";

inline constexpr std::int64_t inspect_lengths[] = {1024, 4096, 16384, 32768};

namespace inspect_report {

inline io::json inspect_json(const data::LengthDataset& dataset, const data::LengthHistogram& histogram,
                             const cost::Profile& profile) {
  io::json schemes = io::json::array();
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    io::json entry = scheme;
    io::json times = io::json::array();
    for (const std::int64_t length : inspect_lengths)
      times.push_back({{"length", length}, {"seconds", scheme.latency(length)}, {"fits", length <= scheme.max_len}});
    entry["times"] = std::move(times);
    schemes.push_back(std::move(entry));
  }
  io::json dataset_json = {{"source", dataset.source()}, {"stats", dataset.stats()}, {"histogram", histogram}};
  if (dataset.context()) dataset_json["context"] = *dataset.context();
  return {{"format", "sluice.inspect"},
          {"version", 1},
          {"dataset", std::move(dataset_json)},
          {"profile", {{"name", profile.name()}, {"model", profile.spec().model}, {"gpus", profile.gpus()},
                       {"schemes", std::move(schemes)}}}};
}

inline void print_tables(std::ostream& out, const data::LengthDataset& dataset, const data::LengthHistogram& histogram,
                         const cost::Profile& profile) {
  const data::LengthStats stats = dataset.stats();
  out << "dataset " << dataset.source() << "\n";
  out << "  sequences " << stats.count << "  tokens " << stats.tokens << "  mean " << std::fixed
      << std::setprecision(1) << stats.mean << "  min " << stats.min << "  p50 " << stats.p50 << "  p90 " << stats.p90
      << "  p99 " << stats.p99 << "  max " << stats.max << "\n";
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
  const Options options(args, {"profile", "lengths", "context", "gpus", "bin-width", "svg"}, {"json", "help"});
  if (options.flag("help")) {
    out << inspect_usage;
    return 0;
  }
  const cost::Profile profile = load_profile(options);
  data::LengthDataset dataset = load_lengths(options);
  if (const auto context = options.integer("context")) dataset = dataset.truncated(*context);
  const auto histogram = dataset.histogram(options.integer("bin-width").value_or(1024));

  if (const auto svg = options.text("svg")) {
    const std::string name = std::filesystem::path(dataset.source()).filename().string();
    outputs.write(*svg, io::histogram_svg(histogram, "sequence lengths: " + name, true));
  }
  if (options.flag("json")) {
    out << inspect_report::inspect_json(dataset, histogram, profile).dump(2) << "\n";
  } else {
    inspect_report::print_tables(out, dataset, histogram, profile);
  }
  return 0;
}

}  // namespace sluice::cli
