// The reference executor on the host backend: sluice's plans (Hydraulis iteration plans scheduled cyclic and
// 1F1B, DynaPipe pipeline plans with several replicas) executed in float64 give the loss and every parameter
// gradient of running each sequence unpacked on one device; the host model against finite differences; plans
// broken by hand rejected with clear errors; bad configurations rejected naming the field; the launchers'
// environments read into a rank, world size and local rank.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "plan_fixtures.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice_executor/host_backend.hpp"
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

// Packing, pipelining and data parallelism only reorder float64 sums: the loss and every gradient tensor agree
// with the unpacked reference to this relative tolerance (norm of the difference over the reference's norm).
constexpr double float64_tolerance = 1e-9;

void check_matches(const ModelConfig& model, const ModelResult& run, const ModelResult& reference) {
  CHECK(std::abs(run.loss - reference.loss) <= float64_tolerance * std::abs(reference.loss));
  const std::vector<ParameterTensor> tensors = parameter_tensors(model);
  REQUIRE(run.gradients.size() == tensors.size());
  REQUIRE(reference.gradients.size() == tensors.size());
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    CAPTURE(tensors[t].name());
    REQUIRE(run.gradients[t].size() == tensors[t].size());
    CHECK(fixtures::relative_difference(run.gradients[t], reference.gradients[t]) <= float64_tolerance);
  }
}

int plan_depth(const Job& job) {
  int depth = 0;
  for (const PipelineJob& pipeline : job.pipelines) depth = std::max(depth, pipeline.plan.stages);
  return depth;
}

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

}  // namespace

TEST_CASE("executor host: sluice's plans give the unpacked single-device loss and gradients") {
  const std::vector<Strategy> strategies = fixtures::strategies();
  int deepest = 0;
  std::size_t most_micro_batches = 0;
  std::size_t most_pipelines = 0;
  bool context_parallel = false;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    Rng rng(seed);
    const ModelConfig model = fixtures::random_model(rng);
    const std::vector<Sequence> batch = fixtures::random_batch(rng);
    const std::vector<SequenceTokens> tokens = make_tokens(batch, model.vocab, seed);
    const ModelResult reference = run_unpacked(model, tokens);
    CHECK(std::isfinite(reference.loss));

    const std::vector<Strategy> candidates{strategies[seed % strategies.size()]};
    for (const ScheduleKind kind : {ScheduleKind::cyclic, ScheduleKind::one_f_one_b}) {
      CAPTURE(static_cast<int>(kind));
      const Job job = fixtures::hydraulis_job(model, batch, seed, candidates, kind);
      deepest = std::max(deepest, plan_depth(job));
      most_micro_batches = std::max(most_micro_batches, micro_batch_count(job));
      most_pipelines = std::max(most_pipelines, job.pipelines.size());
      for (const StrategyPart& part : candidates.front().parts()) context_parallel |= part.scheme.cp() > 1;
      check_matches(model, run_on_host(job).result, reference);
    }
    const int stages = 1 + static_cast<int>(seed % 4);
    const int replicas = 2 + static_cast<int>(seed % 2);
    const auto layout = seed % 3 == 0 ? microbatch::Layout::packed : microbatch::Layout::padded;
    const Job dynapipe = fixtures::dynapipe_job(model, batch, seed, stages, replicas, layout,
                                                seed % 2 ? ScheduleKind::cyclic : ScheduleKind::one_f_one_b);
    check_matches(model, run_on_host(dynapipe).result, reference);
  }
  // The cases exercise what they claim to: pipelines of four stages, several pipelines, packed micro-batches, CP.
  CHECK(context_parallel);
  CHECK(deepest == 4);
  CHECK(most_pipelines >= 3);
  CHECK(most_micro_batches >= 6);
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

TEST_CASE("executor host: a run is deterministic and reports a trace and a timing table") {
  Rng rng(77);
  const ModelConfig model = fixtures::random_model(rng);
  const std::vector<Sequence> batch = fixtures::random_batch(rng);
  const std::vector<Strategy> candidates{fixtures::strategies().front()};
  const Job job = fixtures::hydraulis_job(model, batch, 77, candidates, ScheduleKind::cyclic);
  const RunReport first = run_on_host(job);
  const RunReport second = run_on_host(job);
  CHECK(first.result.loss == second.result.loss);
  CHECK(first.result.gradients == second.result.gradients);

  std::size_t instructions = 0;
  for (const PipelineJob& pipeline : job.pipelines)
    for (const auto& list : pipeline.plan.ranks) instructions += list.size();
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
  CHECK(table.replayed <= table.measured * (1 + 1e-9));  // the replay drops the host's interleaving of ranks
  CHECK(format(table).find("iteration predicted") != std::string::npos);
}

TEST_CASE("executor host: plans broken by hand are rejected naming the rank and the instruction") {
  SUBCASE("a missing send: two receives meet, as under NCCL") {
    Job job = two_stage_job();
    auto& sender = rank_list(job, 0);
    sender.erase(sender.begin() + find(sender, InstructionKind::send_act_wait, 0));
    sender.erase(sender.begin() + find(sender, InstructionKind::send_act_start, 0));
    CHECK_THROWS_WITH_AS(run_on_host(job), doctest::Contains("can never pair"), invalid_plan);
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
    CHECK_THROWS_WITH_AS(run_on_host(job), doctest::Contains("wait on each other forever: rank 0"), invalid_plan);
  }
  SUBCASE("a missing receive") {
    Job job = two_stage_job();
    auto& receiver = rank_list(job, 1);
    receiver.erase(receiver.begin() + find(receiver, InstructionKind::recv_act_wait, 0));
    receiver.erase(receiver.begin() + find(receiver, InstructionKind::recv_act_start, 0));
    CHECK_THROWS_WITH_AS(run_on_host(job), doctest::Contains("executor: rank 1"), invalid_plan);
  }
  SUBCASE("a wait without its start") {
    Job job = two_stage_job();
    auto& receiver = rank_list(job, 1);
    const auto start = find(receiver, InstructionKind::recv_act_start, 0);
    const auto wait = find(receiver, InstructionKind::recv_act_wait, 0);
    std::swap(receiver[static_cast<std::size_t>(start)], receiver[static_cast<std::size_t>(wait)]);
    CHECK_THROWS_WITH_AS(run_on_host(job), doctest::Contains("never started"), invalid_plan);
  }
  SUBCASE("a slot written while it still holds a tensor") {
    Job job = two_stage_job();
    auto& list = rank_list(job, 0);
    std::vector<schedule::Instruction*> forwards;
    for (schedule::Instruction& in : list)
      if (in.kind == InstructionKind::forward) forwards.push_back(&in);
    REQUIRE(forwards.size() >= 2);
    forwards[1]->output = forwards[0]->output;  // the first forward's output is held until its backward
    CHECK_THROWS_WITH_AS(run_on_host(job), doctest::Contains("which still holds a tensor of micro-batch"),
                         invalid_plan);
  }
  SUBCASE("a sent slot freed before the send's wait") {
    Job job = two_stage_job();
    auto& sender = rank_list(job, 1);  // sends gradients to stage 0, then frees their slots
    const auto wait = find(sender, InstructionKind::send_grad_wait, 0);
    const auto free = static_cast<std::ptrdiff_t>(wait + 1);
    REQUIRE(sender[static_cast<std::size_t>(free)].kind == InstructionKind::free_buffer);
    std::swap(sender[static_cast<std::size_t>(wait)], sender[static_cast<std::size_t>(free)]);
    CHECK_THROWS_WITH_AS(run_on_host(job), doctest::Contains("before the Wait"), invalid_plan);
  }
  SUBCASE("sends issued out of order pair with the wrong receives") {
    Job job = two_stage_job();
    auto& sender = rank_list(job, 0);
    const auto first = find(sender, InstructionKind::send_act_start, 0);
    const auto second = find(sender, InstructionKind::send_act_start, 1);
    std::swap(sender[static_cast<std::size_t>(first)], sender[static_cast<std::size_t>(second)]);
    CHECK_THROWS_AS(run_on_host(job), invalid_plan);
  }
  SUBCASE("a backward that never runs") {
    Job job = two_stage_job();
    auto& list = rank_list(job, 1);
    list.erase(list.begin() + find(list, InstructionKind::backward, 2));
    CHECK_THROWS_AS(run_on_host(job), invalid_plan);
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
  // Stages as the profiler would measure them: 30 activation bytes per token, hidden unit and layer.
  std::vector<cuda::StageProfile> stages;
  for (const int pp : {1, 2}) {
    cuda::StageProfile stage;
    stage.pp = pp;
    stage.layers = model.layers / pp;
    std::vector<cost::LatencySample> latencies;
    for (const std::int64_t length : {256, 512, 1024, 2048}) {
      const auto l = static_cast<double>(length);
      const double seconds = stage.layers * (1e-9 * l * l + 1e-6 * l + 1e-4);
      stage.samples.push_back({length, seconds, 30.0 * stage.layers * 128 * l});
      latencies.push_back({length, seconds});
    }
    stage.fit = cost::fit_quadratic(latencies);
    stage.activation_bytes_per_token = 30.0 * stage.layers * 128;
    stages.push_back(stage);
  }
  const cost::ProfileSpec spec = cuda::profile_spec(model, stages, {80e9, 1e9}, {}, "test GPU");
  const cost::Profile profile(spec);
  REQUIRE(spec.memory.has_value());
  CHECK(spec.memory->activation_bytes.at(1) == doctest::Approx(30.0));
  CHECK(spec.gpus == 2);
  REQUIRE(profile.schemes().size() == 2);
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    CHECK(scheme.max_len > 0);
    const double layers = model.layers / scheme.scheme.pp();
    CHECK(scheme.latency(1024) == doctest::Approx(layers * (1e-9 * 1024 * 1024 + 1e-6 * 1024 + 1e-4)));
  }
  const cost::Profile read =
      io::from_document<cost::Profile>(io::parse(io::to_document(profile).dump(), "profile"), "profile");
  CHECK(read.spec().schemes == spec.schemes);
  CHECK_THROWS_AS(cuda::profile_spec(model, {}, {80e9, 1e9}, {}, "test GPU"), invalid_input);
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
