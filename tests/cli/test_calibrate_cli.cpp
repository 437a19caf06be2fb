// `stepsim calibrate` and `stepsim fit` as a user runs them (exit codes, messages, output file).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/calibration_io.hpp"
#include "calibrate/workload_shapes.hpp"
#include "sim/hardware/profile.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Run {
  int code = -1;
  std::string output;
};

// The CLI's exit code and output (stdout and stderr); `env` prefixes the command line.
Run run_cli(const std::string& args, const std::string& env = "") {
  Run r;
  r.code = stepsim::test::run_capture(env + std::string(STEPSIM_BINARY) + " " + args, r.output);
  return r;
}

// A GPU a [gpu] test can use: the NVIDIA driver's device nodes exist.
bool have_gpu() { return fs::exists("/dev/nvidiactl") || fs::exists("/dev/nvidia0"); }

// One small calibration: every benchmark, the transformer-block GEMM shapes at 2048 tokens (no
// grid), two collectives from 1 KiB to 64 KiB by 4x, 1 warm-up call, 2 loops of 2 calls.
const std::string kCalibrateArgs =
    "calibrate all --no-grid --tokens 2048 --dtype bf16 --collectives all_reduce,all_gather -b 1024 -e 65536 -f 4 -w 1 "
    "-n 2 --repeats 2 --base " + std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json";

// The rows "m n k batch ..." of the GEMM table calibrate prints, in order.
std::vector<stepsim::GemmShape> printed_gemm_rows(const std::string& output) {
  std::vector<stepsim::GemmShape> rows;
  std::istringstream in(output);
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# GEMM ", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table || line.rfind("# ", 0) == 0) {
      if (in_table && line.rfind("#      m", 0) != 0 && !rows.empty()) in_table = false;
      continue;
    }
    std::istringstream cols(line);
    stepsim::GemmShape g;
    if (cols >> g.m >> g.n >> g.k >> g.batch) rows.push_back(g);
  }
  return rows;
}

// What `stepsim calibrate <kCalibrateArgs> --out <profile>` must have run and written, on any
// device: the GEMM shapes calibration_gemm_shapes gives for the arguments, each measured once
// and printed in order; each asked collective on the world communicator (1 rank under
// mpirun -np 1) at 1, 4, 16 and 64 KiB, out of place and (`points_per_size` 2) in place; the
// contention pair; the copy bandwidth at 4 (calibrate's 4 KiB floor), 16 and 64 KiB; and a
// profile file that loads, keeps the base's name, records the command, and whose raw points
// fit --calibration reads back.
void check_calibration(const Run& r, const fs::path& profile_file, std::size_t points_per_size) {
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto shapes = stepsim::calib::calibration_gemm_shapes({2048}, stepsim::Dtype::BF16, false);
  REQUIRE(!shapes.empty());
  CHECK(printed_gemm_rows(r.output).size() == shapes.size());
  for (const char* kind : {"all_reduce", "all_gather"})
    CHECK_THAT(r.output, Catch::Contains(std::string("# ") + kind + " on communicator 'world' (1 ranks, 1 nodes)"));
  CHECK_THAT(r.output, !Catch::Contains("reduce_scatter on communicator"));
  CHECK_THAT(r.output, Catch::Contains("# nThread 1 nGpus 1 minBytes 1024 maxBytes 65536 step: 4(factor) warmup iters: 1 iters: 2"));
  CHECK_THAT(r.output, Catch::Contains("# contention: GEMM "));
  CHECK_THAT(r.output, Catch::Contains("# memory bandwidth"));
  CHECK_THAT(r.output, Catch::EndsWith("# wrote " + profile_file.string() + "\n"));

  json doc = json::parse(std::ifstream(profile_file));
  const stepsim::HardwareProfile p = stepsim::load_profile(profile_file);
  CHECK(p.name == stepsim::load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json").name);
  CHECK(p.provenance.at("command").get<std::string>().rfind("stepsim calibrate all --no-grid --tokens 2048", 0) == 0);
  // The measured contention factors price every kernel: the base's declared SM counts (the
  // resource model) no longer apply.
  CHECK(stepsim::load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json").contention.models_resources());
  CHECK_FALSE(p.contention.models_resources());

  const json& cal = doc.at("provenance").at("calibration");
  CHECK(cal.at("format") == "stepsim-calibration-1");
  for (const char* key : {"name", "compute_capability", "sm_count", "memory_bytes", "l2_bytes", "ranks", "nodes"})
    CHECK(cal.at("device").contains(key));
  CHECK(cal.at("device").at("ranks") == 1);
  // GEMMs: exactly the shapes asked for, in calibrate's order, each with a positive rate.
  REQUIRE(cal.at("gemm").size() == shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const json& g = cal.at("gemm")[i];
    CHECK(g.at("m") == shapes[i].m);
    CHECK(g.at("n") == shapes[i].n);
    CHECK(g.at("k") == shapes[i].k);
    CHECK(g.at("batch") == shapes[i].batch);
    CHECK(g.at("dtype") == "bf16");
    CHECK(g.at("tflops").get<double>() > 0);
  }
  // Collectives: the two asked, 4 sizes (1, 4, 16, 64 KiB) x out-of-place (and in-place).
  REQUIRE(cal.at("collectives").size() == 2);
  CHECK(cal.at("collectives")[0].at("kind") == "all_reduce");
  CHECK(cal.at("collectives")[1].at("kind") == "all_gather");
  for (const auto& c : cal.at("collectives")) {
    CHECK(c.at("label") == "world");
    CHECK(c.at("ranks") == 1);
    CHECK(c.at("nodes") == 1);
    REQUIRE(c.at("points").size() == points_per_size * 4);
    CHECK(c.at("points")[0][0] == 1024);
    CHECK(c.at("points").back()[0] == 65536);
    for (const auto& pt : c.at("points")) CHECK(pt[1].get<double>() > 0);
  }
  for (const char* key : {"gemm_alone_us", "gemm_concurrent_us", "comm_alone_us", "comm_concurrent_us"})
    CHECK(cal.at("contention").at(key).get<double>() > 0);
  // Memory bandwidth: 4, 16, 64 KiB; none reaches 64 MiB, so memcpy_GBps is their median.
  const json& membw = doc.at("provenance").at("membw");
  REQUIRE(membw.size() == 3);
  CHECK(membw[0].at("bytes") == 4096);
  CHECK(membw[2].at("bytes") == 65536);
  std::vector<double> copy;
  for (const auto& row : membw) copy.push_back(row.at("copy_GBps").get<double>());
  std::sort(copy.begin(), copy.end());
  CHECK(p.compute.memcpy.gbps() == Approx(copy[1]).epsilon(1e-6));

  // What `stepsim fit --calibration` reads back from the file: the same points.
  const stepsim::calib::CalibrationData back = stepsim::calib::calibration_from_json(doc, profile_file.string());
  CHECK(back.gemm.size() == shapes.size());
  REQUIRE(back.collectives.size() == 2);
  CHECK(back.collectives[0].samples.size() == points_per_size * 4);
  CHECK(back.contention.has_value());
}

}  // namespace

// Catches: a calibrate that stops saying why it cannot run (or runs, or writes the file) when
// no device is visible. CUDA_VISIBLE_DEVICES="" hides every device, so this runs on GPU
// machines too; a build without CUDA answers from stepsim itself (stepsim-gpu is absent).
TEST_CASE("calibrate without a visible CUDA device says so in one line and exits 2", "[cli][calibrate]") {
  const stepsim::test::TempDir dir;
  const fs::path never = dir / "never_written.json";
  for (const char* what : {"gemm", "nccl", "contention", "all"}) {
    Run r = run_cli(std::string("calibrate ") + what + " --out " + never.string(), "CUDA_VISIBLE_DEVICES= ");
    INFO(r.output);
    CHECK(r.code == 2);
    // One line; a build without CUDA adds why in parentheses.
    CHECK(r.output.rfind("no CUDA device present: calibrate needs a GPU", 0) == 0);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
  CHECK_FALSE(fs::exists(never));
}

#ifdef STEPSIM_GPU_EMULATED_BINARY
// Catches, without a GPU: calibrate running other GEMM shapes, collectives or sizes than its
// arguments ask for, dropping a benchmark, or writing a file fit --calibration cannot read.
// The GPU code runs on the emulated CUDA runtime, cuBLASLt and NCCL (tests/emulated).
TEST_CASE("calibrate on the emulated GPU runs exactly the asked GEMMs, collectives and sizes and writes a refittable profile",
          "[cli][calibrate][emulated]") {
  const stepsim::test::TempDir dir;
  const fs::path profile = dir / "calibrated.json";
  Run e;
  e.code = stepsim::test::run_capture(std::string("STEPSIM_GPU_BINARY=") + STEPSIM_GPU_EMULATED_BINARY +
                                          " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 1 " +
                                          STEPSIM_BINARY + " " + kCalibrateArgs + " --out " + profile.string(),
                                      e.output);
  // One rank: NCCL runs an in-place collective as a no-op (ncclLaunchOneRank), which the
  // emulation times as 0 us and calibrate leaves out; only the out-of-place points remain.
  check_calibration(e, profile, 1);
  CHECK(stepsim::load_profile(profile).provenance.at("calibration").at("device").at("name") == "emulated H100 (CPU, tests/emulated)");
}
#endif

// The same on a real GPU (ctest: calibrate_gpu, skipped where no GPU device node exists).
// Catches what the emulated run cannot: cuBLASLt, NCCL or the MPI bootstrap failing on the
// device, or a real measurement that is zero.
TEST_CASE("calibrate on a GPU runs exactly the asked GEMMs, collectives and sizes and writes a refittable profile", "[gpu][calibrate]") {
  if (!have_gpu()) {
    WARN("no GPU device node (/dev/nvidiactl): [gpu] test skipped");
    return;
  }
  const stepsim::test::TempDir dir;
  const fs::path profile = dir / "calibrated.json";
  Run r;
  r.code = stepsim::test::run_capture("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 1 " +
                                          std::string(STEPSIM_BINARY) + " " + kCalibrateArgs + " --out " + profile.string(),
                                      r.output);
  check_calibration(r, profile, 2);  // as tests/gpu/test_nccl.cpp: in place measures too
  CHECK(stepsim::load_profile(profile).provenance.at("calibration").at("device").at("name") != "emulated H100 (CPU, tests/emulated)");
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
  const std::string data = STEPSIM_TEST_DATA;
  const stepsim::test::TempDir dir;
  auto out = dir / "fitted.json";
  // alpha-beta ranges (the default over a profile with a topology is the topology model).
  Run r = run_cli("fit --model alpha_beta --base " + std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-8x.json --nccl-tests " + data +
                  "/nccl-tests/allreduce_2x8xH100_Nebius-IB_dstack.txt --xla-collectives " + data +
                  "/xla_perf_tables/collective_perf_table.csv --xla-gemm " + data +
                  "/xla_perf_tables/matmul_perf_table.csv --out " + out.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("inter_node  all_reduce") != std::string::npos);
  stepsim::HardwareProfile p = stepsim::load_profile(out);
  REQUIRE(std::holds_alternative<stepsim::AlphaBetaModel>(p.intra_node));
  REQUIRE(std::holds_alternative<stepsim::AlphaBetaModel>(p.inter_node));
  CHECK(std::get<stepsim::AlphaBetaModel>(p.intra_node).ranges.count(stepsim::CollectiveKind::AllToAll) == 1);  // measured by XLA
  CHECK(std::get<stepsim::AlphaBetaModel>(p.inter_node).ranges.count(stepsim::CollectiveKind::AllGather) == 1);  // derived from all_reduce
  // bf16 and tf32; the fp8 column is left out: 29 of its rates exceed the dense fp8 peak.
  CHECK(p.compute.gemm_table.size() == 375 * 2);
  CHECK(std::none_of(p.compute.gemm_table.begin(), p.compute.gemm_table.end(),
                     [](const stepsim::GemmMeasurement& g) { return g.shape.dtype == stepsim::Dtype::FP8; }));
  const auto& rejected = p.provenance.at("gemm").at("rejected");
  REQUIRE(rejected.size() == 1);
  CHECK(rejected[0].at("dtype") == "fp8");
  CHECK(rejected[0].at("entries") == 375);
  CHECK(rejected[0].at("above_peak") == 29);
  CHECK(r.output.find("gemm table: left out") != std::string::npos);
  CHECK(p.provenance.at("command").get<std::string>().rfind("stepsim fit --model alpha_beta --base", 0) == 0);
}

TEST_CASE("fit takes Azure's sustained cuBLASLt GEMM table with the dtype its text names", "[cli][fit]") {
  const std::string data = STEPSIM_TEST_DATA;
  const stepsim::test::TempDir dir;
  auto out = dir / "fitted.json";
  Run r = run_cli("fit --base " + std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a100-sxm-8x.json --azure-gemm " + data +
                  "/azure_ai_benchmarking_guide/ND_A100_v4_results.md --out " + out.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  stepsim::HardwareProfile p = stepsim::load_profile(out);
  REQUIRE(p.compute.gemm_table.size() == 8);  // the 8 rows of the A100's table, around its separator row
  for (const auto& g : p.compute.gemm_table) CHECK(g.shape.dtype == stepsim::Dtype::FP16);  // "FP16" in its text
  auto at = std::find_if(p.compute.gemm_table.begin(), p.compute.gemm_table.end(), [](const stepsim::GemmMeasurement& g) {
    return g.shape.m == 802816 && g.shape.n == 192 && g.shape.k == 768;
  });
  REQUIRE(at != p.compute.gemm_table.end());
  CHECK(at->rate.tflops() == Approx(157.8));
  CHECK(p.provenance.at("inputs").dump().find("ND_A100_v4_results.md") != std::string::npos);
}

TEST_CASE("fit keeps the base's record of the parts it does not refit, through refits of refits", "[cli][fit]") {
  const std::string data = STEPSIM_TEST_DATA;
  const stepsim::test::TempDir dir;
  // An alpha-beta base (the A100 profile before it moved to the topology model).
  const std::string a100 = std::string(STEPSIM_SOURCE_DIR) + "/tests/data/profiles/a100-sxm-8x-alpha-beta.json";
  const std::string azure = " --azure-gemm " + data + "/azure_ai_benchmarking_guide/ND_A100_v4_results.md";
  auto once = dir / "once.json";
  REQUIRE(run_cli("fit --base " + a100 + azure + " --out " + once.string()).code == 0);
  stepsim::HardwareProfile p = stepsim::load_profile(once);
  // The GEMMs are this fit's; the collectives keep the nccl-tests fit the A100 profile records.
  CHECK(p.provenance.at("inputs").size() == 1);
  CHECK_FALSE(p.provenance.contains("collective_fits"));
  const auto& kept = p.provenance.at("kept_from_base").at("collectives");
  CHECK(kept.at("command").get<std::string>().find("--nccl-tests") != std::string::npos);
  CHECK(kept.at("collective_fits").size() > 0);
  // A refit of that profile for its GEMMs again carries the same record, not a record of a record.
  auto twice = dir / "twice.json";
  REQUIRE(run_cli("fit --base " + once.string() + azure + " --out " + twice.string()).code == 0);
  CHECK(stepsim::load_profile(twice).provenance.at("kept_from_base").at("collectives") == kept);
  // A refit of the collectives drops it: they are this fit's now.
  auto coll = dir / "coll.json";
  REQUIRE(run_cli("fit --base " + twice.string() + " --nccl-tests " + data +
                  "/nccl-tests/allreduce_1x8xA100-SXM4-40GB_Galvatron-test-fixture.txt --out " + coll.string())
              .code == 0);
  stepsim::HardwareProfile c = stepsim::load_profile(coll);
  CHECK_FALSE(c.provenance.at("kept_from_base").contains("collectives"));
  CHECK(c.provenance.at("kept_from_base").at("gemm").at("inputs").dump().find("ND_A100_v4_results.md") != std::string::npos);
}

TEST_CASE("a collective range a refit keeps keeps the quality of the fit that made it", "[cli][fit]") {
  const std::string data = STEPSIM_TEST_DATA;
  const stepsim::test::TempDir dir;
  auto once = dir / "once.json", twice = dir / "twice.json";
  // A base without a topology model: the fit is alpha-beta ranges (per scope).
  REQUIRE(run_cli("fit --base " + std::string(STEPSIM_SOURCE_DIR) + "/tests/data/profiles/a100-sxm-8x-alpha-beta.json --nccl-tests " + data +
                  "/nccl-tests/allreduce_2x8xH100_Nebius-IB_dstack.txt --out " + once.string())
              .code == 0);
  REQUIRE(run_cli("fit --base " + once.string() + " --azure-gemm " + data + "/azure_ai_benchmarking_guide/ND_H100_v5_results.md --out " +
                  twice.string())
              .code == 0);
  auto ranges = [](const std::filesystem::path& f) {
    std::ifstream in(f);
    return nlohmann::json::parse(in).at("collectives").at("inter_node").at("all_reduce");
  };
  const nlohmann::json fitted = ranges(once), kept = ranges(twice);
  REQUIRE(fitted.size() > 1);
  for (const char* key : {"min_bytes", "points", "r2", "max_rel_error"}) CHECK(fitted[0].contains(key));
  REQUIRE(kept.size() == fitted.size());
  for (std::size_t i = 0; i < kept.size(); ++i)
    for (const char* key : {"min_bytes", "points", "r2", "max_rel_error", "max_bytes", "beta_GBps"}) {
      INFO(i << " " << key);
      CHECK(kept[i].value(key, nlohmann::json()) == fitted[i].value(key, nlohmann::json()));
    }
}

TEST_CASE("fit given only GEMM rates above the dense peak exits 2 instead of dropping the base's table", "[cli][fit]") {
  const stepsim::test::TempDir dir;
  auto md = dir / "az.md";
  {
    std::ofstream f(md);
    f << "### GEMM CuBLASLt\nrandom initialization, FP16, 10,000 warmup iterations.\n"
         "| m | n | k | X (TFLOPS) |\n| --- | --- | --- | --- |\n| 1024 | 1024 | 1024 | 999 |\n";
  }
  Run r = run_cli("fit --base " + std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a100-sxm-8x.json --azure-gemm " +
                  md.string() + " --out " + (dir / "out.json").string());
  CHECK(r.code == 2);
  CHECK(r.output.find("az.md: no usable GEMM rate: the fp16 rates reach 999.0 TFLOP/s, above the 312.0 TFLOP/s dense peak") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "out.json"));
}

TEST_CASE("fit names the file and line of a malformed log and exits 2", "[cli][fit]") {
  const stepsim::test::TempDir dir;
  auto bad = dir / "bad_nccl.log";
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
}

TEST_CASE("only stepsim-gpu links CUDA, cuBLASLt, NCCL and MPI: stepsim itself loads none of them", "[cli][calibrate]") {
  // The GPU half of calibrate/live is exec'ed (tools/cli_common.hpp); simulate, sweep, fit...
  // must not pay cuBLASLt's ~200 MB of mapped pages and ~0.1 s load at every start.
  // The libraries its dynamic section names (NEEDED): none when it is a static PIE
  // (STEPSIM_STATIC_CLI), which loads no library at all.
  Run r;
  r.code = stepsim::test::run_capture("readelf --dynamic " + std::string(STEPSIM_BINARY), r.output);
  REQUIRE(r.code == 0);
  REQUIRE((r.output.find("Dynamic section at offset") != std::string::npos ||
           r.output.find("There is no dynamic section") != std::string::npos));  // readelf really read it
  // A binary that needs any library needs libc.
  if (r.output.find("(NEEDED)") != std::string::npos) CHECK(r.output.find("Shared library: [libc.so") != std::string::npos);
#ifdef STEPSIM_BINARY_STATIC
  CHECK(r.output.find("(NEEDED)") == std::string::npos);  // linked static: no library at all
#endif
  for (const char* lib : {"libcudart", "libcublas", "libnccl", "libmpi"}) {
    INFO(lib);
    CHECK(r.output.find(lib) == std::string::npos);
  }
}
