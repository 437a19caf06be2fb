// `stepsim calibrate` and `stepsim fit` as a user runs them (exit codes, messages, output file).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/hardware/profile.hpp"
#include "test_support.hpp"

namespace {

struct Run {
  int code = -1;
  std::string output;
};

// The CLI's exit code and output (stdout and stderr).
Run run_cli(const std::string& args) {
  Run r;
  r.code = stepsim::test::run_capture(std::string(STEPSIM_BINARY) + " " + args, r.output);
  return r;
}

// On a machine with an NVIDIA driver calibrate would really run (minutes); the [gpu] tests cover
// that path there, so this CLI test only runs where no GPU device node exists.
bool have_gpu() { return std::filesystem::exists("/dev/nvidiactl") || std::filesystem::exists("/dev/nvidia0"); }

}  // namespace

TEST_CASE("calibrate without a CUDA device says so in one line and exits 2", "[cli][calibrate]") {
  if (have_gpu()) {
    WARN("a GPU device node exists: the no-GPU path is not exercised here");
    return;
  }
  for (const char* what : {"gemm", "nccl", "contention", "all"}) {
    Run r = run_cli(std::string("calibrate ") + what + " --out /tmp/stepsim_never_written.json");
    INFO(r.output);
    CHECK(r.code == 2);
    // One line; a build without CUDA adds why in parentheses.
    CHECK(r.output.rfind("no CUDA device present: calibrate needs a GPU", 0) == 0);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
  CHECK_FALSE(std::filesystem::exists("/tmp/stepsim_never_written.json"));
}

TEST_CASE("calibrate --help works without a GPU", "[cli][calibrate]") {
  Run r = run_cli("calibrate --help");
  CHECK(r.code == 0);
  CHECK(r.output.find("usage: stepsim calibrate") != std::string::npos);
  CHECK(r.output.find("--max-bytes") != std::string::npos);
}

TEST_CASE("calibrate rejects an unknown benchmark with exit 2 before looking for a GPU", "[cli][calibrate]") {
  Run r = run_cli("calibrate matmul");
  CHECK(r.code == 2);
  CHECK(r.output.find("'matmul': expected gemm, nccl, contention, membw or all") != std::string::npos);
}

TEST_CASE("fit writes a loadable profile from nccl-tests logs and the XLA tables, with provenance", "[cli][fit]") {
  const std::string data = STEPSIM_SHARED_DATA;
  auto out = std::filesystem::temp_directory_path() / "stepsim_fit_cli.json";
  Run r = run_cli("fit --base " + std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json --nccl-tests " + data +
                  "/nccl-tests/allreduce_2x8xH100_Nebius-IB_dstack.txt --xla-collectives " + data +
                  "/xla_perf_tables/collective_perf_table.csv --xla-gemm " + data +
                  "/xla_perf_tables/matmul_perf_table.csv --out " + out.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("inter_node  all_reduce") != std::string::npos);
  stepsim::HardwareProfile p = stepsim::load_profile(out);
  CHECK(p.intra_node.kind == stepsim::CollectiveModelKind::AlphaBeta);
  CHECK(p.intra_node.alpha_beta.count(stepsim::CollectiveKind::AllToAll) == 1);  // measured by XLA
  CHECK(p.inter_node.alpha_beta.count(stepsim::CollectiveKind::AllGather) == 1);  // derived from all_reduce
  CHECK(p.compute.gemm_table.size() == 375 * 3);
  CHECK(p.provenance.at("command").get<std::string>().rfind("stepsim fit --base", 0) == 0);
  std::filesystem::remove(out);
}

TEST_CASE("fit names the file and line of a malformed log and exits 2", "[cli][fit]") {
  auto bad = std::filesystem::temp_directory_path() / "stepsim_bad_nccl.log";
  {
    std::ofstream f(bad);
    f << "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
         "         1024           256     float     sum      -1    41.97    0.02    0.05      0\n"
         "         2048           512     float     sum      -1    4x.36    0.05    0.09      0\n";
  }
  Run r = run_cli("fit --base " + std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json --nccl-tests " +
                  bad.string());
  CHECK(r.code == 2);
  CHECK(r.output.find(bad.string() + ":3: time '4x.36'") != std::string::npos);
  std::filesystem::remove(bad);
}

TEST_CASE("only stepsim-gpu links CUDA, cuBLASLt, NCCL and MPI: stepsim itself loads none of them", "[cli][calibrate]") {
  // The GPU half of calibrate/live is exec'ed (tools/cli_common.hpp); simulate, sweep, fit...
  // must not pay cuBLASLt's ~200 MB of mapped pages and ~0.1 s load at every start.
  Run r;
  {
    auto out = std::filesystem::temp_directory_path() / "stepsim_ldd.out";
    int status = std::system(("ldd " + std::string(STEPSIM_BINARY) + " > " + out.string() + " 2>&1").c_str());
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    std::ifstream in(out);
    std::stringstream ss;
    ss << in.rdbuf();
    r.output = ss.str();
    std::filesystem::remove(out);
  }
  REQUIRE(r.output.find("libc.so") != std::string::npos);  // ldd really listed the libraries
  for (const char* lib : {"libcudart", "libcublas", "libnccl", "libmpi"}) {
    INFO(lib);
    CHECK(r.output.find(lib) == std::string::npos);
  }
}
