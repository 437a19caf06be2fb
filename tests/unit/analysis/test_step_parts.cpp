#include <catch2/catch.hpp>

#include "sim/analysis/metrics.hpp"
#include "sim/analysis/step_parts.hpp"

using namespace stepsim;

namespace {

TimelineOp kernel(Phase phase, double start_ms, double end_ms) {
  TimelineOp k;
  k.kind = TimelineOp::Kind::Kernel;
  k.phase = phase;
  k.start = Time::from_ms(start_ms);
  k.end = Time::from_ms(end_ms);
  return k;
}

TimelineOp collective(std::size_t comm, CollectiveKind kind, double start_ms, double end_ms) {
  TimelineOp c;
  c.kind = TimelineOp::Kind::Collective;
  c.phase = Phase::Backward;
  c.comm = CommId{comm};
  c.collective = kind;
  c.start = Time::from_ms(start_ms);
  c.end = Time::from_ms(end_ms);
  return c;
}

Timeline two_comms() {
  Timeline t;
  t.comms = {CommDecl{"dp", 16, 2}, CommDecl{"rep", 2, 2}};
  t.start = Time::zero();
  t.end = Time::from_ms(150);
  return t;
}

}  // namespace

TEST_CASE("Every instant of the step is in one part: compute first, then optimizer kernels, then the first-issued transfer",
          "[metrics][scale]") {
  // Backward compute [0, 80); an all-reduce on dp [20, 140) whose first 30 ms wait for the slowest
  // rank (under compute: not exposed); an all-gather on rep [85, 95) issued after it; optimizer
  // kernels [100, 110); the step ends at 150.
  Timeline t = two_comms();
  t.ops = {kernel(Phase::Backward, 0, 80), collective(0, CollectiveKind::AllReduce, 20, 140),
           collective(1, CollectiveKind::AllGather, 85, 95), kernel(Phase::Optimizer, 100, 110)};
  t.rank_wait = {Time::zero(), Time::from_ms(30), Time::zero(), Time::zero()};
  const StepParts p = step_parts(t);
  CHECK(p.compute == Time::from_ms(80));
  CHECK(p.optimizer == Time::from_ms(10));
  // The all-reduce is exposed over [80, 100) and [110, 140): 50 ms, the all-gather's 10 ms inside
  // it included (charged once, to the collective issued first).
  CHECK(p.exposed.at("all_reduce on dp") == Time::from_ms(50));
  CHECK(p.exposed.count("all_gather on rep") == 0);
  CHECK(p.rank_wait == Time::zero());
  CHECK(p.idle == Time::from_ms(10));  // [140, 150)
  CHECK(p.total() == Time::from_ms(150));
  // The parts partition what the metrics report.
  const Metrics m = compute_metrics(t);
  CHECK(p.compute + p.optimizer == m.overlap.compute_time);
  CHECK(p.exposed.at("all_reduce on dp") + p.rank_wait == m.overlap.exposed_comm);
  CHECK(p.idle == m.overlap.idle);
}

TEST_CASE("The wait for the slowest rank that no kernel covers is its own part", "[metrics][scale]") {
  // Compute [0, 10); an all-reduce [20, 60) whose first 15 ms wait for the slowest rank.
  // idle [10, 20) = 10, rank wait [20, 35) = 15, exposed all-reduce [35, 60) = 25: 60 ms.
  Timeline t = two_comms();
  t.end = Time::from_ms(60);
  t.ops = {kernel(Phase::Forward, 0, 10), collective(0, CollectiveKind::AllReduce, 20, 60)};
  t.rank_wait = {Time::zero(), Time::from_ms(15)};
  const StepParts p = step_parts(t);
  CHECK(p.idle == Time::from_ms(10));
  CHECK(p.rank_wait == Time::from_ms(15));
  CHECK(p.exposed.at("all_reduce on dp") == Time::from_ms(25));
  CHECK(p.total() == Time::from_ms(60));
  CHECK(compute_metrics(t).overlap.exposed_comm == Time::from_ms(40));
}
