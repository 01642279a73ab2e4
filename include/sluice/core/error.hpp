#pragma once
// Errors raised by sluice. Bad input is always reported, never clamped or ignored.
#include <charconv>
#include <initializer_list>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace sluice {

// Input that violates a documented precondition: the message names the field and the value.
class invalid_input : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

// A well-formed problem that has no solution (for example no strategy fits the GPU count).
class infeasible : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A plan that breaks one of its invariants, found by a validator: a bug in a planner or a plan edited by hand.
class invalid_plan : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

// An output that could not be written once it was open: a full disk, a file-size limit, a closed pipe, /dev/full.
// The programs exit with 1 on it (bad input exits with 2).
class write_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// The helpers every check in sluice raises its errors with; public so that code building on sluice reports
// bad input the same way.
namespace detail {
template <class Part, class = void>
struct streamable : std::false_type {};
template <class Part>
struct streamable<Part, std::void_t<decltype(std::declval<std::ostream&>() << std::declval<Part>())>> : std::true_type {
};

// One part of a message, written only if the message is built. Writing through a function per part type (not
// per call's list of types) keeps the hundreds of checks from each instantiating a stream insertion.
class MessagePart {
public:
  MessagePart(const char* text) noexcept : object_(text), write_(&write_text) {}
  template <class Part>
  MessagePart(const Part& part) noexcept : object_(&part), write_(&write_part<Part>) {}

  friend std::ostream& operator<<(std::ostream& out, const MessagePart& part) {
    part.write_(out, part.object_);
    return out;
  }

private:
  static void write_text(std::ostream& out, const void* text) { out << static_cast<const char*>(text); }
  template <class Part>
  static void write_part(std::ostream& out, const void* part) {
    out << *static_cast<const Part*>(part);
  }

  const void* object_;
  void (*write_)(std::ostream&, const void*);
};

inline std::string join(std::initializer_list<MessagePart> parts) {
  std::ostringstream out;
  out.precision(17);
  for (const MessagePart& part : parts) out << part;
  return out.str();
}

[[noreturn]] inline void fail_with(std::initializer_list<MessagePart> parts) { throw invalid_input(join(parts)); }
}  // namespace detail

// Constrained to streamable parts so that argument-dependent lookup from other libraries' variadic helpers
// (pybind11's signature descriptors over sluice types) never picks it. SFINAE, not a requires-clause: the CUDA
// kernels include this header as C++17.
template <class... Parts, std::enable_if_t<(detail::streamable<const Parts&>::value && ...), int> = 0>
std::string concat(const Parts&... parts) {
  return detail::join({detail::MessagePart(parts)...});
}

// The shortest text that reads back as `value` ("1e-09", not concat's "1.0000000000000001e-09"), for limits and
// coefficients a message quotes.
inline std::string shortest(double value) {
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  detail::fail_with({detail::MessagePart(parts)...});
}

template <class... Parts>
void require(bool condition, const Parts&... parts) {
  if (!condition) detail::fail_with({detail::MessagePart(parts)...});
}

}  // namespace sluice
