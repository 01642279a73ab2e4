#pragma once
// `sluice propose`: the candidate strategies worth considering for a dataset and a profile (Hydraulis §7).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iomanip>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "inputs.hpp"
#include "options.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/proposal_json.hpp"
#include "sluice/proposal/max_len.hpp"
#include "sluice/proposal/propose.hpp"
#include "sluice/proposal/sampled.hpp"

namespace sluice::cli {

inline constexpr std::string_view propose_usage =
    "usage: sluice propose [--profile P] [--lengths F] [--gpus N] [--context L] [--tokens T] [--step S]\n"
    "                      [--relaxed] [--length-step W] [--candidates K] [--cross-node-tp] [--eq2-cost]\n"
    "                      [--no-fill] [--sampled [--batches N] [--held-out N] [--seed S] [--trials T]]\n"
    "                      [--cp C1,C2|auto [--cp-kinds K]] [--ac] [--json]\n"
    "\n"
    "Proposes the heterogeneous strategies worth considering before training: the strategy-proposal DP\n"
    "over GPU budgets and lengths, for every maximum length L up to --context, from the dataset's\n"
    "length distribution; with --relaxed, also the continuous relaxation and its nearby integer strategies.\n"
    "\n"
    "  --profile P      profile JSON file or bundled name (default llama2-7b)\n"
    "  --lengths F      length file or bundled name (default man-pages)\n"
    "  --gpus N         cluster size (default: the profile's own)\n"
    "  --context L      Lmax, the longest length planned for; longer sequences are truncated to it (default: the\n"
    "                   longest sequence, or the longest MaxLen of a usable scheme when that is shorter; plan\n"
    "                   --strategies of this proposal's JSON uses it as its context)\n"
    "  --tokens T       tokens per iteration, to scale the dataset to one iteration (default 100000)\n"
    "  --step S         GPU budget step of the DP, in GPUs: 1, 4, or 0.1 with --relaxed\n"
    "                   (default 1, or 0.1 with --relaxed)\n"
    "  --relaxed        also run the continuous relaxation (replica step 0.1) and round its solutions\n"
    "  --length-step W  length grid in tokens (default 128)\n"
    "  --candidates K   at most K candidates (default 8)\n"
    "  --cross-node-tp  allow schemes whose TP spans nodes (TP > the profile's gpus_per_node)\n"
    "  --cp C1,C2       also schemes with context parallelism of these degrees (2 to 1024), derived from\n"
    "                   the profile's ⟨TP, PP⟩ schemes (docs/cost-models.md; needs the profile's model.heads)\n"
    "                   auto: the powers of two from 2 to the smallest degree that holds the context, of\n"
    "                   ring and Ulysses unless --cp-kinds (none when the profile's schemes hold it)\n"
    "  --cp-kinds K     the CP kinds those may use: ring (the default), ulysses, hybrid, comma-separated\n"
    "  --ac             also every scheme with full activation recomputation\n"
    "  --eq2-cost       per sequence a·l² + b·l, as the dispatch stage (Eq. 2) charges it, not a·l² + b·l + c\n"
    "                   as the authors' proposal code does\n"
    "  --no-fill        leave out the (PP - 1)·T(longest) pipeline fill term of each interval\n"
    "  --sampled        choose the K candidates by what they deliver: the mean planned time (dispatch + packing\n"
    "                   estimate) of batches of T tokens sampled from the dataset, over a pool of the DP's\n"
    "                   strategies at every max length (both per-sequence costs), the homogeneous ones and\n"
    "                   neighbours of the best\n"
    "  --batches N      with --sampled, batches the set is chosen on (default 48)\n"
    "  --held-out N     with --sampled, the next batches, which only measure (default 32)\n"
    "  --seed S         with --sampled, the batch sampler's and dispatch's seed (default 0)\n"
    "  --trials T       with --sampled, dispatch trials per plan (default 4)\n"
    "  --json           print one sluice.proposal JSON document (with --sampled, sluice.sampled_proposal)\n";

namespace propose_inputs {

// "0.1", "1", "4", "2.5" GPUs as tenths.
inline std::int64_t parse_step(std::string_view text) {
  std::int64_t tenths = 0;
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9' && tenths < (std::int64_t{1} << 40))
    tenths = tenths * 10 + (text[i++] - '0');
  bool valid = i > 0 && tenths < (std::int64_t{1} << 40);
  tenths *= 10;
  if (valid && i < text.size()) {
    valid = text[i] == '.' && i + 2 == text.size() && text[i + 1] >= '0' && text[i + 1] <= '9';
    if (valid) tenths += text[i + 1] - '0';
  }
  sluice::require(valid && tenths > 0, "option --step: expected a positive number of GPUs with at most one ",
                  "decimal (0.1, 1, 4), got '", text, "'");
  return tenths;
}

}  // namespace propose_inputs

namespace propose_report {

inline void print(std::ostream& out, const proposal::Proposal& result, const data::LengthDataset& dataset,
                  double seconds) {
  const auto& options = result.options;
  out << "propose: " << result.profile << " on " << *options.gpus << " GPUs, " << dataset.source() << ", lengths up to "
      << *options.max_len << " (step " << options.length_step << ")";
  if (dataset.truncated_count() > 0) out << ", " << dataset.truncated_count() << " sequences truncated";
  out << "\n"
      << std::fixed << std::setprecision(0) << "  " << options.tokens_per_iteration
      << " tokens per iteration = " << std::setprecision(1) << result.sequences_per_iteration << " sequences; GPU step "
      << static_cast<double>(options.gpu_step) / 10 << (options.relaxed ? ", relaxed (replica step 0.1)" : "") << "\n";
  out << std::setprecision(3) << "  integer optimum at max length " << result.integer_optimum << " s";
  if (result.relaxed_optimum) out << ", relaxed optimum " << *result.relaxed_optimum << " s";
  out << "\n\n  " << result.candidates.size() << " candidates of " << result.considered << " distinct strategies\n";
  out << "     #  GPUs  estimate (s)  proposed for L in     share  origin            strategy\n";
  static constexpr std::string_view origins[] = {"integer_dp", "relaxed_rounding", "homogeneous"};
  for (std::size_t c = 0; c < result.candidates.size(); ++c) {
    const auto& candidate = result.candidates[c];
    const std::string range = "[" + std::to_string(candidate.min_len) + ", " + std::to_string(candidate.max_len) + "]";
    out << std::setw(6) << c << std::setw(6) << candidate.strategy.gpus() << std::setprecision(3) << std::setw(14)
        << candidate.estimate << "  " << std::left << std::setw(18) << range << std::right << std::setw(7)
        << candidate.share << "  " << std::left << std::setw(18) << origins[static_cast<std::size_t>(candidate.origin)]
        << std::right << candidate.strategy.name() << "\n";
  }
  out << std::setprecision(2)
      << "\n  estimate: the interval objective (seconds per iteration) at the candidate's longest L;\n"
      << "  share: estimated share of iterations whose longest sequence falls in its L range\n"
      << "  proposal took " << seconds * 1e3 << " ms\n";
}

inline void print_sampled(std::ostream& out, const proposal::SampledProposal& result,
                          const data::LengthDataset& dataset, double seconds) {
  const auto& options = result.paper.options;
  out << "propose --sampled: " << result.paper.profile << " on " << *options.gpus << " GPUs, " << dataset.source()
      << ", lengths up to " << *options.max_len;
  if (dataset.truncated_count() > 0) out << ", " << dataset.truncated_count() << " sequences truncated";
  out << "\n"
      << std::fixed << std::setprecision(0) << "  batches of " << options.tokens_per_iteration << " tokens: chosen on "
      << result.choosing_batches << ", measured on the next " << result.held_out_batches << " (seed " << result.seed
      << ", " << result.trials << " dispatch trials per plan)\n"
      << "  pool of " << result.pool_size << " strategies after " << result.rounds << " neighbour rounds, "
      << result.plans << " plans\n\n";
  out << "  " << result.candidates.size() << " candidates\n     #  GPUs  wins  source       strategy\n";
  static constexpr std::string_view sources[] = {"proposal_dp", "homogeneous", "neighbour"};
  for (std::size_t c = 0; c < result.candidates.size(); ++c) {
    const auto& candidate = result.candidates[c];
    out << std::setw(6) << c << std::setw(6) << candidate.strategy.gpus() << std::setw(6) << candidate.wins << "  "
        << std::left << std::setw(13) << sources[static_cast<std::size_t>(candidate.source)] << std::right
        << candidate.strategy.name() << "\n";
  }
  out << std::setprecision(3) << "\n  mean planned time (s)             choosing  held-out\n"
      << "    sampled set                     " << std::setw(8) << result.choosing_mean << std::setw(10)
      << result.held_out_mean << "\n"
      << "    the DP's " << std::left << std::setw(23)
      << (std::to_string(result.paper.candidates.size()) + " candidates") << std::right << std::setw(8)
      << result.paper_choosing_mean << std::setw(10) << result.paper_held_out_mean << "\n"
      << "    best homogeneous, " << std::left << std::setw(14) << result.best_homogeneous << std::right << std::setw(8)
      << "-" << std::setw(10) << result.best_homogeneous_held_out_mean << "\n"
      << "  held out: " << std::setprecision(2) << result.paper_held_out_mean / result.held_out_mean
      << "x faster than the DP's candidates, " << result.best_homogeneous_held_out_mean / result.held_out_mean
      << "x than the best homogeneous strategy\n"
      << "  wins: choosing batches on which the candidate plans fastest\n"
      << "  proposal took " << seconds << " s\n";
}

}  // namespace propose_report

// The options of `sluice propose` that `sluice plan --propose` shares.
inline proposal::ProposeOptions propose_options(const Options& options, const cost::Profile& profile) {
  proposal::ProposeOptions result;
  result.gpus = profile.gpus();
  result.relaxed = options.flag("relaxed");
  result.gpu_step = options.text("step") ? propose_inputs::parse_step(*options.text("step")) : result.relaxed ? 1 : 10;
  if (const auto step = options.integer("length-step")) result.length_step = *step;
  if (const auto tokens = options.integer("tokens")) result.tokens_per_iteration = static_cast<double>(*tokens);
  if (const auto candidates = options.integer("candidates")) result.max_candidates = *candidates;
  result.tp_within_node = !options.flag("cross-node-tp");
  result.sequence_constant = !options.flag("eq2-cost");
  result.fill_term = !options.flag("no-fill");
  return result;
}

// Strategies are proposed on a grid of lengths up to the context: it must hold one step.
inline void require_context_on_grid(std::int64_t context, std::int64_t length_step) {
  sluice::require(context >= length_step, "--context ", context, " is shorter than the length grid's step ",
                  length_step, " that strategies are proposed on");
}

// A context no usable scheme holds is refused before proposing, naming what would hold it: TP across nodes or a CP
// degree (the proposal alone cannot derive CP schemes); else the proposal's own error stands.
inline void require_context_held(const cost::Profile& profile, const proposal::ProposeOptions& settings) {
  if (proposal::widest_usable_max_len(profile, settings) >= *settings.max_len) return;
  const std::string advice = cp_advice(profile, *settings.max_len, !settings.tp_within_node);
  if (advice.empty()) return;
  proposal::ProposeOptions across = settings;
  across.tp_within_node = false;
  const bool across_nodes_would_hold =
      settings.tp_within_node && proposal::widest_usable_max_len(profile, across) >= *settings.max_len;
  sluice::fail("no scheme of ", profile.name(), " on ", *settings.gpus, " GPUs holds ", *settings.max_len, " tokens",
               across_nodes_would_hold ? " with TP within a node (try --cross-node-tp)" : "", advice);
}

// Lmax: --context, else proposal::default_max_len of the dataset (context.hpp: the rule of every command).
inline std::int64_t max_len_of(const Options& options, const data::LengthDataset& dataset, const cost::Profile& profile,
                               const proposal::ProposeOptions& settings) {
  if (const auto context = options.integer("context")) {
    require_context_on_grid(*context, settings.length_step);
    return *context;
  }
  return proposal::default_max_len(dataset, profile, settings);
}

inline int propose(std::span<const std::string_view> args, std::ostream& out) {
  const Options options(args,
                        {"profile", "lengths", "gpus", "context", "tokens", "step", "length-step", "candidates",
                         "batches", "held-out", "seed", "trials", "cp", "cp-kinds"},
                        {"relaxed", "cross-node-tp", "eq2-cost", "no-fill", "sampled", "ac", "json", "help"});
  if (options.flag("help")) {
    out << propose_usage;
    return 0;
  }
  const bool sampled = options.flag("sampled");
  for (const std::string_view name : {"batches", "held-out", "seed", "trials"})
    sluice::require(sampled || !options.text(name), "option --", name, " needs --sampled");
  const data::LengthDataset loaded = load_lengths(options);
  const cost::Profile profile = load_planning_profile(options, loaded);
  proposal::ProposeOptions settings = propose_options(options, profile);

  settings.max_len = max_len_of(options, loaded, profile, settings);
  require_context_held(profile, settings);
  const data::LengthDataset dataset = loaded.truncated(*settings.max_len);

  if (sampled) {
    proposal::SampledOptions sampling;
    sampling.paper = settings;
    if (const auto batches = options.integer("batches")) sampling.choosing_batches = static_cast<int>(*batches);
    if (const auto held_out = options.integer("held-out")) sampling.held_out_batches = static_cast<int>(*held_out);
    sampling.seed = sampling.dispatch.seed = seed_of(options);
    if (const auto trials = options.integer("trials")) sampling.dispatch.trials = static_cast<int>(*trials);
    const auto start = std::chrono::steady_clock::now();
    const proposal::SampledProposal result = proposal::propose_sampled(dataset, profile, sampling);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    proposal::validate(result, profile);
    if (options.flag("json")) {
      out << io::to_document(result).dump(2) << "\n";
    } else {
      propose_report::print_sampled(out, result, dataset, elapsed.count());
    }
    return 0;
  }

  const auto start = std::chrono::steady_clock::now();
  const proposal::Proposal result = proposal::propose(dataset, profile, settings);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  proposal::validate(result, profile);

  if (options.flag("json")) {
    out << io::to_document(result).dump(2) << "\n";
  } else {
    propose_report::print(out, result, dataset, elapsed.count());
  }
  return 0;
}

}  // namespace sluice::cli
