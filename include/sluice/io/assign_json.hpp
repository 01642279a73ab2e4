#pragma once
// JSON for the sequence-assignment types: candidate sets ("sluice.candidates") and iteration plans
// ("sluice.iteration_plan"), both version 1.
#include <string_view>
#include <tuple>

#include "sluice/assign/plan.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"

namespace sluice::io {
template <>
struct document_traits<assign::CandidateSet> {
  static constexpr std::string_view format = "sluice.candidates";
  static constexpr int version = 1;
};
template <>
struct document_traits<assign::IterationPlan> {
  static constexpr std::string_view format = "sluice.iteration_plan";
  static constexpr int version = 1;
};

template <>
struct record<assign::MicroBatch> {
  using T = assign::MicroBatch;
  static constexpr std::string_view name = "micro-batch";
  static constexpr auto fields =
      std::tuple{member("sequences", &T::sequence_ids), member("tokens", &T::tokens), member("seconds", &T::seconds)};
};

template <>
struct record<assign::Packing> {
  using T = assign::Packing;
  static constexpr std::string_view name = "packing";
  static constexpr auto fields =
      std::tuple{member("micro_batches", &T::micro_batches), member("estimate", &T::estimate)};
};

template <>
struct record<assign::Dispatch> {
  using T = assign::Dispatch;
  static constexpr std::string_view name = "dispatch";
  static constexpr auto fields =
      std::tuple{member("pipeline_of", &T::pipeline_of), member("pipeline_bounds", &T::pipeline_bounds),
                 member("objective", &T::objective), member("lower_bound", &T::lower_bound),
                 member("v_step", &T::v_step, Presence::defaulted)};
};

// The longest-first order and the V step are a planner's choice, not a dispatch file's.
template <>
struct record<assign::DispatchOptions> {
  using T = assign::DispatchOptions;
  static constexpr std::string_view name = "dispatch options";
  static constexpr auto fields = std::tuple{
      member("trials", &T::trials, Presence::defaulted), member("threads", &T::threads, Presence::defaulted),
      member("seed", &T::seed, Presence::defaulted), member("local_search", &T::local_search, Presence::defaulted)};
};

template <>
struct record<assign::CandidateSet> {
  static constexpr std::string_view name = "candidates";
  static constexpr auto fields = std::tuple{member("strategies", &assign::CandidateSet::strategies)};
};

// The scheme's own fields, with the pipeline's beside them.
template <>
struct record<assign::PipelinePlan> {
  using T = assign::PipelinePlan;
  static constexpr std::string_view name = "pipeline plan";
  static constexpr auto fields =
      std::tuple{member("index", &T::index), inline_member(&T::scheme), member("max_len", &T::max_len),
                 member("micro_batches", &T::micro_batches), member("estimate", &T::estimate)};
};

template <>
struct record<assign::CandidateEstimate> {
  using T = assign::CandidateEstimate;
  static constexpr std::string_view name = "candidate";
  static constexpr auto fields =
      std::tuple{member("strategy", &T::strategy), member("estimate", &T::estimate, Presence::defaulted),
                 member("overhead", &T::overhead, Presence::defaulted)};
};

template <>
struct record<assign::IterationPlan> {
  using T = assign::IterationPlan;
  static constexpr std::string_view name = "plan";
  static constexpr auto fields = std::tuple{member("strategy", &T::strategy),
                                            member("pipelines", &T::pipelines),
                                            member("estimate", &T::estimate),
                                            member("dispatch_objective", &T::dispatch_objective),
                                            member("dispatch_lower_bound", &T::dispatch_lower_bound),
                                            member("chosen", &T::chosen),
                                            member("candidates", &T::candidates),
                                            member("overhead", &T::overhead, Presence::defaulted)};
};

}  // namespace sluice::io
