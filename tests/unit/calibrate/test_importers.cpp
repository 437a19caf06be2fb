// Importers: every nccl-tests layout in data/nccl-tests, the torch bench markdown,
// XLA's tables, calibrate's own JSON, and bad inputs naming the file and line.
#include <catch2/catch.hpp>

#include <string>

#include "calibrate/calibration_io.hpp"
#include "calibrate/importers/azure_results.hpp"
#include "calibrate/importers/galvatron_hardware.hpp"
#include "calibrate/importers/nccl_tests_log.hpp"
#include "calibrate/importers/xla_tables.hpp"
#include "sim/core/error.hpp"

using namespace stepsim;
using namespace stepsim::calib;

namespace {
const std::string kNccl = std::string(STEPSIM_TEST_DATA) + "/nccl-tests/";
const std::string kXla = std::string(STEPSIM_TEST_DATA) + "/xla_perf_tables/";

// The message of the InputError `parse` throws; "" when it parses.
template <class Parse>
std::string input_error(Parse&& parse) {
  try {
    parse();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string error_of(const std::string& text) {
  return input_error([&] { parse_nccl_tests_text(text, "bad.log"); });
}
}  // namespace

TEST_CASE("a '#'-commented nccl-tests log with rank lines gives ranks, nodes, and both column groups",
          "[calibrate][import]") {
  auto runs = import_collective_log(kNccl + "allreduce_2x8xA100-SXM4-40GB_OCI-RoCE.txt");
  REQUIRE(runs.size() == 1);
  const auto& r = runs[0];
  CHECK(r.kind == CollectiveKind::AllReduce);
  CHECK(r.ranks == 16);  // 16 "# Rank" lines
  CHECK(r.nodes == 2);   // two host names
  REQUIRE(r.samples.size() == 31 * 2);  // 8 B .. 8 GiB (31 sizes), out-of-place + in-place
  CHECK(r.samples[0].bytes.count == 8);
  CHECK(r.samples[0].time.ns == 36470);  // 36.47 us out-of-place
  CHECK_FALSE(r.samples[0].in_place);
  CHECK(r.samples[1].time.ns == 34740);  // 34.74 us in-place
  CHECK(r.samples[1].in_place);
  CHECK(r.samples.back().bytes.count == 8589934592);
}

TEST_CASE("a log embedded as Python string literals parses like the plain log", "[calibrate][import]") {
  auto runs = import_collective_log(kNccl + "allreduce_1x8xA100-SXM4-40GB_Galvatron-test-fixture.txt");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].ranks == 8);
  CHECK(runs[0].nodes == 1);
  REQUIRE(runs[0].samples.size() == 22);  // 1 MiB .. 1 GiB
  CHECK(runs[0].samples[0].time.ns == 78770);
}

TEST_CASE("markdown-indented logs without rank lines take ranks from busbw/algbw and nodes from the name",
          "[calibrate][import]") {
  // all_gather: busbw/algbw = 50.17/53.52 = 0.9374 = (n-1)/n -> n = 16; file name 2x8x -> 2 nodes.
  auto ag = import_collective_log(kNccl + "allgather_2x8xH100_GCP-A3Mega-TCPXO_dstack.txt");
  REQUIRE(ag.size() == 1);
  CHECK(ag[0].kind == CollectiveKind::AllGather);
  CHECK(ag[0].ranks == 16);
  CHECK(ag[0].nodes == 2);
  CHECK(ag[0].samples.size() == 22);
  // `wrong` instead of `#wrong`, no '#' anywhere.
  auto b200 = import_collective_log(kNccl + "allreduce_2x8xB200_GCP-A4-RoCE_dstack.txt");
  CHECK(b200[0].ranks == 16);
  CHECK(b200[0].samples.size() == 22);
  // Nebius: times with two decimals over 1000 us and a trailing "Collective test concluded" line.
  auto nebius = import_collective_log(kNccl + "allreduce_2x8xH100_Nebius-IB_dstack.txt");
  CHECK(nebius[0].kind == CollectiveKind::AllReduce);
  CHECK(nebius[0].ranks == 16);
  CHECK(nebius[0].samples.back().time.ns == 34381000);
}

TEST_CASE("files with several runs between prose give one series per run", "[calibrate][import]") {
  auto runs = import_collective_log(kNccl + "allreduce_4xA100-DGX_4xH100-DGX_NVLink-vs-noP2P_LLM-Insights.txt");
  REQUIRE(runs.size() == 4);
  for (const auto& r : runs) {
    CHECK(r.ranks == 4);  // busbw/algbw = 1.5 = 2(n-1)/n
    CHECK(r.samples.size() == 8);
  }
  CHECK(runs[0].samples[0].time.ns == 7163500);   // DGX A100 NVLink, 1 GiB
  CHECK(runs[2].samples[0].time.ns == 4367900);   // DGX H100 NVLink, 1 GiB
  auto a40 = import_collective_log(kNccl + "allreduce_A40_NVLink-vs-PCIe_SYS_NODE_LLM-Insights.txt");
  REQUIRE(a40.size() == 3);
  CHECK(a40[0].ranks == 2);  // busbw == algbw: 2(n-1)/n = 1 -> n = 2
  CHECK(a40[1].ranks == 4);
  CHECK(a40[2].ranks == 2);
}

TEST_CASE("the torch all_reduce_bench markdown table imports with t = S / algbw", "[calibrate][import]") {
  auto runs = import_collective_log(kNccl + "torch_allreduce_bench_8xH200_ml-engineering.md");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].kind == CollectiveKind::AllReduce);
  CHECK(runs[0].ranks == 8);  // 482.26 / 275.58 = 1.75
  REQUIRE(runs[0].samples.size() == 20);
  // 32 KiB at 0.82 GB/s: 32768 / 0.82e9 s = 39.96 us.
  CHECK(runs[0].samples[0].time.us() == Approx(32768 / 0.82e3).epsilon(1e-6));
}

TEST_CASE("a row with the wrong number of columns is an InputError naming file and line", "[calibrate][import]") {
  std::string log =
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
      "         1024           256     float     sum      -1    41.97    0.02    0.05      0    40.56    0.03    0.05      0\n"
      "         2048           512     float     sum      -1    43.36    0.05    0.09      0\n";
  std::string msg = error_of(log);
  CHECK(msg.find("bad.log:3:") != std::string::npos);
  CHECK(msg.find("expected 13 columns") != std::string::npos);
}

TEST_CASE("a non-numeric time is an InputError naming the line and the value", "[calibrate][import]") {
  std::string log =
      "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n"
      "         1024           256     float     sum      -1    fast    0.02    0.05      0\n";
  std::string msg = error_of(log);
  CHECK(msg.find("bad.log:3: time 'fast'") != std::string::npos);
}

TEST_CASE("a file without a result table is an InputError", "[calibrate][import]") {
  CHECK(error_of("just prose\n# nothing here\n").find("no nccl-tests result table") != std::string::npos);
}

TEST_CASE("sizes must increase within one table", "[calibrate][import]") {
  std::string log =
      "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
      "         2048           512     float     sum      -1    43.36    0.05    0.09      0\n"
      "         1024           256     float     sum      -1    41.97    0.02    0.05      0\n";
  CHECK(error_of(log).find("bad.log:3: size 1024 does not increase") != std::string::npos);
}

TEST_CASE("XLA's collective table gives one series per opcode and replica-group shape", "[calibrate][import]") {
  auto series = import_xla_collectives(kXla + "collective_perf_table.csv", "sm_90");
  // 4 opcodes (collective-permute skipped) x 3 group shapes {1x8, 2x4, 4x2}.
  REQUIRE(series.size() == 12);
  const CollectiveSeries* found = nullptr;
  for (const auto& s : series)
    if (s.kind == CollectiveKind::AllReduce && s.ranks == 8) found = &s;
  REQUIRE(found != nullptr);
  const auto& ar8 = *found;
  CHECK(ar8.ranks == 8);
  CHECK(ar8.nodes == 1);
  REQUIRE(ar8.samples.size() == 22);  // 1 KiB .. 2 GiB
  // 1024 B at 20765736 B/s -> 49.312 us (the CSV's derived_time_us).
  CHECK(ar8.samples[0].time.us() == Approx(49.312).epsilon(1e-4));
}

TEST_CASE("XLA's GEMM table maps dtypes and keeps one fp8 combination", "[calibrate][import]") {
  auto g = import_xla_gemm(kXla + "matmul_perf_table.csv", "sm_90");
  // 375 shapes x (bf16, f32, e4m3 x e4m3).
  CHECK(g.size() == 375 * 3);
  CHECK(g[0].shape.m == 256);
  CHECK(g[0].shape.dtype == Dtype::BF16);
  CHECK(g[1].shape.dtype == Dtype::TF32);  // f32 rows: TF32 tensor-core rates
  CHECK_THROWS_AS(import_xla_gemm(kXla + "matmul_perf_table.csv", "sm_999"), InputError);
}

TEST_CASE("calibrate's own output round-trips through the calibration importer", "[calibrate][import]") {
  CalibrationData d;
  CollectiveSeries s;
  s.kind = CollectiveKind::ReduceScatter;
  s.ranks = 8;
  s.nodes = 1;
  s.label = "intra-node";
  s.samples = {{Bytes{1 << 20}, Time::from_us(25.5)}, {Bytes{1 << 24}, Time::from_us(120.25)}};
  d.collectives.push_back(s);
  GemmSample g;
  g.shape = GemmShape{4096, 4096, 4096, 1, Dtype::BF16};
  g.rate = FlopRate::from_tflops(700);
  g.spread_pct = 1.5;
  d.gemm.push_back(g);
  d.contention = ContentionSample{Time::from_us(100), Time::from_us(120), Time::from_us(50), Time::from_us(55), ""};
  nlohmann::json profile{{"name", "x"}, {"provenance", {{"calibration", calibration_to_json(d)}}}};
  CalibrationData back = calibration_from_json(profile, "cal.json");
  REQUIRE(back.collectives.size() == 1);
  CHECK(back.collectives[0].kind == CollectiveKind::ReduceScatter);
  CHECK(back.collectives[0].samples[1].time.ns == 120250);
  REQUIRE(back.gemm.size() == 1);
  CHECK(back.gemm[0].rate.tflops() == Approx(700));
  REQUIRE(back.contention);
  CHECK(back.contention->gemm_concurrent.ns == 120000);
  nlohmann::json broken = profile;
  broken["provenance"]["calibration"]["collectives"][0]["points"][1] = {1024, -3};
  try {
    calibration_from_json(broken, "cal.json");
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("cal.json: /provenance/calibration/collectives/0/points/1") != std::string::npos);
  }
}

TEST_CASE("Galvatron's sp_time JSON gives one series per collective and group, times in ms as nccl-tests wrote them",
          "[calibrate][import]") {
  auto series = import_collective_log(std::string(STEPSIM_TEST_DATA) +
                                      "/galvatron/profile_hardware__hardware_configs__sp_time_1nodes_8gpus_per_node.json");
  REQUIRE(series.size() == 6);  // all_reduce and all_to_all on 2, 4 and 8 ranks
  int all_reduce = 0;
  for (const auto& s : series) {
    CHECK(s.nodes == 1);
    CHECK(s.samples.size() == 11);  // 1 MB .. 1024 MB, factor 2
    CHECK(s.samples.front().bytes.count == 1 << 20);
    CHECK(s.samples.back().bytes.count == 1LL << 30);
    if (s.kind == CollectiveKind::AllReduce) ++all_reduce;
    if (s.kind == CollectiveKind::AllReduce && s.ranks == 8) {
      CHECK(s.samples.front().time.us() == Approx(78.95));  // "allreduce_size_8_1MB_time": 0.07895
      CHECK(s.samples.back().time.us() == Approx(8140.9));
    }
  }
  CHECK(all_reduce == 3);
}

TEST_CASE("a Galvatron file with a key of another form or a non-positive time is a one-line error", "[calibrate][import]") {
  auto error = [](const std::string& text) { return input_error([&] { parse_galvatron_sp_time(text, "sp.json"); }); };
  CHECK(is_galvatron_sp_time(R"({"allreduce_size_8_1MB_time": 0.07})"));
  CHECK_FALSE(is_galvatron_sp_time("# nThread 1 nGpus 8\n"));
  CHECK(error(R"({"allreduce_size_8_1MB_time": 0.07, "allreduce_size_8_consec_1": 120.5})")
            .find("sp.json: /allreduce_size_8_consec_1: not a Galvatron timing key") != std::string::npos);
  CHECK(error(R"({"allreduce_size_8_1MB_time": -1})").find("sp.json: /allreduce_size_8_1MB_time: -1: expected a positive time") !=
        std::string::npos);
  CHECK(error(R"({"allreduce_size_99999999999999999999_1MB_time": 0.5})").find("expected a group of 1 to 1,000,000 ranks") !=
        std::string::npos);
  CHECK(error("{not json").find("sp.json: invalid JSON") != std::string::npos);
}

TEST_CASE("Azure's GEMM CuBLASLt table: rows around the separator row, the dtype its text names", "[calibrate][import]") {
  auto h100 = import_azure_gemm(std::string(STEPSIM_TEST_DATA) + "/azure_ai_benchmarking_guide/ND_H100_v5_results.md");
  REQUIRE(h100.size() == 9);
  for (const auto& g : h100) CHECK(g.shape.dtype == Dtype::FP8);  // "..., FP8, and 10,000 warmup iterations."
  CHECK(h100[2].shape.m == 4096);
  CHECK(h100[2].shape.batch == 1);
  CHECK(h100[2].rate.tflops() == Approx(1216.9));
  CHECK(h100[6].shape.n == 2145);  // the first row after `| \---------- | ...`
  CHECK(h100[6].source.ends_with("ND_H100_v5_results.md:30"));
  // The guide's later export: PrettyTable columns with a batch size, the benchmark's dtype string.
  auto later = parse_azure_gemm(
      "### GEMM CuBLASLt\n"
      "The results shown below are with random initialization (best representation of real-life workloads) fp16, and 10000 "
      "warmup iterations.\n\n"
      "| M | N | K | Batch Size | Time(us) | TFLOPS |\n|---|---|---|---|---|---|\n| 4096 | 4096 | 4096 | 2 | 1205.3 | 228.1 |\n",
      "later.md");
  REQUIRE(later.size() == 1);
  CHECK(later[0].shape.dtype == Dtype::FP16);
  CHECK(later[0].shape.batch == 2);
  CHECK(later[0].rate.tflops() == Approx(228.1));
}

TEST_CASE("an Azure results file without one dtype, with two machines' columns or a bad cell is a one-line error",
          "[calibrate][import]") {
  auto error = [](const std::string& text) { return input_error([&] { parse_azure_gemm(text, "az.md"); }); };
  const std::string table = "| m | n | k | ND H100 V5 (TFLOPS) |\n| --- | --- | --- | --- |\n| 1024 | 1024 | 1024 | 274.1 |\n";
  CHECK(error("## HBM Bandwidth\n| Copy | 2.9 |\n").find("az.md: no '### GEMM CuBLASLt' section") != std::string::npos);
  CHECK(error("### GEMM CuBLASLt\nrandom initialization, 10,000 warmup iterations.\n" + table)
            .find("az.md:1: expected the GEMM section's text to name one dtype (FP8, FP16, BF16, TF32, FP32), found none") !=
        std::string::npos);
  CHECK(error("### GEMM CuBLASLt\nFP8 here, FP16 there.\n" + table).find("found fp16, fp8") != std::string::npos);
  CHECK(error("### GEMM CuBLASLt\nFP8.\n| m | n | k | ND H200 V5 (TFLOPS) | ND H100 v5 (TFLOPS) |\n")
            .find("az.md:3: expected one TFLOPS column, found 2 (ND H200 V5 (TFLOPS), ND H100 v5 (TFLOPS))") != std::string::npos);
  CHECK(error("### GEMM CuBLASLt\nFP8.\n| m | n | k | TFLOPS |\n| 1024 | 1024 | x | 274.1 |\n")
            .find("az.md:4: k 'x' is not a positive integer") != std::string::npos);
  CHECK(error("### GEMM CuBLASLt\nFP8.\n| m | n | k | TFLOPS |\n| 1024 | 1024 | 1024 | -3 |\n")
            .find("az.md:4: TFLOPS '-3' is not a positive number") != std::string::npos);
  CHECK(error("### GEMM CuBLASLt\nfp4e2m1.\n" + table).find("az.md:1: fp4e2m1 rates: stepsim has no fp4 dtype") !=
        std::string::npos);
}
