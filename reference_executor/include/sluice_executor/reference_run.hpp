#pragma once
// The executor's reference: every sequence run alone (unpacked, one sequence per micro-batch) through all layers
// on one host device in float64, with the loss normalised as the executor normalises it (the sum of next-token
// cross-entropies over the iteration's targets) and the gradients summed over sequences. Packing, micro-batching,
// pipelining and data parallelism must not change the result beyond float64 rounding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice_executor/host/stage.hpp"
#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/model.hpp"

namespace sluice::executor {

// The model's initial parameters, every tensor in canonical order.
inline std::vector<std::vector<double>> initial_parameters(const ModelConfig& model) {
  std::vector<std::vector<double>> parameters;
  for (std::size_t t = 0; t < tensor_count(model); ++t) parameters.push_back(initial_values(model, t));
  return parameters;
}

// `parameters`: every tensor in canonical order, or empty for the initial values.
inline ModelResult run_unpacked(const ModelConfig& model, std::span<const SequenceTokens> sequences,
                                std::span<const std::vector<double>> parameters = {}) {
  require_valid(model);
  std::int64_t targets = 0;
  for (const SequenceTokens& sequence : sequences) {
    sluice::require(!sequence.tokens.empty(), "reference: sequence ", sequence.id, " has no tokens");
    for (const std::int32_t token : sequence.tokens)
      sluice::require(token >= 0 && token < model.vocab, "reference: sequence ", sequence.id, " has token ", token,
                      " outside [0, ", model.vocab, ")");
    targets += static_cast<std::int64_t>(sequence.tokens.size()) - 1;
  }
  sluice::require(targets >= 1, "reference: no sequence has a next-token target");
  host::Stage stage(model, {.first_layer = 0, .end_layer = model.layers, .first = true, .last = true}, {},
                    host::Collectives(nullptr), parameters);
  ModelResult result;
  for (const SequenceTokens& sequence : sequences) {
    const auto length = static_cast<std::int32_t>(sequence.tokens.size());
    PackedMicroBatch alone{{0, length}, sequence.tokens, {}, length};
    for (std::size_t t = 0; t < sequence.tokens.size(); ++t)
      alone.targets.push_back(t + 1 < sequence.tokens.size() ? sequence.tokens[t + 1] : -1);
    const CpSplit whole = cp_split(alone.cu_seqlens, 1, 1);
    const host::LaneBatch batch{&alone, &whole, 0, {}, {}};
    const std::vector<double> ids(sequence.tokens.begin(), sequence.tokens.end());
    host::StageActivations saved;
    result.loss += stage.forward(batch, ids, {}, 1.0 / static_cast<double>(targets), saved);
    stage.backward(batch, {}, {}, saved);
  }
  result.loss /= static_cast<double>(targets);
  result.gradients = stage.gradients();
  return result;
}

}  // namespace sluice::executor
