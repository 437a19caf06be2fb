#include "trace/trace_index.hpp"

#include <algorithm>
#include <numeric>

namespace stepsim::trace {

static_assert(kMaxTraceRecords <= UINT32_MAX, "TraceIndex::launch_ holds runtime indices in 32 bits");

TraceIndex::TraceIndex(const KinetoTrace& t) : t_(t) {
  launch_.resize(t.runtime.size());  // the reader bounds records per kind far below 2^32
  std::iota(launch_.begin(), launch_.end(), std::uint32_t{0});
  std::stable_sort(launch_.begin(), launch_.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return t.runtime[a].correlation < t.runtime[b].correlation; });

  std::map<std::int64_t, const CpuSpan*> by_number;
  for (const auto& s : t.cpu) {
    if (s.kind == CpuSpan::Kind::Step) {
      by_number.emplace(s.step_number, &s);
    } else {
      spans_[{static_cast<int>(s.kind), s.thread}].push_back(&s);
    }
  }
  for (const auto& [n, s] : by_number) steps_.push_back(s);
  std::stable_sort(steps_.begin(), steps_.end(), [](const CpuSpan* a, const CpuSpan* b) { return a->start < b->start; });
  for (auto& [key, v] : spans_)
    std::stable_sort(v.begin(), v.end(), [](const CpuSpan* a, const CpuSpan* b) { return a->start < b->start; });

  bwd_start_.assign(steps_.size(), Time::infinite());
  opt_start_.assign(steps_.size(), Time::infinite());
  for (const auto& s : t.cpu) {
    if (s.kind != CpuSpan::Kind::Backward && s.kind != CpuSpan::Kind::Optimizer) continue;
    auto st = step_at(s.start);
    if (!st) continue;
    auto& slot = s.kind == CpuSpan::Kind::Backward ? bwd_start_[*st] : opt_start_[*st];
    slot = std::min(slot, s.start);
  }

  for (const auto& m : t.memory) memory_[m.device].push_back(&m);
  for (auto& [d, v] : memory_)
    std::stable_sort(v.begin(), v.end(), [](const MemSample* a, const MemSample* b) { return a->time < b->time; });
}

const RuntimeCall* TraceIndex::launch_of(const GpuOp& op) const {
  if (op.correlation < 0) return nullptr;
  auto it = std::lower_bound(launch_.begin(), launch_.end(), op.correlation,
                             [&](std::uint32_t i, std::int64_t c) { return t_.runtime[i].correlation < c; });
  return it == launch_.end() || t_.runtime[*it].correlation != op.correlation ? nullptr : &t_.runtime[*it];
}

Time TraceIndex::anchor(const GpuOp& op) const {
  const RuntimeCall* r = launch_of(op);
  return r ? r->start : op.start;
}

std::optional<std::size_t> TraceIndex::step_at(Time t) const {
  // The last span starting at or before t; adjacent spans give a tie to the later one.
  auto it = std::upper_bound(steps_.begin(), steps_.end(), t, [](Time x, const CpuSpan* s) { return x < s->start; });
  if (it == steps_.begin()) return std::nullopt;
  --it;
  if (t > (*it)->end) return std::nullopt;
  return static_cast<std::size_t>(it - steps_.begin());
}

std::optional<std::size_t> TraceIndex::step_of(const GpuOp& op) const { return step_at(anchor(op)); }

Phase TraceIndex::kineto_phase(std::size_t step, Time anchor) const {
  if (anchor < bwd_start_[step] && anchor < opt_start_[step]) return Phase::Forward;
  if (anchor < opt_start_[step]) return Phase::Backward;
  return Phase::Optimizer;
}

Phase TraceIndex::phase_of(std::size_t step, const GpuOp& op) const {
  if (op.phase < 0) return kineto_phase(step, anchor(op));
  const std::string_view p = t_.phase_of(op);
  if (p == "forward") return Phase::Forward;
  if (p == "backward") return Phase::Backward;
  if (p == "optimizer") return Phase::Optimizer;
  return Phase::Setup;
}

std::vector<const CpuSpan*> TraceIndex::enclosing(CpuSpan::Kind kind, std::int64_t thread, Time t) const {
  std::vector<const CpuSpan*> out;
  auto it = spans_.find({static_cast<int>(kind), thread});
  if (it == spans_.end()) return out;
  const auto& v = it->second;
  auto end = std::upper_bound(v.begin(), v.end(), t, [](Time x, const CpuSpan* s) { return x < s->start; });
  // Communication and GEMM ops nest at most a few deep and are short: a bounded scan back.
  int scanned = 0;
  for (auto i = end; i != v.begin() && scanned < 16; ++scanned) {
    --i;
    if ((*i)->start <= t && t <= (*i)->end) out.push_back(*i);
  }
  return out;
}

std::vector<const MemSample*> TraceIndex::memory_in(int device, Time start, Time end) const {
  std::vector<const MemSample*> out;
  auto it = memory_.find(device);
  if (it == memory_.end()) return out;
  const auto& v = it->second;
  auto lo = std::lower_bound(v.begin(), v.end(), start, [](const MemSample* s, Time x) { return s->time < x; });
  for (; lo != v.end() && (*lo)->time <= end; ++lo) out.push_back(*lo);
  return out;
}

CollectiveRecord TraceIndex::resolve_collective(std::size_t index) const {
  const GpuOp& op = t_.gpu_ops[index];
  const std::string& name = t_.name_of(op);
  CollectiveRecord r;
  r.op = index;
  CommParams p = t_.comm_of(op);
  bool from_kernel = p.in_elems >= 0 || p.bytes >= 0;
  r.source = from_kernel ? (t_.stepsim_trace ? "stepsim args" : "kernel args") : "";
  if (const RuntimeCall* launch = launch_of(op); launch && !from_kernel) {
    auto spans = enclosing(CpuSpan::Kind::CommOp, launch->thread, launch->start);
    // Sizes from the innermost op that recorded them; the kind from the innermost that names it
    // (nccl:all_to_all launches SendRecv kernels: the op's kind wins over the kernel's).
    for (const CpuSpan* s : spans) {
      const CommParams& c = t_.comm_of(*s);
      if (c.in_elems >= 0 && p.in_elems < 0) {
        p.in_elems = c.in_elems;
        p.out_elems = c.out_elems;
        p.elem_bytes = c.elem_bytes;
        p.dtype = c.dtype;
        if (p.group_size == 0) p.group_size = c.group_size;
        if (p.group_name.empty()) p.group_name = c.group_name;
        r.source = t_.names[static_cast<std::size_t>(s->name)];
      }
      if (p.kind == TraceCollective::Unknown && c.kind != TraceCollective::Unknown) p.kind = c.kind;
      if (p.group_size == 0 && c.group_size > 0) p.group_size = c.group_size;
    }
  }
  if (p.kind == TraceCollective::Unknown) p.kind = collective_from_kernel_name(name);
  if (p.dtype.empty()) {
    p.dtype = dtype_from_kernel_name(name);
    if (p.elem_bytes == 0) p.elem_bytes = dtype_bytes_from_name(p.dtype);
  }
  if (r.source.empty()) r.source = "kernel name";
  r.kind = p.kind;
  r.dtype = canonical_dtype(p.dtype);
  r.group_size = p.group_size;
  if (r.group_size <= 0 && t_.world_size > 0) {
    r.group_size = t_.world_size;
    r.group_assumed = true;
  }
  if (p.bytes >= 0) {
    r.bytes = Bytes{p.bytes};
  } else if (p.in_elems >= 0 && p.elem_bytes > 0) {
    // nccl-tests S: all-gather counts the gathered output, reduce-scatter the whole input,
    // the others the (per-rank) buffer. PyTorch records the per-rank input (and, in
    // record_param_comms, the output).
    std::int64_t eb = p.elem_bytes;
    if (p.kind == TraceCollective::AllGather)
      r.bytes = Bytes{p.out_elems >= 0 ? p.out_elems * eb : p.in_elems * eb * std::max(r.group_size, 1)};
    else
      r.bytes = Bytes{p.in_elems * eb};
  }
  return r;
}

}  // namespace stepsim::trace
