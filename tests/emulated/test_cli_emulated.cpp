// The user-facing GPU commands on the emulated GPU: `stepsim live`, `stepsim calibrate` and
// tools/validate_live.sh run exactly as on a GPU machine (mpirun, exec of stepsim-gpu, output
// files, compare, analyze of the live trace), with stepsim-gpu-emulated standing in for
// stepsim-gpu through STEPSIM_GPU_BINARY. What this proves is the plumbing a GPU session would
// otherwise debug on borrowed device time; the numbers are the emulation's, not a GPU's.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "live_result_checks.hpp"
#include "sim/hardware/profile.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kEnv = std::string("STEPSIM_GPU_BINARY=") + STEPSIM_GPU_EMULATED_BINARY +
                         " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";

// Runs a shell command; returns its exit status and its output (stdout + stderr).
int sh(const std::string& cmd, std::string* output = nullptr) {
  const stepsim::test::TempDir tmp("sh");
  const fs::path log = tmp / "output.log";
  int rc = std::system((cmd + " > " + log.string() + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  if (output) *output = ss.str();
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// `mpirun -np 1 stepsim calibrate ARGS --base configs/hardware/BASE --out OUT` on the emulated GPU.
int calibrate(const std::string& args, const std::string& base, const fs::path& out_file, std::string* output) {
  return sh(kEnv + "mpirun -np 1 " + STEPSIM_BINARY + " calibrate " + args + " --base " + STEPSIM_SOURCE_DIR +
                "/configs/hardware/" + base + " --out " + out_file.string(),
            output);
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

}  // namespace

TEST_CASE("emulated GPU: mpirun -np 1 stepsim live writes a live result that compare and analyze read", "[emulated][cli]") {
  const stepsim::test::TempDir dir("emulated-live");
  const std::string bin = STEPSIM_BINARY;
  const std::string exp = std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/seed/c1-ddp-buckets.json";
  const fs::path pred = dir.path() / "pred.json", meas = dir.path() / "meas.json", trace = dir.path() / "meas.trace.json";
  std::string out;
  REQUIRE(sh(bin + " simulate " + exp + " --json-out " + pred.string(), &out) == 0);
  INFO(out);
  REQUIRE(sh(kEnv + "mpirun -np 1 " + bin + " live " + exp + " --out " + meas.string() + " --trace " + trace.string() +
                 " --steps 3 --warmup 1",
             &out) == 0);
  CHECK(out.find("live: ") != std::string::npos);
  json m = read_json(meas), p = read_json(pred);
  stepsim::test::check_live_result(m, p, 3);
  CHECK(m["device"] == "emulated H100 (CPU, tests/emulated)");
  // C1 on the emulation: 10 x 5 ms of backward, then the last bucket's all-reduce and copies.
  const auto step = m["metrics"]["step_time_ns"].get<std::int64_t>();
  CHECK(step >= 50'000'000);
  CHECK(step <= 50'500'000);

  // compare: a table and the CI gate's exit code (0 within tolerance, 3 outside).
  int rc = sh(bin + " compare " + pred.string() + " " + meas.string() + " --tolerance 5%", &out);
  CHECK((rc == 0 || rc == 3));
  CHECK(out.find("step") != std::string::npos);

  // The live trace has simulate's layout: analyze reads it back to the same step time.
  REQUIRE(sh(bin + " analyze " + trace.string() + " --json", &out) == 0);
  json a = json::parse(out);
  INFO(a.dump().substr(0, 2000));
  CHECK(a.dump().find(std::to_string(step)) != std::string::npos);
}

TEST_CASE("emulated GPU: stepsim calibrate under mpirun writes a profile that fit and simulate accept", "[emulated][cli]") {
  const stepsim::test::TempDir dir("emulated-calibrate");
  const std::string bin = STEPSIM_BINARY;
  const fs::path prof = dir.path() / "profile.json";
  std::string out;
  REQUIRE(calibrate("all --no-grid --tokens 2048 -b 8 -e 16777216 -f 4 -n 4 --repeats 3", "h100-sxm-8x.json", prof, &out) == 0);
  INFO(out);
  stepsim::HardwareProfile p = stepsim::load_profile(prof);
  const auto& cal = p.provenance.at("calibration");
  CHECK(cal.at("device").at("name") == "emulated H100 (CPU, tests/emulated)");
  CHECK(cal.at("gemm").size() > 0);
  CHECK(cal.at("collectives").size() == 3);
  // A profile from calibrate is a profile: simulate runs on it.
  REQUIRE(sh(bin + " simulate " + STEPSIM_SOURCE_DIR + "/configs/examples/llama3-8b-ddp-8xh100.json --set cluster.profile=" +
                 prof.string(),
             &out) == 0);
}

TEST_CASE("emulated GPU: calibrate gemm --sustain-ms records it; GEMM rates above the --base's peak keep the raw measurements",
          "[emulated][cli]") {
  const stepsim::test::TempDir dir("emulated-calibrate-sustain");
  const std::string bin = STEPSIM_BINARY;
  const fs::path prof = dir.path() / "profile.json";
  std::string out;
  REQUIRE(calibrate("gemm --no-grid --tokens 2048 -n 4 --repeats 3 --sustain-ms 5", "h100-sxm-8x.json", prof, &out) == 0);
  INFO(out);
  CHECK(out.find("each run 5 ms back to back first") != std::string::npos);
  stepsim::HardwareProfile p = stepsim::load_profile(prof);
  CHECK(p.provenance.at("calibration").at("timing").at("gemm_sustain_ms") == 5);
  // calibrate gemm measured no collective: the base's topology fit stays on record.
  CHECK(p.provenance.at("kept_from_base").at("collectives").contains("topology_fit"));
  // On the 96 GB part, whose shipped table is the 989-TFLOP/s part's: the measured table is this
  // part's and is not scaled again.
  const fs::path p96 = dir.path() / "p96.json";
  REQUIRE(calibrate("gemm --no-grid --tokens 2048 -n 4 --repeats 3", "h100-sxm-96gb.json", p96, &out) == 0);
  stepsim::HardwareProfile h96 = stepsim::load_profile(p96);
  CHECK(h96.compute.gemm_table_peak.flops_per_s == 0);
  CHECK_FALSE(read_json(p96).at("compute").contains("gemm_table_peak_bf16_tflops"));

  // The emulated GPU runs GEMMs at 400 TFLOP/s, above the A100 profile's 312: the fit refuses
  // them, and the raw measurements are written for a fit with the right base.
  const fs::path raw = dir.path() / "raw.json";
  CHECK(calibrate("gemm --no-grid --tokens 2048 -n 4 --repeats 3", "a100-sxm-8x.json", raw, &out) != 0);
  CHECK(out.find("no usable GEMM rate") != std::string::npos);
  CHECK(out.find("stepsim fit --calibration " + raw.string() + " --base PROFILE.json") != std::string::npos);
  REQUIRE(sh(bin + " fit --calibration " + raw.string() + " --base " + STEPSIM_SOURCE_DIR +
                 "/configs/hardware/h100-sxm-8x.json --out " + (dir.path() / "refit.json").string(),
             &out) == 0);
  CHECK(stepsim::load_profile(dir.path() / "refit.json").compute.gemm_table.size() > 0);
}

TEST_CASE("emulated GPU: stepsim calibrate membw measures copy bandwidth and each memory-bound class over a size sweep",
          "[emulated][cli]") {
  const stepsim::test::TempDir dir("emulated-membw");
  const fs::path prof = dir.path() / "profile.json";
  std::string out;
  // 1, 2, 4 MiB: three sizes (-b 1048576 -e 4194304 -f 2).
  REQUIRE(calibrate("membw -b 1048576 -e 4194304 -f 2 -n 2 --repeats 2", "a800-sxm-8x.json", prof, &out) == 0);
  INFO(out);
  stepsim::HardwareProfile p = stepsim::load_profile(prof);
  const auto& rows = p.provenance.at("membw");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].at("bytes") == 1048576);
  for (const auto& r : rows) CHECK(r.at("copy_GBps").get<double>() > 0);
  // No size reaches 64 MiB: memcpy_GBps takes the median over all three (the middle one).
  std::vector<double> v{rows[0].at("copy_GBps").get<double>(), rows[1].at("copy_GBps").get<double>(),
                        rows[2].at("copy_GBps").get<double>()};
  std::sort(v.begin(), v.end());
  CHECK(p.compute.memcpy.gbps() == Approx(v[1]).epsilon(1e-6));
  // Each class kernel ran at every size (the emulation prices a kernel's bytes at its copy rate,
  // 1 TB/s: a class's GB/s is exactly that when its byte count is the kernel's); the profile's
  // class bandwidths are the measured ones, except copy (no class kernel: the base's 797).
  for (const auto& r : rows)
    for (const char* cls : {"elementwise", "elementwise_strided", "reduction", "norm", "embedding"})
      CHECK(r.at("class_GBps").at(cls).get<double>() == Approx(1000).epsilon(1e-3));  // fake_cuda::kCopyBytesPerS
  for (auto c : {stepsim::KernelClass::Elementwise, stepsim::KernelClass::ElementwiseStrided, stepsim::KernelClass::Reduction,
                 stepsim::KernelClass::Norm, stepsim::KernelClass::Embedding})
    CHECK(p.compute.class_bandwidth.at(c).gbps() == Approx(1000).epsilon(1e-3));
  CHECK(p.compute.class_bandwidth.at(stepsim::KernelClass::Copy).gbps() == Approx(797));
  // The strided permute copy moves 4 bytes per element: at 1,000 GB/s, 0.004 ns per element,
  // replacing the base's (the A800's 0.00457).
  CHECK(p.compute.strided_element_ns == Approx(0.004).epsilon(1e-3));
  // The casting kernel (bf16 against a float 0-dim tensor, 4 bytes per element and the scalar's
  // 4) likewise sets the casting time per element, and no class bandwidth.
  for (const auto& r : rows) CHECK(r.at("class_GBps").at("elementwise_strided_cast").get<double>() == Approx(1000).epsilon(1e-3));
  CHECK(p.compute.strided_cast_element_ns == Approx(0.004).epsilon(1e-3));
  CHECK_THAT(p.sources.at("compute.elementwise_strided_cast_ns_per_element").get<std::string>(),
             Catch::Contains("calibrate membw"));
  CHECK_THAT(p.sources.at("compute.elementwise_strided_ns_per_element").get<std::string>(), Catch::Contains("calibrate membw"));
  CHECK(out.find("memory-bound class kernels") != std::string::npos);
}

TEST_CASE("emulated GPU: tools/validate_live.sh runs calibrate, simulate, live and compare over its matrix", "[emulated][cli]") {
  const stepsim::test::TempDir dir("emulated-validate");
  std::string out;
  int rc = sh(kEnv + "bash " + STEPSIM_SOURCE_DIR + "/tools/validate_live.sh --build " + STEPSIM_BUILD_DIR + " --out " +
                  dir.path().string() + " --steps 2 --warmup 1",
              &out);
  INFO(out);
  {
    std::ifstream log(dir.path() / "run.log");
    std::stringstream ss;
    ss << log.rdbuf();
    INFO(ss.str().substr(0, 4000));
    REQUIRE(rc == 0);
  }
  CHECK(out.find("calibrated on this machine") != std::string::npos);
  std::ifstream csv(dir.path() / "results.csv");
  std::string line;
  int rows = 0;
  std::getline(csv, line);
  CHECK(line.rfind("case,framework,predicted_step_ms,measured_step_ms", 0) == 0);
  while (std::getline(csv, line))
    if (!line.empty()) ++rows;
  CHECK(rows == 8);  // DDP x 2 bucket sizes, FSDP1 x 3 prefetch x limit on/off
  for (const auto& e : fs::directory_iterator(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/validation")) {
    const std::string name = e.path().stem().string();
    json m = read_json(dir.path() / (name + ".measured.json"));
    CHECK(m["mode"] == "live");
    CHECK(fs::exists(dir.path() / (name + ".compare.txt")));
  }
  std::ifstream md(dir.path() / "results.md");
  std::stringstream ss;
  ss << md.rdbuf();
  CHECK(ss.str().find("one GPU: every collective ran as a world-size-1 NCCL call") != std::string::npos);
  CHECK(ss.str().find("step time |error|") != std::string::npos);
}
