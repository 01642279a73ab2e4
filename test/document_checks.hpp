#pragma once
// Round trips and broken documents, shared by the suites of the io formats.
#include <doctest/doctest.h>

#include <string>

#include "sluice/core/error.hpp"
#include "sluice/io/json.hpp"

namespace sluice::test {

// `value` written as a document's text and read back.
template <class T>
T read_back(const T& value) {
  const std::string text = io::to_document(value).dump(2);
  return io::from_document<T>(io::parse(text, "text"), "text");
}

// `document` read as a T must raise invalid_input whose message contains `field`.
template <class T>
void rejects_document(const io::json& document, const char* field) {
  CAPTURE(field);
  CHECK_THROWS_WITH_AS(io::from_document<T>(document, "broken.json"), doctest::Contains(field), invalid_input);
}

}  // namespace sluice::test
