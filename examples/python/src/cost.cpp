// Profiles: bundled, from JSON files (sluice's or Hetu's strategy_pool), and fitted from measured samples.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "bindings.hpp"
#include "sluice/cost/context_parallel.hpp"

namespace sluice::python {

namespace {

// An optional per-sample column: None, or as many values as tokens, NaN where a sample has none.
std::optional<std::vector<double>> optional_column(const py::handle& values, const char* name, std::size_t count) {
  if (values.is_none()) return std::nullopt;
  std::vector<double> column = real_vector_from(values, name);
  sluice::require(column.size() == count, name, ": expected ", count, " values, as many as tokens, got ",
                  column.size());
  return column;
}

std::vector<cost::ProfileSample> samples_from(const std::vector<std::string>& schemes, const py::handle& tokens,
                                              const py::handle& seconds, const py::handle& peak_bytes,
                                              const py::handle& inner_seconds, const py::handle& sequences) {
  const std::vector<std::int64_t> token_values = integers_from(tokens, "tokens");
  const std::vector<double> second_values = real_vector_from(seconds, "seconds");
  sluice::require(schemes.size() == token_values.size() && second_values.size() == token_values.size(),
                  "fit: schemes, tokens and seconds need the same length, got ", schemes.size(), ", ",
                  token_values.size(), " and ", second_values.size());
  const auto peak_values = optional_column(peak_bytes, "peak_bytes", token_values.size());
  const auto inner_values = optional_column(inner_seconds, "inner_seconds", token_values.size());
  const std::vector<std::int64_t> sequence_counts =
      sequences.is_none() ? std::vector<std::int64_t>(token_values.size(), 1) : integers_from(sequences, "sequences");
  sluice::require(sequence_counts.size() == token_values.size(), "sequences: expected ", token_values.size(),
                  " values, as many as tokens, got ", sequence_counts.size());
  // NaN marks a sample measured without the value, as read_profile_samples gives it.
  const auto value_at = [](const std::optional<std::vector<double>>& column, std::size_t i) {
    return column && !std::isnan((*column)[i]) ? std::optional((*column)[i]) : std::nullopt;
  };
  std::vector<cost::ProfileSample> samples;
  for (std::size_t i = 0; i < schemes.size(); ++i) {
    const cost::ProfileSample sample{.scheme = Scheme::parse(schemes[i]),
                                     .tokens = token_values[i],
                                     .seconds = second_values[i],
                                     .peak_bytes = value_at(peak_values, i),
                                     .inner_seconds = value_at(inner_values, i),
                                     .sequences = sequence_counts[i]};
    io::detail::check_sample(sample, "sample " + std::to_string(i));
    samples.push_back(sample);
  }
  return samples;
}

}  // namespace

void bind_cost(py::module_& module) {
  py::class_<cost::Link>(module, "Link",
                         "An α–β link: a message of b bytes takes latency + b / bandwidth seconds; free by default.")
      .def(py::init([](double latency, double bandwidth) {
             const cost::Link link{.latency = latency, .bandwidth = bandwidth};
             cost::require_valid(link);
             return link;
           }),
           py::arg("latency") = 0.0, py::arg("bandwidth") = std::numeric_limits<double>::infinity())
      .def_readonly("latency", &cost::Link::latency)
      .def_readonly("bandwidth", &cost::Link::bandwidth)
      .def(py::self == py::self)
      .def("__repr__", &link_text);

  py::class_<cost::QuadraticLatency>(module, "QuadraticLatency", "T(l) = a·l² + b·l + c seconds for one stage.")
      .def(py::init<double, double, double>(), py::arg("a"), py::arg("b"), py::arg("c"))
      .def_property_readonly("a", &cost::QuadraticLatency::a)
      .def_property_readonly("b", &cost::QuadraticLatency::b)
      .def_property_readonly("c", &cost::QuadraticLatency::c)
      .def(
          "__call__", [](const cost::QuadraticLatency& latency, std::int64_t length) { return latency(length); },
          py::arg("length"))
      .def(
          "__call__",
          [](const cost::QuadraticLatency& latency, const py::array& lengths) {
            const std::vector<std::int64_t> values = integers_from(lengths, "lengths");
            std::vector<double> seconds(values.size());
            for (std::size_t i = 0; i < values.size(); ++i) seconds[i] = latency(values[i]);
            return array_of<double>(seconds);
          },
          py::arg("lengths"))
      .def(py::self == py::self);

  py::class_<cost::ModelInfo> model_info(module, "ModelInfo", "The model a profile describes.");
  def_record_properties(model_info).def(py::self == py::self);

  py::class_<cost::LastStageWork>(
      module, "LastStageWork",
      "The last pipeline stage's own work (final norm, LM head, loss): b·tokens + c seconds per micro-batch, which "
      "the schedules take off the other stages; zero prices every stage alike.")
      .def(py::init<double, double>(), py::arg("b") = 0.0, py::arg("c") = 0.0)
      .def_property_readonly("b", &cost::LastStageWork::b)
      .def_property_readonly("c", &cost::LastStageWork::c)
      .def("seconds", &cost::LastStageWork::seconds, py::arg("tokens"))
      .def(py::self == py::self);

  py::class_<cost::SchemeCost>(module, "SchemeCost", "A scheme of a profile, ready for planning.")
      .def_readonly("scheme", &cost::SchemeCost::scheme)
      .def_readonly("latency", &cost::SchemeCost::latency)
      .def_readonly("max_len", &cost::SchemeCost::max_len)
      .def_readonly("util_len", &cost::SchemeCost::util_len)
      .def_readonly("last_stage", &cost::SchemeCost::last_stage)
      .def(py::self == py::self);

  py::class_<cost::Profile> profile(module, "Profile",
                                    "The parallel schemes of one model on one cluster with their cost models.");
  profile
      .def_static(
          "bundled",
          [](std::string_view name, std::optional<std::int64_t> gpus) {
            return io::read_profile(io::resolve_data_file(name, "profiles"), gpus);
          },
          py::arg("name") = std::string(io::default_profile), py::arg("gpus") = py::none(),
          "A bundled profile by name ('llama2-7b', …) or a path, resolved for `gpus` GPUs (default: its own).")
      .def_static(
          "read",
          [](const std::filesystem::path& path, std::optional<std::int64_t> gpus) {
            return io::read_profile(path, gpus);
          },
          py::arg("path"), py::arg("gpus") = py::none(), "A sluice profile or a Hetu strategy_pool JSON file.")
      .def_property_readonly("name", &cost::Profile::name)
      .def_property_readonly("gpus", &cost::Profile::gpus)
      .def_property_readonly("gpus_per_node", [](const cost::Profile& value) { return value.spec().gpus_per_node; })
      .def_property_readonly("model", [](const cost::Profile& value) { return value.spec().model.name; })
      .def_property_readonly("layers", [](const cost::Profile& value) { return value.spec().model.layers; })
      .def_property_readonly(
          "hidden", [](const cost::Profile& value) { return value.spec().model.hidden; },
          "The model's hidden size, which the schedule functions take for activation transfers")
      .def_property_readonly("vocab", [](const cost::Profile& value) { return value.spec().model.vocab; })
      .def_property_readonly("schemes",
                             [](const py::object& self) {
                               py::list list;
                               for (const cost::SchemeCost& scheme : self.cast<const cost::Profile&>().schemes())
                                 list.append(py::cast(&scheme, py::return_value_policy::reference_internal, self));
                               return list;
                             })
      .def("with_gpus", &cost::Profile::with_gpus, py::arg("gpus"))
      .def(
          "max_len", [](const cost::Profile& value, const Scheme& scheme) { return value.max_len(scheme); },
          py::arg("scheme"))
      .def("at", &cost::Profile::at, py::arg("scheme"), py::return_value_policy::reference_internal)
      .def("pipelines", &cost::Profile::pipelines, py::arg("strategy"),
           "The strategy's pipelines in MaxLen order, as plans index them.")
      .def("__repr__", [](const cost::Profile& value) {
        return "<sluice.Profile " + value.name() + " for " + std::to_string(value.gpus()) + " GPUs>";
      });
  def_document(profile);

  py::class_<cost::FitResult> fit_result(module, "FitResult",
                                         "A latency model fitted to measured samples: the quadratic, its relative RMS "
                                         "error and how many samples it used.");
  def_record_properties(fit_result, {{"latency", "model"}});
  py::class_<cost::MemoryFit>(module, "MemoryFit")
      .def_readonly("fixed_bytes", &cost::MemoryFit::fixed_bytes)
      .def_readonly("bytes_per_token", &cost::MemoryFit::bytes_per_token)
      .def_readonly("relative_rms_error", &cost::MemoryFit::relative_rms_error);
  py::class_<cost::SchemeFit>(module, "SchemeFit")
      .def_readonly("scheme", &cost::SchemeFit::scheme)
      .def_readonly("latency", &cost::SchemeFit::latency)
      .def_readonly("memory", &cost::SchemeFit::memory)
      .def_readonly("inner", &cost::SchemeFit::inner);
  py::class_<cost::ProfileFit>(module, "ProfileFit")
      .def_readonly("profile", &cost::ProfileFit::profile)
      .def_readonly("schemes", &cost::ProfileFit::schemes);

  const cost::FitProfileOptions fit;
  module.def(
      "fit_profile",
      [](const std::vector<std::string>& schemes, const py::handle& tokens, const py::handle& seconds,
         const cost::Profile& base, const py::handle& peak_bytes, const py::handle& inner_seconds,
         const py::handle& sequences, std::string name, std::string source, double max_error) {
        const std::vector<cost::ProfileSample> samples =
            samples_from(schemes, tokens, seconds, peak_bytes, inner_seconds, sequences);
        const py::gil_scoped_release release;
        return cost::fit_profile(samples, base.spec(),
                                 {.name = std::move(name), .source = std::move(source), .max_error = max_error});
      },
      py::arg("schemes"), py::arg("tokens"), py::arg("seconds"), py::kw_only(), py::arg("base"),
      py::arg("peak_bytes") = py::none(), py::arg("inner_seconds") = py::none(), py::arg("sequences") = py::none(),
      py::arg("name") = fit.name, py::arg("source") = fit.source, py::arg("max_error") = fit.max_error,
      "A profile from measured (scheme, tokens, seconds[, peak bytes][, inner seconds][, sequences]) samples: T(l) = "
      "a·l² + b·l + c fitted per scheme by non-negative least squares (a sample of k packed sequences of l tokens "
      "as k·(a·l² + b·l) + c), and from another stage's inner seconds the last stage's own work; `base` gives the "
      "model, cluster and memory budget. A NaN peak_bytes or inner_seconds marks a sample measured without it; "
      "sequences defaults to 1 per sample.");
  py::class_<cost::CpScheme>(module, "CpScheme",
                             "A scheme of a profile derived with context parallelism (and recomputation).")
      .def_readonly("scheme", &cost::CpScheme::scheme)
      .def_property_readonly("name", [](const cost::CpScheme& derived) { return derived.scheme.name(); })
      .def_property_readonly("base", [](const cost::CpScheme& derived) { return derived.scheme.base(); })
      .def_property_readonly("gpus", [](const cost::CpScheme& derived) { return derived.scheme.gpus(); })
      .def_readonly("max_len", &cost::CpScheme::max_len)
      .def_readonly("fit", &cost::CpScheme::fit)
      .def_readonly("last_stage", &cost::CpScheme::last_stage,
                    "The last stage's own work: the base's, its linear term shared over the CP ranks' tokens.")
      .def("seconds", &cost::CpScheme::seconds, py::arg("length"),
           "The derived forward + backward time of one sequence on the last stage (not the fitted quadratic; the "
           "other stages take last_stage off it).");
  const cost::Links links;
  module.def(
      "derive_context_parallel",
      [](const cost::Profile& base, int cp, std::optional<int> heads, std::optional<int> kv_heads,
         std::string_view kind, std::optional<int> ulysses, bool recompute, const cost::Link& intra_node,
         const cost::Link& inter_node) {
        cost::ProfileSpec spec = base.spec();
        if (heads)
          spec.model = {.name = spec.model.name,
                        .layers = spec.model.layers,
                        .hidden = spec.model.hidden,
                        .vocab = spec.model.vocab,
                        .heads = *heads,
                        .kv_heads = 0};
        if (kv_heads) spec.model.kv_heads = *kv_heads;
        const cost::Profile with_heads(std::move(spec));
        const CpKind cp_kind = value_in(cp_kind_names, kind, "kind");
        sluice::require(!ulysses || cp_kind == CpKind::hybrid, "ulysses is for kind 'hybrid'");
        cost::Links chosen;
        chosen.intra_node = intra_node;
        chosen.inter_node = inter_node;
        const py::gil_scoped_release release;
        std::vector<cost::CpScheme> derived;
        for (const cost::SchemeCost& scheme : with_heads.schemes()) {
          if (!scheme.scheme.is_base()) continue;
          const Scheme with_cp({.tp = scheme.scheme.tp(),
                                .pp = scheme.scheme.pp(),
                                .cp = cp,
                                .cp_kind = cp_kind,
                                .ulysses = ulysses.value_or(0),
                                .recompute = recompute ? Recompute::full : Recompute::none});
          if (auto one = cost::derive_cp_scheme(with_heads, scheme, with_cp, chosen))
            derived.push_back(std::move(*one));
        }
        return derived;
      },
      py::arg("profile"), py::arg("cp"), py::kw_only(), py::arg("heads") = py::none(), py::arg("kv_heads") = py::none(),
      py::arg("kind") = "ring", py::arg("ulysses") = py::none(), py::arg("recompute") = false,
      py::arg_v("intra_node", links.intra_node, link_text(links.intra_node).c_str()),
      py::arg_v("inter_node", links.inter_node, link_text(links.inter_node).c_str()),
      "Every scheme of the profile derived with context parallelism of degree `cp` (what `sluice inspect --cp` "
      "prints): kind 'ring', 'ulysses' or 'hybrid' (with `ulysses` of the cp ranks in Ulysses groups), and with "
      "`recompute` full activation recomputation. `heads` (and `kv_heads` for grouped-query attention) default to "
      "the profile's model. CP groups within a node use the `intra_node` link, wider ones the `inter_node` link. "
      "Schemes "
      "wider than the cluster, or whose heads do not split over TP × the Ulysses degree, are left out.");
  module.def(
      "with_scheme_space",
      [](const cost::Profile& measured, const std::vector<int>& cp, const std::vector<std::string>& cp_kinds,
         bool recompute) {
        cost::SchemeSpace space;
        space.cp_degrees = cp;
        space.cp_kinds.clear();
        for (const std::string& kind : cp_kinds) space.cp_kinds.push_back(value_in(cp_kind_names, kind, "cp_kinds"));
        space.recompute = recompute;
        const py::gil_scoped_release release;
        return cost::Profile(cost::with_scheme_space(measured.spec(), space));
      },
      py::arg("profile"), py::kw_only(), py::arg("cp") = std::vector<int>{},
      py::arg("cp_kinds") = std::vector<std::string>{"ring"}, py::arg("recompute") = false,
      "The profile with the CP and AC schemes derived from its ⟨TP, PP⟩ schemes (what `--cp`, `--cp-kinds` and "
      "`--ac` give the CLI's planners): each degree of `cp` in each kind of `cp_kinds`, and with `recompute` every "
      "scheme also with full activation recomputation. Schemes the profile measures keep their measurement.");
  module.def(
      "read_profile_samples",
      [](const std::filesystem::path& path) {
        const cost::ProfileSamples read = io::read_profile_samples(path);
        py::list schemes;
        std::vector<std::int64_t> tokens;
        std::vector<double> seconds;
        std::vector<double> peaks, inners;
        std::vector<std::int64_t> sequences;
        for (const cost::ProfileSample& sample : read.samples) {
          schemes.append(sample.scheme.name());
          tokens.push_back(sample.tokens);
          seconds.push_back(sample.seconds);
          peaks.push_back(sample.peak_bytes.value_or(std::numeric_limits<double>::quiet_NaN()));
          inners.push_back(sample.inner_seconds.value_or(std::numeric_limits<double>::quiet_NaN()));
          sequences.push_back(sample.sequences);
        }
        const auto column = [](const std::vector<double>& values) {
          return std::ranges::all_of(values, [](double value) { return std::isnan(value); })
                     ? py::object(py::none())
                     : py::object(array_of<double>(values));
        };
        return py::dict(py::arg("schemes") = schemes, py::arg("tokens") = array_of<std::int64_t>(tokens),
                        py::arg("seconds") = array_of<double>(seconds), py::arg("peak_bytes") = column(peaks),
                        py::arg("inner_seconds") = column(inners),
                        py::arg("sequences") = std::ranges::all_of(sequences, [](std::int64_t k) { return k == 1; })
                                                   ? py::object(py::none())
                                                   : py::object(array_of<std::int64_t>(sequences)));
      },
      py::arg("path"),
      "Samples from a CSV or sluice.profile_samples JSON file, as keyword arguments of fit_profile (peak_bytes and "
      "inner_seconds: NaN where a sample has none; None when none has; sequences None when every sample is one "
      "sequence).");
}

}  // namespace sluice::python
