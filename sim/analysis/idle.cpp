#include "sim/analysis/idle.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/core/format.hpp"

namespace stepsim {

void IdleAccumulator::add_short(Time g) {
  gaps_ += g;
  short_total_ += g;
  ++short_count_;
}

void IdleAccumulator::add(Time g, Phase phase, bool sync, const std::string& what) {
  gaps_ += g;
  const int p = static_cast<int>(phase);
  phase_total_[p] += g;
  if (sync) sync_total_ += g;
  Key key{p, sync, what};
  auto it = std::find_if(causes_.begin(), causes_.end(), [&](const auto& c) { return c.first == key; });
  if (it == causes_.end()) {
    IdleCause c;
    c.phase = phase;
    c.sync = sync;
    c.ops = what;
    causes_.emplace_back(std::move(key), std::move(c));
    it = std::prev(causes_.end());
  }
  IdleCause& c = it->second;
  ++c.count;
  c.total += g;
  c.max = std::max(c.max, g);
}

void add_frame_time(std::vector<HostFrame>& frames, std::string_view name, Time t) {
  auto it = std::find_if(frames.begin(), frames.end(), [&](const HostFrame& f) { return f.name == name; });
  if (it == frames.end()) frames.push_back(HostFrame{std::string(name), t});
  else it->total += t;
}

void sort_frames(std::vector<HostFrame>& frames) {
  std::sort(frames.begin(), frames.end(), [](const HostFrame& x, const HostFrame& y) {
    return x.total != y.total ? x.total > y.total : x.name < y.name;
  });
}

void IdleAccumulator::add_frames(bool tail, const std::vector<HostFrame>& frames) {
  for (const HostFrame& f : frames) add_frame_time(frames_[tail ? 1 : 0], f.name, f.total);
}

IdleAttribution IdleAccumulator::finish(std::size_t steps, int device) const {
  const auto n = static_cast<std::int64_t>(std::max<std::size_t>(1, steps));
  auto mean = [n](Time t) { return Time::from_ns(t.ns / n); };
  IdleAttribution r;
  r.device = device;
  r.steps = steps;
  r.short_gap = short_gap_;
  r.head = mean(head_);
  r.tail = mean(tail_);
  r.gaps = mean(gaps_);
  r.short_total = mean(short_total_);
  r.short_count = short_count_;
  r.sync_total = mean(sync_total_);
  for (int p = 0; p < 4; ++p) r.phase_total[p] = mean(phase_total_[p]);
  for (const auto& [key, c] : causes_) {
    r.causes.push_back(c);
    r.causes.back().total = mean(c.total);
  }
  for (int tail = 0; tail < 2; ++tail) {
    std::vector<HostFrame>& out = tail ? r.tail_frames : r.head_frames;
    for (const HostFrame& f : frames_[tail]) out.push_back(HostFrame{f.name, mean(f.total)});
    sort_frames(out);
  }
  // Largest first; ties in key order, so the listing does not depend on the gaps' order.
  std::sort(r.causes.begin(), r.causes.end(), [](const IdleCause& x, const IdleCause& y) {
    if (x.total != y.total) return x.total > y.total;
    return std::tie(x.phase, x.sync, x.ops) < std::tie(y.phase, y.sync, y.ops);
  });
  return r;
}

namespace {

constexpr std::string_view kBlockedPrefix = "blocked: ";

// A host interval's name as a frame: allocator calls and event records/waits by their kind (their
// labels name each buffer or event), others with unit numbers folded.
std::string frame_name(std::string_view label) {
  if (label.starts_with("Alloc '") || label.starts_with("Free '")) return "caching allocator (alloc, free)";
  if (label.starts_with("Record event ") || label.starts_with("Wait ")) return "CUDA events (record, wait)";
  return fold_unit_number(label);
}

// The host's intervals inside [from, to] (one at a time: the host thread), each clipped, by
// frame_name; the rest as kNoHostFrame.
std::vector<HostFrame> host_frames(const Timeline& t, Time from, Time to) {
  std::vector<HostFrame> out;
  if (to <= from) return out;
  Time covered;
  for (const HostInterval& h : t.host) {
    if (h.end <= from || h.start >= to) continue;
    const Time inside = std::min(h.end, to) - std::max(h.start, from);
    covered += inside;
    add_frame_time(out, frame_name(host_label(t, h)), inside);
  }
  if (to - from > covered) add_frame_time(out, kNoHostFrame, to - from - covered);
  return out;
}

}  // namespace

IdleAttribution attribute_idle(const Timeline& t, Time short_gap) {
  IdleAccumulator acc(short_gap);
  std::vector<const TimelineOp*> ops;
  for (const TimelineOp& op : t.ops)
    if (op.kind != TimelineOp::Kind::Marker) ops.push_back(&op);
  std::stable_sort(ops.begin(), ops.end(), [](const TimelineOp* a, const TimelineOp* b) { return a->start < b->start; });
  std::vector<const HostInterval*> blocked;  // in time order (the host runs one interval at a time)
  for (const HostInterval& h : t.host)
    if (h.kind == HostInterval::Kind::Blocked) blocked.push_back(&h);
  acc.step(t.start, t.end, ops, [&](const TimelineOp& op, Time dry) {
    // The last blocked interval that began at or before the GPU ran dry.
    auto it = std::upper_bound(blocked.begin(), blocked.end(), dry, [](Time x, const HostInterval* h) { return x < h->start; });
    if (it != blocked.begin()) {
      const HostInterval& h = **std::prev(it);
      if (h.end >= dry && h.end <= op.issue) {
        const std::string label = host_label(t, h);
        std::string_view n = label;
        if (n.starts_with(kBlockedPrefix)) n.remove_prefix(kBlockedPrefix.size());
        return IdleAccumulator::Cause{op.phase, true, fold_unit_number(n)};
      }
    }
    return IdleAccumulator::Cause{op.phase, false, fold_unit_number(op.name.view())};
  });
  if (!ops.empty()) {  // the head and the tail, as IdleAccumulator::step measures them
    Time last_end = ops.front()->end;
    for (const TimelineOp* op : ops) last_end = std::max(last_end, op->end);
    acc.add_frames(false, host_frames(t, t.start, ops.front()->start));
    acc.add_frames(true, host_frames(t, last_end, t.end));
  }
  return acc.finish(1, 0);
}

namespace {

nlohmann::json frames_to_json(const std::vector<HostFrame>& frames) {
  nlohmann::json out = nlohmann::json::array();
  for (const HostFrame& f : frames) out.push_back({{"name", f.name}, {"per_step_us", f.total.us()}});
  return out;
}

// The frames under a head or tail line: the largest `top`, then one line for the rest.
std::string frames_to_text(const std::vector<HostFrame>& frames, std::size_t top) {
  std::string out;
  Time rest;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    if (i < top) out += fmt::format("      {:>12}  {}\n", format_time(frames[i].total), frames[i].name);
    else rest += frames[i].total;
  }
  if (frames.size() > top) out += fmt::format("      {:>12}  ({} more)\n", format_time(rest), frames.size() - top);
  return out;
}

}  // namespace

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
          {"head_host", frames_to_json(r.head_frames)},
          {"tail_host", frames_to_json(r.tail_frames)},
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
  // A head or tail's frames: the three largest (a training loop's logging, data loading).
  constexpr std::size_t kFrames = 3;
  out += fmt::format("    before the first GPU op {:>12}\n", format_time(r.head));
  out += frames_to_text(r.head_frames, kFrames);
  out += fmt::format("    after the last GPU op   {:>12}\n", format_time(r.tail));
  out += frames_to_text(r.tail_frames, kFrames);
  out += fmt::format("    gaps under {:<12} {:>12}   ({} launch gaps over the steps)\n", format_time(r.short_gap), format_time(r.short_total),
                     r.short_count);
  out += fmt::format("    longer gaps             {:>12}   (forward {}, backward {}, optimizer {}; {} after a host sync)\n",
                     format_time(r.gaps - r.short_total), format_time(r.phase_total[static_cast<int>(Phase::Forward)]),
                     format_time(r.phase_total[static_cast<int>(Phase::Backward)]),
                     format_time(r.phase_total[static_cast<int>(Phase::Optimizer)]), format_time(r.sync_total));
  if (r.causes.empty()) return out;
  out += "\n  longer gaps by what the host did before the next GPU op (host: still busy in it; sync: waited for the GPU in it)\n";
  out += fmt::format("    {:<10} {:<5} {:>12} {:>6} {:>10}  {}\n", "phase", "kind", "per step", "count", "max", "host");
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

}  // namespace stepsim
