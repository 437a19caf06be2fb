#include "tools/report_hook.hpp"

#include "sim/report/html_report.hpp"

namespace stepsim::cli {

void write_html_report_hook(std::ostream& out, const Experiment& e, const SimulationResult& r) {
  write_simulation_html(out, e, r);
}

}  // namespace stepsim::cli
