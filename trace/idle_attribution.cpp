#include "trace/idle_attribution.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <string_view>
#include <unordered_map>

#include "trace/trace_index.hpp"

namespace stepsim::trace {

namespace {

bool is_sync_call(std::string_view name) {
  return name.find("Synchronize") != std::string_view::npos || name.find("Memcpy") != std::string_view::npos;
}

// Host operators and runtime calls of each thread, by start, for "what encloses time t".
class HostLookup {
 public:
  explicit HostLookup(const KinetoTrace& t) : t_(t) {
    for (const HostOp& o : t.host_ops) ops_[o.thread].push_back(&o);
    for (const RuntimeCall& r : t.runtime)
      if (r.name >= 0 && is_sync_call(t.names[static_cast<std::size_t>(r.name)])) syncs_[r.thread].push_back(&r);
    for (auto& [th, v] : ops_) std::stable_sort(v.begin(), v.end(), [](const HostOp* a, const HostOp* b) { return a->start < b->start; });
    for (auto& [th, v] : syncs_)
      std::stable_sort(v.begin(), v.end(), [](const RuntimeCall* a, const RuntimeCall* b) { return a->start < b->start; });
  }

  // "outermost > innermost" of the operators containing `at` on `thread`; "" when none.
  std::string ops_at(std::int64_t thread, Time at) const {
    auto it = ops_.find(thread);
    if (it == ops_.end()) return {};
    const auto& v = it->second;
    auto end = std::upper_bound(v.begin(), v.end(), at, [](Time x, const HostOp* o) { return x < o->start; });
    // The outermost op can start long before `at` (a whole autograd node); operators nest, so
    // walk back over the ones that end before `at` until one contains it, then on to the outermost.
    const HostOp* inner = nullptr;
    const HostOp* outer = nullptr;
    int misses = 0;
    for (auto i = end; i != v.begin();) {
      --i;
      if ((*i)->start <= at && at <= (*i)->end) {
        if (!inner) inner = *i;
        outer = *i;
        misses = 0;
      } else if (++misses > 4096) {
        break;  // far before any open operator
      }
    }
    if (!inner) return {};
    const std::string& a = t_.names[static_cast<std::size_t>(outer->name)];
    const std::string& b = t_.names[static_cast<std::size_t>(inner->name)];
    return outer == inner ? a : a + " > " + b;
  }

  // The synchronising runtime call on `thread` in progress at `gpu_dry` (started at or before it)
  // that returned after it and no later than `launch`; nullptr if none.
  const RuntimeCall* wait_across(std::int64_t thread, Time gpu_dry, Time launch) const {
    auto it = syncs_.find(thread);
    if (it == syncs_.end()) return nullptr;
    const auto& v = it->second;
    auto end = std::upper_bound(v.begin(), v.end(), gpu_dry, [](Time x, const RuntimeCall* r) { return x < r->start; });
    for (int scanned = 0; end != v.begin() && scanned < 8; ++scanned) {
      --end;
      const RuntimeCall* r = *end;
      if (r->end >= gpu_dry && r->end <= launch) return r;
    }
    return nullptr;
  }

 private:
  const KinetoTrace& t_;
  std::unordered_map<std::int64_t, std::vector<const HostOp*>> ops_;
  std::unordered_map<std::int64_t, std::vector<const RuntimeCall*>> syncs_;
};

// "<built-in method to of Tensor object at 0x7f392ca6f770>" -> "<built-in method to of Tensor
// object>": a Python frame's name without the object's address, so that the same call on another
// object (every step's batch) is one frame.
std::string without_address(std::string_view name) {
  constexpr std::string_view kAt = " at 0x";
  std::string out;
  for (std::size_t pos = 0;;) {
    const std::size_t at = name.find(kAt, pos);
    if (at == std::string_view::npos) return out.append(name.substr(pos));
    std::size_t end = at + kAt.size();
    while (end < name.size() && std::isxdigit(static_cast<unsigned char>(name[end]))) ++end;
    out.append(name.substr(pos, at - pos));
    pos = end;
  }
}

// What the host ran during a stretch with no GPU op (a step's head or tail): the outermost Python
// frames of a thread inside it, or its CPU operators when the trace has no Python frame on that
// thread (recorded without with_stack=True).
class FrameLookup {
 public:
  explicit FrameLookup(const KinetoTrace& t) : t_(t) {
    for (const HostOp& o : t.python_ops) python_[o.thread].ops.push_back(&o);
    // A thread's operators are its frames only where it has no Python frame.
    for (const HostOp& o : t.host_ops)
      if (!python_.contains(o.thread)) ops_[o.thread].ops.push_back(&o);
    for (auto* m : {&python_, &ops_})
      for (auto& [th, f] : *m) f.index();
  }

  // [from, to] on `thread`: the frames that overlap it but do not span it whole (those hold the
  // step: the training loop, the script), the outermost of them, each with its part inside; the
  // rest of the stretch as kNoHostFrame.
  std::vector<HostFrame> frames(std::int64_t thread, Time from, Time to) const {
    std::vector<HostFrame> out;
    if (to <= from) return out;
    const Frames* f = find(python_, thread);
    if (!f) f = find(ops_, thread);
    std::vector<const HostOp*> overlapping;
    if (f) {
      const auto& v = f->ops;
      auto first_inside = std::lower_bound(v.begin(), v.end(), from, [](const HostOp* o, Time x) { return o->start < x; });
      // The frames open at `from`: the last frame to start before it and its enclosing frames
      // that end after `from` (any frame open then encloses that last one).
      if (first_inside != v.begin())
        for (int i = static_cast<int>(first_inside - v.begin()) - 1; i >= 0; i = f->parent[static_cast<std::size_t>(i)])
          if (v[static_cast<std::size_t>(i)]->end > from && v[static_cast<std::size_t>(i)]->end < to) overlapping.push_back(v[static_cast<std::size_t>(i)]);
      std::reverse(overlapping.begin(), overlapping.end());  // outermost first
      for (auto i = first_inside; i != v.end() && (*i)->start < to; ++i)
        if (!((*i)->start <= from && (*i)->end >= to)) overlapping.push_back(*i);
    }
    Time covered;
    const HostOp* outer = nullptr;  // the last outermost frame
    for (const HostOp* o : overlapping) {  // by start, an enclosing frame before what it holds
      if (outer && o->start < outer->end) continue;  // inside it
      outer = o;
      const Time inside = std::min(o->end, to) - std::max(o->start, from);
      covered += inside;
      add_frame_time(out, without_address(t_.names[static_cast<std::size_t>(o->name)]), inside);
    }
    if (to - from > covered) add_frame_time(out, kNoHostFrame, to - from - covered);
    return out;
  }

 private:
  // One thread's frames by start (an enclosing frame before what it holds) and each one's
  // enclosing frame (-1: none), from one sweep with a stack of the open ones.
  struct Frames {
    std::vector<const HostOp*> ops;
    std::vector<int> parent;
    void index() {
      std::stable_sort(ops.begin(), ops.end(), [](const HostOp* a, const HostOp* b) {
        return a->start != b->start ? a->start < b->start : a->end > b->end;
      });
      parent.assign(ops.size(), -1);
      std::vector<int> open;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        while (!open.empty() && ops[static_cast<std::size_t>(open.back())]->end <= ops[i]->start) open.pop_back();
        if (!open.empty()) parent[i] = open.back();
        open.push_back(static_cast<int>(i));
      }
    }
  };
  using ByThread = std::unordered_map<std::int64_t, Frames>;
  static const Frames* find(const ByThread& m, std::int64_t thread) {
    auto it = m.find(thread);
    return it == m.end() ? nullptr : &it->second;
  }
  const KinetoTrace& t_;
  ByThread python_, ops_;
};

}  // namespace

std::optional<IdleAttribution> attribute_idle(const KinetoTrace& t, const TraceAnalysis& a, Time short_gap) {
  if (a.steps.empty() || t.stepsim_trace) return std::nullopt;
  const TraceIndex idx(t);
  const HostLookup host(t);
  const FrameLookup frames(t);
  const int dev = t.main_device();

  // Analysed step number -> index into idx.steps().
  std::map<std::int64_t, std::size_t> wanted;
  for (std::size_t i = 0; i < idx.steps().size(); ++i)
    for (const StepAnalysis& s : a.steps)
      if (s.number == idx.steps()[i]->step_number) wanted.emplace(s.number, i);
  std::map<std::size_t, std::vector<const GpuOp*>> ops;  // step index -> its GPU ops
  for (const auto& [n, step] : wanted) ops[step];
  for (const GpuOp& op : t.gpu_ops) {
    if (op.device != dev) continue;
    auto s = idx.step_of(op);
    if (s && ops.count(*s)) ops[*s].push_back(&op);
  }

  IdleAccumulator acc(short_gap);
  for (auto& [step, v] : ops) {
    std::stable_sort(v.begin(), v.end(), [](const GpuOp* x, const GpuOp* y) { return x->start < y->start; });
    const CpuSpan& span = *idx.steps()[step];
    acc.step(span.start, span.end, v, [&, step = step](const GpuOp& op, Time dry) {
      IdleAccumulator::Cause c{idx.kineto_phase(step, idx.anchor(op)), false, "(no launch record)"};
      if (const RuntimeCall* launch = idx.launch_of(op)) {
        const RuntimeCall* wait = host.wait_across(launch->thread, dry, launch->start);
        c.sync = wait != nullptr;
        c.what = host.ops_at(launch->thread, c.sync ? wait->start : launch->start);
        if (c.what.empty()) c.what = t.names[static_cast<std::size_t>(c.sync ? wait->name : launch->name)];
      }
      return c;
    });
    // The head and the tail, as IdleAccumulator::step measures them.
    if (!v.empty()) {
      Time last_end = v.front()->end;
      for (const GpuOp* op : v) last_end = std::max(last_end, op->end);
      acc.add_frames(false, frames.frames(span.thread, span.start, v.front()->start));
      acc.add_frames(true, frames.frames(span.thread, last_end, span.end));
    } else {
      acc.add_frames(false, frames.frames(span.thread, span.start, span.end));
    }
  }
  return acc.finish(wanted.size(), dev);
}

}  // namespace stepsim::trace
