// HTML reports: self-contained, with the timeline, memory curve, metric table, Pareto plot.
// What a browser builds from them is checked in test_html_chromium.cpp.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "sim/analysis/critical_path.hpp"
#include "sim/analysis/throughput.hpp"
#include "sim/explore/sweep.hpp"
#include "sim/report/html_report.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "test_support.hpp"

using namespace stepsim;
namespace fs = std::filesystem;

namespace {

const std::string kSeed = std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/seed/";

std::string c1_html(bool with_explain) {
  Experiment e = load_experiment(kSeed + "c1-ddp-buckets.json");
  SimulationResult r = run_experiment(e);
  Explanation x = explain_experiment(e, r, true);
  std::ostringstream out;
  write_simulation_html(out, e, r, with_explain ? &x : nullptr);
  return out.str();
}

std::string sweep_html() {
  const test::TempDir dir;
  fs::path f = dir / "sweep.json";
  std::ofstream(f) << R"({"base": {"include": ")" << kSeed
                   << R"(c1-ddp-buckets.json"}, "axes": {"strategy.bucket_cap_bytes": [1000000, 3000000, 6000000, 12000000, 30000000],
                         "strategy.gradient_as_bucket_view": [false, true]}, "constraints": ["step_time_ms <= 70"]})";
  SweepSpec s = load_sweep(f);
  SweepOptions o;
  o.jobs = 2;
  SweepSummary sum = run_sweep(s, o, [](const SweepRow&) {});
  std::ostringstream out;
  write_sweep_html(out, "test sweep", sum);
  return out.str();
}

// No network: nothing is loaded from elsewhere (the SVG namespace URI is an identifier).
void check_self_contained(const std::string& html) {
  CHECK(html.find("<script src") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("@import") == std::string::npos);
  std::string stripped = html;
  for (std::size_t p; (p = stripped.find("http://www.w3.org/2000/svg")) != std::string::npos;) stripped.erase(p, 26);
  CHECK(stripped.find("http://") == std::string::npos);
  CHECK(stripped.find("https://") == std::string::npos);
}

}  // namespace

TEST_CASE("the simulate HTML report is self-contained and shows timeline, memory curve and metrics", "[html]") {
  std::string html = c1_html(false);
  check_self_contained(html);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("<svg") != std::string::npos);
  // Lanes: the host and the two streams DDP declares.
  CHECK(html.find(">host</text>") != std::string::npos);
  CHECK(html.find(">nccl</text>") != std::string::npos);
  // Collectives carry their unit; the 6 ms all-reduce boxes are wide enough for a label.
  CHECK(html.find(">AR ") != std::string::npos);
  CHECK(html.find("peak ") != std::string::npos);
  CHECK(html.find("56.000") != std::string::npos);  // step time in ms in the metric table
  CHECK(html.find("</html>") != std::string::npos);
}

TEST_CASE("the explain HTML report outlines the critical path and lists sensitivities", "[html]") {
  std::string html = c1_html(true);
  check_self_contained(html);
  CHECK(html.find("Bound by:") != std::string::npos);
  CHECK(html.find("stroke=\"#000\"") != std::string::npos);
  CHECK(html.find("2x link bandwidth") != std::string::npos);
}

TEST_CASE("the sweep HTML report has a Pareto plot and a sortable table", "[html]") {
  std::string html = sweep_html();
  check_self_contained(html);
  CHECK(html.find("<polyline") != std::string::npos);
  CHECK(html.find("class=\"sortable\"") != std::string::npos);
  CHECK(html.find("strategy.bucket_cap_bytes") != std::string::npos);
}


TEST_CASE("the sweep HTML report names its objective and draws a chart per axis with the memory cap", "[html][objective]") {
  const test::TempDir dir;
  fs::path f = dir / "sweep.json";
  // Two axes; the constraint on peak reserved memory is the cap drawn on the memory panels.
  std::ofstream(f) << R"({"base": {"include": ")" << kSeed
                   << R"(c1-ddp-buckets.json"}, "axes": {"strategy.bucket_cap_bytes": [3000000, 30000000],
                         "strategy.gradient_as_bucket_view": [false, true]}, "constraints": ["peak_reserved_gib <= 50"]})";
  SweepSpec s = load_sweep(f);
  SweepSummary sum = run_sweep(s, SweepOptions{}, [](const SweepRow&) {});
  REQUIRE(sum.memory_cap().count == 50LL * 1024 * 1024 * 1024);
  std::ostringstream out;
  write_sweep_html(out, "test sweep", sum);
  const std::string html = out.str();
  check_self_contained(html);
  CHECK_THAT(html, Catch::Contains("Objective: <b>step_time</b>"));
  CHECK_THAT(html, Catch::Contains("<h2>step time and memory per axis value</h2>"));
  std::size_t charts = 0, caps = 0;
  for (std::size_t p = 0; (p = html.find("class=\"axis\"", p)) != std::string::npos; ++p) ++charts;
  for (std::size_t p = 0; (p = html.find("class=\"cap\"", p)) != std::string::npos; ++p) ++caps;
  CHECK(charts == 2);  // one per axis
  CHECK(caps == 3);    // the cap on each memory panel and on the Pareto plot (issue 48 item 9)
  CHECK_THAT(html, Catch::Contains("cap 50.0 GiB (peak_reserved_gib &lt;= 50)"));
}

TEST_CASE("the simulate HTML report has a throughput table", "[html][objective]") {
  Experiment e = load_experiment(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/llama3-8b-ddp-8xh100.json");
  SimulationResult r = run_experiment(e);
  std::ostringstream out;
  write_simulation_html(out, e, r);
  const std::string html = out.str();
  const Throughput tp = throughput(e, r.metrics.overlap.step_time);
  REQUIRE(tp.mfu_pct > 0);
  CHECK_THAT(html, Catch::Contains("<td class=\"l\">tokens/s per GPU</td><td>" + fmt::format("{:.0f}", tp.tokens_per_s_per_gpu) + "</td>"));
  CHECK_THAT(html, Catch::Contains("<td class=\"l\">MFU</td><td>" + fmt::format("{:.1f} %", tp.mfu_pct) + "</td>"));
  CHECK_THAT(c1_html(false), !Catch::Contains(">MFU<"));  // a toy workload has no FLOPs
}
