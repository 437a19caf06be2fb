#pragma once
// Chrome trace JSON (opens in Perfetto and chrome://tracing): pid 0; tid 0 is the host thread
// (issue costs, HostWork, blocked syncs, a "ProfilerStep#0" span like Kineto's); tid 1+s is
// stream s; a counter track "memory" with live bytes per category. Timestamps are in
// microseconds with three decimals, i.e. exact nanoseconds, so `analyze` reads back the
// same metrics. GPU ops carry args {stream, phase, unit, stepsim_op: compute|collective,
// collective, bytes, comm}.
//
// Flow arrows (Chrome trace flow events v1, as Kineto writes its "ac2g" arrows: a "ph": "s"
// inside the source slice and a "ph": "f", "bp": "e" inside the target slice, one id per
// arrow; Perfetto's JSON importer binds each to the slice enclosing it on its track):
//   cat "issue"        host interval that issued an op -> the op (ops with a host cost only)
//   cat "event"        the last op on the Record's stream -> the first op on the Wait's stream
//                      after the Wait (with `program`: every Record/Wait pair in program order)
//   cat "host_sync"    the op whose completion released a blocked host interval -> it
// Zero-length slices get no arrow (no ts lies inside them). `analyze` ignores flow events.

#include <ostream>

#include "sim/exec/timeline.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

inline constexpr const char* kTraceSchema = "stepsim.trace/1";

// `program`: the Program the timeline ran (its Record/Wait pairs become "event" arrows); null
// when not known.
void write_chrome_trace(std::ostream& out, const Timeline& t, const std::string& title, const Program* program = nullptr);

}  // namespace stepsim
