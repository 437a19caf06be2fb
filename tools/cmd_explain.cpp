// stepsim explain EXP.json [--set path=value]... [--json] [--verbose] [--no-sensitivities] [--report F.html]
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/analysis/critical_path.hpp"
#include "sim/explore/tune.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/report/html_report.hpp"
#include "sim/report/text_report.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "tools/cli_common.hpp"

namespace stepsim::cli {

int explain(const Args& args) {
  po::options_description opts("explain options");
  std::string exp_file, report_file;
  std::vector<std::string> sets;
  opts.add_options()("experiment", po::value(&exp_file)->required(), "experiment JSON")(
      "set", po::value(&sets)->composing(), "override a config value: path=value (repeatable)")(
      "json", "print the explanation as JSON")("verbose,v", "list every step of the critical path, not only the grouped lines")("no-sensitivities", "skip the re-simulations (knob moves and hardware what-ifs)")(
      "report", po::value(&report_file), "write a self-contained HTML report with the critical path outlined");
  po::positional_options_description pos;
  pos.add("experiment", 1);
  po::variables_map vm;
  if (!parse_args(args, "usage: stepsim explain EXP.json [--set path=value]... [--json] [--verbose] [--report F.html]", opts, pos, vm)) return 0;
  Experiment e = load_experiment(exp_file, sets);
  SimulationResult r = run_experiment(e);
  Explanation x = explain_experiment(e, r, !vm.count("no-sensitivities"));
  if (!vm.count("no-sensitivities")) {
    // The knobs tune searches, one at a time from this configuration (sim/explore/tune.hpp).
    SourceMap sources;
    nlohmann::json doc = load_with_includes(exp_file, sources);
    for (const auto& s : sets) apply_override(doc, s, &sources);
    for (const auto& m : single_knob_moves(doc, sources, r.metrics.overlap.step_time))
      x.knob_moves.push_back({m.what, m.metrics.overlap.step_time, m.speedup});
  }
  if (!report_file.empty()) {
    OutputFile out = open_output(report_file, "HTML report");
    write_simulation_html(out.stream(), e, r, &x);
    out.commit();
  }
  auto outside = collective_extrapolations(e.cluster.profile, r.program.comms);
  if (vm.count("json")) {
    nlohmann::json j = explanation_to_json(x);
    if (!outside.empty()) j["collective_extrapolations"] = outside;
    j["memory"] = memory_summary_json(r.metrics);
    j["schema"] = "stepsim.explain/1";
    j["experiment"] = e.file;
    std::cout << j.dump(1) << "\n";
  } else {
    std::cout << "stepsim explain: " << e.file << "\n";
    write_explanation_text(std::cout, x, vm.count("verbose") > 0);
    std::cout << "\nmemory:";
    write_memory_lines(std::cout, r.metrics);
    if (!outside.empty())
      std::cout << "note: collective times extrapolated beyond the profile's fitted group sizes: " << fmt::format("{}", fmt::join(outside, "; ")) << "\n";
  }
  return 0;
}

}  // namespace stepsim::cli
