// The extension module behind `import sluice` (the package's __init__.py re-exports it).
#include "bindings.hpp"

namespace sluice::python {

std::map<std::string, DocumentReader, std::less<>>& document_readers() {
  static std::map<std::string, DocumentReader, std::less<>> readers;
  return readers;
}

py::object read_document(const std::filesystem::path& path) {
  const std::string source = path.string();
  const io::json document = [&] {
    const py::gil_scoped_release unlocked;
    return io::read_json_file(path);
  }();
  const auto format = io::field<std::string>(document, "format", source);
  const auto& readers = document_readers();
  const auto reader = readers.find(format);
  if (reader == readers.end()) {
    std::string formats;
    for (const auto& entry : readers) formats += (formats.empty() ? "" : ", ") + entry.first;
    sluice::fail(source, ": format '", format, "' has no Python class; read_document reads ", formats);
  }
  return reader->second(document, source);
}

std::vector<std::int64_t> integers_from(const py::handle& values, std::string_view what) {
  const py::module_ numpy = py::module_::import("numpy");
  const py::array array = py::isinstance<py::array>(values) ? py::reinterpret_borrow<py::array>(values)
                                                            : py::array(numpy.attr("asarray")(values));
  if (array.ndim() == 1 && array.size() == 0) return {};  // [] reads as float64; an empty batch is reported as such
  const char kind = array.dtype().kind();
  sluice::require(kind == 'i' || kind == 'u', what, ": expected an integer array, got dtype ",
                  std::string(py::str(array.dtype())), kind == 'f' ? " (NaN and fractions are not counts)" : "");
  sluice::require(array.ndim() == 1, what, ": expected a 1-D array, got ", array.ndim(), " dimensions");
  sluice::require((array.flags() & py::array::c_style) != 0, what,
                  ": the array is not contiguous (pass numpy.ascontiguousarray(...))");
  const auto count = static_cast<std::size_t>(array.size());
  std::vector<std::int64_t> result(count);
  // Converting through NumPy checks the range: a uint64 past int64 raises instead of wrapping.
  if (kind == 'u' && array.itemsize() == 8) {
    const auto* data = static_cast<const std::uint64_t*>(array.data());
    for (std::size_t i = 0; i < count; ++i) {
      sluice::require(data[i] <= static_cast<std::uint64_t>(INT64_MAX), what, "[", i, "] = ", data[i],
                      " is past the int64 range");
      result[i] = static_cast<std::int64_t>(data[i]);
    }
    return result;
  }
  const auto converted = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(array);
  std::copy_n(converted.data(), count, result.begin());
  return result;
}

py::array_t<double> reals_from(const py::handle& values, std::string_view what, int dimensions) {
  const py::module_ numpy = py::module_::import("numpy");
  const py::array array = py::isinstance<py::array>(values) ? py::reinterpret_borrow<py::array>(values)
                                                            : py::array(numpy.attr("asarray")(values));
  const char kind = array.dtype().kind();
  sluice::require(kind == 'f' || kind == 'i' || kind == 'u', what, ": expected a numeric array, got dtype ",
                  std::string(py::str(array.dtype())));
  sluice::require(array.ndim() == dimensions, what, ": expected a ", dimensions, "-D array, got ", array.ndim(),
                  " dimensions");
  sluice::require((array.flags() & py::array::c_style) != 0, what,
                  ": the array is not contiguous (pass numpy.ascontiguousarray(...))");
  return py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(array);
}

std::vector<double> real_vector_from(const py::handle& values, std::string_view what) {
  const py::array_t<double> array = reals_from(values, what);
  return {array.data(), array.data() + array.size()};
}

std::vector<Sequence> batch_from(const py::handle& lengths, const py::handle& ids) {
  const std::vector<std::int64_t> length_values = integers_from(lengths, "lengths");
  std::vector<std::int64_t> id_values;
  if (ids.is_none()) {
    id_values.resize(length_values.size());
    for (std::size_t i = 0; i < id_values.size(); ++i) id_values[i] = static_cast<std::int64_t>(i);
  } else {
    id_values = integers_from(ids, "ids");
    sluice::require(id_values.size() == length_values.size(), "ids: ", id_values.size(), " ids for ",
                    length_values.size(), " lengths");
  }
  std::vector<Sequence> batch;
  batch.reserve(length_values.size());
  for (std::size_t i = 0; i < length_values.size(); ++i) {
    sluice::require(length_values[i] > 0, "lengths[", i, "] = ", length_values[i], ": a length must be > 0");
    sluice::require(id_values[i] >= 0, "ids[", i, "] = ", id_values[i], ": an id must be >= 0");
    batch.emplace_back(id_values[i], length_values[i]);
  }
  return batch;
}

std::vector<Sequence> batch_of_item(const py::handle& item) {
  if (py::isinstance<data::Batch>(item)) return item.cast<const data::Batch&>().sequences;
  if (py::isinstance<py::tuple>(item) && py::len(item) == 2) {
    const auto pair = py::reinterpret_borrow<py::tuple>(item);
    return batch_from(pair[1], pair[0]);
  }
  return batch_from(item, py::none());
}

py::array_t<std::int64_t> ids_of(Span<const Sequence> batch) {
  std::vector<std::int64_t> ids(batch.size());
  std::ranges::transform(batch, ids.begin(), &Sequence::id);
  return array_of<std::int64_t>(ids);
}

py::array_t<std::int64_t> lengths_of(Span<const Sequence> batch) {
  std::vector<std::int64_t> lengths(batch.size());
  std::ranges::transform(batch, lengths.begin(), &Sequence::length);
  return array_of<std::int64_t>(lengths);
}

}  // namespace sluice::python

namespace py = pybind11;

PYBIND11_MODULE(_sluice, module) {
  namespace sp = sluice::python;
  module.doc() = "sluice: planning and scheduling for variable-length Transformer training";
  module.attr("__version__") = SLUICE_VERSION;
  // Registered most general first: pybind11 tries translators in reverse order of registration.
  static py::exception<sluice::invalid_input> invalid_input(module, "InvalidInput", PyExc_ValueError);
  static py::exception<sluice::infeasible> infeasible(module, "Infeasible", PyExc_RuntimeError);
  static py::exception<sluice::invalid_plan> invalid_plan(module, "InvalidPlan", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const sluice::invalid_input& e) {
      invalid_input(e.what());
    } catch (const sluice::infeasible& e) {
      infeasible(e.what());
    } catch (const sluice::invalid_plan& e) {
      invalid_plan(e.what());
    } catch (const sluice::write_error& e) {  // an output that could not be written, as Python's own I/O reports it
      PyErr_SetString(PyExc_OSError, e.what());
    }
  });
  // In this order: a class is registered before any signature's default value or type names it.
  for (const auto bind : {sp::bind_core, sp::bind_data, sp::bind_cost, sp::bind_options, sp::bind_assign,
                          sp::bind_proposal, sp::bind_schedule, sp::bind_planner, sp::bind_compare, sp::bind_shard,
                          sp::bind_search, sp::bind_io, sp::bind_runtime})
    bind(module);

  module.def("read_document", &sp::read_document, py::arg("path"),
             "The sluice document at `path` (a file the command-line tool or a save() wrote) as the object of its "
             "format's class: a sluice.iteration_plan as an IterationPlan, a sluice.proposal as a Proposal, and so on. "
             "Raises InvalidInput naming the file for a malformed document or a format without a Python class.");
}
