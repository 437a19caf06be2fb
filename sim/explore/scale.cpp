#include "sim/explore/scale.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sim/analysis/run.hpp"
#include "sim/config/experiment_keys.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/format.hpp"
#include "sim/explore/sweep.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

std::vector<int> parse_scale_counts(const std::string& flag, const std::string& text, int gpus_per_node) {
  const bool gpus = flag == "gpus";
  auto fail = [&](const std::string& what) { throw InputError(fmt::format("--{} {}: {}", flag, text, what)); };
  const std::string unit = gpus ? "GPU count" : "node count";
  if (text.empty()) fail(fmt::format("expected a comma-separated list of {}s, e.g. {}", unit, gpus ? "8,16,32" : "1,2,4"));
  std::vector<int> nodes;
  std::size_t from = 0;
  while (from <= text.size()) {
    const std::size_t comma = std::min(text.find(',', from), text.size());
    const std::string item = text.substr(from, comma - from);
    from = comma + 1;
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 1)
      fail(fmt::format("'{}': expected a positive integer {}", item, unit));
    if (gpus && v % gpus_per_node != 0)
      fail(fmt::format("{}: expected a multiple of cluster.gpus_per_node ({})", v, gpus_per_node));
    const std::int64_t n = gpus ? v / gpus_per_node : v;
    if (n > limits::kMaxNodes || n * gpus_per_node > limits::kMaxWorldSize)
      fail(fmt::format("{}: expected at most {} nodes and {} GPUs (docs/limits.md)", v, limits::kMaxNodes, limits::kMaxWorldSize));
    if (!nodes.empty() && n == nodes.back()) fail(fmt::format("{}: given twice: expected each count once", v));
    if (!nodes.empty() && n < nodes.back()) fail(fmt::format("{}: after {}: expected increasing counts", v, gpus ? nodes.back() * gpus_per_node : nodes.back()));
    nodes.push_back(static_cast<int>(n));
  }
  if (nodes.size() > kMaxScalePoints)
    fail(fmt::format("{} points: expected at most {} (docs/limits.md)", nodes.size(), kMaxScalePoints));
  return nodes;
}

double ScaleResult::efficiency_pct(std::size_t i) const {
  const double first = points.empty() ? 0 : points.front().throughput.tokens_per_s_per_gpu;
  return first > 0 ? 100.0 * points.at(i).throughput.tokens_per_s_per_gpu / first : 0;
}

std::vector<std::string> ScaleResult::collective_labels() const {
  std::set<std::string> s;
  for (const auto& p : points) {
    for (const auto& [label, t] : p.parts.exposed) s.insert(label);
    for (const auto& [label, a] : p.algorithms) s.insert(label);
  }
  return {s.begin(), s.end()};
}

namespace {

// The algorithm of each collective of `t`: NCCL's choice with a topology model, else the
// scope model's name; per "<kind> on <comm>", the choices by bytes, most first.
std::map<std::string, std::string> algorithms(const HardwareProfile& hw, const Timeline& t) {
  std::map<std::tuple<std::size_t, CollectiveKind, std::int64_t>, std::string> chosen;  // (comm, kind, bytes)
  std::map<std::string, std::map<std::string, double>> bytes;  // label -> choice -> bytes
  for (const auto& op : t.ops) {
    if (op.kind != TimelineOp::Kind::Collective || !op.comm) continue;
    const CommDecl& c = t.comms.at(op.comm->index());
    auto [it, fresh] = chosen.try_emplace({op.comm->index(), op.collective, op.bytes.count});
    if (fresh) {
      if (c.ranks <= 1) it->second = "local";
      else if (hw.topology) {
        const NcclChoice n = nccl_choice(*hw.topology, op.collective, op.bytes, c.ranks, c.nodes);
        it->second = to_string(n.candidate.algo) + "/" + to_string(n.candidate.proto);
      } else it->second = model_name(c.nodes <= 1 ? hw.intra_node : hw.inter_node);
    }
    bytes[collective_label(t, op)][it->second] += static_cast<double>(std::max<std::int64_t>(op.bytes.count, 1));
  }
  std::map<std::string, std::string> out;
  for (const auto& [label, by_choice] : bytes) {
    std::vector<std::pair<std::string, double>> v(by_choice.begin(), by_choice.end());
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    double total = 0;
    for (const auto& [c, b] : v) total += b;
    std::string s;
    for (const auto& [c, b] : v)
      s += v.size() == 1 ? c : fmt::format("{}{} {:.0f}%", s.empty() ? "" : ", ", c, 100 * b / total);
    out[label] = s;
  }
  return out;
}

bool sets_nodes(const std::string& assignment) {
  const std::string path = assignment.substr(0, assignment.find('='));
  return path == "cluster.nodes";
}

}  // namespace

namespace {

Experiment load_scale_experiment(const ScaleRequest& q, const std::vector<std::string>& overrides) {
  if (q.doc_text.empty()) return load_experiment(q.file, overrides);
  return load_experiment_from_json(parse_json_text(q.doc_text, q.file.string()), q.file.string(), overrides);
}

}  // namespace

ScaleResult run_scale(const ScaleRequest& q) {
  for (const auto& o : q.overrides)
    if (sets_nodes(o))
      throw InputError(fmt::format("--set {}: scale sets cluster.nodes at each point: expected --nodes or --gpus instead", o));
  const Experiment base = load_scale_experiment(q, q.overrides);
  const std::vector<int> nodes =
      parse_scale_counts(q.flag, q.counts.empty() ? std::string(kDefaultScaleNodes) : q.counts, base.cluster.gpus_per_node);
  ScaleResult r;
  r.file = q.file.string();
  r.framework = base.strategy->framework();
  r.model = base.workload->name;
  r.parameters = static_cast<double>(base.workload->numel());
  r.profile = base.cluster.profile->name;
  r.gpus_per_node = base.cluster.gpus_per_node;
  r.micro_batch = base.workload->micro_batch;
  r.seq_len = base.workload->seq_len;
  r.grad_accum = base.training.grad_accum;
  for (int n : nodes) {
    std::vector<std::string> sets = q.overrides;
    sets.push_back("cluster.nodes=" + std::to_string(n));
    std::optional<Experiment> e;
    try {
      e.emplace(load_scale_experiment(q, sets));
    } catch (const InputError& x) {
      throw InputError(fmt::format("scale: at {} GPUs (cluster.nodes={}): {}", n * r.gpus_per_node, n, x.what()));
    }
    // Its parts and algorithms read the ops only (no host intervals, no start causes).
    const SimulationResult s = run_experiment(*e, TimelineDetail::Metrics);
    ScalePoint p;
    p.nodes = n;
    p.gpus = e->cluster.world_size();
    p.metrics = s.metrics;
    p.throughput = throughput(*e, s.metrics.overlap.step_time);
    p.parts = step_parts(s.timeline);
    p.algorithms = algorithms(e->cluster.profile, s.timeline);
    p.extrapolations = collective_extrapolations(e->cluster.profile, s.program.comms);
    r.points.push_back(std::move(p));
  }
  if (!gpu_class(r.profile).empty()) r.validation = scale_fidelity();
  return r;
}

namespace {

// ScaleResult::validation as JSON, with where it comes from: null without one.
nlohmann::json validation_json(const std::optional<ScaleFidelity>& v) {
  if (!v) return nullptr;
  nlohmann::json j = scale_fidelity_json(*v);
  j["source"] = "validation/baseline.json";
  return j;
}

}  // namespace

nlohmann::json scale_to_json(const ScaleResult& r) {
  nlohmann::json points = nlohmann::json::array();
  const Time first = r.points.empty() ? Time::zero() : r.points.front().metrics.overlap.step_time;
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const ScalePoint& p = r.points[i];
    nlohmann::json exposed = nlohmann::json::object();
    for (const auto& [label, t] : p.parts.exposed) exposed[label] = t.ns;
    points.push_back({{"gpus", p.gpus},
                      {"nodes", p.nodes},
                      {"step_time_ns", p.metrics.overlap.step_time.ns},
                      {"step_change_ns", (p.metrics.overlap.step_time - first).ns},
                      {"tokens_per_step", p.throughput.tokens_per_step},
                      {"tokens_per_s_per_gpu", p.throughput.tokens_per_s_per_gpu},
                      {"efficiency_pct", r.efficiency_pct(i)},
                      {"parts", {{"compute_ns", p.parts.compute.ns},
                                 {"optimizer_ns", p.parts.optimizer.ns},
                                 {"idle_ns", p.parts.idle.ns},
                                 {"rank_wait_exposed_ns", p.parts.rank_wait.ns},
                                 {"exposed_ns", exposed}}},
                      {"rank_wait_ns", p.metrics.rank_wait.ns},
                      {"exposed_comm_ns", p.metrics.overlap.exposed_comm.ns},
                      {"algorithms", p.algorithms},
                      {"collective_extrapolations", p.extrapolations}});
  }
  return {{"schema", kScaleSchema}, {"file", r.file},         {"framework", r.framework},
          {"model", r.model},        {"hardware_profile", r.profile}, {"gpus_per_node", r.gpus_per_node},
          {"micro_batch", r.micro_batch}, {"seq_len", r.seq_len}, {"grad_accum", r.grad_accum},
          {"points", points}, {"validation", validation_json(r.validation)}};
}

namespace {

std::string ms(Time t) { return fmt::format("{:.6f}", t.ms()); }

}  // namespace

std::string scale_csv(const ScaleResult& r) {
  const auto labels = r.collective_labels();
  std::string out = "gpus,nodes,step_time_ms,step_change_ms,tokens_per_s_per_gpu,efficiency_pct,compute_ms,optimizer_ms,idle_ms,"
                    "rank_wait_exposed_ms";
  for (const auto& l : labels) out += "," + csv_field("exposed_ms:" + l);
  out += ",rank_wait_ms";
  for (const auto& l : labels) out += "," + csv_field("algorithm:" + l);
  out += ",extrapolation\n";
  const Time first = r.points.empty() ? Time::zero() : r.points.front().metrics.overlap.step_time;
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const ScalePoint& p = r.points[i];
    const StepParts& s = p.parts;
    out += fmt::format("{},{},{},{},{:.1f},{:.3f},{},{},{},{}", p.gpus, p.nodes, ms(p.metrics.overlap.step_time),
                       ms(p.metrics.overlap.step_time - first), p.throughput.tokens_per_s_per_gpu, r.efficiency_pct(i), ms(s.compute),
                       ms(s.optimizer), ms(s.idle), ms(s.rank_wait));
    for (const auto& l : labels) {
      auto it = s.exposed.find(l);
      out += ',';
      out += ms(it == s.exposed.end() ? Time::zero() : it->second);
    }
    out += ',';
    out += ms(p.metrics.rank_wait);
    for (const auto& l : labels) {
      auto it = p.algorithms.find(l);
      out += ',';
      out += csv_field(it == p.algorithms.end() ? "" : it->second);
    }
    std::string notes;
    for (const auto& x : p.extrapolations) notes += (notes.empty() ? "" : "; ") + x;
    out += "," + csv_field(notes) + "\n";
  }
  return out;
}

namespace {

// One column of the parts table: its title and value per point.
struct PartColumn {
  std::string title;
  std::function<Time(const ScalePoint&)> value;
};

std::vector<PartColumn> part_columns(const ScaleResult& r) {
  std::vector<PartColumn> cols = {{"compute", [](const ScalePoint& p) { return p.parts.compute; }},
                                  {"optimizer", [](const ScalePoint& p) { return p.parts.optimizer; }},
                                  {"idle", [](const ScalePoint& p) { return p.parts.idle; }}};
  auto any = [&](const std::function<Time(const ScalePoint&)>& f) {
    return std::any_of(r.points.begin(), r.points.end(), [&](const ScalePoint& p) { return f(p).ns != 0; });
  };
  PartColumn wait{"slowest-rank wait", [](const ScalePoint& p) { return p.parts.rank_wait; }};
  if (any(wait.value)) cols.push_back(wait);
  for (const auto& l : r.collective_labels()) {
    PartColumn c{l, [l](const ScalePoint& p) {
                   auto it = p.parts.exposed.find(l);
                   return it == p.parts.exposed.end() ? Time::zero() : it->second;
                 }};
    if (any(c.value)) cols.push_back(std::move(c));
  }
  return cols;
}

// "16-64 GPUs" / "8 GPUs": the run of points [a, b].
std::string point_range(const ScaleResult& r, std::size_t a, std::size_t b) {
  return a == b ? fmt::format("{} GPUs", r.points[a].gpus) : fmt::format("{}-{} GPUs", r.points[a].gpus, r.points[b].gpus);
}

void write_algorithms(std::ostream& out, const ScaleResult& r) {
  out << "\n  collective algorithms (NCCL's choice per collective, by bytes):\n";
  for (const auto& l : r.collective_labels()) {
    std::string runs;
    std::size_t start = 0, count = 0;
    auto algo = [&](std::size_t i) {
      auto it = r.points[i].algorithms.find(l);
      return it == r.points[i].algorithms.end() ? std::string("none") : it->second;
    };
    for (std::size_t i = 1; i <= r.points.size(); ++i) {
      if (i < r.points.size() && algo(i) == algo(start)) continue;
      runs += fmt::format("{}{}: {}", runs.empty() ? "" : "; ", point_range(r, start, i - 1), algo(start));
      start = i;
      ++count;
    }
    if (count == 1) runs = algo(0) + " at every point";
    out << fmt::format("    {:<24} {}\n", l, runs);
  }
}

}  // namespace

void write_scale_text(std::ostream& out, const ScaleResult& r) {
  out << fmt::format("stepsim scale: {}\n", r.file);
  out << fmt::format("  {} | {} ({:.2f} B params) | {} GPUs per node ({}) | per GPU: micro-batch {} x seq {} x grad_accum {}\n", r.framework,
                     r.model, r.parameters / 1e9, r.gpus_per_node, r.profile, r.micro_batch, r.seq_len, r.grad_accum);
  out << "  weak scaling: the per-GPU batch is fixed, so the tokens per step grow with the GPUs;\n"
         "  efficiency = tokens/s per GPU / the first point's\n\n";
  if (r.points.empty()) return;
  const Time first = r.points.front().metrics.overlap.step_time;
  out << fmt::format("  {:>7} {:>6} {:>13} {:>13} {:>11} {:>14}\n", "GPUs", "nodes", "step", "tokens/s/GPU", "efficiency", "change");
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const ScalePoint& p = r.points[i];
    out << fmt::format("  {:>7} {:>6} {:>13} {:>13.0f} {:>10.1f}%", p.gpus, p.nodes, format_time(p.metrics.overlap.step_time),
                       p.throughput.tokens_per_s_per_gpu, r.efficiency_pct(i));
    if (i > 0) out << fmt::format(" {:>14}", fmt::format("{:+.3f} ms", (p.metrics.overlap.step_time - first).ms()));
    out << "\n";
  }
  const auto cols = part_columns(r);
  out << fmt::format("\n  where the step goes, ms: the parts at {} GPUs, then each point's change from them (they sum to the step's):\n",
                     r.points.front().gpus);
  out << fmt::format("  {:>7}", "GPUs");
  for (const auto& c : cols) out << fmt::format(" {:>{}}", c.title, std::max<std::size_t>(10, c.title.size()));
  out << "\n";
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    out << fmt::format("  {:>7}", r.points[i].gpus);
    for (const auto& c : cols) {
      const double v = i == 0 ? c.value(r.points[0]).ms() : (c.value(r.points[i]) - c.value(r.points[0])).ms();
      out << fmt::format(" {:>{}}", i == 0 ? fmt::format("{:.3f}", v) : fmt::format("{:+.3f}", v), std::max<std::size_t>(10, c.title.size()));
    }
    out << "\n";
  }
  out << "  (exposed communication by collective; slowest-rank wait: exposed time waiting for the last rank; idle: host and launch gaps)\n";
  write_algorithms(out, r);
  bool noted = false;
  for (const auto& p : r.points) {
    if (p.extrapolations.empty()) continue;
    if (!noted) out << "\n  note: collective costs extrapolated beyond the profile's measurements (docs/scale.md):\n";
    noted = true;
    for (const auto& x : p.extrapolations) out << fmt::format("    {} GPUs: {}\n", p.gpus, x);
  }
  if (r.validation) out << "\n  " << scale_fidelity_text(*r.validation, "\n  ") << "\n";
}

std::string scale_fidelity_text(const ScaleFidelity& v, const std::string& line_break) {
  return fmt::format(
      "validation (docs/scale.md): the suite's {} GPU-count pairs ({}-{} GPUs, the same per-GPU batch) grew by a{}"
      "median {:+.2f} % per doubling of the GPUs in the real runs and {:+.2f} % in their predictions; expect a real{}"
      "curve's efficiency to {} about {:.1f} points per doubling {} this one (median gap {:+.2f} points).",
      v.pairs, v.min_gpus, v.max_gpus, line_break, v.measured_pct, v.predicted_pct, line_break,
      v.gap_points >= 0 ? "fall" : "stay", std::fabs(v.gap_points), v.gap_points >= 0 ? "below" : "above", v.gap_points);
}

}  // namespace stepsim
