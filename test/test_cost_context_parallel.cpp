// Context parallelism and activation recomputation derived from a ⟨TP, PP⟩ scheme (cost/context_parallel.hpp):
// the all-to-all and ring terms against hand counts, the ring hidden for long sequences and exposed for short ones,
// recomputation's time and memory, MaxLen growing with the degree, the head rule, and the Hydraulis paper's
// DeepSpeed configurations (Table 3) on 80 GB: recomputation needed for 32B and not for 7B or 13B.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "sluice/core/error.hpp"
#include "sluice/cost/context_parallel.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/io/bundled.hpp"
#include "sluice/io/strategy_pool.hpp"

using namespace sluice;
using namespace sluice::cost;

namespace {

// A small stage: 2 layers of hidden 1024, 16 heads over 4 KV heads, bf16, backward twice the forward, links of
// 10 µs and 100 GB/s.
CpSetup small_setup() {
  return {.base = QuadraticLatency(1e-9, 1e-5, 1e-3),
          .tp = 1,
          .stage_layers = 2,
          .hidden = 1024,
          .heads = 16,
          .kv_heads = 4,
          .element_bytes = 2,
          .backward_ratio = 2,
          .link_latency = 1e-5,
          .link_bandwidth = 1e11};
}

TransformerMemorySpec memory_of(const std::string& model) {
  return *io::read_profile(io::resolve_data_file("llama2-" + model, "profiles")).spec().memory;
}

}  // namespace

TEST_CASE("context parallelism: Ulysses' all-to-alls against a hand count") {
  const CpSetup setup = small_setup();
  const CpStageTime time = cp_stage_time(setup, {.degree = 4, .kind = CpKind::ulysses}, 4096);
  // Each rank holds 1024 tokens; q and the output are 1024 wide, k and v 256: 2560 elements a token, of which 3/4
  // leave, 2 bytes each, at 1e11 B/s: 1024 · 2560 · 0.75 · 2 / 1e11 = 3.93216e-5 s a pass, plus 4 all-to-alls of
  // 3 exchanges at 1e-5 s. Two passes (forward, backward) on each of 2 layers.
  const double per_pass = 1024.0 * 2560 * 0.75 * 2 / 1e11 + 4 * 3 * 1e-5;
  CHECK(time.all_to_all == doctest::Approx(2 * 2 * per_pass).epsilon(1e-12));
  CHECK(time.ring == 0);
  CHECK(time.compute == doctest::Approx((1e-9 * 4096.0 * 4096 + 1e-5 * 4096) / 4 + 1e-3).epsilon(1e-12));
  // Recomputation repeats the forward's four.
  const CpStageTime recomputed =
      cp_stage_time(setup, {.degree = 4, .kind = CpKind::ulysses, .recompute = Recompute::full}, 4096);
  CHECK(recomputed.all_to_all == doctest::Approx(3 * 2 * per_pass).epsilon(1e-12));
}

TEST_CASE("context parallelism: the ring hides its exchanges under long sequences and exposes them under short") {
  const CpSetup setup = small_setup();
  const ContextParallel ring{.degree = 4, .kind = CpKind::ring};
  // A block: l/4 tokens of K (or V), 256 wide, 2 bytes. After the backward's last step dK and dV go home: always
  // exposed, α + 2 blocks a layer.
  const auto block = [](double length) { return length / 4 * 256 * 2 / 1e11; };
  const double long_length = 65536;
  CHECK(cp_stage_time(setup, ring, 65536).ring ==
        doctest::Approx(2 * (1e-5 + 2 * block(long_length))).epsilon(1e-12));
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
  const CpStageTime hybrid = cp_stage_time(setup, {.degree = 4, .kind = CpKind::hybrid, .ulysses_degree = 2}, 8192);
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
  CpSetup setup = small_setup();
  const QuadraticLatency& t = setup.base;
  // Without CP the time is the base's, and recomputation adds its forward third.
  CHECK(cp_stage_time(setup, {}, 4096).total() == doctest::Approx(t(4096)).epsilon(1e-12));
  CHECK(cp_stage_time(setup, {.recompute = Recompute::full}, 4096).total() ==
        doctest::Approx(t(4096) * 4 / 3).epsilon(1e-12));

  const TransformerMemorySpec spec = memory_of("7b");
  const Scheme scheme(2, 2);
  const LinearMemory plain = cp_memory(spec, scheme, {}, 16);
  CHECK(plain == spec.for_scheme(scheme, 16));  // CP 1, no recomputation: the Hydraulis memory model itself
  const LinearMemory recomputed = cp_memory(spec, scheme, {.degree = 2, .recompute = Recompute::full}, 16);
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
    const LinearMemory memory = cp_memory(spec, Scheme(2, 1), {.degree = degree}, 32);
    CHECK(memory.bytes_per_token() ==
          doctest::Approx(spec.activation_bytes_per_token(Scheme(2, 1)) / degree).epsilon(1e-12));
    CHECK(memory.max_len() > previous);
    previous = memory.max_len();
  }
}

TEST_CASE("context parallelism: bad setups are refused with one line naming the value") {
  CpSetup setup = small_setup();
  setup.tp = 2;
  // TP 2 × Ulysses 4 splits the heads 8 ways, which 4 KV heads cannot fill.
  CHECK_THROWS_WITH_AS(cp_stage_time(setup, {.degree = 4, .kind = CpKind::ulysses}, 1024),
                       doctest::Contains("splits the heads 8 ways"), invalid_input);
  CHECK_THROWS_WITH_AS(cp_stage_time(setup, {.degree = 4, .kind = CpKind::hybrid, .ulysses_degree = 3}, 1024),
                       doctest::Contains("Ulysses degree 3 must divide the CP degree 4"), invalid_input);
  CHECK_THROWS_WITH_AS(cp_stage_time(setup, {.degree = 0}, 1024), doctest::Contains("degree must be in"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(cp_latency(small_setup(), {.degree = 2}, 512, 512), doctest::Contains("shortest < longest"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(cp_memory(memory_of("7b"), Scheme(4, 2), {.degree = 4}, 16),
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
  const Row rows[] = {{"7b", 8, 16384, 4, false},  {"7b", 8, 32768, 8, false},  {"7b", 16, 16384, 4, false},
                      {"7b", 16, 32768, 8, false}, {"13b", 16, 16384, 4, false}, {"13b", 16, 32768, 8, false},
                      {"13b", 32, 16384, 4, false}, {"13b", 32, 32768, 8, false}, {"32b", 32, 16384, 4, true},
                      {"32b", 32, 32768, 8, true},  {"32b", 64, 16384, 4, true},  {"32b", 64, 32768, 8, true}};
  for (const Row& row : rows) {
    CAPTURE(row.model);
    CAPTURE(row.gpus);
    CAPTURE(row.context);
    const TransformerMemorySpec spec = memory_of(row.model);
    const std::int64_t without =
        cp_memory(spec, Scheme(1, 1), {.degree = row.sp}, row.gpus, StateSharding::zero3).max_len();
    const std::int64_t with =
        cp_memory(spec, Scheme(1, 1), {.degree = row.sp, .recompute = Recompute::full}, row.gpus, StateSharding::zero3)
            .max_len();
    CHECK((without < row.context) == row.recompute);
    CHECK(with >= row.context);
  }
}
