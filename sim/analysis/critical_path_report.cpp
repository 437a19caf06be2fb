// Text and JSON renderings of an Explanation.
#include <algorithm>

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

std::string summarize_path(const Explanation& x) {
  std::string out;
  std::size_t i = 0;
  while (i < x.path.size()) {
    const auto& s = x.path[i];
    if (s.kind == CriticalStep::Kind::Collective) {
      out += fmt::format("{}{} on {} ({})", out.empty() ? "" : " -> ", s.name, s.where, format_time(s.end - s.start));
      ++i;
      continue;
    }
    // Consecutive non-collective steps in one place collapse into one segment, labelled by
    // the passes they belong to ("fwd+bwd+grad->bucket"); zero-length steps are not counted.
    std::size_t j = i;
    Time d{};
    std::size_t n = 0;
    std::vector<std::string> groups;
    while (j < x.path.size() && x.path[j].kind == s.kind && x.path[j].where == s.where) {
      d += x.path[j].end - x.path[j].start;
      if (x.path[j].end > x.path[j].start) ++n;
      std::string g = s.kind == CriticalStep::Kind::Blocked ? x.path[j].name : group_of(x.path[j]);
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
      ++j;
    }
    std::string label;
    for (const auto& g : groups) label += (label.empty() ? "" : "+") + g;
    out += fmt::format("{}{} x{} on {} ({})", out.empty() ? "" : " -> ", label, n, s.where, format_time(d));
    i = j;
  }
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
  j["sensitivities"] = nlohmann::json::array();
  for (const auto& s : x.sensitivities)
    j["sensitivities"].push_back({{"what", s.what}, {"step_time_ns", s.step_time.ns}, {"speedup", s.speedup}});
  return j;
}

void write_explanation_text(std::ostream& out, const Explanation& x) {
  out << fmt::format("step time {}   (dependency graph: {} vertices, {} edges; longest duration chain {})\n",
                     format_time(x.step_time), x.vertices, x.edges, format_time(x.longest_chain));
  out << fmt::format("bound by: {}\n\n", x.bound);
  out << "critical path (binding dependency of each step):\n  " << summarize_path(x) << "\n";
  for (const auto& [k, v] : x.path_time) out << fmt::format("    {:<40}{:>14}\n", k, format_time(v));
  out << "\n  step-by-step:\n";
  for (const auto& s : x.path)
    out << fmt::format("    {:>12} - {:>12}  {:<10} {:<28} {:<10} {}\n", format_time(s.start), format_time(s.end), kind_name(s.kind),
                       s.name, s.where, s.first ? "(chain start)" : "after " + to_string(s.via));
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
  if (!x.sensitivities.empty()) {
    out << "\nsensitivities (re-simulated):\n";
    for (const auto& s : x.sensitivities)
      out << fmt::format("    {:<22}{:>14}   x{:.3f}\n", s.what, format_time(s.step_time), s.speedup);
  }
}

}  // namespace stepsim
