#pragma once
// The options of DynaPipe's micro-batch partition DP (partition.hpp) and the limit on its run table.
#include <cstddef>
#include <limits>

#include "sluice/microbatch/types.hpp"

namespace sluice::microbatch {

// The run table holds one time per memory-feasible run, about n·w cells for n samples and micro-batches of up
// to w samples. Past this many (256 MiB of times) `partition` refuses the batch instead of allocating.
inline constexpr std::size_t max_run_table_cells = std::size_t{1} << 25;

struct PartitionOptions {
  int stages = 1;                                                 // c >= 1
  int replicas = 1;                                               // |D| >= 1
  double memory_limit = std::numeric_limits<double>::infinity();  // bytes per micro-batch, > 0 (may be +inf)
  Layout layout = Layout::padded;                                 // padded or packed
  double tmax_interval = 5e-6;                                    // seconds, >= 0; 0 = exact enumeration
};

}  // namespace sluice::microbatch
