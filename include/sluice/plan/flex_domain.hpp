#pragma once
// Flex CP domains offered to the sluice plan beside its candidates (plan::FlexAlternative): `units` replicas of
// one ⟨TP, PP⟩ scheme whose CP groups re-form per micro-batch (FlexSP, ASPLOS'25, §4–5; with one degree per
// micro-batch, Megatron-LM's dynamic CP), each iteration solved by assign::solve_flex_cp and checked by
// assign::validate; several of them, the fastest kept per batch.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/assign/flex_cp.hpp"
#include "sluice/assign/flexsp.hpp"
#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/links.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/cost/zero3.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/plan/layout_moves.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/shard/model.hpp"

namespace sluice::plan {

class FlexDomain final : public FlexAlternative {
public:
  // `schemes[k]` is the scheme that degree k of `problem` runs (its lengths are ignored), all on one ⟨TP, PP⟩ base
  // replicated `problem.units` times: degree 1 is the base itself, or the narrowest degree a CP scheme of it where
  // the base alone holds no token. `overhead` is charged to each of its plans besides its groups' time (a
  // candidate's layout move; nothing where the problem holds the domain's collectives, as ZeRO-3's). With
  // `also_flexsp`, each batch is planned also as FlexSP plans it (assign::solve_flexsp) and the faster plan kept, so
  // that the domain is never slower than FlexSP on it. Raises invalid_input unless they agree and the overhead is
  // finite and >= 0.
  FlexDomain(std::vector<Scheme> schemes, assign::FlexCpProblem problem, double overhead = 0, bool also_flexsp = false)
      : strategy_({{schemes.empty() ? Scheme(1, 1) : schemes.front().base(), problem.units}}),
        schemes_(std::move(schemes)),
        problem_(std::move(problem)),
        overhead_(overhead),
        also_flexsp_(also_flexsp) {
    sluice::require(std::isfinite(overhead_) && overhead_ >= 0,
                    "flex CP domain: overhead must be finite and >= 0, got ", overhead_);
    sluice::require(!schemes_.empty() && schemes_.size() == problem_.degrees.size(),
                    "flex CP domain: ", schemes_.size(), " schemes for ", problem_.degrees.size(), " degrees");
    const Scheme& base = strategy_.parts().front().scheme;
    for (std::size_t k = 0; k < schemes_.size(); ++k)
      sluice::require(schemes_[k].cp() == problem_.degrees[k].degree && schemes_[k].base() == base &&
                          schemes_[k].recompute() == Recompute::none && problem_.pp == base.pp(),
                      "flex CP domain: degree ", problem_.degrees[k].degree, " runs ", schemes_[k].name(),
                      ", not a CP scheme of that degree on ", base.name());
    problem_.lengths = {1};  // checked with one token; each batch brings its own lengths
    assign::require_valid(problem_);
    problem_.lengths.clear();
  }

  [[nodiscard]] plan::FlexIteration plan(Span<const Sequence> batch) const override {
    const assign::FlexCpProblem problem = problem_of(batch);
    assign::FlexCpPlan plan = assign::solve_flex_cp(problem);
    if (also_flexsp_) {
      std::optional<assign::FlexCpPlan> theirs = assign::solve_flexsp(problem);
      if (theirs && theirs->seconds < plan.seconds) plan = *std::move(theirs);
    }
    return {.domain = 0, .strategy = strategy_, .schemes = schemes_, .plan = std::move(plan), .overhead = overhead_};
  }

  // The domain index is the caller's to check (FlexDomains).
  void validate(const plan::FlexIteration& iteration, Span<const Sequence> batch) const override {
    const PlanCheck check("flex CP iteration: ");
    check(iteration.strategy == strategy_, "runs ", iteration.strategy.name(), ", the domain is ", strategy_.name());
    check(iteration.schemes == schemes_, "its degrees run other schemes than the domain's");
    check(iteration.overhead == overhead_, "is charged ", iteration.overhead, " s, the domain ", overhead_, " s");
    assign::validate(iteration.plan, problem_of(batch));
  }

  [[nodiscard]] bool holds(Span<const Sequence> batch) const override {
    return !batch.empty() &&
           std::ranges::all_of(batch, [&](const Sequence& sequence) { return holds_length(sequence.length()); });
  }

  // Whether some group of the domain holds a sequence of `length` alone.
  [[nodiscard]] bool holds_length(std::int64_t length) const { return assign::flex_cp_holds(problem_, length); }

  // The flex CP problem of `batch` on this domain.
  [[nodiscard]] assign::FlexCpProblem problem_of(Span<const Sequence> batch) const {
    assign::FlexCpProblem problem = problem_;
    problem.lengths.reserve(batch.size());
    for (const Sequence& sequence : batch) problem.lengths.push_back(sequence.length());
    return problem;
  }

  [[nodiscard]] const Strategy& strategy() const noexcept { return strategy_; }
  [[nodiscard]] Span<const Scheme> schemes() const noexcept { return schemes_; }
  [[nodiscard]] bool one_degree_per_micro_batch() const noexcept { return problem_.one_degree_per_micro_batch; }
  [[nodiscard]] double overhead() const noexcept { return overhead_; }

private:
  Strategy strategy_;
  std::vector<Scheme> schemes_;
  assign::FlexCpProblem problem_;  // its lengths empty
  double overhead_ = 0;
  bool also_flexsp_ = false;
};

// Several domains: each batch planned on every one that holds it, and the lowest total kept (ties to the earlier);
// the plan names its domain by index.
class FlexDomains final : public FlexAlternative {
public:
  // Raises invalid_input on none.
  explicit FlexDomains(std::vector<std::shared_ptr<const FlexDomain>> domains) : domains_(std::move(domains)) {
    sluice::require(!domains_.empty(), "flex CP domains: none given");
    for (const auto& domain : domains_) sluice::require(domain != nullptr, "flex CP domains: a null domain");
  }

  [[nodiscard]] plan::FlexIteration plan(Span<const Sequence> batch) const override {
    std::optional<plan::FlexIteration> kept;
    for (std::size_t k = 0; k < domains_.size(); ++k) {
      if (!domains_[k]->holds(batch)) continue;
      plan::FlexIteration iteration = domains_[k]->plan(batch);
      iteration.domain = k;
      if (!kept || iteration.total() < kept->total()) kept = std::move(iteration);
    }
    sluice::require(kept.has_value(), "flex CP domains: none holds the batch");
    return *std::move(kept);
  }

  // Re-plans the other domains (the solver is deterministic) to check that none is faster.
  void validate(const plan::FlexIteration& iteration, Span<const Sequence> batch) const override {
    const PlanCheck check("flex CP iteration: ");
    check(iteration.domain < domains_.size() && domains_[iteration.domain]->holds(batch), "names domain ",
          iteration.domain, " of ", domains_.size(), ", which does not hold the batch");
    domains_[iteration.domain]->validate(iteration, batch);
    for (std::size_t k = 0; k < domains_.size(); ++k) {
      if (k == iteration.domain || !domains_[k]->holds(batch)) continue;
      const double total = domains_[k]->plan(batch).total();
      check(total > iteration.total() || (total == iteration.total() && k > iteration.domain), "domain ", k,
            " plans faster (", total, " s) than the chosen domain ", iteration.domain, " (", iteration.total(), " s)");
    }
  }

  [[nodiscard]] bool holds(Span<const Sequence> batch) const override {
    return std::ranges::any_of(domains_, [&](const auto& domain) { return domain->holds(batch); });
  }

  [[nodiscard]] Span<const std::shared_ptr<const FlexDomain>> domains() const noexcept { return domains_; }

private:
  std::vector<std::shared_ptr<const FlexDomain>> domains_;
};

// The domain of `units` replicas of `base` on `profile` with the CP schemes that `admits` takes
// (assign::flex_cp_schemes), each micro-batch waiting for `collectives` beside its compute (FlexDomain tells the
// rest): the one builder of flex CP domains, sluice's and the baselines'. nullptr when it offers fewer than two
// degrees, which is no choice of CP degree, or when `units` exceeds assign::flex_cp_max_units.
template <class Admits>
std::shared_ptr<const FlexDomain> flex_domain(const cost::Profile& profile, const Scheme& base, int units,
                                              Admits admits, bool one_degree_per_micro_batch = false,
                                              double overhead = 0, assign::FlexCpCollectives collectives = {},
                                              bool also_flexsp = false) {
  if (units > assign::flex_cp_max_units) return nullptr;
  std::vector<Scheme> schemes;
  for (const cost::SchemeCost* cost : assign::flex_cp_schemes(profile, base, units, admits))
    schemes.push_back(cost->scheme);
  if (schemes.size() < 2) return nullptr;
  assign::FlexCpProblem problem = assign::flex_cp_problem(profile, base, units, {}, admits);
  problem.one_degree_per_micro_batch = one_degree_per_micro_batch;
  problem.collectives = collectives;
  return std::make_shared<const FlexDomain>(std::move(schemes), std::move(problem), overhead, also_flexsp);
}

// Whether FlexSP forms groups of `scheme` (a CP scheme; ⟨TP, PP⟩ itself is always degree 1): Ulysses of any degree.
inline bool flexsp_scheme(const Scheme& scheme) { return scheme.cp_kind() == CpKind::ulysses; }
// Whether Megatron-LM's dynamic CP does: ring degrees that are powers of two.
inline bool dynamic_cp_scheme(const Scheme& scheme) {
  return scheme.cp_kind() == CpKind::ring && (scheme.cp() & (scheme.cp() - 1)) == 0;
}

// The flex CP domain that FlexSP runs: ZeRO-3 over every GPU (`zero3`, from cost::zero3_profile, with its memory and
// collectives, each micro-batch's compute hiding or exposing them) and ⟨1, 1⟩ units in Ulysses groups formed per
// micro-batch; nullptr where there is no ZeRO-3 profile, or its scheme space gives it no Ulysses degree. With
// `also_flexsp`, sluice's: each batch also planned as FlexSP plans it, the faster kept.
inline std::shared_ptr<const FlexDomain> zero3_flex_domain(const cost::Zero3Profile& zero3, double backward_ratio,
                                                           bool also_flexsp) {
  if (!zero3.profile || zero3.profile->gpus() > assign::flex_cp_max_units) return nullptr;
  return flex_domain(*zero3.profile, Scheme(1, 1), static_cast<int>(zero3.profile->gpus()), flexsp_scheme, false, 0,
                     {.seconds = zero3.collective_seconds, .backward_ratio = backward_ratio}, also_flexsp);
}

// What the cluster allows the flex CP domains that the sluice plan is offered.
struct FlexScope {
  std::int64_t context = 0;    // every domain holds a sequence of this length in some group
  bool cross_node_tp = false;  // bases whose TP exceeds a node
  cost::Links links{};         // what ZeRO-3's collectives run on
};

// The flex CP domains the sluice plan offers beside its candidates, with a name for each and the layout move it
// pulls and pushes (before overlap).
struct OfferedFlex {
  std::shared_ptr<const FlexDomains> domains;  // null where there is none
  std::vector<std::string> names;
  std::vector<double> layout_moves;
  bool flexsp = false;  // whether the first domain is FlexSP's
};

// FlexSP's domain (zero3_flex_domain), and on every ⟨TP, PP⟩ base within `scope`, Megatron-LM's dynamic CP domain
// (ring degrees that are powers of two, one per micro-batch) and sluice's own (the base's CP schemes of every kind,
// groups of mixed degrees side by side in a micro-batch). A base's domains are charged, as `planning`'s policy
// charges a candidate, the layout move of the homogeneous strategy on it; FlexSP's nothing, as its collectives are
// in its problem.
inline OfferedFlex offered_flex_domains(const cost::Profile& profile, const FlexScope& scope, const Options& planning) {
  OfferedFlex flex;
  std::vector<std::shared_ptr<const FlexDomain>> domains;
  const auto add = [&](std::shared_ptr<const FlexDomain> domain, std::string name, double move) {
    if (!domain || !domain->holds_length(scope.context)) return false;
    domains.push_back(std::move(domain));
    flex.names.push_back(std::move(name));
    flex.layout_moves.push_back(move);
    return true;
  };
  if (const auto zero3 =
          zero3_flex_domain(cost::zero3_profile(profile, scope.links, 1), planning.problem.backward_ratio, true))
    flex.flexsp = add(zero3, zero3->strategy().name() + " flex CP (ZeRO-3)", 0);
  const std::int64_t gpus = profile.gpus();
  const std::int64_t per_node = profile.spec().gpus_per_node;
  const int layers = shard::llama_like(profile.spec().model).layers;
  for (const cost::SchemeCost& cost : profile.schemes()) {
    const Scheme& base = cost.scheme;
    if (!base.is_base() || (!scope.cross_node_tp && base.tp() > per_node) || gpus % base.gpus() != 0 ||
        gpus / base.gpus() > assign::flex_cp_max_units)
      continue;
    const int units = static_cast<int>(gpus / base.gpus());
    const Strategy homogeneous({{base, units}});
    const double move =
        planning.layout_moves == LayoutMoves::none ? 0.0 : layout_move_seconds(profile, Span(&homogeneous, 1)).front();
    const double charged = charged_layout_move(planning.layout_moves, move, layers);
    add(flex_domain(profile, base, units, dynamic_cp_scheme, true, charged), homogeneous.name() + " dynamic CP", move);
    add(flex_domain(
            profile, base, units, [](const Scheme&) { return true; }, false, charged),
        homogeneous.name() + " flex CP", move);
  }
  if (!domains.empty()) flex.domains = std::make_shared<const FlexDomains>(std::move(domains));
  return flex;
}

}  // namespace sluice::plan
