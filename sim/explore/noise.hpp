#pragma once
// How far apart two predictions must be before stepsim can rank them (issue 48): the step-time
// error of the validated sources closest to the run. A gain below it is noise, not a finding.
//
// The rule: each source of the validation suite (validation/suite.json) is scored against the
// run by its cases' experiments: 2 when one of them runs on the run's GPU class (the first
// letter of the profile's name, "h100-sxm-8x", or of its file name: a = Ampere A100/A800,
// h = Hopper H100/H800/H200, b = Blackwell), plus
// 1 when one of them uses the run's framework (ddp, fsdp1, fsdp2, zero). The sources with the
// highest score are the closest; the noise is the largest of their step-time median |error| in
// validation/baseline.json (the committed summary of `stepsim validate`), over their test rows:
// the rows the accuracy claims rest on, not the calibration split `fit --suite` reads. No source scores:
// the suite's overall median. A profile without a GPU class (toy-ideal) or no suite found (neither in the working directory nor the data
// directory): no noise is known and nothing is said.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stepsim {

struct NoiseFloor {
  double pct = 0;                    // 0: unknown
  std::vector<std::string> sources;  // the closest sources it comes from
  std::string closeness;             // "same GPU class and framework", "same GPU class", ...
};

// `profile` the profile's name (or its file), `framework` the strategy's.
NoiseFloor noise_floor(const std::string& profile, const std::string& framework);

// How the suite's real runs scaled against the model's predictions of them: its GPU-count pairs
// (the same run on more GPUs at the same per-GPU batch), each change per doubling of the GPUs,
// as `stepsim validate` computes them (validate::gpu_pair_fidelity) and validation/baseline.json
// holds them ("scale"). `stepsim scale` prints it under its curve.
struct ScaleFidelity {
  int pairs = 0, min_gpus = 0, max_gpus = 0;  // the GPU-count pairs and the GPU counts they span
  double measured_pct = 0, predicted_pct = 0;  // medians of the pairs' per-doubling changes, percent
  double gap_points = 0;                        // median of the pairs' measured - predicted, points
};
// As the baseline holds it: {"gpu_pairs", "gpus": [lo, hi], "measured_pct_per_doubling",
// "predicted_pct_per_doubling", "gap_points_per_doubling"}, the medians rounded to 0.01.
nlohmann::json scale_fidelity_json(const ScaleFidelity& f);
// The reverse; empty unless `j` is such an object.
std::optional<ScaleFidelity> scale_fidelity_from_json(const nlohmann::json& j);
// The committed baseline's (validation/baseline.json beside the suite that resolve_input_path
// finds); empty when no suite or baseline is found, or the baseline has no valid "scale".
std::optional<ScaleFidelity> scale_fidelity();

// The GPU class of a profile name or path ("h100-sxm-8x", "configs/hardware/a800-sxm-8x.json"
// -> "h", "a"): a letter followed by a digit; "" if none (toy-ideal).
std::string gpu_class(const std::string& profile);

}  // namespace stepsim
