#pragma once
// Least-squares alpha-beta fits of collective time against message size S (nccl-tests
// convention): t = alpha + S / beta, piecewise over size ranges.
//
// The fit minimises the sum of squared *relative* residuals, sum(((alpha + S/beta) - t) / t)^2,
// i.e. least squares on time with weights 1/t^2: unweighted least squares would let the
// largest message decide everything and leave 100x errors on small ones. Every quality number
// (R^2 on time, worst and RMS relative error) is recomputed from the points after the fit.

#include <cstdint>
#include <vector>

namespace stepsim::calib {

struct FitPoint {
  double bytes = 0;    // S
  double time_us = 0;  // measured time
};

struct LineFit {
  double alpha_us = 0;
  double us_per_byte = 0;  // 1 / beta
  double min_bytes = 0, max_bytes = 0;  // sizes covered by the points
  int points = 0;
  double r2 = 0;             // 1 - SS_res / SS_tot on time (1 when SS_tot == 0 and exact)
  double max_rel_error = 0;  // max |pred - t| / t
  double rms_rel_error = 0;
  bool clamped = false;      // alpha < 0 or beta <= 0 was clamped (alpha = 0 / beta = 1e5 GB/s)

  double beta_gbps() const { return 1.0 / (us_per_byte * 1e3); }  // B/us -> GB/s: /1e3
  double predict_us(double bytes) const { return alpha_us + us_per_byte * bytes; }
};

// Weighted least-squares line through `points` (>= 1 point; one distinct size fits alpha only
// with beta at the clamp). Quality is computed on the same points.
LineFit fit_line(const std::vector<FitPoint>& points);

// Recomputes r2 / max_rel_error / rms_rel_error / points / size span of `fit` on `points`.
void evaluate(LineFit& fit, const std::vector<FitPoint>& points);

struct RangeFitOptions {
  double target_rel_error = 0.05;  // use the fewest ranges whose worst point is within this
  int max_ranges = 6;
  int min_sizes_per_range = 3;     // distinct message sizes in each range (2 would fit exactly)
};

// Splits the sorted distinct sizes into contiguous ranges (dynamic programming on the total
// squared relative error, for each number of ranges) and returns the fewest ranges meeting the
// target; if none does, each extra range must cut the total squared relative error by 20 % to be
// kept (noise that no line can follow, e.g. in-place and out-of-place disagreeing by 50 % at one
// size, should not buy ranges). Range i covers sizes up to max_bytes.
std::vector<LineFit> fit_ranges(const std::vector<FitPoint>& points, const RangeFitOptions& options = {});

// Time for S from piecewise ranges, as sim/hardware/collective_model does: the first range
// whose max_bytes >= S, else the last.
double predict_us(const std::vector<LineFit>& ranges, double bytes);

}  // namespace stepsim::calib
