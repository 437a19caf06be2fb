#include "sim/hardware/collective_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "sim/core/overloaded.hpp"

namespace stepsim {

double busbw_factor(CollectiveKind kind, int ranks) {
  double n = ranks;
  switch (kind) {
    case CollectiveKind::AllReduce: return 2.0 * (n - 1) / n;
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllToAll: return (n - 1) / n;
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce: return 1.0;
  }
  return 1.0;
}

int ring_steps(CollectiveKind kind, int n) {
  switch (kind) {
    case CollectiveKind::AllReduce: return 2 * (n - 1);
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllToAll: return n - 1;
    default: return n;
  }
}

static int inter_steps(CollectiveKind kind, int nodes) {
  return kind == CollectiveKind::AllReduce ? 2 * (nodes - 1) : nodes - 1;
}

// The ranges measured on the group size nearest n (|log(n / ranks)|, ties to the larger
// group), and that size; ranks 0 means raw ranges with no recorded group size.
static std::pair<const std::vector<AlphaBetaRange>*, int> nearest_group(const AlphaBetaModel& m, CollectiveKind kind, int n) {
  auto it = m.ranges.find(kind);
  const std::vector<AlphaBetaRange>* ranges = it != m.ranges.end() ? &it->second : &m.default_ranges;
  auto measured = m.ranks.find(kind);
  if (it == m.ranges.end() || measured == m.ranks.end()) return {ranges, 0};
  int ranks = measured->second;
  auto distance = [n](int r) { return std::abs(std::log(static_cast<double>(n) / r)); };
  if (auto groups = m.groups.find(kind); groups != m.groups.end())
    for (const auto& [r, rs] : groups->second) {
      double d = distance(r), best = distance(ranks);
      if (d < best - 1e-12 || (std::abs(d - best) <= 1e-12 && r > ranks)) {
        ranges = &rs;
        ranks = r;
      }
    }
  return {ranges, ranks};
}

// t = alpha + S' / beta, where S' = S * factor(n) / factor(ranks) is the size that puts the
// same bytes on the wire per rank on the measured group (C6.1: bus bandwidth carries across
// group sizes) and also picks the size range. alpha is not rescaled: the measured logs show
// small-message latency far from proportional to ring steps (XLA's 8xH100 table, all_reduce
// 1-16 KiB: ~35 us on 8 ranks, ~16 us on 2; a 14:2 step ratio would predict 5 us), so a fit's
// latency is carried as measured, and the nearest measured group size is used when several are.
static Time alpha_beta_time(const AlphaBetaModel& m, CollectiveKind kind, Bytes bytes, int n) {
  auto [ranges, measured] = nearest_group(m, kind, n);
  if (ranges->empty()) return Time::zero();
  Bytes moved = bytes;
  if (measured > 0 && measured != n)
    moved = Bytes{std::llround(static_cast<double>(bytes.count) * busbw_factor(kind, n) / busbw_factor(kind, measured))};
  const AlphaBetaRange* range = &ranges->back();
  for (const auto& r : *ranges)
    if (moved <= r.max_bytes) {
      range = &r;
      break;
    }
  return range->alpha + transfer_time(moved, range->beta);
}

// Ring (C6.2): T = base + steps * step_latency + factor * S / busbw. A communicator that
// spans nodes uses the inter-node scope, whose busbw is the bottleneck (network) bandwidth
// and whose step_latency is the per-hop latency; of the 2(n-1) hops of an all-reduce only
// 2(nodes-1) cross the network (C6.4), and those pay step_latency, the rest a tenth of it
// (NVLink hop against network hop, the ratio of NCCL's defaults).
static Time ring_time(const RingModel& m, CollectiveKind kind, Bytes bytes, int n, int nodes) {
  int steps = ring_steps(kind, n);
  Time latency = m.step_latency * steps;
  if (nodes > 1) {
    int crossing = std::min(steps, inter_steps(kind, nodes));
    latency = m.step_latency * crossing + Time{(m.step_latency.ns * (steps - crossing)) / 10};
  }
  Time bw = transfer_time(Bytes{std::llround(bytes.count * busbw_factor(kind, n))}, m.busbw);
  return m.base_latency + latency + bw;
}

// Double binary tree all-reduce (C6.3): latency 2 * (log2(nodes) + ppn - 1) levels,
// bandwidth 2 S / busbw_tree.
static Time tree_time(const RingModel& ring, const TreeConstants& tree, CollectiveKind kind, Bytes bytes, int n, int nodes) {
  if (kind != CollectiveKind::AllReduce) return ring_time(ring, kind, bytes, n, nodes);
  int ppn = std::max(1, n / std::max(1, nodes));
  double levels = 2.0 * ((ppn - 1) + std::log2(std::max(1, nodes)));
  Bandwidth bw = tree.busbw.bytes_per_s > 0 ? tree.busbw : ring.busbw;
  Time lat = tree.step_latency.ns > 0 ? tree.step_latency : ring.step_latency;
  return ring.base_latency + Time{std::llround(lat.ns * levels)} + transfer_time(Bytes{2 * bytes.count}, bw);
}

// Measured table: pick the nearest measured group size, convert each point to bus bandwidth
// (which is what carries across group sizes), interpolate log-linearly in size, and convert
// back with this group's factor. Below the smallest size the time is constant (latency
// bound); above the largest the last point's bus bandwidth holds.
static Time table_time(const TableModel& m, CollectiveKind kind, Bytes bytes, int n) {
  auto kit = m.points.find(kind);
  if (kit == m.points.end() || kit->second.empty()) {
    // Fall back to any kind measured, scaled by bus-bandwidth factor (AR data for AG, say).
    if (m.points.empty()) return Time::zero();
    kit = m.points.find(CollectiveKind::AllReduce);
    if (kit == m.points.end()) kit = m.points.begin();
  }
  const auto& by_size = kit->second;
  auto best = by_size.begin();
  for (auto it = by_size.begin(); it != by_size.end(); ++it)
    if (std::abs(it->first - n) < std::abs(best->first - n)) best = it;
  int measured_n = best->first;
  const auto& pts = best->second;
  if (pts.empty()) return Time::zero();
  CollectiveKind measured_kind = kit->first;
  auto busbw_at = [&](const MeasuredCollective& p) {
    return static_cast<double>(p.bytes.count) * busbw_factor(measured_kind, measured_n) / p.time.seconds();
  };
  double factor = busbw_factor(kind, n);
  if (bytes <= pts.front().bytes) {
    // Latency-bound region: time scales with the number of ring steps, not with size.
    double steps_ratio = static_cast<double>(ring_steps(kind, n)) / std::max(1, ring_steps(measured_kind, measured_n));
    return Time{std::llround(pts.front().time.ns * steps_ratio)};
  }
  if (bytes >= pts.back().bytes) {
    double bw = busbw_at(pts.back());
    return Time{std::llround(static_cast<double>(bytes.count) * factor / bw * 1e9)};
  }
  auto hi = std::lower_bound(pts.begin(), pts.end(), bytes, [](const MeasuredCollective& p, Bytes b) { return p.bytes < b; });
  auto lo = hi - 1;
  // Interpolate time (not bandwidth) in log-log space between the bracketing points, after
  // converting both to this group's factor.
  double scale = factor / busbw_factor(measured_kind, measured_n);
  double x0 = std::log(static_cast<double>(lo->bytes.count)), x1 = std::log(static_cast<double>(hi->bytes.count));
  double y0 = std::log(lo->time.ns * scale), y1 = std::log(hi->time.ns * scale);
  double x = std::log(static_cast<double>(bytes.count));
  double y = y0 + (y1 - y0) * (x - x0) / (x1 - x0);
  return Time{std::llround(std::exp(y))};
}

Time scope_collective_time(const ScopeModel& m, CollectiveKind kind, Bytes bytes, int ranks, int nodes) {
  if (ranks <= 1 || bytes.count <= 0) return Time::zero();
  return std::visit(Overloaded{
                        [&](const AlphaBetaModel& ab) { return alpha_beta_time(ab, kind, bytes, ranks); },
                        [&](const RingModel& ring) { return ring_time(ring, kind, bytes, ranks, nodes); },
                        [&](const TreeModel& t) { return tree_time(t.ring, t.tree, kind, bytes, ranks, nodes); },
                        [&](const NcclModel& nccl) {
                          // NCCL picks the faster algorithm (C6.4): the tree only for all-reduce.
                          return std::min(ring_time(nccl.ring, kind, bytes, ranks, nodes),
                                          tree_time(nccl.ring, nccl.tree, kind, bytes, ranks, nodes));
                        },
                        [&](const TableModel& table) { return table_time(table, kind, bytes, ranks); },
                    },
                    m);
}


// ---------------------------------------------------------------------------------------------
// Topology-aware NCCL model. Every constant below is NCCL's own, from src/graph/tuning.cc of
// NVIDIA/nccl (commit 5067397c, 2026-06); line numbers refer to that file. docs/collectives.md
// lists the rules taken and where this model departs from the tuner (and why).

std::string to_string(NcclAlgo a) {
  switch (a) {
    case NcclAlgo::Ring: return "ring";
    case NcclAlgo::Tree: return "tree";
    case NcclAlgo::Nvls: return "nvls";
    case NcclAlgo::NvlsTree: return "nvls_tree";
    case NcclAlgo::Pat: return "pat";
    case NcclAlgo::P2p: return "p2p";
  }
  return "ring";
}

std::string to_string(NcclProto p) {
  switch (p) {
    case NcclProto::LL: return "LL";
    case NcclProto::LL128: return "LL128";
    case NcclProto::Simple: return "Simple";
  }
  return "Simple";
}

namespace {

// Rows: Tree, Ring, NVLS, NVLSTree, PAT (NcclAlgo order; P2p uses Ring's). Columns: LL, LL128,
// Simple. baseLatencies, tuning.cc:150-155.
constexpr double kBaseLatencyUs[5][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}};
// hwLatencies over NVLink, tuning.cc:159-162.
constexpr double kNvlinkHopUs[5][3] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}};
// hwLatencies over the network, tuning.cc:171-174.
constexpr double kNetHopUs[5][3] = {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}};
// llMaxBws (GB/s), tuning.cc:178-183: single node by GPU generation (row = arch, column 0),
// several nodes by CPU vendor (row 0 = Intel, the default; column = nodes 2 / more).
constexpr double kLlMaxBwGBps[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
// treeCorrectionFactor, tuning.cc:623-627: tree all-reduce bandwidth per log2(bytes/64).
constexpr float kTreeCorrection[3][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

int row(NcclAlgo a) {
  switch (a) {
    case NcclAlgo::Tree: return 0;
    case NcclAlgo::Ring: case NcclAlgo::P2p: return 1;
    case NcclAlgo::Nvls: return 2;
    case NcclAlgo::NvlsTree: return 3;
    case NcclAlgo::Pat: return 4;
  }
  return 1;
}

int log2i(std::int64_t v) { return v > 0 ? 63 - __builtin_clzll(static_cast<unsigned long long>(v)) : -1; }

struct Shape {
  int n, nodes, ppn, nics_used, nsteps, inter_steps;
};

}  // namespace

double level_bandwidth(const NcclTopology& t, TopoLevel level) {
  switch (level) {
    case TopoLevel::None: return 0;
    case TopoLevel::Nvlink: return t.nvlink_busbw.bytes_per_s;
    case TopoLevel::Nvls: return t.nvls_bw.bytes_per_s;
    case TopoLevel::Net: return t.nic_bw.bytes_per_s;
    case TopoLevel::NvlinkAllToAll:
      return t.nvlink_all_to_all_busbw.bytes_per_s > 0 ? t.nvlink_all_to_all_busbw.bytes_per_s : t.nvlink_busbw.bytes_per_s;
    case TopoLevel::NetAllToAll: return t.nic_all_to_all_bw.bytes_per_s > 0 ? t.nic_all_to_all_bw.bytes_per_s : t.nic_bw.bytes_per_s;
  }
  return 0;
}

double local_pass_us(const NcclTopology& t, const NcclCandidate& c) {
  return c.local_bytes > 0 && t.nvlink_local_bw.bytes_per_s > 0 ? c.local_bytes / t.nvlink_local_bw.bytes_per_s * 1e6 : 0;
}

double candidate_time_us(const NcclTopology& t, const NcclCandidate& c) {
  double us = c.fixed_us + t.nvlink_latency_scale * c.nvlink_us + t.net_latency_scale * c.net_us;
  if (c.level != TopoLevel::None && c.wire_bytes > 0) us += c.wire_bytes / level_bandwidth(t, c.level) * 1e6;
  return us + local_pass_us(t, c);
}

namespace {

// The tuner's candidates for one collective (nccl_candidates): the group's shape and the
// tuner's constants, and one member per algorithm family.
class CandidateList {
 public:
  CandidateList(const NcclTopology& t, CollectiveKind kind, Bytes bytes, int ranks, int nodes, NcclCandidate* out)
      : t(t), kind(kind), bytes(bytes), out(out) {
    g.n = ranks;
    g.nodes = std::max(1, nodes);
    g.ppn = std::max(1, (ranks + g.nodes - 1) / g.nodes);
    g.nics_used = std::max(1, std::min(g.ppn, t.nics_per_node));
    // nsteps and the steps that cross nodes, tuning.cc:289-291 and :411.
    g.nsteps = ring_steps(kind, ranks);
    g.inter_steps = inter_steps(kind, g.nodes);
    S = static_cast<double>(bytes.count);
    multi = g.nodes > 1;
    arch = static_cast<int>(t.arch);
    // llMaxBw row/column choice, tuning.cc:267-272.
    ll_max = (multi ? kLlMaxBwGBps[0][g.nodes <= 2 ? 1 : 2] : kLlMaxBwGBps[arch][0]) * 1e9;
    factor = busbw_factor(kind, ranks);
    rooted = kind == CollectiveKind::Broadcast || kind == CollectiveKind::Reduce;
  }

  int build() {
    if (kind == CollectiveKind::AllToAll) {
      all_to_all();
      return count;
    }
    rings();
    trees();
    nvls();
    pat();
    return count;
  }

 private:
  // Ring bus bandwidth of the path: NVLink inside a node; across nodes the ring crosses every
  // node boundary once per channel, and the channels spread over the NICs the node's GPUs
  // use, so the node's NICs bound it: min(NVLink ring, min(ppn, NICs) x NIC).
  TopoLevel ring_level(double& wire) const {
    if (!multi) return TopoLevel::Nvlink;
    double net = static_cast<double>(g.nics_used) * t.nic_bw.bytes_per_s;
    if (t.nvlink_busbw.bytes_per_s > 0 && t.nvlink_busbw.bytes_per_s < net && g.ppn > 1) return TopoLevel::Nvlink;
    wire /= g.nics_used;
    return TopoLevel::Net;
  }

  // One (algorithm, protocol) candidate: base latency plus per-hop latencies, and the wire
  // bytes at the protocol's efficiency (tuning.cc:327-335); when LL's absolute bandwidth cap
  // binds, the time at that cap goes into the fixed part and no link is charged.
  void add(NcclAlgo a, NcclProto p, double base_wire, double intra_hops, double inter_hops, double proto_eff,
           bool ll_cap) {
    NcclCandidate c;
    c.algo = a;
    c.proto = p;
    int pi = static_cast<int>(p);
    c.fixed_us = kBaseLatencyUs[row(a)][pi];
    double intra = kNvlinkHopUs[row(a)][pi];
    // With one GPU per node every hop is exposed: the tree's network latency (tuning.cc:387).
    double inter = (g.ppn == 1 ? kNetHopUs[0][pi] : kNetHopUs[row(a)][pi]);
    // Inter-node rings launch nsteps network operations: the NVLink hop costs at least the
    // network post overhead (1 us, x3 for Simple), tuning.cc:404-410.
    if (a == NcclAlgo::Ring && multi) {
      double overhead = p == NcclProto::Simple ? 3.0 : 1.0;
      if (intra * t.nvlink_latency_scale < overhead) {
        c.fixed_us += intra_hops * overhead;
        intra_hops = 0;
      }
    }
    c.nvlink_us = intra_hops * intra;
    c.net_us = inter_hops * inter;
    double wire = base_wire / proto_eff;
    c.level = a == NcclAlgo::P2p ? TopoLevel::None : ring_level(wire);
    if (a == NcclAlgo::Nvls || a == NcclAlgo::NvlsTree) c.level = TopoLevel::Nvls, wire = base_wire;
    if (ll_cap) {
      double bw = level_bandwidth(t, c.level) * (c.level == TopoLevel::Net ? g.nics_used : 1);
      if (bw * proto_eff > ll_max) {  // LL's absolute cap binds: a fixed bandwidth
        c.fixed_us += base_wire / ll_max * 1e6;
        c.level = TopoLevel::None;
        wire = 0;
      }
    }
    c.wire_bytes = wire;
    if (a == NcclAlgo::Ring) c.local_bytes = S / g.n;
    // Ring all-reduce over several nodes with Simple: x1.4 "plateau effect" on the latency
    // once each channel moves >= 64 B per rank (tuning.cc:647-650, compute capability >= 80).
    if (a == NcclAlgo::Ring && p == NcclProto::Simple && multi && kind == CollectiveKind::AllReduce &&
        S / (static_cast<double>(t.channels) * g.n) >= 64) {
      double f = arch >= static_cast<int>(NcclArch::Ampere) ? 1.4 : 1.9;
      c.fixed_us *= f;
      c.nvlink_us *= f;
      c.net_us *= f;
    }
    if (count < kMaxNcclCandidates) out[count++] = c;
  }

  void all_to_all() {
    // Not a tuner collective: NCCL runs it as grouped point-to-point sends, all at once. Per
    // GPU, (ppn-1)/n of S goes over NVLink and (n-ppn)/n over the network, the node's NICs
    // shared by its ppn GPUs; the slower of the two bounds. Latency: one Simple ring hop.
    NcclCandidate c;
    c.algo = NcclAlgo::P2p;
    c.proto = NcclProto::Simple;
    c.fixed_us = kBaseLatencyUs[1][2];
    double nvl = S * (g.ppn - 1) / g.n, net = S * (g.n - g.ppn) / g.n * g.ppn / g.nics_used;
    if (multi) c.net_us = kNetHopUs[1][2];
    else c.nvlink_us = kNvlinkHopUs[1][2];
    double t_nvl = nvl > 0 ? nvl / level_bandwidth(t, TopoLevel::NvlinkAllToAll) : 0;
    double t_net = net > 0 ? net / level_bandwidth(t, TopoLevel::NetAllToAll) : 0;
    if (t_net >= t_nvl && net > 0) c.level = TopoLevel::NetAllToAll, c.wire_bytes = net;
    else c.level = TopoLevel::NvlinkAllToAll, c.wire_bytes = nvl;
    out[count++] = c;
  }

  void rings() {
    // Ring: every collective (tuning.cc:294-298). Latency tuning.cc:393-413; Broadcast/Reduce
    // pay nsteps hops of the Tree/Simple latency for Simple (:395-402, channels not shared).
    for (NcclProto p : protos) {
      if (p == NcclProto::LL128 && !t.ll128) continue;
      double eff = p == NcclProto::LL ? 0.5 : p == NcclProto::LL128 ? 0.92 : 1.0;  // :327-329
      if (rooted) {
        int pi = static_cast<int>(p);
        double hop = multi ? (p == NcclProto::Simple ? kNetHopUs[0][2] : kNetHopUs[1][pi])
                           : (p == NcclProto::Simple ? kNvlinkHopUs[0][2] : kNvlinkHopUs[1][pi]);
        NcclCandidate c;
        c.algo = NcclAlgo::Ring;
        c.proto = p;
        c.fixed_us = kBaseLatencyUs[1][pi];
        (multi ? c.net_us : c.nvlink_us) = g.nsteps * hop;
        double wire = S / eff;
        c.level = ring_level(wire);
        c.wire_bytes = wire;
        out[count++] = c;
        continue;
      }
      add(NcclAlgo::Ring, p, S * factor, g.nsteps - g.inter_steps, g.inter_steps, eff, p == NcclProto::LL);
    }
  }

  void trees() {
    if (kind == CollectiveKind::AllReduce && t.tree) {
      // Double binary tree: 2S per GPU (ratio .5, :380), bus bandwidth x0.92 (:331), LL /3.8
      // (:332), LL128 x7/9 on one node or x120/128 (:335); the size correction (:640-641).
      // Latency 2((ppn-1) intra + log2(nodes) inter) (:415-416).
      int log_size = log2i(bytes.count >> 6);
      for (NcclProto p : protos) {
        if (p == NcclProto::LL128 && !t.ll128) continue;
        double eff = 0.92 * (p == NcclProto::LL ? 1.0 / 3.8 : p == NcclProto::LL128 ? (multi ? 120.0 / 128.0 : 7.0 / 9.0) : 1.0);
        if (log_size >= 0 && log_size < 23) eff *= kTreeCorrection[static_cast<int>(p)][log_size];
        add(NcclAlgo::Tree, p, 2 * S, 2.0 * (g.ppn - 1), 2.0 * log2i(g.nodes), eff, p == NcclProto::LL);
      }
    }
  }

  void nvls() {
    if (t.nvls_bw.bytes_per_s > 0 && g.ppn > 1) {
      if (!multi && !rooted) {
        // NVLS (Simple only, :301) on one node; its latency replaces the base (:424-425). Per
        // GPU over its NVLink: all-reduce S out and S/n back (multimem reduce, then multicast
        // store), all-gather / reduce-scatter (n-1)/n S. See docs/collectives.md: this traffic
        // count stands where the tuner uses a group-size-free efficiency (:311-318).
        double wire = kind == CollectiveKind::AllReduce ? S * (g.n + 1) / g.n : S * (g.n - 1) / g.n;
        add(NcclAlgo::Nvls, NcclProto::Simple, wire, 1, 0, 1.0, false);
      } else if (multi && kind == CollectiveKind::AllReduce) {
        // NVLS tree across nodes (:427-428): NVLS inside the node, a tree of nodes over the NICs;
        // the two stages pipeline, the slower bounds.
        double nvls = S * (g.ppn + 1) / g.ppn, net = 2 * S / g.nics_used;
        NcclCandidate c;
        c.algo = NcclAlgo::NvlsTree;
        c.proto = NcclProto::Simple;
        c.nvlink_us = kNvlinkHopUs[3][2];
        c.net_us = 2.0 * log2i(g.nodes) * (g.ppn == 1 ? kNetHopUs[0][2] : kNetHopUs[3][2]);
        if (nvls / t.nvls_bw.bytes_per_s >= net / t.nic_bw.bytes_per_s) c.level = TopoLevel::Nvls, c.wire_bytes = nvls;
        else c.level = TopoLevel::Net, c.wire_bytes = net;
        out[count++] = c;
      }
    }
  }

  void pat() {
    if (multi && g.ppn == 1 && (kind == CollectiveKind::AllGather || kind == CollectiveKind::ReduceScatter)) {
      // PAT: one GPU per node only (:215-223), Simple, bus bandwidth x0.75 (:337), latency
      // log2(nodes) x inter/3.5 + 2.8 us per rank (:430-433).
      NcclCandidate c;
      c.algo = NcclAlgo::Pat;
      c.proto = NcclProto::Simple;
      c.fixed_us = kBaseLatencyUs[4][2] + 2.8 * g.n;
      c.net_us = log2i(g.nodes) * kNetHopUs[0][2] / 3.5;
      c.level = TopoLevel::Net;
      c.wire_bytes = S * factor / 0.75;
      out[count++] = c;
    }
  }

  const NcclTopology& t;
  CollectiveKind kind;
  Bytes bytes;
  NcclCandidate* out;
  Shape g{};
  double S = 0;
  bool multi = false;
  int arch = 0;
  double ll_max = 0;
  double factor = 0;    // busbw factor of the collective on the group
  bool rooted = false;  // Broadcast / Reduce
  int count = 0;
  const NcclProto protos[3] = {NcclProto::LL, NcclProto::LL128, NcclProto::Simple};
};

}  // namespace

int nccl_candidates(const NcclTopology& t, CollectiveKind kind, Bytes bytes, int ranks, int nodes, NcclCandidate* out) {
  return CandidateList(t, kind, bytes, ranks, nodes, out).build();
}

const NcclTopology& across_spine(const NcclTopology& t, int nodes, NcclTopology& scratch) {
  if (t.oversubscription <= 1 || nodes <= std::max(1, t.leaf_nodes)) return t;
  scratch = t;
  scratch.nic_bw = Bandwidth{t.nic_bw.bytes_per_s / t.oversubscription};
  if (t.nic_all_to_all_bw.bytes_per_s > 0)
    scratch.nic_all_to_all_bw = Bandwidth{t.nic_all_to_all_bw.bytes_per_s / t.oversubscription};
  return scratch;
}

NcclChoice nccl_choice(const NcclTopology& fabric, CollectiveKind kind, Bytes bytes, int ranks, int nodes) {
  NcclTopology scratch;
  const NcclTopology& t = across_spine(fabric, nodes, scratch);
  NcclCandidate cs[kMaxNcclCandidates];
  int n = nccl_candidates(t, kind, bytes, ranks, nodes, cs);
  NcclChoice best{cs[0], Time::zero()};
  double best_us = std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) {
    if (cs[i].level != TopoLevel::None && cs[i].wire_bytes > 0 && level_bandwidth(t, cs[i].level) <= 0) continue;
    double us = candidate_time_us(t, cs[i]);
    if (us < best_us) best_us = us, best.candidate = cs[i];
  }
  best.time = Time{std::llround(best_us * 1e3)};
  return best;
}

namespace {

// What topology_collective_time's algorithm families share: the group's shape, the tuner's
// constants and the ring level's bandwidth (ring_level() in nccl_candidates), computed once.
// The same shape and constants as CandidateList's constructor, kept flat on purpose: building
// this from a shared struct (one constructor for both) measured 43 ns per call against 24.5 in
// bench/collective_bench, and this runs once per collective in the engine's inner loop; the
// unit tests hold the two paths equal.
struct FastCollective {
  CollectiveKind kind;
  int n, nn, ppn, nics;       // ranks, nodes, ranks per node, NICs the node's ranks use
  bool multi, rooted;         // spans nodes; Broadcast / Reduce
  int nsteps, crossing;       // ring steps, and those that cross nodes
  int arch;
  double S;                   // bytes
  double s_nvl, s_net;        // latency scales
  double nvl_bw, nic_bw;      // bytes/s
  double ll_max;              // LL's bandwidth cap, bytes/s
  double ring_bw, inv_ring;   // the ring level's bus bandwidth (bytes/s) and us per byte
  double factor;              // busbw factor of the collective on the group
  double local_us;            // the ring's local pass, S/n at nvlink_local_bw (0: none)
};

FastCollective fast_collective(const NcclTopology& t, CollectiveKind kind, Bytes bytes, int ranks, int nodes) {
  FastCollective c;
  c.kind = kind;
  c.n = ranks;
  c.nn = std::max(1, nodes);
  c.ppn = std::max(1, (c.n + c.nn - 1) / c.nn);
  c.nics = std::max(1, std::min(c.ppn, t.nics_per_node));
  c.multi = c.nn > 1;
  c.rooted = kind == CollectiveKind::Broadcast || kind == CollectiveKind::Reduce;
  c.nsteps = ring_steps(kind, c.n);
  c.crossing = inter_steps(kind, c.nn);
  c.arch = static_cast<int>(t.arch);
  c.S = static_cast<double>(bytes.count);
  c.s_nvl = t.nvlink_latency_scale;
  c.s_net = t.net_latency_scale;
  c.nvl_bw = t.nvlink_busbw.bytes_per_s;
  c.nic_bw = t.nic_bw.bytes_per_s;
  c.ll_max = (c.multi ? kLlMaxBwGBps[0][c.nn <= 2 ? 1 : 2] : kLlMaxBwGBps[c.arch][0]) * 1e9;
  const double net_total = c.nics * c.nic_bw;
  const bool nvlink_bound = !c.multi || (c.nvl_bw > 0 && c.nvl_bw < net_total && c.ppn > 1);
  c.ring_bw = nvlink_bound ? c.nvl_bw : net_total;  // path bus bandwidth
  c.inv_ring = c.ring_bw > 0 ? 1e6 / c.ring_bw : std::numeric_limits<double>::infinity();
  c.factor = busbw_factor(kind, c.n);
  c.local_us = t.nvlink_local_bw.bytes_per_s > 0 ? c.S / c.n / t.nvlink_local_bw.bytes_per_s * 1e6 : 0;
  return c;
}

// The fastest ring over the protocols (LL, LL128 where enabled, Simple), in us.
double fast_ring_us(const NcclTopology& t, const FastCollective& c) {
  const double plateau = (c.kind == CollectiveKind::AllReduce && c.multi && c.S / (static_cast<double>(t.channels) * c.n) >= 64)
                             ? (c.arch >= static_cast<int>(NcclArch::Ampere) ? 1.4 : 1.9)
                             : 1.0;
  double best = std::numeric_limits<double>::infinity();
  static constexpr double kRingEff[3] = {0.5, 0.92, 1.0};
  for (int p = 0; p < 3; ++p) {
    if (p == 1 && !t.ll128) continue;
    if (c.rooted) {
      double hop = c.multi ? (p == 2 ? kNetHopUs[0][2] : kNetHopUs[1][p]) : (p == 2 ? kNvlinkHopUs[0][2] : kNvlinkHopUs[1][p]);
      double lat = kBaseLatencyUs[1][p] + c.nsteps * hop * (c.multi ? c.s_net : c.s_nvl);
      best = std::min(best, lat + c.S / kRingEff[p] * c.inv_ring);
      continue;
    }
    double fixed = kBaseLatencyUs[1][p], intra = kNvlinkHopUs[1][p] * c.s_nvl;
    double inter = (c.ppn == 1 ? kNetHopUs[0][p] : kNetHopUs[1][p]) * c.s_net;
    if (c.multi) intra = std::max(intra, p == 2 ? 3.0 : 1.0);
    double lat = fixed + (c.nsteps - c.crossing) * intra + c.crossing * inter;
    if (p == 2) lat *= plateau;
    double bw_us = (p == 0 && c.ring_bw * 0.5 > c.ll_max) ? c.S * c.factor / c.ll_max * 1e6 : c.S * c.factor / kRingEff[p] * c.inv_ring;
    best = std::min(best, lat + bw_us + c.local_us);
  }
  return best;
}

// The fastest tree all-reduce over the protocols, in us (infinite for other collectives or
// without trees).
double fast_tree_us(const NcclTopology& t, const FastCollective& c, Bytes bytes) {
  double best = std::numeric_limits<double>::infinity();
  if (c.kind != CollectiveKind::AllReduce || !t.tree) return best;
  int log_size = log2i(bytes.count >> 6);
  for (int p = 0; p < 3; ++p) {
    if (p == 1 && !t.ll128) continue;
    double eff = 0.92 * (p == 0 ? 1.0 / 3.8 : p == 1 ? (c.multi ? 120.0 / 128.0 : 7.0 / 9.0) : 1.0);
    if (log_size >= 0 && log_size < 23) eff *= kTreeCorrection[p][log_size];
    double lat = kBaseLatencyUs[0][p] + 2.0 * (c.ppn - 1) * kNvlinkHopUs[0][p] * c.s_nvl +
                 2.0 * log2i(c.nn) * kNetHopUs[0][p] * c.s_net;
    double bw_us = (p == 0 && c.ring_bw * eff > c.ll_max) ? 2 * c.S / c.ll_max * 1e6 : 2 * c.S / eff * c.inv_ring;
    best = std::min(best, lat + bw_us);
  }
  return best;
}

// NVLink SHARP (Simple): in one node any unrooted collective, across nodes the all-reduce
// (NVLS inside, the network between); in us, infinite where NVLS does not apply.
double fast_nvls_us(const NcclTopology& t, const FastCollective& c) {
  const double nvls_bw = t.nvls_bw.bytes_per_s;
  if (!(nvls_bw > 0 && c.ppn > 1)) return std::numeric_limits<double>::infinity();
  if (!c.multi && !c.rooted) {
    double wire = c.kind == CollectiveKind::AllReduce ? c.S * (c.n + 1) / c.n : c.S * (c.n - 1) / c.n;
    return kNvlinkHopUs[2][2] * c.s_nvl + wire / nvls_bw * 1e6;
  }
  if (c.multi && c.kind == CollectiveKind::AllReduce) {
    double lat = kNvlinkHopUs[3][2] * c.s_nvl + 2.0 * log2i(c.nn) * kNetHopUs[3][2] * c.s_net;
    double t_nvls = c.S * (c.ppn + 1) / c.ppn / nvls_bw, t_net = 2 * c.S / c.nics / c.nic_bw;
    return lat + std::max(t_nvls, t_net) * 1e6;
  }
  return std::numeric_limits<double>::infinity();
}

// PAT (one GPU per node, all-gather / reduce-scatter), in us; infinite where it does not apply.
double fast_pat_us(const FastCollective& c) {
  if (!c.multi || c.ppn != 1 || (c.kind != CollectiveKind::AllGather && c.kind != CollectiveKind::ReduceScatter))
    return std::numeric_limits<double>::infinity();
  return kBaseLatencyUs[4][2] + 2.8 * c.n + log2i(c.nn) * kNetHopUs[0][2] / 3.5 * c.s_net + c.S * c.factor / 0.75 * c.inv_ring;
}

}  // namespace

// The engine's entry point: the same minimum as nccl_choice over the same candidates, computed
// without building them (one division per bandwidth level, no per-candidate structs); the
// unit tests hold the two equal over a grid of shapes and sizes. bench/collective_bench.cpp
// measures the cost per call against the alpha-beta lookup.
Time topology_collective_time(const NcclTopology& fabric, CollectiveKind kind, Bytes bytes, int ranks, int nodes) {
  if (ranks <= 1 || bytes.count <= 0) return Time::zero();
  NcclTopology scratch;
  const NcclTopology& t = across_spine(fabric, nodes, scratch);
  if (kind == CollectiveKind::AllToAll) return nccl_choice(fabric, kind, bytes, ranks, nodes).time;
  const FastCollective c = fast_collective(t, kind, bytes, ranks, nodes);
  double best = fast_ring_us(t, c);
  best = std::min(best, fast_tree_us(t, c, bytes));
  best = std::min(best, fast_nvls_us(t, c));
  best = std::min(best, fast_pat_us(c));
  return Time{std::llround(best * 1e3)};
}

std::vector<std::string> collective_extrapolations(const HardwareProfile& hw, const std::vector<CommDecl>& comms) {
  std::vector<std::string> out;
  if (!hw.topology || hw.topology->fitted.empty()) return out;
  const FittedRange& f = hw.topology->fitted;
  for (const auto& c : comms) {
    if (c.ranks <= 1 || f.covers(c.ranks, c.nodes)) continue;
    out.push_back(c.name + ": " + std::to_string(c.ranks) + " ranks on " + std::to_string(c.nodes) +
                  " node(s), outside the fitted " + std::to_string(f.min_ranks) + "-" + std::to_string(f.max_ranks) +
                  " ranks, " + std::to_string(f.min_nodes) + "-" + std::to_string(f.max_nodes) + " nodes, " +
                  std::to_string(f.min_gpus_per_node) + "-" + std::to_string(f.max_gpus_per_node) + " GPUs per node");
  }
  return out;
}

bool FittedRange::covers(int ranks, int nodes) const {
  int n = std::max(1, nodes);
  int ppn = (ranks + n - 1) / n;
  return ranks >= min_ranks && ranks <= max_ranks && n >= min_nodes && n <= max_nodes && ppn >= min_gpus_per_node &&
         ppn <= max_gpus_per_node;
}

Time collective_time(const HardwareProfile& hw, CollectiveKind kind, Bytes bytes, const CommDecl& comm) {
  if (hw.topology) return topology_collective_time(*hw.topology, kind, bytes, comm.ranks, comm.nodes);
  const ScopeModel& m = comm.nodes <= 1 ? hw.intra_node : hw.inter_node;
  return scope_collective_time(m, kind, bytes, comm.ranks, comm.nodes);
}

NcclTestsSizes nccl_tests_sizes(CollectiveKind kind, std::int64_t bytes, int nranks, Dtype dtype) {
  if (nranks < 1) throw std::invalid_argument("collective_sizes: nranks < 1");
  const std::int64_t elem = dtype_bytes(dtype);
  const std::int64_t n = nranks;
  NcclTestsSizes s;
  switch (kind) {
    case CollectiveKind::AllReduce:
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce:
      s.count = std::max<std::int64_t>(1, bytes / elem);
      s.send_bytes = s.recv_bytes = s.total_bytes = s.count * elem;
      break;
    case CollectiveKind::AllGather:
      s.count = std::max<std::int64_t>(1, bytes / (elem * n));
      s.send_bytes = s.count * elem;
      s.recv_bytes = s.total_bytes = s.count * elem * n;
      break;
    case CollectiveKind::ReduceScatter:
      s.count = std::max<std::int64_t>(1, bytes / (elem * n));
      s.send_bytes = s.total_bytes = s.count * elem * n;
      s.recv_bytes = s.count * elem;
      break;
    case CollectiveKind::AllToAll:
      s.count = std::max<std::int64_t>(1, bytes / (elem * n));
      s.send_bytes = s.recv_bytes = s.total_bytes = s.count * elem * n;
      break;
  }
  return s;
}

}  // namespace stepsim
