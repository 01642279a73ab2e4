// io::record: a field table makes a record's writer and strict reader. Made-up records cover each kind of field.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/io/record.hpp"

namespace {

enum class Colour { red, blue };
constexpr sluice::NameTable<Colour, 2> colour_names{{{Colour::red, "red"}, {Colour::blue, "blue"}}};

struct Settings {
  int count = 7;
  Colour colour = Colour::blue;
  double limit = std::numeric_limits<double>::infinity();
  std::optional<double> scale;
  std::vector<int> sizes;
  friend bool operator==(const Settings&, const Settings&) = default;
};

// No default constructor: read by aggregate initialisation.
struct Tagged {
  explicit Tagged(std::string text) : label(std::move(text)) {}
  std::string label;
  friend bool operator==(const Tagged&, const Tagged&) = default;
};

struct Holder {
  Tagged tag;
  Settings settings;
  double weight = 0;
  friend bool operator==(const Holder&, const Holder&) = default;
};

// A settings object with its own fields beside the settings' and a note written only when there is one.
struct Labelled {
  Settings settings;
  std::optional<int> note;
  friend bool operator==(const Labelled&, const Labelled&) = default;
};

// A name spelled as text (name() written, parse() read), and a count written only where it is not 0.
struct Code {
  int value = 0;
  [[nodiscard]] std::string name() const { return "c" + std::to_string(value); }
  static Code parse(std::string_view text) {
    sluice::require(text.size() == 2 && text[0] == 'c' && text[1] >= '0' && text[1] <= '9', "code: cannot parse '",
                    text, "'");
    return {text[1] - '0'};
  }
  friend bool operator==(const Code&, const Code&) = default;
};

struct Coded {
  Code code;
  int copies = 0;
  friend bool operator==(const Coded&, const Coded&) = default;
};

// A document of its own, and a report that holds one (and perhaps a draft) and a key derived from its members.
struct Sheet {
  int rows = 0;
  std::string title;
  friend bool operator==(const Sheet&, const Sheet&) = default;
};

struct Report {
  int total = 0;
  int spare = 1;
  Sheet sheet;
  std::optional<Sheet> draft;
  [[nodiscard]] int doubled() const { return 2 * total; }
  friend bool operator==(const Report&, const Report&) = default;
};

// Per run its time, none where it failed: nlohmann has no conversion of std::optional.
struct Runs {
  std::vector<std::optional<double>> seconds;
  friend bool operator==(const Runs&, const Runs&) = default;
};

struct LayerRange {
  int first = 0;
  int last = 0;
  std::string name;
  friend bool operator==(const LayerRange&, const LayerRange&) = default;
};

// Records whose words name a field the table lacks, or one field twice: never written, which would not compile.
struct Misnamed {
  int count = 0;
};
struct Twice {
  int count = 0;
};

// A tally by name, and the lines it came from as a Runs record holds them.
struct RecordTally {
  std::map<std::string, int> counts;
  std::vector<std::optional<double>> lines;
  friend bool operator==(const RecordTally&, const RecordTally&) = default;
};

}  // namespace

namespace sluice::io {
SLUICE_IO_RECORD(Runs, "runs", SLUICE_IO_MEMBERS(seconds));
SLUICE_IO_RECORD(RecordTally, "tally", SLUICE_IO_MEMBERS(counts), wrapped_member<Runs>("lines", &T::lines));
SLUICE_IO_RECORD(LayerRange, "span", SLUICE_IO_RANGE(layers, first, last), SLUICE_IO_MEMBERS(name));
SLUICE_IO_DOCS(LayerRange, {"layers", "Half-open: [first, last)"}, {"name", "What the range is called"});
SLUICE_IO_RECORD(Misnamed, "misnamed", SLUICE_IO_MEMBERS(count));
SLUICE_IO_DOCS(Misnamed, {"counts", "A key the table does not have"});
SLUICE_IO_RECORD(Twice, "twice", SLUICE_IO_MEMBERS(count));
SLUICE_IO_DOCS(Twice, {"count", "Said once"}, {"count", "and again"});
SLUICE_IO_DOCS(Labelled, {"settings", "The settings, their keys beside the note"});
SLUICE_IO_DOCUMENT(Sheet, "test.sheet", 4);
SLUICE_IO_RECORD(Sheet, "sheet", SLUICE_IO_MEMBERS(rows, title));

template <>
struct record<Report> {
  using T = Report;
  static constexpr std::string_view name = "report";
  static constexpr auto fields =
      std::tuple{SLUICE_IO_MEMBERS(total), SLUICE_IO_DEFAULTED(spare), document_member("sheet", &T::sheet),
                 document_member("draft", &T::draft, Presence::omitted_when_empty)};
  static void write_derived(json& out, const T& report) { out["doubled"] = report.doubled(); }
  static void check(const T& report, const json& document) {
    sluice::require(field<int>(document, "doubled", name) == report.doubled(), name,
                    ": field 'doubled' is not twice 'total'");
  }
};
}  // namespace sluice::io

template <>
struct sluice::io::record<Settings> {
  using T = Settings;
  static constexpr std::string_view name = "settings";
  static constexpr auto fields =
      std::tuple{member("count", &T::count, Presence::defaulted),
                 named_member("colour", &T::colour, colour_names, Presence::defaulted),
                 extended_member("limit", &T::limit, Presence::defaulted),
                 member("scale", &T::scale, Presence::defaulted), member("sizes", &T::sizes)};
  static void check(const T& value) { sluice::require(value.count >= 1, "settings: count must be >= 1"); }
};

// Tagged is not a record: its own serializer, as a type whose JSON is not a field list keeps.
template <>
struct nlohmann::adl_serializer<Tagged> {
  static void to_json(json& out, const Tagged& tagged) { out = tagged.label; }
  static Tagged from_json(const json& in) { return Tagged(sluice::io::as<std::string>(in, "tag")); }
};

template <>
struct sluice::io::record<Holder> {
  using T = Holder;
  static constexpr std::string_view name = "holder";
  static constexpr auto fields = std::tuple{member("tag", &T::tag), member("settings", &T::settings),
                                            member("weight", &T::weight, Presence::defaulted)};
};

template <>
struct sluice::io::record<Labelled> {
  using T = Labelled;
  static constexpr std::string_view name = "labelled";
  static constexpr auto fields =
      std::tuple{SLUICE_IO_INLINE(settings), member("note", &T::note, Presence::omitted_when_empty)};
};

template <>
struct sluice::io::record<Coded> {
  using T = Coded;
  static constexpr std::string_view name = "coded";
  static constexpr auto fields =
      std::tuple{text_member("code", &T::code), member("copies", &T::copies, Presence::omitted_when_zero)};
};

using sluice::io::json;

TEST_CASE("record: written by its table, each kind of field spelled its way, and read back equal") {
  const Settings settings{.count = 3, .colour = Colour::red, .scale = 0.5, .sizes = {1, 2}};
  const json text = settings;
  CHECK(text == json::parse(R"({"count": 3, "colour": "red", "limit": "inf", "scale": 0.5, "sizes": [1, 2]})"));
  CHECK(text.get<Settings>() == settings);
  CHECK(json(Settings{}).at("scale").is_null());
  CHECK(json(Settings{}).get<Settings>() == Settings{});

  const Holder holder{Tagged("a"), settings, 2.5};
  CHECK(json(holder).get<Holder>() == holder);
}

TEST_CASE("record: a defaulted field left out keeps the default; a required one is named when missing") {
  const auto read = [](std::string_view text) { return sluice::io::as<Settings>(json::parse(text), "input"); };
  const Settings sparse = read(R"({"sizes": []})");
  CHECK(sparse == Settings{});
  CHECK_THROWS_WITH_AS(read(R"({"count": 2})"), "input: settings: missing field 'sizes'", sluice::invalid_input);
  // Fields are read in table order: the first bad one is named.
  CHECK_THROWS_WITH_AS(read(R"({"count": 2.5, "colour": "green"})"),
                       "input: settings: field 'count': expected an integer in [-2147483648, 2147483647], got 2.5",
                       sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(R"({"colour": "green", "sizes": []})"),
                       "input: settings: field 'colour': expected \"red\" or \"blue\", got \"green\"",
                       sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(R"({"limit": "infinite", "sizes": []})"),
                       "input: settings.limit: expected a number, \"inf\" or \"-inf\", got \"infinite\"",
                       sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(R"([1])"), "input: settings: expected a JSON object, got an array", sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(R"({"count": 0, "sizes": []})"), "input: settings: count must be >= 1",
                       sluice::invalid_input);
}

TEST_CASE("record: a type without a default constructor is read member by member, a left-out field value-initialised") {
  const Holder holder = json::parse(R"({"tag": "b", "settings": {"sizes": [4]}})").get<Holder>();
  CHECK(holder.tag.label == "b");
  CHECK(holder.settings.sizes == std::vector<int>{4});
  CHECK(holder.weight == 0);
  CHECK_THROWS_WITH_AS(sluice::io::as<Holder>(json::parse(R"({"settings": {"sizes": []}})"), "input"),
                       "input: holder: missing field 'tag'", sluice::invalid_input);
}

TEST_CASE("record: an inline member's fields sit beside the record's; an empty optional may be left out") {
  Labelled labelled;
  labelled.settings.count = 2;
  labelled.settings.sizes = {5};
  const json text = labelled;
  CHECK(text == json::parse(R"({"count": 2, "colour": "blue", "limit": "inf", "scale": null, "sizes": [5]})"));
  CHECK(text.get<Labelled>() == labelled);
  labelled.note = 4;
  CHECK(json(labelled).at("note") == 4);
  CHECK(json(labelled).get<Labelled>() == labelled);
  CHECK_THROWS_WITH_AS(sluice::io::as<Labelled>(json::parse(R"({"count": 2})"), "input"),
                       "input: settings: missing field 'sizes'", sluice::invalid_input);
  // Its key names it only for the words (and Python): the JSON has no "settings".
  CHECK(sluice::io::field_doc<Labelled>("settings") == "The settings, their keys beside the note");
}

TEST_CASE("record: the one-line forms key fields by their members' names; a nested document keeps its own header") {
  Report report{.total = 3, .spare = 5, .sheet = {.rows = 2, .title = "t"}, .draft = std::nullopt};
  const json text = report;
  CHECK(text == json::parse(R"({"total": 3, "spare": 5, "doubled": 6,
                                "sheet": {"format": "test.sheet", "version": 4, "rows": 2, "title": "t"}})"));
  CHECK(text.get<Report>() == report);
  report.draft = Sheet{.rows = 1, .title = "d"};
  CHECK(json(report).at("draft") == json::parse(R"({"format": "test.sheet", "version": 4, "rows": 1, "title": "d"})"));
  CHECK(json(report).get<Report>() == report);

  const auto read = [](const std::string& document) { return sluice::io::as<Report>(json::parse(document), "input"); };
  const std::string sheet = R"("sheet": {"format": "test.sheet", "version": 4, "rows": 2, "title": "t"})";
  CHECK(read(R"({"total": 1, "doubled": 2, "draft": null, )" + sheet + "}").spare == 1);
  CHECK_THROWS_WITH_AS(read(R"({"doubled": 2, )" + sheet + "}"), "input: report: missing field 'total'",
                       sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(R"({"total": 1, "doubled": 3, )" + sheet + "}"),
                       "input: report: field 'doubled' is not twice 'total'", sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(R"({"total": 1, "doubled": 2, "sheet": {"format": "test.page", "version": 4}})"),
                       "input: report: field 'sheet': expected format 'test.sheet', got \"test.page\"",
                       sluice::invalid_input);
}

TEST_CASE("record: a list of optionals is written with null for an empty one and read back equal") {
  const Runs runs{{1.5, std::nullopt, 2.0}};
  CHECK(json(runs) == json::parse(R"({"seconds": [1.5, null, 2.0]})"));
  CHECK(json(runs).get<Runs>() == runs);
  CHECK(json(Runs{}) == json::parse(R"({"seconds": []})"));
  CHECK_THROWS_WITH_AS(sluice::io::as<Runs>(json::parse(R"({"seconds": [1, "x"]})"), "input"),
                       doctest::Contains("seconds"), sluice::invalid_input);
}

TEST_CASE("record: a range field is one [begin, end] array, required, of exactly two numbers") {
  const LayerRange span{.first = 2, .last = 5, .name = "s"};
  CHECK(json(span) == json::parse(R"({"layers": [2, 5], "name": "s"})"));
  CHECK(json(span).get<LayerRange>() == span);
  const auto read = [](const std::string& document) {
    return sluice::io::as<LayerRange>(json::parse(document), "input");
  };
  CHECK_THROWS_WITH_AS(read(R"({"name": "s"})"), "input: span: missing field 'layers'", sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(R"({"layers": [1, 2, 3], "name": "s"})"),
                       "input: span: field 'layers' must be [begin, end], got 3 numbers", sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(R"({"layers": [1, "x"], "name": "s"})"), doctest::Contains("layers"),
                       sluice::invalid_input);
}

TEST_CASE("record: a map by string is an object read key by key; a wrapped member is spelled as its wrapper") {
  const RecordTally tally{{{"a", 2}, {"b", 1}}, {0.5, std::nullopt}};
  CHECK(json(tally) == json::parse(R"({"counts": {"a": 2, "b": 1}, "lines": {"seconds": [0.5, null]}})"));
  CHECK(json(tally).get<RecordTally>() == tally);
  const auto read = [](const std::string& document) {
    return sluice::io::as<RecordTally>(json::parse(document), "input");
  };
  CHECK_THROWS_WITH_AS(read(R"({"counts": {"a": "2"}, "lines": {"seconds": []}})"),
                       doctest::Contains("tally: field 'counts'.a: expected an integer"), sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(R"({"counts": [], "lines": {"seconds": []}})"),
                       doctest::Contains("tally: field 'counts': expected an object, got"), sluice::invalid_input);
  CHECK_THROWS_WITH_AS(read(R"({"counts": {}, "lines": [0.5]})"),
                       doctest::Contains("tally: field 'lines': runs: expected a JSON object"), sluice::invalid_input);
}

TEST_CASE("record: a text field is its value's name; a zero count may be left out and reads as zero") {
  const Coded plain{.code = {.value = 4}};
  CHECK(json(plain) == json::parse(R"({"code": "c4"})"));
  CHECK(json(plain).get<Coded>() == plain);
  const Coded copied{.code = {.value = 5}, .copies = 3};
  CHECK(json(copied) == json::parse(R"({"code": "c5", "copies": 3})"));
  CHECK(json(copied).get<Coded>() == copied);
  CHECK_THROWS_WITH_AS(sluice::io::as<Coded>(json::parse(R"({"code": "d4"})"), "input"),
                       "input: coded: field 'code': code: cannot parse 'd4'", sluice::invalid_input);
  CHECK_THROWS_WITH_AS(sluice::io::as<Coded>(json::parse(R"({"code": 4})"), "input"),
                       doctest::Contains("coded: field 'code'"), sluice::invalid_input);
}

TEST_CASE("record: a field's words are found by its key, and words for a key the table lacks do not compile") {
  using sluice::io::docs_name_fields_once;
  using sluice::io::field_doc;
  static_assert(docs_name_fields_once<LayerRange>() && docs_name_fields_once<Runs>());
  static_assert(!docs_name_fields_once<Misnamed>() && !docs_name_fields_once<Twice>());
  CHECK(field_doc<LayerRange>("layers") == "Half-open: [first, last)");
  CHECK(field_doc<LayerRange>("name") == "What the range is called");
  CHECK(field_doc<LayerRange>("first").empty());
  CHECK(field_doc<Runs>("seconds").empty());
}
