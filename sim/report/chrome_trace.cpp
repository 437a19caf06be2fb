#include "sim/report/chrome_trace.hpp"

#include <map>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace stepsim {

// Exact ns as microseconds: "1234.567".
static std::string us(Time t) {
  std::int64_t ns = t.ns;
  const char* sign = ns < 0 ? "-" : "";
  if (ns < 0) ns = -ns;
  return fmt::format("{}{}.{:03d}", sign, ns / 1000, static_cast<int>(ns % 1000));
}

static void event(std::ostream& out, bool& first, const std::string& body) {
  out << (first ? "\n" : ",\n") << body;
  first = false;
}

namespace {

// A point strictly inside [start, end) on the ns grid: the middle (a flow event binds to the
// slice enclosing its ts; the slice's own start is shared with its parent's children).
Time inside(Time start, Time end) { return Time{start.ns + (end.ns - start.ns) / 2}; }

struct Flow {
  const char* cat;
  const char* name;
  int from_tid, to_tid;
  Time from_ts, to_ts;
};

int tid_of(const TimelineOp& op) { return 1 + static_cast<int>(op.stream.index()); }
// An arrow needs a point strictly inside each end's interval (see `inside`).
bool has_length(Time a, Time b) { return b.ns - a.ns >= 2; }

// Host issue -> op: the Issue interval of the op's instruction.
void add_issue_flows(std::vector<Flow>& out, const Timeline& t) {
  std::map<std::size_t, std::size_t> issue_of;  // instruction -> host interval
  for (std::size_t h = 0; h < t.host.size(); ++h)
    if (t.host[h].kind == HostInterval::Kind::Issue) issue_of.emplace(t.host[h].instruction, h);
  for (const auto& op : t.ops) {
    auto it = issue_of.find(op.instruction);
    if (it == issue_of.end() || !has_length(op.start, op.end)) continue;
    const auto& h = t.host[it->second];
    if (!has_length(h.start, h.end)) continue;
    out.push_back(Flow{"issue", "issue", 0, tid_of(op), inside(h.start, h.end), inside(op.start, op.end)});
  }
}

// Record -> Wait: the last op on the Record's stream before it (in issue order) -> the first
// op on the Wait's stream after the Wait, for the latest Record of the event before the Wait.
void add_record_wait_flows(std::vector<Flow>& out, const Timeline& t, const Program& program) {
  std::map<int, std::vector<std::size_t>> ops_on;  // stream -> timeline ops in issue order
  for (std::size_t i = 0; i < t.ops.size(); ++i) ops_on[static_cast<int>(t.ops[i].stream.index())].push_back(i);
  auto last_before = [&](int stream, std::size_t instruction) -> long {
    auto it = ops_on.find(stream);
    if (it == ops_on.end()) return -1;
    long found = -1;
    for (std::size_t i : it->second) {
      if (t.ops[i].instruction >= instruction) break;
      found = static_cast<long>(i);
    }
    return found;
  };
  auto first_after = [&](int stream, std::size_t instruction) -> long {
    auto it = ops_on.find(stream);
    if (it == ops_on.end()) return -1;
    for (std::size_t i : it->second)
      if (t.ops[i].instruction > instruction) return static_cast<long>(i);
    return -1;
  };
  std::map<int, std::size_t> latest_record;  // event -> Record instruction
  std::set<std::pair<long, long>> seen;
  for (std::size_t k = 0; k < program.instructions.size(); ++k) {
    const auto& ins = program.instructions[k];
    if (const auto* r = std::get_if<Record>(&ins)) {
      latest_record[static_cast<int>(r->event.index())] = k;
    } else if (const auto* w = std::get_if<Wait>(&ins)) {
      auto rec = latest_record.find(static_cast<int>(w->event.index()));
      if (rec == latest_record.end()) continue;
      const auto& record = std::get<Record>(program.instructions[rec->second]);
      long from = last_before(static_cast<int>(record.stream.index()), rec->second);
      long to = first_after(static_cast<int>(w->stream.index()), k);
      if (from < 0 || to < 0 || !seen.emplace(from, to).second) continue;
      const auto& a = t.ops[static_cast<std::size_t>(from)];
      const auto& b = t.ops[static_cast<std::size_t>(to)];
      if (tid_of(a) == tid_of(b) || !has_length(a.start, a.end) || !has_length(b.start, b.end)) continue;
      out.push_back(Flow{"event", "record -> wait", tid_of(a), tid_of(b), inside(a.start, a.end), inside(b.start, b.end)});
    }
  }
}

// Op -> the blocked host interval it released (the simulator's record).
void add_host_sync_flows(std::vector<Flow>& out, const Timeline& t) {
  for (std::size_t h = 0; h < t.host.size() && h < t.host_why.size(); ++h) {
    const auto& why = t.host_why[h];
    if (t.host[h].kind != HostInterval::Kind::Blocked || why.cause() != StartCause::HostSync || !why.op() ||
        why.op()->index() >= t.ops.size())
      continue;
    const auto& op = t.ops[why.op()->index()];
    if (!has_length(op.start, op.end) || !has_length(t.host[h].start, t.host[h].end)) continue;
    out.push_back(Flow{"host_sync", "host sync", tid_of(op), 0, inside(op.start, op.end), inside(t.host[h].start, t.host[h].end)});
  }
}

// The arrows of the header comment, in a deterministic order.
std::vector<Flow> flows(const Timeline& t, const Program* program) {
  std::vector<Flow> out;
  add_issue_flows(out, t);
  if (program) add_record_wait_flows(out, t, *program);
  add_host_sync_flows(out, t);
  return out;
}

// The process and thread names: the host thread, then one thread per stream.
void write_thread_names(std::ostream& out, bool& first, const Timeline& t, const std::string& title) {
  using nlohmann::json;
  event(out, first, json{{"ph", "M"}, {"pid", 0}, {"name", "process_name"}, {"args", {{"name", title}}}}.dump());
  event(out, first, json{{"ph", "M"}, {"pid", 0}, {"tid", 0}, {"name", "thread_name"}, {"args", {{"name", "host thread"}}}}.dump());
  for (std::size_t s = 0; s < t.streams.size(); ++s) {
    event(out, first, json{{"ph", "M"}, {"pid", 0}, {"tid", 1 + s}, {"name", "thread_name"},
                           {"args", {{"name", fmt::format("stream {} ({})", s, t.streams[s].name)}}}}
                          .dump());
    event(out, first, json{{"ph", "M"}, {"pid", 0}, {"tid", 1 + s}, {"name", "thread_sort_index"}, {"args", {{"sort_index", 1 + s}}}}.dump());
  }
}

// A kernel event's args: where and when it ran, and what it was (collective or compute).
nlohmann::json kernel_args(const Timeline& t, const TimelineOp& op) {
  nlohmann::json args{{"stream", op.stream.index()}, {"phase", to_string(op.phase)}, {"unit", op.unit}, {"issue_ns", op.issue.ns},
                      {"start_ns", op.start.ns}, {"end_ns", op.end.ns}};
  if (op.kind == TimelineOp::Kind::Collective) {
    args["stepsim_op"] = "collective";
    args["collective"] = to_string(op.collective);
    args["bytes"] = op.bytes.count;
    args["dtype"] = to_string(op.dtype);
    args["comm"] = t.comms.at(op.comm.value().index()).name;
    args["group_size"] = t.comms.at(op.comm.value().index()).ranks;
  } else {
    args["stepsim_op"] = "compute";
    args["class"] = to_string(op.cls);
  }
  return args;
}

// Each flow as a start ("s") and finish ("f", binding to the enclosing slice) event pair.
void write_flow_events(std::ostream& out, bool& first, const Timeline& t, const Program* program) {
  int id = 0;
  for (const auto& f : flows(t, program)) {
    ++id;
    event(out, first, fmt::format(R"({{"ph": "s", "id": {}, "pid": 0, "tid": {}, "ts": {}, "cat": "{}", "name": "{}"}})", id, f.from_tid,
                                  us(f.from_ts), f.cat, f.name));
    event(out, first, fmt::format(R"({{"ph": "f", "id": {}, "pid": 0, "tid": {}, "ts": {}, "cat": "{}", "name": "{}", "bp": "e"}})", id,
                                  f.to_tid, us(f.to_ts), f.cat, f.name));
  }
}

}  // namespace

void write_chrome_trace(std::ostream& out, const Timeline& t, const std::string& title, const Program* program) {
  using nlohmann::json;
  json outside = json::object();  // the memory outside PyTorch, by component (docs/memory.md)
  for (const auto& p : t.non_pytorch_parts) outside[p.name] = p.bytes.count;
  out << "{\"displayTimeUnit\": \"ns\", \"stepsim\": "
      << json{{"schema", kTraceSchema},
              {"title", title},
              {"device", t.device},
              {"step_start_ns", t.start.ns},
              {"step_end_ns", t.end.ns},
              {"memory_capacity_bytes", t.capacity.count},
              {"non_pytorch_breakdown", outside}}
             .dump()
      << ", \"traceEvents\": [";
  bool first = true;
  write_thread_names(out, first, t, title);
  event(out, first,
        fmt::format(R"({{"ph": "X", "pid": 0, "tid": 0, "cat": "user_annotation", "name": "ProfilerStep#0", "ts": {}, "dur": {}}})",
                    us(t.start), us(t.end - t.start)));
  for (const auto& m : t.marks)
    event(out, first, fmt::format(R"({{"ph": "i", "s": "t", "pid": 0, "tid": 0, "name": {}, "ts": {}}})", json(m.name).dump(), us(m.time)));
  for (const auto& h : t.host) {
    const char* cat = h.kind == HostInterval::Kind::Blocked ? "host_sync" : "cpu_op";
    event(out, first, fmt::format(R"({{"ph": "X", "pid": 0, "tid": 0, "cat": "{}", "name": {}, "ts": {}, "dur": {}}})", cat,
                                  json(host_label(t, h)).dump(), us(h.start), us(h.end - h.start)));
  }
  for (const auto& op : t.ops) {
    const json args = kernel_args(t, op);
    // A memcpy (memcpy_dtod: 0 CUDA kernels) is written as Kineto writes one, so `analyze` counts
    // it as it counts a real trace's (neither compute nor communication) and the round trip holds.
    event(out, first, fmt::format(R"({{"ph": "X", "pid": 0, "tid": {}, "cat": "{}", "name": {}, "ts": {}, "dur": {}, "args": {}}})",
                                  tid_of(op), op.memcpy() ? "gpu_memcpy" : "kernel", json(op.name).dump(), us(op.start),
                                  us(op.end - op.start), args.dump()));
  }
  for (const auto& m : t.memory) {
    json args = json::object();
    for (std::size_t c = 0; c < m.by_category.size(); ++c) args[to_string(static_cast<MemCategory>(c))] = m.by_category[c].count;
    event(out, first, fmt::format(R"x({{"ph": "C", "pid": 0, "name": "memory (bytes)", "ts": {}, "args": {}}})x", us(m.time), args.dump()));
    // torch.cuda.memory_reserved() on its own track (`analyze` reads it back as the reserved peak).
    event(out, first, fmt::format(R"x({{"ph": "C", "pid": 0, "name": "memory reserved (bytes)", "ts": {}, "args": {{"reserved": {}}}}})x",
                                  us(m.time), m.reserved.count));
  }
  write_flow_events(out, first, t, program);
  out << "\n]}\n";
}

}  // namespace stepsim
