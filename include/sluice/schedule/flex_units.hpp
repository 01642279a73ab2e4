#pragma once
// The instruction lists of a flex CP plan on a domain (plan::FlexIteration's `plan`, `strategy` and `schemes`): every
// unit of the domain (a replica of its ⟨TP, PP⟩ scheme) runs the plan's micro-batches it takes part in, in the plan's
// order, scheduled as one 1F1B pipeline of all of them with the unit's absent ones removed, so that the units of a CP
// group meet at each of its passes in the same order (a 1F1B of a unit's own micro-batches would interleave them
// otherwise). The timeline is that pipeline's, whose iteration is the plan's Σ T_m + (PP − 1)·max T_m.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "sluice/assign/flex_cp_problem.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/problems.hpp"

namespace sluice::schedule {

// The plan with only the micro-batches `kept` (ascending), renumbered in that order, and as many slots as they use.
inline ExecutionPlan restrict_plan(const ExecutionPlan& plan, Span<const int> kept) {
  std::vector<int> renumbered(static_cast<std::size_t>(plan.micro_batches), -1);
  for (std::size_t k = 0; k < kept.size(); ++k) renumbered[static_cast<std::size_t>(kept[k])] = static_cast<int>(k);
  ExecutionPlan result{plan.stages, static_cast<int>(kept.size()), 0, {}};
  for (const std::vector<Instruction>& list : plan.ranks) {
    std::vector<Instruction>& restricted = result.ranks.emplace_back();
    for (Instruction in : list) {
      const int micro_batch = renumbered[static_cast<std::size_t>(in.micro_batch)];
      if (micro_batch < 0) continue;
      in.micro_batch = micro_batch;
      result.buffer_slots = std::max({result.buffer_slots, in.buffer + 1, in.output + 1});
      restricted.push_back(in);
    }
  }
  return result;
}

struct FlexUnits {
  PipelineSchedule schedule;           // one 1F1B pipeline of every micro-batch of the plan
  std::vector<std::vector<int>> kept;  // per unit, the plan's micro-batches it takes part in, ascending
};

// `problem`: the batch's flex CP problem on the iteration's domain (plan::FlexDomain::problem_of); micro-batch m
// lasts its slowest group (on the stages before the last, its slowest group less the degree's last-stage work), and
// carries its tokens for the activation shapes (`options.hidden`).
inline FlexUnits flex_units(const assign::FlexCpPlan& plan, const Strategy& strategy, Span<const Scheme> schemes,
                            const assign::FlexCpProblem& problem, const ProblemOptions& options = {}) {
  assign::validate(plan, problem);
  sluice::require(strategy.parts().size() == 1 && schemes.size() == problem.degrees.size(),
                  "flex units: the flex CP iteration's strategy ", strategy.name(),
                  " is not one domain of its degrees");
  const Scheme base = strategy.parts().front().scheme;
  const int units = strategy.parts().front().pipelines;
  sluice::require(units == problem.units && base.pp() == problem.pp, "flex units: the flex CP iteration runs ",
                  strategy.name(), ", its problem ", problem.units, " units of PP ", problem.pp);
  Problem whole = detail::empty_problem(base.pp(), std::numeric_limits<double>::infinity(), options);
  FlexUnits result{{}, std::vector<std::vector<int>>(static_cast<std::size_t>(units))};
  for (std::size_t m = 0; m < plan.micro_batches.size(); ++m) {
    const assign::FlexCpMicroBatch& micro_batch = plan.micro_batches[m];
    std::int64_t tokens = 0;
    for (const assign::FlexCpGroup& group : micro_batch.groups) {
      for (const int s : group.sequences) tokens += problem.lengths[static_cast<std::size_t>(s)];
      const int degree = schemes[static_cast<std::size_t>(group.degree_index)].cp();
      for (int unit = group.first_unit; unit < group.first_unit + degree; ++unit)
        result.kept[static_cast<std::size_t>(unit)].push_back(static_cast<int>(m));
    }
    whole.micro_batches.push_back(detail::micro_batch_on_stages(
        base.pp(), assign::flex_cp_micro_batch_seconds(problem, micro_batch),
        assign::flex_cp_micro_batch_inner_seconds(problem, micro_batch), 0, tokens, options.backward_ratio));
  }
  result.schedule = schedule_pipeline(whole, {.kind = ScheduleKind::one_f_one_b, .seed = 1, .clusters = 0});
  return result;
}

}  // namespace sluice::schedule
