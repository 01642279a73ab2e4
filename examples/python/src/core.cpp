// Schemes, strategies, length data and batches.
#include "bindings.hpp"

namespace sluice::python {

void bind_core(py::module_& module) {
  py::class_<Scheme>(module, "Scheme",
                     "One pipeline's shape: tensor-parallel degree tp, pipeline stages pp, and optionally context "
                     "parallelism (cp ranks of kind 'ring', 'ulysses' or 'hybrid', the hybrid with `ulysses` of them "
                     "in Ulysses groups) and full activation recomputation.")
      .def(py::init([](int tp, int pp, int cp, std::string_view cp_kind, int ulysses, bool recompute) {
             return Scheme({.tp = tp,
                            .pp = pp,
                            .cp = cp,
                            .cp_kind = value_in(cp_kind_names, cp_kind, "cp_kind"),
                            .ulysses = ulysses,
                            .recompute = recompute ? Recompute::full : Recompute::none});
           }),
           py::arg("tp"), py::arg("pp"), py::kw_only(), py::arg("cp") = 1, py::arg("cp_kind") = "ring",
           py::arg("ulysses") = 0, py::arg("recompute") = false)
      .def_static("parse", &Scheme::parse, py::arg("text"), "'tp4pp2', 'tp2cp4ringpp1', 'tp8pp2ac' or '<4,2>'.")
      .def_property_readonly("tp", &Scheme::tp)
      .def_property_readonly("pp", &Scheme::pp)
      .def_property_readonly("cp", &Scheme::cp)
      .def_property_readonly("cp_kind", [](const Scheme& scheme) { return name_in(cp_kind_names, scheme.cp_kind()); })
      .def_property_readonly("ulysses", &Scheme::ulysses)
      .def_property_readonly("recompute", [](const Scheme& scheme) { return scheme.recompute() == Recompute::full; })
      .def_property_readonly("gpus", &Scheme::gpus)
      .def_property_readonly("name", &Scheme::name)
      .def(py::self == py::self)
      .def(py::self < py::self)
      .def("__hash__", [](const Scheme& scheme) { return py::hash(py::str(scheme.name())); })
      .def("__repr__", [](const Scheme& scheme) { return "sluice.Scheme.parse('" + scheme.name() + "')"; })
      .def("__str__", &Scheme::name)
      .def(py::pickle([](const Scheme& scheme) { return py::make_tuple(scheme.name()); },
                      [](const py::tuple& state) { return Scheme::parse(state[0].cast<std::string>()); }));

  py::class_<StrategyPart>(module, "StrategyPart", "`pipelines` copies of one scheme.")
      .def(py::init([](Scheme scheme, int pipelines) {
             return StrategyPart{scheme, pipelines};
           }),
           py::arg("scheme"), py::arg("pipelines"))
      .def_readonly("scheme", &StrategyPart::scheme)
      .def_readonly("pipelines", &StrategyPart::pipelines)
      .def(py::self == py::self)
      .def("__repr__", [](const StrategyPart& part) {
        return "sluice.StrategyPart(" + part.scheme.name() + ", " + std::to_string(part.pipelines) + ")";
      });

  py::class_<Pipeline>(module, "Pipeline", "One pipeline of a strategy with the longest sequence it holds.")
      .def_readonly("index", &Pipeline::index)
      .def_readonly("scheme", &Pipeline::scheme)
      .def_readonly("max_len", &Pipeline::max_len)
      .def(py::self == py::self);

  py::class_<Strategy> strategy(
      module, "Strategy", "A heterogeneous strategy: a multiset of schemes, e.g. Strategy.parse('1*tp8pp1+2*tp2pp2').");
  strategy.def(py::init([](const std::vector<StrategyPart>& parts) { return Strategy(parts); }), py::arg("parts"))
      .def(py::init([](std::string_view text) { return Strategy::parse(text); }), py::arg("text"))
      .def_static("parse", &Strategy::parse, py::arg("text"))
      .def_static("homogeneous", &Strategy::homogeneous, py::arg("scheme"), py::arg("pipelines"))
      .def_property_readonly("parts", &Strategy::parts)
      .def_property_readonly("gpus", &Strategy::gpus)
      .def_property_readonly("pipeline_count", &Strategy::pipeline_count)
      .def_property_readonly("is_homogeneous", &Strategy::is_homogeneous)
      .def_property_readonly("name", &Strategy::name)
      .def("__hash__", [](const Strategy& value) { return py::hash(py::str(value.name())); })
      .def("__repr__", [](const Strategy& value) { return "sluice.Strategy('" + value.name() + "')"; })
      .def("__str__", &Strategy::name);
  def_document(strategy);
  py::implicitly_convertible<py::str, Strategy>();
}

void bind_data(py::module_& module) {
  py::class_<data::LengthStats> stats(module, "LengthStats");
  def_record_properties(stats).def(py::self == py::self);

  py::class_<data::LengthHistogram>(module, "LengthHistogram", "Bin k holds the lengths in (lower[k], upper[k]].")
      .def_readonly("bin_width", &data::LengthHistogram::bin_width)
      .def_property_readonly("lower",
                             [](const data::LengthHistogram& histogram) {
                               std::vector<std::int64_t> values;
                               for (const auto& bin : histogram.bins) values.push_back(bin.lower);
                               return array_of<std::int64_t>(values);
                             })
      .def_property_readonly("upper",
                             [](const data::LengthHistogram& histogram) {
                               std::vector<std::int64_t> values;
                               for (const auto& bin : histogram.bins) values.push_back(bin.upper);
                               return array_of<std::int64_t>(values);
                             })
      .def_property_readonly("counts",
                             [](const data::LengthHistogram& histogram) {
                               std::vector<std::int64_t> values;
                               for (const auto& bin : histogram.bins) values.push_back(bin.count);
                               return array_of<std::int64_t>(values);
                             })
      .def(py::self == py::self);

  py::class_<data::LengthDataset>(module, "LengthDataset", "The token lengths of a dataset's documents.")
      .def(py::init([](const py::handle& lengths, std::string source) {
             return data::LengthDataset(integers_from(lengths, source), source);
           }),
           py::arg("lengths"), py::arg("source") = "lengths")
      .def_static("load", &data::LengthDataset::load, py::arg("path"),
                  "A .txt/.csv (one length per line), .npy or Megatron .idx file.")
      .def_static(
          "bundled",
          [](std::string_view name) { return data::LengthDataset::load(io::resolve_data_file(name, "lengths")); },
          py::arg("name") = std::string(io::default_lengths), "A bundled length file by name ('man-pages'), or a path.")
      .def_property_readonly(
          "lengths",
          [](const py::object& self) { return view_of(self.cast<const data::LengthDataset&>().lengths(), self); },
          "A read-only view of the lengths (no copy).")
      .def("__len__", &data::LengthDataset::size)
      .def_property_readonly("tokens", &data::LengthDataset::tokens)
      .def_property_readonly("source", &data::LengthDataset::source)
      .def_property_readonly("context", &data::LengthDataset::context)
      .def_property_readonly("truncated_count", &data::LengthDataset::truncated_count)
      .def("truncated", &data::LengthDataset::truncated, py::arg("context"),
           "Lengths above `context` cut to it, as a trainer truncates documents.")
      .def("stats", &data::LengthDataset::stats)
      .def("histogram", &data::LengthDataset::histogram, py::arg("bin_width"));

  py::class_<data::Batch>(module, "Batch", "One batch of a sampler: sequence ids (dataset indices) and lengths.")
      .def_readonly("epoch", &data::Batch::epoch)
      .def_readonly("index", &data::Batch::index)
      .def_readonly("tokens", &data::Batch::tokens)
      .def_property_readonly("ids", [](const data::Batch& batch) { return ids_of(batch.sequences); })
      .def_property_readonly("lengths", [](const data::Batch& batch) { return lengths_of(batch.sequences); })
      .def("__len__", [](const data::Batch& batch) { return batch.sequences.size(); })
      .def(py::self == py::self);

  py::class_<data::BatchSampler>(
      module, "BatchSampler",
      "Shuffled batches of at most tokens_per_batch tokens; epoch e depends only on (seed, e). "
      "Iterating never ends: take as many batches as the run needs.")
      .def(py::init([](const data::LengthDataset& dataset, std::int64_t tokens_per_batch, std::uint64_t seed,
                       bool drop_last) {
             return data::BatchSampler(dataset,
                                       {.tokens_per_batch = tokens_per_batch, .seed = seed, .drop_last = drop_last});
           }),
           py::arg("dataset"), py::kw_only(), py::arg("tokens_per_batch"),
           py::arg("seed") = data::SamplerOptions{}.seed, py::arg("drop_last") = data::SamplerOptions{}.drop_last)
      .def("next", &data::BatchSampler::next)
      .def("__iter__", [](const py::object& self) { return self; })
      .def("__next__", &data::BatchSampler::next);

  const data::SyntheticOptions synthetic;
  module.def(
      "synthetic_lengths",
      [](std::int64_t count, double median, double sigma, double tail_fraction, double tail_alpha,
         std::int64_t tail_min, std::int64_t min_length, std::int64_t max_length, std::uint64_t seed) {
        const std::vector<std::int64_t> lengths = data::synthetic_lengths({.count = count,
                                                                           .median = median,
                                                                           .sigma = sigma,
                                                                           .tail_fraction = tail_fraction,
                                                                           .tail_alpha = tail_alpha,
                                                                           .tail_min = tail_min,
                                                                           .min_length = min_length,
                                                                           .max_length = max_length,
                                                                           .seed = seed});
        return array_of<std::int64_t>(lengths);
      },
      py::kw_only(), py::arg("count") = synthetic.count, py::arg("median") = synthetic.median,
      py::arg("sigma") = synthetic.sigma, py::arg("tail_fraction") = synthetic.tail_fraction,
      py::arg("tail_alpha") = synthetic.tail_alpha, py::arg("tail_min") = synthetic.tail_min,
      py::arg("min_length") = synthetic.min_length, py::arg("max_length") = synthetic.max_length,
      py::arg("seed") = synthetic.seed, "Long-tailed lengths: a log-normal body and a Pareto tail, seeded.");

  module.def("bundled_names", &io::bundled_names, py::arg("kind"),
             "Names of the bundled files of a kind: 'profiles', 'lengths', 'models' or 'clusters'.");
}

}  // namespace sluice::python
