// The Program -> GPU-call lowering of live mode, checked on the host: which call each
// instruction becomes, on which stream, with which sizes.
#include <catch2/catch.hpp>

#include <optional>

#include <filesystem>
#include <map>
#include <set>
#include <variant>

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
      for (const auto& c : li.calls) CHECK(stream_of(c) == x->stream);
    } else if (const auto* x = std::get_if<Collective>(&ins)) {
      ++collectives;
      REQUIRE(li.calls.size() == 1);
      const auto* c = std::get_if<calls::Collective>(&li.calls[0]);
      REQUIRE(c);
      CHECK(c->stream == x->stream);
      CHECK(c->comm == x->comm);
    } else if (const auto* x = std::get_if<Record>(&ins)) {
      REQUIRE(li.calls.size() == 1);
      const auto* c = std::get_if<calls::EventRecord>(&li.calls[0]);
      REQUIRE(c);
      CHECK(c->event == x->event);
      CHECK(c->stream == x->stream);
    } else if (const auto* x = std::get_if<Wait>(&ins)) {
      REQUIRE(li.calls.size() == 1);
      const auto* c = std::get_if<calls::StreamWaitEvent>(&li.calls[0]);
      REQUIRE(c);
      CHECK(c->event == x->event);
      CHECK(c->stream == x->stream);
    } else if (const auto* x = std::get_if<Alloc>(&ins)) {
      REQUIRE(li.calls.size() == 1);
      const auto* c = std::get_if<calls::MallocAsync>(&li.calls[0]);
      REQUIRE(c);
      CHECK(c->bytes == x->bytes);
      CHECK(c->stream == x->stream);
      CHECK(c->buffer == x->buffer);
    } else if (std::holds_alternative<Free>(ins)) {
      REQUIRE(li.calls.size() == 1);
      // DDP frees are plain (stream-ordered) frees.
      CHECK(std::holds_alternative<calls::FreeAsync>(li.calls[0]));
    } else if (const auto* x = std::get_if<Mark>(&ins)) {
      REQUIRE(li.calls.size() == 1);
      const auto* c = std::get_if<calls::Mark>(&li.calls[0]);
      REQUIRE(c);
      CHECK(c->name == x->name);
      CHECK(c->phase == x->phase);
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
    const auto* c = std::get_if<calls::Spin>(&l.instructions[i].calls[0]);
    REQUIRE(c);
    CHECK(c->duration == Time::from_ms(5));  // backward_ms 5
    CHECK(stream_name(b.p, c->stream) == "default");
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
      for (const auto& call : li.calls) {
        const auto* c = std::get_if<calls::Collective>(&call);
        if (!c) continue;
        CHECK(c->kind == CollectiveKind::AllReduce);
        CHECK(stream_name(b.p, c->stream) == "nccl");
        CHECK(c->dtype == Dtype::FP32);
        CHECK(c->in_place);  // DDP all-reduces the bucket in place
        // All-reduce: S = count * 4 B whatever the rank count; 6e6 / 4 = 1.5e6 elements.
        CHECK(c->sizes.count == 1'500'000);
        CHECK(c->sizes.send_bytes == 6'000'000);
        CHECK(c->sizes.recv_bytes == 6'000'000);
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
    if (!x || x->kernel.work->memory_bytes.count == 0) continue;
    REQUIRE(l.instructions[i].calls.size() == 1);
    const auto* c = std::get_if<calls::MemoryCopy>(&l.instructions[i].calls[0]);
    REQUIRE(c);
    CHECK(c->bytes.count * c->repeats == x->kernel.work->memory_bytes.count / 2);
    ++copies;
  }
  // grad->bucket per layer (10 layers: 2 * 3e6 B -> 3e6 B copies) and bucket->grad per bucket
  // (5 buckets: 2 * 6e6 B -> 6e6 B copies), and autograd's ones_like seed of the fp32 loss (4 B
  // -> 2 B); the largest copy sizes the default stream's scratch.
  CHECK(copies == 16);
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
    const KernelWork& w = *x->kernel.work;
    std::vector<const calls::Gemm*> gemms, attention;
    for (const auto& call : l.instructions[i].calls)
      if (const auto* c = std::get_if<calls::Gemm>(&call)) (c->from_attention ? attention : gemms).push_back(c);
    REQUIRE(gemms.size() == w.gemms.size());
    for (std::size_t g = 0; g < gemms.size(); ++g) {
      CHECK(gemms[g]->shape == w.gemms[g]);
      CHECK(l.gemm_shapes.at(static_cast<std::size_t>(gemms[g]->plan)) == w.gemms[g]);
      CHECK(gemms[g]->stream == x->stream);
      distinct.insert(w.gemms[g]);
      ++gemm_calls;
    }
    for (const calls::Gemm* c : attention) {
      // Same FLOPs to within half a batch entry (2 * 2048 * 2048 * 128 FLOPs).
      CHECK(std::abs(c->shape.flops().count - w.attention.flops.count) <= 0.5 * 2.0 * 2048 * 2048 * 128);
      CHECK(l.gemm_shapes.at(static_cast<std::size_t>(c->plan)) == c->shape);
      distinct.insert(c->shape);
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
    const auto* c = std::get_if<calls::MemoryCopy>(&l.instructions[i].calls.at(0));
    REQUIRE(c);
    std::int64_t half = x->kernel.work->memory_bytes.count / 2;
    CHECK(c->bytes <= Bytes::from_mib(256));
    // Equal chunks cover half the traffic, rounding up by less than one byte per chunk.
    CHECK(c->bytes.count * c->repeats >= half);
    CHECK(c->bytes.count * c->repeats < half + c->repeats + 1);
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
  b.launch(dflt, KernelSpec{"fwd", KernelClass::Compute, KernelWork{{}, Bytes{}, AttentionWork{}, Time::from_ms(1)}, ""});
  b.free_after(buf, {dflt});
  BufferId plain = b.alloc("tmp", Bytes{128}, MemCategory::Other, side);
  b.free(plain);
  Program p = b.take();
  LoweredProgram l = lower_program(p, opts(1, 1));
  const calls::DeferredFree* deferred = nullptr;
  const calls::FreeAsync* plain_free = nullptr;
  for (const auto& li : l.instructions)
    for (const auto& c : li.calls) {
      if (const auto* d = std::get_if<calls::DeferredFree>(&c)) deferred = d;
      if (const auto* f = std::get_if<calls::FreeAsync>(&c)) plain_free = f;
    }
  REQUIRE(deferred);
  CHECK(deferred->stream == side);  // freed on the allocation stream once the events complete
  CHECK(deferred->buffer == buf);
  CHECK(deferred->wait_streams == std::vector<StreamId>{side, dflt});
  CHECK(l.uses_deferred_free);
  REQUIRE(plain_free);
  CHECK(plain_free->stream == side);
  CHECK(plain_free->buffer == plain);
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
  REQUIRE(l.instructions.size() == 4);
  for (const auto& li : l.instructions) REQUIRE(li.calls.size() == 1);
  CHECK(std::holds_alternative<calls::EventRecord>(l.instructions[0].calls[0]));
  const auto* event_sync = std::get_if<calls::EventSynchronize>(&l.instructions[1].calls[0]);
  REQUIRE(event_sync);
  CHECK(event_sync->event == e);
  CHECK(event_sync->reason == "event.synchronize()");
  CHECK_FALSE(stream_of(l.instructions[1].calls[0]).has_value());  // the host waits, no stream is enqueued on
  const auto* stream_sync = std::get_if<calls::StreamSynchronize>(&l.instructions[2].calls[0]);
  REQUIRE(stream_sync);
  CHECK(stream_sync->stream == s);
  const auto* busy = std::get_if<calls::HostBusyWait>(&l.instructions[3].calls[0]);
  REQUIRE(busy);
  CHECK(busy->duration == Time::from_us(40));
  CHECK(busy->name == "python hook");
  CHECK_FALSE(stream_of(l.instructions[3].calls[0]).has_value());
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
