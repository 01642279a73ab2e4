#pragma once
// The layer DP of one pipeline stage (Galvatron-BMW Eq. 4, Algorithm 3). The state holds the previous
// layer's strategy (R needs it) and the forward memory used so far, discretised at a granularity:
//   f[l][e][s] = c(l,s) + min_{s'} f[l−1][e − w(l,s)][s'] + R(l, s', s),   w = ⌈(O_f + O_ms) / gran⌉.
// R depends on s' only through its activation layout, so the min runs over K layouts (O(E·(K² + S))
// per layer, not O(E·S²)). One table serves every budget e; each e's plan is backtracked and checked
// against Eq. 2's exact peak, and the cheapest plan that fits wins (a full scan: Alg. 3's early break
// assumes a monotonicity that does not hold).
// `solve_stage_exact` solves the same problem without discretisation, by Pareto labels; tests use it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"

namespace sluice::search {

// Per-layer costs of one stage, flat [layer·strategies + strategy]. `forward_bytes` already counts the
// in-flight micro-batches. transition[(layer·layouts + from)·layouts + to] is R into `layer` (layer 0's
// entries are ignored: a stage's first layer pays none).
struct StageProblem {
  int layers = 0;
  int strategies = 0;
  int layouts = 1;
  std::vector<int> layout;  // per strategy
  std::vector<double> forward_bytes;
  std::vector<double> backward_bytes;
  std::vector<double> state_bytes;
  std::vector<double> time;
  std::vector<double> transition;
  double budget = 0;  // bytes available to the layers (Eq. 2's E_all must not exceed it)

  [[nodiscard]] std::size_t at(int layer, int strategy) const noexcept {
    return static_cast<std::size_t>(layer) * static_cast<std::size_t>(strategies) + static_cast<std::size_t>(strategy);
  }
  [[nodiscard]] double move(int layer, int from, int to) const noexcept {
    const auto k = static_cast<std::size_t>(layouts);
    return transition[(static_cast<std::size_t>(layer) * k +
                       static_cast<std::size_t>(layout[static_cast<std::size_t>(from)])) *
                          k +
                      static_cast<std::size_t>(layout[static_cast<std::size_t>(to)])];
  }
};

// Raises invalid_input unless the sizes are in range, the layout ids index the layouts and every table has a
// finite entry per layer and strategy.
inline void require_valid(const StageProblem& problem) {
  sluice::require(problem.layers >= 1, "stage problem: layers must be >= 1, got ", problem.layers);
  sluice::require(problem.strategies >= 1 && problem.strategies <= 65535,
                  "stage problem: strategies must be in [1, 65535], got ", problem.strategies);
  sluice::require(problem.layouts >= 1 && problem.layouts <= problem.strategies,
                  "stage problem: layouts must be in [1, strategies], got ", problem.layouts);
  const auto cells = static_cast<std::size_t>(problem.layers) * static_cast<std::size_t>(problem.strategies);
  sluice::require(problem.layout.size() == static_cast<std::size_t>(problem.strategies), "stage problem: layout has ",
                  problem.layout.size(), " entries, expected ", problem.strategies);
  for (const int k : problem.layout)
    sluice::require(k >= 0 && k < problem.layouts, "stage problem: layout id ", k, " out of range");
  for (const auto* table : {&problem.forward_bytes, &problem.backward_bytes, &problem.state_bytes, &problem.time}) {
    sluice::require(table->size() == cells, "stage problem: a cost table has ", table->size(), " entries, expected ",
                    cells);
    for (const double value : *table)
      sluice::require(std::isfinite(value) && value >= 0, "stage problem: costs must be finite and >= 0, got ", value);
  }
  sluice::require(problem.transition.size() == static_cast<std::size_t>(problem.layers) *
                                                   static_cast<std::size_t>(problem.layouts * problem.layouts),
                  "stage problem: transition has ", problem.transition.size(), " entries");
  for (const double value : problem.transition)
    sluice::require(std::isfinite(value) && value >= 0, "stage problem: transitions must be finite and >= 0, got ",
                    value);
  sluice::require(std::isfinite(problem.budget), "stage problem: budget must be finite, got ", problem.budget);
}

struct StageSolution {
  bool feasible = false;
  double time = std::numeric_limits<double>::infinity();
  double memory = 0;        // Eq. 2's E_all of the plan, bytes
  std::vector<int> choice;  // strategy per layer
};

// Σ c + Σ R of a plan.
inline double plan_time(const StageProblem& problem, const std::vector<int>& choice) {
  double total = 0;
  for (int l = 0; l < problem.layers; ++l) {
    const int s = choice[static_cast<std::size_t>(l)];
    total += problem.time[problem.at(l, s)];
    if (l > 0) total += problem.move(l, choice[static_cast<std::size_t>(l - 1)], s);
  }
  return total;
}

// Eq. 2: E_all = Σ_k O_ms + max_i (Σ_{k<=i} O_f + O_b(i)).
inline double plan_memory(const StageProblem& problem, const std::vector<int>& choice) {
  double states = 0;
  double forward = 0;
  double peak = 0;
  for (int l = 0; l < problem.layers; ++l) {
    const std::size_t cell = problem.at(l, choice[static_cast<std::size_t>(l)]);
    states += problem.state_bytes[cell];
    forward += problem.forward_bytes[cell];
    peak = std::max(peak, forward + problem.backward_bytes[cell]);
  }
  return states + peak;
}

// Buffers of the discretised DP, kept across calls so that a search allocates them once.
class StageWorkspace {
public:
  std::vector<double> current;
  std::vector<double> previous;
  std::vector<double> by_layout;
  std::vector<int> by_layout_arg;
  std::vector<double> into;
  std::vector<int> into_arg;
  std::vector<std::uint16_t> predecessor;
  std::vector<std::int32_t> weight;

  void reserve(std::size_t units, std::size_t layers, std::size_t strategies, std::size_t layouts) {
    grow(current, units * strategies);
    grow(previous, units * strategies);
    grow(by_layout, units * layouts);
    grow(by_layout_arg, units * layouts);
    grow(into, units * layouts);
    grow(into_arg, units * layouts);
    grow(predecessor, layers * units * strategies);
    grow(weight, layers * strategies);
  }

private:
  template <class T>
  static void grow(std::vector<T>& buffer, std::size_t size) {
    if (buffer.size() < size) buffer.resize(size);
  }
};

inline constexpr std::int64_t max_memory_units = std::int64_t{1} << 20;

namespace detail {

// The DP's memory axis: budget / granularity units, refused when the tables would not fit.
inline int memory_units(const StageProblem& problem, double budget, double granularity) {
  const double units_real = std::floor(budget / granularity);
  sluice::require(units_real <= static_cast<double>(max_memory_units), "layer DP: budget / granularity = ", units_real,
                  " exceeds ", max_memory_units, " units (use a coarser granularity)");
  const int units = static_cast<int>(units_real);
  const auto width = static_cast<std::size_t>(units) + 1;
  const auto S = static_cast<std::size_t>(problem.strategies);
  sluice::require(width * static_cast<std::size_t>(problem.layers) * S <= (std::size_t{1} << 28), "layer DP: ", width,
                  " memory units x ", problem.layers, " layers x ", S,
                  " strategies exceed the 2^28-entry backtracking table", " (use a coarser granularity)");
  return units;
}

// w(l,s) in units (units + 1 when it can never fit); returns max O_b, which Alg. 3's unchecked bound needs.
inline double fill_weights(const StageProblem& problem, double granularity, int units, StageWorkspace& work) {
  double backward_peak = 0;
  for (int l = 0; l < problem.layers; ++l)
    for (int s = 0; s < problem.strategies; ++s) {
      const std::size_t cell = problem.at(l, s);
      backward_peak = std::max(backward_peak, problem.backward_bytes[cell]);
      const double w = std::ceil((problem.forward_bytes[cell] + problem.state_bytes[cell]) / granularity);
      work.weight[cell] = w > units ? units + 1 : static_cast<std::int32_t>(w);
    }
  return backward_peak;
}

// f[0][e][s]: the first layer pays no transition.
inline void first_layer(const StageProblem& problem, std::size_t width, const StageWorkspace& work, double* table) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const auto S = static_cast<std::size_t>(problem.strategies);
  for (std::size_t e = 0; e < width; ++e)
    for (std::size_t s = 0; s < S; ++s) {
      const std::int32_t w = work.weight[s];
      table[e * S + s] = static_cast<std::int32_t>(e) >= w ? problem.time[s] : inf;
    }
}

// The cheapest previous strategy of each layout, then the cheapest way into each layout of layer l (with R).
inline void best_into_layouts(const StageProblem& problem, int l, std::size_t width, const double* previous,
                              StageWorkspace& work) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const auto S = static_cast<std::size_t>(problem.strategies);
  const auto K = static_cast<std::size_t>(problem.layouts);
  double* by_layout = work.by_layout.data();
  int* by_layout_arg = work.by_layout_arg.data();
  for (std::size_t e = 0; e < width; ++e) {
    double* row = by_layout + e * K;
    int* arg = by_layout_arg + e * K;
    std::fill(row, row + K, inf);
    std::fill(arg, arg + K, -1);
    const double* values = previous + e * S;
    for (std::size_t s = 0; s < S; ++s) {
      const auto k = static_cast<std::size_t>(problem.layout[s]);
      if (values[s] < row[k]) {
        row[k] = values[s];
        arg[k] = static_cast<int>(s);
      }
    }
  }
  const double* moves = problem.transition.data() + static_cast<std::size_t>(l) * K * K;
  for (std::size_t e = 0; e < width; ++e) {
    const double* row = by_layout + e * K;
    const int* arg = by_layout_arg + e * K;
    for (std::size_t to = 0; to < K; ++to) {
      double best = inf;
      int best_arg = -1;
      for (std::size_t from = 0; from < K; ++from) {
        const double value = row[from] + moves[from * K + to];
        if (value < best) {
          best = value;
          best_arg = arg[from];
        }
      }
      work.into[e * K + to] = best;
      work.into_arg[e * K + to] = best_arg;
    }
  }
}

// f[l][e][s] = c(l,s) + (the cheapest way into s's layout at e − w(l,s)), and its predecessor for backtracking.
inline void relax_layer(const StageProblem& problem, int l, std::size_t width, StageWorkspace& work, double* current) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const auto S = static_cast<std::size_t>(problem.strategies);
  const auto K = static_cast<std::size_t>(problem.layouts);
  const double* into = work.into.data();
  const int* into_arg = work.into_arg.data();
  const std::int32_t* weights = work.weight.data() + static_cast<std::size_t>(l) * S;
  const double* times = problem.time.data() + static_cast<std::size_t>(l) * S;
  std::uint16_t* predecessor = work.predecessor.data() + static_cast<std::size_t>(l) * width * S;
  for (std::size_t e = 0; e < width; ++e)
    for (std::size_t s = 0; s < S; ++s) {
      const std::int32_t w = weights[s];
      double value = inf;
      std::uint16_t from = 0;
      if (static_cast<std::int32_t>(e) >= w) {
        const std::size_t cell = (e - static_cast<std::size_t>(w)) * K + static_cast<std::size_t>(problem.layout[s]);
        if (into[cell] < inf) {
          value = into[cell] + times[s];
          from = static_cast<std::uint16_t>(into_arg[cell]);
        }
      }
      current[e * S + s] = value;
      predecessor[e * S + s] = from;
    }
}

// Backtracks each memory e's cheapest plan from the last layer's table (`width` entries per layer), e up to
// `budget`, and keeps the cheapest that fits Eq. 2. Alg. 3: every plan whose forward memory fits E − max O_b is
// feasible without a check.
inline StageSolution best_feasible(const StageProblem& problem, double budget, double granularity, std::size_t width,
                                   double backward_peak, const StageWorkspace& work, const double* last_layer) {
  const int layers = problem.layers;
  const auto S = static_cast<std::size_t>(problem.strategies);
  const double unchecked = std::floor((budget - backward_peak) / granularity);
  StageSolution solution;
  if (budget < 0) return solution;
  const auto scanned = std::min(width, static_cast<std::size_t>(std::floor(budget / granularity)) + 1);
  std::vector<int> choice(static_cast<std::size_t>(layers));
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t e = 0; e < scanned; ++e) {
    const double* values = last_layer + e * S;
    std::size_t last = 0;
    for (std::size_t s = 1; s < S; ++s)
      if (values[s] < values[last]) last = s;
    if (!(values[last] < best)) continue;
    choice[static_cast<std::size_t>(layers - 1)] = static_cast<int>(last);
    std::size_t remaining = e;
    for (int l = layers - 1; l > 0; --l) {
      const auto s = static_cast<std::size_t>(choice[static_cast<std::size_t>(l)]);
      const std::uint16_t from = work.predecessor[(static_cast<std::size_t>(l) * width + remaining) * S + s];
      remaining -= static_cast<std::size_t>(work.weight[static_cast<std::size_t>(l) * S + s]);
      choice[static_cast<std::size_t>(l - 1)] = from;
    }
    const double memory = plan_memory(problem, choice);
    if (static_cast<double>(e) > unchecked && memory > budget) continue;
    best = values[last];
    solution.feasible = true;
    solution.memory = memory;
    solution.choice = choice;
  }
  if (solution.feasible) solution.time = plan_time(problem, solution.choice);
  return solution;
}

}  // namespace detail

// The layer DP for each of `budgets` (problem.budget unused): one table at the largest serves them all, and each
// budget's plan is the one a DP at that budget alone would find.
inline std::vector<StageSolution> solve_stage(const StageProblem& problem, const std::vector<double>& budgets,
                                              double granularity, StageWorkspace& work) {
  sluice::require(std::isfinite(granularity) && granularity >= 1, "layer DP: granularity must be >= 1 byte, got ",
                  granularity);
  sluice::require(!budgets.empty(), "layer DP: no budget");
  for (const double budget : budgets)
    sluice::require(std::isfinite(budget), "stage problem: budget must be finite, got ", budget);
  require_valid(problem);
  std::vector<StageSolution> out(budgets.size());
  const double largest = *std::ranges::max_element(budgets);
  if (largest < 0) return out;
  const int units = detail::memory_units(problem, largest, granularity);
  const auto width = static_cast<std::size_t>(units) + 1;
  work.reserve(width, static_cast<std::size_t>(problem.layers), static_cast<std::size_t>(problem.strategies),
               static_cast<std::size_t>(problem.layouts));
  const double backward_peak = detail::fill_weights(problem, granularity, units, work);
  double* previous = work.previous.data();
  double* current = work.current.data();
  detail::first_layer(problem, width, work, previous);
  for (int l = 1; l < problem.layers; ++l) {
    detail::best_into_layouts(problem, l, width, previous, work);
    detail::relax_layer(problem, l, width, work, current);
    std::swap(previous, current);
  }
  for (std::size_t i = 0; i < budgets.size(); ++i)
    out[i] = detail::best_feasible(problem, budgets[i], granularity, width, backward_peak, work, previous);
  return out;
}

inline StageSolution solve_stage(const StageProblem& problem, double granularity, StageWorkspace& work) {
  return std::move(solve_stage(problem, std::vector<double>{problem.budget}, granularity, work).front());
}

// The exact optimum of min Σ c + Σ R subject to Eq. 2's E_all <= budget: labels (Σ O_f, Σ O_ms, peak so
// far, time) per last strategy, dominated labels dropped. Exponential in the worst case; for checks.
inline StageSolution solve_stage_exact(const StageProblem& problem) {
  require_valid(problem);
  struct Label {
    double forward, states, peak, time;
    int strategy;
    int parent;  // index in the previous layer's labels
  };
  auto dominated = [](const Label& a, const Label& b) {  // b dominates a
    return b.strategy == a.strategy && b.forward <= a.forward && b.states <= a.states && b.peak <= a.peak &&
           b.time <= a.time;
  };
  std::vector<std::vector<Label>> layers(static_cast<std::size_t>(problem.layers));
  for (int l = 0; l < problem.layers; ++l) {
    std::vector<Label> candidates;
    const std::size_t count = l == 0 ? 1 : layers[static_cast<std::size_t>(l - 1)].size();
    for (std::size_t p = 0; p < count; ++p)
      for (int s = 0; s < problem.strategies; ++s) {
        const std::size_t cell = problem.at(l, s);
        Label label{problem.forward_bytes[cell], problem.state_bytes[cell], 0, problem.time[cell], s, -1};
        if (l > 0) {
          const Label& parent = layers[static_cast<std::size_t>(l - 1)][p];
          label.forward += parent.forward;
          label.states += parent.states;
          label.peak = parent.peak;
          label.time += parent.time + problem.move(l, parent.strategy, s);
          label.parent = static_cast<int>(p);
        }
        label.peak = std::max(label.peak, label.forward + problem.backward_bytes[cell]);
        // The final peak is at least this one and at least the forward total: prune what cannot fit.
        if (label.states + std::max(label.peak, label.forward) > problem.budget) continue;
        candidates.push_back(label);
      }
    std::vector<Label>& kept = layers[static_cast<std::size_t>(l)];
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      bool drop = false;
      for (std::size_t j = 0; j < candidates.size() && !drop; ++j) {
        if (i == j || !dominated(candidates[i], candidates[j])) continue;
        // Of equal labels keep the first.
        drop = !dominated(candidates[j], candidates[i]) || j < i;
      }
      if (!drop) kept.push_back(candidates[i]);
    }
  }
  StageSolution solution;
  const std::vector<Label>& last = layers.back();
  int best = -1;
  for (std::size_t i = 0; i < last.size(); ++i)
    if (best < 0 || last[i].time < last[static_cast<std::size_t>(best)].time) best = static_cast<int>(i);
  if (best < 0) return solution;
  solution.feasible = true;
  solution.time = last[static_cast<std::size_t>(best)].time;
  solution.memory = last[static_cast<std::size_t>(best)].states + last[static_cast<std::size_t>(best)].peak;
  solution.choice.assign(static_cast<std::size_t>(problem.layers), 0);
  int index = best;
  for (int l = problem.layers - 1; l >= 0; --l) {
    const Label& label = layers[static_cast<std::size_t>(l)][static_cast<std::size_t>(index)];
    solution.choice[static_cast<std::size_t>(l)] = label.strategy;
    index = label.parent;
  }
  return solution;
}

}  // namespace sluice::search
