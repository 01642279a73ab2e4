#pragma once
// Least-squares fits of measured samples: T(l) = a·l² + b·l + c to (length, seconds) with a, b, c >= 0, a
// scheme's peak memory fixed + per_token·l to (length, bytes) with both >= 0, and a whole profile from per-scheme
// samples (fit_profile, what `sluice fit` runs).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <Eigen/QR>

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/cost/latency.hpp"
#include "sluice/cost/memory.hpp"
#include "sluice/cost/profile.hpp"
#include "sluice/cost/samples.hpp"

namespace sluice::cost {

namespace detail {

// The non-negative least-squares solution of design·x ≈ 1 (each row already divided by its measured value, so the
// residual is the relative error), and its mean squared residual. Non-negativity is exact: the optimum is the
// unconstrained least-squares solution on one of the 2^N − 1 supports, so with few coefficients (at most 5 here)
// every support is solved and the best non-negative one kept (the KKT conditions make this the NNLS optimum).
template <int N>
std::pair<Eigen::Matrix<double, N, 1>, double> relative_nnls(const Eigen::MatrixXd& design) {
  const Eigen::Index rows = design.rows();
  const Eigen::VectorXd target = Eigen::VectorXd::Ones(rows);
  // Columns differ by many orders of magnitude (l² vs 1); scale them for a well-conditioned solve.
  const Eigen::Matrix<double, N, 1> scale = design.colwise().norm().transpose();
  const Eigen::MatrixXd scaled = design * scale.cwiseInverse().asDiagonal();

  Eigen::Matrix<double, N, 1> best = Eigen::Matrix<double, N, 1>::Zero();
  double best_residual = target.squaredNorm();
  for (unsigned support = 1; support < (1U << N); ++support) {
    std::array<Eigen::Index, N> columns{};
    Eigen::Index count = 0;
    for (Eigen::Index k = 0; k < N; ++k)
      if (support & (1U << k)) columns[static_cast<std::size_t>(count++)] = k;
    Eigen::MatrixXd sub(rows, count);
    for (Eigen::Index j = 0; j < count; ++j) sub.col(j) = scaled.col(columns[static_cast<std::size_t>(j)]);
    const Eigen::VectorXd solution = sub.colPivHouseholderQr().solve(target);
    if ((solution.array() < 0).any() || !solution.allFinite()) continue;
    const double residual = (sub * solution - target).squaredNorm();
    if (residual < best_residual) {
      best_residual = residual;
      best.setZero();
      for (Eigen::Index j = 0; j < count; ++j) best[columns[static_cast<std::size_t>(j)]] = solution[j];
    }
  }
  return {best.cwiseQuotient(scale), best_residual / static_cast<double>(rows)};
}

// Every sample's length > 0 and value finite and > 0, at `lengths` or more distinct lengths (one per coefficient).
template <class Sample>
void check_samples(Span<const Sample> samples, double Sample::*value, std::string_view fit, std::string_view name,
                   std::size_t lengths) {
  std::set<std::int64_t> distinct;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const Sample& sample = samples[i];
    sluice::require(sample.length > 0, fit, ": sample ", i, ": length must be > 0, got ", sample.length);
    sluice::require(std::isfinite(sample.*value) && sample.*value > 0, fit, ": sample ", i, ": ", name,
                    " must be finite and > 0, got ", sample.*value);
    distinct.insert(sample.length);
  }
  sluice::require(distinct.size() >= lengths, fit, ": needs samples at ", lengths, " or more distinct lengths, got ",
                  distinct.size());
}

// check_samples for latencies, whose micro-batches also hold 1 to 2^20 packed sequences.
inline void check_latency_samples(Span<const LatencySample> samples, std::string_view fit) {
  check_samples(samples, &LatencySample::seconds, fit, "seconds", 3);
  for (std::size_t i = 0; i < samples.size(); ++i)
    sluice::require(samples[i].sequences >= 1 && samples[i].sequences <= (std::int64_t{1} << 20), fit, ": sample ", i,
                    ": sequences must be in [1, 2^20], got ", samples[i].sequences);
}

// A latency sample's row of the design: its micro-batch's Σ lᵢ², Σ lᵢ and 1, each over its seconds.
inline Eigen::RowVector3d latency_row(const LatencySample& sample) {
  const auto l = static_cast<double>(sample.length);
  const auto k = static_cast<double>(sample.sequences);
  return Eigen::RowVector3d(k * l * l, k * l, 1.0) / sample.seconds;
}

}  // namespace detail

// Minimises the *relative* squared error, so that short sequences (milliseconds) weigh as much as long ones
// (seconds). A packed sample counts its micro-batch's Σ lᵢ² and Σ lᵢ (predicted_seconds).
inline FitResult fit_quadratic(Span<const LatencySample> samples) {
  detail::check_latency_samples(samples, "fit");

  const auto rows = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd design(rows, 3);
  for (Eigen::Index r = 0; r < rows; ++r) design.row(r) = detail::latency_row(samples[static_cast<std::size_t>(r)]);
  const auto [coefficients, mean_square] = detail::relative_nnls<3>(design);
  return {QuadraticLatency(coefficients[0], coefficients[1], coefficients[2]), std::sqrt(mean_square), samples.size()};
}

// Peak bytes = fixed + per_token·l on the relative error, both >= 0. Needs samples at 2 or more distinct lengths.
inline MemoryFit fit_linear_memory(Span<const MemorySample> samples) {
  detail::check_samples(samples, &MemorySample::bytes, "memory fit", "bytes", 2);
  const auto rows = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd design(rows, 2);
  for (Eigen::Index r = 0; r < rows; ++r) {
    const MemorySample& sample = samples[static_cast<std::size_t>(r)];
    design.row(r) << 1.0 / sample.bytes, static_cast<double>(sample.length) / sample.bytes;
  }
  const auto [coefficients, mean_square] = detail::relative_nnls<2>(design);
  return {coefficients[0], coefficients[1], std::sqrt(mean_square), samples.size()};
}

// The last stage's own work from the fit of the last stage and that of another stage of the same layers: the
// difference of their linear and of their constant terms, each at least 0 (the attention term a·l² is the layers',
// the same on both).
inline LastStageWork last_stage_work(const QuadraticLatency& last, const QuadraticLatency& other) {
  return {std::max(0.0, last.b() - other.b()), std::max(0.0, last.c() - other.c())};
}

struct StageFits {
  FitResult last;   // a·l² + (b + w_b)·l + c + w_c, its error over the last stage's samples
  FitResult other;  // a·l² + b·l + c, its error over the other stage's samples
};

// The last stage's and another stage's latencies fitted together, as the model has them: one attention term a·l²
// (the layers' own, the same on both stages) and the last stage's linear and constant terms the other's plus its
// own work (w_b, w_c), all >= 0, on the relative squared errors of both sets of samples. last_stage_work of the two
// is then (w_b, w_c), and no noise in either fit's a leaks into it, as it would with two fits apart.
inline StageFits fit_last_and_other_stage(Span<const LatencySample> last, Span<const LatencySample> other) {
  detail::check_latency_samples(last, "fit");
  detail::check_latency_samples(other, "fit of the other stage");
  const auto last_rows = static_cast<Eigen::Index>(last.size());
  Eigen::MatrixXd design(last_rows + static_cast<Eigen::Index>(other.size()), 5);  // a, b, c, w_b, w_c
  for (Eigen::Index r = 0; r < design.rows(); ++r) {
    const bool on_last = r < last_rows;
    const LatencySample& sample =
        on_last ? last[static_cast<std::size_t>(r)] : other[static_cast<std::size_t>(r - last_rows)];
    const Eigen::RowVector3d row = detail::latency_row(sample);
    design.row(r) << row, on_last ? row[1] : 0.0, on_last ? row[2] : 0.0;
  }
  const Eigen::Matrix<double, 5, 1> x = detail::relative_nnls<5>(design).first;
  const auto relative_rms_error = [](Span<const LatencySample> samples, const QuadraticLatency& model) {
    double squares = 0;
    for (const LatencySample& sample : samples) {
      const double residual = predicted_seconds(model, sample) / sample.seconds - 1;
      squares += residual * residual;
    }
    return std::sqrt(squares / static_cast<double>(samples.size()));
  };
  const QuadraticLatency on_last(x[0], x[1] + x[3], x[2] + x[4]);
  const QuadraticLatency on_other(x[0], x[1], x[2]);
  return {{on_last, relative_rms_error(last, on_last), last.size()},
          {on_other, relative_rms_error(other, on_other), other.size()}};
}

struct FitProfileOptions {
  std::string name = "fitted";
  std::string source;
  // The largest relative RMS error a fit may leave, latency and memory alike; a worse fit is refused, since its
  // coefficients would not describe the samples. In (0, 1].
  double max_error = 0.05;
};

struct SchemeFit {
  Scheme scheme;
  FitResult latency;
  std::optional<MemoryFit> memory;  // when the samples carry peak bytes
  std::optional<FitResult> inner;   // another stage's latency, when the samples carry its seconds
};

struct ProfileFit {
  Profile profile;
  std::vector<SchemeFit> schemes;  // ascending by (TP, PP)
};

// The profile of `base` (model, cluster, memory budget, util_threshold) with its schemes replaced by those
// measured in `samples`: each scheme's latency fitted by fit_quadratic, and, where its samples carry peak bytes,
// MaxLen stated as the longest length whose fitted peak fixed + per_token·l fits the base's memory budget (GPU
// memory less context overhead and safety margin, rounded down to its granularity), and, where they carry inner
// seconds, the last stage's own work (both stages fitted together by fit_last_and_other_stage). Schemes without peak
// bytes derive MaxLen from the base's memory model. Raises invalid_input naming the scheme for too few lengths, a
// fit whose relative RMS error exceeds options.max_error, memory that does not grow with length, or inner seconds on
// some samples only or on a pipeline of one stage.
inline ProfileFit fit_profile(Span<const ProfileSample> samples, const ProfileSpec& base,
                              const FitProfileOptions& options) {
  sluice::require(std::isfinite(options.max_error) && options.max_error > 0 && options.max_error <= 1,
                  "fit: max_error must be in (0, 1], got ", options.max_error);
  sluice::require(!samples.empty(), "fit: no samples");
  std::map<Scheme, std::vector<const ProfileSample*>> by_scheme;
  for (const ProfileSample& sample : samples) by_scheme[sample.scheme].push_back(&sample);

  ProfileSpec spec = base;
  spec.name = options.name;
  spec.source = options.source;
  spec.schemes.clear();
  std::vector<SchemeFit> fits;
  auto percent = [](double error) { return sluice::shortest(std::round(error * 1e4) / 1e2) + "%"; };
  for (const auto& [scheme, group] : by_scheme) {
    const std::string where = "fit: scheme " + scheme.name();
    auto named = [&](auto&& fit) {
      try {
        return fit();
      } catch (const invalid_input& error) {
        sluice::fail(where, ": ", error.what());
      }
    };
    std::vector<LatencySample> latencies;
    std::vector<LatencySample> inner_latencies;
    std::vector<MemorySample> peaks;
    std::int64_t longest = 0;
    for (const ProfileSample* sample : group) {
      latencies.push_back({sample->tokens, sample->seconds, sample->sequences});
      if (sample->inner_seconds) inner_latencies.push_back({sample->tokens, *sample->inner_seconds, sample->sequences});
      if (sample->peak_bytes) peaks.push_back({sample->tokens * sample->sequences, *sample->peak_bytes});
      longest = std::max(longest, sample->tokens);
    }
    sluice::require(peaks.empty() || peaks.size() == group.size(), where, ": peak bytes are given for ", peaks.size(),
                    " of its ", group.size(), " samples (all or none)");
    sluice::require(inner_latencies.empty() || inner_latencies.size() == group.size(), where,
                    ": inner seconds are given for ", inner_latencies.size(), " of its ", group.size(),
                    " samples (all or none)");
    sluice::require(inner_latencies.empty() || scheme.pp() > 1, where,
                    ": inner seconds are given but the pipeline has one stage");
    SchemeFit fit{scheme, {}, std::nullopt, std::nullopt};
    if (inner_latencies.empty()) {
      fit.latency = named([&] { return fit_quadratic(latencies); });
    } else {
      const StageFits both = named([&] { return fit_last_and_other_stage(latencies, inner_latencies); });
      fit.latency = both.last;
      fit.inner = both.other;
    }
    const auto require_close = [&](const FitResult& result, std::string_view what) {
      sluice::require(result.relative_rms_error <= options.max_error, where, ": ", what, " fit's relative RMS error ",
                      percent(result.relative_rms_error), " exceeds the limit ", percent(options.max_error),
                      " (the samples are not a·l² + b·l + c)");
    };
    require_close(fit.latency, "latency");
    SchemeEntry entry{scheme, fit.latency.model, std::nullopt, std::nullopt, {}};
    if (fit.inner) {
      require_close(*fit.inner, "inner latency");
      entry.last_stage = last_stage_work(fit.latency.model, fit.inner->model);
    }
    // No linear term: the fixed cost never amortises within the samples, so UtilLen is the longest length measured.
    if (fit.latency.model.b() == 0 && fit.latency.model.c() > 0) entry.util_len = longest;
    if (!peaks.empty()) {
      fit.memory = named([&] { return fit_linear_memory(peaks); });
      sluice::require(fit.memory->relative_rms_error <= options.max_error, where, ": memory fit's relative RMS error ",
                      percent(fit.memory->relative_rms_error), " exceeds the limit ", percent(options.max_error),
                      " (peak bytes are not fixed + per_token·l)");
      sluice::require(fit.memory->bytes_per_token > 0, where,
                      ": peak bytes do not grow with the length (fitted bytes per token 0)");
      sluice::require(base.memory.has_value(), where, ": the base profile ", base.name,
                      " has no memory model to give the GPU's memory budget");
      const LinearMemory memory(fit.memory->fixed_bytes, fit.memory->bytes_per_token,
                                std::max(0.0, base.memory->budget_bytes()), base.memory->granularity);
      entry.max_len = memory.max_len();
    }
    spec.schemes.push_back(entry);
    fits.push_back(fit);
  }
  return {Profile(std::move(spec)), std::move(fits)};
}

}  // namespace sluice::cost
