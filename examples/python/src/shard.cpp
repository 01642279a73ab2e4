// Optimization–propagation disaggregation (Hydraulis §5): placements, optimizer layouts, the pull and push
// plans between them, their α–β cost, and the ranks and process groups a trainer creates.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bindings.hpp"
#include "sluice/shard/check.hpp"
#include "sluice/shard/holders.hpp"

namespace sluice::python {

namespace {

// JSON for the types the library writes only inside other documents (no format header, no file of their own).
template <class T>
std::string embedded_json(const T& value, int indent) {
  return io::json(value).dump(indent);
}

// What a pull and a push plan share: GPUs, slice blocks, pieces and messages (structured NumPy views: a pull has
// about N²/TP of them), byte counts and the validator.
template <class Plan>
void def_transfer_plan(py::class_<Plan>& cls) {
  const char* messages_doc =
      "Structured view (src, dst, first_piece, piece_count, bytes): pieces[first_piece:first_piece + piece_count] "
      "from src to dst; messages of one source with equal pieces share them.";
  const auto messages = [](std::vector<shard::Message> Plan::*member) {
    return [member](const py::object& self) { return view_of<shard::Message>(self.cast<const Plan&>().*member, self); };
  };
  cls.def_readonly("gpus", &Plan::gpus)
      .def_property_readonly("blocks", member_getter(&Plan::blocks))
      .def_property_readonly(
          "pieces", [](const py::object& self) { return view_of<shard::Piece>(self.cast<const Plan&>().pieces, self); },
          "Structured view (block, begin, end): mutual slices [begin, end) of block `block`.")
      .def_property_readonly("sends", messages(&Plan::sends), messages_doc)
      .def_property_readonly("local_moves", messages(&Plan::local_moves), messages_doc)
      .def_readonly("send_bytes", &Plan::send_bytes)
      .def_readonly("local_bytes", &Plan::local_bytes)
      .def("validate",
           py::overload_cast<const Plan&, const shard::Placement&, const shard::OptimizerLayout&, const shard::Model&>(
               &shard::validate),
           without_gil, py::arg("placement"), py::arg("layout"), py::arg("model"),
           "Raises InvalidPlan naming the first broken invariant against the placement, layout and model.");
}

}  // namespace

void bind_shard(py::module_& module) {
  // Pieces and messages come out as structured NumPy views of the plan's vectors: a pull has about N²/TP of them.
  PYBIND11_NUMPY_DTYPE(shard::Piece, block, begin, end);
  PYBIND11_NUMPY_DTYPE(shard::Message, src, dst, first_piece, piece_count, bytes);

  // ---- the model and the cluster ----------------------------------------------------------------------------
  py::class_<shard::Tensor>(module, "ShardTensor", "One parameter tensor of a layer: its elements per layer.")
      .def(py::init([](std::string name, std::int64_t elements) {
             return shard::Tensor{std::move(name), elements};
           }),
           py::arg("name"), py::arg("elements"))
      .def_readwrite("name", &shard::Tensor::name)
      .def_readwrite("elements", &shard::Tensor::elements)
      .def(py::self == py::self)
      .def("__repr__", [](const shard::Tensor& tensor) {
        return "sluice.ShardTensor('" + tensor.name + "', " + std::to_string(tensor.elements) + ")";
      });

  const shard::Model model_defaults;
  py::class_<shard::Model> model(module, "ShardModel",
                                 "The parameters pull and push move: `layers` identical layers of `tensors`.");
  model
      .def(py::init(
               [](std::string name, int layers, std::vector<shard::Tensor> tensors, int param_bytes, int grad_bytes) {
                 shard::Model value{std::move(name), layers, std::move(tensors), param_bytes, grad_bytes};
                 shard::require_valid(value);
                 return value;
               }),
           py::arg("name"), py::arg("layers"), py::arg("tensors"), py::kw_only(),
           py::arg("param_bytes") = model_defaults.param_bytes, py::arg("grad_bytes") = model_defaults.grad_bytes,
           "Raises InvalidInput for a bad model.")
      .def_static(
          "llama_like", [](const cost::Profile& profile) { return shard::llama_like(profile.spec().model); },
          py::arg("profile"),
          "The profile's model as LLaMA-style layers (fused QKV, attention output, gate+up, down), as `sluice shard` "
          "takes it.")
      .def_readwrite("name", &shard::Model::name)
      .def_readwrite("layers", &shard::Model::layers)
      .def_readwrite("tensors", &shard::Model::tensors, "A copy: assign the whole list to change it.")
      .def_readwrite("param_bytes", &shard::Model::param_bytes)
      .def_readwrite("grad_bytes", &shard::Model::grad_bytes)
      .def_property_readonly("layer_elements", &shard::Model::layer_elements)
      .def_property_readonly("max_tensor_elements", &shard::Model::max_tensor_elements)
      .def(
          "validate", [](const shard::Model& spec) { shard::require_valid(spec); },
          "Raises InvalidInput for a bad model.");
  def_document(model);

  const shard::Cluster cluster_defaults;
  const cost::Links& default_links = cluster_defaults.links;
  py::class_<shard::Cluster>(module, "ShardCluster",
                             "Nodes of gpus_per_node GPUs; local, intra-node and inter-node links (default: A800 "
                             "nodes with one 200 Gb/s NIC per GPU).")
      .def(py::init([](int gpus_per_node, cost::Link local, cost::Link intra_node, cost::Link inter_node) {
             shard::Cluster value{gpus_per_node, {local, intra_node, inter_node}};
             shard::require_valid(value);
             return value;
           }),
           py::kw_only(), py::arg("gpus_per_node") = cluster_defaults.gpus_per_node,
           py::arg_v("local", default_links.local, link_text(default_links.local).c_str()),
           py::arg_v("intra_node", default_links.intra_node, link_text(default_links.intra_node).c_str()),
           py::arg_v("inter_node", default_links.inter_node, link_text(default_links.inter_node).c_str()))
      .def_readwrite("gpus_per_node", &shard::Cluster::gpus_per_node)
      .def_property(
          "local", [](const shard::Cluster& cluster) { return cluster.links.local; },
          [](shard::Cluster& cluster, const cost::Link& link) { cluster.links.local = link; })
      .def_property(
          "intra_node", [](const shard::Cluster& cluster) { return cluster.links.intra_node; },
          [](shard::Cluster& cluster, const cost::Link& link) { cluster.links.intra_node = link; })
      .def_property(
          "inter_node", [](const shard::Cluster& cluster) { return cluster.links.inter_node; },
          [](shard::Cluster& cluster, const cost::Link& link) { cluster.links.inter_node = link; })
      .def("validate", [](const shard::Cluster& cluster) { shard::require_valid(cluster); })
      .def("to_json", &embedded_json<shard::Cluster>, py::arg("indent") = 2,
           "As `sluice shard --json` writes it under 'cluster'.")
      .def_static(
          "from_json", [](std::string_view text) { return io::parse(text, "JSON text").get<shard::Cluster>(); },
          py::arg("text"))
      .def(py::self == py::self);

  const py::arg_v cluster_arg("cluster", cluster_defaults, "ShardCluster()");

  // ---- placements and optimizer layouts ---------------------------------------------------------------------
  py::class_<shard::Stage>(module, "PlacementStage",
                           "Layers [layer_begin, layer_end); CP rank c's TP rank t is GPU ranks[c*TP + t] and holds "
                           "the fraction [t/TP, (t+1)/TP) of every parameter.")
      .def_readonly("layer_begin", &shard::Stage::layer_begin)
      .def_readonly("layer_end", &shard::Stage::layer_end)
      .def_readonly("ranks", &shard::Stage::ranks)
      .def(py::self == py::self);

  py::class_<shard::PipelinePlacement> pipeline_placement(module, "PipelinePlacement",
                                                          "One pipeline: its scheme and pp stages.");
  def_record_properties(pipeline_placement).def(py::self == py::self);

  py::class_<shard::Placement> placement(
      module, "Placement", "Where a strategy runs: per pipeline, per stage, the GPU of every (CP rank, TP rank).");
  def_record_properties(placement).def(
      "validate", [](const shard::Placement& value) { shard::validate(value); },
      "Raises InvalidPlan: every pipeline has pp stages of tp*cp ranks tiling the layers, no rank used twice.");
  def_document(placement);

  py::class_<shard::OwnerGroup> owner_group(
      module, "OwnerGroup", "For layers [layer_begin, layer_end), segment r of every parameter lives on owners[r].");
  def_record_properties(owner_group)
      .def(py::init([](int layer_begin, int layer_end, std::vector<int> owners) {
             return shard::OwnerGroup{layer_begin, layer_end, std::move(owners)};
           }),
           py::arg("layer_begin"), py::arg("layer_end"), py::arg("owners"))
      .def(py::self == py::self);

  py::class_<shard::OptimizerLayout> layout(module, "OptimizerLayout",
                                            "Where the optimizer states live: owner groups tiling the layers.");
  layout.def(py::init([](std::int64_t gpus, int layers, std::vector<shard::OwnerGroup> groups) {
               return shard::OptimizerLayout{gpus, layers, std::move(groups)};
             }),
             py::arg("gpus"), py::arg("layers"), py::arg("groups"));
  def_record_properties(layout).def(
      "validate", [](const shard::OptimizerLayout& value) { shard::validate(value); },
      "Raises InvalidPlan: groups tile [0, layers) in order, every owner a rank of the cluster.");
  def_document(layout);

  const shard::PlacementOptions placement_defaults;
  module.def(
      "place", &shard::place, without_gil, py::arg("strategy"), py::arg("gpus"), py::arg("layers"), py::kw_only(),
      py::arg("options") = placement_defaults,
      "Pipelines on contiguous rank blocks in options.order, stage after stage, options.stage_layers giving a PP "
      "degree's layers per stage (default: even). Raises Infeasible when the strategy does not fit.");
  module.def("sharded_layout", &shard::sharded_layout, py::arg("gpus"), py::arg("layers"),
             "Hydraulis' layout: every parameter sharded over all GPUs, segment r on GPU r.");
  module.def("aligned_layout", &shard::aligned_layout, without_gil, py::arg("placement"),
             "The layout a push under `placement` leaves: pulling from it for the same placement is an all-gather.");
  module.def(
      "holder_placement",
      [](const shard::Placement& value, std::string_view held_by, bool replicated) {
        const shard::HeldBy by = held_by == "every_stage"   ? shard::HeldBy::every_stage
                                 : held_by == "first_stage" ? shard::HeldBy::first_stage
                                 : held_by == "last_stage"
                                     ? shard::HeldBy::last_stage
                                     : throw sluice::invalid_input(sluice::concat(
                                           "holder_placement: held_by must be 'every_stage', 'first_stage' or "
                                           "'last_stage', got '",
                                           held_by, "'"));
        return shard::holder_placement(value, by, replicated);
      },
      py::arg("placement"), py::arg("held_by"), py::kw_only(), py::arg("replicated"),
      "Where a group of tensors other than the layers' TP-split weights is held: one layer on every pipeline's first "
      "or last stage ('first_stage', 'last_stage'), or the layers' ('every_stage'); replicated, every lane a "
      "replica of TP 1.");

  // ---- pull and push plans ----------------------------------------------------------------------------------
  py::class_<shard::SliceBlock> slice_block(
      module, "SliceBlock", "Layers [layer_begin, layer_end), every tensor cut into `granularity` mutual slices.");
  def_record_properties(slice_block).def(py::self == py::self);

  py::class_<shard::RsGroup> rs_group(
      module, "RsGroup",
      "The reduce-scatter of one TP-grid segment of a block over one rank per pipeline and CP rank.");
  def_record_properties(rs_group).def(py::self == py::self);

  py::class_<shard::PullPlan> pull(module, "PullPlan",
                                   "16-bit parameters from the optimizer layout into the propagation placement.");
  def_transfer_plan(pull);
  def_document(pull);

  py::class_<shard::PushPlan> push(module, "PushPlan",
                                   "Gradients reduce-scattered across the pipelines, then sent to their optimizer "
                                   "owners.");
  def_transfer_plan(push);
  push.def_readonly("grid", &shard::PushPlan::grid, "G: the LCM of the TP degrees")
      .def_readonly("pipelines", &shard::PushPlan::pipelines)
      .def_property_readonly("rs_groups", member_getter(&shard::PushPlan::rs_groups));
  def_document(push);

  module.def(
      "plan_pull", &shard::plan_pull, without_gil, py::arg("placement"), py::arg("layout"), py::arg("model"),
      "Per block, M = LCM(owner segments, TP degrees) mutual slices; TP rank t takes its fraction from the owners.");
  const shard::PushOptions push_defaults;
  module.def(
      "plan_push",
      [](const shard::Placement& where, const shard::OptimizerLayout& to, shard::Model shard_model, bool match_owners) {
        const py::gil_scoped_release release;
        return shard::plan_push(where, to, shard_model, {.match_owners = match_owners});
      },
      py::arg("placement"), py::arg("layout"), py::arg("model"), py::kw_only(),
      py::arg("match_owners") = push_defaults.match_owners,
      "Reduce-scatter per TP-grid segment over the pipelines, then every summed piece to its optimizer owner; "
      "match_owners gives each piece to the member owning most of it.");
  module.def("check_pull", &shard::check_pull, without_gil, py::arg("plan"), py::arg("placement"), py::arg("layout"),
             py::arg("model"), py::kw_only(), py::arg("seed") = 0,
             "Runs the pull on host buffers of random integers and raises InvalidPlan at the first misplaced element. "
             "For tiny models only: it allocates about 27 · gpus · layers · layer_elements bytes.");
  module.def(
      "check_push", &shard::check_push, without_gil, py::arg("plan"), py::arg("placement"), py::arg("layout"),
      py::arg("model"), py::kw_only(), py::arg("seed") = 0,
      "Runs the reduce-scatters and the push on host buffers of random integers and raises InvalidPlan at the first "
      "wrong sum. For tiny models only: it allocates about 45 · gpus · layers · layer_elements bytes.");

  // ---- costs ------------------------------------------------------------------------------------------------
  py::class_<shard::LinkBytes> link_bytes(module, "LinkBytes", "Bytes moved per link class.");
  def_record_properties(link_bytes).def_property_readonly("total", &shard::LinkBytes::total).def(py::self == py::self);

  py::class_<shard::PhaseCost> phase_cost(module, "PhaseCost",
                                          "One phase: bytes per link class, messages, α–β seconds.");
  def_record_properties(phase_cost).def(py::self == py::self);

  py::class_<shard::ShardCost>(module, "ShardCost", "The pull, the push's reduce-scatter and the push's LNK.")
      .def_readonly("pull", &shard::ShardCost::pull)
      .def_readonly("reduce_scatter", &shard::ShardCost::reduce_scatter)
      .def_readonly("push", &shard::ShardCost::push)
      .def_property_readonly("seconds", &shard::ShardCost::seconds,
                             "The three phases back to back: what the LNK adds when none of it overlaps computation.")
      .def("to_json", &embedded_json<shard::ShardCost>, py::arg("indent") = 2,
           "As `sluice shard --json` writes it under 'cost'.")
      .def(py::self == py::self);

  module.def(
      "plan_cost", &shard::plan_cost, without_gil, py::arg("pull"), py::arg("push"), cluster_arg,
      "Bytes per link class and α–β time of each phase: a phase lasts as long as its busiest rank and link class.");
  module.def("iteration_cost",
             py::overload_cast<const shard::OptimizerLayout&, const Strategy&, const shard::Model&,
                               const shard::Cluster&, const shard::PlacementOptions&>(&shard::iteration_cost),
             without_gil, py::arg("layout"), py::arg("candidate"), py::arg("model"), cluster_arg, py::kw_only(),
             py::arg("options") = placement_defaults,
             "plan_cost of the candidate's pull and push against `layout`, without storing the pull's messages.");
  module.def(
      "iteration_costs",
      [](const shard::OptimizerLayout& from, const std::vector<Strategy>& candidates, shard::Model shard_model,
         shard::Cluster cluster, const shard::PlacementOptions& options) {
        std::vector<double> seconds;
        {
          const py::gil_scoped_release release;
          seconds = shard::iteration_costs(from, candidates, shard_model, cluster, options);
        }
        return array_of<double>(seconds);
      },
      py::arg("layout"), py::arg("candidates"), py::arg("model"), cluster_arg, py::kw_only(),
      py::arg("options") = placement_defaults,
      "Per candidate, iteration_cost(...).seconds: what plan_iteration's candidate_overhead takes (as sluice plan "
      "--lnk).");
  module.def("switching_cost", &shard::switching_cost, without_gil, py::arg("previous"), py::arg("candidate"),
             py::arg("gpus"), py::arg("model"), cluster_arg, py::kw_only(), py::arg("options") = placement_defaults,
             "iteration_cost when the optimizer states follow `previous`'s aligned layout instead of the sharded one.");

  // ---- ranks and process groups -----------------------------------------------------------------------------
  py::class_<shard::ProcessGroups>(module, "ProcessGroups",
                                   "The groups every rank joins, as lists of global ranks; pipelines in plan order.")
      .def_readonly("tp", &shard::ProcessGroups::tp,
                    "Per (plan pipeline, stage, CP rank): its TP group, shard 0 first.")
      .def_readonly("pp", &shard::ProcessGroups::pp,
                    "Per (plan pipeline, CP rank, TP shard): its ranks, stage 0 first (the send/recv neighbours).")
      .def_readonly("dp", &shard::ProcessGroups::dp,
                    "Per (scheme, stage, TP shard): the ranks of that shard in every pipeline and CP rank of the "
                    "scheme.")
      .def_readonly("cp", &shard::ProcessGroups::cp,
                    "Per (plan pipeline with CP, stage, TP shard): the ranks sharing its sequences; empty without CP.")
      .def(py::self == py::self);

  py::class_<shard::RankPlacement> ranks(
      module, "RankPlacement", "The global rank of every (pipeline, stage, CP rank, TP shard) and the process groups.");
  ranks.def_readonly("placement", &shard::RankPlacement::placement, "shard placement: pipelines in canonical order")
      .def_readonly("gpus_per_node", &shard::RankPlacement::gpus_per_node)
      .def_readonly("tp_within_node", &shard::RankPlacement::tp_within_node)
      .def_readonly("plan_order", &shard::RankPlacement::plan_order,
                    "plan_order[j]: the placement pipeline that runs pipeline j of an IterationPlan.")
      .def_readonly("groups", &shard::RankPlacement::groups)
      .def("validate",
           py::overload_cast<const shard::RankPlacement&, const Strategy&, const cost::Profile&>(&shard::validate),
           without_gil, py::arg("strategy"), py::arg("profile"),
           "Raises InvalidPlan naming the first broken invariant against the strategy and profile.");
  def_document(ranks);

  module.def(
      "rank_placement", py::overload_cast<const Strategy&, const cost::Profile&, bool>(&shard::rank_placement),
      without_gil, py::arg("strategy"), py::arg("profile"), py::kw_only(), py::arg("tp_within_node") = true,
      "The strategy's ranks on the profile's cluster (shard placement, nodes of the profile's gpus_per_node) and "
      "the process groups, as `sluice plan --json` gives them per iteration.");
  module.def(
      "flex_domain_ranks",
      [](const Strategy& domain, const cost::Profile& profile, bool tp_within_node, std::optional<int> layers,
         std::optional<std::vector<int>> stage_layers) {
        shard::PlacementOptions options{.gpus_per_node = profile.spec().gpus_per_node,
                                        .tp_within_node = tp_within_node};
        if (stage_layers) options.stage_layers[domain.parts().front().scheme.pp()] = std::move(*stage_layers);
        const py::gil_scoped_release release;
        return shard::flex_domain_ranks(domain, profile, layers.value_or(profile.spec().model.layers), options);
      },
      py::arg("domain"), py::arg("profile"), py::kw_only(), py::arg("tp_within_node") = true,
      py::arg("layers") = py::none(), py::arg("stage_layers") = py::none(),
      "The ranks of a flex CP domain (FlexIteration.strategy: replicas of one ⟨TP, PP⟩ scheme), placed as the one "
      "CP pipeline ⟨TP, CP = units, PP⟩ that its groups re-form within, so that an aligned group's stage stays "
      "inside a node where it fits, as its cost assumes. groups.cp: per (stage, TP shard), every unit's rank in "
      "unit order, the `ranks` of that pool's FlexCPGroups; groups.tp and groups.pp: each unit's. layers: the "
      "model's (default: the profile's); stage_layers: the layers of each of its PP stages (default: even).");
}

}  // namespace sluice::python
