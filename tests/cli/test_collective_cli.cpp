// `stepsim collective` and the extrapolation flags as a user sees them (issue 15).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace {

struct Run {
  int code = -1;
  std::string output;
};

// The CLI's exit code and output (stderr too unless `merge_stderr` is false).
Run run_cli(const std::string& args, bool merge_stderr = true) {
  Run r;
  std::string cmd = std::string(STEPSIM_BINARY) + " " + args;
  r.code = stepsim::test::run_capture(merge_stderr ? cmd : "(" + cmd + " 2>/dev/null)", r.output);
  return r;
}

const std::string kRoot = STEPSIM_SOURCE_DIR;
const std::string kH100 = kRoot + "/configs/hardware/h100-sxm-8x.json";
const std::string kLog = std::string(STEPSIM_TEST_DATA) + "/nccl-tests/h100-cluster01-xxrjun/nccl_N1_G8_cnode3-003.log";

}  // namespace

TEST_CASE("collective --json prints one row per size with nccl-tests' algbw and busbw", "[cli][collective]") {
  Run r = run_cli("collective --profile " + kH100 + " --kind all_reduce --ranks 8 --gpus-per-node 8 --bytes 32MiB-64MiB --json", false);
  REQUIRE(r.code == 0);
  auto rows = nlohmann::json::parse(r.output);
  REQUIRE(rows.size() == 2);  // 32 MiB and 64 MiB (factor 2)
  CHECK(rows[0]["bytes"] == 33554432);
  CHECK(rows[1]["bytes"] == 67108864);
  for (const auto& row : rows) {
    // algbw = S / t (GB = 1e9 B); busbw = algbw x 2(n-1)/n = 1.75 algbw on 8 ranks.
    double algbw = row["bytes"].get<double>() / (row["time_us"].get<double>() * 1e3);
    CHECK(row["algbw_GBps"].get<double>() == Approx(algbw));
    CHECK(row["busbw_GBps"].get<double>() == Approx(1.75 * algbw));
    CHECK_FALSE(row.contains("extrapolated"));  // 8 ranks on one node is inside the fitted 2-20
  }
}

TEST_CASE("collective --compare prints the error per row and a last line with the median and maximum",
          "[cli][collective]") {
  Run r = run_cli("collective --profile " + kH100 + " --compare " + kLog);
  INFO(r.output);
  REQUIRE(r.code == 0);
  // Four collectives x 10 sizes x 2 column groups = 80 compared times.
  auto last = r.output.substr(r.output.rfind("# 80 rows compared"));
  double median = std::stod(last.substr(last.find("median absolute error ") + 22));
  CHECK(median <= 10.0);  // the target for a single 8-GPU node
  // --kind keeps one section.
  Run ag = run_cli("collective --profile " + kH100 + " --kind all_gather --compare " + kLog);
  CHECK(ag.output.find("# 20 rows compared") != std::string::npos);
}

TEST_CASE("collective refuses bad input in one line with exit 2", "[cli][collective]") {
  Run r = run_cli("collective --profile " + kH100 + " --kind allreduce --ranks 8");
  CHECK(r.code == 2);
  CHECK(r.output.find("--kind allreduce") != std::string::npos);
  CHECK(r.output.find("all_reduce") != std::string::npos);
  Run b = run_cli("collective --profile " + kH100 + " --kind all_reduce --ranks 8 --bytes 16GiB-32MiB");
  CHECK(b.code == 2);
  CHECK(b.output.find("--bytes 16GiB-32MiB") != std::string::npos);
  Run f = run_cli("fit --model topology --base " + kRoot + "/tests/data/profiles/a100-sxm-8x-alpha-beta.json --nccl-tests " + kLog);
  CHECK(f.code == 2);
  CHECK(f.output.find("collectives.topology") != std::string::npos);
  const std::string a800 = " --base " + kRoot + "/configs/hardware/a800-sxm-8x.json --nccl-tests " + kLog;
  Run ratio = run_cli("fit --model topology --nvlink-bandwidth-ratio 0" + a800);
  CHECK(ratio.code == 2);
  CHECK(ratio.output.find("--nvlink-bandwidth-ratio 0: expected a ratio in (0, 100]") != std::string::npos);
  Run l = run_cli("fit --model alpha_beta --local-pass" + a800);
  CHECK(l.code == 2);
  CHECK(l.output.find("apply to --model topology only") != std::string::npos);
}

TEST_CASE("a communicator outside the profile's fitted group sizes is flagged in simulate --json and explain",
          "[cli][collective]") {
  // The A800 topology model is fitted on one node (A100 logs of 2..8 GPUs); ZeRO-1 on two nodes
  // has a data-parallel group of 16 ranks over 2 nodes.
  std::string exp = kRoot + "/configs/examples/opt-1.3b-zero1-8xa800.json --set cluster.nodes=2";
  Run s = run_cli("simulate " + exp + " --json", false);
  REQUIRE(s.code == 0);
  auto doc = nlohmann::json::parse(s.output);
  REQUIRE(doc.contains("collective_extrapolations"));
  CHECK(doc["collective_extrapolations"][0].get<std::string>().find("16 ranks on 2 node(s)") != std::string::npos);
  // On one node the same run is inside the fitted range.
  Run one = run_cli("simulate " + kRoot + "/configs/examples/opt-1.3b-zero1-8xa800.json --json", false);
  CHECK_FALSE(nlohmann::json::parse(one.output).contains("collective_extrapolations"));
  Run e = run_cli("explain " + exp + " --no-sensitivities");
  REQUIRE(e.code == 0);
  CHECK(e.output.find("note: collective times extrapolated beyond the profile's fitted group sizes") != std::string::npos);
  // An H100 one-node run is inside its profile's range: no key at all.
  Run h = run_cli("simulate " + kRoot + "/configs/examples/llama3-8b-fsdp2-8xh100.json --json", false);
  CHECK_FALSE(nlohmann::json::parse(h.output).contains("collective_extrapolations"));
}
