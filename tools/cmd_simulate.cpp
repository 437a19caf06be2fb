// stepsim simulate EXP.json [--set path=value]... [--json] [--trace F] [--report F.html] [--idle]
#include <fstream>
#include <iostream>


#include "sim/analysis/idle.hpp"
#include "sim/analysis/run.hpp"
#include "sim/core/error.hpp"
#include "sim/report/chrome_trace.hpp"
#include "sim/report/result_json.hpp"
#include "sim/report/text_report.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "tools/cli_common.hpp"
#include "tools/report_hook.hpp"

namespace stepsim::cli {

int simulate(const Args& args) {
  po::options_description opts("simulate options");
  std::string exp_file, trace_file, report_file, json_file;
  std::vector<std::string> sets;
  int top = 10;
  opts.add_options()("experiment", po::value(&exp_file)->required(), "experiment JSON")(
      "set", po::value(&sets)->composing(), "override a config value: path=value (repeatable), e.g. strategy.bucket_cap_mb=50")(
      "json", "print the result as JSON (schema stepsim.result/1) instead of the text report")(
      "json-out", po::value(&json_file), "also write the JSON result to this file")(
      "trace", po::value(&trace_file), "write a Chrome/Perfetto trace JSON to this file")(
      "report", po::value(&report_file), "write a self-contained HTML report to this file")(
      "idle", "also attribute the GPU's idle time: each gap between GPU ops charged to what the host did before the next "
              "one (the same rules as analyze --idle; docs/analyze.md)")(
      "top", po::value(&top)->default_value(10), "with --idle: how many idle causes to list");
  po::positional_options_description pos;
  pos.add("experiment", 1);
  po::variables_map vm;
  if (!parse_args(args, "usage: stepsim simulate EXP.json [--set path=value]... [--json] [--trace F] [--report F.html] [--idle]", opts,
                  pos, vm))
    return 0;
  const std::size_t rows = top_rows(top);
  Experiment e = load_experiment(exp_file, sets);
  SimulationResult r = run_experiment(e);
  // Every output is written in full to its temporary file before any is renamed into place.
  std::vector<OutputFile> outs;
  if (!trace_file.empty()) {
    outs.push_back(open_output(trace_file, "trace file"));
    write_chrome_trace(outs.back().stream(), r.timeline, exp_file, &r.program);
  }
  if (!report_file.empty()) {
    outs.push_back(open_output(report_file, "HTML report"));
    write_html_report_hook(outs.back().stream(), e, r);
  }
  if (!json_file.empty()) {
    outs.push_back(open_output(json_file, "JSON file"));
    outs.back() << result_to_json(e, r).dump(1) << "\n";
  }
  for (auto& o : outs) o.commit();
  const bool idle = vm.count("idle") > 0;
  if (vm.count("json")) {
    nlohmann::json j = result_to_json(e, r);
    if (idle) j["idle"] = idle_to_json(attribute_idle(r.timeline));
    std::cout << j.dump(1) << "\n";
  } else {
    write_text_report(std::cout, e, r);
    if (idle) std::cout << "\n" << idle_to_text(attribute_idle(r.timeline), rows);
  }
  return 0;
}

}  // namespace stepsim::cli
