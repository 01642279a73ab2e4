#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sluice/core/check.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/io/core_json.hpp"

using namespace sluice;

TEST_CASE("messages: each part written as a stream writes it, doubles to 17 digits") {
  const std::string text = "s";
  CHECK(concat("a", 1, ' ', -2L, std::size_t{3}, true, text, std::string_view("v"), 0.1, 2.5f, 'c') ==
        "a1 -231sv0.100000000000000012.5c");
  CHECK(concat() == "");
  // A temporary part lives until the message is built.
  CHECK_THROWS_WITH_AS(require(false, "n=", std::to_string(42), ", x=", 1e-9), "n=42, x=1.0000000000000001e-09",
                       invalid_input);
  CHECK_NOTHROW(require(true, "never built: ", std::string(1000, 'x')));
  CHECK_THROWS_WITH_AS(fail("bad ", 7, " of ", 8), "bad 7 of 8", invalid_input);
  const PlanCheck check("plan: ");
  CHECK_THROWS_WITH_AS(check.part("pipeline ", 3, " ")(false, "stage ", 1), "plan: pipeline 3 stage 1", invalid_plan);
}

TEST_CASE("span: a view of what every contiguous container holds, and of std::span both ways") {
  std::vector<int> values{1, 2, 3, 4, 5};
  const std::array<int, 3> fixed{7, 8, 9};
  int plain[2] = {10, 11};
  const Span<const int> of_vector = values;
  CHECK(of_vector.data() == values.data());
  CHECK(of_vector.size() == 5);
  CHECK(Span<const int>(fixed).back() == 9);
  CHECK(Span<int>(plain).front() == 10);
  CHECK(Span<const int>(values.begin() + 1, values.end() - 1).size() == 3);
  CHECK(Span<const int>(values.end(), values.end()).empty());
  CHECK(Span<const int>().empty());
  // Class template argument deduction keeps the container's constness.
  Span mutable_view(values);
  static_assert(std::is_same_v<decltype(mutable_view), Span<int>>);
  mutable_view[0] = 6;
  CHECK(values[0] == 6);
  static_assert(std::is_same_v<decltype(Span(fixed)), Span<const int>>);
  const Span<const int> from_mutable = mutable_view;
  CHECK(std::vector<int>(from_mutable.begin(), from_mutable.end()) == std::vector<int>{6, 2, 3, 4, 5});
  CHECK(std::vector<int>(from_mutable.rbegin(), from_mutable.rend()) == std::vector<int>{5, 4, 3, 2, 6});
  CHECK(from_mutable.first(2).back() == 2);
  CHECK(from_mutable.last(2).front() == 4);
  CHECK(from_mutable.subspan(3).size() == 2);
  CHECK(from_mutable.subspan(1, 2).back() == 3);
  // To and from std::span, the elements shared, not copied.
  const std::span<int> standard = mutable_view;
  CHECK(standard.data() == values.data());
  const Span<const int> back = standard;
  CHECK((back.data() == values.data() && back.size() == values.size()));
  const std::span<int> from_temporary = Span<int>(values);
  CHECK(from_temporary.size() == 5);
  static_assert(!std::is_convertible_v<Span<const int>, Span<int>>);
  static_assert(!std::is_convertible_v<const std::vector<int>&, Span<int>>);
}

TEST_CASE("scheme: degrees, GPU count, names and parsing") {
  const Scheme scheme{{.tp = 4, .pp = 2}};
  CHECK(scheme.tp() == 4);
  CHECK(scheme.pp() == 2);
  CHECK(scheme.gpus() == 8);
  CHECK(scheme.name() == "tp4pp2");
  CHECK(Scheme::parse("tp4pp2") == scheme);
  CHECK(Scheme::parse("<4,2>") == scheme);
  CHECK(Scheme(16, 1) > Scheme(8, 4));
  CHECK(Scheme() == Scheme(1, 1));
}

TEST_CASE("scheme: bad degrees and spellings are rejected") {
  CHECK_THROWS_AS(Scheme(0, 1), invalid_input);
  CHECK_THROWS_AS(Scheme(1, -2), invalid_input);
  CHECK_THROWS_AS(Scheme(Scheme::max_degree + 1, 1), invalid_input);
  for (const char* text : {"", "tp", "tp4", "tp4pp", "tp4pp2x", "<4,2", "<4;2>", "tpxpp2", "tp0pp1", "tp99999999pp1"}) {
    CAPTURE(text);
    CHECK_THROWS_AS(Scheme::parse(text), invalid_input);
  }
  CHECK_THROWS_WITH_AS(Scheme(0, 1), doctest::Contains("tp must be"), invalid_input);
}

TEST_CASE("sequence: validated on construction") {
  const Sequence sequence(3, 1024);
  CHECK(sequence.id() == 3);
  CHECK(sequence.length() == 1024);
  CHECK_THROWS_AS(Sequence(0, 0), invalid_input);
  CHECK_THROWS_AS(Sequence(0, -5), invalid_input);
  CHECK_THROWS_AS(Sequence(-1, 5), invalid_input);
}

TEST_CASE("strategy: multiset semantics, GPU count, canonical order") {
  const Strategy a({{Scheme(1, 4), 2}, {Scheme(4, 2), 1}, {Scheme(1, 4), 1}});
  const Strategy b({{Scheme(4, 2), 1}, {Scheme(1, 4), 3}});
  CHECK(a == b);
  CHECK(a.gpus() == 8 + 12);
  CHECK(a.pipeline_count() == 4);
  CHECK(a.name() == "1*tp4pp2+3*tp1pp4");
  CHECK_FALSE(a.is_homogeneous());
  CHECK(Strategy::homogeneous(Scheme(8, 1), 2).is_homogeneous());
  CHECK_NOTHROW(a.require_fits(20));
  CHECK_THROWS_WITH_AS(a.require_fits(16), doctest::Contains("needs 20 GPUs"), invalid_input);
  CHECK_THROWS_AS(a.require_fits(0), invalid_input);
  CHECK_THROWS_AS(Strategy({}), invalid_input);
  CHECK_THROWS_AS(Strategy({{Scheme(1, 1), 0}}), invalid_input);
  CHECK_THROWS_AS(Strategy({{Scheme(1, 1), -1}}), invalid_input);
}

TEST_CASE("strategy: parse is the inverse of name") {
  const Strategy strategy({{Scheme(16, 1), 1}, {Scheme(8, 1), 6}});
  CHECK(Strategy::parse(strategy.name()) == strategy);
  CHECK(Strategy::parse("tp8pp1+tp8pp1+2*<4,2>") == Strategy({{Scheme(8, 1), 2}, {Scheme(4, 2), 2}}));
  for (const char* text : {"", "+", "x*tp1pp1", "0*tp1pp1", "2*", "tp1pp1+", "*tp1pp1", "2*tp1"}) {
    CAPTURE(text);
    CHECK_THROWS_AS(Strategy::parse(text), invalid_input);
  }
}

TEST_CASE("strategy: pipelines ordered by MaxLen, ties in canonical order") {
  const Strategy strategy({{Scheme(1, 4), 2}, {Scheme(8, 1), 1}, {Scheme(4, 2), 1}});
  auto max_len = [](const Scheme& scheme) -> std::int64_t { return scheme.tp() >= 4 ? 32768 : 8192; };
  const auto pipelines = strategy.pipelines(max_len);
  REQUIRE(pipelines.size() == 4);
  CHECK(pipelines[0].scheme == Scheme(8, 1));
  CHECK(pipelines[1].scheme == Scheme(4, 2));
  CHECK(pipelines[2].scheme == Scheme(1, 4));
  CHECK(pipelines[3].scheme == Scheme(1, 4));
  for (std::size_t i = 0; i < pipelines.size(); ++i) CHECK(pipelines[i].index == static_cast<int>(i));
  CHECK(std::ranges::is_sorted(pipelines, std::greater<>{}, &Pipeline::max_len));
}

TEST_CASE("rng: fixed reference values, so plans are reproducible across platforms") {
  Rng rng(42);
  // xoshiro256** seeded by SplitMix64(42); the values are a property of the algorithm, not the platform.
  const std::array<std::uint64_t, 3> first = {rng(), rng(), rng()};
  Rng again(42);
  for (std::uint64_t value : first) CHECK(again() == value);
  CHECK(first[0] != first[1]);
  CHECK(Rng(43)() != first[0]);
  CHECK(Rng::stream(42, 0)() != Rng::stream(42, 1)());
  CHECK(Rng::stream(42, 7)() == Rng::stream(42, 7)());
}

TEST_CASE("rng: distributions stay in range and are roughly uniform") {
  Rng rng(7);
  std::array<int, 6> counts{};
  for (int i = 0; i < 60000; ++i) {
    const auto value = rng.uniform_int(1, 6);
    REQUIRE(value >= 1);
    REQUIRE(value <= 6);
    ++counts[static_cast<std::size_t>(value - 1)];
  }
  for (int count : counts) CHECK(std::abs(count - 10000) < 500);  // > 5 standard deviations
  double sum = 0;
  double sum_sq = 0;
  for (int i = 0; i < 100000; ++i) {
    const double u = rng.uniform();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    const double z = rng.normal();
    sum += z;
    sum_sq += z * z;
  }
  CHECK(std::abs(sum / 100000) < 0.02);
  CHECK(std::abs(sum_sq / 100000 - 1.0) < 0.03);
  CHECK(rng.uniform_int(5, 5) == 5);
  CHECK_THROWS_AS(rng.uniform_int(6, 5), invalid_input);
  CHECK_THROWS_AS(rng.below(0), invalid_input);
}

TEST_CASE("rng: shuffle is a seeded permutation") {
  std::vector<int> items(100);
  std::iota(items.begin(), items.end(), 0);
  auto shuffled = items;
  Rng(5).shuffle(std::span(shuffled));
  CHECK(shuffled != items);
  auto again = items;
  Rng(5).shuffle(std::span(again));
  CHECK(again == shuffled);
  std::ranges::sort(shuffled);
  CHECK(shuffled == items);
}

TEST_CASE("core JSON round trips") {
  const Strategy strategy({{Scheme(4, 2), 2}, {Scheme(1, 8), 1}});
  const auto document = io::to_document(strategy);
  CHECK(document.at("format") == "sluice.strategy");
  CHECK(io::from_document<Strategy>(document) == strategy);
  CHECK(io::json(Sequence(1, 10)).get<Sequence>() == Sequence(1, 10));
  const Pipeline pipeline{2, Scheme(2, 4), 16384};
  CHECK(io::json(pipeline).get<Pipeline>() == pipeline);
  // Degrees added later default to 1 when absent.
  CHECK(io::json::parse(R"({"tp": 4})").get<Scheme>() == Scheme(4, 1));
}

TEST_CASE("core JSON: bad documents raise invalid_input naming the problem") {
  CHECK_THROWS_WITH_AS(io::from_document<Strategy>(io::json::parse(R"({"format":"sluice.profile","version":1})")),
                       doctest::Contains("expected format"), invalid_input);
  CHECK_THROWS_WITH_AS(
      io::from_document<Strategy>(io::json::parse(R"({"format":"sluice.strategy","version":9,"parts":[]})")),
      doctest::Contains("version 9"), invalid_input);
  CHECK_THROWS_AS(io::from_document<Strategy>(io::json::parse(R"({"format":"sluice.strategy","version":1})")),
                  invalid_input);
  CHECK_THROWS_AS(io::from_document<Strategy>(io::json::parse(
                      R"({"format":"sluice.strategy","version":1,"parts":[{"tp":"x","pp":1,"pipelines":1}]})")),
                  invalid_input);
  CHECK_THROWS_AS(io::json::parse(R"({"tp": 0})").get<Scheme>(), invalid_input);
  CHECK_THROWS_AS(io::parse("{", "inline"), invalid_input);
}
