// A seeded, structure-aware fuzzer of every JSON document sluice reads (each document_traits format and the
// Hetu strategy_pool importer). Each starts from a valid document (written by sluice from a valid value, or a
// bundled file), which is mutated: every field (a seeded sample of them in large documents) replaced by every
// JSON type and by integers and floats at and past the bounds of the C++ types, removed, wrapped in an array or
// object, or replaced by nesting just under and just past io::max_json_depth; the text truncated and edited at
// random points; and nesting of 100k objects and 1M arrays. Every case must end in sluice::invalid_input with a
// one-line message naming the source, or in a value read, which its validator then accepts or rejects (a plan's
// validator needs the problem the plan was made for, so a plan edited by hand may read and still fail it): no
// other exception, no crash. Where the writer puts values back in place, a number or boolean read is written
// back unchanged: nothing was rounded, wrapped or coerced on the way in.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fixtures.hpp"
#include "run_documents.hpp"
#include "sluice/assign/plan.hpp"
#include "sluice/compare/compare.hpp"
#include "sluice/core/random.hpp"
#include "sluice/data/dataset.hpp"
#include "sluice/data/sampler.hpp"
#include "sluice/data/synthetic.hpp"
#include "sluice/io/assign_json.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/compare_json.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/cost_json.hpp"
#include "sluice/io/data_json.hpp"
#include "sluice/io/fit_run_json.hpp"
#include "sluice/io/inspect_json.hpp"
#include "sluice/io/microbatch_json.hpp"
#include "sluice/io/plan_run_json.hpp"
#include "sluice/io/proposal_json.hpp"
#include "sluice/io/run_json.hpp"
#include "sluice/io/schedule_json.hpp"
#include "sluice/io/search_json.hpp"
#include "sluice/io/shard_json.hpp"
#include "sluice/io/solver_json.hpp"
#include "sluice/io/strategy_pool.hpp"
#include "sluice/microbatch/balance.hpp"
#include "sluice/microbatch/cost.hpp"
#include "sluice/microbatch/order.hpp"
#include "sluice/microbatch/partition.hpp"
#include "sluice/plan/flex_domain.hpp"
#include "sluice/plan/iteration.hpp"
#include "sluice/proposal/propose.hpp"
#include "sluice/schedule/comm.hpp"
#include "sluice/plan/simulated_iteration.hpp"
#include "sluice/schedule/pipeline.hpp"
#include "sluice/schedule/plan_pipeline.hpp"
#include "sluice/search/search.hpp"
#include "sluice/shard/placement.hpp"
#include "sluice/shard/pull_push.hpp"
#include "support.hpp"

using namespace sluice;

namespace {

using io::json;

// One document kind: a valid document and how the library reads it.
struct Subject {
  std::string name;
  json document;
  // Reads `text` as sluice does, then runs the type's validator. Returns the value written back as a
  // document, or nothing when the validator rejects the value read.
  std::function<std::optional<json>(const std::string& text, const std::string& source)> read;
  // Whether the writer puts every value read back where it was read from (no canonical reordering, no
  // derived fields), so that a number read can be compared with the number written.
  bool writes_back_in_place = true;
};

// Reads a T with io::from_document; `validate` rejects a value by throwing invalid_plan or invalid_input.
template <class T>
Subject make_subject(std::string name, json document, std::function<void(const T&)> validate = {},
                     bool writes_back_in_place = true) {
  auto read = [validate](const std::string& text, const std::string& source) -> std::optional<json> {
    const T value = io::from_document<T>(io::parse(text, source), source);
    if (validate) {
      try {
        validate(value);
      } catch (const invalid_plan&) {
        return std::nullopt;
      } catch (const invalid_input&) {
        return std::nullopt;
      }
    }
    return io::to_document(value);
  };
  return {std::move(name), std::move(document), read, writes_back_in_place};
}

template <class T>
Subject make_subject(std::string name, const T& value, std::function<void(const T&)> validate = {},
                     bool writes_back_in_place = true) {
  return make_subject<T>(std::move(name), io::to_document(value), std::move(validate), writes_back_in_place);
}

json bundled(std::string_view kind, std::string_view file) {
  return io::read_json_file(io::bundled_data_dir() / kind / file);
}

// A strategy_pool file in the Hetu/Hydraulis layout (milliseconds, MiB).
const char* const small_pool_text = R"({
  "strategies": [
    {"tp": 1, "pp": 2, "a": 1.372e-6, "b": 0.09465, "c": 15.05},
    {"tp": 4, "pp": 1, "a": 1.030e-6, "b": 0.05648, "c": 56.70}
  ],
  "memory_regression": {"A": {"tp1": 38, "tp4": 42}, "B": 210, "alpha": 0.75, "gap": 5000, "safe_bound": 6144},
  "model_config": {"H": 4096, "L": 32, "V": 30592},
  "cluster_config": {"gpus_per_node": 8, "gpu_memory_bound": 81252, "utilization_seqlen": {"tp1": 384, "tp4": 768}},
  "comm_cost": {"hetero_dp": 0.1}
})";

std::vector<Subject> core_and_cost_subjects() {
  std::vector<Subject> subjects;
  subjects.push_back(make_subject("strategy", Strategy::parse("2*tp4pp2+1*tp8pp1"), {}, false));
  subjects.push_back(make_subject<cost::Profile>("profile", bundled("profiles", "llama2-7b.json")));
  cost::ProfileSpec stated;
  stated.name = "stated";
  stated.gpus = 8;
  stated.schemes = {{Scheme(8, 1), cost::QuadraticLatency(1e-9, 1e-5, 1e-2), 65536, 1024},
                    {Scheme(2, 2), cost::QuadraticLatency(2e-9, 2e-5, 1e-2), 16384, std::nullopt}};
  subjects.push_back(make_subject("profile_stated", cost::Profile(stated)));
  subjects.push_back(make_subject("latency_fit", cost::FitResult{cost::QuadraticLatency(1e-9, 2e-5, 3e-2), 0.01, 12}));
  subjects.push_back({"strategy_pool", io::parse(small_pool_text, "strategy_pool"),
                      [](const std::string& text, const std::string& source) -> std::optional<json> {
                        const cost::ProfileSpec spec = io::import_strategy_pool(io::parse(text, source), source, 8);
                        return json(cost::Profile(spec));
                      },
                      false});
  return subjects;
}

std::vector<Subject> data_and_assign_subjects() {
  std::vector<Subject> subjects;
  const data::LengthDataset dataset = data::LengthDataset({5, 1, 9, 3, 700, 64, 300}, "mem").truncated(600);
  subjects.push_back(make_subject("length_stats", dataset.stats()));
  subjects.push_back(make_subject("length_histogram", dataset.histogram(100)));

  const cost::Profile profile = profile7b();
  const std::vector<Strategy> candidates = {Strategy::parse("2*tp8pp1"), Strategy::parse("1*tp8pp1+2*tp4pp1"),
                                            Strategy::parse("4*tp2pp2")};
  subjects.push_back(make_subject("candidates", assign::CandidateSet{candidates}, {}, false));
  const data::LengthDataset lengths(data::synthetic_lengths({.count = 200, .seed = 3}), "synthetic");
  data::BatchSampler sampler(lengths.truncated(16384), {.tokens_per_batch = 20'000, .seed = 3});
  const std::vector<Sequence> batch = sampler.next().sequences;
  const assign::IterationPlan plan = assign::plan_iteration(batch, candidates, profile);
  subjects.push_back(make_subject<assign::IterationPlan>(
      "iteration_plan", plan, [batch, profile](const assign::IterationPlan& read) { validate(read, batch, profile); },
      false));

  proposal::ProposeOptions options;
  options.gpus = 16;
  options.max_len = 16384;
  options.length_step = 4096;
  options.tokens_per_iteration = 50'000;
  const proposal::Proposal proposed = proposal::propose(lengths.truncated(16384), profile, options);
  subjects.push_back(make_subject<proposal::Proposal>(
      "proposal", proposed, [](const proposal::Proposal& read) { (void)read.strategies(); }, false));
  return subjects;
}

std::vector<Subject> microbatch_and_schedule_subjects() {
  std::vector<Subject> subjects;
  const microbatch::StageCostSetup setup = microbatch::stage_cost(profile7b().at(Scheme(1, 4)));
  std::vector<microbatch::Sample> samples;
  Rng rng(11);
  for (std::int64_t i = 0; i < 8; ++i) samples.push_back({3 * i + 1, rng.uniform_int(1, 8192), 0});
  const auto ordered = microbatch::order_samples(samples, microbatch::Ordering::length);
  const microbatch::PartitionContext context{4, 2, setup.memory_limit};
  const microbatch::Partition partition = microbatch::partition(
      std::span<const microbatch::Sample>(ordered), setup.model,
      microbatch::PartitionOptions{.stages = 4, .replicas = 2, .memory_limit = setup.memory_limit});
  subjects.push_back(make_subject<microbatch::Partition>(
      "micro_batches", partition, [samples, setup, context](const microbatch::Partition& read) {
        microbatch::validate(read, std::span<const microbatch::Sample>(samples), setup.model, context);
      }));
  const std::vector<double> times = microbatch::micro_batch_times(partition);
  subjects.push_back(make_subject<microbatch::ReplicaAssignment>(
      "replica_assignment", microbatch::balance_kk(times, 2),
      [times](const microbatch::ReplicaAssignment& read) { microbatch::validate(read, times, 2); }));

  schedule::Problem problem;
  problem.stages = 2;
  for (int i = 0; i < 3; ++i)
    problem.micro_batches.push_back({std::vector<double>(2, 1e-3 * (i + 1)), std::vector<double>(2, 2e-3 * (i + 1)),
                                     std::vector<double>(2, 1e6 * (i + 1)), 64 * (i + 1)});
  problem.memory_limit.assign(2, std::numeric_limits<double>::infinity());
  problem.hidden = 16;
  problem.link = {1e-5, 1e10};
  const schedule::PipelineSchedule chosen = schedule::schedule_pipeline(problem);
  subjects.push_back(make_subject<schedule::ExecutionPlan>(
      "execution_plan", chosen.plan,
      [problem](const schedule::ExecutionPlan& read) { schedule::validate(read, problem); }));
  subjects.push_back(make_subject<schedule::Problem>(
      "scheduling_problem", problem, [](const schedule::Problem& read) { schedule::require_problem(read); }));
  subjects.push_back(make_subject<schedule::Order>(
      "schedule_order", chosen.order, [](const schedule::Order& read) { schedule::validate(read, 3, 2); }));
  subjects.push_back(make_subject<schedule::Simulation>(
      "schedule_simulation", chosen.simulation,
      [problem, order = chosen.order](const schedule::Simulation& read) { schedule::validate(read, problem, order); }));
  subjects.push_back(make_subject<schedule::PipelineSchedule>(
      "pipeline_schedule", chosen,
      [problem](const schedule::PipelineSchedule& read) { schedule::validate(read, problem); }));

  schedule::PipelinePlanOptions options;
  options.stages = 4;
  options.replicas = 2;
  options.micro_batch_memory = setup.memory_limit;
  options.problem = {.hidden = 4096, .element_bytes = 2, .link = {1e-5, 1e11}};
  subjects.push_back(make_subject<schedule::PipelineRunPlan>(
      "pipeline_run_plan", schedule::plan_pipeline(std::span<const microbatch::Sample>(samples), setup.model, options),
      [samples, setup, options](const schedule::PipelineRunPlan& read) {
        schedule::validate(read, std::span<const microbatch::Sample>(samples), setup.model, options);
      }));
  return subjects;
}

// One iteration planned with every candidate simulated (as sluice trace does), and its pipelines' schedules.
std::vector<Subject> iteration_schedule_subjects() {
  const cost::Profile profile = profile7b();
  const std::vector<Strategy> candidates = {Strategy::parse("2*tp8pp1"), Strategy::parse("4*tp2pp2")};
  const data::LengthDataset lengths(data::synthetic_lengths({.count = 200, .seed = 5}), "synthetic");
  data::BatchSampler sampler(lengths.truncated(16384), {.tokens_per_batch = 20'000, .seed = 5});
  const std::vector<Sequence> batch = sampler.next().sequences;
  const plan::SimulatedIteration iteration = plan::plan_simulated_iteration(batch, candidates, profile);
  std::vector<Subject> subjects;
  subjects.push_back(make_subject<plan::IterationSchedule>(
      "iteration_schedule", iteration.schedule,
      [plan = iteration.plan, profile](const plan::IterationSchedule& read) { plan::validate(read, plan, profile); }));
  subjects.push_back(make_subject<plan::SimulatedIteration>(
      "simulated_iteration", iteration, [batch, candidates, profile](const plan::SimulatedIteration& read) {
        plan::validate(read, batch, candidates, profile);
      }));
  // With a flex CP domain beside the candidates, its plan rides in the document.
  const assign::FlexCpProblem flex_problem{
      .lengths = {},
      .units = 8,
      .pp = 1,
      .degrees = {{.degree = 1, .latency = {1e-9, 1e-5, 1e-3}, .capacity = 16384, .length_multiple = 1},
                  {.degree = 2, .latency = {5e-10, 6e-6, 2e-3}, .capacity = 32768, .length_multiple = 1}},
      .one_degree_per_micro_batch = false};
  const plan::IterationPlanner planner(
      profile, candidates, {.dispatch = {.trials = 4}},
      std::make_shared<const plan::FlexDomain>(std::vector<Scheme>{Scheme(1, 1), Scheme::parse("tp1cp2ulyssespp1")},
                                               flex_problem));
  subjects.push_back(make_subject<plan::SimulatedIteration>(
      "simulated_iteration_flex", planner.plan(batch),
      [batch, planner](const plan::SimulatedIteration& read) { planner.validate(read, batch); }));
  return subjects;
}

// A comparison of the systems on one small batch (every run with its plans and iteration 0's pipelines).
std::vector<Subject> compare_subjects() {
  const compare::Options options{.profile = profile7b().with_gpus(8),
                                 .context = 16384,
                                 .tokens = 30000,
                                 .problem = {.hidden = 4096, .link = {.latency = 1e-5, .bandwidth = 1e11}},
                                 .dispatch = {.trials = 4}};
  const data::LengthDataset dataset =
      data::LengthDataset::load(io::resolve_data_file("cpython-stdlib", "lengths")).truncated(options.context);
  data::BatchSampler sampler(dataset, {.tokens_per_batch = options.tokens, .seed = 1});
  const std::vector<std::vector<Sequence>> batches{sampler.next().sequences};
  // Not written back in place: the runs' strategies are, in canonical order, as the strategy subject's.
  return {
      make_subject<compare::Comparison>("comparison", compare::compare_systems(options, dataset, batches), {}, false)};
}

std::vector<Subject> search_subjects() {
  std::vector<Subject> subjects;
  subjects.push_back(make_subject<search::ModelSpec>("model", bundled("models", "gpt-48.json")));
  subjects.push_back(make_subject<search::ClusterSpec>("cluster", bundled("clusters", "a100-8.json")));
  search::ModelSpec model;
  model.name = "tiny";
  model.embedding_params = 1 << 20;
  model.head_params = 1 << 20;
  for (int i = 0; i < 4; ++i)
    model.layers.push_back({.type = "encoder", .hidden = 256, .heads = 4, .ffn = 1024, .sequence = 128});
  const search::ClusterSpec cluster{.name = "node",
                                    .gpus = 4,
                                    .memory_bytes = 8LL << 30,
                                    .reserved_bytes = 1LL << 30,
                                    .flops = 1e14,
                                    .efficiency = 0.5,
                                    .overlap_slowdown = 1.3,
                                    .levels = {{.size = 4, .bandwidth = 1e11}},
                                    .all_reduce_times = {{2, 1e6, 1e-4}, {4, 1e6, 2e-4}},
                                    .all_to_all_times = {{4, 1e6, 1e-4}}};
  subjects.push_back(make_subject<search::ClusterSpec>("cluster_measured", cluster));
  search::SearchOptions options;
  options.granularity_bytes = 256LL << 20;
  options.global_batch = 8;
  const search::SearchReport report = search::search(model, cluster, options);
  subjects.push_back(make_subject<search::SearchReport>(
      "search", report,
      [model, cluster, options](const search::SearchReport& read) { search::validate(read, model, cluster, options); },
      false));
  return subjects;
}

std::vector<Subject> shard_and_solver_subjects() {
  std::vector<Subject> subjects;
  const shard::Model model{"m", 2, {{"w", 24}, {"x", 13}}, 2, 2};
  subjects.push_back(make_subject("shard_model", model));
  const shard::Placement placement = shard::place(Strategy::parse("1*tp2pp2+1*tp2pp1"), 6, 2);
  const shard::OptimizerLayout layout = shard::sharded_layout(6, 2);
  subjects.push_back(make_subject<shard::Placement>("placement", placement,
                                                    [](const shard::Placement& read) { shard::validate(read); }));
  subjects.push_back(make_subject<shard::OptimizerLayout>(
      "optimizer_layout", layout, [](const shard::OptimizerLayout& read) { shard::validate(read); }));
  subjects.push_back(make_subject<shard::PullPlan>(
      "pull_plan", shard::plan_pull(placement, layout, model),
      [placement, layout, model](const shard::PullPlan& read) { shard::validate(read, placement, layout, model); }));
  subjects.push_back(make_subject<shard::PushPlan>(
      "push_plan", shard::plan_push(placement, layout, model),
      [placement, layout, model](const shard::PushPlan& read) { shard::validate(read, placement, layout, model); }));

  solver::Model milp;
  milp.set_sense(solver::Sense::maximize);
  milp.set_objective_offset(2.5);
  const int x = milp.add_variable(0, solver::infinity, solver::VarType::integer, 3, "x");
  const int y = milp.add_binary(-1, "y");
  const int z = milp.add_variable(-solver::infinity, 4, solver::VarType::continuous, 0.5);
  milp.add_less_equal({{x, 2.0}, {y, 1.0}}, 7, "cap");
  milp.add_constraint(std::vector<int>{x, z}, std::vector<double>{1.0, -1.0}, -3, solver::infinity);
  // Terms with a zero coefficient are dropped, so the terms after them move.
  subjects.push_back(make_subject<solver::Model>("milp", milp, {}, false));
  subjects.push_back(make_subject(
      "milp_solution", solver::Solution{solver::SolveStatus::feasible, 12.5, solver::infinity, {3, 1, 4}, 0.25}));
  return subjects;
}

// The CLI's reports, built as the CLI builds them: sluice schedule, sluice shard --plans and sluice trace, and
// sluice fit's, simulate's, inspect's and plan's as recorded. Not written back in place: strategies are written
// in canonical order, and schedule derives a rate, fit a flag, inspect a scheme's GPUs, plan a total.
std::vector<Subject> run_subjects() {
  std::vector<Subject> subjects;
  subjects.push_back(
      make_subject<io::ScheduleRun>("schedule_run", sluice::test::small_schedule_run(profile7b(), 13), {}, false));

  const shard::Model model{"m", 2, {{"w", 24}, {"x", 13}}, 2, 2};
  const Strategy strategy = Strategy::parse("1*tp2pp2+1*tp2pp1");
  const shard::Placement placement = shard::place(strategy, 6, 2, {.gpus_per_node = 2});
  const shard::OptimizerLayout layout = shard::sharded_layout(6, 2);
  shard::Cluster cluster;
  cluster.gpus_per_node = 2;
  subjects.push_back(make_subject<io::ShardRun>(
      "shard_run",
      io::shard_run(6, strategy, std::nullopt, model, cluster, placement, layout,
                    shard::plan_pull(placement, layout, model), shard::plan_push(placement, layout, model), true),
      {}, false));

  const data::LengthDataset lengths(data::synthetic_lengths({.count = 200, .seed = 7}), "synthetic");
  data::BatchSampler sampler(lengths.truncated(16384), {.tokens_per_batch = 20'000, .seed = 7});
  const data::Batch batch = sampler.next();
  const plan::IterationPlanner planner(profile7b(), {Strategy::parse("2*tp8pp1"), Strategy::parse("4*tp2pp2")});
  io::TraceRun trace = io::trace_run(planner, planner.plan(batch.sequences));
  trace.profile = profile7b().name();
  trace.gpus = profile7b().gpus();
  trace.lengths = lengths.source();
  trace.context = 16384;
  trace.sequences = batch.sequences.size();
  trace.tokens = batch.tokens;
  subjects.push_back(make_subject<io::TraceRun>("trace_run", trace, {}, false));
  // sluice fit needs Eigen, which this suite does not link: its recorded output stands for it.
  const auto golden = std::filesystem::path(SLUICE_BUNDLED_DATA_DIR) / ".." / "test" / "golden";
  subjects.push_back(make_subject<io::FitRun>("fit_run", io::read_json_file(golden / "fit.json"), {}, false));
  const auto recorded = [](const char* name) { return io::parse(test::recorded_output(name), name); };
  subjects.push_back(make_subject<io::SimulateRun>("simulate_run", recorded("simulate.json"), {}, false));
  subjects.push_back(make_subject<io::Inspect>("inspect", io::read_json_file(golden / "inspect.json"), {}, false));
  subjects.push_back(
      make_subject<io::Inspect>("inspect_cp", test::inspect_with_context_parallel(profile7b()), {}, false));
  subjects.push_back(make_subject<io::PlanRun>("plan_run", recorded("plan.json"), {}, false));
  return subjects;
}

// Every node of `value` but the root, by JSON pointer.
void collect_paths(const json& value, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      out.push_back(at / key);
      collect_paths(child, at / key, out);
    }
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      out.push_back(at / i);
      collect_paths(value[i], at / i, out);
    }
  }
}

std::size_t depth_of(const json::json_pointer& path) {
  std::size_t depth = 0;
  for (auto p = path; !p.empty(); p = p.parent_pointer()) ++depth;
  return depth;
}

// Values put in place of a field, as JSON text: every JSON type, integers at and past the bounds of int,
// int64 and uint64, floats at zero, denormal and near the double range, and strings that look like numbers.
const std::vector<std::string>& replacements() {
  static const std::vector<std::string> values = {"null",
                                                  "true",
                                                  "false",
                                                  R"("text")",
                                                  R"("")",
                                                  "[]",
                                                  "{}",
                                                  "[1]",
                                                  R"({"a": 1})",
                                                  "7",
                                                  "1.5",
                                                  "16.0",
                                                  "1e3",
                                                  "0",
                                                  "-1",
                                                  "2147483647",
                                                  "2147483648",
                                                  "-2147483649",
                                                  "4294967298",
                                                  "9223372036854775807",
                                                  "9223372036854775808",
                                                  "-9223372036854775808",
                                                  "18446744073709551615",
                                                  "18446744073709551616",
                                                  "0.0",
                                                  "-0.0",
                                                  "4.9e-324",
                                                  "1e308",
                                                  "-1e308",
                                                  R"("NaN")",
                                                  R"("inf")",
                                                  R"("-inf")",
                                                  R"("1")"};
  return values;
}

constexpr std::string_view slot = "\"@@sluice-fuzz-slot@@\"";

// `document` as text with the node at `path` replaced by the JSON text `literal`.
std::string with_literal(const json& document, const json::json_pointer& path, std::string_view literal) {
  json copy = document;
  copy[path] = std::string(slot.substr(1, slot.size() - 2));
  std::string text = copy.dump();
  text.replace(text.find(slot), slot.size(), literal);
  return text;
}

struct FuzzTally {
  int cases = 0;
  int accepted = 0;     // read, and the validator agreed
  int invalidated = 0;  // read, and the validator rejected it
  int rejected = 0;     // invalid_input while reading
};

enum class Expect { anything, too_deep, not_json };

// One case: `text` must be read or rejected cleanly. `replaced` is the literal put at `path`, if any, so that
// a value read can be compared with the value written back.
void run_case(const Subject& subject, const std::string& text, std::string_view what, FuzzTally& tally,
              Expect expect = Expect::anything, const json::json_pointer* path = nullptr,
              std::string_view replaced = {}) {
  ++tally.cases;
  const std::string source = subject.name + ".json";
  try {
    const std::optional<json> written = subject.read(text, source);
    INFO(subject.name, ": ", what, " read successfully");
    CHECK(expect == Expect::anything);
    if (!written) {
      ++tally.invalidated;
      return;
    }
    ++tally.accepted;
    if (subject.writes_back_in_place && path != nullptr && written->contains(*path)) {
      const json given = json::parse(replaced);
      if (given.is_number() || given.is_boolean()) {
        INFO(subject.name, ": ", what, ": ", path->to_string(), " read as ", written->at(*path).dump());
        CHECK(written->at(*path) == given);
      }
    }
  } catch (const invalid_input& error) {
    ++tally.rejected;
    const std::string_view message = error.what();
    INFO(subject.name, ": ", what, ": ", message);
    CHECK(message.find('\n') == std::string_view::npos);
    CHECK(message.find(source) != std::string_view::npos);
    if (expect == Expect::too_deep) CHECK(message.find("nested deeper than 256 levels") != std::string_view::npos);
    if (expect == Expect::not_json) CHECK(message.find("not valid JSON") != std::string_view::npos);
  } catch (const std::exception& error) {
    FAIL_CHECK(subject.name, ": ", what, ": escaped as a std::exception other than invalid_input: ", error.what());
  }
}

FuzzTally fuzz(const Subject& subject, std::uint64_t seed, std::size_t fields) {
  FuzzTally tally;
  Rng rng(seed);
  const json& document = subject.document;
  const std::string text = document.dump();
  run_case(subject, text, "the document as written", tally);
  REQUIRE(tally.accepted == 1);

  std::vector<json::json_pointer> paths;
  collect_paths(document, json::json_pointer(), paths);
  rng.shuffle(std::span(paths));
  if (paths.size() > fields) paths.resize(fields);
  for (const json::json_pointer& path : paths) {
    const std::string where = path.to_string();
    for (const std::string& value : replacements())
      run_case(subject, with_literal(document, path, value), where + " = " + value, tally, Expect::anything, &path,
               value);
    json changed = document;
    const json::json_pointer parent = path.parent_pointer();
    if (changed[parent].is_object()) {
      changed[parent].erase(path.back());
    } else {
      changed[parent].erase(static_cast<std::size_t>(std::stoul(path.back())));
    }
    run_case(subject, changed.dump(), where + " removed", tally);
    for (const json& wrapped : {json::array({document[path]}), json{{"wrapped", document[path]}}}) {
      changed = document;
      changed[path] = wrapped;
      run_case(subject, changed.dump(), where + " wrapped in " + wrapped.type_name(), tally);
    }
    // The node's value sits at level depth + 1 (the document object is level 1).
    const std::size_t level = depth_of(path);
    run_case(subject, with_literal(document, path, nested_arrays(256 - level)), where + " nested to the limit", tally);
    run_case(subject, with_literal(document, path, nested_arrays(257 - level)), where + " nested past the limit", tally,
             Expect::too_deep);
    run_case(subject, with_literal(document, path, nested_objects(257 - level)), where + " objects past the limit",
             tally, Expect::too_deep);
  }

  const json::json_pointer first = paths.front();
  run_case(subject, with_literal(document, first, nested_objects(100'000)), "100k nested objects", tally,
           Expect::too_deep);
  run_case(subject, with_literal(document, first, nested_arrays(1'000'000)), "1M nested arrays", tally,
           Expect::too_deep);

  for (int i = 0; i < 40; ++i) {
    const auto cut = static_cast<std::size_t>(rng.below(text.size()));
    run_case(subject, text.substr(0, cut), "truncated at byte " + std::to_string(cut), tally, Expect::not_json);
  }
  static constexpr std::string_view edits = "{}[]\":,-+.eE0123456789 tfn\\";
  for (int i = 0; i < 40; ++i) {
    std::string edited = text;
    const auto at = static_cast<std::size_t>(rng.below(text.size()));
    edited[at] = edits[rng.below(edits.size())];
    run_case(subject, edited, "byte " + std::to_string(at) + " edited", tally);
  }
  return tally;
}

// Fields mutated per document: a sample in large documents, fewer in unoptimised (sanitizer) builds.
#ifdef NDEBUG
constexpr std::size_t fields_per_document = 40;
#else
constexpr std::size_t fields_per_document = 12;
#endif

void fuzz_all(const std::vector<Subject>& subjects) {
  for (std::size_t k = 0; k < subjects.size(); ++k) {
    CAPTURE(subjects[k].name);
    const FuzzTally tally = fuzz(subjects[k], 0x5eed + k, fields_per_document);
    MESSAGE(subjects[k].name, ": ", tally.cases, " cases, ", tally.accepted, " read and valid, ", tally.invalidated,
            " read and invalid, ", tally.rejected, " rejected");
    // Truncations, past-limit nesting and most wrong types are rejected; some edits leave a valid document.
    CHECK(tally.rejected > tally.cases / 2);
    CHECK(tally.accepted >= 1);
  }
}

}  // namespace

TEST_CASE("JSON fuzz: strategies, profiles, latency fits and strategy_pool files") {
  fuzz_all(core_and_cost_subjects());
}

TEST_CASE("JSON fuzz: length statistics, candidates, iteration plans and proposals") {
  fuzz_all(data_and_assign_subjects());
}

TEST_CASE(
    "JSON fuzz: micro-batch partitions, replica assignments, scheduling problems, orders, simulations, "
    "execution plans, pipeline schedules and run plans") {
  fuzz_all(microbatch_and_schedule_subjects());
}

TEST_CASE("JSON fuzz: iteration schedules and simulated iterations") { fuzz_all(iteration_schedule_subjects()); }

TEST_CASE("JSON fuzz: search models, clusters and reports") { fuzz_all(search_subjects()); }

TEST_CASE("JSON fuzz: comparisons of systems") { fuzz_all(compare_subjects()); }

TEST_CASE("JSON fuzz: the CLI's fit, inspect, plan, schedule, shard, simulate and trace reports") {
  fuzz_all(run_subjects());
}

TEST_CASE("JSON fuzz: shard models, placements, layouts, pull and push plans, MILP models and solutions") {
  fuzz_all(shard_and_solver_subjects());
}
