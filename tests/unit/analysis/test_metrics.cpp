#include <catch2/catch.hpp>

#include "sim/analysis/metrics.hpp"

using namespace stepsim;

namespace {
Timeline hand_built_c5() {
  // Seed case C5: 80 ms of compute, 120 ms of communication, 140 ms total.
  // Compute [0, 80); communication [20, 140). Overlap = [20, 80) = 60 ms.
  Timeline t;
  t.start = Time::zero();
  t.end = Time::from_ms(140);
  TimelineOp k;
  k.kind = TimelineOp::Kind::Kernel;
  k.phase = Phase::Backward;
  k.start = Time::zero();
  k.end = Time::from_ms(80);
  TimelineOp c;
  c.kind = TimelineOp::Kind::Collective;
  c.phase = Phase::Backward;
  c.start = Time::from_ms(20);
  c.end = Time::from_ms(140);
  t.ops = {k, c};
  return t;
}
}  // namespace

TEST_CASE("C5: 80 ms compute, 120 ms comm, 140 ms step hide 60 ms: 50 % overlapped, 60 ms exposed", "[metrics][golden]") {
  Metrics m = compute_metrics(hand_built_c5());
  CHECK(m.overlap.step_time == Time::from_ms(140));
  CHECK(m.overlap.compute_time == Time::from_ms(80));
  CHECK(m.overlap.comm_time == Time::from_ms(120));
  // hidden = compute + comm - total = 80 + 120 - 140 = 60 ms
  CHECK(m.overlap.overlapped_comm == Time::from_ms(60));
  CHECK(m.overlap.exposed_comm == Time::from_ms(60));
  CHECK(m.overlap.overlap_pct == Approx(50.0));
  CHECK(m.overlap.idle == Time::zero());
  // Communication-bound: exposed comm is the part of the step compute does not cover.
  CHECK(m.overlap.comm_time > m.overlap.compute_time);
}

TEST_CASE("Interval union merges overlapping and touching intervals", "[metrics]") {
  auto merged = merge_intervals({{Time{5}, Time{10}}, {Time{0}, Time{3}}, {Time{3}, Time{4}}, {Time{8}, Time{12}}});
  REQUIRE(merged.size() == 2);
  CHECK(total_length(merged) == Time{4 + 7});
}

TEST_CASE("Metrics survive a JSON round trip", "[metrics]") {
  Metrics m = compute_metrics(hand_built_c5());
  Metrics back = metrics_from_json(metrics_to_json(m));
  CHECK(back.overlap.exposed_comm == m.overlap.exposed_comm);
  CHECK(back.forward == m.forward);
  CHECK(back.overlap.overlap_pct == m.overlap.overlap_pct);
}

TEST_CASE("The peak's phase is the host program's phase when it allocated, not the GPU's", "[metrics]") {
  // The host issues forward (t = 0, 1 ms) and backward (t = 2 ms) while the GPU is still
  // running forward until 10 ms; backward's allocation at 2.5 ms makes the peak.
  Timeline t;
  t.start = Time::zero();
  t.end = Time::from_ms(20);
  auto op = [](Phase p, double issue_ms, double start_ms, double end_ms) {
    TimelineOp o;
    o.kind = TimelineOp::Kind::Kernel;
    o.phase = p;
    o.issue = Time::from_ms(issue_ms);
    o.start = Time::from_ms(start_ms);
    o.end = Time::from_ms(end_ms);
    return o;
  };
  t.ops = {op(Phase::Forward, 0, 0, 5), op(Phase::Forward, 1, 5, 10), op(Phase::Backward, 2, 10, 20)};
  auto sample = [](double ms, std::int64_t bytes) {
    MemorySample s;
    s.time = Time::from_ms(ms);
    s.total = Bytes{bytes};
    s.by_category.fill(Bytes{});
    return s;
  };
  t.memory = {sample(0, 100), sample(1.5, 200), sample(2.5, 300), sample(3, 50)};
  Metrics m = compute_metrics(t);
  CHECK(m.peak_memory == Bytes{300});
  CHECK(m.peak_time == Time::from_ms(2.5));
  CHECK(m.forward == Time::from_ms(10));  // the GPU was in forward at 2.5 ms...
  CHECK(m.peak_phase == "backward");      // ...but backward's code made the peak
  // Before any op is issued the step is in its forward part.
  t.memory = {sample(0, 500), sample(3, 50)};
  CHECK(compute_metrics(t).peak_phase == "forward");
}
