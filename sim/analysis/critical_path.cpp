#include "sim/analysis/critical_path.hpp"

#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "sim/analysis/run.hpp"
#include "sim/exec/engine.hpp"
#include "sim/core/format.hpp"
#include "sim/core/overloaded.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

std::string to_string(DepKind k) {
  switch (k) {
    case DepKind::None: return "start";
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

// One step of the critical path: timeline ops are vertices [0, nops), host intervals follow.
CriticalStep step_of(const Timeline& t, std::size_t v) {
  const std::size_t nops = t.ops.size();
  CriticalStep s;
  if (v < nops) {
    const auto& op = t.ops[v];
    s.kind = op.kind == TimelineOp::Kind::Collective ? CriticalStep::Kind::Collective : CriticalStep::Kind::Kernel;
    s.index = v;
    s.name = op.name;
    s.unit = op.unit;
    s.where = op.stream.index() < t.streams.size() ? t.streams[op.stream.index()].name : fmt::format("stream {}", op.stream);
    s.start = op.start;
    s.end = op.end;
  } else {
    const auto& h = t.host[v - nops];
    s.kind = h.kind == HostInterval::Kind::Blocked ? CriticalStep::Kind::Blocked : CriticalStep::Kind::Host;
    s.index = v - nops;
    s.name = host_label(t, h);
    s.where = "host";
    s.start = h.start;
    s.end = h.end;
  }
  return s;
}

// The critical path, in time order: from the vertex that ends last (a GPU op when one ends at
// the end), back through what each one waited for (the simulator's record, Timeline::op_why /
// host_why); path[i].via is how path[i] waited for path[i-1]. Adds each step's time to
// `longest_chain` (blocked intervals overlap the op that released them: no time of their own).
std::vector<CriticalStep> critical_path(const Timeline& t, Time& longest_chain) {
  const std::size_t nops = t.ops.size(), nhost = t.host.size(), vertices = nops + nhost;
  auto end_of = [&](std::size_t v) { return v < nops ? t.ops[v].end : t.host[v - nops].end; };
  auto why_of = [&](std::size_t v) {
    const auto& whys = v < nops ? t.op_why : t.host_why;
    std::size_t k = v < nops ? v : v - nops;
    return k < whys.size() ? whys[k] : StartRecord{};
  };
  std::size_t cur = 0;
  for (std::size_t v = 0; v < vertices; ++v)
    if (end_of(v) > end_of(cur) || (end_of(v) == end_of(cur) && cur >= nops && v < nops)) cur = v;
  std::vector<CriticalStep> rev;
  std::vector<char> seen(vertices, 0);
  for (;;) {
    seen[cur] = 1;
    CriticalStep s = step_of(t, cur);
    if (s.kind != CriticalStep::Kind::Blocked) longest_chain += s.end - s.start;
    rev.push_back(s);
    StartRecord w = why_of(cur);
    // The next step back: a host interval (numbered after the ops) or an op.
    std::optional<std::size_t> next;
    if (auto h = w.host(); h && h->index() < nhost) next = nops + h->index();
    if (auto o = w.op(); o && o->index() < nops) next = o->index();
    if (!next || seen[*next]) {
      rev.back().first = true;
      break;
    }
    rev.back().via = w.cause();  // how this step waited for the one before it on the path
    cur = *next;
  }
  std::reverse(rev.begin(), rev.end());
  return rev;
}

std::string comm_name(const Timeline& t, const TimelineOp& op) {
  return op.comm && op.comm->index() < t.comms.size() ? t.comms[op.comm->index()].name : "?";
}

// Time on the path per category, largest first; the host syncs on it. Blocked intervals
// overlap the op that released them, so they add no time of their own.
void credit_path_time(const Timeline& t, Explanation& x) {
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
      case CriticalStep::Kind::Collective: credit("collective chain on '" + comm_name(t, t.ops[s.index]) + "'", d); break;
      case CriticalStep::Kind::Host: credit("host", d); break;
      case CriticalStep::Kind::Blocked: x.host_syncs_on_path.push_back(s.name); break;
    }
  }
  for (const auto& k : order) x.path_time.emplace_back(k, per[k]);
  std::stable_sort(x.path_time.begin(), x.path_time.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
}

// Exposure per collective and per phase.
void add_exposure(const Timeline& t, Explanation& x) {
  auto exposed = exposed_per_op(t);
  std::set<std::size_t> on_path;
  for (const auto& s : x.path)
    if (s.kind == CriticalStep::Kind::Collective) on_path.insert(s.index);
  for (const char* ph : {"setup", "forward", "backward", "optimizer"}) x.exposed_by_phase[ph] = Time{};
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const auto& op = t.ops[i];
    if (op.kind != TimelineOp::Kind::Collective) continue;
    CollectiveExposure c;
    c.op = i;
    c.name = op.name;
    c.unit = op.unit;
    c.comm = comm_name(t, op);
    c.kind = op.collective;
    c.phase = op.phase;
    c.duration = op.duration();
    c.exposed = exposed[i];
    c.on_critical_path = on_path.count(i) > 0;
    x.exposed_by_phase[to_string(op.phase)] += c.exposed;
    x.collectives.push_back(std::move(c));
  }
}

}  // namespace

std::string group_reasons(const std::vector<std::string>& reasons) {
  std::vector<std::pair<std::string, int>> counted;
  for (const auto& r : reasons) {
    auto it = std::find_if(counted.begin(), counted.end(), [&](const auto& c) { return c.first == r; });
    if (it == counted.end()) counted.emplace_back(r, 1);
    else ++it->second;
  }
  std::string out;
  for (const auto& [r, n] : counted) out += (out.empty() ? "" : "; ") + r + (n > 1 ? fmt::format(" (x{})", n) : "");
  return out;
}

namespace {

// What bounds the step, in words, from the path time per category.
std::string bound_of(const Explanation& x) {
  Time total{};
  for (const auto& [k, v] : x.path_time) total += v;
  auto share = [&](Time v) { return total.ns > 0 ? 100.0 * static_cast<double>(v.ns) / static_cast<double>(total.ns) : 0.0; };
  if (x.path_time.empty()) return "nothing (empty step)";
  const std::string limiter = group_reasons(x.host_syncs_on_path);
  const auto& [k0, v0] = x.path_time[0];
  std::string bound = fmt::format("{} ({:.0f}% of the critical path)", k0, share(v0));
  if (x.path_time.size() > 1 && share(x.path_time[1].second) >= 100.0 / 3) {
    const auto& [k1, v1] = x.path_time[1];
    bound = fmt::format("{} and {} in series ({:.0f}% + {:.0f}% of the critical path)", k0, k1, share(v0), share(v1));
  }
  if (!limiter.empty()) bound += ", gated by host sync (" + limiter + ")";
  return bound;
}

}  // namespace

Explanation explain_timeline(const Program&, const Timeline& t) {
  Explanation x;
  x.step_time = t.end - t.start;
  x.vertices = t.ops.size() + t.host.size();
  x.edges = t.dependencies;
  if (x.vertices == 0) return x;
  x.path = critical_path(t, x.longest_chain);
  credit_path_time(t, x);
  add_exposure(t, x);
  x.bound = bound_of(x);
  return x;
}

// Each model kind, the bandwidth terms its cost rule (sim/hardware/collective_model.cpp) reads:
// - alpha_beta: every range's beta, of every group size: the per-kind ranges, the default
//   ranges and the ranges measured on further group sizes ("groups"), since a communicator of
//   such a size is priced with those (nearest_group); alpha stays.
// - ring: busbw; tree and nccl: the ring's and the tree's busbw (a tree busbw of 0 means the
//   ring's, which doubles with it); step and base latencies stay.
// - table: measured times carry no latency/bandwidth split of their own, but the table's rule
//   has one: below the smallest measured size the time is constant, the latency
//   (table_time). So per kind and group size the latency is the list's smallest time and the
//   rest of each point is bandwidth, which halves: t' = t_min + (t - t_min) / 2. Where the
//   smallest measured size still moves bytes, its transfer time is counted as latency, so the
//   gain is a lower bound (never more than halving the whole time, which would halve latency).
// - topology: NVLink, NVLS and NIC bandwidths (and their all-to-all variants); NCCL's LL
//   protocol cap (llMaxBws, a per-architecture constant of the tuner) and hop latencies stay.
HardwareProfile with_double_link_bandwidth(const HardwareProfile& profile) {
  HardwareProfile hw = profile;
  auto twice = [](std::vector<AlphaBetaRange>& ranges) {
    for (auto& r : ranges) r.beta.bytes_per_s *= 2;
  };
  for (ScopeModel* m : {&hw.intra_node, &hw.inter_node})
    std::visit(Overloaded{
                   [&](AlphaBetaModel& ab) {
                     twice(ab.default_ranges);
                     for (auto& [kind, ranges] : ab.ranges) twice(ranges);
                     for (auto& [kind, by_ranks] : ab.groups)
                       for (auto& [ranks, ranges] : by_ranks) twice(ranges);
                   },
                   [](RingModel& ring) { ring.busbw.bytes_per_s *= 2; },
                   [](TreeModel& t) {
                     t.ring.busbw.bytes_per_s *= 2;
                     t.tree.busbw.bytes_per_s *= 2;
                   },
                   [](NcclModel& t) {
                     t.ring.busbw.bytes_per_s *= 2;
                     t.tree.busbw.bytes_per_s *= 2;
                   },
                   [](TableModel& table) {
                     for (auto& [kind, by_ranks] : table.points)
                       for (auto& [ranks, pts] : by_ranks) {
                         if (pts.empty()) continue;
                         Time latency = std::min_element(pts.begin(), pts.end(), [](const auto& a, const auto& b) {
                                          return a.time < b.time;
                                        })->time;
                         for (auto& pt : pts) pt.time = latency + Time{(pt.time - latency).ns / 2};
                       }
                   },
               },
               *m);
  if (hw.topology)
    for (Bandwidth* b : {&hw.topology->nvlink_busbw, &hw.topology->nvls_bw, &hw.topology->nvlink_all_to_all_busbw,
                         &hw.topology->nic_bw, &hw.topology->nic_all_to_all_bw})
      b->bytes_per_s *= 2;
  return hw;
}

std::vector<Sensitivity> sensitivities(const Experiment& e, Time baseline) {
  const Program base = build_step_program(e);
  auto run = [&](const std::string& what, HardwareProfile hw, Program prog) {
    Time step = compute_metrics(simulate_program(prog, hw, {}, {}, TimelineDetail::Metrics)).overlap.step_time;
    return Sensitivity{what, step, step.ns > 0 ? static_cast<double>(baseline.ns) / static_cast<double>(step.ns) : 1.0};
  };
  std::vector<Sensitivity> out;
  out.push_back(run("2x link bandwidth", with_double_link_bandwidth(e.cluster.profile), base));
  {  // 2x compute: peak FLOP/s, HBM, measured GEMM rates, and fixed kernel times.
    HardwareProfile hw = e.cluster.profile;
    for (auto& [d, r] : hw.compute.peak) r.flops_per_s *= 2;
    hw.compute.hbm.bytes_per_s *= 2;
    for (auto& gm : hw.compute.gemm_table) gm.rate.flops_per_s *= 2;
    hw.compute.min_kernel_time = Time{hw.compute.min_kernel_time.ns / 2};
    Program prog = base;
    prog.works = std::make_shared<WorkPool>();  // the halved works; base's stay as they are
    for (auto& ins : prog.instructions)
      if (auto* l = std::get_if<Launch>(&ins)) {
        KernelWork w = *l->kernel.work;
        w.fixed = Time{w.fixed.ns / 2};
        l->kernel.work = prog.works->add(w);
        l->kernel.work_id = 0;  // its work changed (Kernel::work_id)
      }
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
