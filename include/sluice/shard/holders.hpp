#pragma once
// The placement of a group of tensors that is not the layers' TP-split weights. shard:: plans a stack of identical
// layers whose tensors split over TP, but a model also has tensors only one stage holds (the embedding on a
// pipeline's first stage, the LM head on its last) and tensors every TP rank holds whole (the norms). Each such
// group moves as its own shard:: problem on a placement derived from the strategy's: a first- or last-stage
// group is one layer on that stage of every pipeline; a replicated group gives every lane (CP rank × TP rank) of
// a stage its own replica of TP 1, so the push sums the lanes' partial gradients as it sums the CP ranks'.
#include <cstddef>
#include <utility>
#include <vector>

#include "sluice/core/strategy.hpp"
#include "sluice/shard/placement.hpp"

namespace sluice::shard {

enum class HeldBy : unsigned char { every_stage, first_stage, last_stage };

inline Placement holder_placement(const Placement& placement, HeldBy held_by, bool replicated) {
  const bool per_layer = held_by == HeldBy::every_stage;
  if (per_layer && !replicated) return placement;
  Placement result{placement.gpus, per_layer ? placement.layers : 1, {}};
  for (const PipelinePlacement& pipeline : placement.pipelines) {
    std::vector<Stage> stages;
    if (per_layer) {
      stages = pipeline.stages;
    } else {
      stages.push_back(held_by == HeldBy::first_stage ? pipeline.stages.front() : pipeline.stages.back());
      stages.front().layer_begin = 0;
      stages.front().layer_end = 1;
    }
    if (!replicated) {
      Degrees one_stage = pipeline.scheme.degrees();
      one_stage.pp = 1;
      result.pipelines.push_back({Scheme(one_stage), std::move(stages)});
      continue;
    }
    const Scheme lane(1, static_cast<int>(stages.size()));
    for (std::size_t l = 0; l < stages.front().ranks.size(); ++l) {
      PipelinePlacement replica{lane, {}};
      for (const Stage& stage : stages)
        replica.stages.push_back({stage.layer_begin, stage.layer_end, {stage.ranks[l]}});
      result.pipelines.push_back(std::move(replica));
    }
  }
  return result;
}

}  // namespace sluice::shard
