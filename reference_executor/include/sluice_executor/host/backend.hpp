#pragma once
// The host backend: every lane's stage in float64 (stage.hpp), its static slots and saved activations, run by the
// interpreter with a transport that moves the slots (local.hpp: threads of one process; mpi.hpp: one process per
// rank). It is the executor's ground truth: a plan run here must give the loss and gradients of running every
// sequence unpacked on one device (reference_run.hpp), up to float64 rounding.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice_executor/host/exchange.hpp"
#include "sluice_executor/host/stage.hpp"
#include "sluice_executor/interpreter.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/shards.hpp"

namespace sluice::executor::host {

// The stages, static slots and saved activations of the ranks it runs, on the host.
class Backend {
public:
  using Stamp = double;

  // A rank's parameter shards (by canonical tensor, empty outside the tensors it holds), as a trainer's pull leaves
  // them; without one, every rank starts from the model's initial values.
  using ParameterShards = std::function<std::vector<std::vector<double>>(int rank)>;

  // Runs the global ranks in `ranks`, or every rank that runs when it is empty (a process of a multi-process run
  // holds only its own); the interpreter must step only those. `exchange` moves their data inside passes.
  Backend(const Job& job, const JobLayout& layout, Exchange& exchange, std::span<const int> ranks = {},
          Mutation mutation = Mutation::none, const ParameterShards& parameters = {})
      : job_(job), layout_(layout), origin_(Clock::now()), ranks_(layout.ranks.size()), mutation_(mutation) {
    for (std::size_t r = 0; r < layout.ranks.size(); ++r) {
      const RankInfo& info = layout.ranks[r];
      if (!info.runs || (!ranks.empty() && std::ranges::find(ranks, static_cast<int>(r)) == ranks.end())) continue;
      const PipelineJob& pipeline = job.pipelines[static_cast<std::size_t>(info.pipeline)];
      const auto elements = static_cast<std::size_t>(layout.slot_elements[static_cast<std::size_t>(info.pipeline)]);
      const LaneSpec spec{info.first_layer, info.end_layer, info.first,     info.last,
                          info.tp,          info.tp_rank,   info.recompute, mutation};
      const std::vector<std::vector<double>> shards =
          parameters ? parameters(static_cast<int>(r)) : std::vector<std::vector<double>>();
      ranks_[r].emplace(RankState{Stage(job.model, spec, group_of(layout, info.tp_group, static_cast<int>(r)),
                                        Collectives(&exchange), shards, Stage::Given::shards),
                                  std::vector<std::vector<double>>(static_cast<std::size_t>(pipeline.plan.buffer_slots),
                                                                   std::vector<double>(elements)),
                                  std::vector<StageActivations>(pipeline.micro_batches.size()),
                                  std::vector<double>(pipeline.micro_batches.size(), 0.0), 0, 0});
    }
  }

  // The CP rank's token ids (Mutation::cp_chunk_on_wrong_rank: as many as it has of the next CP rank's first).
  void load_input(int rank, int micro_batch, int slot) {
    const LaneBatch batch = lane_batch(rank, micro_batch);
    std::vector<double>& ids = data(rank, slot);
    const auto fill = [&](const CpShard& shard, std::size_t count) {
      for (std::size_t i = 0; i < count; ++i) ids[i] = batch.packed->tokens[static_cast<std::size_t>(shard.rows[i])];
    };
    const CpShard& own = batch.shard();
    fill(own, own.rows.size());
    if (mutation_ != Mutation::cp_chunk_on_wrong_rank) return;
    const CpShard& next = batch.split->shards[static_cast<std::size_t>((batch.cp_rank + 1) % batch.split->degree())];
    fill(next, std::min(own.rows.size(), next.rows.size()));
  }

  void forward(int rank, int micro_batch, int input_slot, int output_slot) {
    RankState& state = at(rank);
    const auto i = static_cast<std::size_t>(micro_batch);
    const double loss =
        state.stage.forward(lane_batch(rank, micro_batch), data(rank, input_slot),
                            output_slot >= 0 ? std::span<double>(data(rank, output_slot)) : std::span<double>(),
                            1.0 / static_cast<double>(layout_.total_targets), state.saved[i]);
    if (layout_.ranks[static_cast<std::size_t>(rank)].last) state.loss_sums[i] = loss;
    state.held += state.saved[i].values();
    state.peak = std::max(state.peak, state.held);
  }

  void backward(int rank, int micro_batch, int grad_slot, int output_slot) {
    RankState& state = at(rank);
    StageActivations& saved = state.saved[static_cast<std::size_t>(micro_batch)];
    const std::size_t transient = state.stage.backward(
        lane_batch(rank, micro_batch),
        grad_slot >= 0 ? std::span<const double>(data(rank, grad_slot)) : std::span<const double>(),
        output_slot >= 0 ? std::span<double>(data(rank, output_slot)) : std::span<double>(), saved);
    state.peak = std::max(state.peak, state.held + transient);
    state.held -= saved.values();
    saved = {};
  }

  [[nodiscard]] Stamp stamp(int /*rank*/) const {
    return std::chrono::duration<double>(Clock::now() - origin_).count();
  }
  [[nodiscard]] double seconds(Stamp stamp) const { return stamp; }

  [[nodiscard]] std::vector<double>& data(int rank, int slot) { return at(rank).slots[static_cast<std::size_t>(slot)]; }

  // The values a rank sends of a micro-batch's activation or gradient: its lane's rows × hidden.
  [[nodiscard]] std::size_t payload(int rank, int micro_batch) const {
    return static_cast<std::size_t>(layout_.sequence_rows(rank, micro_batch).size() * job_.model.hidden);
  }

  // The loss and gradients of the whole run (combine); every rank must be held.
  [[nodiscard]] ModelResult result(bool gradients = true) const {
    return combine(
        job_, layout_, [this](int rank) { return loss_sums(rank); },
        [this](int rank, std::size_t tensor) -> std::span<const double> { return stage(rank).gradients()[tensor]; },
        gradients);
  }

  // A held rank's stage, with its gradients.
  [[nodiscard]] const Stage& stage(int rank) const { return at(rank).stage; }
  // A held rank's sums of the cross-entropies of its rows, per micro-batch; none off the last stage.
  [[nodiscard]] std::span<const double> loss_sums(int rank) const {
    if (!layout_.ranks[static_cast<std::size_t>(rank)].last) return {};
    return at(rank).loss_sums;
  }
  // The most bytes of saved activations the rank held at once (a recomputed layer's included).
  [[nodiscard]] double activation_peak_bytes(int rank) const {
    return static_cast<double>(at(rank).peak * sizeof(double));
  }

private:
  using Clock = std::chrono::steady_clock;
  struct RankState {
    Stage stage;
    std::vector<std::vector<double>> slots;
    std::vector<StageActivations> saved;  // per micro-batch, from its forward to its backward
    std::vector<double> loss_sums;        // per micro-batch
    std::size_t held = 0;                 // activation values saved now
    std::size_t peak = 0;
  };

  RankState& at(int rank) { return const_cast<RankState&>(std::as_const(*this).at(rank)); }
  [[nodiscard]] const RankState& at(int rank) const {
    const std::optional<RankState>& state = ranks_[static_cast<std::size_t>(rank)];
    sluice::require(state.has_value(), "host backend: rank ", rank, " runs in another process");
    return *state;
  }

  [[nodiscard]] LaneBatch lane_batch(int rank, int micro_batch) const {
    const LaneWork& work = layout_.lane_work(rank, micro_batch);
    return {&layout_.packed(rank, micro_batch), &layout_.cp_splits[static_cast<std::size_t>(work.split)], work.cp_rank,
            group_of(layout_, work.ulysses_group, rank), group_of(layout_, work.ring_group, rank)};
  }

  const Job& job_;
  const JobLayout& layout_;
  Clock::time_point origin_;
  std::vector<std::optional<RankState>> ranks_;  // by global rank; empty for a rank another process runs
  Mutation mutation_;
};

}  // namespace sluice::executor::host
