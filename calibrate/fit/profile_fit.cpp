#include "calibrate/fit/profile_fit.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/hardware/compute_model.hpp"

namespace stepsim::calib {

using Json = nlohmann::json;

namespace {

std::string scope_of(const CollectiveSeries& s) { return s.nodes > 1 ? "inter_node" : "intra_node"; }

Json line_json(const LineFit& r, bool last, bool with_quality) {
  Json o{{"alpha_us", r.alpha_us}, {"beta_GBps", r.beta_gbps()}};
  if (!last) o["max_bytes"] = static_cast<std::int64_t>(std::llround(r.max_bytes));
  if (with_quality) {
    o["min_bytes"] = static_cast<std::int64_t>(std::llround(r.min_bytes));
    o["points"] = r.points;
    o["r2"] = r.r2;
    o["max_rel_error"] = r.max_rel_error;
  }
  return o;
}

Json fit_json(const KindFit& f) {
  Json ranges = Json::array();
  for (std::size_t i = 0; i < f.ranges.size(); ++i) {
    Json o = line_json(f.ranges[i], false, !f.derived_from);
    o["max_bytes"] = static_cast<std::int64_t>(std::llround(f.ranges[i].max_bytes));
    if (!f.derived_from) {
      o["rms_rel_error"] = f.ranges[i].rms_rel_error;
      if (f.ranges[i].clamped) o["clamped"] = true;
    }
    ranges.push_back(o);
  }
  Json o{{"scope", f.scope}, {"kind", to_string(f.kind)}, {"ranks", f.ranks}, {"nodes", f.nodes},
         {"in_profile", f.in_profile}, {"ranges", ranges}};
  if (f.derived_from) {
    o["derived_from"] = to_string(*f.derived_from);
    o["note"] = "not measured: derived by bus-bandwidth equivalence (beta x busbw-factor ratio, alpha x ring-step ratio)";
  } else {
    o["points"] = static_cast<int>(f.points.size());
    o["sources"] = f.sources;
  }
  return o;
}

// Least squares for T = base + steps(n) * step + factor(n) * S / busbw over several group
// sizes, same 1/t^2 weights as the range fits. Returns nullopt if the system is singular.
std::optional<RingFit> fit_ring(const std::string& scope, CollectiveKind kind, const std::vector<KindFit>& groups) {
  std::array<std::array<double, 3>, 3> a{};
  std::array<double, 3> b{};
  RingFit rf;
  rf.scope = scope;
  rf.kind = kind;
  std::vector<std::tuple<double, double, double, double>> rows;  // (1, steps, factor*S_GB, t)
  for (const auto& g : groups) {
    rf.group_sizes.push_back(g.ranks);
    for (const auto& p : g.points)
      rows.emplace_back(1.0, ring_steps(kind, g.ranks), busbw_factor(kind, g.ranks) * p.bytes * 1e-9, p.time_us);
  }
  for (const auto& [c0, c1, c2, t] : rows) {
    double w = 1.0 / (t * t);
    std::array<double, 3> x{c0, c1, c2};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) a[i][j] += w * x[i] * x[j];
      b[i] += w * x[i] * t;
    }
  }
  // Gaussian elimination with partial pivoting.
  for (int c = 0; c < 3; ++c) {
    int piv = c;
    for (int r = c + 1; r < 3; ++r)
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    if (std::abs(a[piv][c]) < 1e-300) return std::nullopt;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    for (int r = 0; r < 3; ++r) {
      if (r == c) continue;
      double f = a[r][c] / a[c][c];
      for (int k = 0; k < 3; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  double base = b[0] / a[0][0], step = b[1] / a[1][1], us_per_gb = b[2] / a[2][2];
  // Negative latencies mean the sizes measured cannot separate base from per-step latency
  // (e.g. one group measured only at >= 1 GiB): no NCCL-style constants from such data.
  if (us_per_gb <= 0 || base < 0 || step < 0) return std::nullopt;
  rf.base_latency_us = base;
  rf.step_latency_us = step;
  rf.busbw_gbps = 1e6 / us_per_gb;  // GB/us^-1 -> GB/s
  double mean = 0;
  for (const auto& row : rows) mean += std::get<3>(row);
  mean /= static_cast<double>(rows.size());
  double ss_res = 0, ss_tot = 0;
  for (const auto& [c0, c1, c2, t] : rows) {
    double pred = base * c0 + step * c1 + us_per_gb * c2;
    ss_res += (pred - t) * (pred - t);
    ss_tot += (t - mean) * (t - mean);
    rf.max_rel_error = std::max(rf.max_rel_error, std::abs(pred - t) / t);
  }
  rf.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
  rf.points = static_cast<int>(rows.size());
  return rf;
}

// A fit's ranges as the profile's alpha-beta ranges (the last range is open-ended).
std::vector<AlphaBetaRange> to_alpha_beta_ranges(const KindFit& f) {
  std::vector<AlphaBetaRange> out;
  for (std::size_t i = 0; i < f.ranges.size(); ++i) {
    AlphaBetaRange r;
    if (i + 1 < f.ranges.size()) r.max_bytes = Bytes{static_cast<std::int64_t>(std::llround(f.ranges[i].max_bytes))};
    r.alpha = Time::from_us(f.ranges[i].alpha_us);
    r.beta = Bandwidth::from_gbps(f.ranges[i].beta_gbps());
    out.push_back(r);
  }
  return out;
}

KindFit derive(const KindFit& from, CollectiveKind kind) {
  KindFit d;
  d.scope = from.scope;
  d.kind = kind;
  d.ranks = from.ranks;
  d.nodes = from.nodes;
  d.derived_from = from.kind;
  double f_from = busbw_factor(from.kind, from.ranks), f_to = busbw_factor(kind, from.ranks);
  double steps_ratio = static_cast<double>(ring_steps(kind, from.ranks)) / ring_steps(from.kind, from.ranks);
  for (const auto& r : from.ranges) {
    LineFit l = r;
    l.us_per_byte = r.us_per_byte * f_to / f_from;
    l.alpha_us = r.alpha_us * steps_ratio;
    l.min_bytes = r.min_bytes * f_from / f_to;
    l.max_bytes = r.max_bytes * f_from / f_to;
    d.ranges.push_back(l);
  }
  return d;
}

}  // namespace

std::vector<FitPoint> fit_points(const CollectiveSeries& s, SampleSelection sel) {
  std::vector<FitPoint> out;
  for (const auto& p : s.samples) {
    if (sel == SampleSelection::OutOfPlace && p.in_place) continue;
    if (sel == SampleSelection::InPlace && !p.in_place) continue;
    out.push_back({static_cast<double>(p.bytes.count), p.time.us()});
  }
  return out;
}

double predict_time_us(const KindFit& fit, double bytes, int ranks) {
  // The simulator's own alpha-beta model (one definition of the cross-group rule).
  AlphaBetaModel m;
  m.ranges[fit.kind] = to_alpha_beta_ranges(fit);
  m.ranks[fit.kind] = fit.ranks;
  return scope_collective_time(m, fit.kind, Bytes{std::llround(bytes)}, ranks, fit.nodes).us();
}

double predict_busbw_gbps(const KindFit& fit, double bytes, int ranks) {
  return bytes * busbw_factor(fit.kind, ranks) / (predict_time_us(fit, bytes, ranks) * 1e3);
}

namespace {

// One fit per (scope, kind, ranks, nodes) into report.fits; several series of one shape are merged.
void fit_measured_groups(const FitInputs& in, const FitOptions& opt, FitReport& report) {
  std::map<std::tuple<std::string, int, int, int>, KindFit> groups;
  for (const auto& s : in.collectives) {
    if (s.ranks < 2) continue;  // a one-rank communicator moves nothing (local copy): no model to fit
    auto key = std::make_tuple(scope_of(s), static_cast<int>(s.kind), s.ranks, s.nodes);
    KindFit& g = groups[key];
    g.scope = scope_of(s);
    g.kind = s.kind;
    g.ranks = s.ranks;
    g.nodes = s.nodes;
    g.sources.push_back(s.label.empty() ? s.source : fmt::format("{} ({})", s.source, s.label));
    auto pts = fit_points(s, opt.samples);
    g.points.insert(g.points.end(), pts.begin(), pts.end());
  }
  for (auto& [key, g] : groups) {
    if (g.points.empty()) continue;
    g.ranges = fit_ranges(g.points, opt.ranges);
    report.fits.push_back(g);
  }
}

// Per (scope, kind): the fit with the most ranks goes into the profile as the kind's ranges,
// the other measured group sizes under "groups" (one fit per size: the one with most points).
// With derive_missing, kinds not measured are derived from the first measured one.
void choose_profile_fits(HardwareProfile& p, const FitOptions& opt, FitReport& report) {
  for (const char* scope : {"intra_node", "inter_node"}) {
    std::map<CollectiveKind, std::map<int, KindFit*>> by_ranks;
    for (auto& f : report.fits) {
      if (f.scope != scope) continue;
      KindFit*& c = by_ranks[f.kind][f.ranks];
      if (!c || f.points.size() > c->points.size()) c = &f;
    }
    std::map<CollectiveKind, KindFit*> chosen;
    for (auto& [kind, sizes] : by_ranks) chosen[kind] = sizes.rbegin()->second;
    if (chosen.empty()) continue;
    std::vector<KindFit> derived;
    if (opt.derive_missing) {
      for (CollectiveKind from : {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter}) {
        if (!chosen.count(from)) continue;
        for (CollectiveKind to : {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter})
          if (!chosen.count(to) && std::none_of(derived.begin(), derived.end(), [&](const KindFit& d) { return d.kind == to; }))
            derived.push_back(derive(*chosen.at(from), to));
        break;
      }
    }
    AlphaBetaModel m;
    for (auto& [kind, f] : chosen) {
      f->in_profile = true;
      m.ranges[kind] = to_alpha_beta_ranges(*f);
      m.ranks[kind] = f->ranks;
      for (auto& [ranks, g] : by_ranks.at(kind))
        if (g != f) {
          g->in_profile = true;
          m.groups[kind][ranks] = to_alpha_beta_ranges(*g);
        }
    }
    for (auto& d : derived) {
      d.in_profile = true;
      m.ranges[d.kind] = to_alpha_beta_ranges(d);
      m.ranks[d.kind] = d.ranks;
      report.fits.push_back(d);
    }
    (std::string(scope) == "intra_node" ? p.intra_node : p.inter_node) = m;
  }
}

// NCCL-style ring constants where one kind was measured at several group sizes in a scope.
void fit_ring_constants(FitReport& report) {
  std::map<std::pair<std::string, int>, std::vector<KindFit>> by_kind;
  for (const auto& f : report.fits)
    if (!f.derived_from) by_kind[{f.scope, static_cast<int>(f.kind)}].push_back(f);
  for (const auto& [key, fits] : by_kind)
    if (fits.size() >= 2)
      if (auto rf = fit_ring(key.first, static_cast<CollectiveKind>(key.second), fits)) report.ring_fits.push_back(*rf);
}

// Per-scope piecewise alpha-beta ranges (the default model of `fit`), into p.intra_node /
// p.inter_node, and the report-only NCCL-style ring constants.
void fit_alpha_beta_collectives(HardwareProfile& p, const FitInputs& in, const FitOptions& opt, FitReport& report) {
  fit_measured_groups(in, opt, report);
  choose_profile_fits(p, opt, report);
  fit_ring_constants(report);
}

// The file a sample came from: its source less the ":LINE" an importer appends.
static std::string measurement_file(const std::string& source) {
  const auto colon = source.rfind(':');
  if (colon == std::string::npos || colon + 1 == source.size()) return source;
  for (std::size_t i = colon + 1; i < source.size(); ++i)
    if (source[i] < '0' || source[i] > '9') return source;
  return source.substr(0, colon);
}

// One file's samples of one dtype that include a rate above that dtype's dense peak did not
// time GEMM kernels (a rate cannot exceed the peak): XLA's sm_90 table gives fp8 up to 1.31 x
// the 1,979 TFLOP/s dense peak and 2424 TFLOP/s at 4096^3, where Azure's sustained cuBLASLt
// measures 1217 (docs/calibration.md). The whole column goes, not just the rows above the peak:
// the rows below it were measured the same way. Returns the columns left out.
static Json reject_impossible_columns(const HardwareProfile& p, std::vector<GemmSample>& samples) {
  struct Column { std::size_t entries = 0, above = 0; double max_tflops = 0, peak = 0; };
  std::map<std::pair<std::string, Dtype>, Column> columns;
  for (const auto& g : samples) {
    Column& c = columns[{measurement_file(g.source), g.shape.dtype}];
    ++c.entries;
    c.max_tflops = std::max(c.max_tflops, g.rate.tflops());
    if (!p.compute.peak.count(g.shape.dtype)) continue;
    c.peak = gemm_table_part_peak_tflops(p.compute, g.shape.dtype);  // the peak the loader holds it to
    if (g.rate.tflops() > c.peak) ++c.above;
  }
  Json rejected = Json::array();
  for (const auto& [key, c] : columns) {
    if (c.above == 0) continue;
    rejected.push_back({{"file", key.first}, {"dtype", to_string(key.second)}, {"entries", c.entries},
                        {"above_peak", c.above}, {"max_tflops", c.max_tflops}, {"peak_tflops", c.peak},
                        {"why", "rates above the dense peak: the measurement did not time the GEMM kernel alone, so "
                                "none of this file's rates of this dtype is used"}});
  }
  std::erase_if(samples, [&](const GemmSample& g) { return columns[{measurement_file(g.source), g.shape.dtype}].above > 0; });
  return rejected;
}

// The GEMM efficiency table: one entry per measured shape (a later measurement of a shape
// wins), less the columns reject_impossible_columns leaves out; the median bf16 efficiency of
// the big shapes is the fallback. Returns its provenance.
Json fit_gemm_table(HardwareProfile& p, const FitInputs& in) {
  if (in.gemm.empty()) return Json::object();
  std::vector<GemmSample> samples = in.gemm;
  const Json rejected = reject_impossible_columns(p, samples);
  if (samples.empty()) {
    const Json& r = rejected.front();
    throw InputError(fmt::format("{}: no usable GEMM rate: the {} rates reach {:.1f} TFLOP/s, above the {:.1f} TFLOP/s dense peak "
                                 "of the base profile (a wrong --base, or a measurement that did not time the GEMM kernel)",
                                 r.at("file").get<std::string>(), r.at("dtype").get<std::string>(),
                                 r.at("max_tflops").get<double>(), r.at("peak_tflops").get<double>()));
  }
  p.compute.gemm_table.clear();
  std::map<GemmShape, FlopRate> by_shape;
  for (const auto& g : samples) by_shape[g.shape] = g.rate;  // a later measurement of a shape wins
  for (const auto& [shape, rate] : by_shape) p.compute.gemm_table.push_back({shape, rate});
  std::map<Dtype, std::vector<double>> eff;
  for (const auto& [shape, rate] : by_shape) {
    auto peak = p.compute.peak.find(shape.dtype);
    if (peak != p.compute.peak.end() && shape.m >= 1024 && shape.n >= 1024 && shape.k >= 1024)
      eff[shape.dtype].push_back(rate.flops_per_s / peak->second.flops_per_s);
  }
  Json eff_json = Json::object();
  for (auto& [d, v] : eff) {
    std::sort(v.begin(), v.end());
    double median = v[v.size() / 2];
    eff_json[to_string(d)] = {{"median", median}, {"min", v.front()}, {"max", v.back()}, {"shapes", v.size()}};
    if (d == Dtype::BF16) p.compute.gemm_efficiency = std::min(1.0, median);
  }
  Json out{{"entries", p.compute.gemm_table.size()},
           {"efficiency_vs_peak_for_m_n_k_ge_1024", eff_json},
           {"gemm_efficiency", "median bf16 efficiency above (fallback for shapes without a table entry)"}};
  if (!rejected.empty()) out["rejected"] = rejected;
  return out;
}

// Contention: slowdown = concurrent / solo - 1, averaged over the samples. Returns its provenance.
Json fit_contention(HardwareProfile& p, const FitInputs& in) {
  if (in.contention.empty()) return Json::object();
  double cs = 0, ms = 0;
  for (const auto& c : in.contention) {
    cs += std::max(0.0, static_cast<double>(c.gemm_concurrent.ns) / c.gemm_alone.ns - 1.0);
    ms += std::max(0.0, static_cast<double>(c.comm_concurrent.ns) / c.comm_alone.ns - 1.0);
  }
  p.contention.compute_slowdown = cs / in.contention.size();
  p.contention.comm_slowdown = ms / in.contention.size();
  // Measured on this machine: the factors price every kernel, in place of the base profile's
  // declared SM counts (the resource model, which these measurements supersede).
  const bool had_resources = p.contention.models_resources();
  p.contention.collective_sms = 0;
  return {{"samples", in.contention.size()},
          {"compute_slowdown", p.contention.compute_slowdown},
          {"comm_slowdown", p.contention.comm_slowdown},
          {"resource_model", had_resources ? "off: the base profile's collective_sms is cleared, the measured factors price every kernel" : "off"},
          {"definition", "slowdown = concurrent time / solo time - 1, averaged over samples"}};
}

// The profile's provenance: the command, the inputs, the method and every collective fit.
Json fit_provenance(const HardwareProfile& base, const FitInputs& in, const FitOptions& opt, const FitReport& report) {
  Json fits = Json::array();
  for (const auto& f : report.fits) fits.push_back(fit_json(f));
  Json rings = Json::array();
  for (const auto& r : report.ring_fits)
    rings.push_back({{"scope", r.scope}, {"kind", to_string(r.kind)}, {"group_sizes", r.group_sizes},
                     {"base_latency_us", r.base_latency_us}, {"step_latency_us", r.step_latency_us},
                     {"busbw_GBps", r.busbw_gbps}, {"r2", r.r2}, {"max_rel_error", r.max_rel_error}, {"points", r.points},
                     {"model", "T = base + steps(n) * step + factor(n) * S / busbw (C6.2), all sizes"}});
  const char* sel = opt.samples == SampleSelection::Both ? "out-of-place and in-place"
                    : opt.samples == SampleSelection::OutOfPlace ? "out-of-place" : "in-place";
  Json provenance = {
      {"tool", "stepsim fit"},
      {"command", opt.command},
      {"inputs", in.files},
      {"base_profile", base.name},
      {"method",
       {{"collectives", "piecewise t = alpha + S/beta per (scope, collective), weighted least squares on time "
                        "(weights 1/t^2); fewest size ranges whose worst point is within target_rel_error"},
        {"target_rel_error", opt.ranges.target_rel_error},
        {"max_ranges", opt.ranges.max_ranges},
        {"samples", sel},
        {"quality", "r2 on time and max_rel_error per range, recomputed from the points after the fit"}}},
      {"collective_fits", fits},
      {"ring_fits", rings}};
  if (report.topology) {
    provenance["topology_fit"] = report.topology->to_json();
    provenance["method"] = {{"collectives", "topology-aware NCCL model (docs/collectives.md): per level bandwidth and "
                                            "hop-latency scale, weighted least squares on time (weights 1/t^2)"},
                            {"samples", sel}};
    provenance.erase("collective_fits");
    provenance.erase("ring_fits");
  }
  return provenance;
}

// What the fit replaced names the fit as its source; the base profile's entries would name other
// measurements (a topology fitted on nccl-tests logs for alpha-beta ranges fitted on a trace).
// (A topology fit keeps the base's collectives entries: tools/fit_profiles.sh refits the shipped
// profiles, whose entries describe that fit in more words than provenance.topology_fit.)
void source_fitted_parts(HardwareProfile& p, const FitReport& report, bool gemm, bool contention) {
  if (!p.sources.is_object()) p.sources = Json::object();
  std::set<std::string> scopes;
  for (const auto& f : report.fits)
    if (f.in_profile) scopes.insert(f.scope);
  if (!scopes.empty()) {
    for (const std::string& scope : scopes)
      p.sources["collectives." + scope] = "stepsim fit (provenance.command) on provenance.inputs: piecewise alpha-beta per "
                                          "collective, quality per range in provenance.collective_fits";
    p.sources["collectives"] = scopes.size() == 2 ? std::string("both scopes fitted: see collectives.intra_node and collectives.inter_node")
                                                  : fmt::format("{} fitted (collectives.{}); the other scope kept from the base "
                                                                "profile {}, whose topology model its other entries describe",
                                                                *scopes.begin(), *scopes.begin(), p.name);
    if (scopes.size() == 2)
      for (auto it = p.sources.begin(); it != p.sources.end();)
        it = it.key().rfind("collectives.topology", 0) == 0 ? p.sources.erase(it) : std::next(it);
  }
  if (report.topology) {
    // Each level names what set it: this fit where it had measurements, else the base's entry.
    // The JSON keys of the levels (collectives.topology.nvlink, .network) group them as the
    // profile does: NVLink, NVLS and NVLink all-to-all under nvlink, the two network ones under network.
    std::vector<std::string> fitted, kept;
    for (const auto& l : report.topology->levels) (l.fitted ? fitted : kept).push_back(l.level);
    for (const char* group : {"nvlink", "network"}) {
      std::vector<std::string> in_group;
      for (const auto& l : fitted)
        if (l.rfind(group, 0) == 0 || (std::string(group) == "nvlink" && l == "nvls")) in_group.push_back(l);
      if (!in_group.empty())
        p.sources[std::string("collectives.topology.") + group] =
            fmt::format("stepsim fit (provenance.command) on provenance.inputs: the {} level(s) of the topology model, "
                        "quality in provenance.topology_fit",
                        fmt::join(in_group, ", "));
    }
    if (!fitted.empty())
      p.sources["collectives"] =
          kept.empty() ? std::string("topology model: every level fitted (collectives.topology.*)")
                       : fmt::format("topology model: {} fitted (collectives.topology.*); {} kept from the base profile {}",
                                     fmt::join(fitted, ", "), fmt::join(kept, ", "), p.name);
  }
  if (gemm) p.sources["compute.gemm_table"] = "stepsim fit (provenance.command) on provenance.inputs: provenance.gemm";
  if (contention) {
    for (const char* k : {"contention.compute_slowdown", "contention.comm_slowdown"})
      p.sources[k] = "stepsim fit (provenance.command) on the calibrate contention runs of provenance.inputs: provenance.contention";
    p.sources["contention.collective_sms"] = "cleared by stepsim fit: the measured factors of provenance.contention price every kernel";
  }
}

// The record of one part of the base profile (collectives, gemm, contention) that this fit does
// not replace: what the base's own provenance says of it, with the command, inputs and notes of
// the run that made it, or what the base kept of it in turn. Without it, a profile refitted for its GEMMs alone
// (calibrate gemm --base, fit --azure-gemm) would keep its collective numbers and lose the only
// record of where they came from. Null when the base says nothing of the part.
Json kept_part(const Json& base_provenance, const std::string& part, std::initializer_list<const char*> keys) {
  if (!base_provenance.is_object()) return nullptr;
  if (base_provenance.contains("kept_from_base") && base_provenance["kept_from_base"].contains(part))
    return base_provenance["kept_from_base"][part];
  Json out = Json::object();
  for (const char* k : keys)
    if (base_provenance.contains(k) && !(base_provenance[k].is_array() && base_provenance[k].empty())) out[k] = base_provenance[k];
  if (out.empty()) return nullptr;
  for (const char* k : {"command", "inputs", "tool", "notes"})
    if (base_provenance.contains(k)) out[k] = base_provenance[k];
  return out;
}

}  // namespace

bool fits_topology(const HardwareProfile& base, const FitInputs& in, const FitOptions& opt) {
  switch (opt.model) {
    case FitOptions::Model::Topology: return true;
    case FitOptions::Model::AlphaBeta: return false;
    case FitOptions::Model::Auto: break;
  }
  // Auto: the topology model carries across node counts where ranges fitted per scope
  // extrapolate badly (the xxrjun H100 cluster's 40- and 80-GPU jobs from its 1-2 node logs:
  // docs/collectives.md), and it keeps the levels a measurement does not reach (the network
  // of a one-node trace) where alpha-beta ranges would leave a scope unmeasured.
  return base.topology.has_value() && std::any_of(in.collectives.begin(), in.collectives.end(), [](const CollectiveSeries& s) {
           return s.ranks >= 2 && !s.samples.empty();
         });
}

HardwareProfile fit_profile(const HardwareProfile& base, const FitInputs& in, const FitOptions& opt, FitReport& report) {
  HardwareProfile p = base;
  report = FitReport{};
  if (fits_topology(base, in, opt)) {
    if (!base.topology)
      throw InputError(fmt::format("fit: --model topology needs a base profile with collectives.topology (the declared "
                                   "arch, gpus_per_node, nics_per_node and nvls_GBps); {} has none",
                                   base.name));
    TopologyFitReport tr;
    p.topology = fit_topology(*base.topology, in.collectives, opt.topology_options, tr);
    report.topology = tr;
  } else {
    fit_alpha_beta_collectives(p, in, opt, report);
    if (!report.fits.empty() && base.topology) {
      // The fitted ranges replace the topology model, which priced both scopes: a scope with no
      // fitted range would be left with nothing measured behind it (the one-NIC ring a profile
      // with a topology carries in its place), so both must be measured.
      for (const char* scope : {"intra_node", "inter_node"})
        if (std::none_of(report.fits.begin(), report.fits.end(), [&](const KindFit& f) { return f.scope == scope && f.in_profile; }))
          throw InputError(fmt::format("fit: --model alpha_beta: no {} collective measured, and the base profile {} prices it with "
                                       "its topology model, which alpha-beta ranges replace: use --model topology (or auto, the "
                                       "default), or add {} measurements",
                                       scope, base.name, scope == std::string("intra_node") ? "one-node" : "multi-node"));
      p.topology.reset();  // the fitted alpha-beta ranges are the model now
    }
  }
  const Json gemm_prov = fit_gemm_table(p, in);
  const Json cont_prov = fit_contention(p, in);
  report.provenance = fit_provenance(base, in, opt, report);
  if (!gemm_prov.empty()) report.provenance["gemm"] = gemm_prov;
  if (!cont_prov.empty()) report.provenance["contention"] = cont_prov;
  Json kept = Json::object();
  if (report.fits.empty() && !report.topology) {
    report.provenance.erase("collective_fits");
    report.provenance.erase("ring_fits");
    report.provenance.erase("method");  // it describes the collective fit
    if (Json k = kept_part(base.provenance, "collectives", {"collective_fits", "ring_fits", "topology_fit"}); !k.is_null())
      kept["collectives"] = k;
  }
  if (gemm_prov.empty())
    if (Json k = kept_part(base.provenance, "gemm", {"gemm"}); !k.is_null()) kept["gemm"] = k;
  if (cont_prov.empty())
    if (Json k = kept_part(base.provenance, "contention", {"contention"}); !k.is_null()) kept["contention"] = k;
  // Set after the fit by its callers (fit --trace, calibrate membw, calibrate's raw points), which
  // drop the kept record of what they replace (replaced_in_provenance).
  for (const char* part : {"trace_compute", "membw", "calibration"})
    if (Json k = kept_part(base.provenance, part, {part}); !k.is_null()) kept[part] = k;
  if (!kept.empty()) report.provenance["kept_from_base"] = kept;
  p.provenance = report.provenance;
  source_fitted_parts(p, report, !gemm_prov.empty(), !cont_prov.empty());
  return p;
}

void replaced_in_provenance(Json& provenance, const std::string& part) {
  if (!provenance.contains("kept_from_base")) return;
  provenance["kept_from_base"].erase(part);
  if (provenance["kept_from_base"].empty()) provenance.erase("kept_from_base");
}

Json fitted_profile_to_json(const HardwareProfile& profile, const FitReport& report) {
  Json out = profile_to_json(profile);
  for (const auto& f : report.fits) {
    if (!f.in_profile || f.derived_from) continue;
    Json& scope = out["collectives"][f.scope];
    Json ranges = Json::array();
    for (std::size_t i = 0; i < f.ranges.size(); ++i) ranges.push_back(line_json(f.ranges[i], i + 1 == f.ranges.size(), true));
    if (scope.at("ranks").at(to_string(f.kind)) == f.ranks)
      scope[to_string(f.kind)] = ranges;
    else
      scope["groups"][to_string(f.kind)][std::to_string(f.ranks)] = ranges;
  }
  out["provenance"] = report.provenance;
  return out;
}

}  // namespace stepsim::calib
