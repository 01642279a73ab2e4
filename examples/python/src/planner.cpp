// The sluice plan from Python: PlanOptions (plan::Options, its keyword arguments spelled once), IterationPlanner
// for one batch at a time, and Planner (plan::plan_ahead): batches pulled from a Python iterator (with the GIL),
// planned on C++ worker threads (without it), delivered in iteration order by iteration over the planner.
#include <memory>
#include <sstream>

#include "bindings.hpp"

namespace sluice::python {

namespace {

using SluicePlanner = schedule::Planner<schedule::SimulatedIteration>;
using Planned = schedule::Planned<schedule::SimulatedIteration>;

// A planner is neither copied nor moved: this holds the one plan_ahead returns, built in place.
struct PlannerHolder {
  template <class Make>
  explicit PlannerHolder(Make&& make) : planner(make()) {}
  SluicePlanner planner;
};

// Owns the C++ planner; every wait on its threads happens without the GIL, which the source's thread needs.
class PythonPlanner {
public:
  PythonPlanner(plan::IterationPlanner planner, const py::handle& source, schedule::PlannerOptions options) {
    auto iterator = std::make_shared<py::object>(py::iter(source));
    schedule::BatchSource pull = [iterator]() -> std::optional<std::vector<Sequence>> {
      const py::gil_scoped_acquire acquire;
      PyObject* item = PyIter_Next(iterator->ptr());
      if (item == nullptr) {
        if (PyErr_Occurred() != nullptr) throw py::error_already_set();
        return std::nullopt;
      }
      return batch_of_item(py::reinterpret_steal<py::object>(item));
    };
    holder_ = std::make_unique<PlannerHolder>(
        [&] { return plan::plan_ahead(std::move(planner), std::move(pull), options); });
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

  [[nodiscard]] schedule::PlannerWaits waits() const { return holder_->planner.waits(); }
  [[nodiscard]] bool closed() const noexcept { return closed_; }

private:
  std::unique_ptr<PlannerHolder> holder_;
  bool closed_ = false;
};

std::string repr(const plan::Options& options) {
  std::ostringstream out;
  out << "PlanOptions(trials=" << options.dispatch.trials << ", dispatch_threads=" << options.dispatch.threads
      << ", seed=" << options.dispatch.seed << ", local_search=" << (options.dispatch.local_search ? "True" : "False")
      << ", longest_first=" << (options.dispatch.longest_first ? "True" : "False") << ", layout_moves='"
      << plan::name(options.layout_moves) << "', v_step='" << plan::name(options.v_step) << "', schedule='"
      << schedule::name(options.schedule.kind) << "', schedule_seed=" << options.schedule.seed
      << ", clusters=" << options.schedule.clusters << ", hidden=" << options.problem.hidden
      << ", element_bytes=" << options.problem.element_bytes << ", latency=" << options.problem.link.latency
      << ", bandwidth=" << options.problem.link.bandwidth << ", backward_ratio=" << options.problem.backward_ratio
      << ")";
  return out.str();
}

}  // namespace

void bind_planner(py::module_& module) {
  const plan::Options defaults;
  py::class_<plan::Options>(
      module, "PlanOptions",
      "How the sluice plan is made: the dispatch (trials, threads, seed, local search, longest first), what each "
      "candidate is charged for its parameter pull and gradient push (layout_moves: none, exposed or all), whether "
      "the dispatch charges the V step (v_step: best, on or off), how pipelines are scheduled (schedule: cyclic or "
      "1f1b) and how activations move between stages. Immutable; raises InvalidInput on a bad value.")
      .def(py::init([](int trials, int dispatch_threads, std::uint64_t seed, bool local_search, bool longest_first,
                       std::string_view layout_moves, std::string_view v_step, std::string_view schedule,
                       std::uint64_t schedule_seed, int clusters, std::int64_t hidden, int element_bytes,
                       double latency, double bandwidth, double backward_ratio) {
             plan::Options options{
                 .dispatch = plan_options(trials, dispatch_threads, seed, local_search, longest_first, true,
                                          py::none())
                                 .dispatch,
                 .schedule = schedule_options(schedule, schedule_seed, clusters),
                 .problem = problem_options(hidden, element_bytes, latency, bandwidth, backward_ratio),
                 .layout_moves = plan::layout_moves_from(layout_moves, "layout_moves"),
                 .v_step = plan::v_step_from(v_step, "v_step")};
             assign::require_valid(options.dispatch);
             schedule::detail::require_options(options.problem);
             return options;
           }),
           py::kw_only(), py::arg("trials") = defaults.dispatch.trials,
           py::arg("dispatch_threads") = defaults.dispatch.threads, py::arg("seed") = defaults.dispatch.seed,
           py::arg("local_search") = defaults.dispatch.local_search,
           py::arg("longest_first") = defaults.dispatch.longest_first,
           py::arg("layout_moves") = std::string(plan::name(defaults.layout_moves)),
           py::arg("v_step") = std::string(plan::name(defaults.v_step)),
           py::arg("schedule") = std::string(schedule::name(defaults.schedule.kind)),
           py::arg("schedule_seed") = defaults.schedule.seed, py::arg("clusters") = defaults.schedule.clusters,
           py::arg("hidden") = defaults.problem.hidden, py::arg("element_bytes") = defaults.problem.element_bytes,
           py::arg("latency") = defaults.problem.link.latency, py::arg("bandwidth") = defaults.problem.link.bandwidth,
           py::arg("backward_ratio") = defaults.problem.backward_ratio)
      .def_property_readonly("trials", [](const plan::Options& o) { return o.dispatch.trials; })
      .def_property_readonly("dispatch_threads", [](const plan::Options& o) { return o.dispatch.threads; })
      .def_property_readonly("seed", [](const plan::Options& o) { return o.dispatch.seed; })
      .def_property_readonly("local_search", [](const plan::Options& o) { return o.dispatch.local_search; })
      .def_property_readonly("longest_first", [](const plan::Options& o) { return o.dispatch.longest_first; })
      .def_property_readonly("layout_moves",
                             [](const plan::Options& o) { return std::string(plan::name(o.layout_moves)); })
      .def_property_readonly("v_step", [](const plan::Options& o) { return std::string(plan::name(o.v_step)); })
      .def_property_readonly("schedule",
                             [](const plan::Options& o) { return std::string(schedule::name(o.schedule.kind)); })
      .def_property_readonly("schedule_seed", [](const plan::Options& o) { return o.schedule.seed; })
      .def_property_readonly("clusters", [](const plan::Options& o) { return o.schedule.clusters; })
      .def_property_readonly("hidden", [](const plan::Options& o) { return o.problem.hidden; })
      .def_property_readonly("element_bytes", [](const plan::Options& o) { return o.problem.element_bytes; })
      .def_property_readonly("latency", [](const plan::Options& o) { return o.problem.link.latency; })
      .def_property_readonly("bandwidth", [](const plan::Options& o) { return o.problem.link.bandwidth; })
      .def_property_readonly("backward_ratio", [](const plan::Options& o) { return o.problem.backward_ratio; })
      .def(py::self == py::self)
      .def("__repr__", &repr);

  py::class_<plan::IterationPlanner>(
      module, "IterationPlanner",
      "The sluice plan of one iteration, the one `sluice plan`, `sluice trace`, `sluice simulate` and Planner give: "
      "every candidate that holds the batch is dispatched and packed (two-stage assignment), its pipelines "
      "scheduled and it is charged its layout move; the lowest simulated makespan plus that charge is kept. The "
      "candidates' layout moves are computed once, when it is made.")
      .def(py::init<cost::Profile, std::vector<Strategy>, plan::Options>(), py::arg("profile"), py::arg("candidates"),
           py::arg("options") = defaults)
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
          [](const plan::IterationPlanner& planner, const schedule::SimulatedIteration& iteration,
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
          "Per candidate, the seconds of its parameter pull and gradient push before overlap (empty for none).")
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

  py::class_<schedule::PlannerWaits>(module, "PlannerWaits", "How long the consumer waited for plans.")
      .def_readonly("calls", &schedule::PlannerWaits::calls)
      .def_readonly("waited", &schedule::PlannerWaits::waited)
      .def_readonly("seconds", &schedule::PlannerWaits::seconds)
      .def_readonly("last_seconds", &schedule::PlannerWaits::last_seconds)
      .def_readonly("max_seconds", &schedule::PlannerWaits::max_seconds);

  const schedule::PlannerOptions planner;
  py::class_<PythonPlanner>(
      module, "Planner",
      "Plans iterations i+1 … i+lookahead on worker threads while the trainer runs iteration i. Iterating yields "
      "Planned items in the source's order, each the sluice plan IterationPlanner(profile, candidates, options) "
      "gives its batch; a batch's planning error is raised at its iteration. `source` is an iterable of "
      "sluice.Batch, lengths arrays or (ids, lengths) pairs; it is called from a planner thread, one item at a "
      "time. close() (or leaving a `with` block) stops the threads at any point.")
      .def(py::init([](const cost::Profile& profile, const std::vector<Strategy>& candidates, const py::handle& source,
                       const plan::Options& options, int lookahead, int threads) {
             return std::make_unique<PythonPlanner>(plan::IterationPlanner(profile, candidates, options), source,
                                                    schedule::PlannerOptions{.lookahead = lookahead, .threads = threads});
           }),
           py::arg("profile"), py::arg("candidates"), py::arg("source"), py::arg("options") = defaults, py::kw_only(),
           py::arg("lookahead") = planner.lookahead, py::arg("threads") = planner.threads)
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
}

}  // namespace sluice::python
