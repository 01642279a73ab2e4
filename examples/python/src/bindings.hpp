#pragma once
// Shared by the binding files: NumPy conversions, JSON documents and the GIL rule.
// Conventions every bound function follows:
//   - options are keyword-only arguments named as the C++ options' fields, defaulting to the C++ defaults; an
//     option struct used by several functions is one immutable class (options.cpp), passed as one argument;
//   - a batch is `lengths` (1-D integer array) with optional `ids` (default: 0 … n−1, the array positions);
//   - arrays out are read-only NumPy views of the C++ result (the view keeps its owner alive), never copies;
//   - planning runs without the GIL: inputs are converted to C++ values first, results converted after.
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/operators.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "sluice/core/span.hpp"
#include "sluice/sluice.hpp"

namespace sluice::python {

namespace py = pybind11;

// The GIL rule for a call that is pure C++: released while the library runs, its arguments converted before and its
// result after (pybind11's call guard).
inline constexpr py::call_guard<py::gil_scoped_release> without_gil{};

// Integers out of a 1-D array (or a list): NumPy integer dtypes only, C-contiguous, within int64. Raises
// InvalidInput naming `what` otherwise (a float array, NaN, booleans, 2-D, a strided view, values past int64).
std::vector<std::int64_t> integers_from(const py::handle& values, std::string_view what);

// Real numbers out of an array (or a list) of `dimensions` dimensions: integer or float dtypes, C-contiguous. Raises
// InvalidInput naming `what` otherwise (booleans, complex numbers, objects). NaN and infinities pass: callers that
// take none check them, or the library does.
py::array_t<double> reals_from(const py::handle& values, std::string_view what, int dimensions = 1);
std::vector<double> real_vector_from(const py::handle& values, std::string_view what);

// The batch a planner takes: lengths[i] with ids[i] (default i). Raises InvalidInput for a bad length.
std::vector<Sequence> batch_from(const py::handle& lengths, const py::handle& ids);

// One batch of a sequence of batches (a planner's source, compare's batches): a sluice.Batch, a lengths array
// or an (ids, lengths) pair.
std::vector<Sequence> batch_of_item(const py::handle& item);

// A read-only 1-D NumPy view of `values`, which `owner` keeps alive.
template <class T>
py::array_t<T> view_of(Span<const T> values, const py::handle& owner) {
  py::array_t<T> array({static_cast<py::ssize_t>(values.size())}, {static_cast<py::ssize_t>(sizeof(T))}, values.data(),
                       owner);
  py::detail::array_proxy(array.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return array;
}

// A fresh array that owns a copy (for values computed on the fly, not held by any result).
template <class T>
py::array_t<T> array_of(Span<const T> values) {
  py::array_t<T> array(static_cast<py::ssize_t>(values.size()));
  std::copy(values.begin(), values.end(), array.mutable_data());
  return array;
}

// The batch's ids and its lengths, each as a fresh int64 array.
py::array_t<std::int64_t> ids_of(Span<const Sequence> batch);
py::array_t<std::int64_t> lengths_of(Span<const Sequence> batch);

// A Python list whose signature names its elements (List[Stage]), so that the generated type stubs can say so.
template <class T>
class ListOf : public py::list {
public:
  using py::list::list;
};

// Elements of a vector member as Python objects that refer into `owner` (no copies; `owner` stays alive).
template <class T>
ListOf<T> internal_list(const std::vector<T>& values, const py::handle& owner) {
  ListOf<T> list;
  for (const T& value : values) list.append(py::cast(&value, py::return_value_policy::reference_internal, owner));
  return list;
}

// How a link shows in repr() and in signatures' defaults: Link(latency, bandwidth).
inline std::string link_text(const cost::Link& link) {
  return "Link(" + sluice::shortest(link.latency) + ", " + sluice::shortest(link.bandwidth) + ")";
}

// plan_iteration's options: the dispatch, and one overhead per candidate (None: none).
assign::PlanOptions plan_options(const assign::DispatchOptions& dispatch, const py::handle& candidate_overhead);

// The reader of each document format that has a Python class, by format: def_document adds each, and
// sluice.read_document picks one by a document's "format".
using DocumentReader = py::object (*)(const io::json& document, std::string_view source);
std::map<std::string, DocumentReader, std::less<>>& document_readers();

// The document at `path` as its format's Python class (sluice.read_document).
py::object read_document(const std::filesystem::path& path);

// to_json / from_json / save / load and == for a type with an io document format, and its reader for read_document.
template <class T>
void def_document(py::class_<T>& cls) {
  document_readers().emplace(io::document_traits<T>::format, [](const io::json& document, std::string_view source) {
    T value = [&] {
      const py::gil_scoped_release unlocked;
      return io::from_document<T>(document, source);
    }();
    return py::cast(std::move(value));
  });
  cls.def(
         "to_json", [](const T& value, int indent) { return io::to_document(value).dump(indent); },
         py::arg("indent") = 2, "The sluice JSON document, as the command-line tool writes it.")
      .def_static(
          "from_json",
          [](std::string_view text) { return io::from_document<T>(io::parse(text, "JSON text"), "JSON text"); },
          py::arg("text"), "Reads a document written by to_json or by the command-line tool.")
      .def(
          "save",
          [](const T& value, const std::filesystem::path& path) {
            const std::string text = io::document_text(value);
            // A FIFO blocks until its reader opens it, which may be another Python thread.
            const py::gil_scoped_release unlocked;
            io::write_text_file(path, text);
          },
          py::arg("path"),
          "Writes the JSON document: a file atomically (a temporary renamed into place, its permission bits kept), "
          "a symbolic link through to its target, a FIFO, a device or '-' (standard output) directly. Raises "
          "InvalidInput for a directory or a missing one, OSError when the write fails.")
      .def_static(
          "load", [](const std::filesystem::path& path) { return io::read_document<T>(path); }, py::arg("path"))
      .def(py::pickle(
          [](const T& value) { return io::to_document(value).dump(); },
          [](const std::string& text) { return io::from_document<T>(io::parse(text, "pickle"), "pickle"); }));
  if constexpr (std::equality_comparable<T>) cls.def(py::self == py::self);
}

// A getter for a vector member that keeps its owner alive: numbers as a read-only NumPy view, objects of bound
// classes as a list of references into the owner. No copies either way.
template <class Owner, class Element>
requires(std::is_arithmetic_v<Element> &&
         !std::same_as<Element, bool>) auto member_getter(std::vector<Element> Owner::*member) {
  return [member](const py::object& self) { return view_of<Element>(self.cast<const Owner&>().*member, self); };
}
template <class Owner, class Element>
requires std::derived_from<py::detail::make_caster<Element>, py::detail::type_caster_generic>
auto member_getter(std::vector<Element> Owner::*member) {
  return [member](const py::object& self) { return internal_list(self.cast<const Owner&>().*member, self); };
}

// Python's name for a field where it is not the JSON key: an older name kept for callers.
struct FieldRename {
  std::string_view key;
  const char* name;
};

namespace detail {

// A property's docstring: the record's words for the field (SLUICE_IO_DOCS), none where it has none.
template <class T>
const char* field_docstring(std::string_view key) {
  const std::string_view text = io::field_doc<T>(key);
  return text.empty() ? nullptr : text.data();  // a string literal, so NUL-terminated
}

// Defines a field's property (a range's two) and appends its name to `names`. A field's key is a string literal
// (io/record.hpp), so its view is a NUL-terminated name.
template <class T, class Record, class Member, class Spelling>
void def_field_property(py::class_<T>& cls, const io::Field<Record, Member, Spelling>& field, const char* name,
                        py::list& names) {
  const auto member = field.member;
  const char* doc = field_docstring<T>(field.key);
  if constexpr (requires { field.spelling.table; })
    cls.def_property_readonly(
        name,
        [member, table = field.spelling.table](const Record& value) {
          return std::string(name_in(*table, value.*member));
        },
        doc);
  else if constexpr (requires { member_getter(member); })
    cls.def_property_readonly(name, member_getter(member), doc);
  else
    cls.def_readonly(name, member, doc);
  names.append(name);
}

// A range's ends are properties of their own, named as their members.
template <class T, class Record>
void def_field_property(py::class_<T>& cls, const io::RangeField<Record>& field, const char* /*name*/,
                        py::list& names) {
  const char* doc = field_docstring<T>(field.key);
  cls.def_readonly(field.begin_name.data(), field.begin, doc).def_readonly(field.end_name.data(), field.end, doc);
  names.append(field.begin_name.data());
  names.append(field.end_name.data());
}

}  // namespace detail

// A read-only property per field of the type's io::record table, named as its JSON key unless `renames` names it
// otherwise, with the record's words for it as its docstring: an enumeration by its name, a vector as
// member_getter gives it, a range as its two ends, anything else (an inline member too, under its table key) as
// pybind11 converts the member (a nested object by reference). __match_args__ lists the properties in table order, for
// `match` and for the generated stubs (make_stubs.py), which type each from its getter's signature. Renaming a key the
// table lacks is an error.
template <class T>
py::class_<T>& def_record_properties(py::class_<T>& cls, std::initializer_list<FieldRename> renames = {}) {
  const auto name_of = [&](std::string_view key) {
    for (const FieldRename& rename : renames)
      if (rename.key == key) return rename.name;
    return key.data();
  };
  for (const FieldRename& rename : renames)
    if (std::apply([&](const auto&... field) { return ((field.key != rename.key) && ...); }, io::record<T>::fields))
      throw std::logic_error(
          sluice::concat("def_record_properties: ", io::record<T>::name, " has no field '", rename.key, "'"));
  py::list names;
  std::apply([&](const auto&... field) { (detail::def_field_property(cls, field, name_of(field.key), names), ...); },
             io::record<T>::fields);
  cls.attr("__match_args__") = py::tuple(names);
  return cls;
}

void bind_core(py::module_& module);
void bind_data(py::module_& module);
void bind_cost(py::module_& module);
void bind_options(py::module_& module);
void bind_assign(py::module_& module);
void bind_planner(py::module_& module);
void bind_proposal(py::module_& module);
void bind_schedule(py::module_& module);
void bind_compare(py::module_& module);
void bind_shard(py::module_& module);
void bind_search(py::module_& module);
void bind_io(py::module_& module);
void bind_runtime(py::module_& module);

}  // namespace sluice::python

// ListOf<T>'s name in signatures: List[T], as pybind11 names a converted std::vector<T>.
template <class T>
struct pybind11::detail::handle_type_name<sluice::python::ListOf<T>> {
  static constexpr auto name = const_name("List[") + make_caster<T>::name + const_name("]");
};
