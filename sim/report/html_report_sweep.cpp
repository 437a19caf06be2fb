// The sweep page: the objective used, best configurations, Pareto plot, a chart per axis (objective
// and peak reserved memory per value, memory cap drawn), knob effects, sortable table.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/report/html_report.hpp"
#include "sim/report/text_report.hpp"

namespace stepsim {

double chart_ceil(double v) {
  if (v <= 0) return 1;
  double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0})
    if (v <= m * p) return m * p;
  return 10 * p;
}

std::string chart_tick(double v) {
  if (std::fabs(v) >= 1e6) return fmt::format("{:g}M", v / 1e6);
  if (std::fabs(v) >= 1e4) return fmt::format("{:g}k", v / 1e3);
  return fmt::format("{:g}", v);
}

namespace {

constexpr const char* kSortScript = R"(<script>
// Click a header to sort by that column (numbers numerically); click again to reverse.
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){
    th.classList.add('sort');
    th.addEventListener('click',function(){
      var body=t.tBodies[0], rows=Array.prototype.slice.call(body.rows);
      var asc=th.dataset.dir!=='asc'; th.dataset.dir=asc?'asc':'desc';
      rows.sort(function(a,b){
        var x=a.cells[i].textContent, y=b.cells[i].textContent, nx=parseFloat(x), ny=parseFloat(y);
        var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);
        return asc?c:-c;});
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
});
</script>
)";

// The objective's axis title, with its unit.
std::string axis_title(Objective o) {
  return o == Objective::StepTime ? "step time (ms)" : o == Objective::TokensPerS ? "tokens/s (job)" : "MFU (%)";
}

constexpr std::size_t kAxisChartMax = 60;  // values drawn per axis chart

std::string describe(const std::vector<std::string>& cols, const SweepPointBrief& p) {
  std::string s;
  for (std::size_t i = 0; i < cols.size() && i < p.values.size(); ++i) s += fmt::format("{}{}={}", s.empty() ? "" : " ", cols[i], p.values[i]);
  return s;
}

}  // namespace

std::string pareto_svg(const SweepSummary& s) {
  const double W = 900, H = 460, left = 70, right = 20, top = 20, bottom = 46;
  const Objective obj = s.objective().objective;
  const auto& pts = s.scatter();
  const auto front = s.pareto();
  auto xv = [&](const SweepPointBrief& p) { return objective_value(obj, p.inputs()); };
  double xmax = 0, ymax = 0;
  for (const auto* list : {&pts, &front})
    for (const auto& p : *list) {
      xmax = std::max(xmax, xv(p));
      ymax = std::max(ymax, p.memory().gib());
    }
  const double cap_gib = s.memory_cap().gib();
  ymax = std::max(ymax, cap_gib);
  xmax = chart_ceil(xmax * 1.05);
  ymax = chart_ceil(ymax * 1.05);
  auto X = [&](double v) { return left + v / xmax * (W - left - right); };
  auto Y = [&](double v) { return top + (1 - v / ymax) * (H - top - bottom); };
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">\n", W, H, W, H);
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n", left, top, W - left - right, H - top - bottom);
  for (int i = 0; i <= 5; ++i) {
    double x = xmax * i / 5, y = ymax * i / 5;
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#555\">{}</text>", X(x), H - bottom + 16, chart_tick(x));
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\" fill=\"#555\">{}</text>\n", left - 6, Y(y) + 4, chart_tick(y));
  }
  o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>", (left + W - right) / 2, H - 8, axis_title(obj));
  o += fmt::format("<text x=\"14\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">peak reserved memory (GiB)</text>\n",
                   (top + H - bottom) / 2, (top + H - bottom) / 2);
  const auto& cols = s.columns();
  auto tip = [&](const SweepPointBrief& p) {
    return fmt::format("#{} {:.3f} ms, {:.0f} tokens/s, MFU {:.1f}%, {:.2f} GiB reserved: {}", p.index, p.step_time.ms(), p.inputs().tokens_per_s(),
                       p.mfu_pct, p.memory().gib(), html_escape(describe(cols, p)));
  };
  for (const auto& p : pts)
    o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\" fill-opacity=\"0.7\"><title>{}</title></circle>\n", X(xv(p)),
                     Y(p.memory().gib()), p.constraints_ok ? "#4e79a7" : "#bbbbbb", tip(p));
  std::string line;
  for (const auto& p : front) line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", X(xv(p)), Y(p.memory().gib()));
  if (!front.empty()) o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#e15759\" stroke-width=\"1.5\"/>\n", line);
  for (const auto& p : front)
    o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"#e15759\"><title>Pareto {}</title></circle>\n", X(xv(p)),
                     Y(p.memory().gib()), tip(p));
  if (cap_gib > 0) {  // the memory cap, as on the per-axis memory charts
    o += fmt::format("<line class=\"cap\" x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#e15759\" stroke-dasharray=\"5,3\"/>",
                     left, Y(cap_gib), W - right, Y(cap_gib));
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\" fill=\"#e15759\">cap {:.1f} GiB ({})</text>\n", W - right - 2,
                     Y(cap_gib) - 3, cap_gib, html_escape(s.memory_cap_what()));
  }
  o += "</svg>\n";
  return o;
}

namespace {

// Geometry of one of axis_svg's two panels side by side: the objective's mean per value, and
// peak reserved memory (mean dot, bar to the max).
struct AxisPanel {
  static constexpr double kWidth = 420, kHeight = 210, kLeft = 62, kRight = 12, kTop = 22, kBottom = 52, kGap = 30;
  double x0;          // the panel's left edge
  double ymax;        // the value at the top of its y axis
  std::size_t n;      // values drawn
  double x(std::size_t i) const {
    return x0 + kLeft + (static_cast<double>(i) + 0.5) / static_cast<double>(n) * (kWidth - kLeft - kRight);
  }
  double y(double v) const { return kTop + (1 - v / ymax) * (kHeight - kTop - kBottom); }
  std::size_t label_every() const { return std::max<std::size_t>(1, n / 12); }  // x labels drawn
};

using AxisValues = std::vector<std::pair<std::string, AxisValueStats>>;

// The panel's frame, y ticks and title.
std::string axis_panel_frame(const AxisPanel& p, const std::string& title) {
  using P = AxisPanel;
  std::string o = fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n", p.x0 + P::kLeft, P::kTop,
                              P::kWidth - P::kLeft - P::kRight, P::kHeight - P::kTop - P::kBottom);
  for (int i = 0; i <= 4; ++i)
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\" fill=\"#555\">{}</text>", p.x0 + P::kLeft - 4,
                     p.y(p.ymax * i / 4) + 3, chart_tick(p.ymax * i / 4));
  o += fmt::format("<text x=\"{}\" y=\"14\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n", p.x0 + (P::kLeft + P::kWidth - P::kRight) / 2,
                   title);
  return o;
}

// Value i's label under the x axis, slanted, cut to 14 characters; every label_every()-th value.
std::string axis_value_label(const AxisPanel& p, std::size_t i, const std::string& v) {
  if (i % p.label_every() != 0) return "";
  const double y = AxisPanel::kHeight - AxisPanel::kBottom + 14;
  return fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" text-anchor=\"end\" fill=\"#555\" transform=\"rotate(-35 {:.1f} {})\">{}</text>",
                     p.x(i), y, p.x(i), y, html_escape(v.size() > 14 ? v.substr(0, 13) + "~" : v));
}

// The objective's mean per value, joined by a line.
std::string objective_panel(const AxisPanel& p, const AxisValues& values, Objective obj, const AxisEffect& e) {
  std::string o = axis_panel_frame(p, "mean " + axis_title(obj));
  std::string line;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto& [v, st] = values[i];
    o += axis_value_label(p, i, v);
    const double m = st.mean(obj);
    line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", p.x(i), p.y(m));
    o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"#4e79a7\"><title>{}={}: mean {} over {} points</title></circle>\n", p.x(i),
                     p.y(m), html_escape(e.path), html_escape(v), html_escape(format_objective(obj, m)), st.count);
  }
  if (values.size() > 1) o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"1\"/>\n", line);
  return o;
}

// Peak reserved memory per value (mean dot, bar to the max) and the memory cap's dashed line.
std::string memory_panel(const AxisPanel& p, const AxisValues& values, const AxisEffect& e, const SweepSummary& s) {
  std::string o = axis_panel_frame(p, "peak reserved memory (GiB): mean, bar to max");
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto& [v, st] = values[i];
    o += axis_value_label(p, i, v);
    const double mean = st.mean_memory_gib(), mx = st.max_memory.gib();
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#9c755f\" stroke-width=\"6\" stroke-opacity=\"0.35\"/>",
                     p.x(i), p.y(mean), p.x(i), p.y(mx));
    o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"#9c755f\"><title>{}={}: mean {:.2f} GiB, max {:.2f} GiB reserved over {} points</title></circle>\n",
                     p.x(i), p.y(mean), html_escape(e.path), html_escape(v), mean, mx, st.count);
  }
  const double cap_gib = s.memory_cap().gib();
  if (cap_gib > 0) {
    const double right = p.x0 + AxisPanel::kWidth - AxisPanel::kRight;
    o += fmt::format("<line class=\"cap\" x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#e15759\" stroke-dasharray=\"5,3\"/>",
                     p.x0 + AxisPanel::kLeft, p.y(cap_gib), right, p.y(cap_gib));
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\" fill=\"#e15759\">cap {:.1f} GiB ({})</text>\n", right - 2,
                     p.y(cap_gib) - 3, cap_gib, html_escape(s.memory_cap_what()));
  }
  return o;
}

}  // namespace

std::string axis_svg(const SweepSummary& s, const AxisEffect& e) {
  const Objective obj = s.objective().objective;
  AxisValues values;
  for (const auto& v : e.by_value)
    if (v.second.count) values.push_back(v);
  const std::size_t total = values.size();
  if (values.size() > kAxisChartMax) values.resize(kAxisChartMax);
  const double W = 2 * AxisPanel::kWidth + AxisPanel::kGap, H = AxisPanel::kHeight;
  double omax = 0, mmax = s.memory_cap().gib();
  for (const auto& [v, st] : values) {
    omax = std::max(omax, st.mean(obj));
    mmax = std::max(mmax, st.max_memory.gib());
  }
  omax = chart_ceil(omax * 1.05);
  mmax = chart_ceil(mmax * 1.05);
  const std::size_t n = std::max<std::size_t>(values.size(), 1);
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"axis\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">\n", W, H, W, H);
  o += objective_panel(AxisPanel{0, omax, n}, values, obj, e);
  o += memory_panel(AxisPanel{AxisPanel::kWidth + AxisPanel::kGap, mmax, n}, values, e, s);
  if (total > values.size())
    o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#555\">first {} of {} values</text>\n", AxisPanel::kLeft, H - 4, values.size(),
                     total);
  o += "</svg>\n";
  return o;
}

namespace {

// The page's head: title and the simulate page's look.
void write_sweep_page_head(std::ostream& out, const std::string& title) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << html_escape(title) << "</title>\n";
  // Same look as the simulate page.
  out << "<style>body{font-family:system-ui,-apple-system,\"Segoe UI\",Roboto,sans-serif;margin:24px;color:#222}"
         "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}"
         "h3{font-size:14px;margin:14px 0 4px}"
         ".sub{color:#666;font-size:13px}table{border-collapse:collapse;font-size:13px}.scroll{overflow-x:auto;max-width:100%}"
         "td.l{max-width:28em;overflow-wrap:anywhere}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}"
         "th{background:#f3f3f3}th.sort{cursor:pointer}th.sort:hover{background:#e4e4e4}td.l,th.l{text-align:left}"
         ".legend span{margin-right:14px;font-size:12px}.legend i{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:4px}"
         "</style></head><body>\n";
}

// A table of points, one row each: the varied values, then the point's results.
void write_point_table(std::ostream& out, const std::vector<std::string>& cols, const std::vector<SweepPointBrief>& points,
                       bool sortable) {
  // In a scroll container: a table wider than the window (many axes) scrolls on its own
  // instead of pushing the page's results off screen.
  out << "<div class=\"scroll\"><table" << (sortable ? " class=\"sortable\"" : "") << "><thead><tr><th>#</th>";
  for (const auto& c : cols) out << "<th class=\"l\">" << html_escape(c) << "</th>";
  out << "<th>step ms</th><th>tokens/s</th><th>MFU %</th><th>reserved GiB</th><th>peak GiB</th><th class=\"l\">constraints</th></tr></thead><tbody>\n";
  for (const auto& p : points) {
    out << "<tr><td>" << p.index << "</td>";
    for (const auto& v : p.values) out << "<td class=\"l\">" << html_escape(v) << "</td>";
    out << fmt::format("<td>{:.3f}</td><td>{:.0f}</td><td>{:.1f}</td><td>{:.3f}</td><td>{:.3f}</td><td class=\"l\">{}</td></tr>\n", p.step_time.ms(),
                       p.inputs().tokens_per_s(), p.mfu_pct, p.memory().gib(), p.peak_memory.gib(), p.constraints_ok ? "ok" : "violated");
  }
  out << "</tbody></table></div>\n";
}

// Which knob moved the objective most: each axis' range of means, and its mean per value.
void write_knob_table(std::ostream& out, const SweepSummary& s, Objective obj) {
  out << "<h2>Which knob moved " << html_escape(objective_label(obj)) << " most</h2>\n<table><tr><th class=\"l\">config path</th><th>range of mean "
      << html_escape(axis_title(obj)) << "</th><th class=\"l\">mean per value, best first (at most 8 shown)</th></tr>\n";
  for (const auto& e : s.effects()) {
    std::string means;
    auto ranked = e.ranked(obj);
    for (std::size_t i = 0; i < ranked.size() && i < 8; ++i)
      means += fmt::format("{}{}: {}", means.empty() ? "" : ", ", ranked[i].first, format_objective(obj, ranked[i].second.mean(obj)));
    if (ranked.size() > 8) means += fmt::format(", ... ({} values)", ranked.size());
    out << fmt::format("<tr><td class=\"l\">{}</td><td>{:.3f}</td><td class=\"l\">{}</td></tr>\n", html_escape(e.path), e.range(obj), html_escape(means));
  }
  out << "</table>\n";
}

}  // namespace

void write_sweep_html(std::ostream& out, const std::string& title, const SweepSummary& s) {
  const ObjectiveChoice oc = s.objective();
  const Objective obj = oc.objective;
  write_sweep_page_head(out, title);
  out << "<h1>" << html_escape(title) << "</h1>\n";
  out << fmt::format("<div class=\"sub\">{} points: {} ok, {} invalid, {} satisfy the constraints (and fit in memory)</div>\n", s.total(), s.ok(),
                     s.invalid(), s.feasible());
  out << fmt::format("<p>Objective: <b>{}</b> ({}{}).</p>\n", to_string(obj), html_escape(oc.reason),
                     oc.requested ? "" : "; <code>--objective step_time|tokens_per_s|mfu</code> to choose");
  const auto& cols = s.columns();
  out << "<h2>Best configurations</h2>\n";
  write_point_table(out, cols, s.best(), false);
  out << "<h2>Pareto front: " << html_escape(objective_label(obj)) << " vs peak reserved memory</h2>\n<div class=\"legend\"><span><i style=\"background:#e15759\"></i>Pareto front</span>"
         "<span><i style=\"background:#4e79a7\"></i>satisfies constraints</span><span><i style=\"background:#bbb\"></i>violates constraints</span>"
         "<span>dashed: the memory cap; the front holds only points that satisfy the constraints</span></div>\n"
      << pareto_svg(s);
  write_point_table(out, cols, s.pareto(), false);
  out << "<h2>" << html_escape(objective_label(obj)) << " and memory per axis value</h2>\n";
  out << fmt::format("<p class=\"sub\">Each chart: the mean over the points with that value (the other axes vary); memory is the peak reserved, the "
                     "dashed line the memory cap{}.</p>\n",
                     s.memory_cap().count ? fmt::format(" ({})", html_escape(s.memory_cap_what())) : " (none known)");
  for (const auto& e : s.effects()) out << "<h3>" << html_escape(e.path) << "</h3>\n" << axis_svg(s, e);
  write_knob_table(out, s, obj);
  out << fmt::format("<h2>All points{} (click a header to sort)</h2>\n",
                     s.ok() > s.scatter().size() ? fmt::format(" (first {} ok points of {})", s.scatter().size(), s.ok()) : "");
  write_point_table(out, cols, s.scatter(), true);
  out << kSortScript << "<p class=\"sub\">generated by stepsim; self-contained (no network).</p>\n</body></html>\n";
}

}  // namespace stepsim
