// sweep and tune on the command line: --objective and --constraint (issue 17).
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

using stepsim::test::run_capture;

namespace {
const std::string kBin = STEPSIM_BINARY;
const std::string kSrc = STEPSIM_SOURCE_DIR;

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}
}  // namespace

TEST_CASE("a bad --objective is exit 2 with one line naming the option, the value and the allowed values", "[cli][sweep]") {
  const std::string expected = "--objective fastest: expected one of step_time, tokens_per_s, mfu";
  for (const std::string cmd : {" sweep " + kSrc + "/configs/sweeps/llama8b-ddp-buckets.json --no-progress --objective fastest",
                                " tune " + kSrc + "/configs/examples/seed/c1-ddp-buckets.json --objective fastest"}) {
    INFO(cmd);
    std::string out;
    CHECK(run_capture(kBin + cmd, out) == 2);
    CHECK_THAT(out, Catch::Contains(expected));
    CHECK(count_lines(out) == 1);
  }
}

TEST_CASE("a sweep file's objective must be one of the three", "[cli][sweep]") {
  const stepsim::test::TempDir dir("sweep-cli");
  const auto f = dir / "bad-objective.json";
  std::ofstream(f) << R"({"base": {"include": ")" << kSrc << R"(/configs/examples/seed/c1-ddp-buckets.json"},
                          "axes": {"strategy.bucket_cap_bytes": [3000000]}, "objective": "speed"})";
  std::string out;
  CHECK(run_capture(kBin + " sweep " + f.string() + " --no-progress", out) == 2);
  CHECK_THAT(out, Catch::Contains("/objective") && Catch::Contains("speed") && Catch::Contains("tokens_per_s"));
  CHECK(count_lines(out) == 1);
}

TEST_CASE("sweep says which objective it used and --constraint adds a constraint", "[cli][sweep]") {
  // C1 (toy, 8 ranks): two bucket caps do the same work per step, so step time is the default.
  const stepsim::test::TempDir dir("sweep-cli");
  const auto f = dir / "c1.json";
  std::ofstream(f) << R"({"base": {"include": ")" << kSrc << R"(/configs/examples/seed/c1-ddp-buckets.json"},
                          "axes": {"strategy.bucket_cap_bytes": [3000000, 30000000]}})";
  std::string out;
  REQUIRE(run_capture(kBin + " sweep " + f.string() + " --no-progress", out) == 0);
  CHECK_THAT(out, Catch::Contains("objective: step_time (the default when every point does the same work"));
  CHECK_THAT(out, Catch::Contains("2 satisfy the constraints"));
  // 3 MB buckets: 53 ms; 30 MB: 74 ms (seed case C1); the constraint keeps the first only.
  REQUIRE(run_capture(kBin + " sweep " + f.string() + " --no-progress --constraint 'step_time_ms <= 60'", out) == 0);
  CHECK_THAT(out, Catch::Contains("1 satisfy the constraints"));
  CHECK(run_capture(kBin + " sweep " + f.string() + " --no-progress --constraint 'speed <= 60'", out) == 2);
  CHECK_THAT(out, Catch::Contains("--constraint"));
  REQUIRE(run_capture(kBin + " sweep " + f.string() + " --no-progress --objective tokens_per_s", out) == 0);
  CHECK_THAT(out, Catch::Contains("objective: tokens_per_s (as requested)"));
}

TEST_CASE("sweep, tune and the HTML report say where collective costs are extrapolated", "[cli][sweep][scale]") {
  // Issue 46: a prediction outside the profile's fitted group sizes is flagged in every output,
  // not only in simulate --json. The H100 profile was fitted on 1-20 ranks over 1-10 nodes: the
  // DDP example on 1 node is inside, on 16 nodes (128 ranks) outside.
  const stepsim::test::TempDir dir("sweep-extrapolated");
  const auto sweep = dir / "nodes.json";
  std::ofstream(sweep) << R"({"base": {"include": ")" << kSrc << R"(/configs/examples/llama3-8b-ddp-8xh100.json"},
                              "axes": {"cluster.nodes": [1, 16]}})";
  const auto csv = dir / "nodes.csv", json = dir / "nodes.sweep.json";
  std::string out;
  REQUIRE(run_capture(kBin + " sweep " + sweep.string() + " --no-progress --out " + csv.string() + " --json-out " +
                          json.string(), out) == 0);
  std::ifstream in(csv);
  std::string header, one, sixteen;
  std::getline(in, header);
  std::getline(in, one);
  std::getline(in, sixteen);
  auto column = [&](const std::string& row, const std::string& name) {
    auto fields = [](const std::string& s) {
      std::vector<std::string> f(1);
      for (char c : s) {
        if (c == ',') f.emplace_back();
        else f.back().push_back(c);
      }
      return f;
    };
    auto h = fields(header), r = fields(row);
    auto it = std::find(h.begin(), h.end(), name);
    REQUIRE(it != h.end());
    return r.at(static_cast<std::size_t>(it - h.begin()));
  };
  CHECK(column(one, "extrapolated_comms") == "0");
  CHECK(column(sixteen, "extrapolated_comms") != "0");
  std::ifstream js(json);
  const auto doc = nlohmann::json::parse(js);
  CHECK_FALSE(doc["rows"][0].contains("collective_extrapolations"));
  REQUIRE(doc["rows"][1].contains("collective_extrapolations"));
  CHECK_THAT(doc["rows"][1]["collective_extrapolations"][0].get<std::string>(), Catch::Contains("128 ranks on 16 node(s)"));

  const auto html = dir / "sim.html";
  REQUIRE(run_capture(kBin + " simulate " + kSrc + "/configs/examples/llama3-8b-ddp-8xh100.json --set cluster.nodes=16 --report " +
                          html.string(), out) == 0);
  std::ifstream h(html);
  const std::string page((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
  CHECK_THAT(page, Catch::Contains("collective costs extrapolated") && Catch::Contains("128 ranks on 16 node(s)"));
  REQUIRE(run_capture(kBin + " simulate " + kSrc + "/configs/examples/llama3-8b-ddp-8xh100.json --report " + html.string(), out) == 0);
  std::ifstream h1(html);
  const std::string page1((std::istreambuf_iterator<char>(h1)), std::istreambuf_iterator<char>());
  CHECK_THAT(page1, !Catch::Contains("collective costs extrapolated"));
}
