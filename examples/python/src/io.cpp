// The command-line tool's reports whose fields are described by io::record tables (`sluice fit`, `sluice schedule`,
// `sluice shard`), as classes that sluice.read_document returns: properties from the tables, the documents' own
// readers and writers.
#include "bindings.hpp"

namespace sluice::python {

void bind_io(py::module_& module) {
  // ---- sluice fit ------------------------------------------------------------------------------------------
  py::class_<io::FitRunMemory> memory(module, "FitRunMemory", "A scheme's fitted peak memory: fixed + per token.");
  def_record_properties(memory).def(py::self == py::self);

  py::class_<io::FitRunScheme>(module, "FitRunScheme", "One scheme's fit in a `sluice fit` report.")
      .def_readonly("scheme", &io::FitRunScheme::scheme)
      .def_readonly("samples", &io::FitRunScheme::samples)
      .def_readonly("latency", &io::FitRunScheme::latency)
      .def_readonly("latency_error", &io::FitRunScheme::latency_error, "The latency fit's relative RMS error")
      .def_readonly("memory", &io::FitRunScheme::memory, "None when the samples carry no peak bytes")
      .def_readonly("max_len", &io::FitRunScheme::max_len, "None when the scheme is not usable")
      .def_readonly("util_len", &io::FitRunScheme::util_len, "None when the scheme is not usable")
      .def_property_readonly("usable", &io::FitRunScheme::usable)
      .def(py::self == py::self);

  py::class_<io::FitRun> fit_run(module, "FitRun", "The report of `sluice fit`: per scheme its fit, and the profile.");
  def_record_properties(fit_run, {{"samples", "The samples file"},
                                  {"base", "The base profile's name"},
                                  {"out", "Where the profile was written; None: not written"}});
  def_document(fit_run);

  // ---- sluice schedule -------------------------------------------------------------------------------------
  py::class_<io::ScheduleRunSchedule> schedule(module, "ScheduleRunSchedule",
                                               "One replica's schedule in a `sluice schedule` report.");
  def_record_properties(
      schedule, {{"peak_memory", "Bytes per stage"}, {"idle", "Seconds per stage"}, {"candidates", "Orders simulated"}})
      .def(py::self == py::self);

  py::class_<io::ScheduleRunReplica>(module, "ScheduleRunReplica", "One data-parallel replica and its schedule.")
      .def_property_readonly("micro_batches", member_getter(&io::ScheduleRunReplica::micro_batches),
                             "Indices into the partition")
      .def_readonly("schedule", &io::ScheduleRunReplica::schedule, "None: the replica got no micro-batch")
      .def(py::self == py::self);

  py::class_<io::ScheduleRunBaseline> baseline(module, "ScheduleRunBaseline",
                                               "A baseline schedule of the same mini-batch, or why it cannot run.");
  def_record_properties(baseline, {{"failure", "Empty when it runs"}}).def(py::self == py::self);

  py::class_<io::ScheduleRun> schedule_run(
      module, "ScheduleRun", "The report of `sluice schedule`: DynaPipe's plan of one mini-batch and baselines.");
  def_record_properties(schedule_run).def_property_readonly("tokens_per_second", &io::ScheduleRun::tokens_per_second);
  def_document(schedule_run);

  // ---- sluice shard ----------------------------------------------------------------------------------------
  py::class_<io::ShardRunBlock> shard_run_block(module, "ShardRunBlock",
                                                "Layers whose tensors are cut into the same slices.");
  def_record_properties(shard_run_block).def(py::self == py::self);

  py::class_<io::ShardRun> shard_run(
      module, "ShardRun",
      "The report of `sluice shard`: a strategy's placement, its optimizer layout, the pull and push plans' sizes "
      "and cost, and the plans themselves where the report holds them.");
  def_record_properties(shard_run, {{"previous", "The strategy whose layout the optimizer keeps; None: fully sharded"},
                                    {"placement", "None unless the report holds the full plans (all four or none)"}});
  def_document(shard_run);
}

}  // namespace sluice::python
