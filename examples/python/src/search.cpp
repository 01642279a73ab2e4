// Galvatron-BMW's hybrid-parallel search: model and cluster specs, the per-layer space, the search with its
// baselines, the partition helpers, and the analytic profile that adapts a search model to the planner.
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "bindings.hpp"

namespace sluice::python {

namespace {

// JSON, pickling and == for a type the library writes only inside its documents (no format header).
template <class T>
void def_embedded(py::class_<T>& cls, const char* where) {
  cls.def(
         "to_json", [](const T& value, int indent) { return io::json(value).dump(indent); }, py::arg("indent") = 2,
         where)
      .def_static(
          "from_json", [](std::string_view text) { return io::parse(text, "JSON text").get<T>(); }, py::arg("text"))
      .def(py::pickle([](const T& value) { return io::json(value).dump(); },
                      [](const std::string& text) { return io::parse(text, "pickle").get<T>(); }))
      .def(py::self == py::self);
}

}  // namespace

void bind_search(py::module_& module) {
  // ---- the model and the cluster ----------------------------------------------------------------------------
  const search::LayerSpec layer_defaults;
  py::class_<search::LayerSpec>(module, "LayerSpec",
                                "One Transformer layer; params 0 means the dense layer's 4h² + 2h·ffn + 9h + ffn, "
                                "forward_seconds 0 means analytic from FLOPs; micro_batch_seconds is the forward time "
                                "a micro-batch adds beyond its samples'.")
      .def(py::init([](std::string type, std::int64_t hidden, std::int64_t heads, std::int64_t ffn,
                       std::int64_t sequence, std::int64_t window, std::int64_t params, bool decoder,
                       double forward_seconds, double micro_batch_seconds) {
             return search::LayerSpec{
                 std::move(type),    hidden, heads, ffn, sequence, window, params, decoder, forward_seconds,
                 micro_batch_seconds};
           }),
           py::kw_only(), py::arg("type") = layer_defaults.type, py::arg("hidden") = layer_defaults.hidden,
           py::arg("heads") = layer_defaults.heads, py::arg("ffn") = layer_defaults.ffn,
           py::arg("sequence") = layer_defaults.sequence, py::arg("window") = layer_defaults.window,
           py::arg("params") = layer_defaults.params, py::arg("decoder") = layer_defaults.decoder,
           py::arg("forward_seconds") = layer_defaults.forward_seconds,
           py::arg("micro_batch_seconds") = layer_defaults.micro_batch_seconds)
      .def_readwrite("type", &search::LayerSpec::type)
      .def_readwrite("hidden", &search::LayerSpec::hidden)
      .def_readwrite("heads", &search::LayerSpec::heads)
      .def_readwrite("ffn", &search::LayerSpec::ffn)
      .def_readwrite("sequence", &search::LayerSpec::sequence)
      .def_readwrite("window", &search::LayerSpec::window)
      .def_readwrite("params", &search::LayerSpec::params)
      .def_readwrite("decoder", &search::LayerSpec::decoder)
      .def_readwrite("forward_seconds", &search::LayerSpec::forward_seconds)
      .def_readwrite("micro_batch_seconds", &search::LayerSpec::micro_batch_seconds)
      .def_readwrite("activation_bytes", &search::LayerSpec::activation_bytes,
                     "Profiled activation bytes per sample by TP degree (empty: Megatron's count). A copy.")
      .def_readwrite("checkpoint_bytes", &search::LayerSpec::checkpoint_bytes,
                     "Profiled bytes a checkpointed layer keeps per sample by TP degree (empty: its input). A copy.")
      .def_property_readonly("attention_span", &search::LayerSpec::attention_span)
      .def_property_readonly("parameter_count", &search::LayerSpec::parameter_count)
      .def(py::self == py::self);

  const search::ModelSpec model_defaults;
  py::class_<search::ModelSpec> model(module, "ModelSpec", "The layers of one Transformer, for the search.");
  model
      .def(py::init([](std::string name, std::vector<search::LayerSpec> layers, std::int64_t embedding_params,
                       std::int64_t head_params, int dtype_bytes, double state_bytes_per_param) {
             search::ModelSpec value{std::move(name), std::move(layers), embedding_params,
                                     head_params,     dtype_bytes,       state_bytes_per_param};
             require_valid(value);
             return value;
           }),
           py::arg("name"), py::arg("layers"), py::kw_only(),
           py::arg("embedding_params") = model_defaults.embedding_params,
           py::arg("head_params") = model_defaults.head_params, py::arg("dtype_bytes") = model_defaults.dtype_bytes,
           py::arg("state_bytes_per_param") = model_defaults.state_bytes_per_param,
           "Raises InvalidInput for a bad model.")
      .def_static(
          "bundled",
          [](std::string_view name) {
            return io::read_document<search::ModelSpec>(io::resolve_data_file(name, "models"));
          },
          py::arg("name"), "A bundled model by name ('gpt-48', 'bert-huge-32', …) or a sluice.model file.")
      .def_readwrite("name", &search::ModelSpec::name)
      .def_readwrite("layers", &search::ModelSpec::layers, "A copy: assign the whole list to change it.")
      .def_readwrite("embedding_params", &search::ModelSpec::embedding_params)
      .def_readwrite("head_params", &search::ModelSpec::head_params)
      .def_readwrite("dtype_bytes", &search::ModelSpec::dtype_bytes)
      .def_readwrite("state_bytes_per_param", &search::ModelSpec::state_bytes_per_param)
      .def_readwrite("vocabulary_forward_seconds", &search::ModelSpec::vocabulary_forward_seconds)
      .def_readwrite("vocabulary_micro_batch_seconds", &search::ModelSpec::vocabulary_micro_batch_seconds)
      .def_readwrite("embedding_activation_bytes", &search::ModelSpec::embedding_activation_bytes)
      .def_readwrite("head_activation_bytes", &search::ModelSpec::head_activation_bytes)
      .def_readwrite("single_stage_vocabulary_state_bytes", &search::ModelSpec::single_stage_vocabulary_state_bytes)
      .def_readwrite("single_stage_vocabulary_activation_bytes",
                     &search::ModelSpec::single_stage_vocabulary_activation_bytes)
      .def(
          "validate", [](const search::ModelSpec& spec) { search::require_valid(spec); },
          "Raises InvalidInput for a bad model.");
  def_document(model);

  py::class_<search::LinkLevel>(module, "LinkLevel",
                                "Every aligned block of `size` consecutive ranks talks at `bandwidth` bytes/s.")
      .def(py::init([](std::int64_t size, double bandwidth) {
             return search::LinkLevel{size, bandwidth};
           }),
           py::arg("size"), py::arg("bandwidth"))
      .def_readwrite("size", &search::LinkLevel::size)
      .def_readwrite("bandwidth", &search::LinkLevel::bandwidth)
      .def(py::self == py::self);

  py::class_<search::CollectiveTime>(module, "CollectiveTime",
                                     "A measured collective: `size` consecutive ranks, `bytes` on each, `seconds`.")
      .def(py::init([](std::int64_t size, double bytes, double seconds) {
             return search::CollectiveTime{size, bytes, seconds};
           }),
           py::arg("size"), py::arg("bytes"), py::arg("seconds"))
      .def_readwrite("size", &search::CollectiveTime::size)
      .def_readwrite("bytes", &search::CollectiveTime::bytes)
      .def_readwrite("seconds", &search::CollectiveTime::seconds)
      .def(py::self == py::self);

  const search::ClusterSpec cluster_defaults;
  py::class_<search::ClusterSpec> cluster(
      module, "ClusterSpec", "The GPUs of the search: memory, FLOP/s and nested link levels (innermost first).");
  cluster
      .def(py::init([](std::string name, std::int64_t gpus, std::int64_t memory_bytes, double flops,
                       std::vector<search::LinkLevel> levels, std::int64_t reserved_bytes, double efficiency,
                       double overlap_slowdown) {
             search::ClusterSpec value{std::move(name), gpus,       memory_bytes,     reserved_bytes,
                                       flops,           efficiency, overlap_slowdown, std::move(levels)};
             require_valid(value);
             return value;
           }),
           py::arg("name"), py::arg("gpus"), py::arg("memory_bytes"), py::arg("flops"), py::arg("levels"),
           py::kw_only(), py::arg("reserved_bytes") = cluster_defaults.reserved_bytes,
           py::arg("efficiency") = cluster_defaults.efficiency,
           py::arg("overlap_slowdown") = cluster_defaults.overlap_slowdown, "Raises InvalidInput for a bad cluster.")
      .def_static(
          "bundled",
          [](std::string_view name) {
            return io::read_document<search::ClusterSpec>(io::resolve_data_file(name, "clusters"));
          },
          py::arg("name"), "A bundled cluster by name ('titan-8', 'a100-8', 'a100-64') or a sluice.cluster file.")
      .def_readwrite("name", &search::ClusterSpec::name)
      .def_readwrite("gpus", &search::ClusterSpec::gpus)
      .def_readwrite("memory_bytes", &search::ClusterSpec::memory_bytes)
      .def_readwrite("reserved_bytes", &search::ClusterSpec::reserved_bytes)
      .def_readwrite("flops", &search::ClusterSpec::flops)
      .def_readwrite("efficiency", &search::ClusterSpec::efficiency)
      .def_readwrite("overlap_slowdown", &search::ClusterSpec::overlap_slowdown)
      .def_readwrite("levels", &search::ClusterSpec::levels, "A copy: assign the whole list to change it.")
      .def_readwrite("strided_levels", &search::ClusterSpec::strided_levels,
                     "Measured bandwidths of groups of `size` ranks at a stride; a size not listed communicates at "
                     "its span's. A copy: assign the whole list to change it.")
      .def_readwrite("pipeline_levels", &search::ClusterSpec::pipeline_levels,
                     "Measured bandwidths between pipeline stages by PP degree (`size`); a degree not listed sends "
                     "at the span of two stages'. A copy: assign the whole list to change it.")
      .def_readwrite("all_reduce_times", &search::ClusterSpec::all_reduce_times,
                     "Measured all-reduces; where a group size is listed, TP's on consecutive ranks take them. A "
                     "copy: assign the whole list to change it.")
      .def_readwrite("all_to_all_times", &search::ClusterSpec::all_to_all_times,
                     "Measured all-to-alls, for Ulysses SP likewise. A copy: assign the whole list to change it.")
      .def("bandwidth", &search::ClusterSpec::bandwidth, py::arg("span"),
           "Bandwidth of a group spanning `span` consecutive ranks: the innermost level holding it.")
      .def(
          "validate", [](const search::ClusterSpec& spec) { search::require_valid(spec); },
          "Raises InvalidInput for a bad cluster.");
  def_document(cluster);

  // ---- the search space -------------------------------------------------------------------------------------
  const search::LayerStrategy strategy_defaults;
  py::class_<search::LayerStrategy>(module, "LayerStrategy",
                                    "One layer's strategy inside a stage of tp·sp·dp GPUs: sdp shards model "
                                    "states (ZeRO-3), zero2 gradients and optimizer states (ZeRO-2), sp > 1 splits "
                                    "each sample's sequence by Ulysses SP (tp then 1), tp_inner puts TP (or SP) on "
                                    "consecutive ranks, ckpt recomputes activations.")
      .def(py::init([](int tp, int dp, bool sdp, bool tp_inner, bool ckpt, bool zero2, int sp) {
             sluice::require(!(sdp && zero2), "LayerStrategy: sdp and zero2 are exclusive");
             sluice::require(tp >= 1 && dp >= 1 && sp >= 1, "LayerStrategy: tp, dp and sp must be >= 1, got ", tp, ", ",
                             dp, ", ", sp);
             sluice::require(tp == 1 || sp == 1, "LayerStrategy: tp and sp are exclusive, got tp ", tp, " and sp ", sp);
             return search::LayerStrategy{tp, dp, sdp, tp_inner, ckpt, zero2, sp};
           }),
           py::kw_only(), py::arg("tp") = strategy_defaults.tp, py::arg("dp") = strategy_defaults.dp,
           py::arg("sdp") = strategy_defaults.sdp, py::arg("tp_inner") = strategy_defaults.tp_inner,
           py::arg("ckpt") = strategy_defaults.ckpt, py::arg("zero2") = strategy_defaults.zero2,
           py::arg("sp") = strategy_defaults.sp)
      .def_readonly("tp", &search::LayerStrategy::tp)
      .def_readonly("dp", &search::LayerStrategy::dp)
      .def_readonly("sdp", &search::LayerStrategy::sdp)
      .def_readonly("tp_inner", &search::LayerStrategy::tp_inner)
      .def_readonly("ckpt", &search::LayerStrategy::ckpt)
      .def_readonly("zero2", &search::LayerStrategy::zero2)
      .def_readonly("sp", &search::LayerStrategy::sp)
      .def_property_readonly("group", &search::LayerStrategy::group)
      .def_property_readonly("name", &search::LayerStrategy::name,
                             "'tp2*sdp4+ckpt', 'z2dp8', 'sp4*dp2': levels outer to inner.")
      .def("same_layout", &search::LayerStrategy::same_layout, py::arg("other"),
           "Same TP (or SP) groups and activation layout: no resharding between the two.")
      .def(py::self == py::self)
      .def("__repr__",
           [](const search::LayerStrategy& value) { return "<sluice.LayerStrategy " + value.name() + ">"; });

  module.def("stage_strategies", &search::stage_strategies, py::arg("group"), py::arg("space") = search::SpaceOptions{},
             py::arg("heads_gcd") = 0,
             "The strategies a stage of `group` GPUs may use under `space` (TP dividing heads_gcd when > 0), in "
             "decision-tree order, CKPT variants after.");
  module.def("count_strategies", &search::count_strategies, py::arg("gpus"), py::arg("takeaway3"),
             "Strategies per layer over every PP degree, with and without CKPT: 68 for 8 GPUs, 44 after Takeaway 3.");
  module.def(
      "baseline_spaces",
      [](std::int64_t gpus) {
        sluice::require(gpus >= 1 && gpus <= (1 << 20), "baseline_spaces: gpus must be in [1, 2^20], got ", gpus);
        return search::baseline_spaces(gpus);
      },
      py::arg("gpus"), "The limited spaces of the baselines (dp, sdp, tp, pp, dp+tp, dp+pp), as (name, space).");

  // ---- plans and the search ---------------------------------------------------------------------------------
  py::class_<search::StagePlan> stage(module, "SearchStagePlan", "One pipeline stage of a search plan.");
  def_record_properties(stage).def(py::self == py::self);

  const search::SearchOptions search_defaults;
  py::class_<search::Plan> plan(module, "SearchPlan",
                                "A hybrid-parallel plan: PP degree, global batch, micro-batches and per-stage layer "
                                "strategies; `method` names the search that found it.");
  def_record_properties(plan)
      .def_property_readonly("partition", &search::Plan::partition, "Layers per stage.")
      .def(
          "validate",
          [](const search::Plan& value, search::ModelSpec spec, search::ClusterSpec gpus,
             const search::SearchOptions& options) {
            const py::gil_scoped_release release;
            search::validate(value, spec, gpus, options, options.space);
          },
          py::arg("model"), py::arg("cluster"), py::kw_only(), py::arg("options") = search_defaults,
          "Raises InvalidPlan: every time and memory figure re-derived from the estimator, strategies from the "
          "options' space (a baseline's plan: its space from baseline_spaces).");
  def_embedded(plan, "As the search report writes it.");

  py::class_<search::Baseline>(module, "SearchBaseline", "A baseline's best plan; None when nothing in its space fits.")
      .def_readonly("name", &search::Baseline::name)
      .def_readonly("plan", &search::Baseline::plan);

  py::class_<search::SearchReport> report(module, "SearchReport",
                                          "Galvatron-BMW's plan, Galvatron-Base's and every baseline's.");
  report.def_readonly("best", &search::SearchReport::best, "BMW's plan, never below Base")
      .def_readonly("base", &search::SearchReport::base, "Base's plan, never below a baseline within the space")
      .def_property_readonly("baselines", member_getter(&search::SearchReport::baselines))
      .def("validate",
           py::overload_cast<const search::SearchReport&, const search::ModelSpec&, const search::ClusterSpec&,
                             const search::SearchOptions&>(&search::validate),
           without_gil, py::arg("model"), py::arg("cluster"), py::kw_only(), py::arg("options") = search_defaults,
           "Raises InvalidPlan: every plan against the space that produced it, and BMW >= Base >= the baselines.");
  def_document(report);

  // search and search_base take the same options; only the search run and the result differ.
  const auto def_search = [&](const char* name, auto run, const char* doc) {
    module.def(
        name,
        [run](search::ModelSpec spec, search::ClusterSpec gpus, const search::SearchOptions& options) {
          const py::gil_scoped_release release;
          return run(spec, gpus, options);
        },
        py::arg("model"), py::arg("cluster"), py::kw_only(), py::arg("options") = search_defaults, doc);
  };
  def_search(
      "search",
      [](const search::ModelSpec& spec, const search::ClusterSpec& gpus, const search::SearchOptions& options) {
        return search::search(spec, gpus, options);
      },
      "Galvatron-BMW over the options' space, with Galvatron-Base and the baselines: per global batch, PP degree and "
      "micro-batch count, the layer DP's strategies within the options' memory per device. Raises Infeasible when "
      "nothing fits.");
  def_search(
      "search_base",
      [](const search::ModelSpec& spec, const search::ClusterSpec& gpus, const search::SearchOptions& options) {
        return search::search_base(spec, gpus, options);
      },
      "Galvatron-Base alone over the options' space (even partitions); None when nothing fits.");
  module.def(
      "evaluate_search_plan",
      [](search::Plan chosen, const search::ModelSpec& spec, const search::ClusterSpec& gpus,
         const search::SearchOptions& options) { return search::evaluate(std::move(chosen), spec, gpus, options); },
      py::arg("plan"), py::arg("model"), py::arg("cluster"), py::kw_only(), py::arg("options") = search_defaults,
      "The plan (PP degree, batch, micro-batches, partition, strategies) costed by the estimator under the options' "
      "schedule: every stage's times and memory, the iteration time and the throughput, whoever chose it. Raises "
      "InvalidInput when its partition or strategies do not fit the model and cluster.");

  py::class_<search::Adjustment> adjustment(module, "PartitionAdjustment",
                                            "One accepted BMW partition move, with Eq. 6's balance degrees.");
  def_record_properties(adjustment);
  py::class_<search::BalanceTrace> trace(module, "BalanceTrace",
                                         "BMW's partition search of one (batch, pp, micro-batches): p_m, p_t, the "
                                         "accepted moves and the best partition seen.");
  def_record_properties(trace);

  module.def(
      "balance_trace",
      [](search::ModelSpec spec, search::ClusterSpec gpus, int pp, std::int64_t batch, int micro_batches,
         const search::SearchOptions& options) {
        const py::gil_scoped_release release;
        return search::balance_trace(spec, gpus, options, pp, batch, micro_batches);
      },
      py::arg("model"), py::arg("cluster"), py::arg("pp"), py::arg("batch"), py::arg("micro_batches"), py::kw_only(),
      py::arg("options") = search_defaults,
      "The BMW partition search of one (batch, pp, micro_batches), for inspection.");

  // ---- Galvatron's own profiles -----------------------------------------------------------------------------
  const search::GalvatronSettings galvatron_defaults;
  module.def(
      "galvatron_inputs",
      [](const std::filesystem::path& directory, search::ModelSpec shape, std::int64_t memory_bytes,
         std::string_view time_mode, bool sequence_parallel, std::string model_name, std::string precision, int nodes,
         int gpus_per_node) {
        const search::GalvatronSettings settings{.time_mode = search::galvatron_time_mode(time_mode),
                                                 .sequence_parallel = sequence_parallel,
                                                 .memory_bytes = memory_bytes};
        const search::GalvatronProfile profile =
            io::read_galvatron(directory, {std::move(model_name), std::move(precision), nodes, gpus_per_node});
        return std::pair{search::galvatron_model(profile, std::move(shape), settings),
                         search::galvatron_cluster(profile, settings)};
      },
      py::arg("directory"), py::arg("model"), py::kw_only(), py::arg("memory_bytes") = galvatron_defaults.memory_bytes,
      py::arg("time_mode") = "batch", py::arg("sequence_parallel") = galvatron_defaults.sequence_parallel,
      py::arg("model_name") = "", py::arg("precision") = "", py::arg("nodes") = 0, py::arg("gpus_per_node") = 0,
      "The model (`model`'s shape with Galvatron's profiled times, parameters and activations) and the cluster of "
      "a directory of Galvatron's profile files (or a bundled set: 'llama2-7b'); raises InvalidInput naming a bad "
      "file and key.");

  py::class_<io::GalvatronPlan>(module, "GalvatronPlan",
                                "A plan Galvatron's search wrote, as sluice's search expresses it.")
      .def_readonly("plan", &io::GalvatronPlan::plan)
      .def_property_readonly(
          "schedule",
          [](const io::GalvatronPlan& read) { return std::string(name_in(search::schedule_names, read.schedule)); },
          "'1f1b' (Galvatron's pipedream_flush) or 'gpipe'.");
  module.def(
      "read_galvatron_plan",
      [](const std::filesystem::path& path, int layers, std::int64_t gpus) {
        return io::read_galvatron_plan(path, layers, gpus);
      },
      py::arg("path"), py::arg("layers"), py::arg("gpus"),
      "The plan in Galvatron's galvatron_config_*.json for a model of `layers` layers on `gpus` GPUs; raises "
      "InvalidInput naming a bad field or layer.");

  // ---- partitions ---------------------------------------------------------------------------------------------
  module.def("even_partition", &search::even_partition, py::arg("layers"), py::arg("stages"),
             "Layers per stage, the remainder on the deepest stages (Galvatron-Base's split).");
  module.def(
      "balance_degree",
      [](const py::handle& values) {
        const std::vector<double> numbers = real_vector_from(values, "values");
        for (std::size_t i = 0; i < numbers.size(); ++i)
          sluice::require(std::isfinite(numbers[i]), "values[", i, "] = ", numbers[i], ": expected a finite number");
        return search::balance(numbers);
      },
      py::arg("values"), "Eq. 6: 1 − max / sum, in [0, 1 − 1/P]; 1 − 1/P is perfect balance.");

  // ---- the analytic profile ---------------------------------------------------------------------------------
  const search::AnalyticProfileOptions profile_defaults;
  module.def(
      "analytic_profile",
      [](search::ModelSpec spec, search::ClusterSpec gpus, std::int64_t memory_bytes, std::int64_t min_length,
         std::int64_t max_length, std::int64_t granularity, int max_tp) {
        const py::gil_scoped_release release;
        return search::analytic_profile(spec, gpus,
                                        {.memory_bytes = memory_bytes,
                                         .min_length = min_length,
                                         .max_length = max_length,
                                         .granularity = granularity,
                                         .max_tp = max_tp});
      },
      py::arg("model"), py::arg("cluster"), py::kw_only(), py::arg("memory_bytes") = profile_defaults.memory_bytes,
      py::arg("min_length") = profile_defaults.min_length, py::arg("max_length") = profile_defaults.max_length,
      py::arg("granularity") = profile_defaults.granularity, py::arg("max_tp") = profile_defaults.max_tp,
      "A Profile from the analytic estimator: per scheme ⟨tp, pp⟩, T(l) fitted over lengths min_length, "
      "2·min_length, …, max_length, and MaxLen the longest multiple of `granularity` whose first-stage memory "
      "fits.");
  module.def("analytic_stage_time", &search::analytic_stage_time, without_gil, py::arg("model"), py::arg("cluster"),
             py::arg("scheme"), py::arg("length"),
             "Seconds of one sequence of `length` tokens on the slowest stage of the even partition.");
  module.def("analytic_stage_memory", &search::analytic_stage_memory, without_gil, py::arg("model"), py::arg("cluster"),
             py::arg("scheme"), py::arg("length"),
             "First-stage bytes of one sequence of `length` tokens, with pp sequences in flight.");
}

}  // namespace sluice::python
