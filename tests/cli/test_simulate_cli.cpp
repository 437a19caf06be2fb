// The CLI contract: exit codes, one-line errors naming file and JSON path, JSON output.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

using stepsim::test::run_capture;

namespace {
const std::string kBin = STEPSIM_BINARY;
const std::string kSrc = STEPSIM_SOURCE_DIR;

// Writes `text` to a file in this process's temporary directory and returns its path.
std::string temp_config(const std::string& name, const std::string& text) {
  static const stepsim::test::TempDir dir("simulate-cli");  // removed at exit
  auto p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

std::string c1_with(const std::string& strategy_extra, const std::string& workload_override = "") {
  std::string w = workload_override.empty()
                      ? R"("workload": {"toy": {"layers": 2, "backward_ms": 5, "params_per_layer": 1000}})"
                      : workload_override;
  return R"({)" + w + R"(, "cluster": {"profile": ")" + kSrc + R"(/configs/hardware/toy-ideal.json", "nodes": 1, "gpus_per_node": 8},
             "strategy": {"framework": "ddp")" + strategy_extra + R"(}})";
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}
}  // namespace

TEST_CASE("simulate --json on C1 prints the metrics object with step_time_ns 56000000", "[cli]") {
  std::string out;
  int rc = run_capture(kBin + " simulate " + kSrc + "/configs/examples/seed/c1-ddp-buckets.json --json", out);
  REQUIRE(rc == 0);
  auto j = nlohmann::json::parse(out);
  CHECK(j["schema"] == "stepsim.result/1");
  CHECK(j["metrics"]["step_time_ns"] == 56000000);
  for (const char* k : {"compute_time_ns", "comm_time_ns", "overlapped_comm_ns", "exposed_comm_ns", "overlap_pct", "idle_ns",
                        "phases", "peak_memory_bytes", "peak_memory_breakdown"})
    CHECK(j["metrics"].contains(k));
}

TEST_CASE("Bad input is a one-line error naming file and JSON path, with exit code 2", "[cli][config]") {
  struct Case {
    const char* name;
    std::string json;
    const char* must_contain;
  };
  const Case cases[] = {
      {"unknown key", c1_with(R"(, "bucket_cap_mbb": 5)"), "/strategy/bucket_cap_mbb"},
      {"wrong type", c1_with(R"(, "bucket_cap_mb": "five")"), "/strategy/bucket_cap_mb: \"five\": expected a number"},
      {"negative size", c1_with(R"(, "bucket_cap_mb": -5)"), "/strategy/bucket_cap_mb: -5: expected a positive number"},
      {"unknown preset", c1_with("", R"("workload": {"preset": "llama9-1t"})"), "/workload/preset: \"llama9-1t\": expected a known model preset"},
      {"world size mismatch", c1_with(R"(, "world_size": 16)"), "/strategy/world_size: 16: expected the cluster's world size 8"},
      {"unknown framework", c1_with("").replace(c1_with("").find("\"ddp\""), 5, "\"megatron\""), "/strategy/framework"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      std::string stem = c.name;
      std::replace(stem.begin(), stem.end(), ' ', '-');
      std::string file = temp_config(stem + ".json", c.json);
      std::string out;
      int rc = run_capture(kBin + " simulate " + file, out);
      CHECK(rc == 2);
      CHECK_THAT(out, Catch::Contains(file));
      CHECK_THAT(out, Catch::Contains(c.must_contain));
      CHECK(count_lines(out) == 1);
    }
  }
}

TEST_CASE("A missing file, invalid JSON and a bad --set are one-line errors with exit code 2", "[cli][config]") {
  std::string out;
  CHECK(run_capture(kBin + " simulate /nonexistent/exp.json", out) == 2);
  CHECK_THAT(out, Catch::Contains("/nonexistent/exp.json: cannot open file"));
  std::string bad = temp_config("bad.json", "{\"workload\": ");
  CHECK(run_capture(kBin + " simulate " + bad, out) == 2);
  CHECK_THAT(out, Catch::Contains("invalid JSON"));
  CHECK(run_capture(kBin + " simulate " + kSrc + "/configs/examples/seed/c1-ddp-buckets.json --set nonsense", out) == 2);
  CHECK(run_capture(kBin + " simulate " + kSrc + "/configs/examples/seed/c1-ddp-buckets.json --set strategy.bucket_cap_bytes=-1", out) == 2);
  CHECK_THAT(out, Catch::Contains("/strategy/bucket_cap_bytes"));
  CHECK(run_capture(kBin + " frobnicate", out) == 2);
}

TEST_CASE("--set overrides a config value", "[cli][config]") {
  std::string out;
  // With buckets of one layer (3 MB) only the last layer's 3 ms all-reduce is exposed: 50 + 3.
  int rc = run_capture(kBin + " simulate " + kSrc +
                           "/configs/examples/seed/c1-ddp-buckets.json --json --set strategy.bucket_cap_bytes=3000000 "
                           "--set strategy.first_bucket_bytes=3000000",
                       out);
  REQUIRE(rc == 0);
  CHECK(nlohmann::json::parse(out)["metrics"]["step_time_ns"] == 53000000);
}

TEST_CASE("stepsim --help lists every subcommand", "[cli]") {
  std::string out;
  CHECK(run_capture(kBin + " --help", out) == 0);
  for (const char* c : {"simulate", "sweep", "tune", "explain", "fit", "analyze", "calibrate", "live", "compare"})
    CHECK_THAT(out, Catch::Contains(c));
  CHECK(run_capture(kBin + " simulate --help", out) == 0);
  CHECK_THAT(out, Catch::Contains("--trace"));
}

TEST_CASE("simulate --idle adds the idle attribution to the text and JSON reports; a bad --top is exit 2", "[cli]") {
  const std::string exp = kSrc + "/configs/examples/opt-1.3b-zero1-8xa800.json";
  std::string out;
  REQUIRE(run_capture(kBin + " simulate " + exp + " --idle --top 3", out) == 0);
  CHECK_THAT(out, Catch::Contains("GPU idle per step (mean of 1 step(s)"));
  CHECK_THAT(out, Catch::Contains("get_grad_norm_direct: param_norm.item()"));
  CHECK_THAT(out, Catch::Contains("more causes)"));
  REQUIRE(run_capture(kBin + " simulate " + exp + " --idle --json", out) == 0);
  const auto j = nlohmann::json::parse(out);
  REQUIRE(j.contains("idle"));
  // At most the metrics' idle, which also counts memcpy time as idle (as analyze does).
  CHECK(j["idle"]["idle_us"].get<double>() * 1000 <= j["metrics"]["idle_ns"].get<double>() + 1);
  CHECK(j["idle"]["causes"].size() > 3);
  REQUIRE(run_capture(kBin + " simulate " + exp + " --json", out) == 0);
  CHECK_FALSE(nlohmann::json::parse(out).contains("idle"));
  CHECK(run_capture(kBin + " simulate " + exp + " --idle --top -1", out) == 2);
  CHECK_THAT(out, Catch::Contains("--top -1"));
}

TEST_CASE("simulate --json prints the same bytes with the profile disk cache off, cold and warm", "[cli][profile_cache]") {
  // Every example experiment, and one whose profile includes another (the A100 40GB variant).
  std::vector<std::string> runs;
  for (const auto& e : std::filesystem::directory_iterator(kSrc + "/configs/examples"))
    if (e.path().extension() == ".json") runs.push_back(e.path().string());
  std::sort(runs.begin(), runs.end());
  REQUIRE(runs.size() >= 8);
  runs.push_back(kSrc + "/configs/examples/llama3-8b-ddp-8xh100.json --set cluster.profile=" + kSrc +
                 "/configs/hardware/a100-sxm4-40gb-8x.json");
  stepsim::test::TempDir cache("profile-cache");
  for (const auto& run : runs) {
    INFO(run);
    std::string off, cold, warm;
    REQUIRE(run_capture("STEPSIM_CACHE_DIR= " + kBin + " simulate " + run + " --json", off) == 0);
    REQUIRE(run_capture("STEPSIM_CACHE_DIR=" + cache.path().string() + " " + kBin + " simulate " + run + " --json", cold) == 0);
    REQUIRE(run_capture("STEPSIM_CACHE_DIR=" + cache.path().string() + " " + kBin + " simulate " + run + " --json", warm) == 0);
    CHECK(cold == off);
    CHECK(warm == off);
  }
  // The cold runs wrote one entry per profile file named (h100, a800, a100 40GB), nothing else.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(cache.path())) {
    CHECK(e.path().extension() == ".bin");
    ++entries;
  }
  CHECK(entries >= 3);
}
