#pragma once
// `stepsim analyze --allocator-replay`: the trace's own allocator events run through stepsim's
// model of PyTorch's caching allocator (sim/exec/caching_allocator.hpp), to tell two errors of a
// predicted peak reserved apart: the allocation sequence the simulator's program makes, and the
// allocator model itself. The replay uses the real sequence, so what it misses is the
// model's or the history's: segments reserved before the window (by initialization, an evaluation
// pass, an earlier step) show as a trace reserved that is already above the replay at the
// window's start and never moves inside it. So do blocks the allocator held past their free
// events: a free is reported when the tensor dies, but a block recorded on another stream (a
// collective's recordStream before PyTorch 2.8) returns to the pool only when that stream passes.
//
// Rules (docs/analyze.md):
//  - Events: Kineto "[memory]" instant events of the rank's CUDA device inside the selected steps'
//    window, in trace order; "Bytes" > 0 allocates the block at "Addr", < 0 frees it. The sizes
//    are the blocks' sizes as the allocator handed them out (c10::reportMemoryUsageToProfiler
//    reports block->size), so the 512 B rounding is already in them.
//  - One stream: the events carry none, so every block is cached for every later request (real
//    per-stream pools can only reserve more).
//  - The state at the window's start is not in the trace. Blocks freed in the window that were
//    allocated before it are allocated first, one each (in address order); the rest of the
//    allocated bytes at the start (Total Allocated minus the first event) is one block.
//  - Steady state, as the simulator's own reserved curve (sim/exec/engine.cpp): the window's
//    events are replayed again until a pass adds no segment (at most 5 passes); a block still
//    live from the previous pass is freed by the next free of its address (or just before its
//    address is allocated again). The last pass's highest reserved is the replay's peak.

#include <cstddef>
#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "sim/core/units.hpp"
#include "trace/kineto_trace.hpp"
#include "trace/trace_analysis.hpp"

namespace stepsim::trace {

struct AllocatorReplay {
  int device = 0;
  std::int64_t first_step = 0, last_step = 0;
  std::size_t allocations = 0, frees = 0;  // events in the window
  std::size_t blocks_before = 0;           // blocks freed in the window but allocated before it
  Bytes live_at_start;                     // allocated bytes when the window opens
  Bytes trace_reserved_start, trace_reserved_peak;
  Bytes replay_reserved_peak;              // the model on the real sequence, steady state
  Bytes replay_allocated_peak;
  int passes = 0;
  bool trace_reserved_flat() const { return trace_reserved_start == trace_reserved_peak; }
};

// Empty when the trace has no allocator events with addresses for the analysed steps (stepsim's
// own traces, Kineto traces recorded without profile_memory). Throws InputError on a block
// size or address no real allocator reports (<= 0 or beyond 2^48 bytes).
std::optional<AllocatorReplay> replay_allocator(const KinetoTrace& t, const TraceAnalysis& a);

nlohmann::json replay_to_json(const AllocatorReplay& r);
std::string replay_to_text(const AllocatorReplay& r);

}  // namespace stepsim::trace
