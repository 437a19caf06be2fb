// stepsim validate [SUITE.json] [--json] [--report F.html] [--baseline F.json] [--write-baseline F.json] [--by FACET]
// Exit 0: every case within its tolerance and the summaries within 1 point of the baseline;
// 3: a case outside its tolerance or a baseline finding; 2: bad input.
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "calibrate/text_util.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/core/error.hpp"
#include "tools/cli_common.hpp"
#include "validate/validate.hpp"

namespace stepsim::cli {

int validate(const Args& args) {
  po::options_description opts("validate options");
  std::string suite_file = "validation/suite.json", report_file, baseline_file, write_baseline, by_metric = "step_time";
  std::vector<std::string> by;
  double slack = 1.0;
  opts.add_options()("suite", po::value(&suite_file), "the suite (default validation/suite.json)")(
      "json", "print the report as JSON (schema stepsim.validate/1)")(
      "report", po::value(&report_file), "write an HTML report: predicted vs measured per metric, tables")(
      "baseline", po::value(&baseline_file), "compare the summaries with this baseline (exit 3 when > 1 point off)")(
      "baseline-slack", po::value(&slack), "points a summary may move before the baseline gate trips (default 1)")(
      "write-baseline", po::value(&write_baseline), "write the summaries as the new baseline file")(
      "by", po::value(&by)->composing(),
      "also summarise the errors per value of a facet of the cases, per source and over all (repeatable or "
      "comma-separated): gpus, nodes, gpus_per_node, model, implementation, attention, framework, "
      "checkpointing, compile, seq_len, micro_batch, grad_accum, profile")(
      "by-metric", po::value(&by_metric), "the metric --by summarises (default step_time)");
  po::positional_options_description pos;
  pos.add("suite", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  "usage: stepsim validate [SUITE.json] [--json] [--report F.html] [--baseline F.json] [--by FACET]\n"
                  "Predicts every case of the suite (default validation/suite.json: from the working directory, else\n"
                  "the data directory, see stepsim --help)\n"
                  "and compares it with what was measured: real profiler traces (through analyze) and published\n"
                  "training runs. Per case and metric: predicted, measured, error; per source and overall: median\n"
                  "and p90 of |error| and the bias; pairs: the predicted vs measured change of step time.\n"
                  "Exit 3 when a case is outside its tolerance or a summary is more than 1 point worse (or better:\n"
                  "stale) than --baseline; 2 on bad input.",
                  opts, pos, vm))
    return 0;
  if (!(slack >= 0 && slack <= 100)) throw InputError("--baseline-slack: expected points in [0, 100]");
  std::vector<std::string> facets;  // --by gpus --by model, or --by gpus,model
  for (const auto& arg : by)
    for (auto& facet : calib::split_char(arg, ',')) facets.push_back(std::move(facet));
  if (vm.count("by-metric") && facets.empty()) throw InputError("--by-metric: expected --by FACET with it (the metric it summarises)");
  const auto metric = validate::parse_metric(by_metric);
  if (!metric) throw InputError(fmt::format("--by-metric: \"{}\": expected a metric name, e.g. step_time, forward, peak_reserved", by_metric));
  validate::check_facets(facets);
  validate::Suite suite = validate::load_suite(suite_file);
  validate::Report report = validate::run_suite(suite);
  report.groups = validate::group_summaries(report, facets, *metric);
  if (!baseline_file.empty()) validate::check_baseline(report, read_json_file(baseline_file), baseline_file, slack);
  if (vm.count("json")) std::cout << validate::report_to_json(report).dump(1) << "\n";
  else std::cout << validate::report_to_text(report);
  std::ostream& log = vm.count("json") ? std::cerr : std::cout;
  if (!report_file.empty()) write_output(validate::report_to_html(report), report_file, "report", log);
  if (!write_baseline.empty()) write_output(validate::baseline_json(report).dump(1) + "\n", write_baseline, "baseline", log);
  return report.pass() ? 0 : 3;
}

}  // namespace stepsim::cli
