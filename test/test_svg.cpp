#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/svg.hpp"

using namespace sluice;

namespace {

// Checks XML well-formedness as far as these pictures need: one root, properly nested and closed tags,
// quoted attributes, and character data with no raw '<' or stray '&'. Returns the empty string when
// well-formed, else what is wrong.
std::string xml_problem(std::string_view xml) {
  std::vector<std::string> open;
  bool root_closed = false;
  std::size_t i = 0;
  const std::regex attributes(R"(^(\s+[A-Za-z_:][-\w:.]*="[^"<&]*(&(amp|lt|gt|quot|apos);[^"<&]*)*")*\s*/?$)");
  while (i < xml.size()) {
    if (xml[i] == '<') {
      const std::size_t end = xml.find('>', i);
      if (end == std::string_view::npos) return "unterminated tag";
      std::string_view tag = xml.substr(i + 1, end - i - 1);
      i = end + 1;
      if (tag.starts_with('/')) {
        if (open.empty() || open.back() != tag.substr(1)) return "mismatched </" + std::string(tag.substr(1)) + ">";
        open.pop_back();
        if (open.empty()) root_closed = true;
        continue;
      }
      if (root_closed) return "content after the root element";
      const std::size_t name_end = tag.find_first_of(" \t\n/");
      const std::string name(tag.substr(0, name_end));
      if (name.empty()) return "empty tag name";
      const std::string rest(name_end == std::string_view::npos ? "" : tag.substr(name_end));
      if (!std::regex_match(rest, attributes)) return "bad attributes in <" + name + ">";
      if (!tag.ends_with('/')) open.push_back(name);
    } else {
      if (xml[i] == '&') {
        const std::size_t semicolon = xml.find(';', i);
        if (semicolon == std::string_view::npos) return "unterminated entity";
        const std::string_view entity = xml.substr(i, semicolon - i + 1);
        if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" && entity != "&apos;")
          return "unknown entity " + std::string(entity);
      } else if (open.empty() && xml[i] != '\n' && !root_closed) {
        return "text outside the root element";
      }
      ++i;
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (!root_closed) return "no root element";
  return "";
}

std::size_t count(std::string_view text, std::string_view needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("svg: the checker rejects broken documents") {
  CHECK(xml_problem(R"(<svg a="1"><rect/></svg>)").empty());
  CHECK_FALSE(xml_problem(R"(<svg><rect></svg>)").empty());
  CHECK_FALSE(xml_problem(R"(<svg a=1></svg>)").empty());
  CHECK_FALSE(xml_problem(R"(<svg><text>a < b</text></svg>)").empty());
  CHECK_FALSE(xml_problem(R"(<svg><text>a & b</text></svg>)").empty());
  CHECK_FALSE(xml_problem(R"(<svg></svg><svg></svg>)").empty());
}

TEST_CASE("svg: length histogram") {
  const auto lengths = data::synthetic_lengths({.count = 5000, .max_length = 32768, .seed = 3});
  const data::LengthDataset dataset(lengths, "synthetic");
  const data::LengthHistogram histogram = dataset.histogram(1024);
  std::size_t non_empty = 0;
  for (const data::HistogramBin& bin : histogram.bins) non_empty += bin.count > 0 ? 1 : 0;
  for (const bool log_counts : {false, true}) {
    const std::string svg = io::histogram_svg(histogram, "lengths <synthetic> & more", log_counts);
    CAPTURE(svg);
    CHECK(xml_problem(svg) == "");
    CHECK(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    // One bar per non-empty bin, plus the white background.
    CHECK(count(svg, "<rect") == non_empty + 1);
    CHECK(svg.find("lengths &lt;synthetic&gt; &amp; more") != std::string::npos);
    const data::HistogramBin& first = histogram.bins.front();
    std::string tooltip = "(";  // built by appending: GCC 12 raises a false -Wrestrict on "(" + ... (bug 105329)
    tooltip.append(std::to_string(first.lower)).append(", ").append(std::to_string(first.upper));
    tooltip.append("]: ").append(std::to_string(first.count)).append(" sequences");
    CHECK(svg.find(tooltip) != std::string::npos);
  }
  CHECK_THROWS_AS((void)io::histogram_svg(data::LengthHistogram{}, "empty"), invalid_input);
}

TEST_CASE("svg: pipeline loads of planned iterations") {
  const auto profile = io::read_document<cost::Profile>(io::resolve_data_file("llama2-7b", "profiles"));
  const std::vector<Strategy> candidates = {Strategy::parse("4*tp4pp1"), Strategy::parse("1*tp4pp1+1*tp2pp1+5*tp1pp2")};
  std::vector<assign::IterationPlan> iterations;
  std::size_t micro_batches = 0;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const auto lengths = data::synthetic_lengths({.count = 40, .max_length = 16384, .seed = seed});
    std::vector<Sequence> batch;
    for (std::size_t i = 0; i < lengths.size(); ++i) batch.emplace_back(static_cast<std::int64_t>(i), lengths[i]);
    iterations.push_back(assign::plan_iteration(batch, candidates, profile));
    assign::validate(iterations.back(), batch, profile);
    for (const assign::PipelinePlan& pipeline : iterations.back().pipelines) micro_batches += pipeline.micro_batches.size();
  }
  const std::string svg = io::pipeline_loads_svg(iterations, "pipeline loads");
  CHECK(xml_problem(svg) == "");
  CHECK(count(svg, "<rect") == micro_batches + 1);
  CHECK(count(svg, "stroke-dasharray") == iterations.size());
  CHECK(svg.find("iteration 2: " + iterations[2].strategy.name()) != std::string::npos);

  CHECK_THROWS_AS((void)io::pipeline_loads_svg({}, "none"), invalid_input);
}
