// Seeded fuzzing of the cost models' extremes: profiles whose latency coefficients, MaxLen and memory model
// take values from 0 and the smallest denormal to 1e308, with random batches (one sequence sometimes longer
// than every MaxLen), run through plan_iteration, the simulated choice among candidates, DynaPipe's pipeline
// planner and the packing heuristic. Each case either succeeds with a plan its validator accepts, or raises
// invalid_input or infeasible with a one-line message; anything else fails the test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "sluice/assign/packing.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/core/error.hpp"
#include "sluice/core/random.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/plan_pipeline.hpp"

using namespace sluice;

namespace {

constexpr std::array<double, 10> extremes = {0, 4.9e-324, 1e-30, 1e-20, 1e-9, 1e-4, 1, 1e20, 1e300, 1e308};

// An extreme value, or (most of the time) one of a realistic order of magnitude, so that many profiles plan.
double coefficient(Rng& rng, double realistic) {
  if (rng.uniform() < 0.7) return realistic * (0.5 + rng.uniform());
  return extremes[rng.below(extremes.size())];
}

template <class T, std::size_t N>
T pick(Rng& rng, const std::array<T, N>& values) {
  return values[rng.below(N)];
}

struct Tally {
  int succeeded = 0;
  int refused = 0;     // invalid_input
  int infeasible = 0;  // sluice::infeasible
};

// Runs `work`; a success, invalid_input or infeasible with a one-line message passes, anything else fails, and so
// does an invalid_input whose message holds `never` (what a vetted profile must rule out).
template <class Work>
void expect_clean(const char* what, Tally& tally, Work&& work, std::string_view never = {}) {
  CAPTURE(what);
  try {
    work();
    ++tally.succeeded;
  } catch (const invalid_input& error) {
    const std::string message = error.what();
    CHECK_MESSAGE((!message.empty() && message.find('\n') == std::string::npos), message);
    CHECK_MESSAGE((never.empty() || message.find(never) == std::string::npos), message);
    ++tally.refused;
  } catch (const infeasible& error) {
    const std::string message = error.what();
    CHECK_MESSAGE((!message.empty() && message.find('\n') == std::string::npos), message);
    ++tally.infeasible;
  } catch (const std::exception& error) {
    FAIL_CHECK(what, " raised ", typeid(error).name(), ": ", error.what());
  }
}

cost::ProfileSpec random_spec(Rng& rng, int index) {
  cost::ProfileSpec spec;
  spec.name = "fuzz-" + std::to_string(index);
  spec.gpus = pick(rng, std::array<std::int64_t, 4>{1, 2, 4, 8});
  spec.model = {"fuzz", static_cast<int>(rng.uniform_int(1, 32)), rng.uniform_int(1, 8192), rng.uniform_int(1, 65536)};
  const bool memory_model = rng.uniform() < 0.8;
  if (memory_model) {
    cost::TransformerMemorySpec memory;
    memory.layers = spec.model.layers;
    memory.hidden = spec.model.hidden;
    memory.vocab = spec.model.vocab;
    for (int tp = 1; tp <= 8; tp *= 2)
      memory.activation_bytes[tp] = rng.uniform() < 0.5 ? 40.0 : pick(rng, std::array{4.9e-324, 1e-12, 1e20, 1e300});
    memory.state_bytes = rng.uniform() < 0.5 ? 210.0 : pick(rng, std::array{1e-300, 1e-10, 1e20, 1e300});
    memory.gpu_memory_bytes = rng.uniform() < 0.5 ? 8e10 : pick(rng, std::array{1.0, 1e3, 1e20, 1e300, 1e308});
    memory.granularity = pick(rng, std::array<std::int64_t, 3>{1, 128, 4096});
    spec.memory = memory;
  }
  for (int tp = 1; tp <= spec.gpus; tp *= 2)
    for (int pp = 1; tp * pp <= spec.gpus; pp *= 2) {
      if (rng.uniform() < 0.3) continue;
      cost::SchemeEntry entry{
          Scheme(tp, pp),
          cost::QuadraticLatency(coefficient(rng, 1e-9), coefficient(rng, 5e-5), coefficient(rng, 1e-2)), std::nullopt,
          std::nullopt};
      if (!memory_model || rng.uniform() < 0.2)
        entry.max_len = pick(rng, std::array<std::int64_t, 8>{0, 1, 128, 4096, 32768, 1 << 20, std::int64_t{1} << 40,
                                                              std::int64_t{1} << 62});
      if (rng.uniform() < 0.3) entry.util_len = pick(rng, std::array<std::int64_t, 3>{1, 512, std::int64_t{1} << 40});
      // Last-stage work from none of b and c to more than all of them, on pipelines and (refused) on one stage.
      if (rng.uniform() < 0.3) {
        const double share = pick(rng, std::array{0.0, 0.25, 1.0, 4.0});
        const double b = entry.latency.b() * share, c = entry.latency.c() * share;
        if (std::isfinite(b) && std::isfinite(c)) entry.last_stage = cost::LastStageWork(b, c);
      }
      spec.schemes.push_back(entry);
    }
  if (spec.schemes.empty())
    spec.schemes.push_back({Scheme(1, 1), cost::QuadraticLatency(coefficient(rng, 1e-9), 0, 0), 4096, std::nullopt});
  return spec;
}

// Lengths in [1, context] (spread over orders of magnitude), sometimes one longer than every MaxLen.
std::vector<Sequence> random_batch(Rng& rng, std::int64_t context, std::int64_t widest) {
  std::vector<Sequence> batch;
  const auto count = rng.uniform_int(1, 24);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t top =
        std::min<std::int64_t>(context, std::int64_t{1} << static_cast<int>(rng.uniform_int(0, 40)));
    batch.emplace_back(i, rng.uniform_int(1, std::max<std::int64_t>(top, 1)));
  }
  if (rng.uniform() < 0.1 && widest < std::numeric_limits<std::int64_t>::max()) batch.emplace_back(count, widest + 1);
  return batch;
}

std::vector<Strategy> candidates_of(Rng& rng, const cost::Profile& profile) {
  std::vector<Strategy> candidates;
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    const auto most = static_cast<int>(profile.gpus() / scheme.scheme.gpus());
    candidates.push_back(Strategy::homogeneous(scheme.scheme, static_cast<int>(rng.uniform_int(1, most))));
  }
  // A heterogeneous one: the widest scheme once, the rest of the cluster in the narrowest.
  const cost::SchemeCost& wide = profile.schemes().front();
  const cost::SchemeCost& narrow = profile.schemes().back();
  const std::int64_t rest = profile.gpus() - wide.scheme.gpus();
  if (wide.scheme != narrow.scheme && rest >= narrow.scheme.gpus())
    candidates.push_back(Strategy({{wide.scheme, 1}, {narrow.scheme, static_cast<int>(rest / narrow.scheme.gpus())}}));
  return candidates;
}

schedule::ProblemOptions random_problem_options(Rng& rng) {
  schedule::ProblemOptions options;
  options.hidden = pick(rng, std::array<std::int64_t, 4>{1, 4096, 1 << 20, std::int64_t{1} << 40});
  options.link.latency = pick(rng, std::array{0.0, 1e-5, 1.0});
  options.link.bandwidth = pick(rng, std::array{1e6, 1e11, 1e13, std::numeric_limits<double>::infinity()});
  return options;
}

// DynaPipe on one scheme: the micro-batch DP, replica balancing, a schedule per replica.
void plan_pipeline_case(Rng& rng, const microbatch::QuadraticStageCost& model, const cost::LastStageWork& last_stage,
                        double memory_limit, int stages, std::span<const Sequence> batch,
                        const schedule::ProblemOptions& problem) {
  const std::vector<microbatch::Sample> samples = microbatch::samples_of(batch);
  schedule::PipelinePlanOptions options;
  options.stages = stages;
  options.last_stage = last_stage;
  options.replicas = static_cast<int>(rng.uniform_int(1, 3));
  options.micro_batch_memory = memory_limit;
  options.problem = problem;
  const std::span<const microbatch::Sample> span(samples);
  const schedule::PipelineRunPlan plan = schedule::plan_pipeline(span, model, options);
  schedule::validate(plan, span, model, options);
}

}  // namespace

TEST_CASE("cost fuzz: extreme profiles plan, schedule and simulate, or are refused in one line") {
  Rng rng(20240611);
#ifdef NDEBUG
  constexpr int cases = 3000;
#else
  constexpr int cases = 400;
#endif
  Tally profiles, plans, simulated, pipelines, packings;
  for (int k = 0; k < cases; ++k) {
    CAPTURE(k);
    const cost::ProfileSpec spec = random_spec(rng, k);
    std::optional<cost::Profile> profile;
    expect_clean("profile", profiles, [&] { profile.emplace(spec); });

    // The raw path: a scheme's coefficients straight into the packer and the DP, with no profile to refuse them.
    const cost::SchemeEntry& entry = spec.schemes[rng.below(spec.schemes.size())];
    const std::int64_t raw_max_len = entry.max_len.value_or(32768);
    if (raw_max_len > 0) {
      const std::vector<Sequence> batch = random_batch(rng, raw_max_len, raw_max_len);
      const cost::SchemeCost raw{entry.scheme, entry.latency, raw_max_len, entry.util_len.value_or(1), std::nullopt};
      expect_clean("pack (raw)", packings, [&] {
        const assign::Packing packing = assign::pack(batch, raw);
        assign::validate(packing, batch, raw);
      });
      expect_clean("plan_pipeline (raw)", pipelines, [&] {
        plan_pipeline_case(rng, microbatch::QuadraticStageCost(entry.latency, 2.0), entry.last_stage, 1e12,
                           entry.scheme.pp(), batch, random_problem_options(rng));
      });
    }
    if (!profile) continue;

    std::int64_t widest = 0;
    for (const cost::SchemeCost& scheme : profile->schemes()) widest = std::max(widest, scheme.max_len);
    const std::vector<Sequence> batch = random_batch(rng, std::max<std::int64_t>(widest, 1), widest);
    const std::vector<Strategy> candidates = candidates_of(rng, *profile);
    assign::PlanOptions plan_options;
    plan_options.dispatch.trials = 4;
    expect_clean("plan_iteration", plans, [&] {
      const assign::IterationPlan plan = assign::plan_iteration(batch, candidates, *profile, plan_options);
      assign::validate(plan, batch, *profile);
    });
    const schedule::ProblemOptions problem = random_problem_options(rng);
    // A profile's last-stage work always leaves the other stages time.
    constexpr std::string_view no_time_left = "no more than that stage's own work";
    expect_clean(
        "plan_simulated_iteration", simulated,
        [&] {
          const plan::SimulatedIteration iteration =
              plan::plan_simulated_iteration(batch, candidates, *profile, plan_options, {}, problem);
          plan::validate(iteration, batch, candidates, *profile, plan_options, problem);
        },
        no_time_left);
    const cost::SchemeCost& scheme = profile->schemes()[rng.below(profile->schemes().size())];
    expect_clean(
        "plan_pipeline", pipelines,
        [&] {
          const microbatch::StageCostSetup setup = microbatch::stage_cost(scheme);
          plan_pipeline_case(rng, setup.model, setup.last_stage, setup.memory_limit, scheme.scheme.pp(), batch,
                             problem);
        },
        no_time_left);
  }
  MESSAGE("profiles: ", profiles.succeeded, " accepted, ", profiles.refused,
          " refused; plan_iteration: ", plans.succeeded, " planned, ", plans.refused, " refused, ", plans.infeasible,
          " infeasible; simulated: ", simulated.succeeded, "/", simulated.refused, "/", simulated.infeasible,
          "; plan_pipeline: ", pipelines.succeeded, "/", pipelines.refused, "/", pipelines.infeasible,
          "; pack (raw): ", packings.succeeded, "/", packings.refused, "/", packings.infeasible);
  // The generator reaches both outcomes of every stage.
  CHECK(profiles.succeeded > 0);
  CHECK(profiles.refused > 0);
  CHECK(plans.succeeded > 0);
  CHECK(simulated.succeeded > 0);
  CHECK(pipelines.succeeded > 0);
  CHECK(packings.refused > 0);
}
