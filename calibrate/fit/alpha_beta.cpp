#include "calibrate/fit/alpha_beta.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace stepsim::calib {

namespace {
// The clamp for a range whose time does not grow with size (pure latency): beta = 1e5 GB/s,
// i.e. 1e-8 us per byte, far above any link, so the size term is negligible but positive (the
// profile format requires beta > 0).
constexpr double kMinUsPerByte = 1e-8;
}  // namespace

void evaluate(LineFit& fit, const std::vector<FitPoint>& points) {
  fit.points = static_cast<int>(points.size());
  if (points.empty()) return;
  double mean = 0;
  fit.min_bytes = std::numeric_limits<double>::max();
  fit.max_bytes = 0;
  for (const auto& p : points) {
    mean += p.time_us;
    fit.min_bytes = std::min(fit.min_bytes, p.bytes);
    fit.max_bytes = std::max(fit.max_bytes, p.bytes);
  }
  mean /= static_cast<double>(points.size());
  double ss_res = 0, ss_tot = 0, sum_rel2 = 0, max_rel = 0;
  for (const auto& p : points) {
    double pred = fit.predict_us(p.bytes);
    ss_res += (pred - p.time_us) * (pred - p.time_us);
    ss_tot += (p.time_us - mean) * (p.time_us - mean);
    double rel = std::abs(pred - p.time_us) / p.time_us;
    sum_rel2 += rel * rel;
    max_rel = std::max(max_rel, rel);
  }
  fit.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res == 0 ? 1.0 : 0.0);
  fit.max_rel_error = max_rel;
  fit.rms_rel_error = std::sqrt(sum_rel2 / static_cast<double>(points.size()));
}

LineFit fit_line(const std::vector<FitPoint>& points) {
  if (points.empty()) throw std::invalid_argument("fit_line: no points");
  for (const auto& p : points)
    if (!(p.time_us > 0) || !(p.bytes >= 0)) throw std::invalid_argument("fit_line: a point with time <= 0 or bytes < 0");
  // Weighted means with w = 1/t^2; sizes in GB to keep the sums well scaled.
  double sw = 0, sx = 0, sy = 0;
  for (const auto& p : points) {
    double w = 1.0 / (p.time_us * p.time_us), x = p.bytes * 1e-9;
    sw += w, sx += w * x, sy += w * p.time_us;
  }
  double xm = sx / sw, ym = sy / sw, sxx = 0, sxy = 0;
  for (const auto& p : points) {
    double w = 1.0 / (p.time_us * p.time_us), dx = p.bytes * 1e-9 - xm;
    sxx += w * dx * dx;
    sxy += w * dx * (p.time_us - ym);
  }
  LineFit fit;
  double slope_per_gb = sxx > 0 ? sxy / sxx : 0;
  fit.us_per_byte = slope_per_gb * 1e-9;
  fit.alpha_us = ym - slope_per_gb * xm;
  if (fit.us_per_byte < kMinUsPerByte) {
    fit.clamped = true;
    fit.us_per_byte = kMinUsPerByte;
    double a = 0;  // best alpha for the fixed slope: weighted mean of t - slope * S
    for (const auto& p : points) a += (p.time_us - fit.us_per_byte * p.bytes) / (p.time_us * p.time_us);
    fit.alpha_us = a / sw;
  }
  if (fit.alpha_us < 0) {
    fit.clamped = true;
    fit.alpha_us = 0;
    double num = 0, den = 0;  // best slope through the origin, same weights
    for (const auto& p : points) {
      double w = 1.0 / (p.time_us * p.time_us);
      num += w * p.bytes * p.time_us;
      den += w * p.bytes * p.bytes;
    }
    fit.us_per_byte = std::max(kMinUsPerByte, den > 0 ? num / den : kMinUsPerByte);
  }
  evaluate(fit, points);
  return fit;
}

std::vector<LineFit> fit_ranges(const std::vector<FitPoint>& points, const RangeFitOptions& opt) {
  if (points.empty()) throw std::invalid_argument("fit_ranges: no points");
  // Group by distinct size.
  std::map<double, std::vector<FitPoint>> by_size;
  for (const auto& p : points) by_size[p.bytes].push_back(p);
  std::vector<std::vector<FitPoint>> groups;
  for (auto& [s, g] : by_size) groups.push_back(std::move(g));
  const int m = static_cast<int>(groups.size());
  const int min_sizes = std::max(1, std::min(opt.min_sizes_per_range, m));
  auto segment_points = [&](int i, int j) {  // sizes [i, j)
    std::vector<FitPoint> pts;
    for (int g = i; g < j; ++g) pts.insert(pts.end(), groups[static_cast<std::size_t>(g)].begin(), groups[static_cast<std::size_t>(g)].end());
    return pts;
  };
  // Segment costs (sum of squared relative residuals), memoised.
  std::vector<std::vector<double>> cost(static_cast<std::size_t>(m + 1), std::vector<double>(static_cast<std::size_t>(m + 1), -1));
  auto seg_cost = [&](int i, int j) {
    double& c = cost[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
    if (c < 0) {
      LineFit f = fit_line(segment_points(i, j));
      c = f.rms_rel_error * f.rms_rel_error * f.points;
    }
    return c;
  };
  const double inf = std::numeric_limits<double>::infinity();
  int max_k = std::max(1, std::min(opt.max_ranges, m / min_sizes));
  std::vector<LineFit> best_result;
  double best_cost = inf;
  // dp[k][j]: best cost covering sizes [0, j) with k segments; cut[k][j]: start of the last one.
  std::vector<std::vector<double>> dp(static_cast<std::size_t>(max_k + 1), std::vector<double>(static_cast<std::size_t>(m + 1), inf));
  std::vector<std::vector<int>> cut(static_cast<std::size_t>(max_k + 1), std::vector<int>(static_cast<std::size_t>(m + 1), -1));
  dp[0][0] = 0;
  for (int k = 1; k <= max_k; ++k) {
    for (int j = k * min_sizes; j <= m; ++j)
      for (int i = (k - 1) * min_sizes; i + min_sizes <= j; ++i) {
        double prev = dp[static_cast<std::size_t>(k - 1)][static_cast<std::size_t>(i)];
        if (prev == inf) continue;
        double c = prev + seg_cost(i, j);
        if (c < dp[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)]) {
          dp[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)] = c;
          cut[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)] = i;
        }
      }
    if (dp[static_cast<std::size_t>(k)][static_cast<std::size_t>(m)] == inf) continue;
    std::vector<LineFit> result;
    for (int j = m, kk = k; kk > 0; --kk) {
      int i = cut[static_cast<std::size_t>(kk)][static_cast<std::size_t>(j)];
      result.push_back(fit_line(segment_points(i, j)));
      j = i;
    }
    std::reverse(result.begin(), result.end());
    double worst = 0;
    for (const auto& r : result) worst = std::max(worst, r.max_rel_error);
    if (worst <= opt.target_rel_error) return result;
    double total = dp[static_cast<std::size_t>(k)][static_cast<std::size_t>(m)];
    if (best_result.empty() || total < 0.8 * best_cost) best_cost = total, best_result = result;
  }
  return best_result;
}

double predict_us(const std::vector<LineFit>& ranges, double bytes) {
  if (ranges.empty()) return 0;
  for (const auto& r : ranges)
    if (bytes <= r.max_bytes) return r.predict_us(bytes);
  return ranges.back().predict_us(bytes);
}

}  // namespace stepsim::calib
