// sim/program/validate: the one well-formedness check both executors run before they start.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "live/lowering.hpp"
#include "sim/exec/engine.hpp"
#include "sim/program/builder.hpp"
#include "sim/program/validate.hpp"

using namespace stepsim;

namespace {

const KernelWork empty_gemm{{GemmShape{8, 0, 8}}, {}, {}, {}};

// The exception text of validate(p), "" when it accepts p.
std::string refusal(const Program& p) {
  try {
    validate(p);
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "";
}

Program one_stream() {
  Program p;
  p.streams = {StreamDecl{"default", 0}};
  return p;
}

}  // namespace

TEST_CASE("validate accepts what the builder builds", "[program]") {
  ProgramBuilder b;
  auto side = b.stream("side");
  auto pg = b.comm("pg", 2, 1);
  auto buf = b.alloc("x", Bytes{64}, MemCategory::Other, side);
  b.launch(side, KernelSpec{"k", KernelClass::Gemm, KernelWork{{GemmShape{8, 8, 8}}, {}, {}, {}}});
  b.collective(pg, side, CollectiveKind::AllReduce, Bytes{64}, Dtype::BF16, "AR");
  b.wait_stream(b.default_stream(), side);
  b.host_sync_stream(side, "sync");
  b.free_after(buf, {side, b.default_stream()});
  auto again = b.alloc("y", Bytes{64}, MemCategory::Other, b.default_stream());
  b.free(again);
  CHECK(refusal(b.program()).empty());
}

// Each message names the instruction (its index in Program::instructions) and the id.
TEST_CASE("validate names the instruction and the undeclared id", "[program]") {
  Program p = one_stream();
  p.instructions.push_back(Mark{"m", {}});
  p.instructions.push_back(Launch{StreamId{3}, Kernel{}});
  CHECK(refusal(p) == "instruction 1: stream 3 was not declared");

  Program e = one_stream();
  e.event_count = 1;
  e.instructions.push_back(Wait{StreamId{0}, EventId{1}});
  CHECK(refusal(e) == "instruction 0: event 1 was not declared");

  Program c = one_stream();
  c.instructions.push_back(Collective{CommId{0}, StreamId{0}, CollectiveKind::AllGather, Bytes{8}, Dtype::BF16, "AG", ""});
  CHECK(refusal(c) == "instruction 0: communicator 0 was not declared");

  Program s = one_stream();
  s.event_count = 1;
  s.instructions.push_back(HostSync{StreamId{1}, "sync"});
  CHECK(refusal(s) == "instruction 0: stream 1 was not declared");

  Program b = one_stream();
  b.instructions.push_back(Alloc{BufferId{0}, Bytes{8}, MemCategory::Other, StreamId{0}, "x"});
  CHECK(refusal(b) == "instruction 0: buffer 0 was not declared");

  Program r = one_stream();
  r.buffer_count = 1;
  r.buffer_names = {"x"};
  r.instructions.push_back(Alloc{BufferId{0}, Bytes{8}, MemCategory::Other, StreamId{0}, "x"});
  r.instructions.push_back(Free{BufferId{0}, {StreamId{0}, StreamId{2}}});
  CHECK(refusal(r) == "instruction 1: stream 2 was not declared");
}

TEST_CASE("validate follows each buffer's life in program order", "[program]") {
  Program p = one_stream();
  p.buffer_count = 1;
  p.buffer_names = {"grad"};
  p.instructions.push_back(Alloc{BufferId{0}, Bytes{8}, MemCategory::Gradients, StreamId{0}, "grad"});
  p.instructions.push_back(Alloc{BufferId{0}, Bytes{8}, MemCategory::Gradients, StreamId{0}, "grad"});
  CHECK(refusal(p) == "instruction 1: buffer 0 allocated twice");

  Program f = one_stream();
  f.buffer_count = 1;
  f.buffer_names = {"grad"};
  f.instructions.push_back(Alloc{BufferId{0}, Bytes{8}, MemCategory::Gradients, StreamId{0}, "grad"});
  f.instructions.push_back(Free{BufferId{0}, {StreamId{0}}});  // a record_stream free ends the life at issue too
  f.instructions.push_back(Free{BufferId{0}, {}});
  CHECK(refusal(f) == "instruction 2: free of buffer 'grad' that is not live");

  Program k = one_stream();
  k.instructions.push_back(Launch{StreamId{0}, Kernel{.name = "mm", .cls = KernelClass::Gemm, .work = &empty_gemm}});
  CHECK(refusal(k) == "instruction 0: kernel 'mm' has an empty GEMM 8x0x8");
}

TEST_CASE("the simulator and the live lowering both refuse what validate refuses", "[program]") {
  Program p = one_stream();
  p.buffer_count = 1;
  p.buffer_names = {"x"};
  p.instructions.push_back(Free{BufferId{0}, {}});
  const std::string expected = "instruction 0: free of buffer 'x' that is not live";
  CHECK(refusal(p) == expected);
  CHECK_THROWS_WITH(simulate_program(p, HardwareProfile{}), expected);
  CHECK_THROWS_WITH(live::lower_program(p, live::LoweringOptions{}), expected);

  // The simulator checks each instruction as its host reaches it (ProgramChecker): a refusal
  // after valid instructions, and one the engine would otherwise index out of bounds with
  // (an undeclared communicator, which it counts for NCCL's buffers), come out the same.
  Program k = one_stream();
  k.instructions.push_back(Mark{"step", Phase::Forward});
  k.instructions.push_back(Launch{StreamId{0}, Kernel{.name = "mm", .cls = KernelClass::Gemm, .work = &empty_gemm}});
  CHECK(refusal(k) == "instruction 1: kernel 'mm' has an empty GEMM 8x0x8");
  CHECK_THROWS_WITH(simulate_program(k, HardwareProfile{}), refusal(k));
  Program c = one_stream();
  c.instructions.push_back(Collective{CommId{3}, StreamId{0}, CollectiveKind::AllReduce, Bytes{64}, Dtype::BF16, "AR", ""});
  CHECK(refusal(c) == "instruction 0: communicator 3 was not declared");
  CHECK_THROWS_WITH(simulate_program(c, HardwareProfile{}), refusal(c));
}

TEST_CASE("GemmList: one GEMM inline, more on the heap, contiguous; a move leaves the source empty", "[program]") {
  const GemmShape a{8, 8, 8}, b{16, 16, 16}, c{32, 32, 32};
  GemmList one{a};
  CHECK(one.size() == 1);
  CHECK(one.front() == a);
  GemmList three = one;
  three.push_back(b);
  three.push_back(c);
  REQUIRE(three.size() == 3);
  CHECK((three[0] == a && three[1] == b && three[2] == c));
  CHECK(three.end() - three.begin() == 3);
  GemmList moved = std::move(three);
  CHECK(moved.size() == 3);
  CHECK(moved[2] == c);
  CHECK(three.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is defined
  moved.append(moved);   // appending itself reads a copy
  CHECK(moved.size() == 6);
  CHECK((moved[3] == a && moved[5] == c));
  GemmList single = std::move(one);
  CHECK((single.size() == 1 && single.front() == a && one.empty()));  // NOLINT(bugprone-use-after-move)
  CHECK(single == GemmList{a});
  CHECK_FALSE(single == moved);
  KernelWork w;
  w.gemms = {a};
  KernelWork v;
  v.gemms = {b};
  w += v;
  CHECK((w.gemms.size() == 2 && w.gemms[1] == b));
}

TEST_CASE("a communicator counts the collectives issued on it, and a collective on one that counts none is refused", "[program]") {
  ProgramBuilder b;
  const CommId dp = b.comm("dp", 8, 1);
  b.comm("idle", 8, 1);
  b.collective(dp, StreamId{0}, CollectiveKind::AllGather, Bytes{64}, Dtype::BF16, "AG");
  b.collective(dp, StreamId{0}, CollectiveKind::ReduceScatter, Bytes{64}, Dtype::BF16, "RS");
  const Program p = b.take();
  CHECK(p.comms[0].collectives == 2);
  CHECK(p.comms[1].collectives == 0);
  CHECK(refusal(p).empty());

  // Built by hand without the count: the engine, which counts NCCL's communicators from it,
  // would miss this one's buffers.
  Program h = one_stream();
  h.comms = {CommDecl{"dp", 8, 1}};
  h.instructions.push_back(Collective{CommId{0}, StreamId{0}, CollectiveKind::AllReduce, Bytes{64}, Dtype::BF16, "AR", ""});
  const std::string expected =
      "instruction 0: a collective on communicator 0 ('dp'), which counts no collectives (CommDecl::collectives; "
      "ProgramBuilder::collective counts them)";
  CHECK(refusal(h) == expected);
  CHECK_THROWS_WITH(simulate_program(h, HardwareProfile{}), expected);
  h.comms[0].collectives = 1;
  CHECK(refusal(h).empty());
}
