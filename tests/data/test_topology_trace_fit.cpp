// The shipped A800 collective model (issue 15, item 5) is reproducible from its sources: the
// Ampere NVSwitch nccl-tests logs in data/ (A100 SXM4 at 2, 4 and 8 GPUs), fitted with
// the ring's local pass and carried to the A800's 8 of 12 NVLinks. Held out: the li-plus Megatron
// traces of an A800 (2-rank groups, here) and the ZeRO traces (validation cases, validate).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "calibrate/fit/topology_fit.hpp"
#include "calibrate/from_trace/trace_fit.hpp"
#include "sim/hardware/profile.hpp"
#include "test_support.hpp"
#include "trace/kineto_trace.hpp"

using namespace stepsim;

namespace {

std::vector<std::string> megatron_traces() {
  namespace fs = std::filesystem;
  std::vector<std::string> traces;
  for (const auto& e : fs::directory_iterator(std::string(STEPSIM_TEST_DATA) + "/traces/li-plus_playground"))
    if (e.path().filename().string().rfind("megatron__rank_", 0) == 0) traces.push_back(e.path().string());
  std::sort(traces.begin(), traces.end());
  return traces;
}

const std::string kA800 = std::string(STEPSIM_SOURCE_DIR) + "/configs/hardware/a800-sxm-8x.json";

// `stepsim fit ARGS --base <the shipped A800> --out ...`: the fitted profile and the shipped one.
std::pair<HardwareProfile, HardwareProfile> fit_against_a800(const test::TempDir& dir, const std::string& args) {
  std::string out_file = dir.file("fitted.json"), out;
  int rc = test::run_capture(std::string(STEPSIM_BINARY) + " fit" + args + " --base " + kA800 + " --out " + out_file, out);
  INFO(out);
  REQUIRE(rc == 0);
  std::pair<HardwareProfile, HardwareProfile> p{load_profile(out_file), load_profile(kA800)};
  REQUIRE(p.first.topology);
  REQUIRE(p.second.topology);
  return p;
}

}  // namespace

TEST_CASE("the shipped A800 NVLink level is the A100 logs' fit with the local pass, at 8 of 12 NVLinks",
          "[fit][topology]") {
  const std::string d = std::string(STEPSIM_TEST_DATA);
  const test::TempDir dir;
  auto [fitted, shipped] = fit_against_a800(
      dir, " --model topology --collectives-only --local-pass --nvlink-bandwidth-ratio 1.5 --min-bytes 33554432 --nccl-tests " +
               d + "/galvatron/profile_hardware__hardware_configs__sp_time_1nodes_8gpus_per_node.json " + d +
               "/nccl-tests/allreduce_1x8xA100-SXM4-40GB_Galvatron-test-fixture.txt " + d +
               "/nccl-tests/allreduce_4xA100-DGX_4xH100-DGX_NVLink-vs-noP2P_LLM-Insights.txt@1");
  // Same inputs, same numbers (the shipped profile came from tools/fit_profiles.sh).
  CHECK(fitted.topology->nvlink_busbw.gbps() == Approx(shipped.topology->nvlink_busbw.gbps()).epsilon(1e-9));
  CHECK(fitted.topology->nvlink_latency_scale == Approx(shipped.topology->nvlink_latency_scale).epsilon(1e-9));
  CHECK(fitted.topology->nvlink_local_bw.gbps() == Approx(shipped.topology->nvlink_local_bw.gbps()).epsilon(1e-9));
  // 2..8 ranks on one node; the A800 level is below its 200 GB/s per direction.
  CHECK(shipped.topology->fitted.min_ranks == 2);
  CHECK(shipped.topology->fitted.max_ranks == 8);
  CHECK(shipped.topology->nvlink_busbw.gbps() < 200);
  // --collectives-only: the compute and host sides stay the base's (the amp trace's numbers).
  CHECK(fitted.host.eager_op_overhead.ns == shipped.host.eager_op_overhead.ns);
  CHECK(fitted.contention.compute_slowdown == shipped.contention.compute_slowdown);
  CHECK(shipped.host.eager_op_overhead.us() == 62);
  CHECK(shipped.host.autograd_op_overhead.us() == 35);
  CHECK(shipped.contention.compute_slowdown == 0.07);
}

TEST_CASE("held out: the shipped A800 profile against the Megatron traces' 2-rank collectives; their comm slowdown",
          "[fit][trace][topology]") {
  auto files = megatron_traces();
  REQUIRE(files.size() == 8);
  std::vector<trace::KinetoTrace> traces;
  for (const auto& f : files) traces.push_back(trace::read_kineto_trace(f));
  // Groups of 2 (TP = DP = PP = 2, not recorded in the traces); the fastest occurrence per size.
  trace::TraceCalibration c = trace::trace_calibration(traces, files, {}, trace::TraceFitOptions{false, 2, true, 8});
  HardwareProfile shipped = load_profile(kA800);
  calib::TopologyFitOptions o;
  o.min_bytes = 32 << 20;
  int checked = 0;
  for (const auto& s : c.inputs.collectives) {
    // Broadcasts are not fitted kinds (topology_fit.cpp: the Megatron ones are local copies).
    if (s.kind == CollectiveKind::Broadcast || s.kind == CollectiveKind::Reduce) continue;
    auto errors = calib::topology_errors(*shipped.topology, s, o);
    if (errors.empty() || s.ranks != 2) continue;
    INFO(to_string(s.kind));
    // Measured at 64 MiB .. 400 MB: all-reduce -2.8 / -5.0 %, reduce-scatter -5.5 .. -9.5 %,
    // all-gather -7.8 .. -17.9 % (docs/collectives.md: the 2-rank groups of this host run 3-18 %
    // below the A100-derived ring; the 64 MiB all-gather is the worst).
    double limit = s.kind == CollectiveKind::AllGather ? 0.20 : 0.10;
    for (double e : errors) CHECK(e < limit);
    ++checked;
  }
  CHECK(checked == 3);
  // The same traces give the profile's comm_slowdown: collectives of one kind and size, alone and
  // beside compute (fit --trace; sources["contention"] in the profile).
  CHECK(c.data.comm_contention_keys == 2);
  CHECK(c.data.comm_slowdown == Approx(shipped.contention.comm_slowdown).epsilon(1e-9));
  CHECK(c.data.comm_slowdown > 0.01);
  CHECK(c.data.comm_slowdown < 0.1);
  std::size_t alone = 0, beside = 0;
  for (const auto& p : c.data.collectives) {
    alone += p.overlapped_fraction < 0.05;
    beside += p.overlapped_fraction >= 0.5;
  }
  CHECK(alone > 100);
  CHECK(beside > 100);
  // ...and its SMs: numSms and the grid of every bulk NCCL kernel ([16, 1, 1] on this node).
  CHECK(c.data.gpu_sms == 108);
  CHECK(c.data.collective_sms == 16);
  CHECK(c.data.collective_grid_kernels > 100);
  CHECK(c.data.gpu_sms == shipped.contention.gpu_sms);
  CHECK(c.data.collective_sms == shipped.contention.collective_sms);
}

TEST_CASE("fit --trace writes the SMs a collective holds, so GEMMs beside it run on the rest", "[fit][trace][contention]") {
  const std::string amp = [] {
    namespace fs = std::filesystem;
    for (const auto& e : fs::directory_iterator(std::string(STEPSIM_TEST_DATA) + "/traces/li-plus_playground"))
      if (e.path().filename().string().rfind("amp__rank_0", 0) == 0) return e.path().string();
    return std::string();
  }();
  REQUIRE_FALSE(amp.empty());
  const test::TempDir dir;
  auto [fitted, shipped] = fit_against_a800(dir, " --model topology --trace " + amp + " --trace-assumed-groups");
  // The amp trace's DDP all-reduces run 16 CTAs on the A800's 108 SMs, as the Megatron ones.
  CHECK(fitted.contention.gpu_sms == 108);
  CHECK(fitted.contention.collective_sms == 16);
  CHECK(fitted.contention.models_resources());
  // A GEMM beside one collective runs on 92 of 108 SMs; the cap is half the GPU.
  CHECK(fitted.contention.compute_bound_slowdown(1) == Approx(108.0 / 92.0 - 1.0));
  CHECK(fitted.contention.compute_bound_slowdown(5) == Approx(1.0));
}

TEST_CASE("fit --trace on the Megatron traces: groups of 2, and the compute side untouched with --collectives-only",
          "[fit][trace][topology]") {
  auto traces = megatron_traces();
  REQUIRE(traces.size() == 8);
  std::string list;
  for (const auto& t : traces) list += " " + t;
  const std::string base = kA800;
  const test::TempDir dir;
  auto [fitted, shipped] =
      fit_against_a800(dir, " --model topology --collectives-only --trace" + list + " --trace-group-size 2 --trace-statistic min");
  std::string out_file = dir.file("a800-topology.json"), out;
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

  int rc = test::run_capture(std::string(STEPSIM_BINARY) + " fit --model topology --base " + base + " --trace " + traces[0] +
                             " --trace-statistic mean --out " + out_file,
                         out);
  CHECK(rc == 2);
  CHECK(out.find("--trace-statistic mean") != std::string::npos);
}
