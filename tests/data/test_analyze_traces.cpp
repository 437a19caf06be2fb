// `analyze` on the real Kineto traces in data/traces.
//
// Expected values were verified with an independent Python scan (json + gzip, decimal
// arithmetic for ts): step numbers and durations are the ProfilerStep#N spans; collective
// counts are the NCCL kernels (name contains ncclKernel / ncclDevKernel) whose launching CUDA
// runtime call (same args.correlation) starts inside a step span, the kind taken from the
// kernel name. The script is reproduced in /work/notes/readme-analyze.md.

#include <catch2/catch.hpp>
#include <algorithm>
#include <map>

#include "trace/trace_analysis.hpp"

using namespace stepsim;
using namespace stepsim::trace;

namespace {

const std::string kTraces = std::string(STEPSIM_TEST_DATA) + "/traces/";

struct Expected {
  std::string file;
  std::vector<std::pair<std::int64_t, std::int64_t>> steps;  // number, duration ns
  std::map<TraceCollective, std::size_t> by_kernel_name;
};

// Counts by the kernel-name kind of each collective (independent of the CPU-op resolution,
// which e.g. turns nccl:all_to_all's SendRecv kernels into all_to_all).
std::map<TraceCollective, std::size_t> kernel_name_counts(const KinetoTrace& t, const TraceAnalysis& a) {
  std::map<TraceCollective, std::size_t> out;
  for (const auto& r : a.collectives) ++out[collective_from_kernel_name(t.name_of(t.gpu_ops[r.op]))];
  return out;
}

void check_trace(const Expected& e) {
  INFO(e.file);
  KinetoTrace t = read_kineto_trace(kTraces + e.file);
  TraceAnalysis a = analyze_trace(t, AnalyzeOptions{});
  REQUIRE(a.steps.size() == e.steps.size());
  for (std::size_t i = 0; i < e.steps.size(); ++i) {
    CHECK(a.steps[i].number == e.steps[i].first);
    CHECK(a.steps[i].metrics.overlap.step_time.ns == e.steps[i].second);
    const auto& m = a.steps[i].metrics;
    // Invariants of DESIGN.md 5 on measured data.
    CHECK(m.overlap.exposed_comm + m.overlap.overlapped_comm == m.overlap.comm_time);
    CHECK(m.forward + m.backward + m.optimizer == m.overlap.step_time);
    CHECK(m.overlap.overlap_pct >= 0.0);
    CHECK(m.overlap.overlap_pct <= 100.0);
  }
  CHECK(kernel_name_counts(t, a) == e.by_kernel_name);
}

using TC = TraceCollective;
const std::string kLi = "li-plus_playground/";

}  // namespace

TEST_CASE("analyze finds the ProfilerStep spans and NCCL kernels of the DDP, AMP, ZeRO traces", "[trace][data]") {
  check_trace({kLi + "ddp__rank_0__n31-145-242_966278.1702612104595.pt.trace.json.gz",
               {{3, 117714000}, {4, 116221000}, {5, 106726000}, {6, 108221000}},
               {{TC::AllReduce, 22}, {TC::Broadcast, 8}}});
  check_trace({kLi + "amp__rank_0__n122-248-036_72124.1703171200318192762.pt.trace.json.gz",
               {{3, 164526000}, {4, 78720000}, {5, 115325000}, {6, 120139000}},
               {{TC::AllReduce, 20}, {TC::Broadcast, 8}}});
  check_trace({kLi + "zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz",
               {{11, 346639000}, {12, 345032000}},
               {{TC::AllGather, 4}, {TC::AllReduce, 10}}});
  check_trace({kLi + "zero2__rank_0__n122-248-036_412047.1703670170346574004.pt.trace.json.gz",
               {{11, 334269000}, {12, 331216000}},
               {{TC::AllGather, 4}, {TC::AllReduce, 10}}});
}

TEST_CASE("ZeRO-1's gradient all-reduces run after backward: zero overlap; ZeRO-2's overlap", "[trace][data]") {
  // DeepSpeed ZeRO-1 forces overlap_comm=False and reduces after the whole backward
  // (li-plus README); ZeRO-2 reduces buckets from gradient hooks during backward.
  auto z1 = analyze_trace(read_kineto_trace(kTraces + kLi + "zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz"), {});
  for (const auto& s : z1.steps) {
    CHECK(s.metrics.overlap.comm_time.ns > 0);
    CHECK(s.metrics.overlap.overlapped_comm.ns == 0);
    CHECK(s.metrics.overlap.overlap_pct == 0.0);
  }
  std::size_t big_ar = 0;
  for (const auto& r : z1.collectives) {
    if (r.kind != TC::AllReduce || r.bytes.count < (1 << 20)) continue;
    ++big_ar;
    CHECK(r.exposed == r.duration);
    CHECK(r.dtype == "bf16");  // from nccl:all_reduce Input type c10::BFloat16
  }
  CHECK(big_ar == 6);  // 3 bf16 gradient buckets per step, 2 steps
  auto z2 = analyze_trace(read_kineto_trace(kTraces + kLi + "zero2__rank_0__n122-248-036_412047.1703670170346574004.pt.trace.json.gz"), {});
  for (const auto& s : z2.steps) CHECK(s.metrics.overlap.overlap_pct > 10.0);
}

TEST_CASE("analyze of the 8 Megatron ranks gives a per-rank table and the straggler spread", "[trace][data]") {
  std::vector<KinetoTrace> traces;
  const std::vector<std::string> files = {
      "megatron__rank_0__n122-248-036_1199018.1706785452076293286.pt.trace.json.gz",
      "megatron__rank_1__n122-248-036_1199019.1706785452076112003.pt.trace.json.gz",
      "megatron__rank_2__n122-248-036_1199020.1706785451994540517.pt.trace.json.gz",
      "megatron__rank_3__n122-248-036_1199021.1706785452554467549.pt.trace.json.gz",
      "megatron__rank_4__n122-248-036_1199022.1706785452394817210.pt.trace.json.gz",
      "megatron__rank_5__n122-248-036_1199023.1706785452343368161.pt.trace.json.gz",
      "megatron__rank_6__n122-248-036_1199024.1706785452448235723.pt.trace.json.gz",
      "megatron__rank_7__n122-248-036_1199025.1706785452520729197.pt.trace.json.gz"};
  // Given in reverse order: the job sorts by distributedInfo.rank.
  for (auto it = files.rbegin(); it != files.rend(); ++it) traces.push_back(read_kineto_trace(kTraces + kLi + *it));
  JobAnalysis job = analyze_job(traces, AnalyzeOptions{});
  REQUIRE(job.ranks.size() == 8);
  const std::int64_t step_ns[8] = {621569000, 621913000, 620894000, 621184000,
                                   620929000, 620986000, 623475000, 622085000};
  // Pipeline stage 0 (ranks 0-3) and stage 1 (4-7) launch different numbers of collectives.
  const std::map<TC, std::size_t> stage0 = {{TC::AllGather, 147}, {TC::AllReduce, 5}, {TC::Broadcast, 6},
                                            {TC::ReduceScatter, 97}, {TC::SendRecv, 3}};
  const std::map<TC, std::size_t> stage1 = {{TC::AllGather, 149}, {TC::AllReduce, 11}, {TC::Broadcast, 6},
                                            {TC::ReduceScatter, 99}, {TC::SendRecv, 3}};
  for (int r = 0; r < 8; ++r) {
    INFO("rank " << r);
    CHECK(job.ranks[static_cast<std::size_t>(r)].rank == r);
    REQUIRE(job.ranks[static_cast<std::size_t>(r)].steps.size() == 1);
    CHECK(job.ranks[static_cast<std::size_t>(r)].steps[0].metrics.overlap.step_time.ns == step_ns[r]);
    const KinetoTrace& t = traces[static_cast<std::size_t>(7 - r)];
    CHECK(kernel_name_counts(t, job.ranks[static_cast<std::size_t>(r)]) == (r < 4 ? stage0 : stage1));
  }
  REQUIRE(job.stragglers.size() == 1);
  // The two pipeline stages' collectives differ: no wait is measured where they cannot be matched.
  CHECK(job.rank_waits.empty());
  // Spread: max 623475000 (rank 6) - min 620894000 (rank 2) = 2581000 ns.
  CHECK(job.stragglers[0].step == 9);
  CHECK((job.stragglers[0].max_step - job.stragglers[0].min_step).ns == 2581000);
  auto j = job_to_json(job);
  CHECK(j["schema"] == "stepsim.analyze/1");
  CHECK(j["traces"].size() == 8);
  CHECK(j["steps"].size() == 1);
  CHECK(j["stragglers"].size() == 1);
}

TEST_CASE("analyze reads HTA's test traces (new record_param_comms args, SendRecv, sampled)", "[trace][data]") {
  check_trace({"hta/nccl_parser_config__nccl_data.json.gz",
               {{4, 222442191}, {5, 219726905}, {6, 224936243}},
               {{TC::AllReduce, 15}, {TC::Broadcast, 6}}});
  check_trace({"hta/trace_diff__test__test.json.gz",
               {{1009, 100298000}, {1010, 122149000}, {1011, 166403000}, {1012, 81971000}, {1013, 107230000}, {1014, 166350000}},
               {{TC::AllReduce, 21}, {TC::SendRecv, 43}}});
  check_trace({"hta/trace_filter__sampled_rank-0.json.gz", {{551, 607312000}, {552, 622928000}}, {{TC::SendRecv, 10}}});
  check_trace({"hta/trace_filter__sampled_rank-1.json.gz", {{551, 607904000}, {552, 630639000}}, {{TC::SendRecv, 10}}});
  // nccl_data records sizes in the kernel args: all 15 all-reduces have S and a real group of 2.
  auto a = analyze_trace(read_kineto_trace(kTraces + "hta/nccl_parser_config__nccl_data.json.gz"), {});
  for (const auto& r : a.collectives) {
    CHECK(r.group_size == 2);
    CHECK_FALSE(r.group_assumed);
    CHECK(r.bytes.count > 0);
  }
}

TEST_CASE("analyze reads HTA's larger test traces", "[trace][data][slow]") {
  check_trace({"hta/df_index_resolver__df_index_resolver.json.gz",
               {{2, 345770000}, {3, 365256000}, {4, 346097000}, {5, 344269000}, {6, 336328000}},
               {{TC::AllReduce, 2020}}});
  check_trace({"hta/negative_queue_length_values_check__rank0.json.gz",
               {{550, 209748000}, {551, 216483000}, {552, 216119000}, {553, 215467000}, {554, 216216000}},
               {{TC::SendRecv, 80}}});
  check_trace({"hta/trace_diff__control__control.json.gz",
               {{1009, 75473000}, {1010, 76940000}, {1011, 76212000}, {1012, 76727000}, {1013, 78473000}, {1014, 81120000}},
               {{TC::AllReduce, 18}, {TC::SendRecv, 42}}});
}

TEST_CASE("analyze gives identical results across runs", "[trace][data]") {
  const std::string f = kTraces + kLi + "zero2__rank_0__n122-248-036_412047.1703670170346574004.pt.trace.json.gz";
  auto once = job_to_json(analyze_job({read_kineto_trace(f)}, AnalyzeOptions{})).dump();
  auto twice = job_to_json(analyze_job({read_kineto_trace(f)}, AnalyzeOptions{})).dump();
  CHECK(once == twice);
}

TEST_CASE("--steps selects ProfilerStep numbers", "[trace][data]") {
  AnalyzeOptions o;
  parse_step_range("4-5", o);
  auto a = analyze_trace(read_kineto_trace(kTraces + kLi + "ddp__rank_0__n31-145-242_966278.1702612104595.pt.trace.json.gz"), o);
  REQUIRE(a.steps.size() == 2);
  CHECK(a.steps[0].number == 4);
  CHECK(a.steps[1].number == 5);
  CHECK(a.steps_in_trace == 4);
  // mean step = (116221000 + 106726000) / 2 = 111473500
  CHECK(a.mean.overlap.step_time.ns == 111473500);
}

TEST_CASE("analyze reports the li-plus ZeRO traces' peak reserved (Kineto's Total Reserved) next to the allocated peak", "[trace][data]") {
  // Every CUDA "[memory]" event carries torch.cuda.memory_reserved() as "Total Reserved"
  // (c10::reportMemoryUsageToProfiler); the caching allocator never released a segment in
  // these steps, so each step's peak is the trace's maximum: 21,944,598,528 B (20.44 GiB) for
  // ZeRO-1 and 23,456,645,120 B (21.85 GiB) for ZeRO-2, against allocated peaks of 16.75 and
  // 18.61 GiB (issue 14).
  auto z1 = analyze_trace(read_kineto_trace(kTraces + kLi + "zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz"), {});
  auto z2 = analyze_trace(read_kineto_trace(kTraces + kLi + "zero2__rank_0__n122-248-036_412047.1703670170346574004.pt.trace.json.gz"), {});
  for (const auto& s : z1.steps) CHECK(s.metrics.peak_reserved.count == 21'944'598'528LL);
  for (const auto& s : z2.steps) CHECK(s.metrics.peak_reserved.count == 23'456'645'120LL);
  CHECK(z1.mean.peak_reserved.count == 21'944'598'528LL);
  CHECK(z1.mean.peak_reserved > z1.mean.peak_memory);
  CHECK(metrics_to_json(z2.mean).at("peak_reserved_bytes").get<std::int64_t>() == 23'456'645'120LL);
}

TEST_CASE("analyze's result does not depend on keeping the host operators or fit's records", "[trace][data]") {
  // The analysis reads no host operator or Python frame, no GEMM or attention op span and no
  // memory-bound op span: dropping them (analyze without --idle; fit_records, which only fit
  // --trace reads) changes no number of its JSON, on a trace with Python stacks and recorded
  // shapes (zero1) and one without (HTA).
  const auto fit_span = [](const CpuSpan& s) { return s.kind == CpuSpan::Kind::Gemm || s.kind == CpuSpan::Kind::Attention; };
  for (const std::string file : {kLi + "zero1__rank_0__n122-248-036_415351.1703670656319922979.pt.trace.json.gz",
                                 std::string("hta/nccl_parser_config__nccl_data.json.gz")}) {
    INFO(file);
    std::vector<KinetoTrace> with, without;
    with.push_back(read_kineto_trace(kTraces + file));
    without.push_back(read_kineto_trace(kTraces + file, ReadOptions{.host_ops = false, .fit_records = false}));
    CHECK_FALSE(with[0].host_ops.empty());
    CHECK(without[0].host_ops.empty());
    CHECK(without[0].python_ops.empty());
    if (file.starts_with(kLi)) {  // recorded with shapes: GEMM spans and memory-bound ops kept by default
      CHECK(std::any_of(with[0].cpu.begin(), with[0].cpu.end(), fit_span));
      CHECK_FALSE(with[0].inputs.empty());
      CHECK_FALSE(with[0].memory_ops.empty());
    }
    CHECK_FALSE(std::any_of(without[0].cpu.begin(), without[0].cpu.end(), fit_span));
    CHECK(without[0].inputs.empty());
    CHECK(without[0].memory_ops.empty());
    CHECK(job_to_json(analyze_job(without, AnalyzeOptions{})).dump() == job_to_json(analyze_job(with, AnalyzeOptions{})).dump());
  }
}

// Catches: the wait for the slowest rank measured from ranks whose clocks are not aligned, from
// collectives matched across ranks that did not run the same ones, or not at all.
// Expected values from an independent Python scan of the eight traces (json + gzip): per
// ProfilerStep, the NCCL kernels whose launch (cuda_runtime or cuda_driver call of the same
// correlation) starts inside the span, in start order; a step is matched where every rank has the
// same kernel names; each rank's clock offset is the median over the step's collectives of its
// kernel end minus rank 0's; per collective, the latest aligned start minus the mean aligned
// start, summed over the step. Step 10's ranks ran 28 to 36 collectives: not matched.
TEST_CASE("analyze of the eight modded-nanogpt H100 ranks measures the wait for the slowest rank at each collective",
          "[trace][data]") {
  std::vector<KinetoTrace> traces;
  for (int r = 0; r < 8; ++r) {
    const std::string ids[8] = {"e049e", "6bd4b", "cec8d", "d9142", "fd335", "c01bc", "220ff", "8ad3d"};
    traces.push_back(read_kineto_trace(kTraces + "modded-nanogpt/2025-12-11_NorMuonOptimsAndFixes__rank" + std::to_string(r) + "-" +
                                       ids[r] + "-chrome-trace.json.gz"));
  }
  JobAnalysis job = analyze_job(traces, AnalyzeOptions{});
  REQUIRE(job.rank_waits.size() == 3);
  struct Want {
    std::int64_t step;
    std::size_t collectives;
    double wait_ms, largest_ms, end_spread_us;
  };
  const Want want[3] = {{11, 20, 11.279, 4.417, 19.3}, {12, 8, 10.089, 4.667, 38.0}, {13, 20, 7.184, 4.193, 13.2}};
  for (int i = 0; i < 3; ++i) {
    const RankWaitRow& w = job.rank_waits[static_cast<std::size_t>(i)];
    INFO("step " << w.step);
    CHECK(w.step == want[i].step);
    CHECK(w.collectives == want[i].collectives);
    CHECK(w.wait.ms() == Approx(want[i].wait_ms).margin(0.002));
    CHECK(w.largest_wait.ms() == Approx(want[i].largest_ms).margin(0.002));
    CHECK(w.largest_index == 0);  // the first reduce-scatter of the backward
    CHECK(w.largest_kind == TraceCollective::ReduceScatter);
    CHECK(w.end_spread.us() == Approx(want[i].end_spread_us).margin(0.2));
  }
  // The job's metrics carry it as simulate's do: per measured step, and their mean.
  CHECK(job.mean.rank_wait.ns == (job.rank_waits[0].wait.ns + job.rank_waits[1].wait.ns + job.rank_waits[2].wait.ns) / 3);
  for (const auto& [n, m] : job.steps) CHECK(m.rank_wait.ns == (n == 10 ? 0 : job.rank_waits[static_cast<std::size_t>(n - 11)].wait.ns));
  const auto j = job_to_json(job);
  CHECK(j.at("mean").at("metrics").at("rank_wait_ns").get<std::int64_t>() == job.mean.rank_wait.ns);
  REQUIRE(j.at("rank_waits").size() == 3);
  CHECK(j.at("rank_waits")[0].at("wait_ns").get<std::int64_t>() == job.rank_waits[0].wait.ns);
  CHECK(job_to_text(job).find("slowest-rank wait at the collectives") != std::string::npos);
}

// Catches: cuBLAS's Hopper GEMMs (nvjet_*, no GEMM word in the name) and modded-nanogpt's Triton
// matmuls (XXT_kernel, ba_plus_cAA_kernel) counted as the compute class, which left a modern H100
// trace's GEMM row nearly empty (0.3 ms of a 41 ms step) beside a prediction's. Expected values: a
// Python scan of the trace (kernels named nvjet_*, XXT_kernel, ba_plus_cAA_kernel, or with a GEMM
// word, attention kernels aside; a kernel belongs to the step its launch falls in, or its GPU start
// where no launch is recorded): 1,006 kernels and 57.925 ms over the four steps.
TEST_CASE("analyze counts an H100 trace's nvjet and Triton matmul kernels as GEMMs", "[trace][data]") {
  const KinetoTrace t = read_kineto_trace(kTraces + "modded-nanogpt/2025-12-11_NorMuonOptimsAndFixes__rank0-e049e-chrome-trace.json.gz");
  const TraceAnalysis a = analyze_trace(t, AnalyzeOptions{});
  REQUIRE(a.steps.size() == 4);
  std::int64_t gemm_kernels = 0, compute_kernels = 0;
  Time gemm_time;
  for (const StepAnalysis& s : a.steps) {
    const ClassRow& gemm = s.classes.rows[static_cast<std::size_t>(KernelClass::Gemm)];
    gemm_kernels += gemm.kernels;
    gemm_time = gemm_time + gemm.time;
    compute_kernels += s.classes.rows[static_cast<std::size_t>(KernelClass::Compute)].kernels;
  }
  CHECK(gemm_kernels == 1006);
  CHECK(gemm_time.us() == Approx(57925.486).margin(0.01));
  CHECK(compute_kernels == 0);
}
