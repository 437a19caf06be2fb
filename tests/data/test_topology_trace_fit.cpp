// The shipped A800 collective model is reproducible from its sources (issue 15, item 5): the
// li-plus Megatron traces, groups of 2 stated with --trace-group-size, the fastest occurrence per
// size. The ZeRO traces of the same host are validation cases and are not inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "sim/hardware/profile.hpp"
#include "test_support.hpp"

using namespace stepsim;

TEST_CASE("fit --model topology --trace on the Megatron traces reproduces the shipped A800 NVLink level",
          "[fit][trace][topology]") {
  namespace fs = std::filesystem;
  std::vector<std::string> traces;
  for (const auto& e : fs::directory_iterator(std::string(STEPSIM_SHARED_DATA) + "/traces/li-plus_playground"))
    if (e.path().filename().string().rfind("megatron__rank_", 0) == 0) traces.push_back(e.path().string());
  std::sort(traces.begin(), traces.end());
  REQUIRE(traces.size() == 8);
  std::string list;
  for (const auto& t : traces) list += " " + t;
  const std::string base = std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a800-sxm-8x.json";
  const test::TempDir dir;
  std::string out_file = dir.file("a800-topology.json");
  std::string out;
  int rc = test::run_capture(std::string(STEPSIM_BINARY) + " fit --model topology --collectives-only --base " + base +
                                 " --trace" + list + " --trace-group-size 2 --trace-statistic min --out " + out_file,
                             out);
  INFO(out);
  REQUIRE(rc == 0);
  HardwareProfile fitted = load_profile(out_file);
  HardwareProfile shipped = load_profile(base);
  REQUIRE(fitted.topology);
  REQUIRE(shipped.topology);
  // Same inputs, same numbers (the shipped profile came from tools/fit_profiles.sh).
  CHECK(fitted.topology->nvlink_busbw.gbps() == Approx(shipped.topology->nvlink_busbw.gbps()).epsilon(1e-9));
  CHECK(fitted.topology->nvlink_latency_scale == Approx(shipped.topology->nvlink_latency_scale).epsilon(1e-9));
  // Fitted on groups of 2 on one node only; below the A800's 200 GB/s per direction.
  CHECK(fitted.topology->fitted.min_ranks == 2);
  CHECK(fitted.topology->fitted.max_ranks == 2);
  CHECK(fitted.topology->nvlink_busbw.gbps() < 200);
  // --collectives-only: the GEMM table and efficiencies stay the base profile's.
  CHECK(fitted.compute.gemm_table.size() == shipped.compute.gemm_table.size());
  CHECK(fitted.compute.gemm_efficiency == shipped.compute.gemm_efficiency);
  // ...and so do the host costs, the contention and the attention rates: the traces' launch
  // spacing, overlapped GEMMs and flash kernels are not applied (they once were, and replaced
  // the A800's amp-trace host costs with the Megatron trace's).
  CHECK(fitted.host.eager_op_overhead.ns == shipped.host.eager_op_overhead.ns);
  CHECK(fitted.host.autograd_op_overhead.ns == shipped.host.autograd_op_overhead.ns);
  CHECK(fitted.host.kernel_launch_overhead.ns == shipped.host.kernel_launch_overhead.ns);
  CHECK(fitted.contention.compute_slowdown == shipped.contention.compute_slowdown);
  CHECK(fitted.compute.attention_rates[0]->forward == shipped.compute.attention_rates[0]->forward);
  CHECK_FALSE(fitted.provenance.contains("trace_compute"));
  // The shipped numbers are the amp trace's (tools/fit_compute_from_trace.py; sources in the profile).
  CHECK(shipped.host.eager_op_overhead.us() == 62);
  CHECK(shipped.host.autograd_op_overhead.us() == 35);
  CHECK(shipped.contention.compute_slowdown == 0.07);

  rc = test::run_capture(std::string(STEPSIM_BINARY) + " fit --model topology --base " + base + " --trace " + traces[0] +
                             " --trace-statistic mean --out " + out_file,
                         out);
  CHECK(rc == 2);
  CHECK(out.find("--trace-statistic mean") != std::string::npos);
}
