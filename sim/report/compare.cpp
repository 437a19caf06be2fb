#include "sim/report/compare.hpp"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "sim/analysis/metrics.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/core/error.hpp"
#include "sim/report/result_json.hpp"

namespace stepsim {

namespace {

// The parts of a result document compare reads, validated once.
struct Doc {
  std::string label, mode, device;
  const nlohmann::json* root = nullptr;
  Metrics metrics;
  // From /summary of simulate --json or live (absent in analyze --json): the job's tokens per
  // optimizer step (micro_batch x seq_len x grad_accum x world_size, sim/analysis/throughput.hpp)
  // and the MFU at this document's step time.
  std::optional<double> tokens_per_step, mfu_pct;
};

// Reads the throughput inputs of /summary when they are all there (optional: older results and
// analyze documents have none).
void read_throughput(Doc& d, const nlohmann::json& j) {
  if (!j.contains("summary") || !j["summary"].is_object()) return;
  const auto& s = j["summary"];
  double tokens = 1;
  for (const char* k : {"micro_batch", "seq_len", "grad_accum", "world_size"}) {
    if (!s.contains(k)) return;
    if (!s[k].is_number() || !(s[k].get<double>() > 0))
      throw InputError(fmt::format("{}: /summary/{}: {}: expected a positive number", d.label, k, json_value_for_message(s[k])));
    tokens *= s[k].get<double>();
  }
  d.tokens_per_step = tokens;
  if (s.contains("mfu_pct")) {
    if (!s["mfu_pct"].is_number() || !(s["mfu_pct"].get<double>() >= 0))
      throw InputError(fmt::format("{}: /summary/mfu_pct: {}: expected a percentage >= 0", d.label, json_value_for_message(s["mfu_pct"])));
    d.mfu_pct = s["mfu_pct"].get<double>();
  }
}

// `stepsim analyze --json` of a real trace is a measurement too: its mean over the analysed
// steps is compared (mode "analyze"); it has no per-op list, so no per-collective rows.
Doc read_analyze_doc(const nlohmann::json& j, const std::string& label) {
  if (!j.contains("mean") || !j["mean"].is_object() || !j["mean"].contains("metrics") || !j["mean"]["metrics"].is_object())
    throw InputError(label + ": /mean/metrics: missing: expected the mean metrics of analyze --json");
  Doc d;
  d.label = label;
  d.root = &j;
  d.mode = "analyze";
  if (j.contains("traces") && j["traces"].is_array() && !j["traces"].empty() && j["traces"][0].is_object())
    d.device = j["traces"][0].value("device", std::string{});
  try {
    d.metrics = metrics_from_json(j["mean"]["metrics"]);
  } catch (const std::exception& e) {
    throw InputError(label + ": /mean/metrics: " + e.what());
  }
  return d;
}

bool measured_mode(const std::string& mode) { return mode == "live" || mode == "analyze"; }

Doc read_doc(const nlohmann::json& j, const std::string& label) {
  if (!j.is_object()) throw InputError(label + ": expected a stepsim result (a JSON object from simulate --json or live)");
  if (j.value("schema", std::string{}) == "stepsim.analyze/1") return read_analyze_doc(j, label);
  if (j.value("schema", std::string{}) != kResultSchema)
    throw InputError(fmt::format("{}: /schema: {}: expected \"{}\" (simulate --json, live) or \"stepsim.analyze/1\" (analyze --json)",
                                 label, j.contains("schema") ? j["schema"].dump() : "missing", kResultSchema));
  if (!j.contains("metrics") || !j["metrics"].is_object()) throw InputError(label + ": /metrics: missing: expected an object");
  if (j.contains("ops") && !j["ops"].is_array()) throw InputError(label + ": /ops: expected an array");
  Doc d;
  d.label = label;
  d.root = &j;
  d.mode = j.value("mode", std::string{"simulate"});
  d.device = j.value("device", std::string{});
  // A measurement must describe a real step: every metric read below has its type and a
  // physical range, checked here so the error names the field (not just /metrics).
  const nlohmann::json& m = j["metrics"];
  constexpr std::int64_t kMaxNs = std::int64_t{1} << 62;
  auto check_int = [&](const nlohmann::json& obj, const std::string& path, const char* key, std::int64_t lo, bool required) {
    if (!obj.contains(key)) {
      if (required) throw InputError(fmt::format("{}: {}/{}: missing: expected an integer", label, path, key));
      return;
    }
    const auto& v = obj[key];
    // nlohmann reads a literal >= 0 as unsigned: compare in that type, then against `lo`.
    bool ok = v.is_number_integer() && (v.is_number_unsigned()
                                            ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxNs) &&
                                                  static_cast<std::int64_t>(v.get<std::uint64_t>()) >= lo
                                            : v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= kMaxNs);
    if (!ok)
      throw InputError(fmt::format("{}: {}/{}: {}: expected an integer from {} to 2^62", label, path, key, json_value_for_message(v), lo));
  };
  check_int(m, "/metrics", "step_time_ns", 1, true);
  for (const char* k : {"compute_time_ns", "comm_time_ns", "overlapped_comm_ns", "exposed_comm_ns", "idle_ns", "peak_memory_bytes"})
    check_int(m, "/metrics", k, 0, true);
  for (const char* k : {"peak_memory_time_ns", "persistent_memory_bytes", "memory_capacity_bytes"}) check_int(m, "/metrics", k, 0, false);
  if (!m.contains("overlap_pct") || !m["overlap_pct"].is_number() || !(m["overlap_pct"].get<double>() >= 0) ||
      !(m["overlap_pct"].get<double>() <= 100))
    throw InputError(fmt::format("{}: /metrics/overlap_pct: {}: expected a percentage from 0 to 100", label,
                                 m.contains("overlap_pct") ? json_value_for_message(m["overlap_pct"]) : "missing"));
  if (!m.contains("phases") || !m["phases"].is_object())
    throw InputError(fmt::format("{}: /metrics/phases: expected an object", label));
  for (const char* k : {"forward_ns", "backward_ns", "optimizer_ns"}) check_int(m["phases"], "/metrics/phases", k, 0, false);
  if (m.contains("peak_memory_breakdown")) {
    if (!m["peak_memory_breakdown"].is_object())
      throw InputError(fmt::format("{}: /metrics/peak_memory_breakdown: expected an object", label));
    for (auto it = m["peak_memory_breakdown"].begin(); it != m["peak_memory_breakdown"].end(); ++it)
      check_int(m["peak_memory_breakdown"], "/metrics/peak_memory_breakdown", it.key().c_str(), 0, true);
  }
  for (const char* k : {"fits"})
    if (m.contains(k) && !m[k].is_boolean()) throw InputError(fmt::format("{}: /metrics/{}: expected true or false", label, k));
  for (const char* k : {"peak_memory_phase"})
    if (m.contains(k) && !m[k].is_string()) throw InputError(fmt::format("{}: /metrics/{}: expected a string", label, k));
  try {
    d.metrics = metrics_from_json(j["metrics"]);
  } catch (const std::exception& e) {
    throw InputError(label + ": /metrics: " + e.what());
  }
  read_throughput(d, j);
  return d;
}

void add_row(CompareReport& r, std::string section, std::string name, std::string unit, double ref, double sub,
             std::optional<double> tolerance = std::nullopt) {
  CompareRow row;
  row.section = std::move(section);
  row.name = std::move(name);
  row.unit = std::move(unit);
  row.reference = ref;
  row.subject = sub;
  row.abs_error = sub - ref;
  if (ref != 0) row.rel_error_pct = 100.0 * (sub - ref) / std::fabs(ref);
  else if (sub == 0) row.rel_error_pct = 0.0;
  row.tolerance_pct = tolerance;
  if (tolerance) row.pass = row.rel_error_pct && std::fabs(*row.rel_error_pct) <= *tolerance + 1e-12;
  r.rows.push_back(std::move(row));
}

double ns(Time t) { return static_cast<double>(t.ns); }
double by(Bytes b) { return static_cast<double>(b.count); }

struct OpStats {
  std::map<std::string, double> kernel_class_ns;     // class -> summed duration
  std::map<std::string, double> kernel_class_count;  // class -> CUDA kernels (ops' "kernels", default 1)
  std::map<std::string, double> coll_kind_ns;        // kind -> summed duration
  std::map<std::string, double> coll_kind_exposed;   // kind -> summed exposed time
  std::vector<std::string> coll_keys;                // "name" or "name #k", issue order
  std::map<std::string, std::pair<double, double>> coll;  // key -> (duration, exposed)
  bool per_op = true;         // false: analyze --json (per-step totals, no op names)
  bool exposed_by_kind = true;  // false: analyze --json (its collective table has no exposed time)
};

std::int64_t get_i64(const nlohmann::json& o, const char* k, const std::string& label, std::size_t i) {
  if (!o.contains(k) || !o[k].is_number())
    throw InputError(fmt::format("{}: /ops/{}/{}: {}: expected a number", label, i, k, o.contains(k) ? o[k].dump() : "missing"));
  return o[k].get<std::int64_t>();
}

// analyze --json: per kernel class and collective kind, the mean per analysed step over every
// trace (the same per-step figures `analyze` prints), from /traces/*/steps/*/classes and each
// trace's collective table. The classes "communication" and "idle" are not kernel classes here
// (simulate's ops carry collectives apart). Malformed entries are input errors.
OpStats analyze_stats(const Doc& d) {
  OpStats s;
  s.per_op = false;
  s.exposed_by_kind = false;
  const auto& traces = (*d.root)["traces"];
  if (!traces.is_array()) return s;
  double steps = 0;
  auto number = [&](const nlohmann::json& o, const char* k, const std::string& path) {
    if (!o.is_object() || !o.contains(k) || !o[k].is_number() || !(o[k].get<double>() >= 0))
      throw InputError(fmt::format("{}: {}/{}: {}: expected a number >= 0", d.label, path, k,
                                   o.is_object() && o.contains(k) ? json_value_for_message(o[k]) : "missing"));
    return o[k].get<double>();
  };
  for (std::size_t t = 0; t < traces.size(); ++t) {
    const auto& tr = traces[t];
    if (!tr.is_object() || !tr.contains("steps") || !tr["steps"].is_array()) continue;
    const auto& st = tr["steps"];
    for (std::size_t i = 0; i < st.size(); ++i) {
      if (!st[i].is_object() || !st[i].contains("classes") || !st[i]["classes"].is_object()) continue;
      steps += 1;
      for (auto it = st[i]["classes"].begin(); it != st[i]["classes"].end(); ++it) {
        if (it.key() == "communication" || it.key() == "idle") continue;
        const std::string path = fmt::format("/traces/{}/steps/{}/classes/{}", t, i, it.key());
        s.kernel_class_ns[it.key()] += number(it.value(), "time_ns", path);
        s.kernel_class_count[it.key()] += number(it.value(), "kernels", path);
      }
    }
    if (tr.contains("collectives") && tr["collectives"].is_array())
      for (std::size_t i = 0; i < tr["collectives"].size(); ++i) {
        const auto& c = tr["collectives"][i];
        if (!c.is_object() || !c.contains("kind") || !c["kind"].is_string()) continue;
        s.coll_kind_ns[c["kind"].get<std::string>()] += number(c, "total_ns", fmt::format("/traces/{}/collectives/{}", t, i));
      }
  }
  if (steps > 0) {
    for (auto* m : {&s.kernel_class_ns, &s.kernel_class_count, &s.coll_kind_ns})
      for (auto& [k, v] : *m) v /= steps;
  }
  return s;
}

OpStats op_stats(const Doc& d) {
  if (d.mode == "analyze") return analyze_stats(d);
  OpStats s;
  if (!d.root->contains("ops")) return s;
  std::map<std::string, int> seen;
  const auto& ops = (*d.root)["ops"];
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& o = ops[i];
    if (!o.is_object()) throw InputError(fmt::format("{}: /ops/{}: expected an object", d.label, i));
    double dur = static_cast<double>(get_i64(o, "end_ns", d.label, i) - get_i64(o, "start_ns", d.label, i));
    std::string kind = o.value("kind", std::string{"kernel"});
    if (kind == "collective") {
      std::string ck = o.value("collective", std::string{"?"});
      double exposed = static_cast<double>(o.value("exposed_ns", std::int64_t{0}));
      s.coll_kind_ns[ck] += dur;
      s.coll_kind_exposed[ck] += exposed;
      std::string name = o.value("name", std::string{"?"});
      int k = seen[name]++;
      std::string key = k == 0 ? name : fmt::format("{} #{}", name, k + 1);
      s.coll_keys.push_back(key);
      s.coll[key] = {dur, exposed};
    } else if (kind == "kernel") {
      const std::string cls = o.value("class", std::string{"compute"});
      s.kernel_class_ns[cls] += dur;
      s.kernel_class_count[cls] += static_cast<double>(o.value("kernels", std::int64_t{1}));
    }
  }
  return s;
}

template <class V>
std::vector<std::string> union_keys(const std::map<std::string, V>& a, const std::map<std::string, V>& b) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : a) keys.push_back(k);
  for (const auto& [k, v] : b)
    if (!a.count(k)) keys.push_back(k);
  return keys;
}

template <class V>
double get_or_zero(const std::map<std::string, V>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0.0 : static_cast<double>(it->second);
}

std::string fmt_value(double v, const std::string& unit) {
  if (unit == "ns") return fmt::format("{:.3f} ms", v / 1e6);
  if (unit == "bytes") return fmt::format("{:.1f} MiB", v / (1024.0 * 1024.0));
  if (unit == "kernels") return fmt::format("{:.0f}", v);
  if (unit == "tokens/s") return fmt::format("{:.0f} tok/s", v);
  return fmt::format("{:.2f} {}", v, unit);
}

nlohmann::json opt_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

double parse_tolerance_pct(const std::string& text, const std::string& flag) {
  std::string t = text;
  if (!t.empty() && t.back() == '%') t.pop_back();
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (t.empty() || used != t.size() || !std::isfinite(v) || v < 0)
    throw InputError(fmt::format("{}: {}: expected a non-negative percentage such as 5% or 2.5", flag, text));
  return v;
}

std::vector<ConfigChange> diff_json(const nlohmann::json& a, const nlohmann::json& b, const std::string& path) {
  std::vector<ConfigChange> out;
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      std::string p = path + "/" + it.key();
      if (!b.contains(it.key())) out.push_back({p, it.value(), nullptr});
      else {
        auto sub = diff_json(it.value(), b[it.key()], p);
        out.insert(out.end(), sub.begin(), sub.end());
      }
    }
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key())) out.push_back({path + "/" + it.key(), nullptr, it.value()});
    return out;
  }
  if (a != b) out.push_back({path.empty() ? "/" : path, a, b});
  return out;
}

namespace {

// The step's overlap metrics; the step time row carries the step-time gate.
void add_overlap_rows(CompareReport& r, const Metrics& a, const Metrics& b) {
  const CompareOptions& options = r.options;
  add_row(r, "metric", "step time", "ns", ns(a.overlap.step_time), ns(b.overlap.step_time), options.tolerance_pct);
  r.step_time_pass = r.rows.back().pass;
  add_row(r, "metric", "compute time", "ns", ns(a.overlap.compute_time), ns(b.overlap.compute_time));
  add_row(r, "metric", "comm time", "ns", ns(a.overlap.comm_time), ns(b.overlap.comm_time));
  add_row(r, "metric", "overlapped comm", "ns", ns(a.overlap.overlapped_comm), ns(b.overlap.overlapped_comm));
  add_row(r, "metric", "exposed comm", "ns", ns(a.overlap.exposed_comm), ns(b.overlap.exposed_comm));
  add_row(r, "metric", "overlap", "%", a.overlap.overlap_pct, b.overlap.overlap_pct);
  add_row(r, "metric", "idle", "ns", ns(a.overlap.idle), ns(b.overlap.idle));
  // Where both sides have it: a simulation with rank variation, or analyze of several ranks
  // (one rank's trace cannot measure it, and its 0 is not a measurement).
  if (a.rank_wait.ns > 0 && b.rank_wait.ns > 0)
    add_row(r, "metric", "slowest-rank wait", "ns", ns(a.rank_wait), ns(b.rank_wait));
}

// Throughput (sim/analysis/throughput.hpp): a document without tokens per step (analyze
// --json, a measurement) does the other's work, so its tokens/s is the other's tokens per
// step over its own step time, and its MFU the other's scaled by the step-time ratio (the
// same model FLOPs on the same GPUs).
void add_throughput_rows(CompareReport& r, const Doc& ref, const Doc& sub) {
  if (!ref.tokens_per_step && !sub.tokens_per_step) return;
  const double tokens_a = ref.tokens_per_step.value_or(*sub.tokens_per_step);
  const double tokens_b = sub.tokens_per_step.value_or(*ref.tokens_per_step);
  auto rate = [](double tokens, Time step) { return step.ns > 0 ? tokens * 1e9 / ns(step) : 0.0; };
  add_row(r, "throughput", "tokens/s", "tokens/s", rate(tokens_a, ref.metrics.overlap.step_time),
          rate(tokens_b, sub.metrics.overlap.step_time));
  auto mfu_of = [&](const Doc& self, const Doc& other) -> std::optional<double> {
    if (self.mfu_pct) return self.mfu_pct;
    if (self.tokens_per_step || !other.mfu_pct || self.metrics.overlap.step_time.ns <= 0) return std::nullopt;
    return *other.mfu_pct * ns(other.metrics.overlap.step_time) / ns(self.metrics.overlap.step_time);
  };
  auto mfu_a = mfu_of(ref, sub), mfu_b = mfu_of(sub, ref);
  if (mfu_a && mfu_b && (*mfu_a > 0 || *mfu_b > 0)) add_row(r, "throughput", "MFU", "%", *mfu_a, *mfu_b);
}

// Phase times and memory; the peak memory row carries the memory gate.
void add_phase_and_memory_rows(CompareReport& r, const Metrics& a, const Metrics& b) {
  const CompareOptions& options = r.options;
  add_row(r, "phase", "forward", "ns", ns(a.forward), ns(b.forward));
  add_row(r, "phase", "backward", "ns", ns(a.backward), ns(b.backward));
  add_row(r, "phase", "optimizer", "ns", ns(a.optimizer), ns(b.optimizer));
  if (!r.memory_measured) return;
  add_row(r, "memory", "peak memory", "bytes", by(a.peak_memory), by(b.peak_memory), options.memory_tolerance_pct);
  r.memory_pass = r.rows.back().pass;
  add_row(r, "memory", "persistent memory", "bytes", by(a.persistent_memory), by(b.persistent_memory));
  // A Kineto trace's memory events carry no categories: no breakdown rows against one.
  if (a.peak_breakdown.empty() || b.peak_breakdown.empty()) return;
  for (const auto& k : union_keys(a.peak_breakdown, b.peak_breakdown)) {
    double x = a.peak_breakdown.count(k) ? by(a.peak_breakdown.at(k)) : 0.0;
    double y = b.peak_breakdown.count(k) ? by(b.peak_breakdown.at(k)) : 0.0;
    if (x != 0 || y != 0) add_row(r, "memory", "peak: " + k, "bytes", x, y);
  }
}

// Time and kernel count per kernel class. A side without per-op data (a document with no ops)
// has nothing to say: no rows, rather than rows that show a measurement of 0.
void add_kernel_class_rows(CompareReport& r, const OpStats& sa, const OpStats& sb) {
  if (sa.kernel_class_ns.empty() || sb.kernel_class_ns.empty()) return;
  auto row_unless_both_zero = [&](const char* section, const std::string& k, const char* unit, double x, double y) {
    if (x != 0 || y != 0) add_row(r, section, k, unit, x, y);
  };
  for (const auto& k : union_keys(sa.kernel_class_ns, sb.kernel_class_ns))
    row_unless_both_zero("kernel class", k, "ns", get_or_zero(sa.kernel_class_ns, k), get_or_zero(sb.kernel_class_ns, k));
  for (const auto& k : union_keys(sa.kernel_class_count, sb.kernel_class_count))
    row_unless_both_zero("kernel count", k, "kernels", get_or_zero(sa.kernel_class_count, k), get_or_zero(sb.kernel_class_count, k));
}

// Time (and exposed time) per collective kind and per collective; the collectives only one side
// issued are listed apart.
void add_collective_rows(CompareReport& r, const OpStats& sa, const OpStats& sb) {
  if (!sa.coll_kind_ns.empty() && !sb.coll_kind_ns.empty())
    for (const auto& k : union_keys(sa.coll_kind_ns, sb.coll_kind_ns)) {
      add_row(r, "collective kind", k, "ns", get_or_zero(sa.coll_kind_ns, k), get_or_zero(sb.coll_kind_ns, k));
      if (sa.exposed_by_kind && sb.exposed_by_kind)
        add_row(r, "collective kind", k + " exposed", "ns", get_or_zero(sa.coll_kind_exposed, k),
                get_or_zero(sb.coll_kind_exposed, k));
    }
  for (const auto& key : sa.coll_keys) {
    auto it = sb.coll.find(key);
    if (it == sb.coll.end()) {
      if (sb.per_op) r.only_in_reference.push_back(key);
      continue;
    }
    add_row(r, "collective", key, "ns", sa.coll.at(key).first, it->second.first);
    add_row(r, "collective", key + " exposed", "ns", sa.coll.at(key).second, it->second.second);
  }
  for (const auto& key : sb.coll_keys)
    if (!sa.coll.count(key) && sa.per_op) r.only_in_subject.push_back(key);
}

// What differs between the two documents' experiment and strategy sections.
void add_config_changes(CompareReport& r, const Doc& ref, const Doc& sub) {
  for (const char* part : {"experiment", "strategy"}) {
    nlohmann::json x = ref.root->contains(part) ? (*ref.root)[part] : nlohmann::json(nullptr);
    nlohmann::json y = sub.root->contains(part) ? (*sub.root)[part] : nlohmann::json(nullptr);
    auto ch = diff_json(x, y, std::string("/") + part);
    r.config_changes.insert(r.config_changes.end(), ch.begin(), ch.end());
  }
}

}  // namespace

CompareReport compare_results(const nlohmann::json& first, const std::string& first_label, const nlohmann::json& second,
                              const std::string& second_label, const CompareOptions& options) {
  Doc d1 = read_doc(first, first_label);
  Doc d2 = read_doc(second, second_label);
  // The measurement is the reference when there is exactly one; else the first file.
  const bool swap = !measured_mode(d1.mode) && measured_mode(d2.mode);
  const Doc& ref = swap ? d2 : d1;
  const Doc& sub = swap ? d1 : d2;

  CompareReport r;
  r.options = options;
  r.reference_label = ref.label;
  r.subject_label = sub.label;
  r.reference_mode = ref.mode;
  r.subject_mode = sub.mode;
  r.reference_device = ref.device;
  r.subject_device = sub.device;
  // A trace without memory events (profile_memory off) analyses to a peak of 0 bytes: not a
  // measurement of an empty GPU (every real step holds its parameters).
  r.memory_measured = !(ref.mode == "analyze" && ref.metrics.peak_memory.count == 0 && ref.metrics.peak_reserved.count == 0);

  add_overlap_rows(r, ref.metrics, sub.metrics);
  add_throughput_rows(r, ref, sub);
  add_phase_and_memory_rows(r, ref.metrics, sub.metrics);
  const OpStats sa = op_stats(ref), sb = op_stats(sub);
  add_kernel_class_rows(r, sa, sb);
  add_collective_rows(r, sa, sb);
  add_config_changes(r, ref, sub);
  return r;
}

nlohmann::json compare_to_json(const CompareReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json o{{"section", row.section},         {"name", row.name},
                     {"unit", row.unit},               {"reference", row.reference},
                     {"subject", row.subject},         {"abs_error", row.abs_error},
                     {"rel_error_pct", opt_json(row.rel_error_pct)}};
    if (row.tolerance_pct) {
      o["tolerance_pct"] = *row.tolerance_pct;
      o["pass"] = row.pass;
    }
    rows.push_back(std::move(o));
  }
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& c : r.config_changes) changes.push_back({{"path", c.path}, {"reference", c.reference}, {"subject", c.subject}});
  return {{"schema", "stepsim.compare/1"},
          {"reference", {{"file", r.reference_label}, {"mode", r.reference_mode}, {"device", r.reference_device}}},
          {"subject", {{"file", r.subject_label}, {"mode", r.subject_mode}, {"device", r.subject_device}}},
          {"tolerance_pct", r.options.tolerance_pct},
          {"memory_tolerance_pct", r.options.memory_tolerance_pct},
          {"pass", r.pass()},
          {"step_time_pass", r.step_time_pass},
          {"memory_pass", r.memory_pass},
          {"memory_measured", r.memory_measured},
          {"rows", rows},
          {"only_in_reference", r.only_in_reference},
          {"only_in_subject", r.only_in_subject},
          {"config_changes", changes}};
}

void write_compare_table(std::ostream& out, const CompareReport& r) {
  const bool measured = measured_mode(r.reference_mode) && !measured_mode(r.subject_mode);
  out << fmt::format("reference: {} ({}{})\n", r.reference_label, r.reference_mode,
                     r.reference_device.empty() ? "" : ", " + r.reference_device);
  out << fmt::format("subject:   {} ({}{})\n", r.subject_label, r.subject_mode,
                     r.subject_device.empty() ? "" : ", " + r.subject_device);
  out << (measured ? "error = predicted - measured, relative to measured\n"
                   : "change = second - first, relative to first\n");
  const std::string rel_head = measured ? "rel err" : "change";
  out << fmt::format("\n{:<16} {:<34} {:>14} {:>14} {:>14} {:>9}  {}\n", "section", "name", "reference", "subject",
                     "abs", rel_head, "gate");
  for (const auto& row : r.rows) {
    std::string rel = row.rel_error_pct ? fmt::format("{:+.2f}%", *row.rel_error_pct) : std::string("n/a");
    std::string abs = row.unit == "%" ? fmt::format("{:+.2f} pt", row.abs_error)
                      : row.unit == "ns"      ? fmt::format("{:+.3f} ms", row.abs_error / 1e6)
                      : row.unit == "kernels" ? fmt::format("{:+.0f}", row.abs_error)
                      : row.unit == "tokens/s" ? fmt::format("{:+.0f} tok/s", row.abs_error)
                                              : fmt::format("{:+.1f} MiB", row.abs_error / (1024.0 * 1024.0));
    std::string gate = row.tolerance_pct ? fmt::format("{} (tol {:.2f}%)", row.pass ? "PASS" : "FAIL", *row.tolerance_pct) : "";
    out << fmt::format("{:<16} {:<34} {:>14} {:>14} {:>14} {:>9}  {}\n", row.section, row.name,
                       fmt_value(row.reference, row.unit), fmt_value(row.subject, row.unit), abs, rel, gate);
  }
  if (!r.only_in_reference.empty() || !r.only_in_subject.empty()) {
    out << "\nunmatched collectives:\n";
    for (const auto& k : r.only_in_reference) out << "  only in reference: " << k << "\n";
    for (const auto& k : r.only_in_subject) out << "  only in subject:   " << k << "\n";
  }
  if (!r.config_changes.empty()) {
    out << "\nconfig differences:\n";
    for (const auto& c : r.config_changes)
      out << fmt::format("  {}: {} -> {}\n", c.path, c.reference.dump(), c.subject.dump());
  }
  out << fmt::format("\nresult: {} (step time {}, peak memory {})\n", r.pass() ? "PASS" : "FAIL",
                     r.step_time_pass ? "within tolerance" : "OUTSIDE tolerance",
                     !r.memory_measured ? "not measured: the trace has no memory events (profile_memory off)"
                     : r.memory_pass    ? "within tolerance"
                                        : "OUTSIDE tolerance");
}

}  // namespace stepsim
