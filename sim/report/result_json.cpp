#include "sim/report/result_json.hpp"

#include <algorithm>
#include <cstring>
#include <ostream>
#include <string_view>

#include <fmt/format.h>

#include "sim/analysis/throughput.hpp"
#include "sim/hardware/collective_model.hpp"
#include "sim/analysis/class_breakdown.hpp"
#include "sim/strategies/strategy.hpp"

namespace stepsim {

nlohmann::json ops_to_json(const Timeline& t) {
  auto exposed = exposed_per_op(t);
  nlohmann::json ops = nlohmann::json::array();
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const auto& op = t.ops[i];
    nlohmann::json o{{"name", op.name},
                     {"kind", op.kind == TimelineOp::Kind::Collective ? "collective" : "kernel"},
                     {"stream", t.streams.at(op.stream.index()).name},
                     {"phase", to_string(op.phase)},
                     {"unit", op.unit},
                     {"issue_ns", op.issue.ns},
                     {"start_ns", op.start.ns},
                     {"end_ns", op.end.ns}};
    if (op.kind == TimelineOp::Kind::Collective) {
      o["collective"] = to_string(op.collective);
      o["bytes"] = op.bytes.count;
      o["dtype"] = to_string(op.dtype);
      o["comm"] = t.comms.at(op.comm.value().index()).name;
      o["exposed_ns"] = exposed[i].ns;
    } else {
      o["class"] = to_string(op.cls);
      if (op.kernels != 1) o["kernels"] = op.kernels;
    }
    ops.push_back(std::move(o));
  }
  return ops;
}

namespace {

// Every member of the result but "ops".
nlohmann::json result_without_ops(const Experiment& e, const SimulationResult& r, const std::string& mode) {
  const Workload& w = *e.workload;
  nlohmann::json summary{{"framework", e.strategy->framework()},
                         {"model", w.name},
                         {"parameters", w.numel()},
                         {"world_size", e.cluster.world_size()},
                         {"nodes", e.cluster.nodes},
                         {"gpus_per_node", e.cluster.gpus_per_node},
                         {"micro_batch", w.micro_batch},
                         {"seq_len", w.seq_len},
                         {"grad_accum", e.training.grad_accum},
                         {"hardware_profile", e.cluster.profile->name},
                         {"instructions", r.program.instructions.size()}};
  if (r.metrics.overlap.step_time.ns > 0) {
    // sim/analysis/throughput.hpp defines these (llm-foundry's MFU convention).
    Throughput t = throughput(e, r.metrics.overlap.step_time);
    summary["tokens_per_s"] = t.tokens_per_s;
    summary["tokens_per_s_per_gpu"] = t.tokens_per_s_per_gpu;
    summary["samples_per_s"] = t.samples_per_s;
    if (t.mfu_pct > 0) {
      summary["mfu_pct"] = t.mfu_pct;
      summary["hfu_pct"] = t.hfu_pct;
    }
  }
  nlohmann::json out = {{"schema", kResultSchema},
          {"tool", "stepsim 0.1.0"},
          {"mode", mode},
          {"device", r.timeline.device},
          {"experiment", e.resolved},
          {"strategy", e.strategy->effective_config()},
          {"summary", summary},
          {"metrics", metrics_to_json(r.metrics)},
          {"classes", breakdown_to_json(class_breakdown(r.timeline, r.metrics.overlap.comm_time, r.metrics.overlap.idle))}};
  if (e.workload->options) out["workload"] = effective_workload(*e.workload);  // toy workloads have none
  const GemmRateSource g = gemm_rate_source(e.cluster.profile->compute);
  out["gemm_rates"] = {{"table", g.table}, {"in_training_factor", g.in_training_factor}, {"peak_scale", g.peak_scale},
                       {"corrected_to_training", g.corrected}, {"source", g.text}};
  // Communicators priced outside the group sizes the profile's collective model was fitted on
  // (issue 15): present only when there are some.
  auto outside = collective_extrapolations(e.cluster.profile, r.program.comms);
  if (!outside.empty()) out["collective_extrapolations"] = outside;
  return out;
}

using Serializer = nlohmann::detail::serializer<nlohmann::json>;

// Writes JSON as nlohmann's pretty printer does (json::dump(indent) with the default ' ', no
// ensure_ascii, strict UTF-8), into a buffer handed to the stream every 64 KiB: the ops are
// written field by field from the timeline, everything else through nlohmann's own serializer.
class PrettyWriter {
 public:
  PrettyWriter(std::ostream& out, int indent)
      : out_(out), indent_(static_cast<unsigned>(indent)), serializer_(nlohmann::detail::output_adapter<char>(buf_), ' ') {}
  ~PrettyWriter() = default;
  PrettyWriter(const PrettyWriter&) = delete;
  PrettyWriter& operator=(const PrettyWriter&) = delete;

  void flush_if_full() {
    if (buf_.size() >= kFlushBytes) flush();
  }
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }
  void raw(std::string_view s) { buf_.append(s); }
  void newline_indent(unsigned level) {
    buf_.push_back('\n');
    buf_.append(static_cast<std::size_t>(level) * indent_, ' ');
  }
  // A string value or key, escaped as nlohmann escapes it: printable ASCII other than '"' and
  // '\\' as it is, anything else through the serializer.
  void string(std::string_view s) {
    if (!plain(s)) return value(nlohmann::json(std::string(s)), 0);
    char* p = grow(s.size() + 2);
    *p++ = '"';
    p = std::copy(s.begin(), s.end(), p);
    *p = '"';
  }
  void integer(std::int64_t v) {
    const fmt::format_int f(v);
    buf_.append(f.data(), f.size());
  }
  void value(const nlohmann::json& v, unsigned level) { serializer_.dump(v, true, false, indent_, level * indent_); }
  // `"key": ` at the start of a member of an object at `level`, after the previous member.
  void key(std::string_view k, unsigned level, bool first) {
    if (plain(k)) return own_key(k, level, first);
    if (!first) buf_.push_back(',');
    newline_indent(level + 1);
    string(k);
    buf_.append(": ");
  }
  // The same for a key of the writer's own (printable ASCII), in one piece: the ops' members, 40,000
  // of them in a --json of the FSDP2 example.
  void own_key(std::string_view k, unsigned level, bool first) {
    const std::size_t spaces = static_cast<std::size_t>(level + 1) * indent_;
    char* p = grow((first ? 0 : 1) + 1 + spaces + 1 + k.size() + 3);
    if (!first) *p++ = ',';
    *p++ = '\n';
    p = std::fill_n(p, spaces, ' ');
    *p++ = '"';
    p = std::copy(k.begin(), k.end(), p);
    std::memcpy(p, "\": ", 3);
  }

 private:
  // Printable ASCII other than '"' and '\\': written as it is.
  static bool plain(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7F && c != '"' && c != '\\'; });
  }
  // The next n bytes of the buffer, to be written.
  char* grow(std::size_t n) {
    const std::size_t at = buf_.size();
    buf_.resize(at + n);
    return buf_.data() + at;
  }

  static constexpr std::size_t kFlushBytes = std::size_t{1} << 16;
  std::ostream& out_;
  unsigned indent_;
  std::string buf_;
  Serializer serializer_;
};

// The ops array at `level` (ops_to_json's members, in nlohmann's key order).
void write_ops(PrettyWriter& w, const Timeline& t, unsigned level) {
  if (t.ops.empty()) return w.raw("[]");
  const std::vector<Time> exposed = exposed_per_op(t);
  w.raw("[");
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const TimelineOp& op = t.ops[i];
    if (i > 0) w.raw(",");
    w.newline_indent(level + 1);
    w.raw("{");
    const unsigned in = level + 1;
    const bool coll = op.kind == TimelineOp::Kind::Collective;
    if (coll) {
      w.own_key("bytes", in, true);
      w.integer(op.bytes.count);
    } else {
      w.own_key("class", in, true);
      w.string(to_string(op.cls));
    }
    if (coll) {
      w.own_key("collective", in, false);
      w.string(to_string(op.collective));
      w.own_key("comm", in, false);
      w.string(t.comms.at(op.comm.value().index()).name);
      w.own_key("dtype", in, false);
      w.string(to_string(op.dtype));
    }
    w.own_key("end_ns", in, false);
    w.integer(op.end.ns);
    if (coll) {
      w.own_key("exposed_ns", in, false);
      w.integer(exposed[i].ns);
    }
    w.own_key("issue_ns", in, false);
    w.integer(op.issue.ns);
    if (!coll && op.kernels != 1) {
      w.own_key("kernels", in, false);
      w.integer(op.kernels);
    }
    w.own_key("kind", in, false);
    w.string(coll ? "collective" : "kernel");
    w.own_key("name", in, false);
    w.string(op.name);
    w.own_key("phase", in, false);
    w.string(to_string(op.phase));
    w.own_key("start_ns", in, false);
    w.integer(op.start.ns);
    w.own_key("stream", in, false);
    w.string(t.streams.at(op.stream.index()).name);
    w.own_key("unit", in, false);
    w.string(op.unit);
    w.newline_indent(in);
    w.raw("}");
    w.flush_if_full();
  }
  w.newline_indent(level);
  w.raw("]");
}

}  // namespace

nlohmann::json result_to_json(const Experiment& e, const SimulationResult& r, const std::string& mode) {
  nlohmann::json out = result_without_ops(e, r, mode);
  out["ops"] = ops_to_json(r.timeline);
  return out;
}

void write_result_json(std::ostream& out, const Experiment& e, const SimulationResult& r, const nlohmann::json& extra,
                       int indent, const std::string& mode) {
  nlohmann::json head = result_without_ops(e, r, mode);
  for (const auto& [k, v] : extra.items()) head[k] = v;
  head.erase("ops");
  PrettyWriter w(out, indent);
  w.raw("{");
  bool first = true, ops_written = false;
  auto ops = [&] {
    w.own_key("ops", 0, first);
    write_ops(w, r.timeline, 1);
    first = false;
    ops_written = true;
  };
  // nlohmann's objects are std::maps: members in key order, "ops" among them.
  for (const auto& [k, v] : head.items()) {
    if (!ops_written && k > std::string_view("ops")) ops();
    w.key(k, 0, first);
    w.value(v, 1);
    first = false;
    w.flush_if_full();
  }
  if (!ops_written) ops();
  w.newline_indent(0);
  w.raw("}");
  w.flush();
}

}  // namespace stepsim
