#pragma once
// The Galvatron searches over a Context: BMW's partition balancing (Algorithm 2) and the sweep of batches, PP
// degrees and micro-batch counts (Algorithm 1). Not for callers: search.hpp is their interface.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <exception>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/search/detail/context.hpp"
#include "sluice/search/dp.hpp"
#include "sluice/search/estimator.hpp"
#include "sluice/search/model.hpp"
#include "sluice/search/partition.hpp"
#include "sluice/search/space.hpp"
#include "sluice/search/types.hpp"

namespace sluice::search::detail {

inline BalanceTrace balance_partition(Context& context, int layers) {
  BalanceTrace trace;
  const int pp = context.pp();
  context.prepare_initial();
  trace.memory_balanced = min_max_partition(
      layers, pp, [&](int i, int first, int count) { return context.initial_memory(i, first, count); });
  trace.time_balanced =
      min_max_partition(layers, pp, [&](int i, int first, int count) { return context.initial_time(i, first, count); });
  const Evaluation pm = context.evaluate(trace.memory_balanced);
  const Evaluation pt = context.evaluate(trace.time_balanced);
  auto consider = [&](const Evaluation& evaluation) {
    if (evaluation.feasible && evaluation.iteration < trace.best_iteration) {
      trace.best_iteration = evaluation.iteration;
      trace.best = evaluation.sizes;
    }
  };
  consider(pm);
  consider(pt);
  if (!pm.feasible || pp == 1) return trace;

  const double alpha_t_low = balance(pm.times());
  const double alpha_m_high = balance(pm.memories());
  // Validate: faster bottleneck, fits, no more memory than p_t needs, and Eq. 8's bounds.
  auto valid = [&](const Evaluation& next, const Evaluation& current) {
    if (!next.feasible || !(next.max_time() < current.max_time() * (1 - 1e-12))) return false;
    const double alpha_t = balance(next.times());
    const double alpha_m = balance(next.memories());
    if (alpha_t < balance(current.times()) || alpha_t < alpha_t_low || alpha_m > alpha_m_high) return false;
    if (pt.feasible &&
        (next.max_memory() > pt.max_memory() || alpha_t > balance(pt.times()) || alpha_m < balance(pt.memories())))
      return false;
    return true;
  };

  std::set<std::vector<int>> visited{trace.memory_balanced};
  std::deque<Evaluation> queue{pm};
  while (!queue.empty()) {
    const Evaluation current = std::move(queue.front());
    queue.pop_front();
    const std::vector<double> times = current.times();
    const auto slowest = static_cast<int>(std::ranges::max_element(times) - times.begin());
    std::optional<Evaluation> chosen;
    for (const int target : {slowest - 1, slowest + 1}) {
      if (target < 0 || target >= pp || current.sizes[static_cast<std::size_t>(slowest)] < 2) continue;
      std::vector<int> sizes = current.sizes;
      --sizes[static_cast<std::size_t>(slowest)];
      ++sizes[static_cast<std::size_t>(target)];
      if (!visited.insert(sizes).second) continue;
      Evaluation next = context.evaluate(sizes);
      consider(next);
      if (valid(next, current) && (!chosen || next.max_time() < chosen->max_time())) chosen = std::move(next);
    }
    if (chosen) {
      trace.accepted.push_back({chosen->sizes, balance(chosen->times()), balance(chosen->memories())});
      queue.push_back(std::move(*chosen));
    }
  }
  return trace;
}

class Searcher {
public:
  Searcher(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options)
      : estimator_(model, cluster), options_(options), heads_(heads_gcd(model)) {
    check(options_, estimator_.cluster(), model.layers.size());
    work_.resize(static_cast<std::size_t>(options_.threads));
  }

  [[nodiscard]] const AnalyticEstimator& estimator() const noexcept { return estimator_; }

  Context context(const SpaceOptions& space, int pp, std::int64_t batch, int micro_batches) {
    return context(space, pp, batch, micro_batches, work_.front());
  }

  // Every (P, m) of one batch: `bmw` runs the partition balance, otherwise the even split. `work`: the calling
  // thread's DP buffers, so that batches may be searched side by side.
  std::optional<Plan> at_batch(const SpaceOptions& space, std::int64_t batch, bool bmw, const std::string& method,
                               StageWorkspace& work) const {
    std::optional<Plan> best;
    const std::int64_t gpus = estimator_.cluster().gpus;
    for (const int pp : pp_degrees(space, gpus, estimator_.layers())) {
      const auto group = static_cast<int>(gpus / pp);
      for (const int m : micro_batch_counts(batch, pp, accumulates(options_))) {
        if (micro_batch_strategies(group, space, heads_, batch / m).empty()) continue;
        Context ctx = context(space, pp, batch, m, work);
        std::optional<std::vector<int>> sizes;
        if (bmw) {
          sizes = balance_partition(ctx, estimator_.layers()).best;
        } else {
          sizes = even_partition(estimator_.layers(), pp);
        }
        if (!sizes) continue;
        const Evaluation evaluation = ctx.evaluate(*sizes);
        if (evaluation.feasible) keep_better(best, to_plan(ctx, evaluation, method, gpus));
      }
    }
    return best;
  }

  // The batch sweep: a fixed B, or B = step, 2·step, ... until a B fits nowhere (Alg. 1 and 2). With several
  // threads, each searches one of the next batches; the results are then taken in batch order, as one thread takes
  // them, so the plan (and the first error) does not depend on the thread count.
  std::optional<Plan> sweep(const SpaceOptions& space, bool bmw, const std::string& method) {
    if (options_.global_batch > 0) return at_batch(space, options_.global_batch, bmw, method, work_.front());
    std::optional<Plan> best;
    const std::int64_t step = options_.batch_step;
    const auto threads = static_cast<std::int64_t>(work_.size());
    for (std::int64_t first = step; first <= options_.max_batch; first += step * threads) {
      const std::int64_t count = std::min(threads, (options_.max_batch - first) / step + 1);
      std::vector<std::optional<Plan>> found(static_cast<std::size_t>(count));
      std::vector<std::exception_ptr> failed(static_cast<std::size_t>(count));
      const auto search_one = [&](std::int64_t k) {
        const auto slot = static_cast<std::size_t>(k);
        try {
          found[slot] = at_batch(space, first + k * step, bmw, method, work_[slot]);
        } catch (...) {
          failed[slot] = std::current_exception();
        }
      };
      {
        std::vector<std::jthread> helpers;
        for (std::int64_t k = 1; k < count; ++k) helpers.emplace_back(search_one, k);
        search_one(0);
      }
      for (std::size_t k = 0; k < static_cast<std::size_t>(count); ++k) {
        if (failed[k]) std::rethrow_exception(failed[k]);
        if (!found[k]) return best;
        keep_better(best, std::move(found[k]));
      }
    }
    return best;
  }

  [[nodiscard]] const SearchOptions& options() const noexcept { return options_; }

private:
  Context context(const SpaceOptions& space, int pp, std::int64_t batch, int micro_batches,
                  StageWorkspace& work) const {
    const auto group = static_cast<int>(estimator_.cluster().gpus / pp);
    return Context(estimator_, options_, micro_batch_strategies(group, space, heads_, batch / micro_batches), pp, batch,
                   micro_batches, work);
  }

  AnalyticEstimator estimator_;
  SearchOptions options_;
  std::int64_t heads_;
  std::vector<StageWorkspace> work_;  // one per thread
};

}  // namespace sluice::search::detail
