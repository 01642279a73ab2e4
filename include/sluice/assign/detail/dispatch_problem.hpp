#pragma once
// The dispatch problem as the algorithms see it (Hydraulis §6.2, Eq. 2–3): sequences, pipeline groups, limits J_i,
// and Eq. 2 per pipeline. Used by dispatch.hpp.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "sluice/assign/types.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::assign::detail {

// Eq. 2 as sluice uses it, for a non-empty pipeline j holding S_j (PP, c, MaxLen of its scheme):
//   bound_j = max( Σ_{S_j} T'(l) + c·V_lo + (T'(max_{S_j} l) + c)·(PP − 1),   (T'(max_{S_j} l) + c)·(PP − 1 + V_lo) ),
//   V_lo = max(1, ⌈tokens(S_j) / MaxLen⌉).
// It never exceeds the 1F1B estimate X·(PP − 1 + V) of any packing of S_j into V micro-batches, where X is
// the slowest micro-batch: every micro-batch costs its Σ T' plus c, so X·V ≥ Σ_{S_j} T' + V·c ≥ Σ T' + V_lo·c
// (a micro-batch holds at most MaxLen tokens, so V ≥ V_lo); and the micro-batch holding the longest sequence
// costs at least T'(max l) + c, so X·(PP − 1) ≥ (T'(max l) + c)·(PP − 1), and X·(PP − 1 + V) is at least
// (T'(max l) + c)·(PP − 1 + V_lo). An empty pipeline costs 0.
// The second term is the step a pipeline takes when its tokens pass a multiple of MaxLen: the slowest
// micro-batch is paid once more. Without it, a pipeline holding a sequence near MaxLen plus a little more
// looks cheap here and doubles once packed. With V_lo = 1 it never exceeds the first term.
// The paper's Eq. 2 charges c per sequence instead (T = T' + c); the authors' code drops it. Charging it per
// micro-batch, as packing does, keeps the bound true and tight.
struct DispatchGroup {
  int first = 0;  // pipelines first .. first + count − 1: identical cost, hence interchangeable
  int count = 0;
  std::int64_t max_len = 0;
  double overhead = 0;    // c
  double pp_minus_1 = 0;  // PP − 1
};

// The batch and pipelines checked and tabulated once: pipelines grouped into runs of identical cost (same
// scheme, latency and MaxLen), each sequence's feasible groups (a prefix, as pipelines are in MaxLen order),
// and T'(l) of every sequence on every group.
class DispatchProblem {
public:
  DispatchProblem(Span<const Sequence> batch, PipelineCosts pipelines, bool v_step = true) : v_step_(v_step) {
    using sluice::require;
    require(!batch.empty(), "dispatch: the batch is empty");
    require(!pipelines.empty(), "dispatch: no pipelines");
    require(pipelines.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max() / 2),
            "dispatch: too many pipelines: ", pipelines.size());
    require(batch.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max() / 2),
            "dispatch: too many sequences: ", batch.size());
    for (std::size_t j = 0; j < pipelines.size(); ++j) {
      const cost::SchemeCost& cost = pipelines[j];
      if (cost.max_len < 0)
        sluice::fail("dispatch: pipeline ", j, " (", cost.scheme.name(), "): max_len must be >= 0, got ", cost.max_len);
      if (j > 0 && cost.max_len > pipelines[j - 1].max_len)
        sluice::fail("dispatch: pipelines must be ordered by max_len descending, but pipeline ", j, " (",
                     cost.scheme.name(), ", max_len ", cost.max_len, ") follows pipeline ", j - 1, " (max_len ",
                     pipelines[j - 1].max_len, ")");
      const bool same = j > 0 && cost.scheme == pipelines[j - 1].scheme && cost.latency == pipelines[j - 1].latency &&
                        cost.max_len == pipelines[j - 1].max_len;
      if (same) {
        ++groups_.back().count;
      } else {
        groups_.push_back({static_cast<int>(j), 1, cost.max_len, cost.latency.microbatch_overhead(),
                           static_cast<double>(cost.scheme.pp() - 1)});
        latency_.push_back(cost.latency);
      }
      group_of_.push_back(static_cast<int>(groups_.size()) - 1);
    }
    const std::size_t n = batch.size();
    const std::size_t g_count = groups_.size();
    length_.resize(n);
    feasible_groups_.resize(n);
    time_.resize(n * g_count);
    std::int64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const Sequence& sequence = batch[i];
      require(sequence.length() <= pipelines.front().max_len, "dispatch: sequence ", sequence.id(), " has length ",
              sequence.length(), ", longer than every pipeline's max_len (the largest is ", pipelines.front().max_len,
              ")");
      require(total <= std::numeric_limits<std::int64_t>::max() - sequence.length(),
              "dispatch: the batch's total tokens overflow");
      total += sequence.length();
      length_[i] = sequence.length();
      const auto fits = std::partition_point(groups_.begin(), groups_.end(), [&](const DispatchGroup& group) {
        return group.max_len >= sequence.length();
      });
      feasible_groups_[i] = static_cast<int>(fits - groups_.begin());
      for (std::size_t g = 0; g < g_count; ++g) time_[i * g_count + g] = latency_[g].sequence_time(sequence.length());
    }
    // Eq. 2 of a pipeline holding every sequence it can bounds every value computed here; when it is finite, so
    // are they (an infinite bound would tie with "no assignment yet").
    for (std::size_t g = 0; g < g_count; ++g) {
      double sum = 0;
      double longest = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (feasible_groups_[i] > static_cast<int>(g)) {
          sum += time_[i * g_count + g];
          longest = std::max(longest, time_[i * g_count + g]);
        }
      const double worst = bound_of(static_cast<int>(g), sum, static_cast<std::int64_t>(n), longest);
      const Scheme& scheme = pipelines[static_cast<std::size_t>(groups_[g].first)].scheme;
      require(std::isfinite(worst), "dispatch: pipeline ", groups_[g].first, " (", scheme.name(),
              "): the batch's Eq. 2 bound overflows (", worst, " s; latency a = ", latency_[g].a(),
              ", b = ", latency_[g].b(), ", c = ", latency_[g].c(), ")");
    }
  }

  [[nodiscard]] bool v_step() const noexcept { return v_step_; }
  [[nodiscard]] int sequences() const noexcept { return static_cast<int>(length_.size()); }
  [[nodiscard]] int pipelines() const noexcept { return static_cast<int>(group_of_.size()); }
  [[nodiscard]] int groups() const noexcept { return static_cast<int>(groups_.size()); }
  [[nodiscard]] const DispatchGroup& group(int g) const noexcept { return groups_[g]; }
  [[nodiscard]] int group_of(int pipeline) const noexcept { return group_of_[pipeline]; }
  [[nodiscard]] const cost::QuadraticLatency& latency(int g) const noexcept { return latency_[g]; }
  [[nodiscard]] std::int64_t length(int i) const noexcept { return length_[i]; }
  // Sequence i may go to groups 0 .. feasible_groups(i) − 1, that is to pipelines 0 .. limit(i) − 1 (J_i).
  [[nodiscard]] int feasible_groups(int i) const noexcept { return feasible_groups_[i]; }
  [[nodiscard]] int limit(int i) const noexcept {
    const DispatchGroup& last = groups_[feasible_groups_[i] - 1];
    return last.first + last.count;
  }
  // T'(l_i) on group g.
  [[nodiscard]] double time(int i, int g) const noexcept {
    return time_[static_cast<std::size_t>(i) * groups_.size() + static_cast<std::size_t>(g)];
  }

  // Eq. 2 for a non-empty pipeline of group g: Σ T' = sum, its tokens, and T' of its longest sequence.
  [[nodiscard]] double bound(int g, double sum, std::int64_t tokens, double longest_time) const noexcept {
    return bound_of(g, sum, micro_batches(g, tokens), longest_time);
  }
  // V_lo = max(1, ⌈tokens / MaxLen⌉).
  [[nodiscard]] std::int64_t micro_batches(int g, std::int64_t tokens) const noexcept {
    const std::int64_t max_len = groups_[g].max_len;
    return std::max<std::int64_t>(1, (tokens + max_len - 1) / max_len);
  }
  [[nodiscard]] double bound_of(int g, double sum, std::int64_t micro_batches, double longest_time) const noexcept {
    const DispatchGroup& group = groups_[g];
    const auto v = static_cast<double>(micro_batches);
    const double first = sum + group.overhead * v + group.pp_minus_1 * (longest_time + group.overhead);
    return v_step_ ? std::max(first, (longest_time + group.overhead) * (group.pp_minus_1 + v)) : first;
  }

  // Eq. 2 of every pipeline for an assignment, summing T' in batch order (the canonical value every
  // function here reports). Checks the assignment.
  [[nodiscard]] std::vector<double> bounds(Span<const int> pipeline_of) const {
    using sluice::require;
    const int n = sequences();
    require(pipeline_of.size() == length_.size(), "dispatch: the assignment has ", pipeline_of.size(),
            " entries for a batch of ", n, " sequences");
    std::vector<double> sum(group_of_.size(), 0.0);
    std::vector<std::int64_t> tokens(group_of_.size(), 0);
    std::vector<double> longest(group_of_.size(), -1.0);
    for (int i = 0; i < n; ++i) {
      const int p = pipeline_of[i];
      require(p >= 0 && p < limit(i), "dispatch: sequence at batch index ", i, " (length ", length_[i],
              ") is assigned to pipeline ", p, ", but only pipelines 0..", limit(i) - 1, " can hold it (of ",
              pipelines(), ")");
      const double t = time(i, group_of_[p]);
      sum[p] += t;
      tokens[p] += length_[i];
      longest[p] = std::max(longest[p], t);  // T' is non-decreasing in l (a, b >= 0)
    }
    std::vector<double> result(group_of_.size(), 0.0);
    for (std::size_t p = 0; p < result.size(); ++p) {
      if (tokens[p] > 0) result[p] = bound(group_of_[p], sum[p], tokens[p], longest[p]);
    }
    return result;
  }

private:
  bool v_step_ = true;
  std::vector<DispatchGroup> groups_;
  std::vector<cost::QuadraticLatency> latency_;
  std::vector<int> group_of_;
  std::vector<std::int64_t> length_;
  std::vector<int> feasible_groups_;
  std::vector<double> time_;
};

}  // namespace sluice::assign::detail
