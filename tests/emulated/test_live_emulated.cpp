// The GPU code path of live mode and calibration, run against the emulated CUDA / cuBLASLt /
// NCCL API of fake_cuda.cpp (no GPU needed, so it runs in CI). This checks what a GPU run
// would take on trust: that the executor issues exactly the lowered calls, on the right
// streams, with buffers large enough for every GEMM, copy and collective; that its events
// time each op and the step; that every allocation is freed; and that the benchmarks' timing
// arithmetic (median of loop means, TFLOP/s, nccl-tests sizes and in-place offsets) is right.
// It cannot say anything about real GPU speed: that is the [gpu] tests' job.
#include <catch2/catch.hpp>

#include <cstdio>
#include <sstream>
#include <type_traits>
#include <variant>

#include "kernels/gpu/bench.hpp"
#include "live/live_executor.hpp"
#include "kernels/gpu/mpi_bootstrap.hpp"
#include "live/lowering.hpp"
#include "live/measured.hpp"
#include "sim/analysis/metrics.hpp"
#include "sim/config/experiment.hpp"
#include "sim/core/overloaded.hpp"
#include "sim/exec/engine.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"
#include "tests/emulated/fake_cuda.hpp"

using namespace stepsim;

namespace {

// MPI may be initialised once per process: one session for every test (a singleton world).
const gpu::MpiSession& mpi() {
  static gpu::MpiSession session;
  return session;
}

std::string violations_text() {
  std::string out;
  for (const auto& v : fake_cuda::violations()) out += v + "\n";
  return out;
}

struct LiveCase {
  Experiment e;
  Program p;
  live::LoweredProgram l;
  live::LiveRun run;
};

LiveCase run_live(const std::string& experiment, int steps, int warmup, bool price_one_rank = false) {
  LiveCase c{load_experiment(std::string(STEPSIM_SOURCE_DIR) + "/" + experiment), {}, {}, {}};
  c.p = c.e.strategy->build(c.e);
  live::LoweringOptions o;
  o.experiment_world = c.e.cluster.world_size();
  o.live_world = mpi().size();
  o.live_rank = mpi().rank();
  c.l = live::lower_program(c.p, o);
  fake_cuda::reset_log();
  fake_cuda::price_one_rank_collectives(price_one_rank);
  {
    gpu::NcclComm world = gpu::make_world_comm(mpi());
    gpu::LiveExecutor ex(c.p, c.l, mpi(), world);
    c.run = ex.run(gpu::LiveOptions{steps, warmup});
  }
  return c;
}

// How many CUDA/NCCL calls of type Call the lowering makes per step (a chunked copy is
// `repeats` cudaMemcpyAsync calls).
template <class Call>
std::int64_t count_calls(const live::LoweredProgram& l) {
  std::int64_t n = 0;
  for (const auto& li : l.instructions)
    for (const auto& call : li.calls)
      if (const auto* c = std::get_if<Call>(&call)) {
        if constexpr (std::is_same_v<Call, live::calls::MemoryCopy>) n += c->repeats;
        else ++n;
      }
  return n;
}

// What one lowered instruction costs on the emulated GPU (fake_cuda.hpp's rates): the time its
// timing events must bracket.
double emulated_ns(const live::LoweredInstruction& li, bool price_one_rank) {
  double ns = 0;
  for (const auto& call : li.calls) {
    std::visit(Overloaded{
                   [&](const live::calls::Gemm& c) { ns += c.shape.flops().count / fake_cuda::kGemmFlopsPerS * 1e9; },
                   [&](const live::calls::MemoryCopy& c) {
                     ns += static_cast<double>(c.bytes.count * c.repeats) / fake_cuda::kCopyBytesPerS * 1e9;
                   },
                   [&](const live::calls::Spin& c) { ns += static_cast<double>(c.duration.ns); },
                   [&](const live::calls::Collective& c) {
                     const double bytes = static_cast<double>(c.sizes.total_bytes);
                     if (price_one_rank) ns += bytes / fake_cuda::kCollectiveBytesPerS * 1e9;
                     else if (!c.in_place) ns += bytes / fake_cuda::kCopyBytesPerS * 1e9;  // NCCL one rank: memcpy
                   },
                   [](const auto&) {},  // events, memory and marks take no GPU time in the emulation
               },
               call);
  }
  return ns;
}

// Every timed op's event pair brackets exactly its own calls.
void check_op_times(const LiveCase& c, bool price_one_rank = false) {
  for (const auto& step : c.run.steps) {
    REQUIRE(static_cast<int>(step.ops.size()) == c.l.timed_ops);
    for (const auto& op : step.ops) {
      INFO(describe(c.p, op.instruction));
      CHECK(op.start.ns >= 0);
      CHECK(std::abs(static_cast<double>((op.end - op.start).ns) - emulated_ns(c.l.instructions.at(op.instruction), price_one_rank)) <= 1000);
    }
  }
}

}  // namespace

TEST_CASE("emulated GPU: live runs seed case C1 and measures the schedule the simulator predicts", "[emulated][live]") {
  // Collectives priced as on a real group (a one-rank no-op would hide a missing wait).
  LiveCase c = run_live("configs/examples/seed/c1-ddp-buckets.json", 2, 1, true);
  INFO(violations_text());
  REQUIRE(fake_cuda::violations().empty());
  REQUIRE(c.run.steps.size() == 2);
  const int runs = 3;  // warm-up + measured
  CHECK(fake_cuda::counters().spins == runs * count_calls<live::calls::Spin>(c.l));
  CHECK(fake_cuda::counters().collectives == runs * count_calls<live::calls::Collective>(c.l));
  CHECK(fake_cuda::pool_used() == 0);  // every allocation of every step was freed

  // Each op's event pair brackets exactly its own work: 5 ms spins, S / 100 GB/s all-reduces,
  // gradient copies into and out of the buckets.
  check_op_times(c, true);
  // The same Program simulated on a profile that prices collectives as the emulation does (host
  // free): the step time agrees, so the executor kept every stream, event and wait of the
  // Program (an all-reduce on the compute stream, or a missing wait, would change it).
  HardwareProfile hw = c.e.cluster.profile;
  hw.intra_node = AlphaBetaModel{
      .default_ranges = {AlphaBetaRange{Bytes{std::numeric_limits<std::int64_t>::max()}, Time::zero(), Bandwidth::from_gbps(100)}}};
  hw.host = HostProfile{};
  hw.compute.model_memory_kernels = true;  // the bucket copies: read + write at 2 x 1 TB/s
  hw.compute.hbm = Bandwidth::from_gbps(2 * fake_cuda::kCopyBytesPerS / 1e9);
  hw.compute.memory_efficiency = 1.0;
  hw.compute.min_kernel_time = Time::zero();
  const Timeline predicted = simulate_program(c.p, hw);
  const Time predicted_step = compute_metrics(predicted).overlap.step_time;
  for (Time t : c.run.step_times) {
    INFO("measured " << t.ns << " ns, predicted " << predicted_step.ns << " ns");
    CHECK(std::abs(t.ns - predicted_step.ns) <= 20'000);  // host issue time is real (microseconds)
  }
  // The pool's high-water mark is the Program's own peak (C1 frees nothing across streams).
  nlohmann::json j = live::live_result_json(c.e, c.p, c.run);
  CHECK(j["metrics"]["peak_memory_bytes"] == j["live"]["memory"]["accounted_peak_bytes"]);
  CHECK(j["metrics"]["peak_memory_bytes"].get<std::int64_t>() == compute_metrics(predicted).peak_memory.count);
  CHECK(j["device"] == "emulated H100 (CPU, tests/emulated)");
}

TEST_CASE("emulated GPU: live runs an FSDP1 experiment with every buffer sized for its calls", "[emulated][live]") {
  LiveCase c = run_live("configs/examples/validation/fsdp1-backward-pre-limit-on.json", 2, 1);
  INFO(violations_text());
  REQUIRE(fake_cuda::violations().empty());
  const int runs = 3;
  CHECK(fake_cuda::counters().gemms == runs * count_calls<live::calls::Gemm>(c.l));
  CHECK(fake_cuda::counters().copies == runs * count_calls<live::calls::MemoryCopy>(c.l));
  CHECK(fake_cuda::counters().collectives == runs * count_calls<live::calls::Collective>(c.l));
  CHECK(fake_cuda::counters().pool_allocs == runs * count_calls<live::calls::MallocAsync>(c.l));
  CHECK(fake_cuda::counters().pool_frees == fake_cuda::counters().pool_allocs);
  CHECK(fake_cuda::pool_used() == 0);
  REQUIRE(c.l.uses_deferred_free);  // FSDP1 frees unsharded parameters with record_stream
  // Every op's events bracket its GEMMs (at the emulated 400 TFLOP/s), copies and collectives;
  // the collectives are in place, so on one rank NCCL (and the emulation) makes them no-ops,
  // which is what the simulator's zero-cost one-rank collective assumes.
  check_op_times(c);
  CHECK(fake_cuda::counters().in_place_one_rank == fake_cuda::counters().collectives);
  // Memory: the emulated GPU finishes work the moment it is enqueued, so record_stream frees
  // happen at the host's next allocation. The simulator says the same when its GPU is made
  // (near) infinitely fast: the measured pool peak equals that prediction byte for byte, and is
  // at most the prediction on the real profile (where the GPU lags the host and frees wait).
  HardwareProfile fast = c.e.cluster.profile;
  fast.compute.gemm_table.clear();
  for (auto& [dtype, rate] : fast.compute.peak) rate = FlopRate{rate.flops_per_s * 1e6};
  fast.compute.hbm = Bandwidth{fast.compute.hbm.bytes_per_s * 1e6};
  for (auto& [cls, bw] : fast.compute.class_bandwidth) bw = Bandwidth{bw.bytes_per_s * 1e6};
  fast.compute.min_kernel_time = Time::zero();
  fast.compute.kernel_gap = Time::zero();
  // The live executor's GEMMs take their workspace outside the Program's pool, where PyTorch's
  // cuBLAS workspaces (which the engine allocates, docs/memory.md) are not.
  fast.outside_allocator.cublas_workspace = Bytes{0};
  nlohmann::json j = live::live_result_json(c.e, c.p, c.run);
  const std::int64_t measured_peak = j["metrics"]["peak_memory_bytes"].get<std::int64_t>();
  CHECK(measured_peak == compute_metrics(simulate_program(c.p, fast)).peak_memory.count);
  CHECK(measured_peak <= compute_metrics(simulate_program(c.p, c.e.cluster.profile)).peak_memory.count);
  CHECK(measured_peak > 0);
}

TEST_CASE("emulated GPU: the GEMM benchmark's TFLOP/s is FLOPs over the median loop mean", "[emulated][calibrate]") {
  fake_cuda::reset_log();
  gpu::CublasLtHandle handle;
  gpu::Stream stream;
  gpu::GemmBenchOptions o;
  o.timing = {2, 10, 5};
  for (GemmShape s : {GemmShape{8192, 8192, 8192, 1, Dtype::BF16}, GemmShape{4096, 14336, 4096, 1, Dtype::FP8},
                      GemmShape{2048, 2048, 128, 16, Dtype::BF16}}) {
    gpu::GemmBenchResult r = gpu::bench_gemm(handle, s, o, stream);
    INFO(violations_text());
    REQUIRE(fake_cuda::violations().empty());
    CHECK(r.tflops == Approx(fake_cuda::kGemmFlopsPerS / 1e12).epsilon(1e-5));
    CHECK(r.timing.spread_pct() == Approx(0).margin(1e-3));
  }
  // Operands rotate through more than L2 (4 x 50 MB here): the 8192^3 bf16 set is 256 MiB, so
  // one set; warm-up + 5 x 10 timed calls per shape.
  CHECK(fake_cuda::counters().gemms == 3 * (2 + 5 * 10));
}

TEST_CASE("emulated GPU: a sustained GEMM run keeps the GPU busy for the time asked before the timed calls",
          "[emulated][calibrate]") {
  fake_cuda::reset_log();
  gpu::CublasLtHandle handle;
  gpu::Stream stream;
  gpu::GemmBenchOptions o;
  o.timing = {2, 10, 5};
  o.sustain_ms = 50;
  const GemmShape s{8192, 8192, 8192, 1, Dtype::BF16};
  const double call_ms = s.flops().count / fake_cuda::kGemmFlopsPerS * 1e3;  // 2.75 ms at 400 TFLOP/s
  gpu::GemmBenchResult r = gpu::bench_gemm(handle, s, o, stream);
  INFO(violations_text());
  REQUIRE(fake_cuda::violations().empty());
  // Whole batches of `iters` calls until 50 ms have passed: 2 batches of 10 (55 ms).
  CHECK(r.sustained_ms == Approx(20 * call_ms));
  CHECK(r.sustained_ms >= o.sustain_ms);
  CHECK(fake_cuda::counters().gemms == 20 + 2 + 5 * 10);
  CHECK(r.tflops == Approx(fake_cuda::kGemmFlopsPerS / 1e12).epsilon(1e-5));  // the timed calls alone
}

TEST_CASE("emulated GPU: the NCCL benchmark follows nccl-tests sizes, columns and in-place offsets", "[emulated][calibrate]") {
  fake_cuda::reset_log();
  fake_cuda::price_one_rank_collectives(true);  // time them as a real group would, to check the arithmetic
  gpu::NcclComm world = gpu::make_world_comm(mpi());
  gpu::Stream stream;
  gpu::NcclBenchOptions o;
  o.timing = {1, 4, 3};
  o.min_bytes = 8;
  o.max_bytes = 1 << 20;
  o.factor = 16;
  for (CollectiveKind k : {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter,
                           CollectiveKind::AllToAll}) {
    std::ostringstream table;
    auto rows = gpu::bench_collective(mpi(), world, k, o, stream, &table);
    INFO(to_string(k) << "\n" << violations_text() << table.str());
    REQUIRE(fake_cuda::violations().empty());
    REQUIRE(rows.size() == 5);  // 8, 128, 2 Ki, 32 Ki, 512 Ki
    for (const auto& r : rows) {
      const double expected_us = static_cast<double>(r.bytes) / fake_cuda::kCollectiveBytesPerS * 1e6;
      CHECK(r.out_of_place.median_us == Approx(expected_us).epsilon(1e-4));
      if (k == CollectiveKind::AllToAll) CHECK(r.in_place.median_us == 0);  // not applicable
      else CHECK(r.in_place.median_us == Approx(expected_us).epsilon(1e-4));
    }
    CHECK(rows.front().bytes == 8);
    CHECK(rows.back().bytes == 524288);
    // One line per size, nccl-tests columns: size, count, type, redop, root, then time/algbw/busbw.
    std::istringstream lines(table.str());
    std::string line;
    int data_lines = 0;
    while (std::getline(lines, line)) {
      if (line.empty() || line[0] == '#') continue;
      ++data_lines;
      std::istringstream f(line);
      std::string size, count, type;
      f >> size >> count >> type;
      CHECK(type == "float");
    }
    CHECK(data_lines == 5);
  }
}

TEST_CASE("emulated GPU: the contention benchmark times both streams and overlaps them", "[emulated][calibrate]") {
  fake_cuda::reset_log();
  fake_cuda::price_one_rank_collectives(true);  // time them as a real group would, to check the arithmetic
  gpu::NcclComm world = gpu::make_world_comm(mpi());
  gpu::CublasLtHandle handle;
  gpu::ContentionOptions o;
  o.timing = {1, 4, 3};
  o.gemm = GemmShape{4096, 4096, 4096, 1, Dtype::BF16};
  o.bytes = std::size_t{64} << 20;
  calib::ContentionSample s = gpu::bench_contention(mpi(), world, handle, o);
  INFO(violations_text());
  REQUIRE(fake_cuda::violations().empty());
  CHECK(s.gemm_alone.us() == Approx(o.gemm.flops().count / fake_cuda::kGemmFlopsPerS * 1e6).epsilon(1e-3));
  CHECK(s.comm_alone.us() == Approx(static_cast<double>(o.bytes) / fake_cuda::kCollectiveBytesPerS * 1e6).epsilon(1e-3));
  // Separate streams do not slow each other down in the emulation: concurrent == alone.
  CHECK(s.gemm_concurrent.us() == Approx(s.gemm_alone.us()).epsilon(1e-3));
  CHECK(s.comm_concurrent.us() == Approx(s.comm_alone.us()).epsilon(1e-3));
}
