// The option structs that cross into Python, each bound once: DispatchOptions, ScheduleOptions, ProblemOptions,
// PlanOptions, which composes them, ProposeOptions, SampledOptions, PlacementOptions, SpaceOptions and
// SearchOptions, which holds a SpaceOptions. Immutable; keyword-only
// constructors default to the default-constructed C++ struct and raise InvalidInput on a bad value; ==, repr and
// pickling.
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings.hpp"

namespace sluice::python {

namespace {

// "Name(field=value, …)", each value as Python writes it (so 'cyclic', True, inf).
std::string repr_of(std::string_view name, std::initializer_list<std::pair<const char*, py::object>> fields) {
  std::string text = std::string(name) + "(";
  bool first = true;
  for (const auto& [field, value] : fields) {
    if (!first) text += ", ";
    first = false;
    text += std::string(field) + "=" + py::repr(value).cast<std::string>();
  }
  return text + ")";
}

// A seed: any integer in [0, 2**64). Taken as a Python int so that a negative one is InvalidInput naming the field
// (pybind11's conversion would raise a TypeError naming no field).
std::uint64_t seed_from(const py::int_& value, std::string_view what) {
  const unsigned long long seed = PyLong_AsUnsignedLongLong(value.ptr());
  if (PyErr_Occurred() != nullptr) {
    PyErr_Clear();
    sluice::fail(what, " must be an integer in [0, 2**64), got ", py::repr(value).cast<std::string>());
  }
  return static_cast<std::uint64_t>(seed);
}

assign::DispatchOptions make_dispatch(int trials, int threads, const py::int_& seed, bool local_search,
                                      bool longest_first, bool v_step) {
  const assign::DispatchOptions options{.trials = trials,
                                        .threads = threads,
                                        .seed = seed_from(seed, "seed"),
                                        .local_search = local_search,
                                        .longest_first = longest_first,
                                        .v_step = v_step};
  assign::require_valid(options);
  return options;
}

schedule::ScheduleOptions make_schedule(std::string_view kind, const py::int_& seed, int clusters) {
  const schedule::ScheduleOptions options{
      .kind = schedule::schedule_kind_from(kind, "kind"), .seed = seed_from(seed, "seed"), .clusters = clusters};
  schedule::require_valid(options);
  return options;
}

schedule::ProblemOptions make_problem(std::int64_t hidden, int element_bytes, double latency, double bandwidth,
                                      double backward_ratio) {
  const schedule::ProblemOptions options{.hidden = hidden,
                                         .element_bytes = element_bytes,
                                         .link = {.latency = latency, .bandwidth = bandwidth},
                                         .backward_ratio = backward_ratio};
  schedule::require_valid(options);
  return options;
}

plan::Options make_plan(const assign::DispatchOptions& dispatch, const schedule::ScheduleOptions& schedule,
                        const schedule::ProblemOptions& problem, std::string_view layout_moves,
                        std::string_view v_step) {
  // plan::Options sets the dispatch's V step from its own v_step: a dispatch's own would be silently ignored.
  sluice::require(dispatch.v_step == assign::DispatchOptions{}.v_step,
                  "PlanOptions: dispatch.v_step is chosen by v_step (best, on or off); leave it at its default");
  return {.dispatch = dispatch,
          .schedule = schedule,
          .problem = problem,
          .layout_moves = plan::layout_moves_from(layout_moves, "layout_moves"),
          .v_step = plan::v_step_from(v_step, "v_step")};
}

proposal::ProposeOptions make_propose(std::optional<std::int64_t> gpus, std::optional<std::int64_t> max_len,
                                      std::int64_t length_step, std::int64_t gpu_step, bool relaxed,
                                      std::int64_t replica_step, double tokens_per_iteration, bool sequence_constant,
                                      bool fill_term, bool tp_within_node, std::int64_t max_candidates) {
  const proposal::ProposeOptions options{.gpus = gpus,
                                         .max_len = max_len,
                                         .length_step = length_step,
                                         .gpu_step = gpu_step,
                                         .relaxed = relaxed,
                                         .replica_step = replica_step,
                                         .tokens_per_iteration = tokens_per_iteration,
                                         .sequence_constant = sequence_constant,
                                         .fill_term = fill_term,
                                         .tp_within_node = tp_within_node,
                                         .max_candidates = max_candidates};
  proposal::require_valid(options);
  return options;
}

// The sampling fields only: the proposal's options come apart (ProposeOptions), and the overhead, a callable that
// can be neither compared nor pickled, is propose_sampled's own argument.
proposal::SampledOptions make_sampled(int choosing_batches, int held_out_batches, const py::int_& seed,
                                      const assign::DispatchOptions& dispatch, std::int64_t max_pool) {
  proposal::SampledOptions options;
  options.choosing_batches = choosing_batches;
  options.held_out_batches = held_out_batches;
  options.seed = seed_from(seed, "seed");
  options.dispatch = dispatch;
  options.max_pool = max_pool;
  proposal::detail::require_sampling(options);
  return options;
}

shard::PipelineOrder order_from(std::string_view order) {
  if (order == "tp_descending") return shard::PipelineOrder::tp_descending;
  if (order == "tp_ascending") return shard::PipelineOrder::tp_ascending;
  throw invalid_input(sluice::concat("order: expected 'tp_descending' or 'tp_ascending', got '", order, "'"));
}

std::string order_name(shard::PipelineOrder order) {
  return order == shard::PipelineOrder::tp_descending ? "tp_descending" : "tp_ascending";
}

// place checks these too (with the same messages), and the stage sums against the model's layers, which only it
// knows.
shard::PlacementOptions make_placement(int gpus_per_node, bool tp_within_node, std::string_view order,
                                       std::optional<std::map<int, std::vector<int>>> stage_layers) {
  shard::PlacementOptions options{
      .gpus_per_node = gpus_per_node,
      .tp_within_node = tp_within_node,
      .order = order_from(order),
      .stage_layers = stage_layers ? std::move(*stage_layers) : std::map<int, std::vector<int>>{}};
  sluice::require(options.gpus_per_node >= 1, "shard placement: gpus_per_node must be >= 1, got ",
                  options.gpus_per_node);
  for (const auto& [pp, counts] : options.stage_layers) {
    sluice::require(static_cast<int>(counts.size()) == pp, "shard placement: stage_layers for pp ", pp, " has ",
                    counts.size(), " entries");
    for (const int count : counts)
      sluice::require(count >= 1, "shard placement: stage_layers for pp ", pp, " has a stage of ", count, " layers");
  }
  return options;
}

// The search's checks that need neither model nor cluster (search::detail::check makes them too, with the cluster's).
search::SpaceOptions make_space(bool dp, bool sdp, bool tp, bool ckpt, bool tp_outer, std::vector<int> pp_degrees,
                                int max_tp, bool zero2, int max_pp, bool ulysses) {
  search::SpaceOptions options{dp, sdp, tp, ckpt, tp_outer, std::move(pp_degrees), max_tp, zero2, max_pp, ulysses};
  search::detail::check(options);
  return options;
}

search::Schedule search_schedule_from(std::string_view schedule) {
  if (schedule == "1f1b") return search::Schedule::one_f_one_b;
  if (schedule == "gpipe") return search::Schedule::gpipe;
  throw invalid_input(sluice::concat("schedule: expected '1f1b' or 'gpipe', got '", schedule, "'"));
}

search::SearchOptions make_search(std::int64_t memory_bytes, std::int64_t granularity_bytes, std::int64_t global_batch,
                                  std::int64_t batch_step, std::int64_t max_batch, std::string_view schedule,
                                  search::SpaceOptions space) {
  search::SearchOptions options{.memory_bytes = memory_bytes,
                                .granularity_bytes = granularity_bytes,
                                .global_batch = global_batch,
                                .batch_step = batch_step,
                                .max_batch = max_batch,
                                .schedule = search_schedule_from(schedule),
                                .space = std::move(space)};
  search::detail::check(options);
  return options;
}

auto space_fields(const search::SpaceOptions& o) {
  return std::tie(o.dp, o.sdp, o.tp, o.ckpt, o.tp_outer, o.pp_degrees, o.max_tp, o.zero2, o.max_pp, o.ulysses);
}

auto search_fields(const search::SearchOptions& o) {
  return std::tuple_cat(
      std::tie(o.memory_bytes, o.granularity_bytes, o.global_batch, o.batch_step, o.max_batch, o.schedule),
      space_fields(o.space));
}

void bind_dispatch(py::module_& module) {
  using Dispatch = assign::DispatchOptions;
  const Dispatch defaults;
  py::class_<Dispatch>(module, "DispatchOptions",
                       "How a batch is dispatched across pipelines (Hydraulis' Alg. 1): random orders tried, worker "
                       "threads, seed, local search, the longest-first order and whether the V step is charged. "
                       "Immutable; raises InvalidInput on a bad value.")
      .def(py::init(&make_dispatch), py::kw_only(), py::arg("trials") = defaults.trials,
           py::arg("threads") = defaults.threads, py::arg("seed") = py::int_(defaults.seed),
           py::arg("local_search") = defaults.local_search, py::arg("longest_first") = defaults.longest_first,
           py::arg("v_step") = defaults.v_step)
      .def_readonly("trials", &Dispatch::trials, "Random orders tried by the greedy; >= 1")
      .def_readonly("threads", &Dispatch::threads, "Workers sharing the trials; the result does not depend on it")
      .def_readonly("seed", &Dispatch::seed)
      .def_readonly("local_search", &Dispatch::local_search, "Improve the best trial with moves and swaps")
      .def_readonly("longest_first", &Dispatch::longest_first, "Also try the longest-first order")
      .def_readonly("v_step", &Dispatch::v_step, "Charge the V step (Eq. 2's second term)")
      .def(py::self == py::self)
      .def("__repr__",
           [](const Dispatch& o) {
             return repr_of("DispatchOptions", {{"trials", py::int_(o.trials)},
                                                {"threads", py::int_(o.threads)},
                                                {"seed", py::int_(o.seed)},
                                                {"local_search", py::bool_(o.local_search)},
                                                {"longest_first", py::bool_(o.longest_first)},
                                                {"v_step", py::bool_(o.v_step)}});
           })
      .def(py::pickle(
          [](const Dispatch& o) {
            return py::make_tuple(o.trials, o.threads, o.seed, o.local_search, o.longest_first, o.v_step);
          },
          [](const py::tuple& t) {
            return make_dispatch(t[0].cast<int>(), t[1].cast<int>(), t[2].cast<py::int_>(), t[3].cast<bool>(),
                                 t[4].cast<bool>(), t[5].cast<bool>());
          }));
}

void bind_schedule_options(py::module_& module) {
  using Schedule = schedule::ScheduleOptions;
  const Schedule defaults;
  py::class_<Schedule>(module, "ScheduleOptions",
                       "How a pipeline is scheduled: kind (cyclic: DynaPipe's search over injection orders, which "
                       "may keep 1F1B; or 1f1b), the k-means seed and clusters (injection-order groups, 0 to 6; "
                       "0: 3 when there are more than 20 micro-batches, else 4). Immutable; raises InvalidInput on "
                       "a bad value.")
      .def(py::init(&make_schedule), py::kw_only(), py::arg("kind") = std::string(schedule::name(defaults.kind)),
           py::arg("seed") = py::int_(defaults.seed), py::arg("clusters") = defaults.clusters)
      .def_property_readonly("kind", [](const Schedule& o) { return std::string(schedule::name(o.kind)); })
      .def_readonly("seed", &Schedule::seed)
      .def_readonly("clusters", &Schedule::clusters)
      .def(py::self == py::self)
      .def("__repr__",
           [](const Schedule& o) {
             return repr_of("ScheduleOptions", {{"kind", py::str(std::string(schedule::name(o.kind)))},
                                                {"seed", py::int_(o.seed)},
                                                {"clusters", py::int_(o.clusters)}});
           })
      .def(py::pickle(
          [](const Schedule& o) { return py::make_tuple(std::string(schedule::name(o.kind)), o.seed, o.clusters); },
          [](const py::tuple& t) {
            return make_schedule(t[0].cast<std::string>(), t[1].cast<py::int_>(), t[2].cast<int>());
          }));
}

void bind_problem_options(py::module_& module) {
  using Problem = schedule::ProblemOptions;
  const Problem defaults;
  py::class_<Problem>(module, "ProblemOptions",
                      "How a simulated pipeline moves activations: hidden (elements per token of a boundary tensor), "
                      "element_bytes, the stage-to-stage link's latency (s) and bandwidth (bytes/s; inf: free) and "
                      "backward_ratio (backward seconds per forward second). Immutable; raises InvalidInput on a "
                      "bad value.")
      .def(py::init(&make_problem), py::kw_only(), py::arg("hidden") = defaults.hidden,
           py::arg("element_bytes") = defaults.element_bytes, py::arg("latency") = defaults.link.latency,
           py::arg("bandwidth") = defaults.link.bandwidth, py::arg("backward_ratio") = defaults.backward_ratio)
      .def_readonly("hidden", &Problem::hidden)
      .def_readonly("element_bytes", &Problem::element_bytes)
      .def_property_readonly("latency", [](const Problem& o) { return o.link.latency; })
      .def_property_readonly("bandwidth", [](const Problem& o) { return o.link.bandwidth; })
      .def_readonly("backward_ratio", &Problem::backward_ratio)
      .def(py::self == py::self)
      .def("__repr__",
           [](const Problem& o) {
             return repr_of("ProblemOptions", {{"hidden", py::int_(o.hidden)},
                                               {"element_bytes", py::int_(o.element_bytes)},
                                               {"latency", py::float_(o.link.latency)},
                                               {"bandwidth", py::float_(o.link.bandwidth)},
                                               {"backward_ratio", py::float_(o.backward_ratio)}});
           })
      .def(py::pickle(
          [](const Problem& o) {
            return py::make_tuple(o.hidden, o.element_bytes, o.link.latency, o.link.bandwidth, o.backward_ratio);
          },
          [](const py::tuple& t) {
            return make_problem(t[0].cast<std::int64_t>(), t[1].cast<int>(), t[2].cast<double>(), t[3].cast<double>(),
                                t[4].cast<double>());
          }));
}

void bind_plan_options(py::module_& module) {
  const plan::Options defaults;
  py::class_<plan::Options>(
      module, "PlanOptions",
      "How the sluice plan is made: the dispatch (its v_step left at its default: `v_step` chooses), how pipelines "
      "are scheduled, how activations move between stages, what each candidate is charged for its parameter pull "
      "and gradient push (layout_moves: none, exposed or all) and whether the dispatch charges the V step (v_step: "
      "best, on or off). Immutable; raises InvalidInput on a bad value.")
      .def(py::init(&make_plan), py::kw_only(), py::arg("dispatch") = defaults.dispatch,
           py::arg("schedule") = defaults.schedule, py::arg("problem") = defaults.problem,
           py::arg("layout_moves") = std::string(plan::name(defaults.layout_moves)),
           py::arg("v_step") = std::string(plan::name(defaults.v_step)))
      .def_readonly("dispatch", &plan::Options::dispatch)
      .def_readonly("schedule", &plan::Options::schedule)
      .def_readonly("problem", &plan::Options::problem)
      .def_property_readonly("layout_moves",
                             [](const plan::Options& o) { return std::string(plan::name(o.layout_moves)); })
      .def_property_readonly("v_step", [](const plan::Options& o) { return std::string(plan::name(o.v_step)); })
      .def(py::self == py::self)
      .def("__repr__",
           [](const plan::Options& o) {
             return repr_of("PlanOptions", {{"dispatch", py::cast(o.dispatch)},
                                            {"schedule", py::cast(o.schedule)},
                                            {"problem", py::cast(o.problem)},
                                            {"layout_moves", py::str(std::string(plan::name(o.layout_moves)))},
                                            {"v_step", py::str(std::string(plan::name(o.v_step)))}});
           })
      .def(py::pickle(
          [](const plan::Options& o) {
            return py::make_tuple(o.dispatch, o.schedule, o.problem, std::string(plan::name(o.layout_moves)),
                                  std::string(plan::name(o.v_step)));
          },
          [](const py::tuple& t) {
            return make_plan(t[0].cast<assign::DispatchOptions>(), t[1].cast<schedule::ScheduleOptions>(),
                             t[2].cast<schedule::ProblemOptions>(), t[3].cast<std::string>(), t[4].cast<std::string>());
          }));
}

void bind_propose_options(py::module_& module) {
  using Propose = proposal::ProposeOptions;
  const Propose defaults;
  py::class_<Propose>(module, "ProposeOptions",
                      "How Hydraulis' proposal is made: gpus (default: the profile's cluster), max_len (Lmax; "
                      "default: the dataset's longest sequence), the length grid, the GPU budget and replica steps "
                      "(tenths), the relaxation, tokens per iteration, the cost model's terms, TP within a node and "
                      "the candidates kept. A proposal's own has gpus and max_len resolved. Immutable; raises "
                      "InvalidInput on a bad value (propose checks the rest against the dataset and profile).")
      .def(py::init(&make_propose), py::kw_only(), py::arg("gpus") = defaults.gpus,
           py::arg("max_len") = defaults.max_len, py::arg("length_step") = defaults.length_step,
           py::arg("gpu_step") = defaults.gpu_step, py::arg("relaxed") = defaults.relaxed,
           py::arg("replica_step") = defaults.replica_step,
           py::arg("tokens_per_iteration") = defaults.tokens_per_iteration,
           py::arg("sequence_constant") = defaults.sequence_constant, py::arg("fill_term") = defaults.fill_term,
           py::arg("tp_within_node") = defaults.tp_within_node, py::arg("max_candidates") = defaults.max_candidates)
      .def_readonly("gpus", &Propose::gpus)
      .def_readonly("max_len", &Propose::max_len)
      .def_readonly("length_step", &Propose::length_step)
      .def_readonly("gpu_step", &Propose::gpu_step, "Tenths of a GPU.")
      .def_readonly("relaxed", &Propose::relaxed)
      .def_readonly("replica_step", &Propose::replica_step, "Tenths of a pipeline.")
      .def_readonly("tokens_per_iteration", &Propose::tokens_per_iteration)
      .def_readonly("sequence_constant", &Propose::sequence_constant)
      .def_readonly("fill_term", &Propose::fill_term)
      .def_readonly("tp_within_node", &Propose::tp_within_node)
      .def_readonly("max_candidates", &Propose::max_candidates)
      .def(py::self == py::self)
      .def("__repr__",
           [](const Propose& o) {
             return repr_of("ProposeOptions", {{"gpus", py::cast(o.gpus)},
                                               {"max_len", py::cast(o.max_len)},
                                               {"length_step", py::int_(o.length_step)},
                                               {"gpu_step", py::int_(o.gpu_step)},
                                               {"relaxed", py::bool_(o.relaxed)},
                                               {"replica_step", py::int_(o.replica_step)},
                                               {"tokens_per_iteration", py::float_(o.tokens_per_iteration)},
                                               {"sequence_constant", py::bool_(o.sequence_constant)},
                                               {"fill_term", py::bool_(o.fill_term)},
                                               {"tp_within_node", py::bool_(o.tp_within_node)},
                                               {"max_candidates", py::int_(o.max_candidates)}});
           })
      .def(py::pickle(
          [](const Propose& o) {
            return py::make_tuple(o.gpus, o.max_len, o.length_step, o.gpu_step, o.relaxed, o.replica_step,
                                  o.tokens_per_iteration, o.sequence_constant, o.fill_term, o.tp_within_node,
                                  o.max_candidates);
          },
          [](const py::tuple& t) {
            return make_propose(t[0].cast<std::optional<std::int64_t>>(), t[1].cast<std::optional<std::int64_t>>(),
                                t[2].cast<std::int64_t>(), t[3].cast<std::int64_t>(), t[4].cast<bool>(),
                                t[5].cast<std::int64_t>(), t[6].cast<double>(), t[7].cast<bool>(), t[8].cast<bool>(),
                                t[9].cast<bool>(), t[10].cast<std::int64_t>());
          }));
}

void bind_sampled_options(py::module_& module) {
  using Sampled = proposal::SampledOptions;
  const Sampled defaults;
  py::class_<Sampled>(module, "SampledOptions",
                      "How the sampled proposal judges its pool: batches it chooses on and held-out batches it only "
                      "measures (each of the ProposeOptions' tokens_per_iteration tokens, drawn with `seed`), the "
                      "dispatch each (strategy, batch) is planned with, and the pool's cap (>= max_candidates). "
                      "Immutable; raises InvalidInput on a bad value.")
      .def(py::init(&make_sampled), py::kw_only(), py::arg("choosing_batches") = defaults.choosing_batches,
           py::arg("held_out_batches") = defaults.held_out_batches, py::arg("seed") = py::int_(defaults.seed),
           py::arg("dispatch") = defaults.dispatch, py::arg("max_pool") = defaults.max_pool)
      .def_readonly("choosing_batches", &Sampled::choosing_batches, "Batches the set is chosen on")
      .def_readonly("held_out_batches", &Sampled::held_out_batches, "The next batches, which only measure")
      .def_readonly("seed", &Sampled::seed, "The batch sampler's")
      .def_readonly("dispatch", &Sampled::dispatch, "How every (strategy, batch) is planned")
      .def_readonly("max_pool", &Sampled::max_pool, "Pool cap, >= max_candidates")
      // paper and overhead are not part of the Python object (always their defaults), so they are not compared.
      .def(
          "__eq__",
          [](const Sampled& x, const Sampled& y) {
            return std::tie(x.choosing_batches, x.held_out_batches, x.seed, x.dispatch, x.max_pool) ==
                   std::tie(y.choosing_batches, y.held_out_batches, y.seed, y.dispatch, y.max_pool);
          },
          py::is_operator())
      .def("__repr__",
           [](const Sampled& o) {
             return repr_of("SampledOptions", {{"choosing_batches", py::int_(o.choosing_batches)},
                                               {"held_out_batches", py::int_(o.held_out_batches)},
                                               {"seed", py::int_(o.seed)},
                                               {"dispatch", py::cast(o.dispatch)},
                                               {"max_pool", py::int_(o.max_pool)}});
           })
      .def(py::pickle(
          [](const Sampled& o) {
            return py::make_tuple(o.choosing_batches, o.held_out_batches, o.seed, o.dispatch, o.max_pool);
          },
          [](const py::tuple& t) {
            return make_sampled(t[0].cast<int>(), t[1].cast<int>(), t[2].cast<py::int_>(),
                                t[3].cast<assign::DispatchOptions>(), t[4].cast<std::int64_t>());
          }));
}

void bind_placement_options(py::module_& module) {
  using Placement = shard::PlacementOptions;
  const Placement defaults;
  py::class_<Placement>(module, "PlacementOptions",
                        "How pipelines are placed on ranks: GPUs per node, TP within a node, the order of the "
                        "pipelines' rank blocks ('tp_descending' or 'tp_ascending') and stage_layers (a PP degree "
                        "to its layers per stage; absent degrees split evenly). Immutable; raises InvalidInput on a "
                        "bad value (place checks the stage sums against the model's layers).")
      .def(py::init(&make_placement), py::kw_only(), py::arg("gpus_per_node") = defaults.gpus_per_node,
           py::arg("tp_within_node") = defaults.tp_within_node, py::arg("order") = order_name(defaults.order),
           py::arg("stage_layers") = py::none())
      .def_readonly("gpus_per_node", &Placement::gpus_per_node)
      .def_readonly("tp_within_node", &Placement::tp_within_node)
      .def_property_readonly(
          "order", [](const Placement& o) { return order_name(o.order); }, "'tp_descending' or 'tp_ascending'.")
      .def_readonly("stage_layers", &Placement::stage_layers)
      .def(
          "__eq__",
          [](const Placement& x, const Placement& y) {
            return std::tie(x.gpus_per_node, x.tp_within_node, x.order, x.stage_layers) ==
                   std::tie(y.gpus_per_node, y.tp_within_node, y.order, y.stage_layers);
          },
          py::is_operator())
      .def("__repr__",
           [](const Placement& o) {
             return repr_of("PlacementOptions", {{"gpus_per_node", py::int_(o.gpus_per_node)},
                                                 {"tp_within_node", py::bool_(o.tp_within_node)},
                                                 {"order", py::str(order_name(o.order))},
                                                 {"stage_layers", py::cast(o.stage_layers)}});
           })
      .def(py::pickle(
          [](const Placement& o) {
            return py::make_tuple(o.gpus_per_node, o.tp_within_node, order_name(o.order), o.stage_layers);
          },
          [](const py::tuple& t) {
            return make_placement(t[0].cast<int>(), t[1].cast<bool>(), t[2].cast<std::string>(),
                                  t[3].cast<std::map<int, std::vector<int>>>());
          }));
}

void bind_space_options(py::module_& module) {
  using Space = search::SpaceOptions;
  const Space defaults;
  py::class_<Space>(module, "SpaceOptions",
                    "Which paradigms the per-layer search may use (zero2: ZeRO-2 data parallelism, ulysses: Ulysses "
                    "SP in TP's place); pp_degrees [] means every power of 2, max_tp and max_pp 0 no limit. Immutable; "
                    "raises InvalidInput on a bad value (the search checks pp_degrees against the "
                    "cluster).")
      .def(py::init(&make_space), py::kw_only(), py::arg("dp") = defaults.dp, py::arg("sdp") = defaults.sdp,
           py::arg("tp") = defaults.tp, py::arg("ckpt") = defaults.ckpt, py::arg("tp_outer") = defaults.tp_outer,
           py::arg("pp_degrees") = defaults.pp_degrees, py::arg("max_tp") = defaults.max_tp,
           py::arg("zero2") = defaults.zero2, py::arg("max_pp") = defaults.max_pp,
           py::arg("ulysses") = defaults.ulysses)
      .def_readonly("dp", &Space::dp)
      .def_readonly("sdp", &Space::sdp)
      .def_readonly("tp", &Space::tp)
      .def_readonly("ckpt", &Space::ckpt)
      .def_readonly("tp_outer", &Space::tp_outer, "Allow TP (or SP) on the strided (outer) ranks")
      .def_readonly("pp_degrees", &Space::pp_degrees, "[]: every power of 2 up to min(GPUs, layers)")
      .def_readonly("max_tp", &Space::max_tp, "0: no limit; TP (or SP) must also divide every layer's heads")
      .def_readonly("zero2", &Space::zero2, "ZeRO-2 data parallelism")
      .def_readonly("max_pp", &Space::max_pp, "0: no limit")
      .def_readonly("ulysses", &Space::ulysses, "Ulysses sequence parallelism in TP's place")
      .def(
          "__eq__", [](const Space& x, const Space& y) { return space_fields(x) == space_fields(y); },
          py::is_operator())
      .def("__repr__",
           [](const Space& o) {
             return repr_of("SpaceOptions", {{"dp", py::bool_(o.dp)},
                                             {"sdp", py::bool_(o.sdp)},
                                             {"tp", py::bool_(o.tp)},
                                             {"ckpt", py::bool_(o.ckpt)},
                                             {"tp_outer", py::bool_(o.tp_outer)},
                                             {"pp_degrees", py::cast(o.pp_degrees)},
                                             {"max_tp", py::int_(o.max_tp)},
                                             {"zero2", py::bool_(o.zero2)},
                                             {"max_pp", py::int_(o.max_pp)},
                                             {"ulysses", py::bool_(o.ulysses)}});
           })
      .def(py::pickle(
          [](const Space& o) {
            return py::make_tuple(o.dp, o.sdp, o.tp, o.ckpt, o.tp_outer, o.pp_degrees, o.max_tp, o.zero2, o.max_pp,
                                  o.ulysses);
          },
          [](const py::tuple& t) {
            return make_space(t[0].cast<bool>(), t[1].cast<bool>(), t[2].cast<bool>(), t[3].cast<bool>(),
                              t[4].cast<bool>(), t[5].cast<std::vector<int>>(), t[6].cast<int>(), t[7].cast<bool>(),
                              t[8].cast<int>(), t[9].cast<bool>());
          }));
}

void bind_search_options(py::module_& module) {
  using Search = search::SearchOptions;
  const Search defaults;
  py::class_<Search>(module, "SearchOptions",
                     "How Galvatron-BMW searches: memory_bytes per device (0: the device memory), the layer DP's "
                     "memory step, the global batch (0: the sweep batch_step, 2·batch_step, … up to max_batch), "
                     "the schedule ('1f1b' or 'gpipe') and the space. Immutable; raises InvalidInput on a bad value "
                     "(the search checks the rest against the model and cluster).")
      .def(py::init(&make_search), py::kw_only(), py::arg("memory_bytes") = defaults.memory_bytes,
           py::arg("granularity_bytes") = defaults.granularity_bytes, py::arg("global_batch") = defaults.global_batch,
           py::arg("batch_step") = defaults.batch_step, py::arg("max_batch") = defaults.max_batch,
           py::arg("schedule") = search_schedule_name(defaults.schedule), py::arg("space") = defaults.space)
      .def_readonly("memory_bytes", &Search::memory_bytes, "Per-device budget; 0: the cluster's device memory")
      .def_readonly("granularity_bytes", &Search::granularity_bytes, "Memory step of the layer DP")
      .def_readonly("global_batch", &Search::global_batch, "0: sweep batch_step, 2·batch_step, … up to max_batch")
      .def_readonly("batch_step", &Search::batch_step)
      .def_readonly("max_batch", &Search::max_batch)
      .def_property_readonly(
          "schedule", [](const Search& o) { return search_schedule_name(o.schedule); }, "'1f1b' or 'gpipe'.")
      .def_readonly("space", &Search::space)
      .def(
          "__eq__", [](const Search& x, const Search& y) { return search_fields(x) == search_fields(y); },
          py::is_operator())
      .def("__repr__",
           [](const Search& o) {
             return repr_of("SearchOptions", {{"memory_bytes", py::int_(o.memory_bytes)},
                                              {"granularity_bytes", py::int_(o.granularity_bytes)},
                                              {"global_batch", py::int_(o.global_batch)},
                                              {"batch_step", py::int_(o.batch_step)},
                                              {"max_batch", py::int_(o.max_batch)},
                                              {"schedule", py::str(search_schedule_name(o.schedule))},
                                              {"space", py::cast(o.space)}});
           })
      .def(py::pickle(
          [](const Search& o) {
            return py::make_tuple(o.memory_bytes, o.granularity_bytes, o.global_batch, o.batch_step, o.max_batch,
                                  search_schedule_name(o.schedule), o.space);
          },
          [](const py::tuple& t) {
            return make_search(t[0].cast<std::int64_t>(), t[1].cast<std::int64_t>(), t[2].cast<std::int64_t>(),
                               t[3].cast<std::int64_t>(), t[4].cast<std::int64_t>(), t[5].cast<std::string>(),
                               t[6].cast<search::SpaceOptions>());
          }));
}

}  // namespace

std::string search_schedule_name(search::Schedule schedule) {
  return schedule == search::Schedule::gpipe ? "gpipe" : "1f1b";
}

void bind_options(py::module_& module) {
  bind_dispatch(module);
  bind_schedule_options(module);
  bind_problem_options(module);
  bind_plan_options(module);
  bind_propose_options(module);
  bind_sampled_options(module);
  bind_placement_options(module);
  bind_space_options(module);
  bind_search_options(module);
}

}  // namespace sluice::python
