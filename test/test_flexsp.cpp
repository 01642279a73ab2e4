#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <vector>

#include "sluice/assign/flex_cp.hpp"
#include "sluice/assign/flexsp.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "support.hpp"

using namespace sluice;
using assign::FlexCpDegree;
using assign::FlexCpProblem;

namespace {

// The authors' chunking: a dynamic program over split points of the longest-first lengths, the least largest run
// sum for i sequences in k runs, ties to the earliest last split.
std::vector<std::size_t> split_by_dynamic_program(const std::vector<std::int64_t>& lengths, std::size_t count) {
  const std::size_t n = lengths.size();
  std::vector<std::int64_t> prefix(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + lengths[i];
  constexpr std::int64_t unset = std::numeric_limits<std::int64_t>::max();
  std::vector<std::vector<std::int64_t>> best(n + 1, std::vector<std::int64_t>(count + 1, unset));
  std::vector<std::vector<std::size_t>> from(n + 1, std::vector<std::size_t>(count + 1, 0));
  best[0][0] = 0;
  for (std::size_t k = 1; k <= count; ++k)
    for (std::size_t i = 1; i <= n; ++i)
      for (std::size_t j = k - 1; j < i; ++j) {
        if (best[j][k - 1] == unset) continue;
        const std::int64_t value = std::max(best[j][k - 1], prefix[i] - prefix[j]);
        if (value < best[i][k]) {
          best[i][k] = value;
          from[i][k] = j;
        }
      }
  std::vector<std::size_t> ends(count);
  std::size_t end = n;
  for (std::size_t k = count; k > 0; --k) {
    ends[k - 1] = end;
    end = from[end][k];
  }
  return ends;
}

// Pool {2, 4[, 8]} on `units`, Ulysses-like: work halves per doubling plus a little communication, constants that
// grow with the degree.
FlexCpProblem random_problem(Rng& rng, std::size_t sequences, int units) {
  FlexCpProblem problem;
  problem.units = units;
  for (std::size_t s = 0; s < sequences; ++s) problem.lengths.push_back(rng.uniform_int(1, 4096));
  const double a = 1e-9 + 1e-8 * rng.uniform();
  const double b = 1e-6 + 1e-5 * rng.uniform();
  const double c = 0.002 * rng.uniform();
  const std::int64_t per_unit = rng.uniform_int(2048, 8192);
  for (int width = 2; width <= units; width *= 2) {
    const double communication = 2e-6 * rng.uniform();
    problem.degrees.push_back(FlexCpDegree{.degree = width,
                                           .latency = {a / width, b / width + communication, c * (1 + width / 8.0)},
                                           .capacity = per_unit * width,
                                           .length_multiple = 1});
  }
  return problem;
}

// The least slowest group over every grouping of `sequences` into groups whose degrees use every unit, each group
// holding at least one sequence within its capacity: set partitions by depth-first search, a degree per block.
class ExhaustiveGrouping {
public:
  ExhaustiveGrouping(const FlexCpProblem& problem, std::vector<int> sequences)
      : problem_(problem), sequences_(std::move(sequences)) {
    search(0);
  }
  [[nodiscard]] double optimum() const { return best_; }

private:
  struct Block {
    std::size_t degree;
    double load;
    std::int64_t tokens;
  };

  void search(std::size_t i) {
    if (i == sequences_.size()) {
      if (used_ != problem_.units) return;
      double slowest = 0;
      for (const Block& block : blocks_)
        slowest = std::max(slowest, problem_.degrees[block.degree].latency.microbatch_overhead() + block.load);
      best_ = std::min(best_, slowest);
      return;
    }
    const std::int64_t length = problem_.lengths[static_cast<std::size_t>(sequences_[i])];
    for (std::size_t b = 0; b < blocks_.size(); ++b) {  // by index: deeper levels append blocks
      const std::size_t k = blocks_[b].degree;
      const std::int64_t charged = assign::flex_cp_charged(problem_, k, length);
      if (charged == 0 || blocks_[b].tokens + charged > problem_.degrees[k].capacity) continue;
      const Block before = blocks_[b];
      blocks_[b].load += assign::flex_cp_sequence_seconds(problem_, k, length);
      blocks_[b].tokens += charged;
      search(i + 1);
      blocks_[b] = before;
    }
    for (std::size_t k = 0; k < problem_.degrees.size(); ++k) {
      const int width = problem_.degrees[k].degree;
      if (used_ + width > problem_.units || !assign::flex_cp_holds(problem_, k, length)) continue;
      blocks_.push_back(
          {k, assign::flex_cp_sequence_seconds(problem_, k, length), assign::flex_cp_charged(problem_, k, length)});
      used_ += width;
      search(i + 1);
      used_ -= width;
      blocks_.pop_back();
    }
  }

  const FlexCpProblem& problem_;
  std::vector<int> sequences_;
  std::vector<Block> blocks_;
  int used_ = 0;
  double best_ = inf;
};

double slowest_group(const FlexCpProblem& problem, const assign::FlexCpMicroBatch& micro_batch) {
  double slowest = 0;
  for (const assign::FlexCpGroup& group : micro_batch.groups)
    slowest = std::max(slowest, assign::flex_cp_group_seconds(problem, group));
  return slowest;
}

int units_used(const FlexCpProblem& problem, const assign::FlexCpMicroBatch& micro_batch) {
  int units = 0;
  for (const assign::FlexCpGroup& group : micro_batch.groups)
    units += problem.degrees[static_cast<std::size_t>(group.degree_index)].degree;
  return units;
}

}  // namespace

TEST_CASE("FlexSP: the sorted split is the authors' dynamic program's, run for run") {
  Rng rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<std::int64_t> lengths(1 + rng.below(24));
    for (std::int64_t& length : lengths)
      length = rng.below(3) == 0 ? rng.uniform_int(1, 8) : rng.uniform_int(1, 5000);  // ties, too
    std::ranges::sort(lengths, std::greater{});
    const std::size_t count = 1 + rng.below(lengths.size());
    CAPTURE(trial);
    CHECK(assign::detail::flexsp_sorted_split(lengths, count) == split_by_dynamic_program(lengths, count));
  }
  const std::vector<std::int64_t> lengths = {5, 4, 3};
  CHECK_THROWS_AS(assign::detail::flexsp_sorted_split(lengths, 0), invalid_input);
  CHECK_THROWS_AS(assign::detail::flexsp_sorted_split(lengths, 4), invalid_input);
}

TEST_CASE("FlexSP: one micro-batch's groups use every unit and come near the exhaustive optimum") {
  Rng rng(5);
  int solved = 0, optimal = 0, both_none = 0;
  double worst = 1;
  for (int trial = 0; trial < 300; ++trial) {
    const int units = rng.below(2) == 0 ? 4 : 8;
    FlexCpProblem problem = random_problem(rng, 1 + rng.below(7), units);
    std::vector<int> sequences(problem.lengths.size());
    std::iota(sequences.begin(), sequences.end(), 0);
    const double optimum = ExhaustiveGrouping(problem, sequences).optimum();
    const std::optional<assign::FlexCpMicroBatch> grouped = assign::flexsp_group(problem, sequences);
    CAPTURE(trial);
    if (!grouped) {
      // Too few sequences to fill the units, or too many tokens for them: then no grouping exists.
      CHECK(optimum == inf);
      ++both_none;
      continue;
    }
    REQUIRE(optimum < inf);
    ++solved;
    CHECK(units_used(problem, *grouped) == units);
    assign::FlexCpPlan plan{.micro_batches = {*grouped}, .seconds = 0, .lower_bound = 0};
    plan.seconds = assign::flex_cp_iteration_seconds(problem, plan.micro_batches);
    CHECK_NOTHROW(assign::validate(plan, problem));
    const double ratio = slowest_group(problem, *grouped) / optimum;
    CHECK(ratio >= 1 - 1e-9);
    worst = std::max(worst, ratio);
    if (ratio <= 1 + 1e-9) ++optimal;
  }
  MESSAGE("solved ", solved, ", optimal ", optimal, ", none ", both_none, ", worst ", worst);
  CHECK(solved >= 200);
  CHECK(optimal >= solved * 95 / 100);
  CHECK(worst <= 1.05);
}

TEST_CASE("FlexSP: the iteration is sorted runs, each grouped on every unit, the best of the counts tried") {
  Rng rng(23);
  for (int trial = 0; trial < 60; ++trial) {
    FlexCpProblem problem = random_problem(rng, 8 + rng.below(120), rng.below(2) == 0 ? 8 : 16);
    problem.pp = static_cast<int>(1 + rng.below(2));
    if (rng.below(2) == 0) problem.collectives = {.seconds = 0.01 * rng.uniform(), .backward_ratio = 2};
    const bool with_one = rng.below(2) == 0;  // a degree FlexSP's pool leaves out
    if (with_one) {
      FlexCpDegree one = problem.degrees.front();
      one.degree = 1;
      one.capacity /= 2;
      problem.degrees.insert(problem.degrees.begin(), one);
    }
    CAPTURE(trial);
    const std::optional<assign::FlexCpPlan> plan = assign::solve_flexsp(problem);
    if (!plan) continue;
    CHECK_NOTHROW(assign::validate(*plan, problem));
    CHECK(plan->lower_bound <= plan->seconds);
    // Each micro-batch a run of the longest-first order: none holds a sequence longer than another's shortest
    // unless it holds that one's longest.
    std::vector<std::pair<std::int64_t, std::int64_t>> spans;  // (shortest, longest)
    for (const assign::FlexCpMicroBatch& micro_batch : plan->micro_batches) {
      CHECK(units_used(problem, micro_batch) == problem.units);
      std::int64_t shortest = std::numeric_limits<std::int64_t>::max(), longest = 0;
      for (const assign::FlexCpGroup& group : micro_batch.groups) {
        CHECK(problem.degrees[static_cast<std::size_t>(group.degree_index)].degree >= 2);
        for (const int s : group.sequences) {
          shortest = std::min(shortest, problem.lengths[static_cast<std::size_t>(s)]);
          longest = std::max(longest, problem.lengths[static_cast<std::size_t>(s)]);
        }
      }
      spans.emplace_back(shortest, longest);
    }
    std::ranges::sort(spans);
    for (std::size_t m = 1; m < spans.size(); ++m) CHECK(spans[m - 1].second <= spans[m].first);
  }
}

TEST_CASE("FlexSP: collectives outlast a short micro-batch's passes") {
  FlexCpProblem problem;
  problem.lengths = {1};
  problem.units = 2;
  problem.degrees = {FlexCpDegree{.degree = 2, .latency = {0, 1, 0}, .capacity = 8, .length_multiple = 1}};
  CHECK(assign::flex_cp_exposed_seconds(problem, 6) == 6);  // no collectives
  problem.collectives = {.seconds = 1, .backward_ratio = 2};
  CHECK(assign::flex_cp_exposed_seconds(problem, 6) == 6);    // 2 + 4 hide 1 + 2
  CHECK(assign::flex_cp_exposed_seconds(problem, 1.5) == 3);  // 0.5 and 1 hide nothing: 1 + 2
  CHECK(assign::flex_cp_exposed_seconds(problem, 4.5) == 4.5);
  problem.collectives.backward_ratio = 1;
  CHECK(assign::flex_cp_exposed_seconds(problem, 3) == 3.5);  // forward 1.5 hides 1; backward 1.5 of 2
  for (const assign::FlexCpCollectives bad :
       {assign::FlexCpCollectives{.seconds = -1}, assign::FlexCpCollectives{.seconds = std::nan("")},
        assign::FlexCpCollectives{.seconds = 1, .backward_ratio = 0}, assign::FlexCpCollectives{.seconds = inf}}) {
    problem.collectives = bad;
    CHECK_THROWS_WITH_AS(assign::require_valid(problem), doctest::Contains("collectives"), invalid_input);
  }
}

TEST_CASE("FlexSP: a micro-batch too small to fill the units is no plan") {
  FlexCpProblem problem;
  problem.lengths = {100};
  problem.units = 8;
  problem.degrees = {FlexCpDegree{.degree = 2, .latency = {0, 1e-3, 0}, .capacity = 1000, .length_multiple = 1},
                     FlexCpDegree{.degree = 4, .latency = {0, 5e-4, 0}, .capacity = 2000, .length_multiple = 1}};
  CHECK_FALSE(assign::solve_flexsp(problem).has_value());  // one sequence, widest group 4 of 8 units
  problem.lengths = {100, 90};
  const std::optional<assign::FlexCpPlan> plan = assign::solve_flexsp(problem);
  REQUIRE(plan.has_value());
  REQUIRE(plan->micro_batches.size() == 1);
  CHECK(plan->micro_batches[0].groups.size() == 2);  // two groups of 4
}

TEST_CASE("FlexSP: token sums past int64's range neither overflow nor lose a sequence") {
  FlexCpProblem problem;
  constexpr std::int64_t huge = std::int64_t{1} << 61;
  problem.lengths.assign(8, huge);  // 2^64 tokens in all
  problem.units = 4;
  problem.degrees = {FlexCpDegree{.degree = 2, .latency = {0, 1e-18, 0}, .capacity = 2 * huge, .length_multiple = 1},
                     FlexCpDegree{.degree = 4,
                                  .latency = {0, 5e-19, 0},
                                  .capacity = std::numeric_limits<std::int64_t>::max(),
                                  .length_multiple = 1}};
  const std::vector<std::size_t> ends = assign::detail::flexsp_sorted_split(problem.lengths, 2);
  REQUIRE(ends.size() == 2);  // two non-empty runs that cover every sequence
  CHECK((ends[0] >= 1 && ends[0] < 8 && ends[1] == 8));
  const std::optional<assign::FlexCpPlan> plan = assign::solve_flexsp(problem);
  REQUIRE(plan.has_value());
  CHECK_NOTHROW(assign::validate(*plan, problem));
}
