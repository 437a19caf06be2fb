#pragma once
// What one executed step looks like: every GPU op with its issue, start and end, the host
// thread's activity, and the memory curve. Produced by the simulator (sim/exec/engine) and by
// the live executor, consumed by metrics, reports, explain and compare.

#include <array>
#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/non_pytorch_part.hpp"
#include "sim/core/text_pool.hpp"
#include "sim/core/units.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

// Why an op or host interval started when it did: the constraint whose ready time equals its
// start (DESIGN.md section 1, rules 1-2), and what it waited on. Recorded by the simulator as
// it runs (sim/exec/engine.cpp start_cause); explain walks it back from the last op.
//   HostOrder  the previous host interval ended (on: Timeline::host index)
//   Issue      the host issued it (on: the host interval current at its issue, Timeline::host)
//   Stream     the previous op on its stream ended (on: Timeline::ops index)
//   Event      an event it waits on (through Wait/Record) was reached (on: the op the Record followed)
//   CommFifo   the previous collective of its communicator ended (on: Timeline::ops index)
//   HostSync   a blocked host interval: the op it waited for ended (on: Timeline::ops index)
// There is no memory cause: an Alloc never waits in the simulator (the caching allocator model
// only counts reserved bytes), so memory never delays a start. None: nothing binds (the first
// host interval, an op issued at time zero) or not recorded (measured timelines).
enum class StartCause : std::uint8_t { None, HostOrder, Issue, Stream, Event, CommFifo, HostSync };

using OpIndex = Id<struct OpIndexTag>;      // into Timeline::ops
using HostIndex = Id<struct HostIndexTag>;  // into Timeline::host

// A cause and what it waited on: an op for Stream / Event / CommFifo / HostSync, a host interval
// for HostOrder / Issue, nothing for None. Eight bytes: there is one per op and host interval.
class StartRecord {
 public:
  StartRecord() = default;
  StartRecord(StartCause cause, OpIndex op) : cause_(cause), on_(static_cast<std::int32_t>(op.index())) {
    assert(!on_host(cause) && cause != StartCause::None);
  }
  StartRecord(StartCause cause, HostIndex host) : cause_(cause), on_(static_cast<std::int32_t>(host.index())) {
    assert(on_host(cause));
  }

  StartCause cause() const { return cause_; }
  // What it waited on, when that is an op / a host interval.
  std::optional<OpIndex> op() const {
    return cause_ == StartCause::None || on_host(cause_) ? std::nullopt : std::optional<OpIndex>(OpIndex{static_cast<std::size_t>(on_)});
  }
  std::optional<HostIndex> host() const {
    return on_host(cause_) ? std::optional<HostIndex>(HostIndex{static_cast<std::size_t>(on_)}) : std::nullopt;
  }
  static bool on_host(StartCause c) { return c == StartCause::HostOrder || c == StartCause::Issue; }

 private:
  StartCause cause_ = StartCause::None;
  std::int32_t on_ = -1;
};

// One per GPU op (10^5 in a deep program, written as the simulator runs): the members are
// ordered so that it packs into 104 bytes.
struct TimelineOp {
  enum class Kind : std::uint8_t { Kernel, Collective, Marker };
  Text name;  // held by Timeline::text
  Text unit;
  Time issue, start, end;
  Time solo_duration;  // what the cost model gave, before contention
  std::size_t instruction = 0;  // index into Program::instructions
  StreamId stream{0};
  Kind kind = Kind::Kernel;
  Phase phase = Phase::Setup;
  // Kernels
  KernelClass cls = KernelClass::Compute;
  int kernels = 1;  // CUDA kernels this op stands for (Kernel::kernels)
  // Collectives
  std::optional<CommId> comm;  // collectives
  CollectiveKind collective = CollectiveKind::AllReduce;
  Dtype dtype = Dtype::BF16;
  Bytes bytes;

  Time duration() const { return end - start; }
  bool memcpy() const { return kind == Kind::Kernel && is_memcpy(cls, kernels); }
};

// The host thread: what it was doing from start to end (an instruction's CPU cost, HostWork,
// or blocked in a HostSync).
// One per host instruction with a CPU cost: 48 bytes. Its label ("launch fwd block.3", "Free
// 'grads block.2'") is host_label(timeline, interval). The simulator stores the instruction's
// operands (`label`, `name`, `arg`) and formats nothing: a deep step has 10^5 intervals and a
// report shows a few, where formatting each as it ran was a tenth of the engine's time and a
// fifth of a 4,096-layer step's (bench/pending_free_bench); measured timelines store the text.
struct HostInterval {
  enum class Kind : std::uint8_t { Issue, Work, Blocked };
  // What `name` and `arg` hold: Text, the whole label; else the operands of that instruction
  // kind (Launch, Collective: the kernel's / collective's name; Record, Wait: arg = event << 32 |
  // stream; HostSyncEvent / HostSyncStream: arg = the event / stream, name = the reason; Alloc:
  // name, arg = bytes; Free: name = the buffer's, FreeUnnamed: arg = the buffer; Mark: name).
  enum class Label : std::uint8_t { Text, Launch, Collective, Record, Wait, HostSyncEvent, HostSyncStream, Alloc, Free, FreeUnnamed, Mark };
  Kind kind = Kind::Issue;
  Label label = Label::Text;
  std::uint32_t instruction = 0;  // index into Program::instructions (at most kMaxProgramInstructions)
  Text name;  // held by Timeline::text or Timeline::program_text
  Time start, end;
  std::int64_t arg = 0;
};

// Live bytes after a change at `time`, per category and total, and what the caching
// allocator holds from the device at that instant (torch.cuda.memory_reserved()).
struct MemorySample {
  Time time;
  Bytes total;
  std::array<Bytes, kMemCategoryCount> by_category{};  // indexed by MemCategory
  Bytes reserved;                  // 0 when not known (measured timelines)
};

static_assert(sizeof(TimelineOp) <= 104 && sizeof(HostInterval) <= 48, "timeline records grew: see their comments");

struct PhaseMark {
  std::string name;
  Time time;  // host time when the Mark was reached
};

struct Timeline {
  // The names of ops and host intervals (TimelineOp::name, unit, HostInterval::name) live here;
  // copies of the timeline share it. A name stored in this timeline comes from this pool.
  std::shared_ptr<TextPool> text = std::make_shared<TextPool>();
  // A simulated timeline's names that come from its program (kernels, collectives, units,
  // buffers: Program::text), kept alive with it rather than copied into `text`.
  std::shared_ptr<const TextPool> program_text;
  std::vector<StreamDecl> streams;
  std::vector<CommDecl> comms;
  std::vector<TimelineOp> ops;          // in issue order
  std::vector<HostInterval> host;
  std::vector<MemorySample> memory;     // in time order
  std::vector<PhaseMark> marks;
  Time start;                           // first host instruction
  Time end;                             // last op on any stream or host
  Bytes capacity;                       // device memory, 0 if unknown
  Bytes non_pytorch;                    // device memory outside the caching allocator (CUDA context, NCCL, ...)
  std::vector<NonPytorchPart> non_pytorch_parts;  // what non_pytorch is made of (simulated timelines)
  // The caching allocator's cudaMalloc retries (num_alloc_retries: its cache flushed) in a
  // steady step, and its OOMs (num_ooms) in the first step or the steady one, whichever has
  // more; 0 when measured.
  std::int64_t alloc_retries = 0, alloc_ooms = 0;
  std::string device;                   // "simulated h100-sxm-8x" or the real device name
  // Why each op / host interval started (parallel to ops / host; simulated timelines only,
  // empty when measured). Kept apart so that TimelineOp and HostInterval keep their size.
  std::vector<StartRecord> op_why;
  std::vector<StartRecord> host_why;
  // Per op (parallel to ops; empty unless the profile's rank_variation is set): how long a
  // collective waited for the slowest rank of its communicator, included in its start..end as a
  // real trace's NCCL kernel includes it (docs/scale.md); 0 for kernels.
  std::vector<Time> rank_wait;
  // Constraints the simulator checked (one per host order, issue, stream predecessor, event
  // wait with a recorded source op, communicator predecessor, host sync); 0 when measured, and
  // in a simulation's TimelineDetail::Metrics timeline (explain's critical path alone reads it).
  std::size_t dependencies = 0;
};

// What the host was doing in `h` ("launch fwd block.3", "Alloc 'activations block.3' 4096 B",
// "blocked: ..."), as the simulator's describe() words it.
std::string host_label(const Timeline& t, const HostInterval& h);

}  // namespace stepsim
