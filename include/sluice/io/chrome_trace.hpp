#pragma once
// Chrome-trace export of simulated pipeline timelines (open in chrome://tracing or ui.perfetto.dev): one
// process per pipeline, two threads per stage (its compute ops, and the transfers it sends), complete ("X")
// events in microseconds.
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/io/json.hpp"
#include "sluice/schedule/simulate.hpp"

namespace sluice::io {

// Appends one pipeline's timeline to `events` as process `pid`.
inline void append_chrome_trace(json& events, const schedule::Simulation& simulation, int pid,
                                std::string_view process_name) {
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", process_name}}}});
  for (std::size_t j = 0; j < simulation.stages.size(); ++j) {
    const auto compute = static_cast<int>(2 * j), sends = compute + 1;
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", compute},
                      {"args", {{"name", sluice::concat("stage ", j)}}}});
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", sends},
                      {"args", {{"name", sluice::concat("stage ", j, " sends")}}}});
    for (const schedule::OpTiming& t : simulation.stages[j]) {
      const bool forward = t.pass == schedule::Pass::forward;
      const std::string label = sluice::concat(forward ? "F" : "B", t.micro_batch);
      events.push_back({{"name", label},
                        {"cat", std::string(schedule::name(t.pass))},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", compute},
                        {"ts", t.start * 1e6},
                        {"dur", (t.end - t.start) * 1e6},
                        {"args", {{"micro_batch", t.micro_batch}, {"stage", j}}}});
      if (t.arrival > t.end || t.send_start > t.end)
        events.push_back({{"name", sluice::concat(forward ? "act " : "grad ", t.micro_batch)},
                          {"cat", forward ? "send_act" : "send_grad"},
                          {"ph", "X"},
                          {"pid", pid},
                          {"tid", sends},
                          {"ts", t.send_start * 1e6},
                          {"dur", (t.arrival - t.send_start) * 1e6},
                          {"args", {{"micro_batch", t.micro_batch}, {"stage", j}}}});
    }
  }
}

// Pipelines side by side (names[k] names pipelines[k]); the makespan is the slowest pipeline's.
inline json chrome_trace(Span<const schedule::Simulation> pipelines, Span<const std::string> names) {
  sluice::require(pipelines.size() == names.size(), "chrome trace: ", pipelines.size(), " pipelines, ", names.size(),
                  " names");
  json events = json::array();
  double makespan = 0;
  for (std::size_t k = 0; k < pipelines.size(); ++k) {
    append_chrome_trace(events, pipelines[k], static_cast<int>(k), names[k]);
    makespan = std::max(makespan, pipelines[k].makespan);
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", {{"makespan_s", makespan}}}};
}

inline json chrome_trace(const schedule::Simulation& simulation) {
  const std::string name = "pipeline";
  return chrome_trace(Span<const schedule::Simulation>(&simulation, 1), Span<const std::string>(&name, 1));
}

}  // namespace sluice::io
