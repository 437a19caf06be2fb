#pragma once
// The default human-readable report of `stepsim simulate`.

#include <ostream>

#include "sim/analysis/run.hpp"
#include "sim/config/experiment.hpp"
#include "sim/core/format.hpp"  // format_time, format_bytes (moved to core; kept for includers)

namespace stepsim {

void write_text_report(std::ostream& out, const Experiment& e, const SimulationResult& r);

// The memory block of the report (also `explain`'s): the allocated peak with its verdict and
// breakdown, the persistent bytes, peak reserved plus the memory outside PyTorch by component,
// and the headroom left on the device.
void write_memory_lines(std::ostream& out, const Metrics& m);
// The collectives of a step as both reports show them: totals per kind and communicator
// ("all_gather on fsdp"), and the most exposed ones (at most five, exposed > 0).
struct CollectiveTotals {
  std::string kind;  // "<kind> on <comm>"
  int count = 0;
  Bytes bytes;
  Time time, exposed;
};
struct CollectiveSummary {
  std::vector<CollectiveTotals> by_kind;  // by name
  std::vector<std::pair<const TimelineOp*, Time>> most_exposed;  // op, exposed
};
CollectiveSummary collective_summary(const Timeline& t);

}  // namespace stepsim
