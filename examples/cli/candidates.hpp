#pragma once
// Candidate strategies as `plan --strategies` and `trace --strategies` take them: a sluice.candidates,
// sluice.proposal or sluice.sampled_proposal file, or strategies written like '1*tp16pp1+6*tp8pp1,4*tp16pp1'.
#include <filesystem>
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

inline std::vector<Strategy> read_candidates(const std::string& text) {
  std::error_code error;
  if (std::filesystem::is_regular_file(text, error)) {
    const io::json document = io::read_json_file(text);
    if (document.is_object() && document.contains("format") &&
        document.at("format") == io::document_traits<proposal::Proposal>::format)
      return io::from_document<proposal::Proposal>(document, text).strategies();
    if (document.is_object() && document.contains("format") &&
        document.at("format") == io::document_traits<proposal::SampledProposal>::format)
      return io::from_document<proposal::SampledProposal>(document, text).strategies();
    return io::from_document<assign::CandidateSet>(document, text).strategies;
  }
  std::vector<Strategy> strategies;
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    strategies.push_back(Strategy::parse(rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return strategies;
}

}  // namespace sluice::cli
