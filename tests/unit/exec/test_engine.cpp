#include <catch2/catch.hpp>

#include <sstream>

#include "sim/core/error.hpp"
#include "sim/exec/engine.hpp"
#include "sim/report/chrome_trace.hpp"
#include "test_support.hpp"

using namespace stepsim;
using stepsim::test::fixed_kernel;
using stepsim::test::ideal_profile;

namespace {
const TimelineOp& op_named(const Timeline& t, const std::string& name) {
  for (const auto& op : t.ops)
    if (op.name == name) return op;
  FAIL("no op named " << name);
  return t.ops.front();
}
}  // namespace

TEST_CASE("A GPU op starts at max(issue, stream predecessor end, awaited event); concurrent kernels share the GPU", "[engine]") {
  ProgramBuilder b;
  auto side = b.stream("side");
  b.launch(StreamId{0}, fixed_kernel("a", Time::from_ms(5)));
  auto ev = b.record(StreamId{0});
  b.launch(side, fixed_kernel("b", Time::from_ms(1)));   // independent: starts at 0
  b.wait(side, ev);
  b.launch(side, fixed_kernel("c", Time::from_ms(2)));   // waits for a
  Timeline t = simulate_program(b.take(), ideal_profile());
  // a and b run concurrently and share the GPU equally: b's 1 ms of work ends at 2 ms; a has
  // done 1 ms of its 5 by then and ends at 6 ms; c starts when a's event completes.
  CHECK(op_named(t, "b").start == Time::zero());
  CHECK(op_named(t, "b").end == Time::from_ms(2));
  CHECK(op_named(t, "a").end == Time::from_ms(6));
  CHECK(op_named(t, "c").start == Time::from_ms(6));
  CHECK(op_named(t, "c").end == Time::from_ms(8));
  CHECK(t.end == Time::from_ms(8));
}

TEST_CASE("Communicator FIFO: a collective blocked on its stream blocks every later collective of that communicator", "[engine]") {
  // RS on stream `post` waits for 10 ms of compute; an AG issued after it on another stream
  // of the same communicator cannot start before the RS finishes (head-of-line blocking).
  ProgramBuilder b;
  auto post = b.stream("post_backward");
  auto unshard = b.stream("unshard");
  auto pg = b.comm("pg", 8, 1);
  b.launch(StreamId{0}, fixed_kernel("compute", Time::from_ms(10)));
  b.wait_stream(post, StreamId{0});
  b.collective(pg, post, CollectiveKind::ReduceScatter, Bytes{3'000'000}, Dtype::BF16, "RS");  // 3 ms
  b.collective(pg, unshard, CollectiveKind::AllGather, Bytes{3'000'000}, Dtype::BF16, "AG");   // 3 ms
  Timeline t = simulate_program(b.take(), ideal_profile());
  CHECK(op_named(t, "RS").start == Time::from_ms(10));
  CHECK(op_named(t, "AG").start == Time::from_ms(13));  // not 0: it queues behind the RS
  CHECK(op_named(t, "AG").end == Time::from_ms(16));
}

TEST_CASE("Collectives on two different communicators run concurrently", "[engine]") {
  ProgramBuilder b;
  auto s1 = b.stream("s1");
  auto s2 = b.stream("s2");
  auto intra = b.comm("shard", 8, 1);
  auto inter = b.comm("replicate", 2, 2);
  b.collective(intra, s1, CollectiveKind::ReduceScatter, Bytes{4'000'000}, Dtype::BF16, "RS");
  b.collective(inter, s2, CollectiveKind::AllReduce, Bytes{4'000'000}, Dtype::BF16, "AR");
  Timeline t = simulate_program(b.take(), ideal_profile());
  // Different link classes (intra-node and inter-node): both take their solo 4 ms at once.
  CHECK(op_named(t, "RS").start == Time::zero());
  CHECK(op_named(t, "AR").start == Time::zero());
  CHECK(t.end == Time::from_ms(4));
}

TEST_CASE("Two communicators on the same links share bandwidth fluidly", "[engine]") {
  ProgramBuilder b;
  auto s1 = b.stream("s1");
  auto s2 = b.stream("s2");
  auto a = b.comm("a", 8, 1);
  auto c = b.comm("b", 8, 1);
  b.collective(a, s1, CollectiveKind::AllReduce, Bytes{2'000'000}, Dtype::BF16, "X");  // 2 ms solo
  b.collective(c, s2, CollectiveKind::AllReduce, Bytes{4'000'000}, Dtype::BF16, "Y");  // 4 ms solo
  Timeline t = simulate_program(b.take(), ideal_profile());
  // Both at half rate until X finishes at 4 ms (2 ms of work at 1/2); Y has 2 ms of work left,
  // at full rate: ends at 6 ms.
  CHECK(op_named(t, "X").end == Time::from_ms(4));
  CHECK(op_named(t, "Y").end == Time::from_ms(6));
}

// A 4 ms kernel issued with a 1 ms (solo) all-reduce of 1 MB on 8 ranks beside it.
static Timeline kernel_beside_allreduce(const HardwareProfile& hw, const KernelSpec& k) {
  ProgramBuilder b;
  auto s = b.stream("comm");
  auto pg = b.comm("pg", 8, 1);
  b.launch(StreamId{0}, k);
  b.collective(pg, s, CollectiveKind::AllReduce, Bytes{1'000'000}, Dtype::BF16, "AR");
  return simulate_program(b.take(), hw);
}

// The all-reduce at 1/2 and the 4 ms kernel at 0.8 while it runs: AR, 1 ms of work at 1/2, ends
// at 2 ms; the kernel has done 2 ms x 0.8 = 1.6 ms of work by then, 2.4 ms left at full rate:
// it ends at 4.4 ms.
static void check_kernel_at_0_8_beside_allreduce_at_half(const HardwareProfile& hw, const char* kernel) {
  Timeline t = kernel_beside_allreduce(hw, fixed_kernel(kernel, Time::from_ms(4)));
  CHECK(op_named(t, "AR").end == Time::from_ms(2));
  CHECK(op_named(t, kernel).end == Time::from_us(4400));
}

TEST_CASE("Contention factors slow a kernel and a collective while they overlap", "[engine]") {
  HardwareProfile hw = ideal_profile();
  hw.contention.compute_slowdown = 0.25;  // kernel at 1/1.25 = 0.8 while a collective runs
  hw.contention.comm_slowdown = 1.0;      // collective at 1/2 while a kernel runs
  check_kernel_at_0_8_beside_allreduce_at_half(hw, "k");
}

TEST_CASE("Resource contention: a GEMM beside a collective runs on the SMs it leaves", "[engine][contention]") {
  HardwareProfile hw = ideal_profile();
  hw.contention.gpu_sms = 100;
  hw.contention.collective_sms = 20;      // a compute-bound kernel at 80/100 while a collective runs
  hw.contention.compute_slowdown = 5.0;   // unused under the resource model
  hw.contention.comm_slowdown = 1.0;      // collective at 1/2 beside a compute-bound kernel
  hw.compute.hbm = Bandwidth::from_gbps(1e6);
  check_kernel_at_0_8_beside_allreduce_at_half(hw, "gemm");
}

TEST_CASE("Resource contention: a memory-bound kernel and a collective share HBM in proportion to demand", "[engine][contention]") {
  HardwareProfile hw = ideal_profile();
  hw.contention.gpu_sms = 100;
  hw.contention.collective_sms = 20;
  hw.contention.comm_slowdown = 0.1;
  // The all-reduce moves 1.75 MB of bus traffic in its 1 ms, 3x that through HBM: 5.25 GB/s, a
  // quarter of 21 GB/s.
  hw.compute.hbm = Bandwidth::from_gbps(21);
  KernelSpec k = fixed_kernel("add", Time::from_ms(4));
  k.cls = KernelClass::Elementwise;
  Timeline t = kernel_beside_allreduce(hw, k);
  // Both at 1/1.25 while they overlap (max(comm_slowdown, 0.25) for the AR): the AR ends at
  // 1.25 ms; the kernel has done 1 ms of its 4 then and ends at 4.25 ms.
  CHECK(op_named(t, "AR").end == Time::from_us(1250));
  CHECK(op_named(t, "add").end == Time::from_us(4250));
}

TEST_CASE("A host sync blocks the host thread until the GPU reaches the event", "[engine]") {
  HardwareProfile hw = ideal_profile();
  hw.host.launch_overhead = Time::from_ms(1);
  ProgramBuilder b;
  b.launch(StreamId{0}, fixed_kernel("long", Time::from_ms(10)));   // issued at 1 ms, runs 1..11
  auto ev = b.record(StreamId{0});
  b.host_sync(ev, "event.synchronize()");
  b.launch(StreamId{0}, fixed_kernel("after", Time::from_ms(1)));    // host resumes at 11, issues at 12
  Timeline t = simulate_program(b.take(), hw);
  CHECK(op_named(t, "long").start == Time::from_ms(1));
  CHECK(op_named(t, "after").issue == Time::from_ms(12));
  CHECK(op_named(t, "after").end == Time::from_ms(13));
  bool blocked = false;
  for (const auto& h : t.host)
    if (h.kind == HostInterval::Kind::Blocked) {
      blocked = true;
      CHECK(h.start == Time::from_ms(1));
      CHECK(h.end == Time::from_ms(11));
    }
  CHECK(blocked);
}

TEST_CASE("A record_stream free lands when the recorded stream's queued work completes; a plain free at issue", "[engine]") {
  ProgramBuilder b;
  auto buf = b.alloc("full_param", Bytes{1000}, MemCategory::UnshardedParameters, StreamId{0});
  auto tmp = b.alloc("tmp", Bytes{500}, MemCategory::Other, StreamId{0});
  b.launch(StreamId{0}, fixed_kernel("compute", Time::from_ms(5)));
  b.free_after(buf, {StreamId{0}});  // FSDP1 _free_unsharded_flat_param: reusable at 5 ms
  b.free(tmp);             // FSDP2-style: at issue (t = 0)
  Timeline t = simulate_program(b.take(), ideal_profile());
  // Samples: start 0; +1000; +500; -500 at 0; -1000 at 5 ms.
  REQUIRE(t.memory.size() == 5);
  CHECK(t.memory[3].time == Time::zero());
  CHECK(t.memory[3].total == Bytes{1000});
  CHECK(t.memory[4].time == Time::from_ms(5));
  CHECK(t.memory[4].total == Bytes{0});
}

TEST_CASE("A wait on an event that is never recorded is reported as a deadlock naming it", "[engine]") {
  ProgramBuilder b;
  auto side = b.stream("unshard");
  EventId never = b.new_event();
  b.wait(side, never);
  b.launch(side, fixed_kernel("stuck", Time::from_ms(1)));
  try {
    simulate_program(b.take(), ideal_profile());
    FAIL("expected a deadlock");
  } catch (const DeadlockError& e) {
    std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("unshard"));
    CHECK_THAT(msg, Catch::Contains("event 0 is never recorded"));
    CHECK_THAT(msg, Catch::Contains("Wait unshard on event 0"));
  }
}

TEST_CASE("A host sync on an event never recorded is a deadlock, not a hang", "[engine]") {
  ProgramBuilder b;
  EventId never = b.new_event();
  b.host_sync(never, "rate limiter");
  CHECK_THROWS_AS(simulate_program(b.take(), ideal_profile()), DeadlockError);
}

TEST_CASE("The same program twice gives identical timelines and trace bytes", "[engine]") {
  auto build = [] {
    ProgramBuilder b;
    auto s = b.stream("comm");
    auto pg = b.comm("pg", 8, 1);
    for (int i = 0; i < 20; ++i) {
      b.launch(StreamId{0}, fixed_kernel("k" + std::to_string(i), Time::from_us(100 + i)));
      b.wait_stream(s, StreamId{0});
      b.collective(pg, s, CollectiveKind::AllReduce, Bytes{50'000 + i}, Dtype::BF16, "AR" + std::to_string(i));
    }
    return b.take();
  };
  HardwareProfile hw = ideal_profile();
  hw.contention.compute_slowdown = 0.3;
  std::ostringstream a, c;
  write_chrome_trace(a, simulate_program(build(), hw), "x");
  write_chrome_trace(c, simulate_program(build(), hw), "x");
  CHECK(a.str() == c.str());
  CHECK(a.str().size() > 1000);
}

TEST_CASE("describe() names every kind of instruction, its numbers and its streams", "[engine]") {
  // The text comes from pieces held as views until they are joined; each must outlive that
  // (a collective's kind once came from a temporary string: garbage in live traces and errors).
  ProgramBuilder b;
  auto side = b.stream("side");
  CommId world = b.comm("world", 8, 1);
  b.launch(StreamId{0}, fixed_kernel("fwd block.0", Time::from_ms(1)));
  b.collective(world, side, CollectiveKind::ReduceScatter, Bytes{1024}, Dtype::BF16, "RS block.0");
  EventId e = b.record(side);
  b.wait(StreamId{0}, e);
  b.host_sync(e, "loss.item()");
  BufferId buf = b.alloc("activations block.0", Bytes{4096}, MemCategory::Activations, StreamId{0});
  b.free(buf);
  b.record(e, StreamId{7});  // a stream that was never declared: "#" and its index
  const Program p = b.take();
  CHECK(describe(p, 0) == "Launch 'fwd block.0' on default");
  CHECK(describe(p, 1) == "Collective reduce_scatter 'RS block.0' on side");
  CHECK(describe(p, 2) == "Record event 0 on side");
  CHECK(describe(p, 3) == "Wait default on event 0");
  CHECK(describe(p, 4) == "HostSync on event 0 (loss.item())");
  CHECK(describe(p, 5) == "Alloc 'activations block.0' 4096 B");
  CHECK(describe(p, 6) == "Free 'activations block.0'");
  CHECK(describe(p, 7) == "Record event 0 on #7");
  CHECK(describe(p, 8) == "end of program");
}

TEST_CASE("The host blocks once 1024 commands are pending on a stream and allocates later for it", "[engine]") {
  // 2,000 kernels of 1 ms on one stream, issued at no CPU cost, then an allocation. Without a
  // bound the host issues everything at 0 ms. With the driver's queue of 1,024, launch k
  // (0-based) waits for kernel k - 1024 to end, at (k - 1023) ms: the last, k = 1999, is issued
  // at 976 ms, and so is the allocation after it.
  ProgramBuilder b;
  for (int k = 0; k < 2000; ++k) b.launch(StreamId{0}, fixed_kernel("k" + std::to_string(k), Time::from_ms(1)));
  b.alloc("after", Bytes{1000}, MemCategory::Other, StreamId{0});
  Timeline t = simulate_program(b.take(), ideal_profile());
  CHECK(op_named(t, "k1023").issue == Time::zero());
  CHECK(op_named(t, "k1024").issue == Time::from_ms(1));
  CHECK(op_named(t, "k1999").issue == Time::from_ms(976));
  CHECK(t.memory.back().time == Time::from_ms(976));
  CHECK(t.end == Time::from_ms(2000));
  bool blocked = false;
  for (const auto& h : t.host) blocked = blocked || (h.kind == HostInterval::Kind::Blocked && host_label(t, h).find("launch queue full") != std::string::npos);
  CHECK(blocked);
}
