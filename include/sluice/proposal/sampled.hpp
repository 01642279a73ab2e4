#pragma once
// Strategy proposal judged by what it delivers: candidate sets scored by the mean planned time
// (assign::plan_iteration's estimate, the per-iteration choice of Hydraulis Fig. 6) of batches sampled from the
// user's data, rather than by the interval objective of the proposal DP (Hydraulis §7), which predicts the planned
// time poorly. The DP's strategies seed the pool. docs/proposal.md ("Proposing by sampled batches") describes it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/assign/dispatch.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/proposal/propose.hpp"

namespace sluice::proposal {

// Bounds that keep the work bounded (docs/limits.md): at most (max_pool + usable schemes) × choosing_batches plans
// choose the set.
inline constexpr int max_sampled_batches = 1024;          // choosing_batches and held_out_batches each
inline constexpr std::int64_t max_sampled_pool = 4096;    // max_pool
inline constexpr std::int64_t max_sampled_candidates = 64;  // K = paper.max_candidates
inline constexpr double max_sampled_tokens = 1 << 24;     // paper.tokens_per_iteration, the batch budget

struct SampledOptions {
  // The proposal DP whose candidates (at every grid max length) seed the pool. Its max_candidates is K, the size
  // of the chosen set, and its tokens_per_iteration the token budget of a sampled batch.
  ProposeOptions paper{};
  int choosing_batches = 48;  // batches the set is chosen on
  int held_out_batches = 32;  // the next batches, which only measure
  std::uint64_t seed = 0;     // the batch sampler's
  // Planning of every (strategy, batch): few trials, as the pool needs thousands of plans.
  assign::DispatchOptions dispatch{.trials = 4};
  // Pool cap: the DP's strategies up to it (its first K always), every homogeneous strategy, then neighbours
  // until the pool holds this many. >= K.
  std::int64_t max_pool = 256;
  // Seconds a strategy adds per iteration outside propagation (pulling parameters into its layout, pushing
  // gradients back: shard::iteration_costs); empty = 0. Must be finite and >= 0.
  std::function<double(const Strategy&)> overhead;
};

// Where a pool strategy came from (proposal_dp: the DP under either per-sequence cost), by priority when several
// sources give it.
enum class PoolSource { proposal_dp, homogeneous, neighbour };

struct SampledCandidate {
  Strategy strategy;
  std::int64_t wins = 0;  // choosing batches on which it has the lowest planned time (ties to the earlier)
  PoolSource source = PoolSource::proposal_dp;
  friend bool operator==(const SampledCandidate&, const SampledCandidate&) = default;
};

struct SampledProposal {
  Proposal paper;  // the DP's own proposal, exactly as propose(dataset, profile, options.paper) gives it
  int choosing_batches = 0;
  int held_out_batches = 0;
  std::uint64_t seed = 0;
  int trials = 0;  // dispatch trials of every plan
  // The chosen set: first the member that holds max_len winning most choosing batches, then by wins (descending)
  // and name. Members that win no choosing batch are dropped, except that the first always stays.
  std::vector<SampledCandidate> candidates;
  double choosing_mean = 0;        // mean planned time (estimate + overhead) of the set on the choosing batches
  double held_out_mean = 0;        // ... on the held-out batches
  double paper_choosing_mean = 0;  // the paper's candidate set on the same choosing batches
  double paper_held_out_mean = 0;  // ... and held-out batches
  std::string best_homogeneous;    // the homogeneous strategy holding max_len best on the held-out batches
  double best_homogeneous_held_out_mean = 0;
  std::int64_t pool_size = 0;  // strategies evaluated on every choosing batch
  std::int64_t plans = 0;      // (strategy, batch) plans made in all
  std::int64_t rounds = 0;     // neighbour rounds after the first selection

  // The chosen strategies, in order, as assign::plan_iteration takes them.
  [[nodiscard]] std::vector<Strategy> strategies() const {
    std::vector<Strategy> result;
    for (const SampledCandidate& candidate : candidates) result.push_back(candidate.strategy);
    return result;
  }
  friend bool operator==(const SampledProposal&, const SampledProposal&) = default;
};

namespace detail {

// A chosen subset of a time matrix's rows and the sum over columns of its per-column minimum.
struct Selection {
  std::vector<std::size_t> rows;  // ascending
  double total = 0;
};

inline double set_total(const std::vector<std::vector<double>>& times, std::span<const std::size_t> rows) {
  double total = 0;
  for (std::size_t b = 0; b < times.front().size(); ++b) {
    double best = infinity;
    for (const std::size_t r : rows) best = std::min(best, times[r][b]);
    total += best;
  }
  return total;
}

// Local search from a valid set (holding a holding row): best-improvement moves, first adding a row while the set
// has fewer than k, then also swapping a member for a non-member (keeping a holding member), until no move strictly
// lowers the total. Ties go to the lower row index. Moves strictly lower one deterministic sum, so it ends; each
// pass costs O((k + 1)·rows·batches).
inline Selection improve_set(const std::vector<std::vector<double>>& times, std::size_t k,
                             const std::vector<bool>& holds, std::vector<std::size_t> set) {
  const std::size_t rows = times.size();
  const std::size_t batches = times.front().size();
  std::vector<bool> member(rows);
  for (const std::size_t r : set) member[r] = true;

  // Per batch the set's lowest and second-lowest time, and the member giving the lowest (ties to the lower row).
  std::vector<double> lowest(batches);
  std::vector<double> second(batches);
  std::vector<std::size_t> lowest_row(batches);
  auto summarise = [&] {
    std::ranges::sort(set);
    for (std::size_t b = 0; b < batches; ++b) {
      lowest[b] = second[b] = infinity;
      for (const std::size_t r : set) {
        if (times[r][b] < lowest[b]) {
          second[b] = lowest[b];
          lowest[b] = times[r][b];
          lowest_row[b] = r;
        } else {
          second[b] = std::min(second[b], times[r][b]);
        }
      }
    }
    double total = 0;
    for (std::size_t b = 0; b < batches; ++b) total += lowest[b];
    return total;
  };
  double total = summarise();

  constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  // The total after dropping `out` (none: drop nothing) and adding `in`.
  auto moved_total = [&](std::size_t out, std::size_t in) {
    double sum = 0;
    for (std::size_t b = 0; b < batches; ++b) {
      const double kept = out != none && lowest_row[b] == out ? second[b] : lowest[b];
      sum += std::min(kept, times[in][b]);
    }
    return sum;
  };
  auto best_move = [&](bool swaps) {
    std::tuple<double, std::size_t, std::size_t> best{total, none, none};
    std::size_t holding = 0;
    for (const std::size_t r : set) holding += holds[r] ? 1 : 0;
    std::vector<std::size_t> outs;
    if (set.size() < k) outs.push_back(none);
    if (swaps)
      for (const std::size_t r : set) outs.push_back(r);
    for (const std::size_t out : outs) {
      for (std::size_t in = 0; in < rows; ++in) {
        if (member[in]) continue;
        if (out != none && holds[out] && holding == 1 && !holds[in]) continue;  // keep a holding member
        const double sum = moved_total(out, in);
        if (sum < std::get<0>(best)) best = {sum, out, in};
      }
    }
    return best;
  };
  for (const bool swaps : {false, true}) {
    while (true) {
      const auto [sum, out, in] = best_move(swaps);
      if (in == none) break;
      if (out != none) {
        member[out] = false;
        std::erase(set, out);
      }
      member[in] = true;
      set.push_back(in);
      total = summarise();
    }
  }
  return {set, total};
}

// How many holding rows select_set starts from, best alone first: more starts escape more local optima (on the
// tests' 2,000 small random matrices one start misses the optimum 16 times, eight starts once), a search each.
inline constexpr std::size_t selection_starts = 8;

// At most k rows of times[row][batch] minimising the sum over batches of the per-batch minimum, holding at least
// one row with holds[row] (a row that can serve any batch, so finite everywhere). Local search (improve_set) from
// `start` when given and from each of the selection_starts best holding rows alone; the best result wins, ties to
// the earlier start. A heuristic: the tests compare it with brute force.
inline Selection select_set(const std::vector<std::vector<double>>& times, std::size_t k,
                            const std::vector<bool>& holds, const std::vector<std::size_t>& start = {}) {
  std::vector<std::pair<double, std::size_t>> alone;
  for (std::size_t r = 0; r < times.size(); ++r)
    if (holds[r]) alone.emplace_back(set_total(times, std::span(&r, 1)), r);
  std::ranges::sort(alone);
  std::vector<std::vector<std::size_t>> starts;
  if (!start.empty()) starts.push_back(start);
  for (std::size_t s = 0; s < std::min(alone.size(), selection_starts); ++s) starts.push_back({alone[s].second});
  std::optional<Selection> best;
  for (const std::vector<std::size_t>& from : starts) {
    Selection found = improve_set(times, k, holds, from);
    if (!best || found.total < best->total) best = std::move(found);
  }
  return *std::move(best);
}

// The batches of a sampled proposal: the first `choosing_batches` draws of one sampler, then the next
// `held_out_batches`. They are distinct draws; they share no sequence while all of them fit in one epoch.
struct SampledBatches {
  std::vector<data::Batch> choosing;
  std::vector<data::Batch> held_out;
};

inline SampledBatches draw_batches(const data::LengthDataset& dataset, const SampledOptions& options) {
  data::BatchSampler sampler(
      dataset,
      {.tokens_per_batch = static_cast<std::int64_t>(options.paper.tokens_per_iteration), .seed = options.seed});
  SampledBatches batches;
  for (int b = 0; b < options.choosing_batches; ++b) batches.choosing.push_back(sampler.next());
  for (int b = 0; b < options.held_out_batches; ++b) batches.held_out.push_back(sampler.next());
  return batches;
}

inline void require_sampled_options(const SampledOptions& options) {
  using sluice::require;
  require(options.choosing_batches >= 1 && options.choosing_batches <= max_sampled_batches,
          "sampled proposal: choosing_batches must be in [1, ", max_sampled_batches, "], got ",
          options.choosing_batches);
  require(options.held_out_batches >= 1 && options.held_out_batches <= max_sampled_batches,
          "sampled proposal: held_out_batches must be in [1, ", max_sampled_batches, "], got ",
          options.held_out_batches);
  require(options.max_pool >= 1 && options.max_pool <= max_sampled_pool, "sampled proposal: max_pool must be in [1, ",
          max_sampled_pool, "], got ", options.max_pool);
  require(options.paper.max_candidates >= 1 && options.paper.max_candidates <= max_sampled_candidates,
          "sampled proposal: max_candidates must be in [1, ", max_sampled_candidates, "], got ",
          options.paper.max_candidates);
  require(options.max_pool >= options.paper.max_candidates, "sampled proposal: max_pool must be >= max_candidates = ",
          options.paper.max_candidates, ", got ", options.max_pool);
  require(options.paper.tokens_per_iteration >= 1 && options.paper.tokens_per_iteration <= max_sampled_tokens,
          "sampled proposal: tokens_per_iteration must be in [1, ", max_sampled_tokens, "], got ",
          options.paper.tokens_per_iteration);
  assign::require_valid(options.dispatch);
}

// Neighbours of a strategy within N GPUs: for every part and every other scheme of `schemes`, trade the fewest
// pipelines of the part that (with the idle GPUs) free one pipeline of the scheme for as many of it as fit; and
// fill idle GPUs with as many pipelines of one scheme as fit.
inline std::vector<Strategy> neighbours(const Strategy& strategy, std::span<const Scheme> schemes, std::int64_t gpus) {
  std::vector<Strategy> result;
  const std::int64_t idle = gpus - strategy.gpus();
  for (const Scheme& target : schemes) {
    const std::int64_t size = target.gpus();
    if (size <= idle) {
      std::vector<StrategyPart> parts = strategy.parts();
      parts.push_back({target, static_cast<int>(idle / size)});
      result.emplace_back(std::move(parts));
    }
    for (std::size_t p = 0; p < strategy.parts().size(); ++p) {
      const StrategyPart& part = strategy.parts()[p];
      if (part.scheme == target) continue;
      const std::int64_t traded =
          std::max<std::int64_t>(1, (size - idle + part.scheme.gpus() - 1) / part.scheme.gpus());
      if (traded > part.pipelines) continue;
      std::vector<StrategyPart> parts = strategy.parts();
      parts[p].pipelines -= static_cast<int>(traded);
      if (parts[p].pipelines == 0) parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(p));
      parts.push_back({target, static_cast<int>((traded * part.scheme.gpus() + idle) / size)});
      result.emplace_back(std::move(parts));
    }
  }
  return result;
}

}  // namespace detail

inline SampledProposal propose_sampled(const data::LengthDataset& dataset, const cost::Profile& profile,
                                       const SampledOptions& options) {
  detail::require_sampled_options(options);
  const std::int64_t k = options.paper.max_candidates;

  // The DP's every distinct strategy: the paper's proposal is its first K (the cap is applied last).
  ProposeOptions all = options.paper;
  all.max_candidates = std::numeric_limits<std::int64_t>::max();
  Proposal full = propose(dataset, profile, all);
  SampledProposal result;
  result.paper = full;
  result.paper.options.max_candidates = k;
  if (std::ssize(result.paper.candidates) > k)
    result.paper.candidates.erase(result.paper.candidates.begin() + k, result.paper.candidates.end());
  result.choosing_batches = options.choosing_batches;
  result.held_out_batches = options.held_out_batches;
  result.seed = options.seed;
  result.trials = options.dispatch.trials;

  const std::int64_t gpus = *full.options.gpus;
  const std::int64_t max_len = *full.options.max_len;
  const std::vector<cost::SchemeCost> usable = detail::usable_schemes(profile, full.options);
  const detail::SampledBatches batches = detail::draw_batches(dataset, options);
  const assign::PlanOptions plan_options{.dispatch = options.dispatch, .candidate_overhead = {}};

  auto overhead_of = [&](const Strategy& strategy) {
    if (!options.overhead) return 0.0;
    const double overhead = options.overhead(strategy);
    sluice::require(std::isfinite(overhead) && overhead >= 0, "sampled proposal: overhead of ", strategy.name(),
                    " must be finite and >= 0, got ", overhead);
    return overhead;
  };
  // Planned time of a strategy on each batch: its estimate + overhead, or +inf when it cannot hold the batch.
  auto plan_times = [&](const Strategy& strategy, std::span<const data::Batch> sample) {
    const double overhead = overhead_of(strategy);
    const std::int64_t widest = profile.pipelines(strategy).front().max_len;
    std::vector<double> times;
    for (const data::Batch& batch : sample) {
      if (longest_length(batch.sequences) > widest) {
        times.push_back(detail::infinity);
        continue;
      }
      times.push_back(assign::plan_iteration(batch.sequences, std::span(&strategy, 1), profile, plan_options).estimate +
                      overhead);
      ++result.plans;
    }
    return times;
  };

  struct PoolEntry {
    Strategy strategy;
    PoolSource source;
    bool holds = false;  // holds max_len
    std::vector<double> times;  // on the choosing batches
  };
  std::map<std::string, PoolEntry> pool;  // by name: the selection's ties go to the earlier name
  auto add = [&](const Strategy& strategy, PoolSource source, bool capped = true) {
    if (capped && std::ssize(pool) >= options.max_pool) return;
    const std::string name = strategy.name();
    if (pool.contains(name)) return;
    const bool holds = profile.pipelines(strategy).front().max_len >= max_len;
    pool.emplace(name, PoolEntry{strategy, source, holds, plan_times(strategy, batches.choosing)});
  };
  // The DP's candidates in its order: the paper's K first, so the cap never drops them. Then the DP's under the
  // other per-sequence cost (sequence_constant flipped): neither interval cost predicts the planned time well.
  for (const ProposedCandidate& candidate : full.candidates) add(candidate.strategy, PoolSource::proposal_dp);
  all.sequence_constant = !all.sequence_constant;
  for (const ProposedCandidate& candidate : propose(dataset, profile, all).candidates)
    add(candidate.strategy, PoolSource::proposal_dp);
  std::vector<Strategy> homogeneous;
  for (const cost::SchemeCost& scheme : usable) {
    homogeneous.push_back(Strategy::homogeneous(scheme.scheme, static_cast<int>(gpus / scheme.scheme.gpus())));
    add(homogeneous.back(), PoolSource::homogeneous, false);
  }

  std::vector<std::string> chosen;  // names
  auto select = [&] {
    std::vector<std::vector<double>> times;
    std::vector<bool> holds;
    std::vector<std::string> names;
    std::vector<std::size_t> start;
    for (const auto& [name, entry] : pool) {
      if (std::ranges::find(chosen, name) != chosen.end()) start.push_back(names.size());
      times.push_back(entry.times);
      holds.push_back(entry.holds);
      names.push_back(name);
    }
    const detail::Selection selection = detail::select_set(times, static_cast<std::size_t>(k), holds, start);
    chosen.clear();
    for (const std::size_t r : selection.rows) chosen.push_back(names[r]);
    return selection.total;
  };
  double total = select();
  // Neighbours of the chosen members, over the schemes the pool's DP strategies and the chosen ones use, until a
  // round finds nothing better or the pool is full.
  std::set<Scheme> schemes;
  for (const ProposedCandidate& candidate : full.candidates)
    for (const StrategyPart& part : candidate.strategy.parts()) schemes.insert(part.scheme);
  while (std::ssize(pool) < options.max_pool) {
    const std::size_t before = pool.size();
    for (const std::string& name : chosen) {
      const Strategy member = pool.at(name).strategy;
      for (const StrategyPart& part : member.parts()) schemes.insert(part.scheme);
      const std::vector<Scheme> targets(schemes.begin(), schemes.end());
      for (const Strategy& neighbour : detail::neighbours(member, targets, gpus)) add(neighbour, PoolSource::neighbour);
    }
    if (pool.size() == before) break;
    ++result.rounds;
    const double improved = select();
    if (!(improved < total)) break;
    total = improved;
  }
  result.pool_size = std::ssize(pool);
  result.choosing_mean = total / options.choosing_batches;

  // Wins: each choosing batch goes to the member with the lowest time, ties to the earlier name.
  struct Member {
    std::string name;
    std::int64_t wins = 0;
  };
  std::vector<Member> members;
  for (const std::string& name : chosen) members.push_back({name, 0});
  for (std::size_t b = 0; b < batches.choosing.size(); ++b) {
    std::size_t best = 0;
    for (std::size_t m = 1; m < members.size(); ++m)
      if (pool.at(members[m].name).times[b] < pool.at(members[best].name).times[b]) best = m;
    ++members[best].wins;
  }
  std::ranges::stable_sort(members, [](const Member& x, const Member& y) { return x.wins > y.wins; });
  const auto first = std::ranges::find_if(members, [&](const Member& m) { return pool.at(m.name).holds; });
  std::rotate(members.begin(), first, first + 1);
  // A member that wins nothing changes no batch's time; dropping it spares every iteration a plan.
  const std::string first_name = members.front().name;
  std::erase_if(members, [&](const Member& m) { return m.wins == 0 && m.name != first_name; });
  for (const Member& member : members) {
    const PoolEntry& entry = pool.at(member.name);
    result.candidates.push_back({entry.strategy, member.wins, entry.source});
  }

  // The held-out batches, for the chosen set, the paper's set and every homogeneous strategy holding max_len.
  std::map<std::string, std::vector<double>> held_out;
  auto held_out_mean = [&](const std::vector<Strategy>& set) {
    for (const Strategy& strategy : set)
      if (!held_out.contains(strategy.name()))
        held_out.emplace(strategy.name(), plan_times(strategy, batches.held_out));
    double sum = 0;
    for (std::size_t b = 0; b < batches.held_out.size(); ++b) {
      double best = detail::infinity;
      for (const Strategy& strategy : set) best = std::min(best, held_out.at(strategy.name())[b]);
      sum += best;
    }
    return sum / options.held_out_batches;
  };
  result.held_out_mean = held_out_mean(result.strategies());
  const std::vector<Strategy> paper_set = result.paper.strategies();
  result.paper_held_out_mean = held_out_mean(paper_set);
  {
    double sum = 0;
    for (std::size_t b = 0; b < batches.choosing.size(); ++b) {
      double best = detail::infinity;
      for (const Strategy& strategy : paper_set) best = std::min(best, pool.at(strategy.name()).times[b]);
      sum += best;
    }
    result.paper_choosing_mean = sum / options.choosing_batches;
  }
  result.best_homogeneous_held_out_mean = detail::infinity;
  for (const Strategy& strategy : homogeneous) {
    if (profile.pipelines(strategy).front().max_len < max_len) continue;
    const double mean = held_out_mean({strategy});
    if (mean < result.best_homogeneous_held_out_mean) {
      result.best_homogeneous_held_out_mean = mean;
      result.best_homogeneous = strategy.name();
    }
  }
  return result;
}

// Checks a sampled proposal against the profile it was made for; raises invalid_plan naming the first broken
// invariant.
inline void validate(const SampledProposal& proposal, const cost::Profile& profile) {
  validate(proposal.paper, profile);
  const PlanCheck check("sampled proposal: ");
  constexpr double tolerance = 1e-9;
  const std::int64_t gpus = *proposal.paper.options.gpus;
  const std::int64_t max_len = *proposal.paper.options.max_len;
  check(!proposal.candidates.empty(), "has no candidates");
  check(std::ssize(proposal.candidates) <= proposal.paper.options.max_candidates, "has ", proposal.candidates.size(),
        " candidates, more than max_candidates = ", proposal.paper.options.max_candidates);
  std::set<std::string> names;
  std::int64_t wins = 0;
  for (std::size_t c = 0; c < proposal.candidates.size(); ++c) {
    const SampledCandidate& candidate = proposal.candidates[c];
    const std::string name = candidate.strategy.name();
    check(names.insert(name).second, "candidate ", c, " (", name, ") appears twice");
    check(candidate.strategy.gpus() <= gpus, "candidate ", c, " (", name, ") needs ", candidate.strategy.gpus(),
          " GPUs, more than ", gpus);
    std::vector<Pipeline> pipelines;
    try {
      pipelines = profile.pipelines(candidate.strategy);
    } catch (const invalid_input& error) {
      check(false, "candidate ", c, " (", name, ") does not fit the profile: ", error.what());
    }
    check(c > 0 || pipelines.front().max_len >= max_len, "the first candidate (", name, ") does not hold max_len = ",
          max_len);
    check(candidate.wins >= 0 && (candidate.wins > 0 || c == 0), "candidate ", c, " (", name, ") wins ",
          candidate.wins, " batches");
    wins += candidate.wins;
  }
  check(wins == proposal.choosing_batches, "the candidates win ", wins, " of ", proposal.choosing_batches,
        " choosing batches");
  for (const double mean : {proposal.choosing_mean, proposal.held_out_mean, proposal.paper_choosing_mean,
                            proposal.paper_held_out_mean, proposal.best_homogeneous_held_out_mean})
    check(std::isfinite(mean) && mean >= 0, "mean planned time ", mean);
  check(proposal.choosing_mean <= proposal.paper_choosing_mean * (1 + tolerance), "choosing mean ",
        proposal.choosing_mean, " exceeds the paper set's ", proposal.paper_choosing_mean,
        " (the paper's candidates are in the pool)");
  check(proposal.pool_size >= std::ssize(proposal.candidates), "pool of ", proposal.pool_size, " strategies");
}

}  // namespace sluice::proposal
