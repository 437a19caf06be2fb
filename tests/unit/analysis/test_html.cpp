// HTML reports: self-contained, with the timeline, memory curve, metric table, Pareto plot;
// rendered by headless Chromium when it is installed.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "sim/analysis/critical_path.hpp"
#include "sim/explore/sweep.hpp"
#include "sim/report/html_report.hpp"

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
  fs::path f = fs::temp_directory_path() / "stepsim_test_html_sweep.json";
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

// Width and height from a PNG's IHDR chunk (bytes 16..23, big-endian).
std::pair<int, int> png_size(const std::string& bytes) {
  if (bytes.size() < 24 || bytes.compare(1, 3, "PNG") != 0) return {0, 0};
  auto be = [&](std::size_t o) {
    return (static_cast<unsigned char>(bytes[o]) << 24) | (static_cast<unsigned char>(bytes[o + 1]) << 16) |
           (static_cast<unsigned char>(bytes[o + 2]) << 8) | static_cast<unsigned char>(bytes[o + 3]);
  };
  return {static_cast<int>(be(16)), static_cast<int>(be(20))};
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

TEST_CASE("headless Chromium renders the HTML reports to a non-trivial screenshot", "[html][chromium]") {
  const char* candidates[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"};
  std::string browser;
  for (const char* c : candidates)
    if (fs::exists(c)) browser = c;
  if (browser.empty()) {
    WARN("chromium is not installed: skipping the rendering check");
    return;
  }
  for (const auto& [name, html] : {std::pair<std::string, std::string>{"simulate", c1_html(true)}, {"sweep", sweep_html()}}) {
    fs::path dir = fs::temp_directory_path() / "stepsim_test_html";
    fs::create_directories(dir);
    fs::path page = dir / (name + ".html"), png = dir / (name + ".png");
    std::ofstream(page) << html;
    fs::remove(png);
    std::string cmd = browser + " --headless --no-sandbox --disable-gpu --hide-scrollbars --screenshot=" + png.string() +
                      " --window-size=1280,1400 file://" + page.string() + " >/dev/null 2>&1";
    int rc = std::system(cmd.c_str());
    INFO(cmd << " -> " << rc);
    REQUIRE(fs::exists(png));
    std::ifstream in(png, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto [w, h] = png_size(bytes);
    CHECK(w == 1280);
    CHECK(h == 1400);
    // A blank page compresses to a few KB; a page with the timeline, plot and tables does not.
    CHECK(bytes.size() > 30'000);
  }
}
