// `simulate --idle` (sim/analysis/idle.hpp): the simulated timeline's GPU idle charged to what the
// host did before the next op, by the rules analyze --idle applies to a trace; on a hand-built
// timeline whose answer follows from the rules, and on the shipped ZeRO-1 example.

#include <catch2/catch.hpp>
#include <string>

#include "sim/analysis/idle.hpp"
#include "sim/analysis/run.hpp"
#include "sim/strategies/load_experiment.hpp"

using namespace stepsim;

namespace {

TimelineOp op(Timeline& t, const char* name, double issue_us, double start_us, double end_us, Phase phase,
              TimelineOp::Kind kind = TimelineOp::Kind::Kernel) {
  TimelineOp o;
  o.name = t.text->add(name);
  o.issue = Time::from_us(issue_us);
  o.start = Time::from_us(start_us);
  o.end = Time::from_us(end_us);
  o.phase = phase;
  o.kind = kind;
  return o;
}


}  // namespace

TEST_CASE("A simulated gap after a blocked host sync is sync, named by its reason; others by the next op", "[analysis][idle]") {
  // Step [0, 1000] us. A [100, 200]; B [203, 250] (a 3 us launch gap); the host is blocked in
  // "x.item()" over [210, 260], across the moment the GPU runs dry (250), and issues C at 280:
  // C [290, 400] backward, a 40 us sync gap. D "fwd block.7.mlp" [500, 600]: 100 us, host,
  // forward. A marker inside a gap does not count as busy. Head 100, tail 400.
  Timeline t;
  t.start = Time::from_us(0);
  t.end = Time::from_us(1000);
  t.ops.push_back(op(t, "A", 90, 100, 200, Phase::Forward));
  t.ops.push_back(op(t, "B", 95, 203, 250, Phase::Forward));
  t.ops.push_back(op(t, "C", 280, 290, 400, Phase::Backward));
  t.ops.push_back(op(t, "mark", 420, 450, 450, Phase::Backward, TimelineOp::Kind::Marker));
  t.ops.push_back(op(t, "fwd block.7.mlp", 495, 500, 600, Phase::Forward));
  HostInterval blocked{HostInterval::Kind::Blocked, HostInterval::Label::Text, 0, t.text->add("blocked: ", "x.item()"), Time::from_us(210), Time::from_us(260)};
  // The host in the head: the training loop's own work [0, 60], the issue of A [60, 80], an
  // allocation and a free [80, 90] (one frame: their labels name each buffer); in the tail: the
  // loop's work after the step [650, 950].
  t.host.push_back(HostInterval{HostInterval::Kind::Work, HostInterval::Label::Text, 0, t.text->add("training loop before the step"), Time::from_us(0), Time::from_us(60)});
  t.host.push_back(HostInterval{HostInterval::Kind::Issue, HostInterval::Label::Text, 1, t.text->add("fwd block.3.attn"), Time::from_us(60), Time::from_us(80)});
  t.host.push_back(HostInterval{HostInterval::Kind::Issue, HostInterval::Label::Text, 2, t.text->add("Alloc 'activations block.3' 4096 B"), Time::from_us(80), Time::from_us(85)});
  t.host.push_back(HostInterval{HostInterval::Kind::Issue, HostInterval::Label::Text, 3, t.text->add("Free 'activations block.2'"), Time::from_us(85), Time::from_us(90)});
  t.host.push_back(blocked);
  t.host.push_back(HostInterval{HostInterval::Kind::Work, HostInterval::Label::Text, 9, t.text->add("training loop after the step"), Time::from_us(650), Time::from_us(950)});

  const IdleAttribution r = attribute_idle(t);
  INFO(idle_to_text(r, 10));
  CHECK(r.steps == 1);
  CHECK(r.head == Time::from_us(100));
  CHECK(r.tail == Time::from_us(400));
  CHECK(r.gaps == Time::from_us(3 + 40 + 100));
  CHECK(r.short_count == 1);
  CHECK(r.short_total == Time::from_us(3));
  CHECK(r.sync_total == Time::from_us(40));
  CHECK(r.idle() == Time::from_us(643));
  REQUIRE(r.causes.size() == 2);
  const IdleCause* sync = r.find("x.item()");
  REQUIRE(sync);
  CHECK(sync->sync);
  CHECK(sync->phase == Phase::Backward);
  const IdleCause* host = r.find("fwd block.#.mlp");
  REQUIRE(host);
  CHECK_FALSE(host->sync);
  CHECK(host->total == Time::from_us(100));
  CHECK(r.causes.front().ops == "fwd block.#.mlp");  // largest first

  // Head [0, 100] and tail [600, 1000]: the host's intervals inside them, clipped, unit numbers
  // folded as the causes' are; what none covers apart.
  REQUIRE(r.head_frames.size() == 4);
  CHECK(r.head_frames[0].name == "training loop before the step");
  CHECK(r.head_frames[0].total == Time::from_us(60));
  CHECK(r.head_frames[1].name == "fwd block.#.attn");
  CHECK(r.head_frames[1].total == Time::from_us(20));
  CHECK(r.head_frames[2].name == kNoHostFrame);  // a tie of 10 us, in name order
  CHECK(r.head_frames[2].total == Time::from_us(10));
  CHECK(r.head_frames[3].name == "caching allocator (alloc, free)");
  CHECK(r.head_frames[3].total == Time::from_us(10));
  REQUIRE(r.tail_frames.size() == 2);
  CHECK(r.tail_frames[0].name == "training loop after the step");
  CHECK(r.tail_frames[0].total == Time::from_us(300));
  CHECK(r.tail_frames[1].name == kNoHostFrame);
  CHECK(r.tail_frames[1].total == Time::from_us(100));
}

TEST_CASE("The ZeRO-1 example's predicted idle: DeepSpeed 0.12.6's per-slice norm reads and OPT's clamp scalar", "[analysis][idle]") {
  const SimulationResult r = run_experiment(load_experiment(std::string(STEPSIM_SOURCE_DIR) + "/configs/examples/opt-1.3b-zero1-8xa800.json", {}));
  const IdleAttribution a = attribute_idle(r.timeline);
  INFO(idle_to_text(a, 20));
  // kernel_gap_us is inside each kernel's time, so no launch gap is left between queued kernels;
  // the gaps add up to at most the metrics' idle, which also counts memcpy time (as analyze
  // does), by the memcpys' time exactly.
  Time memcpy;
  for (const TimelineOp& op : r.timeline.ops)
    if (op.memcpy()) memcpy += op.end - op.start;
  CHECK(memcpy > Time{});
  CHECK(a.idle() + memcpy == r.metrics.overlap.idle);
  CHECK(a.short_count == 0);
  const IdleCause* item = a.find("get_grad_norm_direct: param_norm.item()");
  REQUIRE(item);
  CHECK(item->sync);
  const IdleCause* clamp = a.find("scores.max_clamp: torch.tensor(..., device=cuda) from pageable memory");
  REQUIRE(clamp);
  CHECK(clamp->count == 24);  // one per OPT-1.3B decoder layer
  CHECK(clamp->phase == Phase::Forward);
}
