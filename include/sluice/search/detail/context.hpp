#pragma once
// One (B, P, m) of the Galvatron search: the options' checks, the PP degrees and micro-batch counts swept, and the
// Context that evaluates partitions from per-layer costs and cached stage DPs; plans from its evaluations.
// Not for callers: search.hpp is their interface.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/search/dp.hpp"
#include "sluice/search/estimator.hpp"
#include "sluice/search/model.hpp"
#include "sluice/search/space.hpp"
#include "sluice/search/types.hpp"

namespace sluice::search::detail {

inline std::int64_t heads_gcd(const ModelSpec& model) {
  std::int64_t value = 0;
  for (const LayerSpec& layer : model.layers) value = std::gcd(value, layer.heads);
  return value;
}

inline std::int64_t budget(const SearchOptions& options, const ClusterSpec& cluster) {
  return options.memory_bytes > 0 ? options.memory_bytes : cluster.memory_bytes;
}

// The search's work grows with the batches swept times the layers times the layer DP's memory units; past this
// bound (about 4x the bundled gpt-48 search on a100-8) it would run for many minutes, so it is refused
// (docs/limits.md gives the time at the bound).
inline constexpr double max_search_work = 0x1p26;

// The options' own checks (search::require_valid), then those against the cluster and the model's layers.
inline void check(const SearchOptions& options, const ClusterSpec& cluster, std::size_t layers) {
  require_valid(options);
  sluice::require(options.memory_bytes <= cluster.memory_bytes, "search: memory_bytes ", options.memory_bytes,
                  " exceeds the device memory of cluster ", cluster.name, " (", cluster.memory_bytes, ")");
  const auto memory_units = budget(options, cluster) / options.granularity_bytes;  // whole units of the budget
  sluice::require(memory_units <= max_memory_units, "search: memory / granularity_bytes must be <= ", max_memory_units,
                  ", got ", memory_units);
  const auto batch_sizes = options.max_batch / options.batch_step;  // the sweep's steps
  const double sweeps = options.global_batch > 0 ? 1.0 : static_cast<double>(batch_sizes);
  const double units = static_cast<double>(memory_units);
  sluice::require(sweeps * static_cast<double>(layers) * units <= max_search_work, "search: ", sweeps,
                  " batch sizes x ", layers, " layers x ", units, " memory units is more than the ", max_search_work,
                  " a search may take (use a coarser --granularity, a fixed --batch or a larger --batch-step)");
  for (const int pp : options.space.pp_degrees)
    sluice::require(pp >= 1 && pp <= cluster.gpus && (pp & (pp - 1)) == 0,
                    "search: pp degree must be a power of 2 in [1, ", cluster.gpus, "], got ", pp);
}

inline std::vector<int> pp_degrees(const SpaceOptions& space, std::int64_t gpus, int layers) {
  std::vector<int> out;
  for (int pp = 1; pp <= gpus && pp <= layers && (space.max_pp == 0 || pp <= space.max_pp); pp *= 2)
    if (space.pp_degrees.empty() || std::ranges::find(space.pp_degrees, pp) != space.pp_degrees.end())
      out.push_back(pp);
  return out;
}

// Micro-batch counts, ascending: the whole batch, and micro-batches of 1, 2, 4, ... samples that divide B; a layer
// then takes the strategies whose DP degree divides the micro-batch, as in Galvatron's search. (Galvatron tries every
// divisor of B: the same for its power-of-2 batches, and up to 30x the work for the sweep's other multiples of 8.)
// One stage accumulates gradients only at a fixed B: in the batch sweep every larger B would amortise the gradient
// sync further and the sweep would not end.
inline bool accumulates(const SearchOptions& options) noexcept { return options.global_batch > 0; }

inline bool tried_micro_batches(std::int64_t batch, int pp, std::int64_t micro_batches, bool accumulate) noexcept {
  if (batch < 1 || micro_batches < 1 || batch % micro_batches != 0) return false;
  return micro_batches == 1 || ((pp > 1 || accumulate) && power_of_two(batch / micro_batches));
}

inline std::vector<int> micro_batch_counts(std::int64_t batch, int pp, bool accumulate) {
  if (batch < 1) return {};
  std::vector<int> out{1};
  if (pp == 1 && !accumulate) return out;
  std::vector<std::int64_t> sizes;  // the powers of 2 below B that divide it
  for (std::int64_t size = 1; size < batch && batch % size == 0; size *= 2) sizes.push_back(size);
  for (auto size = sizes.rbegin(); size != sizes.rend(); ++size) out.push_back(static_cast<int>(batch / *size));
  return out;
}

// The strategies of `space` a stage of `group` GPUs can give a micro-batch of `micro_batch` samples.
inline std::vector<LayerStrategy> micro_batch_strategies(int group, const SpaceOptions& space, std::int64_t heads,
                                                         std::int64_t micro_batch) {
  std::vector<LayerStrategy> out = stage_strategies(group, space, heads);
  std::erase_if(out, [&](const LayerStrategy& strategy) { return micro_batch % strategy.dp != 0; });
  return out;
}

inline double in_flight(Schedule schedule, int stage, int stages, int micro_batches) {
  return schedule == Schedule::gpipe ? micro_batches : std::min(stages - stage, micro_batches);
}

struct StageResult {
  bool feasible = false;
  std::vector<int> choice;
  double time_sync = 0;
  double time_nosync = 0;
  double memory = 0;
};

struct Evaluation {
  bool feasible = false;
  std::vector<int> sizes;
  std::vector<StageResult> stages;
  std::size_t vocabulary = 0;  // index into the context's vocabulary candidates
  double iteration = std::numeric_limits<double>::infinity();

  [[nodiscard]] std::vector<double> times() const {
    std::vector<double> out;
    for (const StageResult& stage : stages) out.push_back(stage.time_nosync);
    return out;
  }
  [[nodiscard]] std::vector<double> memories() const {
    std::vector<double> out;
    for (const StageResult& stage : stages) out.push_back(stage.memory);
    return out;
  }
  [[nodiscard]] double max_time() const {
    double peak = 0;
    for (const StageResult& stage : stages) peak = std::max(peak, stage.time_nosync);
    return peak;
  }
  [[nodiscard]] double max_memory() const {
    double peak = 0;
    for (const StageResult& stage : stages) peak = std::max(peak, stage.memory);
    return peak;
  }
};

// Everything for one (B, P, m): per-layer costs of every strategy, and the stage DPs, cached by
// (stage, first layer, layer count) so that partitions differing in one boundary reuse the rest. The end stages hold
// the vocabulary layers: their DPs are solved once for the budget each vocabulary strategy leaves (the non-CKPT
// strategies of the space), and a partition takes the vocabulary strategy that makes it fastest.
class Context {
public:
  Context(const AnalyticEstimator& estimator, const SearchOptions& options, std::vector<LayerStrategy> strategies,
          int pp, std::int64_t batch, int micro_batches, StageWorkspace& work)
      : estimator_(estimator),
        options_(options),
        strategies_(std::move(strategies)),
        pp_(pp),
        batch_(batch),
        micro_batches_(micro_batches),
        micro_batch_(batch / micro_batches),
        group_(estimator.cluster().gpus / pp),
        layers_(estimator.layers()),
        work_(work) {
    const auto S = strategies_.size();
    for (std::size_t s = 0; s < S; ++s) {
      int id = -1;
      for (std::size_t k = 0; k < representative_.size(); ++k)
        if (strategies_[representative_[k]].same_layout(strategies_[s])) id = static_cast<int>(k);
      if (id < 0) {
        id = static_cast<int>(representative_.size());
        representative_.push_back(s);
      }
      layout_.push_back(id);
      if (!strategies_[s].ckpt) vocabulary_.push_back(s);
    }
    sluice::require(!vocabulary_.empty(), "search: no strategy without checkpointing for the vocabulary layers");
    // Per stage, the vocabulary layers' extras under each candidate (one entry for a middle stage, which holds none).
    for (int i = 0; i < pp_; ++i) {
      const double factor = in_flight(options_.schedule, i, pp_, micro_batches_);
      const bool holds_vocabulary = i == 0 || i == pp_ - 1;
      std::vector<StageExtra>& extras = extras_.emplace_back();
      for (std::size_t v = 0; v < (holds_vocabulary ? vocabulary_.size() : 1); ++v)
        extras.push_back(estimator_.stage_extra(i, pp_, vocabulary(v), micro_batch_, micro_batches_, factor));
    }
    const std::size_t K = representative_.size();
    costs_.reserve(static_cast<std::size_t>(layers_) * S);
    transition_.assign(static_cast<std::size_t>(layers_) * K * K, 0.0);
    for (int l = 0; l < layers_; ++l) {
      for (const LayerStrategy& strategy : strategies_)
        costs_.push_back(estimator.layer(l, strategy, micro_batch_, micro_batches_));
      for (std::size_t from = 0; from < K; ++from)
        for (std::size_t to = 0; to < K; ++to)
          transition_[(static_cast<std::size_t>(l) * K + from) * K + to] = estimator.transition(
              l, strategies_[representative_[from]], strategies_[representative_[to]], micro_batch_);
    }
  }

  [[nodiscard]] int pp() const noexcept { return pp_; }
  [[nodiscard]] int micro_batches() const noexcept { return micro_batches_; }
  [[nodiscard]] std::int64_t batch() const noexcept { return batch_; }
  [[nodiscard]] std::int64_t group() const noexcept { return group_; }
  [[nodiscard]] const std::vector<LayerStrategy>& strategies() const noexcept { return strategies_; }
  [[nodiscard]] const LayerCost& cost(int layer, std::size_t strategy) const noexcept {
    return costs_[static_cast<std::size_t>(layer) * strategies_.size() + strategy];
  }
  [[nodiscard]] const LayerStrategy& vocabulary(std::size_t candidate) const noexcept {
    return strategies_[vocabulary_[candidate]];
  }

  // The stage's DP under each vocabulary candidate (one result for a middle stage, which holds none).
  const std::vector<StageResult>& stage(int index, int first, int count) {
    const auto key = std::make_tuple(index, first, count);
    if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
    return cache_.emplace(key, solve(index, first, count)).first->second;
  }

  // Eq. 9 under the vocabulary candidate that makes the partition fastest (the first of equals).
  Evaluation evaluate(const std::vector<int>& sizes) {
    std::vector<const std::vector<StageResult>*> results;
    int first = 0;
    for (int i = 0; i < pp_; ++i) {
      const int count = sizes[static_cast<std::size_t>(i)];
      results.push_back(&stage(i, first, count));
      first += count;
    }
    Evaluation best;
    best.sizes = sizes;
    for (std::size_t v = 0; v < vocabulary_.size(); ++v) {
      bool feasible = true;
      double slowest = 0;
      double total = 0;
      for (const auto* stage_results : results) {
        const StageResult& result = (*stage_results)[stage_results->size() == 1 ? 0 : v];
        feasible = feasible && result.feasible;
        slowest = std::max(slowest, result.time_nosync);
        total += result.time_sync;
      }
      const double iteration = (micro_batches_ - 1) * slowest + total;  // Eq. 9
      if (feasible && iteration < best.iteration) {
        best.feasible = true;
        best.vocabulary = v;
        best.iteration = iteration;
      }
    }
    for (const auto* stage_results : results)
      best.stages.push_back((*stage_results)[stage_results->size() == 1 ? 0 : best.vocabulary]);
    return best;
  }

  // Stage i's memory and time for layers [first, first + count) under S0 (pure DP, no CKPT) and the vocabulary
  // candidate of least memory, from prefix sums: the inputs of the initial partitions p_m and p_t.
  void prepare_initial() {
    LayerStrategy initial{.tp = 1, .dp = static_cast<int>(group_)};
    prefix_forward_.assign(1, 0.0);
    prefix_state_.assign(1, 0.0);
    prefix_time_.assign(1, 0.0);
    for (int l = 0; l < layers_; ++l) {
      const LayerCost cost = estimator_.layer(l, initial, micro_batch_);
      prefix_forward_.push_back(prefix_forward_.back() + cost.forward_bytes);
      prefix_state_.push_back(prefix_state_.back() + cost.state_bytes);
      prefix_time_.push_back(prefix_time_.back() + cost.time_nosync);
    }
    initial_extra_.clear();
    for (const std::vector<StageExtra>& extras : extras_)
      initial_extra_.push_back(*std::ranges::min_element(
          extras, [](const StageExtra& x, const StageExtra& y) { return x.bytes < y.bytes; }));
  }
  [[nodiscard]] double initial_memory(int index, int first, int count) const {
    const auto a = static_cast<std::size_t>(first);
    const auto b = a + static_cast<std::size_t>(count);
    return prefix_state_[b] - prefix_state_[a] +
           in_flight(options_.schedule, index, pp_, micro_batches_) * (prefix_forward_[b] - prefix_forward_[a]) +
           initial_extra_[static_cast<std::size_t>(index)].bytes;
  }
  [[nodiscard]] double initial_time(int index, int first, int count) const {
    const double p2p = index + 1 < pp_ ? estimator_.p2p(first + count - 1, group_, micro_batch_) : 0.0;
    const auto a = static_cast<std::size_t>(first);
    const auto b = a + static_cast<std::size_t>(count);
    return prefix_time_[b] - prefix_time_[a] + p2p + initial_extra_[static_cast<std::size_t>(index)].time_nosync;
  }

private:
  std::vector<StageResult> solve(int index, int first, int count) {
    const auto S = strategies_.size();
    const std::size_t K = representative_.size();
    const double m = micro_batches_;
    const double factor = in_flight(options_.schedule, index, pp_, micro_batches_);
    problem_.layers = count;
    problem_.strategies = static_cast<int>(S);
    problem_.layouts = static_cast<int>(K);
    problem_.layout = layout_;
    problem_.forward_bytes.clear();
    problem_.backward_bytes.clear();
    problem_.state_bytes.clear();
    problem_.time.clear();
    for (int l = first; l < first + count; ++l)
      for (std::size_t s = 0; s < S; ++s) {
        const LayerCost& c = cost(l, s);
        problem_.forward_bytes.push_back(factor * c.forward_bytes);
        problem_.backward_bytes.push_back(c.backward_bytes);
        problem_.state_bytes.push_back(c.state_bytes);
        // The stage's share of one iteration: m − 1 micro-batches without gradient sync, one with.
        problem_.time.push_back((m - 1) * c.time_nosync + c.time_sync);
      }
    problem_.transition.assign(
        transition_.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(first) * K * K),
        transition_.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(first + count) * K * K));
    for (double& value : problem_.transition) value *= m;
    const std::vector<StageExtra>& extras = extras_[static_cast<std::size_t>(index)];
    const double memory = static_cast<double>(budget(options_, estimator_.cluster()));
    std::vector<double> budgets;
    for (const StageExtra& extra : extras) budgets.push_back(memory - extra.bytes);
    const std::vector<StageSolution> solutions =
        solve_stage(problem_, budgets, static_cast<double>(options_.granularity_bytes), work_);

    double p2p = 0;
    if (index + 1 < pp_) p2p = estimator_.p2p(first + count - 1, group_, micro_batch_);
    std::vector<StageResult> results;
    for (std::size_t v = 0; v < extras.size(); ++v) {
      const StageSolution& solution = solutions[v];
      StageResult& result = results.emplace_back();
      if (!solution.feasible) continue;
      result.feasible = true;
      result.choice = solution.choice;
      result.memory = solution.memory + extras[v].bytes;
      for (int l = 0; l < count; ++l) {
        const auto s = static_cast<std::size_t>(solution.choice[static_cast<std::size_t>(l)]);
        const LayerCost& c = cost(first + l, s);
        result.time_sync += c.time_sync;
        result.time_nosync += c.time_nosync;
        if (l > 0) {
          const auto from = static_cast<std::size_t>(
              layout_[static_cast<std::size_t>(solution.choice[static_cast<std::size_t>(l - 1)])]);
          const double move =
              transition_[(static_cast<std::size_t>(first + l) * K + from) * K + static_cast<std::size_t>(layout_[s])];
          result.time_sync += move;
          result.time_nosync += move;
        }
      }
      result.time_sync += p2p + extras[v].time_sync;
      result.time_nosync += p2p + extras[v].time_nosync;
    }
    return results;
  }

  const AnalyticEstimator& estimator_;
  const SearchOptions& options_;
  std::vector<LayerStrategy> strategies_;
  int pp_;
  std::int64_t batch_;
  int micro_batches_;
  std::int64_t micro_batch_;
  std::int64_t group_;
  int layers_;
  StageWorkspace& work_;
  std::vector<std::size_t> representative_;
  std::vector<int> layout_;
  std::vector<std::size_t> vocabulary_;          // the strategies the vocabulary layers may take
  std::vector<std::vector<StageExtra>> extras_;  // per stage, per vocabulary candidate
  std::vector<LayerCost> costs_;
  std::vector<double> transition_;
  std::map<std::tuple<int, int, int>, std::vector<StageResult>> cache_;
  StageProblem problem_;
  std::vector<double> prefix_forward_;
  std::vector<double> prefix_state_;
  std::vector<double> prefix_time_;
  std::vector<StageExtra> initial_extra_;
};

inline Plan to_plan(const Context& context, const Evaluation& evaluation, std::string method, std::int64_t gpus) {
  Plan plan;
  plan.method = std::move(method);
  plan.gpus = gpus;
  plan.pp = context.pp();
  plan.global_batch = context.batch();
  plan.micro_batches = context.micro_batches();
  plan.vocabulary = context.vocabulary(evaluation.vocabulary);
  int first = 0;
  for (std::size_t i = 0; i < evaluation.stages.size(); ++i) {
    const StageResult& result = evaluation.stages[i];
    StagePlan stage;
    stage.first_layer = first;
    for (const int s : result.choice) stage.strategies.push_back(context.strategies()[static_cast<std::size_t>(s)]);
    stage.time_sync = result.time_sync;
    stage.time_nosync = result.time_nosync;
    stage.memory_bytes = result.memory;
    first += evaluation.sizes[i];
    plan.stages.push_back(std::move(stage));
  }
  plan.iteration_seconds = evaluation.iteration;
  plan.throughput = static_cast<double>(context.batch()) / evaluation.iteration;
  return plan;
}

// Whether every layer of the plan, and its vocabulary layers, use a strategy (and PP degree) of `space`.
inline bool within(const Plan& plan, const SpaceOptions& space, const ModelSpec& model) {
  const std::vector<int> degrees = pp_degrees(space, plan.gpus, static_cast<int>(model.layers.size()));
  if (std::ranges::find(degrees, plan.pp) == degrees.end()) return false;
  const std::vector<LayerStrategy> allowed =
      stage_strategies(static_cast<int>(plan.gpus / plan.pp), space, heads_gcd(model));
  for (const StagePlan& stage : plan.stages)
    for (const LayerStrategy& strategy : stage.strategies)
      if (std::ranges::find(allowed, strategy) == allowed.end()) return false;
  return !plan.vocabulary || std::ranges::find(allowed, *plan.vocabulary) != allowed.end();
}

inline void keep_better(std::optional<Plan>& best, std::optional<Plan> candidate) {
  if (candidate && (!best || candidate->throughput > best->throughput)) best = std::move(candidate);
}

}  // namespace sluice::search::detail
