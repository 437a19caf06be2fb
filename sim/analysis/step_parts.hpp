#pragma once
// The step time split into disjoint parts: every instant of [start, end) of a timeline is
// charged to exactly one part, so the parts sum to the step time and the change of the step
// time between two runs (`stepsim scale`) is the sum of the parts' changes.
//   compute     a forward, backward or setup compute kernel runs (memcpys are not compute, as in
//               metrics' compute_time)
//   optimizer   only optimizer-phase kernels run
//   exposed     no kernel runs and a collective moves data: charged to "<kind> on <comm>" of the
//               running collective issued first
//   rank_wait   no kernel runs and every running collective waits for the slowest rank of its
//               communicator (the first rank_wait of its interval; docs/scale.md)
//   idle        nothing runs: host time, launch gaps, memcpys
// So compute + optimizer is metrics' compute_time, the exposed parts plus rank_wait its
// exposed_comm, and idle its idle.

#include <map>
#include <string>

#include "sim/core/units.hpp"
#include "sim/exec/timeline.hpp"

namespace stepsim {

struct StepParts {
  Time compute, optimizer, rank_wait, idle;
  std::map<std::string, Time> exposed;  // by "<kind> on <comm>" (the text report's label)
  Time total() const;
};

StepParts step_parts(const Timeline& t);

// "<kind> on <comm>", as the reports name the collectives of a communicator.
std::string collective_label(const Timeline& t, const TimelineOp& op);

}  // namespace stepsim
