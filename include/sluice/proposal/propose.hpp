#pragma once
// Data-distribution-aware strategy proposal (Hydraulis §7): before training, choose the few
// heterogeneous strategies worth considering from the dataset's length distribution and the profile;
// each iteration then chooses among them (assign::plan_iteration). docs/proposal.md describes the
// objective, the normalisation, the relaxation and rounding, and the complexity.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/proposal/dp.hpp"
#include "sluice/proposal/intervals.hpp"

namespace sluice::proposal {

struct ProposeOptions {
  std::optional<std::int64_t> gpus{};     // N (>= 1, <= the profile's cluster); default: the profile's cluster
  std::optional<std::int64_t> max_len{};  // Lmax (>= length_step); default: the dataset's longest sequence
  std::int64_t length_step = 128;         // Δl, the length grid (>= 1)
  std::int64_t gpu_step = 10;             // budget step n, tenths of a GPU: a multiple of 10, or 1, 2, 5 when relaxed
  bool relaxed = false;                   // also run the continuous relaxation and round its solutions
  std::int64_t replica_step = 1;          // replica step d of the relaxation, tenths of a pipeline: 1, 2, 5 or 10
  double tokens_per_iteration = 100'000;  // scales the dataset's counts to one iteration (finite, > 0)
  bool sequence_constant = true;          // charge c per sequence, as the authors' code does (else as Eq. 2 does)
  bool fill_term = true;                  // charge (PP − 1)·T(longest) per interval, as the authors' code does
  bool tp_within_node = true;             // only schemes with TP <= the profile's gpus_per_node
  std::int64_t max_candidates = 8;        // at most this many candidates (>= 1)
  friend bool operator==(const ProposeOptions&, const ProposeOptions&) = default;
};

// Where a candidate came from, by priority when several sources proposed it.
enum class Origin { integer_dp, relaxed_rounding, homogeneous };
inline constexpr NameTable<Origin, 3> origin_names{{{Origin::integer_dp, "integer_dp"},
                                                    {Origin::relaxed_rounding, "relaxed_rounding"},
                                                    {Origin::homogeneous, "homogeneous"}}};

struct ProposedCandidate {
  Strategy strategy;
  double estimate = 0;       // the interval objective at max_len (seconds per iteration)
  std::int64_t min_len = 0;  // it was proposed for the grid lengths L in [min_len, max_len]
  std::int64_t max_len = 0;
  double share = 0;  // estimated share of iterations whose longest sequence falls in those L
  Origin origin = Origin::integer_dp;
  friend bool operator==(const ProposedCandidate&, const ProposedCandidate&) = default;
};

// The optimum of the DP for every grid length from the shortest sequence's bin up to Lmax.
struct LengthOptimum {
  std::int64_t max_len = 0;       // L
  double integer = 0;             // t[N][L] of the integer DP
  std::optional<double> relaxed;  // t[N][L] of the relaxation (relaxed runs only)
  double share = 0;               // estimated share of iterations whose longest sequence is in (L − Δl, L]
  friend bool operator==(const LengthOptimum&, const LengthOptimum&) = default;
};

struct Proposal {
  ProposeOptions options;  // as used: gpus and max_len resolved
  std::string profile;     // profile name
  double sequences_per_iteration = 0;
  double integer_optimum = 0;                 // t[N][Lmax] of the integer DP
  std::optional<double> relaxed_optimum;      // t[N][Lmax] of the relaxation (relaxed runs only)
  std::int64_t considered = 0;                // distinct strategies before the max_candidates cap
  std::vector<ProposedCandidate> candidates;  // best at Lmax first, then the best homogeneous, then by share
  std::vector<LengthOptimum> by_length;

  // The candidate strategies, in order, as assign::plan_iteration takes them.
  [[nodiscard]] std::vector<Strategy> strategies() const {
    std::vector<Strategy> result;
    for (const ProposedCandidate& candidate : candidates) result.push_back(candidate.strategy);
    return result;
  }
  friend bool operator==(const Proposal&, const Proposal&) = default;
};

// The checks that need neither the dataset nor the profile (gpus and max_len only where given); resolve makes them
// too, and the Python binding when the options are made.
inline void require_valid(const ProposeOptions& options) {
  using sluice::require;
  if (options.gpus) require(*options.gpus >= 1, "proposal: gpus must be >= 1, got ", *options.gpus);
  require(options.length_step >= 1, "proposal: length_step must be >= 1, got ", options.length_step);
  if (options.max_len)
    require(*options.max_len >= options.length_step, "proposal: max_len must be >= length_step = ", options.length_step,
            ", got ", *options.max_len);
  require(options.gpu_step >= 1, "proposal: gpu_step must be >= 1 (tenths of a GPU), got ", options.gpu_step);
  // These keep every integer solution on the relaxed grid, so the relaxation is never worse.
  require(options.gpu_step % 10 == 0 || (options.relaxed && 10 % options.gpu_step == 0),
          "proposal: gpu_step must be whole GPUs (a multiple of 10 tenths), or 1, 2 or 5 tenths when relaxed, got ",
          options.gpu_step);
  require(options.replica_step >= 1 && 10 % options.replica_step == 0,
          "proposal: replica_step must be 1, 2, 5 or 10 tenths of a pipeline, got ", options.replica_step);
  require(std::isfinite(options.tokens_per_iteration) && options.tokens_per_iteration > 0,
          "proposal: tokens_per_iteration must be finite and > 0, got ", options.tokens_per_iteration);
  require(options.max_candidates >= 1, "proposal: max_candidates must be >= 1, got ", options.max_candidates);
}

namespace detail {

// Options checked against the inputs, with gpus and max_len filled in.
inline ProposeOptions resolve(const data::LengthDataset& dataset, const cost::Profile& profile,
                              ProposeOptions options) {
  using sluice::require;
  const std::int64_t longest = std::ranges::max(dataset.lengths());
  if (!options.gpus) options.gpus = profile.gpus();
  if (!options.max_len) options.max_len = longest;
  require(*options.gpus >= 1 && *options.gpus <= profile.gpus(), "proposal: gpus must be in [1, ", profile.gpus(),
          "] (the profile's cluster; resolve the profile for more with Profile::with_gpus), got ", *options.gpus);
  require_valid(options);
  require(longest <= *options.max_len, "proposal: ", dataset.source(), " holds a sequence of ", longest,
          " tokens, longer than max_len = ", *options.max_len, "; truncate the dataset (LengthDataset::truncated)");
  return options;
}

// Schemes that fit N GPUs (and one node's TP when asked) and hold at least one length step, by MaxLen
// descending (ties in the profile's canonical order).
inline std::vector<cost::SchemeCost> usable_schemes(const cost::Profile& profile, const ProposeOptions& options) {
  std::vector<cost::SchemeCost> usable;
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    if (scheme.scheme.gpus() > *options.gpus || scheme.max_len < options.length_step) continue;
    if (options.tp_within_node && scheme.scheme.tp() > profile.spec().gpus_per_node) continue;
    usable.push_back(scheme);
  }
  sluice::require(!usable.empty(), "proposal: no scheme of profile ", profile.name(), " fits ", *options.gpus, " GPUs",
                  options.tp_within_node ? " with TP within a node" : "",
                  " and holds length_step = ", options.length_step, " tokens");
  std::stable_sort(usable.begin(), usable.end(), [](const auto& x, const auto& y) { return x.max_len > y.max_len; });
  const cost::SchemeCost& widest = usable.front();
  sluice::require(
      widest.max_len >= *options.max_len, "proposal: max_len = ", *options.max_len,
      " exceeds the longest MaxLen of a usable scheme (", widest.max_len, ", ", widest.scheme.name(), ")",
      options.tp_within_node ? "; lower max_len or allow TP across nodes (tp_within_node = false)" : "; lower max_len");
  return usable;
}

// Whether a·l² + b·l + c <= 0 for every l in [1, longest]: at both ends and, where it opens downwards, its vertex.
inline bool nowhere_positive(double a, double b, double c, double longest) {
  auto at = [&](double l) { return (a * l + b) * l + c; };
  if (at(1) > 0 || at(longest) > 0) return false;
  const double vertex = a < 0 ? -b / (2 * a) : 0;
  return !(vertex > 1 && vertex < longest && at(vertex) > 0);
}

// Whether `x` serves every interval `y` may serve at no more cost, so that the DP never needs `y`: no more GPUs
// (a budget never does worse with more left) and no more stages, holding whatever y holds up to the DP's
// `max_len`, and a per-sequence term (with c where `sequence_constant`) and a fill term no larger at any of those
// lengths.
inline bool covers(const cost::SchemeCost& x, const cost::SchemeCost& y, bool sequence_constant, std::int64_t max_len) {
  const std::int64_t reach = std::min(y.max_len, max_len);
  if (x.scheme.gpus() > y.scheme.gpus() || x.scheme.pp() > y.scheme.pp() || x.max_len < reach) return false;
  const cost::QuadraticLatency& p = x.latency;
  const cost::QuadraticLatency& q = y.latency;
  const auto longest = static_cast<double>(reach);
  const double dc = sequence_constant ? p.c() - q.c() : 0;
  const double px = x.scheme.pp() - 1, py = y.scheme.pp() - 1;  // the fill terms' factors
  return nowhere_positive(p.a() - q.a(), p.b() - q.b(), dc, longest) &&
         nowhere_positive(px * p.a() - py * q.a(), px * p.b() - py * q.b(), px * p.c() - py * q.c(), longest);
}

// `usable` without the CP and AC schemes another usable scheme covers (of two that cover each other the later goes):
// they never lower the DP's optimum, and a wide scheme space holds many (a ring and a hybrid group of one size
// differ only in their time, one faster at every length a scheme of their MaxLen holds; recomputation only adds
// time where the scheme without it holds the DP's max_len). ⟨TP, PP⟩ schemes all stay, so without CP and AC the DP
// is what it always was.
inline std::vector<cost::SchemeCost> undominated(std::vector<cost::SchemeCost> usable, bool sequence_constant,
                                                 std::int64_t max_len) {
  std::vector<bool> dominated(usable.size());
  for (std::size_t k = 0; k < usable.size(); ++k) {
    if (usable[k].scheme.is_base()) continue;
    for (std::size_t other = 0; other < usable.size() && !dominated[k]; ++other)
      dominated[k] = other != k && !dominated[other] && covers(usable[other], usable[k], sequence_constant, max_len) &&
                     (other < k || !covers(usable[k], usable[other], sequence_constant, max_len));
  }
  std::vector<cost::SchemeCost> kept;
  for (std::size_t k = 0; k < usable.size(); ++k)
    if (!dominated[k]) kept.push_back(usable[k]);
  return kept;
}

// One distinct strategy met while proposing: pipelines per usable scheme, and the bins it was proposed for.
struct Entry {
  std::vector<std::int64_t> pipelines;
  std::vector<std::int64_t> integer_bins;
  std::vector<std::int64_t> rounded_bins;
  std::vector<double> rounded_estimates;  // pooled objective at each of rounded_bins
  bool homogeneous = false;
  double homogeneous_estimate = 0;
};

inline Strategy to_strategy(Span<const SchemeTable> tables, Span<const std::int64_t> pipelines) {
  std::vector<StrategyPart> parts;
  for (std::size_t k = 0; k < tables.size(); ++k)
    if (pipelines[k] > 0) parts.push_back({tables[k].scheme, static_cast<int>(pipelines[k])});
  return Strategy(std::move(parts));
}

// Per usable scheme, the sum of the groups' replica steps of S[N][L_j] (in replica steps of the DP).
inline std::vector<std::int64_t> aggregate(const Dp& dp, std::int64_t j, std::size_t schemes) {
  std::vector<std::int64_t> units(schemes);
  for (const Group& group : dp.groups(j)) units[group.scheme] += group.units;
  return units;
}

// The integer strategies near a relaxed solution (Hydraulis §7, which leaves the details open): per scheme the floor or
// the ceiling of its replica count, every combination; those that fit N GPUs get the leftover GPUs filled (first with
// pipelines of the solution's schemes, largest deficit first, then with the largest usable scheme that fits), and are
// kept when they hold L_j.
inline std::vector<std::vector<std::int64_t>> roundings(Span<const SchemeTable> tables, Span<const std::int64_t> tenths,
                                                        std::int64_t gpus, std::int64_t length) {
  std::vector<std::size_t> fractional;
  std::vector<std::int64_t> floor(tenths.size());
  for (std::size_t k = 0; k < tenths.size(); ++k) {
    floor[k] = tenths[k] / 10;
    if (tenths[k] % 10 != 0) fractional.push_back(k);
  }
  std::vector<std::vector<std::int64_t>> result;
  for (std::size_t mask = 0; mask < (std::size_t{1} << fractional.size()); ++mask) {
    std::vector<std::int64_t> pipelines = floor;
    for (std::size_t b = 0; b < fractional.size(); ++b)
      if ((mask >> b & 1U) != 0) ++pipelines[fractional[b]];
    std::int64_t used = 0;
    for (std::size_t k = 0; k < tables.size(); ++k) used += pipelines[k] * tables[k].gpus;
    if (used > gpus) continue;
    while (true) {
      std::optional<std::size_t> pick;
      for (std::size_t k = 0; k < tables.size(); ++k) {
        if (tenths[k] == 0 || tables[k].gpus > gpus - used) continue;
        if (!pick || tenths[k] - 10 * pipelines[k] > tenths[*pick] - 10 * pipelines[*pick]) pick = k;
      }
      if (!pick) {
        for (std::size_t k = 0; k < tables.size(); ++k)
          if (tables[k].gpus <= gpus - used && (!pick || tables[k].gpus > tables[*pick].gpus)) pick = k;
      }
      if (!pick) break;
      ++pipelines[*pick];
      used += tables[*pick].gpus;
    }
    bool holds = false;
    for (std::size_t k = 0; k < tables.size(); ++k) holds = holds || (pipelines[k] > 0 && tables[k].max_len >= length);
    if (holds) result.push_back(std::move(pipelines));
  }
  return result;
}

// The candidates found so far, keyed by their pipelines per scheme (tables order).
class Entries {
public:
  Entry& at(std::vector<std::int64_t> pipelines) {
    auto [it, inserted] = entries_.try_emplace(pipelines);
    if (inserted) it->second.pipelines = std::move(pipelines);
    return it->second;
  }
  [[nodiscard]] const std::map<std::vector<std::int64_t>, Entry>& all() const noexcept { return entries_; }

private:
  std::map<std::vector<std::int64_t>, Entry> entries_;
};

// Share of iterations whose longest sequence lies in bin j, sequences drawn independently.
inline std::vector<double> longest_in_bin_shares(const LengthAxis& axis, std::int64_t bins, double sequences) {
  std::vector<double> share(static_cast<std::size_t>(bins + 1));
  for (std::int64_t j = 1; j <= bins; ++j)
    share[static_cast<std::size_t>(j)] = std::pow(axis.cdf[static_cast<std::size_t>(j)], sequences) -
                                         std::pow(axis.cdf[static_cast<std::size_t>(j - 1)], sequences);
  return share;
}

// The relaxed optimum at every bin rounded to whole pipelines, each rounding with its pooled estimate (§4.2).
inline void add_roundings(Entries& entries, const Dp& relaxed, Span<const SchemeTable> tables, const LengthAxis& axis,
                          std::int64_t bins, std::int64_t gpus, std::int64_t replica_step) {
  std::map<std::vector<std::int64_t>, std::vector<std::int64_t>> rounded;  // pipelines → bins
  for (std::int64_t j = axis.first_nonempty; j <= bins; ++j) {
    std::vector<std::int64_t> tenths = aggregate(relaxed, j, tables.size());
    for (std::int64_t& units : tenths) units *= replica_step;
    for (auto& pipelines : roundings(tables, tenths, gpus, axis.upper[static_cast<std::size_t>(j)]))
      rounded[std::move(pipelines)].push_back(j);
  }
  for (auto& [pipelines, at_bins] : rounded) {
    std::vector<std::pair<std::size_t, std::int64_t>> parts;
    for (std::size_t k = 0; k < tables.size(); ++k)
      if (pipelines[k] > 0) parts.emplace_back(k, pipelines[k]);
    const std::vector<double> objective = pooled_objective(tables, axis, parts, at_bins.back());
    Entry& found = entries.at(pipelines);
    for (const std::int64_t j : at_bins) {
      found.rounded_bins.push_back(j);
      found.rounded_estimates.push_back(objective[static_cast<std::size_t>(j)]);
    }
  }
}

// The best homogeneous strategy for Lmax (all GPUs as copies of one scheme holding Lmax) is always a candidate.
inline void add_best_homogeneous(Entries& entries, Span<const SchemeTable> tables, const LengthAxis& axis,
                                 std::int64_t bins, std::int64_t gpus, std::int64_t max_len) {
  std::optional<std::size_t> best;
  double best_estimate = infinity;
  for (std::size_t k = 0; k < tables.size() && tables[k].max_len >= max_len; ++k) {
    const std::int64_t copies = gpus / tables[k].gpus;  // whole copies of the scheme on the GPUs
    const double estimate =
        tables[k].interval(0, bins, axis.last_nonempty[static_cast<std::size_t>(bins)]) / static_cast<double>(copies);
    if (estimate < best_estimate) {
      best = k;
      best_estimate = estimate;
    }
  }
  std::vector<std::int64_t> pipelines(tables.size());
  pipelines[*best] = gpus / tables[*best].gpus;
  Entry& found = entries.at(std::move(pipelines));
  found.homogeneous = true;
  found.homogeneous_estimate = best_estimate;
}

struct Ranked {
  ProposedCandidate candidate;
  std::string name;
  bool at_max_len = false;
  bool homogeneous = false;
};

// Every entry as a candidate: the bins it serves, its estimate at the highest of them, its share of iterations.
inline std::vector<Ranked> rank(const Entries& entries, const Dp& integer, Span<const SchemeTable> tables,
                                const LengthAxis& axis, std::int64_t bins, Span<const double> bin_share) {
  std::vector<Ranked> ranked;
  for (const auto& [key, found] : entries.all()) {
    std::vector<std::int64_t> served = found.integer_bins;
    served.insert(served.end(), found.rounded_bins.begin(), found.rounded_bins.end());
    if (found.homogeneous) served.push_back(bins);
    std::sort(served.begin(), served.end());
    const auto [first_dup, end] = std::ranges::unique(served);
    served.erase(first_dup, end);
    const std::int64_t high = served.back();
    double estimate = found.homogeneous && high == bins ? found.homogeneous_estimate : infinity;
    if (!found.rounded_bins.empty() && found.rounded_bins.back() == high)
      estimate = std::min(estimate, found.rounded_estimates.back());
    if (!found.integer_bins.empty() && found.integer_bins.back() == high)
      estimate = std::min(estimate, integer.optimum(high));
    double share = 0;
    for (const std::int64_t j : served) share += bin_share[static_cast<std::size_t>(j)];
    const Origin origin = !found.integer_bins.empty()   ? Origin::integer_dp
                          : !found.rounded_bins.empty() ? Origin::relaxed_rounding
                                                        : Origin::homogeneous;
    Strategy strategy = to_strategy(tables, found.pipelines);
    std::string name = strategy.name();
    ranked.push_back({.candidate = {.strategy = std::move(strategy),
                                    .estimate = estimate,
                                    .min_len = axis.upper[static_cast<std::size_t>(served.front())],
                                    .max_len = axis.upper[static_cast<std::size_t>(high)],
                                    .share = share,
                                    .origin = origin},
                      .name = std::move(name),
                      .at_max_len = high == bins,
                      .homogeneous = found.homogeneous});
  }
  return ranked;
}

// The best candidate at Lmax, the best homogeneous one, then by share (the iterations a candidate was proposed
// for), estimate and name.
inline void order(std::vector<Ranked>& ranked) {
  auto by_estimate = [](const Ranked& x, const Ranked& y) {
    return std::tie(x.candidate.estimate, x.name) < std::tie(y.candidate.estimate, y.name);
  };
  const auto best_at_max = std::ranges::min_element(ranked, [&](const Ranked& x, const Ranked& y) {
    return x.at_max_len != y.at_max_len ? x.at_max_len : by_estimate(x, y);
  });
  std::iter_swap(ranked.begin(), best_at_max);
  const auto homogeneous = std::ranges::find_if(ranked, &Ranked::homogeneous);
  auto rest = ranked.begin() + 1;
  if (homogeneous != ranked.begin()) std::iter_swap(rest++, homogeneous);
  std::sort(rest, ranked.end(), [&](const Ranked& x, const Ranked& y) {
    if (x.candidate.share != y.candidate.share) return x.candidate.share > y.candidate.share;
    return by_estimate(x, y);
  });
}

}  // namespace detail

inline Proposal propose(const data::LengthDataset& dataset, const cost::Profile& profile,
                        const ProposeOptions& requested = {}) {
  const ProposeOptions options = detail::resolve(dataset, profile, requested);
  const std::int64_t gpus = *options.gpus;
  const std::vector<cost::SchemeCost> usable =
      detail::undominated(detail::usable_schemes(profile, options), options.sequence_constant, *options.max_len);

  // Both grids are checked before any table is built.
  const std::int64_t bins = (*options.max_len + options.length_step - 1) / options.length_step;
  std::int64_t common = 0;
  for (const cost::SchemeCost& scheme : usable) common = std::gcd(common, scheme.scheme.gpus());
  const detail::Grid integer_grid = detail::Grid::make(common, gpus, (options.gpu_step + 9) / 10 * 10, 10, bins);
  std::optional<detail::Grid> relaxed_grid;
  if (options.relaxed) relaxed_grid = detail::Grid::make(common, gpus, options.gpu_step, options.replica_step, bins);

  const auto lengths = dataset.lengths();
  const detail::LengthAxis axis(lengths, options.length_step, *options.max_len);
  // Counts scaled to one iteration: tokens per iteration / mean length sequences.
  const double weight = options.tokens_per_iteration / static_cast<double>(dataset.tokens());
  std::vector<detail::SchemeTable> tables;
  tables.reserve(usable.size());
  for (const cost::SchemeCost& scheme : usable)
    tables.emplace_back(scheme, axis, weight, options.sequence_constant, options.fill_term);

  Proposal proposal;
  proposal.options = options;
  proposal.profile = profile.name();
  proposal.sequences_per_iteration = weight * static_cast<double>(lengths.size());
  const std::vector<double> bin_share = detail::longest_in_bin_shares(axis, bins, proposal.sequences_per_iteration);

  const detail::Dp integer(tables, axis, integer_grid);
  sluice::require(integer.optimum(bins) < detail::infinity, "proposal: gpu_step = ", options.gpu_step,
                  " tenths is too coarse: no scheme holding max_len fits the budget grid of ", gpus, " GPUs");
  proposal.integer_optimum = integer.optimum(bins);
  detail::Entries entries;
  for (std::int64_t j = axis.first_nonempty; j <= bins; ++j)
    entries.at(detail::aggregate(integer, j, tables.size())).integer_bins.push_back(j);
  std::optional<detail::Dp> relaxed;
  if (options.relaxed) {
    relaxed.emplace(tables, axis, *relaxed_grid);
    proposal.relaxed_optimum = relaxed->optimum(bins);
    detail::add_roundings(entries, *relaxed, tables, axis, bins, gpus, options.replica_step);
  }
  detail::add_best_homogeneous(entries, tables, axis, bins, gpus, *options.max_len);

  std::vector<detail::Ranked> ranked = detail::rank(entries, integer, tables, axis, bins, bin_share);
  proposal.considered = static_cast<std::int64_t>(ranked.size());
  detail::order(ranked);
  for (auto& item : ranked) {
    if (std::ssize(proposal.candidates) == options.max_candidates) break;
    proposal.candidates.push_back(std::move(item.candidate));
  }
  for (std::int64_t j = axis.first_nonempty; j <= bins; ++j) {
    LengthOptimum point{.max_len = axis.upper[static_cast<std::size_t>(j)],
                        .integer = integer.optimum(j),
                        .relaxed = std::nullopt,
                        .share = bin_share[static_cast<std::size_t>(j)]};
    if (relaxed) point.relaxed = relaxed->optimum(j);
    proposal.by_length.push_back(point);
  }
  return proposal;
}

// Checks a proposal against the profile it was made for; raises invalid_plan naming the first broken invariant.
inline void validate(const Proposal& proposal, const cost::Profile& profile) {
  const PlanCheck check("proposal: ");
  check(proposal.options.gpus && proposal.options.max_len, "options are not resolved (gpus, max_len)");
  const std::int64_t gpus = *proposal.options.gpus;
  const std::int64_t max_len = *proposal.options.max_len;
  check(!proposal.candidates.empty(), "has no candidates");
  check(std::ssize(proposal.candidates) <= proposal.options.max_candidates, "has ", proposal.candidates.size(),
        " candidates, more than max_candidates = ", proposal.options.max_candidates);
  check(std::isfinite(proposal.integer_optimum) && proposal.integer_optimum >= 0, "integer optimum ",
        proposal.integer_optimum);
  check(!proposal.relaxed_optimum || *proposal.relaxed_optimum <= proposal.integer_optimum, "relaxed optimum ",
        proposal.relaxed_optimum.value_or(0), " exceeds the integer optimum ", proposal.integer_optimum);
  for (std::size_t c = 0; c < proposal.candidates.size(); ++c) {
    const ProposedCandidate& candidate = proposal.candidates[c];
    const std::string name = candidate.strategy.name();
    check(candidate.strategy.gpus() <= gpus, "candidate ", c, " (", name, ") needs ", candidate.strategy.gpus(),
          " GPUs, more than ", gpus);
    std::int64_t widest = 0;
    for (const StrategyPart& part : candidate.strategy.parts()) {
      const cost::SchemeCost* scheme = profile.find(part.scheme);
      check(scheme != nullptr, "candidate ", c, " (", name, ") uses ", part.scheme.name(), ", not usable in profile ",
            profile.name());
      widest = std::max(widest, scheme->max_len);
    }
    check(candidate.min_len >= 1 && candidate.min_len <= candidate.max_len && candidate.max_len <= max_len,
          "candidate ", c, " (", name, ") has length range [", candidate.min_len, ", ", candidate.max_len, "]");
    check(widest >= candidate.max_len, "candidate ", c, " (", name, ") holds at most ", widest,
          " tokens but was proposed for ", candidate.max_len);
    check(std::isfinite(candidate.estimate) && candidate.estimate >= 0, "candidate ", c, " (", name, ") estimate ",
          candidate.estimate);
    check(candidate.share >= 0 && candidate.share <= 1 + 1e-9, "candidate ", c, " (", name, ") share ",
          candidate.share);
  }
  check(proposal.candidates.front().max_len == max_len, "the first candidate does not hold max_len = ", max_len);
}

}  // namespace sluice::proposal
