#include "tools/report_hook.hpp"

#include "sim/report/html_report.hpp"

namespace stepsim::cli {

void write_html_report_hook(const std::string& file, const Experiment& e, const SimulationResult& r) {
  write_html_file(file, [&](std::ostream& out) { write_simulation_html(out, e, r); });
}

}  // namespace stepsim::cli
