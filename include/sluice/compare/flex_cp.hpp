#pragma once
// The baselines that choose a context-parallel degree per micro-batch, on replicas of one ⟨TP, PP⟩ pipeline whose
// units re-form into CP groups for every micro-batch (assign/flex_cp.hpp solves each iteration):
// - System::flexsp, FlexSP (Wang et al., ASPLOS'25): ZeRO-3 data parallelism over all GPUs (as DeepSpeed, with its
//   memory and collectives, which each micro-batch's compute hides or exposes) and Ulysses groups of different
//   sizes in one micro-batch, planned as its authors plan (assign/flexsp.hpp): their SP pool from 2 up, every GPU
//   busy in each micro-batch, the sequences sorted and split into micro-batches for a few counts.
// - System::dynamic_cp, Megatron-LM's dynamic context parallelism (--dynamic-context-parallel): a ⟨TP, PP⟩
//   domain whose DP×CP ranks take one power-of-two ring CP size per packed micro-batch, the packing balanced over
//   the data-parallel groups; the best domain by mean over the iterations.
// An iteration's time is the flex CP plan's: Σ over micro-batches of the slowest group, plus (PP − 1) times the
// slowest micro-batch for the pipeline's fill and drain.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/assign/flex_cp.hpp"
#include "sluice/assign/flexsp.hpp"
#include "sluice/compare/detail/iterations.hpp"
#include "sluice/compare/options.hpp"
#include "sluice/compare/results.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/cost/zero3.hpp"
#include "sluice/plan/flex_domain.hpp"

namespace sluice::compare {

class FlexCp {
public:
  // `system`: System::flexsp or System::dynamic_cp. `options` must outlive the system.
  FlexCp(const Options& options, System system) : options_(&options), system_(system) {
    sluice::require(system == System::flexsp || system == System::dynamic_cp, "compare: ", name(system),
                    " is not a flex CP system");
    if (system == System::flexsp) {
      zero3_ = cost::zero3_profile(options.profile, options.links, 1);
      add_domain(plan::zero3_flex_domain(*zero3_, options.problem.backward_ratio, false));
    } else {
      const std::int64_t gpus = options.profile.gpus();
      const std::int64_t per_node = options.profile.spec().gpus_per_node;
      for (const cost::SchemeCost& cost : options.profile.schemes())
        if (cost.scheme.is_base() && (options.cross_node_tp || cost.scheme.tp() <= per_node) &&
            gpus % cost.scheme.gpus() == 0)
          add_domain(plan::flex_domain(options.profile, cost.scheme, static_cast<int>(gpus / cost.scheme.gpus()),
                                       plan::dynamic_cp_scheme, true));
    }
    if (domains_.empty())
      no_domain_ =
          sluice::concat("no ", system == System::flexsp ? "ZeRO-3 × Ulysses" : "⟨TP, PP⟩ × ring CP", " domain of ",
                         options.profile.name(), " on ", options.profile.gpus(), " GPUs has CP groups and holds ",
                         options.context, " tokens in one (the scheme space's ",
                         system == System::flexsp ? "Ulysses" : "ring", " degrees: --cp with that kind)");
  }

  // Plans the next iteration on every domain. Raises invalid_input on an empty batch.
  void add(Span<const Sequence> batch) {
    sluice::require(!batch.empty(), "compare: an empty batch");
    if (!failure_.empty()) return;
    for (Domain& domain : domains_) {
      const assign::FlexCpProblem problem = domain.domain->problem_of(batch);
      const std::optional<assign::FlexCpPlan> plan =
          system_ == System::flexsp ? assign::solve_flexsp(problem) : assign::solve_flex_cp(problem);
      if (plan)
        domain.run.iterations.push_back(detail::flex_cp_outcome(problem, *plan, domain.run.strategies.front().name()));
      else
        failure_ = sluice::concat("FlexSP keeps every GPU busy in each micro-batch, and no split of iteration ",
                                  domain.run.iterations.size() + 1, "'s ", batch.size(), " sequences into up to ",
                                  assign::flexsp_most_counts, " counts of micro-batches does so in Ulysses groups of ",
                                  degree_list(*domain.domain), " GPUs");
    }
  }

  // The fastest domain's run; a failure when none holds the context or FlexSP could not plan a batch.
  [[nodiscard]] SystemRun result() && {
    if (!failure_.empty()) return detail::failed(system_, failure_);
    std::vector<SystemRun> runs;
    for (Domain& domain : domains_) runs.push_back(std::move(domain.run));
    const std::optional<std::size_t> fastest = detail::best_index(runs);
    if (!fastest) return detail::failed(system_, no_domain_);
    SystemRun run = std::move(runs[*fastest]);
    run.name = name(system_);
    const std::string degrees = degree_list(*domains_[*fastest].domain);
    run.configuration =
        system_ == System::flexsp
            ? sluice::concat(run.strategies.front().name(), " under ZeRO-3 (collectives of ",
                             sluice::shortest(zero3_->collective_seconds),
                             " s each, exposed where a micro-batch computes less), Ulysses groups of ", degrees,
                             " GPUs formed per micro-batch with every GPU busy; sequences sorted longest first and "
                             "split into micro-batches of least largest token count, for the fewest valid count and "
                             "the next ",
                             assign::flexsp_micro_batch_counts - 1, ", each micro-batch grouped on its own")
            : sluice::concat(run.strategies.front().name(), ", the fastest of ", runs.size(),
                             " ⟨TP, PP⟩ domains; one ring CP size per micro-batch (", degrees,
                             "), micro-batches packed and balanced by the flex CP solver; 1F1B");
    return run;
  }

private:
  // The degrees the system forms groups of (FlexSP's pool from 2 up).
  [[nodiscard]] std::string degree_list(const plan::FlexDomain& domain) const {
    const assign::FlexCpProblem problem = domain.problem_of({});
    std::string degrees;
    for (std::size_t k = system_ == System::flexsp ? assign::detail::flexsp_first_degree(problem) : 0;
         k < problem.degrees.size(); ++k)
      degrees += (degrees.empty() ? "" : ", ") + std::to_string(problem.degrees[k].degree);
    return degrees;
  }

  struct Domain {
    std::shared_ptr<const plan::FlexDomain> domain;
    SystemRun run;
  };

  // Keeps `domain` where there is one and it holds the context in some group.
  void add_domain(std::shared_ptr<const plan::FlexDomain> domain) {
    if (!domain || !domain->holds_length(options_->context)) return;
    SystemRun run;
    run.strategies.push_back(domain->strategy());
    domains_.push_back({std::move(domain), std::move(run)});
  }

  const Options* options_;
  System system_;
  std::optional<cost::Zero3Profile> zero3_;
  std::vector<Domain> domains_;
  std::string no_domain_;  // why there is no domain
  std::string failure_;    // why FlexSP could not plan a batch
};

}  // namespace sluice::compare
