#pragma once
// Hydraulis' packing heuristic for one pipeline (§6.1, App. C): the input checks, the sequences sorted once, and per
// number of micro-batches a start (LPT or best fit) and a descent by moves and exchanges. Not for callers:
// packing.hpp and packing_cbc.hpp use it.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sluice/assign/packing_estimate.hpp"
#include "sluice/assign/types.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::assign::detail {

// Checks what every packer needs and returns the total tokens: a usable scheme, at least one sequence,
// distinct ids, and every sequence within `capacity` (MaxLen, or a smaller fixed bin size).
inline std::int64_t pack_check_input(Span<const Sequence> sequences, const cost::SchemeCost& scheme,
                                     std::int64_t capacity) {
  using sluice::require;
  const std::string name = scheme.scheme.name();
  require(scheme.max_len > 0, "pack: max_len of ", name, " must be > 0, got ", scheme.max_len);
  require(scheme.util_len >= 1, "pack: util_len of ", name, " must be >= 1, got ", scheme.util_len);
  require(!sequences.empty(), "pack: the sequence list for ", name, " is empty");
  std::unordered_set<std::int64_t> ids;
  ids.reserve(sequences.size());
  std::int64_t total = 0;
  for (const Sequence& sequence : sequences) {
    require(sequence.length() <= capacity, "pack: sequence ", sequence.id(), " has length ", sequence.length(),
            ", above the capacity ", capacity, " of ", name, " (max_len ", scheme.max_len, ")");
    require(ids.insert(sequence.id()).second, "pack: sequence id ", sequence.id(), " appears twice");
    require(total <= std::numeric_limits<std::int64_t>::max() - sequence.length(), "pack: total tokens overflow");
    total += sequence.length();
  }
  return total;
}

// The sequences of one pipeline sorted once (length descending, then id; T' is non-decreasing in l, so this
// is also time descending), and the per-V heuristic: a start (LPT under the token cap, or best fit by
// tokens), then a descent that lowers the slowest micro-batch by moves and 1-1, 2-1, 1-2 and 2-2 exchanges.
// Buffers are sized once; solving a V allocates nothing.
class PackHeuristic {
public:
  PackHeuristic(Span<const Sequence> sequences, const cost::SchemeCost& scheme)
      : PackHeuristic(sequences, scheme, scheme.max_len) {}

  // Sequences checked against `capacity` (<= MaxLen) instead of MaxLen: the fixed-length baseline's bins.
  PackHeuristic(Span<const Sequence> sequences, const cost::SchemeCost& scheme, std::int64_t capacity)
      : total_tokens_(pack_check_input(sequences, scheme, capacity)),
        capacity_(scheme.max_len),
        overhead_(scheme.latency.microbatch_overhead()),
        latency_(scheme.latency),
        pp_(scheme.scheme.pp()) {
    const std::size_t n = sequences.size();
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      const Sequence& a = sequences[x];
      const Sequence& b = sequences[y];
      return a.length() != b.length() ? a.length() > b.length() : a.id() < b.id();
    });
    length_.resize(n);
    weight_.resize(n);
    id_.resize(n);
    prefix_.assign(n + 1, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      const Sequence& sequence = sequences[order[i]];
      length_[i] = sequence.length();
      weight_[i] = scheme.latency.sequence_time(sequence.length());
      id_[i] = sequence.id();
      prefix_[i + 1] = prefix_[i] + weight_[i];
    }
    skip_margin_ = 1e-9 * prefix_.back();
    const auto count = static_cast<std::int64_t>(n);
    // Every packing's estimate is at most (Σ T' + c)·(PP − 1 + U); when that is finite, so is every estimate
    // and bound compared below (an infinite one would compare equal to "no packing yet").
    const double worst = estimate(prefix_.back(), count);
    sluice::require(std::isfinite(worst), "pack: ", scheme.scheme.name(), ": the estimate of ", n, " sequences (",
                    total_tokens_, " tokens) overflows: (sum of T'(l) + c)·(PP - 1 + ", n, ") = ", worst,
                    " s (latency a = ", scheme.latency.a(), ", b = ", scheme.latency.b(), ", c = ", overhead_, ")");
    const std::int64_t lo = std::max<std::int64_t>(1, (total_tokens_ + capacity_ - 1) / capacity_);
    range_ = {lo, std::max(lo, std::min(count, total_tokens_ / scheme.util_len))};
    bin_of_.resize(n);
    result_.resize(n);
    load_.reserve(n);
    tokens_.reserve(n);
    count_.reserve(n);
    start_.reserve(n + 1);
    fill_.reserve(n);
    member_.resize(n);
    partners_.reserve(n);
  }

  [[nodiscard]] std::size_t size() const noexcept { return length_.size(); }
  [[nodiscard]] std::int64_t length(std::size_t i) const noexcept { return length_[i]; }
  [[nodiscard]] double weight(std::size_t i) const noexcept { return weight_[i]; }
  [[nodiscard]] std::int64_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] double overhead() const noexcept { return overhead_; }
  [[nodiscard]] MicroBatchRange range() const noexcept { return range_; }

  // The 1F1B estimate of v micro-batches whose slowest has Σ T' = max_load: (max_load + c)·(PP − 1 + v).
  [[nodiscard]] double estimate(double max_load, std::int64_t v) const noexcept {
    return (max_load + overhead_) * (pp_ - 1 + static_cast<double>(v));
  }

  // A lower bound on max_j Σ T' over every packing into v micro-batches (the token cap ignored): the longest
  // sequence; the average ΣT'/v; and, for k >= 1 with kv < U, the k + 1 shortest of the kv + 1 longest
  // sequences, k + 1 of which share a micro-batch (pigeonhole; k = 1 is the classic LPT bound).
  [[nodiscard]] double lower_bound(std::int64_t v) const noexcept {
    const auto bins = static_cast<std::size_t>(v);
    double bound = std::max(weight_.front(), prefix_.back() / static_cast<double>(v));
    for (std::size_t k = 1; k * bins < size(); ++k)
      bound = std::max(bound, prefix_[k * bins + 1] - prefix_[k * bins - k]);
    return bound;
  }

  // A bound for every v' >= v: each pays at least the longest sequence, and PP − 1 + v' grows with v'.
  [[nodiscard]] double longest_bound(std::int64_t v) const noexcept { return estimate(weight_.front(), v); }

  // Packs into exactly v (1 <= v <= U) non-empty micro-batches within MaxLen; false if it finds no packing.
  bool solve(std::int64_t v) {
    const auto bins = static_cast<std::size_t>(v);
    const double bound = lower_bound(v);
    bool packed = false;
    // Two starts, LPT and best fit by tokens, each followed by the descent; they end in different local
    // optima. The second runs only when the first ends more than 0.1% above the bound: with many sequences
    // per micro-batch the first is within a few 1e-5 of it, and the second would double the time.
    for (const bool lpt : {true, false}) {
      load_.assign(bins, 0.0);
      tokens_.assign(bins, 0);
      count_.assign(bins, 0);
      if (!place(bins, lpt)) continue;
      fill_empty(bins);
      descend(bins, bound);
      // Exact sums in item order: the same numbers the Packing reports.
      std::fill(load_.begin(), load_.end(), 0.0);
      for (std::size_t i = 0; i < size(); ++i) load_[bin_of_[i]] += weight_[i];
      const double peak = *std::max_element(load_.begin(), load_.end());
      if (!packed || peak < max_load_) {
        max_load_ = peak;
        std::copy(bin_of_.begin(), bin_of_.end(), result_.begin());
        packed = true;
      }
      if (max_load_ <= bound * (1 + 1e-3)) break;
    }
    return packed;
  }

  // After a successful solve: the micro-batch of each sorted sequence, and the slowest micro-batch's Σ T'.
  [[nodiscard]] Span<const std::size_t> bins() const noexcept { return result_; }
  [[nodiscard]] double max_load() const noexcept { return max_load_; }

  // A Packing from a micro-batch index per sorted sequence (indices < bin_count; empty ones are dropped):
  // sequence ids ascending within a micro-batch, micro-batches by time descending, then by first id.
  [[nodiscard]] Packing to_packing(Span<const std::size_t> bin_of, std::size_t bin_count) const {
    std::vector<MicroBatch> micro_batches(bin_count);
    for (std::size_t i = 0; i < size(); ++i) {
      MicroBatch& micro_batch = micro_batches[bin_of[i]];
      micro_batch.sequence_ids.push_back(id_[i]);
      micro_batch.tokens += length_[i];
      micro_batch.seconds += weight_[i];
    }
    std::erase_if(micro_batches, [](const MicroBatch& micro_batch) { return micro_batch.sequence_ids.empty(); });
    for (MicroBatch& micro_batch : micro_batches) {
      micro_batch.seconds += overhead_;
      std::sort(micro_batch.sequence_ids.begin(), micro_batch.sequence_ids.end());
    }
    std::sort(micro_batches.begin(), micro_batches.end(), [](const MicroBatch& x, const MicroBatch& y) {
      return x.seconds != y.seconds ? x.seconds > y.seconds : x.sequence_ids.front() < y.sequence_ids.front();
    });
    Packing packing{std::move(micro_batches), 0};
    packing.estimate = packing_estimate(packing.micro_batches, pp_);
    return packing;
  }

private:
  // Sequences `out` of the slowest micro-batch p go to micro-batch `to`, its sequences `in` go to p: the
  // loads change by d = Σ T'(out) − Σ T'(in), and `peak` = max(L_p − d, L_to + d) must fall below L_p.
  struct Exchange {
    std::size_t out[2] = {none, none};
    std::size_t in[2] = {none, none};
    std::size_t to = none;
    double peak = 0;
  };
  // The weights and tokens an in-set may have.
  struct InRange {
    double min_weight = 0, max_weight = 0;
    std::int64_t min_tokens = 0, max_tokens = 0;
  };
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t compound_partners = 4;
  static constexpr std::size_t two_for_two_size = 16;
  static constexpr double near_bound = 1e-4;

  // LPT (each sequence to the least-loaded micro-batch with token room; ties to fewer tokens, then lower
  // index) or best fit by tokens (the fullest micro-batch with room). Items come longest first.
  bool place(std::size_t bins, bool lpt) {
    for (std::size_t i = 0; i < size(); ++i) {
      std::size_t best = none;
      for (std::size_t j = 0; j < bins; ++j) {
        if (tokens_[j] + length_[i] > capacity_) continue;
        if (best == none) {
          best = j;
        } else if (lpt) {
          if (load_[j] < load_[best] || (load_[j] == load_[best] && tokens_[j] < tokens_[best])) best = j;
        } else if (tokens_[j] > tokens_[best]) {
          best = j;
        }
      }
      if (best == none) return false;
      assign(i, best);
    }
    return true;
  }

  void assign(std::size_t i, std::size_t bin) {
    bin_of_[i] = bin;
    load_[bin] += weight_[i];
    tokens_[bin] += length_[i];
    ++count_[bin];
  }

  void unassign(std::size_t i) {
    const std::size_t bin = bin_of_[i];
    load_[bin] -= weight_[i];
    tokens_[bin] -= length_[i];
    --count_[bin];
  }

  // Best fit may leave micro-batches empty; each takes the shortest sequence of the micro-batch with the most
  // sequences (which has two or more, since v <= U). An empty micro-batch holds any one sequence.
  void fill_empty(std::size_t bins) {
    for (std::size_t empty = 0; empty < bins; ++empty) {
      if (count_[empty] != 0) continue;
      const std::size_t fullest =
          static_cast<std::size_t>(std::max_element(count_.begin(), count_.end()) - count_.begin());
      std::size_t shortest = 0;
      for (std::size_t i = 0; i < size(); ++i)
        if (bin_of_[i] == fullest) shortest = i;
      unassign(shortest);
      assign(shortest, empty);
    }
  }

  // Improves the slowest micro-batch p until no move or exchange lowers it by more than a rounding tolerance,
  // or it is within `near_bound` of `bound` (a precision far finer than any cost model's; on full micro-batches of
  // hundreds of short documents the last 0.01% took hundreds of exchanges). Each step lowers Σ load² (the pair's
  // loads move closer), so the descent ends; no step empties a micro-batch.
  void descend(std::size_t bins, double bound) {
    const double tolerance = 1e-12 * prefix_.back();
    while (true) {
      const std::size_t p = static_cast<std::size_t>(std::max_element(load_.begin(), load_.end()) - load_.begin());
      if (load_[p] <= bound * (1 + near_bound)) return;
      index_members(bins);
      partners_.clear();
      for (std::size_t q = 0; q < bins; ++q)
        if (q != p) partners_.push_back(q);
      std::sort(partners_.begin(), partners_.end(),
                [this](std::size_t x, std::size_t y) { return load_[x] != load_[y] ? load_[x] < load_[y] : x < y; });
      Exchange best{.peak = load_[p] - tolerance};
      simple_exchanges(p, best);
      if (best.to == none) compound_exchanges(p, best);
      if (best.to == none) return;
      for (const std::size_t i : best.out)
        if (i != none) unassign(i);
      for (const std::size_t i : best.in)
        if (i != none) unassign(i);
      for (const std::size_t i : best.out)
        if (i != none) assign(i, best.to);
      for (const std::size_t i : best.in)
        if (i != none) assign(i, p);
    }
  }

  // member_[start_[j] .. start_[j + 1]) = the sequences of micro-batch j in item order, hence by time descending.
  void index_members(std::size_t bins) {
    start_.assign(bins + 1, 0);
    for (std::size_t j = 0; j < bins; ++j) start_[j + 1] = start_[j] + count_[j];
    fill_.assign(start_.begin(), start_.end() - 1);
    for (std::size_t i = 0; i < size(); ++i) member_[fill_[bin_of_[i]]++] = i;
  }

  // Records the exchange if it lowers the pair's peak below the best so far within both token caps.
  void consider(std::size_t p, std::size_t q, double out_weight, std::int64_t out_tokens, double in_weight,
                std::int64_t in_tokens, const Exchange& candidate, Exchange& best) const {
    const double delta = out_weight - in_weight;
    if (delta <= 0) return;
    const double peak = std::max(load_[p] - delta, load_[q] + delta);
    if (peak >= best.peak) return;
    if (tokens_[q] + out_tokens - in_tokens > capacity_ || tokens_[p] - out_tokens + in_tokens > capacity_) return;
    best = candidate;
    best.to = q;
    best.peak = peak;
  }

  // Where the sequences moved out of p (out_weight, out_tokens) stand against every in-set whose weight and tokens
  // lie in the given ranges: too_light when none makes a transfer large enough to lower p below the best peak or
  // leaves p within its token cap (lighter outs only make it worse), too_heavy when every one lifts q to the best
  // peak or past its cap (lighter outs may help), open otherwise. A margin far above rounding keeps every skipped
  // exchange one that consider() would refuse, so skipping changes no result.
  enum class Fit { too_light, too_heavy, open };
  [[nodiscard]] Fit fit(std::size_t p, std::size_t q, double out_weight, std::int64_t out_tokens, InRange in,
                        const Exchange& best) const noexcept {
    if (out_weight - in.min_weight <= load_[p] - best.peak - skip_margin_ ||
        tokens_[p] - out_tokens + in.min_tokens > capacity_)
      return Fit::too_light;
    if (load_[q] + out_weight - in.max_weight >= best.peak + skip_margin_ ||
        tokens_[q] + out_tokens - in.max_tokens > capacity_)
      return Fit::too_heavy;
    return Fit::open;
  }

  // The weight and token ranges of the in-sets that add one member of q at positions [first, last) of member_
  // (longest first) to a fixed part (in_weight, in_tokens); of the pairs of such members when `pairs`.
  [[nodiscard]] InRange in_range(std::size_t first, std::size_t last, double in_weight, std::int64_t in_tokens,
                                 bool pairs) const noexcept {
    const std::size_t heavy = member_[first], light = member_[last - 1];
    InRange range{.min_weight = in_weight + weight_[light],
                  .max_weight = in_weight + weight_[heavy],
                  .min_tokens = in_tokens + length_[light],
                  .max_tokens = in_tokens + length_[heavy]};
    if (pairs) {
      const std::size_t heavy2 = member_[first + 1], light2 = member_[last - 2];
      range.min_weight += weight_[light2];
      range.max_weight += weight_[heavy2];
      range.min_tokens += length_[light2];
      range.max_tokens += length_[heavy2];
    }
    return range;
  }

  // The best exchange that adds one sequence b of q (from position `first` of its members) to `in`: the
  // peak is lowest when the transfer is half the pair's gap, so the scan starts at that b and walks both
  // ways until the peak cannot beat the best.
  void scan(std::size_t p, std::size_t q, std::size_t first, double out_weight, std::int64_t out_tokens,
            double in_weight, std::int64_t in_tokens, Exchange candidate, std::size_t slot, Exchange& best) const {
    const std::size_t last = start_[q + 1];
    if (first >= last) return;
    // The members the token caps admit are [shortest, longest] tokens long, so (T' non-decreasing) they weigh at
    // least T'(shortest) and at most T'(longest); where no such weight lowers the pair's peak, none is tried.
    const std::int64_t shortest = std::max(length_[member_[last - 1]], tokens_[q] + out_tokens - in_tokens - capacity_);
    const std::int64_t longest = std::min(length_[member_[first]], capacity_ - tokens_[p] + out_tokens - in_tokens);
    if (shortest > longest) return;
    if (out_weight - in_weight - latency_.sequence_time(shortest) <= load_[p] - best.peak - skip_margin_ ||
        load_[q] + out_weight - in_weight - latency_.sequence_time(longest) >= best.peak + skip_margin_)
      return;
    const double ideal = out_weight - in_weight - (load_[p] - load_[q]) / 2;
    const auto split = std::partition_point(member_.begin() + static_cast<std::ptrdiff_t>(first),
                                            member_.begin() + static_cast<std::ptrdiff_t>(last),
                                            [&](std::size_t i) { return weight_[i] > ideal; });
    const auto middle = static_cast<std::size_t>(split - member_.begin());
    auto try_b = [&](std::size_t b) {
      candidate.in[slot] = b;
      consider(p, q, out_weight, out_tokens, in_weight + weight_[b], in_tokens + length_[b], candidate, best);
    };
    for (std::size_t t = middle; t < last; ++t) {  // transfer >= half the gap: the peak is on q
      if (load_[q] + out_weight - in_weight - weight_[member_[t]] >= best.peak) break;
      if (t == middle || !same_sequence(t, t - 1)) try_b(member_[t]);
    }
    for (std::size_t t = middle; t-- > first;) {  // transfer < half the gap: the peak is on p
      if (load_[p] - (out_weight - in_weight - weight_[member_[t]]) >= best.peak) break;
      if (t + 1 == middle || !same_sequence(t, t + 1)) try_b(member_[t]);
    }
  }

  // Members at positions s and t of member_ of equal length, hence equal time: exchanging either gives the same
  // peak, so an exchange with the later one never beats (strictly) the same exchange with the earlier one and
  // need not be tried. This keeps the result and makes micro-batches of many equal lengths cheap to balance.
  [[nodiscard]] bool same_sequence(std::size_t s, std::size_t t) const noexcept {
    return length_[member_[s]] == length_[member_[t]] && weight_[member_[s]] == weight_[member_[t]];
  }

  // Every exchange of `outs` (1 or 2) sequences of p for `ins` (0, 1 or 2) sequences of q. Out-sets come heaviest
  // first and in-sets likewise, so an out-set too light for every in-set ends its loop and one too heavy is skipped
  // (fit()); for two ins, the first member b's loop ends where b and any later member are too light an in-set.
  void exchanges(std::size_t p, std::size_t q, int outs, int ins, Exchange& best) const {
    const std::size_t first_in = start_[q], last_in = start_[q + 1];
    if (static_cast<std::size_t>(ins) > last_in - first_in) return;
    const InRange any_in = ins == 0 ? InRange{} : in_range(first_in, last_in, 0, 0, ins == 2);
    for (std::size_t x = start_[p]; x < start_[p + 1]; ++x) {
      if (x > start_[p] && same_sequence(x, x - 1)) continue;
      bool lighter_outs_fit = true;
      for (std::size_t y = outs == 1 ? x : x + 1; y < (outs == 1 ? x + 1 : start_[p + 1]); ++y) {
        if (outs == 2 && y > x + 1 && same_sequence(y, y - 1)) continue;
        const std::size_t a = member_[x];
        const std::size_t a2 = outs == 1 ? none : member_[y];
        const double out_weight = weight_[a] + (outs == 1 ? 0 : weight_[a2]);
        const std::int64_t out_tokens = length_[a] + (outs == 1 ? 0 : length_[a2]);
        const Fit out_fit = fit(p, q, out_weight, out_tokens, any_in, best);
        if (out_fit == Fit::too_light) {
          // The heaviest out-set left (x's first partner, or x alone) too light: so is every later x's.
          lighter_outs_fit = outs == 2 && y > x + 1;
          break;
        }
        if (out_fit == Fit::too_heavy) continue;
        if (ins == 0) {
          consider(p, q, out_weight, out_tokens, 0, 0, {.out = {a, a2}}, best);
        } else if (ins == 1) {
          scan(p, q, first_in, out_weight, out_tokens, 0, 0, {.out = {a, a2}}, 0, best);
        } else {
          for (std::size_t t = first_in; t + 1 < last_in; ++t) {
            if (t > first_in && same_sequence(t, t - 1)) continue;
            const std::size_t b = member_[t];
            const Fit in_fit =
                fit(p, q, out_weight, out_tokens, in_range(t + 1, last_in, weight_[b], length_[b], false), best);
            if (in_fit == Fit::too_heavy) break;  // lighter in-sets lift q further
            if (in_fit == Fit::too_light) continue;
            scan(p, q, t + 1, out_weight, out_tokens, weight_[b], length_[b], {.out = {a, a2}, .in = {b, none}}, 1,
                 best);
          }
        }
      }
      if (!lighter_outs_fit) break;
    }
  }

  // Moves of one sequence out of p, and 1-for-1 swaps, with every partner: least loaded first, and a
  // partner loaded at or above the best peak cannot take anything.
  void simple_exchanges(std::size_t p, Exchange& best) const {
    for (const std::size_t q : partners_) {
      if (load_[q] >= best.peak) break;
      exchanges(p, q, 1, 0, best);
      exchanges(p, q, 1, 1, best);
    }
  }

  // 2-for-1 and 1-for-2 swaps, then 2-for-2. Their search is quadratic (2-for-2: cubic) in the micro-batch
  // sizes, so only the `compound_partners` least loaded micro-batches are tried (they leave the most room),
  // the first that admits a swap ends the search, and 2-for-2 is tried only between micro-batches of at most
  // `two_for_two_size` sequences (larger ones have enough small sequences to balance with single swaps).
  void compound_exchanges(std::size_t p, Exchange& best) const {
    const std::size_t partners = std::min(compound_partners, partners_.size());
    for (const bool two_for_two : {false, true}) {
      for (std::size_t k = 0; k < partners && load_[partners_[k]] < best.peak; ++k) {
        const std::size_t q = partners_[k];
        if (two_for_two) {
          if (count_[p] <= two_for_two_size && count_[q] <= two_for_two_size) exchanges(p, q, 2, 2, best);
        } else {
          exchanges(p, q, 2, 1, best);
          exchanges(p, q, 1, 2, best);
        }
        if (best.to != none) return;
      }
    }
  }

  std::int64_t total_tokens_;
  std::int64_t capacity_;
  double overhead_;
  cost::QuadraticLatency latency_;
  int pp_;
  MicroBatchRange range_;
  std::vector<std::int64_t> length_;
  std::vector<double> weight_;
  std::vector<std::int64_t> id_;
  std::vector<double> prefix_;  // prefix_[i] = Σ_{k<i} T'(l_k)
  double skip_margin_ = 0;      // fit() and scan() skip only exchanges worse than the best by this much
  std::vector<std::size_t> bin_of_;
  std::vector<std::size_t> result_;  // the best packing of the last solve
  std::vector<double> load_;
  std::vector<std::int64_t> tokens_;
  std::vector<std::size_t> count_;
  std::vector<std::size_t> start_;  // per micro-batch, its first position in member_
  std::vector<std::size_t> fill_;
  std::vector<std::size_t> member_;    // sequences grouped by micro-batch
  std::vector<std::size_t> partners_;  // micro-batches other than the slowest, least loaded first
  double max_load_ = 0;
};

}  // namespace sluice::assign::detail
