// The per-iteration plan: dispatch across pipelines, packing into micro-batches, choice among candidates.
#include "bindings.hpp"

namespace sluice::python {


assign::PlanOptions plan_options(int trials, int threads, std::uint64_t seed, bool local_search, bool longest_first,
                                 bool v_step, const py::handle& candidate_overhead) {
  assign::PlanOptions options{.dispatch = {.trials = trials,
                                           .threads = threads,
                                           .seed = seed,
                                           .local_search = local_search,
                                           .longest_first = longest_first,
                                           .v_step = v_step},
                              .candidate_overhead = {}};
  if (!candidate_overhead.is_none())
    options.candidate_overhead = real_vector_from(candidate_overhead, "candidate_overhead");
  return options;
}

schedule::ScheduleOptions schedule_options(std::string_view kind, std::uint64_t seed, int clusters) {
  return {.kind = schedule::schedule_kind_from(kind, "kind"), .seed = seed, .clusters = clusters};
}

schedule::ProblemOptions problem_options(std::int64_t hidden, int element_bytes, double latency, double bandwidth,
                                         double backward_ratio) {
  return {.hidden = hidden,
          .element_bytes = element_bytes,
          .link = {.latency = latency, .bandwidth = bandwidth},
          .backward_ratio = backward_ratio};
}

void bind_assign(py::module_& module) {
  py::class_<assign::MicroBatch>(module, "MicroBatch", "A packed micro-batch: its sequences' ids, tokens, seconds.")
      .def_property_readonly("sequence_ids",
                             [](const py::object& self) {
                               return view_of<std::int64_t>(self.cast<const assign::MicroBatch&>().sequence_ids, self);
                             })
      .def_readonly("tokens", &assign::MicroBatch::tokens)
      .def_readonly("seconds", &assign::MicroBatch::seconds)
      .def(py::self == py::self);

  py::class_<assign::PipelinePlan>(module, "PipelinePlan", "One pipeline's micro-batches, in execution order.")
      .def_readonly("index", &assign::PipelinePlan::index)
      .def_readonly("scheme", &assign::PipelinePlan::scheme)
      .def_readonly("max_len", &assign::PipelinePlan::max_len)
      .def_property_readonly("micro_batches",
                             [](const py::object& self) {
                               return internal_list(self.cast<const assign::PipelinePlan&>().micro_batches, self);
                             })
      .def_property_readonly("sequence_ids",
                             [](const assign::PipelinePlan& pipeline) {
                               py::list list;
                               for (const auto& micro_batch : pipeline.micro_batches)
                                 list.append(array_of<std::int64_t>(micro_batch.sequence_ids));
                               return list;
                             },
                             "Per micro-batch, its sequence ids (copies; micro_batches[k].sequence_ids are views).")
      .def_readonly("estimate", &assign::PipelinePlan::estimate)
      .def(py::self == py::self);

  py::class_<assign::CandidateEstimate>(module, "CandidateEstimate")
      .def_readonly("strategy", &assign::CandidateEstimate::strategy)
      .def_readonly("estimate", &assign::CandidateEstimate::estimate, "None: cannot hold the batch's longest sequence")
      .def_readonly("overhead", &assign::CandidateEstimate::overhead);

  py::class_<assign::IterationPlan> plan(module, "IterationPlan",
                                         "One iteration: the chosen strategy and, per pipeline, its micro-batches.");
  plan.def_readonly("strategy", &assign::IterationPlan::strategy)
      .def_property_readonly("pipelines",
                             [](const py::object& self) {
                               return internal_list(self.cast<const assign::IterationPlan&>().pipelines, self);
                             })
      .def_readonly("estimate", &assign::IterationPlan::estimate, "Propagation time of the slowest pipeline (s)")
      .def_readonly("overhead", &assign::IterationPlan::overhead)
      .def_property_readonly("total", &assign::IterationPlan::total)
      .def_readonly("dispatch_objective", &assign::IterationPlan::dispatch_objective)
      .def_readonly("dispatch_lower_bound", &assign::IterationPlan::dispatch_lower_bound)
      .def_readonly("chosen", &assign::IterationPlan::chosen)
      .def_property_readonly("candidates",
                             [](const py::object& self) {
                               return internal_list(self.cast<const assign::IterationPlan&>().candidates, self);
                             })
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

  const assign::DispatchOptions dispatch;
  module.def(
      "plan_iteration",
      [](const py::handle& lengths, const std::vector<Strategy>& candidates, const cost::Profile& profile,
         const py::handle& ids, int trials, int threads, std::uint64_t seed, bool local_search, bool longest_first,
         bool v_step, const py::handle& candidate_overhead) {
        const std::vector<Sequence> batch = batch_from(lengths, ids);
        const assign::PlanOptions options =
            plan_options(trials, threads, seed, local_search, longest_first, v_step, candidate_overhead);
        const py::gil_scoped_release release;
        return assign::plan_iteration(batch, candidates, profile, options);
      },
      py::arg("lengths"), py::arg("candidates"), py::arg("profile"), py::kw_only(), py::arg("ids") = py::none(),
      py::arg("trials") = dispatch.trials, py::arg("threads") = dispatch.threads, py::arg("seed") = dispatch.seed,
      py::arg("local_search") = dispatch.local_search, py::arg("longest_first") = dispatch.longest_first,
      py::arg("v_step") = dispatch.v_step, py::arg("candidate_overhead") = py::none(),
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
}

}  // namespace sluice::python
