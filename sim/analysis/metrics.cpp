#include "sim/analysis/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace stepsim {

// Sorts [first, last) by `less`, moving only the elements out of place while they take at most
// 8 moves an element, then std::sort. A timeline's intervals come in issue order, which is
// nearly their start order: a sweep point's 2,079 kernels had 34 inversions (kernels of another
// stream), and std::sort took 36 us on them where this takes 1.8 us (Boost.Sort's adaptive
// flat_stable_sort 13.9 us, pdqsort 28.7 us); it was a tenth of a sweep point's metrics.
template <class It, class Less>
static void sort_nearly_sorted(It first, It last, Less less) {
  if (first == last) return;
  std::size_t budget = 8 * static_cast<std::size_t>(last - first);
  for (It i = first + 1; i != last; ++i) {
    if (!less(*i, *(i - 1))) continue;
    auto x = std::move(*i);
    It hole = i;
    while (hole != first && less(x, *(hole - 1))) {
      if (budget == 0) {
        *hole = std::move(x);  // a permutation of the input again
        std::sort(first, last, less);
        return;
      }
      --budget;
      *hole = std::move(*(hole - 1));
      --hole;
    }
    *hole = std::move(x);
  }
}

std::vector<Interval> merge_intervals(std::vector<Interval> v) {
  sort_nearly_sorted(v.begin(), v.end(), [](const Interval& a, const Interval& b) {
    return a.start < b.start || (a.start == b.start && a.end < b.end);
  });
  std::vector<Interval> out;
  out.reserve(v.size());
  for (const auto& iv : v) {
    if (iv.end <= iv.start) continue;
    if (!out.empty() && iv.start <= out.back().end) out.back().end = std::max(out.back().end, iv.end);
    else out.push_back(iv);
  }
  return out;
}

Time total_length(const std::vector<Interval>& merged) {
  Time t;
  for (const auto& iv : merged) t += iv.end - iv.start;
  return t;
}

Time intersection_length(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  Time t;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    Time lo = std::max(a[i].start, b[j].start);
    Time hi = std::min(a[i].end, b[j].end);
    if (lo < hi) t += hi - lo;
    if (a[i].end < b[j].end) ++i;
    else ++j;
  }
  return t;
}

static std::vector<Interval> clip(const std::vector<Interval>& v, Time start, Time end) {
  std::vector<Interval> out;
  out.reserve(v.size());
  for (const auto& iv : v) {
    Interval c{std::max(iv.start, start), std::min(iv.end, end)};
    if (c.start < c.end) out.push_back(c);
  }
  return merge_intervals(std::move(out));
}

OverlapMetrics overlap_metrics(const std::vector<Interval>& compute, const std::vector<Interval>& comm, Time start,
                               Time end) {
  OverlapMetrics m;
  auto cu = clip(compute, start, end);
  auto co = clip(comm, start, end);
  m.step_time = end - start;
  m.compute_time = total_length(cu);
  m.comm_time = total_length(co);
  m.overlapped_comm = intersection_length(cu, co);
  m.exposed_comm = m.comm_time - m.overlapped_comm;
  m.overlap_pct = m.comm_time.ns > 0 ? 100.0 * static_cast<double>(m.overlapped_comm.ns) / m.comm_time.ns : 0.0;
  // Busy = compute U comm = compute + comm - overlap.
  m.idle = m.step_time - (m.compute_time + m.comm_time - m.overlapped_comm);
  return m;
}

// Phases as a profiler shows them over gradient accumulation (issue 48): the ops, in issue
// order, fall into runs of one phase (forward of micro-batch 1, its backward, forward of
// micro-batch 2, ..., the optimizer); each run owns the step from the end of the run before it
// (the step's start for the first) to the end of its last op, the last run to the step's end,
// and a phase is the sum of its runs. With one micro-batch this is forward up to the last
// forward op, backward up to the last backward op, optimizer to the end (what follows the last
// run is optimizer time); the phases still partition the step.
static void phase_times(const Timeline& t, Metrics& m) {
  Time boundary = t.start;
  Time* current = nullptr;
  Time run_end = t.start;
  auto close = [&](Time end) {
    if (!current) return;
    end = std::max(end, boundary);
    *current = *current + (end - boundary);
    boundary = end;
  };
  for (const auto& op : t.ops) {
    if (op.kind == TimelineOp::Kind::Marker || op.memcpy()) continue;
    Time* phase = op.phase == Phase::Backward    ? &m.backward
                  : op.phase == Phase::Optimizer ? &m.optimizer
                  : op.phase == Phase::Forward   ? &m.forward
                                                 : nullptr;
    if (!phase) continue;
    if (phase != current) {
      close(run_end);
      current = phase;
      run_end = boundary;
    }
    run_end = std::max(run_end, op.end);
  }
  close(run_end);
  // What follows the last backward op (the optimizer, the loop's own host time) is optimizer.
  if (t.end > boundary) m.optimizer = m.optimizer + (t.end - boundary);
}

Metrics compute_metrics(const Timeline& t) {
  Metrics m;
  std::vector<Interval> compute, comm;
  compute.reserve(t.ops.size());
  for (const auto& op : t.ops) {
    if (op.kind == TimelineOp::Kind::Marker) continue;
    // A memcpy is neither compute nor communication, as `analyze` (and HTA) count a trace's
    // Memcpy/Memset ops: its time is idle, not busy.
    if (op.memcpy()) continue;
    Interval iv{op.start, op.end};
    if (op.kind == TimelineOp::Kind::Kernel) compute.push_back(iv);
    else comm.push_back(iv);
  }
  m.overlap = overlap_metrics(compute, comm, t.start, t.end);
  phase_times(t, m);

  const MemorySample* peak = nullptr;
  for (const auto& s : t.memory)
    if (!peak || s.total > peak->total) peak = &s;
  if (peak) {
    m.peak_memory = peak->total;
    for (int c = 0; c < kMemCategoryCount && c < static_cast<int>(peak->by_category.size()); ++c)
      m.peak_breakdown[to_string(static_cast<MemCategory>(c))] = peak->by_category[c];
    m.peak_time = peak->time - t.start;
    // The host program's phase at the peak: ops are in issue order.
    const TimelineOp* at_peak = nullptr;
    for (const auto& op : t.ops) {
      if (op.kind == TimelineOp::Kind::Marker) continue;
      if (op.issue > peak->time) break;
      at_peak = &op;
    }
    m.peak_phase = at_peak ? to_string(at_peak->phase) : "forward";
    m.persistent_memory = t.memory.back().total;
  }
  for (const auto& s : t.memory) m.peak_reserved = std::max(m.peak_reserved, s.reserved);
  m.non_pytorch = t.non_pytorch;
  m.non_pytorch_parts = t.non_pytorch_parts;
  m.capacity = t.capacity;
  // What decides an OOM is what the allocator asks cudaMalloc for, on top of what others hold.
  // A timeline without allocator data (measured, or older) falls back to the allocated peak.
  m.alloc_retries = t.alloc_retries;
  m.alloc_ooms = t.alloc_ooms;
  Bytes needed = std::max(m.peak_reserved, m.peak_memory) + m.non_pytorch;
  m.fits = t.capacity.count == 0 || (needed <= t.capacity && m.alloc_retries == 0 && m.alloc_ooms == 0);
  m.fits_allocated = t.capacity.count == 0 || m.peak_memory + m.non_pytorch <= t.capacity;
  for (Time w : t.rank_wait) m.rank_wait += w;
  return m;
}

std::string memory_verdict(const Metrics& m) {
  if (m.fits) return "fits";
  if (!m.fits_allocated) return "DOES NOT FIT";
  if (m.alloc_ooms > 0)
    return fmt::format("AT RISK: {} cudaMalloc{} fail{} even after flushing the allocator's cache, though the "
                       "allocated bytes fit",
                       m.alloc_ooms, m.alloc_ooms == 1 ? "" : "s", m.alloc_ooms == 1 ? "s" : "");
  if (m.alloc_retries > 0)
    return fmt::format("fits with {} allocator cache flush{} per step (num_alloc_retries)", m.alloc_retries,
                       m.alloc_retries == 1 ? "" : "es");
  return "fits by flushing the allocator's cache";  // a result without retry counts (older JSON)
}

nlohmann::json memory_summary_json(const Metrics& m) {
  nlohmann::json outside = nlohmann::json::object();
  for (const auto& part : m.non_pytorch_parts) outside[part.name] = part.bytes.count;
  return {{"peak_memory_bytes", m.peak_memory.count}, {"peak_reserved_bytes", m.peak_reserved.count},
          {"non_pytorch_bytes", m.non_pytorch.count},  {"non_pytorch_breakdown", outside},
          {"memory_capacity_bytes", m.capacity.count}, {"headroom_bytes", m.headroom().count},
          {"fits", m.fits}};
}

nlohmann::json metrics_to_json(const Metrics& m) {
  nlohmann::json breakdown = nlohmann::json::object();
  for (const auto& [k, v] : m.peak_breakdown) breakdown[k] = v.count;
  nlohmann::json outside = nlohmann::json::object();
  for (const auto& p : m.non_pytorch_parts) outside[p.name] = p.bytes.count;
  nlohmann::json out = {{"step_time_ns", m.overlap.step_time.ns},
          {"compute_time_ns", m.overlap.compute_time.ns},
          {"comm_time_ns", m.overlap.comm_time.ns},
          {"overlapped_comm_ns", m.overlap.overlapped_comm.ns},
          {"exposed_comm_ns", m.overlap.exposed_comm.ns},
          {"overlap_pct", m.overlap.overlap_pct},
          {"idle_ns", m.overlap.idle.ns},
          {"phases", {{"forward_ns", m.forward.ns}, {"backward_ns", m.backward.ns}, {"optimizer_ns", m.optimizer.ns}}},
          {"peak_memory_bytes", m.peak_memory.count},
          {"peak_memory_breakdown", breakdown},
          {"peak_memory_time_ns", m.peak_time.ns},
          {"peak_memory_phase", m.peak_phase},
          {"persistent_memory_bytes", m.persistent_memory.count},
          {"peak_reserved_bytes", m.peak_reserved.count},
          {"non_pytorch_bytes", m.non_pytorch.count},
          {"non_pytorch_breakdown", outside},
          {"memory_capacity_bytes", m.capacity.count},
          {"headroom_bytes", m.headroom().count},
          {"alloc_retries_per_step", m.alloc_retries},
          {"alloc_ooms_per_step", m.alloc_ooms},
          {"fits", m.fits},
          {"fits_allocated", m.fits_allocated}};
  if (m.rank_wait.ns > 0) out["rank_wait_ns"] = m.rank_wait.ns;
  return out;
}

Metrics metrics_from_json(const nlohmann::json& j) {
  auto need = [&](const char* k) -> const nlohmann::json& {
    if (!j.contains(k)) throw std::runtime_error(std::string("metrics: missing field ") + k);
    return j.at(k);
  };
  Metrics m;
  m.overlap.step_time = Time{need("step_time_ns").get<std::int64_t>()};
  m.overlap.compute_time = Time{need("compute_time_ns").get<std::int64_t>()};
  m.overlap.comm_time = Time{need("comm_time_ns").get<std::int64_t>()};
  m.overlap.overlapped_comm = Time{need("overlapped_comm_ns").get<std::int64_t>()};
  m.overlap.exposed_comm = Time{need("exposed_comm_ns").get<std::int64_t>()};
  m.overlap.overlap_pct = need("overlap_pct").get<double>();
  m.overlap.idle = Time{need("idle_ns").get<std::int64_t>()};
  m.rank_wait = Time{j.value("rank_wait_ns", std::int64_t{0})};
  const auto& ph = need("phases");
  m.forward = Time{ph.value("forward_ns", std::int64_t{0})};
  m.backward = Time{ph.value("backward_ns", std::int64_t{0})};
  m.optimizer = Time{ph.value("optimizer_ns", std::int64_t{0})};
  m.peak_memory = Bytes{need("peak_memory_bytes").get<std::int64_t>()};
  if (j.contains("peak_memory_breakdown"))
    for (auto it = j["peak_memory_breakdown"].begin(); it != j["peak_memory_breakdown"].end(); ++it)
      m.peak_breakdown[it.key()] = Bytes{it.value().get<std::int64_t>()};
  m.peak_time = Time{j.value("peak_memory_time_ns", std::int64_t{0})};
  m.peak_phase = j.value("peak_memory_phase", std::string{});
  m.persistent_memory = Bytes{j.value("persistent_memory_bytes", std::int64_t{0})};
  m.peak_reserved = Bytes{j.value("peak_reserved_bytes", std::int64_t{0})};
  m.non_pytorch = Bytes{j.value("non_pytorch_bytes", std::int64_t{0})};
  if (j.contains("non_pytorch_breakdown") && j["non_pytorch_breakdown"].is_object())
    for (auto it = j["non_pytorch_breakdown"].begin(); it != j["non_pytorch_breakdown"].end(); ++it)
      m.non_pytorch_parts.push_back(NonPytorchPart{it.key(), "", Bytes{it.value().get<std::int64_t>()}});
  m.capacity = Bytes{j.value("memory_capacity_bytes", std::int64_t{0})};
  m.alloc_retries = j.value("alloc_retries_per_step", std::int64_t{0});
  m.alloc_ooms = j.value("alloc_ooms_per_step", std::int64_t{0});
  m.fits = j.value("fits", true);
  m.fits_allocated = j.value("fits_allocated", m.fits);
  return m;
}

}  // namespace stepsim
