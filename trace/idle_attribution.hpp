#pragma once
// `stepsim analyze --idle`: where a real step's GPU idle comes from (the shared rules and report:
// sim/analysis/idle.hpp; the prediction's side: `stepsim simulate --idle`). Each stretch in which no GPU
// op of the rank's device runs is charged to what the host was doing before it launched the next
// one: blocked in a synchronising CUDA call (`.item()`, a pageable copy, a synchronize) until the
// GPU ran dry and then issuing the next op, or simply still busy in an operator while the GPU had
// finished its queue (eager dispatch slower than the kernels). The simulator models both
// (HostDispatch costs, host_sync_stream, Op::host_sync_before); this is the measurement to hold
// them against, with `simulate`'s idle beside it.
//
// Rules (docs/analyze.md):
//  - Busy: the union of the device's GPU ops of the step (kernels, memcpy and memset, on every
//    stream; the step as analyze assigns ops to steps). A gap is a stretch between two busy
//    stretches inside the step; head and tail are the step span's start to its first GPU op and
//    its last GPU op's end to the span's end. gaps + head + tail is the step's GPU idle (at most
//    analyze's `idle`, which does not count memcpy/memset as busy).
//  - Gaps under `short_gap` (default 5 us) are the launch gaps between back-to-back kernels (the
//    profiles' kernel_gap_us): counted apart, not attributed.
//  - A longer gap is charged to the op that ends it: its launching runtime call (by correlation)
//    and the CPU operators enclosing that call on its thread, written "outermost > innermost"
//    (one name when they are the same). It is `sync` when a runtime call on that thread whose
//    name has "Synchronize" or "Memcpy" was in progress when the GPU ran dry (started at or before
//    the gap's start, ended inside the gap): the host waited for the GPU, and the cause names the
//    operators around that wait. Otherwise it is `host`: the host was still busy. A gap whose op
//    has no launch record is charged to "(no launch record)".
//  - Phase: the phase of the op that ends the gap (analyze's CPU-marker rule).
//  - Figures are means per analysed step.

#include <optional>

#include "sim/analysis/idle.hpp"
#include "trace/kineto_trace.hpp"
#include "trace/trace_analysis.hpp"

namespace stepsim::trace {

// Empty when no step was analysed or the trace is stepsim's own (its idle is the model's:
// `stepsim simulate --idle`).
std::optional<IdleAttribution> attribute_idle(const KinetoTrace& t, const TraceAnalysis& a, Time short_gap = kShortIdleGap);

}  // namespace stepsim::trace
