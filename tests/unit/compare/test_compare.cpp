// `stepsim compare` on hand-made result pairs: errors, the tolerance gate and exit codes.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/report/compare.hpp"
#include "sim/core/error.hpp"
#include "test_support.hpp"

using namespace stepsim;
namespace fs = std::filesystem;

namespace {

nlohmann::json op(const std::string& name, const std::string& kind, std::int64_t start, std::int64_t end,
                  std::int64_t exposed = 0) {
  nlohmann::json o{{"name", name}, {"kind", kind}, {"stream", "default"}, {"phase", "backward"}, {"unit", ""},
                   {"issue_ns", 0}, {"start_ns", start}, {"end_ns", end}};
  if (kind == "collective") {
    o["collective"] = "all_reduce";
    o["exposed_ns"] = exposed;
  } else {
    o["class"] = "compute";
  }
  return o;
}

// A result with step time `step_ms` and peak memory `peak` bytes; one 10 ms backward kernel
// and an all-reduce of `ar_ms` named "AR bucket 0", 1 ms of it exposed.
nlohmann::json result(const std::string& mode, double step_ms, std::int64_t peak, double ar_ms = 4) {
  auto ns = [](double ms) { return static_cast<std::int64_t>(ms * 1e6); };
  nlohmann::json metrics{{"step_time_ns", ns(step_ms)},
                         {"compute_time_ns", ns(10)},
                         {"comm_time_ns", ns(ar_ms)},
                         {"overlapped_comm_ns", ns(ar_ms - 1)},
                         {"exposed_comm_ns", ns(1)},
                         {"overlap_pct", 100.0 * (ar_ms - 1) / ar_ms},
                         {"idle_ns", 0},
                         {"phases", {{"forward_ns", 0}, {"backward_ns", ns(step_ms)}, {"optimizer_ns", 0}}},
                         {"peak_memory_bytes", peak},
                         {"peak_memory_breakdown", {{"parameters", peak}}},
                         {"persistent_memory_bytes", peak}};
  return {{"schema", "stepsim.result/1"},
          {"mode", mode},
          {"device", mode == "live" ? "NVIDIA H100" : "simulated toy"},
          {"experiment", {{"strategy", {{"bucket_cap_bytes", 6000000}}}}},
          {"strategy", {{"framework", "ddp"}}},
          {"metrics", metrics},
          {"ops", {op("bwd", "kernel", 0, ns(10)), op("AR bucket 0", "collective", ns(7), ns(7 + ar_ms), ns(1))}}};
}

const CompareRow& row(const CompareReport& r, const std::string& section, const std::string& name) {
  for (const auto& x : r.rows)
    if (x.section == section && x.name == name) return x;
  FAIL("no row " << section << " / " << name);
  throw std::logic_error("unreachable");
}

// Writes `text` to `name` in `dir`; returns the path.
std::string write(const stepsim::test::TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir / name) << text;
  return dir.file(name);
}

int run_cli(const std::string& args) {
  int rc = std::system((std::string(STEPSIM_BINARY) + " compare " + args + " > /dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST_CASE("errors are the prediction relative to the measurement, whichever file comes first", "[compare]") {
  // Predicted 104 ms, measured 100 ms: +4 ms, +4 %.
  auto pred = result("simulate", 104, 1000);
  auto meas = result("live", 100, 1000);
  for (bool meas_first : {false, true}) {
    CompareReport r = meas_first ? compare_results(meas, "m", pred, "p", CompareOptions{})
                                 : compare_results(pred, "p", meas, "m", CompareOptions{});
    CHECK(r.reference_label == "m");
    const CompareRow& st = row(r, "metric", "step time");
    CHECK(st.abs_error == Approx(4e6));
    REQUIRE(st.rel_error_pct);
    CHECK(*st.rel_error_pct == Approx(4.0));
    CHECK(st.pass);
    CHECK(r.pass());
  }
}

TEST_CASE("step time outside the tolerance fails the gate; inside passes", "[compare]") {
  auto meas = result("live", 100, 1000);
  CompareOptions o;
  o.tolerance_pct = 5;
  CHECK(compare_results(result("simulate", 105, 1000), "p", meas, "m", o).step_time_pass);    // exactly 5 %
  CHECK_FALSE(compare_results(result("simulate", 106, 1000), "p", meas, "m", o).pass());      // 6 %
  CHECK_FALSE(compare_results(result("simulate", 94, 1000), "p", meas, "m", o).pass());       // -6 %
}

TEST_CASE("peak memory has its own tolerance", "[compare]") {
  auto meas = result("live", 100, 1000);
  CompareOptions o;
  o.tolerance_pct = 5;
  o.memory_tolerance_pct = 1;
  // 1020 vs 1000 B: +2 % > 1 %.
  CompareReport r = compare_results(result("simulate", 100, 1020), "p", meas, "m", o);
  CHECK(r.step_time_pass);
  CHECK_FALSE(r.memory_pass);
  CHECK(*row(r, "memory", "peak memory").rel_error_pct == Approx(2.0));
}

TEST_CASE("collectives are matched by name and compared by duration and exposed time", "[compare]") {
  // AR 5 ms predicted vs 4 ms measured: +25 %; exposed 1 ms on both: 0 %.
  CompareReport r = compare_results(result("simulate", 100, 1000, 5), "p", result("live", 100, 1000, 4), "m", CompareOptions{});
  CHECK(*row(r, "collective", "AR bucket 0").rel_error_pct == Approx(25.0));
  CHECK(*row(r, "collective", "AR bucket 0 exposed").rel_error_pct == Approx(0.0));
  CHECK(*row(r, "collective kind", "all_reduce").rel_error_pct == Approx(25.0));
  CHECK(*row(r, "kernel class", "compute").rel_error_pct == Approx(0.0));
  CHECK(r.only_in_reference.empty());
}

TEST_CASE("unmatched collectives are listed on their side", "[compare]") {
  auto a = result("simulate", 100, 1000);
  auto b = result("simulate", 100, 1000);
  b["ops"][1]["name"] = "AR bucket 1";
  CompareReport r = compare_results(a, "a", b, "b", CompareOptions{});
  CHECK(r.only_in_reference == std::vector<std::string>{"AR bucket 0"});
  CHECK(r.only_in_subject == std::vector<std::string>{"AR bucket 1"});
}

TEST_CASE("two simulations compare as a change from the first, with the config differences", "[compare]") {
  auto a = result("simulate", 100, 1000);
  auto b = result("simulate", 90, 1000);
  b["experiment"]["strategy"]["bucket_cap_bytes"] = 1000000;
  CompareReport r = compare_results(a, "before.json", b, "after.json", CompareOptions{});
  CHECK(r.reference_label == "before.json");
  CHECK(*row(r, "metric", "step time").rel_error_pct == Approx(-10.0));
  REQUIRE(r.config_changes.size() == 1);
  CHECK(r.config_changes[0].path == "/experiment/strategy/bucket_cap_bytes");
  CHECK(r.config_changes[0].subject == 1000000);
}

TEST_CASE("a zero reference gives no relative error unless both are zero", "[compare]") {
  auto a = result("simulate", 100, 0);
  CompareReport same = compare_results(a, "a", result("simulate", 100, 0), "b", CompareOptions{});
  CHECK(same.memory_pass);
  CompareReport grew = compare_results(a, "a", result("simulate", 100, 10), "b", CompareOptions{});
  CHECK_FALSE(row(grew, "memory", "peak memory").rel_error_pct.has_value());
  CHECK_FALSE(grew.memory_pass);
}

// Catches: a profiler trace recorded without profile_memory (the modded-nanogpt H100 traces)
// failing compare's memory gate, and exiting 3, on its analysed peak of 0 bytes.
TEST_CASE("a trace without memory events has no memory rows and no memory gate", "[compare]") {
  const nlohmann::json predicted = result("simulate", 100, 1000);
  nlohmann::json analyzed{{"schema", "stepsim.analyze/1"}, {"mean", {{"metrics", result("live", 100, 0)["metrics"]}}},
                          {"traces", {{{"device", "NVIDIA H100 80GB HBM3"}}}}};
  analyzed["mean"]["metrics"]["peak_memory_breakdown"] = nlohmann::json::object();
  const CompareReport r = compare_results(predicted, "pred.json", analyzed, "trace.json", CompareOptions{});
  CHECK(r.reference_mode == "analyze");
  CHECK_FALSE(r.memory_measured);
  CHECK(r.memory_pass);
  CHECK(r.pass());
  for (const auto& x : r.rows) CHECK(x.section != "memory");
  CHECK(compare_to_json(r).at("memory_measured") == false);
  std::ostringstream text;
  write_compare_table(text, r);
  CHECK(text.str().find("peak memory not measured") != std::string::npos);
  // A trace with memory events is gated as before; so is a live run, even at 0 bytes.
  analyzed["mean"]["metrics"]["peak_memory_bytes"] = 2000;
  const CompareReport with_memory = compare_results(predicted, "pred.json", analyzed, "trace.json", CompareOptions{});
  CHECK(with_memory.memory_measured);
  CHECK_FALSE(with_memory.memory_pass);
  const CompareReport live = compare_results(predicted, "pred.json", result("live", 100, 0), "live.json", CompareOptions{});
  CHECK(live.memory_measured);
  CHECK_FALSE(live.memory_pass);
}

TEST_CASE("documents that are not stepsim results are input errors", "[compare]") {
  auto good = result("live", 100, 1000);
  CHECK_THROWS_AS(compare_results(nlohmann::json::array(), "x", good, "m", CompareOptions{}), InputError);
  auto bad = good;
  bad["schema"] = "other/1";
  CHECK_THROWS_WITH(compare_results(bad, "x.json", good, "m", CompareOptions{}), Catch::Contains("x.json: /schema"));
  bad = good;
  bad["metrics"].erase("step_time_ns");
  CHECK_THROWS_WITH(compare_results(bad, "x.json", good, "m", CompareOptions{}), Catch::Contains("step_time_ns"));
}

TEST_CASE("tolerances are percentages with or without a percent sign", "[compare]") {
  CHECK(parse_tolerance_pct("5%", "--tolerance") == 5.0);
  CHECK(parse_tolerance_pct("2.5", "--tolerance") == 2.5);
  CHECK_THROWS_AS(parse_tolerance_pct("five", "--tolerance"), InputError);
  CHECK_THROWS_AS(parse_tolerance_pct("-1%", "--tolerance"), InputError);
  CHECK_THROWS_AS(parse_tolerance_pct("%", "--tolerance"), InputError);
}

TEST_CASE("compare exits 0 inside the tolerance, 3 outside it and 2 on bad input", "[compare]") {
  const stepsim::test::TempDir t;
  std::string meas = write(t, "meas.json", result("live", 100, 1000).dump());
  std::string close = write(t, "close.json", result("simulate", 103, 1000).dump());
  std::string far = write(t, "far.json", result("simulate", 110, 1000).dump());
  std::string mem = write(t, "mem.json", result("simulate", 100, 1200).dump());
  std::string junk = write(t, "junk.json", "{not json");
  CHECK(run_cli(close + " " + meas) == 0);                      // +3 % within the default 5 %
  CHECK(run_cli(close + " " + meas + " --tolerance 2%") == 3);  // +3 % outside 2 %
  CHECK(run_cli(far + " " + meas) == 3);                        // +10 %
  CHECK(run_cli(far + " " + meas + " --tolerance 15%") == 0);
  CHECK(run_cli(mem + " " + meas) == 3);                        // memory +20 %
  CHECK(run_cli(mem + " " + meas + " --memory-tolerance 25%") == 0);
  CHECK(run_cli(close + " " + meas + " --json") == 0);
  CHECK(run_cli(junk + " " + meas) == 2);
  CHECK(run_cli(close + " " + (t / "missing.json").string()) == 2);
  CHECK(run_cli(close + " " + meas + " --tolerance lots") == 2);
  CHECK(run_cli(close) == 2);
}

TEST_CASE("compare takes analyze --json of a real trace as the measured side", "[compare][cli]") {
  // The li-plus ZeRO-1 trace against the shipped example's prediction: the trace is the
  // reference whichever order the files are given in, and the step-time gate applies.
  const std::string bin = STEPSIM_BINARY, src = STEPSIM_SOURCE_DIR, data = STEPSIM_TEST_DATA;
  const stepsim::test::TempDir dir;
  const std::string predicted = (dir / "predicted.json").string(), measured = (dir / "measured.json").string();
  std::string out;
  REQUIRE(stepsim::test::run_capture(bin + " simulate " + src + "/configs/examples/opt-1.3b-zero1-8xa800.json --json > " + predicted, out) == 0);
  REQUIRE(stepsim::test::run_capture(bin + " analyze " + data +
                                         "/traces/li-plus_playground/zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz"
                                         " --json > " + measured, out) == 0);
  int rc = stepsim::test::run_capture(bin + " compare " + predicted + " " + measured + " --tolerance 90% --json", out);
  CHECK(rc == 0);
  nlohmann::json j = nlohmann::json::parse(out);
  CHECK(j["reference"]["mode"] == "analyze");
  CHECK(j["reference"]["file"] == measured);
  CHECK(j["reference"]["device"] == "NVIDIA A800-SXM4-80GB");
  // Outside a 1 % tolerance (the prediction is 3-4 % fast today): exit 3.
  CHECK(stepsim::test::run_capture(bin + " compare " + measured + " " + predicted + " --tolerance 1%", out) == 3);
  // A JSON file of neither kind names both accepted schemas.
  std::ofstream(dir / "other.json") << R"({"schema": "something/1"})";
  CHECK(stepsim::test::run_capture(bin + " compare " + predicted + " " + (dir / "other.json").string(), out) == 2);
  CHECK_THAT(out, Catch::Contains("stepsim.analyze/1"));
}

TEST_CASE("throughput rows compare tokens/s and MFU when one side gives its tokens per step", "[compare][objective]") {
  // Predicted 100 ms for 2 x 1024 x 4 x 8 = 65,536 tokens per step (655,360 tokens/s) at
  // 40 % MFU; measured 125 ms for the same work: 524,288 tokens/s, MFU 40 x 100 / 125 = 32 %.
  auto pred = result("simulate", 100, 1000);
  pred["summary"] = {{"micro_batch", 2}, {"seq_len", 1024}, {"grad_accum", 4}, {"world_size", 8}, {"mfu_pct", 40.0}};
  auto meas = result("live", 125, 1000);  // no summary: an analyze-like measurement
  CompareReport r = compare_results(pred, "p", meas, "m", CompareOptions{});
  const CompareRow& t = row(r, "throughput", "tokens/s");
  CHECK(t.subject == Approx(655360));
  CHECK(t.reference == Approx(524288));
  REQUIRE(t.rel_error_pct);
  CHECK(*t.rel_error_pct == Approx(25.0));  // (655,360 - 524,288) / 524,288
  CHECK_FALSE(t.tolerance_pct);             // reported, not gated
  const CompareRow& m = row(r, "throughput", "MFU");
  CHECK(m.subject == Approx(40.0));
  CHECK(m.reference == Approx(32.0));
  // Neither side with tokens per step: no throughput rows.
  CompareReport none = compare_results(result("simulate", 100, 1000), "p", meas, "m", CompareOptions{});
  for (const auto& x : none.rows) CHECK(x.section != "throughput");
  // A summary with a nonsense batch is named.
  pred["summary"]["seq_len"] = -1;
  CHECK_THROWS_WITH(compare_results(pred, "p", meas, "m", CompareOptions{}), Catch::Contains("p: /summary/seq_len: -1: expected a positive number"));
}

TEST_CASE("Against analyze --json, kernel classes and collective kinds are its per-step means; nothing it lacks shows as 0",
          "[compare]") {
  // Two steps of one trace: gemm 8 and 12 ms (mean 10 ms, 3 kernels each), communication and
  // idle (not kernel classes), an all_reduce table total of 8 ms over the two steps (4 ms per
  // step). The predicted side's one kernel has no "class": it counts as "compute".
  auto ns = [](double ms) { return static_cast<std::int64_t>(ms * 1e6); };
  nlohmann::json step = {{"classes", {{"gemm", {{"kernels", 3}, {"time_ns", ns(8)}}},
                                      {"communication", {{"kernels", 1}, {"time_ns", ns(4)}}},
                                      {"idle", {{"kernels", 0}, {"time_ns", ns(1)}}}}}};
  nlohmann::json step2 = step;
  step2["classes"]["gemm"]["time_ns"] = ns(12);
  nlohmann::json measured = {
      {"schema", "stepsim.analyze/1"},
      {"mean", {{"metrics", result("live", 20, 1000)["metrics"]}}},
      {"traces", {{{"device", "NVIDIA A800"}, {"steps", {step, step2}},
                   {"collectives", {{{"kind", "all_reduce"}, {"total_ns", ns(8)}, {"count", 2}}}}}}}};
  measured["mean"]["metrics"].erase("peak_memory_breakdown");
  auto pred = result("simulate", 20, 1000);
  pred["ops"][0]["class"] = "gemm";
  CompareReport r = compare_results(pred, "p", measured, "m", CompareOptions{});
  CHECK(row(r, "kernel class", "gemm").reference == Approx(1e7));
  CHECK(row(r, "kernel class", "gemm").subject == Approx(1e7));
  CHECK(row(r, "kernel count", "gemm").reference == Approx(3));
  CHECK(row(r, "collective kind", "all_reduce").reference == Approx(4e6));
  for (const auto& x : r.rows) {
    INFO(x.section << " / " << x.name);
    if (x.section == "metric") continue;  // the step metrics (idle among them)
    CHECK(x.name != "communication");
    CHECK(x.name != "idle");
    CHECK(x.name != "all_reduce exposed");  // the trace's table has no exposed time per kind
    CHECK(x.name.rfind("peak: ", 0) != 0);  // Kineto memory has no categories
  }
  CHECK(r.only_in_subject.empty());  // no op names in an analyze document to match against
  // A negative class time is an input error naming its path.
  measured["traces"][0]["steps"][1]["classes"]["gemm"]["time_ns"] = -1;
  CHECK_THROWS_WITH(compare_results(pred, "p", measured, "m", CompareOptions{}),
                    Catch::Contains("m: /traces/0/steps/1/classes/gemm/time_ns: -1: expected a number >= 0"));
}

// Catches: the slowest-rank wait lost on the way through JSON, or set beside the 0 of a side that
// cannot measure it (one rank's trace) as if it were a measurement.
TEST_CASE("the slowest-rank wait is compared where both sides have it", "[compare]") {
  auto pred = result("simulate", 104, 1000);
  auto meas = result("live", 100, 1000);
  pred["metrics"]["rank_wait_ns"] = 3'000'000;
  // One side without it: no row.
  for (const auto& x : compare_results(pred, "p", meas, "m", CompareOptions{}).rows) CHECK(x.name != "slowest-rank wait");
  // Both: the prediction against the measurement, 3 ms against 2 ms.
  meas["metrics"]["rank_wait_ns"] = 2'000'000;
  const CompareReport r = compare_results(pred, "p", meas, "m", CompareOptions{});
  const CompareRow& w = row(r, "metric", "slowest-rank wait");
  CHECK(w.reference == Approx(2e6));
  CHECK(w.subject == Approx(3e6));
  REQUIRE(w.rel_error_pct);
  CHECK(*w.rel_error_pct == Approx(50.0));
}
