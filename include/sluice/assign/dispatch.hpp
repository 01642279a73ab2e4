#pragma once
// Stage 1 of Hydraulis' two-stage assignment (§6.2, App. D): dispatch a mini-batch across the D pipelines
// of a heterogeneous strategy so that the largest per-pipeline lower bound (Eq. 2) is as small as possible
// (Eq. 3). The greedy of Alg. 1 with seeded random restarts and a longest-first order, a local search on
// its best trial, and a solver-free lower bound on the optimum. Derivations, structure and measured quality:
// docs/assign-dispatch.md. The exact MILP: dispatch_cbc.hpp.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/assign/detail/dispatch_greedy.hpp"
#include "sluice/assign/detail/dispatch_local_search.hpp"
#include "sluice/assign/detail/dispatch_lower_bound.hpp"
#include "sluice/assign/detail/dispatch_problem.hpp"
#include "sluice/assign/types.hpp"
#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/cost/profile.hpp"

namespace sluice::assign {

struct DispatchOptions {
  int trials = 100;           // random orders tried by the greedy (Alg. 1's T); >= 1
  int threads = 1;            // workers sharing the trials; the result does not depend on it; >= 1
  std::uint64_t seed = 0;     // trial t orders the batch with Rng::stream(seed, t)
  bool local_search = true;   // improve the best trial with moves and swaps
  bool longest_first = true;  // also try the longest-first (LPT) order, ahead of the random trials
  // Charge the V step (Eq. 2's second term, below). Off, Eq. 2 is its first term alone: the pipeline time
  // Σ micro-batches + (PP − 1)·slowest that a schedule overlapping unequal micro-batches comes close to, where
  // the 1F1B estimate (packing's objective) charges the slowest micro-batch V times.
  bool v_step = true;
  friend bool operator==(const DispatchOptions&, const DispatchOptions&) = default;
};

inline void require_valid(const DispatchOptions& options) {
  sluice::require(options.trials >= 1, "dispatch: trials must be >= 1, got ", options.trials);
  sluice::require(options.threads >= 1, "dispatch: threads must be >= 1, got ", options.threads);
}

// Eq. 2 of every pipeline for `pipeline_of` (pipeline of batch[i], batch order); empty pipelines are 0.
// Raises invalid_input if the input is malformed or a sequence sits on a pipeline that cannot hold it.
[[nodiscard]] inline std::vector<double> dispatch_pipeline_bounds(Span<const Sequence> batch, PipelineCosts pipelines,
                                                                  Span<const int> pipeline_of, bool v_step = true) {
  return detail::DispatchProblem(batch, pipelines, v_step).bounds(pipeline_of);
}

// Eq. 3: the largest Eq. 2 bound over the pipelines.
[[nodiscard]] inline double dispatch_objective(Span<const Sequence> batch, PipelineCosts pipelines,
                                               Span<const int> pipeline_of, bool v_step = true) {
  const std::vector<double> bounds = dispatch_pipeline_bounds(batch, pipelines, pipeline_of, v_step);
  return *std::max_element(bounds.begin(), bounds.end());
}

// A lower bound on the optimum of Eq. 3, computed without a solver (derivation: detail/dispatch_lower_bound.hpp).
[[nodiscard]] inline double dispatch_lower_bound(Span<const Sequence> batch, PipelineCosts pipelines,
                                                 bool v_step = true) {
  const detail::DispatchProblem problem(batch, pipelines, v_step);
  return detail::DispatchLowerBound(problem).compute();
}

// Hydraulis Alg. 1 with `trials` seeded random orders (and first, unless disabled, the longest-first
// order), the best trial (lowest objective, then lowest trial index, longest-first counting as −1) improved
// by local search; the first trial within 1e-9 of the lower bound ends the search. Sequences that only the
// pipelines of the largest MaxLen can hold are placed first in each random trial, as the authors' code does.
// Deterministic for a seed, whatever the thread count. Raises invalid_input on an empty batch, no pipelines,
// pipelines out of MaxLen order, a sequence longer than every MaxLen, or bad options.
[[nodiscard]] inline Dispatch dispatch_greedy(Span<const Sequence> batch, PipelineCosts pipelines,
                                              const DispatchOptions& options = {}) {
  require_valid(options);
  const detail::DispatchProblem problem(batch, pipelines, options.v_step);
  const int n = problem.sequences();
  const detail::DispatchGroup& first = problem.group(0);
  int top = 0;  // pipelines sharing the largest MaxLen
  for (int g = 0; g < problem.groups() && problem.group(g).max_len == first.max_len; ++g) top += problem.group(g).count;
  std::vector<int> pinned;
  std::vector<int> rest;
  for (int i = 0; i < n; ++i) (top < problem.pipelines() && problem.limit(i) == top ? pinned : rest).push_back(i);
  // Length descending, then batch order; the pinned sequences are the longest, so they come first here too.
  std::vector<int> longest_first(static_cast<std::size_t>(n));
  std::iota(longest_first.begin(), longest_first.end(), 0);
  std::sort(longest_first.begin(), longest_first.end(), [&](int x, int y) {
    return problem.length(x) != problem.length(y) ? problem.length(x) > problem.length(y) : x < y;
  });

  // A trial within 1e-9 of the lower bound is optimal to that margin: trials above the first such one are
  // skipped (deterministically: every trial below it still runs), and so is the local search.
  const double lower_bound = detail::DispatchLowerBound(problem).compute();
  const double certain = lower_bound * (1 + 1e-9);
  std::atomic<int> certified{options.trials};
  const int workers = std::min(options.threads, options.trials);
  std::vector<detail::DispatchGreedy> greedy;
  greedy.reserve(static_cast<std::size_t>(workers));
  for (int w = 0; w < workers; ++w) greedy.emplace_back(problem, pinned, rest, longest_first);
  {
    std::vector<std::jthread> threads;
    threads.reserve(static_cast<std::size_t>(workers - 1));
    for (int w = 1; w < workers; ++w)
      threads.emplace_back([&, w] { greedy[w].run(options.seed, w, options.trials, workers, certain, certified); });
    greedy[0].run(options.seed, options.longest_first ? -1 : 0, options.trials, workers, certain, certified);
  }
  // The first certified trial if there is one, else the lowest objective, then the lowest trial index.
  auto before = [](const detail::DispatchGreedy& x, const detail::DispatchGreedy& y) {
    if (x.certified() != y.certified()) return x.certified();
    if (!x.certified() && x.best_objective() != y.best_objective()) return x.best_objective() < y.best_objective();
    return x.best_trial() < y.best_trial();
  };
  const auto best = std::min_element(greedy.begin(), greedy.end(), before);

  Dispatch result;
  result.pipeline_of = best->best_assignment();
  if (options.local_search && !best->certified()) detail::DispatchLocalSearch(problem, result.pipeline_of).run();
  result.pipeline_bounds = problem.bounds(result.pipeline_of);
  result.objective = *std::max_element(result.pipeline_bounds.begin(), result.pipeline_bounds.end());
  result.lower_bound = lower_bound;
  result.v_step = options.v_step;
  return result;
}

// Checks a Dispatch against its batch and pipelines; raises invalid_plan naming the first broken invariant:
// one pipeline per sequence, each able to hold it (J_i); per-pipeline bounds, objective (their maximum)
// agreeing with Eq. 2–3 (relative tolerance 1e-9); 0 ≤ lower_bound ≤ objective.
inline void validate(const Dispatch& dispatch, Span<const Sequence> batch, PipelineCosts pipelines) {
  const PlanCheck check("dispatch: ");
  const detail::DispatchProblem problem(batch, pipelines, dispatch.v_step);
  check(dispatch.pipeline_of.size() == batch.size(), "pipeline_of has ", dispatch.pipeline_of.size(),
        " entries for a batch of ", batch.size(), " sequences");
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const int p = dispatch.pipeline_of[i];
    check(p >= 0 && p < problem.limit(static_cast<int>(i)), "sequence ", batch[i].id(), " (length ", batch[i].length(),
          ") is on pipeline ", p, ", but only pipelines 0..", problem.limit(static_cast<int>(i)) - 1, " can hold it");
  }
  const std::vector<double> bounds = problem.bounds(dispatch.pipeline_of);
  check(dispatch.pipeline_bounds.size() == bounds.size(), "pipeline_bounds has ", dispatch.pipeline_bounds.size(),
        " entries for ", bounds.size(), " pipelines");
  for (std::size_t p = 0; p < bounds.size(); ++p) {
    check(nearly_equal(dispatch.pipeline_bounds[p], bounds[p]), "pipeline ", p, " bound ", dispatch.pipeline_bounds[p],
          " s, Eq. 2 gives ", bounds[p]);
  }
  const double objective = *std::max_element(bounds.begin(), bounds.end());
  check(nearly_equal(dispatch.objective, objective), "objective ", dispatch.objective, " s, Eq. 3 gives ", objective);
  check(std::isfinite(dispatch.lower_bound) && dispatch.lower_bound >= 0, "lower_bound ", dispatch.lower_bound,
        " is not finite and >= 0");
  check(dispatch.lower_bound <= dispatch.objective * (1 + 1e-9), "lower_bound ", dispatch.lower_bound,
        " exceeds the objective ", dispatch.objective);
}

}  // namespace sluice::assign
