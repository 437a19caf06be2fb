// Round trip: `analyze` of the Chrome trace that `simulate --trace` writes reproduces the
// simulator's own metrics (sim/analysis/metrics compute_metrics on the Timeline) exactly.

#include <catch2/catch.hpp>
#include <filesystem>
#include <sstream>

#include "trace/trace_analysis.hpp"
#include "sim/analysis/run.hpp"
#include "sim/report/chrome_trace.hpp"
#include "sim/strategies/load_experiment.hpp"

using namespace stepsim;

namespace {

// The source tree (not __FILE__, which is relative to the build directory, while ctest runs
// from the source root).
const std::filesystem::path kRoot = STEPSIM_SOURCE_DIR;

struct RoundTrip {
  SimulationResult sim;
  trace::KinetoTrace trace;
  trace::TraceAnalysis analysis;
};

RoundTrip round_trip(const std::string& example) {
  RoundTrip rt;
  rt.sim = run_experiment(load_experiment(kRoot / "configs/examples" / example));
  std::ostringstream os;
  write_chrome_trace(os, rt.sim.timeline, example, &rt.sim.program);  // with flow arrows, as simulate --trace
  rt.trace = trace::read_kineto_trace_text(os.str(), example);
  rt.analysis = trace::analyze_trace(rt.trace, trace::AnalyzeOptions{});
  return rt;
}

// The writer does not record the device capacity (see the report), so capacity and `fits` are
// compared only when the trace carries it.
nlohmann::json comparable(nlohmann::json m, bool has_capacity) {
  m.erase("rank_wait_ns");  // the waits for the slowest rank are inside the collectives' spans in a trace
  if (!has_capacity) {
    m.erase("memory_capacity_bytes");
    m.erase("fits");
    m.erase("fits_allocated");
  }
  return m;
}

}  // namespace

TEST_CASE("analyze of simulate's trace reproduces simulate's metrics exactly", "[trace][roundtrip]") {
  for (const char* example : {"seed/c1-ddp-buckets.json", "llama3-8b-ddp-8xh100.json", "opt-1.3b-zero1-8xa800.json",
                              "opt-1.3b-zero2-8xa800.json", "opt-1.3b-zero3-8xa800.json"}) {
    INFO(example);
    RoundTrip rt = round_trip(example);
    REQUIRE(rt.trace.stepsim_trace);
    REQUIRE(rt.analysis.steps.size() == 1);
    bool cap = rt.trace.stepsim_capacity.count > 0;
    auto measured = comparable(metrics_to_json(rt.analysis.steps[0].metrics), cap);
    auto simulated = comparable(metrics_to_json(rt.sim.metrics), cap);
    CHECK(measured.dump() == simulated.dump());
    // The mean of one step is that step.
    CHECK(comparable(metrics_to_json(rt.analysis.mean), cap).dump() == simulated.dump());
  }
}

TEST_CASE("analyze of simulate's trace sees every simulated collective with its kind and bytes", "[trace][roundtrip]") {
  RoundTrip rt = round_trip("opt-1.3b-zero2-8xa800.json");
  std::vector<const TimelineOp*> sim_colls;
  for (const auto& op : rt.sim.timeline.ops)
    if (op.kind == TimelineOp::Kind::Collective) sim_colls.push_back(&op);
  std::stable_sort(sim_colls.begin(), sim_colls.end(),
                   [](const TimelineOp* a, const TimelineOp* b) { return a->start < b->start; });
  REQUIRE(rt.analysis.collectives.size() == sim_colls.size());
  REQUIRE(!sim_colls.empty());
  for (std::size_t i = 0; i < sim_colls.size(); ++i) {
    const auto& r = rt.analysis.collectives[i];
    CHECK(r.start == sim_colls[i]->start);
    CHECK(r.duration == sim_colls[i]->duration());
    CHECK(r.bytes == sim_colls[i]->bytes);
    auto kind = trace::to_collective_kind(r.kind);
    REQUIRE(kind.has_value());
    CHECK(*kind == sim_colls[i]->collective);
    CHECK(r.group_size == rt.sim.timeline.comms.at(sim_colls[i]->comm.value().index()).ranks);
    CHECK_FALSE(r.group_assumed);
  }
}
