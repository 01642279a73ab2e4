#pragma once
// sluice as Hydraulis runs it: candidates proposed before training (§7; here by sampled batches,
// proposal::propose_sampled, with the homogeneous strategies as a fallback), then every iteration each candidate
// dispatched and packed (two-stage assignment, §6) and its pipelines scheduled by the adaptive cyclic search
// (DynaPipe §5, 1F1B kept when faster); the candidate with the lowest simulated makespan plus pull and push (§5)
// is kept: the sluice plan every caller gets (plan::IterationPlanner).
#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/compare/detail/iterations.hpp"
#include "sluice/compare/flex_cp.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/proposal/propose.hpp"
#include "sluice/proposal/sampled.hpp"

namespace sluice::compare {

// sluice's candidates, or why there are none.
struct SluiceCandidates {
  std::vector<Strategy> strategies{};
  std::optional<std::string> failure{};  // set exactly when `strategies` is empty
};

// proposal::propose_sampled on the dataset (truncated to the context) for the context, the cluster and the token
// budget (the set of at most 8 strategies with the lowest mean planned time over sampled batches, from a pool
// seeded by the paper's DP), then every homogeneous strategy holding the context that the set left out; or
// nothing (with the reason) when no usable scheme holds the context. The homogeneous strategies give batches
// unlike the sampled ones a fallback, as the authors' code always adds its homogeneous layout.
inline SluiceCandidates propose_candidates(const Options& options, const data::LengthDataset& dataset) {
  proposal::ProposeOptions paper;
  paper.gpus = options.profile.gpus();
  paper.max_len = options.context;
  paper.tokens_per_iteration = static_cast<double>(options.tokens);
  paper.tp_within_node = !options.cross_node_tp;
  bool held = false;
  bool held_across_nodes = false;  // by a scheme whose TP crosses a node: --cross-node-tp would help
  for (const cost::SchemeCost& scheme : options.profile.schemes()) {
    if (scheme.max_len < options.context) continue;
    const bool within_node = scheme.scheme.tp() <= options.profile.spec().gpus_per_node;
    held = held || options.cross_node_tp || within_node;
    held_across_nodes = held_across_nodes || !within_node;
  }
  if (!held) {
    const char* const hint = held_across_nodes ? " with TP within a node (try --cross-node-tp)" : "";
    return {.failure = sluice::concat("no scheme of ", options.profile.name(), " on ", options.profile.gpus(),
                                      " GPUs holds ", options.context, " tokens", hint)};
  }
  proposal::SampledOptions sampling;
  sampling.paper = paper;
  sampling.seed = options.seed + 1;  // batches other than the simulated ones (drawn with options.seed)
  sampling.dispatch.seed = options.seed;
  const proposal::SampledProposal result = proposal::propose_sampled(dataset, options.profile, sampling);
  proposal::validate(result, options.profile);
  std::vector<Strategy> candidates = result.strategies();
  for (const Strategy& strategy : homogeneous_strategies(options, options.context))
    if (std::ranges::find(candidates, strategy) == candidates.end()) candidates.push_back(strategy);
  return {.strategies = std::move(candidates)};
}

// sluice's planner in a comparison: the comparison's dispatch and problem, the adaptive cyclic search seeded as
// the other systems' schedules are, the part of each candidate's pull and push that no overlap hides charged, the
// V step tried both ways.
inline plan::Options planner_options(const Options& options) {
  return {.dispatch = options.dispatch,
          .schedule = {.kind = schedule::ScheduleKind::cyclic, .seed = options.seed, .clusters = 0},
          .problem = options.problem,
          .layout_moves = plan::LayoutMoves::exposed,
          .v_step = plan::VStep::best};
}

// What the comparison's cluster allows the flex CP domains offered to sluice's plan.
inline plan::FlexScope flex_scope(const Options& options) {
  return {.context = options.context, .cross_node_tp = options.cross_node_tp, .links = options.links};
}

class Sluice {
public:
  // Chooses among `candidates` (not empty) every iteration. `chosen`, if given, gets every iteration's plan and
  // must outlive the system.
  Sluice(const Options& options, Span<const Strategy> candidates,
         std::vector<plan::SimulatedIteration>* chosen = nullptr)
      : flex_(plan::offered_flex_domains(options.profile, flex_scope(options), planner_options(options))),
        planner_(options.profile, std::vector<Strategy>(candidates.begin(), candidates.end()), planner_options(options),
                 flex_.domains),
        chosen_(chosen) {
    run_.name = name(System::sluice);
    std::string flex;
    if (flex_.domains) {
      flex = sluice::concat("; or, where faster, the fastest of ", flex_.names.size(), " flex CP domains (",
                            flex_.flexsp ? "FlexSP's under ZeRO-3; " : "",
                            "on each ⟨TP, PP⟩ base, dynamic CP's and CP groups of mixed degrees), groups re-formed ",
                            "per micro-batch");
    }
    run_.configuration =
        sluice::concat(candidates.size(), " candidates (proposed, and the homogeneous ",
                       "strategies holding the context); two-stage assignment, adaptive ",
                       "schedule; the fastest simulated candidate per iteration; pull and ",
                       "push beyond each strategy's own all-gather charged, less the ", "modelled overlap", flex);
    run_.strategies.assign(candidates.begin(), candidates.end());
    run_.layout_moves.assign(planner_.layout_moves().begin(), planner_.layout_moves().end());
  }

  // Plans every candidate on the next iteration and keeps the fastest simulated.
  void add(Span<const Sequence> batch) {
    plan::SimulatedIteration iteration = detail::sluice_iteration(planner_, flex_, batch, run_.iterations.size(), run_);
    if (chosen_) chosen_->push_back(std::move(iteration));
  }

  [[nodiscard]] SystemRun result() && { return std::move(run_); }
  [[nodiscard]] const plan::IterationPlanner& planner() const noexcept { return planner_; }

private:
  plan::OfferedFlex flex_;
  plan::IterationPlanner planner_;
  std::vector<plan::SimulatedIteration>* chosen_;
  SystemRun run_;
};

}  // namespace sluice::compare
