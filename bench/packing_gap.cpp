// The packing heuristic's gap to CBC on the 200 instances of test_packing.cpp ("heuristic vs CBC"):
// prints the distribution that docs/assign-packing.md reports.
//   sluice_packing_gap [--instances] [seconds per V]
// `--instances` also prints one line per instance; CBC gets 0.5 s per V (the authors' limit) unless told
// otherwise (the test gives it 0.1 s).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "sluice/assign/packing.hpp"
#include "sluice/assign/packing_cbc.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"

namespace {

// Instance k, exactly as test_packing.cpp builds it: a 32B scheme with PP 1, 2 or 4, U in [10, 60] and
// long-tail lengths (seed 1000 + k) truncated to the scheme's MaxLen.
struct Instance {
  const sluice::cost::SchemeCost* scheme;
  std::vector<sluice::Sequence> sequences;
};

Instance make_instance(const sluice::cost::Profile& profile, std::uint64_t k) {
  static constexpr const char* names[] = {"tp16pp1", "tp8pp2", "tp4pp4", "tp8pp4"};
  const sluice::cost::SchemeCost& scheme = profile.at(sluice::Scheme::parse(names[k % 4]));
  sluice::Rng rng(k);
  const std::int64_t count = rng.uniform_int(10, 60);
  const auto lengths =
      sluice::data::synthetic_lengths({.count = count, .max_length = scheme.max_len, .seed = 1000 + k});
  Instance instance{&scheme, {}};
  for (std::size_t i = 0; i < lengths.size(); ++i)
    instance.sequences.emplace_back(static_cast<std::int64_t>(i), lengths[i]);
  return instance;
}

}  // namespace

int main(int argc, char** argv) {
  bool each = false;
  double seconds_per_v = 0.5;
  for (int k = 1; k < argc; ++k) {
    const std::string_view argument = argv[k];
    char* end = nullptr;
    if (argument == "--instances") {
      each = true;
    } else if (seconds_per_v = std::strtod(argv[k], &end); end == argv[k] || *end != '\0' || !(seconds_per_v > 0)) {
      std::fprintf(stderr, "usage: sluice_packing_gap [--instances] [seconds per V > 0], got '%s'\n", argv[k]);
      return 2;
    }
  }
  const auto profile =
      sluice::io::read_document<sluice::cost::Profile>(sluice::io::resolve_data_file("llama2-32b", "profiles"));
  constexpr int instances = 200;
  // Gap = heuristic / CBC − 1, counted at most 0 (1e-9), 0.1%, 1%, 5%, and above 5%; over all instances and
  // over those CBC proved optimal.
  constexpr double limits[] = {1e-9, 1e-3, 1e-2, 5e-2};
  int counts[2][5] = {};
  int proven = 0;
  double sum = 0;
  double worst = 0;
  double worst_to_bound = 0;
  double cbc_seconds = 0;
  std::int64_t solves = 0;
  for (int k = 0; k < instances; ++k) {
    const Instance instance = make_instance(profile, static_cast<std::uint64_t>(k));
    const auto heuristic = sluice::assign::pack(instance.sequences, *instance.scheme);
    const auto cbc =
        sluice::assign::pack_exact(instance.sequences, *instance.scheme, {.time_limit_seconds = seconds_per_v});
    const bool optimal = cbc.status == sluice::solver::SolveStatus::optimal;
    const double gap = heuristic.estimate / cbc.packing.estimate - 1;
    for (int b = 0; b < 5; ++b) {
      if (b < 4 ? gap <= limits[b] : gap > limits[3]) {
        ++counts[0][b];
        counts[1][b] += optimal ? 1 : 0;
      }
    }
    proven += optimal ? 1 : 0;
    sum += gap;
    worst = std::max(worst, gap);
    worst_to_bound = std::max(worst_to_bound, heuristic.estimate / cbc.best_bound - 1);
    cbc_seconds += cbc.seconds;
    solves += cbc.solves;
    if (each)
      std::printf("%3d %-8s U=%2zu V=%2zu/%2zu heuristic %.6f cbc %.6f bound %.6f %s gap %.4f%% solves %lld %.2f s\n",
                  k, instance.scheme->scheme.name().c_str(), instance.sequences.size(), heuristic.micro_batches.size(),
                  cbc.packing.micro_batches.size(), heuristic.estimate, cbc.packing.estimate, cbc.best_bound,
                  optimal ? "optimal " : "feasible", 100 * gap, static_cast<long long>(cbc.solves), cbc.seconds);
  }
  std::printf("heuristic vs CBC (%g s per V): %d instances, CBC proved %d optimal\n", seconds_per_v, instances, proven);
  std::printf("                 gap = 0  <= 0.1%%  <= 1%%  <= 5%%  > 5%%\n");
  const char* rows[] = {"all instances", "proven optimal"};
  for (int row = 0; row < 2; ++row)
    std::printf("  %-14s %7d  %7d  %5d  %5d  %4d\n", rows[row], counts[row][0], counts[row][1], counts[row][2],
                counts[row][3], counts[row][4]);
  std::printf("  gap: mean %.4f%%, max %.4f%%; max over CBC's bound %.4f%%\n", 100 * sum / instances, 100 * worst,
              100 * worst_to_bound);
  std::printf("  CBC: %lld solves, %.1f s\n", static_cast<long long>(solves), cbc_seconds);
  return 0;
}
