#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/svg.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "xml_check.hpp"

using namespace sluice;

using sluice::test::count;
using sluice::test::text_outside;
using sluice::test::xml_problem;

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
    CHECK(text_outside(svg) == "");
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
    for (const assign::PipelinePlan& pipeline : iterations.back().pipelines)
      micro_batches += pipeline.micro_batches.size();
  }
  const std::string svg = io::pipeline_loads_svg(iterations, "pipeline loads");
  CHECK(xml_problem(svg) == "");
  CHECK(text_outside(svg) == "");
  CHECK(count(svg, "<rect") == micro_batches + 1);
  CHECK(count(svg, "stroke-dasharray") == iterations.size());
  CHECK(svg.find("iteration 2: " + iterations[2].strategy.name()) != std::string::npos);

  // A title longer than the plot widens the picture instead of running off both edges.
  const std::string long_title(300, 'x');
  CHECK(text_outside(io::pipeline_loads_svg(iterations, long_title)) == "");

  CHECK_THROWS_AS((void)io::pipeline_loads_svg({}, "none"), invalid_input);
}

TEST_CASE("svg: pipeline timeline, one row per rank") {
  // Two pipelines: three micro-batches on three stages over a slow link (every transfer drawn), and one on one.
  sluice::schedule::Problem problem;
  problem.stages = 3;
  for (int i = 0; i < 3; ++i)
    problem.micro_batches.push_back({{0.1, 0.1, 0.1}, {0.2, 0.2, 0.2}, {1, 1, 1}, 1000 * (i + 1)});
  problem.memory_limit = {1e9, 1e9, 1e9};
  problem.hidden = 1024;
  problem.link = {1e-3, 1e9};
  sluice::schedule::Problem single = problem;
  single.stages = 1;
  single.micro_batches = {{{0.3}, {0.6}, {1}, 500}};
  single.memory_limit = {1e9};
  const std::vector<sluice::schedule::Simulation> pipelines = {sluice::schedule::schedule_pipeline(problem).simulation,
                                                               sluice::schedule::schedule_pipeline(single).simulation};
  const std::vector<std::string> names = {"pipeline 0 (tp1pp3)", "pipeline 1 <tp2pp1>"};
  const std::string svg = io::timeline_svg(pipelines, names, "timeline & more");
  CAPTURE(svg);
  CHECK(xml_problem(svg) == "");
  CHECK(text_outside(svg) == "");
  // Background, four legend boxes, 2·m·c compute boxes, and a transfer box per op that sends.
  const std::size_t compute = 2 * 3 * 3 + 2;
  const std::size_t transfers = 2 * 3 * 2;
  CHECK(count(svg, "<rect") == 1 + 4 + compute + transfers);
  CHECK(count(svg, "sends the activation") == 6);
  CHECK(count(svg, "sends the gradient") == 6);
  CHECK(count(svg, ", stage ") >= 4);
  CHECK(svg.find("pipeline 1 &lt;tp2pp1&gt;, stage 0: forward of micro-batch 0") != std::string::npos);
  CHECK(svg.find("timeline &amp; more") != std::string::npos);
  CHECK(svg.find(">2</text>") != std::string::npos);  // micro-batch ids label their boxes

  // Long row labels (a 32B strategy's) widen the left margin; a long title widens the picture.
  const std::vector<std::string> long_names = {"pipeline 0: tp8pp2 of 1*tp8pp2+2*tp4pp4+3*tp2pp8, MaxLen 32768",
                                               "pipeline 1"};
  CHECK(text_outside(io::timeline_svg(pipelines, long_names, std::string(200, 't'))) == "");

  CHECK_THROWS_AS((void)io::timeline_svg(pipelines, std::span(names).first(1), "t"), invalid_input);
  CHECK_THROWS_AS((void)io::timeline_svg({}, {}, "t"), invalid_input);
}
