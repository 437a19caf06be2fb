// stepsim sweep SWEEP.json [--objective O] [--constraint C]... [--jobs N] [--shard i/n] [--out F.csv] [--json-out F.json] [--report F.html]
// stepsim sweep --merge A.csv B.csv ... --out F.csv
#include <unistd.h>

#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "sim/explore/sweep.hpp"
#include "sim/core/error.hpp"
#include "sim/core/input_files.hpp"
#include "sim/report/html_report.hpp"
#include "tools/cli_common.hpp"

namespace stepsim::cli {

namespace {

void parse_shard(const std::string& s, SweepOptions& o) {
  auto slash = s.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument(s);
    std::size_t a = 0, b = 0;
    o.shard = std::stoi(s.substr(0, slash), &a);
    o.shards = std::stoi(s.substr(slash + 1), &b);
    if (a != slash || b != s.size() - slash - 1) throw std::invalid_argument(s);
  } catch (const std::exception&) {
    throw InputError(fmt::format("--shard {}: expected i/n, e.g. 0/4 (Slurm: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)", s));
  }
  if (o.shards < 1 || o.shard < 0 || o.shard >= o.shards) throw InputError(fmt::format("--shard {}: expected 0 <= i < n", s));
}

}  // namespace

int sweep(const Args& args) {
  po::options_description opts("sweep options");
  std::vector<std::string> inputs;
  std::string out_file, json_file, report_file, shard, objective;
  std::vector<std::string> constraints;
  int jobs = 0;
  opts.add_options()("inputs", po::value(&inputs)->multitoken(), "SWEEP.json (or the shard CSVs with --merge)")(
      "objective", po::value(&objective),
      "rank by step_time, tokens_per_s or mfu (default: tokens_per_s when the points' tokens per step differ, else step_time)")(
      "constraint", po::value(&constraints)->composing(),
      "add a constraint \"metric OP number\" to the file's, e.g. \"peak_reserved_gib <= 70\" or \"global_batch == 512\" (repeatable)")(
      "jobs,j", po::value(&jobs), "worker threads (default: all cores)")(
      "shard", po::value(&shard), "run only points with index % n == i, as i/n (for job arrays)")(
      "out,o", po::value(&out_file), "write the CSV (one row per configuration) to this file")(
      "json-out", po::value(&json_file), "write rows and summary as JSON (schema stepsim.sweep/1) to this file")(
      "report", po::value(&report_file), "write a self-contained HTML report (Pareto plot, sortable table)")(
      "merge", "join shard CSVs (the positional arguments) into --out, in point order")(
      "no-progress", "never draw the progress bar");
  po::positional_options_description pos;
  pos.add("inputs", -1);
  po::variables_map vm;
  if (!parse_args(args, "usage: stepsim sweep SWEEP.json [--objective step_time|tokens_per_s|mfu] [--constraint \"metric OP number\"]...\n"
                        "                    [--jobs N] [--shard i/n] [--out F.csv] [--json-out F.json] [--report F.html]\n"
                        "       stepsim sweep --merge A.csv B.csv ... --out F.csv",
                  opts, pos, vm))
    return 0;
  if (jobs < 0) throw InputError(fmt::format("--jobs {}: expected a number of worker threads >= 1 (or 0: all cores)", jobs));
  std::optional<Objective> requested;
  if (vm.count("objective")) requested = parse_objective(objective);
  if (vm.count("merge")) {
    if (out_file.empty()) throw InputError("sweep --merge: expected --out F.csv");
    std::vector<std::filesystem::path> files(inputs.begin(), inputs.end());
    for (const auto& f : files) note_input_file(f);
    OutputFile out = open_output(out_file, "merged CSV", std::ios::binary);
    OutputFile report;
    if (!report_file.empty()) report = open_output(report_file, "HTML report");
    if (!constraints.empty()) throw InputError("sweep --merge: --constraint applies when the sweep runs; the shards' constraints_ok is kept");
    SweepSummary s = merge_sweep_csv(files, out.stream(), 5, requested);
    if (report.is_open()) write_sweep_html(report.stream(), "stepsim sweep (merged): " + out_file, s);
    out.commit();
    if (report.is_open()) report.commit();
    s.write_text(std::cout);
    return 0;
  }
  if (inputs.size() != 1) throw InputError("sweep: expected exactly one SWEEP.json (or --merge with CSV files)");
  SweepSpec spec = load_sweep(inputs[0]);
  if (requested) spec.objective = requested;
  for (const auto& c : constraints) spec.constraints.push_back(parse_constraint(c, "--constraint"));
  SweepOptions o;
  o.jobs = jobs;
  if (!shard.empty()) parse_shard(shard, o);
  o.progress = !vm.count("no-progress") && isatty(STDERR_FILENO);

  // All outputs are opened (checked) before the run and renamed into place only after it.
  OutputFile csv, json, report;
  if (!out_file.empty()) {
    csv = open_output(out_file, "CSV", std::ios::binary);
    csv << sweep_csv_header(spec) << "\n";
  }
  if (!report_file.empty()) report = open_output(report_file, "HTML report");
  bool first = true;
  if (!json_file.empty()) {
    json = open_output(json_file, "JSON", std::ios::binary);
    nlohmann::json cols = spec.columns;
    json << "{\"schema\": \"stepsim.sweep/1\", \"name\": " << nlohmann::json(spec.name).dump() << ", \"file\": " << nlohmann::json(spec.file).dump()
         << ", \"shard\": " << nlohmann::json(shard.empty() ? "0/1" : shard).dump() << ", \"columns\": " << cols.dump() << ",\n\"rows\": [\n";
  }
  // Rows are streamed as they complete in order; nothing but the summary stays in memory.
  std::string first_invalid;
  SweepSummary s = run_sweep(spec, o, [&](const SweepRow& r) {
    if (r.status == "invalid" && first_invalid.empty()) first_invalid = fmt::format("point {}: {}", r.index, r.error);
    if (csv.is_open()) csv << sweep_csv_row(r) << "\n";
    if (json.is_open()) {
      json << (first ? "" : ",\n") << sweep_row_json(spec, r).dump();
      first = false;
    }
  });
  if (s.total() > 0 && s.ok() == 0 && !first_invalid.empty())
    throw InputError(fmt::format("{}: none of the {} points is a valid experiment (the base config itself?); the first: {}",
                                 spec.file, s.total(), first_invalid));
  if (json.is_open()) json << "\n],\n\"summary\": " << s.to_json().dump(1) << "}\n";
  if (report.is_open()) write_sweep_html(report.stream(), "stepsim sweep: " + (spec.name.empty() ? spec.file : spec.name), s);
  for (OutputFile* f : {&csv, &json, &report})
    if (f->is_open()) f->commit();
  std::cout << fmt::format("{}{}\n", spec.name.empty() ? spec.file : spec.name, shard.empty() ? "" : " (shard " + shard + ")");
  s.write_text(std::cout);
  return 0;
}

}  // namespace stepsim::cli
