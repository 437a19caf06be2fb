// A validation report as text, JSON and HTML, and the baseline gate.
#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/stats.hpp"
#include "sim/report/html_report.hpp"
#include "validate/validate.hpp"

namespace stepsim::validate {

namespace {

std::string error_text(Metric m, double e) { return in_points(m) ? fmt::format("{:+.1f} pt", e) : fmt::format("{:+.1f} %", e); }

std::string value_text(Metric m, double v) {
  double d = display_value(m, v);
  if (m == Metric::OverlapPct) return fmt::format("{:.1f} %", d);
  if (unit_of(m) == "GiB") return fmt::format("{:.2f} GiB", d);
  if (m == Metric::Kernels) return fmt::format("{:.0f}", d);
  return d >= 10000 ? fmt::format("{:.1f} s", d / 1000) : fmt::format("{:.2f} ms", d);
}

int pairs_counted(const Report& r) {
  return static_cast<int>(std::count_if(r.pairs.begin(), r.pairs.end(), [](const PairRow& p) { return p.sign_right.has_value(); }));
}

int pairs_right(const Report& r) {
  return static_cast<int>(
      std::count_if(r.pairs.begin(), r.pairs.end(), [](const PairRow& p) { return p.sign_right.value_or(false); }));
}

nlohmann::json capacity_json(const Report& r) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& c : r.capacity)
    a.push_back({{"source", c.source}, {"cases", c.cases}, {"allocated_over", c.allocated_over},
                 {"flushes", c.flushes}, {"at_risk", c.at_risk}});
  return a;
}

// The baseline's capacity counts against the current ones: exact, since each count is of cases.
void check_capacity(Report& r, const nlohmann::json& baseline, const std::string& file) {
  if (!baseline.contains("capacity")) return;
  const auto& arr = baseline["capacity"];
  struct Count {
    const char* key;
    int CapacityCheck::*count;
    const char* what;
  };
  static constexpr std::array<Count, 3> kCounts{
      {{"allocated_over", &CapacityCheck::allocated_over, "cases predicted over their GPUs' memory (allocated)"},
       {"flushes", &CapacityCheck::flushes, "cases predicted to flush the allocator's cache"},
       {"at_risk", &CapacityCheck::at_risk, "cases predicted at risk of an OOM after a cache flush"}}};
  const char* expected = "{\"source\", \"allocated_over\", \"flushes\", \"at_risk\"} with integer counts";
  if (!arr.is_array()) throw_input_error(file, "/capacity", arr, expected);
  std::map<std::string, const CapacityCheck*> current;
  for (const auto& c : r.capacity) current[c.source] = &c;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const auto& b = arr[i];
    const std::string path = "/capacity/" + std::to_string(i);
    bool ok = b.is_object() && b.contains("source") && b["source"].is_string();
    for (const Count& k : kCounts) ok = ok && b.contains(k.key) && b[k.key].is_number_integer();
    if (!ok) throw_input_error(file, path, b, expected);
    const std::string source = b["source"].get<std::string>();
    auto it = current.find(source);
    for (const Count& k : kCounts) {
      const int now = it == current.end() ? 0 : it->second->*k.count;
      const int base = b[k.key].get<int>();
      if (now != base)
        r.baseline.push_back({source + " " + k.what, static_cast<double>(base), static_cast<double>(now), now > base});
    }
  }
}

// The baseline's "scale" against the report's: the pair count exactly, each median within
// kScaleSlackPoints (a gap grown in size is a regression; any other move, a stale baseline).
void check_scale(Report& r, const nlohmann::json& baseline, const std::string& file) {
  if (!baseline.contains("scale")) return;
  const auto base = scale_fidelity_from_json(baseline["scale"]);
  if (!base)
    throw_input_error(file, "/scale", baseline["scale"],
                      "{\"gpu_pairs\": N, \"gpus\": [lo, hi], \"measured_pct_per_doubling\", \"predicted_pct_per_doubling\", "
                      "\"gap_points_per_doubling\": numbers} (stepsim validate --write-baseline)");
  const auto now = gpu_pair_fidelity(r);
  const int pairs = now ? now->pairs : 0;
  if (base->pairs != pairs) r.baseline.push_back({"scale: GPU-count pairs", static_cast<double>(base->pairs), static_cast<double>(pairs), false});
  if (!now) return;
  const auto cur = *scale_fidelity_from_json(scale_fidelity_json(*now));  // rounded as the baseline is
  const std::tuple<const char*, double, double> medians[] = {{"measured_pct_per_doubling", base->measured_pct, cur.measured_pct},
                                                             {"predicted_pct_per_doubling", base->predicted_pct, cur.predicted_pct},
                                                             {"gap_points_per_doubling", base->gap_points, cur.gap_points}};
  for (const auto& [key, b, c] : medians) {
    if (std::fabs(c - b) <= kScaleSlackPoints + 1e-9) continue;  // both rounded to 0.01
    const bool worse = std::string(key) == "gap_points_per_doubling" && std::fabs(c) > std::fabs(b);
    r.baseline.push_back({std::string("scale: ") + key, b, c, worse});
  }
}

}  // namespace

std::optional<ScaleFidelity> gpu_pair_fidelity(const Report& r) {
  std::map<std::string, const CaseInfo*> cases;
  for (const auto& c : r.cases) cases[c.name] = &c;
  std::vector<double> measured, predicted, gap;
  ScaleFidelity f;
  for (const auto& p : r.pairs) {
    auto a = cases.find(p.first), b = cases.find(p.second);
    if (a == cases.end() || b == cases.end()) continue;
    const auto& fa = a->second->facets;
    const auto& fb = b->second->facets;
    bool only_gpus = fa.at("gpus") != fb.at("gpus");
    for (const auto& [facet, value] : fa)
      if (facet != "gpus" && facet != "nodes" && fb.at(facet) != value) only_gpus = false;
    if (!only_gpus) continue;
    const int g1 = std::stoi(fa.at("gpus")), g2 = std::stoi(fb.at("gpus"));
    const double doublings = std::log2(static_cast<double>(g2) / g1);
    auto per_doubling = [&](double change_pct) { return 100 * (std::pow(1 + change_pct / 100, 1 / doublings) - 1); };
    measured.push_back(per_doubling(p.measured_change_pct));
    predicted.push_back(per_doubling(p.predicted_change_pct));
    gap.push_back(measured.back() - predicted.back());
    f.min_gpus = f.pairs ? std::min({f.min_gpus, g1, g2}) : std::min(g1, g2);
    f.max_gpus = std::max({f.max_gpus, g1, g2});
    ++f.pairs;
  }
  if (f.pairs == 0) return std::nullopt;
  f.measured_pct = median(measured);
  f.predicted_pct = median(predicted);
  f.gap_points = median(gap);
  return f;
}

nlohmann::json baseline_json(const Report& r) {
  nlohmann::json j;
  j["schema"] = "stepsim.validation-baseline/1";
  j["note"] = "Summary of `stepsim validate` (validation/suite.json). CI fails when a median or p90 |error| is more "
              "than 1 point worse, or more than 1 point better (then update this file in the same commit: "
              "stepsim validate --write-baseline validation/baseline.json).";
  j["summaries"] = nlohmann::json::array();
  auto round1 = [](double v) { return std::round(v * 10) / 10; };
  for (const auto& s : r.summaries)
    j["summaries"].push_back({{"split", to_string(s.split)},
                              {"source", s.source},
                              {"metric", to_string(s.metric)},
                              {"cases", s.cases},
                              {"median_abs", round1(s.median_abs)},
                              {"p90_abs", round1(s.p90_abs)},
                              {"bias", round1(s.bias)}});
  j["pairs"] = {{"counted", pairs_counted(r)}, {"sign_right", pairs_right(r)}};
  if (auto f = gpu_pair_fidelity(r)) j["scale"] = scale_fidelity_json(*f);
  j["capacity"] = capacity_json(r);
  return j;
}

void check_baseline(Report& r, const nlohmann::json& baseline, const std::string& file, double slack) {
  r.baseline_checked = true;
  auto bad = [&](const std::string& path, const nlohmann::json& v, const std::string& expected) {
    throw_input_error(file, path, v, expected);
  };
  if (!baseline.is_object() || baseline.value("schema", "") != "stepsim.validation-baseline/1")
    bad("/schema", baseline.is_object() ? baseline.value("schema", nlohmann::json()) : baseline,
        "\"stepsim.validation-baseline/1\"");
  // The keys baseline_json writes; any other is a typo the check would silently skip.
  for (auto it = baseline.begin(); it != baseline.end(); ++it)
    if (it.key() != "schema" && it.key() != "note" && it.key() != "summaries" && it.key() != "pairs" && it.key() != "scale" &&
        it.key() != "capacity")
      bad("/" + it.key(), it.value(), "a baseline key: schema, note, summaries, pairs, scale or capacity (unknown key)");
  if (!baseline.contains("summaries") || !baseline["summaries"].is_array())
    bad("/summaries", baseline.value("summaries", nlohmann::json()), "an array of summaries");
  std::map<std::tuple<std::string, std::string, Metric>, const Summary*> current;  // (split, source, metric)
  for (const auto& s : r.summaries) current[{to_string(s.split), s.source, s.metric}] = &s;
  std::set<std::tuple<std::string, std::string, Metric>> seen;
  const auto& arr = baseline["summaries"];
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const auto& b = arr[i];
    std::string path = "/summaries/" + std::to_string(i);
    if (!b.is_object() || !b.contains("split") || !b["split"].is_string() || !b.contains("source") ||
        !b["source"].is_string() || !b.contains("metric") ||
        !b["metric"].is_string() || !b.contains("median_abs") || !b["median_abs"].is_number() || !b.contains("p90_abs") ||
        !b["p90_abs"].is_number())
      bad(path, b, "{\"split\", \"source\", \"metric\", \"median_abs\", \"p90_abs\", ...}");
    auto metric = parse_metric(b["metric"].get<std::string>());
    if (!metric) bad(path + "/metric", b["metric"], "a metric name");
    std::string split = b["split"].get<std::string>();
    if (split != "fit" && split != "test") bad(path + "/split", b["split"], "\"fit\" or \"test\"");
    std::string source = b["source"].get<std::string>();
    seen.insert({split, source, *metric});
    std::string label = split + " " + source + " " + to_string(*metric);
    auto it = current.find({split, source, *metric});
    if (it == current.end()) {
      r.baseline.push_back({label + ": no longer measured by the suite", 1, 0, true});
      continue;
    }
    for (const char* stat : {"median_abs", "p90_abs"}) {
      double base = b[stat].get<double>();
      double now = std::string(stat) == "median_abs" ? it->second->median_abs : it->second->p90_abs;
      std::string what = label + (std::string(stat) == "median_abs" ? " median |error|" : " p90 |error|");
      if (now > base + slack) r.baseline.push_back({what, base, now, true});
      else if (now < base - slack) r.baseline.push_back({what, base, now, false});
    }
    if (b.contains("cases") && b["cases"].is_number_integer() && b["cases"].get<int>() != it->second->cases)
      r.baseline.push_back({label + " cases", b["cases"].get<double>(), static_cast<double>(it->second->cases), false});
  }
  for (const auto& s : r.summaries)
    if (!seen.count({to_string(s.split), s.source, s.metric}))
      r.baseline.push_back({to_string(s.split) + " " + s.source + " " + to_string(s.metric) + ": not in the baseline", 0,
                            s.median_abs, false});
  check_capacity(r, baseline, file);
  if (baseline.contains("pairs") && baseline["pairs"].is_object() && baseline["pairs"].value("sign_right", -1) >= 0) {
    int base = baseline["pairs"]["sign_right"].get<int>();
    int now = pairs_right(r);
    if (now != base) r.baseline.push_back({"pairs with the right sign", static_cast<double>(base), static_cast<double>(now), now < base});
  }
  check_scale(r, baseline, file);
}

nlohmann::json report_to_json(const Report& r) {
  nlohmann::json j;
  j["schema"] = "stepsim.validate/1";
  j["suite"] = r.suite_file;
  j["cases"] = nlohmann::json::array();
  for (const auto& c : r.cases) {
    nlohmann::json cj{{"name", c.name},
                      {"source", c.source},
                      {"description", c.description},
                      {"measured_by", c.measured_by},
                      {"provenance",
                       {{"repository", c.provenance.repository},
                        {"commit", c.provenance.commit},
                        {"path", c.provenance.path},
                        {"row", c.provenance.row}}},
                      {"assumptions", c.assumptions},
                      {"conversions", c.conversions}};
    if (!c.calibrated_from.empty()) cj["calibrated_from"] = c.calibrated_from;
    if (!c.facets.empty()) cj["facets"] = c.facets;
    const CaseThroughput& t = c.throughput;
    nlohmann::json tj{{"tokens_per_step", t.tokens_per_step}, {"predicted_tokens_per_s", t.predicted_tokens_per_s}};
    if (t.predicted_mfu_pct > 0) {
      tj["predicted_mfu_pct"] = t.predicted_mfu_pct;
      tj["predicted_hfu_pct"] = t.predicted_hfu_pct;
    }
    if (t.measured_tokens_per_s) tj["measured_tokens_per_s"] = *t.measured_tokens_per_s;
    if (t.measured_mfu_pct) tj["measured_mfu_pct"] = *t.measured_mfu_pct;
    cj["throughput"] = tj;
    if (c.memory.allocated_of_capacity > 0)
      cj["memory"] = {{"predicted_allocated_of_capacity", c.memory.allocated_of_capacity},
                      {"predicted_reserved_of_capacity", c.memory.reserved_of_capacity},
                      {"predicted_alloc_retries_per_step", c.memory.alloc_retries},
                      {"predicted_alloc_ooms_per_step", c.memory.alloc_ooms}};
    j["cases"].push_back(cj);
  }
  j["rows"] = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json rj{{"case", row.case_name},   {"source", row.source},     {"split", to_string(row.split)},
                      {"metric", to_string(row.metric)},
                      {"predicted", row.predicted}, {"measured", row.measured}, {"error", row.error},
                      {"error_unit", in_points(row.metric) ? "points" : "percent"}, {"pass", row.pass}};
    if (row.tolerance) rj["tolerance"] = *row.tolerance;
    j["rows"].push_back(rj);
  }
  j["summaries"] = baseline_json(r)["summaries"];
  j["pairs"] = nlohmann::json::array();
  for (const auto& p : r.pairs) {
    nlohmann::json pj{{"name", p.name},
                      {"first", p.first},
                      {"second", p.second},
                      {"knob", p.knob},
                      {"predicted_change_pct", p.predicted_change_pct},
                      {"measured_change_pct", p.measured_change_pct}};
    pj["sign_right"] = p.sign_right ? nlohmann::json(*p.sign_right) : nlohmann::json();
    j["pairs"].push_back(pj);
  }
  j["pairs_summary"] = {{"counted", pairs_counted(r)}, {"sign_right", pairs_right(r)}};
  if (auto f = gpu_pair_fidelity(r)) j["scale"] = scale_fidelity_json(*f);
  j["capacity"] = capacity_json(r);
  if (!r.groups.empty()) {
    j["groups"] = nlohmann::json::array();
    for (const auto& g : r.groups)
      j["groups"].push_back({{"facet", g.facet}, {"value", g.value}, {"split", to_string(g.summary.split)},
                             {"source", g.summary.source},
                             {"metric", to_string(g.summary.metric)}, {"cases", g.summary.cases},
                             {"median_abs", g.summary.median_abs}, {"p90_abs", g.summary.p90_abs},
                             {"bias", g.summary.bias}});
  }
  if (r.baseline_checked) {
    j["baseline"] = nlohmann::json::array();
    for (const auto& f : r.baseline)
      j["baseline"].push_back({{"what", f.what}, {"baseline", f.baseline}, {"current", f.current},
                               {"kind", f.regression ? "regression" : "stale"}});
  }
  j["failed_rows"] = r.failed_rows();
  j["pass"] = r.pass();
  return j;
}

namespace {

// `--by`: per facet, a summary line per value and source, the value's "all" line after its sources.
void write_groups_text(std::ostream& o, const Report& r) {
  for (std::size_t i = 0; i < r.groups.size();) {
    const std::string& facet = r.groups[i].facet;
    std::size_t end = i, value_w = facet.size();
    for (; end < r.groups.size() && r.groups[end].facet == facet; ++end) value_w = std::max(value_w, r.groups[end].value.size());
    const Metric m = r.groups[i].summary.metric;
    o << fmt::format("\n  {} by {}: |error| median and p90, bias ({})\n", to_string(m), facet,
                     in_points(m) ? "points" : "percent");
    o << fmt::format("  {:<{}} {:<5} {:<22} {:>5} {:>9} {:>9} {:>9}\n", facet, value_w, "split", "source", "cases", "median",
                     "p90", "bias");
    for (; i < end; ++i) {
      const GroupSummary& g = r.groups[i];
      const bool first = i == 0 || r.groups[i - 1].facet != facet || r.groups[i - 1].value != g.value;
      o << fmt::format("  {:<{}} {:<5} {:<22} {:>5} {:>9.1f} {:>9.1f} {:>+9.1f}\n", first ? g.value : "", value_w,
                       to_string(g.summary.split), g.summary.source, g.summary.cases, g.summary.median_abs,
                       g.summary.p90_abs, g.summary.bias);
    }
  }
}

}  // namespace

std::string report_to_text(const Report& r) {
  std::ostringstream o;
  o << fmt::format("stepsim validate: {} ({} cases, {} comparisons)\n\n", r.suite_file, r.cases.size(), r.rows.size());
  o << fmt::format("  {:<44} {:<15} {:>11} {:>11} {:>10} {:>6}\n", "case", "metric", "predicted", "measured", "error", "tol");
  for (const auto& row : r.rows)
    o << fmt::format("  {:<44} {:<15} {:>11} {:>11} {:>10} {:>6}{}\n", row.case_name, to_string(row.metric),
                     value_text(row.metric, row.predicted), value_text(row.metric, row.measured),
                     error_text(row.metric, row.error), row.tolerance ? fmt::format("{:g}", *row.tolerance) : "-",
                     row.pass ? "" : "  FAIL");
  o << "\n  summary: |error| median and p90, bias = mean signed error (percent; overlap in points); test rows\n"
       "  carry the accuracy claims, fit rows are the calibration split `fit --suite` may read\n";
  o << fmt::format("  {:<5} {:<22} {:<15} {:>5} {:>9} {:>9} {:>9}\n", "split", "source", "metric", "cases", "median", "p90",
                   "bias");
  for (const auto& s : r.summaries)
    o << fmt::format("  {:<5} {:<22} {:<15} {:>5} {:>9.1f} {:>9.1f} {:>+9.1f}\n", to_string(s.split), s.source,
                     to_string(s.metric), s.cases, s.median_abs, s.p90_abs, s.bias);
  write_groups_text(o, r);
  // The worst comparisons, per metric: where a user should distrust the prediction most.
  o << "\n  worst cases (largest |error| per metric)\n";
  for (Metric m : kAllMetrics) {
    std::vector<const Row*> rows;
    for (const auto& row : r.rows)
      if (row.metric == m) rows.push_back(&row);
    std::sort(rows.begin(), rows.end(), [](const Row* a, const Row* b) { return std::fabs(a->error) > std::fabs(b->error); });
    for (std::size_t i = 0; i < std::min<std::size_t>(3, rows.size()); ++i)
      o << fmt::format("  {:<15} {:<44} {:>10}\n", i == 0 ? to_string(m) : "", rows[i]->case_name,
                       error_text(m, rows[i]->error));
  }
  if (!r.pairs.empty()) {
    o << fmt::format("\n  pairs: relative change of step time from first to second ({} of {} with the right sign; "
                     "a measured change under 2 % is not counted)\n",
                     pairs_right(r), pairs_counted(r));
    std::size_t name_w = 4, knob_w = 4;
    for (const auto& p : r.pairs) {
      name_w = std::max(name_w, p.name.size());
      knob_w = std::max(knob_w, p.knob.size());
    }
    o << fmt::format("  {:<{}} {:<{}} {:>10} {:>10} {:>6}\n", "pair", name_w, "knob", knob_w, "predicted", "measured", "sign");
    for (const auto& p : r.pairs)
      o << fmt::format("  {:<{}} {:<{}} {:>+9.1f}% {:>+9.1f}% {:>6}\n", p.name, name_w, p.knob, knob_w,
                       p.predicted_change_pct, p.measured_change_pct,
                       p.sign_right ? (*p.sign_right ? "right" : "WRONG") : "-");
    if (auto fid = gpu_pair_fidelity(r))
      o << fmt::format("  the {} GPU-count pairs ({}-{} GPUs), per doubling of the GPUs: measured median {:+.2f} %, "
                       "predicted {:+.2f} %;\n  measured - predicted, median over the pairs: {:+.2f} points\n",
                       fid->pairs, fid->min_gpus, fid->max_gpus, fid->measured_pct, fid->predicted_pct, fid->gap_points);
  }
  if (!r.capacity.empty()) {
    o << "\n  capacity: every case ran on its GPUs, so it fit in their memory. Allocated peak (+ memory outside\n"
         "  PyTorch) over the capacity contradicts the run; the allocator model flushing its cache (retrying\n"
         "  cudaMalloc) does not; at risk: allocated bytes fit but a cudaMalloc fails even after a flush\n";
    o << fmt::format("  {:<20} {:>5} {:>16} {:>16} {:>10}\n", "source", "cases", "allocated over", "cache flushes", "at risk");
    for (const auto& c : r.capacity)
      o << fmt::format("  {:<20} {:>5} {:>16} {:>16} {:>10}\n", c.source, c.cases, c.allocated_over, c.flushes, c.at_risk);
    std::vector<const CaseInfo*> over;
    for (const auto& c : r.cases)
      if (!c.memory.fits) over.push_back(&c);
    std::sort(over.begin(), over.end(), [](const CaseInfo* a, const CaseInfo* b) {
      return a->memory.allocated_of_capacity > b->memory.allocated_of_capacity;
    });
    for (std::size_t i = 0; i < std::min<std::size_t>(5, over.size()); ++i)
      o << fmt::format("  {:<44} allocated {:>4.0f} %, reserved {:>4.0f} % of capacity; per step {} flush{}, {} failed\n",
                       over[i]->name, 100 * over[i]->memory.allocated_of_capacity,
                       100 * over[i]->memory.reserved_of_capacity, over[i]->memory.alloc_retries,
                       over[i]->memory.alloc_retries == 1 ? "" : "es", over[i]->memory.alloc_ooms);
  }
  if (r.baseline_checked) {
    if (r.baseline.empty()) o << "\n  baseline: every summary within 1 point of the baseline\n";
    for (const auto& f : r.baseline)
      o << fmt::format("\n  baseline {}: {} (baseline {:.2f}, now {:.2f}){}", f.regression ? "REGRESSION" : "STALE", f.what,
                       f.baseline, f.current,
                       f.regression ? "" : ": predictions improved or the suite changed; update the baseline "
                                           "(--write-baseline) in the same commit");
    if (!r.baseline.empty()) o << "\n";
  }
  int failed = r.failed_rows();
  o << fmt::format("\n  {} comparison(s) outside tolerance{}\n", failed,
                   r.pass() ? "" : fmt::format("; exit 3"));
  return o.str();
}

namespace {

// One colour per source, in the order sources first appear in the rows (legend and points).
constexpr const char* kSourceColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
const char* source_colour(std::size_t k) { return kSourceColours[k % std::size(kSourceColours)]; }

// Scatter geometry (px): the SVG's size, the left margin (y labels), the plot square's side.
constexpr double kScatterWidth = 360, kScatterHeight = 370, kScatterLeft = 56;
constexpr double kPlotSide = kScatterWidth - kScatterLeft - 10;

// The axes of one scatter (x measured, y predicted, the same range): in display units, scaled
// to seconds for times beyond 10 s, logarithmic when the values span more than 20x.
struct ScatterAxes {
  double lo = 0, hi = 0;
  double scale = 1;  // display value -> axis unit
  std::string unit;
  bool log = false;

  // The distance of v from the plot's origin along either axis (px).
  double pos(double v) const {
    double f = log ? std::log(v / lo) / std::log(hi / lo) : (v - lo) / (hi - lo);
    return f * kPlotSide;
  }
  double y(double v) const { return kPlotSide - pos(v); }
};

ScatterAxes scatter_axes(Metric m, const std::vector<const Row*>& rows) {
  double lo = 1e300, hi = 0;
  for (const Row* row : rows)
    for (double v : {display_value(m, row->predicted), display_value(m, row->measured)}) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  ScatterAxes a;
  a.scale = unit_of(m) == "ms" && hi > 10000 ? 1e-3 : 1.0;
  a.unit = a.scale < 1 ? "s" : unit_of(m);
  lo *= a.scale;
  hi *= a.scale;
  a.log = hi / lo > 20;
  a.lo = a.log ? lo / 1.3 : std::max(0.0, lo - 0.1 * (hi - lo));
  a.hi = a.log ? hi * 1.3 : hi + 0.1 * (hi - a.lo) + 1e-9;  // the margin from the widened lo
  return a;
}

// Ticks on both axes (the same scale): 1-2-5 per decade on log axes, a 1-2-5 step on linear ones.
std::vector<double> axis_ticks(const ScatterAxes& a) {
  const double lo = a.lo, hi = a.hi;
  std::vector<double> ticks;
  if (a.log) {
    const std::vector<double> steps = hi / lo > 1000 ? std::vector<double>{1.0} : std::vector<double>{1.0, 2.0, 5.0};
    for (double decade = std::pow(10.0, std::floor(std::log10(lo))); decade <= hi; decade *= 10)
      for (double f : steps)
        if (decade * f >= lo && decade * f <= hi) ticks.push_back(decade * f);
  } else {
    double raw = (hi - lo) / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
    for (double t = std::ceil(lo / step) * step; t <= hi; t += step) ticks.push_back(t);
  }
  return ticks;
}

// The axis titles, and each tick's mark and label on both axes (outside the plot's group).
void write_axes(std::ostream& s, Metric m, const ScatterAxes& a) {
  const double L = kScatterLeft, P = kPlotSide;
  s << fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\">measured {} ({}{})</text>", L + P / 2,
                   kScatterHeight - 8, html_escape(to_string(m)), a.unit, a.log ? ", log" : "");
  s << fmt::format("<text x=\"12\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 12 {})\">"
                   "predicted</text>",
                   10 + P / 2, 10 + P / 2);
  for (double t : axis_ticks(a)) {
    s << fmt::format("<line class=\"tick\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#999\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3}\" font-size=\"10\" text-anchor=\"middle\">{4:g}</text>",
                     L + a.pos(t), 10 + P, 10 + P + 4, 10 + P + 15, t);
    s << fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#999\"/>"
                     "<text x=\"{3}\" y=\"{4:.1f}\" font-size=\"10\" text-anchor=\"end\">{5:g}</text>",
                     L - 4, 10 + a.y(t), L, L - 6, 10 + a.y(t) + 3, t);
  }
}

// One predicted-vs-measured scatter: points per source, the y = x line and the +-10 % band.
}  // namespace

// The band as the plot's square [lo, hi]^2 (axis units, both axes) clipped to the two
// half-planes 0.9 x <= y <= 1.1 x (x measured, y predicted: |predicted / measured - 1| <= 10 %),
// by Sutherland-Hodgman. Its edges lie on the frame or on y = 0.9 x, y = 1.1 x: straight on
// linear and on log axes alike, so the vertices mapped through the axis are the band drawn.
std::vector<std::pair<double, double>> band_polygon(double lo, double hi) {
  std::vector<std::pair<double, double>> poly{{lo, lo}, {hi, lo}, {hi, hi}, {lo, hi}};
  // Keeps the side where f(x, y) >= 0 of the line f = 0 (f linear: y - k x or k x - y).
  auto clip = [&](double sign, double k) {
    auto f = [&](const std::pair<double, double>& p) { return sign * (k * p.first - p.second); };
    std::vector<std::pair<double, double>> out;
    for (std::size_t i = 0; i < poly.size(); ++i) {
      const auto& p = poly[i];
      const auto& q = poly[(i + 1) % poly.size()];
      const double fp = f(p), fq = f(q);
      if (fp >= 0) out.push_back(p);
      if ((fp >= 0) != (fq >= 0)) {
        const double t = fp / (fp - fq);
        out.push_back({p.first + t * (q.first - p.first), p.second + t * (q.second - p.second)});
      }
    }
    poly = std::move(out);
  };
  clip(+1, 1.1);  // y <= 1.1 x
  clip(-1, 0.9);  // y >= 0.9 x
  return poly;
}

namespace {

std::string scatter_svg(const Report& r, Metric m, const std::vector<std::string>& sources) {
  std::vector<const Row*> rows;
  for (const auto& row : r.rows)
    if (row.metric == m && row.predicted > 0 && row.measured > 0) rows.push_back(&row);
  if (rows.empty()) return "";
  const ScatterAxes a = scatter_axes(m, rows);
  const double lo = a.lo, hi = a.hi, P = kPlotSide;
  std::ostringstream s;
  s << fmt::format("<svg class=\"scatter\" data-metric=\"{}\" width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\">",
                   to_string(m), kScatterWidth, kScatterHeight);
  s << fmt::format("<g transform=\"translate({},{})\">", kScatterLeft, 10);
  s << fmt::format("<rect width=\"{0}\" height=\"{0}\" fill=\"#fafafa\" stroke=\"#999\"/>", P);
  // +-10 % band and y = x.
  s << "<polygon class=\"band\" fill=\"#e6f0e6\" points=\"";
  for (const auto& [x, y] : band_polygon(lo, hi)) s << fmt::format("{:.2f},{:.2f} ", a.pos(x), a.y(y));
  s << "\"/>";
  s << fmt::format("<line x1=\"0\" y1=\"{}\" x2=\"{}\" y2=\"0\" stroke=\"#555\" stroke-dasharray=\"4 3\"/>", P, P);
  for (const Row* row : rows) {
    std::size_t k = std::find(sources.begin(), sources.end(), row->source) - sources.begin();
    s << fmt::format("<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\" fill-opacity=\"0.75\">"
                     "<title>{}: predicted {}, measured {} ({})</title></circle>",
                     a.pos(a.scale * display_value(m, row->measured)), a.y(a.scale * display_value(m, row->predicted)),
                     source_colour(k), html_escape(row->case_name), value_text(m, row->predicted),
                     value_text(m, row->measured), error_text(m, row->error));
  }
  s << "</g>";
  write_axes(s, m, a);
  s << "</svg>";
  return s.str();
}

// The legend (one colour per source) and one scatter per metric with rows.
void write_plots(std::ostream& h, const Report& r) {
  std::vector<std::string> sources;
  for (const auto& row : r.rows)
    if (std::find(sources.begin(), sources.end(), row.source) == sources.end()) sources.push_back(row.source);
  h << "<p class=\"legend\">";
  for (std::size_t i = 0; i < sources.size(); ++i)
    h << "<span style=\"color:" << source_colour(i) << "\">&#9679; " << html_escape(sources[i]) << "</span>";
  h << "<span>dashed: predicted = measured; green band: within 10 %</span></p>";
  h << "<h2>Predicted vs measured</h2><div class=\"plots\">";
  for (Metric m : kAllMetrics) {
    std::string svg = scatter_svg(r, m, sources);
    if (!svg.empty()) h << "<div class=\"plot\"><h3>" << to_string(m) << "</h3>" << svg << "</div>";
  }
  h << "</div>";
}

// The error summary per source and metric, and the pairs' predicted and measured changes.
void write_summary_and_pairs(std::ostream& h, const Report& r) {
  h << "<h2>Summary</h2><table><tr><th>split</th><th>source</th><th>metric</th><th>cases</th><th>median |error|</th>"
       "<th>p90 |error|</th><th>bias</th></tr>";
  for (const auto& s : r.summaries)
    h << fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:+.1f}</td></tr>",
                     to_string(s.split), html_escape(s.source), to_string(s.metric), s.cases, s.median_abs, s.p90_abs,
                     s.bias);
  h << "</table>";
  for (std::size_t i = 0; i < r.groups.size(); ++i) {
    const GroupSummary& g = r.groups[i];
    if (i == 0 || r.groups[i - 1].facet != g.facet)
      h << fmt::format("<h2>{} by {}</h2><table><tr><th>{}</th><th>split</th><th>source</th><th>cases</th><th>median |error|</th>"
                       "<th>p90 |error|</th><th>bias</th></tr>",
                       to_string(g.summary.metric), html_escape(g.facet), html_escape(g.facet));
    h << fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:+.1f}</td></tr>",
                     html_escape(g.value), to_string(g.summary.split), html_escape(g.summary.source), g.summary.cases,
                     g.summary.median_abs,
                     g.summary.p90_abs, g.summary.bias);
    if (i + 1 == r.groups.size() || r.groups[i + 1].facet != g.facet) h << "</table>";
  }
  if (!r.capacity.empty()) {
    h << "<h2>Capacity</h2><p>Every case ran on its GPUs, so it fit in their memory: cases predicted above the "
         "capacity on allocated bytes contradict the run; the allocator model flushing its cache and retrying "
         "cudaMalloc does not; at risk: the allocated bytes fit but a cudaMalloc fails even after a flush.</p>"
         "<table><tr><th>source</th><th>cases</th><th>allocated over</th><th>cache flushes</th><th>at risk</th></tr>";
    for (const auto& c : r.capacity)
      h << fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", html_escape(c.source),
                       c.cases, c.allocated_over, c.flushes, c.at_risk);
    h << "</table>";
  }
  if (r.pairs.empty()) return;
  h << "<h2>Pairs</h2><table><tr><th>pair</th><th>knob</th><th>predicted change</th><th>measured change</th>"
       "<th>sign</th></tr>";
  for (const auto& p : r.pairs)
    h << fmt::format("<tr><td>{}</td><td>{}</td><td>{:+.1f} %</td><td>{:+.1f} %</td><td>{}</td></tr>", html_escape(p.name),
                     html_escape(p.knob), p.predicted_change_pct, p.measured_change_pct,
                     p.sign_right ? (*p.sign_right ? "right" : "<span class=\"fail\">wrong</span>") : "-");
  h << "</table>";
}

// Each comparison, then each case's throughput (reported, not gated).
void write_cases_and_throughput(std::ostream& h, const Report& r) {
  h << "<h2>Cases</h2><table><tr><th>case</th><th>metric</th><th>predicted</th><th>measured</th><th>error</th>"
       "<th>tolerance</th></tr>";
  for (const auto& row : r.rows)
    h << fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td{}>{}</td><td>{}</td></tr>",
                     html_escape(row.case_name), to_string(row.metric), value_text(row.metric, row.predicted),
                     value_text(row.metric, row.measured), row.pass ? "" : " class=\"fail\"",
                     error_text(row.metric, row.error), row.tolerance ? fmt::format("{:g}", *row.tolerance) : "-");
  h << "</table><h2>Throughput</h2><p>Tokens per optimizer step over the step time, and MFU in llm-foundry's convention "
       "(docs/metrics.md); measured tokens/s is the experiment's tokens per step over the measured step time, the measured MFU "
       "the predicted one scaled by predicted / measured step time. Reported only: not gated, not in the baseline.</p>"
       "<table><tr><th>case</th><th>tokens per step</th><th>predicted tokens/s</th><th>measured tokens/s</th><th>predicted MFU</th>"
       "<th>measured MFU</th><th>predicted HFU</th></tr>";
  for (const auto& c : r.cases) {
    const CaseThroughput& t = c.throughput;
    auto pct = [](double v) { return v > 0 ? fmt::format("{:.1f} %", v) : std::string("-"); };
    h << fmt::format("<tr><td>{}</td><td>{:.0f}</td><td>{:.0f}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", html_escape(c.name),
                     t.tokens_per_step, t.predicted_tokens_per_s,
                     t.measured_tokens_per_s ? fmt::format("{:.0f}", *t.measured_tokens_per_s) : std::string("-"), pct(t.predicted_mfu_pct),
                     t.measured_mfu_pct ? pct(*t.measured_mfu_pct) : std::string("-"), pct(t.predicted_hfu_pct));
  }
  h << "</table>";
}

// Where each case's measurement comes from, with its assumptions and conversions.
void write_sources(std::ostream& h, const Report& r) {
  h << "<h2>Sources</h2><table><tr><th>case</th><th>measured by</th><th>provenance</th><th>assumptions and "
       "conversions</th></tr>";
  for (const auto& c : r.cases) {
    std::string notes;
    for (const auto& a : c.assumptions) notes += html_escape(a) + "<br>";
    for (const auto& a : c.conversions) notes += html_escape(a) + "<br>";
    if (!c.calibrated_from.empty()) notes += "calibrated from " + html_escape(c.calibrated_from);
    h << fmt::format("<tr><td>{}</td><td>{}</td><td>{} @ {} : {} {}</td><td style=\"text-align:left\">{}</td></tr>",
                     html_escape(c.name), html_escape(c.measured_by), html_escape(c.provenance.repository),
                     html_escape(c.provenance.commit), html_escape(c.provenance.path), html_escape(c.provenance.row), notes);
  }
  h << "</table>";
}

}  // namespace

std::string report_to_html(const Report& r) {
  std::ostringstream h;
  h << "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>stepsim validate</title><style>"
       "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px}"
       "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
       ".fail{color:#b00;font-weight:bold}.plots{display:flex;flex-wrap:wrap;gap:16px}.plot h3{margin:4px 0;font-size:14px}"
       ".legend span{margin-right:14px}</style></head><body>";
  h << "<h1>stepsim validate</h1><p>" << html_escape(r.suite_file) << ": " << r.cases.size() << " cases, " << r.rows.size()
    << " comparisons, " << r.failed_rows() << " outside tolerance.</p>";
  write_plots(h, r);
  write_summary_and_pairs(h, r);
  write_cases_and_throughput(h, r);
  write_sources(h, r);
  h << "</body></html>\n";
  return h.str();
}

}  // namespace stepsim::validate
