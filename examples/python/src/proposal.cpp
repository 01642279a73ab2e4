// Strategy proposal before training: Hydraulis' DP over the length distribution, and the proposal by sampled batches.
#include <functional>
#include <memory>
#include <string>

#include "bindings.hpp"

namespace sluice::python {

namespace {

// A Python callable as the sampled proposal's overhead: called from planning threads, so it takes the GIL.
std::function<double(const Strategy&)> overhead_from(const py::handle& overhead) {
  if (overhead.is_none()) return {};
  sluice::require(PyCallable_Check(overhead.ptr()) != 0, "overhead: expected a callable taking a Strategy, got ",
                  std::string(py::str(py::type::of(overhead))));
  auto function = std::make_shared<py::function>(py::reinterpret_borrow<py::function>(overhead));
  // The shared function is released where the options die, which holds the GIL (after the planning call).
  return [function](const Strategy& strategy) {
    const py::gil_scoped_acquire acquire;
    return (*function)(strategy).cast<double>();
  };
}

}  // namespace

void bind_proposal(py::module_& module) {
  py::class_<proposal::ProposedCandidate> proposed(module, "ProposedCandidate",
                                                   "A proposed strategy and the grid lengths it was proposed for.");
  def_record_properties(proposed).def(py::self == py::self);

  py::class_<proposal::LengthOptimum> optimum(module, "LengthOptimum", "The DP's optimum for one grid length L.");
  def_record_properties(optimum).def(py::self == py::self);

  py::class_<proposal::Proposal> proposal_class(module, "Proposal",
                                                "The candidate strategies worth considering (Hydraulis §7).");
  def_record_properties(proposal_class)
      .def("strategies", &proposal::Proposal::strategies, "The candidates' strategies, as plan_iteration takes them.")
      .def("validate", py::overload_cast<const proposal::Proposal&, const cost::Profile&>(&proposal::validate),
           without_gil, py::arg("profile"),
           "Raises InvalidPlan naming the first broken invariant against the profile.");
  def_document(proposal_class);

  py::class_<proposal::SampledCandidate> sampled_candidate(module, "SampledCandidate",
                                                           "A member of the sampled proposal's set.");
  def_record_properties(sampled_candidate).def(py::self == py::self);

  py::class_<proposal::SampledProposal> sampled_class(
      module, "SampledProposal", "Candidates chosen by the mean planned time of batches sampled from the data.");
  def_record_properties(sampled_class)
      .def("strategies", &proposal::SampledProposal::strategies, "The chosen strategies, as plan_iteration takes them.")
      .def("validate", py::overload_cast<const proposal::SampledProposal&, const cost::Profile&>(&proposal::validate),
           without_gil, py::arg("profile"),
           "Raises InvalidPlan naming the first broken invariant against the profile.");
  def_document(sampled_class);

  const proposal::ProposeOptions defaults;
  module.def("propose", &proposal::propose, without_gil, py::arg("dataset"), py::arg("profile"), py::kw_only(),
             py::arg("options") = defaults,
             "Hydraulis' strategy proposal: the DP over GPU budgets and grid lengths up to max_len (default: the "
             "dataset's longest sequence) from the dataset's length distribution.");

  const proposal::SampledOptions sampled;
  module.def(
      "propose_sampled",
      [](const data::LengthDataset& dataset, const cost::Profile& profile, const proposal::ProposeOptions& options,
         proposal::SampledOptions sampling, const py::handle& overhead) {
        sampling.paper = options;
        sampling.overhead = overhead_from(overhead);
        const py::gil_scoped_release release;
        return proposal::propose_sampled(dataset, profile, sampling);
      },
      py::arg("dataset"), py::arg("profile"), py::kw_only(), py::arg("options") = defaults,
      py::arg("sampled") = sampled, py::arg("overhead") = py::none(),
      "The proposal judged by what it delivers: options.max_candidates strategies chosen from a pool (the DP's, the "
      "homogeneous ones, neighbours) by the mean planned time of batches of options.tokens_per_iteration tokens "
      "drawn as `sampled` says. `overhead(strategy)` adds seconds per iteration (default none).");

  const proposal::HomogeneousOptions homogeneous;
  module.def(
      "homogeneous_strategies",
      [](const cost::Profile& profile, std::int64_t holds, bool tp_within_node) {
        return proposal::homogeneous_strategies(profile, {.holds = holds, .tp_within_node = tp_within_node});
      },
      py::arg("profile"), py::kw_only(), py::arg("holds") = homogeneous.holds,
      py::arg("tp_within_node") = homogeneous.tp_within_node,
      "Every scheme replicated over all the profile's GPUs whose MaxLen holds `holds` tokens, in canonical order.");

  module.def(
      "default_max_len",
      [](const data::LengthDataset& dataset, const cost::Profile& profile, const proposal::ProposeOptions& options) {
        return proposal::default_max_len(dataset, profile, options);
      },
      py::arg("dataset"), py::arg("profile"), py::kw_only(), py::arg("options") = defaults,
      "Lmax when none is named: the dataset's longest sequence, or the longest MaxLen of a usable scheme (within "
      "options.gpus and length_step, TP within a node when options.tp_within_node) when shorter (truncate the "
      "dataset to it, as `sluice propose` does).");
}

}  // namespace sluice::python
