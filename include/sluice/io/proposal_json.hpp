#pragma once
// JSON for strategy proposals: "sluice.proposal" version 2 and "sluice.sampled_proposal" version 2
// (docs/formats.md, docs/proposal.md), and the proposal options on their own. Version 2 writes the budget and
// replica steps in GPUs and pipelines (0.1), as the command line shows them; version 1 wrote tenths.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/proposal/propose.hpp"
#include "sluice/proposal/sampled.hpp"

namespace sluice::io {
template <>
struct document_traits<proposal::Proposal> {
  static constexpr std::string_view format = "sluice.proposal";
  static constexpr int version = 2;
};
template <>
struct document_traits<proposal::SampledProposal> {
  static constexpr std::string_view format = "sluice.sampled_proposal";
  static constexpr int version = 2;
};

namespace detail {
// Optional values are written as null and read from null or absence.
template <class T>
json optional_value(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}
template <class T>
std::optional<T> optional_field(const json& object, std::string_view key, std::string_view where) {
  return field_or<std::optional<T>>(object, key, std::nullopt, where);
}
// A step the library counts in tenths (of a GPU, of a pipeline), written as the number of whole units.
inline json tenths_value(std::int64_t tenths) { return static_cast<double>(tenths) / 10; }
inline std::int64_t tenths_field(const json& object, std::string_view key, std::int64_t fallback,
                                 std::string_view where) {
  const double units = field_or(object, key, static_cast<double>(fallback) / 10, where);
  const double tenths = std::round(units * 10);
  sluice::require(std::isfinite(units) && std::abs(units * 10 - tenths) < 1e-6 && tenths >= 1 && tenths <= 0x1p40,
                  where, ": ", key, " must be a positive multiple of 0.1, got ", units);
  return static_cast<std::int64_t>(tenths);
}
}  // namespace detail
}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::proposal::Origin> {
  static constexpr std::string_view names[] = {"integer_dp", "relaxed_rounding", "homogeneous"};
  static void to_json(json& out, sluice::proposal::Origin origin) { out = names[static_cast<std::size_t>(origin)]; }
  static sluice::proposal::Origin from_json(const json& in) {
    const auto text = sluice::io::as<std::string>(in, "proposal candidate: origin");
    for (std::size_t i = 0; i < std::size(names); ++i)
      if (text == names[i]) return static_cast<sluice::proposal::Origin>(i);
    sluice::fail("proposal candidate: unknown origin '", text,
                 "' (expected integer_dp, relaxed_rounding or homogeneous)");
  }
};

template <>
struct adl_serializer<sluice::proposal::ProposeOptions> {
  static void to_json(json& out, const sluice::proposal::ProposeOptions& options) {
    using sluice::io::detail::optional_value;
    using sluice::io::detail::tenths_value;
    out = {{"gpus", optional_value(options.gpus)},
           {"max_len", optional_value(options.max_len)},
           {"length_step", options.length_step},
           {"gpu_step", tenths_value(options.gpu_step)},
           {"relaxed", options.relaxed},
           {"replica_step", tenths_value(options.replica_step)},
           {"tokens_per_iteration", options.tokens_per_iteration},
           {"sequence_constant", options.sequence_constant},
           {"fill_term", options.fill_term},
           {"tp_within_node", options.tp_within_node},
           {"max_candidates", options.max_candidates}};
  }
  // Absent fields take their defaults; propose() validates the values.
  static sluice::proposal::ProposeOptions from_json(const json& in) {
    using sluice::io::field_or;
    using sluice::io::detail::optional_field;
    using sluice::io::detail::tenths_field;
    constexpr std::string_view where = "proposal options";
    const sluice::proposal::ProposeOptions defaults;
    return {.gpus = optional_field<std::int64_t>(in, "gpus", where),
            .max_len = optional_field<std::int64_t>(in, "max_len", where),
            .length_step = field_or(in, "length_step", defaults.length_step, where),
            .gpu_step = tenths_field(in, "gpu_step", defaults.gpu_step, where),
            .relaxed = field_or(in, "relaxed", defaults.relaxed, where),
            .replica_step = tenths_field(in, "replica_step", defaults.replica_step, where),
            .tokens_per_iteration = field_or(in, "tokens_per_iteration", defaults.tokens_per_iteration, where),
            .sequence_constant = field_or(in, "sequence_constant", defaults.sequence_constant, where),
            .fill_term = field_or(in, "fill_term", defaults.fill_term, where),
            .tp_within_node = field_or(in, "tp_within_node", defaults.tp_within_node, where),
            .max_candidates = field_or(in, "max_candidates", defaults.max_candidates, where)};
  }
};

template <>
struct adl_serializer<sluice::proposal::ProposedCandidate> {
  // "name" repeats the strategy in its short spelling, for readers; it is not read back.
  static void to_json(json& out, const sluice::proposal::ProposedCandidate& candidate) {
    out = {{"strategy", candidate.strategy}, {"name", candidate.strategy.name()}, {"estimate", candidate.estimate},
           {"min_len", candidate.min_len},   {"max_len", candidate.max_len},      {"share", candidate.share},
           {"origin", candidate.origin}};
  }
  static sluice::proposal::ProposedCandidate from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "proposal candidate";
    return {field<sluice::Strategy>(in, "strategy", where),
            field<double>(in, "estimate", where),
            field<std::int64_t>(in, "min_len", where),
            field<std::int64_t>(in, "max_len", where),
            field<double>(in, "share", where),
            field<sluice::proposal::Origin>(in, "origin", where)};
  }
};

template <>
struct adl_serializer<sluice::proposal::LengthOptimum> {
  static void to_json(json& out, const sluice::proposal::LengthOptimum& point) {
    out = {{"max_len", point.max_len},
           {"integer", point.integer},
           {"relaxed", sluice::io::detail::optional_value(point.relaxed)},
           {"share", point.share}};
  }
  static sluice::proposal::LengthOptimum from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "proposal by_length";
    return {field<std::int64_t>(in, "max_len", where), field<double>(in, "integer", where),
            sluice::io::detail::optional_field<double>(in, "relaxed", where), field<double>(in, "share", where)};
  }
};

template <>
struct adl_serializer<sluice::proposal::Proposal> {
  static void to_json(json& out, const sluice::proposal::Proposal& proposal) {
    out = {{"profile", proposal.profile},
           {"options", proposal.options},
           {"sequences_per_iteration", proposal.sequences_per_iteration},
           {"integer_optimum", proposal.integer_optimum},
           {"relaxed_optimum", sluice::io::detail::optional_value(proposal.relaxed_optimum)},
           {"considered", proposal.considered},
           {"candidates", proposal.candidates},
           {"by_length", proposal.by_length}};
  }
  static sluice::proposal::Proposal from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "proposal";
    sluice::proposal::Proposal proposal;
    proposal.profile = field<std::string>(in, "profile", where);
    proposal.options = field<sluice::proposal::ProposeOptions>(in, "options", where);
    proposal.sequences_per_iteration = field<double>(in, "sequences_per_iteration", where);
    proposal.integer_optimum = field<double>(in, "integer_optimum", where);
    proposal.relaxed_optimum = sluice::io::detail::optional_field<double>(in, "relaxed_optimum", where);
    proposal.considered = field<std::int64_t>(in, "considered", where);
    proposal.candidates = field<std::vector<sluice::proposal::ProposedCandidate>>(in, "candidates", where);
    proposal.by_length = field<std::vector<sluice::proposal::LengthOptimum>>(in, "by_length", where);
    sluice::require(!proposal.candidates.empty(), where, ": has no candidates");
    return proposal;
  }
};

template <>
struct adl_serializer<sluice::proposal::PoolSource> {
  static constexpr std::string_view names[] = {"proposal_dp", "homogeneous", "neighbour"};
  static void to_json(json& out, sluice::proposal::PoolSource source) { out = names[static_cast<std::size_t>(source)]; }
  static sluice::proposal::PoolSource from_json(const json& in) {
    const auto text = sluice::io::as<std::string>(in, "sampled proposal candidate: source");
    for (std::size_t i = 0; i < std::size(names); ++i)
      if (text == names[i]) return static_cast<sluice::proposal::PoolSource>(i);
    sluice::fail("sampled proposal candidate: unknown source '", text,
                 "' (expected proposal_dp, homogeneous or neighbour)");
  }
};

template <>
struct adl_serializer<sluice::proposal::SampledCandidate> {
  // "name" is for readers; it is not read back.
  static void to_json(json& out, const sluice::proposal::SampledCandidate& candidate) {
    out = {{"strategy", candidate.strategy},
           {"name", candidate.strategy.name()},
           {"wins", candidate.wins},
           {"source", candidate.source}};
  }
  static sluice::proposal::SampledCandidate from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "sampled proposal candidate";
    return {field<sluice::Strategy>(in, "strategy", where), field<std::int64_t>(in, "wins", where),
            field<sluice::proposal::PoolSource>(in, "source", where)};
  }
};

// The paper's proposal is nested as a sluice.proposal document's fields.
template <>
struct adl_serializer<sluice::proposal::SampledProposal> {
  static void to_json(json& out, const sluice::proposal::SampledProposal& result) {
    out = {{"paper", result.paper},
           {"choosing_batches", result.choosing_batches},
           {"held_out_batches", result.held_out_batches},
           {"seed", result.seed},
           {"trials", result.trials},
           {"candidates", result.candidates},
           {"choosing_mean", result.choosing_mean},
           {"held_out_mean", result.held_out_mean},
           {"paper_choosing_mean", result.paper_choosing_mean},
           {"paper_held_out_mean", result.paper_held_out_mean},
           {"best_homogeneous", result.best_homogeneous},
           {"best_homogeneous_held_out_mean", result.best_homogeneous_held_out_mean},
           {"pool_size", result.pool_size},
           {"plans", result.plans},
           {"rounds", result.rounds}};
  }
  static sluice::proposal::SampledProposal from_json(const json& in) {
    using sluice::io::field;
    constexpr std::string_view where = "sampled proposal";
    sluice::proposal::SampledProposal result;
    result.paper = field<sluice::proposal::Proposal>(in, "paper", where);
    result.choosing_batches = field<int>(in, "choosing_batches", where);
    result.held_out_batches = field<int>(in, "held_out_batches", where);
    result.seed = field<std::uint64_t>(in, "seed", where);
    result.trials = field<int>(in, "trials", where);
    result.candidates = field<std::vector<sluice::proposal::SampledCandidate>>(in, "candidates", where);
    result.choosing_mean = field<double>(in, "choosing_mean", where);
    result.held_out_mean = field<double>(in, "held_out_mean", where);
    result.paper_choosing_mean = field<double>(in, "paper_choosing_mean", where);
    result.paper_held_out_mean = field<double>(in, "paper_held_out_mean", where);
    result.best_homogeneous = field<std::string>(in, "best_homogeneous", where);
    result.best_homogeneous_held_out_mean = field<double>(in, "best_homogeneous_held_out_mean", where);
    result.pool_size = field<std::int64_t>(in, "pool_size", where);
    result.plans = field<std::int64_t>(in, "plans", where);
    result.rounds = field<std::int64_t>(in, "rounds", where);
    sluice::require(!result.candidates.empty(), where, ": has no candidates");
    return result;
  }
};

}  // namespace nlohmann
