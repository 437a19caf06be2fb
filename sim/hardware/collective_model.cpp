#include "sim/hardware/collective_model.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

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
static std::pair<const std::vector<AlphaBetaRange>*, int> nearest_group(const ScopeModel& m, CollectiveKind kind, int n) {
  auto it = m.alpha_beta.find(kind);
  const std::vector<AlphaBetaRange>* ranges = it != m.alpha_beta.end() ? &it->second : &m.default_ranges;
  auto measured = m.alpha_beta_ranks.find(kind);
  if (it == m.alpha_beta.end() || measured == m.alpha_beta_ranks.end()) return {ranges, 0};
  int ranks = measured->second;
  auto distance = [n](int r) { return std::abs(std::log(static_cast<double>(n) / r)); };
  if (auto groups = m.alpha_beta_groups.find(kind); groups != m.alpha_beta_groups.end())
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
static Time alpha_beta_time(const ScopeModel& m, CollectiveKind kind, Bytes bytes, int n) {
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
static Time ring_time(const ScopeModel& m, CollectiveKind kind, Bytes bytes, int n, int nodes) {
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
static Time tree_time(const ScopeModel& m, CollectiveKind kind, Bytes bytes, int n, int nodes) {
  if (kind != CollectiveKind::AllReduce) return ring_time(m, kind, bytes, n, nodes);
  int ppn = std::max(1, n / std::max(1, nodes));
  double levels = 2.0 * ((ppn - 1) + std::log2(std::max(1, nodes)));
  Bandwidth bw = m.tree_busbw.bytes_per_s > 0 ? m.tree_busbw : m.busbw;
  Time lat = m.tree_step_latency.ns > 0 ? m.tree_step_latency : m.step_latency;
  return m.base_latency + Time{std::llround(lat.ns * levels)} + transfer_time(Bytes{2 * bytes.count}, bw);
}

// Measured table: pick the nearest measured group size, convert each point to bus bandwidth
// (which is what carries across group sizes), interpolate log-linearly in size, and convert
// back with this group's factor. Below the smallest size the time is constant (latency
// bound); above the largest the last point's bus bandwidth holds.
static Time table_time(const ScopeModel& m, CollectiveKind kind, Bytes bytes, int n) {
  auto kit = m.table.find(kind);
  if (kit == m.table.end() || kit->second.empty()) {
    // Fall back to any kind measured, scaled by bus-bandwidth factor (AR data for AG, say).
    if (m.table.empty()) return Time::zero();
    kit = m.table.find(CollectiveKind::AllReduce);
    if (kit == m.table.end()) kit = m.table.begin();
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
  switch (m.kind) {
    case CollectiveModelKind::AlphaBeta: return alpha_beta_time(m, kind, bytes, ranks);
    case CollectiveModelKind::Ring: return ring_time(m, kind, bytes, ranks, nodes);
    case CollectiveModelKind::Tree: return tree_time(m, kind, bytes, ranks, nodes);
    case CollectiveModelKind::Nccl:
      // NCCL picks the faster algorithm (C6.4): the tree only for all-reduce.
      return std::min(ring_time(m, kind, bytes, ranks, nodes), tree_time(m, kind, bytes, ranks, nodes));
    case CollectiveModelKind::Table: return table_time(m, kind, bytes, ranks);
  }
  return Time::zero();
}

Time collective_time(const HardwareProfile& hw, CollectiveKind kind, Bytes bytes, const CommDecl& comm) {
  const ScopeModel& m = comm.nodes <= 1 ? hw.intra_node : hw.inter_node;
  return scope_collective_time(m, kind, bytes, comm.ranks, comm.nodes);
}

}  // namespace stepsim
