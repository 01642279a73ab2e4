// The per-iteration plan: dispatch across pipelines, packing into micro-batches, choice among candidates.
#include "bindings.hpp"

namespace sluice::python {

assign::PlanOptions plan_options(const assign::DispatchOptions& dispatch, const py::handle& candidate_overhead) {
  assign::PlanOptions options{.dispatch = dispatch, .candidate_overhead = {}};
  if (!candidate_overhead.is_none())
    options.candidate_overhead = real_vector_from(candidate_overhead, "candidate_overhead");
  return options;
}

// Context-parallel groups per micro-batch (assign/flex_cp.hpp).
void bind_flex_cp(py::module_& module) {
  py::class_<assign::FlexCpDegree>(module, "FlexCpDegree", "One group size of a flex CP domain's pool.")
      .def(py::init([](int degree, const cost::QuadraticLatency& latency, std::int64_t capacity, int length_multiple,
                       const cost::LastStageWork& last_stage) {
             return assign::FlexCpDegree{.degree = degree,
                                         .latency = latency,
                                         .capacity = capacity,
                                         .length_multiple = length_multiple,
                                         .last_stage = last_stage};
           }),
           py::arg("degree"), py::arg("latency"), py::arg("capacity"), py::arg("length_multiple") = 1,
           py::arg("last_stage") = cost::LastStageWork{})
      .def_readonly("degree", &assign::FlexCpDegree::degree, "Units sharing each sequence of such a group")
      .def_readonly("latency", &assign::FlexCpDegree::latency, "One stage's time of one sequence in such a group")
      .def_readonly("capacity", &assign::FlexCpDegree::capacity, "The most charged tokens one group holds")
      .def_readonly("length_multiple", &assign::FlexCpDegree::length_multiple,
                    "Lengths are charged rounded up to this (2·R for a ring of R)")
      .def_readonly("last_stage", &assign::FlexCpDegree::last_stage,
                    "The last stage's own work on a group's charged tokens; the other stages run the group's time "
                    "less it");

  py::class_<assign::FlexCpGroup> flex_group(module, "FlexCpGroup", "One CP group of a micro-batch and its sequences.");
  def_record_properties(flex_group).def(py::self == py::self);

  py::class_<assign::FlexCpMicroBatch>(module, "FlexCpMicroBatch", "One micro-batch's groups, widest first.")
      .def_property_readonly("groups", member_getter(&assign::FlexCpMicroBatch::groups))
      .def(py::self == py::self);

  py::class_<assign::FlexCpProblem>(module, "FlexCpProblem",
                                    "An iteration's sequences on `units` replicas of one ⟨TP, PP⟩ pipeline, re-formed "
                                    "into CP groups per micro-batch.")
      .def(py::init([](const py::handle& lengths, int units, int pp, std::vector<assign::FlexCpDegree> degrees,
                       bool one_degree_per_micro_batch, double collective_seconds, double backward_ratio) {
             assign::FlexCpProblem problem{
                 .lengths = integers_from(lengths, "lengths"),
                 .units = units,
                 .pp = pp,
                 .degrees = std::move(degrees),
                 .one_degree_per_micro_batch = one_degree_per_micro_batch,
                 .collectives = {.seconds = collective_seconds, .backward_ratio = backward_ratio}};
             assign::require_valid(problem);
             return problem;
           }),
           py::arg("lengths"), py::arg("units"), py::arg("pp"), py::arg("degrees"), py::kw_only(),
           py::arg("one_degree_per_micro_batch") = false, py::arg("collective_seconds") = 0.0,
           py::arg("backward_ratio") = 2.0, "Raises InvalidInput unless the problem is well formed.")
      .def_property_readonly("lengths", member_getter(&assign::FlexCpProblem::lengths),
                             "The iteration's sequences (a read-only view)")
      .def_readonly("units", &assign::FlexCpProblem::units)
      .def_readonly("pp", &assign::FlexCpProblem::pp)
      .def_readonly("degrees", &assign::FlexCpProblem::degrees, "Ascending, each dividing the next and the units")
      .def_readonly("one_degree_per_micro_batch", &assign::FlexCpProblem::one_degree_per_micro_batch,
                    "Megatron-LM's dynamic CP: one CP size per micro-batch")
      .def_property_readonly(
          "collective_seconds", [](const assign::FlexCpProblem& problem) { return problem.collectives.seconds; },
          "C: one collective every micro-batch runs over all units beside its compute (ZeRO-3's); 0 for none")
      .def_property_readonly(
          "backward_ratio", [](const assign::FlexCpProblem& problem) { return problem.collectives.backward_ratio; },
          "Backward over forward compute: how a micro-batch's time splits between the passes")
      .def("group_seconds", &assign::flex_cp_group_seconds, py::arg("group"), "c_d + Σ a_d·l² + b_d·l")
      .def("micro_batch_seconds", &assign::flex_cp_micro_batch_seconds, py::arg("micro_batch"),
           "Its slowest group's seconds T, or max(T_f, C) + max(T_b, 2·C) where the collectives outlast a pass")
      .def("lower_bound", &assign::flex_cp_lower_bound, "No plan of the problem is faster (s)");

  py::class_<assign::FlexCpPlan>(module, "FlexCpPlan", "One iteration's micro-batches of CP groups.")
      .def_property_readonly("micro_batches", member_getter(&assign::FlexCpPlan::micro_batches), "Slowest first")
      .def_readonly("seconds", &assign::FlexCpPlan::seconds,
                    "The iteration: Σ over micro-batches + (PP − 1) × the slowest")
      .def_readonly("lower_bound", &assign::FlexCpPlan::lower_bound)
      .def(
          "check",
          [](const assign::FlexCpPlan& plan, const assign::FlexCpProblem& problem) { assign::validate(plan, problem); },
          py::arg("problem"), "Raises InvalidPlan naming the first broken invariant against the problem.")
      .def(py::self == py::self);

  const assign::FlexCpOptions defaults;
  module.def(
      "solve_flex_cp",
      [](const assign::FlexCpProblem& problem, int targets, int improvement_rounds) {
        const py::gil_scoped_release release;
        return assign::solve_flex_cp(problem, {.targets = targets, .improvement_rounds = improvement_rounds});
      },
      py::arg("problem"), py::kw_only(), py::arg("targets") = defaults.targets,
      py::arg("improvement_rounds") = defaults.improvement_rounds,
      "The fast flex CP solver: micro-batches of CP groups minimising the iteration, with its lower bound.");
  module.def(
      "solve_flexsp", &assign::solve_flexsp, without_gil, py::arg("problem"),
      "The problem planned as FlexSP's authors plan it: sorted split into micro-batches for the fewest valid count "
      "and the next four, each grouped on every unit in degrees from 2 up; None when no count can be grouped so.");
  module.def(
      "flex_cp_problem",
      [](const cost::Profile& profile, const Scheme& base, int units, const py::handle& lengths,
         const std::vector<std::string>& cp_kinds, bool powers_of_two) {
        std::vector<CpKind> kinds;
        for (const std::string& kind : cp_kinds) kinds.push_back(value_in(cp_kind_names, kind, "cp_kinds"));
        const std::vector<std::int64_t> values = integers_from(lengths, "lengths");
        assign::FlexCpProblem problem =
            assign::flex_cp_problem(profile, base, units, values, [&](const Scheme& scheme) {
              const int cp = scheme.cp();
              return std::ranges::find(kinds, scheme.cp_kind()) != kinds.end() &&
                     (!powers_of_two || (cp & (cp - 1)) == 0);
            });
        assign::require_valid(problem);
        return problem;
      },
      py::arg("profile"), py::arg("base"), py::arg("units"), py::arg("lengths"), py::kw_only(),
      py::arg("cp_kinds") = std::vector<std::string>{"ring", "ulysses", "hybrid"}, py::arg("powers_of_two") = false,
      "The problem of `lengths` on `units` replicas of `base` (a ⟨TP, PP⟩ scheme of `profile`): its CP schemes of "
      "`cp_kinds` (power-of-two degrees only, if asked) give the degrees. Raises InvalidInput when a sequence fits "
      "no group.");
}

void bind_assign(py::module_& module) {
  py::class_<assign::MicroBatch> micro_batch_class(module, "MicroBatch",
                                                   "A packed micro-batch: its sequences' ids, tokens, seconds.");
  def_record_properties(micro_batch_class, {{"sequences", "sequence_ids"}}).def(py::self == py::self);

  py::class_<assign::PipelinePlan> pipeline_plan(module, "PipelinePlan",
                                                 "One pipeline's micro-batches, in execution order.");
  def_record_properties(pipeline_plan)
      .def_property_readonly(
          "sequence_ids",
          [](const assign::PipelinePlan& pipeline) {
            py::list list;
            for (const auto& micro_batch : pipeline.micro_batches)
              list.append(array_of<std::int64_t>(micro_batch.sequence_ids));
            return list;
          },
          "Per micro-batch, its sequence ids (copies; micro_batches[k].sequence_ids are views).")
      .def(py::self == py::self);

  py::class_<assign::CandidateEstimate> candidate(module, "CandidateEstimate",
                                                  "One candidate strategy of an iteration plan: its estimated seconds "
                                                  "for the batch and the overhead it is charged.");
  def_record_properties(candidate);

  py::class_<assign::IterationPlan> plan(module, "IterationPlan",
                                         "One iteration: the chosen strategy and, per pipeline, its micro-batches.");
  def_record_properties(plan)
      .def_property_readonly("total", &assign::IterationPlan::total)
      .def(
          "validate",
          [](const assign::IterationPlan& value, const py::handle& lengths, const cost::Profile& profile,
             const py::handle& ids) {
            const std::vector<Sequence> batch = batch_from(lengths, ids);
            const py::gil_scoped_release release;
            assign::validate(value, batch, profile);
          },
          py::arg("lengths"), py::arg("profile"), py::kw_only(), py::arg("ids") = py::none(),
          "Raises InvalidPlan naming the first broken invariant against the batch and profile.");
  def_document(plan);

  module.def(
      "plan_iteration",
      [](const py::handle& lengths, const std::vector<Strategy>& candidates, const cost::Profile& profile,
         const py::handle& ids, const assign::DispatchOptions& dispatch, const py::handle& candidate_overhead) {
        const std::vector<Sequence> batch = batch_from(lengths, ids);
        const assign::PlanOptions options = plan_options(dispatch, candidate_overhead);
        const py::gil_scoped_release release;
        return assign::plan_iteration(batch, candidates, profile, options);
      },
      py::arg("lengths"), py::arg("candidates"), py::arg("profile"), py::kw_only(), py::arg("ids") = py::none(),
      py::arg("dispatch") = assign::DispatchOptions{}, py::arg("candidate_overhead") = py::none(),
      "Hydraulis' per-iteration routine: for every candidate that holds the batch, dispatch its sequences across "
      "the pipelines and pack each pipeline; the candidate with the lowest estimate + overhead wins. Sequence ids "
      "in the plan are `ids` (default: positions in `lengths`).");
  module.def(
      "plan_fixed_length",
      [](const py::handle& lengths, const Strategy& strategy, const cost::Profile& profile,
         std::int64_t capacity_tokens, const py::handle& ids) {
        const std::vector<Sequence> batch = batch_from(lengths, ids);
        const py::gil_scoped_release release;
        return assign::plan_fixed_length(batch, strategy, profile, capacity_tokens);
      },
      py::arg("lengths"), py::arg("strategy"), py::arg("profile"), py::kw_only(), py::arg("capacity_tokens"),
      py::arg("ids") = py::none(),
      "The Megatron-LM-style baseline: fixed-length bins packed best-fit-decreasing, dealt round-robin.");
  bind_flex_cp(module);
}

}  // namespace sluice::python
