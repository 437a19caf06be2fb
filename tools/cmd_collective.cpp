// `stepsim collective`: one collective's predicted time, algbw and busbw per message size, in
// nccl-tests' column layout, so a profile can be held against a cluster's nccl-tests run line
// by line (--compare LOG: error per row and the median / maximum absolute error).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <regex>

#include <fmt/format.h>

#include "calibrate/importers/nccl_tests_log.hpp"
#include "calibrate/measurements.hpp"
#include "sim/core/error.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/hardware/profile.hpp"
#include "tools/cli_common.hpp"

namespace stepsim::cli {

namespace {

// "33554432", "32MiB", "1GiB", "4KB" -> bytes; nullopt if not a size.
std::optional<std::int64_t> parse_size(const std::string& text) {
  static const std::regex re(R"(^\s*([0-9]+(?:\.[0-9]+)?)\s*(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB|K|M|G)?\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, re)) return std::nullopt;
  double v = std::stod(m[1].str());
  std::string u = m[2].str();
  double mult = u.empty() || u == "B" ? 1.0
                : u == "KiB" || u == "K" ? 1024.0
                : u == "MiB" || u == "M" ? 1048576.0
                : u == "GiB" || u == "G" ? 1073741824.0
                : u == "TiB" ? 1099511627776.0
                : u == "KB" ? 1e3 : u == "MB" ? 1e6 : u == "GB" ? 1e9 : 1e12;
  double b = v * mult;
  if (b < 1 || b > 9.2e18) return std::nullopt;
  return static_cast<std::int64_t>(std::llround(b));
}

// "32MiB-16GiB" (factor 2, as nccl-tests -b/-e/-f 2) or one size.
std::vector<std::int64_t> parse_size_range(const std::string& text) {
  auto dash = text.find('-');
  std::string lo_text = dash == std::string::npos ? text : text.substr(0, dash);
  std::string hi_text = dash == std::string::npos ? text : text.substr(dash + 1);
  auto lo = parse_size(lo_text), hi = parse_size(hi_text);
  if (!lo || !hi || *hi < *lo)
    throw InputError(fmt::format("collective: --bytes {}: expected a size like 32MiB or a range MIN-MAX like 32MiB-16GiB", text));
  std::vector<std::int64_t> out;
  for (std::int64_t b = *lo; b <= *hi; b *= 2) {
    out.push_back(b);
    if (b > std::numeric_limits<std::int64_t>::max() / 2) break;
  }
  return out;
}

struct Row {
  std::int64_t bytes = 0;
  Time time;
  std::string algo;  // "ring/Simple" with a topology model, else the scope model's name
  std::vector<double> measured_us;  // --compare: out-of-place, in-place
};

// Everything `collective` reads from its command line.
struct CollectiveArgs {
  std::string profile_file, kind_name, bytes_text = "32MiB-16GiB", compare_file;
  int ranks = 0, gpus_per_node = 0;
  bool ranks_given = false, gpus_per_node_given = false, json = false;
};

// The parsed command line; none when --help was given (the usage is printed).
std::optional<CollectiveArgs> read_collective_args(const Args& args) {
  CollectiveArgs a;
  po::options_description opts("collective options");
  opts.add_options()("profile", po::value(&a.profile_file)->required(), "hardware profile JSON")(
      "kind", po::value(&a.kind_name), "all_gather | reduce_scatter | all_reduce | all_to_all | broadcast | reduce")(
      "ranks", po::value(&a.ranks), "ranks in the communicator (with --compare: the log's)")(
      "gpus-per-node", po::value(&a.gpus_per_node), "ranks per node (default: the profile's, else 8; with --compare: the log's)")(
      "bytes", po::value(&a.bytes_text), "size or range MIN-MAX, factor 2 (default 32MiB-16GiB)")(
      "compare", po::value(&a.compare_file), "an nccl-tests log: predict its rows and print the error per row")(
      "json", "print [{bytes, time_us, algbw_GBps, busbw_GBps}] (with --compare also measured_time_us, error)");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_args(args,
                  "usage: stepsim collective --profile P --kind K --ranks N --gpus-per-node G [--bytes 32MiB-16GiB]\n"
                  "                          [--compare LOG] [--json]\n"
                  "Predicted time, algbw and busbw per size (nccl-tests columns and busbw factors). With --compare,\n"
                  "the log's rows of that collective are predicted on the log's own group shape, with the error per\n"
                  "row and a last line with the median and maximum absolute error.",
                  opts, pos, vm))
    return std::nullopt;
  a.ranks_given = vm.count("ranks") > 0;
  a.gpus_per_node_given = vm.count("gpus-per-node") > 0;
  a.json = vm.count("json") > 0;
  return a;
}

// The arguments that need no file; the collective chosen by --kind, if any.
std::optional<CollectiveKind> check_collective_args(const CollectiveArgs& a) {
  std::optional<CollectiveKind> kind;
  if (!a.kind_name.empty()) {
    static const std::vector<std::string> names = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce"};
    if (std::find(names.begin(), names.end(), a.kind_name) == names.end())
      throw InputError(fmt::format("collective: --kind {}: expected one of {}", a.kind_name, fmt::join(names, ", ")));
    kind = parse_collective_kind(a.kind_name);
  }
  if (a.ranks_given && a.ranks < 1) throw InputError(fmt::format("collective: --ranks {}: expected a positive integer", a.ranks));
  if (a.gpus_per_node_given && a.gpus_per_node < 1)
    throw InputError(fmt::format("collective: --gpus-per-node {}: expected a positive integer", a.gpus_per_node));
  return kind;
}

// One series to print: a collective on one group shape, its sizes (and measured times).
struct Job {
  CollectiveKind kind;
  int ranks, nodes;
  std::vector<Row> rows;
  std::string label;
};

// --compare: the log's series of the chosen kind (and --ranks, --gpus-per-node), with the
// measured times per size.
std::vector<Job> measured_jobs(const CollectiveArgs& a, std::optional<CollectiveKind> kind) {
  std::vector<Job> jobs;
  for (const auto& s : calib::import_collective_log(a.compare_file)) {
    if (kind && s.kind != *kind) continue;
    if (a.ranks_given && s.ranks != a.ranks) continue;
    if (a.gpus_per_node_given && (s.ranks + s.nodes - 1) / s.nodes != a.gpus_per_node) continue;
    Job j{s.kind, s.ranks, s.nodes, {}, fmt::format("{} ({})", a.compare_file, s.label)};
    for (const auto& x : s.samples) {
      if (j.rows.empty() || j.rows.back().bytes != x.bytes.count) j.rows.push_back(Row{x.bytes.count, {}, {}, {}});
      j.rows.back().measured_us.push_back(x.time.us());
    }
    jobs.push_back(std::move(j));
  }
  if (jobs.empty())
    throw InputError(fmt::format("collective: --compare {}: no series of {}{}{} in the log", a.compare_file,
                                 kind ? to_string(*kind) : std::string("any collective"),
                                 a.ranks_given ? fmt::format(" on {} ranks", a.ranks) : "",
                                 a.gpus_per_node_given ? fmt::format(" with {} GPUs per node", a.gpus_per_node) : ""));
  return jobs;
}

// Without --compare: the one series of --kind on --ranks over the --bytes range.
Job predicted_job(const CollectiveArgs& a, std::optional<CollectiveKind> kind, const HardwareProfile& hw) {
  if (!kind) throw InputError("collective: --kind is required (all_reduce, all_gather, reduce_scatter, ...)");
  if (!a.ranks_given) throw InputError("collective: --ranks N is required");
  int g = a.gpus_per_node_given ? a.gpus_per_node : hw.topology ? hw.topology->gpus_per_node : 8;
  Job j{*kind, a.ranks, (a.ranks + g - 1) / g, {}, ""};
  for (auto b : parse_size_range(a.bytes_text)) j.rows.push_back(Row{b, {}, {}, {}});
  return j;
}

// The text header of a series: its shape, the extrapolation notes and nccl-tests' column titles.
void print_job_header(const Job& j, const HardwareProfile& hw, const std::vector<std::string>& flags, bool compare) {
  std::cout << fmt::format("# {} on {} ranks, {} node(s), {} per node; profile {}{}\n", to_string(j.kind), j.ranks, j.nodes,
                           (j.ranks + j.nodes - 1) / j.nodes, hw.name, j.label.empty() ? "" : "; measured: " + j.label);
  for (const auto& f : flags) std::cout << "# note: extrapolated: " << f << "\n";
  std::cout << fmt::format("#{:>12} {:>13} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8}  {:<12}", "size", "count", "type",
                           "redop", "root", "time", "algbw", "busbw", "algo/proto");
  if (compare) std::cout << fmt::format(" {:>10} {:>8}", "measured", "error");
  std::cout << "\n" << fmt::format("#{:>12} {:>13} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8}", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)") << "\n";
}

// A row's predicted time and algorithm: NCCL's choice with a topology model, else the scope model.
void predict_row(const HardwareProfile& hw, const Job& j, const CommDecl& comm, Row& r) {
  Bytes b{r.bytes};
  if (hw.topology) {
    NcclChoice c = nccl_choice(*hw.topology, j.kind, b, j.ranks, j.nodes);
    r.time = j.ranks > 1 ? c.time : Time::zero();
    r.algo = to_string(c.candidate.algo) + "/" + to_string(c.candidate.proto);
  } else {
    r.time = collective_time(hw, j.kind, b, comm);
    r.algo = model_name(j.nodes > 1 ? hw.inter_node : hw.intra_node);
  }
}

// One row in nccl-tests' columns, with the measured time and error per sample under --compare.
void print_row(const Job& j, const Row& r, double t_us, double algbw, double busbw, const std::vector<double>& errs) {
  bool reduces = j.kind == CollectiveKind::AllReduce || j.kind == CollectiveKind::ReduceScatter || j.kind == CollectiveKind::Reduce;
  bool rooted = j.kind == CollectiveKind::Broadcast || j.kind == CollectiveKind::Reduce;
  std::cout << fmt::format(" {:>12} {:>13} {:>9} {:>10} {:>10} {:>8.2f} {:>8.2f} {:>8.2f}  {:<12}", r.bytes, r.bytes / 4, "float",
                           reduces ? "sum" : "none", rooted ? "0" : "-1", t_us, algbw, busbw, r.algo);
  for (std::size_t i = 0; i < r.measured_us.size(); ++i)
    std::cout << fmt::format(" {:>10.2f} {:>+7.1f}%", r.measured_us[i], 100 * errs[i]);
  std::cout << "\n";
}

// Predicts every row of a series; prints it as text, or appends its rows to `out` with --json.
// The absolute relative errors of its measured samples go to `all_errors`.
void run_job(const CollectiveArgs& a, const HardwareProfile& hw, Job& j, nlohmann::json& out, std::vector<double>& all_errors) {
  const bool compare = !a.compare_file.empty();
  CommDecl comm{"collective", j.ranks, j.nodes};
  auto flags = collective_extrapolations(hw, {comm});
  const double factor = busbw_factor(j.kind, j.ranks);
  if (!a.json) print_job_header(j, hw, flags, compare);
  for (auto& r : j.rows) {
    predict_row(hw, j, comm, r);
    double t_us = r.time.us();
    double algbw = t_us > 0 ? static_cast<double>(r.bytes) / (t_us * 1e3) : 0;  // GB/s = B/us / 1e3
    double busbw = algbw * factor;
    std::vector<double> errs;
    for (double m : r.measured_us) errs.push_back((t_us - m) / m);
    for (double e : errs) all_errors.push_back(std::abs(e));
    if (!a.json) {
      print_row(j, r, t_us, algbw, busbw, errs);
      continue;
    }
    nlohmann::json o{{"bytes", r.bytes}, {"time_us", t_us}, {"algbw_GBps", algbw}, {"busbw_GBps", busbw}};
    if (compare) {
      o["collective"] = to_string(j.kind);
      o["ranks"] = j.ranks;
      o["nodes"] = j.nodes;
      o["measured_time_us"] = r.measured_us;
      o["error"] = errs;
    }
    if (!flags.empty()) o["extrapolated"] = true;
    out.push_back(o);
  }
}

// The last line under --compare: how many rows, the median and the maximum absolute error.
void print_error_summary(std::vector<double> all_errors) {
  std::sort(all_errors.begin(), all_errors.end());
  std::size_t m = all_errors.size() / 2;
  double med = all_errors.size() % 2 ? all_errors[m] : 0.5 * (all_errors[m - 1] + all_errors[m]);
  std::cout << fmt::format("# {} rows compared: median absolute error {:.1f}%, maximum {:.1f}%\n", all_errors.size(),
                           100 * med, 100 * all_errors.back());
}

}  // namespace

int collective(const Args& args) {
  const std::optional<CollectiveArgs> a = read_collective_args(args);
  if (!a) return 0;
  HardwareProfile hw = load_profile(a->profile_file);
  const std::optional<CollectiveKind> kind = check_collective_args(*a);

  // The series to print: one predicted series, or the log's series of the chosen kind.
  std::vector<Job> jobs = a->compare_file.empty() ? std::vector<Job>{predicted_job(*a, kind, hw)} : measured_jobs(*a, kind);

  nlohmann::json out = nlohmann::json::array();
  std::vector<double> all_errors;
  for (auto& j : jobs) run_job(*a, hw, j, out, all_errors);
  if (a->json) {
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  if (!a->compare_file.empty() && !all_errors.empty()) print_error_summary(std::move(all_errors));
  return 0;
}

}  // namespace stepsim::cli
