#pragma once
// The default human-readable report of `stepsim simulate`.

#include <ostream>

#include "sim/analysis/run.hpp"
#include "sim/config/experiment.hpp"

namespace stepsim {

void write_text_report(std::ostream& out, const Experiment& e, const SimulationResult& r);

std::string format_time(Time t);    // "56.000 ms", "180.0 us"
std::string format_bytes(Bytes b);  // "12.50 GiB"

}  // namespace stepsim
