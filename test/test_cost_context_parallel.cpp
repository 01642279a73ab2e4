// Context parallelism and activation recomputation derived from a ⟨TP, PP⟩ scheme (cost/context_parallel.hpp):
// the all-to-all and ring terms against hand counts, the ring hidden for long sequences and exposed for short ones,
// recomputation's time and memory, MaxLen growing with the degree, the head rule, and the Hydraulis paper's
// DeepSpeed configurations (Table 3) on 80 GB: recomputation needed for 32B and not for 7B or 13B.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/assign/flex_cp_problem.hpp"
#include "sluice/core/error.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/core_json.hpp"
#include "sluice/io/strategy_pool.hpp"

using namespace sluice;
using namespace sluice::cost;

namespace {

// A small stage: 2 layers of hidden 1024, 16 heads over 4 KV heads, bf16, backward twice the forward, links of
// 10 µs and 100 GB/s.
CpSetup small_setup() {
  return {.base = QuadraticLatency(1e-9, 1e-5, 1e-3),
          .stage_layers = 2,
          .hidden = 1024,
          .heads = 16,
          .kv_heads = 4,
          .element_bytes = 2,
          .backward_ratio = 2,
          .link = {.latency = 1e-5, .bandwidth = 1e11}};
}

// ⟨TP, C, 1⟩ with CP of `kind` (and the hybrid's Ulysses degree), optionally recomputing.
Scheme with_cp(int tp, int cp, CpKind kind = CpKind::ring, int ulysses = 0, Recompute recompute = Recompute::none) {
  return Scheme({.tp = tp, .pp = 1, .cp = cp, .cp_kind = kind, .ulysses = ulysses, .recompute = recompute});
}

SchemeSpace space_of(std::vector<int> degrees, std::vector<CpKind> kinds = {CpKind::ring}, bool recompute = false) {
  SchemeSpace space;
  space.cp_degrees = std::move(degrees);
  space.cp_kinds = std::move(kinds);
  space.recompute = recompute;
  return space;
}

TransformerMemorySpec memory_of(const std::string& model) {
  return *io::read_profile(io::resolve_data_file("llama2-" + model, "profiles")).spec().memory;
}

}  // namespace

TEST_CASE("context parallelism: Ulysses' all-to-alls against a hand count") {
  const CpSetup setup = small_setup();
  const CpStageTime time = cp_stage_time(setup, with_cp(1, 4, CpKind::ulysses), 4096);
  // Each rank holds 1024 tokens; q and the output are 1024 wide, k and v 256: 2560 elements a token, of which 3/4
  // leave, 2 bytes each, at 1e11 B/s: 1024 · 2560 · 0.75 · 2 / 1e11 = 3.93216e-5 s a pass, plus 4 all-to-alls of
  // 3 exchanges at 1e-5 s. Two passes (forward, backward) on each of 2 layers.
  const double per_pass = 1024.0 * 2560 * 0.75 * 2 / 1e11 + 4 * 3 * 1e-5;
  CHECK(time.all_to_all == doctest::Approx(2 * 2 * per_pass).epsilon(1e-12));
  CHECK(time.ring == 0);
  CHECK(time.compute == doctest::Approx((1e-9 * 4096.0 * 4096 + 1e-5 * 4096) / 4 + 1e-3).epsilon(1e-12));
  // Recomputation repeats the forward's four.
  const CpStageTime recomputed = cp_stage_time(setup, with_cp(1, 4, CpKind::ulysses, 0, Recompute::full), 4096);
  CHECK(recomputed.all_to_all == doctest::Approx(3 * 2 * per_pass).epsilon(1e-12));
}

TEST_CASE("context parallelism: the ring hides its exchanges under long sequences and exposes them under short") {
  const CpSetup setup = small_setup();
  const Scheme ring = with_cp(1, 4);
  // A block: l/4 tokens of K (or V), 256 wide, 2 bytes. After the backward's last step dK and dV go home: always
  // exposed, α + 2 blocks a layer.
  const auto block = [](double length) { return length / 4 * 256 * 2 / 1e11; };
  const double long_length = 65536;
  CHECK(cp_stage_time(setup, ring, 65536).ring == doctest::Approx(2 * (1e-5 + 2 * block(long_length))).epsilon(1e-12));
  // At 256 tokens a forward step computes 1e-9 · 256² / 4 / 2 layers / 3 / 4 steps ≈ 6.8e-7 s against
  // 1e-5 + 2 blocks ≈ 1.0066e-5 s of exchange: 3 steps exposed forward, and backward (4 blocks) likewise.
  const double l = 256;
  const double attention = 1e-9 * l * l / 4 / 2;
  const double forward = 3 * (1e-5 + 2 * block(l) - attention / 3 / 4);
  const double backward = 3 * (1e-5 + 4 * block(l) - attention * 2 / 3 / 4) + 1e-5 + 2 * block(l);
  CHECK(cp_stage_time(setup, ring, 256).ring == doctest::Approx(2 * (forward + backward)).epsilon(1e-12));
  // What the fit stands for: the exposed share falls as sequences grow.
  const double short_share = cp_stage_time(setup, ring, 256).ring / cp_stage_time(setup, ring, 256).total();
  const double long_share = cp_stage_time(setup, ring, 65536).ring / cp_stage_time(setup, ring, 65536).total();
  CHECK(short_share > 0.05);
  CHECK(long_share < 1e-3);
  const FitResult fit = cp_latency(setup, ring, 256, 65536);
  CHECK(fit.relative_rms_error < 0.01);
  CHECK(fit.model.a() == doctest::Approx(1e-9 / 4).epsilon(0.02));
}

TEST_CASE("context parallelism: a hybrid is Ulysses within and the ring across") {
  const CpSetup setup = small_setup();
  const CpStageTime hybrid = cp_stage_time(setup, with_cp(1, 4, CpKind::hybrid, 2), 8192);
  // Ulysses over 2 ranks on 8192 / 4 tokens each: 1/2 leaves; the ring over 2 ranks passes blocks of 8192 / 2
  // tokens of the KV width split over the 2 Ulysses ranks.
  const double per_pass = 2048.0 * 2560 * 0.5 * 2 / 1e11 + 4 * 1 * 1e-5;
  CHECK(hybrid.all_to_all == doctest::Approx(2 * 2 * per_pass).epsilon(1e-12));
  const double block = 4096.0 * 256 / 2 * 2 / 1e11;
  const double attention = 1e-9 * 8192.0 * 8192 / 4 / 2;  // one layer's on one rank
  const double forward = std::max(0.0, 1e-5 + 2 * block - attention / 3 / 2);
  const double backward = std::max(0.0, 1e-5 + 4 * block - attention * 2 / 3 / 2) + 1e-5 + 2 * block;
  CHECK(hybrid.ring == doctest::Approx(2 * (forward + backward)).epsilon(1e-12));
}

TEST_CASE("activation recomputation: one more forward, and a layer's input kept instead of its activations") {
  const CpSetup setup = small_setup();
  const QuadraticLatency& t = setup.base;
  // Without CP the time is the base's, and recomputation adds its forward third.
  CHECK(cp_stage_time(setup, Scheme(1, 1), 4096).total() == doctest::Approx(t(4096)).epsilon(1e-12));
  CHECK(cp_stage_time(setup, with_cp(1, 1, CpKind::ring, 0, Recompute::full), 4096).total() ==
        doctest::Approx(t(4096) * 4 / 3).epsilon(1e-12));

  const TransformerMemorySpec spec = memory_of("7b");
  const Scheme scheme(2, 2);
  const LinearMemory plain = spec.for_scheme(scheme, 16);
  const LinearMemory recomputed =
      spec.for_scheme(Scheme({.tp = 2, .pp = 2, .cp = 2, .recompute = Recompute::full}), 16);
  // 32 layers in 2 stages, 2 micro-batches in flight on the first: 32 layers' 16-bit inputs (2 bytes a hidden unit)
  // and one layer's working set (A = 39 bytes for TP 2), over TP 2 and CP 2.
  CHECK(recomputed.bytes_per_token() == doctest::Approx(4096.0 / 2 / 2 * (32 * 2 + 39)).epsilon(1e-12));
  CHECK(recomputed.fixed_bytes() == plain.fixed_bytes());
  CHECK(recomputed.max_len() > plain.max_len());
}

TEST_CASE("context parallelism: MaxLen grows with the degree") {
  const TransformerMemorySpec spec = memory_of("13b");
  std::int64_t previous = 0;
  for (const int degree : {1, 2, 4, 8}) {
    const LinearMemory memory = spec.for_scheme(with_cp(2, degree), 32);
    CHECK(memory.bytes_per_token() ==
          doctest::Approx(spec.activation_bytes_per_token(Scheme(2, 1)) / degree).epsilon(1e-12));
    CHECK(memory.max_len() > previous);
    previous = memory.max_len();
  }
}

TEST_CASE("context parallelism: bad setups are refused with one line naming the value") {
  const CpSetup setup = small_setup();
  // TP 2 × Ulysses 4 splits the heads 8 ways, which 4 KV heads cannot fill.
  CHECK_THROWS_WITH_AS(cp_stage_time(setup, with_cp(2, 4, CpKind::ulysses), 1024),
                       doctest::Contains("splits the heads 8 ways"), invalid_input);
  CHECK_THROWS_WITH_AS(with_cp(2, 4, CpKind::hybrid, 3), doctest::Contains("needs a Ulysses degree that divides it"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(with_cp(2, 0), doctest::Contains("cp must be in"), invalid_input);
  CHECK_THROWS_WITH_AS(cp_latency(small_setup(), with_cp(1, 2), 512, 512), doctest::Contains("shortest < longest"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(memory_of("7b").for_scheme(Scheme({.tp = 4, .pp = 2, .cp = 4}), 16),
                       doctest::Contains("needs 32 GPUs but the cluster has 16"), invalid_input);
  CHECK(value_in(cp_kind_names, "hybrid", "cp kind") == CpKind::hybrid);
  CHECK_THROWS_WITH_AS(value_in(cp_kind_names, "stripe", "cp kind"),
                       doctest::Contains("expected ulysses, ring or hybrid"), invalid_input);
}

TEST_CASE("DeepSpeed's configurations in the Hydraulis paper (Table 3): recomputation for 32B only") {
  // DeepSpeed-Ulysses with ZeRO-3 on 80 GB: DP×SP over N GPUs, no TP or PP. The paper ran 7B and 13B without
  // activation checkpointing and 32B with it; under this memory model exactly those need it.
  struct Row {
    const char* model;
    std::int64_t gpus, context;
    int sp;
    bool recompute;
  };
  const Row rows[] = {{"7b", 8, 16384, 4, false},   {"7b", 8, 32768, 8, false},   {"7b", 16, 16384, 4, false},
                      {"7b", 16, 32768, 8, false},  {"13b", 16, 16384, 4, false}, {"13b", 16, 32768, 8, false},
                      {"13b", 32, 16384, 4, false}, {"13b", 32, 32768, 8, false}, {"32b", 32, 16384, 4, true},
                      {"32b", 32, 32768, 8, true},  {"32b", 64, 16384, 4, true},  {"32b", 64, 32768, 8, true}};
  for (const Row& row : rows) {
    CAPTURE(row.model);
    CAPTURE(row.gpus);
    CAPTURE(row.context);
    const TransformerMemorySpec spec = memory_of(row.model);
    const Scheme ulysses = with_cp(1, row.sp, CpKind::ulysses);
    const Scheme recomputing = with_cp(1, row.sp, CpKind::ulysses, 0, Recompute::full);
    const std::int64_t without = spec.for_scheme(ulysses, row.gpus, StateSharding::zero3).max_len();
    const std::int64_t with = spec.for_scheme(recomputing, row.gpus, StateSharding::zero3).max_len();
    CHECK((without < row.context) == row.recompute);
    CHECK(with >= row.context);
  }
}

TEST_CASE("schemes with CP and AC: spelling, order, GPUs and JSON, in documents one version up") {
  CHECK(Scheme::parse("tp2cp4ringpp1") == with_cp(2, 4));
  CHECK(Scheme::parse("tp2cp4pp1") == with_cp(2, 4));  // the ring when no kind is named
  CHECK(Scheme::parse("tp1cp8hybrid2pp1") == with_cp(1, 8, CpKind::hybrid, 2));
  CHECK(Scheme::parse("tp8pp2ac") == Scheme({.tp = 8, .pp = 2, .recompute = Recompute::full}));
  for (const char* name : {"tp4pp2", "tp2cp4ringpp1", "tp1cp8hybrid2pp1", "tp1cp4ulyssespp2ac", "tp8pp2ac"})
    CHECK(Scheme::parse(name).name() == name);
  // CP 1 has no kind, so it is the ⟨TP, PP⟩ scheme itself.
  CHECK(Scheme({.tp = 2, .pp = 2, .cp = 1, .cp_kind = CpKind::ulysses}) == Scheme(2, 2));
  CHECK(Scheme::parse("tp2cp4ringpp2").gpus() == 16);
  CHECK(Scheme::parse("tp2cp4hybrid2pp2").ring() == 2);
  CHECK(Scheme::parse("tp2cp4ulyssespp2").ulysses() == 4);
  CHECK(Scheme(4, 2) < Scheme::parse("tp4cp2ringpp2"));
  CHECK(Scheme::parse("tp4cp2ringpp2").base() == Scheme(4, 2));
  for (const char* bad : {"tp1cp8hybridpp1", "tp1cp8hybrid8pp1", "tp1cp8hybrid3pp1", "tp1cp0ringpp1", "tp1cp2stripepp1",
                          "tp1pp1acx", "tp1cp2ulysses2pp1"})
    CHECK_THROWS_AS(Scheme::parse(bad), invalid_input);

  CHECK(io::json(Scheme(4, 2)) == io::json::parse(R"({"tp": 4, "pp": 2})"));
  const Scheme hybrid = Scheme::parse("tp1cp8hybrid2pp2ac");
  CHECK(io::json(hybrid) ==
        io::json::parse(R"({"tp": 1, "pp": 2, "cp": 8, "cp_kind": "hybrid", "ulysses": 2, "recompute": "full"})"));
  CHECK(io::json(hybrid).get<Scheme>() == hybrid);
  const Strategy plain = Strategy::parse("2*tp4pp1");
  const Strategy wide = Strategy::parse("1*tp4pp1+1*tp1cp4ringpp1");
  CHECK(io::to_document(plain)["version"] == 1);
  CHECK(io::to_document(wide)["version"] == 2);
  CHECK(io::from_document<Strategy>(io::to_document(wide)) == wide);
  io::json future = io::to_document(wide);
  future["version"] = 3;
  CHECK_THROWS_WITH_AS(io::from_document<Strategy>(future), doctest::Contains("unsupported sluice.strategy version 3"),
                       invalid_input);
}

TEST_CASE("the scheme space: CP and AC schemes derived from every measured ⟨TP, PP⟩ scheme") {
  const Profile profile = io::read_profile(io::resolve_data_file("llama2-7b", "profiles"));
  CHECK(profile.spec().model.heads == 32);
  CHECK(with_scheme_space(profile.spec(), {}).schemes == profile.spec().schemes);
  const SchemeSpace space = space_of({2, 4, 8}, {CpKind::ulysses, CpKind::ring, CpKind::hybrid}, true);
  // Per base: 3 degrees × (Ulysses, ring) and 3 hybrids (Ulysses 2 of 4, 2 and 4 of 8), each with and without AC,
  // and AC alone.
  CHECK(space_schemes(Scheme(1, 2), space).size() == (3 * 2 + 3) * 2 + 1);
  const Profile wide(with_scheme_space(profile.spec(), space));
  CHECK(wide.schemes().size() > profile.schemes().size());
  for (const SchemeCost& cost : wide.schemes()) {
    CAPTURE(cost.scheme.name());
    CHECK(cost.scheme.gpus() <= wide.gpus());
    CHECK(cost.max_len > 0);
    // CP and AC only ever lengthen what a scheme holds.
    if (const SchemeCost* base = profile.find(cost.scheme.base())) CHECK(cost.max_len >= base->max_len);
  }
  // A scheme the profile measures is kept as measured.
  ProfileSpec measured = profile.spec();
  measured.schemes.push_back({with_cp(1, 2), QuadraticLatency(1e-9, 1e-5, 1e-2), std::nullopt, std::nullopt});
  const Profile kept(with_scheme_space(measured, space_of({2})));
  CHECK(kept.at(with_cp(1, 2)).latency == QuadraticLatency(1e-9, 1e-5, 1e-2));
  // CP needs the heads.
  ProfileSpec headless = profile.spec();
  headless.model.heads = 0;
  CHECK_THROWS_WITH_AS(with_scheme_space(headless, space_of({2})),
                       doctest::Contains("does not give the model's attention heads"), invalid_input);
  // AC alone doubles the schemes, ⟨1, 1⟩ among them: the one ⟨TP, 1⟩ this profile does not measure.
  CHECK(Profile(with_scheme_space(headless, space_of({}, {}, true))).schemes().size() ==
        2 * (profile.schemes().size() + 1));
}

TEST_CASE("the last stage's own work: shared over the CP ranks' tokens, not recomputed, carried by derived schemes") {
  CpSetup setup = small_setup();
  const CpSetup plain = setup;
  setup.last_stage = LastStageWork(4e-6, 2e-4);
  const QuadraticLatency& t = setup.base;
  const double l = 4096;
  // Each of 2 ring ranks runs the layers on half the tokens and the head on its half; AC repeats the layers' forward
  // third, not the head's.
  const double layers = (t.a() * l * l + (t.b() - 4e-6) * l) / 2 + t.c() - 2e-4;
  const double head = 4e-6 * l / 2 + 2e-4;
  const Scheme ring = with_cp(1, 2);
  CHECK(cp_stage_time(setup, ring, 4096).compute == doctest::Approx(layers + head).epsilon(1e-12));
  CHECK(cp_stage_time(setup, with_cp(1, 2, CpKind::ring, 0, Recompute::full), 4096).compute ==
        doctest::Approx(layers * 4 / 3 + head).epsilon(1e-12));
  // Without CP or AC the base's time is the stage's; the exchanges do not depend on the work.
  CHECK(cp_stage_time(setup, Scheme(1, 1), 4096).total() == doctest::Approx(t(4096)).epsilon(1e-12));
  CHECK(cp_stage_time(setup, ring, 4096).ring == cp_stage_time(plain, ring, 4096).ring);
  CHECK(cp_stage_time(setup, ring, 4096).compute < cp_stage_time(plain, ring, 4096).compute);
  CHECK(setup.last_stage_work(ring) == LastStageWork(2e-6, 2e-4));
  CHECK(plain.last_stage_work(ring).is_zero());
  // The fit holds the work whole: T less it is the other stages' fit, never below zero.
  const FitResult fit = cp_latency(setup, ring, 256, 65536);
  CHECK(fit.model.b() >= 2e-6);
  CHECK(fit.model.c() >= 2e-4);
  for (const std::int64_t length : {256, 4096, 65536})
    CHECK(fit.model(length) == doctest::Approx(cp_stage_time(setup, ring, length).total()).epsilon(0.05));

  // Through the scheme space: 7B's ⟨1, 2⟩ with a head of a quarter of its b and half its c.
  ProfileSpec spec = io::read_profile(io::resolve_data_file("llama2-7b", "profiles")).spec();
  const auto pipelined = std::ranges::find(spec.schemes, Scheme(1, 2), &SchemeEntry::scheme);
  REQUIRE(pipelined != spec.schemes.end());
  const LastStageWork work(pipelined->latency.b() / 4, pipelined->latency.c() / 2);
  pipelined->last_stage = work;
  const Profile wide(with_scheme_space(spec, space_of({2, 4}, {CpKind::ring, CpKind::ulysses}, true)));
  const Scheme ring_four({.tp = 1, .pp = 2, .cp = 4, .cp_kind = CpKind::ring});
  CHECK(wide.at(ring_four).last_stage == LastStageWork(work.b() / 4, work.c()));
  CHECK(wide.at(Scheme({.tp = 1, .pp = 2, .cp = 2, .cp_kind = CpKind::ulysses, .recompute = Recompute::full}))
            .last_stage == LastStageWork(work.b() / 2, work.c()));
  CHECK(wide.at(Scheme({.tp = 1, .pp = 2, .recompute = Recompute::full})).last_stage == work);
  // A flex CP domain of 4 ⟨1, 2⟩ pipelines groups with each degree's scheme and its work.
  const assign::FlexCpProblem flex = assign::flex_cp_problem(
      wide, Scheme(1, 2), 4, {}, [](const Scheme& scheme) { return scheme.cp_kind() == CpKind::ring; });
  REQUIRE(flex.degrees.size() == 3);
  CHECK(flex.degrees[0].last_stage == work);
  CHECK(flex.degrees[2].last_stage == LastStageWork(work.b() / 4, work.c()));
  // Schemes of one stage carry none, and every scheme of another base none either.
  for (const SchemeCost& cost : wide.schemes())
    if (cost.scheme.base() != Scheme(1, 2)) CHECK(cost.last_stage.is_zero());
  // Without the work, the derived schemes are what they were: none carries any.
  spec.schemes = io::read_profile(io::resolve_data_file("llama2-7b", "profiles")).spec().schemes;
  const Profile plain_space(with_scheme_space(spec, space_of({2, 4})));
  for (const SchemeCost& cost : plain_space.schemes()) CHECK(cost.last_stage.is_zero());
}

TEST_CASE("the scheme space derives ⟨TP, 1⟩ from the shallowest measured ⟨TP, PP⟩ by the layer ratio") {
  const ProfileSpec spec = io::read_profile(io::resolve_data_file("llama2-7b", "profiles")).spec();
  const std::vector<SchemeEntry> derived = unpipelined_schemes(spec, 32);
  REQUIRE(derived.size() == 1);  // every other TP degree of 7B measures PP 1
  CHECK(derived[0].scheme == Scheme(1, 1));
  // ⟨1, 2⟩: a = 1.372e-9, b = 9.465e-5, c = 0.01505, a stage of 16 of the 32 layers.
  CHECK(derived[0].latency.a() == doctest::Approx(2 * 1.372e-9));
  CHECK(derived[0].latency.b() == doctest::Approx(2 * 9.465e-5));
  CHECK(derived[0].latency.c() == doctest::Approx(2 * 0.01505));
  CHECK_FALSE(derived[0].max_len.has_value());
  // An uneven split scales by the fullest stage: 3 stages of 32 layers hold 11, 11 and 10.
  ProfileSpec uneven = spec;
  std::erase_if(uneven.schemes, [](const SchemeEntry& entry) { return entry.scheme.tp() == 1; });
  uneven.schemes.push_back({Scheme(1, 3), QuadraticLatency(1e-9, 1e-5, 1e-2), std::nullopt, std::nullopt});
  const std::vector<SchemeEntry> from_three = unpipelined_schemes(uneven, 32);
  REQUIRE(from_three.size() == 1);
  CHECK(from_three[0].latency.b() == doctest::Approx(1e-5 * 32 / 11));
  // The bundled 13B profile measures ⟨TP, 1⟩ for every TP: nothing to derive, and a measured scheme stays.
  const ProfileSpec thirteen = io::read_profile(io::resolve_data_file("llama2-13b", "profiles")).spec();
  CHECK(unpipelined_schemes(thirteen, thirteen.model.layers).empty());
}

TEST_CASE("the scheme space refuses a CP degree that gives no scheme, naming why") {
  const ProfileSpec spec = io::read_profile(io::resolve_data_file("llama2-7b", "profiles")).spec();
  CHECK_THROWS_WITH_AS(with_scheme_space(spec, space_of({3}, {CpKind::ulysses})),
                       doctest::Contains("CP 3 splits the 32 heads unevenly"), invalid_input);
  CHECK_THROWS_WITH_AS(with_scheme_space(spec, space_of({32})), doctest::Contains("no scheme with CP 32 fits the 16"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(with_scheme_space(spec, space_of({1})), doctest::Contains("CP degrees must be in [2"),
                       invalid_input);
}

TEST_CASE("the smallest CP degree that holds a context, and --cp auto's degrees up to it") {
  const ProfileSpec spec = io::read_profile(io::resolve_data_file("llama2-7b", "profiles"), 32).spec();
  const SchemeSpace kinds = space_of({}, {CpKind::ring, CpKind::ulysses});
  // Whether a scheme of `space` (or the profile's own, with no degree) holds `context` with TP within a node.
  const auto holds = [&](const SchemeSpace& space, std::int64_t context) {
    const Profile profile(space.empty() ? spec : with_scheme_space(spec, space));
    for (const SchemeCost& scheme : profile.schemes())
      if (scheme.max_len >= context && scheme.scheme.gpus() <= 32 && scheme.scheme.tp() <= spec.gpus_per_node)
        return true;
    return false;
  };
  for (const std::int64_t context :
       {std::int64_t{65536}, std::int64_t{131072}, std::int64_t{262144}, std::int64_t{524288}, std::int64_t{1} << 20}) {
    CAPTURE(context);
    // Against every degree tried in turn: the smallest that holds it, none smaller holding it.
    std::optional<int> expected;
    for (int degree = 2; degree <= 32 && !expected; degree *= 2) {
      bool fits = true;
      try {
        fits = holds(space_of({degree}, kinds.cp_kinds), context);
      } catch (const invalid_input&) {
        fits = false;
      }
      if (fits) expected = degree;
    }
    CHECK(smallest_cp_holding(spec, context, kinds, true) == expected);
    if (holds(kinds, context)) {
      CHECK(auto_scheme_space(spec, context, kinds, true).cp_degrees.empty());
    } else if (expected) {
      std::vector<int> degrees;
      for (int degree = 2; degree <= *expected; degree *= 2) degrees.push_back(degree);
      CHECK(auto_scheme_space(spec, context, kinds, true).cp_degrees == degrees);
    } else {
      CHECK_THROWS_WITH_AS((void)auto_scheme_space(spec, context, kinds, true),
                           doctest::Contains("option --cp auto: no CP degree up to 32 GPUs holds the context"),
                           invalid_input);
    }
  }
  // 128K: the profile's ⟨8, 2⟩ holds 87,680 tokens and ⟨8, 2⟩ with ring CP 2 more; ⟨16, 1⟩ holds it across nodes.
  CHECK(smallest_cp_holding(spec, 131072, kinds, true) == 2);
  CHECK(auto_scheme_space(spec, 131072, kinds, false).cp_degrees.empty());
  CHECK(auto_scheme_space(spec, 65536, kinds, true).cp_degrees.empty());
  // No kind, or no memory model to derive CP schemes from: no degree.
  CHECK_FALSE(smallest_cp_holding(spec, 131072, space_of({}, {}), true).has_value());
  ProfileSpec measured_only = spec;
  measured_only.memory.reset();
  CHECK_FALSE(smallest_cp_holding(measured_only, 131072, kinds, true).has_value());
}
