#pragma once
// Galvatron-Base (Algorithm 1) and Galvatron-BMW (Algorithm 2): for each global batch, PP degree and
// micro-batch count, a partition of the layers into stages and, per stage, the layer DP's strategies;
// pipeline cost by Eq. 9, throughput B / C. BMW starts from the memory-balanced partition p_m and moves
// the slowest stage's boundary layers towards time balance while Eq. 7/8 hold (Validate), keeping the
// best partition seen. Baselines run the same search over the limited spaces of DDP, ZeRO-3, Megatron
// TP, GPipe, Megatron DP+TP and DeepSpeed DP+PP.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/search/dp.hpp"
#include "sluice/search/estimator.hpp"
#include "sluice/search/model.hpp"
#include "sluice/search/partition.hpp"
#include "sluice/search/space.hpp"

namespace sluice::search {

enum class Schedule { one_f_one_b, gpipe };

struct SearchOptions {
  std::int64_t memory_bytes = 0;                // per-device budget E; 0 = the cluster's device memory
  std::int64_t granularity_bytes = 16LL << 20;  // memory step of the layer DP
  std::int64_t global_batch = 0;                // fixed B; 0 = sweep B = step, 2·step, ... while some plan fits
  std::int64_t batch_step = 8;
  std::int64_t max_batch = 1024;
  Schedule schedule = Schedule::one_f_one_b;
  SpaceOptions space{};
};

struct StagePlan {
  int first_layer = 0;
  std::vector<LayerStrategy> strategies;  // one per layer of the stage
  double time_sync = 0;                   // one micro-batch with the gradient synchronisation, R and p2p included (s)
  double time_nosync = 0;                 // one micro-batch without it (s)
  double memory_bytes = 0;                // peak per device, with the stage's extras
  friend bool operator==(const StagePlan&, const StagePlan&) = default;
};

struct Plan {
  std::string method;  // "bmw", "base" or a baseline's name: the search that found it
  std::int64_t gpus = 0;
  int pp = 1;
  std::int64_t global_batch = 0;
  int micro_batches = 1;
  std::vector<StagePlan> stages;
  double iteration_seconds = 0;  // Eq. 9
  double throughput = 0;         // samples per second
  friend bool operator==(const Plan&, const Plan&) = default;

  [[nodiscard]] std::vector<int> partition() const {
    std::vector<int> sizes;
    for (const StagePlan& stage : stages) sizes.push_back(static_cast<int>(stage.strategies.size()));
    return sizes;
  }
};

struct Baseline {
  std::string name;
  std::optional<Plan> plan;  // nullopt: nothing in this space fits
};

struct SearchReport {
  Plan best;                 // Galvatron-BMW (never below Base)
  std::optional<Plan> base;  // Galvatron-Base (never below a baseline)
  std::vector<Baseline> baselines;
};

// The limited spaces the paper compares against, searched with the same estimator.
inline std::vector<std::pair<std::string, SpaceOptions>> baseline_spaces(std::int64_t gpus) {
  const int n = static_cast<int>(gpus);
  SpaceOptions none{.dp = false, .sdp = false, .tp = false, .ckpt = false, .tp_outer = false, .pp_degrees = {1}};
  SpaceOptions dp = none;
  dp.dp = true;
  SpaceOptions sdp = none;
  sdp.sdp = true;
  SpaceOptions tp = none;
  tp.tp = true;
  SpaceOptions pp = none;
  pp.pp_degrees = {n};
  SpaceOptions dp_tp = dp;
  dp_tp.tp = true;
  SpaceOptions dp_pp = dp;
  dp_pp.pp_degrees.clear();
  return {{"dp", dp}, {"sdp", sdp}, {"tp", tp}, {"pp", pp}, {"dp+tp", dp_tp}, {"dp+pp", dp_pp}};
}

namespace detail {

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

inline void check(const SearchOptions& options, const ClusterSpec& cluster, std::size_t layers) {
  sluice::require(options.memory_bytes >= 0, "search: memory_bytes must be >= 0, got ", options.memory_bytes);
  sluice::require(options.memory_bytes <= cluster.memory_bytes, "search: memory_bytes ", options.memory_bytes,
                  " exceeds the device memory of cluster ", cluster.name, " (", cluster.memory_bytes, ")");
  sluice::require(options.granularity_bytes >= 1, "search: granularity_bytes must be >= 1, got ",
                  options.granularity_bytes);
  sluice::require(budget(options, cluster) / options.granularity_bytes <= max_memory_units,
                  "search: memory / granularity_bytes must be <= ", max_memory_units, ", got ",
                  budget(options, cluster) / options.granularity_bytes);
  sluice::require(options.global_batch >= 0, "search: global_batch must be >= 0, got ", options.global_batch);
  sluice::require(options.batch_step >= 1, "search: batch_step must be >= 1, got ", options.batch_step);
  sluice::require(options.max_batch >= options.batch_step && options.max_batch <= (1 << 24),
                  "search: max_batch must be in [batch_step, 2^24], got ", options.max_batch);
  const double sweeps =
      options.global_batch > 0 ? 1.0 : static_cast<double>(options.max_batch / options.batch_step);
  const double units = static_cast<double>(budget(options, cluster) / options.granularity_bytes);
  sluice::require(sweeps * static_cast<double>(layers) * units <= max_search_work, "search: ", sweeps,
                  " batch sizes x ", layers, " layers x ", units, " memory units is more than the ", max_search_work,
                  " a search may take (use a coarser --granularity, a fixed --batch or a larger --batch-step)");
  sluice::require(options.space.max_tp >= 0, "search: space.max_tp must be >= 0, got ", options.space.max_tp);
  for (const int pp : options.space.pp_degrees)
    sluice::require(pp >= 1 && pp <= cluster.gpus && (pp & (pp - 1)) == 0,
                    "search: pp degree must be a power of 2 in [1, ", cluster.gpus, "], got ", pp);
}

inline std::vector<int> pp_degrees(const SpaceOptions& space, std::int64_t gpus, int layers) {
  std::vector<int> out;
  for (int pp = 1; pp <= gpus && pp <= layers; pp *= 2)
    if (space.pp_degrees.empty() || std::ranges::find(space.pp_degrees, pp) != space.pp_degrees.end())
      out.push_back(pp);
  return out;
}

// Micro-batch counts, ascending: micro-batches of g, 2g, 4g, ... samples that divide B (so every DP
// degree of the stage divides them). Without a pipeline there is one micro-batch, as in the paper:
// gradient accumulation is not part of its space (with it, every larger batch would amortise the
// gradient sync further and the batch sweep would not end).
inline std::vector<int> micro_batch_counts(std::int64_t batch, std::int64_t group, int pp) {
  std::vector<int> out;
  for (std::int64_t size = pp == 1 ? batch : group; size <= batch; size *= 2)
    if (batch % size == 0 && size % group == 0) out.push_back(static_cast<int>(batch / size));
  std::ranges::reverse(out);
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
// (stage, first layer, layer count) so that partitions differing in one boundary reuse the rest.
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
    }
    const std::size_t K = representative_.size();
    costs_.reserve(static_cast<std::size_t>(layers_) * S);
    transition_.assign(static_cast<std::size_t>(layers_) * K * K, 0.0);
    for (int l = 0; l < layers_; ++l) {
      for (const LayerStrategy& strategy : strategies_) costs_.push_back(estimator.layer(l, strategy, micro_batch_));
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

  const StageResult& stage(int index, int first, int count) {
    const auto key = std::make_tuple(index, first, count);
    if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
    return cache_.emplace(key, solve(index, first, count)).first->second;
  }

  Evaluation evaluate(const std::vector<int>& sizes) {
    Evaluation evaluation;
    evaluation.sizes = sizes;
    evaluation.feasible = true;
    double slowest = 0;
    double total = 0;
    int first = 0;
    for (int i = 0; i < pp_; ++i) {
      const int count = sizes[static_cast<std::size_t>(i)];
      const StageResult& result = stage(i, first, count);
      evaluation.stages.push_back(result);
      evaluation.feasible = evaluation.feasible && result.feasible;
      slowest = std::max(slowest, result.time_nosync);
      total += result.time_sync;
      first += count;
    }
    if (evaluation.feasible) evaluation.iteration = (micro_batches_ - 1) * slowest + total;  // Eq. 9
    return evaluation;
  }

  // Stage i's memory and time for layers [first, first + count) under S0 (pure DP, no CKPT), from
  // prefix sums: the inputs of the initial partitions p_m and p_t.
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
  }
  [[nodiscard]] double initial_memory(int index, int first, int count) const {
    const auto a = static_cast<std::size_t>(first);
    const auto b = static_cast<std::size_t>(first + count);
    return prefix_state_[b] - prefix_state_[a] +
           in_flight(options_.schedule, index, pp_, micro_batches_) * (prefix_forward_[b] - prefix_forward_[a]) +
           estimator_.stage_extra_bytes(index, pp_, group_);
  }
  [[nodiscard]] double initial_time(int index, int first, int count) const {
    const double p2p = index + 1 < pp_ ? estimator_.p2p(first + count - 1, group_, micro_batch_) : 0.0;
    return prefix_time_[static_cast<std::size_t>(first + count)] - prefix_time_[static_cast<std::size_t>(first)] + p2p;
  }

 private:
  StageResult solve(int index, int first, int count) {
    const auto S = strategies_.size();
    const std::size_t K = representative_.size();
    const double m = micro_batches_;
    const double factor = in_flight(options_.schedule, index, pp_, micro_batches_);
    const double extra = estimator_.stage_extra_bytes(index, pp_, group_);
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
    problem_.budget = static_cast<double>(budget(options_, estimator_.cluster())) - extra;

    const StageSolution solution = solve_stage(problem_, static_cast<double>(options_.granularity_bytes), work_);
    StageResult result;
    if (!solution.feasible) return result;
    result.feasible = true;
    result.choice = solution.choice;
    result.memory = solution.memory + extra;
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
    if (index + 1 < pp_) {
      const double p2p = estimator_.p2p(first + count - 1, group_, micro_batch_);
      result.time_sync += p2p;
      result.time_nosync += p2p;
    }
    return result;
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
  std::vector<LayerCost> costs_;
  std::vector<double> transition_;
  std::map<std::tuple<int, int, int>, StageResult> cache_;
  StageProblem problem_;
  std::vector<double> prefix_forward_;
  std::vector<double> prefix_state_;
  std::vector<double> prefix_time_;
};

inline Plan to_plan(const Context& context, const Evaluation& evaluation, std::string method, std::int64_t gpus) {
  Plan plan;
  plan.method = std::move(method);
  plan.gpus = gpus;
  plan.pp = context.pp();
  plan.global_batch = context.batch();
  plan.micro_batches = context.micro_batches();
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

// Whether every layer of the plan uses a strategy (and PP degree) of `space`.
inline bool within(const Plan& plan, const SpaceOptions& space, const ModelSpec& model) {
  const std::vector<int> degrees = pp_degrees(space, plan.gpus, static_cast<int>(model.layers.size()));
  if (std::ranges::find(degrees, plan.pp) == degrees.end()) return false;
  const std::vector<LayerStrategy> allowed =
      stage_strategies(static_cast<int>(plan.gpus / plan.pp), space, heads_gcd(model));
  for (const StagePlan& stage : plan.stages)
    for (const LayerStrategy& strategy : stage.strategies)
      if (std::ranges::find(allowed, strategy) == allowed.end()) return false;
  return true;
}

inline void keep_better(std::optional<Plan>& best, std::optional<Plan> candidate) {
  if (candidate && (!best || candidate->throughput > best->throughput)) best = std::move(candidate);
}

}  // namespace detail

// One accepted PP_Partition_Adjust step, with Eq. 6's balance degrees of the new partition.
struct Adjustment {
  std::vector<int> sizes;
  double alpha_time = 0;
  double alpha_memory = 0;
};

// The BMW partition search of one (B, P, m): p_m, p_t, every accepted adjustment, and the best seen.
struct BalanceTrace {
  std::vector<int> memory_balanced;  // p_m
  std::vector<int> time_balanced;    // p_t
  std::vector<Adjustment> accepted;
  std::optional<std::vector<int>> best;  // fastest feasible partition evaluated
  double best_iteration = std::numeric_limits<double>::infinity();
};

namespace detail {

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
  }

  [[nodiscard]] const AnalyticEstimator& estimator() const noexcept { return estimator_; }

  Context context(const SpaceOptions& space, int pp, std::int64_t batch, int micro_batches) {
    const auto group = static_cast<int>(estimator_.cluster().gpus / pp);
    return Context(estimator_, options_, stage_strategies(group, space, heads_), pp, batch, micro_batches, work_);
  }

  // Every (P, m) of one batch: `bmw` runs the partition balance, otherwise the even split.
  std::optional<Plan> at_batch(const SpaceOptions& space, std::int64_t batch, bool bmw, const std::string& method) {
    std::optional<Plan> best;
    const std::int64_t gpus = estimator_.cluster().gpus;
    for (const int pp : pp_degrees(space, gpus, estimator_.layers())) {
      const std::int64_t group = gpus / pp;
      if (stage_strategies(static_cast<int>(group), space, heads_).empty()) continue;
      for (const int m : micro_batch_counts(batch, group, pp)) {
        Context ctx = context(space, pp, batch, m);
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

  // The batch sweep: a fixed B, or B = step, 2·step, ... until a B fits nowhere (Alg. 1 and 2).
  std::optional<Plan> sweep(const SpaceOptions& space, bool bmw, const std::string& method) {
    if (options_.global_batch > 0) return at_batch(space, options_.global_batch, bmw, method);
    std::optional<Plan> best;
    for (std::int64_t batch = options_.batch_step; batch <= options_.max_batch; batch += options_.batch_step) {
      std::optional<Plan> found = at_batch(space, batch, bmw, method);
      if (!found) break;
      keep_better(best, std::move(found));
    }
    return best;
  }

  [[nodiscard]] const SearchOptions& options() const noexcept { return options_; }

 private:
  AnalyticEstimator estimator_;
  SearchOptions options_;
  std::int64_t heads_;
  StageWorkspace work_;
};

}  // namespace detail

// Galvatron-Base (Alg. 1) over `space`: even partitions, every P and m, the batch sweep.
inline std::optional<Plan> search_base(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options,
                                       const std::string& method = "base") {
  detail::Searcher searcher(model, cluster, options);
  return searcher.sweep(options.space, false, method);
}

// The BMW partition search of one (B, P, m) over the options' space (for inspection and tests).
inline BalanceTrace balance_trace(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options,
                                  int pp, std::int64_t batch, int micro_batches) {
  detail::Searcher searcher(model, cluster, options);
  sluice::require(
      pp >= 1 && pp <= static_cast<int>(model.layers.size()) && cluster.gpus % pp == 0 && (pp & (pp - 1)) == 0,
      "balance: pp must be a power of 2 dividing the GPU count and <= layers, got ", pp);
  sluice::require(micro_batches >= 1 && batch >= 1 && batch % micro_batches == 0 &&
                      (batch / micro_batches) % (cluster.gpus / pp) == 0,
                  "balance: batch ", batch, " / micro_batches ", micro_batches,
                  " must be a whole multiple of the stage group ", cluster.gpus / pp);
  detail::Context context = searcher.context(options.space, pp, batch, micro_batches);
  return detail::balance_partition(context, static_cast<int>(model.layers.size()));
}

// Base, the baselines and BMW. Base keeps the best of its own search and the baselines' (those inside
// the options' space), BMW the best of its own and Base's, so BMW >= Base >= every such baseline. Raises
// sluice::infeasible when nothing in the space fits.
// `progress`, when given, is called after each of the searches (Base, every baseline, BMW) with the searches
// done and their number.
inline SearchReport search(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options,
                           const std::function<void(std::size_t done, std::size_t searches)>& progress = {}) {
  detail::Searcher searcher(model, cluster, options);
  SearchReport report;
  std::vector<std::pair<std::string, SpaceOptions>> spaces = baseline_spaces(cluster.gpus);
  const std::size_t searches = spaces.size() + 2;
  std::size_t done = 0;
  auto advance = [&] {
    if (progress) progress(++done, searches);
  };
  std::optional<Plan> base = searcher.sweep(options.space, false, "base");
  advance();
  for (auto& [name, space] : spaces) {
    space.max_tp = options.space.max_tp;
    Baseline baseline{name, searcher.sweep(space, false, name)};
    advance();
    // A baseline outside a restricted search space is compared, never adopted.
    if (baseline.plan && detail::within(*baseline.plan, options.space, model))
      detail::keep_better(base, baseline.plan);
    report.baselines.push_back(std::move(baseline));
  }
  report.base = base;
  std::optional<Plan> best = searcher.sweep(options.space, true, "bmw");
  advance();
  detail::keep_better(best, base);
  if (!best)
    throw infeasible(sluice::concat("search: no strategy fits ", model.name, " on the ", cluster.gpus,
                                    " GPUs of cluster ", cluster.name, " within ",
                                    detail::budget(options, cluster), " bytes per device"));
  report.best = std::move(*best);
  return report;
}

// Checks every invariant of a plan against the model, the cluster and the options it was searched with:
// the GPU count, PP degree and micro-batches, a contiguous partition of every layer, strategies from the
// stage's space, and every time and memory figure re-derived from the estimator (memory within budget).
inline void validate(const Plan& plan, const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options,
                     const SpaceOptions& space) {
  const PlanCheck check("search plan: ");
  const AnalyticEstimator estimator(model, cluster);
  const int layers = estimator.layers();
  if (plan.gpus != cluster.gpus) check.fail("gpus ", plan.gpus, " != cluster's ", cluster.gpus);
  const std::vector<int> degrees = detail::pp_degrees(space, cluster.gpus, layers);
  if (std::ranges::find(degrees, plan.pp) == degrees.end()) check.fail("pp ", plan.pp, " is not an allowed degree");
  const std::int64_t group = cluster.gpus / plan.pp;
  if (plan.global_batch < 1 || plan.micro_batches < 1 || plan.global_batch % plan.micro_batches != 0 ||
      (plan.global_batch / plan.micro_batches) % group != 0 || (plan.pp == 1 && plan.micro_batches != 1) ||
      (plan.pp > 1 && !detail::power_of_two(plan.global_batch / plan.micro_batches / group)))
    check.fail("global batch ", plan.global_batch, " and ", plan.micro_batches,
         " micro-batches: not a power-of-2 multiple of the stage group ", group, " per micro-batch");
  if (plan.stages.size() != static_cast<std::size_t>(plan.pp))
    check.fail(plan.stages.size(), " stages for pp ", plan.pp);
  const std::vector<LayerStrategy> allowed =
      stage_strategies(static_cast<int>(group), space, detail::heads_gcd(model));
  const std::int64_t micro_batch = plan.global_batch / plan.micro_batches;
  const double budget = static_cast<double>(detail::budget(options, cluster));
  int next = 0;
  double slowest = 0;
  double total = 0;
  for (int i = 0; i < plan.pp; ++i) {
    const StagePlan& stage = plan.stages[static_cast<std::size_t>(i)];
    if (stage.first_layer != next) check.fail("stage ", i, " starts at layer ", stage.first_layer, ", expected ", next);
    if (stage.strategies.empty()) check.fail("stage ", i, " has no layers");
    next += static_cast<int>(stage.strategies.size());
    if (next > layers) check.fail("the stages hold more than the model's ", layers, " layers");
    const double factor = detail::in_flight(options.schedule, i, plan.pp, plan.micro_batches);
    double sync = 0, nosync = 0, states = 0, forward = 0, peak = 0;
    for (std::size_t k = 0; k < stage.strategies.size(); ++k) {
      const LayerStrategy& strategy = stage.strategies[k];
      if (std::ranges::find(allowed, strategy) == allowed.end())
        check.fail("stage ", i, " layer ", stage.first_layer + static_cast<int>(k), ": strategy ", strategy.name(),
             " is not in the space of a ", group, "-GPU stage");
      const int layer = stage.first_layer + static_cast<int>(k);
      const LayerCost c = estimator.layer(layer, strategy, micro_batch);
      const double move = k > 0 ? estimator.transition(layer, stage.strategies[k - 1], strategy, micro_batch) : 0.0;
      sync += c.time_sync + move;
      nosync += c.time_nosync + move;
      states += c.state_bytes;
      forward += factor * c.forward_bytes;
      peak = std::max(peak, forward + c.backward_bytes);
    }
    if (i + 1 < plan.pp) {
      const double p2p = estimator.p2p(next - 1, group, micro_batch);
      sync += p2p;
      nosync += p2p;
    }
    const double memory = states + peak + estimator.stage_extra_bytes(i, plan.pp, group);
    if (!nearly_equal(memory, stage.memory_bytes))
      check.fail("stage ", i, ": memory ", stage.memory_bytes, " != ", memory);
    if (memory > budget * (1 + 1e-12)) check.fail("stage ", i, ": memory ", memory, " exceeds the budget ", budget);
    if (!nearly_equal(sync, stage.time_sync) || !nearly_equal(nosync, stage.time_nosync))
      check.fail("stage ", i, ": times ", stage.time_sync, "/", stage.time_nosync, " != ", sync, "/", nosync);
    slowest = std::max(slowest, nosync);
    total += sync;
  }
  if (next != layers) check.fail("the stages hold ", next, " of ", layers, " layers");
  const double iteration = (plan.micro_batches - 1) * slowest + total;
  if (!nearly_equal(iteration, plan.iteration_seconds))
    check.fail("iteration ", plan.iteration_seconds, " != Eq. 9's ", iteration);
  if (!nearly_equal(plan.throughput, static_cast<double>(plan.global_batch) / iteration))
    check.fail("throughput ", plan.throughput, " != B / C = ", static_cast<double>(plan.global_batch) / iteration);
}

// A report's plans, each against the space that produced it.
inline void validate(const SearchReport& report, const ModelSpec& model, const ClusterSpec& cluster,
                     const SearchOptions& options) {
  const auto spaces = baseline_spaces(cluster.gpus);
  auto space_of = [&](const Plan& plan) {
    for (auto [name, space] : spaces)
      if (name == plan.method) {
        space.max_tp = options.space.max_tp;
        return space;
      }
    return options.space;
  };
  validate(report.best, model, cluster, options, space_of(report.best));
  if (report.base) validate(*report.base, model, cluster, options, space_of(*report.base));
  for (const Baseline& baseline : report.baselines) {
    if (baseline.plan) validate(*baseline.plan, model, cluster, options, space_of(*baseline.plan));
    if (baseline.plan && detail::within(*baseline.plan, options.space, model) &&
        (!report.base || baseline.plan->throughput > report.base->throughput))
      throw invalid_plan(sluice::concat("search report: baseline ", baseline.name, " beats Base"));
  }
  if (report.base && report.base->throughput > report.best.throughput)
    throw invalid_plan("search report: Base beats BMW");
}

}  // namespace sluice::search
