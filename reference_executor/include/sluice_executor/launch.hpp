#pragma once
// Where this process stands in a run of one process per rank, read from the environment its launcher set:
// Open MPI's mpirun (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK), PMI launchers such as MPICH's hydra and srun with
// PMI (PMI_RANK, PMI_SIZE, and MPI_LOCALRANKID or PMI_LOCAL_RANK), Slurm's srun (SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID) and torchrun (RANK, WORLD_SIZE, LOCAL_RANK), in that order of precedence.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#ifdef __linux__
#include <sched.h>
#endif

#include "sluice/core/error.hpp"

namespace sluice::executor {

struct LaunchEnvironment {
  int rank = 0;        // of the process among all of the run's
  int world = 1;       // processes in the run
  int local_rank = 0;  // among the processes on this node: which GPU it binds
  std::string launcher;
  friend bool operator==(const LaunchEnvironment&, const LaunchEnvironment&) = default;
};

// A variable's value, or nullptr when it is not set (std::getenv).
using EnvironmentLookup = std::function<const char*(const char*)>;

namespace detail {

inline std::optional<int> environment_integer(const EnvironmentLookup& lookup, const char* name, int minimum) {
  const char* text = lookup(name);
  if (text == nullptr) return std::nullopt;
  const std::string_view value(text);
  int number = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  sluice::require(error == std::errc() && end == value.data() + value.size() && number >= minimum,
                  "launch environment: ", name, " must be an integer >= ", minimum, ", got '", value, "'");
  return number;
}

}  // namespace detail

// The launcher's view of this process, or nullopt when no launcher set it (a plain single-process start). Raises
// invalid_input naming the variable when a value is malformed, or when the rank is not below the world size.
inline std::optional<LaunchEnvironment> launch_environment(const EnvironmentLookup& lookup = std::getenv) {
  struct Convention {
    const char* launcher;
    const char* rank;
    const char* world;
    const char* local_ranks[2];
  };
  static constexpr Convention conventions[] = {
      {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", {"OMPI_COMM_WORLD_LOCAL_RANK", nullptr}},
      {"PMI", "PMI_RANK", "PMI_SIZE", {"MPI_LOCALRANKID", "PMI_LOCAL_RANK"}},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", {"SLURM_LOCALID", nullptr}},
      {"torchrun", "RANK", "WORLD_SIZE", {"LOCAL_RANK", nullptr}},
  };
  for (const Convention& convention : conventions) {
    const std::optional<int> rank = detail::environment_integer(lookup, convention.rank, 0);
    const std::optional<int> world = detail::environment_integer(lookup, convention.world, 1);
    if (!rank && !world) continue;
    sluice::require(rank && world, "launch environment: ", convention.launcher, " sets ",
                    rank ? convention.rank : convention.world, " but not ", rank ? convention.world : convention.rank);
    sluice::require(*rank < *world, "launch environment: ", convention.rank, " is ", *rank, ", not below ",
                    convention.world, " = ", *world);
    std::optional<int> local;
    for (const char* name : convention.local_ranks)
      if (name != nullptr && !local) local = detail::environment_integer(lookup, name, 0);
    return LaunchEnvironment{*rank, *world, local.value_or(0), convention.launcher};
  }
  return std::nullopt;
}

// The CPUs the calling thread may run on: its affinity mask, which a launcher narrows when it binds processes
// (Open MPI binds each to one core when it starts at most two), not the machine's count that
// std::thread::hardware_concurrency gives; work spread over more threads than this only takes turns.
inline unsigned usable_cpus() noexcept {
#ifdef __linux__
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    return static_cast<unsigned>(std::max(1, CPU_COUNT(&allowed)));
#endif
  return std::max(1U, std::thread::hardware_concurrency());
}

}  // namespace sluice::executor
