// The sweep page: the objective used, best configurations, Pareto plot, a chart per axis (objective
// and peak reserved memory per value, memory cap drawn), knob effects, sortable table.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/report/html_report.hpp"
#include "sim/report/text_report.hpp"

namespace stepsim {

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

double nice_ceil(double v) {
  if (v <= 0) return 1;
  double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0})
    if (v <= m * p) return m * p;
  return 10 * p;
}

// The objective's axis title, with its unit.
std::string axis_title(Objective o) {
  return o == Objective::StepTime ? "step time (ms)" : o == Objective::TokensPerS ? "tokens/s (job)" : "MFU (%)";
}

constexpr std::size_t kAxisChartMax = 60;  // values drawn per axis chart

// Axis tick labels: "1.2M", "450k", "0.25".
std::string tick(double v) {
  if (std::fabs(v) >= 1e6) return fmt::format("{:g}M", v / 1e6);
  if (std::fabs(v) >= 1e4) return fmt::format("{:g}k", v / 1e3);
  return fmt::format("{:g}", v);
}

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
  xmax = nice_ceil(xmax * 1.05);
  ymax = nice_ceil(ymax * 1.05);
  auto X = [&](double v) { return left + v / xmax * (W - left - right); };
  auto Y = [&](double v) { return top + (1 - v / ymax) * (H - top - bottom); };
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">\n", W, H, W, H);
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n", left, top, W - left - right, H - top - bottom);
  for (int i = 0; i <= 5; ++i) {
    double x = xmax * i / 5, y = ymax * i / 5;
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#555\">{}</text>", X(x), H - bottom + 16, tick(x));
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\" fill=\"#555\">{}</text>\n", left - 6, Y(y) + 4, tick(y));
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
  o += "</svg>\n";
  return o;
}

std::string axis_svg(const SweepSummary& s, const AxisEffect& e) {
  const Objective obj = s.objective().objective;
  std::vector<std::pair<std::string, AxisValueStats>> values;
  for (const auto& v : e.by_value)
    if (v.second.count) values.push_back(v);
  const std::size_t total = values.size();
  if (values.size() > kAxisChartMax) values.resize(kAxisChartMax);
  const double PW = 420, H = 210, left = 62, right = 12, top = 22, bottom = 52, gap = 30;
  const double W = 2 * PW + gap;
  const double cap_gib = s.memory_cap().gib();
  double omax = 0, mmax = cap_gib;
  for (const auto& [v, st] : values) {
    omax = std::max(omax, st.mean(obj));
    mmax = std::max(mmax, st.max_memory.gib());
  }
  omax = nice_ceil(omax * 1.05);
  mmax = nice_ceil(mmax * 1.05);
  const std::size_t n = std::max<std::size_t>(values.size(), 1);
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"axis\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">\n", W, H, W, H);
  // Two panels: the objective's mean per value, and peak reserved memory (mean dot, max bar).
  for (int panel = 0; panel < 2; ++panel) {
    const double x0 = panel * (PW + gap);
    const double ymax = panel == 0 ? omax : mmax;
    auto X = [&](std::size_t i) { return x0 + left + (static_cast<double>(i) + 0.5) / static_cast<double>(n) * (PW - left - right); };
    auto Y = [&](double v) { return top + (1 - v / ymax) * (H - top - bottom); };
    o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n", x0 + left, top, PW - left - right,
                     H - top - bottom);
    for (int i = 0; i <= 4; ++i)
      o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\" fill=\"#555\">{}</text>", x0 + left - 4,
                       Y(ymax * i / 4) + 3, tick(ymax * i / 4));
    o += fmt::format("<text x=\"{}\" y=\"14\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n", x0 + (left + PW - right) / 2,
                     panel == 0 ? "mean " + axis_title(obj) : std::string("peak reserved memory (GiB): mean, bar to max"));
    const std::size_t label_every = std::max<std::size_t>(1, values.size() / 12);
    std::string line;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto& [v, st] = values[i];
      if (i % label_every == 0)
        o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" text-anchor=\"end\" fill=\"#555\" transform=\"rotate(-35 {:.1f} {})\">{}</text>",
                         X(i), H - bottom + 14, X(i), H - bottom + 14, html_escape(v.size() > 14 ? v.substr(0, 13) + "~" : v));
      if (panel == 0) {
        const double m = st.mean(obj);
        line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", X(i), Y(m));
        o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"#4e79a7\"><title>{}={}: mean {} over {} points</title></circle>\n", X(i),
                         Y(m), html_escape(e.path), html_escape(v), html_escape(format_objective(obj, m)), st.count);
      } else {
        const double mean = st.mean_memory_gib(), mx = st.max_memory.gib();
        o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#9c755f\" stroke-width=\"6\" stroke-opacity=\"0.35\"/>",
                         X(i), Y(mean), X(i), Y(mx));
        o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"#9c755f\"><title>{}={}: mean {:.2f} GiB, max {:.2f} GiB reserved over {} points</title></circle>\n",
                         X(i), Y(mean), html_escape(e.path), html_escape(v), mean, mx, st.count);
      }
    }
    if (panel == 0 && values.size() > 1)
      o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"1\"/>\n", line);
    if (panel == 1 && cap_gib > 0) {
      o += fmt::format("<line class=\"cap\" x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#e15759\" stroke-dasharray=\"5,3\"/>", x0 + left,
                       Y(cap_gib), x0 + PW - right, Y(cap_gib));
      o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\" fill=\"#e15759\">cap {:.1f} GiB ({})</text>\n", x0 + PW - right - 2,
                       Y(cap_gib) - 3, cap_gib, html_escape(s.memory_cap_what()));
    }
  }
  if (total > values.size())
    o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#555\">first {} of {} values</text>\n", left, H - 4, values.size(), total);
  o += "</svg>\n";
  return o;
}

void write_sweep_html(std::ostream& out, const std::string& title, const SweepSummary& s) {
  const ObjectiveChoice oc = s.objective();
  const Objective obj = oc.objective;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << html_escape(title) << "</title>\n";
  // Same look as the simulate page.
  out << "<style>body{font-family:system-ui,-apple-system,\"Segoe UI\",Roboto,sans-serif;margin:24px;color:#222}"
         "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}"
         "h3{font-size:14px;margin:14px 0 4px}"
         ".sub{color:#666;font-size:13px}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}"
         "th{background:#f3f3f3}th.sort{cursor:pointer}th.sort:hover{background:#e4e4e4}td.l,th.l{text-align:left}"
         ".legend span{margin-right:14px;font-size:12px}.legend i{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:4px}"
         "</style></head><body>\n";
  out << "<h1>" << html_escape(title) << "</h1>\n";
  out << fmt::format("<div class=\"sub\">{} points: {} ok, {} invalid, {} satisfy the constraints (and fit in memory)</div>\n", s.total(), s.ok(),
                     s.invalid(), s.feasible());
  out << fmt::format("<p>Objective: <b>{}</b> ({}{}).</p>\n", to_string(obj), html_escape(oc.reason),
                     oc.requested ? "" : "; <code>--objective step_time|tokens_per_s|mfu</code> to choose");
  const auto& cols = s.columns();
  auto table_head = [&](bool sortable) {
    out << "<table" << (sortable ? " class=\"sortable\"" : "") << "><thead><tr><th>#</th>";
    for (const auto& c : cols) out << "<th class=\"l\">" << html_escape(c) << "</th>";
    out << "<th>step ms</th><th>tokens/s</th><th>MFU %</th><th>reserved GiB</th><th>peak GiB</th><th class=\"l\">constraints</th></tr></thead><tbody>\n";
  };
  auto table_row = [&](const SweepPointBrief& p) {
    out << "<tr><td>" << p.index << "</td>";
    for (const auto& v : p.values) out << "<td class=\"l\">" << html_escape(v) << "</td>";
    out << fmt::format("<td>{:.3f}</td><td>{:.0f}</td><td>{:.1f}</td><td>{:.3f}</td><td>{:.3f}</td><td class=\"l\">{}</td></tr>\n", p.step_time.ms(),
                       p.inputs().tokens_per_s(), p.mfu_pct, p.memory().gib(), p.peak_memory.gib(), p.constraints_ok ? "ok" : "violated");
  };
  out << "<h2>Best configurations</h2>\n";
  table_head(false);
  for (const auto& p : s.best()) table_row(p);
  out << "</tbody></table>\n";
  out << "<h2>Pareto front: " << html_escape(objective_label(obj)) << " vs peak reserved memory</h2>\n<div class=\"legend\"><span><i style=\"background:#e15759\"></i>Pareto front</span>"
         "<span><i style=\"background:#4e79a7\"></i>satisfies constraints</span><span><i style=\"background:#bbb\"></i>violates constraints</span></div>\n"
      << pareto_svg(s);
  table_head(false);
  for (const auto& p : s.pareto()) table_row(p);
  out << "</tbody></table>\n";
  out << "<h2>" << html_escape(objective_label(obj)) << " and memory per axis value</h2>\n";
  out << fmt::format("<p class=\"sub\">Each chart: the mean over the points with that value (the other axes vary); memory is the peak reserved, the "
                     "dashed line the memory cap{}.</p>\n",
                     s.memory_cap().count ? fmt::format(" ({})", html_escape(s.memory_cap_what())) : " (none known)");
  for (const auto& e : s.effects()) out << "<h3>" << html_escape(e.path) << "</h3>\n" << axis_svg(s, e);
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
  out << fmt::format("<h2>All points{} (click a header to sort)</h2>\n",
                     s.ok() > s.scatter().size() ? fmt::format(" (first {} ok points of {})", s.scatter().size(), s.ok()) : "");
  table_head(true);
  for (const auto& p : s.scatter()) table_row(p);
  out << "</tbody></table>\n" << kSortScript << "<p class=\"sub\">generated by stepsim; self-contained (no network).</p>\n</body></html>\n";
}

}  // namespace stepsim
