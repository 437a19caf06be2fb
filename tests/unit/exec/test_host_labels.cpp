// The simulator stores a host interval's operands and host_label() words them when a report asks
// (sim/exec/timeline.hpp): the words are those the engine wrote as it ran, describe()'s.
#include <catch2/catch.hpp>

#include <variant>

#include "sim/exec/engine.hpp"
#include "test_support.hpp"

using namespace stepsim;
using stepsim::test::fixed_kernel;
using stepsim::test::ideal_profile;

TEST_CASE("host_label words every kind of host interval as describe() does", "[engine][timeline]") {
  ProgramBuilder b;
  const StreamId side = b.stream("side");
  const CommId pg = b.comm("pg", 8, 1);
  b.mark("forward", Phase::Forward);
  const BufferId act = b.alloc({"activations ", "block.3"}, Bytes{4096}, MemCategory::Activations, StreamId{0});
  b.launch(StreamId{0}, fixed_kernel("fwd block.3", Time::from_us(50)));
  const EventId ev = b.record(StreamId{0});
  b.wait(side, ev);
  b.collective(pg, side, CollectiveKind::AllGather, Bytes{1 << 20}, Dtype::BF16, "AG block.4 fwd", "block.4");
  b.host_work(Time::from_us(7), "optimizer.zero_grad");
  b.free_after(act, {side});
  b.host_sync_stream(side, "end of step");
  Program p = b.take();

  HardwareProfile hw = ideal_profile();
  hw.host.launch_overhead = Time::from_us(3);
  hw.host.collective_overhead = Time::from_us(4);
  hw.host.event_overhead = Time::from_us(1);
  hw.host.alloc_overhead = Time::from_us(2);
  const Timeline t = simulate_program(p, hw);

  std::size_t checked = 0;
  for (const HostInterval& h : t.host) {
    if (h.kind == HostInterval::Kind::Blocked) continue;
    const Instruction& in = p.instructions.at(h.instruction);
    std::string want = describe(p, h.instruction);
    if (const auto* l = std::get_if<Launch>(&in)) want = "launch " + l->kernel.name;
    if (const auto* c = std::get_if<Collective>(&in)) want = "issue " + c->name;
    if (const auto* w = std::get_if<HostWork>(&in)) want = w->name;
    CHECK(host_label(t, h) == want);
    ++checked;
  }
  CHECK(checked == 7);  // alloc, launch, record, wait, collective, host work, free
  // Spelled out, for the reader (and in case describe() changes with the labels).
  std::vector<std::string> labels;
  for (const HostInterval& h : t.host) labels.push_back(host_label(t, h));
  CHECK(labels == std::vector<std::string>{"Alloc 'activations block.3' 4096 B", "launch fwd block.3", "Record event 0 on default",
                                           "Wait side on event 0", "issue AG block.4 fwd", "optimizer.zero_grad",
                                           "Free 'activations block.3'", "blocked: end of step"});
  // A timeline op's names are the program's, kept alive with the timeline.
  CHECK(t.program_text == p.text);
  CHECK(t.ops.at(0).name == "fwd block.3");
  CHECK(t.ops.at(1).unit == "block.4");
}

TEST_CASE("host_label gives a measured interval's text as it is", "[timeline]") {
  Timeline t;
  t.host.push_back(HostInterval{HostInterval::Kind::Work, HostInterval::Label::Text, 0, t.text->add("dataloader next"), Time::zero(),
                                Time::from_us(5)});
  CHECK(host_label(t, t.host.front()) == "dataloader next");
}
