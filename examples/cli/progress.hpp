#pragma once
// A progress bar on stderr for the tool's long loops. main() passes stderr only when it is a terminal, so
// redirected output and the in-process tests never see one; the bar appears once a run has lasted a second
// and is erased when the loop ends (or an error unwinds it), so error messages stay one line.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace sluice::cli {

class Progress {
public:
  // `terminal`: where to draw, or nullptr for no bar. `total`: the steps the loop will take. `delay`: how long
  // a run lasts before the bar appears.
  Progress(std::ostream* terminal, std::string_view label, std::int64_t total,
           std::chrono::milliseconds delay = std::chrono::seconds(1))
      : terminal_(terminal), label_(label), total_(std::max<std::int64_t>(total, 1)), delay_(delay) {}
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress() { erase(); }

  void advance(std::int64_t steps = 1) { report(done_ + steps, total_); }

  // `done` of `total` steps, for loops that learn their total as they run.
  void report(std::int64_t done, std::int64_t total) {
    total_ = std::max<std::int64_t>(total, 1);
    done_ = std::min(done, total_);
    if (terminal_ == nullptr) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < delay_ || now - drawn_ < interval) return;
    drawn_ = now;
    constexpr int cells = 30;
    const auto filled = static_cast<int>(done_ * cells / total_);
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now - start_).count();
    // One string, so that the terminal stream's formatting flags stay as they were.
    *terminal_ << '\r' + label_ + " [" + std::string(static_cast<std::size_t>(filled), '#') +
                      std::string(static_cast<std::size_t>(cells - filled), '.') + "] " + std::to_string(done_) + '/' +
                      std::to_string(total_) + "  " + std::to_string(seconds) + " s"
               << std::flush;
    visible_ = true;
  }

  // This bar as the progress callback of a library loop (compare::Progress).
  [[nodiscard]] std::function<void(std::size_t, std::size_t)> callback() {
    return [this](std::size_t done, std::size_t total) {
      report(static_cast<std::int64_t>(done), static_cast<std::int64_t>(total));
    };
  }

private:
  static constexpr std::chrono::milliseconds interval{100};

  void erase() {
    if (visible_) *terminal_ << "\r\033[K" << std::flush;
    visible_ = false;
  }

  std::ostream* terminal_;
  std::string label_;
  std::int64_t total_;
  std::chrono::milliseconds delay_;
  std::int64_t done_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point drawn_{};
  bool visible_ = false;
};

}  // namespace sluice::cli
