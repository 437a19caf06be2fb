// The Program -> GPU-call lowering of live mode, checked on the host: which call each
// instruction becomes, on which stream, with which sizes.
#include <catch2/catch.hpp>

#include <optional>

#include <filesystem>
#include <map>
#include <set>

#include "live/lowering.hpp"
#include "sim/core/error.hpp"
#include "sim/program/builder.hpp"
#include "sim/strategies/load_experiment.hpp"
#include "sim/strategies/strategy.hpp"

using namespace stepsim;
using namespace stepsim::live;

namespace {

const std::string kRoot = STEPSIM_SOURCE_DIR;

struct Built {
  Experiment e;
  Program p;
};

Built build(const std::string& rel, const std::vector<std::string>& sets = {}) {
  Built b{load_experiment(kRoot + "/" + rel, sets), {}};
  b.p = b.e.strategy->build(b.e);
  return b;
}

LoweringOptions opts(int experiment_world, int live_world, int rank = 0) {
  LoweringOptions o;
  o.experiment_world = experiment_world;
  o.live_world = live_world;
  o.live_rank = rank;
  return o;
}

const std::string& stream_name(const Program& p, std::optional<StreamId> s) { return p.streams.at(s.value().index()).name; }

}  // namespace

TEST_CASE("every instruction of the C1 DDP program lowers to the CUDA call of its kind, in order", "[live]") {
  Built b = build("configs/examples/seed/c1-ddp-buckets.json");
  LoweredProgram l = lower_program(b.p, opts(8, 1));
  REQUIRE(l.instructions.size() == b.p.instructions.size());
  int launches = 0, collectives = 0;
  for (std::size_t i = 0; i < b.p.instructions.size(); ++i) {
    const auto& li = l.instructions[i];
    CHECK(li.instruction == i);
    const auto& ins = b.p.instructions[i];
    if (const auto* x = std::get_if<Launch>(&ins)) {
      ++launches;
      CHECK(li.timed);
      CHECK(li.stream == x->stream);
      for (const auto& c : li.calls) CHECK(c.stream == x->stream);
    } else if (const auto* x = std::get_if<Collective>(&ins)) {
      ++collectives;
      REQUIRE(li.calls.size() == 1);
      CHECK(li.calls[0].kind == CallKind::Collective);
      CHECK(li.calls[0].stream == x->stream);
      CHECK(li.calls[0].comm == x->comm);
    } else if (const auto* x = std::get_if<Record>(&ins)) {
      REQUIRE(li.calls.size() == 1);
      CHECK(li.calls[0].kind == CallKind::EventRecord);
      CHECK(li.calls[0].event == x->event);
      CHECK(li.calls[0].stream == x->stream);
    } else if (const auto* x = std::get_if<Wait>(&ins)) {
      REQUIRE(li.calls.size() == 1);
      CHECK(li.calls[0].kind == CallKind::StreamWaitEvent);
      CHECK(li.calls[0].event == x->event);
      CHECK(li.calls[0].stream == x->stream);
    } else if (const auto* x = std::get_if<Alloc>(&ins)) {
      REQUIRE(li.calls.size() == 1);
      CHECK(li.calls[0].kind == CallKind::MallocAsync);
      CHECK(li.calls[0].bytes == x->bytes);
      CHECK(li.calls[0].stream == x->stream);
    } else if (std::holds_alternative<Free>(ins)) {
      REQUIRE(li.calls.size() == 1);
      // DDP frees are plain (stream-ordered) frees.
      CHECK(li.calls[0].kind == CallKind::FreeAsync);
    } else if (std::holds_alternative<Mark>(ins)) {
      REQUIRE(li.calls.size() == 1);
      CHECK(li.calls[0].kind == CallKind::Mark);
    }
    if (!std::holds_alternative<Launch>(ins) && !std::holds_alternative<Collective>(ins)) CHECK_FALSE(li.timed);
  }
  CHECK(l.timed_ops == launches + collectives);
  // 10 layers x 3e6 B of fp32 gradients in buckets of 6e6 B: 5 all-reduces.
  CHECK(collectives == 5);
  CHECK(l.gemm_shapes.empty());  // a toy workload has no GEMMs
}

TEST_CASE("C1's toy backward layers become 5 ms spin kernels on the default stream", "[live]") {
  Built b = build("configs/examples/seed/c1-ddp-buckets.json");
  LoweredProgram l = lower_program(b.p, opts(8, 1));
  int spins = 0;
  for (std::size_t i = 0; i < b.p.instructions.size(); ++i) {
    const auto* x = std::get_if<Launch>(&b.p.instructions[i]);
    if (!x || x->kernel.name.rfind("bwd ", 0) != 0) continue;
    REQUIRE(l.instructions[i].calls.size() == 1);
    const GpuCall& c = l.instructions[i].calls[0];
    CHECK(c.kind == CallKind::Spin);
    CHECK(c.duration == Time::from_ms(5));  // backward_ms 5
    CHECK(stream_name(b.p, c.stream) == "default");
    ++spins;
  }
  CHECK(spins == 10);
}

TEST_CASE("C1's bucket all-reduces are 6e6-byte fp32 ncclAllReduce calls on the nccl stream", "[live]") {
  Built b = build("configs/examples/seed/c1-ddp-buckets.json");
  for (int world : {1, 8}) {
    LoweredProgram l = lower_program(b.p, opts(8, world));
    REQUIRE(l.comms.size() == 1);
    // The DDP group spans the experiment's world, so it spans the MPI world.
    CHECK(l.comms[0].ranks == world);
    CHECK(l.comms[0].program_ranks == 8);
    for (const auto& li : l.instructions)
      for (const auto& c : li.calls) {
        if (c.kind != CallKind::Collective) continue;
        CHECK(c.collective == CollectiveKind::AllReduce);
        CHECK(stream_name(b.p, c.stream) == "nccl");
        CHECK(c.dtype == Dtype::FP32);
        // All-reduce: S = count * 4 B whatever the rank count; 6e6 / 4 = 1.5e6 elements.
        CHECK(c.sizes.count == 1'500'000);
        CHECK(c.sizes.send_bytes == 6'000'000);
        CHECK(c.sizes.recv_bytes == 6'000'000);
      }
    CHECK(l.max_send_bytes_per_comm.at(0) == Bytes{6'000'000});
  }
}

TEST_CASE("an elementwise kernel of N bytes read+write becomes one device copy of N/2 bytes", "[live]") {
  Built b = build("configs/examples/seed/c1-ddp-buckets.json");
  LoweredProgram l = lower_program(b.p, opts(8, 1));
  int copies = 0;
  for (std::size_t i = 0; i < b.p.instructions.size(); ++i) {
    const auto* x = std::get_if<Launch>(&b.p.instructions[i]);
    if (!x || x->kernel.work.memory_bytes.count == 0) continue;
    REQUIRE(l.instructions[i].calls.size() == 1);
    const GpuCall& c = l.instructions[i].calls[0];
    CHECK(c.kind == CallKind::MemoryCopy);
    CHECK(c.copy_bytes.count * c.copy_repeats == x->kernel.work.memory_bytes.count / 2);
    ++copies;
  }
  // grad->bucket per layer (10 layers: 2 * 3e6 B -> 3e6 B copies) and bucket->grad per bucket
  // (5 buckets: 2 * 6e6 B -> 6e6 B copies); the largest copy sizes the default stream's scratch.
  CHECK(copies == 15);
  CHECK(l.max_copy_bytes_per_stream.at(0) == Bytes{6'000'000});
}

TEST_CASE("the Llama-3-8B example lowers its GEMMs shape for shape, planned once per distinct shape", "[live]") {
  Built b = build("configs/examples/llama3-8b-ddp-8xh100.json");
  LoweredProgram l = lower_program(b.p, opts(8, 1));
  std::set<GemmShape> distinct;
  std::size_t gemm_calls = 0;
  for (std::size_t i = 0; i < b.p.instructions.size(); ++i) {
    const auto* x = std::get_if<Launch>(&b.p.instructions[i]);
    if (!x) continue;
    const KernelWork& w = x->kernel.work;
    std::vector<const GpuCall*> gemms;
    for (const auto& c : l.instructions[i].calls)
      if (c.kind == CallKind::Gemm && !c.from_attention) gemms.push_back(&c);
    REQUIRE(gemms.size() == w.gemms.size());
    for (std::size_t g = 0; g < gemms.size(); ++g) {
      CHECK(gemms[g]->gemm == w.gemms[g]);
      CHECK(l.gemm_shapes.at(static_cast<std::size_t>(gemms[g]->gemm_plan)) == w.gemms[g]);
      CHECK(gemms[g]->stream == x->stream);
      distinct.insert(w.gemms[g]);
      ++gemm_calls;
    }
    for (const auto& c : l.instructions[i].calls)
      if (c.from_attention) {
        // Same FLOPs to within half a batch entry (2 * 2048 * 2048 * 128 FLOPs).
        CHECK(std::abs(c.gemm.flops().count - w.attention_flops.count) <= 0.5 * 2.0 * 2048 * 2048 * 128);
        distinct.insert(c.gemm);
      }
  }
  CHECK(gemm_calls > 0);
  CHECK(l.gemm_shapes.size() == distinct.size());
  // Scratch: A and B are the largest operands of any planned shape.
  Bytes max_a;
  for (const auto& g : l.gemm_shapes) max_a = std::max(max_a, gemm_a_bytes(g));
  CHECK(l.max_gemm_a_bytes == max_a);
}

TEST_CASE("the optimizer's huge memory traffic is copied in chunks no larger than the copy chunk", "[live]") {
  Built b = build("configs/examples/llama3-8b-ddp-8xh100.json");
  LoweredProgram l = lower_program(b.p, opts(8, 1));
  bool found = false;
  for (std::size_t i = 0; i < b.p.instructions.size(); ++i) {
    const auto* x = std::get_if<Launch>(&b.p.instructions[i]);
    if (!x || x->kernel.cls != KernelClass::Optimizer) continue;
    found = true;
    const GpuCall& c = l.instructions[i].calls.at(0);
    REQUIRE(c.kind == CallKind::MemoryCopy);
    std::int64_t half = x->kernel.work.memory_bytes.count / 2;
    CHECK(c.copy_bytes <= Bytes::from_mib(256));
    // Equal chunks cover half the traffic, rounding up by less than one byte per chunk.
    CHECK(c.copy_bytes.count * c.copy_repeats >= half);
    CHECK(c.copy_bytes.count * c.copy_repeats < half + c.copy_repeats + 1);
  }
  CHECK(found);
  for (const auto& m : l.max_copy_bytes_per_stream) CHECK(m <= Bytes::from_mib(256));
}

TEST_CASE("collective sizes follow the nccl-tests convention for the live communicator size", "[live]") {
  // All-gather of S = 8 MiB bf16 on 4 ranks: each rank sends 2 MiB (1 Mi elements), receives 8 MiB.
  auto ag = collective_sizes(CollectiveKind::AllGather, 8 << 20, 4, Dtype::BF16);
  CHECK(ag.count == (1 << 20));
  CHECK(ag.send_bytes == (2 << 20));
  CHECK(ag.recv_bytes == (8 << 20));
  // Reduce-scatter is the mirror image.
  auto rs = collective_sizes(CollectiveKind::ReduceScatter, 8 << 20, 4, Dtype::BF16);
  CHECK(rs.send_bytes == (8 << 20));
  CHECK(rs.recv_bytes == (2 << 20));
  // One rank: an all-gather is a copy of the whole buffer.
  auto one = collective_sizes(CollectiveKind::AllGather, 8 << 20, 1, Dtype::BF16);
  CHECK(one.send_bytes == (8 << 20));
  CHECK(one.recv_bytes == (8 << 20));
  // 10 bytes of fp32 on 4 ranks rounds down to one element per rank.
  auto tiny = collective_sizes(CollectiveKind::AllGather, 10, 4, Dtype::FP32);
  CHECK(tiny.count == 1);
  CHECK(tiny.total_bytes == 16);
}

TEST_CASE("communicators map onto the MPI world by the documented rule", "[live]") {
  // Whole-world group: the whole MPI world, whatever its size.
  CHECK(map_communicator(CommDecl{"fsdp", 16, 2}, opts(16, 4, 3)).ranks == 4);
  // Intra-node shard group of 8 in a 16-rank world: consecutive blocks.
  LiveComm shard = map_communicator(CommDecl{"shard", 8, 1}, opts(16, 16, 11));
  CHECK(shard.ranks == 8);
  CHECK(shard.color == 1);  // ranks 8..15
  // Replicate group: one rank per node across 2 nodes: ranks with the same local index.
  LiveComm rep = map_communicator(CommDecl{"replicate", 2, 2}, opts(16, 16, 11));
  CHECK(rep.ranks == 2);
  CHECK(rep.color == 3);  // 11 % 8: ranks 3 and 11
  // One MPI process: every communicator has one rank.
  CHECK(map_communicator(CommDecl{"shard", 8, 1}, opts(16, 1, 0)).ranks == 1);
  // A group that does not divide the MPI world cannot be formed.
  CHECK_THROWS_AS(map_communicator(CommDecl{"shard", 4, 1}, opts(16, 6, 0)), InputError);
}

TEST_CASE("a record_stream free waits for the allocation stream and every recorded stream", "[live]") {
  ProgramBuilder b;
  StreamId dflt = b.default_stream();
  StreamId side = b.stream("unshard");
  BufferId buf = b.alloc("full_param", Bytes{4096}, MemCategory::UnshardedParameters, side);
  b.launch(dflt, Kernel{"fwd", KernelClass::Compute, KernelWork{{}, Bytes{}, Flops{}, Time::from_ms(1)}, ""});
  b.free_after(buf, {dflt});
  BufferId plain = b.alloc("tmp", Bytes{128}, MemCategory::Other, side);
  b.free(plain);
  Program p = b.take();
  LoweredProgram l = lower_program(p, opts(1, 1));
  const GpuCall* deferred = nullptr;
  const GpuCall* plain_free = nullptr;
  for (const auto& li : l.instructions)
    for (const auto& c : li.calls) {
      if (c.kind == CallKind::DeferredFree) deferred = &c;
      if (c.kind == CallKind::FreeAsync) plain_free = &c;
    }
  REQUIRE(deferred);
  CHECK(deferred->stream == side);  // freed on the allocation stream once the events complete
  CHECK(deferred->wait_streams == std::vector<StreamId>{side, dflt});
  CHECK(l.uses_deferred_free);
  REQUIRE(plain_free);
  CHECK(plain_free->stream == side);
}

TEST_CASE("host syncs and host work lower to blocking CUDA calls and host busy-waits", "[live]") {
  ProgramBuilder b;
  StreamId s = b.stream("side");
  EventId e = b.record(s);
  b.host_sync(e, "event.synchronize()");
  b.host_sync_stream(s, "stream.synchronize()");
  b.host_work(Time::from_us(40), "python hook");
  Program p = b.take();
  LoweredProgram l = lower_program(p, opts(1, 1));
  std::vector<CallKind> kinds;
  for (const auto& li : l.instructions)
    for (const auto& c : li.calls) kinds.push_back(c.kind);
  CHECK(kinds == std::vector<CallKind>{CallKind::EventRecord, CallKind::EventSynchronize, CallKind::StreamSynchronize,
                                       CallKind::HostBusyWait});
  CHECK(l.instructions[3].calls[0].duration == Time::from_us(40));
  CHECK(l.instructions[2].calls[0].stream == s);
}

TEST_CASE("a malformed program is refused by the lowering", "[live]") {
  Program p;
  p.streams = {StreamDecl{"default", 0}};
  p.buffer_count = 1;
  p.instructions.push_back(Free{BufferId{0}, {}});
  CHECK_THROWS_AS(lower_program(p, opts(1, 1)), std::logic_error);
  Program q;
  q.streams = {StreamDecl{"default", 0}};
  q.instructions.push_back(Launch{StreamId{3}, Kernel{}});
  CHECK_THROWS_AS(lower_program(q, opts(1, 1)), std::logic_error);
}

TEST_CASE("every validation experiment lowers for one GPU with only 1-rank communicators", "[live]") {
  // The validation matrix is single-GPU: with one MPI process every collective is a
  // world-size-1 NCCL call.
  int n = 0;
  for (const auto& f : std::filesystem::directory_iterator(kRoot + "/configs/examples/validation")) {
    if (f.path().extension() != ".json") continue;
    Built b = build("configs/examples/validation/" + f.path().filename().string());
    CHECK(b.e.cluster.world_size() == 1);
    LoweredProgram l = lower_program(b.p, opts(1, 1));
    for (const auto& c : l.comms) CHECK(c.ranks == 1);
    CHECK_FALSE(l.gemm_shapes.empty());
    ++n;
  }
  CHECK(n == 8);  // DDP x 2 bucket sizes, FSDP1 x 3 backward_prefetch x limit on/off
}
