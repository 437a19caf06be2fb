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

}  // namespace stepsim
