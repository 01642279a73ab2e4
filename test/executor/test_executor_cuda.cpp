// The CUDA backend: sluice's plans, TP, CP of every kind, flex CP groups and recompute among them, on the local
// transport (streams per rank, and serialized) and on NCCL give the float64 host backend's loss and gradients within
// bf16 tolerance; the profiler yields a valid profile; the trace is valid JSON. Cases that need a GPU (the suite "gpu")
// or four ("gpus:4") are skipped where they are missing (gpu_test_main.cpp); the checks of bad input run everywhere.
// Without a GPU, test_executor_cuda_emulated runs the GPU cases on the CPU: this file and the backend's sources under
// the CUDA emulation (emulation/cuda_emulation.hpp), its runtime, cuBLAS and NCCL included.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "plan_fixtures.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/json.hpp"
#include "sluice_executor/cuda.hpp"
#include "sluice_executor/host/local.hpp"
#include "sluice_executor/profiler.hpp"
#include "sluice_executor/trace.hpp"

using namespace sluice;
using namespace sluice::executor;
using schedule::ScheduleKind;

namespace {

// bf16 keeps 8 significant bits (relative rounding 2^-9 per value); through a few layers of bf16 activations
// with fp32 accumulation the loss stays within 1% of float64 and every gradient tensor within 5% (norm of the
// difference over the float64 norm). The float64 side uses the same (bf16-representable) weights.
constexpr double loss_tolerance = 1e-2;
constexpr double gradient_tolerance = 5e-2;

void check_close(const ModelConfig& model, const ModelResult& gpu, const ModelResult& host) {
  CHECK(std::abs(gpu.loss - host.loss) <= loss_tolerance * std::abs(host.loss));
  const std::vector<ParameterTensor> tensors = parameter_tensors(model);
  REQUIRE(gpu.gradients.size() == tensors.size());
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    CAPTURE(tensors[t].name());
    CHECK(fixtures::relative_difference(gpu.gradients[t], host.gradients[t]) <= gradient_tolerance);
  }
}

std::vector<Job> gpu_jobs() {
  const ModelConfig model = fixtures::gpu_model();
  Rng rng(5);
  const std::vector<Sequence> batch = fixtures::random_batch(rng);
  return {fixtures::hydraulis_job(model, batch, 5, std::vector{Strategy::parse("1*tp1pp4+1*tp1pp2+2*tp1pp1")},
                                  ScheduleKind::cyclic),
          fixtures::hydraulis_job(model, batch, 5, std::vector{Strategy::parse("1*tp1pp2ac+2*tp1pp1")},
                                  ScheduleKind::one_f_one_b),
          fixtures::dynapipe_job(model, batch, 5, 2, 2, microbatch::Layout::padded, ScheduleKind::cyclic)};
}

// Plans with TP 2, Ulysses CP 2 (the GPU model's two heads allow no more), ring CP 2 and 4, the hybrid of both and
// Megatron-LM's dynamic CP groups of ring CP across pipelines, beside TP 1 pipelines and with recompute. The batch
// has sequences shorter than 2·CP and of odd length.
std::vector<Job> parallel_jobs() {
  const ModelConfig model = fixtures::gpu_model();
  Rng rng(7);
  const std::vector<Sequence> batch = fixtures::random_batch(rng);
  return {fixtures::hydraulis_job(model, batch, 7, std::vector{Strategy::parse("1*tp2pp2+2*tp1pp1")},
                                  ScheduleKind::one_f_one_b),
          fixtures::hydraulis_job(model, batch, 7, std::vector{Strategy::parse("1*tp2pp1+1*tp1cp2ulyssespp1")},
                                  ScheduleKind::one_f_one_b),
          fixtures::single_pipeline_job(model, batch, 7, 2, ScheduleKind::cyclic, Scheme::parse("tp2pp2ac").degrees()),
          fixtures::single_pipeline_job(model, batch, 7, 2, ScheduleKind::one_f_one_b,
                                        Scheme::parse("tp1cp2ulyssespp2").degrees()),
          fixtures::single_pipeline_job(model, batch, 7, 1, ScheduleKind::one_f_one_b,
                                        Scheme::parse("tp1cp4ringpp1ac").degrees()),
          fixtures::single_pipeline_job(model, batch, 7, 2, ScheduleKind::cyclic,
                                        Scheme::parse("tp1cp4hybrid2pp2").degrees()),
          fixtures::hydraulis_job(model, batch, 7, std::vector{Strategy::parse("1*tp2cp2ringpp1+2*tp1pp1")},
                                  ScheduleKind::one_f_one_b),
          fixtures::flex_job(model, batch, 7, *fixtures::flex_domain(Scheme(1, 1), 4, CpKind::ring, true))};
}

}  // namespace

TEST_CASE("executor cuda: models the kernels cannot run and missing devices are reported") {
  ModelConfig model = fixtures::gpu_model();
  model.hidden = 96;  // head dimension 48
  const std::vector<Sequence> batch{Sequence(0, 5), Sequence(1, 3)};
  const Job job = fixtures::single_pipeline_job(model, batch, 1, 1, ScheduleKind::one_f_one_b);
  CHECK_THROWS_WITH_AS(cuda::run_local(job), doctest::Contains("head dimension"), invalid_input);
  if (cuda::nccl_available())
    CHECK_THROWS_WITH_AS(cuda::run_nccl(job), doctest::Contains("head dimension"), invalid_input);
  // A TP the model does not divide by is refused as the host backend refuses it, before looking for a device.
  ModelConfig wide = fixtures::gpu_model();
  wide.hidden = 192;  // head dimension 96 with two heads, 64 with three
  Job indivisible =
      fixtures::single_pipeline_job(wide, batch, 1, 1, ScheduleKind::one_f_one_b, Scheme::parse("tp2pp1").degrees());
  indivisible.model.heads = 3;
  CHECK_THROWS_WITH_AS(cuda::run_local(indivisible), doctest::Contains("does not divide the model's 3 heads"),
                       invalid_input);
  ModelConfig narrow_ffn = fixtures::gpu_model();
  narrow_ffn.ffn = 200;  // a multiple of 8, but not each of two TP ranks' 100 columns
  const Job uneven = fixtures::single_pipeline_job(narrow_ffn, batch, 1, 1, ScheduleKind::one_f_one_b,
                                                   Scheme::parse("tp2pp1").degrees());
  CHECK_THROWS_WITH_AS(cuda::run_local(uneven), doctest::Contains("FFN columns (100) to be a multiple of 8"),
                       invalid_input);
  if (cuda::device_count() == 0) {
    const Job runnable = fixtures::single_pipeline_job(fixtures::gpu_model(), batch, 1, 1, ScheduleKind::one_f_one_b);
    CHECK_THROWS_AS(cuda::run_local(runnable), std::runtime_error);
  }
}

TEST_CASE("executor cuda: the TP and CP plans the GPU cases run give such pipelines work, and the host runs them") {
  std::size_t rings = 0, hybrids = 0;
  for (const Job& job : parallel_jobs()) {
    std::size_t parallel = job.cp_groups.size();
    for (const PipelineJob& pipeline : job.pipelines) {
      if (pipeline.scheme.stage_gpus() == 1) continue;
      ++parallel;
      CHECK(!pipeline.micro_batches.empty());
      rings += pipeline.scheme.ring() > 1;
      hybrids += pipeline.scheme.ring() > 1 && pipeline.scheme.ulysses() > 1;
    }
    CHECK(parallel > 0);
    CHECK(std::isfinite(host::run_local(job).result.loss));
  }
  CHECK(rings >= 3);
  CHECK(hybrids == 1);
  // Some ring block holds no token of a sequence: the batch has one shorter than 2·CP.
  const std::vector<Job> jobs = parallel_jobs();
  const JobLayout ring4 = layout(jobs[4]);
  CHECK(std::any_of(ring4.cp_splits.begin(), ring4.cp_splits.end(), [](const CpSplit& split) {
    return std::any_of(split.blocks.begin(), split.blocks.end(), [](const CpShard& block) {
      for (std::size_t s = 0; s + 1 < block.cu_seqlens.size(); ++s)
        if (block.cu_seqlens[s] == block.cu_seqlens[s + 1]) return true;
      return false;
    });
  }));
}

TEST_CASE("executor cuda: plans on the local transport match the float64 host backend" * doctest::test_suite("gpu")) {
  for (const Job& job : gpu_jobs()) {
    const ModelResult host = host::run_local(job).result;
    for (const bool serialize : {false, true}) {
      CAPTURE(serialize);
      const RunReport report = cuda::run_local(job, {.serialize = serialize});
      check_close(job.model, report.result, host);
      CHECK(report.makespan > 0);
    }
  }
}

TEST_CASE("executor cuda: TP and CP plans on one GPU, a thread per lane, match the float64 host backend" *
          doctest::test_suite("gpu")) {
  for (const Job& job : parallel_jobs()) {
    const ModelResult host = host::run_local(job).result;
    for (const bool serialize : {false, true}) {
      CAPTURE(serialize);
      check_close(job.model, cuda::run_local(job, {.serialize = serialize}).result, host);
    }
  }
}

TEST_CASE("executor cuda: a pipeline on NCCL, one GPU per rank, matches the float64 host backend" *
          doctest::test_suite("gpus:4")) {
  if (!cuda::nccl_available()) {
    MESSAGE("skipped: this build has no NCCL transport");
    return;
  }
  const std::vector<Job> parallel = parallel_jobs();
  for (const Job& job : {gpu_jobs().back(), parallel[2], parallel[3], parallel[4], parallel.back()}) {
    REQUIRE(layout(job).rank_count() <= cuda::device_count());
    check_close(job.model, cuda::run_nccl(job).result, host::run_local(job).result);
  }
}

TEST_CASE("executor cuda: the profiler fits a valid profile of a tiny model" * doctest::test_suite("gpu")) {
  ModelConfig model = fixtures::gpu_model();
  model.layers = 2;
  cuda::ProfilerOptions options;
  options.lengths = {64, 128, 256, 512};
  options.repetitions = 3;
  options.warmup = 1;
  // <1, PP> and stages of TP 2, ring CP 2 and Ulysses CP 2 with recompute, their lanes serialized on the GPU.
  std::vector<Scheme> schemes = cuda::pipeline_schemes(std::vector{1, 2}, false);
  for (const char* name : {"tp2pp1", "tp1cp2ringpp1", "tp1cp2ulyssespp1ac"}) schemes.push_back(Scheme::parse(name));
  std::vector<cuda::StageProfile> stages;
  const cost::Profile profile(cuda::profile_gpu(model, schemes, options, &stages));
  CHECK(profile.schemes().size() == schemes.size());
  // One sequence of each length, then 128, 256 and 512 tokens as 2, 4 and 8 packed sequences of 64.
  REQUIRE(stages[0].samples.size() == 7);
  CHECK(stages[0].samples.back().length == 64);
  CHECK(stages[0].samples.back().sequences == 8);
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    CAPTURE(scheme.scheme.name());
    CHECK(scheme.max_len > 0);
    CHECK(scheme.latency(512) > 0);
  }
  REQUIRE(profile.spec().memory.has_value());
  CHECK(profile.spec().memory->activation_bytes.count(2) == 1);
  // A lane of TP 2 holds about half the activations of the whole stage at TP 1.
  CHECK(stages[2].activation_bytes_per_token < stages[0].activation_bytes_per_token);
  const auto document = io::to_document(profile);
  CHECK(io::from_document<cost::Profile>(io::parse(document.dump(), "profile")).spec().schemes ==
        profile.spec().schemes);
}

TEST_CASE("executor cuda: a run's Chrome trace is valid JSON with an event per instruction" *
          doctest::test_suite("gpu")) {
  const Job job = gpu_jobs().front();
  const RunReport report = cuda::run_local(job);
  const io::json trace = io::parse(chrome_trace(job, report).dump(), "trace");
  std::size_t instructions = 0, events = 0;
  for (const PipelineJob& pipeline : job.pipelines)
    for (const auto& list : pipeline.plan.ranks) instructions += list.size();
  for (const io::json& event : trace.at("traceEvents"))
    if (event.at("ph") == "X" && event.at("tid").get<int>() % 2 == 0) ++events;
  CHECK(events == instructions);
  CHECK(std::isfinite(timing_table(job, report).replayed));
}
