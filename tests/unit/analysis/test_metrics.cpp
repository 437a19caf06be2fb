#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "sim/analysis/metrics.hpp"
#include "sim/analysis/run.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

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

TEST_CASE("Interval union is the same however far from sorted the intervals come", "[metrics]") {
  // The reference, by another road: the covered instants marked one by one, then read off as
  // runs (the intervals are short and their ends small).
  auto reference = [](const std::vector<Interval>& v) {
    std::vector<char> covered;
    for (const auto& iv : v)
      for (std::int64_t t = iv.start.ns; t < iv.end.ns; ++t) {
        if (static_cast<std::size_t>(t) >= covered.size()) covered.resize(static_cast<std::size_t>(t) + 1, 0);
        covered[static_cast<std::size_t>(t)] = 1;
      }
    std::vector<Interval> out;
    for (std::size_t t = 0; t < covered.size(); ++t)
      if (covered[t] && (t == 0 || !covered[t - 1])) out.push_back({Time{static_cast<std::int64_t>(t)}, Time{}});
      else if (!covered[t] && t > 0 && covered[t - 1]) out.back().end = Time{static_cast<std::int64_t>(t)};
    if (!covered.empty() && covered.back()) out.back().end = Time{static_cast<std::int64_t>(covered.size())};
    return out;
  };
  auto same = [](const std::vector<Interval>& a, const std::vector<Interval>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const Interval& x, const Interval& y) {
             return x.start == y.start && x.end == y.end;
           });
  };
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    const std::size_t n = 1 + rng() % 3000;
    std::vector<Interval> v;
    std::int64_t t = 0;
    for (std::size_t i = 0; i < n; ++i) {
      t += static_cast<std::int64_t>(rng() % 50);
      v.push_back({Time{t}, Time{t + static_cast<std::int64_t>(rng() % 40)}});
    }
    // Nearly sorted (a few moved far, as another stream's kernels are), reversed (past the
    // insertion sort's budget: std::sort), or shuffled.
    switch (round % 3) {
      case 0:
        for (std::size_t k = 0; k < n / 50 + 1; ++k) std::swap(v[rng() % n], v[rng() % n]);
        break;
      case 1: std::reverse(v.begin(), v.end()); break;
      default: std::shuffle(v.begin(), v.end(), rng);
    }
    CHECK(same(merge_intervals(v), reference(v)));
  }
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

TEST_CASE("The training loop's measured host time wraps the step: before the forward, and after a synchronize at its end",
          "[metrics][host]") {
  Experiment e = load_experiment(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/llama3-8b-fsdp2-8xh100.json");
  const SimulationResult plain = run_experiment(e);
  e.cluster.profile.edit().host.step_start = Time::from_us(400);
  e.cluster.profile.edit().host.step_end = Time::from_us(3000);
  const Program p = build_step_program(e);
  const SimulationResult wrapped = run_experiment(e);
  // The program: one HostWork right after the forward mark, and at the end a synchronize per
  // stream, then the tail's HostWork.
  std::size_t works = 0, syncs_at_end = 0;
  for (std::size_t i = 0; i < p.instructions.size(); ++i) {
    if (const auto* w = std::get_if<HostWork>(&p.instructions[i]); w && w->name.starts_with("training loop")) {
      ++works;
      if (w->duration == Time::from_us(400)) {
        const auto* m = std::get_if<Mark>(&p.instructions[i - 1]);
        REQUIRE(m);
        CHECK(m->phase == Phase::Forward);
      }
    }
    if (const auto* h = std::get_if<HostSync>(&p.instructions[i]); h && h->reason.starts_with("training loop")) ++syncs_at_end;
  }
  CHECK(works == 2);
  CHECK(syncs_at_end == p.streams.size());
  CHECK(std::holds_alternative<HostWork>(p.instructions.back()));
  // The step ends 3 ms after the GPU's last work, and the forward starts 0.4 ms later: at least
  // 3 ms longer (the head may hide behind a host-bound forward), at most 3.4 ms.
  const Time extra = wrapped.metrics.overlap.step_time - plain.metrics.overlap.step_time;
  CHECK(extra >= Time::from_us(3000));
  CHECK(extra <= Time::from_us(3400));
  // Without them the program is the strategy's own.
  e.cluster.profile.edit().host.step_start = e.cluster.profile.edit().host.step_end = Time::zero();
  CHECK(build_step_program(e).instructions.size() == e.strategy->build(e).instructions.size());
}

TEST_CASE("With gradient accumulation a phase is the sum of its intervals over the micro-batches, as a profiler shows it",
          "[metrics]") {
  // Two micro-batches then the optimizer: F [0,10) B [10,30) F [30,40) B [40,60) O [60,65),
  // step end 70 ms. Forward = 10 + 10 = 20 ms, backward = 20 + 20 = 40 ms, optimizer = 5 + the
  // 5 ms tail = 10 ms. Measured from the first forward to the last forward op, forward would be
  // 40 ms (the first backward inside it).
  Timeline t;
  t.start = Time::zero();
  t.end = Time::from_ms(70);
  auto kernel = [](Phase ph, int start_ms, int end_ms) {
    TimelineOp k;
    k.kind = TimelineOp::Kind::Kernel;
    k.phase = ph;
    k.start = Time::from_ms(start_ms);
    k.end = Time::from_ms(end_ms);
    return k;
  };
  t.ops = {kernel(Phase::Forward, 0, 10),   kernel(Phase::Backward, 10, 30), kernel(Phase::Forward, 30, 40),
           kernel(Phase::Backward, 40, 60), kernel(Phase::Optimizer, 60, 65)};
  Metrics m = compute_metrics(t);
  CHECK(m.forward == Time::from_ms(20));
  CHECK(m.backward == Time::from_ms(40));
  CHECK(m.optimizer == Time::from_ms(10));
  CHECK(m.forward + m.backward + m.optimizer == m.overlap.step_time);
}
