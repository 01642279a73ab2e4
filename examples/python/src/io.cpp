// The command-line tool's reports whose fields are described by io::record tables (`sluice fit`, `sluice inspect`,
// `sluice plan`, `sluice simulate`, `sluice trace`, `sluice schedule`, `sluice shard`), as classes that
// sluice.read_document returns: properties from the tables, the documents' own readers and writers.
#include "bindings.hpp"

namespace sluice::python {

void bind_io(py::module_& module) {
  // ---- sluice fit ------------------------------------------------------------------------------------------
  py::class_<io::FitRunMemory> memory(module, "FitRunMemory", "A scheme's fitted peak memory: fixed + per token.");
  def_record_properties(memory).def(py::self == py::self);

  py::class_<io::FitRunScheme> fit_scheme(module, "FitRunScheme", "One scheme's fit in a `sluice fit` report.");
  def_record_properties(fit_scheme)
      .def_property_readonly("usable", &io::FitRunScheme::usable, "Whether the fitted profile keeps the scheme")
      .def(py::self == py::self);

  py::class_<io::FitRun> fit_run(module, "FitRun", "The report of `sluice fit`: per scheme its fit, and the profile.");
  def_record_properties(fit_run);
  def_document(fit_run);

  // ---- sluice inspect --------------------------------------------------------------------------------------
  py::class_<io::InspectTime> inspect_time(
      module, "InspectTime", "A scheme's forward+backward time of one stage at a length, and whether it fits.");
  def_record_properties(inspect_time).def(py::self == py::self);

  py::class_<io::InspectScheme> inspect_scheme(module, "InspectScheme",
                                               "A scheme of the profile and its times at inspect lengths.");
  def_record_properties(inspect_scheme).def(py::self == py::self);

  py::class_<io::InspectDataset> inspect_dataset(module, "InspectDataset", "The dataset's statistics and histogram.");
  def_record_properties(inspect_dataset).def(py::self == py::self);

  py::class_<io::InspectProfile> inspect_profile(module, "InspectProfile", "The profile's model and schemes.");
  def_record_properties(inspect_profile).def(py::self == py::self);

  py::class_<io::InspectFit> inspect_fit(module, "InspectFit", "The quadratic fitted to a derived scheme's times.");
  def_record_properties(inspect_fit).def(py::self == py::self);

  py::class_<io::InspectCpScheme> inspect_cp_scheme(module, "InspectCpScheme",
                                                    "A scheme derived with context parallelism.");
  def_record_properties(inspect_cp_scheme).def(py::self == py::self);

  py::class_<io::InspectContextParallel> inspect_cp(
      module, "InspectContextParallel", "The schemes `sluice inspect --cp` derived with context parallelism.");
  def_record_properties(inspect_cp).def(py::self == py::self);

  py::class_<io::Inspect> inspect(
      module, "Inspect",
      "The report of `sluice inspect --json`: the dataset's statistics, the profile's schemes with their times, and "
      "with --cp each scheme derived with context parallelism.");
  def_record_properties(inspect);
  def_document(inspect);

  // ---- sluice plan -----------------------------------------------------------------------------------------
  py::class_<io::PlanRunIteration> plan_iteration(
      module, "PlanRunIteration",
      "One iteration of a `sluice plan` report: its batch, the plan kept and its ranks, and the flex CP domains' "
      "plan where the planner offers them.");
  def_record_properties(plan_iteration)
      .def_property_readonly("total", &io::PlanRunIteration::total,
                             "What the plan was chosen by: makespan + layout move, or the flex CP plan's total")
      .def_property_readonly("runs_flex", &io::PlanRunIteration::runs_flex, "Whether the flex CP plan runs")
      .def_property_readonly("ran", &io::PlanRunIteration::ran, "The name of what ran, as the summary counts it")
      .def(py::self == py::self);

  py::class_<io::PlanRunSummary> plan_summary(module, "PlanRunSummary", "The iterations of a `sluice plan` report.");
  def_record_properties(plan_summary).def(py::self == py::self);

  py::class_<io::PlanRun> plan_run(module, "PlanRun",
                                   "The report of `sluice plan`: per iteration its batch's plan, and their summary.");
  def_record_properties(plan_run);
  def_document(plan_run);

  // ---- sluice simulate -------------------------------------------------------------------------------------
  py::class_<io::SimulateRunSystem> simulate_system(
      module, "SimulateRunSystem", "One system of a `sluice simulate` report: its iterations and their summary.");
  def_record_properties(simulate_system).def(py::self == py::self);

  py::class_<io::SimulateRunLink> simulate_link(module, "SimulateRunLink", "The stage-to-stage link: α and 1/β.");
  def_record_properties(simulate_link).def(py::self == py::self);

  py::class_<io::SimulateRun> simulate_run(
      module, "SimulateRun",
      "The report of `sluice simulate`: every system on the same batches, in system_names() order.");
  def_record_properties(simulate_run);
  def_document(simulate_run);

  // ---- sluice trace ----------------------------------------------------------------------------------------
  py::class_<io::TraceRunCandidate> trace_candidate(module, "TraceRunCandidate",
                                                    "One candidate of a `sluice trace` report.");
  def_record_properties(trace_candidate).def(py::self == py::self);

  py::class_<io::TraceRunPipeline> trace_pipeline(module, "TraceRunPipeline",
                                                  "One busy pipeline of the kept plan, as scheduled.");
  def_record_properties(trace_pipeline).def(py::self == py::self);

  py::class_<io::TraceRun> trace_run(
      module, "TraceRun",
      "The report of `sluice trace`: one iteration planned over every candidate, the fastest kept.");
  def_record_properties(trace_run);
  def_document(trace_run);

  // ---- sluice schedule -------------------------------------------------------------------------------------
  py::class_<io::ScheduleRunSchedule> schedule(module, "ScheduleRunSchedule",
                                               "One replica's schedule in a `sluice schedule` report.");
  def_record_properties(schedule).def(py::self == py::self);

  py::class_<io::ScheduleRunReplica>(module, "ScheduleRunReplica", "One data-parallel replica and its schedule.")
      .def_property_readonly("micro_batches", member_getter(&io::ScheduleRunReplica::micro_batches),
                             "Indices into the partition")
      .def_readonly("schedule", &io::ScheduleRunReplica::schedule, "None: the replica got no micro-batch")
      .def(py::self == py::self);

  py::class_<io::ScheduleRunBaseline> baseline(module, "ScheduleRunBaseline",
                                               "A baseline schedule of the same mini-batch, or why it cannot run.");
  def_record_properties(baseline).def(py::self == py::self);

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
  def_record_properties(shard_run);
  def_document(shard_run);
}

}  // namespace sluice::python
