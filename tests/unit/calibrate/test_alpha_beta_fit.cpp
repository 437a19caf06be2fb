// Least-squares alpha-beta fitting on synthetic data with known parameters.
#include <catch2/catch.hpp>

#include <cmath>

#include "calibrate/fit/alpha_beta.hpp"
#include "calibrate/fit/profile_fit.hpp"
#include "sim/hardware/collective_model.hpp"

using namespace stepsim;
using namespace stepsim::calib;

namespace {
// t = alpha + S / beta with beta in GB/s: S / (beta * 1e3) microseconds.
std::vector<FitPoint> line_points(double alpha_us, double beta_gbps, double from, double to) {
  std::vector<FitPoint> pts;
  for (double s = from; s <= to; s *= 2) pts.push_back({s, alpha_us + s / (beta_gbps * 1e3)});
  return pts;
}
}  // namespace

TEST_CASE("fit_line recovers a known alpha and beta from exact points to 1e-6", "[calibrate][fit]") {
  // alpha = 12.5 us, beta = 180 GB/s over 1 KiB .. 1 GiB (21 sizes).
  auto pts = line_points(12.5, 180.0, 1024, 1073741824.0);
  LineFit f = fit_line(pts);
  CHECK(f.alpha_us == Approx(12.5).epsilon(1e-6));
  CHECK(f.beta_gbps() == Approx(180.0).epsilon(1e-6));
  CHECK(f.r2 == Approx(1.0).epsilon(1e-9));
  CHECK(f.max_rel_error < 1e-9);
  CHECK_FALSE(f.clamped);
}

TEST_CASE("fit_ranges recovers two known regimes and their breakpoint", "[calibrate][fit]") {
  // Small messages: alpha 30 us, beta 20 GB/s up to 1 MiB; large: alpha 80 us, beta 240 GB/s.
  auto small = line_points(30, 20, 1024, 1048576);
  auto large = line_points(80, 240, 2097152, 4294967296.0);
  std::vector<FitPoint> pts = small;
  pts.insert(pts.end(), large.begin(), large.end());
  auto ranges = fit_ranges(pts, RangeFitOptions{1e-9, 4, 2});
  REQUIRE(ranges.size() == 2);
  CHECK(ranges[0].max_bytes == 1048576);
  CHECK(ranges[0].alpha_us == Approx(30).epsilon(1e-6));
  CHECK(ranges[0].beta_gbps() == Approx(20).epsilon(1e-6));
  CHECK(ranges[1].alpha_us == Approx(80).epsilon(1e-6));
  CHECK(ranges[1].beta_gbps() == Approx(240).epsilon(1e-6));
  // predict_us picks the range as the simulator does: S <= max_bytes -> first range.
  CHECK(predict_us(ranges, 1048576) == Approx(30 + 1048576 / 20e3));
  CHECK(predict_us(ranges, 8589934592.0) == Approx(80 + 8589934592.0 / 240e3));
}

TEST_CASE("fit quality is computed from the points: one perturbed point sets the reported worst error",
          "[calibrate][fit]") {
  auto pts = line_points(10, 100, 1 << 20, 1 << 30);  // 11 exact points
  LineFit exact = fit_line(pts);
  CHECK(exact.max_rel_error < 1e-9);
  pts[5].time_us *= 1.30;  // one point 30 % slow
  LineFit f = fit_line(pts);
  // The worst relative error is now that of some point against the refitted line: recompute it.
  double worst = 0;
  for (const auto& p : pts) worst = std::max(worst, std::abs(f.predict_us(p.bytes) - p.time_us) / p.time_us);
  CHECK(f.max_rel_error == Approx(worst).epsilon(1e-12));
  CHECK(f.max_rel_error > 0.05);  // the perturbation shows: at least part of the 30 % remains
  CHECK(f.r2 < 1.0);
}

TEST_CASE("a latency-only range clamps beta instead of writing a negative bandwidth", "[calibrate][fit]") {
  // Flat 40 us with the larger size slightly faster: the unconstrained slope is negative.
  std::vector<FitPoint> pts{{8, 40.2}, {16, 40.1}, {32, 40.0}, {64, 39.9}};
  LineFit f = fit_line(pts);
  CHECK(f.clamped);
  CHECK(f.beta_gbps() > 0);
  CHECK(f.alpha_us == Approx(40.05).epsilon(1e-3));
}

TEST_CASE("busbw-based prediction across group sizes keeps bus bandwidth constant at large sizes",
          "[calibrate][fit]") {
  // An 8-rank all-reduce fit with beta = 100 GB/s algbw -> busbw = 175 GB/s (factor 1.75).
  KindFit f;
  f.kind = CollectiveKind::AllReduce;
  f.ranks = 8;
  f.ranges = {fit_line(line_points(0.0001, 100, 1 << 26, 1ll << 33))};
  // On 4 ranks the factor is 1.5, so the same busbw means algbw 116.7 GB/s.
  double s = 8589934592.0;
  CHECK(predict_busbw_gbps(f, s, 4) == Approx(175.0).epsilon(1e-4));
  CHECK(predict_busbw_gbps(f, s, 8) == Approx(175.0).epsilon(1e-4));
}
