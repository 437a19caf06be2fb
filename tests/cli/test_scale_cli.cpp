// stepsim scale: the weak-scaling curve (issue 46, deliverable 4).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

using stepsim::test::run_capture;

namespace {
const std::string kBin = STEPSIM_BINARY;
const std::string kSrc = STEPSIM_SOURCE_DIR;

nlohmann::json run_json(const std::string& args) {
  std::string out;
  REQUIRE(run_capture(kBin + " " + args + " 2>/dev/null", out) == 0);
  return nlohmann::json::parse(out);
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::int64_t sum_parts(const nlohmann::json& parts) {
  std::int64_t sum = parts["compute_ns"].get<std::int64_t>() + parts["optimizer_ns"].get<std::int64_t>() +
                     parts["idle_ns"].get<std::int64_t>() + parts["rank_wait_exposed_ns"].get<std::int64_t>();
  for (const auto& [label, ns] : parts["exposed_ns"].items()) sum += ns.get<std::int64_t>();
  return sum;
}

// Every point of `scale` against `simulate --set cluster.nodes=K --json` of the same experiment.
void check_points_are_simulate(const std::string& experiment, const std::string& counts, std::size_t expected_points) {
  const nlohmann::json s = run_json("scale " + experiment + " " + counts + " --json");
  REQUIRE(s["schema"] == "stepsim.scale/1");
  const auto& points = s["points"];
  REQUIRE(points.size() == expected_points);
  const std::int64_t first_step = points[0]["step_time_ns"].get<std::int64_t>();
  const double first_tps = points[0]["tokens_per_s_per_gpu"].get<double>();
  const nlohmann::json first_parts = points[0]["parts"];
  for (const auto& p : points) {
    const int nodes = p["nodes"].get<int>();
    INFO(experiment << " at " << nodes << " nodes");
    const nlohmann::json sim = run_json("simulate " + experiment + " --set cluster.nodes=" + std::to_string(nodes) + " --json");
    const auto& m = sim["metrics"];
    CHECK(p["gpus"] == sim["summary"]["world_size"]);
    CHECK(p["step_time_ns"] == m["step_time_ns"]);
    CHECK(p["tokens_per_s_per_gpu"].get<double>() == sim["summary"]["tokens_per_s_per_gpu"].get<double>());
    CHECK(p["rank_wait_ns"].get<std::int64_t>() == m.value("rank_wait_ns", std::int64_t{0}));
    CHECK(p["exposed_comm_ns"] == m["exposed_comm_ns"]);
    // Weak scaling: the tokens per step grow with the GPUs; efficiency is the per-GPU rate's ratio.
    CHECK(p["efficiency_pct"].get<double>() == Approx(100.0 * p["tokens_per_s_per_gpu"].get<double>() / first_tps));
    CHECK(p["collective_extrapolations"] == sim.value("collective_extrapolations", nlohmann::json::array()));
    // The parts partition the step, and each is what the metrics report.
    const auto& parts = p["parts"];
    CHECK(sum_parts(parts) == m["step_time_ns"].get<std::int64_t>());
    CHECK(parts["compute_ns"].get<std::int64_t>() + parts["optimizer_ns"].get<std::int64_t>() == m["compute_time_ns"].get<std::int64_t>());
    CHECK(parts["idle_ns"] == m["idle_ns"]);
    CHECK(sum_parts(parts) - parts["compute_ns"].get<std::int64_t>() - parts["optimizer_ns"].get<std::int64_t>() -
              parts["idle_ns"].get<std::int64_t>() ==
          m["exposed_comm_ns"].get<std::int64_t>());
    // So the change of the step from the first point is the sum of the parts' changes.
    CHECK(p["step_change_ns"].get<std::int64_t>() == m["step_time_ns"].get<std::int64_t>() - first_step);
    CHECK(sum_parts(parts) - sum_parts(first_parts) == p["step_change_ns"].get<std::int64_t>());
    // Every collective that is exposed has the algorithm it ran with.
    for (const auto& [label, ns] : parts["exposed_ns"].items()) CHECK(p["algorithms"].contains(label));
  }
}

}  // namespace

TEST_CASE("scale's points are simulate's with cluster.nodes set, and the parts sum to each step and its change", "[cli][scale]") {
  // DDP: one all-reduce communicator; the H100 profile's rank_variation gives a slowest-rank wait.
  check_points_are_simulate(kSrc + "/configs/examples/llama3-8b-ddp-8xh100.json", "--gpus 8,16,64", 3);
  // FSDP1 on a slow network: all-gathers and reduce-scatters, exposed.
  check_points_are_simulate(kSrc + "/configs/examples/llama3-8b-fsdp1-2x8xh100-slow-net.json", "--nodes 1,2,4", 3);
}

TEST_CASE("scale's --set applies at every point, and --nodes and --gpus name the same points", "[cli][scale]") {
  const std::string exp = kSrc + "/configs/examples/llama3-8b-ddp-8xh100.json";
  const nlohmann::json by_nodes = run_json("scale " + exp + " --nodes 1,2 --set strategy.bucket_cap_mb=100 --json");
  const nlohmann::json by_gpus = run_json("scale " + exp + " --gpus 8,16 --set strategy.bucket_cap_mb=100 --json");
  CHECK(by_nodes["points"] == by_gpus["points"]);
  const nlohmann::json sim = run_json("simulate " + exp + " --set strategy.bucket_cap_mb=100 --set cluster.nodes=2 --json");
  CHECK(by_nodes["points"][1]["step_time_ns"] == sim["metrics"]["step_time_ns"]);
}

TEST_CASE("scale writes the CSV, the JSON and the HTML plot, one row per GPU count", "[cli][scale]") {
  const stepsim::test::TempDir dir("scale-cli");
  const std::string exp = kSrc + "/configs/examples/llama3-8b-ddp-8xh100.json";
  std::string out;
  REQUIRE(run_capture(kBin + " scale " + exp + " --gpus 8,16,32 --out " + dir.file("s.csv") + " --report " + dir.file("s.html") +
                          " --json-out " + dir.file("s.json"),
                      out) == 0);
  CHECK_THAT(out, Catch::Contains("tokens/s/GPU") && Catch::Contains("efficiency") && Catch::Contains("where the step goes"));
  std::ifstream csv(dir / "s.csv");
  std::string header, line;
  std::getline(csv, header);
  CHECK_THAT(header, Catch::StartsWith("gpus,nodes,step_time_ms,step_change_ms,tokens_per_s_per_gpu,efficiency_pct,compute_ms,"
                                       "optimizer_ms,idle_ms,rank_wait_exposed_ms,exposed_ms:all_reduce on "));
  CHECK_THAT(header, Catch::EndsWith(",extrapolation"));
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "s.json"));
  int rows = 0;
  while (std::getline(csv, line)) {
    INFO(line);
    const auto& p = j["points"][static_cast<std::size_t>(rows)];
    CHECK_THAT(line, Catch::StartsWith(std::to_string(p["gpus"].get<int>()) + "," + std::to_string(p["nodes"].get<int>()) + ","));
    ++rows;
  }
  CHECK(rows == 3);
  std::stringstream html;
  html << std::ifstream(dir / "s.html").rdbuf();
  CHECK_THAT(html.str(), Catch::Contains("<svg") && Catch::Contains("<polyline") && Catch::Contains("scaling efficiency"));
  // How the suite's real runs scaled against their predictions: the committed baseline's, in all three.
  const nlohmann::json baseline = nlohmann::json::parse(std::ifstream(kSrc + "/validation/baseline.json"));
  REQUIRE(baseline.contains("scale"));
  const auto& v = j["validation"];
  CHECK(v["gpu_pairs"] == baseline["scale"]["gpu_pairs"]);
  CHECK(v["gap_points_per_doubling"] == baseline["scale"]["gap_points_per_doubling"]);
  const std::string pairs = fmt::format("the suite's {} GPU-count pairs", baseline["scale"]["gpu_pairs"].get<int>());
  CHECK_THAT(out, Catch::Contains("validation (docs/scale.md): " + pairs));
  CHECK_THAT(out, Catch::Contains(fmt::format("median gap {:+.2f} points", baseline["scale"]["gap_points_per_doubling"].get<double>())));
  CHECK_THAT(html.str(), Catch::Contains("Against real runs") && Catch::Contains(pairs));
}

TEST_CASE("scale refuses bad GPU counts with one line naming the flag, the value and what was expected", "[cli][scale]") {
  const std::string exp = kSrc + "/configs/examples/llama3-8b-ddp-8xh100.json";
  std::string many;
  for (int i = 1; i <= 65; ++i) many += (i > 1 ? "," : "") + std::to_string(i);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--gpus 8,12", "--gpus 8,12: 12: expected a multiple of cluster.gpus_per_node (8)"},
      {"--nodes 0", "--nodes 0: '0': expected a positive integer node count"},
      {"--nodes=-2", "--nodes -2: '-2': expected a positive integer node count"},
      {"--gpus 8,x", "--gpus 8,x: 'x': expected a positive integer GPU count"},
      {"--nodes 1,2,", "--nodes 1,2,: '': expected a positive integer node count"},
      {"--nodes 1,2,2", "--nodes 1,2,2: 2: given twice: expected each count once"},
      {"--nodes 4,2", "--nodes 4,2: 2: after 4: expected increasing counts"},
      {"--nodes 70000", "--nodes 70000: 70000: expected at most 65536 nodes and 1048576 GPUs (docs/limits.md)"},
      {"--nodes " + many, "65 points: expected at most 64 (docs/limits.md)"},
      {"--nodes 1,2 --gpus 8,16", "scale: --nodes 1,2 --gpus 8,16: expected one of the two"},
      {"--set cluster.nodes=2", "--set cluster.nodes=2: scale sets cluster.nodes at each point: expected --nodes or --gpus instead"},
  };
  for (const auto& [args, expected] : cases) {
    INFO(args);
    std::string out;
    CHECK(run_capture(kBin + " scale " + exp + " " + args, out) == 2);
    CHECK_THAT(out, Catch::Contains(expected));
    CHECK(count_lines(out) == 1);
  }
}

TEST_CASE("scale refuses one file for two outputs before it writes either", "[cli][scale]") {
  const stepsim::test::TempDir dir("scale-cli");
  std::string out;
  CHECK(run_capture(kBin + " scale " + kSrc + "/configs/examples/llama3-8b-ddp-8xh100.json --nodes 1 --out " + dir.file("x") +
                        " --report " + dir.file("x"),
                    out) == 2);
  CHECK_THAT(out, Catch::Contains("is also the CSV of this run"));
  CHECK(!std::filesystem::exists(dir / "x"));
}
