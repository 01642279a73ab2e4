// How good are the proposed candidates? For LLaMA-32B on 64 GPUs and 100,000 synthetic long-tailed
// lengths (seed 1), 50 batches of 200,000 tokens are planned by assign::plan_iteration (dispatch, packing,
// estimate) over: the whole proposed candidate set (the per-iteration choice), each proposed candidate
// alone, and each homogeneous strategy that holds the context; with the authors' interval cost (c per
// sequence) and with the dispatch stage's (Eq. 2). docs/proposal.md reports the output.
#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/proposal/propose.hpp"

namespace {

using namespace sluice;

constexpr std::int64_t gpus = 64;
constexpr std::int64_t tokens = 200'000;
constexpr int batches = 50;

// Mean plan_iteration estimate over the batches, and how often each candidate was chosen.
struct Outcome {
  double mean = 0;
  std::map<std::string, int> chosen;
};

Outcome evaluate(const std::vector<data::Batch>& sample, const std::vector<Strategy>& candidates,
                 const cost::Profile& profile) {
  Outcome outcome;
  for (const data::Batch& batch : sample) {
    const assign::IterationPlan plan = assign::plan_iteration(batch.sequences, candidates, profile);
    assign::validate(plan, batch.sequences, profile);
    outcome.mean += plan.estimate / batches;
    ++outcome.chosen[plan.strategy.name()];
  }
  return outcome;
}

void study(const std::string& title, const data::LengthDataset& lengths, const cost::Profile& profile,
           proposal::ProposeOptions options) {
  const std::int64_t context = *options.max_len;
  const data::LengthDataset dataset = lengths.truncated(context);
  data::BatchSampler sampler(dataset, {.tokens_per_batch = tokens, .seed = 1});
  std::vector<data::Batch> sample;
  for (int b = 0; b < batches; ++b) sample.push_back(sampler.next());

  std::cout << "## " << title << "\n\n";
  std::cout << "| candidates | mean estimate (s) | vs best homogeneous |\n|---|---|---|\n";
  // The best homogeneous strategy: every scheme that holds the context, all GPUs as its copies.
  double homogeneous = std::numeric_limits<double>::infinity();
  std::string homogeneous_name;
  for (const cost::SchemeCost& scheme : profile.schemes()) {
    if (scheme.max_len < context) continue;
    if (options.tp_within_node && scheme.scheme.tp() > profile.spec().gpus_per_node) continue;
    const Strategy strategy = Strategy::homogeneous(scheme.scheme, static_cast<int>(gpus / scheme.scheme.gpus()));
    const double mean = evaluate(sample, {strategy}, profile).mean;
    if (mean < homogeneous) {
      homogeneous = mean;
      homogeneous_name = strategy.name();
    }
  }
  std::cout << std::fixed << std::setprecision(3) << "| best homogeneous: " << homogeneous_name << " | "
            << homogeneous << " | 1.000 |\n";

  for (const auto& [constant, relaxed] : {std::pair{true, false}, {true, true}, {false, false}, {false, true}}) {
    options.sequence_constant = constant;
    options.relaxed = relaxed;
    options.gpu_step = relaxed ? 1 : 10;
    const proposal::Proposal result = proposal::propose(dataset, profile, options);
    const std::vector<Strategy> candidates = result.strategies();
    const std::string kind = std::string(constant ? "c per sequence" : "Eq. 2 cost") +
                             (relaxed ? ", relaxed (n, d step 0.1)" : ", integer (n step 1)");
    const Outcome all = evaluate(sample, candidates, profile);
    std::cout << "| " << kind << ": all " << candidates.size() << " proposed, chosen per iteration | " << all.mean
              << " | " << homogeneous / all.mean << " |\n";
    double single = std::numeric_limits<double>::infinity();
    std::string single_name;
    for (const Strategy& strategy : candidates) {
      if (profile.pipelines(strategy).front().max_len < context) continue;
      const double mean = evaluate(sample, {strategy}, profile).mean;
      if (mean < single) {
        single = mean;
        single_name = strategy.name();
      }
    }
    std::cout << "| " << kind << ": best single proposed, " << single_name << " | " << single << " | "
              << homogeneous / single << " |\n";
  }
  std::cout << "\n";
}

}  // namespace

int main() {
  const cost::Profile profile =
      io::read_document<cost::Profile>(io::resolve_data_file("llama2-32b", "profiles")).with_gpus(gpus);
  const data::LengthDataset lengths(data::synthetic_lengths({.count = 100'000, .seed = 1}), "synthetic");
  proposal::ProposeOptions options;
  options.tokens_per_iteration = tokens;

  options.max_len = 32768;
  options.tp_within_node = false;  // only tp16pp1 holds 32768 tokens
  study("context 32768, TP across nodes allowed", lengths, profile, options);

  options.max_len = 27904;  // the longest MaxLen with TP within a node (tp8pp4)
  options.tp_within_node = true;
  study("context 27904, TP within a node", lengths, profile, options);
  return 0;
}
