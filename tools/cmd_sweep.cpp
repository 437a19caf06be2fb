// stepsim sweep SWEEP.json [--objective O] [--constraint C]... [--jobs N] [--shard i/n] [--out F.csv] [--json-out F.json] [--report F.html]
// stepsim sweep [SWEEP.json] --merge A.csv B.csv ... --out F.csv
#include <unistd.h>

#include <cctype>
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

// Everything `sweep` reads from its command line.
struct SweepArgs {
  std::vector<std::string> inputs;
  std::string out_file, json_file, report_file, shard, objective;
  std::vector<std::string> constraints;
  int jobs = 0;
  std::int64_t max_points = static_cast<std::int64_t>(kDefaultMaxSweepPoints);
  bool objective_given = false, merge = false, no_progress = false, resume = false;
};

// The parsed command line; none when --help was given (the usage is printed).
std::optional<SweepArgs> read_sweep_args(const Args& args) {
  SweepArgs a;
  po::options_description opts("sweep options");
  opts.add_options()("inputs", po::value(&a.inputs)->multitoken(), "SWEEP.json (or the shard CSVs with --merge)")(
      "objective", po::value(&a.objective),
      "rank by step_time, tokens_per_s or mfu (default: tokens_per_s when the points' tokens per step differ, else step_time)")(
      "constraint", po::value(&a.constraints)->composing(),
      "add a constraint \"metric OP number\" to the file's, e.g. \"peak_reserved_gib <= 70\" or \"global_batch == 512\" (repeatable)")(
      "jobs,j", po::value(&a.jobs), "worker threads (default: all cores)")(
      "shard", po::value(&a.shard), "run only points with index % n == i, as i/n (for job arrays)")(
      "out,o", po::value(&a.out_file), "write the CSV (one row per configuration) to this file")(
      "json-out", po::value(&a.json_file), "write rows and summary as JSON (schema stepsim.sweep/1) to this file")(
      "report", po::value(&a.report_file), "write a self-contained HTML report (Pareto plot, sortable table)")(
      "max-points", po::value(&a.max_points),
      "refuse a run of more points than this (default 1000000; docs/limits.md)")(
      "resume", "continue the run an interrupt stopped: keep the rows of --out's F.csv.partial, run the rest")(
      "merge", "join shard CSVs (the positional arguments) into --out, in point order; a SWEEP.json first checks each row against it")(
      "no-progress", "never draw the progress bar");
  po::positional_options_description pos;
  pos.add("inputs", -1);
  po::variables_map vm;
  if (!parse_args(args, "usage: stepsim sweep SWEEP.json [--objective step_time|tokens_per_s|mfu] [--constraint \"metric OP number\"]...\n"
                        "                    [--jobs N] [--shard i/n] [--out F.csv] [--json-out F.json] [--report F.html]\n"
                        "       stepsim sweep [SWEEP.json] --merge A.csv B.csv ... --out F.csv",
                  opts, pos, vm))
    return std::nullopt;
  a.objective_given = vm.count("objective") > 0;
  a.merge = vm.count("merge") > 0;
  a.no_progress = vm.count("no-progress") > 0;
  a.resume = vm.count("resume") > 0;
  return a;
}

// --jobs in range; the objective asked for, if any.
std::optional<Objective> check_sweep_args(const SweepArgs& a) {
  if (a.jobs < 0) throw InputError(fmt::format("--jobs {}: expected a number of worker threads >= 1 (or 0: all cores)", a.jobs));
  std::optional<Objective> requested;
  if (a.objective_given) requested = parse_objective(a.objective);
  return requested;
}

// Whether `file` holds a JSON object (a sweep file) rather than a CSV (whose header starts
// "index,"): its first byte that is not white space is '{'.
bool looks_like_json_object(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  char ch = 0;
  while (in.get(ch))
    if (!std::isspace(static_cast<unsigned char>(ch))) return ch == '{';
  return false;
}

// --merge: joins the shard CSVs into --out (and --report), prints the summary. A sweep file
// before the CSVs (`stepsim sweep SWEEP.json --merge A.csv B.csv`) checks each row's varied
// paths against the point its index names, besides the header and the point count.
int merge_shards(const SweepArgs& a, std::optional<Objective> requested) {
  if (a.out_file.empty()) throw InputError("sweep --merge: expected --out F.csv");
  std::vector<std::filesystem::path> files(a.inputs.begin(), a.inputs.end());
  std::optional<SweepSpec> spec;
  if (!files.empty() && looks_like_json_object(files.front().string())) {
    spec = load_sweep(files.front().string());
    files.erase(files.begin());
  }
  for (const auto& f : files) note_input_file(f);
  OutputFile out = open_output(a.out_file, "merged CSV", std::ios::binary);
  OutputFile report;
  if (!a.report_file.empty()) report = open_output(a.report_file, "HTML report");
  if (!a.constraints.empty()) throw InputError("sweep --merge: --constraint applies when the sweep runs; the shards' constraints_ok is kept");
  SweepSummary s = merge_sweep_csv(files, out.stream(), 5, requested, spec ? &*spec : nullptr);
  if (report.is_open()) write_sweep_html(report.stream(), "stepsim sweep (merged): " + a.out_file, s);
  out.commit();
  if (report.is_open()) report.commit();
  s.write_text(std::cout);
  return 0;
}

// The sweep file with the command line's objective and constraints.
SweepSpec sweep_spec(const SweepArgs& a, std::optional<Objective> requested) {
  if (a.inputs.size() != 1) throw InputError("sweep: expected exactly one SWEEP.json (or --merge with CSV files)");
  SweepSpec spec = load_sweep(a.inputs[0]);
  if (requested) spec.objective = requested;
  for (const auto& c : a.constraints) spec.constraints.push_back(parse_constraint(c, "--constraint"));
  return spec;
}

SweepOptions sweep_options(const SweepArgs& a) {
  SweepOptions o;
  o.jobs = a.jobs;
  if (!a.shard.empty()) parse_shard(a.shard, o);
  o.progress = !a.no_progress && isatty(STDERR_FILENO);
  return o;
}

// The CSV, JSON and HTML outputs asked for.
struct SweepOutputs {
  OutputFile csv, json, report;
};

// All outputs are opened (checked) before the run and renamed into place only after it; the CSV
// header and the JSON up to its rows are written here.
// An interrupted run keeps its CSV rows here (OutputFile::keep_on_signal_as); --resume reads them.
std::string partial_of(const std::string& csv) { return csv + ".partial"; }

// With --resume, the rows already in F.csv.partial are copied into the CSV and added to
// `summary`; returns how many (the shard's points not to run again).
std::uint64_t open_sweep_outputs(const SweepArgs& a, const SweepSpec& spec, const SweepOptions& o, SweepOutputs& out,
                                 SweepSummary& summary) {
  std::uint64_t resumed = 0;
  if (a.resume) {
    if (a.out_file.empty()) throw InputError("sweep --resume: expected --out F.csv (the CSV whose F.csv.partial to continue)");
    if (!a.json_file.empty())
      throw InputError("sweep --resume --json-out: expected --out only (the JSON of an interrupted run is not kept; "
                       "--report is rebuilt)");
  }
  if (!a.out_file.empty()) {
    out.csv = open_output(a.out_file, "CSV", std::ios::binary);
    out.csv.keep_on_signal_as(partial_of(a.out_file));
    if (a.resume) resumed = resume_sweep_csv(partial_of(a.out_file), spec, o, out.csv.stream(), summary);
    else out.csv << sweep_csv_header(spec) << "\n";
  }
  if (!a.report_file.empty()) out.report = open_output(a.report_file, "HTML report");
  if (!a.json_file.empty()) {
    out.json = open_output(a.json_file, "JSON", std::ios::binary);
    nlohmann::json cols = spec.columns;
    out.json << "{\"schema\": \"stepsim.sweep/1\", \"name\": " << nlohmann::json(spec.name).dump() << ", \"file\": " << nlohmann::json(spec.file).dump()
             << ", \"shard\": " << nlohmann::json(a.shard.empty() ? "0/1" : a.shard).dump() << ", \"columns\": " << cols.dump() << ",\n\"rows\": [\n";
  }
  return resumed;
}

// Runs the sweep. Rows are streamed as they complete in order; nothing but the summary stays in
// memory. A sweep where no point is a valid experiment is an input error.
SweepSummary run_streaming(const SweepSpec& spec, const SweepOptions& o, SweepOutputs& out, SweepSummary start) {
  bool first = true;
  std::string first_invalid;
  SweepSummary s = run_sweep(spec, o, [&](const SweepRow& r) {
    if (r.status == "invalid" && first_invalid.empty()) first_invalid = fmt::format("point {}: {}", r.index, r.error);
    if (out.csv.is_open()) out.csv << sweep_csv_row(r) << "\n";
    if (out.json.is_open()) {
      out.json << (first ? "" : ",\n") << sweep_row_json(spec, r).dump();
      first = false;
    }
  }, std::move(start));
  check_some_point_valid(spec, s, first_invalid);
  return s;
}

}  // namespace

int sweep(const Args& args) {
  const std::optional<SweepArgs> a = read_sweep_args(args);
  if (!a) return 0;
  const std::optional<Objective> requested = check_sweep_args(*a);
  if (a->merge) return merge_shards(*a, requested);
  const SweepSpec spec = sweep_spec(*a, requested);
  SweepOptions o = sweep_options(*a);
  // A run's size is known before it starts: a grid of a billion points (a day, 270 GB of CSV)
  // is refused unless --max-points says it is meant.
  const auto max_points = static_cast<std::uint64_t>(
      integer_option("max-points", a->max_points, 1, static_cast<std::int64_t>(kMaxSweepGridPoints)));
  const std::uint64_t shards = static_cast<std::uint64_t>(o.shards);
  const std::uint64_t run_points = spec.size() / shards + (static_cast<std::uint64_t>(o.shard) < spec.size() % shards ? 1 : 0);
  if (run_points > max_points)
    throw InputError(fmt::format("{}: {}: {} points{}: expected at most {} (--max-points N raises the limit; --shard i/n "
                                 "splits the grid)",
                                 spec.file, spec.points.empty() ? "/axes" : "/points", run_points,
                                 o.shards > 1 ? " in this shard" : "", max_points));

  SweepOutputs out;
  SweepSummary start = empty_sweep_summary(spec);
  o.skip = open_sweep_outputs(*a, spec, o, out, start);
  if (a->resume) std::cerr << fmt::format("resuming: {} points from {}\n", o.skip, partial_of(a->out_file));
  const SweepSummary s = run_streaming(spec, o, out, std::move(start));
  if (out.json.is_open()) out.json << "\n],\n\"summary\": " << s.to_json().dump(1) << "}\n";
  if (out.report.is_open()) write_sweep_html(out.report.stream(), "stepsim sweep: " + (spec.name.empty() ? spec.file : spec.name), s);
  for (OutputFile* f : {&out.csv, &out.json, &out.report})
    if (f->is_open()) f->commit();
  if (a->resume) {
    std::error_code ec;
    std::filesystem::remove(partial_of(a->out_file), ec);  // its rows are in the CSV now
  }
  std::cout << fmt::format("{}{}\n", spec.name.empty() ? spec.file : spec.name, a->shard.empty() ? "" : " (shard " + a->shard + ")");
  s.write_text(std::cout);
  return 0;
}

}  // namespace stepsim::cli
