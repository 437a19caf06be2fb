#include "sim/report/chrome_trace.hpp"

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

void write_chrome_trace(std::ostream& out, const Timeline& t, const std::string& title) {
  using nlohmann::json;
  out << "{\"displayTimeUnit\": \"ns\", \"stepsim\": "
      << json{{"schema", kTraceSchema}, {"title", title}, {"device", t.device}, {"step_start_ns", t.start.ns},
              {"step_end_ns", t.end.ns}, {"memory_capacity_bytes", t.capacity.count}}
             .dump()
      << ", \"traceEvents\": [";
  bool first = true;
  event(out, first, json{{"ph", "M"}, {"pid", 0}, {"name", "process_name"}, {"args", {{"name", title}}}}.dump());
  event(out, first, json{{"ph", "M"}, {"pid", 0}, {"tid", 0}, {"name", "thread_name"}, {"args", {{"name", "host thread"}}}}.dump());
  for (std::size_t s = 0; s < t.streams.size(); ++s) {
    event(out, first, json{{"ph", "M"}, {"pid", 0}, {"tid", 1 + s}, {"name", "thread_name"},
                           {"args", {{"name", fmt::format("stream {} ({})", s, t.streams[s].name)}}}}
                          .dump());
    event(out, first, json{{"ph", "M"}, {"pid", 0}, {"tid", 1 + s}, {"name", "thread_sort_index"}, {"args", {{"sort_index", 1 + s}}}}.dump());
  }
  event(out, first,
        fmt::format(R"({{"ph": "X", "pid": 0, "tid": 0, "cat": "user_annotation", "name": "ProfilerStep#0", "ts": {}, "dur": {}}})",
                    us(t.start), us(t.end - t.start)));
  for (const auto& m : t.marks)
    event(out, first, fmt::format(R"({{"ph": "i", "s": "t", "pid": 0, "tid": 0, "name": {}, "ts": {}}})", json(m.name).dump(), us(m.time)));
  for (const auto& h : t.host) {
    const char* cat = h.kind == HostInterval::Kind::Blocked ? "host_sync" : "cpu_op";
    event(out, first, fmt::format(R"({{"ph": "X", "pid": 0, "tid": 0, "cat": "{}", "name": {}, "ts": {}, "dur": {}}})", cat,
                                  json(h.name).dump(), us(h.start), us(h.end - h.start)));
  }
  for (const auto& op : t.ops) {
    json args{{"stream", op.stream.index()}, {"phase", to_string(op.phase)}, {"unit", op.unit}, {"issue_ns", op.issue.ns},
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
    event(out, first, fmt::format(R"({{"ph": "X", "pid": 0, "tid": {}, "cat": "kernel", "name": {}, "ts": {}, "dur": {}, "args": {}}})",
                                  1 + op.stream.index(), json(op.name).dump(), us(op.start), us(op.end - op.start), args.dump()));
  }
  for (const auto& m : t.memory) {
    json args = json::object();
    for (std::size_t c = 0; c < m.by_category.size(); ++c) args[to_string(static_cast<MemCategory>(c))] = m.by_category[c].count;
    event(out, first, fmt::format(R"x({{"ph": "C", "pid": 0, "name": "memory (bytes)", "ts": {}, "args": {}}})x", us(m.time), args.dump()));
    // torch.cuda.memory_reserved() on its own track (`analyze` reads it back as the reserved peak).
    event(out, first, fmt::format(R"x({{"ph": "C", "pid": 0, "name": "memory reserved (bytes)", "ts": {}, "args": {{"reserved": {}}}}})x",
                                  us(m.time), m.reserved.count));
  }
  out << "\n]}\n";
}

}  // namespace stepsim
