#include "calibrate/fit/topology_fit.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/stats.hpp"
#include "sim/hardware/collective_model.hpp"

namespace stepsim::calib {

namespace {

struct Point {
  CollectiveKind kind;
  Bytes bytes;
  int ranks, nodes;
  double time_us;
};

// Broadcast and reduce are predicted, not fitted: NCCL pipelines a rooted ring in chunks with
// no ring-step structure, and in traces a rooted call in a group that shares the root's GPU
// (the li-plus Megatron broadcasts run at 302 GB/s, above the A800's 200 GB/s per direction)
// is a local copy, not a link measurement.
bool fitted_kind(CollectiveKind k) { return k != CollectiveKind::Broadcast && k != CollectiveKind::Reduce; }

// The level a series informs, by its shape (see the header).
TopoLevel level_of(const NcclTopology& base, const CollectiveSeries& s) {
  if (s.kind == CollectiveKind::AllToAll) return s.nodes > 1 ? TopoLevel::NetAllToAll : TopoLevel::NvlinkAllToAll;
  if (s.nodes > 1) return TopoLevel::Net;
  if (s.kind == CollectiveKind::AllReduce && base.nvls_bw.bytes_per_s > 0 && s.ranks > 1) return TopoLevel::Nvls;
  return TopoLevel::Nvlink;
}

const char* level_name(TopoLevel l) {
  switch (l) {
    case TopoLevel::Nvlink: return "nvlink";
    case TopoLevel::Nvls: return "nvls";
    case TopoLevel::Net: return "network";
    case TopoLevel::NvlinkAllToAll: return "nvlink_all_to_all";
    case TopoLevel::NetAllToAll: return "network_all_to_all";
    case TopoLevel::None: break;
  }
  return "none";
}

void set_bandwidth(NcclTopology& t, TopoLevel l, double bytes_per_s) {
  Bandwidth b{bytes_per_s};
  switch (l) {
    case TopoLevel::Nvlink: t.nvlink_busbw = b; break;
    case TopoLevel::Nvls: t.nvls_bw = b; break;
    case TopoLevel::Net: t.nic_bw = b; break;
    case TopoLevel::NvlinkAllToAll: t.nvlink_all_to_all_busbw = b; break;
    case TopoLevel::NetAllToAll: t.nic_all_to_all_bw = b; break;
    case TopoLevel::None: break;
  }
}

// The candidate of `level` the model gives point `p`. `restricted`: the fastest among the
// candidates bounded by `level`; otherwise the model's own pick, and false when that pick is
// bounded by another level (the point is explained elsewhere: e.g. a small one-node all-reduce
// that NCCL runs as an LL ring, not NVLS). A multi-node series informs the network level: while
// fitting it the NVLink level is taken as unbounded, so the ring's bottleneck is the NICs.
// Levels in `disabled` (measured but not fitted yet) offer no candidate: a first guess of
// theirs (a declared NVLS at the datasheet rate) must not take the points of the level fitted
// before them.
bool pick(const NcclTopology& t0, const Point& p, TopoLevel level, bool restricted, const std::vector<TopoLevel>& disabled,
          NcclCandidate& out) {
  NcclTopology t = t0;
  for (TopoLevel d : disabled)
    if (d != level) set_bandwidth(t, d, 0);
  if (level == TopoLevel::Net) t.nvlink_busbw = Bandwidth{1e30};
  NcclCandidate cs[kMaxNcclCandidates];
  int n = nccl_candidates(t, p.kind, p.bytes, p.ranks, p.nodes, cs);
  double best = std::numeric_limits<double>::infinity();
  NcclCandidate chosen;
  for (int i = 0; i < n; ++i) {
    if (restricted && cs[i].level != level) continue;
    if (cs[i].level != TopoLevel::None && cs[i].wire_bytes > 0 && level_bandwidth(t, cs[i].level) <= 0) continue;
    double us = candidate_time_us(t, cs[i]);
    if (us < best) best = us, chosen = cs[i];
  }
  if (!std::isfinite(best) || chosen.level != level) return false;
  out = chosen;
  return true;
}

std::vector<Point> points_of(const CollectiveSeries& s, const TopologyFitOptions& o) {
  std::vector<Point> out;
  for (const auto& x : s.samples) {
    if (static_cast<double>(x.bytes.count) < o.min_bytes) continue;
    if (x.in_place ? !o.in_place : !o.out_of_place) continue;
    out.push_back({s.kind, x.bytes, s.ranks, s.nodes, x.time.us()});
  }
  return out;
}

// A series of a shape the topology fit uses: at least two ranks, a fitted kind.
bool fittable_shape(const CollectiveSeries& s) { return s.ranks >= 2 && fitted_kind(s.kind); }

// The group shapes the usable series span (the profile's fitted range).
FittedRange fitted_range(const std::vector<CollectiveSeries>& series, const TopologyFitOptions& o) {
  FittedRange r;
  bool any = false;
  for (const auto& s : series) {
    if (!fittable_shape(s) || points_of(s, o).empty()) continue;
    int ppn = (s.ranks + s.nodes - 1) / std::max(1, s.nodes);
    if (!any) r = {s.ranks, s.ranks, s.nodes, s.nodes, ppn, ppn};
    r.min_ranks = std::min(r.min_ranks, s.ranks), r.max_ranks = std::max(r.max_ranks, s.ranks);
    r.min_nodes = std::min(r.min_nodes, s.nodes), r.max_nodes = std::max(r.max_nodes, s.nodes);
    r.min_gpus_per_node = std::min(r.min_gpus_per_node, ppn), r.max_gpus_per_node = std::max(r.max_gpus_per_node, ppn);
    any = true;
  }
  if (!any) throw InputError("fit: no collective series with >= 2 ranks and samples to fit the topology model to");
  return r;
}

// The points of the series whose shape informs `level`, each series named in `lf.series`.
std::vector<Point> level_points(const NcclTopology& base, const std::vector<CollectiveSeries>& series,
                                const TopologyFitOptions& o, TopoLevel level, LevelFit& lf) {
  std::vector<Point> pts;
  for (const auto& s : series) {
    if (!fittable_shape(s) || level_of(base, s) != level) continue;
    auto p = points_of(s, o);
    if (p.empty()) continue;
    pts.insert(pts.end(), p.begin(), p.end());
    lf.series.push_back(fmt::format("{}{}: {} {} ranks / {} nodes", s.source, s.label.empty() ? "" : " (" + s.label + ")",
                                    to_string(s.kind), s.ranks, s.nodes));
  }
  return pts;
}

// Whether the points hold two or more group sizes (the local pass separates from the wire bytes
// only across them).
bool several_group_sizes(const std::vector<Point>& points) {
  return std::any_of(points.begin(), points.end(), [&](const Point& p) { return p.ranks != points.front().ranks; });
}

// Whether the points hold two or more group shapes (ranks, nodes) across nodes.
bool several_network_shapes(const std::vector<Point>& points) {
  auto multi = std::find_if(points.begin(), points.end(), [](const Point& p) { return p.nodes > 1; });
  return multi != points.end() && std::any_of(points.begin(), points.end(), [&](const Point& p) {
           return p.nodes > 1 && (p.nodes != multi->nodes || p.ranks != multi->ranks);
         });
}

// Fits one level's bandwidth (and, for the NVLink and network levels, the scale on NCCL's hop
// latencies) to its points, by weighted least squares on time (weights 1/t^2). Each row reads
// t = f + scale * h + x * w: h the level's hop latency, w the wire bytes, x = 1e6 / bandwidth,
// f the rest of the candidate's time.
class LevelFitter {
 public:
  // `fit_local`: the NVLink level fits the local pass too (fit_topology decides whether it can).
  // `fit_net_scale`: the network level fits its hop-latency scale (fit_topology decides).
  LevelFitter(TopoLevel level, const std::vector<Point>& points, std::vector<TopoLevel> disabled, bool fit_local,
              bool fit_net_scale)
      : level_(level),
        points_(points),
        disabled_(std::move(disabled)),
        has_scale_(level == TopoLevel::Nvlink || (level == TopoLevel::Net && fit_net_scale)),
        has_local_(fit_local && level == TopoLevel::Nvlink) {}

  bool has_scale() const { return has_scale_; }
  bool has_local() const { return has_local_; }

  // The level's latency scale in `t` (a level without one reads the NVLink scale, unchanged).
  double& scale_of(NcclTopology& t) const {
    return level_ == TopoLevel::Net ? t.net_latency_scale : t.nvlink_latency_scale;
  }

  // Alternates: picks each point's algorithm/protocol under the current parameters, then solves
  // for (scale, 1/bandwidth), until the parameters settle. False when no pass gave a positive
  // bandwidth (`t` then holds whatever the level had).
  bool fit(NcclTopology& t) const {
    double& scale = scale_of(t);
    bool ok = false;
    for (int iter = 0; iter < 30; ++iter) {
      const bool restricted = points_owned(t) < 2;
      auto [new_scale, x, z] = solve(t, restricted, scale);
      if (x <= 0) break;
      double bw = 1e6 / x, local = z > 0 ? 1e6 / z : 0;
      bool settled = std::abs(bw - level_bandwidth(t, level_)) < 1e-7 * bw && std::abs(new_scale - scale) < 1e-7 &&
                     std::abs(local - t.nvlink_local_bw.bytes_per_s) <= 1e-7 * local;
      set_bandwidth(t, level_, bw);
      scale = new_scale;
      if (has_local_) t.nvlink_local_bw = Bandwidth{local};
      ok = true;
      if (settled) break;
    }
    return ok;
  }

 private:
  struct Solution {
    double scale;
    double x;      // 1e6 / bandwidth
    double z = 0;  // 1e6 / local-pass bandwidth (0: none)
  };

  // Points the model gives to this level. When fewer than two, the fit takes every point's best
  // candidate of this level instead (the first guesses may send all points elsewhere).
  int points_owned(const NcclTopology& t) const {
    int own = 0;
    for (const auto& p : points_) {
      NcclCandidate c;
      own += pick(t, p, level_, false, disabled_, c) ? 1 : 0;
    }
    return own;
  }

  double hop_us(const NcclCandidate& c) const { return level_ == TopoLevel::Net ? c.net_us : c.nvlink_us; }

  // The candidate's time outside this level's parameters: its fixed part and the other level's
  // hop latencies at their current scale.
  double other_us(const NcclTopology& t, const NcclCandidate& c) const {
    double us = c.fixed_us + (level_ == TopoLevel::Net ? t.nvlink_latency_scale * c.nvlink_us : t.net_latency_scale * c.net_us);
    return has_local_ ? us : us + local_pass_us(t, c);
  }

  // The two-parameter least squares; where the latency is not separable from these sizes (or
  // comes out negative), keeps the scale (0 if it came out negative) and fits the bandwidth alone.
  Solution solve(const NcclTopology& t, bool restricted, double scale) const {
    if (has_local_) {
      Solution s3 = solve_with_local(t, restricted);
      if (s3.x > 0 && s3.z > 0 && s3.scale >= 0) return s3;
    }
    std::array<std::array<double, 2>, 2> a{};
    std::array<double, 2> b{};
    for (const auto& p : points_) {
      NcclCandidate c;
      if (!pick(t, p, level_, restricted, disabled_, c)) continue;
      double h = hop_us(c);
      double f = other_us(t, c);
      if (!has_scale_) f += scale * h, h = 0;
      double w = c.wire_bytes, y = p.time_us - f, wt = 1.0 / (p.time_us * p.time_us);
      a[0][0] += wt * h * h, a[0][1] += wt * h * w, a[1][1] += wt * w * w;
      b[0] += wt * h * y, b[1] += wt * w * y;
    }
    Solution s{scale, 0};
    double det = a[0][0] * a[1][1] - a[0][1] * a[0][1];
    const bool separable = det > 1e-12 * a[0][0] * a[1][1];
    if (has_scale_ && separable) {
      s.scale = (b[0] * a[1][1] - a[0][1] * b[1]) / det;
      s.x = (a[0][0] * b[1] - a[0][1] * b[0]) / det;
    }
    if (!has_scale_ || !separable || s.scale < 0 || s.x <= 0) {
      s.scale = has_scale_ && s.scale < 0 ? 0 : scale;
      s.x = solve_bandwidth_alone(t, restricted, s.scale);
    }
    return s;
  }

  // The three-parameter least squares (scale, 1/bandwidth, 1/local rate), rows
  // t = f + scale * h + x * w + z * l with l the candidate's local-pass bytes; x = 0 when the
  // system is singular (one group size: l and w proportional).
  Solution solve_with_local(const NcclTopology& t, bool restricted) const {
    std::array<std::array<double, 4>, 3> m{};  // normal equations, augmented
    for (const auto& p : points_) {
      NcclCandidate c;
      if (!pick(t, p, level_, restricted, disabled_, c)) continue;
      const double row[3] = {hop_us(c), c.wire_bytes, c.local_bytes};
      double y = p.time_us - other_us(t, c), wt = 1.0 / (p.time_us * p.time_us);
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) m[i][j] += wt * row[i] * row[j];
        m[i][3] += wt * row[i] * y;
      }
    }
    // Gaussian elimination with partial pivoting.
    for (int col = 0; col < 3; ++col) {
      int piv = col;
      for (int r = col + 1; r < 3; ++r)
        if (std::abs(m[r][col]) > std::abs(m[piv][col])) piv = r;
      std::swap(m[col], m[piv]);
      if (!(std::abs(m[col][col]) > 1e-12 * std::abs(m[0][0] + m[1][1] + m[2][2]))) return {0, 0, 0};
      for (int r = 0; r < 3; ++r) {
        if (r == col) continue;
        double f = m[r][col] / m[col][col];
        for (int k = col; k < 4; ++k) m[r][k] -= f * m[col][k];
      }
    }
    return {m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]};
  }

  // The one-parameter least squares for x at a fixed scale.
  double solve_bandwidth_alone(const NcclTopology& t, bool restricted, double scale) const {
    double y0 = 0, xx = 0;
    for (const auto& p : points_) {
      NcclCandidate c;
      if (!pick(t, p, level_, restricted, disabled_, c)) continue;
      double f = other_us(t, c) + scale * hop_us(c);
      double wt = 1.0 / (p.time_us * p.time_us);
      xx += wt * c.wire_bytes * c.wire_bytes, y0 += wt * c.wire_bytes * (p.time_us - f);
    }
    return xx > 0 ? y0 / xx : 0;
  }

  TopoLevel level_;
  const std::vector<Point>& points_;
  std::vector<TopoLevel> disabled_;
  bool has_scale_;
  bool has_local_;
};

// Relative errors of every usable series of each fitted level, with the full model (every
// algorithm and protocol competing).
void record_level_errors(const NcclTopology& t, const NcclTopology& base, const std::vector<CollectiveSeries>& series,
                         const TopologyFitOptions& o, std::vector<LevelFit>& levels) {
  for (auto& lf : levels) {
    if (!lf.fitted) continue;
    std::vector<double> errs;
    for (const auto& s : series)
      if (fittable_shape(s) && level_name(level_of(base, s)) == lf.level) {
        auto e = topology_errors(t, s, o);
        errs.insert(errs.end(), e.begin(), e.end());
      }
    lf.median_abs_error = median(errs);
    lf.max_abs_error = errs.empty() ? 0 : *std::max_element(errs.begin(), errs.end());
  }
}

// Carries the fitted NVLink-level bandwidths to the profile's GPU: divided by `ratio` (the
// measured GPUs' NVLink bandwidth over the profile's). The errors stay the fit's own, on the
// measured GPUs.
void scale_nvlink_levels(NcclTopology& t, double ratio, std::vector<LevelFit>& levels) {
  for (auto& lf : levels) {
    if (!lf.fitted) continue;
    for (TopoLevel l : {TopoLevel::Nvlink, TopoLevel::Nvls, TopoLevel::NvlinkAllToAll}) {
      if (lf.level != level_name(l)) continue;
      set_bandwidth(t, l, level_bandwidth(t, l) / ratio);
      lf.measured_bandwidth_gbps = lf.bandwidth_gbps;
      lf.bandwidth_gbps = level_bandwidth(t, l) / 1e9;
    }
  }
}

}  // namespace

std::vector<double> topology_errors(const NcclTopology& t, const CollectiveSeries& s, const TopologyFitOptions& o) {
  std::vector<double> out;
  for (const auto& p : points_of(s, o)) {
    double pred = topology_collective_time(t, p.kind, p.bytes, p.ranks, p.nodes).us();
    out.push_back(std::abs(pred - p.time_us) / p.time_us);
  }
  return out;
}

NcclTopology fit_topology(const NcclTopology& base, const std::vector<CollectiveSeries>& series,
                          const TopologyFitOptions& o, TopologyFitReport& report) {
  // The fit reads a NIC's bandwidth as measured, below any spine; a log of a job across the
  // spine of a fabric the base declares oversubscribed would fit the taper into it.
  for (const auto& s : series)
    if (s.nodes > 1 && base.oversubscription > 1 && s.nodes > std::max(1, base.leaf_nodes))
      throw InputError(fmt::format("fit: {}: {} ranks on {} nodes cross the spine of the base profile's fabric "
                                   "(collectives.topology.network: leaf_nodes {}, oversubscription {}): expected logs of "
                                   "jobs within one leaf, or a base without a taper",
                                   s.source, s.ranks, s.nodes, base.leaf_nodes, base.oversubscription));
  NcclTopology t = base;
  report = TopologyFitReport{};
  report.range = fitted_range(series, o);
  const TopoLevel order[] = {TopoLevel::Nvlink, TopoLevel::Nvls, TopoLevel::Net, TopoLevel::NvlinkAllToAll,
                             TopoLevel::NetAllToAll};
  std::vector<std::vector<Point>> points;  // per level of `order`
  for (TopoLevel level : order) {
    LevelFit lf;
    lf.level = level_name(level);
    std::vector<Point> pts = level_points(base, series, o, level, lf);
    if (pts.empty()) lf.note = "no measurement: kept from the base profile";
    if (!pts.empty() && level_bandwidth(t, level) <= 0) set_bandwidth(t, level, 100e9);  // a start
    lf.points = static_cast<int>(pts.size());
    report.levels.push_back(lf);
    points.push_back(std::move(pts));
  }
  // The local pass, when asked for, is fitted only where two or more group sizes separate it;
  // otherwise there is none (not the base's, which may come from the very measurements a
  // leave-one-out check holds out).
  const bool fit_local = o.fit_local_pass && several_group_sizes(points[0]);  // order[0]: NVLink
  if (o.fit_local_pass && !fit_local && !points[0].empty()) {
    t.nvlink_local_bw = Bandwidth{0};
    report.levels[0].local_gbps = 0;
  }
  // The network's hop-latency scale is fitted only where the points hold two or more group
  // shapes across nodes: a ring or tree crosses nodes (nNodes - 1) or 2 (nNodes - 1) times
  // (tuning.cc), so one shape's network hops are a constant beside its NVLink hops and fixed
  // latency, and measured times put the scale anywhere (the 2x8 A100 log alone puts it below 0:
  // no cost per network hop, which extrapolates to the same latency at any size). There the
  // base's scale (NCCL's own hwLatencies at 1, unless the profile says otherwise) is kept, and
  // the report says so.
  const bool fit_net_scale = several_network_shapes(points[2]);  // order[2]: network
  if (!points[2].empty() && !fit_net_scale)
    report.levels[2].note = "latency scale kept from the base profile: one group shape across nodes "
                            "does not separate the per-hop network latency";
  // Pass 0 fits the levels in order, each with the levels after it disabled; passes 1-2 refit
  // every level with all of them competing (a point may move to a level fitted after it).
  for (int pass = 0; pass < 3; ++pass) {
    for (std::size_t li = 0; li < std::size(order); ++li) {
      if (points[li].empty()) continue;
      std::vector<TopoLevel> disabled;
      if (pass == 0)
        for (std::size_t lj = li + 1; lj < std::size(order); ++lj)
          if (!points[lj].empty()) disabled.push_back(order[lj]);
      const LevelFitter fitter(order[li], points[li], std::move(disabled), fit_local, fit_net_scale);
      LevelFit& lf = report.levels[li];
      if (!fitter.fit(t)) {
        lf.note = "the points give no positive bandwidth: kept from the base profile";
        set_bandwidth(t, order[li], level_bandwidth(base, order[li]));
        continue;
      }
      lf.fitted = true;
      if (order[li] != TopoLevel::Net || fit_net_scale) lf.note.clear();
      lf.bandwidth_gbps = level_bandwidth(t, order[li]) / 1e9;
      if (fitter.has_scale()) lf.latency_scale = fitter.scale_of(t);
      if (fitter.has_local()) lf.local_gbps = t.nvlink_local_bw.bytes_per_s / 1e9;
    }
  }
  record_level_errors(t, base, series, o, report.levels);
  if (o.nvlink_bandwidth_ratio != 1) scale_nvlink_levels(t, o.nvlink_bandwidth_ratio, report.levels);
  t.fitted = report.range;
  return t;
}

nlohmann::json TopologyFitReport::to_json() const {
  nlohmann::json levels_json = nlohmann::json::array();
  for (const auto& l : levels) {
    nlohmann::json o{{"level", l.level}, {"fitted", l.fitted}};
    if (l.fitted) {
      o["bandwidth_GBps"] = l.bandwidth_gbps;
      if (l.latency_scale >= 0) o["latency_scale"] = l.latency_scale;
      if (l.local_gbps >= 0) o["local_GBps"] = l.local_gbps;
      if (l.measured_bandwidth_gbps > 0) o["measured_bandwidth_GBps"] = l.measured_bandwidth_gbps;
      o["points"] = l.points;
      o["median_abs_error"] = l.median_abs_error;
      o["max_abs_error"] = l.max_abs_error;
      o["series"] = l.series;
    }
    if (!l.note.empty()) o["note"] = l.note;
    levels_json.push_back(o);
  }
  return {{"model", "NCCL tuner structure (docs/collectives.md): per level bandwidth and hop-latency scale, "
                    "weighted least squares on time (weights 1/t^2), algorithm/protocol as the model picks"},
          {"levels", levels_json},
          {"fitted_range",
           {{"ranks", {range.min_ranks, range.max_ranks}},
            {"nodes", {range.min_nodes, range.max_nodes}},
            {"gpus_per_node", {range.min_gpus_per_node, range.max_gpus_per_node}}}}};
}

}  // namespace stepsim::calib
