// stepsim scale EXP.json [--nodes 1,2,4,...|--gpus 8,16,...] [--set path=value]... [--json] [--json-out F.json] [--out F.csv] [--report F.html]
#include <iostream>

#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/explore/scale.hpp"
#include "sim/report/html_report.hpp"
#include "tools/cli_common.hpp"

namespace stepsim::cli {

int scale(const Args& args) {
  po::options_description opts("scale options");
  ScaleRequest q;
  std::string exp_file, nodes, gpus, csv_file, json_file, report_file;
  opts.add_options()("experiment", po::value(&exp_file)->required(), "experiment JSON")(
      "nodes", po::value(&nodes), "node counts, comma-separated and increasing (default 1,2,4,8,16)")(
      "gpus", po::value(&gpus), "GPU counts instead, each a multiple of cluster.gpus_per_node, e.g. 8,16,32,64")(
      "set", po::value(&q.overrides)->composing(), "override a config value at every point: path=value (repeatable; not cluster.nodes)")(
      "json", "print the result as JSON (schema stepsim.scale/1) instead of the text table")(
      "json-out", po::value(&json_file), "also write the JSON result to this file")(
      "out,o", po::value(&csv_file), "write the CSV (one row per GPU count; docs/scale.md) to this file")(
      "report", po::value(&report_file), "write a self-contained HTML report (step time and efficiency vs GPUs) to this file");
  po::positional_options_description pos;
  pos.add("experiment", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  "usage: stepsim scale EXP.json [--nodes 1,2,4,...|--gpus 8,16,...] [--set path=value]... [--json] [--out F.csv] "
                  "[--report F.html]",
                  opts, pos, vm))
    return 0;
  if (vm.count("nodes") && vm.count("gpus")) throw InputError(fmt::format("scale: --nodes {} --gpus {}: expected one of the two", nodes, gpus));
  q.file = exp_file;
  if (vm.count("gpus")) {
    q.flag = "gpus";
    q.counts = gpus;
    if (gpus.empty()) throw InputError("--gpus: expected a comma-separated list of GPU counts, e.g. 8,16,32");
  } else if (vm.count("nodes")) {
    q.counts = nodes;
    if (nodes.empty()) throw InputError("--nodes: expected a comma-separated list of node counts, e.g. 1,2,4");
  }
  const ScaleResult r = run_scale(q);
  // Every output is written in full to its temporary file before any is renamed into place.
  std::vector<OutputFile> outs;
  if (!csv_file.empty()) {
    outs.push_back(open_output(csv_file, "CSV", std::ios::binary));
    outs.back() << scale_csv(r);
  }
  if (!json_file.empty()) {
    outs.push_back(open_output(json_file, "JSON file"));
    outs.back() << scale_to_json(r).dump(1) << "\n";
  }
  if (!report_file.empty()) {
    outs.push_back(open_output(report_file, "HTML report"));
    write_scale_html(outs.back().stream(), r);
  }
  for (auto& o : outs) o.commit();
  if (vm.count("json")) std::cout << scale_to_json(r).dump(1) << "\n";
  else write_scale_text(std::cout, r);
  return 0;
}

}  // namespace stepsim::cli
