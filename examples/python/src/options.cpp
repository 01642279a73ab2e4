// The option structs that cross into Python, each described once by a table of its fields (name, doc, the Python
// type it takes, how it is read and set): DispatchOptions, ScheduleOptions, ProblemOptions, PlanOptions, which
// composes them, ProposeOptions, SampledOptions, PlacementOptions, SpaceOptions and SearchOptions, which holds a
// SpaceOptions. From the table come the keyword-only constructor (defaults: the default-constructed C++ struct;
// a bad value raises InvalidInput through the library's own check), the read-only properties, ==, repr,
// __match_args__ and pickling by field name.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings.hpp"

namespace sluice::python {

namespace {

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

// One field of an option class: taken from Python as a `Value`, shown to Python by `get`, stored by `set`.
template <class Value, class Get, class Set>
struct OptionField {
  using value_type = Value;
  const char* name;
  const char* doc;
  Get get;  // const Options& -> py::object
  Set set;  // (Options&, Value)
};

template <class Value, class Get, class Set>
OptionField<Value, Get, Set> custom_field(const char* name, const char* doc, Get get, Set set) {
  return {name, doc, get, set};
}

// A member taken and shown as its own type.
template <class Options, class Member>
auto plain_field(const char* name, Member Options::*member, const char* doc) {
  return custom_field<Member>(
      name, doc, [member](const Options& options) { return py::cast(options.*member); },
      [member](Options& options, Member value) { options.*member = std::move(value); });
}

template <class Options>
auto seed_field(const char* name, std::uint64_t Options::*member, const char* doc) {
  return custom_field<py::int_>(
      name, doc, [member](const Options& options) { return py::object(py::int_(options.*member)); },
      [member, name](Options& options, const py::int_& value) { options.*member = seed_from(value, name); });
}

// An enumeration shown by its name in the library's table.
template <class Options, class Enum, std::size_t Size>
auto named_field(const char* name, Enum Options::*member, const NameTable<Enum, Size>& table, const char* doc) {
  return custom_field<std::string>(
      name, doc,
      [member, &table](const Options& options) { return py::object(py::str(name_in(table, options.*member))); },
      [member, &table, name](Options& options, const std::string& value) {
        options.*member = value_in(table, value, name);
      });
}

// Binds `Options` as an immutable class whose every piece comes from `fields`; `check` is the library's check of a
// whole value, run on every value made from Python (constructor and unpickling alike).
template <class Options, class Check, class... Fields>
void bind_option_class(py::module_& module, const char* name, const char* doc, Check check, Fields... fields) {
  const Options defaults{};
  py::class_<Options> cls(module, name, doc);
  cls.def(py::init([check, fields...](typename Fields::value_type... values) {
            Options options{};
            (fields.set(options, std::move(values)), ...);
            check(options);
            return options;
          }),
          py::kw_only(), py::arg_v(fields.name, fields.get(defaults))...);
  (cls.def_property_readonly(
       fields.name, [get = fields.get](const Options& options) { return get(options); }, fields.doc),
   ...);
  cls.attr("__match_args__") = py::make_tuple(fields.name...);
  // Equal when every field shown to Python is: a member Python never sees (a callable, say) does not count.
  cls.def(
      "__eq__",
      [fields...](const Options& x, const Options& y) { return ((fields.get(x).equal(fields.get(y))) && ...); },
      py::is_operator());
  cls.attr("__hash__") = py::none();
  cls.def("__repr__", [name, fields...](const Options& options) {
    std::string text = std::string(name) + "(";
    std::string_view separator;
    ((text += std::string(separator) + fields.name + "=" + py::repr(fields.get(options)).template cast<std::string>(),
      separator = ", "),
     ...);
    return text + ")";
  });
  cls.def(py::pickle(
      [fields...](const Options& options) {
        py::dict state;
        ((state[fields.name] = fields.get(options)), ...);
        return state;
      },
      [check, fields...](const py::dict& state) {
        Options options{};
        (fields.set(options, state[fields.name].template cast<typename Fields::value_type>()), ...);
        check(options);
        return options;
      }));
}

void bind_dispatch(py::module_& module) {
  using Dispatch = assign::DispatchOptions;
  bind_option_class<Dispatch>(
      module, "DispatchOptions",
      "How a batch is dispatched across pipelines (Hydraulis' Alg. 1): random orders tried, worker threads, seed, "
      "local search, the longest-first order and whether the V step is charged. Immutable; raises InvalidInput on a "
      "bad value.",
      [](const Dispatch& options) { assign::require_valid(options); },
      plain_field("trials", &Dispatch::trials, "Random orders tried by the greedy; >= 1"),
      plain_field("threads", &Dispatch::threads, "Workers sharing the trials; the result does not depend on it"),
      seed_field("seed", &Dispatch::seed, "Trial t orders the batch with a stream of this seed"),
      plain_field("local_search", &Dispatch::local_search, "Improve the best trial with moves and swaps"),
      plain_field("longest_first", &Dispatch::longest_first, "Also try the longest-first order"),
      plain_field("v_step", &Dispatch::v_step, "Charge the V step (Eq. 2's second term)"));
}

void bind_schedule_options(py::module_& module) {
  using Schedule = schedule::ScheduleOptions;
  bind_option_class<Schedule>(
      module, "ScheduleOptions",
      "How a pipeline is scheduled: kind (cyclic: DynaPipe's search over injection orders, which may keep 1F1B; or "
      "1f1b), the k-means seed and clusters (injection-order groups, 0 to 6; 0: 3 when there are more than 20 "
      "micro-batches, else 4). Immutable; raises InvalidInput on a bad value.",
      [](const Schedule& options) { schedule::require_valid(options); },
      named_field("kind", &Schedule::kind, schedule::schedule_kind_names, "'cyclic' or '1f1b'"),
      seed_field("seed", &Schedule::seed, "The k-means seed"),
      plain_field("clusters", &Schedule::clusters, "Injection-order groups, 0 to 6; 0: chosen by the batch"));
}

void bind_problem_options(py::module_& module) {
  using Problem = schedule::ProblemOptions;
  bind_option_class<Problem>(
      module, "ProblemOptions",
      "How a simulated pipeline moves activations: hidden (elements per token of a boundary tensor), element_bytes, "
      "the stage-to-stage link's latency (s) and bandwidth (bytes/s; inf: free) and backward_ratio (backward seconds "
      "per forward second). Immutable; raises InvalidInput on a bad value.",
      [](const Problem& options) { schedule::require_valid(options); },
      plain_field("hidden", &Problem::hidden, "Elements per token of a boundary tensor"),
      plain_field("element_bytes", &Problem::element_bytes, "Bytes per element"),
      custom_field<double>(
          "latency", "The stage-to-stage link's latency, seconds",
          [](const Problem& options) { return py::object(py::float_(options.link.latency)); },
          [](Problem& options, double value) { options.link.latency = value; }),
      custom_field<double>(
          "bandwidth", "The stage-to-stage link's bandwidth, bytes/s; inf: free",
          [](const Problem& options) { return py::object(py::float_(options.link.bandwidth)); },
          [](Problem& options, double value) { options.link.bandwidth = value; }),
      plain_field("backward_ratio", &Problem::backward_ratio, "Backward seconds per forward second"));
}

void bind_plan_options(py::module_& module) {
  bind_option_class<plan::Options>(
      module, "PlanOptions",
      "How the sluice plan is made: the dispatch (its v_step left at its default: `v_step` chooses), how pipelines "
      "are scheduled, how activations move between stages, what each candidate is charged for its parameter pull "
      "and gradient push (layout_moves: none, exposed or all) and whether the dispatch charges the V step (v_step: "
      "best, on or off). Immutable; raises InvalidInput on a bad value.",
      // plan::Options sets the dispatch's V step from its own v_step: a dispatch's own would be silently ignored.
      [](const plan::Options& options) {
        sluice::require(options.dispatch.v_step == assign::DispatchOptions{}.v_step,
                        "PlanOptions: dispatch.v_step is chosen by v_step (best, on or off); leave it at its default");
      },
      plain_field("dispatch", &plan::Options::dispatch, "How each candidate's dispatch is made"),
      plain_field("schedule", &plan::Options::schedule, "How pipelines are scheduled"),
      plain_field("problem", &plan::Options::problem, "How activations move between stages"),
      named_field("layout_moves", &plan::Options::layout_moves, plan::layout_moves_names,
                  "What a candidate is charged for its pull and push: 'none', 'exposed' or 'all'"),
      named_field("v_step", &plan::Options::v_step, plan::v_step_names,
                  "Whether the dispatch charges the V step: 'best', 'on' or 'off'"));
}

void bind_propose_options(py::module_& module) {
  using Propose = proposal::ProposeOptions;
  bind_option_class<Propose>(
      module, "ProposeOptions",
      "How Hydraulis' proposal is made: gpus (default: the profile's cluster), max_len (Lmax; default: the "
      "dataset's longest sequence), the length grid, the GPU budget and replica steps (tenths), the relaxation, "
      "tokens per iteration, the cost model's terms, TP within a node and the candidates kept. A proposal's own has "
      "gpus and max_len resolved. Immutable; raises InvalidInput on a bad value (propose checks the rest against "
      "the dataset and profile).",
      [](const Propose& options) { proposal::require_valid(options); },
      plain_field("gpus", &Propose::gpus, "N; None: the profile's cluster"),
      plain_field("max_len", &Propose::max_len, "Lmax; None: the dataset's longest sequence"),
      plain_field("length_step", &Propose::length_step, "The length grid's step"),
      plain_field("gpu_step", &Propose::gpu_step, "Tenths of a GPU"),
      plain_field("relaxed", &Propose::relaxed, "Also run the continuous relaxation and round its solutions"),
      plain_field("replica_step", &Propose::replica_step, "Tenths of a pipeline"),
      plain_field("tokens_per_iteration", &Propose::tokens_per_iteration,
                  "Scales the dataset's counts to one iteration"),
      plain_field("sequence_constant", &Propose::sequence_constant, "Charge c per sequence (else as Eq. 2 does)"),
      plain_field("fill_term", &Propose::fill_term, "Charge (PP - 1)·T(longest) per interval"),
      plain_field("tp_within_node", &Propose::tp_within_node, "Only schemes with TP <= the profile's gpus_per_node"),
      plain_field("max_candidates", &Propose::max_candidates, "At most this many candidates"));
}

// The sampling fields only: the proposal's options come apart (ProposeOptions), and the overhead, a callable that
// can be neither compared nor pickled, is propose_sampled's own argument.
void bind_sampled_options(py::module_& module) {
  using Sampled = proposal::SampledOptions;
  bind_option_class<Sampled>(
      module, "SampledOptions",
      "How the sampled proposal judges its pool: batches it chooses on and held-out batches it only measures (each "
      "of the ProposeOptions' tokens_per_iteration tokens, drawn with `seed`), the dispatch each (strategy, batch) "
      "is planned with, and the pool's cap (>= max_candidates). Immutable; raises InvalidInput on a bad value.",
      [](const Sampled& options) { proposal::detail::require_sampling(options); },
      plain_field("choosing_batches", &Sampled::choosing_batches, "Batches the set is chosen on"),
      plain_field("held_out_batches", &Sampled::held_out_batches, "The next batches, which only measure"),
      seed_field("seed", &Sampled::seed, "The batch sampler's"),
      plain_field("dispatch", &Sampled::dispatch, "How every (strategy, batch) is planned"),
      plain_field("max_pool", &Sampled::max_pool, "Pool cap, >= max_candidates"));
}

void bind_placement_options(py::module_& module) {
  using Placement = shard::PlacementOptions;
  bind_option_class<Placement>(
      module, "PlacementOptions",
      "How pipelines are placed on ranks: GPUs per node, TP within a node, the order of the pipelines' rank blocks "
      "('tp_descending' or 'tp_ascending') and stage_layers (a PP degree to its layers per stage; absent degrees "
      "split evenly). Immutable; raises InvalidInput on a bad value (place checks the stage sums against the "
      "model's layers).",
      [](const Placement& options) { shard::require_valid(options); },
      plain_field("gpus_per_node", &Placement::gpus_per_node, "GPUs in a node"),
      plain_field("tp_within_node", &Placement::tp_within_node, "Keep each TP group within a node"),
      named_field("order", &Placement::order, shard::pipeline_order_names, "'tp_descending' or 'tp_ascending'"),
      plain_field("stage_layers", &Placement::stage_layers,
                  "A PP degree to its layers per stage; absent degrees split evenly"));
}

void bind_space_options(py::module_& module) {
  using Space = search::SpaceOptions;
  bind_option_class<Space>(
      module, "SpaceOptions",
      "Which paradigms the per-layer search may use (zero2: ZeRO-2 data parallelism, ulysses: Ulysses SP in TP's "
      "place); pp_degrees [] means every power of 2, max_tp and max_pp 0 no limit. Immutable; raises InvalidInput "
      "on a bad value (the search checks pp_degrees against the cluster).",
      [](const Space& options) { search::require_valid(options); }, plain_field("dp", &Space::dp, "Data parallelism"),
      plain_field("sdp", &Space::sdp, "Sharded data parallelism"), plain_field("tp", &Space::tp, "Tensor parallelism"),
      plain_field("ckpt", &Space::ckpt, "Activation checkpointing"),
      plain_field("tp_outer", &Space::tp_outer, "Allow TP (or SP) on the strided (outer) ranks"),
      plain_field("pp_degrees", &Space::pp_degrees, "[]: every power of 2 up to min(GPUs, layers)"),
      plain_field("max_tp", &Space::max_tp, "0: no limit; TP (or SP) must also divide every layer's heads"),
      plain_field("zero2", &Space::zero2, "ZeRO-2 data parallelism"),
      plain_field("max_pp", &Space::max_pp, "0: no limit"),
      plain_field("ulysses", &Space::ulysses, "Ulysses sequence parallelism in TP's place"));
}

void bind_search_options(py::module_& module) {
  using Search = search::SearchOptions;
  bind_option_class<Search>(
      module, "SearchOptions",
      "How Galvatron-BMW searches: memory_bytes per device (0: the device memory), the layer DP's memory step, the "
      "global batch (0: the sweep batch_step, 2·batch_step, … up to max_batch), the schedule ('1f1b' or 'gpipe'), "
      "the space and the sweep's threads. Immutable; raises InvalidInput on a bad value (the search checks the rest "
      "against the model and cluster).",
      [](const Search& options) { search::require_valid(options); },
      plain_field("memory_bytes", &Search::memory_bytes, "Per-device budget; 0: the cluster's device memory"),
      plain_field("granularity_bytes", &Search::granularity_bytes, "Memory step of the layer DP"),
      plain_field("global_batch", &Search::global_batch, "0: sweep batch_step, 2·batch_step, … up to max_batch"),
      plain_field("batch_step", &Search::batch_step, "The sweep's step"),
      plain_field("max_batch", &Search::max_batch, "The sweep's largest batch"),
      named_field("schedule", &Search::schedule, search::schedule_names, "'1f1b' or 'gpipe'"),
      plain_field("space", &Search::space, "Which paradigms the per-layer search may use"),
      plain_field("threads", &Search::threads,
                  "Batches of the sweep searched side by side; the result does not depend on it"));
}

}  // namespace

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
