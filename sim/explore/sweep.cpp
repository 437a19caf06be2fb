#include "sim/explore/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/exec/engine.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += "\"\"";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out + "\"";
}

namespace {

// The metric columns after the varied paths, in CSV order.
const std::vector<std::string>& metric_columns() {
  static const std::vector<std::string> cols = [] {
    std::vector<std::string> c{"framework",          "world_size",        "step_time_ns",      "step_time_ms",
                               "compute_time_ns",    "comm_time_ns",      "overlapped_comm_ns", "exposed_comm_ns",
                               "overlap_pct",        "idle_ns",           "forward_ns",        "backward_ns",
                               "optimizer_ns",       "peak_memory_bytes", "peak_memory_gib"};
    for (int i = 0; i < kMemCategoryCount; ++i) c.push_back("mem_" + to_string(static_cast<MemCategory>(i)) + "_bytes");
    for (const char* s : {"peak_memory_phase", "persistent_memory_bytes", "memory_capacity_bytes", "fits",
                          "constraints_ok", "tokens_per_s", "tokens_per_s_per_gpu", "mfu_pct", "hfu_pct", "tokens_per_step",
                          "global_batch", "peak_reserved_bytes", "peak_reserved_gib", "non_pytorch_bytes",
                          "extrapolated_comms", "error"})
      c.push_back(s);
    return c;
  }();
  return cols;
}

bool compare(double a, const std::string& op, double b) {
  if (op == "<=") return a <= b;
  if (op == "<") return a < b;
  if (op == ">=") return a >= b;
  if (op == ">") return a > b;
  if (op == "==") return a == b;
  return a != b;
}

}  // namespace

std::string render_value(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

void set_config_path(nlohmann::json& doc, const std::string& dotted, const nlohmann::json& value) {
  nlohmann::json* node = &doc;
  std::stringstream ss(dotted);
  std::string part;
  std::vector<std::string> parts;
  while (std::getline(ss, part, '.')) parts.push_back(part);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty() || !node->is_object())
      throw InputError(fmt::format("sweep path {}: {} is not inside an object", dotted, parts[i]));
    if (i + 1 == parts.size()) (*node)[parts[i]] = value;
    else node = &(*node)[parts[i]];
  }
}

std::uint64_t SweepSpec::size() const {
  if (!points.empty()) return points.size();
  if (axes.empty()) return 1;
  std::uint64_t n = 1;
  for (const auto& a : axes) n *= a.values.size();
  return n;
}

std::vector<std::pair<std::string, nlohmann::json>> SweepSpec::point(std::uint64_t i) const {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  if (!points.empty()) {
    for (auto it = points[i].begin(); it != points[i].end(); ++it) out.emplace_back(it.key(), it.value());
    return out;
  }
  out.resize(axes.size());
  for (std::size_t a = axes.size(); a-- > 0;) {  // last axis varies fastest
    std::uint64_t n = axes[a].values.size();
    out[a] = {axes[a].path, axes[a].values[i % n]};
    i /= n;
  }
  return out;
}

SweepConstraint parse_constraint(const std::string& text, const std::string& where) {
  SweepConstraint c;
  c.text = text;
  std::istringstream in(text);
  std::string value;
  if (!(in >> c.metric >> c.op >> value))
    throw InputError(fmt::format("{}: \"{}\": expected \"metric OP number\", e.g. \"peak_memory_gib <= 80\"", where, text));
  static const std::vector<std::string> ops{"<=", "<", ">=", ">", "==", "!="};
  if (std::find(ops.begin(), ops.end(), c.op) == ops.end())
    throw InputError(fmt::format("{}: \"{}\": expected one of <= < >= > == != as the operator", where, text));
  try {
    std::size_t used = 0;
    c.value = std::stod(value, &used);
    if (used != value.size()) throw std::invalid_argument(value);
  } catch (const std::exception&) {
    throw InputError(fmt::format("{}: \"{}\": expected a number after the operator", where, text));
  }
  SweepRow probe;
  probe.status = "ok";
  if (!metric_value(probe, c.metric))
    throw InputError(fmt::format("{}: \"{}\": expected a numeric metric column (e.g. peak_memory_gib, step_time_ms)", where, text));
  return c;
}

SweepSpec sweep_from_json(const nlohmann::json& doc, const SourceMap& sources) {
  SweepSpec s;
  s.file = sources.root_file;
  ObjectReader r(doc, sources, "");
  s.name = r.string("name", "");
  if (r.has("description")) r.string("description");
  if (!r.has("base") || !r.raw("base").is_object()) r.fail("base", "the base experiment object (or {\"include\": FILE})");
  s.base = r.raw("base");
  s.base_sources.root_file = sources.root_file;
  for (const auto& [prefix, file] : sources.file_of_prefix)
    if (prefix.rfind("/base", 0) == 0) s.base_sources.file_of_prefix[prefix.substr(5)] = file;
  if (r.has("axes")) {
    ObjectReader ax = r.object("axes");
    for (const auto& [key, value] : ax.raw_object_items()) {
      const nlohmann::json& v = ax.raw(key);
      if (!v.is_array() || v.empty()) ax.fail_value(key, v, "a non-empty array of values for this config path");
      s.axes.push_back({key, std::vector<nlohmann::json>(v.begin(), v.end())});
      s.columns.push_back(key);
    }
    ax.finish();
    // The grid's size, checked: 64 axes of two values would wrap a plain product to 0 points.
    std::uint64_t n = 1;
    for (const auto& a : s.axes)
      if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(a.values.size()), &n) || n > kMaxSweepGridPoints)
        r.fail("axes", fmt::format("a grid of at most {} points (the product of the axes' lengths; "
                                   "--max-points bounds one run further)",
                                   kMaxSweepGridPoints));
  }
  if (r.has("points")) {
    if (!s.axes.empty()) r.fail("points", "either \"axes\" or \"points\", not both");
    const nlohmann::json& pts = r.array("points");
    for (std::size_t i = 0; i < pts.size(); ++i) {
      if (!pts[i].is_object())
        throw_input_error(sources.file_for("/points"), fmt::format("/points/{}", i), pts[i], "an object {path: value}");
      for (auto it = pts[i].begin(); it != pts[i].end(); ++it)
        if (std::find(s.columns.begin(), s.columns.end(), it.key()) == s.columns.end()) s.columns.push_back(it.key());
      s.points.push_back(pts[i]);
    }
    if (s.points.empty()) r.fail("points", "a non-empty array of points");
  }
  if (r.has("constraints")) {
    const nlohmann::json& cs = r.array("constraints");
    for (std::size_t i = 0; i < cs.size(); ++i) {
      std::string where = fmt::format("{}: /constraints/{}", sources.file_for("/constraints"), i);
      if (!cs[i].is_string()) throw_input_error(sources.file_for("/constraints"), fmt::format("/constraints/{}", i), cs[i], "a string \"metric OP number\"");
      s.constraints.push_back(parse_constraint(cs[i].get<std::string>(), where));
    }
  }
  if (r.has("objective")) {
    const nlohmann::json& o = r.raw("objective");
    if (!o.is_string()) r.fail("objective", "one of \"step_time\", \"tokens_per_s\", \"mfu\"");
    try {
      s.objective = parse_objective(o.get<std::string>(), "objective");
    } catch (const InputError&) {
      r.fail("objective", "one of \"step_time\", \"tokens_per_s\", \"mfu\"");
    }
  }
  s.top = r.int_in("top", 1, 1000, 5);
  r.finish();
  return s;
}

void check_some_point_valid(const SweepSpec& spec, const SweepSummary& s, const std::string& first_invalid) {
  if (s.total() > 0 && s.ok() == 0 && !first_invalid.empty())
    throw InputError(fmt::format("{}: none of the {} points is a valid experiment (the base config itself?); the first: {}",
                                 spec.file, s.total(), first_invalid));
}

SweepSpec load_sweep(const std::filesystem::path& file) {
  SourceMap sources;
  nlohmann::json doc = load_with_includes(file, sources);
  return sweep_from_json(doc, sources);
}

std::optional<double> metric_value(const SweepRow& r, const std::string& name) {
  const Metrics& m = r.metrics;
  const auto& o = m.overlap;
  auto d = [](std::int64_t v) { return static_cast<double>(v); };
  if (name == "step_time_ns") return d(o.step_time.ns);
  if (name == "step_time_ms") return o.step_time.ms();
  if (name == "step_time_s") return o.step_time.seconds();
  if (name == "compute_time_ns") return d(o.compute_time.ns);
  if (name == "comm_time_ns") return d(o.comm_time.ns);
  if (name == "overlapped_comm_ns") return d(o.overlapped_comm.ns);
  if (name == "exposed_comm_ns") return d(o.exposed_comm.ns);
  if (name == "exposed_comm_ms") return o.exposed_comm.ms();
  if (name == "overlap_pct") return o.overlap_pct;
  if (name == "idle_ns") return d(o.idle.ns);
  if (name == "forward_ns") return d(m.forward.ns);
  if (name == "backward_ns") return d(m.backward.ns);
  if (name == "optimizer_ns") return d(m.optimizer.ns);
  if (name == "peak_memory_bytes") return d(m.peak_memory.count);
  if (name == "peak_memory_gib") return m.peak_memory.gib();
  if (name == "peak_memory_gb") return m.peak_memory.gb();
  if (name == "persistent_memory_bytes") return d(m.persistent_memory.count);
  if (name == "persistent_memory_gib") return m.persistent_memory.gib();
  if (name == "peak_reserved_bytes") return d(m.peak_reserved.count);
  if (name == "peak_reserved_gib") return m.peak_reserved.gib();
  if (name == "peak_reserved_gb") return m.peak_reserved.gb();
  if (name == "non_pytorch_bytes") return d(m.non_pytorch.count);
  if (name == "extrapolated_comms") return d(static_cast<std::int64_t>(r.extrapolations.size()));
  if (name == "alloc_retries_per_step") return d(m.alloc_retries);
  if (name == "alloc_ooms_per_step") return d(m.alloc_ooms);
  // What `fits` compares with the capacity (sim/analysis/metrics.hpp).
  if (name == "device_memory_gib") return (std::max(m.peak_reserved, m.peak_memory) + m.non_pytorch).gib();
  if (name == "tokens_per_step") return r.throughput.tokens_per_step;
  if (name == "global_batch") return r.throughput.samples_per_step;
  if (name == "samples_per_s") return r.throughput.samples_per_s;
  if (name == "world_size") return r.world_size;
  if (name == "tokens_per_s") return r.throughput.tokens_per_s;
  if (name == "tokens_per_s_per_gpu") return r.throughput.tokens_per_s_per_gpu;
  if (name == "mfu_pct") return r.throughput.mfu_pct;
  if (name == "hfu_pct") return r.throughput.hfu_pct;
  return std::nullopt;
}

std::shared_ptr<const Program> ProgramCache::find(const std::string& key, const HostProfile& host) const {
  std::lock_guard lock(mutex_);
  for (const Entry& e : entries_)
    if (e.key == key && e.host == host) {
      e.last_use = ++uses_;
      ++hits_;
      return e.program;
    }
  return nullptr;
}

void ProgramCache::add(const std::string& key, const HostProfile& host, std::shared_ptr<const Program> program) {
  const std::size_t size = program->instructions.size();
  std::lock_guard lock(mutex_);
  if (size > max_instructions_) return;
  for (const Entry& e : entries_)
    if (e.key == key && e.host == host) return;  // another thread built it meanwhile (the same program)
  while (held_ + size > max_instructions_ && !entries_.empty()) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
    held_ -= oldest->program->instructions.size();
    entries_.erase(oldest);
  }
  entries_.push_back(Entry{key, host, std::move(program), ++uses_});
  held_ += size;
}

std::uint64_t ProgramCache::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

std::size_t ProgramCache::held_instructions() const {
  std::lock_guard lock(mutex_);
  return held_;
}

bool SweepSpec::varies_profile() const {
  return std::any_of(columns.begin(), columns.end(),
                     [](const std::string& c) { return c == "cluster.profile" || c.starts_with("cluster.profile."); });
}

bool SweepSpec::may_change_workload(const std::string& column) {
  // Path `a` is `b` or lies inside it.
  const auto inside = [](std::string_view a, std::string_view b) {
    return a.starts_with(b) && (a.size() == b.size() || a[b.size()] == '.');
  };
  // The column is one of these paths, lies inside one, or holds one (a whole "training").
  for (const std::string_view p : {"workload", "training.torch_version", "strategy.deepspeed_config"})
    if (inside(column, p) || inside(p, column)) return true;
  return false;
}

std::string SweepSpec::workload_group(std::uint64_t i) const {
  std::string group;
  for (const auto& [path, value] : point(i))
    if (may_change_workload(path)) {
      group += value.dump();
      group += '\n';
    }
  return group;
}

namespace {

// What ProgramCache matches a point's program by, besides the profile's host section: the
// experiment document without cluster.profile (which is moved out and back, not copied: an
// inline profile is ~130 KB). JSON objects are ordered maps, so equal documents dump equal.
std::string program_key(nlohmann::json& doc) {
  auto cluster = doc.find("cluster");
  if (cluster == doc.end() || !cluster->is_object()) return doc.dump();
  auto profile = cluster->find("profile");
  if (profile == cluster->end()) return doc.dump();
  nlohmann::json held = std::move(*profile);
  cluster->erase(profile);
  std::string key = doc.dump();
  (*cluster)["profile"] = std::move(held);
  return key;
}

}  // namespace

SweepRow run_sweep_point(const SweepSpec& spec, std::uint64_t index, WorkloadCache* workloads) {
  SweepRow row;
  row.index = index;
  row.points = spec.size();
  auto pt = spec.point(index);
  row.values.assign(spec.columns.size(), nlohmann::json());
  for (auto& [path, value] : pt) {
    auto it = std::find(spec.columns.begin(), spec.columns.end(), path);
    row.values[static_cast<std::size_t>(it - spec.columns.begin())] = value;
  }
  try {
    nlohmann::json doc = spec.base;
    for (auto& [path, value] : pt) set_config_path(doc, path, value);
    ProgramCache* const programs = spec.programs && spec.varies_profile() ? spec.programs.get() : nullptr;
    const std::string key = programs ? program_key(doc) : std::string();
    Experiment e = experiment_from_json(std::move(doc), spec.base_sources, spec.profiles.get(), "", workloads);
    row.framework = e.strategy->framework();
    row.world_size = e.cluster.world_size();
    // run_experiment, with the program of an earlier point whose build read the same inputs.
    std::shared_ptr<const Program> program = programs ? programs->find(key, e.cluster.profile->host) : nullptr;
    if (!program) {
      program = std::make_shared<const Program>(build_step_program(e));
      if (programs) programs->add(key, e.cluster.profile->host, program);
    }
    row.metrics = compute_metrics(simulate_program(*program, e.cluster.profile, e.training.allocator, {}, TimelineDetail::Metrics));
    row.extrapolations = collective_extrapolations(e.cluster.profile, program->comms);
    row.throughput = throughput(e, row.metrics.overlap.step_time);
    row.status = "ok";
  } catch (const InputError& ex) {
    row.status = "invalid";
    row.error = ex.what();
    return row;
  } catch (const std::exception& ex) {
    row.status = "error";
    row.error = ex.what();
    return row;
  }
  // Constraints, and the device capacity: a configuration that does not fit is never "best".
  row.constraints_ok = row.metrics.fits;
  for (const auto& c : spec.constraints)
    if (!compare(*metric_value(row, c.metric), c.op, c.value)) row.constraints_ok = false;
  return row;
}

std::string sweep_csv_header(const SweepSpec& spec) {
  std::string out = "index,status";
  for (const auto& c : spec.columns) out += "," + csv_field(c);
  for (const auto& c : metric_columns()) out += "," + c;
  return out + ",points";
}

std::vector<std::string> sweep_point_csv_fields(const SweepSpec& spec, std::uint64_t index) {
  std::vector<nlohmann::json> values(spec.columns.size());
  for (auto& [path, value] : spec.point(index)) {
    auto it = std::find(spec.columns.begin(), spec.columns.end(), path);
    values[static_cast<std::size_t>(it - spec.columns.begin())] = value;
  }
  std::string row;
  for (std::size_t i = 0; i < values.size(); ++i)
    row += (i ? "," : "") + csv_field(values[i].is_null() ? "" : render_value(values[i]));
  if (values.empty()) return {};
  return split_csv_line(row);
}

std::string sweep_csv_row(const SweepRow& r) {
  std::string out = fmt::format("{},{}", r.index, r.status);
  for (const auto& v : r.values) out += "," + csv_field(v.is_null() ? "" : render_value(v));
  if (r.status != "ok") {
    out += "," + csv_field(r.framework) + "," + (r.world_size ? std::to_string(r.world_size) : "");
    out += std::string(metric_columns().size() - 3, ',');  // empty metrics
    out += "," + csv_field(r.error);
    return out + fmt::format(",{}", r.points);
  }
  const Metrics& m = r.metrics;
  const auto& o = m.overlap;
  out += fmt::format(",{},{},{},{:.6f},{},{},{},{},{:.4f},{},{},{},{},{},{:.4f}", csv_field(r.framework), r.world_size,
                     o.step_time.ns, o.step_time.ms(), o.compute_time.ns, o.comm_time.ns, o.overlapped_comm.ns,
                     o.exposed_comm.ns, o.overlap_pct, o.idle.ns, m.forward.ns, m.backward.ns, m.optimizer.ns,
                     m.peak_memory.count, m.peak_memory.gib());
  for (int i = 0; i < kMemCategoryCount; ++i) {
    auto it = m.peak_breakdown.find(to_string(static_cast<MemCategory>(i)));
    out += fmt::format(",{}", it == m.peak_breakdown.end() ? 0 : it->second.count);
  }
  out += fmt::format(",{},{},{},{},{}", csv_field(m.peak_phase), m.persistent_memory.count, m.capacity.count,
                     m.fits ? "true" : "false", r.constraints_ok ? "true" : "false");
  const Throughput& t = r.throughput;
  out += fmt::format(",{:.2f},{:.2f},{:.3f},{:.3f},{:.0f},{:.0f},{},{:.4f},{},{},,{}", t.tokens_per_s, t.tokens_per_s_per_gpu,
                     t.mfu_pct, t.hfu_pct, t.tokens_per_step, t.samples_per_step, m.peak_reserved.count, m.peak_reserved.gib(),
                     m.non_pytorch.count, r.extrapolations.size(), r.points);
  return out;
}

nlohmann::json sweep_row_json(const SweepSpec& spec, const SweepRow& r) {
  nlohmann::json point = nlohmann::json::object();
  for (std::size_t i = 0; i < spec.columns.size(); ++i)
    if (!r.values[i].is_null()) point[spec.columns[i]] = r.values[i];
  nlohmann::json j{{"index", r.index}, {"status", r.status}, {"point", point}};
  if (!r.framework.empty()) j["framework"] = r.framework;
  if (r.world_size) j["world_size"] = r.world_size;
  if (r.status == "ok") {
    j["metrics"] = metrics_to_json(r.metrics);
    j["throughput"] = {{"tokens_per_s", r.throughput.tokens_per_s},
                       {"tokens_per_s_per_gpu", r.throughput.tokens_per_s_per_gpu},
                       {"mfu_pct", r.throughput.mfu_pct},
                       {"hfu_pct", r.throughput.hfu_pct},
                       {"tokens_per_step", r.throughput.tokens_per_step},
                       {"global_batch", r.throughput.samples_per_step}};
    j["constraints_ok"] = r.constraints_ok;
    if (!r.extrapolations.empty()) j["collective_extrapolations"] = r.extrapolations;
  } else {
    j["error"] = r.error;
  }
  return j;
}

SweepPointBrief brief_of(const SweepRow& r) {
  SweepPointBrief b;
  b.index = r.index;
  for (const auto& v : r.values) b.values.push_back(v.is_null() ? "" : render_value(v));
  b.step_time = r.metrics.overlap.step_time;
  b.peak_memory = r.metrics.peak_memory;
  b.peak_reserved = r.metrics.peak_reserved;
  b.capacity = r.metrics.capacity;
  b.tokens_per_step = r.throughput.tokens_per_step;
  // As the CSV writes it, so a merged sweep ranks its points exactly as the unsharded run.
  b.mfu_pct = std::round(r.throughput.mfu_pct * 1000) / 1000;
  b.constraints_ok = r.constraints_ok;
  return b;
}

std::optional<std::pair<Bytes, std::string>> constraint_memory_cap(const std::vector<SweepConstraint>& constraints) {
  std::optional<std::pair<Bytes, std::string>> cap;
  for (const auto& c : constraints) {
    if (c.op != "<=" && c.op != "<") continue;
    const std::string& m = c.metric;
    double bytes = -1;
    if (m == "peak_memory_bytes" || m == "peak_reserved_bytes") bytes = c.value;
    else if (m == "peak_memory_gib" || m == "peak_reserved_gib" || m == "device_memory_gib") bytes = c.value * 1024.0 * 1024 * 1024;
    else if (m == "peak_memory_gb" || m == "peak_reserved_gb") bytes = c.value * 1e9;
    if (bytes < 0) continue;
    Bytes b{static_cast<std::int64_t>(bytes)};
    if (!cap || b < cap->first) cap = std::make_pair(b, c.text);
  }
  return cap;
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') { cur += '"'; ++i; }
      else if (c == '"') quoted = false;
      else cur += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(std::move(cur));
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(std::move(cur));
  return out;
}

}  // namespace stepsim
