// DynaPipe's micro-batch partition and replica balancing, pipeline schedules (orders, the simulator, per-rank
// instruction lists, the deadlock check) and DynaPipe's whole pipeline planner.
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "bindings.hpp"

namespace sluice::python {

namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

std::vector<int> ints_from(const py::handle& values, std::string_view what) {
  std::vector<int> result;
  for (const std::int64_t value : integers_from(values, what)) {
    sluice::require(value >= std::numeric_limits<int>::min() && value <= std::numeric_limits<int>::max(), what, ": ",
                    value, " is past the int range");
    result.push_back(static_cast<int>(value));
  }
  return result;
}

// The samples of a batch: lengths as inputs, with optional ids (default positions) and targets (default 0).
std::vector<microbatch::Sample> samples_from(const py::handle& lengths, const py::handle& ids,
                                             const py::handle& targets) {
  std::vector<microbatch::Sample> samples = microbatch::samples_of(batch_from(lengths, ids));
  if (!targets.is_none()) {
    const std::vector<std::int64_t> values = integers_from(targets, "targets");
    sluice::require(values.size() == samples.size(), "targets: ", values.size(), " targets for ", samples.size(),
                    " lengths");
    for (std::size_t i = 0; i < samples.size(); ++i) samples[i].target = values[i];
  }
  return samples;
}

// One cost model or a list of them (recomputation levels, tried in order).
std::vector<microbatch::QuadraticStageCost> models_from(const py::handle& models) {
  if (py::isinstance<microbatch::QuadraticStageCost>(models)) return {models.cast<microbatch::QuadraticStageCost>()};
  return models.cast<std::vector<microbatch::QuadraticStageCost>>();
}

// The samples in `ordering`, or as given for None.
std::vector<microbatch::Sample> ordered(std::vector<microbatch::Sample> samples,
                                        const std::optional<std::string>& ordering) {
  if (!ordering) return samples;
  return microbatch::order_samples(samples, microbatch::ordering_from(*ordering));
}

template <class T>
ListOf<ListOf<T>> nested_list(const std::vector<std::vector<T>>& values, const py::handle& owner) {
  ListOf<ListOf<T>> list;
  for (const auto& inner : values) list.append(internal_list(inner, owner));
  return list;
}

void bind_microbatch(py::module_& module) {
  py::class_<microbatch::QuadraticStageCost>(
      module, "StageCost",
      "A micro-batch's time on one stage, rows·(a·L² + b·L) + c with L = input + target, and its activation bytes, "
      "bytes_per_token per row token.")
      .def(py::init<cost::QuadraticLatency, double>(), py::arg("latency"), py::arg("bytes_per_token"))
      .def_property_readonly("latency", &microbatch::QuadraticStageCost::latency)
      .def_property_readonly("bytes_per_token", &microbatch::QuadraticStageCost::bytes_per_token)
      .def(
          "seconds",
          [](const microbatch::QuadraticStageCost& model, std::int64_t rows, std::int64_t input, std::int64_t target) {
            return model.seconds({rows, input, target});
          },
          py::arg("rows"), py::arg("input"), py::arg("target") = 0)
      .def(
          "bytes",
          [](const microbatch::QuadraticStageCost& model, std::int64_t rows, std::int64_t input, std::int64_t target) {
            return model.bytes({rows, input, target});
          },
          py::arg("rows"), py::arg("input"), py::arg("target") = 0);

  py::class_<microbatch::StageCostSetup>(module, "StageCostSetup", "A profile's scheme as the micro-batch DP sees it.")
      .def_readonly("model", &microbatch::StageCostSetup::model)
      .def_readonly("memory_limit", &microbatch::StageCostSetup::memory_limit,
                    "Activation bytes per micro-batch under 1F1B: (budget − model states) / PP.")
      .def_readonly("last_stage", &microbatch::StageCostSetup::last_stage,
                    "The scheme's last-stage work, plan_pipeline's last_stage.");
  module.def("stage_cost", &microbatch::stage_cost, py::arg("scheme"),
             "The stage cost and per-micro-batch memory limit of a profile's scheme (Profile.at(scheme)).");

  py::class_<microbatch::Shape> shape(module, "MicroBatchShape", "`rows` rows of `input` + `target` tokens each.");
  def_record_properties(shape).def(py::self == py::self);

  py::class_<microbatch::ShapedMicroBatch> shaped(
      module, "ShapedMicroBatch", "One of DynaPipe's micro-batches: samples in rows, padded to a shape.");
  def_record_properties(shaped, {{"samples", "sample_ids"}}).def(py::self == py::self);

  py::class_<microbatch::Partition> partition(module, "MicroBatchPartition",
                                              "A mini-batch cut into micro-batches (DynaPipe §4).");
  partition
      .def_property_readonly(
          "layout", [](const microbatch::Partition& value) { return std::string(microbatch::name(value.layout)); },
          "'padded', 'packed' or 'fixed_rows'.")
      .def_property_readonly("micro_batches", member_getter(&microbatch::Partition::micro_batches))
      .def_readonly("objective", &microbatch::Partition::objective,
                    "(stages − 1)·max t + Σ t / replicas over the micro-batches.")
      .def_readonly("cost_model", &microbatch::Partition::cost_model, "Index of the cost model it was planned with.")
      .def_property_readonly(
          "times",
          [](const microbatch::Partition& value) { return array_of<double>(microbatch::micro_batch_times(value)); },
          "The micro-batches' seconds, as the replica balancers take them.")
      .def(
          "validate",
          [](const microbatch::Partition& value, const py::handle& lengths, const py::handle& models,
             const py::handle& ids, const py::handle& targets, int stages, int replicas, double memory_limit) {
            const std::vector<microbatch::Sample> samples = samples_from(lengths, ids, targets);
            const std::vector<microbatch::QuadraticStageCost> costs = models_from(models);
            const py::gil_scoped_release release;
            microbatch::validate(value, Span<const microbatch::Sample>(samples),
                                 Span<const microbatch::QuadraticStageCost>(costs),
                                 {.stages = stages, .replicas = replicas, .memory_limit = memory_limit});
          },
          py::arg("lengths"), py::arg("models"), py::kw_only(), py::arg("ids") = py::none(),
          py::arg("targets") = py::none(), py::arg("stages") = 1, py::arg("replicas") = 1,
          py::arg("memory_limit") = infinity,
          "Raises InvalidPlan naming the first broken invariant against the samples, cost models and context.");
  def_document(partition);

  py::class_<microbatch::ReplicaAssignment> assignment(
      module, "ReplicaAssignment", "Micro-batches split among data-parallel replicas: indices and summed seconds.");
  assignment
      .def_property_readonly("replicas",
                             [](const py::object& self) {
                               py::list list;
                               for (const auto& indices : self.cast<const microbatch::ReplicaAssignment&>().replicas)
                                 list.append(view_of<std::size_t>(indices, self));
                               return list;
                             })
      .def_property_readonly("loads", member_getter(&microbatch::ReplicaAssignment::loads))
      .def_readonly("max_load", &microbatch::ReplicaAssignment::max_load)
      .def(
          "validate",
          [](const microbatch::ReplicaAssignment& value, const py::handle& times, int replicas) {
            const std::vector<double> seconds = real_vector_from(times, "times");
            microbatch::validate(value, seconds, replicas);
          },
          py::arg("times"), py::arg("replicas"), "Raises InvalidPlan naming the first broken invariant.");
  def_document(assignment);
  module.def(
      "balance_kk",
      [](const py::handle& times, int replicas) {
        const std::vector<double> seconds = real_vector_from(times, "times");
        const py::gil_scoped_release release;
        return microbatch::balance_kk(seconds, replicas);
      },
      py::arg("times"), py::arg("replicas"),
      "Karmarkar–Karp largest differencing: micro-batch times split among replicas, the largest sum minimised.");
  module.def(
      "balance_lpt",
      [](const py::handle& times, int replicas) {
        const std::vector<double> seconds = real_vector_from(times, "times");
        const py::gil_scoped_release release;
        return microbatch::balance_lpt(seconds, replicas);
      },
      py::arg("times"), py::arg("replicas"), "Greedy longest-processing-time-first balancing of micro-batch times.");

  const microbatch::PartitionOptions options;
  module.def(
      "partition_micro_batches",
      [](const py::handle& lengths, const py::handle& models, const py::handle& ids, const py::handle& targets,
         const std::optional<std::string>& ordering, int stages, int replicas, double memory_limit,
         std::string_view layout, double tmax_interval) {
        const std::vector<microbatch::Sample> samples = ordered(samples_from(lengths, ids, targets), ordering);
        const std::vector<microbatch::QuadraticStageCost> costs = models_from(models);
        const microbatch::PartitionOptions settings{.stages = stages,
                                                    .replicas = replicas,
                                                    .memory_limit = memory_limit,
                                                    .layout = microbatch::layout_from(layout, "layout"),
                                                    .tmax_interval = tmax_interval};
        const py::gil_scoped_release release;
        return microbatch::partition(Span<const microbatch::Sample>(samples),
                                     Span<const microbatch::QuadraticStageCost>(costs), settings);
      },
      py::arg("lengths"), py::arg("models"), py::kw_only(), py::arg("ids") = py::none(),
      py::arg("targets") = py::none(), py::arg("ordering") = "length", py::arg("stages") = options.stages,
      py::arg("replicas") = options.replicas, py::arg("memory_limit") = options.memory_limit,
      py::arg("layout") = std::string(microbatch::name(options.layout)),
      py::arg("tmax_interval") = options.tmax_interval,
      "DynaPipe's micro-batch DP: the samples, ordered ('length', 'input_target', 'path'; None: as given), cut into "
      "micro-batches minimising (stages − 1)·max t + Σ t / replicas within memory_limit bytes per micro-batch, "
      "with the first cost model under which every sample fits.");
  module.def(
      "token_based_micro_batches",
      [](const py::handle& lengths, const microbatch::QuadraticStageCost& model, std::int64_t tokens_per_micro_batch,
         const py::handle& ids, const py::handle& targets, const std::optional<std::string>& ordering, int stages,
         int replicas, double memory_limit) {
        const std::vector<microbatch::Sample> samples = ordered(samples_from(lengths, ids, targets), ordering);
        const py::gil_scoped_release release;
        return microbatch::token_based(Span<const microbatch::Sample>(samples), model, tokens_per_micro_batch,
                                       {.stages = stages, .replicas = replicas, .memory_limit = memory_limit});
      },
      py::arg("lengths"), py::arg("model"), py::kw_only(), py::arg("tokens_per_micro_batch"),
      py::arg("ids") = py::none(), py::arg("targets") = py::none(), py::arg("ordering") = "length",
      py::arg("stages") = 1, py::arg("replicas") = 1, py::arg("memory_limit") = infinity,
      "The token-based baseline: a micro-batch grows while rows × longest stays within tokens_per_micro_batch.");
  module.def(
      "fixed_length_packing",
      [](const py::handle& lengths, const microbatch::QuadraticStageCost& model, std::int64_t row_input,
         std::int64_t row_target, std::int64_t rows, const py::handle& ids, const py::handle& targets, int stages,
         int replicas, double memory_limit) {
        const std::vector<microbatch::Sample> samples = samples_from(lengths, ids, targets);
        const py::gil_scoped_release release;
        return microbatch::fixed_length_packing(Span<const microbatch::Sample>(samples), model,
                                                {.input = row_input, .target = row_target, .rows = rows},
                                                {.stages = stages, .replicas = replicas, .memory_limit = memory_limit});
      },
      py::arg("lengths"), py::arg("model"), py::kw_only(), py::arg("row_input"), py::arg("row_target") = 0,
      py::arg("rows") = 1, py::arg("ids") = py::none(), py::arg("targets") = py::none(), py::arg("stages") = 1,
      py::arg("replicas") = 1, py::arg("memory_limit") = infinity,
      "The Megatron-LM-style baseline: samples packed first-fit decreasing into rows of row_input + row_target "
      "tokens, `rows` rows per micro-batch.");
}

void bind_pipeline(py::module_& module) {
  py::class_<schedule::MicroBatchCost> micro_batch_cost(
      module, "MicroBatchCost", "One micro-batch per stage: forward and backward seconds, activation bytes.");
  def_record_properties(micro_batch_cost).def(py::self == py::self);

  py::class_<schedule::Problem> problem_class(
      module, "SchedulingProblem",
      "One pipeline's scheduling problem: per micro-batch and stage its costs, per stage its activation memory "
      "limit, and the link between stages.");
  problem_class
      .def(py::init([](const py::handle& forward, const py::handle& backward, const py::handle& activation,
                       const py::handle& tokens, const py::handle& memory_limit, std::int64_t hidden, int element_bytes,
                       double latency, double bandwidth) {
             const py::array_t<double> f = reals_from(forward, "forward", 2);
             const py::array_t<double> b = reals_from(backward, "backward", 2);
             const py::array_t<double> a = reals_from(activation, "activation", 2);
             const std::vector<std::int64_t> rows = integers_from(tokens, "tokens");
             sluice::require(f.shape(0) == static_cast<py::ssize_t>(rows.size()) && b.shape(0) == f.shape(0) &&
                                 a.shape(0) == f.shape(0) && b.shape(1) == f.shape(1) && a.shape(1) == f.shape(1),
                             "schedule problem: forward, backward and activation must all be micro-batches × stages "
                             "with one tokens entry per micro-batch");
             schedule::Problem problem;
             problem.stages = static_cast<int>(f.shape(1));
             for (py::ssize_t i = 0; i < f.shape(0); ++i) {
               const auto row = [i](const py::array_t<double>& m) {
                 return std::vector<double>(m.data(i, 0), m.data(i, 0) + m.shape(1));
               };
               problem.micro_batches.push_back({row(f), row(b), row(a), rows[static_cast<std::size_t>(i)]});
             }
             problem.memory_limit = real_vector_from(memory_limit, "memory_limit");
             problem.hidden = hidden;
             problem.element_bytes = element_bytes;
             problem.link = {.latency = latency, .bandwidth = bandwidth};
             schedule::require_problem(problem);
             return problem;
           }),
           py::arg("forward"), py::arg("backward"), py::arg("activation"), py::arg("tokens"), py::arg("memory_limit"),
           py::kw_only(), py::arg("hidden") = 1, py::arg("element_bytes") = 2, py::arg("latency") = 0.0,
           py::arg("bandwidth") = infinity,
           "forward, backward, activation: micro-batches × stages arrays; tokens: the rows of each micro-batch's "
           "boundary tensor (of `hidden` elements of element_bytes each); memory_limit: bytes per stage.")
      .def_readonly("stages", &schedule::Problem::stages)
      .def_property_readonly("micro_batches", member_getter(&schedule::Problem::micro_batches))
      .def_property_readonly("memory_limit", member_getter(&schedule::Problem::memory_limit))
      .def_readonly("hidden", &schedule::Problem::hidden)
      .def_readonly("element_bytes", &schedule::Problem::element_bytes)
      .def_readonly("link", &schedule::Problem::link);
  def_document(problem_class);

  py::class_<schedule::Order> order_class(
      module, "ScheduleOrder", "Per stage, the order of its ops: (micro_batch, 'forward' | 'backward') pairs.");
  order_class
      .def(py::init([](const std::vector<std::vector<std::pair<int, std::string>>>& stages) {
             schedule::Order order;
             for (const auto& ops : stages) {
               auto& list = order.stages.emplace_back();
               for (const auto& [micro_batch, pass] : ops)
                 list.push_back({micro_batch, value_in(schedule::pass_names, pass, "order: pass")});
             }
             return order;
           }),
           py::arg("stages"))
      .def_property_readonly("stages",
                             [](const schedule::Order& order) {
                               py::list stages;
                               for (const auto& ops : order.stages) {
                                 py::list list;
                                 for (const schedule::Op& op : ops)
                                   list.append(py::make_tuple(op.micro_batch, std::string(schedule::name(op.pass))));
                                 stages.append(list);
                               }
                               return stages;
                             })
      .def(
          "validate",
          [](const schedule::Order& order, int micro_batches, int stages) {
            schedule::validate(order, micro_batches, stages);
          },
          py::arg("micro_batches"), py::arg("stages"),
          "Raises InvalidPlan unless every op runs once, forward first, and the stages never wait forever.");
  def_document(order_class);
  module.def(
      "one_f_one_b_order",
      [](const py::handle& injection, int stages) {
        return schedule::one_f_one_b(ints_from(injection, "injection"), stages);
      },
      py::arg("injection"), py::arg("stages"), "1F1B with the micro-batches injected in `injection` order.");
  module.def(
      "gpipe_order",
      [](const py::handle& injection, int stages) {
        return schedule::gpipe(ints_from(injection, "injection"), stages);
      },
      py::arg("injection"), py::arg("stages"), "All forwards in injection order, then all backwards in reverse.");
  module.def(
      "adaptive_cyclic_order",
      [](const schedule::Problem& problem, const py::handle& injection, const py::handle& limits) {
        const std::vector<int> order = ints_from(injection, "injection");
        const std::vector<double> bounds = limits.is_none() ? problem.memory_limit : real_vector_from(limits, "limits");
        const py::gil_scoped_release release;
        return schedule::adaptive_cyclic(problem, order, bounds);
      },
      py::arg("problem"), py::arg("injection"), py::arg("limits") = py::none(),
      "DynaPipe's adaptive cyclic order (Alg. 1) under per-stage activation limits (default: the problem's).");

  // The JSON's "pass" is a Python keyword.
  py::class_<schedule::OpTiming> op_timing(module, "OpTiming",
                                           "One simulated op: when it ran and when its output arrived.");
  def_record_properties(op_timing, {{"pass", "kind"}}).def(py::self == py::self);

  py::class_<schedule::Simulation> simulation_class(module, "ScheduleSimulation",
                                                    "Per-stage timelines of an order, simulated.");
  simulation_class
      .def_property_readonly(
          "stages",
          [](const py::object& self) { return nested_list(self.cast<const schedule::Simulation&>().stages, self); })
      .def_readonly("makespan", &schedule::Simulation::makespan)
      .def_property_readonly("peak_memory", member_getter(&schedule::Simulation::peak_memory))
      .def_property_readonly("idle", member_getter(&schedule::Simulation::idle))
      // schedule::validate has function templates among its overloads, which py::overload_cast cannot pick from.
      .def("validate",
           static_cast<void (*)(const schedule::Simulation&, const schedule::Problem&, const schedule::Order&)>(
               &schedule::validate),
           without_gil, py::arg("problem"), py::arg("order"), "Raises InvalidPlan naming the first broken invariant.");
  def_document(simulation_class);
  module.def("simulate_schedule", &schedule::simulate, without_gil, py::arg("problem"), py::arg("order"),
             "Event-driven simulation of the stage orders: per stage its ops' times, the makespan and peak memory.");

  py::class_<schedule::Instruction>(module, "Instruction", "One instruction of a rank's list.")
      .def_property_readonly(
          "kind", [](const schedule::Instruction& in) { return std::string(schedule::name(in.kind)); },
          "'load_input', 'forward', 'backward', 'free_buffer', or a send/recv start/wait.")
      .def_readonly("micro_batch", &schedule::Instruction::micro_batch)
      .def_readonly("stage", &schedule::Instruction::stage)
      .def_readonly("peer", &schedule::Instruction::peer, "-1 unless it communicates.")
      .def_readonly("buffer", &schedule::Instruction::buffer)
      .def_readonly("output", &schedule::Instruction::output)
      .def_property_readonly(
          "shape", [](const schedule::Instruction& in) { return py::make_tuple(in.shape.rows, in.shape.cols); },
          "(rows, cols) of the tensor it moves, computes or frees.")
      .def("__repr__",
           [](const schedule::Instruction& in) {
             return sluice::concat("<sluice.Instruction ", schedule::name(in.kind), " micro_batch=", in.micro_batch,
                                   " stage=", in.stage, " peer=", in.peer, ">");
           })
      .def(py::self == py::self);

  py::class_<schedule::ExecutionPlan> plan(module, "ExecutionPlan",
                                           "Per-rank instruction lists of one pipeline; rank j runs stage j.");
  def_record_properties(plan)
      .def_property_readonly(
          "ranks",
          [](const py::object& self) { return nested_list(self.cast<const schedule::ExecutionPlan&>().ranks, self); })
      .def("validate",
           static_cast<void (*)(const schedule::ExecutionPlan&, const schedule::Problem&)>(&schedule::validate),
           without_gil, py::arg("problem"),
           "Raises InvalidPlan naming the first broken invariant (shapes, slots, NCCL pairing, memory).");
  def_document(plan);

  py::class_<schedule::DeadlockReport>(module, "DeadlockReport", "What a dry run of a plan's communication found.")
      .def_property_readonly(
          "outcome",
          [](const schedule::DeadlockReport& report) {
            static constexpr std::string_view names[] = {"completes", "deadlock", "mismatch", "unmatched"};
            return std::string(names[static_cast<std::size_t>(report.outcome)]);
          },
          "'completes', 'deadlock', 'mismatch' or 'unmatched'.")
      .def_readonly("cycle", &schedule::DeadlockReport::cycle, "For a deadlock: ranks each waiting on the next.")
      .def_readonly("message", &schedule::DeadlockReport::message)
      .def_property_readonly("ok", &schedule::DeadlockReport::ok);
  module.def(
      "check_deadlock", &schedule::check_deadlock, without_gil, py::arg("plan"),
      "Dry-runs the plan's sends and receives under NCCL's rules. Raises InvalidPlan for a plan it cannot run at all.");

  py::class_<schedule::PipelineSchedule> pipeline_schedule_class(
      module, "PipelineSchedule", "One pipeline's schedule: order, simulation and per-rank instructions.");
  def_record_properties(pipeline_schedule_class)
      .def("validate",
           static_cast<void (*)(const schedule::PipelineSchedule&, const schedule::Problem&)>(&schedule::validate),
           without_gil, py::arg("problem"),
           "Raises InvalidPlan naming the first broken invariant against the problem.");
  def_document(pipeline_schedule_class);

  module.def(
      "schedule_pipeline", &schedule::schedule_pipeline, without_gil, py::arg("problem"), py::kw_only(),
      py::arg("schedule") = schedule::ScheduleOptions{},
      "DynaPipe's scheduler: injection orders searched for the adaptive cyclic schedule ('cyclic') and 1F1B, each "
      "simulated, the fastest that fits memory kept, its communication planned.");
}

void bind_pipeline_planners(py::module_& module) {
  const schedule::PipelinePlanOptions defaults;

  py::class_<schedule::ReplicaSchedule> replica_schedule(module, "ReplicaSchedule",
                                                         "One data-parallel replica's pipeline.");
  def_record_properties(replica_schedule).def(py::self == py::self);

  py::class_<schedule::PipelineRunPlan> run_plan_class(
      module, "PipelineRunPlan", "DynaPipe's plan of one mini-batch: partition, replicas, their schedules.");
  def_record_properties(run_plan_class, {{"replica_schedules", "replicas"}})
      .def(
          "validate",
          [](const schedule::PipelineRunPlan& value, const py::handle& lengths, const py::handle& models,
             const py::handle& ids, const py::handle& targets, int stages, int replicas, double micro_batch_memory,
             double stage_memory, const schedule::ProblemOptions& problem, const cost::LastStageWork& last_stage) {
            const std::vector<microbatch::Sample> samples = samples_from(lengths, ids, targets);
            const std::vector<microbatch::QuadraticStageCost> costs = models_from(models);
            schedule::PipelinePlanOptions options;
            options.stages = stages;
            options.replicas = replicas;
            options.micro_batch_memory = micro_batch_memory;
            options.stage_memory = stage_memory;
            options.problem = problem;
            options.last_stage = last_stage;
            const py::gil_scoped_release release;
            schedule::validate(value, Span<const microbatch::Sample>(samples),
                               Span<const microbatch::QuadraticStageCost>(costs), options);
          },
          py::arg("lengths"), py::arg("models"), py::kw_only(), py::arg("ids") = py::none(),
          py::arg("targets") = py::none(), py::arg("stages") = defaults.stages, py::arg("replicas") = defaults.replicas,
          py::arg("micro_batch_memory") = defaults.micro_batch_memory, py::arg("stage_memory") = defaults.stage_memory,
          py::arg("problem") = defaults.problem, py::arg("last_stage") = defaults.last_stage,
          "Raises InvalidPlan naming the first broken invariant against the samples, models and options.");
  def_document(run_plan_class);

  module.def(
      "plan_pipeline",
      [](const py::handle& lengths, const py::handle& models, const py::handle& ids, const py::handle& targets,
         int stages, int replicas, double micro_batch_memory, double stage_memory, std::string_view ordering,
         std::string_view layout, double tmax_interval, const schedule::ScheduleOptions& scheduling,
         const schedule::ProblemOptions& problem, const cost::LastStageWork& last_stage) {
        const std::vector<microbatch::Sample> samples = samples_from(lengths, ids, targets);
        const std::vector<microbatch::QuadraticStageCost> costs = models_from(models);
        const schedule::PipelinePlanOptions options{.stages = stages,
                                                    .replicas = replicas,
                                                    .micro_batch_memory = micro_batch_memory,
                                                    .stage_memory = stage_memory,
                                                    .ordering = microbatch::ordering_from(ordering),
                                                    .layout = microbatch::layout_from(layout, "layout"),
                                                    .tmax_interval = tmax_interval,
                                                    .schedule = scheduling,
                                                    .problem = problem,
                                                    .last_stage = last_stage};
        const py::gil_scoped_release release;
        return schedule::plan_pipeline(Span<const microbatch::Sample>(samples),
                                       Span<const microbatch::QuadraticStageCost>(costs), options);
      },
      py::arg("lengths"), py::arg("models"), py::kw_only(), py::arg("ids") = py::none(),
      py::arg("targets") = py::none(), py::arg("stages") = defaults.stages, py::arg("replicas") = defaults.replicas,
      py::arg("micro_batch_memory") = defaults.micro_batch_memory, py::arg("stage_memory") = defaults.stage_memory,
      py::arg("ordering") = "length", py::arg("layout") = std::string(microbatch::name(defaults.layout)),
      py::arg("tmax_interval") = defaults.tmax_interval, py::arg("schedule") = defaults.schedule,
      py::arg("problem") = defaults.problem, py::arg("last_stage") = defaults.last_stage,
      "DynaPipe's per-iteration planner (what `sluice schedule` runs): order the samples, cut them into "
      "micro-batches, balance those over the replicas (Karmarkar–Karp) and schedule every replica's pipeline. "
      "stage_memory 0: stages × micro_batch_memory; last_stage: the scheme's (StageCostSetup.last_stage), which "
      "the stages before the last run without.");
}

}  // namespace

void bind_schedule(py::module_& module) {
  bind_microbatch(module);
  bind_pipeline(module);
  bind_pipeline_planners(module);
}

}  // namespace sluice::python
