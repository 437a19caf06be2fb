#include "sim/exec/engine.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <charconv>
#include <concepts>
#include <cmath>
#include <cstdint>
#include <deque>
#include <iterator>
#include <queue>
#include <span>
#include <stdexcept>

#include <boost/math/distributions/normal.hpp>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <random>

#include "sim/core/format.hpp"
#include "sim/core/memory_policy.hpp"
#include "sim/core/overloaded.hpp"

#include "sim/core/error.hpp"
#include "sim/exec/caching_allocator.hpp"
#include "sim/exec/expected_max.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/hardware/compute_model.hpp"
#include "sim/program/validate.hpp"

namespace stepsim {

namespace {

// describe()'s text as the pieces it is made of: the engine labels host intervals with it, 10^5
// times in a deep program, and stores the pieces in its pool at once (no buffer in between, no
// format string to interpret, no temporary string); describe() joins them. The views point into
// the program and into the object itself, which is why it cannot be copied.
class LabelParts {
 public:
  LabelParts() = default;
  LabelParts(const LabelParts&) = delete;
  LabelParts& operator=(const LabelParts&) = delete;

  void text(std::string_view s) {
    assert(count_ < parts_.size());
    parts_[count_++] = s;
  }
  // A temporary std::string would dangle once its statement ends: pass what outlives the parts.
  template <class S>
    requires std::same_as<S, std::string>
  void text(S&&) = delete;
  void number(std::int64_t v) {
    assert(numbers_ < digits_.size());
    auto& d = digits_[numbers_++];
    const auto end = std::to_chars(d.data(), d.data() + d.size(), v).ptr;
    text(std::string_view(d.data(), static_cast<std::size_t>(end - d.data())));
  }
  std::span<const std::string_view> parts() const { return {parts_.data(), count_}; }

 private:
  std::array<std::string_view, 11> parts_;  // the longest description has 7, a blocked host's label 3 more
  std::size_t count_ = 0;
  std::array<std::array<char, 20>, 3> digits_;  // at most two numbers (an event on an undeclared stream), and a launch queue's depth
  std::size_t numbers_ = 0;
};

void describe_to(LabelParts& out, const Program& p, std::size_t i) {
  auto text = [&](auto&& s) { out.text(std::forward<decltype(s)>(s)); };
  auto number = [&](auto v) { out.number(static_cast<std::int64_t>(v)); };
  auto stream = [&](StreamId s) {  // its name, or "#" and its index when it was not declared
    if (s.index() < p.streams.size()) return text(p.streams[s.index()].name);
    text("#");
    number(s.index());
  };
  if (i >= p.instructions.size()) return text("end of program");
  std::visit(Overloaded{
                 [&](const Launch& l) {
                   text("Launch '"); text(l.kernel.name); text("' on "); stream(l.stream);
                 },
                 [&](const Collective& c) {
                   text("Collective "); text(name_of(c.kind)); text(" '"); text(c.name); text("' on "); stream(c.stream);
                 },
                 [&](const Record& r) { text("Record event "); number(r.event.index()); text(" on "); stream(r.stream); },
                 [&](const Wait& w) { text("Wait "); stream(w.stream); text(" on event "); number(w.event.index()); },
                 [&](const HostSync& h) {
                   std::visit(Overloaded{
                                  [&](EventId e) { text("HostSync on event "); number(e.index()); },
                                  [&](StreamId s) { text("HostSync on stream "); stream(s); },
                              },
                              h.target);
                   text(" ("); text(h.reason); text(")");
                 },
                 [&](const Alloc& a) { text("Alloc '"); text(a.name); text("' "); number(a.bytes.count); text(" B"); },
                 [&](const Free& f) {
                   text("Free '");
                   if (f.buffer.index() < p.buffer_names.size()) text(p.buffer_names[f.buffer.index()]);
                   else number(f.buffer.index());
                   text("'");
                 },
                 [&](const HostWork& w) { text("HostWork '"); text(w.name); text("'"); },
                 [&](const Mark& m) { text("Mark '"); text(m.name); text("'"); },
             },
             p.instructions[i]);
}

enum class OpType : std::uint8_t { Kernel, Collective, Record, Wait };

// One per Kernel/Collective/Record/Wait, for the whole run (a 4,096-layer step has 221,000):
// kept to 88 bytes, because this array is the engine's largest and is page-faulted afresh on
// every run once it passes glibc's mmap threshold. What a timeline op records (start, end,
// phase, name) lives in Timeline::ops; the rate state of a running op lives in running_.
struct Op {
  OpType type = OpType::Kernel;
  bool started = false, done = false;
  // One byte (Op stays within 88 bytes): link_class, for collectives 0 intra-node, 1 inter-node;
  // sm_bound, for kernels: compute-bound (GEMM, attention), slowed by the SMs collectives hold.
  std::uint8_t link_class : 1 = 0;
  bool sm_bound : 1 = false;
  StreamId stream{0};
  // Record / Wait: the event (unused by the other types); for a Wait the number of records
  // issued before it (0: wait for the first record, which may come later in program order).
  EventId event{0};
  CommId comm{0};                    // Collective only
  std::int32_t timeline_index = -1;  // Kernel/Collective: its index in Timeline::ops
  std::int32_t host_before = -1;     // the host interval current when it was issued
  std::int32_t stream_pred = -1;     // the op before it on its stream
  std::uint32_t event_generation = 0;
  // Why it started when it did, resolved through Record/Wait (which are not timeline ops) to
  // the Kernel/Collective or host interval behind them.
  StartRecord why;
  std::uint32_t instruction = 0;     // Program instructions are bounded by kMaxProgramInstructions
  // Pending record_stream frees waiting on this op: a list threaded through waiters_ (first
  // and last entry index, -1 when none), in issue order.
  std::int32_t waiters_head = -1, waiters_tail = -1;
  Time issue;
  Time solo;
  Time start, end;
};
static_assert(sizeof(Op) <= 88, "keep Op small: it is the engine's hot array");

// A running Kernel/Collective: the work it has left at its current rate, and when it finishes
// at that rate. Its finish is an event ordered with the heap's by (time, seq), but kept here: a
// few ops run at once, and each rate change pushed a fresh event into the heap and left a stale
// one behind to be popped and dropped (heap traffic was 7 % of the engine's instructions).
struct Running {
  std::size_t op = 0;
  double remaining = 0;  // solo-rate nanoseconds of work left
  double rate = 0;
  Time last_update;
  double hbm_share = 0;  // collectives: the fraction of HBM bandwidth their data path takes at solo rate
  Time finish;
  std::uint64_t seq = 0;
};

// A record_stream'ed free waits for the last op of each recorded stream (as issued before the
// free). It is keyed on those ops: each completion decrements `outstanding` of the frees that
// wait on it, so the scan is O(1) amortized per completion (issue 16 item 5).
struct PendingFree {
  BufferId buffer{0};
  std::size_t outstanding = 0;
};

// Stream indices as bits, taken in increasing order: pump() visits only the streams whose front
// may have become startable, in the order a scan of every stream would.
class StreamBits {
 public:
  static constexpr std::size_t npos = SIZE_MAX;

  void resize(std::size_t streams) {
    streams_ = streams;
    words_.assign((streams + 63) / 64, 0);
  }
  void insert(std::size_t s) { words_[s / 64] |= std::uint64_t{1} << (s % 64); }
  bool empty() const {
    return std::all_of(words_.begin(), words_.end(), [](std::uint64_t w) { return w == 0; });
  }
  void insert_all() {
    std::fill(words_.begin(), words_.end(), ~std::uint64_t{0});
    if (streams_ % 64) words_.back() = (std::uint64_t{1} << (streams_ % 64)) - 1;
  }
  // Removes and returns the smallest member >= s; npos when there is none.
  std::size_t take_from(std::size_t s) {
    std::size_t w = s / 64;
    if (w >= words_.size()) return npos;
    std::uint64_t bits = words_[w] & (~std::uint64_t{0} << (s % 64));
    while (bits == 0) {
      if (++w == words_.size()) return npos;
      bits = words_[w];
    }
    const auto b = static_cast<std::size_t>(std::countr_zero(bits));
    words_[w] &= ~(std::uint64_t{1} << b);
    return w * 64 + b;
  }

 private:
  std::size_t streams_ = 0;
  std::vector<std::uint64_t> words_;
};

// The Record ops of one event, in issue order. Most events are recorded once (FSDP and ZeRO
// record a fresh event per use), so the first is held inline and only later ones go to the
// heap: a vector per event was 12,000 allocations and frees per 4,096-layer run.
class EventRecords {
 public:
  void push_back(std::size_t op) {
    if (count_++ == 0) first_ = op;
    else more_.push_back(op);
  }
  bool empty() const { return count_ == 0; }
  std::size_t size() const { return count_; }
  std::size_t operator[](std::size_t k) const { return k == 0 ? first_ : more_[k - 1]; }
  std::size_t back() const { return count_ == 1 ? first_ : more_.back(); }

 private:
  std::size_t count_ = 0;
  std::size_t first_ = 0;
  std::vector<std::size_t> more_;
};

// The host's next step, or a collective's slowest rank arriving (ops' finishes are in Running).
// 24 bytes: the heap moves these on every push and pop.
struct HeapEvent {
  static constexpr std::uint32_t kHost = UINT32_MAX;  // `op` of the host's next step
  Time time;
  std::uint64_t seq = 0;
  std::uint32_t op = 0;  // the arriving collective's index into the engine's ops (bounded by kMaxProgramInstructions), or kHost
  bool host() const { return op == kHost; }
  bool operator>(const HeapEvent& o) const { return time > o.time || (time == o.time && seq > o.seq); }
};

// Where the simulated rank stands against the others (RankVariation, docs/scale.md): since the
// ranks last met (a collective), `a` ns of GPU time that a rank's persistent speed offset scales,
// and `b` ns^2 of independent variance (kernel by kernel, host instruction by instruction).
struct Drift {
  double a = 0, b = 0;
};

// Per op, with rank variation on: the drift at its issue (the host's), start and end; for a
// collective, when this rank arrived and until when it waits for the slowest.
struct OpDrift {
  Drift issue, start, end;
  Time arrival, hold_until;
  std::uint8_t hold = 0;  // 0: not arrived, 1: waiting for the slowest rank, 2: may start
};

class Engine {
 public:
  Engine(const Program& p, const HardwareProfile& hw, const AllocatorConfig& allocator, const RankOptions& ranks,
         TimelineDetail detail, GemmTimeMemo* gemm_times = nullptr)
      : p_(p), hw_(hw), checker_(p), kernel_times_(hw.compute, gemm_times), allocator_config_(allocator), allocator_(allocator),
        variation_(hw.rank_variation.enabled()), host_varies_(variation_ && hw.rank_variation.host_cv > 0),
        explain_(detail == TimelineDetail::Full), rank_options_(ranks), rng_(ranks.seed) {
    streams_.resize(p.streams.size());
    stream_dirty_.resize(p.streams.size());
    stream_last_op_.assign(p.streams.size(), -1);
    comm_queue_.resize(p.comms.size());
    comm_next_.assign(p.comms.size(), 0);
    stream_has_op_.assign(p.streams.size(), 0);
    workspace_held_.assign(2 * p.streams.size(), 0);
    pending_event_deps_.assign(p.streams.size(), 0);
    records_.resize(p.event_count);
    event_has_source_.assign(p.event_count, 0);
    buffers_.resize(p.buffer_count);
    timeline_.program_text = p.text;
    timeline_.streams = p.streams;
    timeline_.comms = p.comms;
    timeline_.capacity = hw.memory_capacity;
    timeline_.non_pytorch_parts = hw.non_pytorch_parts(communicators_used(p, hw));
    for (const auto& part : timeline_.non_pytorch_parts) timeline_.non_pytorch += part.bytes;
    if (allocator.enabled && hw.memory_capacity.count > 0) {
      allocator_.set_device_limit(Bytes{std::max<std::int64_t>(0, hw.memory_capacity.count - timeline_.non_pytorch.count)});
      // A flush first waits for the deferred frees' streams (synchronize_and_free_events): their
      // blocks go back to the pools now; the engine's own release still comes when they pass.
      // A flush leaves every deferred free issued before it either released or freed by it, and
      // one it freed stays so until its release: the next flush looks only at the frees issued
      // since (each free is looked at once, where a scan of them all per flush made a step that
      // does not fit quadratic in its frees).
      allocator_.set_flush_hook([this] {
        for (; flushed_frees_ < pending_frees_.size(); ++flushed_frees_) {
          const PendingFree& pf = pending_frees_[flushed_frees_];
          BufferState& b = buffers_[pf.buffer.index()];
          if (pf.outstanding == 0 || !b.free_pending || b.allocator_freed) continue;
          allocator_.free(pf.buffer);
          b.allocator_freed = true;
        }
      });
    }
    timeline_.device = "simulated " + hw.name;
    // Every instruction makes at most one op, timeline op, host interval, memory sample and
    // allocator event: reserve that much at once rather than reallocate large arrays as they
    // grow, and rather than count each kind in a pass of its own over the program (the largest
    // array the engine reads; at 4,096 layers that pass cost more than the reserve it saved).
    // Capacity a run does not use is address space that is never touched.
    const std::size_t n = p.instructions.size();
    ops_.reserve(n);
    timeline_.ops.reserve(n);
    if (explain_) {
      timeline_.op_why.reserve(n);
      timeline_.host.reserve(n);
      timeline_.host_why.reserve(n);
    }
    timeline_.memory.reserve(n + 1);
    alloc_log_.reserve(n);
    if (variation_) {
      drift_.reserve(n);
      timeline_.rank_wait.reserve(n);
      comm_expected_max_.assign(p.comms.size(), -1.0);
    }
    // The builder counted each communicator's collectives (CommDecl::collectives).
    for (std::size_t c = 0; c < p.comms.size(); ++c) comm_queue_[c].reserve(p.comms[c].collectives);
    auto huge = [](const auto& v) { advise_huge_pages(v.data(), v.capacity() * sizeof(*v.data())); };
    huge(ops_), huge(timeline_.ops), huge(timeline_.host), huge(timeline_.memory), huge(alloc_log_), huge(drift_);
    huge(timeline_.op_why), huge(timeline_.host_why), huge(records_), huge(buffers_);
  }

  Timeline run() {
    sample_memory(Time::zero());
    if (!p_.instructions.empty()) schedule_host(host_cost(0));
    while (true) {
      const Running* finishing = first_finishing();
      if (finishing && (heap_.empty() || finishing->finish < heap_.top().time ||
                        (finishing->finish == heap_.top().time && finishing->seq < heap_.top().seq))) {
        now_ = finishing->finish;
        complete(finishing->op);
      } else if (!heap_.empty()) {
        HeapEvent ev = heap_.top();
        heap_.pop();
        now_ = ev.time;
        if (ev.host()) run_host();
        else stream_dirty_.insert(ops_[ev.op].stream.index());  // the slowest rank arrived
      } else {
        break;
      }
      pump();
    }
    check_finished();
    meet_lazy_allocations();  // no optimizer phase ran
    steady_state_reserved();
    finish_timeline();
    return std::move(timeline_);
  }

 private:
  // ---- host thread -------------------------------------------------------------------------

  Time host_cost(std::size_t i) const {
    return std::visit(Overloaded{
                          [&](const Launch& l) { return launch_host_time(hw_.host, l.kernel); },
                          [&](const Collective&) { return hw_.host.collective_overhead; },
                          [&](const Record&) { return hw_.host.event_overhead; },
                          [&](const Wait&) { return hw_.host.event_overhead; },
                          [&](const HostSync&) { return Time::zero(); },
                          // A lazy (optimizer state) buffer exists before the steady step: no call.
                          [&](const Alloc& a) { return a.lazy ? Time::zero() : hw_.host.alloc_overhead; },
                          [&](const Free&) { return hw_.host.alloc_overhead; },
                          [&](const HostWork& w) { return w.duration; },
                          [&](const Mark&) { return Time::zero(); },
                      },
                      p_.instructions[i]);
  }

  // The running op that finishes first (the earliest finish, then the earliest seq), if any.
  const Running* first_finishing() const {
    const Running* first = nullptr;
    for (const Running& r : running_)
      if (!first || r.finish < first->finish || (r.finish == first->finish && r.seq < first->seq)) first = &r;
    return first;
  }

  // True if an event (an op's finish, the heap's) is due at or before t.
  bool due_by(Time t) const {
    if (!heap_.empty() && heap_.top().time <= t) return true;
    for (const Running& r : running_)
      if (r.finish <= t) return true;
    return false;
  }

  // The host's next instruction, whose CPU cost is `cost`, is due `cost` from now.
  void schedule_host(Time cost) {
    next_cost_ = cost;
    heap_.push(HeapEvent{now_ + cost, seq_++, HeapEvent::kHost});
  }

  // Executes instructions from pc_ at now_ (the current one's CPU cost already elapsed), until
  // one has a CPU cost (scheduled for later), blocks on a HostSync, or the program ends.
  void run_host() {
    Time cost = next_cost_;  // already elapsed
    while (pc_ < p_.instructions.size()) {
      std::size_t i = pc_;
      if (!retrying_) checker_.check(i);  // validate()'s checks, as the host reaches it (once)
      retrying_ = false;
      if (cost.ns > 0) {
        if (explain_) push_host(issue_interval(i, now_ - cost, now_));
        // (No profile fits host_cv yet: adding its 0 at every instruction was 0.5 % of a sweep point.)
        if (host_varies_) host_drift_.b += square(hw_.rank_variation.host_cv * static_cast<double>(cost.ns));
      }
      if (!execute(i)) return;  // blocked in a HostSync; resumed by completion
      ++pc_;
      pump();
      if (pc_ < p_.instructions.size()) {
        cost = host_cost(pc_);
        if (cost.ns > 0) {
          // Nothing else happens before the host's next instruction: run it now instead of
          // through the heap (the order is the same: an event due at that very instant, which
          // the heap would put first, falls back to the heap).
          if (due_by(now_ + cost)) {
            schedule_host(cost);
            return;
          }
          now_ = now_ + cost;
        }
      }
    }
    host_done_at_ = now_;
  }

  // A host interval starts when the one before it ends (host program order); a blocked one
  // records what released it instead (complete()).
  void push_host(HostInterval h, StartRecord why = {}) {
    if (h.kind != HostInterval::Kind::Blocked && !timeline_.host.empty() && timeline_.host.back().end == h.start)
      why = StartRecord{StartCause::HostOrder, HostIndex{timeline_.host.size() - 1}};
    timeline_.host.push_back(std::move(h));
    timeline_.host_why.push_back(why);
  }

  // The host's interval of instruction i, with the operands host_label() words its label from
  // (nothing is formatted here: timeline.hpp, HostInterval).
  HostInterval issue_interval(std::size_t i, Time start, Time end) const {
    using L = HostInterval::Label;
    HostInterval h{HostInterval::Kind::Issue, L::Text, static_cast<std::uint32_t>(i), Text{}, start, end};
    auto both = [](std::uint32_t event, std::uint32_t stream) {
      return static_cast<std::int64_t>(std::uint64_t{event} << 32 | stream);
    };
    std::visit(Overloaded{
                   [&](const Launch& l) { h.label = L::Launch, h.name = l.kernel.name; },
                   [&](const Collective& c) { h.label = L::Collective, h.name = c.name; },
                   // HostWork and Mark hold std::strings (a few a step): copied into the pool.
                   [&](const HostWork& w) { h.kind = HostInterval::Kind::Work, h.name = timeline_.text->add(w.name); },
                   [&](const Record& r) { h.label = L::Record, h.arg = both(r.event.index(), r.stream.index()); },
                   [&](const Wait& w) { h.label = L::Wait, h.arg = both(w.event.index(), w.stream.index()); },
                   [&](const HostSync& s) {
                     h.name = s.reason;
                     if (const auto* e = std::get_if<EventId>(&s.target)) h.label = L::HostSyncEvent, h.arg = e->index();
                     else h.label = L::HostSyncStream, h.arg = std::get<StreamId>(s.target).index();
                   },
                   [&](const Alloc& a) { h.label = L::Alloc, h.name = a.name, h.arg = a.bytes.count; },
                   [&](const Free& f) {
                     if (f.buffer.index() < p_.buffer_names.size()) h.label = L::Free, h.name = p_.buffer_names[f.buffer.index()];
                     else h.label = L::FreeUnnamed, h.arg = f.buffer.index();
                   },
                   [&](const Mark& m) { h.label = L::Mark, h.name = timeline_.text->add(m.name); },
               },
               p_.instructions[i]);
    return h;
  }

  // Returns false if the host blocks.
  bool execute(std::size_t i) {
    return std::visit([&](const auto& ins) { return issue(ins, i); }, p_.instructions[i]);
  }

  // The CUDA driver's launch queue per stream is bounded: once about a thousand commands are
  // pending on a stream, the next launch blocks the host until the oldest completes (a stream
  // "will block when I launch lots of kernels (more than 1000) ... each stream can launch 1000
  // kernel asynchrony", NVIDIA developer forums t/68937 and stackoverflow 53970187, 2018;
  // OneFlow synchronizes its streams to stay below 1,024 kernels per stream, beyond which "this
  // stream's calls become blocking", Oneflow-Inc/oneflow#890; CUDA_SCALE_LAUNCH_QUEUES=4x
  // enlarges the queues, meta-pytorch/tritonbench#779; cudaLimitDevRuntimePendingLaunchCount
  // does not change it, that limit is the device runtime's). Every command pending on the
  // stream (kernels, collectives, event records and waits) takes a slot; a kernel or
  // collective launch is what blocks. The host then reaches its later allocations later,
  // which moves the memory curve (issue 48).
  static constexpr std::size_t kLaunchQueueDepth = 1024;

  // True if the host must wait for the stream's queue: the host blocks on its oldest command
  // and issues instruction i again once it has completed.
  bool launch_queue_full(StreamId s) {
    const auto& q = streams_[s.index()];
    if (q.size() < kLaunchQueueDepth) return false;
    blocked_on_ = q.front();
    blocked_has_source_ = false;
    blocked_retry_ = true;
    blocked_since_ = now_;
    return true;
  }

  // One per instruction kind: what the host does when it reaches instruction i. Each returns
  // false if the host blocks there.
  bool issue(const Launch& l, std::size_t i) {
    if (launch_queue_full(l.stream)) return false;
    if (l.kernel.cls == KernelClass::Gemm) cublas_workspace(l.stream);
    Op& op = new_op(OpType::Kernel, l.stream, i);
    op.solo = kernel_times_.kernel_time(l.kernel);
    op.sm_bound = !is_memory_bound(l.kernel.cls);
    TimelineOp& t = add_timeline_op(op, l.kernel.name, l.kernel.unit);
    t.kind = TimelineOp::Kind::Kernel;
    t.cls = l.kernel.cls;
    t.kernels = l.kernel.kernels;
    enqueue();
    return true;
  }

  bool issue(const Collective& c, std::size_t i) {
    if (launch_queue_full(c.stream)) return false;
    Op& op = new_op(OpType::Collective, c.stream, i);
    const CommDecl& comm = p_.comms[c.comm.index()];
    op.comm = c.comm;
    op.link_class = comm.nodes > 1 ? 1 : 0;
    op.solo = collective_time(hw_, c.kind, c.bytes, comm);
    TimelineOp& t = add_timeline_op(op, c.name, c.unit);
    t.kind = TimelineOp::Kind::Collective;
    t.comm = c.comm;
    t.collective = c.kind;
    t.bytes = c.bytes;
    t.dtype = c.dtype;
    comm_queue_[c.comm.index()].push_back(ops_.size() - 1);
    enqueue();
    return true;
  }

  bool issue(const Record& r, std::size_t i) {
    Op& op = new_op(OpType::Record, r.stream, i);
    op.event = r.event;
    event_has_source_[r.event.index()] = stream_has_op_[r.stream.index()];
    records_[r.event.index()].push_back(ops_.size() - 1);
    enqueue();
    return true;
  }

  bool issue(const Wait& w, std::size_t i) {
    Op& op = new_op(OpType::Wait, w.stream, i);
    op.event = w.event;
    op.event_generation = static_cast<std::uint32_t>(records_[w.event.index()].size());
    if (op.event_generation > 0 && event_has_source_[w.event.index()]) ++pending_event_deps_[w.stream.index()];
    enqueue();
    return true;
  }

  bool issue(const HostSync& h, std::size_t i) { return host_sync(h, i); }

  bool issue(const Alloc& a, std::size_t i) {
    auto& b = buffers_[a.buffer.index()];
    // validate() saw the Free before it; its record_stream free may still be pending here, and
    // the buffer cannot hold two allocations.
    if (b.live) throw std::logic_error(fmt::format("instruction {}: buffer {} allocated twice", i, a.buffer));
    b = BufferState{a.bytes, a.category, true};
    live_[static_cast<std::size_t>(a.category)] += a.bytes;
    live_total_ += a.bytes;
    const bool deferred = a.lazy && allocator_config_.enabled;  // met at the first optimizer phase
    if (deferred) lazy_.push_back(i);
    else allocator_.malloc(a.buffer, a.bytes, a.stream);
    sample_memory(now_);
    if (!deferred) alloc_log_.push_back(AllocEvent{true, a.buffer, a.bytes, a.stream, timeline_.memory.size() - 1});
    return true;
  }

  // PyTorch's cuBLAS workspace: getCurrentCUDABlasHandle keys a workspace by (handle, stream)
  // and takes it from the caching allocator at the handle's first GEMM on the stream
  // (aten/src/ATen/cuda/CublasHandlePool.cpp, getNewWorkspace), and keeps it. Handles are per
  // thread: the forward's GEMMs run on the Python thread's handle, the backward's on the autograd
  // engine's device thread's, so a stream that runs GEMMs in both holds two. (cuBLASLt shares
  // the cuBLAS workspace in current PyTorch, TORCH_CUBLASLT_UNIFIED_WORKSPACE.) Allocated
  // outside the program's buffers, never freed; the steady-state replay keeps them.
  void cublas_workspace(StreamId s) {
    const Bytes ws = hw_.outside_allocator.cublas_workspace;
    if (ws.count == 0) return;
    // A flag per (stream, handle), looked at on every GEMM launch.
    const std::size_t key = 2 * s.index() + (phase_ == Phase::Backward ? 1 : 0);
    if (workspace_held_[key]) return;
    workspace_held_[key] = 1;
    allocator_.malloc(BufferId{static_cast<std::uint32_t>(p_.buffer_count + workspaces_++)}, ws, s);
    live_[static_cast<std::size_t>(MemCategory::Other)] += ws;
    live_total_ += ws;
    sample_memory(now_);
  }

  // The first step() creates torch.optim's state (_init_group), after the step's backward freed
  // its activations; the steady-state passes replay the step with it in place.
  void meet_lazy_allocations() {
    for (std::size_t i : lazy_) {
      const Alloc& a = std::get<Alloc>(p_.instructions[i]);
      allocator_.malloc(a.buffer, a.bytes, a.stream);
    }
    lazy_.clear();
  }

  // A record_stream free waits for the last op issued so far on each recorded stream: it is
  // threaded onto those ops' waiter lists, and released when the last of them completes.
  bool issue(const Free& f, std::size_t) {
    auto& b = buffers_[f.buffer.index()];
    std::size_t id = pending_frees_.size();
    PendingFree pf{f.buffer, 0};
    for (StreamId s : f.record_streams) {
      long last = stream_last_op_[s.index()];
      if (last < 0) continue;
      Op& op = ops_[static_cast<std::size_t>(last)];
      if (op.done) continue;
      if (op.waiters_tail >= 0 && waiters_[static_cast<std::size_t>(op.waiters_tail)].free == id)
        continue;  // the same stream listed twice
      auto w = static_cast<std::int32_t>(waiters_.size());
      waiters_.push_back(Waiter{id, -1});
      if (op.waiters_tail >= 0) waiters_[static_cast<std::size_t>(op.waiters_tail)].next = w;
      else op.waiters_head = w;
      op.waiters_tail = w;
      ++pf.outstanding;
    }
    if (pf.outstanding == 0) release(f.buffer);
    else {
      b.free_pending = true;
      b.free_log_pos = alloc_log_.size();
      pending_frees_.push_back(pf);
    }
    return true;
  }

  bool issue(const HostWork&, std::size_t) { return true; }

  bool issue(const Mark& m, std::size_t) {
    if (m.phase) phase_ = *m.phase;
    if (phase_ == Phase::Optimizer && !lazy_.empty()) {
      meet_lazy_allocations();
      sample_memory(now_);
    }
    timeline_.marks.push_back(PhaseMark{m.name, now_});
    return true;
  }

  bool host_sync(const HostSync& h, std::size_t i) {
    std::optional<std::size_t> target;
    bool has_source = false;
    if (const auto* s = std::get_if<StreamId>(&h.target)) {
      long last = stream_last_op_[s->index()];
      if (last >= 0) target = static_cast<std::size_t>(last);
      has_source = stream_has_op_[s->index()] != 0;
    } else {
      const EventId e = std::get<EventId>(h.target);
      const auto& recs = records_[e.index()];
      if (recs.empty()) {
        // CUDA would return at once; a schedule that syncs on an event it never recorded is a
        // bug in the strategy, and we say so rather than guess.
        throw DeadlockError(fmt::format("host blocks forever at instruction {} ({}): event {} was never recorded before it",
                                        i, describe(p_, i), e));
      }
      target = recs.back();
      has_source = event_has_source_[e.index()] != 0;
    }
    if (!target || ops_[*target].done) return true;
    blocked_on_ = *target;
    blocked_has_source_ = has_source;
    blocked_since_ = now_;
    return false;
  }

  // ---- GPU streams -------------------------------------------------------------------------

  // A new op at the end of ops_, where it stays (built in place: the array is the engine's
  // largest); enqueue() puts it on its stream.
  Op& new_op(OpType type, StreamId s, std::size_t i) {
    Op& op = ops_.emplace_back();
    op.type = type;
    op.stream = s;
    op.instruction = static_cast<std::uint32_t>(i);
    op.issue = now_;
    op.host_before = static_cast<std::int32_t>(timeline_.host.size()) - 1;
    if (variation_) drift_.push_back(OpDrift{.issue = host_drift_});
    return op;
  }

  // The timeline's record of a Kernel/Collective op, made as it is issued (its start, end and
  // start cause are filled in as it runs). Its names are the program's (Timeline::program_text).
  TimelineOp& add_timeline_op(const Op& op, Text name, Text unit) {
    TimelineOp& t = timeline_.ops.emplace_back();
    t.stream = op.stream;
    t.phase = phase_;
    t.issue = op.issue;
    t.instruction = op.instruction;
    t.solo_duration = op.solo;
    t.name = name;
    t.unit = unit;
    if (explain_) timeline_.op_why.emplace_back();
    if (variation_) timeline_.rank_wait.emplace_back();
    return t;
  }

  // Puts the op new_op() made last on its stream.
  void enqueue() {
    const std::size_t idx = ops_.size() - 1;
    Op& op = ops_.back();
    const std::size_t su = op.stream.index();
    op.stream_pred = static_cast<std::int32_t>(stream_last_op_[su]);
    if (op.type == OpType::Kernel || op.type == OpType::Collective) {
      op.timeline_index = timeline_ops_++;
      // The constraints explain counts for it: its issue, the op before it on its stream, the
      // event waits queued on the stream since then, the communicator's previous collective
      // (Timeline::dependencies, which only explain reads: not counted for the metrics alone).
      if (explain_) {
        dependencies_ += (op.host_before >= 0 ? 1 : 0) + stream_has_op_[su] + pending_event_deps_[su];
        if (op.type == OpType::Collective && comm_queue_[op.comm.index()].size() > 1) ++dependencies_;
      }
      pending_event_deps_[su] = 0;
      stream_has_op_[su] = 1;
    }
    streams_[su].push_back(idx);
    // Only a new front can start now: behind another op it waits for that op's end, which marks
    // the stream again (complete()), and a blocked front stays blocked by what is pushed behind.
    if (streams_[su].size() == 1) stream_dirty_.insert(su);
    stream_last_op_[su] = static_cast<long>(idx);
  }

  bool can_start(const Op& op, std::size_t idx) const {
    switch (op.type) {
      case OpType::Wait: {
        const auto& recs = records_[op.event.index()];
        std::size_t want = op.event_generation == 0 ? 0 : op.event_generation - 1;
        return want < recs.size() && ops_[recs[want]].done;
      }
      case OpType::Collective: {
        return comm_queue_[op.comm.index()][comm_next_[op.comm.index()]] == idx;
      }
      default: return true;
    }
  }

  // Starts every op that can start now (nothing can when no stream is dirty and no rate has
  // to change: a quarter of the calls, each after a host instruction or an op's end).
  void pump() {
    if (!stream_dirty_.empty() || rates_dirty_) start_ready_ops();
  }

  // Zero-time ops complete at once, which may unblock others, so loop until nothing moves.
  void start_ready_ops() {
    bool progress = true;
    bool running_changed = false;
    while (progress) {
      progress = false;
      // Only streams whose front may have become startable; the others stopped where they are.
      for (std::size_t s = stream_dirty_.take_from(0); s != StreamBits::npos; s = stream_dirty_.take_from(s + 1)) {
        auto& q = streams_[s];
        while (!q.empty()) {
          std::size_t idx = q.front();
          Op& op = ops_[idx];
          if (op.started) break;  // running
          if (!can_start(op, idx)) break;
          if (variation_ && !arrived(op, idx)) break;  // a collective waiting for the slowest rank
          op.started = true;
          if (explain_ && (!variation_ || op.type != OpType::Collective)) op.why = start_cause(op);  // else as it arrived
          op.start = now_;
          progress = true;
          if (op.type == OpType::Record || op.type == OpType::Wait || op.solo.ns == 0) {
            complete(idx);
            continue;
          }
          running_.push_back(Running{idx, static_cast<double>(op.solo.ns), 0, now_, hbm_share(op)});
          running_changed = true;
          break;
        }
      }
    }
    if (running_changed || rates_dirty_) update_rates();
  }

  // Preference among constraints that are all ready exactly now: a cross-stream wait explains
  // more than "it was next in line" (the order explain has always used).
  static OpIndex op_index(std::int32_t i) { return OpIndex{static_cast<std::size_t>(i)}; }
  static HostIndex host_index(std::int32_t i) { return HostIndex{static_cast<std::size_t>(i)}; }

  static int preference(StartCause c) {
    switch (c) {
      case StartCause::HostSync: return 0;
      case StartCause::Event: return 1;
      case StartCause::CommFifo: return 2;
      case StartCause::Stream: return 3;
      case StartCause::Issue: return 4;
      case StartCause::HostOrder: return 5;
      case StartCause::None: break;
    }
    return 6;
  }

  // The binding constraint of an op starting now: among its issue, the op before it on its
  // stream, the record it waits for, the communicator's previous collective, one whose ready
  // time is now (the start is the latest of them, so one always is unless nothing constrains
  // it). A Record or Wait ahead of it on the stream hands on its own cause, so a Kernel
  // behind a Wait names the op the matching Record followed. Among ties, the preference
  // above, then the earlier constraint (its issue before an inherited issue, an earlier
  // Wait's event before a later one).
  StartRecord start_cause(const Op& op) const {
    StartRecord best;
    auto consider = [&](StartRecord c) {
      if (c.cause() != StartCause::None && preference(c.cause()) < preference(best.cause())) best = c;
    };
    if (op.issue == now_ && op.host_before >= 0) consider(StartRecord{StartCause::Issue, host_index(op.host_before)});
    if (op.stream_pred >= 0) {
      const Op& prev = ops_[static_cast<std::size_t>(op.stream_pred)];
      if (prev.end == now_) consider(prev.timeline_index >= 0 ? StartRecord{StartCause::Stream, op_index(prev.timeline_index)} : prev.why);
    }
    if (op.type == OpType::Wait) {
      const auto& recs = records_[op.event.index()];
      const Op& rec = ops_[recs[op.event_generation == 0 ? 0 : op.event_generation - 1]];
      // A Record that was only waiting for its own issue explains nothing the Wait's issue
      // (at the same instant, later in program order) does not.
      if (rec.end == now_ && (rec.why.cause() == StartCause::Stream || rec.why.cause() == StartCause::Event))
        consider(StartRecord{StartCause::Event, *rec.why.op()});
    }
    if (op.type == OpType::Collective) {
      const std::size_t c = op.comm.index();
      if (comm_next_[c] > 0) {
        const Op& prev = ops_[comm_queue_[c][comm_next_[c] - 1]];
        if (prev.end == now_) consider(StartRecord{StartCause::CommFifo, op_index(prev.timeline_index)});
      }
    }
    return best;
  }

  // std::ceil for the finish times (>= -1e-6): inline, where std::ceil is a libm call on the
  // baseline x86-64 target, once per rate change.
  static std::int64_t ceil_ns(double x) {
    const auto n = static_cast<std::int64_t>(x);
    return static_cast<double>(n) < x ? n + 1 : n;
  }

  // A collective's HBM traffic at its solo rate over the GPU's HBM bandwidth (0 for kernels, or
  // without the resource model).
  double hbm_share(const Op& op) const {
    if (op.type != OpType::Collective || !hw_.contention.models_resources() || op.solo.ns <= 0 || hw_.compute.hbm.bytes_per_s <= 0) return 0;
    const auto& c = std::get<Collective>(p_.instructions[op.instruction]);
    const double bus_bytes = busbw_factor(c.kind, p_.comms[c.comm.index()].ranks) * static_cast<double>(c.bytes.count);
    return kCollectiveHbmBytesPerBusByte * bus_bytes / op.solo.seconds() / hw_.compute.hbm.bytes_per_s;
  }

  static void advance(Running& r, Time now) {
    r.remaining -= static_cast<double>((now - r.last_update).ns) * r.rate;
    if (r.remaining < 0) r.remaining = 0;
    r.last_update = now;
  }

  void update_rates() {
    rates_dirty_ = false;
    int kernels = 0, memory_bound_kernels = 0, colls[2] = {0, 0};
    double hbm = 0;  // what the running collectives' data paths ask of HBM
    for (const Running& r : running_) {
      const Op& op = ops_[r.op];
      if (op.type == OpType::Kernel) ++kernels, memory_bound_kernels += op.sm_bound ? 0 : 1;
      else ++colls[op.link_class], hbm += r.hbm_share;
    }
    const int running_colls = colls[0] + colls[1];
    const ContentionProfile& c = hw_.contention;
    const double sm_bound_slowdown = running_colls > 0 ? c.compute_bound_slowdown(running_colls) : 0.0;
    const double memory_bound_slowdown = running_colls > 0 ? c.memory_bound_slowdown(hbm) : 0.0;
    // A collective beside kernels: comm_slowdown, or with the resource model beside a
    // memory-bound kernel its share of HBM (ContentionProfile::memory_bound_slowdown).
    const double comm_slowdown = kernels == 0                                      ? 0.0
                                 : c.models_resources() && memory_bound_kernels > 0 ? std::max(c.comm_slowdown, memory_bound_slowdown)
                                                                                    : c.comm_slowdown;
    for (Running& r : running_) {
      const Op& op = ops_[r.op];
      double rate;
      if (op.type == OpType::Kernel) rate = 1.0 / kernels / (1.0 + (op.sm_bound ? sm_bound_slowdown : memory_bound_slowdown));
      else rate = 1.0 / colls[op.link_class] / (1.0 + comm_slowdown);
      if (rate == r.rate) continue;
      advance(r, now_);
      r.rate = rate;
      double left = r.remaining / rate;
      r.finish = now_ + Time{ceil_ns(left - 1e-6)};
      r.seq = seq_++;
    }
  }

  void complete(std::size_t idx) {
    Op& op = ops_[idx];
    op.done = true;
    op.end = now_;
    if (op.timeline_index >= 0) {
      // Its timeline record is written once, here: with the host far ahead it was issued long
      // ago and its cache line is cold.
      const auto t = static_cast<std::size_t>(op.timeline_index);
      timeline_.ops[t].start = op.start;
      timeline_.ops[t].end = now_;
      if (explain_) timeline_.op_why[t] = op.why;
      if (variation_) {
        // The NCCL kernel of the rank that arrived first spans its wait, as in a real trace.
        const OpDrift& d = drift_[idx];
        if (op.type == OpType::Collective) {
          timeline_.ops[t].start = d.arrival;
          timeline_.rank_wait[t] = op.start - d.arrival;
        }
      }
    }
    if (variation_) end_drift(op, idx);
    ops_end_ = std::max(ops_end_, now_);
    auto& q = streams_[op.stream.index()];
    if (!q.empty() && q.front() == idx) q.pop_front();
    // The next op of its stream may start; a Record may release a Wait, a collective the next
    // one of its communicator, on any stream.
    if (op.type == OpType::Record || op.type == OpType::Collective) stream_dirty_.insert_all();
    else stream_dirty_.insert(op.stream.index());
    if (op.type == OpType::Collective) ++comm_next_[op.comm.index()];
    for (auto it = running_.begin(); it != running_.end(); ++it)
      if (it->op == idx) {
        running_.erase(it);
        rates_dirty_ = true;
        break;
      }
    // Deferred (record_stream) frees whose last outstanding op this was, in the order they
    // were issued (a free becomes ready exactly at the completion of its last op).
    for (std::int32_t w = op.waiters_head; w >= 0; w = waiters_[static_cast<std::size_t>(w)].next) {
      PendingFree& pf = pending_frees_[waiters_[static_cast<std::size_t>(w)].free];
      if (--pf.outstanding == 0) release(pf.buffer);
    }
    if (blocked_on_ && *blocked_on_ == idx) {
      if (explain_) {
        HostInterval blocked{HostInterval::Kind::Blocked, HostInterval::Label::Text, static_cast<std::uint32_t>(pc_), blocked_label(pc_),
                             blocked_since_, now_};
        // Released by this op, or by the op behind it when it is a Record or Wait.
        StartRecord why;
        if (op.timeline_index >= 0) why = StartRecord{StartCause::HostSync, op_index(op.timeline_index)};
        else if (op.why.cause() == StartCause::Stream || op.why.cause() == StartCause::Event) why = StartRecord{StartCause::HostSync, *op.why.op()};
        dependencies_ += blocked_has_source_ ? 1 : 0;
        push_host(std::move(blocked), why);
      }
      if (variation_) host_drift_ = drift_[idx].end;  // the host resumes where that op left this rank
      blocked_on_.reset();
      if (blocked_retry_) {
        // A full launch queue: the launch itself is issued now (its CPU cost was paid).
        blocked_retry_ = false;
        retrying_ = true;
        schedule_host(Time::zero());
        return;
      }
      ++pc_;
      // The host resumes now; the next instruction's CPU cost starts counting here.
      if (pc_ < p_.instructions.size()) schedule_host(host_cost(pc_));
      else host_done_at_ = now_;
    }
  }

  // ---- ranks that are not identical (RankVariation) ----------------------------------------

  static double square(double x) { return x * x; }
  double variance(const Drift& d) const { return square(hw_.rank_variation.persistent_cv * d.a) + d.b; }

  // The drift of the constraint that binds an op starting now (as start_cause, among those ready
  // exactly now, the one of largest variance: the latest of the ranks' arrivals follows it).
  Drift binding_drift(const Op& op, std::size_t idx) const {
    const Drift* best = nullptr;
    double best_var = -1;
    auto consider = [&](const Drift& d) {
      if (const double v = variance(d); v > best_var) best = &d, best_var = v;
    };
    if (op.issue == now_) consider(drift_[idx].issue);
    const auto pred = op.stream_pred;
    if (pred >= 0 && ops_[static_cast<std::size_t>(pred)].end == now_) consider(drift_[static_cast<std::size_t>(pred)].end);
    if (op.type == OpType::Wait) {
      const auto& recs = records_[op.event.index()];
      const std::size_t rec = recs[op.event_generation == 0 ? 0 : op.event_generation - 1];
      if (ops_[rec].end == now_) consider(drift_[rec].end);
    }
    if (op.type == OpType::Collective && comm_next_[op.comm.index()] > 0) {
      const std::size_t prev = comm_queue_[op.comm.index()][comm_next_[op.comm.index()] - 1];
      if (ops_[prev].end == now_) consider(drift_[prev].end);
    }
    if (best) return *best;
    return pred >= 0 ? drift_[static_cast<std::size_t>(pred)].end : drift_[idx].issue;
  }

  // False while a collective waits for the slowest rank of its communicator: this rank arrived
  // now with the spread accumulated since the ranks last met; the last of N arrives, in
  // expectation, E[max of N normals] standard deviations later (or one draw of that maximum).
  bool arrived(Op& op, std::size_t idx) {
    OpDrift& d = drift_[idx];
    if (d.hold == 2) return true;
    if (d.hold == 1) {
      if (now_ < d.hold_until) return false;
      d.hold = 2;
      return true;
    }
    d.start = binding_drift(op, idx);
    d.hold = 2;
    if (op.type != OpType::Collective) return true;
    if (explain_) op.why = start_cause(op);
    d.arrival = now_;
    const int n = p_.comms[op.comm.index()].ranks;
    const double sigma = std::sqrt(variance(d.start));
    if (n <= 1 || sigma <= 0) return true;
    double z;
    if (rank_options_.sample) {
      // The maximum of n standard normals has CDF Phi(x)^n: x = Phi^-1(u^(1/n)).
      const double u = std::uniform_real_distribution<double>(1e-12, 1.0 - 1e-12)(rng_);
      z = boost::math::quantile(boost::math::normal_distribution<double>(), std::pow(u, 1.0 / n));
    } else {
      // Once per communicator per run: the shared cache behind expected_max_of_normals takes a
      // lock, which a sweep's threads would contend on at every collective.
      double& e = comm_expected_max_[op.comm.index()];
      if (e < 0) e = expected_max_of_normals(n);
      z = e;
    }
    const auto wait = static_cast<std::int64_t>(std::llround(z * sigma));
    if (wait <= 0) return true;
    d.hold = 1;
    d.hold_until = now_ + Time{wait};
    heap_.push(HeapEvent{d.hold_until, seq_++, static_cast<std::uint32_t>(idx)});
    return false;
  }

  // After a kernel the spread grows by its own; a collective leaves its ranks together.
  void end_drift(const Op& op, std::size_t idx) {
    OpDrift& d = drift_[idx];
    if (d.hold == 0) d.start = binding_drift(op, idx);  // a zero-time op completed where it started
    switch (op.type) {
      case OpType::Kernel: {
        const double ns = static_cast<double>((op.end - op.start).ns);
        const KernelClass cls = timeline_.ops[static_cast<std::size_t>(op.timeline_index)].cls;
        d.end = Drift{d.start.a + ns, d.start.b + square(hw_.rank_variation.kernel_cv[static_cast<std::size_t>(cls)] * ns)};
        break;
      }
      case OpType::Collective: d.end = Drift{}; break;
      default: d.end = d.start;
    }
  }

  // "blocked: " and why, stored straight into the timeline's pool: a host that runs ahead of a
  // full launch queue blocks once per launch past it (728 times in the DDP example's step).
  Text blocked_label(std::size_t i) const {
    if (const auto* h = std::get_if<HostSync>(&p_.instructions[i])) return timeline_.text->add("blocked: ", h->reason);
    LabelParts parts;
    parts.text("blocked: ");
    if (blocked_retry_) {
      parts.text("launch queue full (");
      parts.number(kLaunchQueueDepth);
      parts.text(" pending): ");
    }
    describe_to(parts, p_, i);
    return timeline_.text->add(parts.parts());
  }

  // ---- memory ------------------------------------------------------------------------------

  struct BufferState {
    Bytes bytes;
    MemCategory category = MemCategory::Other;
    bool live = false;
    bool free_pending = false;
    bool allocator_freed = false;  // a flush freed its block before the recorded streams passed
    std::size_t free_log_pos = 0;  // alloc_log_'s size when the host issued its deferred Free
  };

  void release(BufferId id) {
    auto& b = buffers_[id.index()];
    live_[static_cast<std::size_t>(b.category)] -= b.bytes;
    live_total_ -= b.bytes;
    b.live = false;
    const std::size_t issued_at = b.free_pending ? b.free_log_pos : alloc_log_.size();
    b.free_pending = false;
    if (!b.allocator_freed) allocator_.free(id);
    b.allocator_freed = false;
    sample_memory(now_);
    alloc_log_.push_back(AllocEvent{false, id, b.bytes, StreamId{0}, timeline_.memory.size() - 1, issued_at});
  }

  // The reserved curve of a step in steady state. A measured step (a trace after warm-up, or
  // torch.cuda.max_memory_reserved() after some steps) sees the segments cached by earlier
  // steps: reserved shrinks only when a cudaMalloc would fail and the allocator flushes its
  // cache (sim/exec/caching_allocator.hpp). So the allocator traffic of this step is replayed as
  // the following steps issue it: buffers still live at the end of the step (the persistent
  // state) stay allocated, every other buffer is allocated and freed again in the same order,
  // until a replayed step calls cudaMalloc no more (at most kMaxSteadyStatePasses); the last
  // replayed step's reserved bytes become the curve.
  //
  // The allocator's flushes are counted in the steady step (timeline_.alloc_retries); its OOMs
  // in the worse of the first step and the steady one: a first step that fails ends the run.
  //
  // A step whose live bytes alone exceed the device (metrics' "DOES NOT FIT") has no steady
  // state: PyTorch raises OutOfMemoryError in its first step. Its curve and counters stay those
  // of that first step as simulated, rather than of steps no run reaches; replaying them cost up
  // to half the simulation again (bench/oom_bench, issue 49).
  void steady_state_reserved() {
    CachingAllocator& a = allocator_;  // holds the step as run above
    timeline_.alloc_retries = a.counters().num_alloc_retries;
    timeline_.alloc_ooms = a.counters().num_ooms;
    if (!allocator_config_.enabled || alloc_log_.empty()) return;
    if (timeline_.capacity.count > 0) {
      Bytes peak;
      for (const MemorySample& m : timeline_.memory) peak = std::max(peak, m.total);
      if (peak + timeline_.non_pytorch > timeline_.capacity) return;
    }
    auto apply = [&](const AllocEvent& ev) {
      if (ev.alloc) a.malloc(ev.buffer, ev.bytes, ev.stream);
      else a.free(ev.buffer);
    };
    std::vector<Bytes> reserved(alloc_log_.size());
    // A flush at event k frees at once what the host had freed by then but the log releases
    // later (deferred record_stream frees issued at or before k): synchronize_and_free_events.
    // Only deferred frees (issued before their place in the log) can be such; they are taken
    // in the order the host issued them, so a flush looks at the ones issued since the last
    // flush and the ones still pending, not at the rest of the log (a 70B step on a slow
    // network flushes often enough that a scan of the log per flush was most of its time).
    std::vector<std::size_t> deferred;  // log positions of deferred frees, by issue position
    for (std::size_t j = 0; j < alloc_log_.size(); ++j)
      if (!alloc_log_[j].alloc && alloc_log_[j].issued_at < j && !buffers_[alloc_log_[j].buffer.index()].live)
        deferred.push_back(j);
    std::stable_sort(deferred.begin(), deferred.end(),
                     [&](std::size_t x, std::size_t y) { return alloc_log_[x].issued_at < alloc_log_[y].issued_at; });
    std::vector<char> freed_early(alloc_log_.size());
    std::size_t next_issued = 0;  // deferred[next_issued..]: issued after the last flush
    std::size_t at = 0;
    std::vector<std::size_t> pending;  // issued since the last flush, not yet released by the log
    a.set_flush_hook([&] {
      pending.clear();
      for (; next_issued < deferred.size() && alloc_log_[deferred[next_issued]].issued_at <= at; ++next_issued)
        if (deferred[next_issued] > at) pending.push_back(deferred[next_issued]);
      std::sort(pending.begin(), pending.end());  // log order, as a scan of the log frees them
      for (std::size_t j : pending) {
        a.free(alloc_log_[j].buffer);
        freed_early[j] = 1;
      }
    });
    Bytes start = a.reserved();
    // A pass that ends in the state it started from (up to names) repeats itself: the passes after
    // it would give the same curve and counters, so the replay stops there. A step that flushes
    // its cache cudaMallocs on every pass and would otherwise run all of them. A fingerprint walks
    // every block and buffer (128 k instructions where a replayed pass of a 70B step that does not
    // fit is 2.9 M: bench/oom_bench), so it is taken after the first replayed pass, which the
    // second can then match, and after a pass whose totals match those of the pass before; a step
    // that does not fit rarely ends two passes alike.
    std::optional<std::vector<std::int64_t>> state;  // at the end of the pass before, if taken
    auto totals = [&] { return std::make_tuple(a.reserved(), a.allocated(), a.segments()); };
    auto last_totals = totals();
    for (int step = 2; step <= kMaxSteadyStatePasses; ++step) {
      start = a.reserved();
      const AllocatorCounters before = a.counters();
      std::fill(freed_early.begin(), freed_early.end(), 0);
      next_issued = 0;
      for (std::size_t k = 0; k < alloc_log_.size(); ++k) {
        const AllocEvent& ev = alloc_log_[k];
        at = k;
        if (!buffers_[ev.buffer.index()].live && !freed_early[k]) apply(ev);
        reserved[k] = a.reserved();
      }
      timeline_.alloc_retries = a.counters().num_alloc_retries - before.num_alloc_retries;
      timeline_.alloc_ooms = std::max(timeline_.alloc_ooms, a.counters().num_ooms - before.num_ooms);
      // No cudaMalloc (so no retry either): the next steps repeat this one.
      if (a.counters().num_device_alloc == before.num_device_alloc) break;
      if (step == kMaxSteadyStatePasses) break;
      const auto now_totals = totals();
      const bool alike = now_totals == last_totals;
      last_totals = now_totals;
      if (step > 2 && !alike) {
        state.reset();
        continue;
      }
      std::vector<std::int64_t> now = a.fingerprint();
      if (state && now == *state) break;
      state = std::move(now);
    }
    a.set_flush_hook({});  // it refers to this function's locals
    timeline_.memory.front().reserved = start;
    for (std::size_t k = 0; k < alloc_log_.size(); ++k) timeline_.memory[alloc_log_[k].sample].reserved = reserved[k];
  }

  void sample_memory(Time t) {
    MemorySample s;
    s.time = t;
    s.by_category = live_;
    s.total = live_total_;
    s.reserved = allocator_.reserved();
    timeline_.memory.push_back(std::move(s));
  }

  // ---- end ---------------------------------------------------------------------------------

  void check_finished() {
    std::vector<std::string> stuck;
    if (blocked_on_) {
      stuck.push_back(fmt::format("host blocked at instruction {} ({}) waiting for instruction {} ({})", pc_,
                                  describe(p_, pc_), ops_[*blocked_on_].instruction, describe(p_, ops_[*blocked_on_].instruction)));
    }
    for (std::size_t s = 0; s < streams_.size(); ++s) {
      if (streams_[s].empty()) continue;
      const Op& op = ops_[streams_[s].front()];
      std::string why;
      if (op.type == OpType::Wait) {
        const auto& recs = records_[op.event.index()];
        why = recs.empty() ? fmt::format(": event {} is never recorded", op.event)
                           : fmt::format(": event {} record never completes", op.event);
      } else if (op.type == OpType::Collective) {
        const std::size_t c = op.comm.index();
        std::size_t head = comm_queue_[c][comm_next_[c]];
        why = fmt::format(": behind instruction {} ({}) in communicator '{}' FIFO", ops_[head].instruction,
                          describe(p_, ops_[head].instruction), p_.comms[c].name);
      }
      stuck.push_back(fmt::format("stream '{}' stuck at instruction {} ({}){}", p_.streams[s].name, op.instruction,
                                  describe(p_, op.instruction), why));
    }
    if (!blocked_on_ && pc_ < p_.instructions.size() && stuck.empty())
      stuck.push_back(fmt::format("host stopped at instruction {}", pc_));
    if (stuck.empty()) return;
    std::string msg = "deadlock: the program can never finish: ";
    for (std::size_t k = 0; k < stuck.size(); ++k) msg += (k ? "; " : "") + stuck[k];
    throw DeadlockError(msg);
  }

  // Communicators that run a collective in the step: ProcessGroupNCCL creates the NCCL
  // communicator lazily, at its first collective, and each holds NCCL's buffers. Counted before
  // the step runs (the allocator's device limit needs them), and only when the profile puts
  // NCCL buffers outside the allocator: otherwise the count changes nothing.
  // A communicator of one rank has no peer to connect: no buffers.
  static std::size_t communicators_used(const Program& p, const HardwareProfile& hw) {
    if (hw.outside_allocator.nccl_per_communicator.count == 0 && hw.outside_allocator.nccl_channels == 0) return 0;
    const auto connects = [](const CommDecl& c) { return c.collectives > 0 && c.ranks > 1; };
    return static_cast<std::size_t>(std::count_if(p.comms.begin(), p.comms.end(), connects));
  }

  void finish_timeline() {
    // Every host interval ends by the host's last instruction (host_done_at_).
    const Time end = std::max(host_done_at_, ops_end_);
    timeline_.start = Time::zero();
    timeline_.end = end;
    timeline_.dependencies = dependencies_ + (timeline_.host.empty() ? 0 : timeline_.host.size() - 1);
  }

  const Program& p_;
  const HardwareProfile& hw_;
  ProgramChecker checker_;
  KernelTimeCache kernel_times_;
  Time now_;
  std::uint64_t seq_ = 0;
  Time next_cost_;  // the CPU cost of the host's next instruction, as scheduled
  std::priority_queue<HeapEvent, std::vector<HeapEvent>, std::greater<>> heap_;
  std::vector<Op> ops_;
  std::vector<std::deque<std::size_t>> streams_;
  // Streams whose front op may have become startable since pump() last looked (an op was
  // enqueued on it, its front completed, or a Record or collective completed anywhere): pump()
  // skips the others, which could only have stopped where they are.
  StreamBits stream_dirty_;
  std::vector<long> stream_last_op_;
  std::vector<std::vector<std::size_t>> comm_queue_;
  std::vector<std::size_t> comm_next_;
  std::int32_t timeline_ops_ = 0;               // Kernel/Collective ops enqueued so far
  std::size_t dependencies_ = 0;                // Timeline::dependencies, host order aside
  std::vector<char> stream_has_op_;             // a Kernel/Collective was enqueued on the stream
  std::vector<std::size_t> pending_event_deps_;  // Waits (on a recorded op) since the stream's last one
  std::vector<char> event_has_source_;          // its latest Record's stream had a Kernel/Collective before it
  bool blocked_has_source_ = false;
  std::vector<EventRecords> records_;  // by event
  std::vector<Running> running_;
  bool rates_dirty_ = false;
  std::vector<BufferState> buffers_;
  std::vector<PendingFree> pending_frees_;                                   // by issue order
  std::size_t flushed_frees_ = 0;  // pending_frees_[..this] were issued before the last cache flush
  struct Waiter {
    std::size_t free = 0;  // index into pending_frees_
    std::int32_t next = -1;  // the next waiter on the same op
  };
  std::vector<Waiter> waiters_;
  struct AllocEvent {
    bool alloc = true;
    BufferId buffer{0};
    Bytes bytes;
    StreamId stream{0};
    std::size_t sample = 0;  // the memory sample this change produced
    std::size_t issued_at = 0;  // a free: alloc_log_'s size when the host issued it (deferred: earlier)
  };
  AllocatorConfig allocator_config_;
  CachingAllocator allocator_;
  std::vector<AllocEvent> alloc_log_;
  std::vector<std::size_t> lazy_;  // Alloc::lazy instructions the allocator has not met yet
  std::vector<std::uint8_t> workspace_held_;  // per (stream, handle): 1 once it holds a cuBLAS workspace
  std::uint32_t workspaces_ = 0;              // how many do
  std::array<Bytes, kMemCategoryCount> live_{};
  Bytes live_total_;  // the sum of live_
  std::size_t pc_ = 0;
  Phase phase_ = Phase::Setup;
  std::optional<std::size_t> blocked_on_;
  bool blocked_retry_ = false;  // blocked_on_ is a full launch queue: instruction pc_ is issued again
  bool retrying_ = false;       // run_host is issuing that instruction again
  Time blocked_since_;
  Time host_done_at_;
  bool variation_ = false;  // the profile's rank_variation is set
  bool host_varies_ = false;  // and its host_cv is not 0
  bool explain_ = true;     // TimelineDetail::Full: the host's intervals and every start's cause
  RankOptions rank_options_;
  std::mt19937_64 rng_;
  std::vector<OpDrift> drift_;  // parallel to ops_ when variation_
  std::vector<double> comm_expected_max_;  // per communicator: E[max of its ranks' normals], -1 until needed
  Drift host_drift_;
  Timeline timeline_;
  Time ops_end_;    // the latest end of any op
};

}  // namespace

Timeline simulate_program(const Program& program, const HardwareProfile& hw, const AllocatorConfig& allocator,
                          const RankOptions& ranks, TimelineDetail detail) {
  return Engine(program, hw, allocator, ranks, detail).run();
}

Timeline simulate_program(const Program& program, const SharedProfile& hw, const AllocatorConfig& allocator,
                          const RankOptions& ranks, TimelineDetail detail) {
  return Engine(program, *hw, allocator, ranks, detail, hw.gemm_time_memo()).run();
}

double expected_max_of_normals(int n) {
  if (n <= 1) return 0;
  if (n < kExpectedMaxTableSize) return kExpectedMaxTable[n];
  // Beyond the table: the same integral (expected_max.hpp), once per n.
  static const expected_max::CdfGrid grid = expected_max::normal_cdf_grid();
  static std::mutex mutex;
  static std::map<int, double> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(n); it != cache.end()) return it->second;
  return cache[n] = expected_max::integral(grid, n);
}

std::string describe(const Program& p, std::size_t i) {
  LabelParts parts;
  describe_to(parts, p, i);
  return concat(parts.parts());
}

}  // namespace stepsim
