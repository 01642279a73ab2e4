#pragma once
// A flex CP domain offered to the sluice plan beside its candidates (plan::FlexAlternative): `units` replicas of
// one ⟨TP, PP⟩ scheme whose CP groups re-form per micro-batch (FlexSP, ASPLOS'25, §4–5), each iteration solved by
// assign::solve_flex_cp and checked by assign::check_flex_cp_plan.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "sluice/assign/flex_cp.hpp"
#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/schedule/iteration.hpp"

namespace sluice::plan {

class FlexDomain final : public FlexAlternative {
public:
  // `schemes[k]` is the scheme that degree k of `problem` runs (its lengths are ignored): degree 1 the domain's
  // ⟨TP, PP⟩ base, replicated `problem.units` times. Raises invalid_input unless they agree.
  FlexDomain(std::vector<Scheme> schemes, assign::FlexCpProblem problem)
      : strategy_({{schemes.empty() ? Scheme(1, 1) : schemes.front(), problem.units}}),
        schemes_(std::move(schemes)),
        problem_(std::move(problem)) {
    sluice::require(!schemes_.empty() && schemes_.size() == problem_.degrees.size(),
                    "flex CP domain: ", schemes_.size(), " schemes for ", problem_.degrees.size(), " degrees");
    const Scheme& base = schemes_.front();
    sluice::require(base.is_base(), "flex CP domain: degree 1 runs ", base.name(), ", not a ⟨TP, PP⟩ scheme");
    for (std::size_t k = 0; k < schemes_.size(); ++k)
      sluice::require(schemes_[k].cp() == problem_.degrees[k].degree && schemes_[k].tp() == base.tp() &&
                          schemes_[k].pp() == base.pp() && problem_.pp == base.pp(),
                      "flex CP domain: degree ", problem_.degrees[k].degree, " runs ", schemes_[k].name(),
                      ", not a CP scheme of that degree on ", base.name());
    problem_.lengths = {1};  // checked with one token; each batch brings its own lengths
    assign::validate_flex_cp(problem_);
    problem_.lengths.clear();
  }

  [[nodiscard]] schedule::FlexIteration plan(std::span<const Sequence> batch) const override {
    const assign::FlexCpProblem problem = problem_of(batch);
    return {.strategy = strategy_, .schemes = schemes_, .plan = assign::solve_flex_cp(problem)};
  }

  void validate(const schedule::FlexIteration& iteration, std::span<const Sequence> batch) const override {
    const PlanCheck check("flex CP iteration: ");
    check(iteration.strategy == strategy_, "runs ", iteration.strategy.name(), ", the domain is ", strategy_.name());
    check(iteration.schemes == schemes_, "its degrees run other schemes than the domain's");
    assign::check_flex_cp_plan(problem_of(batch), iteration.plan);
  }

  [[nodiscard]] bool holds(std::span<const Sequence> batch) const override {
    for (const Sequence& sequence : batch) {
      bool held = false;
      for (std::size_t k = 0; k < problem_.degrees.size() && !held; ++k)
        held = assign::flex_cp_holds(problem_, k, sequence.length());
      if (!held) return false;
    }
    return !batch.empty();
  }

  // The flex CP problem of `batch` on this domain.
  [[nodiscard]] assign::FlexCpProblem problem_of(std::span<const Sequence> batch) const {
    assign::FlexCpProblem problem = problem_;
    problem.lengths.reserve(batch.size());
    for (const Sequence& sequence : batch) problem.lengths.push_back(sequence.length());
    return problem;
  }

  [[nodiscard]] const Strategy& strategy() const noexcept { return strategy_; }
  [[nodiscard]] std::span<const Scheme> schemes() const noexcept { return schemes_; }

private:
  Strategy strategy_;
  std::vector<Scheme> schemes_;
  assign::FlexCpProblem problem_;  // its lengths empty
};

// The domain of `units` replicas of `base` on `profile` with the CP schemes that `admits` takes
// (assign::flex_cp_schemes); nullptr when it offers fewer than two degrees, which is no choice of CP degree.
template <class Admits>
std::shared_ptr<const FlexDomain> flex_domain(const cost::Profile& profile, const Scheme& base, int units,
                                              Admits admits) {
  std::vector<Scheme> schemes;
  for (const cost::SchemeCost* cost : assign::flex_cp_schemes(profile, base, units, admits))
    schemes.push_back(cost->scheme);
  if (schemes.size() < 2 || schemes.front() != base) return nullptr;
  return std::make_shared<const FlexDomain>(std::move(schemes),
                                            assign::flex_cp_problem(profile, base, units, {}, admits));
}

}  // namespace sluice::plan
