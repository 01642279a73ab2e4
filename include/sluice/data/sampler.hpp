#pragma once
// Token-budget batches over a shuffled dataset, epoch after epoch, as a trainer's data loader draws them.
#include <cstdint>
#include <numeric>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/span.hpp"
#include "sluice/data/dataset.hpp"

namespace sluice::data {

struct SamplerOptions {
  std::int64_t tokens_per_batch = 0;  // budget: a batch's lengths sum to at most this (must be >= 1)
  std::uint64_t seed = 0;
  bool drop_last = false;  // skip the smaller batch left at the end of each epoch
  friend bool operator==(const SamplerOptions&, const SamplerOptions&) = default;
};

struct Batch {
  std::int64_t epoch = 0;
  std::int64_t index = 0;           // position within the epoch
  std::vector<Sequence> sequences;  // id = index in the dataset
  std::int64_t tokens = 0;
  friend bool operator==(const Batch&, const Batch&) = default;
};

// Epoch e visits every sequence once, in the order of a Fisher–Yates shuffle by Rng::stream(seed, e),
// so an epoch's batches depend only on (seed, e). Batches are filled greedily in that order: a sequence
// that would take a batch past the budget starts the next one, and a sequence longer than the budget
// forms a batch alone. Batches never span epochs.
// The sampler copies the lengths, so it does not depend on the dataset's lifetime.
class BatchSampler {
public:
  BatchSampler(const LengthDataset& dataset, SamplerOptions options)
      : lengths_(dataset.lengths().begin(), dataset.lengths().end()), order_(lengths_.size()), options_(options) {
    sluice::require(options.tokens_per_batch >= 1, dataset.source(), ": sampler: tokens_per_batch must be >= 1, got ",
                    options.tokens_per_batch);
    // Otherwise every epoch would be one short batch, and drop_last would skip them all.
    sluice::require(!options.drop_last || dataset.tokens() >= options.tokens_per_batch, dataset.source(),
                    ": sampler: drop_last with tokens_per_batch ", options.tokens_per_batch,
                    " would drop every batch: the dataset holds only ", dataset.tokens(), " tokens");
    start_epoch(0);
  }

  Batch next() {
    while (true) {
      if (position_ == order_.size()) start_epoch(epoch_ + 1);
      Batch batch{.epoch = epoch_, .index = batch_index_, .sequences = {}, .tokens = 0};
      while (position_ < order_.size()) {
        const std::int64_t id = order_[position_];
        const std::int64_t length = lengths_[static_cast<std::size_t>(id)];
        if (!batch.sequences.empty() && batch.tokens + length > options_.tokens_per_batch) break;
        batch.sequences.emplace_back(id, length);
        batch.tokens += length;
        ++position_;
      }
      // The last batch of an epoch is the remainder unless it filled the budget exactly (or holds one
      // oversize sequence).
      const bool remainder = position_ == order_.size() && batch.tokens < options_.tokens_per_batch;
      if (options_.drop_last && remainder) continue;
      ++batch_index_;
      return batch;
    }
  }

private:
  void start_epoch(std::int64_t epoch) {
    epoch_ = epoch;
    batch_index_ = 0;
    position_ = 0;
    std::iota(order_.begin(), order_.end(), std::int64_t{0});
    Rng::stream(options_.seed, static_cast<std::uint64_t>(epoch)).shuffle(Span(order_));
  }

  std::vector<std::int64_t> lengths_;
  std::vector<std::int64_t> order_;
  SamplerOptions options_;
  std::int64_t epoch_ = 0;
  std::int64_t batch_index_ = 0;
  std::size_t position_ = 0;
};

}  // namespace sluice::data
