#pragma once
// JSON conventions. Every public type serialises through nlohmann::json (to_json/from_json found by ADL,
// or an adl_serializer specialisation for types without a default constructor). A file holds one
// *document*: {"format": "sluice.<kind>", "version": N, ...payload}. Readers check both and turn every
// parse or type error into sluice::invalid_input naming the source and the field.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sluice/core/error.hpp"
#include "sluice/io/files.hpp"

namespace sluice::io {

using json = nlohmann::json;

// Specialised next to each top-level type: static constexpr std::string_view format; static constexpr int version.
template <class T>
struct document_traits;

template <class T>
concept Document = requires {
  { document_traits<T>::format } -> std::convertible_to<std::string_view>;
  { document_traits<T>::version } -> std::convertible_to<int>;
};

// A required field, converted to T; errors name the field and the enclosing object.
template <class T>
T field(const json& object, std::string_view key, std::string_view where) {
  detail::require(object.is_object(), where, ": expected a JSON object");
  const auto it = object.find(key);
  detail::require(it != object.end(), where, ": missing field '", key, "'");
  try {
    return it->template get<T>();
  } catch (const json::exception& error) {
    detail::fail(where, ": field '", key, "': ", error.what());
  }
}

// An optional field: `fallback` when absent.
template <class T>
T field_or(const json& object, std::string_view key, T fallback, std::string_view where) {
  detail::require(object.is_object(), where, ": expected a JSON object");
  if (!object.contains(key)) return fallback;
  return field<T>(object, key, where);
}

inline json parse(std::string_view text, std::string_view source) {
  try {
    return json::parse(text);
  } catch (const json::exception& error) {
    detail::fail(source, ": not valid JSON: ", error.what());
  }
}

inline std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  detail::require(static_cast<bool>(in), path.string(), ": cannot open file");
  std::ostringstream content;
  content << in.rdbuf();
  detail::require(!in.bad(), path.string(), ": read error");
  return std::move(content).str();
}

inline json read_json_file(const std::filesystem::path& path) { return parse(read_text_file(path), path.string()); }

template <Document T>
json to_document(const T& value) {
  json payload = value;
  json document = {{"format", document_traits<T>::format}, {"version", document_traits<T>::version}};
  if (payload.is_object()) {
    document.update(payload);
  } else {
    document["value"] = std::move(payload);
  }
  return document;
}

template <Document T>
T from_document(const json& document, std::string_view source = "JSON document") {
  const auto format = field<std::string>(document, "format", source);
  detail::require(format == document_traits<T>::format, source, ": expected format '", document_traits<T>::format,
                  "', got '", format, "'");
  const auto version = field<int>(document, "version", source);
  detail::require(version == document_traits<T>::version, source, ": unsupported ", format, " version ", version,
                  " (this build reads version ", document_traits<T>::version, ")");
  json payload = document;
  payload.erase("format");
  payload.erase("version");
  if (payload.size() == 1 && payload.contains("value")) payload = json(document.at("value"));
  try {
    return payload.get<T>();
  } catch (const json::exception& error) {
    detail::fail(source, ": ", error.what());
  }
}

template <Document T>
T read_document(const std::filesystem::path& path) {
  return from_document<T>(read_json_file(path), path.string());
}

template <Document T>
void write_document(const std::filesystem::path& path, const T& value) {
  write_text_file(path, to_document(value).dump(2) + "\n");
}

}  // namespace sluice::io
