#include "sim/report/html_report.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "sim/analysis/class_breakdown.hpp"
#include "sim/analysis/throughput.hpp"
#include "sim/core/error.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/report/text_report.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

std::string html_escape(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

void write_html_file(const std::string& file, const std::function<void(std::ostream&)>& body) {
  std::ofstream out(file);
  if (!out) throw InputError(file + ": cannot write the HTML report");
  body(out);
}

namespace {

constexpr const char* kStyle = R"(<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#666;font-size:13px} table{border-collapse:collapse;font-size:13px;margin:6px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right} th{background:#f3f3f3;cursor:default}
td.l,th.l{text-align:left} .bound{font-size:15px;background:#fff6e0;border-left:4px solid #f28e2b;padding:6px 10px}
.legend span{display:inline-block;margin-right:14px;font-size:12px} .legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px}
svg text{font-family:system-ui,sans-serif} th.sort{cursor:pointer} th.sort:hover{background:#e4e4e4}
code{white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word} .scroll{overflow-x:auto;max-width:100%}
</style>
)";

std::string color_of(const TimelineOp& op) {
  if (op.kind == TimelineOp::Kind::Collective) {
    switch (op.collective) {
      case CollectiveKind::AllGather: return "#59a14f";
      case CollectiveKind::ReduceScatter: return "#f28e2b";
      case CollectiveKind::AllReduce: return "#e15759";
      default: return "#b07aa1";
    }
  }
  switch (op.cls) {
    case KernelClass::Compute: return "#4e79a7";
    case KernelClass::Optimizer: return "#9c755f";
    default: return "#76b7b2";
  }
}

std::string ms(Time t) { return fmt::format("{:.3f}", t.ms()); }

}  // namespace

// "Nice" tick step for a span: 1, 2 or 5 times a power of ten.
double chart_tick_step(double span, int target) {
  double raw = span / std::max(target, 1);
  double p = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-12))));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

void html_page_head(std::ostream& out, const std::string& title) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << html_escape(title) << "</title>\n" << kStyle
      << "</head><body>\n";
}

std::string timeline_svg(const Timeline& t, const Explanation* x) {
  const double W = 1160, label = 120, lane = 30, top = 24;
  const Time span = std::max(t.end - t.start, Time{1});
  const double sx = (W - label - 10) / static_cast<double>(span.ns);
  auto X = [&](Time v) { return label + static_cast<double>((v - t.start).ns) * sx; };
  const std::size_t lanes = 1 + t.streams.size();
  const double H = top + lane * static_cast<double>(lanes) + 28;
  std::set<std::size_t> crit_ops, crit_host;
  if (x)
    for (const auto& s : x->path) (s.kind == CriticalStep::Kind::Kernel || s.kind == CriticalStep::Kind::Collective ? crit_ops : crit_host).insert(s.index);
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">\n", W, H, W, H);
  // Lanes and their names.
  for (std::size_t l = 0; l < lanes; ++l) {
    double y = top + lane * static_cast<double>(l);
    std::string name = l == 0 ? "host" : t.streams[l - 1].name.empty() ? fmt::format("stream {}", l - 1) : t.streams[l - 1].name;
    o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>", label, y, W - label - 10, lane, l % 2 ? "#fafafa" : "#f2f2f2");
    o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"end\">{}</text>\n", label - 6, y + lane / 2 + 4, html_escape(name));
  }
  // Time axis.
  double step = chart_tick_step(span.ms(), 10);
  for (double v = 0; v <= span.ms() + 1e-9; v += step) {
    double px = label + v * 1e6 * sx;
    o += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#ccc\" stroke-width=\"0.5\"/>", px, top - 4, H - 24);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#555\">{:g}</text>", px, H - 10, v);
  }
  o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#555\">ms</text>\n", W - 28, H - 10);
  // Host intervals.
  for (std::size_t h = 0; h < t.host.size(); ++h) {
    const auto& hi = t.host[h];
    double x0 = X(hi.start), w = std::max(0.6, static_cast<double>((hi.end - hi.start).ns) * sx);
    const char* fill = hi.kind == HostInterval::Kind::Blocked ? "#d3d3d3" : hi.kind == HostInterval::Kind::Work ? "#edc948" : "#bab0ac";
    o += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"{}><title>{} [{} - {} ms]</title></rect>", x0, top + 4,
                     w, lane - 8, fill, crit_host.count(h) ? " stroke=\"#000\" stroke-width=\"1.5\"" : "", html_escape(host_label(t, hi)), ms(hi.start),
                     ms(hi.end));
  }
  o += "\n";
  // GPU ops; collectives are labelled by their unit when the box is wide enough.
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const auto& op = t.ops[i];
    if (op.kind == TimelineOp::Kind::Marker) continue;
    double y = top + lane * static_cast<double>(op.stream.index() + 1);
    double x0 = X(op.start), w = std::max(0.6, static_cast<double>(op.duration().ns) * sx);
    bool coll = op.kind == TimelineOp::Kind::Collective;
    o += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"{}><title>{}{} [{} - {} ms]</title></rect>", x0,
                     y + 3, w, lane - 6, color_of(op), crit_ops.count(i) ? " stroke=\"#000\" stroke-width=\"1.5\"" : " stroke=\"#fff\" stroke-width=\"0.3\"",
                     html_escape(op.name), op.unit.empty() ? "" : " (" + html_escape(op.unit) + ")", ms(op.start), ms(op.end));
    std::string text = coll ? short_name(op.collective) + " " + (op.unit.empty() ? op.name : op.unit) : op.name.str();
    if (w > 7.0 * static_cast<double>(text.size()))
      o += fmt::format("<text x=\"{:.2f}\" y=\"{}\" font-size=\"11\" fill=\"#fff\" text-anchor=\"middle\">{}</text>", x0 + w / 2, y + lane / 2 + 4,
                       html_escape(text));
    o += "\n";
  }
  o += "</svg>\n";
  return o;
}

std::string memory_svg(const Timeline& t, const Metrics& m) {
  const double W = 1160, H = 240, left = 120, right = 10, top = 16, bottom = 28;
  const Time span = std::max(t.end - t.start, Time{1});
  double ymax = std::max(1.0, std::max(m.peak_memory, m.peak_reserved).gib() * 1.15);
  auto X = [&](Time v) { return left + static_cast<double>((v - t.start).ns) / static_cast<double>(span.ns) * (W - left - right); };
  auto Y = [&](double gib) { return top + (1 - gib / ymax) * (H - top - bottom); };
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">\n", W, H, W, H);
  double ystep = chart_tick_step(ymax, 5);
  for (double v = 0; v <= ymax; v += ystep)
    o += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e3e3e3\"/><text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" "
                     "text-anchor=\"end\" fill=\"#555\">{:g} GiB</text>\n",
                     left, W - right, Y(v), Y(v), left - 6, Y(v) + 4, v);
  // A step curve through the samples of one series (bytes of a MemorySample).
  auto step_path = [&](Bytes MemorySample::*series) {
    double last_y = Y(0);
    std::string path = fmt::format("M{:.2f},{:.2f}", X(t.start), last_y);
    for (const auto& s : t.memory) {
      double x = X(s.time), y = Y((s.*series).gib());
      path += fmt::format(" L{:.2f},{:.2f} L{:.2f},{:.2f}", x, last_y, x, y);
      last_y = y;
    }
    return path + fmt::format(" L{:.2f},{:.2f}", X(t.end), last_y);
  };
  o += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"1.5\"/>\n", step_path(&MemorySample::total));
  // Reserved (torch.cuda.memory_reserved()): what the caching allocator holds; dashed.
  if (m.peak_reserved.count > 0) {
    o += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"#f28e2b\" stroke-width=\"1.5\" stroke-dasharray=\"6,3\"/>\n",
                     step_path(&MemorySample::reserved));
    o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#4e79a7\">allocated</text><text x=\"{}\" y=\"{}\" font-size=\"11\" "
                     "fill=\"#f28e2b\">reserved (caching allocator)</text>\n",
                     left + 8, top + 10, left + 80, top + 10);
  }
  if (m.capacity.count > 0 && m.capacity.gib() <= ymax)
    o += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e15759\" stroke-dasharray=\"5,4\"/><text x=\"{}\" y=\"{:.1f}\" "
                     "font-size=\"11\" fill=\"#e15759\" text-anchor=\"end\">capacity</text>\n",
                     left, W - right, Y(m.capacity.gib()), Y(m.capacity.gib()), W - right - 4, Y(m.capacity.gib()) - 4);
  double px = X(t.start + m.peak_time), py = Y(m.peak_memory.gib());
  o += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"5\" fill=\"#e15759\"/><text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"12\" fill=\"#e15759\" "
                   "text-anchor=\"{}\">peak {} at {} ms ({})</text>\n",
                   px, py, px + (px > W / 2 ? -8 : 8), py - 6, px > W / 2 ? "end" : "start", format_bytes(m.peak_memory), ms(m.peak_time),
                   html_escape(m.peak_phase));
  o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#555\">0 ms</text><text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#555\" "
                   "text-anchor=\"end\">{} ms</text>\n</svg>\n",
                   left, H - 8, W - right, H - 8, ms(span));
  return o;
}

namespace {

// The title, the run's one-line description and the effective strategy config.
void write_simulation_heading(std::ostream& out, const Experiment& e, const Explanation* x) {
  std::string title = fmt::format("stepsim {}: {}", x ? "explain" : "simulate", e.file);
  html_page_head(out, title);
  out << "<h1>" << html_escape(title) << "</h1>\n<div class=\"sub\">"
      << html_escape(fmt::format("{} | {} | {} x {} GPUs ({}) | micro-batch {} x seq {} | grad_accum {}", e.strategy->framework(), e.workload->name,
                                 e.cluster.nodes, e.cluster.gpus_per_node, e.cluster.profile->name, e.workload->micro_batch, e.workload->seq_len,
                                 e.training.grad_accum))
      << "<br>strategy: <code>" << html_escape(e.strategy->effective_config().dump()) << "</code>";
  if (e.workload->options) out << "<br>workload: <code>" << html_escape(effective_workload(*e.workload).dump()) << "</code>";
  out << "</div>\n";
  if (x) out << "<p class=\"bound\">Bound by: " << html_escape(x->bound) << "</p>\n";
}

// Phase, compute and communication times, each with its share of the step.
void write_metrics_table(std::ostream& out, const Metrics& m) {
  const auto& ov = m.overlap;
  out << "<h2>Metrics</h2>\n<table><tr><th class=\"l\">metric</th><th>ms</th><th>% of step</th></tr>\n";
  auto row = [&](const char* name, Time v) {
    out << fmt::format("<tr><td class=\"l\">{}</td><td>{}</td><td>{:.1f}</td></tr>\n", name, ms(v),
                       ov.step_time.ns ? 100.0 * static_cast<double>(v.ns) / static_cast<double>(ov.step_time.ns) : 0.0);
  };
  row("step time", ov.step_time);
  row("&nbsp;&nbsp;forward", m.forward);
  row("&nbsp;&nbsp;backward", m.backward);
  row("&nbsp;&nbsp;optimizer", m.optimizer);
  row("compute", ov.compute_time);
  row("communication", ov.comm_time);
  row("&nbsp;&nbsp;overlapped", ov.overlapped_comm);
  row("&nbsp;&nbsp;exposed", ov.exposed_comm);
  row("idle", ov.idle);
  out << fmt::format("<tr><td class=\"l\">overlap (of comm)</td><td colspan=\"2\">{:.1f} %</td></tr></table>\n", ov.overlap_pct);
}

// Tokens/s, samples/s and MFU at the step time (sim/analysis/throughput.hpp: llm-foundry's MFU
// convention; docs/metrics.md).
void write_throughput_table(std::ostream& out, const Experiment& e, Time step_time) {
  if (step_time.ns <= 0) return;
  const Throughput tp = throughput(e, step_time);
  out << "<table class=\"throughput\"><tr><th class=\"l\">throughput</th><th>value</th></tr>\n";
  auto trow = [&](const char* name, const std::string& v) { out << fmt::format("<tr><td class=\"l\">{}</td><td>{}</td></tr>\n", name, v); };
  trow("tokens per step (job)", fmt::format("{:.0f}", tp.tokens_per_step));
  trow("tokens/s (job)", fmt::format("{:.0f}", tp.tokens_per_s));
  trow("tokens/s per GPU", fmt::format("{:.0f}", tp.tokens_per_s_per_gpu));
  trow("samples/s (job)", fmt::format("{:.2f}", tp.samples_per_s));
  if (tp.mfu_pct > 0) {
    trow("MFU", fmt::format("{:.1f} %", tp.mfu_pct));
    trow("HFU (with recomputation)", fmt::format("{:.1f} %", tp.hfu_pct));
  }
  out << "</table>\n";
}

void write_timeline_section(std::ostream& out, const Timeline& t, const Explanation* x) {
  out << "<h2>Timeline</h2>\n<div class=\"legend\"><span><i style=\"background:#4e79a7\"></i>compute</span>"
         "<span><i style=\"background:#76b7b2\"></i>copy/elementwise</span><span><i style=\"background:#9c755f\"></i>optimizer</span>"
         "<span><i style=\"background:#59a14f\"></i>all-gather</span><span><i style=\"background:#f28e2b\"></i>reduce-scatter</span>"
         "<span><i style=\"background:#e15759\"></i>all-reduce</span><span><i style=\"background:#bab0ac\"></i>host issue</span>"
         "<span><i style=\"background:#d3d3d3\"></i>host blocked</span>"
      << (x ? "<span><i style=\"background:#fff;border:2px solid #000\"></i>critical path</span>" : "") << "</div>\n"
      << timeline_svg(t, x);
}

// The memory curve, the peak (allocated and reserved) and what it is made of.
void write_memory_section(std::ostream& out, const Timeline& t, const Metrics& m) {
  out << "<h2>Memory</h2>\n" << memory_svg(t, m);
  out << fmt::format("<p>peak {} at {} ms ({}){}; persistent at the end of the step {}</p>\n", format_bytes(m.peak_memory), ms(m.peak_time),
                     html_escape(m.peak_phase),
                     m.capacity.count ? fmt::format(" of {}: <b>{}</b>", format_bytes(m.capacity), memory_verdict(m)) : "",
                     format_bytes(m.persistent_memory));
  if (m.peak_reserved.count > 0)
    out << fmt::format("<p>peak reserved {} (caching allocator) + {} outside PyTorch (CUDA context, NCCL buffers) = {}: what "
                       "\"fits\" compares with the capacity</p>\n",
                       format_bytes(m.peak_reserved), format_bytes(m.non_pytorch), format_bytes(m.peak_reserved + m.non_pytorch));
  out << "<table><tr><th class=\"l\">category at the peak</th><th>GiB</th><th>%</th></tr>\n";
  for (const auto& [cat, b] : m.peak_breakdown)
    if (b.count > 0)
      out << fmt::format("<tr><td class=\"l\">{}</td><td>{:.3f}</td><td>{:.1f}</td></tr>\n", html_escape(cat), b.gib(),
                         m.peak_memory.count ? 100.0 * static_cast<double>(b.count) / static_cast<double>(m.peak_memory.count) : 0.0);
  out << "</table>\n";
}

// The text report's per-class and collectives tables (text_report.cpp).
void write_class_and_collective_tables(std::ostream& out, const SimulationResult& r) {
  const Metrics& m = r.metrics;
  const ClassBreakdown b = class_breakdown(r.timeline, m.overlap.comm_time, m.overlap.idle);
  const Time step = m.overlap.step_time;
  out << "<h2>Time by kernel class</h2>\n<table class=\"classes\"><tr><th class=\"l\">class</th><th>ms</th><th>% of step</th>"
         "<th>kernels</th></tr>\n";
  for (const auto& row : b.rows)
    out << fmt::format("<tr><td class=\"l\">{}</td><td>{}</td><td>{:.1f}</td><td>{}</td></tr>\n", html_escape(row.cls), ms(row.time),
                       step.ns ? 100.0 * static_cast<double>(row.time.ns) / static_cast<double>(step.ns) : 0.0, row.kernels);
  out << "</table>\n";
  const CollectiveSummary c = collective_summary(r.timeline);
  if (c.by_kind.empty()) return;
  out << "<h2>Collectives</h2>\n<table class=\"collectives\"><tr><th class=\"l\">collectives</th><th>count</th><th>bytes</th>"
         "<th>ms</th><th>exposed ms</th></tr>\n";
  for (const auto& a : c.by_kind)
    out << fmt::format("<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", html_escape(a.kind), a.count,
                       format_bytes(a.bytes), ms(a.time), ms(a.exposed));
  out << "</table>\n";
  if (c.most_exposed.empty()) return;
  out << "<table class=\"most-exposed\"><tr><th class=\"l\">most exposed</th><th>bytes</th><th>start ms</th><th>ms</th>"
         "<th>exposed ms</th></tr>\n";
  for (const auto& [op, exposed] : c.most_exposed)
    out << fmt::format("<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", html_escape(op->name),
                       format_bytes(op->bytes), ms(op->start), ms(op->duration()), ms(exposed));
  out << "</table>\n";
}

// explain's sections: the critical path, exposed communication per phase and per collective,
// and the re-simulated sensitivities.
void write_explanation_sections(std::ostream& out, const Explanation& x) {
  // What would move the step comes first: the knobs that speed it up, then the hardware what-ifs.
  if (!x.sensitivities.empty() || !x.knob_moves.empty()) {
    out << "<h2>What would move the step (re-simulated)</h2>\n<table><tr><th class=\"l\">what if</th><th>step ms</th><th>speedup</th></tr>\n";
    int shown = 0;
    for (const auto& m : x.knob_moves) {
      if (m.speedup < 1.0005 || shown++ == 5) break;  // prints as 1.001x or more
      out << fmt::format("<tr><td class=\"l\">{}</td><td>{}</td><td>{:.3f}x</td></tr>\n", html_escape(m.what), ms(m.step_time), m.speedup);
    }
    if (shown == 0) out << "<tr><td class=\"l\">no single knob makes the step faster (and fits)</td><td></td><td></td></tr>\n";
    for (const auto& s : x.sensitivities)
      out << fmt::format("<tr><td class=\"l\">{} (hardware)</td><td>{}</td><td>{:.3f}x</td></tr>\n", html_escape(s.what), ms(s.step_time), s.speedup);
    out << "</table>\n";
  }
  out << "<h2>Critical path</h2>\n<p>" << html_escape(summarize_path(x)) << "</p>\n<table><tr><th class=\"l\">category</th><th>ms</th></tr>\n";
  for (const auto& [k, v] : x.path_time) out << fmt::format("<tr><td class=\"l\">{}</td><td>{}</td></tr>\n", html_escape(k), ms(v));
  out << "</table>\n<h2>Exposed communication</h2>\n<table><tr><th class=\"l\">phase</th><th>exposed ms</th></tr>\n";
  for (const auto& [ph, v] : x.exposed_by_phase) out << fmt::format("<tr><td class=\"l\">{}</td><td>{}</td></tr>\n", ph, ms(v));
  out << "</table>\n<table><tr><th class=\"l\">collective</th><th class=\"l\">unit</th><th class=\"l\">comm</th><th class=\"l\">phase</th>"
         "<th>ms</th><th>exposed ms</th><th class=\"l\">critical</th></tr>\n";
  for (const auto& c : x.collectives)
    out << fmt::format("<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td>"
                       "<td class=\"l\">{}</td></tr>\n",
                       html_escape(c.name), html_escape(c.unit), html_escape(c.comm), to_string(c.phase), ms(c.duration), ms(c.exposed),
                       c.on_critical_path ? "yes" : "");
  out << "</table>\n";
}

}  // namespace

void write_simulation_html(std::ostream& out, const Experiment& e, const SimulationResult& r, const Explanation* x) {
  write_simulation_heading(out, e, x);
  write_metrics_table(out, r.metrics);
  write_throughput_table(out, e, r.metrics.overlap.step_time);
  write_timeline_section(out, r.timeline, x);
  write_memory_section(out, r.timeline, r.metrics);
  write_class_and_collective_tables(out, r);
  // The same note as the text report's: communicators priced outside the profile's measurements.
  const auto outside = collective_extrapolations(e.cluster.profile, r.program.comms);
  if (!outside.empty()) {
    out << "<p class=\"note extrapolated\">note: collective costs extrapolated beyond the profile's measurements "
           "(docs/scale.md):</p>\n<ul class=\"extrapolated\">\n";
    for (const auto& o : outside) out << "<li>" << html_escape(o) << "</li>\n";
    out << "</ul>\n";
  }
  if (x) write_explanation_sections(out, *x);
  out << "<p class=\"sub\">generated by stepsim; self-contained (no network).</p>\n</body></html>\n";
}

}  // namespace stepsim
