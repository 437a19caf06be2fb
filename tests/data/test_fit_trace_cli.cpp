// `stepsim fit --trace`: calibrate from a profiler trace of one's own job (issue 8, part 3).
#include <catch2/catch.hpp>

#include <filesystem>

#include "sim/hardware/collective_model.hpp"
#include "sim/hardware/profile.hpp"
#include "test_support.hpp"

using namespace stepsim;

TEST_CASE("fit --trace turns a real ZeRO-1 trace into a loadable profile that reproduces its all-reduces", "[fit][trace]") {
  namespace fs = std::filesystem;
  std::string trace;
  for (const auto& e : fs::directory_iterator(std::string(STEPSIM_TEST_DATA) + "/traces/li-plus_playground"))
    if (e.path().filename().string().rfind("zero1__rank_0", 0) == 0) trace = e.path().string();
  REQUIRE(!trace.empty());
  const test::TempDir dir;
  std::string out_file = dir.file("fitted.json");
  std::string out;
  // The trace records no group size; this DP-only job's groups are the world (8), so the
  // assumed groups are right here.
  int rc = test::run_capture(std::string(STEPSIM_BINARY) + " fit --trace " + trace +
                                 " --trace-assumed-groups --base " + STEPSIM_SOURCE_DIR +
                                 "/configs/hardware/a800-sxm-8x.json --out " + out_file,
                             out);
  REQUIRE(rc == 0);
  HardwareProfile p = load_profile(out_file);
  // The base profile describes the A800's levels, so fit's default refits the topology model:
  // the NVLink level from the trace's all-reduces, the network kept from the base.
  REQUIRE(p.topology);
  const HardwareProfile a800 = load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a800-sxm-8x.json");
  CHECK(p.topology->nic_bw.bytes_per_s == a800.topology->nic_bw.bytes_per_s);
  CHECK(p.topology->nvlink_busbw.bytes_per_s != a800.topology->nvlink_busbw.bytes_per_s);
  CHECK(p.topology->fitted.max_ranks == 8);
  CHECK(!p.compute.gemm_table.empty());
  // The trace's gradient all-reduce of 986,062,848 B took a median 11.128 ms (busbw ~155 GB/s).
  Time t = collective_time(p, CollectiveKind::AllReduce, Bytes{986062848}, CommDecl{"dp", 8, 1});
  CHECK(t.ms() == Approx(11.128).epsilon(0.02));
  CHECK_THAT(p.sources.at("collectives.topology.nvlink").get<std::string>(), Catch::Contains("stepsim fit"));
  CHECK_THAT(p.sources.at("collectives").get<std::string>(), Catch::Contains("network_all_to_all kept from the base profile a800-sxm-8x"));
  CHECK_THAT(p.sources.at("compute.gemm_table").get<std::string>(), Catch::Contains("fit --trace"));
  // --keep-sources keeps every entry of the base (tools/fit_profiles.sh).
  rc = test::run_capture(std::string(STEPSIM_BINARY) + " fit --keep-sources --trace " + trace + " --trace-assumed-groups --base " +
                             STEPSIM_SOURCE_DIR + "/configs/hardware/a800-sxm-8x.json --out " + out_file,
                         out);
  REQUIRE(rc == 0);
  CHECK(load_profile(out_file).sources == load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a800-sxm-8x.json").sources);

  // Without the assumption, points with unknown groups are dropped: the base profile's
  // collective model is kept unchanged.
  rc = test::run_capture(std::string(STEPSIM_BINARY) + " fit --trace " + trace + " --base " + STEPSIM_SOURCE_DIR +
                             "/configs/hardware/a800-sxm-8x.json --out " + out_file,
                         out);
  REQUIRE(rc == 0);
  HardwareProfile base = load_profile(std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a800-sxm-8x.json");
  CommDecl dp{"dp", 8, 1};
  CHECK(collective_time(load_profile(out_file), CollectiveKind::AllReduce, Bytes{986062848}, dp) ==
        collective_time(base, CollectiveKind::AllReduce, Bytes{986062848}, dp));
}
