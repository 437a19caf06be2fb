// The trace of `simulate --trace` is valid Chrome trace JSON with a host track, one track per
// stream, a memory counter, and op durations equal to the timeline's.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/analysis/run.hpp"
#include "sim/report/chrome_trace.hpp"
#include "sim/strategies/load_experiment.hpp"

using namespace stepsim;

TEST_CASE("The Chrome trace parses back with a host track, one track per stream, a memory counter and exact durations",
          "[report][trace]") {
  Experiment e = load_experiment(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/seed/c1-ddp-buckets.json");
  SimulationResult r = run_experiment(e);
  std::ostringstream out;
  write_chrome_trace(out, r.timeline, "c1");
  auto j = nlohmann::json::parse(out.str());
  REQUIRE(j.contains("traceEvents"));
  std::map<int, std::string> thread_names;
  int counters = 0, reserved_counters = 0, steps = 0;
  std::map<std::string, double> dur_us;
  for (const auto& ev : j["traceEvents"]) {
    if (ev["ph"] == "M" && ev["name"] == "thread_name") thread_names[ev["tid"].get<int>()] = ev["args"]["name"];
    if (ev["ph"] == "C" && ev["name"] == "memory (bytes)") ++counters;
    if (ev["ph"] == "C" && ev["name"] == "memory reserved (bytes)") ++reserved_counters;
    if (ev["ph"] == "X" && ev["name"] == "ProfilerStep#0") {
      ++steps;
      CHECK(ev["dur"].get<double>() == Approx(56000.0));  // 56 ms in microseconds
    }
    if (ev["ph"] == "X" && ev.value("cat", "") == "kernel") dur_us[ev["name"]] = ev["dur"].get<double>();
  }
  CHECK(thread_names[0] == "host thread");
  CHECK(thread_names.size() == 1 + r.timeline.streams.size());  // default + nccl streams
  // One allocated (by category) and one reserved sample per memory change.
  CHECK(counters == static_cast<int>(r.timeline.memory.size()));
  CHECK(reserved_counters == counters);
  CHECK(steps == 1);
  CHECK(dur_us["AR bucket 0"] == Approx(6000.0));   // 6 ms all-reduce of layers 9, 8
  CHECK(dur_us["bwd layer.9"] == Approx(5000.0));
}

namespace {

struct Slice {
  int tid = 0;
  double ts = 0, end = 0;
  std::string name, cat;
};

// The innermost X slice on `tid` that encloses `ts` (what Perfetto binds a flow event to).
const Slice* enclosing(const std::vector<Slice>& slices, int tid, double ts) {
  const Slice* best = nullptr;
  for (const auto& s : slices)
    if (s.tid == tid && s.ts <= ts && ts < s.end && (!best || s.end - s.ts < best->end - best->ts)) best = &s;
  return best;
}

}  // namespace

TEST_CASE("The Chrome trace has flow arrows from each host issue to its op and from each event record to the op behind its wait",
          "[report][trace]") {
  // C6 (FSDP1 on 2 x 8 H100, 1 us launches): every op has a host issue interval, and the
  // all-gather stream and the compute stream hand over through events.
  Experiment e = load_experiment(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/llama3-8b-fsdp1-2x8xh100-slow-net.json");
  SimulationResult r = run_experiment(e);
  std::ostringstream out;
  write_chrome_trace(out, r.timeline, "c6", &r.program);
  auto j = nlohmann::json::parse(out.str());
  std::vector<Slice> slices;
  std::map<int, nlohmann::json> starts, ends;
  for (const auto& ev : j["traceEvents"]) {
    if (ev["ph"] == "X")
      slices.push_back(Slice{ev["tid"].get<int>(), ev["ts"].get<double>(), ev["ts"].get<double>() + ev["dur"].get<double>(), ev["name"],
                             ev.value("cat", "")});
    if (ev["ph"] == "s") REQUIRE(starts.emplace(ev["id"].get<int>(), ev).second);  // ids are unique
    if (ev["ph"] == "f") REQUIRE(ends.emplace(ev["id"].get<int>(), ev).second);
  }
  REQUIRE(starts.size() == ends.size());
  std::map<std::string, int> per_cat;
  for (const auto& [id, s] : starts) {
    INFO("flow " << id << " " << s.dump());
    REQUIRE(ends.count(id));
    const auto& f = ends[id];
    CHECK(f["bp"] == "e");          // binds to the enclosing slice, not the next one
    CHECK(f["cat"] == s["cat"]);    // Perfetto pairs v1 flow events by (id, cat, name)
    CHECK(f["name"] == s["name"]);
    const Slice* from = enclosing(slices, s["tid"].get<int>(), s["ts"].get<double>());
    const Slice* to = enclosing(slices, f["tid"].get<int>(), f["ts"].get<double>());
    REQUIRE(from != nullptr);
    REQUIRE(to != nullptr);
    const std::string cat = s["cat"];
    ++per_cat[cat];
    if (cat == "issue") {
      // Host thread -> the kernel or collective that interval launched ("launch X" / "issue X").
      CHECK(from->tid == 0);
      CHECK(to->cat == "kernel");
      CHECK((from->name == "launch " + to->name || from->name == "issue " + to->name));
      CHECK(from->end <= to->ts + 1e-9);  // an op starts no earlier than its issue ends
    } else if (cat == "event") {
      // One stream's op -> another stream's op that waited for it: it cannot start before the
      // recorded op ends.
      CHECK(from->cat == "kernel");
      CHECK(to->cat == "kernel");
      CHECK(from->tid != to->tid);
      CHECK(from->end <= to->ts + 1e-9);
    } else {
      CHECK(cat == "host_sync");
      CHECK(to->tid == 0);
      CHECK(to->cat == "host_sync");
    }
  }
  // Every op with a length has its issue arrow (1 us launch and collective costs here).
  int ops_with_length = 0;
  for (const auto& op : r.timeline.ops) ops_with_length += (op.end - op.start).ns >= 2;
  CHECK(per_cat["issue"] == ops_with_length);
  CHECK(per_cat["event"] > 0);
  // Without the Program the trace still has the issue arrows, not the event ones.
  std::ostringstream bare;
  write_chrome_trace(bare, r.timeline, "c6");
  int bare_events = 0;
  const nlohmann::json bare_trace = nlohmann::json::parse(bare.str());  // a range-for over a temporary's member dangles
  for (const auto& ev : bare_trace["traceEvents"])
    bare_events += ev["ph"] == "s" && ev["cat"] == "event";
  CHECK(bare_events == 0);
}
