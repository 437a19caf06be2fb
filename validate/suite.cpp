// Reading a validation suite: the suite file, its case files, each case's measurement and
// provenance. Strict like every config: unknown keys and bad values are one-line errors.
#include <algorithm>
#include <cstdint>
#include <set>

#include <fmt/format.h>

#include "sim/core/data_dir.hpp"
#include "sim/core/error.hpp"
#include "validate/validate.hpp"

namespace stepsim::validate {

namespace fs = std::filesystem;

std::string to_string(Metric m) {
  switch (m) {
    case Metric::StepTime: return "step_time";
    case Metric::Forward: return "forward";
    case Metric::Backward: return "backward";
    case Metric::Optimizer: return "optimizer";
    case Metric::Compute: return "compute";
    case Metric::Comm: return "comm";
    case Metric::ExposedComm: return "exposed_comm";
    case Metric::OverlapPct: return "overlap_pct";
    case Metric::PeakAllocated: return "peak_allocated";
    case Metric::PeakReserved: return "peak_reserved";
    case Metric::Kernels: return "kernels";
  }
  return "step_time";
}

std::optional<Metric> parse_metric(const std::string& name) {
  for (Metric m : kAllMetrics)
    if (to_string(m) == name) return m;
  return std::nullopt;
}

std::string to_string(Split s) { return s == Split::Fit ? "fit" : "test"; }

std::vector<Split> split_by_rule(const std::vector<std::string>& names) {
  auto fnv1a64 = [](const std::string& text) {
    std::uint64_t h = 14695981039346656037ULL;
    for (unsigned char byte : text) {
      h ^= byte;
      h *= 1099511628211ULL;
    }
    return h;
  };
  std::vector<std::size_t> order(names.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    std::uint64_t ha = fnv1a64(names[a]), hb = fnv1a64(names[b]);
    return ha != hb ? ha < hb : names[a] < names[b];
  });
  std::vector<Split> out(names.size(), Split::Test);
  for (std::size_t rank = 0; rank < order.size(); ++rank)
    if (rank % 3 == 2) out[order[rank]] = Split::Fit;
  return out;
}

bool in_points(Metric m) { return m == Metric::OverlapPct; }

std::string unit_of(Metric m) {
  if (m == Metric::OverlapPct) return "%";
  if (m == Metric::PeakAllocated || m == Metric::PeakReserved) return "GiB";
  if (m == Metric::Kernels) return "kernels";
  return "ms";
}

double display_value(Metric m, double v) {
  if (m == Metric::OverlapPct || m == Metric::Kernels) return v;
  if (m == Metric::PeakAllocated || m == Metric::PeakReserved) return v / (1024.0 * 1024.0 * 1024.0);
  return v / 1e6;
}

namespace {

std::string metric_names() {
  std::string all;
  for (Metric m : kAllMetrics) all += (all.empty() ? "" : ", ") + to_string(m);
  return all;
}

std::map<Metric, double> read_tolerances(ObjectReader r) {
  std::map<Metric, double> out;
  for (const auto& [key, value] : r.raw_object_items()) {
    auto m = parse_metric(key);
    if (!m) r.fail(key, "a metric name (" + metric_names() + ")");
    double t = r.positive(key);
    if (t > 1000) r.fail(key, "a tolerance in percent, at most 1000");
    out[*m] = t;
  }
  return out;
}

fs::path existing_file(ObjectReader& r, const std::string& key, const std::string& name) {
  fs::path p = resolve_config_path(name, r.sources().file_for(r.path_of(key)));
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) r.fail_value(key, name, "an existing file (not found)");
  return p;
}

// A range "a-b" of ProfilerStep numbers (the analyze syntax); checked here so a typo is a
// suite error, not a failure halfway through the run.
std::string step_range(ObjectReader& r, const std::string& key) {
  std::string s = r.string(key);
  std::size_t dash = s.find('-');
  auto digits = [](const std::string& t) { return !t.empty() && t.find_first_not_of("0123456789") == std::string::npos; };
  bool ok = dash == std::string::npos ? digits(s)
                                      : (digits(s.substr(0, dash)) || dash == 0) &&
                                            (digits(s.substr(dash + 1)) || dash + 1 == s.size()) && s.size() > 1;
  if (!ok) r.fail(key, "a ProfilerStep range such as \"11-12\", \"11\" or \"11-\"");
  return s;
}

std::optional<double> opt_positive(ObjectReader& r, const std::string& key) {
  if (!r.has(key)) return std::nullopt;
  return r.positive(key);
}

Case::Published read_published(ObjectReader p) {
  Case::Published out;
  out.step_time_s = opt_positive(p, "step_time_s");
  out.tokens_per_s = opt_positive(p, "tokens_per_s");
  out.global_batch_tokens = opt_positive(p, "global_batch_tokens");
  if (p.has("tokens_per_s_per_gpu")) {
    const Json& v = p.raw("tokens_per_s_per_gpu");
    if (v.is_number() && v.get<double>() > 0) {
      out.tokens_per_s_per_gpu_lo = out.tokens_per_s_per_gpu_hi = v.get<double>();
    } else if (v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number() && v[0].get<double>() > 0 &&
               v[1].get<double>() >= v[0].get<double>()) {
      out.tokens_per_s_per_gpu_lo = v[0].get<double>();
      out.tokens_per_s_per_gpu_hi = v[1].get<double>();
    } else {
      p.fail("tokens_per_s_per_gpu", "a positive number or a range [low, high] as published");
    }
  }
  out.peak_allocated_gib = opt_positive(p, "peak_allocated_GiB");
  out.peak_reserved_gib = opt_positive(p, "peak_reserved_GiB");
  if (p.has("peak_active_pct")) out.peak_active_pct = p.positive("peak_active_pct");
  if (p.has("peak_reserved_pct")) out.peak_reserved_pct = p.positive("peak_reserved_pct");
  out.memory_capacity_gib = opt_positive(p, "memory_capacity_GiB");
  if ((out.peak_active_pct || out.peak_reserved_pct) && !out.memory_capacity_gib)
    p.fail("memory_capacity_GiB", "the device capacity the published percentages refer to");
  for (auto pct : {out.peak_active_pct, out.peak_reserved_pct})
    if (pct && *pct > 100) p.fail("peak_active_pct", "a percentage of device memory (0-100]");
  if (out.tokens_per_s.has_value() != out.global_batch_tokens.has_value())
    p.fail(out.tokens_per_s ? "global_batch_tokens" : "tokens_per_s",
           "tokens_per_s and global_batch_tokens together (step time = global_batch_tokens / tokens_per_s)");
  int step_sources = (out.step_time_s ? 1 : 0) + (out.tokens_per_s ? 1 : 0) + (out.tokens_per_s_per_gpu_lo ? 1 : 0);
  if (step_sources > 1) p.fail("step_time_s", "one of step_time_s, tokens_per_s or tokens_per_s_per_gpu, not several");
  bool any_memory = out.peak_allocated_gib || out.peak_reserved_gib || out.peak_active_pct || out.peak_reserved_pct;
  if (step_sources == 0 && !any_memory)
    p.fail("step_time_s", "at least one measured number (step_time_s, tokens_per_s, tokens_per_s_per_gpu, peak_*)");
  p.finish();
  return out;
}

Provenance read_provenance(ObjectReader p) {
  Provenance out;
  out.repository = p.string("repository");
  out.commit = p.string("commit");
  out.path = p.string("path");
  out.row = p.string("row", "");
  p.finish();
  return out;
}

// "measured": exactly one of a trace (file and steps) or published numbers.
void read_measured(ObjectReader m, Case& out) {
  if (m.has("trace") == m.has("published")) m.fail("trace", "exactly one of \"trace\" or \"published\"");
  if (m.has("trace")) {
    ObjectReader t = m.object("trace");
    out.trace = existing_file(t, "file", t.string("file"));
    out.trace_steps = t.has("steps") ? step_range(t, "steps") : "";
    t.finish();
  } else {
    out.published = read_published(m.object("published"));
  }
  m.finish();
}

// "calibrate": the traces to fit the case's profile to, each an existing file.
void read_calibration(ObjectReader k, Case& out) {
  const Json& traces = k.array("traces");
  if (traces.empty()) k.fail("traces", "a non-empty array of trace files");
  for (std::size_t i = 0; i < traces.size(); ++i) {
    if (!traces[i].is_string()) k.fail("traces", "an array of trace file names");
    fs::path p = resolve_config_path(traces[i].get<std::string>(), k.sources().file_for(k.path_of("traces")));
    std::error_code ec;
    if (!fs::is_regular_file(p, ec))
      throw_input_error(k.sources().file_for(k.path_of("traces")), k.path_of("traces") + "/" + std::to_string(i),
                        traces[i], "an existing trace file (not found)");
    out.calibration_traces.push_back(p);
  }
  out.calibration_steps = k.has("steps") ? step_range(k, "steps") : "";
  out.calibration_assumed_groups = k.boolean("assumed_groups", false);
  k.finish();
}

// The case's "metrics" array, each a metric name.
std::vector<Metric> read_metrics(ObjectReader& c) {
  std::vector<Metric> out;
  const Json& ms = c.array("metrics");
  for (std::size_t i = 0; i < ms.size(); ++i) {
    auto metric = ms[i].is_string() ? parse_metric(ms[i].get<std::string>()) : std::nullopt;
    if (!metric)
      throw_input_error(c.sources().file_for(c.path_of("metrics")), c.path_of("metrics") + "/" + std::to_string(i), ms[i],
                        "a metric name (" + metric_names() + ")");
    out.push_back(*metric);
  }
  return out;
}

Case read_case(ObjectReader c, std::size_t doc, const std::string& default_source, std::set<std::string>& names) {
  Case out;
  out.doc = doc;
  out.json_path = c.path();
  out.file = c.sources().file_for(c.path());
  out.name = c.string("name");
  if (out.name.empty()) c.fail("name", "a non-empty case name");
  if (!names.insert(out.name).second) c.fail("name", "a case name not used by another case of the suite");
  out.source = c.string("source", default_source);
  if (out.source.empty()) c.fail("source", "the measurement source's label (e.g. \"li-plus\")");
  if (c.has("split")) {
    std::string split = c.string("split");
    if (split != "fit" && split != "test") c.fail("split", "\"fit\" or \"test\" (the calibration split)");
    out.split = split == "fit" ? Split::Fit : Split::Test;
    out.split_declared = true;
  }
  out.description = c.string("description", "");
  if (!c.has("experiment") || !c.raw("experiment").is_object())
    c.fail("experiment", "an experiment object (inline, or {\"include\": \"file.json\"})");
  out.provenance = read_provenance(c.object("provenance"));
  if (c.has("assumptions"))
    for (const auto& a : c.array("assumptions")) {
      if (!a.is_string()) c.fail("assumptions", "an array of strings");
      out.assumptions.push_back(a.get<std::string>());
    }
  read_measured(c.object("measured"), out);
  if (c.has("calibrate")) read_calibration(c.object("calibrate"), out);
  if (c.has("metrics")) out.metrics = read_metrics(c);
  if (c.has("tolerance_pct")) out.tolerance_pct = read_tolerances(c.object("tolerance_pct"));
  c.finish();
  return out;
}

void read_cases(ObjectReader& r, std::size_t doc, const std::string& default_source, Suite& suite,
                std::set<std::string>& names) {
  // A case file's tolerances apply to its cases, over the suite's; a case's own over both.
  std::map<Metric, double> file_tolerance;
  if (doc > 0 && r.has("tolerance_pct")) file_tolerance = read_tolerances(r.object("tolerance_pct"));
  if (r.has("cases"))
    for (auto& c : r.objects("cases")) {
      Case one = read_case(c, doc, default_source, names);
      for (const auto& [m, t] : file_tolerance) one.tolerance_pct.emplace(m, t);
      suite.cases.push_back(std::move(one));
    }
  if (r.has("pairs"))
    for (auto& p : r.objects("pairs")) {
      PairSpec s;
      s.name = p.string("name");
      s.first = p.string("first");
      s.second = p.string("second");
      s.knob = p.string("knob");
      if (s.first == s.second) p.fail("second", "a case other than \"first\"");
      s.file = p.sources().file_for(p.path());
      s.json_path = p.path();
      // Checked once every case is read (pairs may name cases of other files).
      s.name = s.name.empty() ? s.first + " vs " + s.second : s.name;
      suite.pairs.push_back(s);
      p.finish();
    }
}

// The calibration split is the rule's, never a choice: a source whose cases declare "split" declares
// it on every case, each equal to split_by_rule over the source's names (a moved split, or a case
// added without re-running validation/tools/split_rule.py, is an error naming the case).
void check_split_rule(const Suite& suite) {
  std::map<std::string, std::vector<const Case*>> by_source;
  for (const auto& c : suite.cases) by_source[c.source].push_back(&c);
  for (const auto& [source, cases] : by_source) {
    bool any = std::any_of(cases.begin(), cases.end(), [](const Case* c) { return c->split_declared; });
    if (!any) continue;
    std::vector<std::string> names;
    for (const Case* c : cases) names.push_back(c->name);
    std::vector<Split> rule = split_by_rule(names);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const Case& c = *cases[i];
      if (!c.split_declared)
        throw InputError(fmt::format("{}: {}/split: missing: expected \"{}\" (every case of source \"{}\" declares its "
                                     "split once one does; validation/tools/split_rule.py writes them)",
                                     c.file, c.json_path, to_string(rule[i]), source));
      if (c.split != rule[i])
        throw InputError(fmt::format("{}: {}/split: \"{}\": expected \"{}\" (the split rule of docs/validation.md; "
                                     "validation/tools/split_rule.py writes it)",
                                     c.file, c.json_path, to_string(c.split), to_string(rule[i])));
    }
  }
}

}  // namespace

Suite load_suite(const fs::path& file) {
  Suite suite;
  suite.file = file.string();
  const fs::path path = resolve_input_path(file);  // the shipped suite from any directory
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw InputError(file.string() + ": cannot open the suite file (not a file)");
  suite.docs.emplace_back();
  suite.docs[0].doc = load_with_includes(path, suite.docs[0].sources);
  ObjectReader root(suite.docs[0].doc, suite.docs[0].sources, "");
  std::string schema = root.string("schema");
  if (schema != "stepsim.validation/1") root.fail("schema", "\"stepsim.validation/1\"");
  root.string("description", "");
  if (root.has("tolerance_pct")) suite.tolerance_pct = read_tolerances(root.object("tolerance_pct"));
  std::set<std::string> names;
  std::vector<std::pair<fs::path, std::string>> case_files;
  if (root.has("case_files")) {
    const Json& files = root.array("case_files");
    for (std::size_t i = 0; i < files.size(); ++i) {
      std::string where = root.path_of("case_files") + "/" + std::to_string(i);
      if (!files[i].is_string()) throw_input_error(suite.file, where, files[i], "a case file name");
      fs::path p = resolve_config_path(files[i].get<std::string>(), path);
      if (!fs::is_regular_file(p, ec)) throw_input_error(suite.file, where, files[i], "an existing case file (not found)");
      case_files.emplace_back(p, where);
    }
  }
  // Cases written in the suite file itself are summarised under the suite's name.
  read_cases(root, 0, file.stem().string(), suite, names);
  root.finish();
  for (const auto& [path, where] : case_files) {
    suite.docs.emplace_back();
    SuiteDocument& d = suite.docs.back();
    d.doc = load_with_includes(path, d.sources);
    ObjectReader r(d.doc, d.sources, "");
    if (r.string("schema") != "stepsim.validation-cases/1") r.fail("schema", "\"stepsim.validation-cases/1\"");
    std::string source = r.string("source");
    r.string("description", "");
    read_cases(r, suite.docs.size() - 1, source, suite, names);
    r.finish();
  }
  check_split_rule(suite);
  for (const auto& p : suite.pairs)
    for (const auto& [key, n] : {std::pair{"first", p.first}, std::pair{"second", p.second}})
      if (!names.count(n)) throw_input_error(p.file, p.json_path + "/" + key, n, "the name of a case of the suite");
  if (suite.cases.empty()) throw InputError(suite.file + ": /cases: expected at least one case (none in the suite)");
  return suite;
}

}  // namespace stepsim::validate
