#pragma once
// JSON for strategy proposals: "sluice.proposal" version 2 and "sluice.sampled_proposal" version 2
// (docs/formats.md, docs/proposal.md), and the proposal options on their own. Version 2 writes the budget and
// replica steps in GPUs and pipelines (0.1), as the command line shows them; version 1 wrote tenths.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "sluice/io/core_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"
#include "sluice/proposal/propose.hpp"
#include "sluice/proposal/sampled.hpp"

namespace sluice::io {
SLUICE_IO_DOCUMENT(proposal::Proposal, "sluice.proposal", 2);
SLUICE_IO_DOCUMENT(proposal::SampledProposal, "sluice.sampled_proposal", 2);

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

// "name" repeats the strategy in its short spelling, for readers; it is not read back.
template <>
struct record<proposal::ProposedCandidate> {
  using T = proposal::ProposedCandidate;
  static constexpr std::string_view name = "proposal candidate";
  static constexpr auto fields = std::tuple{SLUICE_IO_MEMBERS(strategy, estimate, min_len, max_len, share),
                                            named_member("origin", &T::origin, proposal::origin_names)};
  static void write_derived(json& out, const T& candidate) { out["name"] = candidate.strategy.name(); }
};
SLUICE_IO_DOCS(proposal::ProposedCandidate, {"estimate", "The interval objective at max_len (seconds per iteration)."},
               {"share", "Estimated share of iterations whose longest sequence is in [min_len, max_len]."},
               {"origin", "'integer_dp', 'relaxed_rounding' or 'homogeneous'."});

template <>
struct record<proposal::SampledCandidate> {
  using T = proposal::SampledCandidate;
  static constexpr std::string_view name = "sampled proposal candidate";
  static constexpr auto fields =
      std::tuple{SLUICE_IO_MEMBERS(strategy, wins), named_member("source", &T::source, proposal::pool_source_names)};
  static void write_derived(json& out, const T& candidate) { out["name"] = candidate.strategy.name(); }
};
SLUICE_IO_DOCS(proposal::SampledCandidate, {"wins", "Choosing batches on which it has the lowest planned time."},
               {"source", "'proposal_dp', 'homogeneous' or 'neighbour'."});

SLUICE_IO_RECORD(proposal::LengthOptimum, "proposal by_length", SLUICE_IO_MEMBERS(max_len, integer),
                 SLUICE_IO_DEFAULTED(relaxed), SLUICE_IO_MEMBERS(share));
SLUICE_IO_DOCS(proposal::LengthOptimum, {"relaxed", "The relaxed optimum; empty unless the proposal is relaxed."});

template <>
struct record<proposal::Proposal> {
  using T = proposal::Proposal;
  static constexpr std::string_view name = "proposal";
  static constexpr auto fields =
      std::tuple{SLUICE_IO_MEMBERS(profile, options, sequences_per_iteration, integer_optimum),
                 SLUICE_IO_DEFAULTED(relaxed_optimum), SLUICE_IO_MEMBERS(considered, candidates, by_length)};
  static void check(const T& value) { sluice::require(!value.candidates.empty(), name, ": has no candidates"); }
};
SLUICE_IO_DOCS(proposal::Proposal, {"profile", "The profile's name."},
               {"considered", "Distinct strategies before the max_candidates cap."});

// The paper's proposal is nested as a sluice.proposal document's fields.
template <>
struct record<proposal::SampledProposal> {
  using T = proposal::SampledProposal;
  static constexpr std::string_view name = "sampled proposal";
  static constexpr auto fields =
      std::tuple{SLUICE_IO_MEMBERS(paper, choosing_batches, held_out_batches, seed, trials, candidates, choosing_mean,
                                   held_out_mean, paper_choosing_mean, paper_held_out_mean, best_homogeneous,
                                   best_homogeneous_held_out_mean, pool_size, plans, rounds)};
  static void check(const T& value) { sluice::require(!value.candidates.empty(), name, ": has no candidates"); }
};
SLUICE_IO_DOCS(proposal::SampledProposal, {"paper", "The DP's own proposal."});

}  // namespace sluice::io

namespace nlohmann {

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

}  // namespace nlohmann
