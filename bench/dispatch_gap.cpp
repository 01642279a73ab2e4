// The dispatch numbers of docs/assign-dispatch.md, regenerated:
//   sluice_dispatch_gap [cbc_seconds = 30] [iterations = 10] [batches = 50]
// 1. What local search gains over the best of 100 greedy trials, with and without the longest-first
//    trial, on `batches` batches of the 64- and 1024-GPU scenarios, and how far each is from the
//    solver-free lower bound.
// 2. Greedy + local search against CBC (dispatch_exact, `cbc_seconds` per solve) on the first `iterations`
//    batches of the 64-GPU scenario.
// 3. The same, packed into plans, where the V step matters: LLaMA-32B on 64 GPUs as 4*tp16pp1, the first
//    `iterations` batches of 200K tokens of the bundled `cpython-stdlib` lengths (seed 0, context 32768) that
//    hold a sequence of at least 29,000 tokens.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "assign_fixtures.hpp"
#include "sluice/assign/dispatch.hpp"
#include "sluice/assign/dispatch_cbc.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/readers.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"

namespace {

const char* status_name(sluice::solver::SolveStatus status) {
  switch (status) {
    case sluice::solver::SolveStatus::optimal: return "optimal";
    case sluice::solver::SolveStatus::feasible: return "feasible";
    case sluice::solver::SolveStatus::infeasible: return "infeasible";
    case sluice::solver::SolveStatus::unbounded: return "unbounded";
    case sluice::solver::SolveStatus::no_solution: return "no solution";
  }
  return "?";
}

void local_search_gain(int gpus, int batches, bool longest_first) {
  double gain_sum = 0;
  double gain_max = 0;
  int improved = 0;
  int at_bound = 0;
  double plain_gap = 0;
  double searched_gap = 0;
  for (int b = 1; b <= batches; ++b) {
    const sluice::bench::AssignScenario scenario = sluice::bench::scenario(gpus, b);
    const sluice::assign::DispatchOptions options{
        .trials = 100, .threads = 1, .seed = 0, .local_search = false, .longest_first = longest_first};
    const sluice::assign::Dispatch plain = sluice::assign::dispatch_greedy(scenario.batch, scenario.pipelines, options);
    sluice::assign::DispatchOptions with_search = options;
    with_search.local_search = true;
    const sluice::assign::Dispatch searched =
        sluice::assign::dispatch_greedy(scenario.batch, scenario.pipelines, with_search);
    const double gain = (plain.objective - searched.objective) / plain.objective;
    gain_sum += gain;
    gain_max = std::max(gain_max, gain);
    improved += gain > 0 ? 1 : 0;
    at_bound += searched.objective <= searched.lower_bound * (1 + 1e-9) ? 1 : 0;
    plain_gap += plain.objective / plain.lower_bound - 1;
    searched_gap += searched.objective / searched.lower_bound - 1;
  }
  std::printf("| %d | %s | %d | %d | %.3f%% | %.3f%% | %.3f%% | %.3f%% | %d |\n", gpus, longest_first ? "yes" : "no",
              batches, improved, 100 * gain_sum / batches, 100 * gain_max, 100 * plain_gap / batches,
              100 * searched_gap / batches, at_bound);
}

// The slowest packed pipeline of a dispatch: what a plan of it reports.
double packed(std::span<const sluice::Sequence> batch, std::span<const sluice::cost::SchemeCost> pipelines,
              std::span<const int> pipeline_of) {
  std::vector<std::vector<sluice::Sequence>> assigned(pipelines.size());
  for (std::size_t i = 0; i < batch.size(); ++i) assigned[static_cast<std::size_t>(pipeline_of[i])].push_back(batch[i]);
  double slowest = 0;
  for (std::size_t p = 0; p < pipelines.size(); ++p)
    if (!assigned[p].empty()) slowest = std::max(slowest, sluice::assign::pack(assigned[p], pipelines[p]).estimate);
  return slowest;
}

void near_max_len(double cbc_seconds, int iterations) {
  using namespace sluice;
  const cost::Profile profile =
      io::read_document<cost::Profile>(io::resolve_data_file("llama2-32b", "profiles")).with_gpus(64);
  const data::LengthDataset dataset =
      data::LengthDataset(data::read_lengths(io::resolve_data_file("cpython-stdlib", "lengths")), "cpython-stdlib")
          .truncated(32768);
  data::BatchSampler sampler(dataset, {.tokens_per_batch = 200'000, .seed = 0});
  const Strategy strategy = Strategy::parse("4*tp16pp1");
  std::vector<cost::SchemeCost> pipelines;
  for (const Pipeline& pipeline : profile.pipelines(strategy)) pipelines.push_back(profile.at(pipeline.scheme));
  std::printf("| batch | sequences | longest | plan | CBC's dispatch packed | CBC Eq. 3 | status | plan / CBC − 1 |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (int b = 0, shown = 0; shown < iterations && b < 1000; ++b) {
    const std::vector<Sequence> batch = sampler.next().sequences;
    if (longest_length(batch) < 29'000) continue;
    ++shown;
    const assign::IterationPlan plan = assign::plan_iteration(batch, std::span(&strategy, 1), profile);
    const assign::ExactDispatch exact = assign::dispatch_exact(batch, pipelines, {.time_limit_seconds = cbc_seconds});
    const double cbc = packed(batch, pipelines, exact.dispatch.pipeline_of);
    std::printf("| %d | %zu | %lld | %.4f | %.4f | %.4f | %s | %.2f%% |\n", b, batch.size(),
                static_cast<long long>(longest_length(batch)), plan.estimate, cbc, exact.dispatch.objective,
                status_name(exact.status), 100 * (plan.estimate / cbc - 1));
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double cbc_seconds = argc > 1 ? std::atof(argv[1]) : 30.0;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 10;
  const int batches = argc > 3 ? std::atoi(argv[3]) : 50;
  if (!(cbc_seconds > 0) || iterations < 1 || batches < 1) {
    std::fprintf(stderr, "usage: sluice_dispatch_gap [cbc_seconds > 0] [iterations >= 1] [batches >= 1]\n");
    return 2;
  }

  std::printf("Local search over the best of 100 greedy trials (seed 0), batches 1..%d:\n\n", batches);
  std::printf(
      "| GPUs | longest-first trial | batches | improved | mean gain | max gain | greedy / bound − 1 "
      "| + local search / bound − 1 | at the bound |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const int gpus : {64, 1024}) {
    for (const bool longest_first : {false, true}) local_search_gain(gpus, batches, longest_first);
  }

  std::printf("\nGreedy + local search vs CBC (%g s limit), 64-GPU scenario:\n\n", cbc_seconds);
  std::printf(
      "| batch | sequences | greedy | CBC | CBC bound | status | greedy / CBC − 1 | CBC gap "
      "| greedy / bound − 1 | lower bound | CBC s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int b = 1; b <= iterations; ++b) {
    const sluice::bench::AssignScenario scenario = sluice::bench::scenario(64, b);
    const sluice::assign::Dispatch greedy = sluice::assign::dispatch_greedy(scenario.batch, scenario.pipelines);
    const sluice::assign::ExactDispatch exact =
        sluice::assign::dispatch_exact(scenario.batch, scenario.pipelines, {.time_limit_seconds = cbc_seconds});
    const double cbc = exact.dispatch.objective;
    const double bound = std::max(exact.best_bound, greedy.lower_bound);
    std::printf("| %d | %zu | %.4f | %.4f | %.4f | %s | %.3f%% | %.3f%% | %.3f%% | %.4f | %.1f |\n", b,
                scenario.batch.size(), greedy.objective, cbc, exact.best_bound, status_name(exact.status),
                100 * (greedy.objective / cbc - 1), 100 * (cbc / bound - 1), 100 * (greedy.objective / bound - 1),
                greedy.lower_bound, exact.seconds);
    std::fflush(stdout);
  }

  std::printf(
      "\nPlans where the V step matters: 4*tp16pp1 (LLaMA-32B, 64 GPUs), cpython-stdlib batches with a "
      "sequence of at least 29,000 tokens, CBC %g s:\n\n",
      cbc_seconds);
  near_max_len(cbc_seconds, iterations);
  return 0;
}
