#pragma once
// JSON conventions. Every public type serialises through nlohmann::json (to_json/from_json found by ADL,
// or an adl_serializer specialisation for types without a default constructor). A file holds one
// *document*: {"format": "sluice.<kind>", "version": N, ...payload}. Readers check both and turn every
// parse or type error into sluice::invalid_input naming the source and the field.
//
// Values are read strictly (io::convert, behind io::field): an integer field takes a JSON integer within its
// C++ type's range (never a fraction such as 16.0 or 1e3, never true), a number field any finite JSON number
// but not a boolean, a boolean field only true or false, a string field only a string. Nothing is rounded,
// wrapped or coerced, so a value read is the value written.
#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <istream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sluice/core/error.hpp"
#include "sluice/core/names.hpp"
#include "sluice/data/detail/readers.hpp"
#include "sluice/io/files.hpp"

namespace sluice::io {

using json = nlohmann::json;

// Deepest nesting of arrays and objects a reader accepts (the document object is level 1). Copying and
// converting a JSON value recurses once per level, so unbounded nesting would overflow the stack; sluice's
// own documents need about ten levels.
inline constexpr int max_json_depth = 256;

// Specialised next to each top-level type: static constexpr std::string_view format; static constexpr int version.
// SLUICE_IO_DOCUMENT(Type, format, version) writes the specialisation (inside namespace sluice::io).
template <class T>
struct document_traits;

#define SLUICE_IO_DOCUMENT(Type, format_name, format_version) \
  template <>                                                 \
  struct document_traits<Type> {                              \
    static constexpr std::string_view format = format_name;   \
    static constexpr int version = format_version;            \
  }

template <class T>
concept Document = requires {
  { document_traits<T>::format } -> std::convertible_to<std::string_view>;
  { document_traits<T>::version } -> std::convertible_to<int>;
};

namespace detail {

// A JSON value as an error message quotes it: scalars as JSON text (strings escaped, so the message stays on
// one line, and cut short), arrays and objects by kind only.
inline std::string describe(const json& value) {
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  if (value.is_number_float() && !std::isfinite(value.get<double>())) return sluice::concat(value.get<double>());
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr std::size_t longest = 64;
  if (text.size() > longest) {
    std::size_t cut = longest;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
    text = text.substr(0, cut) + "...";
  }
  return text;
}

// Rejects text whose arrays and objects nest deeper than max_json_depth, before anything is built from it.
// One linear pass; brackets inside strings (escapes included) do not count.
inline void require_text_depth(std::string_view text, std::string_view source) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      sluice::require(++depth <= max_json_depth, source, ": JSON nested deeper than ", max_json_depth,
                      " levels (at byte ", i, ")");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

// The same limit for a value already in memory (built by a caller rather than by io::parse); iterative, so
// a deep value is reported, not recursed into.
inline void require_depth(const json& value, std::string_view source) {
  std::vector<std::pair<const json*, int>> pending{{&value, 1}};
  while (!pending.empty()) {
    const auto [node, depth] = pending.back();
    pending.pop_back();
    if (!node->is_structured()) continue;
    sluice::require(depth <= max_json_depth, source, ": JSON nested deeper than ", max_json_depth, " levels");
    for (const json& child : *node) pending.emplace_back(&child, depth + 1);
  }
}

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};
template <class T>
struct is_array : std::false_type {};
template <class T, std::size_t N>
struct is_array<std::array<T, N>> : std::true_type {};
template <class T>
struct is_string_map : std::false_type {};
template <class Value, class Compare, class Allocator>
struct is_string_map<std::map<std::string, Value, Compare, Allocator>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

}  // namespace detail

// `value` as a T, strictly (see the top of this file). `context()` names the value in errors; it is called
// only when one is raised. Vectors, arrays, maps keyed by string and optionals (null = empty) convert element by
// element, naming the element's index or key; other types go through their adl_serializer, whose errors are
// prefixed with the context.
template <class T, class Context>
T convert(const json& value, const Context& context) {
  using detail::describe;
  if constexpr (std::same_as<T, json>) {
    return value;
  } else if constexpr (std::same_as<T, bool>) {
    sluice::require(value.is_boolean(), context(), ": expected true or false, got ", describe(value));
    return value.template get<bool>();
  } else if constexpr (std::integral<T>) {
    if (value.is_number_unsigned()) {
      const auto number = value.template get<std::uint64_t>();
      if (std::in_range<T>(number)) return static_cast<T>(number);
    } else if (value.is_number_integer()) {
      const auto number = value.template get<std::int64_t>();
      if (std::in_range<T>(number)) return static_cast<T>(number);
    }
    sluice::fail(context(), ": expected an integer in [", +std::numeric_limits<T>::min(), ", ",
                 +std::numeric_limits<T>::max(), "], got ", describe(value));
  } else if constexpr (std::floating_point<T>) {
    sluice::require(value.is_number(), context(), ": expected a number, got ", describe(value));
    const auto number = value.template get<double>();
    sluice::require(std::isfinite(number) && std::abs(number) <= std::numeric_limits<T>::max(), context(),
                    ": expected a finite number, got ", describe(value));
    return static_cast<T>(number);
  } else if constexpr (std::same_as<T, std::string>) {
    sluice::require(value.is_string(), context(), ": expected a string, got ", describe(value));
    return value.template get_ref<const std::string&>();
  } else if constexpr (detail::is_vector<T>::value) {
    sluice::require(value.is_array(), context(), ": expected an array, got ", describe(value));
    T out;
    out.reserve(value.size());
    for (std::size_t i = 0; i < value.size(); ++i)
      out.push_back(convert<typename T::value_type>(value[i], [&] { return sluice::concat(context(), "[", i, "]"); }));
    return out;
  } else if constexpr (detail::is_array<T>::value) {
    constexpr std::size_t size = std::tuple_size_v<T>;
    sluice::require(value.is_array() && value.size() == size, context(), ": expected an array of ", size,
                    " elements, got ", value.is_array() ? sluice::concat(value.size(), " elements") : describe(value));
    T out;
    for (std::size_t i = 0; i < size; ++i)
      out[i] = convert<typename T::value_type>(value[i], [&] { return sluice::concat(context(), "[", i, "]"); });
    return out;
  } else if constexpr (detail::is_string_map<T>::value) {
    sluice::require(value.is_object(), context(), ": expected an object, got ", describe(value));
    T out;
    for (const auto& [key, item] : value.items())
      out.emplace(key, convert<typename T::mapped_type>(item, [&] { return sluice::concat(context(), ".", key); }));
    return out;
  } else if constexpr (detail::is_optional<T>::value) {
    if (value.is_null()) return std::nullopt;
    return convert<typename T::value_type>(value, context);
  } else {
    try {
      return value.template get<T>();
    } catch (const json::exception& error) {
      sluice::fail(context(), ": ", error.what());
    } catch (const invalid_input& error) {
      sluice::fail(context(), ": ", error.what());
    }
  }
}

// `value` as a T, named `where` in errors.
template <class T>
T as(const json& value, std::string_view where) {
  return convert<T>(value, [&] { return std::string(where); });
}

// A required field, converted to T; errors name the field and the enclosing object.
template <class T>
T field(const json& object, std::string_view key, std::string_view where) {
  sluice::require(object.is_object(), where, ": expected a JSON object, got ", detail::describe(object));
  const auto it = object.find(key);
  sluice::require(it != object.end(), where, ": missing field '", key, "'");
  return convert<T>(*it, [&] { return sluice::concat(where, ": field '", key, "'"); });
}

// An optional field: `fallback` when absent.
template <class T>
T field_or(const json& object, std::string_view key, T fallback, std::string_view where) {
  sluice::require(object.is_object(), where, ": expected a JSON object, got ", detail::describe(object));
  if (!object.contains(key)) return fallback;
  return field<T>(object, key, where);
}

// A required field holding one of `table`'s names, read as its value; errors name the field and list the names.
template <class Enum, std::size_t Size>
Enum name_field(const json& object, std::string_view key, const NameTable<Enum, Size>& table, std::string_view where) {
  const auto text = field<std::string>(object, key, where);
  std::string names;
  for (std::size_t k = 0; k < Size; ++k) {
    if (table[k].name == text) return table[k].value;
    if (k > 0) names += k + 1 == Size ? " or " : ", ";
    names += detail::describe(std::string(table[k].name));
  }
  sluice::fail(where, ": field '", key, "': expected ", names, ", got ", detail::describe(text));
}

namespace detail {

// JSON has no infinity: where a number may be infinite (a MILP bound, an unlimited memory or bandwidth), it is
// an extended number, written as the string "inf" or "-inf" and otherwise read as a number field is.
inline json extended_number(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}
inline double extended_number(const json& value, std::string_view where) {
  if (value.is_string()) {
    if (value == "inf") return std::numeric_limits<double>::infinity();
    if (value == "-inf") return -std::numeric_limits<double>::infinity();
  }
  sluice::require(value.is_number(), where, ": expected a number, \"inf\" or \"-inf\", got ", describe(value));
  return as<double>(value, where);
}
inline double extended_field(const json& object, std::string_view key, std::string_view where) {
  sluice::require(object.contains(key), where, ": missing field '", key, "'");
  return extended_number(object.at(key), std::string(where) + "." + std::string(key));
}

}  // namespace detail

inline json parse(std::string_view text, std::string_view source) {
  detail::require_text_depth(text, source);
  try {
    return json::parse(text);
  } catch (const json::exception& error) {
    sluice::fail(source, ": not valid JSON: ", error.what());
  }
}

// Largest text or JSON input a reader holds whole (profiles, pools, samples, batches, checkpoints). Parsed JSON
// takes several times its text, so the bound keeps a reader's memory within a few GiB.
inline constexpr std::uint64_t max_input_bytes = std::uint64_t{1} << 30;

namespace detail {

// Whether a JSON text may start with `c` (after white space): an object, an array, a string, a number or a literal.
constexpr bool starts_json(char c) noexcept {
  return c == '{' || c == '[' || c == '"' || c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n';
}

}  // namespace detail

enum class TextKind { any, json_text };

// The whole of `in`, read in 64 KiB chunks and refused as soon as it passes max_input_bytes; a JSON input whose
// first byte (after white space and a UTF-8 byte-order mark) starts no JSON value is refused after its first
// chunk, not after reading gigabytes. `source` names the input in errors; `limit` is max_input_bytes but in tests.
inline std::string read_text(std::istream& in, std::string_view source, TextKind kind = TextKind::any,
                             std::uint64_t limit = max_input_bytes) {
  std::string content;
  std::string chunk(data::detail::chunk_bytes, '\0');
  bool started = kind != TextKind::json_text;
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    sluice::require(content.size() + got <= limit, source, ": more than ", limit,
                    " bytes, the limit of a text or JSON input");
    content.append(chunk, 0, got);
    if (!started) {
      std::string_view text = content;
      if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
      const std::size_t first = text.find_first_not_of(" \t\r\n");
      if (first != std::string_view::npos) {
        sluice::require(detail::starts_json(text[first]), source, ": not JSON: it starts with ",
                        data::detail::excerpt(text.substr(first, 16)));
        started = true;
      }
    }
  }
  sluice::require(!in.bad(), source, ": read error");
  return content;
}

// The whole of the file `path`, as read_text reads it; a regular file past max_input_bytes is refused by its size
// before a byte is read.
inline std::string read_text_file(const std::filesystem::path& path, TextKind kind = TextKind::any) {
  const std::string source = data::detail::source_name(path.string());
  std::error_code error;
  sluice::require(!std::filesystem::is_directory(path, error), source, ": is a directory");
  std::ifstream in(path, std::ios::binary);
  sluice::require(static_cast<bool>(in), source, ": cannot open file");
  if (std::filesystem::is_regular_file(path, error)) {
    const std::uintmax_t size = std::filesystem::file_size(path, error);
    sluice::require(error || size <= max_input_bytes, source, ": ", size, " bytes, past the ", max_input_bytes,
                    "-byte limit of a text or JSON input");
  }
  return read_text(in, source, kind);
}

inline json read_json_file(const std::filesystem::path& path) {
  return parse(read_text_file(path, TextKind::json_text), path.string());
}

namespace detail {
// Whether `value` holds a scheme with context parallelism or recomputation: only a scheme writes "cp_kind", and
// "recompute" beside "tp".
inline bool holds_extended_scheme(const json& value) {
  if (value.is_object()) {
    if (value.contains("cp_kind") || (value.contains("recompute") && value.contains("tp"))) return true;
    return std::ranges::any_of(value, [](const json& member) { return holds_extended_scheme(member); });
  }
  return value.is_array() && std::ranges::any_of(value, [](const json& item) { return holds_extended_scheme(item); });
}
}  // namespace detail

// A document that holds a scheme with context parallelism or recomputation is written one version above its
// format's, so that a build that predates them refuses it by its version instead of reading ⟨TP, PP⟩ alone; a
// document without such schemes keeps the version, and the text, it always had.
inline int document_version(int format_version, const json& payload) {
  return detail::holds_extended_scheme(payload) ? format_version + 1 : format_version;
}

template <Document T>
json to_document(const T& value) {
  json payload = value;
  json document = {{"format", document_traits<T>::format},
                   {"version", document_version(document_traits<T>::version, payload)}};
  if (payload.is_object()) {
    document.update(payload);
  } else {
    document["value"] = std::move(payload);
  }
  return document;
}

// Every error names `source`.
template <Document T>
T from_document(const json& document, std::string_view source = "JSON document") {
  detail::require_depth(document, source);
  const auto format = field<std::string>(document, "format", source);
  sluice::require(format == document_traits<T>::format, source, ": expected format '", document_traits<T>::format,
                  "', got ", detail::describe(document.at("format")));
  const auto version = field<int>(document, "version", source);
  sluice::require(version == document_traits<T>::version || version == document_traits<T>::version + 1, source,
                  ": unsupported ", format, " version ", version, " (this build reads versions ",
                  document_traits<T>::version, " and ", document_traits<T>::version + 1,
                  ", the latter with context "
                  "parallel or recomputing schemes)");
  json payload = document;
  payload.erase("format");
  payload.erase("version");
  if (payload.size() == 1 && payload.contains("value")) payload = json(document.at("value"));
  return convert<T>(payload, [&] { return std::string(source); });
}

template <Document T>
T read_document(const std::filesystem::path& path) {
  return from_document<T>(read_json_file(path), path.string());
}

// The text write_document writes.
template <Document T>
std::string document_text(const T& value) {
  return to_document(value).dump(2) + "\n";
}

template <Document T>
void write_document(const std::filesystem::path& path, const T& value) {
  write_text_file(path, document_text(value));
}

}  // namespace sluice::io

namespace sluice::io::detail {

// A number a report requires to be non-negative (a time, a size), checked after reading.
inline void require_non_negative(double value, std::string_view key, std::string_view where) {
  sluice::require(value >= 0, where, ": field '", key, "' must be >= 0, got ", value);
}

}  // namespace sluice::io::detail
