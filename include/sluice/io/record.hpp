#pragma once
// A record's JSON described once: a field table (key, member, whether a document may leave it out, and how its
// value is spelled) from which both the writer and the strict reader are made. A type opts in by specialising
// io::record with
//   static constexpr std::string_view name;   // names the record in errors ("dispatch options: field 'seed': ...")
//   static constexpr auto fields = std::tuple{io::member(...), ...};
// and, where a record must hold together after reading, static void check(const T&). Where its fields need words
// (a unit, what an empty value means), SLUICE_IO_DOCS(Type, {"key", "text"}, ...) beside the table gives them, for
// the Python properties and the type stubs. A key derived from the members (a rate, a partition) is written by
// static void write_derived(json&, const T&) after the fields; the reader leaves it alone unless the record checks
// it with static void check(const T&, const json& document).
// Fields are read in table order, so the first missing or bad one is the one an error names. A
// default-constructible type starts from its default, so a defaulted field a document leaves out keeps the
// default's value; any other type must be an aggregate whose table lists every member in declaration order, and a
// left-out field is value-initialised; a range field (SLUICE_IO_RANGE) needs a default-constructible type.
#include <concepts>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sluice/core/names.hpp"
#include "sluice/io/json.hpp"

// A record without a check in one statement (inside namespace sluice::io), its fields any of the field makers
// below with T naming the type; SLUICE_IO_MEMBERS(a, b) are required fields keyed by the members' own names,
// SLUICE_IO_DEFAULTED(c) defaulted ones:
//   SLUICE_IO_RECORD(shard::Tensor, "tensor", SLUICE_IO_MEMBERS(name, elements));
#define SLUICE_IO_RECORD(Type, error_name, ...)             \
  template <>                                               \
  struct record<Type> {                                     \
    using T = Type;                                         \
    static constexpr std::string_view name = error_name;    \
    static constexpr auto fields = std::tuple{__VA_ARGS__}; \
  }
#define SLUICE_IO_DOCS(Type, ...)                     \
  template <>                                         \
  struct record_docs<Type> {                          \
    static constexpr FieldDoc docs[] = {__VA_ARGS__}; \
  }
#define SLUICE_IO_MEMBERS(...) __VA_OPT__(SLUICE_IO_EXPAND(SLUICE_IO_MEMBERS_FROM(required, __VA_ARGS__)))
#define SLUICE_IO_DEFAULTED(...) __VA_OPT__(SLUICE_IO_EXPAND(SLUICE_IO_MEMBERS_FROM(defaulted, __VA_ARGS__)))

// A preprocessor loop: each rescan of SLUICE_IO_EXPAND expands one more SLUICE_IO_MEMBERS_AGAIN (up to 64 members).
#define SLUICE_IO_MEMBERS_FROM(presence, first, ...)                        \
  ::sluice::io::member(#first, &T::first, ::sluice::io::Presence::presence) \
      __VA_OPT__(, SLUICE_IO_MEMBERS_AGAIN SLUICE_IO_PARENS(presence, __VA_ARGS__))
#define SLUICE_IO_MEMBERS_AGAIN() SLUICE_IO_MEMBERS_FROM
#define SLUICE_IO_PARENS ()
#define SLUICE_IO_EXPAND(...) SLUICE_IO_EXPAND4(SLUICE_IO_EXPAND4(SLUICE_IO_EXPAND4(SLUICE_IO_EXPAND4(__VA_ARGS__))))
#define SLUICE_IO_EXPAND4(...) SLUICE_IO_EXPAND2(SLUICE_IO_EXPAND2(SLUICE_IO_EXPAND2(SLUICE_IO_EXPAND2(__VA_ARGS__))))
#define SLUICE_IO_EXPAND2(...) SLUICE_IO_EXPAND1(SLUICE_IO_EXPAND1(SLUICE_IO_EXPAND1(SLUICE_IO_EXPAND1(__VA_ARGS__))))
#define SLUICE_IO_EXPAND1(...) __VA_ARGS__

namespace sluice::io {

template <class T>
struct record;
template <class T>
struct record_docs;

template <class T>
concept Described = requires {
  { record<T>::name } -> std::convertible_to<std::string_view>;
  record<T>::fields;
  requires std::default_initializable<T> || std::is_aggregate_v<T>;
};

// Whether a document must hold a field; an optional member may instead be written only when it holds a value, and
// any member only when it is not its type's value-initialised one (a count whose 0 means "not given"); either is
// then read as a defaulted field is.
enum class Presence { required, defaulted, omitted_when_empty, omitted_when_zero };

// How a field's value is spelled: as nlohmann writes the member (an optional as null when empty), as a name from
// the enumeration's table, as an extended number (infinity written "inf"), as a whole document with its own format
// and version (a plan inside a report, to be cut out and read alone; an optional one null when empty), inline:
// the member's own object merged into the record's (a scheme beside the fields that qualify it), or wrapped: as
// the one-member record that holds it, and checked as that record is (a candidate list as {"strategies": [...]}),
// or as text: the value's name(), read back by its type's parse() (a scheme as "tp2cp2ringpp1").
struct AsValue {};
struct AsText {};
struct AsInline {};
struct AsDocument {};
template <class Wrapper>
struct AsWrapped {};
template <class Enum, std::size_t Size>
struct AsName {
  const NameTable<Enum, Size>* table;
};
struct AsExtendedNumber {};

template <class Record, class Member, class Spelling = AsValue>
struct Field {
  std::string_view key;
  Member Record::*member;
  Presence presence = Presence::required;
  Spelling spelling = {};
};

template <class Record, class Member>
constexpr Field<Record, Member> member(std::string_view key, Member Record::*pointer,
                                       Presence presence = Presence::required) {
  return {key, pointer, presence};
}

template <class Record, class Enum, std::size_t Size>
constexpr Field<Record, Enum, AsName<Enum, Size>> named_member(std::string_view key, Enum Record::*pointer,
                                                               const NameTable<Enum, Size>& table,
                                                               Presence presence = Presence::required) {
  return {key, pointer, presence, {&table}};
}

template <class Record>
constexpr Field<Record, double, AsExtendedNumber> extended_member(std::string_view key, double Record::*pointer,
                                                                  Presence presence = Presence::required) {
  return {key, pointer, presence, {}};
}

template <class Record, class Member>
constexpr Field<Record, Member, AsDocument> document_member(std::string_view key, Member Record::*pointer,
                                                            Presence presence = Presence::required) {
  return {key, pointer, presence, {}};
}

template <class Wrapper, class Record, class Member>
constexpr Field<Record, Member, AsWrapped<Wrapper>> wrapped_member(std::string_view key, Member Record::*pointer,
                                                                   Presence presence = Presence::required) {
  return {key, pointer, presence, {}};
}

template <class Record, class Member>
constexpr Field<Record, Member, AsText> text_member(std::string_view key, Member Record::*pointer,
                                                    Presence presence = Presence::required) {
  return {key, pointer, presence, {}};
}

// The key names the member for the Python property and SLUICE_IO_DOCS only: the JSON holds the member's own keys.
template <class Record, class Member>
constexpr Field<Record, Member, AsInline> inline_member(std::string_view key, Member Record::*pointer) {
  return {key, pointer, Presence::required, {}};
}
#define SLUICE_IO_INLINE(member) ::sluice::io::inline_member(#member, &T::member)

// Two members spelled as one required [begin, end] array, a half-open range such as "layers": [0, 4]. The members'
// own names are kept for bindings that show them apart.
template <class Record>
struct RangeField {
  std::string_view key;
  int Record::*begin;
  int Record::*end;
  std::string_view begin_name;
  std::string_view end_name;
};
#define SLUICE_IO_RANGE(key, begin, end) \
  ::sluice::io::RangeField<T> { #key, &T::begin, &T::end, #begin, #end }

// A field's description, by its JSON key. The text is a string literal, so its view is NUL-terminated.
struct FieldDoc {
  std::string_view key;
  std::string_view text;
};

// Whether every entry of record_docs<T>::docs names a field of the table, each at most once: checked wherever the
// record is written and wherever its words are read, so a renamed field cannot leave its words behind.
template <Described T>
consteval bool docs_name_fields_once() {
  if constexpr (requires { record_docs<T>::docs; }) {
    const auto& docs = record_docs<T>::docs;
    for (std::size_t k = 0; k < std::size(docs); ++k) {
      const auto names_it = [&](const auto&... field) { return ((field.key == docs[k].key) || ...); };
      if (docs[k].key.empty() || !std::apply(names_it, record<T>::fields)) return false;
      for (std::size_t j = 0; j < k; ++j)
        if (docs[j].key == docs[k].key) return false;
    }
  }
  return true;
}

// The words SLUICE_IO_DOCS gives the field with this key; empty where it gives none.
template <Described T>
constexpr std::string_view field_doc(std::string_view key) {
  static_assert(docs_name_fields_once<T>(), "SLUICE_IO_DOCS names a key the fields lack, or one twice");
  if constexpr (requires { record_docs<T>::docs; })
    for (const FieldDoc& doc : record_docs<T>::docs)
      if (doc.key == key) return doc.text;
  return {};
}

namespace detail {

// nlohmann has no conversion of std::optional: a list of optionals is written with null for an empty one.
inline json spell_present(const auto& value, AsValue) {
  using Value = std::remove_cvref_t<decltype(value)>;
  if constexpr (requires { requires is_optional<typename Value::value_type>::value; }) {
    json items = json::array();
    for (const auto& item : value) items.push_back(item ? json(*item) : json(nullptr));
    return items;
  } else {
    return json(value);
  }
}
template <class Enum, std::size_t Size>
json spell_present(Enum value, AsName<Enum, Size> spelling) {
  return std::string(name_in(*spelling.table, value));
}
inline json spell_present(double value, AsExtendedNumber) { return extended_number(value); }
inline json spell_present(const auto& value, AsDocument) { return to_document(value); }
inline json spell_present(const auto& value, AsText) { return value.name(); }
template <class Wrapper>
json spell_present(const auto& value, AsWrapped<Wrapper>) {
  return json(Wrapper{value});
}

// An empty optional is null, whatever the spelling of its value.
template <class Member, class Spelling>
json spell(const Member& value, Spelling spelling) {
  if constexpr (is_optional<Member>::value) {
    return value ? spell_present(*value, spelling) : json(nullptr);
  } else {
    return spell_present(value, spelling);
  }
}

template <class Member>
Member read_spelled(const json& object, std::string_view key, std::string_view where, AsValue) {
  return field<Member>(object, key, where);
}
template <class Member, class Enum, std::size_t Size>
Member read_spelled(const json& object, std::string_view key, std::string_view where, AsName<Enum, Size> spelling) {
  return name_field(object, key, *spelling.table, where);
}
template <class Member>
Member read_spelled(const json& object, std::string_view key, std::string_view where, AsExtendedNumber) {
  return extended_field(object, key, where);
}
template <class Member>
Member read_spelled(const json& object, std::string_view key, std::string_view where, AsDocument) {
  const auto nested = field<json>(object, key, where);
  const std::string source = sluice::concat(where, ": field '", key, "'");
  if constexpr (is_optional<Member>::value) {
    if (nested.is_null()) return std::nullopt;
    return from_document<typename Member::value_type>(nested, source);
  } else {
    return from_document<Member>(nested, source);
  }
}
template <class Member>
Member read_spelled(const json& object, std::string_view key, std::string_view where, AsText) {
  const auto text = field<std::string>(object, key, where);
  try {
    return Member::parse(text);
  } catch (const invalid_input& error) {
    sluice::fail(where, ": field '", key, "': ", error.what());
  }
}
template <class Member, class Wrapper>
Member read_spelled(const json& object, std::string_view key, std::string_view where, AsWrapped<Wrapper>) {
  auto [wrapped] = field<Wrapper>(object, key, where);
  return std::move(wrapped);
}
template <class Member>
Member read_spelled(const json& object, std::string_view /*key*/, std::string_view /*where*/, AsInline) {
  return object.template get<Member>();
}

template <class Spec, class T>
concept IsRange = std::same_as<Spec, RangeField<T>>;

inline std::pair<int, int> read_range(const json& object, std::string_view key, std::string_view where) {
  const auto range = field<std::vector<int>>(object, key, where);
  sluice::require(range.size() == 2, where, ": field '", key, "' must be [begin, end], got ", range.size(), " numbers");
  return {range[0], range[1]};
}

}  // namespace detail

template <Described T>
json record_to_json(const T& value) {
  static_assert(docs_name_fields_once<T>(), "SLUICE_IO_DOCS names a key the fields lack, or one twice");
  json out = json::object();
  const auto write = [&]<class Spec>(const Spec& field) {
    if constexpr (detail::IsRange<Spec, T>) {
      out[field.key] = {value.*field.begin, value.*field.end};
    } else if constexpr (std::same_as<std::remove_cvref_t<decltype(field.spelling)>, AsInline>) {
      out.update(json(value.*field.member));
    } else {
      const auto& member = value.*field.member;
      using Member = std::remove_cvref_t<decltype(member)>;
      if constexpr (detail::is_optional<Member>::value)
        if (field.presence == Presence::omitted_when_empty && !member) return;
      if constexpr (std::default_initializable<Member> && std::equality_comparable<Member>)
        if (field.presence == Presence::omitted_when_zero && member == Member{}) return;
      out[field.key] = detail::spell(member, field.spelling);
    }
  };
  std::apply([&](const auto&... field) { (write(field), ...); }, record<T>::fields);
  if constexpr (requires { record<T>::write_derived(out, value); }) record<T>::write_derived(out, value);
  return out;
}

template <Described T>
T record_from_json(const json& in) {
  constexpr std::string_view where = record<T>::name;
  sluice::require(in.is_object(), where, ": expected a JSON object, got ", detail::describe(in));
  const auto present = [&](const auto& field) {
    return field.presence == Presence::required || in.contains(field.key);
  };
  const auto read = [&](const auto& field) {
    using Member = std::remove_cvref_t<decltype(std::declval<T&>().*field.member)>;
    return detail::read_spelled<Member>(in, field.key, where, field.spelling);
  };
  const auto read_into = [&]<class Spec>(T& value, const Spec& field) {
    if constexpr (detail::IsRange<Spec, T>) {
      std::tie(value.*field.begin, value.*field.end) = detail::read_range(in, field.key, where);
    } else if (present(field)) {
      value.*field.member = read(field);
    }
  };
  // A member without a default value is read whether or not its field is marked defaulted.
  const auto value_or_blank = [&](const auto& field) {
    using Member = decltype(read(field));
    if constexpr (std::default_initializable<Member>) {
      return present(field) ? read(field) : Member{};
    } else {
      return read(field);
    }
  };
  T out = std::apply(
      [&](const auto&... field) {
        if constexpr (std::default_initializable<T>) {
          T value{};
          (read_into(value, field), ...);
          return value;
        } else {
          // Braced initialisation evaluates left to right: the fields are still read in table order.
          return T{value_or_blank(field)...};
        }
      },
      record<T>::fields);
  if constexpr (requires { record<T>::check(out); }) record<T>::check(out);
  if constexpr (requires { record<T>::check(out, in); }) record<T>::check(out, in);
  return out;
}

}  // namespace sluice::io

namespace nlohmann {

template <class T>
requires sluice::io::Described<T>
struct adl_serializer<T, void> {
  static void to_json(json& out, const T& value) { out = sluice::io::record_to_json(value); }
  static T from_json(const json& in) { return sluice::io::record_from_json<T>(in); }
};

}  // namespace nlohmann
