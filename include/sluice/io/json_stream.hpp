#pragma once
// A JSON object written member by member, one array member element by element, so that a document of many
// iterations is written as they are computed instead of held whole. The text is exactly nlohmann's dump(2) of the
// same object, provided the members come in its (sorted) key order, which is checked.
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "sluice/io/json.hpp"

namespace sluice::io {

class JsonObjectStream {
public:
  explicit JsonObjectStream(std::ostream& out) : out_(out) {}

  void member(std::string_view key, const json& value) {
    open_member(key);
    write_indented(value.dump(2), 2);
  }

  void open_array(std::string_view key) {
    open_member(key);
    out_ << '[';
    elements_ = 0;
  }
  void element(const json& value) {
    out_ << (elements_++ == 0 ? "\n    " : ",\n    ");
    write_indented(value.dump(2), 4);
  }
  void close_array() { out_ << (elements_ == 0 ? "]" : "\n  ]"); }

  // Ends the object and its line.
  void close() { out_ << (last_key_ ? "\n}\n" : "{}\n"); }

private:
  void open_member(std::string_view key) {
    if (last_key_ && !(*last_key_ < key))
      throw std::logic_error("JsonObjectStream: member '" + std::string(key) + "' out of key order");
    out_ << (last_key_ ? ",\n  " : "{\n  ") << json(key).dump() << ": ";
    last_key_ = std::string(key);
  }

  // A nested value's lines, indented to its depth (dump() escapes newlines inside strings, so every '\n' is a
  // line break of the layout).
  void write_indented(const std::string& text, std::size_t indent) {
    std::size_t begin = 0;
    for (std::size_t end = text.find('\n'); end != std::string::npos; end = text.find('\n', begin)) {
      out_ << std::string_view(text).substr(begin, end + 1 - begin) << std::string(indent, ' ');
      begin = end + 1;
    }
    out_ << std::string_view(text).substr(begin);
  }

  std::ostream& out_;
  std::optional<std::string> last_key_;
  std::size_t elements_ = 0;
};

}  // namespace sluice::io
