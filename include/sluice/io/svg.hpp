#pragma once
// Self-contained SVG pictures (no scripts, no external fonts or styles): a length histogram, the pipeline
// loads of planned iterations (Hydraulis Fig. 12b: how even the pipelines' times are), and the simulated
// timeline of pipelines (every rank's forward, backward and transfers).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <string_view>

#include "sluice/assign/plan.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/schedule/simulate.hpp"

namespace sluice::io {

namespace detail {

// printf into a std::string (GCC 12 has no <format>); the attribute lets -Wformat check every call.
[[gnu::format(printf, 1, 2)]] inline std::string printf_string(const char* format, ...) {
  std::va_list arguments;
  va_start(arguments, format);
  std::va_list copy;
  va_copy(copy, arguments);
  const int size = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string result(static_cast<std::size_t>(std::max(size, 0)), '\0');
  if (size > 0) std::vsnprintf(result.data(), result.size() + 1, format, arguments);
  va_end(arguments);
  return result;
}

inline std::string xml_escape(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': escaped += "&amp;"; break;
      case '<': escaped += "&lt;"; break;
      case '>': escaped += "&gt;"; break;
      case '"': escaped += "&quot;"; break;
      case '\'': escaped += "&apos;"; break;
      default: escaped += c;
    }
  }
  return escaped;
}

// Appends elements in drawing order; coordinates in user units (1 unit = 1 CSS pixel at 100%).
class SvgCanvas {
public:
  SvgCanvas(double width, double height) : width_(width), height_(height) {}

  // A tooltip (<title>) makes exact values readable in any browser without scripts.
  void rect(double x, double y, double w, double h, std::string_view fill, std::string_view tooltip = {}) {
    // A thin white outline keeps adjacent bars apart.
    body_ += printf_string(R"(<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s" stroke="white" )"
                           R"(stroke-width="0.5")",
                           x, y, std::max(w, 0.0), std::max(h, 0.0), std::string(fill).c_str());
    if (tooltip.empty()) {
      body_ += "/>\n";
    } else {
      body_.append("><title>").append(xml_escape(tooltip)).append("</title></rect>\n");
    }
  }
  void line(double x1, double y1, double x2, double y2, std::string_view stroke, bool dashed = false) {
    body_ += printf_string(R"(<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="%s"%s/>)", x1, y1, x2, y2,
                           std::string(stroke).c_str(), dashed ? R"( stroke-dasharray="4 3")" : "");
    body_ += "\n";
  }
  void text(double x, double y, std::string_view content, std::string_view anchor = "start", int size = 11,
            bool vertical = false) {
    body_ += printf_string(R"(<text x="%.2f" y="%.2f" font-size="%d" text-anchor="%s")", x, y, size,
                           std::string(anchor).c_str());
    if (vertical) body_ += printf_string(R"svg( transform="rotate(-90 %.2f %.2f)")svg", x, y);
    body_.append(">").append(xml_escape(content)).append("</text>\n");
  }
  [[nodiscard]] std::string str() const {
    return printf_string(R"(<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" )"
                         R"(viewBox="0 0 %.0f %.0f" font-family="sans-serif">)",
                         width_, height_, width_, height_) +
           "\n"
           R"(<rect width="100%" height="100%" fill="white"/>)"
           "\n" +
           body_ + "</svg>\n";
  }

private:
  double width_;
  double height_;
  std::string body_;
};

// A "nice" step (1, 2 or 5 × 10^k) giving about `ticks` intervals over [0, top].
inline double tick_step(double top, int ticks) {
  const double raw = top / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double factor : {1.0, 2.0, 5.0})
    if (raw <= factor * magnitude) return factor * magnitude;
  return 10.0 * magnitude;
}

inline std::string tick_label(double value) {
  if (value >= 1e6 && std::fmod(value, 1e6) == 0) return printf_string("%.0fM", value / 1e6);
  if (value >= 1e3 && std::fmod(value, 1e3) == 0) return printf_string("%.0fK", value / 1e3);
  return printf_string("%g", value);
}

// An upper estimate of `text`'s width at font size `size` in sans-serif: 0.6 em per byte is wider than common
// sans fonts' average glyph, and counts a multi-byte character more than once. Pictures size their margins with
// it so that no title or label is cut at the picture's edge.
inline double text_width(std::string_view text, int size) { return 0.6 * size * static_cast<double>(text.size()); }

// The picture's width: the plot's and its margins', widened where the centred title would not fit.
inline double picture_width(double left, double plot_w, double right, std::string_view title) {
  constexpr int title_size = 14;
  return std::max(left + plot_w + right, text_width(title, title_size) + 2 * 10);
}

}  // namespace detail

// Bars of the histogram's counts over length; `log_counts` draws counts on a log10(1 + count) scale, which
// keeps a long tail visible beside the head.
inline std::string histogram_svg(const data::LengthHistogram& histogram, std::string_view title,
                                 bool log_counts = false) {
  sluice::require(!histogram.bins.empty(), "histogram_svg: the histogram has no bins");
  constexpr double height = 360, left = 60, right = 20, top = 36, bottom = 44;
  const double width = detail::picture_width(left, 680, right, title);
  const double plot_w = width - left - right;
  const double plot_h = height - top - bottom;
  std::int64_t most = 0;
  for (const data::HistogramBin& bin : histogram.bins) most = std::max(most, bin.count);
  auto scale = [&](double count) { return log_counts ? std::log10(1.0 + count) : count; };
  const double y_max = std::max(scale(static_cast<double>(most)), 1.0);

  detail::SvgCanvas svg(width, height);
  svg.text(width / 2, 22, title, "middle", 14);
  const double lower = static_cast<double>(histogram.bins.front().lower);
  const double upper = static_cast<double>(histogram.bins.back().upper);
  auto x_of = [&](double length) { return left + plot_w * (length - lower) / (upper - lower); };
  auto y_of = [&](double value) { return top + plot_h * (1.0 - value / y_max); };
  for (const data::HistogramBin& bin : histogram.bins) {
    if (bin.count == 0) continue;
    const double x = x_of(static_cast<double>(bin.lower));
    const double y = y_of(scale(static_cast<double>(bin.count)));
    svg.rect(x, y, x_of(static_cast<double>(bin.upper)) - x, top + plot_h - y, "#4c72b0",
             detail::printf_string("(%lld, %lld]: %lld sequences", static_cast<long long>(bin.lower),
                                   static_cast<long long>(bin.upper), static_cast<long long>(bin.count)));
  }
  svg.line(left, top + plot_h, left + plot_w, top + plot_h, "black");
  svg.line(left, top, left, top + plot_h, "black");
  const double x_step = detail::tick_step(upper - lower, 8);
  for (double tick = std::ceil(lower / x_step) * x_step; tick <= upper; tick += x_step) {
    svg.line(x_of(tick), top + plot_h, x_of(tick), top + plot_h + 4, "black");
    svg.text(x_of(tick), top + plot_h + 16, detail::tick_label(tick), "middle");
  }
  svg.text(left + plot_w / 2, height - 8, "sequence length (tokens)", "middle");
  if (log_counts) {
    for (double decade = 1; decade <= static_cast<double>(most); decade *= 10) {
      const double y = y_of(scale(decade));
      svg.line(left - 4, y, left, y, "black");
      svg.text(left - 6, y + 4, detail::tick_label(decade), "end");
    }
  } else {
    const double y_step = detail::tick_step(y_max, 5);
    for (double tick = 0; tick <= y_max; tick += y_step) {
      svg.line(left - 4, y_of(tick), left, y_of(tick), "black");
      svg.text(left - 6, y_of(tick) + 4, detail::tick_label(tick), "end");
    }
  }
  svg.text(16, top + plot_h / 2, log_counts ? "sequences (log scale)" : "sequences", "middle", 11, true);
  return svg.str();
}

// One panel per iteration: a bar per pipeline, split into its micro-batches (each Σ T' + c), with the
// pipeline's estimate (max micro-batch · (PP − 1 + V)) marked and the iteration's estimate as a dashed line.
inline std::string pipeline_loads_svg(Span<const assign::IterationPlan> iterations, std::string_view title) {
  sluice::require(!iterations.empty(), "pipeline_loads_svg: no iterations");
  constexpr double right = 30, top = 36, bar = 14, gap = 4, panel_gap = 26, plot_w = 580;
  auto panel_label = [](std::size_t k, const assign::IterationPlan& plan) {
    return detail::printf_string("iteration %zu: %s, estimate %.3f s", k, plan.strategy.name().c_str(), plan.estimate);
  };
  auto row_label = [](const assign::PipelinePlan& pipeline) {
    return detail::printf_string("pipeline %d: %s", pipeline.index, pipeline.scheme.name().c_str());
  };
  double longest = 0;
  double height = top + 46;
  double left = 150;
  double widest_panel_label = 0;
  for (std::size_t k = 0; k < iterations.size(); ++k) {
    const assign::IterationPlan& plan = iterations[k];
    sluice::require(!plan.pipelines.empty(), "pipeline_loads_svg: an iteration has no pipelines");
    longest = std::max(longest, plan.estimate);
    widest_panel_label = std::max(widest_panel_label, detail::text_width(panel_label(k, plan), 11));
    for (const assign::PipelinePlan& pipeline : plan.pipelines) {
      double busy = 0;
      for (const assign::MicroBatch& micro_batch : pipeline.micro_batches) busy += micro_batch.seconds;
      longest = std::max(longest, busy);
      left = std::max(left, detail::text_width(row_label(pipeline), 11) + 12);
    }
    height += panel_gap + static_cast<double>(plan.pipelines.size()) * (bar + gap);
  }
  sluice::require(longest > 0, "pipeline_loads_svg: every pipeline is idle");
  // Panel labels start at the plot's left edge; the axis caption is centred under the plot.
  const double width = std::max(detail::picture_width(left, plot_w, right, title), left + widest_panel_label + right);
  auto x_of = [&](double seconds) { return left + plot_w * seconds / longest; };

  detail::SvgCanvas svg(width, height);
  svg.text(width / 2, 22, title, "middle", 14);
  double y = top;
  for (std::size_t k = 0; k < iterations.size(); ++k) {
    const assign::IterationPlan& plan = iterations[k];
    y += panel_gap;
    svg.text(left, y - 8, panel_label(k, plan));
    const double panel_top = y;
    for (const assign::PipelinePlan& pipeline : plan.pipelines) {
      svg.text(left - 6, y + bar - 3, row_label(pipeline), "end");
      double x = 0;
      for (std::size_t m = 0; m < pipeline.micro_batches.size(); ++m) {
        const assign::MicroBatch& micro_batch = pipeline.micro_batches[m];
        svg.rect(x_of(x), y, x_of(x + micro_batch.seconds) - x_of(x), bar, m % 2 == 0 ? "#4c72b0" : "#8fa8d0",
                 detail::printf_string("micro-batch %zu: %zu sequences, %lld tokens, %.4f s", m,
                                       micro_batch.sequence_ids.size(), static_cast<long long>(micro_batch.tokens),
                                       micro_batch.seconds));
        x += micro_batch.seconds;
      }
      if (pipeline.estimate > 0)
        svg.line(x_of(pipeline.estimate), y - 1, x_of(pipeline.estimate), y + bar + 1, "#c44e52");
      y += bar + gap;
    }
    svg.line(x_of(plan.estimate), panel_top - 2, x_of(plan.estimate), y, "#c44e52", true);
  }
  svg.line(left, y + 4, left + plot_w, y + 4, "black");
  const double step = detail::tick_step(longest, 8);
  for (double tick = 0; tick <= longest; tick += step) {
    svg.line(x_of(tick), y + 4, x_of(tick), y + 8, "black");
    svg.text(x_of(tick), y + 20, detail::printf_string("%g", tick), "middle");
  }
  svg.text(left + plot_w / 2, y + 36, "seconds (bars: micro-batches; red: each pipeline's 1F1B estimate)", "middle");
  return svg.str();
}

// One row per rank (stage j of pipeline k, named names[k]): its forward (blue) and backward (orange) passes
// labelled with their micro-batch ids, and under them the transfers it sends, activations (green) and
// gradients (purple), from send start to arrival at the neighbour. Every box's tooltip gives its exact times.
inline std::string timeline_svg(Span<const schedule::Simulation> pipelines, Span<const std::string> names,
                                std::string_view title) {
  sluice::require(pipelines.size() == names.size(), "timeline_svg: ", pipelines.size(), " pipelines, ", names.size(),
                  " names");
  constexpr double right = 20, top = 56, compute_h = 14, send_h = 4, row_gap = 5, pipeline_gap = 10, plot_w = 810;
  auto row_label = [&](std::size_t k, std::size_t j) {
    return detail::printf_string("%s, stage %zu", names[k].c_str(), j);
  };
  constexpr const char* forward_colour = "#4c72b0";
  constexpr const char* backward_colour = "#dd8452";
  constexpr const char* activation_colour = "#55a868";
  constexpr const char* gradient_colour = "#8172b2";
  double makespan = 0;
  std::size_t rows = 0;
  double left = 170;
  for (std::size_t k = 0; k < pipelines.size(); ++k) {
    makespan = std::max(makespan, pipelines[k].makespan);
    rows += pipelines[k].stages.size();
    if (!pipelines[k].stages.empty())
      left = std::max(left, detail::text_width(row_label(k, pipelines[k].stages.size() - 1), 11) + 12);
  }
  sluice::require(rows > 0 && makespan > 0, "timeline_svg: nothing ran");
  const double width = detail::picture_width(left, plot_w, right, title);
  const double row_h = compute_h + send_h + 1 + row_gap;
  const double height =
      top + static_cast<double>(rows) * row_h + static_cast<double>(pipelines.size()) * pipeline_gap + 44;
  auto x_of = [&](double seconds) { return left + plot_w * seconds / makespan; };

  detail::SvgCanvas svg(width, height);
  svg.text(width / 2, 22, title, "middle", 14);
  double legend_x = left;
  for (const auto& [colour, label] : {std::pair{forward_colour, "forward"},
                                      {backward_colour, "backward"},
                                      {activation_colour, "send activation"},
                                      {gradient_colour, "send gradient"}}) {
    svg.rect(legend_x, 32, 10, 10, colour);
    svg.text(legend_x + 14, 41, label);
    legend_x += 130;
  }
  double y = top;
  for (std::size_t k = 0; k < pipelines.size(); ++k) {
    const schedule::Simulation& simulation = pipelines[k];
    for (std::size_t j = 0; j < simulation.stages.size(); ++j) {
      svg.text(left - 6, y + compute_h - 3, row_label(k, j), "end");
      for (const schedule::OpTiming& op : simulation.stages[j]) {
        const bool forward = op.pass == schedule::Pass::forward;
        const double x = x_of(op.start);
        const double w = x_of(op.end) - x;
        svg.rect(x, y, w, compute_h, forward ? forward_colour : backward_colour,
                 detail::printf_string("%s, stage %zu: %s of micro-batch %d, %.4f-%.4f s", names[k].c_str(), j,
                                       std::string(schedule::name(op.pass)).c_str(), op.micro_batch, op.start, op.end));
        const std::string id = std::to_string(op.micro_batch);
        // A label only where it fits inside its box (about 6 units per digit at font size 9).
        if (w >= 6.0 * static_cast<double>(id.size()) + 2) svg.text(x + w / 2, y + compute_h - 4, id, "middle", 9);
        if (op.arrival > op.send_start)
          // At least one unit wide: a fast link's transfers would otherwise vanish beside the compute.
          svg.rect(x_of(op.send_start), y + compute_h + 1, std::max(x_of(op.arrival) - x_of(op.send_start), 1.0),
                   send_h, forward ? activation_colour : gradient_colour,
                   detail::printf_string("%s, stage %zu: sends the %s of micro-batch %d to stage %zu, %.4f-%.4f s",
                                         names[k].c_str(), j, forward ? "activation" : "gradient", op.micro_batch,
                                         forward ? j + 1 : j - 1, op.send_start, op.arrival));
      }
      y += row_h;
    }
    y += pipeline_gap;
  }
  svg.line(left, y, left + plot_w, y, "black");
  const double step = detail::tick_step(makespan, 10);
  for (double tick = 0; tick <= makespan; tick += step) {
    svg.line(x_of(tick), y, x_of(tick), y + 4, "black");
    svg.text(x_of(tick), y + 16, detail::printf_string("%g", tick), "middle");
  }
  svg.text(left + plot_w / 2, y + 32, "seconds (simulated; labels: micro-batch ids)", "middle");
  return svg.str();
}

}  // namespace sluice::io
