// schedule::Planner from Python: batches pulled from a Python iterator (with the GIL), planned on C++ worker
// threads (without it), delivered in iteration order by iteration over the planner.
#include <memory>

#include "bindings.hpp"

namespace sluice::python {

namespace {

using IterationPlanner = schedule::Planner<assign::IterationPlan>;

// A planner is neither copied nor moved: this holds the one plan_ahead returns, built in place.
struct PlannerHolder {
  template <class Make>
  explicit PlannerHolder(Make&& make) : planner(make()) {}
  IterationPlanner planner;
};

// Owns the C++ planner; every wait on its threads happens without the GIL, which the source's thread needs.
class PythonPlanner {
public:
  PythonPlanner(cost::Profile profile, std::vector<Strategy> candidates, assign::PlanOptions plan,
                const py::handle& source, schedule::PlannerOptions options) {
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
    holder_ = std::make_unique<PlannerHolder>([&] {
      return schedule::plan_ahead(std::move(profile), std::move(candidates), std::move(plan), std::move(pull), options);
    });
  }
  PythonPlanner(const PythonPlanner&) = delete;
  PythonPlanner& operator=(const PythonPlanner&) = delete;
  // Runs with the GIL (Python drops the last reference), so the source iterator is released with it.
  ~PythonPlanner() { close(); }

  std::optional<schedule::Planned<assign::IterationPlan>> next() {
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

}  // namespace

void bind_planner(py::module_& module) {
  using Planned = schedule::Planned<assign::IterationPlan>;
  py::class_<Planned>(module, "Planned", "One iteration delivered by a Planner: its index, batch and plan.")
      .def_readonly("iteration", &Planned::iteration)
      .def_property_readonly("ids", [](const Planned& planned) { return ids_of(planned.batch); })
      .def_property_readonly("lengths", [](const Planned& planned) { return lengths_of(planned.batch); })
      .def_readonly("plan", &Planned::plan, py::return_value_policy::reference_internal);

  py::class_<schedule::PlannerWaits>(module, "PlannerWaits", "How long the consumer waited for plans.")
      .def_readonly("calls", &schedule::PlannerWaits::calls)
      .def_readonly("waited", &schedule::PlannerWaits::waited)
      .def_readonly("seconds", &schedule::PlannerWaits::seconds)
      .def_readonly("last_seconds", &schedule::PlannerWaits::last_seconds)
      .def_readonly("max_seconds", &schedule::PlannerWaits::max_seconds);

  const assign::DispatchOptions dispatch;
  const schedule::PlannerOptions planner;
  py::class_<PythonPlanner>(
      module, "Planner",
      "Plans iterations i+1 … i+lookahead on worker threads while the trainer runs iteration i. Iterating yields "
      "Planned items in the source's order, equal to calling plan_iteration on each batch; a batch's planning "
      "error is raised at its iteration. `source` is an iterable of sluice.Batch, lengths arrays or (ids, lengths) "
      "pairs; it is called from a planner thread, one item at a time. close() (or leaving a `with` block) stops "
      "the threads at any point.")
      .def(py::init([](const cost::Profile& profile, const std::vector<Strategy>& candidates, const py::handle& source,
                       int lookahead, int threads, int trials, int dispatch_threads, std::uint64_t seed,
                       bool local_search, bool longest_first, bool v_step, const py::handle& candidate_overhead) {
             return std::make_unique<PythonPlanner>(
                 profile, candidates,
                 plan_options(trials, dispatch_threads, seed, local_search, longest_first, v_step, candidate_overhead),
                 source, schedule::PlannerOptions{.lookahead = lookahead, .threads = threads});
           }),
           py::arg("profile"), py::arg("candidates"), py::arg("source"), py::kw_only(),
           py::arg("lookahead") = planner.lookahead, py::arg("threads") = planner.threads,
           py::arg("trials") = dispatch.trials, py::arg("dispatch_threads") = dispatch.threads,
           py::arg("seed") = dispatch.seed, py::arg("local_search") = dispatch.local_search,
           py::arg("longest_first") = dispatch.longest_first, py::arg("v_step") = dispatch.v_step,
           py::arg("candidate_overhead") = py::none())
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
