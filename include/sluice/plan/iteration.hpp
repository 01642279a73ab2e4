#pragma once
// The sluice plan of one iteration, the one every caller gets: `sluice plan`, `sluice trace`, the comparison's
// sluice system (`sluice simulate`), the Planner a trainer runs ahead of training, Python and the reference
// executor. Hydraulis §6's two-stage assignment of the batch to each candidate strategy (dispatch, then packing),
// every candidate's pipelines scheduled (DynaPipe §5's adaptive cyclic search by default), each candidate charged
// its parameter pull and gradient push as the LayoutMoves policy says, and the candidate with the lowest simulated
// makespan plus that charge kept (plan::plan_simulated_iteration). The dispatch may charge the V step (packing's
// 1F1B estimate) or not (closer to a schedule that overlaps unequal micro-batches); VStep::best tries both and
// keeps the faster simulated plan.
#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/assign/dispatch.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/plan/layout_moves.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/problems.hpp"
#include "sluice/shard/model.hpp"

namespace sluice::plan {

// Whether the dispatch charges the V step (assign::DispatchOptions::v_step).
enum class VStep {
  best,  // dispatch both ways, keep the plan with the lower simulated total (ties to charging it)
  on,
  off,
};

inline constexpr NameTable<VStep, 3> v_step_names{{{VStep::best, "best"}, {VStep::on, "on"}, {VStep::off, "off"}}};

constexpr std::string_view name(VStep v_step) { return name_in(v_step_names, v_step); }

// Raises invalid_input naming `what` unless `text` is one of the names.
inline VStep v_step_from(std::string_view text, std::string_view what = "V step") {
  return value_in(v_step_names, text, what);
}

struct Options {
  assign::DispatchOptions dispatch{};    // trials, threads, seed, local search; its v_step is set by `v_step`
  schedule::ScheduleOptions schedule{};  // how each pipeline is scheduled (cyclic search, or 1F1B)
  schedule::ProblemOptions problem{};    // hidden size and stage-to-stage link of every simulated pipeline
  LayoutMoves layout_moves = LayoutMoves::exposed;
  VStep v_step = VStep::best;
  friend bool operator==(const Options&, const Options&) = default;
};

// Domains whose replicas re-form CP groups per micro-batch (plan::FlexDomain and plan::FlexDomains,
// plan/flex_domain.hpp), offered beside the candidates: an interface, so that planning without one parses no flex
// CP solver.
class FlexAlternative {
public:
  virtual ~FlexAlternative() = default;
  // Raises invalid_input when no group of the domain holds a sequence of `batch`.
  [[nodiscard]] virtual plan::FlexIteration plan(Span<const Sequence> batch) const = 0;
  // Raises invalid_plan unless `iteration` is a valid plan of `batch` on this domain, timed as its groups take.
  virtual void validate(const plan::FlexIteration& iteration, Span<const Sequence> batch) const = 0;
  // Whether the domain's groups hold every sequence of `batch`.
  [[nodiscard]] virtual bool holds(Span<const Sequence> batch) const = 0;
};

// Plans iterations over fixed candidates: the candidates' layout moves are computed once, here.
class IterationPlanner {
public:
  // Raises invalid_input on no candidates or bad options. `flex`, if given, is planned beside the candidates on
  // every batch it holds, and runs where its total (its groups' time plus its own charge) is below the kept
  // candidate's (SimulatedIteration::runs_flex).
  IterationPlanner(cost::Profile profile, std::vector<Strategy> candidates, Options options = {},
                   std::shared_ptr<const FlexAlternative> flex = nullptr)
      : profile_(std::move(profile)), candidates_(std::move(candidates)), options_(options), flex_(std::move(flex)) {
    sluice::require(!candidates_.empty(), "plan: no candidate strategies");
    assign::require_valid(options_.dispatch);
    schedule::require_valid(options_.problem);
    if (options_.layout_moves == LayoutMoves::none) return;
    moves_ = layout_move_seconds(profile_, candidates_);
    const int layers = shard::llama_like(profile_.spec().model).layers;
    for (const double move : moves_) overheads_.push_back(charged_layout_move(options_.layout_moves, move, layers));
  }

  // The kept candidate's plan and schedule. Raises invalid_input as assign::plan_iteration does (an empty batch,
  // a sequence no candidate holds) and infeasible when no schedule fits a pipeline's memory.
  [[nodiscard]] plan::SimulatedIteration plan(Span<const Sequence> batch) const {
    assign::PlanOptions plan_options{.dispatch = options_.dispatch, .candidate_overhead = overheads_};
    std::optional<plan::SimulatedIteration> kept;
    for (const bool v_step : {true, false}) {
      if ((options_.v_step == VStep::on && !v_step) || (options_.v_step == VStep::off && v_step)) continue;
      plan_options.dispatch.v_step = v_step;
      plan::SimulatedIteration candidate = plan::plan_simulated_iteration(batch, candidates_, profile_, plan_options,
                                                                          options_.schedule, options_.problem);
      if (!kept || candidate.total() < kept->total()) kept = std::move(candidate);
    }
    if (flex_ && flex_->holds(batch)) kept->flex = flex_->plan(batch);
    return *std::move(kept);
  }

  // Raises invalid_plan unless `iteration` is a valid plan of `batch` over the candidates, charged as planned,
  // with no candidate simulating faster.
  void validate(const plan::SimulatedIteration& iteration, Span<const Sequence> batch) const {
    const assign::PlanOptions plan_options{.dispatch = options_.dispatch, .candidate_overhead = overheads_};
    plan::validate(iteration, batch, candidates_, profile_, plan_options, options_.problem);
    const bool planned = flex_ && flex_->holds(batch);
    const PlanCheck check("simulated iteration: ");
    check(iteration.flex.has_value() == planned,
          planned ? "lacks the flex CP domain's plan" : "has a flex CP plan, and the planner offers no flex CP domain");
    if (planned) flex_->validate(*iteration.flex, batch);
  }

  [[nodiscard]] const cost::Profile& profile() const noexcept { return profile_; }
  [[nodiscard]] Span<const Strategy> candidates() const noexcept { return candidates_; }
  [[nodiscard]] const Options& options() const noexcept { return options_; }
  [[nodiscard]] const FlexAlternative* flex() const noexcept { return flex_.get(); }
  // Per candidate, its pull and push beyond its own layout's all-gather, before any overlap; empty when the
  // policy is none.
  [[nodiscard]] Span<const double> layout_moves() const noexcept { return moves_; }
  // Per candidate, what its plans are charged for it (assign::PlanOptions::candidate_overhead); empty for none.
  [[nodiscard]] Span<const double> charged() const noexcept { return overheads_; }

private:
  cost::Profile profile_;
  std::vector<Strategy> candidates_;
  Options options_;
  std::shared_ptr<const FlexAlternative> flex_;
  std::vector<double> moves_;
  std::vector<double> overheads_;
};

}  // namespace sluice::plan
