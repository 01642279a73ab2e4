#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "sluice/core/random.hpp"
#include "sluice/cost/concepts.hpp"
#include "sluice/cost/fit.hpp"
#include "sluice/cost/grid.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/memory.hpp"
#include "sluice/cost/profile.hpp"

using namespace sluice;
using namespace sluice::cost;

static_assert(LatencyModel<QuadraticLatency>);
static_assert(MemoryModel<LinearMemory>);

TEST_CASE("latency: T(l), packed micro-batch cost with c charged once") {
  const QuadraticLatency model(2, 3, 5);
  CHECK(model(10) == 235.0);
  CHECK(model.sequence_time(10) == 230.0);
  CHECK(model.microbatch_overhead() == 5.0);
  const std::vector<int> lengths = {10, 20};
  CHECK(model.microbatch_time(lengths) == 230.0 + 860.0 + 5.0);
  CHECK(model.microbatch_time(std::vector<int>{}) == 5.0);
}

TEST_CASE("latency: UtilLen") {
  // θ·c / ((1 − θ)·b) = 0.75·3 / (0.25·0.25) = 36, exactly representable.
  CHECK(QuadraticLatency(1e-6, 0.25, 3).util_len(0.75) == 36);
  // Efficiency b·l/(b·l + c) at UtilLen reaches the threshold, one token less does not.
  const QuadraticLatency model(1.372e-9, 9.465e-5, 1.505e-2);
  const auto util = model.util_len();
  auto efficiency = [&](std::int64_t length) {
    const auto l = static_cast<double>(length);
    return model.b() * l / (model.b() * l + model.c());
  };
  CHECK(efficiency(util) >= 0.85);
  CHECK(efficiency(util - 1) < 0.85);
  CHECK(QuadraticLatency(1, 1, 0).util_len() == 1);
  CHECK_THROWS_AS(QuadraticLatency(1, 0, 1).util_len(), invalid_input);
  CHECK_THROWS_AS(model.util_len(1.0), invalid_input);
  CHECK_THROWS_AS(model.util_len(0.0), invalid_input);
  CHECK_THROWS_AS(model.util_len(std::nan("")), invalid_input);
}

TEST_CASE("latency: NaN, infinite and negative coefficients are rejected") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH_AS(QuadraticLatency(-1, 0, 0), doctest::Contains("coefficient a"), invalid_input);
  CHECK_THROWS_WITH_AS(QuadraticLatency(0, nan, 0), doctest::Contains("coefficient b"), invalid_input);
  CHECK_THROWS_WITH_AS(QuadraticLatency(0, 0, inf), doctest::Contains("coefficient c"), invalid_input);
}

namespace {
std::vector<LatencySample> samples_of(const QuadraticLatency& truth, double noise, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<LatencySample> samples;
  for (std::int64_t length = 256; length <= 65536; length *= 2)
    for (int repeat = 0; repeat < 3; ++repeat) samples.push_back({length, truth(length) * (1 + noise * rng.normal())});
  return samples;
}
double relative_rms(const QuadraticLatency& model, const std::vector<LatencySample>& samples) {
  double sum = 0;
  for (const auto& s : samples) sum += std::pow((model(s.length) - s.seconds) / s.seconds, 2);
  return std::sqrt(sum / static_cast<double>(samples.size()));
}
}  // namespace

TEST_CASE("fit: recovers exact coefficients without noise") {
  const QuadraticLatency truth(1.372e-9, 9.465e-5, 1.505e-2);
  const auto fit = fit_quadratic(samples_of(truth, 0.0, 1));
  CHECK(fit.model.a() == doctest::Approx(truth.a()).epsilon(1e-9));
  CHECK(fit.model.b() == doctest::Approx(truth.b()).epsilon(1e-9));
  CHECK(fit.model.c() == doctest::Approx(truth.c()).epsilon(1e-9));
  CHECK(fit.relative_rms_error < 1e-10);
  CHECK(fit.samples == 27);
}

TEST_CASE("fit: recovers known coefficients from noisy samples") {
  const QuadraticLatency truth(2.125e-9, 1.414e-4, 1.229e-1);
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const auto samples = samples_of(truth, 0.01, seed);
    const auto fit = fit_quadratic(samples);
    CHECK(fit.model.a() == doctest::Approx(truth.a()).epsilon(0.05));
    CHECK(fit.model.b() == doctest::Approx(truth.b()).epsilon(0.05));
    CHECK(fit.model.c() == doctest::Approx(truth.c()).epsilon(0.05));
    CHECK(fit.relative_rms_error == doctest::Approx(relative_rms(fit.model, samples)).epsilon(1e-9));
    CHECK(fit.relative_rms_error < 0.02);
  }
}

TEST_CASE("fit: constrained to a, b, c >= 0 and optimal among non-negative coefficients") {
  // Purely linear truth with noise: an unconstrained fit would give a slightly negative a or c.
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const QuadraticLatency truth(0, 4.9e-4, 0);
    const auto samples = samples_of(truth, 0.02, seed);
    const auto fit = fit_quadratic(samples);
    CHECK(fit.model.a() >= 0);
    CHECK(fit.model.b() >= 0);
    CHECK(fit.model.c() >= 0);
    // Brute force: no non-negative point in a neighbourhood fits better.
    Rng rng(seed + 100);
    for (int trial = 0; trial < 2000; ++trial) {
      auto perturb = [&](double value, double scale) { return std::max(0.0, value + scale * (rng.uniform() - 0.5)); };
      const QuadraticLatency other(perturb(fit.model.a(), 1e-10), perturb(fit.model.b(), 2e-5),
                                   perturb(fit.model.c(), 2e-3));
      REQUIRE(relative_rms(other, samples) >= fit.relative_rms_error - 1e-12);
    }
  }
}

TEST_CASE("fit: bad samples") {
  CHECK_THROWS_AS(fit_quadratic(std::vector<LatencySample>{}), invalid_input);
  CHECK_THROWS_WITH_AS(fit_quadratic(std::vector<LatencySample>{{1, 1.0}, {2, 2.0}, {2, 2.1}}),
                       doctest::Contains("3 or more distinct lengths"), invalid_input);
  CHECK_THROWS_AS(fit_quadratic(std::vector<LatencySample>{{0, 1.0}, {2, 2.0}, {3, 3.0}}), invalid_input);
  CHECK_THROWS_AS(fit_quadratic(std::vector<LatencySample>{{1, -1.0}, {2, 2.0}, {3, 3.0}}), invalid_input);
  CHECK_THROWS_AS(fit_quadratic(std::vector<LatencySample>{{1, std::nan("")}, {2, 2.0}, {3, 3.0}}), invalid_input);
}

TEST_CASE("memory fit: recovers fixed + per_token·l, non-negative, and refuses bad samples") {
  std::vector<MemorySample> samples;
  for (const std::int64_t length : {512, 1024, 2048, 4096, 8192})
    samples.push_back({length, 2.4e10 + 4.98e6 * static_cast<double>(length)});
  const MemoryFit exact = fit_linear_memory(samples);
  CHECK(exact.fixed_bytes == doctest::Approx(2.4e10).epsilon(1e-12));
  CHECK(exact.bytes_per_token == doctest::Approx(4.98e6).epsilon(1e-12));
  CHECK(exact.relative_rms_error < 1e-12);
  CHECK(exact.samples == 5);
  // Memory that shrinks with the length: the non-negative optimum has no per-token term.
  const MemoryFit shrinking = fit_linear_memory(std::vector<MemorySample>{{1000, 3e9}, {2000, 2e9}, {4000, 1e9}});
  CHECK(shrinking.bytes_per_token == 0);
  CHECK(shrinking.fixed_bytes > 0);
  CHECK_THROWS_WITH_AS(fit_linear_memory(std::vector<MemorySample>{{512, 1e9}, {512, 1.1e9}}),
                       doctest::Contains("2 or more distinct lengths, got 1"), invalid_input);
  CHECK_THROWS_WITH_AS(fit_linear_memory(std::vector<MemorySample>{{512, 1e9}, {1024, std::nan("")}}),
                       doctest::Contains("sample 1: bytes must be finite and > 0"), invalid_input);
}

namespace {
TransformerMemorySpec tiny_spec() {
  TransformerMemorySpec spec;
  spec.layers = 4;
  spec.hidden = 10;
  spec.vocab = 100;
  spec.activation_bytes = {{1, 2.0}, {2, 3.0}};
  spec.state_bytes = 5;
  spec.alpha = 0.5;
  spec.gpu_memory_bytes = 1e6;
  spec.context_overhead_bytes = 1000;
  spec.safety_margin_bytes = 1000;
  spec.granularity = 1;
  return spec;
}
}  // namespace

TEST_CASE("memory: Hydraulis B.1 terms against hand-computed values") {
  const auto spec = tiny_spec();
  require_valid(spec);
  const Scheme tp2pp2(2, 2);
  // states: 4·100/4·5·0.5 + (4/2)·100/2·5·0.5 = 250 + 250
  CHECK(spec.model_state_bytes(tp2pp2, 4) == 500.0);
  // embedding: 1000/4·16·0.5 + 1000/2·16·0.5 = 2000 + 4000
  CHECK(spec.embedding_bytes(tp2pp2, 4) == 6000.0);
  // activations: (2 layers · 2 in flight)·10/2·3 = 60 bytes per token
  CHECK(spec.activation_bytes_per_token(tp2pp2) == 60.0);
  const auto memory = spec.for_scheme(tp2pp2, 4);
  CHECK(memory.bytes(100) == 6500.0 + 6000.0);
  CHECK(memory.max_len() == 16525);  // (998000 − 6500) / 60 = 16525.0
  // PP = 1: embedding and LM head on one stage, 32 bytes per parameter in the replicated part.
  const Scheme tp1pp1(1, 1);
  CHECK(spec.model_state_bytes(tp1pp1, 4) == 250.0 + 1000.0);
  CHECK(spec.embedding_bytes(tp1pp1, 4) == 2000.0 + 16000.0);
  CHECK(spec.activation_bytes_per_token(tp1pp1) == 80.0);
}

TEST_CASE("memory: MaxLen matches a direct solve, rounded to the granularity") {
  auto spec = tiny_spec();
  for (std::int64_t granularity : {1, 7, 128}) {
    spec.granularity = granularity;
    for (const Scheme scheme : {Scheme(1, 1), Scheme(2, 1), Scheme(2, 2), Scheme(1, 4)}) {
      for (std::int64_t gpus : {4, 8}) {
        const auto memory = spec.for_scheme(scheme, gpus);
        // Largest multiple of the granularity whose peak memory fits, by bisection on memory(l).
        std::int64_t lo = 0;
        std::int64_t hi = 1 << 30;
        while (hi - lo > 1) {
          const std::int64_t mid = (lo + hi) / 2;
          (memory.bytes(mid * granularity) <= memory.budget_bytes() ? lo : hi) = mid;
        }
        CAPTURE(scheme.name());
        CHECK(memory.max_len() == lo * granularity);
      }
    }
  }
}

TEST_CASE("memory: more GPUs shard more states, so MaxLen never shrinks") {
  const auto spec = tiny_spec();
  CHECK(spec.for_scheme(Scheme(2, 2), 8).max_len() >= spec.for_scheme(Scheme(2, 2), 4).max_len());
}

TEST_CASE("memory: a scheme that cannot hold its states has MaxLen 0") {
  auto spec = tiny_spec();
  spec.gpu_memory_bytes = 2500;
  CHECK(spec.for_scheme(Scheme(2, 2), 4).max_len() == 0);
  CHECK(LinearMemory(10, 1, 5, 1).max_len() == 0);
}

TEST_CASE("memory: MaxLen stops at 2^52 tokens whatever the granularity") {
  // Found by fuzzing under UBSan: 2^52 blocks of 4096 tokens overflowed int64.
  constexpr std::int64_t most = std::int64_t{1} << 52;
  CHECK(LinearMemory(0, 1e-300, 1e10, 4096).max_len() == most);
  CHECK(LinearMemory(0, 1e-300, 1e10, 3).max_len() == most / 3 * 3);
  CHECK(LinearMemory(0, 1e-300, 1e10, most).max_len() == most);
  CHECK_THROWS_WITH_AS(LinearMemory(0, 1, 10, most + 1), doctest::Contains("granularity must be in [1, 2^52]"),
                       invalid_input);
}

TEST_CASE("memory: bad input") {
  auto spec = tiny_spec();
  CHECK_THROWS_WITH_AS(spec.for_scheme(Scheme(4, 1), 8), doctest::Contains("no activation constant A for tp 4"),
                       invalid_input);
  CHECK_THROWS_WITH_AS(spec.for_scheme(Scheme(2, 4), 4), doctest::Contains("needs 8 GPUs"), invalid_input);
  CHECK_THROWS_AS(spec.for_scheme(Scheme(1, 8), 8), invalid_input);  // more stages than layers
  CHECK_THROWS_AS(spec.for_scheme(Scheme(1, 1), 0), invalid_input);
  auto bad = spec;
  bad.alpha = 1.5;
  CHECK_THROWS_AS(require_valid(bad), invalid_input);
  bad = spec;
  bad.state_bytes = std::nan("");
  CHECK_THROWS_AS(require_valid(bad), invalid_input);
  bad = spec;
  bad.activation_bytes[2] = -1;
  CHECK_THROWS_AS(require_valid(bad), invalid_input);
  bad = spec;
  bad.layers = 0;
  CHECK_THROWS_AS(require_valid(bad), invalid_input);
  bad = spec;
  bad.safety_margin_bytes = -1;
  CHECK_THROWS_AS(require_valid(bad), invalid_input);
  CHECK_THROWS_AS(LinearMemory(0, 0, 10, 1), invalid_input);
  CHECK_THROWS_AS(LinearMemory(-1, 1, 10, 1), invalid_input);
  CHECK_THROWS_AS(LinearMemory(0, 1, 10, 0), invalid_input);
}

TEST_CASE("grid: bilinear interpolation reproduces a bilinear function exactly") {
  const std::vector<double> sizes = {1, 2, 4, 8};
  const std::vector<double> lengths = {32, 64, 128, 512, 2048};
  auto f = [](double x, double y) { return 2 * x + 3 * y + 0.5 * x * y + 7; };
  std::vector<double> values;
  for (double x : sizes)
    for (double y : lengths) values.push_back(f(x, y));
  const RectilinearGrid<2> grid({sizes, lengths}, values);
  CHECK(grid({1, 32}) == doctest::Approx(f(1, 32)));
  CHECK(grid({3, 100}) == doctest::Approx(f(3, 100)));
  CHECK(grid({8, 2048}) == doctest::Approx(f(8, 2048)));
  CHECK(grid({5.5, 1000}) == doctest::Approx(f(5.5, 1000)));
  // Hand-computed: between (2,64)=f and (4,128), midpoint of the cell.
  CHECK(grid({3, 96}) == doctest::Approx((f(2, 64) + f(4, 64) + f(2, 128) + f(4, 128)) / 4));
  CHECK_THROWS_WITH_AS(grid({16, 100}), doctest::Contains("outside"), invalid_input);
  CHECK_THROWS_AS(grid({1, 16}), invalid_input);
  CHECK_THROWS_AS(grid({std::nan(""), 100}), invalid_input);
  // Extrapolation continues the edge cell linearly: exact for a bilinear function.
  CHECK(grid({16, 4096}, OutOfGrid::extrapolate) == doctest::Approx(f(16, 4096)));
  CHECK(grid({0.5, 16}, OutOfGrid::extrapolate) == doctest::Approx(f(0.5, 16)));
}

TEST_CASE("grid: encoder–decoder cost model over (micro-batch size, input, target)") {
  const std::vector<double> sizes = {1, 4};
  const std::vector<double> inputs = {64, 256, 1024};
  const std::vector<double> targets = {16, 64, 256};
  auto f = [](double b, double i, double t) { return b * (i + 2 * t) + 0.01 * i * t + 1; };
  std::vector<double> time;
  std::vector<double> memory;
  for (double b : sizes)
    for (double i : inputs)
      for (double t : targets) {
        time.push_back(f(b, i, t));
        memory.push_back(1000 * b * (i + t));
      }
  const EncoderDecoderGridCostModel model{RectilinearGrid<3>({sizes, inputs, targets}, time),
                                          RectilinearGrid<3>({sizes, inputs, targets}, memory)};
  CHECK(model.seconds({2, 100, 32}) == doctest::Approx(f(2, 100, 32)));
  CHECK(model.bytes({3, 512, 100}) == doctest::Approx(1000.0 * 3 * 612));
  CHECK_THROWS_AS(model.seconds({2, 2048, 32}), invalid_input);
}

TEST_CASE("grid: bad tables") {
  using Axes = std::array<std::vector<double>, 2>;
  CHECK_THROWS_WITH_AS(RectilinearGrid<2>(Axes{{{1, 2}, {1, 2}}}, {1, 2, 3}), doctest::Contains("expected 4 values"),
                       invalid_input);
  CHECK_THROWS_AS(RectilinearGrid<2>(Axes{{{1}, {1, 2}}}, {1, 2}), invalid_input);
  CHECK_THROWS_AS(RectilinearGrid<2>(Axes{{{2, 1}, {1, 2}}}, {1, 2, 3, 4}), invalid_input);
  CHECK_THROWS_AS(RectilinearGrid<2>(Axes{{{1, 1}, {1, 2}}}, {1, 2, 3, 4}), invalid_input);
  CHECK_THROWS_AS(RectilinearGrid<2>(Axes{{{1, 2}, {1, 2}}}, {1, 2, std::nan(""), 4}), invalid_input);
}

namespace {

// A profile of one scheme, ⟨1, 2⟩ on 4 GPUs, with the given latency and a stated MaxLen (or tiny_spec's memory).
ProfileSpec one_scheme(QuadraticLatency latency, std::optional<std::int64_t> max_len = 32768) {
  ProfileSpec spec;
  spec.name = std::string("p");  // not = "p": GCC 12 -O3 misreads that assignment as an overlapping copy (-Wrestrict)
  spec.gpus = 4;
  spec.memory = tiny_spec();
  spec.schemes = {{Scheme(1, 2), latency, max_len, 64}};
  return spec;
}

}  // namespace

TEST_CASE("profile: T(1) and T(MaxLen) must lie in [1 ns, 1e6 s], or the profile is refused naming the scheme") {
  // Found by fuzzing: every coefficient 1e-20 (or a = 1e-30 alone) made stage times that vanish on a simulated
  // timeline, and a = 1e300 or 1e308 made every packing estimate infinite.
  CHECK_THROWS_WITH_AS(Profile(one_scheme({1e-20, 1e-20, 1e-20})),
                       "profile p: tp1pp2: latency T(1) = a + b + c = 2.9999999999999997e-20 s is below 1e-09 s "
                       "(a = 1e-20, b = 1e-20, c = 1e-20)",
                       invalid_input);
  CHECK_THROWS_WITH_AS(Profile(one_scheme({1e-30, 0, 0})), doctest::Contains("profile p: tp1pp2: latency T(1) = "),
                       invalid_input);
  CHECK_THROWS_WITH_AS(Profile(one_scheme({1e300, 1e-4, 1e-2}, 20000)),
                       "profile p: tp1pp2: latency T(max_len = 20000) = inf s is above 1e+06 s (a = 1e+300, "
                       "b = 1e-04, c = 0.01): the coefficients or max_len are out of range",
                       invalid_input);
  CHECK_THROWS_WITH_AS(Profile(one_scheme({1e308, 0, 0}, 1)), doctest::Contains("T(max_len = 1) = 1e+308 s is above"),
                       invalid_input);
  // A scheme that holds nothing is still checked, at one token.
  CHECK_THROWS_WITH_AS(Profile(one_scheme({0, 0, 2e6}, 0)), doctest::Contains("T(max_len = 1) = 2e+06 s"),
                       invalid_input);
  // Tiny but positive coefficients are fine while T stays in range: the bounds are inclusive.
  const QuadraticLatency tiny_a(1e-30, 1e-4, 1e-2);
  CHECK(Profile(one_scheme(tiny_a)).at(Scheme(1, 2)).latency(32768) == tiny_a(32768));
  CHECK_NOTHROW(Profile(one_scheme({4.9e-324, 0, 1e-9})));
  CHECK_NOTHROW(Profile(one_scheme({0, 0, 1e6})));
  CHECK_NOTHROW(Profile(one_scheme({0, 1e-9, 0}, 0)));
}

TEST_CASE("profile: a memory model that derives an absurd MaxLen, or overflows, is refused naming the scheme") {
  // A vanishing activation constant lets 2^52 tokens fit, which no scheme runs in 1e6 s.
  ProfileSpec spec = one_scheme({0, 1e-4, 1e-2}, std::nullopt);
  spec.memory->activation_bytes[1] = 1e-300;
  CHECK_THROWS_WITH_AS(Profile{spec}, doctest::Contains("profile p: tp1pp2: latency T(max_len = 4503599627370496)"),
                       invalid_input);
  spec = one_scheme({0, 1e-4, 1e-2}, std::nullopt);
  spec.memory->state_bytes = 1e308;
  CHECK_THROWS_WITH_AS(Profile{spec}, doctest::Contains("profile p: tp1pp2: memory: fixed bytes must be finite"),
                       invalid_input);
  // The same memory model with realistic constants resolves.
  CHECK(Profile(one_scheme({0, 1e-4, 1e-2}, std::nullopt)).max_len(Scheme(1, 2)) > 0);
}

TEST_CASE("profile: last-stage work must leave the other stages time, and only a pipeline has other stages") {
  ProfileSpec spec = one_scheme({1e-9, 1e-4, 1e-2});
  spec.schemes[0].last_stage = LastStageWork(4e-5, 2e-3);
  CHECK(Profile(spec).at(Scheme(1, 2)).last_stage == LastStageWork(4e-5, 2e-3));
  CHECK(Profile(spec).with_gpus(8).at(Scheme(1, 2)).last_stage == LastStageWork(4e-5, 2e-3));
  spec.schemes[0].last_stage = LastStageWork(2e-4, 0);
  CHECK_THROWS_WITH_AS(Profile{spec}, doctest::Contains("profile p: tp1pp2: last_stage work (b = "), invalid_input);
  CHECK_THROWS_WITH_AS(Profile{spec}, doctest::Contains(") exceeds the stage's own (a = 1e-09"), invalid_input);
  // All of b and c leaves the other stages a·l² alone: a nanosecond at one token is enough, less is refused.
  spec.schemes[0].last_stage = LastStageWork(1e-4, 1e-2);
  CHECK_NOTHROW(Profile{spec});
  ProfileSpec faint_attention = one_scheme({1e-12, 1e-4, 1e-2});
  faint_attention.schemes[0].last_stage = LastStageWork(1e-4, 1e-2);
  CHECK_THROWS_WITH_AS(Profile{faint_attention}, doctest::Contains("T(1) less the last stage's work is below 1e-09 s"),
                       invalid_input);
  spec.schemes[0].scheme = Scheme(1, 1);
  spec.schemes[0].last_stage = LastStageWork(1e-5, 0);
  CHECK_THROWS_WITH_AS(Profile{spec}, "profile p: tp1pp1: last_stage work is given but the pipeline has one stage",
                       invalid_input);
  CHECK_THROWS_AS(LastStageWork(-1e-9, 0), invalid_input);
  CHECK_THROWS_AS(LastStageWork(0, std::nan("")), invalid_input);
  CHECK_THROWS_AS(LastStageWork(std::numeric_limits<double>::infinity(), 0), invalid_input);
  CHECK(LastStageWork(2e-6, 1e-3).seconds(1000) == 2e-6 * 1000 + 1e-3);
}

TEST_CASE("fit: a packed sample counts its sequences' Σ l² and Σ l, and c once") {
  const QuadraticLatency truth(3.5e-10, 2.1e-6, 5.2e-3);
  std::vector<LatencySample> samples;
  for (const std::int64_t length : {256, 512, 1024, 2048, 4096, 8192}) samples.push_back({length, truth(length)});
  for (const std::int64_t sequences : {2, 4, 8, 16, 32}) {
    const LatencySample packed{256, 0, sequences};
    samples.push_back({256, predicted_seconds(truth, packed), sequences});
  }
  CHECK(predicted_seconds(truth, samples.back()) ==
        doctest::Approx(32 * (3.5e-10 * 256 * 256 + 2.1e-6 * 256) + 5.2e-3));
  CHECK(predicted_seconds(truth, samples.front()) == truth(256));
  const FitResult fit = fit_quadratic(samples);
  CHECK(fit.model.a() == doctest::Approx(truth.a()).epsilon(1e-9));
  CHECK(fit.model.b() == doctest::Approx(truth.b()).epsilon(1e-9));
  CHECK(fit.model.c() == doctest::Approx(truth.c()).epsilon(1e-9));
  CHECK(fit.relative_rms_error < 1e-10);
  // Read as single sequences, the packed samples would not be a quadratic in the length at all.
  std::vector<LatencySample> as_single = samples;
  for (LatencySample& sample : as_single) sample.sequences = 1;
  CHECK(fit_quadratic(as_single).relative_rms_error > 0.2);
  // Packed memory samples are fitted on the micro-batch's tokens.
  std::vector<ProfileSample> profiled;
  for (const LatencySample& sample : samples)
    profiled.push_back({Scheme(1, 1), sample.length, sample.seconds,
                        1e9 + 4e5 * static_cast<double>(sample.length * sample.sequences), std::nullopt,
                        sample.sequences});
  const ProfileFit fitted = fit_profile(profiled, one_scheme({1e-9, 1e-4, 1e-2}), {});
  REQUIRE(fitted.schemes.front().memory.has_value());
  CHECK(fitted.schemes.front().memory->bytes_per_token == doctest::Approx(4e5).epsilon(1e-9));
  CHECK(fitted.schemes.front().latency.model.b() == doctest::Approx(truth.b()).epsilon(1e-9));
  CHECK_THROWS_WITH_AS(fit_quadratic(std::vector<LatencySample>{{256, 1.0, 0}, {512, 2.0}, {1024, 3.0}}),
                       "fit: sample 0: sequences must be in [1, 2^20], got 0", invalid_input);
  CHECK_THROWS_WITH_AS(
      fit_last_and_other_stage(samples, std::vector<LatencySample>{{256, 1.0}, {512, 2.0}, {1024, 3.0, 1 << 21}}),
      "fit of the other stage: sample 2: sequences must be in [1, 2^20], got 2097152", invalid_input);
}

TEST_CASE("fit: packed samples tell b from a where single sequences under a large c confound them") {
  // A stage of serialized lanes, as the executor's profiler measures it on an H200 (four LLaMA-7B-shaped layers,
  // ⟨TP 2, ring CP 2⟩): a large fixed cost beside the linear work, 2% noise per sample. Over 100 draws, adding the
  // packed micro-batches (2, 4 … 32 of the shortest length) brings the fitted b closer, and with it the time of a
  // micro-batch packed with 120 short sequences, which is mostly b·l (mean errors of b 6.6% against 2.2%, of that
  // micro-batch 5.6% against 1.9%).
  const QuadraticLatency truth(2.0e-10, 2.0e-6, 4.5e-3);
  Rng rng(2026);
  double single_b = 0, packed_b = 0, single_batch = 0, packed_batch = 0;
  const LatencySample batch{256, 0, 120};
  for (int draw = 0; draw < 100; ++draw) {
    std::vector<LatencySample> singles, packed;
    for (const std::int64_t length : {256, 512, 1024, 2048, 4096, 8192}) {
      singles.push_back({length, truth(length) * (1 + 0.02 * rng.normal())});
      if (length > 256) {
        const LatencySample shape{256, 0, length / 256};
        packed.push_back({256, predicted_seconds(truth, shape) * (1 + 0.02 * rng.normal()), length / 256});
      }
    }
    packed.insert(packed.end(), singles.begin(), singles.end());
    const QuadraticLatency from_singles = fit_quadratic(singles).model;
    const QuadraticLatency from_both = fit_quadratic(packed).model;
    single_b += std::abs(from_singles.b() / truth.b() - 1);
    packed_b += std::abs(from_both.b() / truth.b() - 1);
    single_batch += std::abs(predicted_seconds(from_singles, batch) / predicted_seconds(truth, batch) - 1);
    packed_batch += std::abs(predicted_seconds(from_both, batch) / predicted_seconds(truth, batch) - 1);
  }
  MESSAGE("mean relative error of b: singles ", single_b / 100, ", with packed ", packed_b / 100,
          "; of the packed batch: ", single_batch / 100, ", ", packed_batch / 100);
  CHECK(packed_b < single_b / 2);
  CHECK(packed_batch < single_batch / 2);
  CHECK(packed_batch / 100 < 0.02);
}

TEST_CASE("fit: inner seconds give the last stage's own work, both stages fitted with one attention term") {
  // The last stage: the other stages' layers (same attention term) plus a head linear in the tokens.
  const QuadraticLatency inner(1.5e-9, 6e-5, 4e-3);
  const LastStageWork head(2.5e-5, 1e-3);
  std::vector<ProfileSample> samples;
  for (const std::int64_t length : {256, 512, 1024, 2048, 4096, 8192}) {
    const double seconds = inner(length) + head.seconds(length);
    samples.push_back({Scheme(1, 2), length, seconds, std::nullopt, inner(length)});
    samples.push_back({Scheme(1, 1), length, 2 * seconds, std::nullopt, std::nullopt});
  }
  const ProfileSpec base = one_scheme({1e-9, 1e-4, 1e-2});
  const ProfileFit fit = fit_profile(samples, base, {});
  REQUIRE(fit.schemes.size() == 2);
  REQUIRE(fit.schemes[1].inner.has_value());
  CHECK_FALSE(fit.schemes[0].inner.has_value());
  const LastStageWork& work = fit.profile.at(Scheme(1, 2)).last_stage;
  CHECK(work == last_stage_work(fit.schemes[1].latency.model, fit.schemes[1].inner->model));
  CHECK(work.b() == doctest::Approx(head.b()).epsilon(1e-9));
  CHECK(work.c() == doctest::Approx(head.c()).epsilon(1e-9));
  CHECK(fit.profile.at(Scheme(1, 1)).last_stage.is_zero());
  // Each term at least 0: an inner fit above the last stage's leaves no work.
  CHECK(last_stage_work({1e-9, 1e-5, 1e-3}, {1e-9, 2e-5, 5e-4}) == LastStageWork(0, 5e-4));

  // Fitted together, the stages share a: the work is the last stage's b and c above the other's, both >= 0.
  const StageFits both = fit_last_and_other_stage(std::vector<LatencySample>{{256, 1.0}, {1024, 2.5}, {4096, 9.0}},
                                                  std::vector<LatencySample>{{256, 1.0}, {1024, 3.0}, {4096, 8.0}});
  CHECK(both.last.model.a() == both.other.model.a());
  CHECK(both.last.model.b() >= both.other.model.b());
  CHECK(both.last.model.c() >= both.other.model.c());
  CHECK(both.last.samples == 3);

  std::vector<ProfileSample> partial = samples;
  partial[0].inner_seconds.reset();
  CHECK_THROWS_WITH_AS(fit_profile(partial, base, {}),
                       "fit: scheme tp1pp2: inner seconds are given for 5 of its 6 samples (all or none)",
                       invalid_input);
  std::vector<ProfileSample> one_stage = samples;
  one_stage[1].inner_seconds = 1.0;
  CHECK_THROWS_AS(fit_profile(one_stage, base, {}), invalid_input);
  one_stage[1].inner_seconds.reset();
  for (ProfileSample& sample : one_stage)
    if (sample.scheme == Scheme(1, 1)) sample.inner_seconds = sample.seconds;
  CHECK_THROWS_WITH_AS(fit_profile(one_stage, base, {}),
                       "fit: scheme tp1pp1: inner seconds are given but the pipeline has one stage", invalid_input);
  std::vector<ProfileSample> noisy = samples;
  for (std::size_t i = 0; i < noisy.size(); i += 4) *noisy[i].inner_seconds *= 2;
  CHECK_THROWS_WITH_AS(fit_profile(noisy, base, {}), doctest::Contains("tp1pp2: inner latency fit's relative RMS"),
                       invalid_input);
}

TEST_CASE("fit: with noisy stage times, one attention term for both stages estimates the work closer than two fits") {
  // A stage and its head timed with 1% noise on each sample, 200 draws: the work as the difference of two free fits
  // takes the noise of both fits' a into b and c; fitted together, it does not (mean errors of b 5.4e-7 against
  // 9.6e-7, of c 3.3e-4 against 4.1e-4).
  const QuadraticLatency inner(1.5e-9, 6e-5, 4e-3);
  const LastStageWork head(2.5e-5, 1e-3);
  Rng rng(2026);
  double apart_b = 0, together_b = 0, apart_c = 0, together_c = 0;
  for (int draw = 0; draw < 200; ++draw) {
    std::vector<LatencySample> last, other;
    for (const std::int64_t length : {256, 512, 1024, 2048, 4096, 8192}) {
      last.push_back({length, (inner(length) + head.seconds(length)) * (1 + 0.01 * rng.normal())});
      other.push_back({length, inner(length) * (1 + 0.01 * rng.normal())});
    }
    const LastStageWork apart = last_stage_work(fit_quadratic(last).model, fit_quadratic(other).model);
    const StageFits both = fit_last_and_other_stage(last, other);
    const LastStageWork together = last_stage_work(both.last.model, both.other.model);
    apart_b += std::abs(apart.b() - head.b());
    apart_c += std::abs(apart.c() - head.c());
    together_b += std::abs(together.b() - head.b());
    together_c += std::abs(together.c() - head.c());
  }
  CHECK(together_b < apart_b);
  CHECK(together_c < apart_c);
}
