// HTML reports: self-contained, with the timeline, memory curve, metric table, Pareto plot.
// What a browser builds from them is checked in test_html_chromium.cpp.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "sim/analysis/critical_path.hpp"
#include "sim/explore/sweep.hpp"
#include "sim/report/html_report.hpp"
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

