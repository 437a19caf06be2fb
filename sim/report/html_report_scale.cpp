// The weak-scaling page (`stepsim scale --report`): step time and efficiency vs GPUs, where the
// step goes at each point, the collective algorithms and the extrapolation notes.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/report/html_report.hpp"

namespace stepsim {

namespace {

// One panel of scale_svg: a value per point, points evenly spaced in the given order (GPU counts
// are usually powers of two), the y axis from `lo` to `hi`.
struct ScalePanel {
  static constexpr double kWidth = 440, kHeight = 260, kLeft = 64, kRight = 14, kTop = 24, kBottom = 40, kGap = 30;
  double x0;
  double lo, hi;
  std::size_t n;
  double x(std::size_t i) const {
    return x0 + kLeft + (static_cast<double>(i) + 0.5) / static_cast<double>(n) * (kWidth - kLeft - kRight);
  }
  double y(double v) const { return kTop + (1 - (v - lo) / (hi - lo)) * (kHeight - kTop - kBottom); }
};

// The axis range of `values`: from zero (or the lowest value, padded, when the values sit far
// from zero: a 2 % change must show) to a nice maximum.
std::pair<double, double> panel_range(const std::vector<double>& values, double at_least) {
  double mn = *std::min_element(values.begin(), values.end()), mx = std::max(*std::max_element(values.begin(), values.end()), at_least);
  const double pad = std::max((mx - mn) * 0.15, std::fabs(mx) * 0.01);
  double hi = mx + pad, lo = std::max(0.0, mn - pad);
  if (lo < 0.5 * hi) lo = 0;
  const double step = chart_tick_step(hi - lo, 5);
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi / step) * step;
  if (hi <= lo) hi = lo + 1;
  return {lo, hi};
}

std::string panel(const ScalePanel& p, const ScaleResult& r, const std::vector<double>& values, const std::string& title,
                  const std::string& color, const std::string& unit) {
  using P = ScalePanel;
  std::string o = fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n", p.x0 + P::kLeft, P::kTop,
                              P::kWidth - P::kLeft - P::kRight, P::kHeight - P::kTop - P::kBottom);
  const double step = chart_tick_step(p.hi - p.lo, 5);
  for (double v = p.lo; v <= p.hi + step / 2; v += step)
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\" fill=\"#555\">{}</text>", p.x0 + P::kLeft - 4, p.y(v) + 3,
                     chart_tick(std::round(v / step) * step));
  o += fmt::format("<text x=\"{}\" y=\"15\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n", p.x0 + (P::kLeft + P::kWidth - P::kRight) / 2,
                   html_escape(title));
  o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#555\">GPUs</text>\n",
                   p.x0 + (P::kLeft + P::kWidth - P::kRight) / 2, P::kHeight - 6);
  std::string line;
  for (std::size_t i = 0; i < values.size(); ++i) {
    line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", p.x(i), p.y(values[i]));
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#555\">{}</text>", p.x(i),
                     P::kHeight - P::kBottom + 14, r.points[i].gpus);
    o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>{} GPUs: {:.3f} {}</title></circle>\n", p.x(i),
                     p.y(values[i]), color, r.points[i].gpus, values[i], unit);
  }
  if (values.size() > 1) o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n", line, color);
  return o;
}

std::string td(double v) { return fmt::format("<td>{:.3f}</td>", v); }

// Each point's parts of the step (ms), as the text report's table, but absolute.
void write_parts_table(std::ostream& out, const ScaleResult& r) {
  const auto labels = r.collective_labels();
  out << "<div class=\"scroll\"><table><tr><th>GPUs</th><th>nodes</th><th>step ms</th><th>change ms</th><th>tokens/s per GPU</th><th>efficiency %</th>"
         "<th>compute</th><th>optimizer</th><th>idle</th><th>slowest-rank wait (exposed)</th>";
  for (const auto& l : labels) out << "<th>" << html_escape(l) << " (exposed)</th>";
  out << "</tr>\n";
  const Time first = r.points.front().metrics.overlap.step_time;
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const ScalePoint& p = r.points[i];
    out << fmt::format("<tr><td>{}</td><td>{}</td>", p.gpus, p.nodes) << td(p.metrics.overlap.step_time.ms())
        << fmt::format("<td>{:+.3f}</td><td>{:.0f}</td><td>{:.1f}</td>", (p.metrics.overlap.step_time - first).ms(),
                       p.throughput.tokens_per_s_per_gpu, r.efficiency_pct(i))
        << td(p.parts.compute.ms()) << td(p.parts.optimizer.ms()) << td(p.parts.idle.ms()) << td(p.parts.rank_wait.ms());
    for (const auto& l : labels) {
      auto it = p.parts.exposed.find(l);
      out << td(it == p.parts.exposed.end() ? 0.0 : it->second.ms());
    }
    out << "</tr>\n";
  }
  out << "</table></div>\n";
}

void write_algorithm_table(std::ostream& out, const ScaleResult& r) {
  out << "<div class=\"scroll\"><table><tr><th class=\"l\">collective</th>";
  for (const auto& p : r.points) out << "<th class=\"l\">" << p.gpus << " GPUs</th>";
  out << "</tr>\n";
  for (const auto& l : r.collective_labels()) {
    out << "<tr><td class=\"l\">" << html_escape(l) << "</td>";
    for (std::size_t i = 0; i < r.points.size(); ++i) {
      auto it = r.points[i].algorithms.find(l);
      const std::string a = it == r.points[i].algorithms.end() ? "" : it->second;
      auto prev = i == 0 ? r.points[0].algorithms.end() : r.points[i - 1].algorithms.find(l);
      const bool changed = i > 0 && (prev == r.points[i - 1].algorithms.end() ? std::string() : prev->second) != a;
      out << "<td class=\"l\">" << (changed ? "<b>" : "") << html_escape(a) << (changed ? "</b>" : "") << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</table></div>\n";
}

}  // namespace

std::string scale_svg(const ScaleResult& r) {
  std::vector<double> step, eff;
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    step.push_back(r.points[i].metrics.overlap.step_time.ms());
    eff.push_back(r.efficiency_pct(i));
  }
  const double W = 2 * ScalePanel::kWidth + ScalePanel::kGap, H = ScalePanel::kHeight;
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"scale\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">\n", W, H, W, H);
  if (r.points.empty()) return o + "</svg>\n";
  const auto [slo, shi] = panel_range(step, 0);
  const auto [elo, ehi] = panel_range(eff, 100);
  o += panel(ScalePanel{0, slo, shi, step.size()}, r, step, "step time (ms)", "#4e79a7", "ms");
  o += panel(ScalePanel{ScalePanel::kWidth + ScalePanel::kGap, elo, ehi, eff.size()}, r, eff,
             fmt::format("scaling efficiency (% of {} GPUs' tokens/s per GPU)", r.points.front().gpus), "#e15759", "%");
  return o + "</svg>\n";
}

void write_scale_html(std::ostream& out, const ScaleResult& r) {
  const std::string title = "stepsim scale: " + r.file;
  html_page_head(out, title);
  out << "<h1>" << html_escape(title) << "</h1>\n<div class=\"sub\">"
      << html_escape(fmt::format("{} | {} | {} GPUs per node ({}) | per GPU: micro-batch {} x seq {} x grad_accum {}", r.framework, r.model,
                                 r.gpus_per_node, r.profile, r.micro_batch, r.seq_len, r.grad_accum))
      << "<br>weak scaling: the per-GPU batch is fixed, so the tokens per step grow with the GPUs; efficiency = tokens/s per GPU / the "
         "first point's</div>\n";
  if (r.points.empty()) {
    out << "</body></html>\n";
    return;
  }
  out << "<h2>Step time and scaling efficiency</h2>\n<p class=\"sub\">The y axes start above zero when the values sit far from it.</p>\n"
      << scale_svg(r);
  out << "<h2>Where the step goes (ms)</h2>\n<p class=\"sub\">Every instant of the step in one part: compute, optimizer kernels, idle (host "
         "and launch gaps), exposed time waiting for the slowest rank, exposed communication by collective; the parts sum to the step "
         "time (docs/scale.md).</p>\n";
  write_parts_table(out, r);
  out << "<h2>Collective algorithms</h2>\n<p class=\"sub\">NCCL's algorithm/protocol per collective, by bytes; bold where it changes from "
         "the previous point.</p>\n";
  write_algorithm_table(out, r);
  bool noted = false;
  for (const auto& p : r.points)
    for (const auto& x : p.extrapolations) {
      if (!noted) out << "<h2>Extrapolated</h2>\n<p class=\"sub\">Collective costs outside the group sizes the profile was fitted on:</p>\n<ul>\n";
      noted = true;
      out << "<li>" << p.gpus << " GPUs: " << html_escape(x) << "</li>\n";
    }
  if (noted) out << "</ul>\n";
  if (r.validation)
    out << "<h2>Against real runs</h2>\n<p class=\"note validation\">" << html_escape(scale_fidelity_text(*r.validation, " "))
        << "</p>\n";
  out << "<p class=\"sub\">generated by stepsim; self-contained (no network).</p>\n</body></html>\n";
}

}  // namespace stepsim
