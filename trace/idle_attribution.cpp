#include "trace/idle_attribution.hpp"

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/core/format.hpp"
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

Time per_step(Time total, std::size_t steps) { return Time::from_ns(total.ns / static_cast<std::int64_t>(std::max<std::size_t>(1, steps))); }

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
  for (const GpuOp& op : t.gpu_ops) {
    if (op.device != dev) continue;
    auto s = idx.step_of(op);
    if (s && std::any_of(wanted.begin(), wanted.end(), [&](const auto& w) { return w.second == *s; })) ops[*s].push_back(&op);
  }

  IdleAttribution r;
  r.device = dev;
  r.steps = wanted.size();
  r.short_gap = short_gap;
  Time head, tail, gaps, short_total, sync_total, phase_total[4];
  std::map<std::tuple<int, bool, std::string>, IdleCause> causes;
  for (auto& [step, v] : ops) {
    const CpuSpan& span = *idx.steps()[step];
    std::stable_sort(v.begin(), v.end(), [](const GpuOp* x, const GpuOp* y) { return x->start < y->start; });
    if (v.front()->start > span.start) head += v.front()->start - span.start;
    Time busy_end = v.front()->end;
    for (std::size_t k = 1; k < v.size(); ++k) {
      const GpuOp& op = *v[k];
      if (op.start > busy_end) {
        const Time gap = op.start - busy_end;
        gaps += gap;
        if (gap < short_gap) {
          short_total += gap;
          ++r.short_count;
        } else {
          const RuntimeCall* launch = idx.launch_of(op);
          const Phase phase = idx.kineto_phase(step, idx.anchor(op));
          bool sync = false;
          std::string what = "(no launch record)";
          if (launch) {
            const RuntimeCall* wait = host.wait_across(launch->thread, busy_end, launch->start);
            sync = wait != nullptr;
            what = host.ops_at(launch->thread, sync ? wait->start : launch->start);
            if (what.empty()) what = t.names[static_cast<std::size_t>(sync ? wait->name : launch->name)];
          }
          IdleCause& c = causes[{static_cast<int>(phase), sync, what}];
          c.phase = phase;
          c.sync = sync;
          c.ops = what;
          ++c.count;
          c.total += gap;
          c.max = std::max(c.max, gap);
          phase_total[static_cast<int>(phase)] += gap;
          if (sync) sync_total += gap;
        }
      }
      busy_end = std::max(busy_end, op.end);
    }
    if (span.end > busy_end) tail += span.end - busy_end;
  }
  // Steps with no GPU op at all: the whole span is head.
  for (const auto& [n, step] : wanted)
    if (!ops.count(step)) head += idx.steps()[step]->end - idx.steps()[step]->start;

  const std::size_t n = r.steps;
  r.head = per_step(head, n);
  r.tail = per_step(tail, n);
  r.gaps = per_step(gaps, n);
  r.short_total = per_step(short_total, n);
  r.sync_total = per_step(sync_total, n);
  for (int p = 0; p < 4; ++p) r.phase_total[p] = per_step(phase_total[p], n);
  for (auto& [key, c] : causes) {
    c.total = per_step(c.total, n);
    r.causes.push_back(std::move(c));
  }
  std::stable_sort(r.causes.begin(), r.causes.end(), [](const IdleCause& x, const IdleCause& y) { return x.total > y.total; });
  return r;
}

nlohmann::json idle_to_json(const IdleAttribution& r) {
  nlohmann::json causes = nlohmann::json::array();
  for (const IdleCause& c : r.causes)
    causes.push_back({{"phase", to_string(c.phase)}, {"kind", c.sync ? "sync" : "host"}, {"ops", c.ops}, {"count", c.count},
                      {"per_step_us", c.total.us()}, {"max_us", c.max.us()}});
  return {{"device", r.device},
          {"steps", r.steps},
          {"short_gap_us", r.short_gap.us()},
          {"idle_us", r.idle().us()},
          {"head_us", r.head.us()},
          {"tail_us", r.tail.us()},
          {"gaps_us", r.gaps.us()},
          {"short_gaps_us", r.short_total.us()},
          {"short_gaps", r.short_count},
          {"after_sync_us", r.sync_total.us()},
          {"by_phase_us",
           {{"forward", r.phase_total[static_cast<int>(Phase::Forward)].us()},
            {"backward", r.phase_total[static_cast<int>(Phase::Backward)].us()},
            {"optimizer", r.phase_total[static_cast<int>(Phase::Optimizer)].us()}}},
          {"causes", causes}};
}

std::string idle_to_text(const IdleAttribution& r, std::size_t top) {
  std::string out = fmt::format("  GPU idle per step (mean of {} step(s), device {}): {}\n", r.steps, r.device, format_time(r.idle()));
  out += fmt::format("    before the first GPU op {:>12}\n", format_time(r.head));
  out += fmt::format("    after the last GPU op   {:>12}\n", format_time(r.tail));
  out += fmt::format("    gaps under {:<12} {:>12}   ({} launch gaps over the steps)\n", format_time(r.short_gap), format_time(r.short_total),
                     r.short_count);
  out += fmt::format("    longer gaps             {:>12}   (forward {}, backward {}, optimizer {}; {} after a host sync)\n",
                     format_time(r.gaps - r.short_total), format_time(r.phase_total[static_cast<int>(Phase::Forward)]),
                     format_time(r.phase_total[static_cast<int>(Phase::Backward)]),
                     format_time(r.phase_total[static_cast<int>(Phase::Optimizer)]), format_time(r.sync_total));
  if (r.causes.empty()) return out;
  out += "\n  longer gaps by what the host did before the next GPU op (host: still busy in it; sync: waited for the GPU in it)\n";
  out += fmt::format("    {:<10} {:<5} {:>12} {:>6} {:>10}  {}\n", "phase", "kind", "per step", "count", "max", "CPU ops");
  Time rest;
  std::size_t rest_count = 0;
  for (std::size_t i = 0; i < r.causes.size(); ++i) {
    const IdleCause& c = r.causes[i];
    if (i >= top) {
      rest += c.total;
      rest_count += c.count;
      continue;
    }
    out += fmt::format("    {:<10} {:<5} {:>12} {:>6} {:>10}  {}\n", to_string(c.phase), c.sync ? "sync" : "host", format_time(c.total),
                       c.count, format_time(c.max), c.ops);
  }
  if (rest_count > 0)
    out += fmt::format("    {:<10} {:<5} {:>12} {:>6} {:>10}  ({} more causes)\n", "", "", format_time(rest), rest_count, "",
                       r.causes.size() - top);
  return out;
}

}  // namespace stepsim::trace
