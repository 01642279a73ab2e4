#pragma once
// Candidate strategies as `plan --strategies` and `trace --strategies` take them: a sluice.candidates,
// sluice.proposal or sluice.sampled_proposal file, or strategies written like '1*tp16pp1+6*tp8pp1,4*tp16pp1'.
// A proposal carries the context it was proposed for (its max_len), which becomes the default --context.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/io/proposal_json.hpp"

namespace sluice::cli {

struct Candidates {
  std::vector<Strategy> strategies;
  std::optional<std::int64_t> max_len;  // a proposal's context
};

inline Candidates read_candidates(const std::string& text) {
  std::error_code error;
  if (std::filesystem::is_regular_file(text, error)) {
    const io::json document = io::read_json_file(text);
    if (document.is_object() && document.contains("format") &&
        document.at("format") == io::document_traits<proposal::Proposal>::format) {
      const auto proposed = io::from_document<proposal::Proposal>(document, text);
      return {proposed.strategies(), proposed.options.max_len};
    }
    if (document.is_object() && document.contains("format") &&
        document.at("format") == io::document_traits<proposal::SampledProposal>::format) {
      const auto proposed = io::from_document<proposal::SampledProposal>(document, text);
      return {proposed.strategies(), proposed.paper.options.max_len};
    }
    return {io::from_document<assign::CandidateSet>(document, text).strategies, std::nullopt};
  }
  std::vector<Strategy> strategies;
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    strategies.push_back(Strategy::parse(rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return {std::move(strategies), std::nullopt};
}

}  // namespace sluice::cli
