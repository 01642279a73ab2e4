#pragma once
// Planning ahead of the trainer: while the trainer runs iteration i, worker threads plan iterations
// i+1 … i+lookahead (Hydraulis overlaps its per-iteration planning with training; DynaPipe runs planner workers
// ahead of the executors). Results come back in iteration order and equal a synchronous loop's: an iteration's
// plan depends only on its index and its batch, never on the thread count or timing. plan_ahead, below, runs the
// sluice plan (plan/iteration.hpp) so.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/plan/simulated_iteration.hpp"

namespace sluice::plan {

// Each planned-but-undelivered iteration holds its batch and plan (megabytes at 1,024 GPUs), so the window is
// bounded; the thread bound is the tool's --threads bound (docs/limits.md).
inline constexpr int max_planner_lookahead = 64;
inline constexpr int max_planner_threads = 256;

struct PlannerOptions {
  int lookahead = 2;  // iterations pulled and planned ahead of the consumer; 1..max_planner_lookahead
  int threads = 1;    // planning workers (besides the one thread that pulls batches); 1..max_planner_threads
  friend bool operator==(const PlannerOptions&, const PlannerOptions&) = default;
};

inline void require_valid(const PlannerOptions& options) {
  sluice::require(options.lookahead >= 1 && options.lookahead <= max_planner_lookahead,
                  "planner: lookahead must be in [1, ", max_planner_lookahead, "], got ", options.lookahead);
  sluice::require(options.threads >= 1 && options.threads <= max_planner_threads, "planner: threads must be in [1, ",
                  max_planner_threads, "], got ", options.threads);
}

// The next iteration's batch, or nullopt at the end. Called on the planner's pulling thread only, one call at a
// time, in iteration order: it need not be thread-safe.
using BatchSource = std::function<std::optional<std::vector<Sequence>>()>;

template <class Plan>
struct Planned {
  std::int64_t iteration = 0;  // from 0, in the source's order
  std::vector<Sequence> batch;
  Plan plan;
  friend bool operator==(const Planned&, const Planned&) = default;
};

// How long the consumer waited for plans: a trainer that never waits has its planning hidden behind training.
struct PlannerWaits {
  std::int64_t calls = 0;   // next() calls that returned or raised
  std::int64_t waited = 0;  // of those, the calls that found their iteration not yet planned and blocked
  double seconds = 0;       // total time next() blocked
  double last_seconds = 0;  // the latest call's
  double max_seconds = 0;
  friend bool operator==(const PlannerWaits&, const PlannerWaits&) = default;
};

// Pulls batches from `source` on one thread, plans them with `plan(iteration, batch)` on `threads` workers and
// delivers them by next() in iteration order. At any time at most `lookahead` batches have been pulled beyond
// those next() has delivered (the window holds them whether waiting, being planned or planned), so memory does
// not grow with the run. `plan` runs concurrently on different iterations: it must not modify shared state.
// A planning error at iteration j is raised by next() at j (after 0 … j−1 are delivered); the call after it
// delivers j+1. An error of the source ends the run: raised at its iteration, then next() returns nullopt.
// stop() or the destructor ends the run at any point, the consumer having drained or not; it waits for the
// plans and the source call already under way (it cannot interrupt them). next() is for one consumer thread;
// stop() may come from any thread but the planner's own (it wakes a next() that waits: that returns nullopt).
template <class Plan>
class Planner {
public:
  using PlanFunction = std::function<Plan(std::int64_t iteration, Span<const Sequence> batch)>;

  Planner(BatchSource source, PlanFunction plan, PlannerOptions options)
      : source_(std::move(source)), plan_(std::move(plan)), options_(options) {
    require_valid(options_);
    sluice::require(static_cast<bool>(source_), "planner: the batch source is empty");
    sluice::require(static_cast<bool>(plan_), "planner: the plan function is empty");
    threads_.reserve(static_cast<std::size_t>(options_.threads) + 1);
    try {
      threads_.emplace_back([this] { pull(); });
      for (int w = 0; w < options_.threads; ++w) threads_.emplace_back([this] { work(); });
    } catch (...) {
      stop();
      throw;
    }
  }
  // The threads hold `this`.
  Planner(const Planner&) = delete;
  Planner& operator=(const Planner&) = delete;
  ~Planner() { stop(); }

  // The next iteration in order, waiting for its plan if need be; nullopt once the source has ended and every
  // iteration is delivered, or after stop(). Rethrows the iteration's planning error or the source's error.
  std::optional<Planned<Plan>> next() {
    std::unique_lock lock(mutex_);
    auto available = [&] { return stopping_ || (slots_.empty() ? source_done_ : slots_.front().done); };
    double waited = 0;
    if (!available()) {
      const auto begin = std::chrono::steady_clock::now();
      ready_.wait(lock, available);
      waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      ++waits_.waited;
    }
    ++waits_.calls;
    waits_.seconds += waited;
    waits_.last_seconds = waited;
    waits_.max_seconds = std::max(waits_.max_seconds, waited);
    if (stopping_) return std::nullopt;
    if (slots_.empty()) {
      if (source_error_) std::rethrow_exception(std::exchange(source_error_, nullptr));
      return std::nullopt;
    }
    Slot slot = std::move(slots_.front());
    slots_.pop_front();
    const std::int64_t iteration = delivered_++;
    lock.unlock();
    room_.notify_one();
    if (slot.error) std::rethrow_exception(slot.error);
    return Planned<Plan>{.iteration = iteration, .batch = std::move(slot.batch), .plan = std::move(*slot.plan)};
  }

  // Ends the run and joins the threads; idempotent.
  void stop() {
    {
      const std::scoped_lock lock(mutex_);
      stopping_ = true;
    }
    room_.notify_all();
    work_.notify_all();
    ready_.notify_all();
    const std::scoped_lock joining(join_mutex_);
    for (std::jthread& thread : threads_)
      if (thread.joinable()) thread.join();
  }

  [[nodiscard]] PlannerWaits waits() const {
    const std::scoped_lock lock(mutex_);
    return waits_;
  }
  [[nodiscard]] const PlannerOptions& options() const noexcept { return options_; }

private:
  struct Slot {
    std::vector<Sequence> batch;
    std::optional<Plan> plan;
    std::exception_ptr error;
    bool done = false;
  };

  // The pulling thread: one source call at a time, only while the window has room.
  void pull() {
    std::unique_lock lock(mutex_);
    while (true) {
      room_.wait(lock, [&] { return stopping_ || pulled_ - delivered_ < options_.lookahead; });
      if (stopping_) return;
      lock.unlock();
      std::optional<std::vector<Sequence>> batch;
      std::exception_ptr error;
      try {
        batch = source_();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (!batch) {
        source_done_ = true;
        source_error_ = std::move(error);  // moved: only the consumer holds it when it is freed
        lock.unlock();
        work_.notify_all();
        ready_.notify_all();
        return;
      }
      slots_.push_back({.batch = std::move(*batch), .plan = std::nullopt, .error = nullptr, .done = false});
      ++pulled_;
      work_.notify_one();
    }
  }

  // A worker: takes the earliest pulled iteration nobody plans, plans it without the lock, stores the result.
  void work() {
    std::unique_lock lock(mutex_);
    while (true) {
      work_.wait(lock, [&] { return stopping_ || next_to_plan_ < pulled_ || source_done_; });
      if (stopping_ || next_to_plan_ == pulled_) return;  // stopped, or the source ended with nothing left
      const std::int64_t iteration = next_to_plan_++;
      std::vector<Sequence> batch = std::move(slot(iteration).batch);
      lock.unlock();
      std::optional<Plan> plan;
      std::exception_ptr error;
      try {
        plan.emplace(plan_(iteration, Span<const Sequence>(batch)));
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      // An undelivered slot stays in the deque (only done slots leave), so `iteration` still indexes it.
      Slot& done = slot(iteration);
      done.batch = std::move(batch);
      done.plan = std::move(plan);
      done.error = std::move(error);
      done.done = true;
      if (iteration == delivered_) ready_.notify_one();
    }
  }

  Slot& slot(std::int64_t iteration) { return slots_[static_cast<std::size_t>(iteration - delivered_)]; }

  BatchSource source_;
  PlanFunction plan_;
  PlannerOptions options_;

  mutable std::mutex mutex_;
  std::condition_variable room_;   // the pulling thread: the window has room
  std::condition_variable work_;   // workers: a pulled batch awaits planning, or the source ended
  std::condition_variable ready_;  // the consumer: the next iteration is done, or the source ended
  // Guarded by mutex_. slots_ holds iterations [delivered_, pulled_); those below next_to_plan_ are taken.
  std::deque<Slot> slots_;
  std::int64_t delivered_ = 0;
  std::int64_t pulled_ = 0;
  std::int64_t next_to_plan_ = 0;
  bool source_done_ = false;
  std::exception_ptr source_error_;
  bool stopping_ = false;
  PlannerWaits waits_;

  std::mutex join_mutex_;  // stop() from two threads joins once
  std::vector<std::jthread> threads_;
};

// The sluice plan of every iteration (IterationPlanner::plan), planned ahead of the trainer: what a synchronous loop
// of it gives, in order, whatever the thread count.
inline Planner<SimulatedIteration> plan_ahead(IterationPlanner planner, BatchSource source,
                                              PlannerOptions options = {}) {
  return Planner<SimulatedIteration>(
      std::move(source),
      [planner = std::move(planner)](std::int64_t, Span<const Sequence> batch) { return planner.plan(batch); },
      options);
}

}  // namespace sluice::plan
