#include "trace/allocator_replay.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/format.hpp"
#include "sim/exec/caching_allocator.hpp"
#include "trace/trace_index.hpp"

namespace stepsim::trace {

namespace {

constexpr std::int64_t kMaxBlock = std::int64_t{1} << 48;  // 256 TiB: beyond any device

struct Event {
  std::int64_t addr = 0, bytes = 0;  // bytes < 0: a free
  Bytes reserved;
};

// One pass over the window's events; returns the highest reserved bytes of the pass.
struct Replayer {
  CachingAllocator alloc;
  std::unordered_map<std::int64_t, BufferId> live;  // address -> buffer id
  std::size_t next_id = 0;
  Bytes peak_allocated;

  void malloc_at(std::int64_t addr, std::int64_t bytes) {
    if (auto it = live.find(addr); it != live.end()) {  // a previous pass's block: freed before reuse
      alloc.free(it->second);
      live.erase(it);
    }
    BufferId id{next_id++};
    alloc.malloc(id, Bytes{bytes}, StreamId{0});
    live.insert_or_assign(addr, id);
    peak_allocated = std::max(peak_allocated, alloc.allocated());
  }
  void free_at(std::int64_t addr) {
    if (auto it = live.find(addr); it != live.end()) {
      alloc.free(it->second);
      live.erase(it);
    }
  }
  Bytes pass(const std::vector<Event>& events) {
    Bytes peak = alloc.reserved();
    for (const Event& e : events) {
      if (e.bytes > 0) malloc_at(e.addr, e.bytes);
      else free_at(e.addr);
      peak = std::max(peak, alloc.reserved());
    }
    return peak;
  }
};

}  // namespace

std::optional<AllocatorReplay> replay_allocator(const KinetoTrace& t, const TraceAnalysis& a) {
  if (a.steps.empty() || t.stepsim_trace) return std::nullopt;
  const int dev = t.main_device();
  const Time lo = a.steps.front().span_start, hi = a.steps.back().span_end;
  std::vector<const MemSample*> window;  // in time order, file order among equal times
  for (const MemSample* s : TraceIndex(t).memory_in(dev, lo, hi))
    if (s->has_allocated && s->block_bytes != 0 && s->time < hi) window.push_back(s);
  if (window.empty()) return std::nullopt;

  AllocatorReplay r;
  r.device = dev;
  r.first_step = a.steps.front().number;
  r.last_step = a.steps.back().number;
  std::vector<Event> events;
  std::map<std::int64_t, std::int64_t> before;  // address -> size of a block allocated before the window
  std::unordered_map<std::int64_t, bool> seen;   // address allocated inside the window (so far)
  for (const MemSample* s : window) {
    const std::int64_t b = s->block_bytes;
    if (b < -kMaxBlock || b > kMaxBlock || s->addr <= 0)
      throw InputError(fmt::format("{}: [memory] event at ts {} us: Addr {} Bytes {}: expected a CUDA address and a block "
                                   "size within 2^48 bytes", t.file, s->time.ns / 1000, s->addr, b));
    if (b > 0) {
      ++r.allocations;
      seen[s->addr] = true;
    } else {
      ++r.frees;
      if (!seen.count(s->addr) && !before.count(s->addr)) before[s->addr] = -b;
    }
    events.push_back(Event{s->addr, b, s->reserved});
    r.trace_reserved_peak = std::max(r.trace_reserved_peak, s->reserved);
  }
  const MemSample& first = *window.front();
  r.live_at_start = first.total - Bytes{first.block_bytes};  // Total Allocated is after the event
  r.trace_reserved_start = first.reserved;
  r.blocks_before = before.size();

  Replayer rp;
  Bytes known;
  for (const auto& [addr, size] : before) known += Bytes{size};
  if (r.live_at_start > known) {  // the rest of the state at the start, one block at an address no event uses
    rp.alloc.malloc(BufferId{rp.next_id++}, r.live_at_start - known, StreamId{0});
  }
  for (const auto& [addr, size] : before) rp.malloc_at(addr, size);
  Bytes peak;
  for (r.passes = 1; r.passes <= kMaxSteadyStatePasses; ++r.passes) {
    const std::size_t segments = rp.alloc.segments();
    peak = rp.pass(events);
    if (rp.alloc.segments() == segments && r.passes > 1) break;  // nothing new: the next passes repeat it
  }
  r.passes = std::min(r.passes, kMaxSteadyStatePasses);
  r.replay_reserved_peak = peak;
  r.replay_allocated_peak = rp.peak_allocated;
  return r;
}

nlohmann::json replay_to_json(const AllocatorReplay& r) {
  return {{"device", r.device},
          {"first_step", r.first_step},
          {"last_step", r.last_step},
          {"allocations", r.allocations},
          {"frees", r.frees},
          {"blocks_allocated_before_window", r.blocks_before},
          {"live_at_start_bytes", r.live_at_start.count},
          {"trace_reserved_start_bytes", r.trace_reserved_start.count},
          {"trace_reserved_peak_bytes", r.trace_reserved_peak.count},
          {"replay_reserved_peak_bytes", r.replay_reserved_peak.count},
          {"replay_allocated_peak_bytes", r.replay_allocated_peak.count},
          {"passes", r.passes}};
}

std::string replay_to_text(const AllocatorReplay& r) {
  std::string steps = r.first_step == r.last_step ? fmt::format("step {}", r.first_step)
                                                   : fmt::format("steps {}-{}", r.first_step, r.last_step);
  std::string out = fmt::format(
      "allocator replay (device {}, {}): the trace's {} allocations and {} frees through stepsim's caching-allocator model\n"
      "  (one stream; {} blocks freed in the window were allocated before it; {} live at its start)\n",
      r.device, steps, r.allocations, r.frees, r.blocks_before, format_bytes(r.live_at_start));
  out += fmt::format("  reserved, model on this sequence  {:>10}   (steady after {} passes; allocated peak {})\n",
                     format_bytes(r.replay_reserved_peak), r.passes, format_bytes(r.replay_allocated_peak));
  out += fmt::format("  reserved, trace                   {:>10}   (peak; {} at the window's start)\n",
                     format_bytes(r.trace_reserved_peak), format_bytes(r.trace_reserved_start));
  if (r.trace_reserved_flat() && r.trace_reserved_start > r.replay_reserved_peak)
    out += fmt::format("  the trace's reserved never moves in the window and is {} above the replay: segments reserved\n"
                       "  before the window (initialization, an evaluation pass, an earlier step), or blocks held past\n"
                       "  their free events, which the replay cannot see (a collective's recordStream before PyTorch 2.8)\n",
                       format_bytes(r.trace_reserved_start - r.replay_reserved_peak));
  return out;
}

}  // namespace stepsim::trace
