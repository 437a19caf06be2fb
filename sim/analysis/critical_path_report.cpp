// Text and JSON renderings of an Explanation.
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "sim/analysis/critical_path.hpp"
#include "sim/core/format.hpp"

namespace stepsim {

namespace {

std::string kind_name(CriticalStep::Kind k) {
  switch (k) {
    case CriticalStep::Kind::Kernel: return "kernel";
    case CriticalStep::Kind::Collective: return "collective";
    case CriticalStep::Kind::Host: return "host";
    case CriticalStep::Kind::Blocked: return "host sync";
  }
  return "?";
}

// "bwd block.3" -> "bwd": the first word groups consecutive kernels of one pass.
std::string group_of(const CriticalStep& s) {
  if (s.kind == CriticalStep::Kind::Collective) return s.name;
  auto sp = s.name.find(' ');
  return s.name.substr(0, sp);
}

}  // namespace

namespace {

// One segment of the path before grouping.
struct Segment {
  std::size_t first = 0, last = 0;  // path indices
  std::string label;                // "AG block.3 fwd on unshard", "fwd+bwd x56 on default"
  std::string repeated_label;       // in a group: without the step count ("fwd+bwd on default")
  std::string key;                  // equal keys may repeat: the text around the unit number
  bool numbered = false;
  long number = 0;
  std::vector<std::string> parts;   // numbered: the name is parts joined by the number
  std::string where;
  Time time;
};

Time step_time(const CriticalStep& s) { return s.kind == CriticalStep::Kind::Blocked ? Time{} : s.end - s.start; }

// A collective on the path (step `i`), its own segment; numbered when its name carries a unit
// index ("AG prefetch block.3.attn..block.3.mlp" -> key "collective AG prefetch block.#.attn..block.#.mlp on ...").
Segment collective_segment(const CriticalStep& s, std::size_t i) {
  Segment g;
  g.first = i;
  g.where = s.where;
  g.last = i;
  g.time = step_time(s);
  g.label = fmt::format("{} on {}", s.name, s.where);
  g.repeated_label = g.label;
  g.key = "collective " + g.label;
  const auto runs = unit_number_runs(s.name);
  if (runs.empty()) return g;
  g.numbered = true;
  g.number = std::stol(s.name.substr(runs[0].first, runs[0].second - runs[0].first));
  std::size_t at = 0;
  for (const auto& [b, e] : runs) {
    g.parts.push_back(s.name.substr(at, b - at));
    at = e;
  }
  g.parts.push_back(s.name.substr(at));
  g.key = fmt::format("collective {} on {}", fold_unit_number(s.name), s.where);
  return g;
}

// Consecutive non-collective steps in one place from step `i` collapse into one segment,
// labelled by the passes they belong to ("fwd+bwd+grad->bucket"); zero-length steps are not
// counted.
Segment pass_segment(const Explanation& x, std::size_t i) {
  const auto& s = x.path[i];
  Segment g;
  g.first = i;
  g.where = s.where;
  std::size_t j = i, n = 0;
  std::vector<std::string> groups;
  while (j < x.path.size() && x.path[j].kind == s.kind && x.path[j].where == s.where) {
    g.time += x.path[j].end - x.path[j].start;
    if (x.path[j].end > x.path[j].start) ++n;
    std::string name = s.kind == CriticalStep::Kind::Blocked ? x.path[j].name : group_of(x.path[j]);
    if (std::find(groups.begin(), groups.end(), name) == groups.end()) groups.push_back(name);
    ++j;
  }
  if (s.kind == CriticalStep::Kind::Blocked) g.time = Time{};
  std::string passes;
  for (const auto& p : groups) passes += (passes.empty() ? "" : "+") + p;
  g.last = j - 1;
  g.label = fmt::format("{} x{} on {}", passes, n, s.where);
  g.repeated_label = fmt::format("{} on {}", passes, s.where);
  g.key = fmt::format("{} {} on {}", kind_name(s.kind), passes, s.where);
  return g;
}

std::vector<Segment> segments(const Explanation& x) {
  std::vector<Segment> out;
  std::size_t i = 0;
  while (i < x.path.size()) {
    out.push_back(x.path[i].kind == CriticalStep::Kind::Collective ? collective_segment(x.path[i], i) : pass_segment(x, i));
    i = out.back().last + 1;
  }
  return out;
}

// How many times the `period` segments from `i` repeat in a row (numbered units moving by the
// same +1 or -1 per repetition at each position), at least 1.
int repeats_at(const std::vector<Segment>& seg, std::size_t i, int period) {
  const std::size_t p = static_cast<std::size_t>(period);
  if (i + p > seg.size()) return 0;
  std::vector<long> step(p, 0);
  int r = 1;
  for (;; ++r) {
    std::size_t base = i + static_cast<std::size_t>(r) * p;
    if (base + p > seg.size()) break;
    bool same = true;
    for (std::size_t j = 0; j < p && same; ++j) {
      const auto& a = seg[i + j];
      const auto& b = seg[base + j];
      if (a.key != b.key || a.numbered != b.numbered) same = false;
      else if (a.numbered) {
        long d = b.number - a.number;
        if (r == 1 && (d == 1 || d == -1)) step[j] = d;
        if (d != step[j] * r || step[j] == 0) same = false;
      }
    }
    if (!same) break;
  }
  return r;
}

std::string range_label(const std::vector<Segment>& seg, std::size_t first, int period, int repeats, std::size_t j) {
  const auto& a = seg[first + j];
  if (repeats == 1) return a.label;
  if (!a.numbered) return a.repeated_label;
  const auto& b = seg[first + static_cast<std::size_t>((repeats - 1) * period) + j];
  std::string name;
  for (std::size_t k = 0; k < a.parts.size(); ++k) name += (k ? fmt::format("{}-{}", a.number, b.number) : "") + a.parts[k];
  return fmt::format("{} on {}", name, a.where);
}

}  // namespace

std::vector<PathGroup> group_path(const Explanation& x) {
  std::vector<Segment> seg = segments(x);
  std::vector<PathGroup> out;
  std::size_t i = 0;
  while (i < seg.size()) {
    int best_period = 1, best_repeats = 1;
    for (int period : {1, 2, 3, 4}) {
      int r = repeats_at(seg, i, period);
      // A pattern counts from 3 repetitions; among patterns, the one covering the most
      // segments (the shorter period on a tie).
      if (r >= 3 && r * period > best_repeats * best_period) {
        best_period = period;
        best_repeats = r;
      }
    }
    const std::size_t n = static_cast<std::size_t>(best_period * best_repeats);
    PathGroup g;
    g.repeats = best_repeats;
    g.period = best_period;
    g.first = seg[i].first;
    g.last = seg[i + n - 1].last;
    g.start = x.path[g.first].start;
    g.end = x.path[g.last].end;
    for (int r = 0; r < best_repeats; ++r) {
      Time each{};
      for (int j = 0; j < best_period; ++j) each += seg[i + static_cast<std::size_t>(r * best_period + j)].time;
      g.time += each;
      if (r == 0 || each < g.each_min) g.each_min = each;
      if (r == 0 || each > g.each_max) g.each_max = each;
    }
    if (best_period == 1) {
      g.label = range_label(seg, i, 1, best_repeats, 0);
    } else {
      for (std::size_t j = 0; j < static_cast<std::size_t>(best_period); ++j)
        g.label += (j ? ", " : "(") + range_label(seg, i, best_period, best_repeats, j);
      g.label += ")";
    }
    out.push_back(std::move(g));
    i += n;
  }
  return out;
}

// "label: 32 x 16.378 ms", "label: 12 x 884.2 us to 917.9 us", "(A, B): 30 x 32.757 ms per repetition".
static std::string repeat_label(const PathGroup& g) {
  if (g.repeats == 1) return g.label;
  std::string each = g.each_min == g.each_max ? format_time(g.each_min) : format_time(g.each_min) + " to " + format_time(g.each_max);
  return fmt::format("{}: {} x {}{}", g.label, g.repeats, each, g.period > 1 ? " per repetition" : "");
}

std::string describe_group(const PathGroup& g) {
  if (g.repeats == 1) return fmt::format("{} ({})", g.label, format_time(g.time));
  return fmt::format("{} ({})", repeat_label(g), format_time(g.time));
}

std::string summarize_path(const Explanation& x) {
  std::string out;
  for (const auto& g : group_path(x)) out += (out.empty() ? "" : " -> ") + describe_group(g);
  return out;
}

nlohmann::json explanation_to_json(const Explanation& x) {
  nlohmann::json j{{"step_time_ns", x.step_time.ns},
                   {"graph", {{"vertices", x.vertices}, {"edges", x.edges}, {"longest_chain_ns", x.longest_chain.ns}}},
                   {"bound", x.bound},
                   {"critical_path_summary", summarize_path(x)}};
  j["critical_path"] = nlohmann::json::array();
  for (const auto& s : x.path)
    j["critical_path"].push_back({{"kind", kind_name(s.kind)},
                                  {"name", s.name},
                                  {"unit", s.unit},
                                  {"where", s.where},
                                  {"start_ns", s.start.ns},
                                  {"end_ns", s.end.ns},
                                  {"waited_via", s.first ? "start" : to_string(s.via)}});
  // The path in groups (group_path): first_step/last_step index critical_path.
  j["critical_path_groups"] = nlohmann::json::array();
  for (const auto& g : group_path(x))
    j["critical_path_groups"].push_back({{"label", g.label},
                                         {"first_step", g.first},
                                         {"last_step", g.last},
                                         {"repeats", g.repeats},
                                         {"period", g.period},
                                         {"start_ns", g.start.ns},
                                         {"end_ns", g.end.ns},
                                         {"time_ns", g.time.ns},
                                         {"each_min_ns", g.each_min.ns},
                                         {"each_max_ns", g.each_max.ns}});
  j["critical_path_time"] = nlohmann::json::object();
  for (const auto& [k, v] : x.path_time) j["critical_path_time"][k + "_ns"] = v.ns;
  j["host_syncs_on_path"] = x.host_syncs_on_path;
  j["exposed_by_phase"] = nlohmann::json::object();
  for (const auto& [k, v] : x.exposed_by_phase) j["exposed_by_phase"][k + "_ns"] = v.ns;
  j["collectives"] = nlohmann::json::array();
  for (const auto& c : x.collectives)
    j["collectives"].push_back({{"name", c.name},
                                {"unit", c.unit},
                                {"comm", c.comm},
                                {"kind", short_name(c.kind)},
                                {"phase", to_string(c.phase)},
                                {"duration_ns", c.duration.ns},
                                {"exposed_ns", c.exposed.ns},
                                {"on_critical_path", c.on_critical_path}});
  j["knob_moves"] = nlohmann::json::array();
  for (const auto& m : x.knob_moves)
    j["knob_moves"].push_back({{"what", m.what}, {"step_time_ns", m.step_time.ns}, {"speedup", m.speedup}});
  j["sensitivities"] = nlohmann::json::array();
  for (const auto& s : x.sensitivities)
    j["sensitivities"].push_back({{"what", s.what}, {"step_time_ns", s.step_time.ns}, {"speedup", s.speedup}});
  return j;
}

namespace {

// What would move the step, first: the framework knobs that speed it up (each alone, fitting
// the device; the five best), then the hardware what-ifs.
void write_what_would_move(std::ostream& out, const Explanation& x) {
  if (x.sensitivities.empty() && x.knob_moves.empty()) return;
  out << "what would move the step (re-simulated):\n";
  int shown = 0;
  for (const auto& m : x.knob_moves) {
    if (m.speedup < 1.0005 || shown == 5) break;  // prints as x1.001 or more
    if (shown++ == 0) out << "  one knob at a time (fits the device; fastest first):\n";
    out << fmt::format("    {:<60}{:>14}   x{:.3f}\n", m.what, format_time(m.step_time), m.speedup);
  }
  if (shown == 0) out << "  no single knob of the framework or workload makes the step faster (and fits)\n";
  out << "  hardware what-ifs:\n";
  for (const auto& s : x.sensitivities) out << fmt::format("    {:<60}{:>14}   x{:.3f}\n", s.what, format_time(s.step_time), s.speedup);
  out << "\n";
}

}  // namespace

void write_explanation_text(std::ostream& out, const Explanation& x, bool verbose) {
  out << fmt::format("step time {}   (dependency graph: {} vertices, {} edges; longest duration chain {})\n",
                     format_time(x.step_time), x.vertices, x.edges, format_time(x.longest_chain));
  out << fmt::format("bound by: {}\n\n", x.bound);
  write_what_would_move(out, x);
  out << fmt::format("critical path, {} steps in time order (repeats over units grouped; --verbose lists every step):\n", x.path.size());
  out << fmt::format("    {:>12}  {:>12}  {}\n", "start", "time", "steps");
  for (const auto& g : group_path(x)) {
    out << fmt::format("    {:>12}  {:>12}  {}\n", format_time(g.start), format_time(g.time), repeat_label(g));
  }
  out << "  time on the path by category:\n";
  for (const auto& [k, v] : x.path_time) out << fmt::format("    {:<40}{:>14}\n", k, format_time(v));
  if (verbose) {
    out << "\n  step-by-step:\n";
    for (const auto& s : x.path)
      out << fmt::format("    {:>12} - {:>12}  {:<10} {:<28} {:<10} {}\n", format_time(s.start), format_time(s.end), kind_name(s.kind),
                         s.name, s.where, s.first ? "(chain start)" : "after " + to_string(s.via));
  }
  out << "\nexposed communication by phase:\n";
  for (const char* ph : {"forward", "backward", "optimizer", "setup"}) {
    auto it = x.exposed_by_phase.find(ph);
    if (it != x.exposed_by_phase.end() && (it->second.ns > 0 || std::string(ph) != "setup"))
      out << fmt::format("    {:<12}{:>14}\n", ph, format_time(it->second));
  }
  out << "\nexposed time per collective (exposed > 0, issue order):\n";
  int shown = 0;
  for (const auto& c : x.collectives) {
    if (c.exposed.ns == 0) continue;
    out << fmt::format("    {:<30} {:<10} {:<10} {:>12} of {:>12}{}\n", c.name, c.comm, to_string(c.phase), format_time(c.exposed),
                       format_time(c.duration), c.on_critical_path ? "  [critical path]" : "");
    if (++shown == 40) {
      out << "    ...\n";
      break;
    }
  }
  if (shown == 0) out << "    (none: all communication is hidden behind compute)\n";
}

}  // namespace stepsim
