#pragma once
// What every compared system is given (Hydraulis §8's setting: the same cluster, batches and cost model for
// every system), the systems' names, and the progress callback of long comparisons.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "sluice/assign/dispatch.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/links.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/microbatch/types.hpp"
#include "sluice/proposal/homogeneous.hpp"
#include "sluice/schedule/problems.hpp"

namespace sluice::compare {

struct Options {
  cost::Profile profile;               // resolved for the cluster: every system uses all profile.gpus() GPUs at most
  std::int64_t context = 0;            // the batches' sequences are at most this long; every system must hold it
  std::int64_t tokens = 0;             // per iteration (the proposal's normalisation)
  bool cross_node_tp = false;          // allow schemes whose TP exceeds a node, for every system alike
  schedule::ProblemOptions problem{};  // hidden size and stage-to-stage link of every simulated pipeline
  assign::DispatchOptions dispatch{};  // sluice's dispatch (trials, seed, threads)
  std::uint64_t seed = 0;              // the schedule search's k-means seed
  // The shape DynaPipe's micro-batches are charged for: padded, as DynaPipe runs them; packed, as the reference
  // executor runs every micro-batch.
  microbatch::Layout dynapipe_layout = microbatch::Layout::padded;
  cost::Links links{};  // what ZeRO-3's collectives run on (DeepSpeed, FlexSP)
};

// The homogeneous strategies every GPU of `options`' cluster runs that hold `length` tokens, of the schemes
// `admits` takes (all by default).
template <class Admits = bool (*)(const Scheme&)>
std::vector<Strategy> homogeneous_strategies(
    const Options& options, std::int64_t length, Admits admits = [](const Scheme&) { return true; }) {
  std::vector<Strategy> strategies =
      proposal::homogeneous_strategies(options.profile, {.holds = length, .tp_within_node = !options.cross_node_tp});
  std::erase_if(strategies, [&](const Strategy& strategy) { return !admits(strategy.parts().front().scheme); });
  return strategies;
}

// The schemes Megatron-LM runs: ⟨TP, PP⟩ as the Hydraulis paper configured it, and with its context parallelism,
// ring attention with the causal load balance (and either with full recomputation where the space allows it).
inline bool megatron_scheme(const Scheme& scheme) { return scheme.cp() == 1; }
inline bool megatron_cp_scheme(const Scheme& scheme) { return scheme.cp() == 1 || scheme.cp_kind() == CpKind::ring; }

// The compared systems, in the order reports list them.
enum class System { megatron, megatron_cp, deepspeed, dynamic_cp, flexsp, hotspa, dynapipe, sluice };
inline constexpr std::array<System, 8> all_systems = {System::megatron,   System::megatron_cp, System::deepspeed,
                                                      System::dynamic_cp, System::flexsp,      System::hotspa,
                                                      System::dynapipe,   System::sluice};

// The stable name of a system: JSON documents, picture files and tables use it.
inline constexpr NameTable<System, 8> system_names{{{System::megatron, "megatron"},
                                                    {System::megatron_cp, "megatron_cp"},
                                                    {System::deepspeed, "deepspeed"},
                                                    {System::dynamic_cp, "dynamic_cp"},
                                                    {System::flexsp, "flexsp"},
                                                    {System::hotspa, "hotspa"},
                                                    {System::dynapipe, "dynapipe"},
                                                    {System::sluice, "sluice"}}};

constexpr std::string_view name(System system) { return name_in(system_names, system); }

// One value per system, looked up by the system's name; iterated in all_systems' order.
template <class T>
struct BySystem {
  std::array<T, all_systems.size()> values;
  T& operator[](System system) { return values[static_cast<std::size_t>(system)]; }
  const T& operator[](System system) const { return values[static_cast<std::size_t>(system)]; }
  auto begin() { return values.begin(); }
  auto end() { return values.end(); }
  auto begin() const { return values.begin(); }
  auto end() const { return values.end(); }
  friend bool operator==(const BySystem&, const BySystem&) = default;
};

// Called after every iteration with the iterations done and the iterations asked for. Empty: nobody is told.
using Progress = std::function<void(std::size_t iterations_done, std::size_t iterations)>;

}  // namespace sluice::compare
