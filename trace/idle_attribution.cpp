#include "trace/idle_attribution.hpp"

#include <algorithm>
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

}  // namespace

std::optional<IdleAttribution> attribute_idle(const KinetoTrace& t, const TraceAnalysis& a, Time short_gap) {
  if (a.steps.empty() || t.stepsim_trace) return std::nullopt;
  const TraceIndex idx(t);
  const HostLookup host(t);
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
  }
  return acc.finish(wanted.size(), dev);
}

}  // namespace stepsim::trace
