// The comparison of systems (Hydraulis §8): Megatron-LM-style fixed-length packing, HotSPa's length ranges,
// DynaPipe and sluice on the same batches, every iteration simulated; per-system runs and summaries.
#include <cstddef>
#include <optional>
#include <tuple>

#include "bindings.hpp"

namespace sluice::python {

namespace {

// One measure of every iteration of a run, as a fresh array: the run holds outcomes, not a vector of doubles.
py::array_t<double> series(const compare::SystemRun& run, double compare::IterationOutcome::*measure) {
  std::vector<double> values;
  values.reserve(run.iterations.size());
  for (const compare::IterationOutcome& outcome : run.iterations) values.push_back(outcome.*measure);
  return array_of<double>(values);
}

template <class Field>
py::array_t<std::int64_t> batch_column(const compare::Comparison& comparison, Field compare::BatchSize::*field) {
  std::vector<std::int64_t> values;
  values.reserve(comparison.batches.size());
  for (const compare::BatchSize& batch : comparison.batches) values.push_back(static_cast<std::int64_t>(batch.*field));
  return array_of<std::int64_t>(values);
}

}  // namespace

void bind_compare(py::module_& module) {
  py::class_<compare::IterationOutcome> outcome(module, "IterationOutcome", "One system's simulated iteration.");
  def_record_properties(outcome);

  // Before the records that hold one, so that their signatures name its class.
  py::class_<compare::IterationBound> bound_class(
      module, "IterationBound", "A lower bound on any plan's iteration time of one batch under the cost model.");
  def_record_properties(bound_class).def("__repr__", [](const compare::IterationBound& bound) {
    return sluice::concat("<sluice.IterationBound ", bound.seconds, " s>");
  });

  py::class_<compare::BatchSize> batch_size(module, "BatchSize",
                                            "What a compared batch held, and how fast any plan of it could run.");
  def_record_properties(batch_size).def(py::self == py::self);

  py::class_<compare::SystemRun> system_run(
      module, "SystemRun", "One system over the comparison's iterations, or why it cannot run the scenario.");
  def_record_properties(system_run)
      .def_property_readonly(
          "first",
          [](const py::object& self) {
            const compare::Timeline& first = self.cast<const compare::SystemRun&>().first;
            ListOf<std::tuple<std::string, schedule::Simulation>> pipelines;
            for (std::size_t j = 0; j < first.pipelines.size(); ++j)
              pipelines.append(py::make_tuple(
                  first.names[j], py::cast(&first.pipelines[j], py::return_value_policy::reference_internal, self)));
            return pipelines;
          },
          "Iteration 0's busy pipelines as (name, ScheduleSimulation) pairs (empty when the system failed)")
      .def("__repr__", [](const compare::SystemRun& run) {
        return "<sluice.SystemRun " + run.name + ": " +
               (run.failure ? "failed" : std::to_string(run.iterations.size()) + " iterations") + ">";
      });
  // One NumPy array per iteration outcome measure, an entry per iteration.
  for (const auto& [name, measure, doc] :
       {std::tuple{"seconds", &compare::IterationOutcome::seconds, "Per iteration, its simulated time"},
        std::tuple{"switching", &compare::IterationOutcome::switching,
                   "Per iteration, the seconds charged for layout moves"},
        std::tuple{"layout_move", &compare::IterationOutcome::layout_move,
                   "Per iteration, the layout moves' seconds before overlap"},
        std::tuple{"imbalance", &compare::IterationOutcome::imbalance,
                   "Per iteration, slowest / fastest busy pipeline"},
        std::tuple{"idle", &compare::IterationOutcome::idle, "Per iteration, the share of pipelines without work"},
        std::tuple{"micro_batch_imbalance", &compare::IterationOutcome::micro_batch_imbalance,
                   "Per iteration, WLB-LLM's imbalance degree between micro-batches"},
        std::tuple{"planning_seconds", &compare::IterationOutcome::planning_seconds,
                   "Per iteration, the measured wall-clock seconds spent planning it"}})
    system_run.def_property_readonly(
        name, [measure = measure](const compare::SystemRun& run) { return series(run, measure); }, doc);

  module.def(
      "lower_bound",
      [](const cost::Profile& profile, const py::handle& batch, bool cross_node_tp) {
        const std::vector<Sequence> sequences = batch_of_item(batch);
        const compare::Options options{.profile = profile, .context = 0, .tokens = 0, .cross_node_tp = cross_node_tp};
        const py::gil_scoped_release release;
        return compare::iteration_bound(options, sequences);
      },
      py::arg("profile"), py::arg("batch"), py::kw_only(), py::arg("cross_node_tp") = false,
      "A time no plan of `batch` (a sluice.Batch, a lengths array or an (ids, lengths) pair) beats on `profile`'s "
      "schemes (with its CP and AC schemes, and the same under ZeRO-3), as `sluice simulate` and `sluice plan` "
      "report it; None when no scheme holds one of its sequences.");

  py::class_<compare::Summary> summary(
      module, "Summary", "A system's statistics over the iterations: means and sample standard deviations.");
  def_record_properties(summary, {{"mean_seconds", "seconds"},
                                  {"stddev_seconds", "seconds_stddev"},
                                  {"mean_tokens_per_second", "tokens_per_second"},
                                  {"stddev_tokens_per_second", "tokens_per_second_stddev"},
                                  {"switching_seconds", "switching"},
                                  {"layout_move_seconds", "layout_move"},
                                  {"mean_planning_seconds", "planning_seconds"}});

  py::class_<compare::Comparison> comparison_class(module, "Comparison",
                                                   "The systems on the same batches, in system_names() order.");
  comparison_class
      .def_property_readonly("systems",
                             [](const py::object& self) {
                               py::list list;
                               for (const compare::SystemRun& run : self.cast<const compare::Comparison&>().systems)
                                 list.append(py::cast(&run, py::return_value_policy::reference_internal, self));
                               return list;
                             })
      .def(
          "__getitem__",
          [](const py::object& self, std::string_view name) {
            for (const compare::SystemRun& run : self.cast<const compare::Comparison&>().systems)
              if (run.name == name) return py::cast(&run, py::return_value_policy::reference_internal, self);
            throw py::key_error(std::string(name));
          },
          py::arg("name"), "The run of a system by name (one of system_names()).")
      .def_property_readonly(
          "batch_sequences",
          [](const compare::Comparison& value) { return batch_column(value, &compare::BatchSize::sequences); },
          "Per iteration, the batch's sequence count")
      .def_property_readonly(
          "batch_tokens",
          [](const compare::Comparison& value) { return batch_column(value, &compare::BatchSize::tokens); },
          "Per iteration, the batch's tokens")
      .def_property_readonly(
          "lower_bounds",
          [](const compare::Comparison& value) {
            std::vector<std::optional<compare::IterationBound>> bounds;
            for (const compare::BatchSize& batch : value.batches) bounds.push_back(batch.lower_bound);
            return bounds;
          },
          "Per iteration, a lower bound no plan of its batch beats (IterationBound; None where no scheme holds one "
          "of its sequences)")
      .def_readonly("candidates", &compare::Comparison::candidates, "sluice's candidate strategies")
      .def_property_readonly("bounds", member_getter(&compare::Comparison::bounds),
                             "HotSPa's length ranges' upper bounds: (0, b0], (b0, b1], … (a read-only view)")
      .def_property_readonly("any_ran", &compare::Comparison::any_ran)
      .def(
          "summarize",
          [](const compare::Comparison& comparison) {
            const compare::BySystem<compare::Summary> summaries = compare::summarize(comparison);
            py::dict result;
            for (const compare::System system : compare::all_systems)
              if (!comparison.systems[system].failure)
                result[py::str(std::string(compare::name(system)))] = summaries[system];
            return result;
          },
          "Each system's summary by name (systems that failed are left out).")
      .def("__repr__", [](const compare::Comparison& comparison) {
        return "<sluice.Comparison of " + std::to_string(comparison.batches.size()) + " iterations>";
      });
  def_document(comparison_class);

  module.def(
      "system_names",
      [] {
        std::vector<std::string> names;
        for (const compare::System system : compare::all_systems) names.emplace_back(compare::name(system));
        return names;
      },
      "The compared systems' names, in the order results list them.");

  // compare::Options' defaults (it has no default constructor: its profile has none): its own fields' are false
  // and 0, its problem's that of its struct, its dispatch's seeded with `seed` as `sluice simulate --seed` seeds it.
  module.def(
      "compare_systems",
      [](const cost::Profile& profile, const data::LengthDataset& dataset, std::int64_t tokens,
         std::optional<std::int64_t> iterations, const py::handle& batches, std::optional<std::int64_t> context,
         bool cross_node_tp, const schedule::ProblemOptions& problem,
         const std::optional<assign::DispatchOptions>& dispatch, std::uint64_t seed) {
        const bool sampled = batches.is_none();
        std::vector<std::vector<Sequence>> given;
        if (!sampled) {
          sluice::require(!iterations,
                          "compare: iterations and batches cannot be combined: each batch is one iteration");
          for (const py::handle item : py::iter(batches)) given.push_back(batch_of_item(item));
        }
        const std::int64_t count = iterations.value_or(10);  // sluice simulate's default
        sluice::require(count > 0, "compare: iterations must be > 0, got ", count);
        // sluice tries the V step both ways in a comparison: a dispatch's own would be silently ignored.
        sluice::require(!dispatch || dispatch->v_step == assign::DispatchOptions{}.v_step,
                        "compare: dispatch.v_step is sluice's own choice; leave it at its default");
        assign::DispatchOptions seeded;
        seeded.seed = seed;
        compare::Options options{.profile = profile,
                                 .context = 0,
                                 .tokens = tokens,
                                 .cross_node_tp = cross_node_tp,
                                 .problem = problem,
                                 .dispatch = dispatch.value_or(seeded),
                                 .seed = seed};
        const py::gil_scoped_release release;
        proposal::ProposeOptions usable;
        usable.gpus = profile.gpus();
        usable.tp_within_node = !cross_node_tp;
        options.context = context ? *context : proposal::default_max_len(dataset, profile, usable);
        const data::LengthDataset truncated = dataset.truncated(options.context);
        if (!sampled) return compare::compare_systems(options, truncated, Span<const std::vector<Sequence>>(given));
        data::BatchSampler sampler(truncated, {.tokens_per_batch = tokens, .seed = seed});
        return compare::compare_systems(options, truncated, static_cast<std::size_t>(count),
                                        [&] { return sampler.next().sequences; });
      },
      py::arg("profile"), py::arg("dataset"), py::kw_only(), py::arg("tokens"), py::arg("iterations") = py::none(),
      py::arg("batches") = py::none(), py::arg("context") = py::none(), py::arg("cross_node_tp") = false,
      py::arg("problem") = schedule::ProblemOptions{}, py::arg("dispatch") = py::none(),
      py::arg("seed") = std::uint64_t{0},
      "Megatron-LM, HotSPa, DynaPipe and sluice on the same batches of `dataset` (truncated to `context`; default: "
      "its longest sequence, or the longest MaxLen of a usable scheme when shorter), each iteration simulated. The "
      "batches are `iterations` (default 10) batches of at most `tokens` tokens sampled with `seed`, as `sluice "
      "simulate` draws them, or the given `batches` (sluice.Batch, lengths arrays or (ids, lengths) pairs). "
      "`tokens` also normalises sluice's proposal. `problem` (ProblemOptions) shapes every simulated pipeline; "
      "`dispatch` (DispatchOptions; default: DispatchOptions(seed=seed)) is sluice's; seed also seeds the "
      "schedule search.");
}

}  // namespace sluice::python
