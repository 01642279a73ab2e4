#pragma once
// Strategy proposal judged by what it delivers: candidate sets scored by the mean planned time
// (assign::plan_iteration's estimate, the per-iteration choice of Hydraulis Fig. 6) of batches sampled from the
// user's data, rather than by the interval objective of the proposal DP (Hydraulis §7), which predicts the planned
// time poorly. The DP's strategies seed the pool. docs/proposal.md ("Proposing by sampled batches") describes it.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sluice/assign/dispatch.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/proposal/detail/pool_search.hpp"
#include "sluice/proposal/dp.hpp"
#include "sluice/proposal/propose.hpp"

namespace sluice::proposal {

// Bounds that keep the work bounded (docs/limits.md): at most (max_pool + usable schemes) × choosing_batches plans
// choose the set.
inline constexpr int max_sampled_batches = 1024;            // choosing_batches and held_out_batches each
inline constexpr std::int64_t max_sampled_pool = 4096;      // max_pool
inline constexpr std::int64_t max_sampled_candidates = 64;  // K = paper.max_candidates
inline constexpr double max_sampled_tokens = 1 << 24;       // paper.tokens_per_iteration, the batch budget

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
inline constexpr NameTable<PoolSource, 3> pool_source_names{{{PoolSource::proposal_dp, "proposal_dp"},
                                                             {PoolSource::homogeneous, "homogeneous"},
                                                             {PoolSource::neighbour, "neighbour"}}};

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

// The checks of the sampling fields alone (not paper, dispatch or overhead); the Python binding makes them when the
// options are made.
inline void require_sampling(const SampledOptions& options) {
  using sluice::require;
  require(options.choosing_batches >= 1 && options.choosing_batches <= max_sampled_batches,
          "sampled proposal: choosing_batches must be in [1, ", max_sampled_batches, "], got ",
          options.choosing_batches);
  require(options.held_out_batches >= 1 && options.held_out_batches <= max_sampled_batches,
          "sampled proposal: held_out_batches must be in [1, ", max_sampled_batches, "], got ",
          options.held_out_batches);
  require(options.max_pool >= 1 && options.max_pool <= max_sampled_pool, "sampled proposal: max_pool must be in [1, ",
          max_sampled_pool, "], got ", options.max_pool);
}

inline void require_sampled_options(const SampledOptions& options) {
  using sluice::require;
  require_sampling(options);
  require(options.paper.max_candidates >= 1 && options.paper.max_candidates <= max_sampled_candidates,
          "sampled proposal: max_candidates must be in [1, ", max_sampled_candidates, "], got ",
          options.paper.max_candidates);
  require(options.max_pool >= options.paper.max_candidates,
          "sampled proposal: max_pool must be >= max_candidates = ", options.paper.max_candidates, ", got ",
          options.max_pool);
  require(options.paper.tokens_per_iteration >= 1 && options.paper.tokens_per_iteration <= max_sampled_tokens,
          "sampled proposal: tokens_per_iteration must be in [1, ", max_sampled_tokens, "], got ",
          options.paper.tokens_per_iteration);
  assign::require_valid(options.dispatch);
}

// The DP's options keeping its every distinct strategy: the paper's proposal is their first K (the cap comes last).
inline ProposeOptions uncapped(const ProposeOptions& paper) {
  ProposeOptions all = paper;
  all.max_candidates = std::numeric_limits<std::int64_t>::max();
  return all;
}

// The result's record of its options, and the paper's proposal: the first K of the uncapped DP's candidates.
inline SampledProposal start_result(const Proposal& full, const SampledOptions& options) {
  const std::int64_t k = options.paper.max_candidates;
  SampledProposal result;
  result.paper = full;
  result.paper.options.max_candidates = k;
  if (std::ssize(result.paper.candidates) > k)
    result.paper.candidates.erase(result.paper.candidates.begin() + k, result.paper.candidates.end());
  result.choosing_batches = options.choosing_batches;
  result.held_out_batches = options.held_out_batches;
  result.seed = options.seed;
  result.trials = options.dispatch.trials;
  return result;
}

// Plans strategies on sampled batches, counting every plan made into `plans`.
class SampledPlanner {
public:
  SampledPlanner(const cost::Profile& profile, const SampledOptions& options, std::int64_t& plans)
      : profile_(profile),
        options_(options),
        plan_options_{.dispatch = options.dispatch, .candidate_overhead = {}},
        plans_(plans) {}

  // Planned time of a strategy on each batch: its estimate + overhead, or +inf when it cannot hold the batch.
  std::vector<double> plan_times(const Strategy& strategy, Span<const data::Batch> sample) {
    const double overhead = overhead_of(strategy);
    const std::int64_t widest = profile_.pipelines(strategy).front().max_len;
    std::vector<double> times;
    for (const data::Batch& batch : sample) {
      if (longest_length(batch.sequences) > widest) {
        times.push_back(infinity);
        continue;
      }
      const double estimate =
          assign::plan_iteration(batch.sequences, Span(&strategy, 1), profile_, plan_options_).estimate;
      times.push_back(estimate + overhead);
      ++plans_;
    }
    return times;
  }

  [[nodiscard]] const cost::Profile& profile() const noexcept { return profile_; }

private:
  // The caller's per-iteration overhead of a strategy (0 without one), checked as it comes from outside.
  [[nodiscard]] double overhead_of(const Strategy& strategy) const {
    if (!options_.overhead) return 0.0;
    const double overhead = options_.overhead(strategy);
    sluice::require(std::isfinite(overhead) && overhead >= 0, "sampled proposal: overhead of ", strategy.name(),
                    " must be finite and >= 0, got ", overhead);
    return overhead;
  }

  const cost::Profile& profile_;
  const SampledOptions& options_;
  const assign::PlanOptions plan_options_;
  std::int64_t& plans_;
};

// A pool strategy: where it came from, whether it holds max_len, and its times.
struct PoolEntry {
  Strategy strategy;
  PoolSource source;
  bool holds = false;         // holds max_len
  std::vector<double> times;  // on the choosing batches
};

// The strategies planned on every choosing batch, up to max_pool of them but the uncapped homogeneous ones.
class SampledPool {
public:
  SampledPool(SampledPlanner& planner, Span<const data::Batch> choosing, std::int64_t max_len, std::int64_t max_pool)
      : planner_(planner), choosing_(choosing), max_len_(max_len), max_pool_(max_pool) {}

  // Plans a strategy not in the pool yet; a `capped` one only while the pool holds fewer than max_pool.
  void add(const Strategy& strategy, PoolSource source, bool capped = true) {
    if (capped && std::ssize(pool_) >= max_pool_) return;
    const std::string name = strategy.name();
    if (pool_.contains(name)) return;
    const bool holds = planner_.profile().pipelines(strategy).front().max_len >= max_len_;
    pool_.emplace(name, PoolEntry{strategy, source, holds, planner_.plan_times(strategy, choosing_)});
  }

  [[nodiscard]] const std::map<std::string, PoolEntry>& entries() const noexcept { return pool_; }
  [[nodiscard]] const PoolEntry& at(const std::string& name) const { return pool_.at(name); }

private:
  SampledPlanner& planner_;
  Span<const data::Batch> choosing_;
  std::int64_t max_len_;
  std::int64_t max_pool_;
  std::map<std::string, PoolEntry> pool_;  // by name: the selection's ties go to the earlier name
};

// Seeds the pool with the DP's strategies and every homogeneous one; returns the homogeneous ones.
inline std::vector<Strategy> seed_pool(SampledPool& pool, const Proposal& full, const data::LengthDataset& dataset,
                                       const cost::Profile& profile, ProposeOptions all,
                                       Span<const cost::SchemeCost> usable, std::int64_t gpus) {
  // The DP's candidates in its order: the paper's K first, so the cap never drops them. Then the DP's under the
  // other per-sequence cost (sequence_constant flipped): neither interval cost predicts the planned time well.
  for (const ProposedCandidate& candidate : full.candidates) pool.add(candidate.strategy, PoolSource::proposal_dp);
  all.sequence_constant = !all.sequence_constant;
  for (const ProposedCandidate& candidate : propose(dataset, profile, all).candidates)
    pool.add(candidate.strategy, PoolSource::proposal_dp);
  std::vector<Strategy> homogeneous;
  for (const cost::SchemeCost& scheme : usable) {
    homogeneous.push_back(Strategy::homogeneous(scheme.scheme, static_cast<int>(gpus / scheme.scheme.gpus())));
    pool.add(homogeneous.back(), PoolSource::homogeneous, false);
  }
  return homogeneous;
}

// Chooses at most k pool members (select_set, starting from `chosen`) into `chosen`; returns their total time.
inline double select_members(const SampledPool& pool, std::int64_t k, std::vector<std::string>& chosen) {
  std::vector<std::vector<double>> times;
  std::vector<bool> holds;
  std::vector<std::string> names;
  std::vector<std::size_t> start;
  for (const auto& [name, entry] : pool.entries()) {
    if (std::ranges::find(chosen, name) != chosen.end()) start.push_back(names.size());
    times.push_back(entry.times);
    holds.push_back(entry.holds);
    names.push_back(name);
  }
  const Selection selection = select_set(times, static_cast<std::size_t>(k), holds, start);
  chosen.clear();
  for (const std::size_t r : selection.rows) chosen.push_back(names[r]);
  return selection.total;
}

// Neighbour rounds: the pool grows around the chosen set while a round lowers its total; returns the total.
inline double grow_pool(SampledPool& pool, std::vector<std::string>& chosen, double total, const Proposal& full,
                        std::int64_t k, std::int64_t max_pool, std::int64_t gpus, std::int64_t& rounds) {
  // Neighbours over the schemes the pool's DP strategies and the members chosen so far use.
  std::set<Scheme> schemes;
  for (const ProposedCandidate& candidate : full.candidates)
    for (const StrategyPart& part : candidate.strategy.parts()) schemes.insert(part.scheme);
  while (std::ssize(pool.entries()) < max_pool) {
    const std::size_t before = pool.entries().size();
    for (const std::string& name : chosen) {
      const Strategy member = pool.at(name).strategy;
      for (const StrategyPart& part : member.parts()) schemes.insert(part.scheme);
      const std::vector<Scheme> targets(schemes.begin(), schemes.end());
      for (const Strategy& neighbour : neighbours(member, targets, gpus)) pool.add(neighbour, PoolSource::neighbour);
    }
    if (pool.entries().size() == before) break;
    ++rounds;
    const double improved = select_members(pool, k, chosen);
    if (!(improved < total)) break;
    total = improved;
  }
  return total;
}

// The chosen set as SampledProposal::candidates orders it, with each member's wins on the choosing batches.
inline std::vector<SampledCandidate> rank_members(const SampledPool& pool, const std::vector<std::string>& chosen,
                                                  std::size_t choosing_batches) {
  struct Member {
    std::string name;
    std::int64_t wins = 0;
  };
  std::vector<Member> members;
  for (const std::string& name : chosen) members.push_back({name, 0});
  // Wins: each choosing batch goes to the member with the lowest time, ties to the earlier name.
  for (std::size_t b = 0; b < choosing_batches; ++b) {
    std::size_t best = 0;
    for (std::size_t m = 1; m < members.size(); ++m)
      if (pool.at(members[m].name).times[b] < pool.at(members[best].name).times[b]) best = m;
    ++members[best].wins;
  }
  std::stable_sort(members.begin(), members.end(), [](const Member& x, const Member& y) { return x.wins > y.wins; });
  const auto first = std::ranges::find_if(members, [&](const Member& m) { return pool.at(m.name).holds; });
  std::rotate(members.begin(), first, first + 1);
  // A member that wins nothing changes no batch's time; dropping it spares every iteration a plan.
  const std::string first_name = members.front().name;
  std::erase_if(members, [&](const Member& m) { return m.wins == 0 && m.name != first_name; });
  std::vector<SampledCandidate> candidates;
  for (const Member& member : members) {
    const PoolEntry& entry = pool.at(member.name);
    candidates.push_back({entry.strategy, member.wins, entry.source});
  }
  return candidates;
}

// Mean over the choosing batches of a set's lowest time per batch, from the pool's times.
inline double choosing_mean(const SampledPool& pool, const std::vector<Strategy>& set, std::size_t choosing_batches,
                            int count) {
  double sum = 0;
  for (std::size_t b = 0; b < choosing_batches; ++b) {
    double best = infinity;
    for (const Strategy& strategy : set) best = std::min(best, pool.at(strategy.name()).times[b]);
    sum += best;
  }
  return sum / count;
}

// Times on the held-out batches, which only measure: a strategy is planned on them once, when a set needs it.
class HeldOutTimes {
public:
  HeldOutTimes(SampledPlanner& planner, Span<const data::Batch> batches, int count)
      : planner_(planner), batches_(batches), count_(count) {}

  // Mean over the held-out batches of the set's lowest time per batch.
  double mean(const std::vector<Strategy>& set) {
    for (const Strategy& strategy : set)
      if (!times_.contains(strategy.name())) times_.emplace(strategy.name(), planner_.plan_times(strategy, batches_));
    double sum = 0;
    for (std::size_t b = 0; b < batches_.size(); ++b) {
      double best = infinity;
      for (const Strategy& strategy : set) best = std::min(best, times_.at(strategy.name())[b]);
      sum += best;
    }
    return sum / count_;
  }

private:
  SampledPlanner& planner_;
  Span<const data::Batch> batches_;
  int count_;
  std::map<std::string, std::vector<double>> times_;
};

// The homogeneous strategy holding max_len with the lowest held-out mean, into result.best_homogeneous*.
inline void choose_best_homogeneous(SampledProposal& result, HeldOutTimes& held_out,
                                    const std::vector<Strategy>& homogeneous, const cost::Profile& profile,
                                    std::int64_t max_len) {
  result.best_homogeneous_held_out_mean = infinity;
  for (const Strategy& strategy : homogeneous) {
    if (profile.pipelines(strategy).front().max_len < max_len) continue;
    const double mean = held_out.mean({strategy});
    if (mean < result.best_homogeneous_held_out_mean) {
      result.best_homogeneous_held_out_mean = mean;
      result.best_homogeneous = strategy.name();
    }
  }
}

}  // namespace detail

inline SampledProposal propose_sampled(const data::LengthDataset& dataset, const cost::Profile& profile,
                                       const SampledOptions& options) {
  detail::require_sampled_options(options);
  const std::int64_t k = options.paper.max_candidates;
  const ProposeOptions all = detail::uncapped(options.paper);
  const Proposal full = propose(dataset, profile, all);
  SampledProposal result = detail::start_result(full, options);

  const std::int64_t gpus = *full.options.gpus;
  const std::int64_t max_len = *full.options.max_len;
  const std::vector<cost::SchemeCost> usable = detail::usable_schemes(profile, full.options);
  const detail::SampledBatches batches = detail::draw_batches(dataset, options);
  detail::SampledPlanner planner(profile, options, result.plans);
  detail::SampledPool pool(planner, batches.choosing, max_len, options.max_pool);
  const std::vector<Strategy> homogeneous = detail::seed_pool(pool, full, dataset, profile, all, usable, gpus);

  std::vector<std::string> chosen;  // names
  double total = detail::select_members(pool, k, chosen);
  total = detail::grow_pool(pool, chosen, total, full, k, options.max_pool, gpus, result.rounds);
  result.pool_size = std::ssize(pool.entries());
  result.choosing_mean = total / options.choosing_batches;
  result.candidates = detail::rank_members(pool, chosen, batches.choosing.size());

  // The held-out batches, for the chosen set, the paper's set and every homogeneous strategy holding max_len.
  detail::HeldOutTimes held_out(planner, batches.held_out, options.held_out_batches);
  result.held_out_mean = held_out.mean(result.strategies());
  const std::vector<Strategy> paper_set = result.paper.strategies();
  result.paper_held_out_mean = held_out.mean(paper_set);
  result.paper_choosing_mean =
      detail::choosing_mean(pool, paper_set, batches.choosing.size(), options.choosing_batches);
  detail::choose_best_homogeneous(result, held_out, homogeneous, profile, max_len);
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
    check(c > 0 || pipelines.front().max_len >= max_len, "the first candidate (", name,
          ") does not hold max_len = ", max_len);
    check(candidate.wins >= 0 && (candidate.wins > 0 || c == 0), "candidate ", c, " (", name, ") wins ", candidate.wins,
          " batches");
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
