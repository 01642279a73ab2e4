#pragma once
// A Profile: the parallel schemes of one (model, GPU type, cluster) with their cost models, resolved
// for a cluster of N GPUs (MaxLen depends on N because optimizer states are sharded over all GPUs).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/core/scheme.hpp"
#include "sluice/core/span.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/cost/concepts.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/memory.hpp"

namespace sluice::cost {

static_assert(LatencyModel<QuadraticLatency>);
static_assert(MemoryModel<LinearMemory>);

// One scheme as a profile file gives it: measured or fitted latency, and optionally MaxLen and UtilLen
// stated outright (otherwise derived from the memory model and the latency curve).
struct SchemeEntry {
  Scheme scheme;
  QuadraticLatency latency;
  std::optional<std::int64_t> max_len;
  std::optional<std::int64_t> util_len;
  LastStageWork last_stage{};  // PP > 1 only: a pipeline of one stage has no other stage
  friend bool operator==(const SchemeEntry&, const SchemeEntry&) = default;
};

// A scheme ready for planning.
struct SchemeCost {
  Scheme scheme;
  QuadraticLatency latency;
  std::int64_t max_len = 0;   // longest sequence one micro-batch may hold; 0 = the scheme does not fit
  std::int64_t util_len = 1;  // length at which GEMMs reach the utilisation threshold
  std::optional<LinearMemory> memory;
  LastStageWork last_stage{};
  friend bool operator==(const SchemeCost&, const SchemeCost&) = default;
};

// The range a usable scheme's latency must stay in, so that every time a planner derives from it is finite and
// positive: T(1) = a + b + c at least min_stage_seconds (a nanosecond: no step of a GPU is shorter; a kernel
// launch alone takes microseconds), and T(max(MaxLen, 1)) at most max_stage_seconds (about 11.6 days for one
// sequence on one stage). T is non-decreasing in l (a, b, c >= 0), so these two ends bound the whole usable
// range; T'(l) = a·l² + b·l and c may each be 0. Any two stage times then differ by at most 1e15, inside a
// double's resolution; a simulated timeline too long to resolve its shortest op is refused by
// schedule::require_problem.
inline constexpr double min_stage_seconds = 1e-9;
inline constexpr double max_stage_seconds = 1e6;

struct ModelInfo {
  std::string name;
  int layers = 0;
  std::int64_t hidden = 0;
  std::int64_t vocab = 0;
  int heads = 0;     // attention heads; 0 = not given (context parallelism needs them)
  int kv_heads = 0;  // key/value heads (grouped-query attention); 0 = as many as the heads
  friend bool operator==(const ModelInfo&, const ModelInfo&) = default;
};

struct ProfileSpec {
  std::string name;
  std::string source;  // where the numbers come from
  ModelInfo model;
  std::int64_t gpus = 0;  // cluster size the profile is resolved for
  int gpus_per_node = 8;
  double util_threshold = 0.85;
  std::optional<TransformerMemorySpec> memory;
  std::vector<SchemeEntry> schemes;
};

class Profile {
public:
  explicit Profile(ProfileSpec spec) : spec_(std::move(spec)) {
    sluice::require(spec_.gpus >= 1, "profile ", spec_.name, ": cluster GPU count must be >= 1, got ", spec_.gpus);
    sluice::require(spec_.gpus_per_node >= 1, "profile ", spec_.name, ": gpus_per_node must be >= 1, got ",
                    spec_.gpus_per_node);
    // A documented bound of the profile: a bad threshold is reported whether or not a scheme derives its UtilLen.
    sluice::require(std::isfinite(spec_.util_threshold) && spec_.util_threshold > 0 && spec_.util_threshold < 1,
                    "profile ", spec_.name, ": util_threshold must be in (0, 1), got ", spec_.util_threshold);
    sluice::require(!spec_.schemes.empty(), "profile ", spec_.name, ": has no schemes");
    if (spec_.memory) named([&] { require_valid(*spec_.memory); });
    std::vector<Scheme> seen;
    for (const SchemeEntry& entry : spec_.schemes) {
      sluice::require(std::find(seen.begin(), seen.end(), entry.scheme) == seen.end(), "profile ", spec_.name,
                      ": scheme ", entry.scheme.name(), " is listed twice");
      seen.push_back(entry.scheme);
      if (entry.max_len)
        sluice::require(*entry.max_len >= 0, "profile ", spec_.name, ": ", entry.scheme.name(),
                        ": max_len must be >= 0, got ", *entry.max_len);
      if (entry.util_len)
        sluice::require(*entry.util_len >= 1, "profile ", spec_.name, ": ", entry.scheme.name(),
                        ": util_len must be >= 1, got ", *entry.util_len);
      if (!entry.max_len)
        sluice::require(spec_.memory.has_value(), "profile ", spec_.name, ": ", entry.scheme.name(),
                        " has no max_len and the profile has no memory model to derive it");
      // Schemes larger than the cluster stay in the spec (with_gpus may enlarge it) but are not usable here.
      if (entry.scheme.gpus() <= spec_.gpus) schemes_.push_back(named([&] { return resolve(entry); }, entry.scheme));
    }
    sluice::require(!schemes_.empty(), "profile ", spec_.name, ": no scheme fits a cluster of ", spec_.gpus, " GPUs");
    std::sort(schemes_.begin(), schemes_.end(),
              [](const SchemeCost& x, const SchemeCost& y) { return x.scheme > y.scheme; });
  }

  [[nodiscard]] const ProfileSpec& spec() const noexcept { return spec_; }
  [[nodiscard]] const std::string& name() const noexcept { return spec_.name; }
  [[nodiscard]] std::int64_t gpus() const noexcept { return spec_.gpus; }

  // The same profile resolved for a cluster of another size.
  [[nodiscard]] Profile with_gpus(std::int64_t gpus) const {
    ProfileSpec spec = spec_;
    spec.gpus = gpus;
    return Profile(std::move(spec));
  }

  // Usable schemes, in canonical order (TP, then PP, descending).
  [[nodiscard]] Span<const SchemeCost> schemes() const noexcept { return schemes_; }

  [[nodiscard]] const SchemeCost* find(const Scheme& scheme) const noexcept {
    const auto it =
        std::find_if(schemes_.begin(), schemes_.end(), [&](const SchemeCost& entry) { return entry.scheme == scheme; });
    return it == schemes_.end() ? nullptr : &*it;
  }

  [[nodiscard]] const SchemeCost& at(const Scheme& scheme) const {
    const SchemeCost* cost = find(scheme);
    sluice::require(cost != nullptr, "profile ", spec_.name, ": no usable scheme ", scheme.name(), " for ", spec_.gpus,
                    " GPUs");
    return *cost;
  }

  [[nodiscard]] std::int64_t max_len(const Scheme& scheme) const { return at(scheme).max_len; }

  // The strategy's pipelines, ordered by MaxLen; raises invalid_input if a scheme is not in the profile
  // or the strategy needs more GPUs than the cluster has.
  [[nodiscard]] std::vector<Pipeline> pipelines(const Strategy& strategy) const {
    strategy.require_fits(spec_.gpus);
    return strategy.pipelines([this](const Scheme& scheme) { return max_len(scheme); });
  }

private:
  // Runs `check`, naming the profile (and the scheme) in the invalid_input it raises: the memory and latency
  // models name the bad value, not the profile it came from.
  template <class Check>
  auto named(Check&& check, std::optional<Scheme> scheme = std::nullopt) const -> decltype(check()) {
    try {
      return check();
    } catch (const invalid_input& error) {
      sluice::fail("profile ", spec_.name, ": ", scheme ? scheme->name() + ": " : "", error.what());
    }
  }

  [[nodiscard]] SchemeCost resolve(const SchemeEntry& entry) const {
    SchemeCost cost{entry.scheme, entry.latency, 0, 1, std::nullopt, entry.last_stage};
    // A stated MaxLen needs no memory model, so a missing activation constant for its TP is no error.
    if (spec_.memory && (!entry.max_len || spec_.memory->activation_bytes.contains(entry.scheme.tp())))
      cost.memory = spec_.memory->for_scheme(entry.scheme, spec_.gpus);
    cost.max_len = entry.max_len ? *entry.max_len : cost.memory->max_len();
    cost.util_len = entry.util_len ? *entry.util_len : entry.latency.util_len(spec_.util_threshold);
    using sluice::shortest;
    const QuadraticLatency& t = entry.latency;
    auto coefficients = [&t] {
      return "(a = " + shortest(t.a()) + ", b = " + shortest(t.b()) + ", c = " + shortest(t.c()) + ")";
    };
    if (!(t(1) >= min_stage_seconds))
      sluice::fail("latency T(1) = a + b + c = ", shortest(t(1)), " s is below ", shortest(min_stage_seconds), " s ",
                   coefficients());
    const std::int64_t longest = std::max<std::int64_t>(cost.max_len, 1);
    if (!(t(longest) <= max_stage_seconds))
      sluice::fail("latency T(max_len = ", longest, ") = ", shortest(t(longest)), " s is above ",
                   shortest(max_stage_seconds), " s ", coefficients(),
                   ": the coefficients or max_len are out of range");
    // The stages before the last run T less the last stage's work, which must leave each micro-batch at least
    // min_stage_seconds there: its b and c at most T's, and T(1) less it no shorter.
    const LastStageWork& work = entry.last_stage;
    if (!work.is_zero()) {
      sluice::require(entry.scheme.pp() > 1, "last_stage work is given but the pipeline has one stage");
      sluice::require(work.b() <= t.b() && work.c() <= t.c(), "last_stage work (b = ", shortest(work.b()),
                      ", c = ", shortest(work.c()), ") exceeds the stage's own ", coefficients());
      sluice::require(t(1) - work.seconds(1) >= min_stage_seconds, "latency T(1) less the last stage's work is below ",
                      shortest(min_stage_seconds), " s ", coefficients());
    }
    return cost;
  }

  ProfileSpec spec_;
  std::vector<SchemeCost> schemes_;
};

}  // namespace sluice::cost
