#include "tools/report_hook.hpp"

#include "sim/core/error.hpp"

namespace stepsim::cli {

void write_html_report_hook(const std::string& file, const Experiment&, const SimulationResult&) {
  throw InputError(file + ": --report is not available in this build yet");
}

}  // namespace stepsim::cli
