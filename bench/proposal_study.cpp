// How good are the proposed candidates? For LLaMA-32B on 64 GPUs and 100,000 synthetic long-tailed
// lengths (seed 1), 50 batches of 200,000 tokens are planned by assign::plan_iteration (dispatch, packing,
// estimate) over: the whole proposed candidate set (the per-iteration choice), each proposed candidate
// alone, and each homogeneous strategy that holds the context; with the authors' interval cost (c per
// sequence) and with the dispatch stage's (Eq. 2). Then the sampled proposal (proposal::propose_sampled) against
// the other candidate sets, on held-out batches of the bundled data sets. docs/proposal.md reports the output.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/assign/plan.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/proposal/propose.hpp"
#include "sluice/proposal/sampled.hpp"

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
  std::cout << std::fixed << std::setprecision(3) << "| best homogeneous: " << homogeneous_name << " | " << homogeneous
            << " | 1.000 |\n";

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

// Mean planned time (plan_iteration's estimate, default dispatch: 100 trials) of a candidate set over the batches.
double held_out_mean(const std::vector<data::Batch>& sample, const std::vector<Strategy>& candidates,
                     const cost::Profile& profile) {
  double sum = 0;
  for (const data::Batch& batch : sample) sum += assign::plan_iteration(batch.sequences, candidates, profile).estimate;
  return sum / static_cast<double>(sample.size());
}

struct Setting {
  std::string_view model;
  std::int64_t gpus;
  bool cross_node_tp;
};

// Per data set, model and tokens per iteration: the held-out mean planned time of the best homogeneous strategy,
// the paper-objective set (c per sequence), the Eq. 2 set, the authors' pair (32B only) and the sampled set.
void sampled_study() {
  constexpr std::int64_t context = 32768;
  const Setting settings[] = {{"llama2-7b", 16, false}, {"llama2-13b", 32, false}, {"llama2-32b", 64, true}};
  const std::vector<Strategy> authors = {Strategy::parse("4*tp16pp1"), Strategy::parse("1*tp16pp1+6*tp8pp1")};
  std::cout << "## sampled proposal against the other candidate sets (held-out batches)\n\n"
            << "| data | model, GPUs | tokens | best homogeneous | paper objective | Eq. 2 cost | authors' pair "
               "| sampled | best other / sampled | pool, plans, time |\n"
            << "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string_view data_set : {"man-pages", "cpython-stdlib"}) {
    const data::LengthDataset dataset =
        data::LengthDataset::load(io::resolve_data_file(data_set, "lengths")).truncated(context);
    for (const Setting& setting : settings) {
      const cost::Profile profile =
          io::read_document<cost::Profile>(io::resolve_data_file(setting.model, "profiles")).with_gpus(setting.gpus);
      for (const std::int64_t tokens_per_batch : {100'000, 200'000}) {
        proposal::SampledOptions options;
        options.paper.max_len = context;
        options.paper.tokens_per_iteration = static_cast<double>(tokens_per_batch);
        options.paper.tp_within_node = !setting.cross_node_tp;
        const auto start = std::chrono::steady_clock::now();
        const proposal::SampledProposal result = proposal::propose_sampled(dataset, profile, options);
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        proposal::validate(result, profile);
        const std::vector<data::Batch> held_out = proposal::detail::draw_batches(dataset, options).held_out;

        const double homogeneous = held_out_mean(held_out, {Strategy::parse(result.best_homogeneous)}, profile);
        const double paper = held_out_mean(held_out, result.paper.strategies(), profile);
        proposal::ProposeOptions eq2 = options.paper;
        eq2.sequence_constant = false;
        const double eq2_mean = held_out_mean(held_out, proposal::propose(dataset, profile, eq2).strategies(), profile);
        const bool with_authors = setting.gpus == 64;
        const double authors_mean = with_authors ? held_out_mean(held_out, authors, profile) : 0;
        const double sampled = held_out_mean(held_out, result.strategies(), profile);
        double best_other = std::min({homogeneous, paper, eq2_mean});
        if (with_authors) best_other = std::min(best_other, authors_mean);

        std::cout << std::fixed << std::setprecision(3) << "| " << data_set << " | " << setting.model.substr(7) << ", "
                  << setting.gpus << (setting.cross_node_tp ? " (TP across nodes)" : "") << " | "
                  << tokens_per_batch / 1000 << "K | " << homogeneous << " (" << result.best_homogeneous << ") | "
                  << paper << " | " << eq2_mean << " | ";
        if (with_authors) {
          std::cout << authors_mean;
        } else {
          std::cout << "–";
        }
        std::cout << " | " << sampled << " (" << result.candidates.size() << ") | " << best_other / sampled << " | "
                  << result.pool_size << ", " << result.plans << ", " << std::setprecision(1) << elapsed.count()
                  << " s |\n";
      }
    }
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

  sampled_study();
  return 0;
}
