#pragma once
// Chrome trace JSON (opens in Perfetto and chrome://tracing): pid 0; tid 0 is the host thread
// (issue costs, HostWork, blocked syncs, a "ProfilerStep#0" span like Kineto's); tid 1+s is
// stream s; a counter track "memory" with live bytes per category. Timestamps are in
// microseconds with three decimals, i.e. exact nanoseconds, so `analyze` reads back the
// same metrics. GPU ops carry args {stream, phase, unit, stepsim_op: compute|collective,
// collective, bytes, comm}.

#include <ostream>

#include "sim/exec/timeline.hpp"

namespace stepsim {

inline constexpr const char* kTraceSchema = "stepsim.trace/1";

void write_chrome_trace(std::ostream& out, const Timeline& t, const std::string& title);

}  // namespace stepsim
