#pragma once
// Measured samples of one's own model and cluster, as `sluice fit` reads them (docs/profiling.md): per parallel
// scheme, the forward+backward seconds of one micro-batch of one sequence (or of several packed sequences of one
// length) on the pipeline's last stage, optionally the first stage's peak memory during training with micro-batches
// of that many tokens and the seconds of another stage. No Eigen here, so that reading and writing samples does not
// need it; the fit is in cost/fit.hpp.
#include <cstdint>
#include <optional>
#include <vector>

#include "sluice/core/scheme.hpp"

namespace sluice::cost {

struct ProfileSample {
  Scheme scheme;
  std::int64_t tokens = 0;  // the micro-batch's one sequence, or each of its packed sequences
  double seconds = 0;       // forward + backward of that micro-batch on the pipeline's last stage
  std::optional<double> peak_bytes;
  // The same on another stage of as many layers (no LM head, no loss): what tells the last stage's own work apart.
  std::optional<double> inner_seconds;
  // Sequences of `tokens` each packed into the micro-batch: more than one tells the fit's a·l² and b·l apart.
  std::int64_t sequences = 1;
  friend bool operator==(const ProfileSample&, const ProfileSample&) = default;
};

struct ProfileSamples {
  std::vector<ProfileSample> samples;
  friend bool operator==(const ProfileSamples&, const ProfileSamples&) = default;
};

}  // namespace sluice::cost
