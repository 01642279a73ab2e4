#pragma once
// Chrome-trace export of a simulated pipeline timeline (open in chrome://tracing or ui.perfetto.dev): one
// process, two threads per stage (its compute ops, and the transfers it sends), complete ("X") events in
// microseconds.
#include <cstddef>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/io/json.hpp"
#include "sluice/schedule/simulate.hpp"

namespace sluice::io {

inline json chrome_trace(const schedule::Simulation& simulation) {
  json events = json::array();
  for (std::size_t j = 0; j < simulation.stages.size(); ++j) {
    const auto compute = static_cast<int>(2 * j), sends = compute + 1;
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", compute},
                      {"args", {{"name", sluice::detail::concat("stage ", j)}}}});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", sends},
                      {"args", {{"name", sluice::detail::concat("stage ", j, " sends")}}}});
    for (const schedule::OpTiming& t : simulation.stages[j]) {
      const bool forward = t.pass == schedule::Pass::forward;
      const std::string label = sluice::detail::concat(forward ? "F" : "B", t.micro_batch);
      events.push_back({{"name", label},
                        {"cat", forward ? "forward" : "backward"},
                        {"ph", "X"},
                        {"pid", 0},
                        {"tid", compute},
                        {"ts", t.start * 1e6},
                        {"dur", (t.end - t.start) * 1e6},
                        {"args", {{"micro_batch", t.micro_batch}, {"stage", j}}}});
      if (t.arrival > t.end || t.send_start > t.end)
        events.push_back({{"name", sluice::detail::concat(forward ? "act " : "grad ", t.micro_batch)},
                          {"cat", forward ? "send_act" : "send_grad"},
                          {"ph", "X"},
                          {"pid", 0},
                          {"tid", sends},
                          {"ts", t.send_start * 1e6},
                          {"dur", (t.arrival - t.send_start) * 1e6},
                          {"args", {{"micro_batch", t.micro_batch}, {"stage", j}}}});
    }
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"makespan_s", simulation.makespan}}}};
}

}  // namespace sluice::io
