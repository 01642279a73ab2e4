// The sluice plan from Python (plan/): its results (the iteration schedule, the flex CP iteration, the simulated
// iteration), IterationPlanner for one batch at a time (its PlanOptions are bound in options.cpp), and Planner
// (plan::plan_ahead): batches pulled from a Python iterator (with the GIL), planned on C++ worker threads (without
// it), delivered in iteration order by iteration over the planner.
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "sluice/schedule/flex_units.hpp"

namespace sluice::python {

namespace {

using SluicePlanner = plan::Planner<plan::SimulatedIteration>;
using Planned = plan::Planned<plan::SimulatedIteration>;

// A planner is neither copied nor moved: this holds the one plan_ahead returns, built in place.
struct PlannerHolder {
  template <class Make>
  explicit PlannerHolder(Make&& make) : planner(make()) {}
  SluicePlanner planner;
};

// Owns the C++ planner; every wait on its threads happens without the GIL, which the source's thread needs.
class PythonPlanner {
public:
  PythonPlanner(plan::IterationPlanner planner, const py::handle& source, plan::PlannerOptions options) {
    auto iterator = std::make_shared<py::object>(py::iter(source));
    plan::BatchSource pull = [iterator]() -> std::optional<std::vector<Sequence>> {
      const py::gil_scoped_acquire acquire;
      PyObject* item = PyIter_Next(iterator->ptr());
      if (item == nullptr) {
        if (PyErr_Occurred() != nullptr) throw py::error_already_set();
        return std::nullopt;
      }
      return batch_of_item(py::reinterpret_steal<py::object>(item));
    };
    holder_ =
        std::make_unique<PlannerHolder>([&] { return plan::plan_ahead(std::move(planner), std::move(pull), options); });
  }
  PythonPlanner(const PythonPlanner&) = delete;
  PythonPlanner& operator=(const PythonPlanner&) = delete;
  // Runs with the GIL (Python drops the last reference), so the source iterator is released with it.
  ~PythonPlanner() { close(); }

  std::optional<Planned> next() {
    const py::gil_scoped_release release;
    return holder_->planner.next();
  }

  // The C++ planner is only stopped, never freed, here: another thread may still be inside next().
  void close() {
    closed_ = true;
    const py::gil_scoped_release release;
    holder_->planner.stop();
  }

  [[nodiscard]] plan::PlannerWaits waits() const { return holder_->planner.waits(); }
  [[nodiscard]] bool closed() const noexcept { return closed_; }

private:
  std::unique_ptr<PlannerHolder> holder_;
  bool closed_ = false;
};

// Optional values of a vector as Python objects referring into `owner`, None where empty.
template <class T>
py::list optional_list(const std::vector<std::optional<T>>& values, const py::handle& owner) {
  py::list list;
  for (const auto& value : values)
    list.append(value ? py::cast(&*value, py::return_value_policy::reference_internal, owner) : py::none());
  return list;
}

// The sluice plan's results: the iteration schedule, the flex CP iteration and the simulated iteration.
void bind_plan_results(py::module_& module) {
  py::class_<plan::ScheduledPipeline> scheduled(module, "ScheduledPipeline", "A busy pipeline's problem and schedule.");
  def_record_properties(scheduled).def(py::self == py::self);

  py::class_<plan::IterationSchedule> iteration_schedule_class(
      module, "IterationSchedule", "Every pipeline of an iteration plan scheduled; None for an idle one.");
  iteration_schedule_class
      .def_property_readonly("pipelines",
                             [](const py::object& self) {
                               return optional_list(self.cast<const plan::IterationSchedule&>().pipelines, self);
                             })
      .def_readonly("makespan", &plan::IterationSchedule::makespan)
      .def("validate",
           py::overload_cast<const plan::IterationSchedule&, const assign::IterationPlan&, const cost::Profile&,
                             const schedule::ProblemOptions&>(&plan::validate),
           without_gil, py::arg("plan"), py::arg("profile"), py::kw_only(),
           py::arg("problem") = schedule::ProblemOptions{},
           "Raises InvalidPlan naming the first broken invariant against the plan and profile.");
  def_document(iteration_schedule_class);

  module.def("schedule_iteration", &plan::schedule_iteration, without_gil, py::arg("plan"), py::arg("profile"),
             py::kw_only(), py::arg("schedule") = schedule::ScheduleOptions{},
             py::arg("problem") = schedule::ProblemOptions{},
             "Every pipeline of an iteration plan scheduled on its scheme (schedule_pipeline).");

  py::class_<plan::FlexIteration> flex_iteration(
      module, "FlexIteration",
      "The batch planned on a flex CP domain: its replicas re-form CP groups per micro-batch.");
  def_record_properties(flex_iteration)
      .def_property_readonly("total", &plan::FlexIteration::total, "plan.seconds + overhead");

  module.def(
      "flex_unit_plans",
      [](const plan::FlexIteration& iteration, const assign::FlexCpProblem& problem,
         const schedule::ProblemOptions& options) {
        const schedule::FlexUnits units = [&] {
          const py::gil_scoped_release release;
          return schedule::flex_units(iteration.plan, iteration.strategy, iteration.schemes, problem, options);
        }();
        std::vector<std::pair<std::vector<int>, std::optional<schedule::ExecutionPlan>>> result;
        for (const std::vector<int>& kept : units.kept)
          result.emplace_back(
              kept, kept.empty() ? std::nullopt : std::optional(schedule::restrict_plan(units.schedule.plan, kept)));
        return result;
      },
      py::arg("iteration"), py::arg("problem"), py::kw_only(), py::arg("problem_options") = schedule::ProblemOptions{},
      "Per unit of a flex CP iteration's domain: the plan's micro-batches it takes part in (ascending) and its "
      "instruction lists for them (None when it takes part in none): one 1F1B pipeline of all the plan's "
      "micro-batches with the unit's absent ones removed, so that a CP group's units meet at each pass in the same "
      "order. `problem`: the batch's FlexCpProblem on the iteration's domain (FlexDomain.problem_of).");

  py::class_<plan::SimulatedIteration> simulated_class(
      module, "SimulatedIteration", "One iteration planned with the simulator judging the candidates.");
  def_record_properties(simulated_class)
      .def_property_readonly("candidate_total", &plan::SimulatedIteration::candidate_total,
                             "The kept candidate's makespan plus its layout move.")
      .def_property_readonly("runs_flex", &plan::SimulatedIteration::runs_flex,
                             "Whether the flex CP plan runs: it is faster than the kept candidate.")
      .def_property_readonly("total", &plan::SimulatedIteration::total)
      .def(
          "validate",
          [](const plan::SimulatedIteration& value, const py::handle& lengths, const std::vector<Strategy>& candidates,
             const cost::Profile& profile, const py::handle& ids, const py::handle& candidate_overhead,
             const schedule::ProblemOptions& problem) {
            const std::vector<Sequence> batch = batch_from(lengths, ids);
            const assign::PlanOptions plan = plan_options(assign::DispatchOptions{}, candidate_overhead);
            const py::gil_scoped_release release;
            plan::validate(value, batch, candidates, profile, plan, problem);
          },
          py::arg("lengths"), py::arg("candidates"), py::arg("profile"), py::kw_only(), py::arg("ids") = py::none(),
          py::arg("candidate_overhead") = py::none(), py::arg("problem") = schedule::ProblemOptions{},
          "Raises InvalidPlan naming the first broken invariant against the batch, candidates and profile.");
  def_document(simulated_class);
}

}  // namespace

void bind_planner(py::module_& module) {
  bind_plan_results(module);
  py::class_<plan::FlexAlternative, std::shared_ptr<plan::FlexAlternative>>(
      module, "FlexAlternative", "A domain offered to the sluice plan beside its candidates.");
  py::class_<plan::FlexDomain, plan::FlexAlternative, std::shared_ptr<plan::FlexDomain>>(
      module, "FlexDomain",
      "Replicas of one ⟨TP, PP⟩ scheme whose CP groups re-form per micro-batch, offered to IterationPlanner beside "
      "its candidates; each batch solved by the flex CP solver.")
      .def(py::init<std::vector<Scheme>, assign::FlexCpProblem, double>(), py::arg("schemes"), py::arg("problem"),
           py::kw_only(), py::arg("overhead") = 0.0,
           "schemes[k] runs degree k of `problem` (whose lengths are ignored), all CP schemes of one ⟨TP, PP⟩ base "
           "(degree 1 the base itself). "
           "`overhead` is charged to each plan besides its groups' time (a layout move).")
      .def_property_readonly("strategy", &plan::FlexDomain::strategy)
      .def_property_readonly("overhead", &plan::FlexDomain::overhead)
      .def_property_readonly("schemes",
                             [](const plan::FlexDomain& domain) {
                               return std::vector<Scheme>(domain.schemes().begin(), domain.schemes().end());
                             })
      .def(
          "problem_of",
          [](const plan::FlexDomain& domain, const py::handle& lengths) {
            return domain.problem_of(batch_from(lengths, py::none()));
          },
          py::arg("lengths"), "The flex CP problem of the batch on this domain.");
  py::class_<plan::FlexDomains, plan::FlexAlternative, std::shared_ptr<plan::FlexDomains>>(
      module, "FlexDomains",
      "Several flex CP domains: each batch planned on every one that holds it, the fastest kept.")
      .def(py::init<std::vector<std::shared_ptr<const plan::FlexDomain>>>(), py::arg("domains"))
      .def_property_readonly("domains", [](const plan::FlexDomains& domains) {
        return std::vector<std::shared_ptr<const plan::FlexDomain>>(domains.domains().begin(), domains.domains().end());
      });

  const plan::Options defaults;
  py::class_<plan::IterationPlanner>(
      module, "IterationPlanner",
      "The sluice plan of one iteration, the one `sluice plan`, `sluice trace`, `sluice simulate` and Planner give: "
      "every candidate that holds the batch is dispatched and packed (two-stage assignment), its pipelines "
      "scheduled and it is charged its layout move; the lowest simulated makespan plus that charge is kept. The "
      "candidates' layout moves are computed once, when it is made.")
      .def(
          py::init<cost::Profile, std::vector<Strategy>, plan::Options, std::shared_ptr<const plan::FlexAlternative>>(),
          py::arg("profile"), py::arg("candidates"), py::arg("options") = defaults, py::kw_only(),
          py::arg("flex") = nullptr,
          "`flex`, a FlexDomain or FlexDomains, is planned beside the candidates on every batch it holds and runs "
          "where faster.")
      .def(
          "plan",
          [](const plan::IterationPlanner& planner, const py::handle& lengths, const py::handle& ids) {
            const std::vector<Sequence> batch = batch_from(lengths, ids);
            const py::gil_scoped_release release;
            return planner.plan(batch);
          },
          py::arg("lengths"), py::kw_only(), py::arg("ids") = py::none(),
          "The batch's plan (SimulatedIteration); raises InvalidInput when no candidate holds a sequence.")
      .def(
          "validate",
          [](const plan::IterationPlanner& planner, const plan::SimulatedIteration& iteration,
             const py::handle& lengths, const py::handle& ids) {
            const std::vector<Sequence> batch = batch_from(lengths, ids);
            const py::gil_scoped_release release;
            planner.validate(iteration, batch);
          },
          py::arg("iteration"), py::arg("lengths"), py::kw_only(), py::arg("ids") = py::none(),
          "Raises InvalidPlan unless `iteration` is this planner's valid plan of the batch.")
      .def_property_readonly("profile", &plan::IterationPlanner::profile)
      .def_property_readonly("candidates",
                             [](const plan::IterationPlanner& planner) {
                               return std::vector<Strategy>(planner.candidates().begin(), planner.candidates().end());
                             })
      .def_property_readonly("options", &plan::IterationPlanner::options)
      .def_property_readonly(
          "layout_moves", [](const plan::IterationPlanner& planner) { return array_of(planner.layout_moves()); },
          "Per candidate, the seconds of its parameter pull and gradient push beyond its own layout's all-gather, "
          "before overlap (empty for none).")
      .def_property_readonly(
          "charged", [](const plan::IterationPlanner& planner) { return array_of(planner.charged()); },
          "Per candidate, what its plans are charged for its layout move (empty for none).");

  py::class_<Planned>(module, "Planned", "One iteration delivered by a Planner: its index, batch and plan.")
      .def_readonly("iteration", &Planned::iteration)
      .def_property_readonly("ids", [](const Planned& planned) { return ids_of(planned.batch); })
      .def_property_readonly("lengths", [](const Planned& planned) { return lengths_of(planned.batch); })
      .def_property_readonly(
          "plan", [](const Planned& planned) -> const assign::IterationPlan& { return planned.plan.plan; },
          py::return_value_policy::reference_internal, "The kept candidate's plan: its pipelines' micro-batches.")
      .def_readonly("simulated", &Planned::plan, py::return_value_policy::reference_internal,
                    "The whole SimulatedIteration: the plan, its schedule and every candidate's makespan.");

  py::class_<plan::PlannerWaits>(module, "PlannerWaits", "How long the consumer waited for plans.")
      .def_readonly("calls", &plan::PlannerWaits::calls)
      .def_readonly("waited", &plan::PlannerWaits::waited)
      .def_readonly("seconds", &plan::PlannerWaits::seconds)
      .def_readonly("last_seconds", &plan::PlannerWaits::last_seconds)
      .def_readonly("max_seconds", &plan::PlannerWaits::max_seconds);

  const plan::PlannerOptions planner;
  py::class_<PythonPlanner>(
      module, "Planner",
      "Plans iterations i+1 … i+lookahead on worker threads while the trainer runs iteration i. Iterating yields "
      "Planned items in the source's order, each the sluice plan IterationPlanner(profile, candidates, options, "
      "flex=flex) gives its batch; a batch's planning error is raised at its iteration. `source` is an iterable of "
      "sluice.Batch, lengths arrays or (ids, lengths) pairs; it is called from a planner thread, one item at a "
      "time. close() (or leaving a `with` block) stops the threads at any point.")
      .def(py::init([](const cost::Profile& profile, const std::vector<Strategy>& candidates, const py::handle& source,
                       const plan::Options& options, int lookahead, int threads,
                       std::shared_ptr<const plan::FlexAlternative> flex) {
             return std::make_unique<PythonPlanner>(
                 plan::IterationPlanner(profile, candidates, options, std::move(flex)), source,
                 plan::PlannerOptions{.lookahead = lookahead, .threads = threads});
           }),
           py::arg("profile"), py::arg("candidates"), py::arg("source"), py::arg("options") = defaults, py::kw_only(),
           py::arg("lookahead") = planner.lookahead, py::arg("threads") = planner.threads, py::arg("flex") = nullptr)
      .def("__iter__", [](const py::object& self) { return self; })
      .def("__next__",
           [](PythonPlanner& self) {
             auto planned = self.next();
             if (!planned) throw py::stop_iteration();
             return std::move(*planned);
           })
      .def("close", &PythonPlanner::close, "Stops the threads; idempotent.")
      .def_property_readonly("closed", &PythonPlanner::closed)
      .def_property_readonly("waits", &PythonPlanner::waits)
      .def("__enter__", [](const py::object& self) { return self; })
      .def("__exit__", [](PythonPlanner& self, const py::args&) { self.close(); });

  py::class_<plan::OfferedFlex>(module, "SluiceFlexDomains",
                                "The flex CP domains `sluice plan` and the comparison offer the sluice plan.")
      .def_readonly("domains", &plan::OfferedFlex::domains,
                    "FlexDomains for IterationPlanner(flex=) or Planner(flex=); None where no domain holds the context")
      .def_readonly("names", &plan::OfferedFlex::names,
                    "Per domain, its name in the comparison (SimulatedIteration.flex.domain indexes it)")
      .def_property_readonly("layout_moves", member_getter(&plan::OfferedFlex::layout_moves),
                             "Per domain, its layout move's seconds beyond its base's own all-gather, before overlap "
                             "(a read-only view)")
      .def_readonly("flexsp", &plan::OfferedFlex::flexsp, "Whether the first domain is FlexSP's (ZeRO-3, Ulysses)");
  module.def(
      "sluice_flex_domains",
      [](const cost::Profile& profile, std::int64_t context, const plan::Options& planning, bool cross_node_tp) {
        sluice::require(context >= 1, "sluice_flex_domains: context must be >= 1, got ", context);
        const py::gil_scoped_release release;
        return plan::offered_flex_domains(profile, {.context = context, .cross_node_tp = cross_node_tp}, planning);
      },
      py::arg("profile"), py::kw_only(), py::arg("context"), py::arg("planning") = plan::Options{},
      py::arg("cross_node_tp") = false,
      "The flex CP domains `sluice plan` offers beside its candidates on `profile` (with its CP schemes) for "
      "sequences up to `context` tokens: FlexSP's ZeRO-3 domain, and on every ⟨TP, PP⟩ base Megatron-LM's dynamic "
      "CP domain and sluice's mixed-degree one, charged their layout move under `planning`'s policy. Pass "
      "`.domains` to IterationPlanner(flex=) with the same `planning` for the plan the tool makes.");
}

}  // namespace sluice::python
