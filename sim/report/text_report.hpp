#pragma once
// The default human-readable report of `stepsim simulate`.

#include <ostream>

#include "sim/analysis/run.hpp"
#include "sim/config/experiment.hpp"
#include "sim/core/format.hpp"  // format_time, format_bytes (moved to core; kept for includers)

namespace stepsim {

void write_text_report(std::ostream& out, const Experiment& e, const SimulationResult& r);

}  // namespace stepsim
