// stepsim init --from-trace on the real li-plus DeepSpeed traces: the experiment it writes
// names the right world, GPU, dtype, framework and OPT-1.3B's dimensions, and simulates.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace {
const std::string kBin = STEPSIM_BINARY;
const std::string kData = STEPSIM_TEST_DATA;
}  // namespace

TEST_CASE("init --from-trace: the li-plus ZeRO-1 and ZeRO-2 traces give OPT-1.3B under ZeRO-1 / ZeRO-2 on 8 A800",
          "[init][data]") {
  const stepsim::test::TempDir dir;
  const std::string traces = kData + "/traces/li-plus_playground/";
  for (const auto& [trace, stage] : {std::pair{"zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz", 1},
                                     std::pair{"zero2__rank_0__n122-248-036_412047.1703670170346574004.pt.trace.json.gz", 2}}) {
    INFO(trace);
    const std::string exp = (dir / ("stage" + std::to_string(stage) + ".json")).string();
    std::string out;
    REQUIRE(stepsim::test::run_capture(kBin + " init --from-trace " + traces + trace + " --steps 11-12 --out " + exp, out) == 0);
    CHECK_THAT(out, Catch::Contains("guesses"));
    nlohmann::json e = nlohmann::json::parse(std::ifstream(exp));
    CHECK(e["cluster"]["nodes"].get<int>() * e["cluster"]["gpus_per_node"].get<int>() == 8);
    CHECK(e["workload"]["dtype"] == "bf16");
    CHECK(e["strategy"]["framework"] == "zero");
    CHECK(e["strategy"]["stage"] == stage);
    CHECK(e["strategy"]["monitor"] == true);  // DeepSpeed-Chat's tensorboard writes in the Python stacks
    // OPT-1.3B (HF facebook/opt-1.3b): 24 layers, hidden 2048, FFN 8192, 32 heads, vocab 50272;
    // the run: micro-batch 8 of 512 tokens.
    const auto& m = e["workload"]["model"];
    CHECK(m["layers"] == 24);
    CHECK(m["hidden"] == 2048);
    CHECK(m["ffn"] == 8192);
    CHECK(m["heads"] == 32);
    CHECK(m["vocab"] == 50272);
    // The ReLU kernels (launch_clamp_scalar forward, threshold_backward) name the OPT family.
    CHECK(m["family"] == "opt");
    CHECK(e["workload"]["seq_len"] == 512);
    CHECK(e["workload"]["micro_batch"] == 8);
    CHECK(e["notes"].size() >= 5);
    // The fitted profile sits next to it and is the A800's, refitted.
    nlohmann::json p = nlohmann::json::parse(std::ifstream(dir / ("stage" + std::to_string(stage) + ".profile.json")));
    CHECK(p["name"] == "a800-sxm-8x-fitted");
    CHECK(stepsim::test::run_capture(kBin + " simulate " + exp, out) == 0);
  }
}

// Issue 46: the profile init writes keeps the base profile's network. A one-node trace measures
// NVLink only; the fitted profile must price a second node as the base profile does (it used to
// write a ring at one NIC's bandwidth in place of the base's eight NICs: 1.30x the throughput of
// one node at two, against 1.94x).
TEST_CASE("init --from-trace: a one-node trace's profile scales to two nodes as its base profile does", "[init][data]") {
  const stepsim::test::TempDir dir;
  const std::string trace = kData + "/traces/li-plus_playground/zero2__rank_0__n122-248-036_412047.1703670170346574004.pt.trace.json.gz";
  const std::string exp = (dir / "zero2.json").string();
  std::string out;
  REQUIRE(stepsim::test::run_capture(kBin + " init --from-trace " + trace + " --steps 11-12 --out " + exp, out) == 0);
  auto step_ns = [&](const std::string& extra) {
    std::string json;
    REQUIRE(stepsim::test::run_capture(kBin + " simulate " + exp + " --json " + extra, json) == 0);
    return nlohmann::json::parse(json)["metrics"]["step_time_ns"].get<double>();
  };
  const std::string base = " --set cluster.profile=" + std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a800-sxm-8x.json";
  const double fitted_scaling = step_ns("--set cluster.nodes=2") / step_ns("");
  const double base_scaling = step_ns("--set cluster.nodes=2" + base) / step_ns(base);
  INFO("fitted: " << fitted_scaling << ", base: " << base_scaling);
  CHECK(fitted_scaling == Approx(base_scaling).epsilon(0.02));
  // And the profile carries the base's topology (network level included), not a scope model.
  nlohmann::json p = nlohmann::json::parse(std::ifstream(dir / "zero2.profile.json"));
  REQUIRE(p["collectives"].contains("topology"));
  nlohmann::json base_profile =
      nlohmann::json::parse(std::ifstream(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a800-sxm-8x.json"));
  CHECK(p["collectives"]["topology"]["network"] == base_profile["collectives"]["topology"]["network"]);
  CHECK_FALSE(p["collectives"].contains("inter_node"));
}
