#pragma once
// Vocabulary of the Galvatron search (search.hpp): its options, the plan it finds, and the trace of BMW's
// partition balancing.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/search/space.hpp"

namespace sluice::search {

enum class Schedule { one_f_one_b, gpipe };
inline constexpr NameTable<Schedule, 2> schedule_names{{{Schedule::one_f_one_b, "1f1b"}, {Schedule::gpipe, "gpipe"}}};

// Each search thread keeps its own DP buffers (tens of MB on a large budget).
inline constexpr int max_search_threads = 256;

struct SearchOptions {
  std::int64_t memory_bytes = 0;                // per-device budget E; 0 = the cluster's device memory
  std::int64_t granularity_bytes = 16LL << 20;  // memory step of the layer DP
  std::int64_t global_batch = 0;                // fixed B; 0 = sweep B = step, 2·step, ... while some plan fits
  std::int64_t batch_step = 8;
  std::int64_t max_batch = 1024;
  Schedule schedule = Schedule::one_f_one_b;
  SpaceOptions space{};
  int threads = 1;  // batches of the sweep searched side by side; the result does not depend on it
};

// The checks that need neither model nor cluster; the search makes them with the cluster's.
inline void require_valid(const SpaceOptions& space) {
  sluice::require(space.max_tp >= 0, "search: space.max_tp must be >= 0, got ", space.max_tp);
  sluice::require(space.max_pp >= 0, "search: space.max_pp must be >= 0, got ", space.max_pp);
}

inline void require_valid(const SearchOptions& options) {
  sluice::require(options.memory_bytes >= 0, "search: memory_bytes must be >= 0, got ", options.memory_bytes);
  sluice::require(options.granularity_bytes >= 1, "search: granularity_bytes must be >= 1, got ",
                  options.granularity_bytes);
  sluice::require(options.global_batch >= 0, "search: global_batch must be >= 0, got ", options.global_batch);
  sluice::require(options.batch_step >= 1, "search: batch_step must be >= 1, got ", options.batch_step);
  sluice::require(options.max_batch >= options.batch_step && options.max_batch <= (1 << 24),
                  "search: max_batch must be in [batch_step, 2^24], got ", options.max_batch);
  sluice::require(options.threads >= 1 && options.threads <= max_search_threads, "search: threads must be in [1, ",
                  max_search_threads, "], got ", options.threads);
  require_valid(options.space);
}

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
  // The embedding's and the LM head's strategy on their stages (never checkpointed); unset: search::evaluate picks
  // the fastest of the space.
  std::optional<LayerStrategy> vocabulary{};
  friend bool operator==(const Plan&, const Plan&) = default;

  [[nodiscard]] std::vector<int> partition() const {
    std::vector<int> sizes;
    for (const StagePlan& stage : stages) sizes.push_back(static_cast<int>(stage.strategies.size()));
    return sizes;
  }
};

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

}  // namespace sluice::search
