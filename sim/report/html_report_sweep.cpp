// The sweep page: Pareto plot, best configurations, knob effects, sortable table.
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

std::string describe(const std::vector<std::string>& cols, const SweepPointBrief& p) {
  std::string s;
  for (std::size_t i = 0; i < cols.size() && i < p.values.size(); ++i) s += fmt::format("{}{}={}", s.empty() ? "" : " ", cols[i], p.values[i]);
  return s;
}

}  // namespace

std::string pareto_svg(const SweepSummary& s) {
  const double W = 900, H = 460, left = 70, right = 20, top = 20, bottom = 46;
  const auto& pts = s.scatter();
  const auto front = s.pareto();
  double xmax = 0, ymax = 0;
  for (const auto& p : pts) {
    xmax = std::max(xmax, p.step_time.ms());
    ymax = std::max(ymax, p.peak_memory.gib());
  }
  for (const auto& p : front) {
    xmax = std::max(xmax, p.step_time.ms());
    ymax = std::max(ymax, p.peak_memory.gib());
  }
  xmax = nice_ceil(xmax * 1.05);
  ymax = nice_ceil(ymax * 1.05);
  auto X = [&](double v) { return left + v / xmax * (W - left - right); };
  auto Y = [&](double v) { return top + (1 - v / ymax) * (H - top - bottom); };
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">\n", W, H, W, H);
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n", left, top, W - left - right, H - top - bottom);
  for (int i = 0; i <= 5; ++i) {
    double xv = xmax * i / 5, yv = ymax * i / 5;
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#555\">{:g}</text>", X(xv), H - bottom + 16, xv);
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\" fill=\"#555\">{:g}</text>\n", left - 6, Y(yv) + 4, yv);
  }
  o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">step time (ms)</text>", (left + W - right) / 2, H - 8);
  o += fmt::format("<text x=\"14\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">peak memory (GiB)</text>\n",
                   (top + H - bottom) / 2, (top + H - bottom) / 2);
  const auto& cols = s.columns();
  for (const auto& p : pts)
    o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\" fill-opacity=\"0.7\"><title>#{} {} ms, {:.2f} GiB: {}</title></circle>\n",
                     X(p.step_time.ms()), Y(p.peak_memory.gib()), p.constraints_ok ? "#4e79a7" : "#bbbbbb", p.index, p.step_time.ms(),
                     p.peak_memory.gib(), html_escape(describe(cols, p)));
  std::string line;
  for (const auto& p : front) line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", X(p.step_time.ms()), Y(p.peak_memory.gib()));
  if (!front.empty()) o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#e15759\" stroke-width=\"1.5\"/>\n", line);
  for (const auto& p : front)
    o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"#e15759\"><title>Pareto #{} {} ms, {:.2f} GiB: {}</title></circle>\n",
                     X(p.step_time.ms()), Y(p.peak_memory.gib()), p.index, p.step_time.ms(), p.peak_memory.gib(), html_escape(describe(cols, p)));
  o += "</svg>\n";
  return o;
}

void write_sweep_html(std::ostream& out, const std::string& title, const SweepSummary& s) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << html_escape(title) << "</title>\n";
  // Same look as the simulate page.
  out << "<style>body{font-family:system-ui,-apple-system,\"Segoe UI\",Roboto,sans-serif;margin:24px;color:#222}"
         "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}"
         ".sub{color:#666;font-size:13px}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}"
         "th{background:#f3f3f3}th.sort{cursor:pointer}th.sort:hover{background:#e4e4e4}td.l,th.l{text-align:left}"
         ".legend span{margin-right:14px;font-size:12px}.legend i{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:4px}"
         "</style></head><body>\n";
  out << "<h1>" << html_escape(title) << "</h1>\n";
  out << fmt::format("<div class=\"sub\">{} points: {} ok, {} invalid, {} satisfy the constraints (and fit in memory)</div>\n", s.total(), s.ok(),
                     s.invalid(), s.feasible());
  const auto& cols = s.columns();
  auto table_head = [&](bool sortable) {
    out << "<table" << (sortable ? " class=\"sortable\"" : "") << "><thead><tr><th>#</th>";
    for (const auto& c : cols) out << "<th class=\"l\">" << html_escape(c) << "</th>";
    out << "<th>step ms</th><th>peak GiB</th><th class=\"l\">constraints</th></tr></thead><tbody>\n";
  };
  auto table_row = [&](const SweepPointBrief& p) {
    out << "<tr><td>" << p.index << "</td>";
    for (const auto& v : p.values) out << "<td class=\"l\">" << html_escape(v) << "</td>";
    out << fmt::format("<td>{:.3f}</td><td>{:.3f}</td><td class=\"l\">{}</td></tr>\n", p.step_time.ms(), p.peak_memory.gib(),
                       p.constraints_ok ? "ok" : "violated");
  };
  out << "<h2>Best configurations</h2>\n";
  table_head(false);
  for (const auto& p : s.best()) table_row(p);
  out << "</tbody></table>\n";
  out << "<h2>Pareto front: step time vs peak memory</h2>\n<div class=\"legend\"><span><i style=\"background:#e15759\"></i>Pareto front</span>"
         "<span><i style=\"background:#4e79a7\"></i>satisfies constraints</span><span><i style=\"background:#bbb\"></i>violates constraints</span></div>\n"
      << pareto_svg(s);
  table_head(false);
  for (const auto& p : s.pareto()) table_row(p);
  out << "</tbody></table>\n";
  out << "<h2>Which knob moved step time most</h2>\n<table><tr><th class=\"l\">config path</th><th>range of mean step time (ms)</th>"
         "<th class=\"l\">mean step time per value (ms)</th></tr>\n";
  for (const auto& e : s.effects()) {
    std::string means;
    for (const auto& [v, sc] : e.by_value)
      if (sc.second) means += fmt::format("{}{}: {:.3f}", means.empty() ? "" : ", ", v, sc.first / static_cast<double>(sc.second) / 1e6);
    out << fmt::format("<tr><td class=\"l\">{}</td><td>{:.3f}</td><td class=\"l\">{}</td></tr>\n", html_escape(e.path), e.range_ns() / 1e6,
                       html_escape(means));
  }
  out << "</table>\n";
  out << fmt::format("<h2>All points{} (click a header to sort)</h2>\n",
                     s.ok() > s.scatter().size() ? fmt::format(" (first {} ok points of {})", s.scatter().size(), s.ok()) : "");
  table_head(true);
  for (const auto& p : s.scatter()) table_row(p);
  out << "</tbody></table>\n" << kSortScript << "<p class=\"sub\">generated by stepsim; self-contained (no network).</p>\n</body></html>\n";
}

}  // namespace stepsim
