// The reference executor on the host backend: every planner's plans (Hydraulis, the sluice plan, DynaPipe,
// Megatron-LM-style packing, FlexSP's and dynamic CP's flex domains) with TP, CP of every kind and recompute, executed
// in float64 on a thread per rank, give the loss and every parameter gradient of running each sequence unpacked on
// one device; recompute holds less; injected defects in TP, CP and recompute are caught; the host model against
// finite differences; plans broken by hand rejected with clear errors; bad configurations, schemes the model cannot
// run and placements the plan forbids rejected naming them; the launchers' environments read into a rank, world
// size and local rank.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "plan_fixtures.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice/shard/ranks.hpp"
#include "sluice_executor/host/local.hpp"
#include "sluice_executor/job.hpp"
#include "sluice_executor/launch.hpp"
#include "sluice_executor/model.hpp"
#include "sluice_executor/profiler.hpp"
#include "sluice_executor/reference_run.hpp"
#include "sluice_executor/trace.hpp"

using namespace sluice;
using namespace sluice::executor;
using schedule::InstructionKind;
using schedule::ScheduleKind;

namespace {

std::size_t micro_batch_count(const Job& job) {
  std::size_t count = 0;
  for (const PipelineJob& pipeline : job.pipelines) count += pipeline.micro_batches.size();
  return count;
}

ModelConfig tiny_model() {
  ModelConfig model;
  model.layers = 2;
  model.hidden = 8;
  model.heads = 2;
  model.ffn = 6;
  model.vocab = 11;
  model.seed = 3;
  return model;
}

std::vector<Sequence> tiny_batch() { return {Sequence(0, 5), Sequence(1, 1), Sequence(2, 7), Sequence(3, 4)}; }

// A two-stage 1F1B pipeline, one sequence per micro-batch, for editing by hand.
Job two_stage_job() {
  const std::vector<Sequence> batch = tiny_batch();
  return fixtures::single_pipeline_job(tiny_model(), batch, 5, 2, ScheduleKind::one_f_one_b);
}

std::vector<schedule::Instruction>& rank_list(Job& job, int rank) {
  return job.pipelines.front().plan.ranks[static_cast<std::size_t>(rank)];
}

std::ptrdiff_t find(const std::vector<schedule::Instruction>& list, InstructionKind kind, int micro_batch) {
  const auto it = std::find_if(list.begin(), list.end(), [&](const schedule::Instruction& in) {
    return in.kind == kind && in.micro_batch == micro_batch;
  });
  REQUIRE(it != list.end());
  return it - list.begin();
}

// The host backend with every pass's beginning and end numbered in one sequence with the stamps, as serialized
// ranks' kernels fall on one stream: a stamp is the next number.
class SequencedBackend {
public:
  using Stamp = int;
  struct Pass {
    int rank = 0;
    int micro_batch = 0;
    int begin = 0;
    int end = 0;
  };

  explicit SequencedBackend(host::Backend& backend) : backend_(backend) {}
  void load_input(int rank, int micro_batch, int slot) { backend_.load_input(rank, micro_batch, slot); }
  void forward(int rank, int micro_batch, int input, int output) {
    pass(rank, micro_batch, [&] { backend_.forward(rank, micro_batch, input, output); });
  }
  void backward(int rank, int micro_batch, int grad, int output) {
    pass(rank, micro_batch, [&] { backend_.backward(rank, micro_batch, grad, output); });
  }
  [[nodiscard]] Stamp stamp(int /*rank*/) { return next_++; }
  [[nodiscard]] double seconds(Stamp stamp) const { return stamp; }
  [[nodiscard]] const std::vector<Pass>& passes() const { return passes_; }

private:
  template <class Work>
  void pass(int rank, int micro_batch, Work work) {
    const int begin = next_++;
    work();
    const int end = next_++;
    const std::lock_guard lock(mutex_);
    passes_.push_back({rank, micro_batch, begin, end});
  }

  host::Backend& backend_;
  std::atomic<int> next_{0};
  std::mutex mutex_;
  std::vector<Pass> passes_;
};

// The host's local transport with the turns of the serialized CUDA run.
struct TurnTakingTransport : host::LocalTransport {
  TurnTakingTransport(host::Backend& backend, host::Mailboxes& mailboxes)
      : host::LocalTransport(backend, mailboxes), turns(60) {}
  StageTurns::Turn pass_turn(int key) { return turns.take(key); }
  StageTurns turns;
};

}  // namespace

TEST_CASE("executor host: serialized passes take turns, so that no other stage's work falls between their stamps") {
  Rng rng(2027);
  int crowded = 0;  // passes that another pass of their own stage or group overlapped: lanes meet inside passes
  for (int k = 0; k < 24; ++k) {
    CAPTURE(k);
    const Job job = fixtures::seeded_job(k, rng).first;
    const JobLayout job_layout = layout(job);
    host::Mailboxes mailboxes(60);
    host::LocalExchange exchange(mailboxes);
    host::Backend backend(job, job_layout, exchange);
    SequencedBackend sequenced(backend);
    TurnTakingTransport transport(backend, mailboxes);
    auto interpreter = make_interpreter(job, job_layout, sequenced, transport);
    step_on_threads(
        interpreter, job_layout.rank_count(),
        [&](int rank) { return job_layout.ranks[static_cast<std::size_t>(rank)].runs; },
        [&] {
          mailboxes.stop();
          transport.turns.stop();
        },
        [] {});
    CHECK(backend.result(false).loss == host::run_local(job).result.loss);
    // Each pass's key, as the interpreter gives it: its compute group's, else its stage's first lane.
    std::map<std::pair<int, int>, int> group_key;
    for (std::size_t g = 0; g < job_layout.compute_groups.size(); ++g)
      for (const schedule::ComputeGroup::Member& member : job_layout.compute_groups[g].members)
        group_key[{member.rank, member.micro_batch}] = -1 - static_cast<int>(g);
    const auto key = [&](int rank, int micro_batch) {
      if (const auto it = group_key.find({rank, micro_batch}); it != group_key.end()) return it->second;
      const RankInfo& info = job_layout.ranks[static_cast<std::size_t>(rank)];
      return job_layout.lane_ranks[static_cast<std::size_t>(info.pipeline)][static_cast<std::size_t>(info.stage)]
          .front();
    };
    const auto timings = interpreter.timings();
    for (const SequencedBackend::Pass& pass : sequenced.passes()) {
      // The pass instruction whose stamps enclose the pass: what the interpreter reports as its time.
      const RankInfo& info = job_layout.ranks[static_cast<std::size_t>(pass.rank)];
      const auto& list =
          job.pipelines[static_cast<std::size_t>(info.pipeline)].plan.ranks[static_cast<std::size_t>(info.stage)];
      const auto& rank_timings = timings[static_cast<std::size_t>(pass.rank)];
      const auto at = std::find_if(rank_timings.begin(), rank_timings.end(), [&](const InstructionTiming& timing) {
        return timing.start < pass.begin && pass.end < timing.end;
      });
      REQUIRE(at != rank_timings.end());
      const InstructionKind kind = list[static_cast<std::size_t>(at - rank_timings.begin())].kind;
      CHECK((kind == InstructionKind::forward || kind == InstructionKind::backward));
      for (const SequencedBackend::Pass& other : sequenced.passes()) {
        if (&other == &pass || other.end < at->start || other.begin > at->end) continue;
        CAPTURE(pass.rank);
        CAPTURE(other.rank);
        CHECK(key(other.rank, other.micro_batch) == key(pass.rank, pass.micro_batch));
        ++crowded;
      }
    }
  }
  CHECK(crowded > 0);
}

TEST_CASE("executor host: a stage's turn is shared by its key, waited for by others, and ends on stop or timeout") {
  StageTurns turns(60);
  std::optional<StageTurns::Turn> first(turns.take(3));
  std::optional<StageTurns::Turn> second(turns.take(3));  // the stage's other lane: no wait
  std::atomic<bool> taken = false;
  std::jthread other([&] {
    const StageTurns::Turn turn = turns.take(-1);
    taken = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(taken);  // both lanes of stage 3 hold it
  first.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(taken);  // one lane still does
  second.reset();
  other.join();
  CHECK(taken);
  const StageTurns::Turn held = turns.take(5);
  StageTurns short_turns(0.01);
  const StageTurns::Turn short_held = short_turns.take(1);
  CHECK_THROWS_WITH_AS((void)short_turns.take(2), doctest::Contains("timed out after 0.01 s waiting for the passes"),
                       transport_error);
  std::jthread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    turns.stop();
  });
  CHECK_THROWS_WITH_AS((void)turns.take(6), doctest::Contains("another rank failed"), transport_error);
}

TEST_CASE("executor host: every planner's plans, with TP, CP and recompute, give the unpacked loss and gradients") {
  // The seeded set: Hydraulis (cyclic, 1F1B placed by rank_placement), the sluice plan (its flex CP domain where
  // faster), DynaPipe, Megatron-LM-style packing, FlexSP's groups, Megatron-LM's dynamic CP and single pipelines, on
  // 2 to 8 ranks; TP and CP reorder float64 sums, so they agree with the reference to 1e-12.
  std::map<std::string, int> planners;
  std::set<int> tp_degrees, rank_counts;
  std::set<std::string> cp_kinds;
  bool recompute = false, flex_groups = false, lanes_in_pipelines = false;
  Rng rng(2026);
  for (int k = 0; k < 64; ++k) {
    CAPTURE(k);
    auto [job, planner] = fixtures::seeded_job(k, rng);
    CAPTURE(planner);
    const ModelResult reference = run_unpacked(job.model, job.sequences);
    const RunReport report = host::run_local(job);
    CHECK(fixtures::worst_difference(report.result, reference) <= 1e-12);
    ++planners[planner];
    rank_counts.insert(fixtures::rank_count(job));
    flex_groups = flex_groups || !job.cp_groups.empty();
    for (const PipelineJob& pipeline : job.pipelines) {
      tp_degrees.insert(pipeline.scheme.tp());
      if (pipeline.scheme.cp() > 1) cp_kinds.insert(std::string(name_in(cp_kind_names, pipeline.scheme.cp_kind())));
      recompute = recompute || pipeline.scheme.recompute() == Recompute::full;
      lanes_in_pipelines = lanes_in_pipelines || (pipeline.plan.stages > 1 && pipeline.scheme.stage_gpus() > 1);
    }
    for (const CpGroupJob& group : job.cp_groups)
      cp_kinds.insert(std::string(name_in(cp_kind_names, group.scheme.cp_kind())));
  }
  // The set exercises what it claims to.
  for (const auto& [planner, count] : planners) MESSAGE(planner, ": ", count, " jobs");
  CHECK(planners.size() == 8);
  CHECK(tp_degrees == std::set<int>{1, 2, 4});
  CHECK(cp_kinds == std::set<std::string>{"hybrid", "ring", "ulysses"});
  CHECK(recompute);
  CHECK(flex_groups);
  CHECK(lanes_in_pipelines);
  CHECK(*rank_counts.begin() <= 2);
  CHECK(*rank_counts.rbegin() == 8);
}

TEST_CASE("executor host: recompute keeps a layer's input alone, and its result is the same") {
  Rng rng(5);
  ModelConfig model = fixtures::random_model(rng);
  model.layers = 6;  // three a stage: their inputs and one recomputed layer against three layers' activations
  const std::vector<Sequence> batch = fixtures::random_batch(rng);
  for (const char* name : {"tp1pp2", "tp2cp2ringpp2"}) {
    CAPTURE(name);
    Degrees degrees = Scheme::parse(name).degrees();
    const Job stored = fixtures::single_pipeline_job(model, batch, 5, 2, ScheduleKind::one_f_one_b, degrees);
    degrees.recompute = Recompute::full;
    const Job recomputed = fixtures::single_pipeline_job(model, batch, 5, 2, ScheduleKind::one_f_one_b, degrees);
    const RunReport kept = host::run_local(stored);
    const RunReport saved = host::run_local(recomputed);
    CHECK(fixtures::worst_difference(saved.result, kept.result) <= 1e-13);
    // Every rank holds less at its peak: its micro-batches' layer inputs and one layer's recomputed activations.
    for (std::size_t r = 0; r < kept.activation_peak_bytes.size(); ++r) {
      CAPTURE(r);
      CHECK(saved.activation_peak_bytes[r] > 0);
      CHECK(saved.activation_peak_bytes[r] < kept.activation_peak_bytes[r]);
    }
  }
}

TEST_CASE("executor host: broken TP, CP and recompute code is caught by the equality with the reference") {
  Rng rng(9);
  const ModelConfig model = fixtures::random_model(rng);
  const std::vector<Sequence> batch = fixtures::random_batch(rng);
  const ModelResult reference = run_unpacked(model, make_tokens(batch, model.vocab, 9));
  const auto broken = [&](const char* scheme, host::Mutation mutation) {
    const Job job =
        fixtures::single_pipeline_job(model, batch, 9, 2, ScheduleKind::one_f_one_b, Scheme::parse(scheme).degrees());
    CHECK(fixtures::worst_difference(host::run_local(job).result, reference) <= 1e-12);
    return fixtures::worst_difference(host::run_local(job, {}, mutation).result, reference);
  };
  CHECK(broken("tp2pp2", host::Mutation::missing_tp_reduce) > 1e-3);
  CHECK(broken("tp1cp4ringpp2", host::Mutation::wrong_ring_step) > 1e-3);
  CHECK(broken("tp1cp2ulyssespp2", host::Mutation::cp_chunk_on_wrong_rank) > 1e-3);
  CHECK(broken("tp1cp2ringpp2", host::Mutation::cp_chunk_on_wrong_rank) > 1e-3);
  CHECK(broken("tp2pp2ac", host::Mutation::recompute_drops_residual) > 1e-3);
}

TEST_CASE("executor host: a stage's lanes sit where rank_placement puts them, and the split is Megatron-LM's") {
  Rng rng(21);
  const ModelConfig model = fixtures::random_model(rng);
  const std::vector<Sequence> batch = fixtures::random_batch(rng);
  const std::vector<Strategy> candidates{Strategy::parse("1*tp2cp2ulyssespp1+2*tp1pp2ac")};
  const Job job = fixtures::hydraulis_job(model, batch, 21, candidates, ScheduleKind::one_f_one_b, true);
  const shard::RankPlacement placement = shard::rank_placement(candidates.front(), fixtures::small_profile());
  const JobLayout job_layout = layout(job);
  for (std::size_t p = 0; p < job.pipelines.size(); ++p) {
    const PipelineJob& pipeline = job.pipelines[p];
    for (std::size_t j = 0; j < pipeline.ranks.size(); ++j)
      for (std::size_t lane = 0; lane < pipeline.ranks[j].size(); ++lane) {
        const RankInfo& info = job_layout.ranks[static_cast<std::size_t>(pipeline.ranks[j][lane])];
        CHECK(info.pipeline == static_cast<int>(p));
        CHECK(info.tp_rank == static_cast<int>(lane) % pipeline.scheme.tp());
        CHECK(info.cp_rank == static_cast<int>(lane) / pipeline.scheme.tp());
      }
  }
  std::set<int> placed;
  for (const shard::PipelinePlacement& pipeline : placement.placement.pipelines)
    for (const shard::Stage& stage : pipeline.stages) placed.insert(stage.ranks.begin(), stage.ranks.end());
  for (const PipelineJob& pipeline : job.pipelines)
    for (const auto& stage : pipeline.ranks)
      for (const int rank : stage) CHECK(placed.contains(rank));
  CHECK(fixtures::worst_difference(host::run_local(job).result, run_unpacked(model, job.sequences)) <= 1e-12);

  // CP shards: every token once, chunks r and 2C-1-r of every sequence, odd lengths and sequences shorter than 2C.
  const std::vector<std::int32_t> cu{0, 1, 8, 13, 29};
  for (const auto& [ulysses, ring] : {std::pair{1, 4}, std::pair{4, 1}, std::pair{2, 2}}) {
    const CpSplit split = cp_split(cu, ulysses, ring);
    std::vector<int> seen(29, 0);
    for (const CpShard& shard : split.shards)
      for (const std::int32_t row : shard.rows) ++seen[static_cast<std::size_t>(row)];
    CHECK(std::all_of(seen.begin(), seen.end(), [](int count) { return count == 1; }));
  }
  const CpSplit ring4 = cp_split(cu, 1, 4);
  // Lengths 1, 7, 5 and 16 cut into 8 chunks at ⌊i·L/8⌋: CP rank 0 takes chunks 0 and 7, of one token for the short
  // ones (their chunk 0 is empty) and two each of the 16-long one.
  CHECK(ring4.shards[0].positions == std::vector<std::int32_t>{0, 6, 4, 0, 1, 14, 15});
  CHECK(ring4.shards[0].cu_seqlens == std::vector<std::int32_t>{0, 1, 2, 3, 7});
}

TEST_CASE("executor host: compute groups that meet in different orders are a deadlock the dry run refuses") {
  // Two pipelines of one stage whose two micro-batches form flex CP groups crosswise: pipeline 0's first forward
  // waits for pipeline 1's second, which waits for pipeline 1's first, which waits for pipeline 0's second.
  const ModelConfig model = tiny_model();
  const std::vector<Sequence> batch{Sequence(0, 6), Sequence(1, 5)};
  Job job = fixtures::single_pipeline_job(model, batch, 3, 1, ScheduleKind::one_f_one_b);
  PipelineJob reversed = job.pipelines[0];  // the same plan, running the sequences the other way round
  std::swap(reversed.micro_batches[0], reversed.micro_batches[1]);
  const std::int64_t tokens[] = {5, 6};
  sluice::executor::detail::set_packed_shapes(reversed.plan, tokens, model.hidden);
  job.pipelines.push_back(reversed);
  const Scheme ring2 = Scheme::parse("tp1cp2ringpp1");
  job.cp_groups = {{ring2, {{0, 0}, {1, 1}}}, {ring2, {{0, 1}, {1, 0}}}};
  CHECK_NOTHROW(validate(job, JobChecks::structure));
  CHECK_THROWS_WITH_AS(host::run_local(job), doctest::Contains("wait on each other forever"), invalid_plan);
  // Groups whose members run in the same order run, and their members must pack the same sequences.
  job.pipelines[1] = job.pipelines[0];
  job.cp_groups = {{ring2, {{0, 0}, {1, 0}}}, {ring2, {{1, 1}, {0, 1}}}};
  CHECK(fixtures::worst_difference(host::run_local(job).result, run_unpacked(model, job.sequences)) <= 1e-12);
  job.cp_groups = {{ring2, {{0, 0}, {1, 1}}}, {ring2, {{0, 1}, {1, 0}}}};
  CHECK_THROWS_WITH_AS(validate(job), doctest::Contains("packs other sequences"), invalid_plan);
}

TEST_CASE("executor host: schemes the model cannot run and placements the plan forbids are refused by name") {
  const ModelConfig model = tiny_model();  // 2 heads, ffn 6, vocab 11
  const std::vector<Sequence> batch = tiny_batch();
  const auto refused = [&](const char* scheme, const char* text, const ModelConfig& with = tiny_model()) {
    CAPTURE(scheme);
    CHECK_THROWS_WITH_AS(
        fixtures::single_pipeline_job(with, batch, 1, 1, ScheduleKind::one_f_one_b, Scheme::parse(scheme).degrees()),
        doctest::Contains(text), invalid_input);
  };
  refused("tp4pp1", "TP 4 does not divide the model's 2 heads");
  refused("tp2pp1", "TP 2 does not divide the vocabulary 11");
  ModelConfig odd_ffn = model;
  odd_ffn.ffn = 7;
  odd_ffn.vocab = 12;
  refused("tp2pp1", "TP 2 does not divide the FFN width 7", odd_ffn);
  refused("tp1cp4ulyssespp1", "Ulysses degree 4 does not divide the 2 heads");
  refused("tp1cp4hybrid4pp1", "");  // the scheme itself refuses a hybrid without a smaller Ulysses degree
  CHECK_NOTHROW(fixtures::single_pipeline_job(model, batch, 1, 1, ScheduleKind::one_f_one_b,
                                              Scheme::parse("tp1cp4ringpp1").degrees()));

  ModelConfig wide = model;
  wide.heads = 2;
  wide.ffn = 8;
  wide.vocab = 12;
  Job job =
      fixtures::single_pipeline_job(wide, batch, 1, 1, ScheduleKind::one_f_one_b, Scheme::parse("tp2pp1").degrees());
  job.pipelines[0].ranks = {{3, 4}};
  job.gpus_per_node = 4;
  CHECK_THROWS_WITH_AS(validate(job), doctest::Contains("splits a TP group across nodes (ranks 3 and 4"),
                       invalid_input);
  job.tp_within_node = false;
  CHECK_NOTHROW(validate(job));
  CHECK(layout(job).rank_count() == 5);  // ranks 0 to 2 run nothing
  CHECK(fixtures::worst_difference(host::run_local(job).result, run_unpacked(wide, job.sequences)) <= 1e-12);
  job.pipelines[0].ranks = {{3, 3}};
  CHECK_THROWS_WITH_AS(validate(job), doctest::Contains("rank 3 runs two lanes"), invalid_plan);
  job.pipelines[0].ranks = {{3}};
  CHECK_THROWS_WITH_AS(validate(job), doctest::Contains("not 1 stages of 2 lanes"), invalid_plan);
}

TEST_CASE("executor host: the model's gradients match central finite differences") {
  const ModelConfig model = tiny_model();
  const std::vector<Sequence> batch = tiny_batch();
  const std::vector<SequenceTokens> tokens = make_tokens(batch, model.vocab, 9);
  std::vector<std::vector<double>> parameters = initial_parameters(model);
  const ModelResult base = run_unpacked(model, tokens, parameters);
  const std::vector<ParameterTensor> tensors = parameter_tensors(model);
  // Step 1e-5 in float64: truncation ~1e-10, cancellation ~1e-11, so 1e-7 separates right from wrong.
  constexpr double step = 1e-5;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    CAPTURE(tensors[t].name());
    const std::size_t size = parameters[t].size();
    for (const std::size_t i : {std::size_t{0}, size / 2, size - 1}) {
      CAPTURE(i);
      const double saved = parameters[t][i];
      parameters[t][i] = saved + step;
      const double plus = run_unpacked(model, tokens, parameters).loss;
      parameters[t][i] = saved - step;
      const double minus = run_unpacked(model, tokens, parameters).loss;
      parameters[t][i] = saved;
      CHECK(std::abs((plus - minus) / (2 * step) - base.gradients[t][i]) <= 1e-7);
    }
  }
}

TEST_CASE("executor host: initial weights depend only on the seed and the tensor, and are bf16 numbers") {
  ModelConfig model = tiny_model();
  const std::vector<double> qkv = initial_values(model, layer_tensor(1, ParameterKind::qkv));
  for (const double value : qkv) CHECK(round_to_bf16(value) == value);
  model.layers = 5;  // more layers elsewhere do not change layer 1
  CHECK(initial_values(model, layer_tensor(1, ParameterKind::qkv)) == qkv);
  model.seed = 4;
  CHECK(initial_values(model, layer_tensor(1, ParameterKind::qkv)) != qkv);
  CHECK(round_to_bf16(1.0 + 0x1p-9) == 1.0);  // ties to even
  CHECK(round_to_bf16(1.0 + 0x1p-8 + 0x1p-9) == 1.0 + 0x1p-7);
}

TEST_CASE("executor host: a TP shard's initial values drawn alone are the full tensor's shard") {
  const ModelConfig model{.layers = 2, .hidden = 16, .heads = 4, .ffn = 32, .vocab = 24, .seed = 9};
  const std::vector<ParameterTensor> shapes = parameter_tensors(model);
  for (std::size_t t = 0; t < shapes.size(); ++t)
    for (const int tp : {1, 2, 4})
      for (int r = 0; r < tp; ++r) {
        CAPTURE(shapes[t].name());
        CAPTURE(tp);
        CAPTURE(r);
        const std::vector<double> expected = shard_of(shapes[t], initial_values(model, t), tp, r);
        CHECK(initial_shard(model, t, tp, r) == expected);
        CHECK(initial_shard<float>(model, t, tp, r) == std::vector<float>(expected.begin(), expected.end()));
      }
}

TEST_CASE("executor host: a run is deterministic and reports a trace and a timing table") {
  Rng rng(77);
  const ModelConfig model = fixtures::random_model(rng);
  const std::vector<Sequence> batch = fixtures::random_batch(rng);
  const std::vector<Strategy> candidates{fixtures::strategies().front()};
  const Job job = fixtures::hydraulis_job(model, batch, 77, candidates, ScheduleKind::cyclic);
  const RunReport first = host::run_local(job);
  const RunReport second = host::run_local(job);
  CHECK(first.result.loss == second.result.loss);
  CHECK(first.result.gradients == second.result.gradients);
  REQUIRE(!first.result.gradients.empty());
  const RunReport loss_only = host::run_local(job, {.gradients = false});  // the measurements' runs
  CHECK(loss_only.result.loss == first.result.loss);
  CHECK(loss_only.result.gradients.empty());

  std::size_t instructions = 0;  // every lane runs its stage's list
  for (const PipelineJob& pipeline : job.pipelines)
    for (const auto& list : pipeline.plan.ranks)
      instructions += list.size() * static_cast<std::size_t>(pipeline.scheme.stage_gpus());
  const io::json trace = io::parse(chrome_trace(job, first).dump(), "trace");
  std::size_t events = 0;
  for (const io::json& event : trace.at("traceEvents")) {
    if (event.at("ph") != "X") continue;
    ++events;
    CHECK(event.at("dur").get<double>() >= 0);
  }
  CHECK(events == instructions);

  const TimingTable table = timing_table(job, first);
  CHECK(table.micro_batches.size() == micro_batch_count(job));
  CHECK(table.pipelines.size() == job.pipelines.size());
  CHECK(table.predicted > 0);
  CHECK(table.measured > 0);
  CHECK(table.replayed > 0);
  CHECK(format(table).find("iteration predicted") != std::string::npos);
}

TEST_CASE("executor host: serialized, a pass's time is shared by the lanes and group members that met in it") {
  const std::vector<Sequence> batch = tiny_batch();
  const std::vector<Sequence> long_batch{Sequence(0, 120), Sequence(1, 30), Sequence(2, 7), Sequence(3, 90)};
  Rng rng(5);
  const ModelConfig model = fixtures::random_model(rng);
  const auto domain = fixtures::flex_domain(Scheme(1, 1), 4, CpKind::ring, false);
  for (const Job& job : {fixtures::megatron_job(model, batch, 7, Scheme::parse("tp2pp1")),
                         fixtures::flex_job(model, long_batch, 7, *domain)}) {
    const JobLayout job_layout = layout(job);
    RunReport report = host::run_local(job, {.gradients = false});
    const TimingTable alone = timing_table(job, report);
    report.serialized = true;
    const TimingTable serialized = timing_table(job, report);
    std::map<std::pair<int, int>, std::size_t> met;  // (rank, micro-batch) -> the ranks its passes meet
    for (const schedule::ComputeGroup& group : job_layout.compute_groups)
      for (const schedule::ComputeGroup::Member& member : group.members)
        met[{member.rank, member.micro_batch}] = group.members.size();
    REQUIRE(serialized.micro_batches.size() == alone.micro_batches.size());
    std::set<std::size_t> shares;
    for (std::size_t i = 0; i < alone.micro_batches.size(); ++i) {
      const MicroBatchTiming& row = alone.micro_batches[i];
      const std::vector<int>& lanes = job_layout.lane_ranks[static_cast<std::size_t>(row.pipeline)].front();
      const auto group = met.find({lanes.front(), row.micro_batch});
      const std::size_t share = group != met.end() ? group->second : lanes.size();
      shares.insert(share);
      CHECK(serialized.micro_batches[i].measured_forward ==
            doctest::Approx(row.measured_forward / static_cast<double>(share)).epsilon(1e-12));
      CHECK(serialized.micro_batches[i].measured_backward ==
            doctest::Approx(row.measured_backward / static_cast<double>(share)).epsilon(1e-12));
    }
    CHECK(*shares.rbegin() >= 2);  // each job has passes that ranks share
  }
}

TEST_CASE("executor host: plans broken by hand are rejected naming the rank and the instruction") {
  SUBCASE("a missing send: two receives meet, as under NCCL") {
    Job job = two_stage_job();
    auto& sender = rank_list(job, 0);
    sender.erase(sender.begin() + find(sender, InstructionKind::send_act_wait, 0));
    sender.erase(sender.begin() + find(sender, InstructionKind::send_act_start, 0));
    CHECK_THROWS_WITH_AS(host::run_local(job), doctest::Contains("can never pair"), invalid_plan);
  }
  SUBCASE("a missing last send: the receiver waits forever") {
    Job job = two_stage_job();
    auto& sender = rank_list(job, 1);
    const auto last = std::find_if(sender.rbegin(), sender.rend(), [](const schedule::Instruction& in) {
      return in.kind == InstructionKind::send_grad_start;
    });
    REQUIRE(last != sender.rend());
    const int micro_batch = last->micro_batch;
    sender.erase(sender.begin() + find(sender, InstructionKind::send_grad_wait, micro_batch));
    sender.erase(sender.begin() + find(sender, InstructionKind::send_grad_start, micro_batch));
    CHECK_THROWS_WITH_AS(host::run_local(job), doctest::Contains("wait on each other forever: rank 0"), invalid_plan);
  }
  SUBCASE("a missing receive") {
    Job job = two_stage_job();
    auto& receiver = rank_list(job, 1);
    receiver.erase(receiver.begin() + find(receiver, InstructionKind::recv_act_wait, 0));
    receiver.erase(receiver.begin() + find(receiver, InstructionKind::recv_act_start, 0));
    CHECK_THROWS_WITH_AS(host::run_local(job), doctest::Contains("executor: rank 1"), invalid_plan);
  }
  SUBCASE("a wait without its start") {
    Job job = two_stage_job();
    auto& receiver = rank_list(job, 1);
    const auto start = find(receiver, InstructionKind::recv_act_start, 0);
    const auto wait = find(receiver, InstructionKind::recv_act_wait, 0);
    std::swap(receiver[static_cast<std::size_t>(start)], receiver[static_cast<std::size_t>(wait)]);
    CHECK_THROWS_WITH_AS(host::run_local(job), doctest::Contains("never started"), invalid_plan);
  }
  SUBCASE("a slot written while it still holds a tensor") {
    Job job = two_stage_job();
    auto& list = rank_list(job, 0);
    std::vector<schedule::Instruction*> forwards;
    for (schedule::Instruction& in : list)
      if (in.kind == InstructionKind::forward) forwards.push_back(&in);
    REQUIRE(forwards.size() >= 2);
    forwards[1]->output = forwards[0]->output;  // the first forward's output is held until its backward
    CHECK_THROWS_WITH_AS(host::run_local(job), doctest::Contains("which still holds a tensor of micro-batch"),
                         invalid_plan);
  }
  SUBCASE("a sent slot freed before the send's wait") {
    Job job = two_stage_job();
    auto& sender = rank_list(job, 1);  // sends gradients to stage 0, then frees their slots
    const auto wait = find(sender, InstructionKind::send_grad_wait, 0);
    const auto free = static_cast<std::ptrdiff_t>(wait + 1);
    REQUIRE(sender[static_cast<std::size_t>(free)].kind == InstructionKind::free_buffer);
    std::swap(sender[static_cast<std::size_t>(wait)], sender[static_cast<std::size_t>(free)]);
    CHECK_THROWS_WITH_AS(host::run_local(job), doctest::Contains("before the Wait"), invalid_plan);
  }
  SUBCASE("sends issued out of order pair with the wrong receives") {
    Job job = two_stage_job();
    auto& sender = rank_list(job, 0);
    const auto first = find(sender, InstructionKind::send_act_start, 0);
    const auto second = find(sender, InstructionKind::send_act_start, 1);
    std::swap(sender[static_cast<std::size_t>(first)], sender[static_cast<std::size_t>(second)]);
    CHECK_THROWS_AS(host::run_local(job), invalid_plan);
  }
  SUBCASE("a backward that never runs") {
    Job job = two_stage_job();
    auto& list = rank_list(job, 1);
    list.erase(list.begin() + find(list, InstructionKind::backward, 2));
    CHECK_THROWS_AS(host::run_local(job), invalid_plan);
  }
}

TEST_CASE("executor host: bad configurations and jobs are rejected naming the field") {
  auto rejects = [](auto edit, const char* field) {
    ModelConfig model = tiny_model();
    edit(model);
    CHECK_THROWS_WITH_AS(require_valid(model), doctest::Contains(field), invalid_input);
  };
  rejects([](ModelConfig& m) { m.layers = 0; }, "layers");
  rejects([](ModelConfig& m) { m.hidden = 1; }, "hidden");
  rejects([](ModelConfig& m) { m.heads = 3; }, "heads");
  rejects([](ModelConfig& m) { m.heads = 8; }, "head dimension");
  rejects([](ModelConfig& m) { m.ffn = 0; }, "ffn");
  rejects([](ModelConfig& m) { m.vocab = 1; }, "vocab");
  rejects([](ModelConfig& m) { m.rope_theta = 0; }, "rope_theta");
  rejects([](ModelConfig& m) { m.norm_eps = -1; }, "norm_eps");
  CHECK_THROWS_AS(even_layer_split(0, 2), invalid_input);

  const Job good = two_stage_job();
  CHECK_NOTHROW(validate(good));
  Job job = good;
  job.sequences[0].tokens[0] = static_cast<std::int32_t>(job.model.vocab);
  CHECK_THROWS_WITH_AS(validate(job), doctest::Contains("outside the vocabulary"), invalid_input);
  job = good;
  for (SequenceTokens& sequence : job.sequences) sequence.tokens.resize(1);
  CHECK_THROWS_WITH_AS(validate(job), doctest::Contains("next-token target"), invalid_input);
  job = good;
  job.pipelines[0].micro_batches[1].push_back(0);
  CHECK_THROWS_WITH_AS(validate(job), doctest::Contains("more than one micro-batch"), invalid_plan);
  job = good;
  job.pipelines[0].layer_boundaries = {0, 3, 2};
  CHECK_THROWS_WITH_AS(validate(job), doctest::Contains("layer boundaries"), invalid_plan);
  job = good;
  rank_list(job, 0).front().shape.rows += 1;
  CHECK_THROWS_WITH_AS(validate(job), doctest::Contains("shape"), invalid_plan);
  job = good;
  job.pipelines[0].micro_batches.pop_back();
  CHECK_THROWS_AS(validate(job), invalid_plan);
  job = good;
  job.pipelines[0].plan.buffer_slots = 1 << 30;  // refused before any slot table is sized
  CHECK_THROWS_WITH_AS(validate(job), doctest::Contains("buffer slots"), invalid_plan);
  job = good;
  std::swap(rank_list(job, 1).front(), rank_list(job, 1)[1]);  // a Wait before its Start: validate's dry run sees it
  CHECK_THROWS_WITH_AS(validate(job), doctest::Contains("executor: rank 1"), invalid_plan);
}

TEST_CASE("executor host: measured stages become a valid sluice profile") {
  ModelConfig model;
  model.layers = 4;
  model.hidden = 128;
  model.heads = 2;
  model.ffn = 256;
  model.vocab = 1000;
  // Stages as the profiler would measure them, on its micro-batches of one sequence and of packed ones: 30 activation
  // bytes per token, hidden unit and layer, a recomputing stage of PP 2 that takes 4/3 the time and holds a tenth of
  // the activations, and with PP 2 a middle stage without the last stage's head (2e-7·l + 5e-5 s).
  const std::vector<std::int64_t> lengths{256, 512, 1024, 2048};
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = cuda::sample_shapes(lengths);
  CHECK(shapes == std::vector<std::pair<std::int64_t, std::int64_t>>{
                      {256, 1}, {512, 1}, {1024, 1}, {2048, 1}, {256, 2}, {256, 4}, {256, 8}});
  const cost::LastStageWork head(2e-7, 5e-5);
  std::vector<cuda::StageProfile> stages;
  for (const Scheme& scheme : cuda::pipeline_schemes(std::vector{1, 2}, true)) {
    if (scheme == Scheme::parse("tp1pp1ac")) continue;
    const Recompute recompute = scheme.recompute();
    cuda::StageProfile stage;
    stage.scheme = scheme;
    stage.layers = model.layers / scheme.pp();
    const double slower = recompute == Recompute::full ? 4.0 / 3 : 1;
    const double bytes = recompute == Recompute::full ? 3.0 : 30.0;
    std::vector<cost::LatencySample> latencies, inner_latencies;
    for (const auto& [length, sequences] : shapes) {
      const auto l = static_cast<double>(length);
      const auto k = static_cast<double>(sequences);
      const double seconds = slower * stage.layers * (k * (1e-9 * l * l + 1e-6 * l) + 1e-4);
      const double inner = scheme.pp() > 1 ? seconds - head.seconds(length * sequences) : 0.0;
      stage.samples.push_back({length, seconds, bytes * stage.layers * 128 * k * l, inner, sequences});
      latencies.push_back({length, seconds, sequences});
      inner_latencies.push_back({length, inner, sequences});
    }
    if (scheme.pp() > 1) {
      const cost::StageFits fits = cost::fit_last_and_other_stage(latencies, inner_latencies);
      stage.fit = fits.last;
      stage.inner_fit = fits.other;
    } else {
      stage.fit = cost::fit_quadratic(latencies);
    }
    stage.activation_bytes_per_token = bytes * stage.layers * 128;
    stages.push_back(stage);
  }
  const cost::ProfileSpec spec = cuda::profile_spec(model, stages, {80e9, 1e9}, {}, "test GPU");
  const cost::Profile profile(spec);
  REQUIRE(spec.memory.has_value());
  CHECK(spec.memory->activation_bytes.at(1) == doctest::Approx(30.0));  // measured without recompute
  CHECK(spec.gpus == 2);
  REQUIRE(profile.schemes().size() == 3);
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    CAPTURE(scheme.scheme.name());
    CHECK(scheme.max_len > 0);
    const double layers = model.layers / scheme.scheme.pp();
    const double slower = scheme.scheme.recompute() == Recompute::full ? 4.0 / 3 : 1;
    CHECK(scheme.latency(1024) == doctest::Approx(slower * layers * (1e-9 * 1024 * 1024 + 1e-6 * 1024 + 1e-4)));
    CHECK(scheme.last_stage.b() == doctest::Approx(scheme.scheme.pp() > 1 ? head.b() : 0.0));
    CHECK(scheme.last_stage.c() == doctest::Approx(scheme.scheme.pp() > 1 ? head.c() : 0.0));
  }
  CHECK(profile.at(Scheme::parse("tp1pp2ac")).max_len > profile.at(Scheme(1, 2)).max_len);
  const std::vector<cost::ProfileSample> samples = cuda::profile_samples(stages);
  CHECK(samples.back().scheme == Scheme::parse("tp1pp2ac"));
  CHECK(samples.back().inner_seconds == stages.back().samples.back().inner_seconds);
  CHECK(samples.back().sequences == 8);
  CHECK_FALSE(samples.front().inner_seconds.has_value());
  CHECK(samples.front().sequences == 1);
  // `sluice fit` on the samples gives the profiler's own last-stage work.
  CHECK(cost::fit_profile(samples, spec, {}).profile.at(Scheme(1, 2)).last_stage ==
        profile.at(Scheme(1, 2)).last_stage);
  const cost::Profile read =
      io::from_document<cost::Profile>(io::parse(io::to_document(profile).dump(), "profile"), "profile");
  CHECK(read.spec().schemes == spec.schemes);
  CHECK_THROWS_AS(cuda::profile_spec(model, {}, {80e9, 1e9}, {}, "test GPU"), invalid_input);
  // A stage of <TP 2, ring CP 2>: a lane holds a quarter of the stage's activations, so A for TP 2 is its bytes per
  // token times TP·CP over layers·hidden; the profile is resolved for the stage's 4 GPUs (of 8 GB, so that this tiny
  // model's MaxLen stays within the latencies a profile accepts).
  cuda::StageProfile wide = stages.front();
  wide.scheme = Scheme::parse("tp2cp2ringpp1");
  wide.activation_bytes_per_token = 24.0 * wide.layers * 128 / 4;
  stages.push_back(wide);
  const cost::ProfileSpec wide_spec = cuda::profile_spec(model, stages, {8e9, 1e9}, {}, "test GPU");
  REQUIRE(wide_spec.memory.has_value());
  CHECK(wide_spec.memory->activation_bytes.at(2) == doctest::Approx(24.0));
  CHECK(wide_spec.memory->activation_bytes.at(1) == doctest::Approx(30.0));
  CHECK(wide_spec.gpus == 4);
  CHECK(cost::Profile(wide_spec).at(wide.scheme).max_len > 0);
  // A TP profiled only with recompute leaves the memory model without its activation constant.
  stages.back().scheme = Scheme::parse("tp2pp1ac");
  CHECK_THROWS_WITH_AS(cuda::profile_spec(model, stages, {8e9, 1e9}, {}, "test GPU"), doctest::Contains("at TP 2"),
                       invalid_input);
}

TEST_CASE("executor host: the launch environment is read from each launcher's variables") {
  const auto launched = [](std::map<std::string, std::string> variables) {
    return launch_environment([variables = std::move(variables)](const char* name) -> const char* {
      const auto found = variables.find(name);
      return found == variables.end() ? nullptr : found->second.c_str();
    });
  };
  CHECK_FALSE(launched({}).has_value());
  CHECK(launched({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}) ==
        LaunchEnvironment{3, 8, 1, "Open MPI"});
  CHECK(launched({{"PMI_RANK", "5"}, {"PMI_SIZE", "6"}, {"PMI_LOCAL_RANK", "2"}}) == LaunchEnvironment{5, 6, 2, "PMI"});
  CHECK(launched({{"PMI_RANK", "5"}, {"PMI_SIZE", "6"}, {"MPI_LOCALRANKID", "4"}, {"PMI_LOCAL_RANK", "2"}}) ==
        LaunchEnvironment{5, 6, 4, "PMI"});
  CHECK(launched({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}) == LaunchEnvironment{0, 2, 0, "Slurm"});
  CHECK(launched({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}) == LaunchEnvironment{1, 2, 1, "torchrun"});
  // mpirun's variables win over torchrun-style ones a user's shell also exports.
  CHECK(launched({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}})
            ->launcher == "Open MPI");
  const auto rejected = [&](std::map<std::string, std::string> variables, const std::string& fragment) {
    CAPTURE(fragment);
    CHECK_THROWS_WITH_AS(launched(std::move(variables)), doctest::Contains(fragment.c_str()), invalid_input);
  };
  rejected({{"RANK", "one"}, {"WORLD_SIZE", "2"}}, "RANK must be an integer >= 0, got 'one'");
  rejected({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "RANK must be an integer >= 0");
  rejected({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE must be an integer >= 1");
  rejected({{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}}, "WORLD_SIZE must be an integer");
  rejected({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK is 2, not below WORLD_SIZE = 2");
  rejected({{"OMPI_COMM_WORLD_RANK", "0"}}, "Open MPI sets OMPI_COMM_WORLD_RANK but not OMPI_COMM_WORLD_SIZE");
  rejected({{"SLURM_NTASKS", "4"}}, "Slurm sets SLURM_NTASKS but not SLURM_PROCID");
  rejected({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2x"}}, "LOCAL_RANK must be an integer >= 0");
}

#ifdef __linux__
TEST_CASE("executor host: usable_cpus counts the CPUs this thread is bound to, as a launcher's binding narrows them") {
  cpu_set_t original;
  CPU_ZERO(&original);
  REQUIRE(sched_getaffinity(0, sizeof original, &original) == 0);
  CHECK(usable_cpus() == static_cast<unsigned>(CPU_COUNT(&original)));
  int first = 0;
  while (!CPU_ISSET(first, &original)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  const unsigned bound = usable_cpus();
  REQUIRE(sched_setaffinity(0, sizeof original, &original) == 0);
  CHECK(bound == 1);
}
#endif
