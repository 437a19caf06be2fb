// nccl-tests logs that chain several binaries in one file (issue 15, item 4): each table takes
// its collective from the "Collective test starting: X_perf" line of its own section, and the
// sections of binaries the collective model has no kind for (sendrecv_perf) are skipped.
#include <catch2/catch.hpp>

#include <string>

#include "calibrate/importers/nccl_tests_log.hpp"
#include "sim/core/error.hpp"

using namespace stepsim;
using namespace stepsim::calib;

namespace {
const std::string kCluster = std::string(STEPSIM_TEST_DATA) + "/nccl-tests/h100-cluster01-xxrjun/";
}

TEST_CASE("a ten-node log with five sections gives four series, each of its own collective, and skips sendrecv",
          "[calibrate][import]") {
  // nccl_N10_G1.log runs all_reduce, all_gather, reduce_scatter, alltoall and sendrecv in turn,
  // on 10 ranks (10 rank lines, 10 host names). Before the fix every table took the collective of
  // the last "concluded" line and the sendrecv table (busbw = algbw) stopped the import.
  auto runs = import_collective_log(kCluster + "nccl_N10_G1.log");
  REQUIRE(runs.size() == 4);
  CHECK(runs[0].kind == CollectiveKind::AllReduce);
  CHECK(runs[1].kind == CollectiveKind::AllGather);
  CHECK(runs[2].kind == CollectiveKind::ReduceScatter);
  CHECK(runs[3].kind == CollectiveKind::AllToAll);
  for (const auto& r : runs) {
    CHECK(r.ranks == 10);
    CHECK(r.nodes == 10);
    CHECK(r.samples.size() == 20);  // 32 MiB .. 16 GiB: 10 sizes, out-of-place + in-place
  }
  // First all_reduce row: 33554432 B in 1405.25 us (line 20 of the file).
  CHECK(runs[0].samples[0].bytes.count == 33554432);
  CHECK(runs[0].samples[0].time.ns == 1405250);
}

TEST_CASE("a two-node log of alltoall and sendrecv gives the alltoall series only", "[calibrate][import]") {
  auto runs = import_collective_log(kCluster + "nccl_N2_G1_cnode3-002_cnode3-003.log");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].kind == CollectiveKind::AllToAll);
  CHECK(runs[0].ranks == 2);
  CHECK(runs[0].nodes == 2);
}

TEST_CASE("a log holding only a sendrecv section is an error naming the skipped section", "[calibrate][import]") {
  const std::string text =
      "# Collective test starting: sendrecv_perf\n"
      "#  Rank  0 Group  0 Pid 1 on a device  0 [0000:1b:00] GPU\n"
      "#  Rank  1 Group  0 Pid 2 on b device  0 [0000:1b:00] GPU\n"
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong\n"
      "    33554432       4194304    double     sum      -1  1000.0   33.55   33.55       0\n"
      "# Collective test concluded: sendrecv_perf\n";
  std::string err;
  try {
    parse_nccl_tests_text(text, "sr.log");
  } catch (const InputError& e) {
    err = e.what();
  }
  CHECK(err.find("sr.log") != std::string::npos);
  CHECK(err.find("sendrecv") != std::string::npos);
}
