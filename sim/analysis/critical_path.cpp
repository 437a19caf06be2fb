#include "sim/analysis/critical_path.hpp"

#include <algorithm>
#include <set>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <fmt/format.h>

#include "sim/exec/engine.hpp"
#include "sim/report/text_report.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

std::string to_string(DepKind k) {
  switch (k) {
    case DepKind::HostOrder: return "host order";
    case DepKind::Issue: return "issued by host";
    case DepKind::Stream: return "stream order";
    case DepKind::Event: return "event wait";
    case DepKind::CommFifo: return "communicator FIFO";
    case DepKind::HostSync: return "host sync";
  }
  return "?";
}

namespace {

struct VProp {
  Time start, end;
  bool host = false;
  bool blocked = false;
};
struct EProp {
  DepKind kind = DepKind::Stream;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, VProp, EProp>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;

// Preference among several predecessors that all end exactly at a vertex's start: a
// cross-stream wait explains more than "it was next in line".
int rank(DepKind k) {
  switch (k) {
    case DepKind::HostSync: return 0;
    case DepKind::Event: return 1;
    case DepKind::CommFifo: return 2;
    case DepKind::Stream: return 3;
    case DepKind::Issue: return 4;
    case DepKind::HostOrder: return 5;
  }
  return 6;
}

}  // namespace

Explanation explain_timeline(const Program& p, const Timeline& t) {
  Explanation x;
  x.step_time = t.end - t.start;
  const std::size_t nops = t.ops.size(), nhost = t.host.size();
  Graph g(nops + nhost);
  for (std::size_t i = 0; i < nops; ++i) g[i] = VProp{t.ops[i].start, t.ops[i].end, false, false};
  for (std::size_t h = 0; h < nhost; ++h)
    g[nops + h] = VProp{t.host[h].start, t.host[h].end, true, t.host[h].kind == HostInterval::Kind::Blocked};
  auto add = [&](std::size_t from, std::size_t to, DepKind k) {
    if (from != to) boost::add_edge(from, to, EProp{k}, g);
  };

  // Host program order.
  for (std::size_t h = 1; h < nhost; ++h) add(nops + h - 1, nops + h, DepKind::HostOrder);

  // Walk the program in order, tracking the last op per stream, the op each event's latest
  // Record follows, and the Waits pending on each stream until its next op.
  std::vector<long> op_of_instruction(p.instructions.size(), -1);
  for (std::size_t i = 0; i < nops; ++i)
    if (t.ops[i].kind != TimelineOp::Kind::Marker) op_of_instruction[t.ops[i].instruction] = static_cast<long>(i);
  std::vector<long> blocked_of_instruction(p.instructions.size(), -1);
  for (std::size_t h = 0; h < nhost; ++h)
    if (t.host[h].kind == HostInterval::Kind::Blocked) blocked_of_instruction[t.host[h].instruction] = static_cast<long>(h);
  std::vector<long> last_on_stream(p.streams.size(), -1), last_on_comm(p.comms.size(), -1);
  std::vector<long> event_src(static_cast<std::size_t>(std::max(p.event_count, 0)), -1);
  std::vector<std::vector<long>> pending(p.streams.size());
  std::size_t host_cursor = 0;  // host intervals with instruction <= i are [0, host_cursor)
  for (std::size_t i = 0; i < p.instructions.size(); ++i) {
    while (host_cursor < nhost && t.host[host_cursor].instruction <= i) ++host_cursor;
    const Instruction& ins = p.instructions[i];
    if (const auto* r = std::get_if<Record>(&ins)) {
      event_src[static_cast<std::size_t>(r->event)] = last_on_stream[static_cast<std::size_t>(r->stream)];
    } else if (const auto* w = std::get_if<Wait>(&ins)) {
      long src = event_src[static_cast<std::size_t>(w->event)];
      if (src >= 0) pending[static_cast<std::size_t>(w->stream)].push_back(src);
    } else if (const auto* s = std::get_if<HostSync>(&ins)) {
      long src = s->target_kind == HostSync::Target::Event ? event_src[static_cast<std::size_t>(s->target)]
                                                           : last_on_stream[static_cast<std::size_t>(s->target)];
      long blocked = blocked_of_instruction[i];
      if (src >= 0 && blocked >= 0) add(static_cast<std::size_t>(src), nops + static_cast<std::size_t>(blocked), DepKind::HostSync);
    }
    long oi = op_of_instruction[i];
    if (oi < 0) continue;
    const auto o = static_cast<std::size_t>(oi);
    const auto st = static_cast<std::size_t>(t.ops[o].stream);
    // The host interval that issued it: the last one at or before this instruction (its
    // own issue cost, or the preceding work or blocked sync when issuing costs nothing).
    if (host_cursor > 0) add(nops + host_cursor - 1, o, DepKind::Issue);
    if (last_on_stream[st] >= 0) add(static_cast<std::size_t>(last_on_stream[st]), o, DepKind::Stream);
    for (long src : pending[st]) add(static_cast<std::size_t>(src), o, DepKind::Event);
    pending[st].clear();
    last_on_stream[st] = oi;
    if (t.ops[o].kind == TimelineOp::Kind::Collective && t.ops[o].comm >= 0) {
      auto c = static_cast<std::size_t>(t.ops[o].comm);
      if (last_on_comm[c] >= 0) add(static_cast<std::size_t>(last_on_comm[c]), o, DepKind::CommFifo);
      last_on_comm[c] = oi;
    }
  }
  x.vertices = boost::num_vertices(g);
  x.edges = boost::num_edges(g);

  // Longest duration-weighted chain (the graph is a DAG: every edge goes forward in time).
  {
    std::vector<Vertex> order;
    boost::topological_sort(g, std::back_inserter(order));
    std::vector<std::int64_t> best(x.vertices, 0);
    std::int64_t longest = 0;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Vertex v = *it;
      std::int64_t in = 0;
      for (auto [e, end] = boost::in_edges(v, g); e != end; ++e) in = std::max(in, best[boost::source(*e, g)]);
      best[v] = in + (g[v].blocked ? 0 : (g[v].end - g[v].start).ns);
      longest = std::max(longest, best[v]);
    }
    x.longest_chain = Time{longest};
  }

  // The critical path: from the vertex that ends last (a GPU op when one ends at the end).
  if (x.vertices == 0) return x;
  std::size_t cur = 0;
  for (std::size_t v = 0; v < x.vertices; ++v) {
    bool better = g[v].end > g[cur].end || (g[v].end == g[cur].end && (g[cur].host && !g[v].host));
    if (better) cur = v;
  }
  std::vector<CriticalStep> rev;
  std::set<std::size_t> seen;
  for (;;) {
    seen.insert(cur);
    CriticalStep s;
    if (cur < nops) {
      const auto& op = t.ops[cur];
      s.kind = op.kind == TimelineOp::Kind::Collective ? CriticalStep::Kind::Collective : CriticalStep::Kind::Kernel;
      s.index = cur;
      s.name = op.name;
      s.unit = op.unit;
      s.where = op.stream >= 0 && static_cast<std::size_t>(op.stream) < t.streams.size() ? t.streams[static_cast<std::size_t>(op.stream)].name
                                                                                          : fmt::format("stream {}", op.stream);
    } else {
      const auto& h = t.host[cur - nops];
      s.kind = h.kind == HostInterval::Kind::Blocked ? CriticalStep::Kind::Blocked : CriticalStep::Kind::Host;
      s.index = cur - nops;
      s.name = h.name;
      s.where = "host";
    }
    s.start = g[cur].start;
    s.end = g[cur].end;
    // The binding dependency: a blocked interval is released by the op it waited for (its end
    // equals the interval's end); anything else starts when its latest predecessor ends.
    long pick = -1;
    DepKind pick_kind = DepKind::Stream;
    for (auto [e, end] = boost::in_edges(cur, g); e != end; ++e) {
      auto src = boost::source(*e, g);
      DepKind k = g[*e].kind;
      bool binds = g[cur].blocked ? (k == DepKind::HostSync && g[src].end == g[cur].end) : g[src].end == g[cur].start;
      if (!binds || seen.count(src)) continue;
      if (pick < 0 || rank(k) < rank(pick_kind)) {
        pick = static_cast<long>(src);
        pick_kind = k;
      }
    }
    rev.push_back(s);
    if (pick < 0) {
      rev.back().first = true;
      break;
    }
    rev.back().via = pick_kind;  // how this step waited for the one before it on the path
    cur = static_cast<std::size_t>(pick);
  }
  // Into time order: path[i].via is how path[i] waited for path[i-1].
  std::reverse(rev.begin(), rev.end());
  x.path = std::move(rev);

  // Time on the path per category; blocked intervals overlap the op that released them, so
  // they add no time of their own.
  std::map<std::string, Time> per;
  std::vector<std::string> order;
  auto credit = [&](const std::string& k, Time d) {
    if (!per.count(k)) order.push_back(k);
    per[k] += d;
  };
  for (const auto& s : x.path) {
    Time d = s.end - s.start;
    switch (s.kind) {
      case CriticalStep::Kind::Kernel: credit("compute", d); break;
      case CriticalStep::Kind::Collective: {
        const auto& op = t.ops[s.index];
        std::string comm = op.comm >= 0 && static_cast<std::size_t>(op.comm) < t.comms.size() ? t.comms[static_cast<std::size_t>(op.comm)].name : "?";
        credit("collective chain on '" + comm + "'", d);
        break;
      }
      case CriticalStep::Kind::Host: credit("host", d); break;
      case CriticalStep::Kind::Blocked: x.host_syncs_on_path.push_back(s.name); break;
    }
  }
  for (const auto& k : order) x.path_time.emplace_back(k, per[k]);
  std::stable_sort(x.path_time.begin(), x.path_time.end(), [](const auto& a, const auto& b) { return a.second > b.second; });

  // Exposure per collective and per phase.
  auto exposed = exposed_per_op(t);
  std::set<std::size_t> on_path;
  for (const auto& s : x.path)
    if (s.kind == CriticalStep::Kind::Collective) on_path.insert(s.index);
  for (const char* ph : {"setup", "forward", "backward", "optimizer"}) x.exposed_by_phase[ph] = Time{};
  for (std::size_t i = 0; i < nops; ++i) {
    const auto& op = t.ops[i];
    if (op.kind != TimelineOp::Kind::Collective) continue;
    CollectiveExposure c;
    c.op = i;
    c.name = op.name;
    c.unit = op.unit;
    c.comm = op.comm >= 0 && static_cast<std::size_t>(op.comm) < t.comms.size() ? t.comms[static_cast<std::size_t>(op.comm)].name : "?";
    c.kind = op.collective;
    c.phase = op.phase;
    c.duration = op.duration();
    c.exposed = exposed[i];
    c.on_critical_path = on_path.count(i) > 0;
    x.exposed_by_phase[to_string(op.phase)] += c.exposed;
    x.collectives.push_back(std::move(c));
  }

  // What bounds the step.
  Time total{};
  for (const auto& [k, v] : x.path_time) total += v;
  auto share = [&](Time v) { return total.ns > 0 ? 100.0 * static_cast<double>(v.ns) / static_cast<double>(total.ns) : 0.0; };
  std::string limiter;
  for (const auto& r : x.host_syncs_on_path) limiter += (limiter.empty() ? "" : "; ") + r;
  if (x.path_time.empty()) {
    x.bound = "nothing (empty step)";
  } else {
    const auto& [k0, v0] = x.path_time[0];
    x.bound = fmt::format("{} ({:.0f}% of the critical path)", k0, share(v0));
    if (x.path_time.size() > 1 && share(x.path_time[1].second) >= 100.0 / 3) {
      const auto& [k1, v1] = x.path_time[1];
      x.bound = fmt::format("{} and {} in series ({:.0f}% + {:.0f}% of the critical path)", k0, k1, share(v0), share(v1));
    }
    if (!limiter.empty()) x.bound += ", gated by host sync (" + limiter + ")";
  }
  return x;
}

std::vector<Sensitivity> sensitivities(const Experiment& e, Time baseline) {
  const Program base = e.strategy->build(e);
  auto run = [&](const std::string& what, HardwareProfile hw, Program prog) {
    Time step = compute_metrics(simulate_program(prog, hw)).overlap.step_time;
    return Sensitivity{what, step, step.ns > 0 ? static_cast<double>(baseline.ns) / static_cast<double>(step.ns) : 1.0};
  };
  std::vector<Sensitivity> out;
  {  // 2x link bandwidth: every bandwidth term doubles; latencies stay.
    HardwareProfile hw = e.cluster.profile;
    for (ScopeModel* m : {&hw.intra_node, &hw.inter_node}) {
      for (auto& r : m->default_ranges) r.beta.bytes_per_s *= 2;
      for (auto& [k, rs] : m->alpha_beta)
        for (auto& r : rs) r.beta.bytes_per_s *= 2;
      m->busbw.bytes_per_s *= 2;
      m->tree_busbw.bytes_per_s *= 2;
      // Measured tables carry no latency/bandwidth split: halve the whole time (an upper
      // bound on the gain).
      for (auto& [k, by_ranks] : m->table)
        for (auto& [n, pts] : by_ranks)
          for (auto& pt : pts) pt.time = Time{pt.time.ns / 2};
    }
    if (hw.topology)
      for (Bandwidth* b : {&hw.topology->nvlink_busbw, &hw.topology->nvls_bw, &hw.topology->nvlink_all_to_all_busbw,
                           &hw.topology->nic_bw, &hw.topology->nic_all_to_all_bw})
        b->bytes_per_s *= 2;
    out.push_back(run("2x link bandwidth", hw, base));
  }
  {  // 2x compute: peak FLOP/s, HBM, measured GEMM rates, and fixed kernel times.
    HardwareProfile hw = e.cluster.profile;
    for (auto& [d, r] : hw.compute.peak) r.flops_per_s *= 2;
    hw.compute.hbm.bytes_per_s *= 2;
    for (auto& gm : hw.compute.gemm_table) gm.rate.flops_per_s *= 2;
    hw.compute.min_kernel_time = Time{hw.compute.min_kernel_time.ns / 2};
    Program prog = base;
    for (auto& ins : prog.instructions)
      if (auto* l = std::get_if<Launch>(&ins)) l->kernel.work.fixed = Time{l->kernel.work.fixed.ns / 2};
    out.push_back(run("2x compute", hw, std::move(prog)));
  }
  {  // Zero host overhead: per-instruction CPU costs and HostWork become free.
    HardwareProfile hw = e.cluster.profile;
    hw.host = HostProfile{};
    Program prog = base;
    for (auto& ins : prog.instructions)
      if (auto* w = std::get_if<HostWork>(&ins)) w->duration = Time{};
    out.push_back(run("zero host overhead", hw, std::move(prog)));
  }
  return out;
}

Explanation explain_experiment(const Experiment& e, const SimulationResult& r, bool with_sensitivities) {
  Explanation x = explain_timeline(r.program, r.timeline);
  if (with_sensitivities) x.sensitivities = sensitivities(e, r.metrics.overlap.step_time);
  return x;
}

}  // namespace stepsim
