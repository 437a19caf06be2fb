// From raw live measurements to the simulator's Timeline and the stepsim.result/1 document.
#include <catch2/catch.hpp>

#include "live/measured.hpp"
#include "sim/report/compare.hpp"
#include "sim/analysis/run.hpp"
#include "sim/program/builder.hpp"
#include "sim/report/result_json.hpp"
#include "sim/strategies/load_experiment.hpp"

using namespace stepsim;
using namespace stepsim::live;

namespace {

const std::string kRoot = STEPSIM_SOURCE_DIR;

KernelSpec fixed(const std::string& name, double ms) {
  return KernelSpec{name, KernelClass::Compute, KernelWork{{}, Bytes{}, AttentionWork{}, Time::from_ms(ms)}, name};
}

// setup: alloc W (1000 B params); forward: alloc A (500 B acts), fwd; backward: bwd, free A,
// AR on the nccl stream.
struct Small {
  Program p;
  std::size_t fwd = 0, bwd = 0, ar = 0;
};

Small small_program() {
  ProgramBuilder b;
  StreamId d = b.default_stream();
  StreamId nccl = b.stream("nccl");
  CommId pg = b.comm("ddp", 1, 1);
  Small s;
  b.mark("setup", Phase::Setup);
  b.alloc("weights", Bytes{1000}, MemCategory::Parameters, d);
  b.mark("forward", Phase::Forward);
  BufferId a = b.alloc("acts", Bytes{500}, MemCategory::Activations, d);
  s.fwd = b.program().instructions.size();
  b.launch(d, fixed("fwd", 1));
  b.mark("backward", Phase::Backward);
  s.bwd = b.program().instructions.size();
  b.launch(d, fixed("bwd", 2));
  b.free(a);
  b.wait_stream(nccl, d);
  s.ar = b.program().instructions.size();
  b.collective(pg, nccl, CollectiveKind::AllReduce, Bytes{4000}, Dtype::FP32, "AR bucket 0", "bucket 0");
  s.p = b.take();
  return s;
}

MeasuredStep measured(const Small& s, std::int64_t scale_ns) {
  MeasuredStep m;
  auto T = [&](std::int64_t us) { return Time{us * 1000 * scale_ns}; };
  m.ops = {{s.fwd, T(5), T(10), T(1010)}, {s.bwd, T(12), T(1010), T(3010)}, {s.ar, T(20), T(3010), T(3510)}};
  // weights at 1 us, activations at 2 us, activations freed at 15 us.
  m.memory = {{T(2), BufferId{1}, true}, {T(1), BufferId{0}, true}, {T(15), BufferId{1}, false}};
  m.marks = {{"forward", T(2)}, {"backward", T(11)}};
  m.end = T(3510);
  m.pool_used_high = Bytes{2048};
  m.pool_reserved_high = Bytes{1 << 21};
  return m;
}

}  // namespace

TEST_CASE("a measured step becomes a Timeline with the Program's names, streams and phases", "[live]") {
  Small s = small_program();
  Timeline t = build_measured_timeline(s.p, measured(s, 1), "NVIDIA H100 80GB HBM3", Bytes{80LL << 30});
  REQUIRE(t.ops.size() == 3);
  CHECK(t.ops[0].name == "fwd");
  CHECK(t.ops[0].phase == Phase::Forward);
  CHECK(t.ops[1].phase == Phase::Backward);
  CHECK(t.ops[2].kind == TimelineOp::Kind::Collective);
  CHECK(t.ops[2].name == "AR bucket 0");
  CHECK(t.streams.at(t.ops[2].stream.index()).name == "nccl");
  CHECK(t.ops[2].start == Time::from_us(3010));
  CHECK(t.end == Time::from_us(3510));
  CHECK(t.device == "NVIDIA H100 80GB HBM3");
  // Memory replayed in time order: 0, weights 1000 (1 us), +acts 1500 (2 us), -acts 1000 (15 us).
  REQUIRE(t.memory.size() == 4);
  CHECK(t.memory[1].total == Bytes{1000});
  CHECK(t.memory[2].total == Bytes{1500});
  CHECK(t.memory[3].total == Bytes{1000});
  CHECK(t.memory[2].by_category[static_cast<int>(MemCategory::Activations)] == Bytes{500});
  Metrics m = compute_metrics(t);
  // Forward ends with fwd at 1010 us; backward with the AR at 3510 us.
  CHECK(m.forward == Time::from_us(1010));
  CHECK(m.backward == Time::from_us(2500));
  CHECK(m.overlap.comm_time == Time::from_us(500));
  CHECK(m.overlap.exposed_comm == Time::from_us(500));
}

TEST_CASE("step statistics report the median step, nearest-rank percentiles and the spread", "[live]") {
  // 10 steps: 100..109 ms in shuffled order. Lower median = 104 ms (the 5th smallest); p10 =
  // 100 (rank 1), p90 = 108 (rank 9); spread = (109 - 100) / 104 = 8.654 %.
  std::vector<Time> v;
  for (int x : {107, 100, 104, 109, 101, 103, 105, 102, 108, 106}) v.push_back(Time::from_ms(x));
  StepStats s = step_stats(v);
  CHECK(s.median == Time::from_ms(104));
  CHECK(s.median_index == 2);
  CHECK(s.min == Time::from_ms(100));
  CHECK(s.max == Time::from_ms(109));
  CHECK(s.p10 == Time::from_ms(100));
  CHECK(s.p90 == Time::from_ms(108));
  CHECK(s.mean == Time::from_us(104500));
  CHECK(s.spread_pct == Approx(100.0 * 9 / 104));
  CHECK_THROWS(step_stats({}));
}

TEST_CASE("the live document is a stepsim.result/1 with the median step and the pool's measured peak", "[live]") {
  Experiment e = load_experiment(kRoot + "/configs/examples/seed/c1-ddp-buckets.json");
  Small s = small_program();
  LiveRun run;
  // Steps of 3.51, 7.02 and 3.51 ms: sorted stably 0, 2, 1, so the (lower) median is step 2.
  run.steps = {measured(s, 1), measured(s, 2), measured(s, 1)};
  run.steps[2].pool_used_high = Bytes{4096};
  run.step_times = {run.steps[0].end, run.steps[1].end, run.steps[2].end};
  run.warmup = 2;
  run.device = "test-gpu";
  run.capacity = Bytes{80LL << 30};
  run.comms = {LiveComm{"ddp", 1, 1, 0, 0}};
  nlohmann::json j = live_result_json(e, s.p, run);
  CHECK(j["schema"] == kResultSchema);
  CHECK(j["mode"] == "live");
  CHECK(j["device"] == "test-gpu");
  CHECK(j["ops"].size() == 3);
  CHECK(j["ops"][2]["start_ns"] == 3'010'000);
  CHECK(j["metrics"]["step_time_ns"] == 3'510'000);
  // Peak = the largest pool high-water mark over the steps (4096), not the accounting (1500).
  CHECK(j["metrics"]["peak_memory_bytes"] == 4096);
  CHECK(j["live"]["memory"]["accounted_peak_bytes"] == 1500);
  CHECK(j["live"]["step_time_ns"]["median"] == 3'510'000);
  CHECK(j["live"]["step_time_ns"]["max"] == 7'020'000);
  CHECK(j["live"]["median_step"] == 2);
  CHECK(j["live"]["mpi_world_size"] == 1);
  CHECK(j["live"]["note"].get<std::string>().find("1-rank") != std::string::npos);
  // compare reads it as the measurement.
  SimulationResult sim = run_experiment(e);
  CompareReport r = compare_results(result_to_json(e, sim), "pred.json", j, "meas.json", CompareOptions{});
  CHECK(r.reference_mode == "live");
  CHECK(r.reference_label == "meas.json");
}
