#pragma once
// `--report F.html` for simulate. The HTML report lives in sim/report/html_report.* (issue 5);
// until it exists this says so.

#include <ostream>
#include <string>

#include "sim/analysis/run.hpp"
#include "sim/config/experiment.hpp"

namespace stepsim::cli {

void write_html_report_hook(std::ostream& out, const Experiment& e, const SimulationResult& r);

}  // namespace stepsim::cli
