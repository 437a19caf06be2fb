#include <array>

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "sim/analysis/metrics.hpp"
#include "sim/config/experiment.hpp"
#include "sim/config/json_reader.hpp"
#include "sim/core/error.hpp"
#include "sim/exec/caching_allocator.hpp"
#include "sim/exec/engine.hpp"
#include "test_support.hpp"

// Each rule is PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp, the function
// named in the test); the constants are kMinBlockSize 512, kSmallSize 1 MiB, kSmallBuffer 2 MiB,
// kLargeBuffer 20 MiB, kMinLargeAlloc 10 MiB, kRoundLarge 2 MiB.

using namespace stepsim;
using stepsim::test::fixed_kernel;
using stepsim::test::ideal_profile;

namespace {
constexpr std::int64_t MiB = 1024 * 1024;
}

TEST_CASE("round_size: requests are rounded up to 512 B, and below 512 B to 512 B", "[allocator]") {
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::round_size(3 * MiB + 1) == 3 * MiB + 512);
}

TEST_CASE("get_allocation_size: 2 MiB segments for <= 1 MiB, 20 MiB below 10 MiB, else rounded up to 2 MiB", "[allocator]") {
  CHECK(CachingAllocator::allocation_size(512) == 2 * MiB);
  CHECK(CachingAllocator::allocation_size(MiB) == 2 * MiB);          // kSmallSize is still small
  CHECK(CachingAllocator::allocation_size(MiB + 512) == 20 * MiB);   // large, < kMinLargeAlloc
  CHECK(CachingAllocator::allocation_size(10 * MiB - 512) == 20 * MiB);
  CHECK(CachingAllocator::allocation_size(10 * MiB) == 10 * MiB);    // >= kMinLargeAlloc: rounded
  CHECK(CachingAllocator::allocation_size(11 * MiB + 1) == 12 * MiB);
}

TEST_CASE("Small requests are packed into one 2 MiB segment until it is full", "[allocator]") {
  CachingAllocator a;
  // Four 500 KB requests: rounded to 500,224 B (977 x 512); four of them (2,000,896 B) fit in
  // 2,097,152 B, so one segment; the fifth needs a second 2 MiB segment.
  for (std::size_t i = 0; i < 4; ++i) a.malloc(BufferId{i}, Bytes{500'000}, StreamId{0});
  CHECK(a.reserved().count == 2 * MiB);
  CHECK(a.allocated().count == 4 * 500'224);
  a.malloc(BufferId{4}, Bytes{500'000}, StreamId{0});
  CHECK(a.reserved().count == 4 * MiB);
}

TEST_CASE("A 3 MiB request takes a 20 MiB segment and the 17 MiB rest serves later requests", "[allocator]") {
  CachingAllocator a;
  a.malloc(BufferId{0}, Bytes{3 * MiB}, StreamId{0});
  CHECK(a.reserved().count == 20 * MiB);
  // should_split (large pool): rest 17 MiB > 1 MiB, so split; a 5 MiB request fits the rest.
  a.malloc(BufferId{1}, Bytes{5 * MiB}, StreamId{0});
  CHECK(a.reserved().count == 20 * MiB);
  CHECK(a.segments() == 1);
}

TEST_CASE("A large block is not split when the rest would be <= 1 MiB: the request holds the whole block", "[allocator]") {
  CachingAllocator a;
  a.malloc(BufferId{0}, Bytes{12 * MiB}, StreamId{0});  // a 12 MiB segment, exactly
  a.free(BufferId{0});
  // 11.5 MiB from the cached 12 MiB block: the rest (0.5 MiB) is <= kSmallSize, not split, so
  // the block counts whole in allocated (as torch.cuda.memory_allocated() does).
  CHECK(a.malloc(BufferId{1}, Bytes{11 * MiB + MiB / 2}, StreamId{0}).count == 12 * MiB);
  CHECK(a.allocated().count == 12 * MiB);
  CHECK(a.reserved().count == 12 * MiB);
}

TEST_CASE("Freed neighbours merge: two halves freed give back one block that fits the whole", "[allocator]") {
  CachingAllocator a;
  a.malloc(BufferId{0}, Bytes{8 * MiB}, StreamId{0});  // 20 MiB segment: [8 | 12 free]
  a.malloc(BufferId{1}, Bytes{8 * MiB}, StreamId{0});  //                 [8 | 8 | 4 free]
  a.free(BufferId{0});
  a.free(BufferId{1});                       // merges with both neighbours: one free 20 MiB block
  a.malloc(BufferId{2}, Bytes{18 * MiB}, StreamId{0});
  CHECK(a.reserved().count == 20 * MiB);
  CHECK(a.segments() == 1);
}

TEST_CASE("Blocks are cached per stream: a block freed on one stream is not reused by another", "[allocator]") {
  CachingAllocator a;
  a.malloc(BufferId{0}, Bytes{16 * MiB}, StreamId{0});
  a.free(BufferId{0});
  a.malloc(BufferId{1}, Bytes{16 * MiB}, StreamId{1});  // stream 1 cannot take stream 0's cached block
  CHECK(a.reserved().count == 32 * MiB);
  a.malloc(BufferId{2}, Bytes{16 * MiB}, StreamId{0});  // stream 0 reuses its own
  CHECK(a.reserved().count == 32 * MiB);
}

TEST_CASE("Segments are not released while cudaMalloc succeeds: reserved never goes down", "[allocator]") {
  CachingAllocator a;
  a.malloc(BufferId{0}, Bytes{100 * MiB}, StreamId{0});
  a.free(BufferId{0});
  CHECK(a.reserved().count == 100 * MiB);
  CHECK(a.allocated().count == 0);
  a.set_device_limit(Bytes{200 * MiB});  // room left: nothing is released
  a.malloc(BufferId{1}, Bytes{50 * MiB}, StreamId{1});
  CHECK(a.reserved().count == 150 * MiB);
  CHECK(a.counters().num_alloc_retries == 0);
  CHECK(a.counters().num_device_alloc == 2);
}

// malloc: alloc_block || (release_available_cached_blocks && alloc_block) ||
// (release_cached_blocks && alloc_block(isRetry)); release_blocks frees only blocks that are a
// whole segment (!prev && !next), of every stream and pool.
TEST_CASE("A cudaMalloc that would fail flushes the cache: whole free segments of every stream go back, then one retry", "[allocator]") {
  CachingAllocator a;
  a.set_device_limit(Bytes{100 * MiB});
  a.malloc(BufferId{0}, Bytes{40 * MiB}, StreamId{0});  // segment A, freed whole
  a.malloc(BufferId{1}, Bytes{30 * MiB}, StreamId{1});  // segment B on another stream
  a.free(BufferId{0});
  a.free(BufferId{1});
  a.malloc(BufferId{2}, Bytes{22 * MiB}, StreamId{1});  // takes B split: 22 live + 8 free
  CHECK(a.reserved().count == 70 * MiB);
  // 50 MiB on stream 2: 70 + 50 > 100. The flush frees A (whole and free) but not B (split,
  // partly live); 30 + 50 <= 100, so the retry succeeds.
  a.malloc(BufferId{3}, Bytes{50 * MiB}, StreamId{2});
  CHECK(a.reserved().count == 80 * MiB);
  CHECK(a.counters().num_alloc_retries == 1);
  CHECK(a.counters().num_ooms == 0);
  CHECK(a.segments() == 2);
  // 30 MiB more on stream 2: 80 + 30 > 100 and nothing is whole and free: an OOM (the model
  // takes the segment anyway, so the step goes on and is counted).
  a.malloc(BufferId{4}, Bytes{30 * MiB}, StreamId{2});
  CHECK(a.counters().num_alloc_retries == 2);
  CHECK(a.counters().num_ooms == 1);
  CHECK(a.reserved().count == 110 * MiB);
  // Without a limit nothing is ever released.
  CachingAllocator u;
  u.malloc(BufferId{0}, Bytes{40 * MiB}, StreamId{0});
  u.free(BufferId{0});
  u.malloc(BufferId{1}, Bytes{50 * MiB}, StreamId{2});
  CHECK(u.reserved().count == 90 * MiB);
  CHECK(u.counters().num_alloc_retries == 0);
}

// release_cached_blocks, flush after flush: each flush releases exactly the cached blocks that are
// a whole free segment at that moment, of every stream and pool (small ones included); a segment
// that becomes whole later goes at a later flush; a flush with nothing to release still counts
// its retry. Which segments go is what this pins: the order they go in within one flush changes
// no number (reserved is their sum).
TEST_CASE("Flush after flush, each releases the segments that are whole and free at that moment, and only those", "[allocator]") {
  CachingAllocator a;
  a.set_device_limit(Bytes{100 * MiB});
  a.malloc(BufferId{0}, Bytes{30 * MiB}, StreamId{0});   // S0: 30 MiB
  a.malloc(BufferId{1}, Bytes{MiB / 2}, StreamId{1});    // S1: a 2 MiB small-pool segment
  a.malloc(BufferId{2}, Bytes{24 * MiB}, StreamId{0});   // S2: 24 MiB
  for (std::size_t i = 0; i < 3; ++i) a.free(BufferId{i});
  a.malloc(BufferId{3}, Bytes{10 * MiB}, StreamId{0});   // best fit: S2 split, 10 live + 14 free
  CHECK(a.reserved().count == 56 * MiB);
  CHECK(a.segments() == 3);
  // 50 MiB on stream 2: 56 + 50 > 100. S0 and S1 are whole and free (30 + 2 MiB go back); S2
  // is not. 24 + 50 fits.
  a.malloc(BufferId{4}, Bytes{50 * MiB}, StreamId{2});
  CHECK(a.counters().num_alloc_retries == 1);
  CHECK(a.reserved().count == 74 * MiB);
  CHECK(a.segments() == 2);
  // S2 whole again (its 10 MiB merge with the 14 MiB rest): the next flush releases it.
  a.free(BufferId{3});
  a.malloc(BufferId{5}, Bytes{30 * MiB}, StreamId{3});  // 74 + 30 > 100; 50 + 30 fits
  CHECK(a.counters().num_alloc_retries == 2);
  CHECK(a.counters().num_ooms == 0);
  CHECK(a.reserved().count == 80 * MiB);
  CHECK(a.segments() == 2);
  // Nothing is cached: the flush releases nothing, is still counted, and the request is an OOM.
  a.malloc(BufferId{6}, Bytes{30 * MiB}, StreamId{3});
  CHECK(a.counters().num_alloc_retries == 3);
  CHECK(a.counters().num_ooms == 1);
  CHECK(a.reserved().count == 110 * MiB);
  // A whole free segment taken again by a request is live, not cached: a flush leaves it.
  a.free(BufferId{5});
  a.malloc(BufferId{7}, Bytes{30 * MiB}, StreamId{3});  // reuses S5 whole: no cudaMalloc
  a.malloc(BufferId{8}, Bytes{4 * MiB}, StreamId{0});   // 110 + 20 > 100: flush, nothing whole
  CHECK(a.counters().num_alloc_retries == 4);
  CHECK(a.counters().num_ooms == 2);
  CHECK(a.reserved().count == 130 * MiB);
  CHECK(a.segments() == 4);
}

// release_available_cached_blocks: returns false at once without max_split_size; with it, it
// frees the smallest oversize block >= max(request, max_split_size) on the request's stream, and
// the retry that follows is not counted as num_alloc_retries.
TEST_CASE("With max_split_size a failing cudaMalloc first frees cached oversize blocks of its stream", "[allocator]") {
  AllocatorConfig c;
  c.max_split_size = Bytes{64 * MiB};
  CachingAllocator a(c);
  a.set_device_limit(Bytes{300 * MiB});
  a.malloc(BufferId{0}, Bytes{100 * MiB}, StreamId{0});
  a.malloc(BufferId{1}, Bytes{120 * MiB}, StreamId{0});
  a.malloc(BufferId{2}, Bytes{30 * MiB}, StreamId{0});
  a.free(BufferId{0});
  a.free(BufferId{1});
  a.free(BufferId{2});
  CHECK(a.reserved().count == 250 * MiB);
  // 70 MiB: the cached 100 and 120 MiB blocks are too big for it (>= 70 + 20), so a new segment;
  // 250 + 70 > 300: the smallest oversize block >= 70 MiB (100 MiB) is freed; 150 + 70 fits.
  a.malloc(BufferId{3}, Bytes{70 * MiB}, StreamId{0});
  CHECK(a.reserved().count == 220 * MiB);
  CHECK(a.counters().num_alloc_retries == 0);
  // The 30 MiB block is below max_split_size: release_available_cached_blocks leaves it.
  a.malloc(BufferId{4}, Bytes{30 * MiB}, StreamId{0});  // reuses it
  CHECK(a.reserved().count == 220 * MiB);
  // Without max_split_size the same sequence goes straight to the full flush, counted.
  CachingAllocator b;
  b.set_device_limit(Bytes{300 * MiB});
  for (std::size_t i = 0; i < 3; ++i) b.malloc(BufferId{i}, Bytes{std::array{100, 120, 30}[i] * MiB}, StreamId{0});
  for (std::size_t i = 0; i < 3; ++i) b.free(BufferId{i});
  b.malloc(BufferId{3}, Bytes{200 * MiB}, StreamId{0});  // no cached block fits: 250 + 200 > 300
  CHECK(b.counters().num_alloc_retries == 1);
  CHECK(b.reserved().count == 200 * MiB);  // every cached segment was whole and free
}

// unmap_block on an expandable segment: the free pages at its end are unmapped.
TEST_CASE("expandable_segments: a flush unmaps the free pages at the segment's end", "[allocator]") {
  AllocatorConfig c;
  c.expandable_segments = true;
  CachingAllocator a(c);
  a.set_device_limit(Bytes{100 * MiB});
  a.malloc(BufferId{0}, Bytes{10 * MiB}, StreamId{0});
  a.malloc(BufferId{1}, Bytes{50 * MiB}, StreamId{0});
  a.free(BufferId{1});
  CHECK(a.reserved().count == 60 * MiB);  // three 20 MiB pages, the last 50 MiB free
  // 50 MiB on stream 1 needs three pages: 60 + 60 > 100. The flush unmaps stream 0's free
  // pages past the one holding the live 10 MiB (40 MiB): 20 + 60 <= 100.
  a.malloc(BufferId{2}, Bytes{50 * MiB}, StreamId{1});
  CHECK(a.counters().num_alloc_retries == 1);
  CHECK(a.counters().num_ooms == 0);
  CHECK(a.reserved().count == 80 * MiB);
  // The unmapped pages are mapped again when stream 0 needs them.
  a.malloc(BufferId{3}, Bytes{15 * MiB}, StreamId{0});
  CHECK(a.reserved().count == 100 * MiB);
}

TEST_CASE("Best fit: the smallest cached block that fits is used", "[allocator]") {
  CachingAllocator a;
  a.malloc(BufferId{0}, Bytes{40 * MiB}, StreamId{0});
  a.malloc(BufferId{1}, Bytes{30 * MiB}, StreamId{0});
  a.free(BufferId{0});
  a.free(BufferId{1});
  // Both segments cached (40 and 30 MiB); a 30 MiB request takes the 30 MiB one exactly, so a
  // later 40 MiB request still fits without a new segment.
  a.malloc(BufferId{2}, Bytes{30 * MiB}, StreamId{0});
  a.malloc(BufferId{3}, Bytes{40 * MiB}, StreamId{0});
  CHECK(a.reserved().count == 70 * MiB);
}

TEST_CASE("max_split_size_mb: a smaller request never takes an oversize block, and oversize blocks are not split", "[allocator]") {
  AllocatorConfig c;
  c.max_split_size = Bytes{64 * MiB};
  CachingAllocator a(c);
  a.malloc(BufferId{0}, Bytes{100 * MiB}, StreamId{0});
  a.free(BufferId{0});
  // get_free_block: request 30 MiB < max_split (64 MiB) and the cached block 100 MiB >= it: a
  // new 30 MiB segment instead of splitting the 100 MiB one.
  a.malloc(BufferId{1}, Bytes{30 * MiB}, StreamId{0});
  CHECK(a.reserved().count == 130 * MiB);
  // An oversize request takes the oversize block only if it is < request + 20 MiB: 90 MiB may
  // take the 100 MiB block (whole: not split), 70 MiB may not (100 >= 70 + 20).
  CachingAllocator b(c);
  b.malloc(BufferId{0}, Bytes{100 * MiB}, StreamId{0});
  b.free(BufferId{0});
  CHECK(b.malloc(BufferId{1}, Bytes{90 * MiB}, StreamId{0}).count == 100 * MiB);
  CHECK(b.reserved().count == 100 * MiB);
  CachingAllocator d(c);
  d.malloc(BufferId{0}, Bytes{100 * MiB}, StreamId{0});
  d.free(BufferId{0});
  d.malloc(BufferId{1}, Bytes{70 * MiB}, StreamId{0});
  CHECK(d.reserved().count == 170 * MiB);
  // Without max_split_size the same 70 MiB request splits the cached 100 MiB block.
  CachingAllocator e;
  e.malloc(BufferId{0}, Bytes{100 * MiB}, StreamId{0});
  e.free(BufferId{0});
  e.malloc(BufferId{1}, Bytes{70 * MiB}, StreamId{0});
  CHECK(e.reserved().count == 100 * MiB);
}

TEST_CASE("expandable_segments: one segment per stream that grows by 20 MiB pages, no 20 MiB segment per odd request", "[allocator]") {
  AllocatorConfig c;
  c.expandable_segments = true;
  CachingAllocator a(c);
  // 11 MiB + 11 MiB + 11 MiB: without expandable segments that is three 12 MiB segments
  // (36 MiB); with them, 33 MiB rounded up to 20 MiB pages = 40 MiB, and the second request
  // uses the 9 MiB left in the first page plus a new page.
  a.malloc(BufferId{0}, Bytes{11 * MiB}, StreamId{0});
  CHECK(a.reserved().count == 20 * MiB);
  a.malloc(BufferId{1}, Bytes{11 * MiB}, StreamId{0});
  CHECK(a.reserved().count == 40 * MiB);
  a.malloc(BufferId{2}, Bytes{11 * MiB}, StreamId{0});
  CHECK(a.reserved().count == 40 * MiB);
  CHECK(a.segments() == 1);
  CachingAllocator plain;
  for (std::size_t i = 0; i < 3; ++i) plain.malloc(BufferId{i}, Bytes{11 * MiB}, StreamId{0});
  CHECK(plain.reserved().count == 36 * MiB);
}

namespace {
// x (30 MiB) is used on `side` for 5 ms (record_stream) and freed by the host at 0 ms; then
// y (30 MiB) is allocated and freed at 0 ms.
Program record_stream_then_alloc() {
  ProgramBuilder b;
  auto side = b.stream("side");
  auto x = b.alloc("x", Bytes{30 * MiB}, MemCategory::CommBuffers, StreamId{0});
  b.launch(side, fixed_kernel("use x", Time::from_ms(5)));
  b.free_after(x, {side});
  auto y = b.alloc("y", Bytes{30 * MiB}, MemCategory::CommBuffers, StreamId{0});
  b.free(y);
  return b.take();
}
}  // namespace

TEST_CASE("The engine reports reserved next to allocated; a record_stream free keeps its block out of reuse until the stream passes", "[allocator][engine]") {
  // x's block returns to the pool only at 5 ms, so y needs a new segment: reserved 60 MiB
  // while allocated (live bytes) is 60 MiB too.
  Metrics m = compute_metrics(simulate_program(record_stream_then_alloc(), ideal_profile()));
  CHECK(m.peak_memory.count == 60 * MiB);
  CHECK(m.peak_reserved.count == 60 * MiB);

  // The same without record_stream: x's block is back at once and y reuses it.
  ProgramBuilder c;
  auto side2 = c.stream("side");
  auto x2 = c.alloc("x", Bytes{30 * MiB}, MemCategory::CommBuffers, StreamId{0});
  c.launch(side2, fixed_kernel("use x", Time::from_ms(5)));
  c.free(x2);
  auto y2 = c.alloc("y", Bytes{30 * MiB}, MemCategory::CommBuffers, StreamId{0});
  c.free(y2);
  Metrics m2 = compute_metrics(simulate_program(c.take(), ideal_profile()));
  CHECK(m2.peak_memory.count == 30 * MiB);
  CHECK(m2.peak_reserved.count == 30 * MiB);
}

// release_cached_blocks starts with synchronize_and_free_events: a block a record_stream free
// holds back is freed by the flush (after waiting for its stream), and if it is a whole
// segment it goes back to the device like any other.
TEST_CASE("A cache flush frees the blocks deferred record_stream frees hold, then releases them", "[allocator][engine]") {
  // With 50 MiB on the device, y's segment does not fit next to x's: the flush frees x's block
  // (its stream is waited for) and releases its segment, and y fits.
  HardwareProfile hw = ideal_profile();
  hw.memory_capacity = Bytes{50 * MiB};
  Metrics m = compute_metrics(simulate_program(record_stream_then_alloc(), hw));
  CHECK(m.alloc_ooms == 0);
  CHECK(m.peak_reserved.count <= 50 * MiB);
  // Live bytes still count x until `side` passes it (the engine's record_stream rule).
  CHECK(m.peak_memory.count == 60 * MiB);
}

// synchronize_and_free_events frees each held-back block once: a record_stream free issued before
// an earlier flush, and still pending at the next one (its stream has not passed), was freed by
// the earlier flush; the next one frees only those issued since.
TEST_CASE("A second cache flush frees the record_stream frees issued since the first, not again the ones the first freed", "[allocator][engine]") {
  HardwareProfile hw = ideal_profile();
  hw.memory_capacity = Bytes{50 * MiB};
  ProgramBuilder b;
  auto side = b.stream("side");
  auto x = b.alloc("x", Bytes{30 * MiB}, MemCategory::CommBuffers, StreamId{0});
  b.launch(side, fixed_kernel("use x", Time::from_ms(5)));
  b.free_after(x, {side});  // held back until 5 ms
  // 30 + 30 > 50: the first flush frees x's block and releases its segment.
  auto y = b.alloc("y", Bytes{30 * MiB}, MemCategory::CommBuffers, StreamId{0});
  b.launch(side, fixed_kernel("use y", Time::from_ms(5)));
  b.free_after(y, {side});  // held back until 10 ms; x is still held back by the engine too
  // 30 + 30 > 50 again: the second flush frees y's block (x's is not freed twice).
  auto v = b.alloc("v", Bytes{30 * MiB}, MemCategory::CommBuffers, StreamId{0});
  b.free(v);
  Metrics m = compute_metrics(simulate_program(b.take(), hw));
  CHECK(m.alloc_retries == 2);
  CHECK(m.alloc_ooms == 0);
  CHECK(m.peak_reserved.count == 30 * MiB);
  CHECK(m.peak_memory.count == 90 * MiB);  // x, y and v live until their streams pass
}

TEST_CASE("fits compares reserved plus memory outside PyTorch with the capacity", "[allocator][metrics]") {
  ProgramBuilder b;
  auto x = b.alloc("x", Bytes{3 * MiB}, MemCategory::Activations, StreamId{0});  // one 20 MiB segment
  b.free(x);
  HardwareProfile hw = ideal_profile();
  hw.memory_capacity = Bytes{25 * MiB};
  Program p = b.take();
  CHECK(compute_metrics(simulate_program(p, hw)).fits);  // 20 MiB reserved <= 25 MiB
  hw.outside_allocator.cuda_context = Bytes{6 * MiB};      // 20 + 6 > 25
  Metrics m = compute_metrics(simulate_program(p, hw));
  CHECK(m.non_pytorch.count == 6 * MiB);
  CHECK_FALSE(m.fits);
  // Allocated alone (3 MiB) fits, but the 3 MiB request asks cudaMalloc for a 20 MiB segment and
  // 19 MiB are free: the flush has nothing to free, so PyTorch raises an OOM.
  CHECK(m.peak_memory.count == 3 * MiB);
  CHECK(m.fits_allocated);
  CHECK(m.alloc_ooms == 1);
  CHECK_THAT(memory_verdict(m), Catch::StartsWith("AT RISK: 1 cudaMalloc fails even after flushing"));
  hw.outside_allocator.cuda_context = Bytes{23 * MiB};  // 3 + 23 > 25: no flush makes room
  Metrics over = compute_metrics(simulate_program(p, hw));
  CHECK_FALSE(over.fits_allocated);
  CHECK(memory_verdict(over) == "DOES NOT FIT");
  hw.outside_allocator.cuda_context = Bytes{0};
  CHECK(memory_verdict(compute_metrics(simulate_program(p, hw))) == "fits");

  // Two streams taking turns with 20 MiB segments in 25 MiB: each step the one stream's cached
  // segment must go back before the other's is allocated, twice a step, and reserved stays
  // within the capacity (it would be 40 MiB without the flushes).
  ProgramBuilder t;
  auto side = t.stream("side");
  auto y = t.alloc("y", Bytes{3 * MiB}, MemCategory::Activations, StreamId{0});
  t.free(y);
  auto z = t.alloc("z", Bytes{3 * MiB}, MemCategory::Activations, side);
  t.free(z);
  Metrics turns = compute_metrics(simulate_program(t.take(), hw));
  CHECK(turns.alloc_retries == 2);
  CHECK(turns.alloc_ooms == 0);
  CHECK(turns.peak_reserved.count == 20 * MiB);
  CHECK(turns.fits_allocated);
  CHECK_FALSE(turns.fits);
  CHECK(memory_verdict(turns) == "fits with 2 allocator cache flushes per step (num_alloc_retries)");
  hw.outside_allocator.cuda_context = Bytes{6 * MiB};

  // NCCL buffers count per communicator that runs a collective (communicators are created
  // lazily): two declared, one used -> context + 1 x 10 MiB.
  ProgramBuilder c;
  auto used = c.comm("used", 8, 1);
  c.comm("idle", 8, 1);
  c.collective(used, StreamId{0}, CollectiveKind::AllReduce, Bytes{1000}, Dtype::BF16, "AR");
  hw.outside_allocator.nccl_per_communicator = Bytes{10 * MiB};
  CHECK(compute_metrics(simulate_program(c.take(), hw)).non_pytorch.count == 16 * MiB);
}

namespace {
nlohmann::json toy_experiment(const nlohmann::json& allocator) {
  return {{"workload", {{"toy", {{"layers", 2}, {"forward_ms", 1}, {"backward_ms", 2}, {"params_per_layer", 1000}}}, {"dtype", "fp32"}}},
          {"cluster", {{"profile", "configs/hardware/toy-ideal.json"}, {"nodes", 1}, {"gpus_per_node", 8}}},
          {"strategy", {{"framework", "ddp"}}},
          {"training", {{"optimizer", "none"}, {"allocator", allocator}}}};
}
std::string input_error(const nlohmann::json& doc) {
  try {
    stepsim::test::experiment_from_doc(doc);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}
HardwareProfile profile_from(const nlohmann::json& doc) {
  SourceMap sources;
  sources.root_file = "profile.json";
  ObjectReader r(doc, sources, "");
  return parse_profile(r);
}
}  // namespace

TEST_CASE("training.allocator takes PyTorch's PYTORCH_CUDA_ALLOC_CONF knobs, strictly", "[allocator][config]") {
  Experiment e = stepsim::test::experiment_from_doc(toy_experiment({{"expandable_segments", true}, {"max_split_size_mb", 64}}));
  CHECK(e.training.allocator.expandable_segments);
  REQUIRE(e.training.allocator.max_split_size);
  CHECK(e.training.allocator.max_split_size->count == 64 * MiB);
  Experiment d = stepsim::test::experiment_from_doc(toy_experiment({{"max_split_size_mb", nullptr}}));
  CHECK_FALSE(d.training.allocator.max_split_size);
  CHECK_FALSE(d.training.allocator.expandable_segments);
  // parseMaxSplitSize: "max_split_size_mb too small, must be > 20".
  CHECK_THAT(input_error(toy_experiment({{"max_split_size_mb", 20}})), Catch::Contains("/training/allocator/max_split_size_mb"));
  CHECK_THAT(input_error(toy_experiment({{"max_split_size_mb", 64.5}})), Catch::Contains("max_split_size_mb"));
  CHECK_THAT(input_error(toy_experiment({{"expandable_segments", "yes"}})), Catch::Contains("/training/allocator/expandable_segments"));
  CHECK_THAT(input_error(toy_experiment({{"roundup_power2_divisions", 4}})), Catch::Contains("roundup_power2_divisions"));
}

TEST_CASE("Memory outside the allocator comes from the profile, each number with its own source", "[allocator][profile]") {
  nlohmann::json doc = {{"name", "p"},
                        {"memory_capacity_GiB", 80},
                        {"compute", {{"peak_tflops", {{"bf16", 1000}}}, {"hbm_bandwidth_GBps", 3000}}},
                        {"collectives", {{"intra_node", {{"model", "ring"}, {"busbw_GBps", 100}}}}},
                        {"memory_outside_allocator", {{"cuda_context_MiB", 512}, {"nccl_per_communicator_MiB", 100}}},
                        {"sources",
                         {{"memory_outside_allocator.cuda_context_MiB", "nvidia-smi minus memory_reserved, run X"},
                          {"memory_outside_allocator.nccl_per_communicator_MiB", "run Y"}}}};
  HardwareProfile p = profile_from(doc);
  // 512 MiB + 3 communicators x 100 MiB.
  CHECK(p.non_pytorch_memory(3).count == (512 + 300) * MiB);
  nlohmann::json no_source = doc;
  no_source["sources"].erase("memory_outside_allocator.nccl_per_communicator_MiB");
  CHECK_THROWS_WITH(profile_from(no_source), Catch::Contains("/memory_outside_allocator/nccl_per_communicator_MiB"));
  nlohmann::json negative = doc;
  negative["memory_outside_allocator"]["cuda_context_MiB"] = -1;
  CHECK_THROWS_AS(profile_from(negative), InputError);
}

TEST_CASE("NCCL's buffers are channels x (LL + LL128 + Simple) per communicator of more than one rank; fits counts them",
          "[allocator][profile]") {
  nlohmann::json doc = {{"name", "p"},
                        {"memory_capacity_GiB", 80},
                        {"compute", {{"peak_tflops", {{"bf16", 1000}}}, {"hbm_bandwidth_GBps", 3000}}},
                        {"collectives", {{"intra_node", {{"model", "ring"}, {"busbw_GBps", 100}}}}},
                        {"memory_outside_allocator", {{"cuda_context_MiB", 400}, {"nccl_channels", 24}}},
                        {"sources",
                         {{"memory_outside_allocator.cuda_context_MiB", "pytorch#109888"},
                          {"memory_outside_allocator.nccl_channels", "NCCL_DEBUG=INFO"}}}};
  HardwareProfile p = profile_from(doc);
  // Per channel: LL 8 x 512 x 8 x 16 = 524,288 B, LL128 120 x 640 x 8 x 8 = 4,915,200 B,
  // Simple 4 MiB = 4,194,304 B: 9,633,792 B (9.19 MiB). Two communicators x 24 channels = 462,422,016 B.
  CHECK(kNcclBuffersPerChannel == 9'633'792);
  CHECK(p.non_pytorch_memory(2).count == 400 * MiB + 2 * 24 * 9'633'792);
  auto parts = p.non_pytorch_parts(2);
  REQUIRE(parts.size() == 2);
  CHECK(parts[1].name == "NCCL buffers");
  // A measured size and the channel model cannot both be given.
  nlohmann::json both = doc;
  both["memory_outside_allocator"]["nccl_per_communicator_MiB"] = 100;
  both["sources"]["memory_outside_allocator.nccl_per_communicator_MiB"] = "run";
  CHECK_THROWS_WITH(profile_from(both), Catch::Contains("/memory_outside_allocator/nccl_channels"));

  // The engine counts the communicators with a collective and more than one rank: a 1-rank
  // group has no peer to connect. 80 GiB less 400 MiB less 24 x 9,633,792 B leaves 79.39 GiB
  // for the allocator: an 79.5 GiB buffer does not fit, a 79 GiB one does, with its headroom.
  auto program = [](Bytes buffer) {
    ProgramBuilder c;
    auto world = c.comm("world", 8, 1);
    auto solo = c.comm("solo", 1, 1);
    c.collective(world, StreamId{0}, CollectiveKind::AllReduce, Bytes{1000}, Dtype::BF16, "AR");
    c.collective(solo, StreamId{0}, CollectiveKind::AllReduce, Bytes{1000}, Dtype::BF16, "AR solo");
    c.alloc("x", buffer, MemCategory::Activations, StreamId{0});
    return c.take();
  };
  const std::int64_t GiB = 1024 * MiB;
  Metrics small = compute_metrics(simulate_program(program(Bytes{79 * GiB}), p));
  CHECK(small.non_pytorch.count == 400 * MiB + 24 * 9'633'792);
  CHECK(small.fits);
  CHECK(small.headroom().count == 80 * GiB - 79 * GiB - 400 * MiB - 24 * 9'633'792);
  Metrics large = compute_metrics(simulate_program(program(Bytes{79 * GiB + GiB / 2}), p));
  CHECK_FALSE(large.fits);
  CHECK(large.headroom().count < 0);
}

TEST_CASE("A stream's GEMMs take PyTorch's cuBLAS workspace from the caching allocator: one per handle, forward's and backward's",
          "[allocator][engine]") {
  HardwareProfile hw = stepsim::test::ideal_profile();
  hw.outside_allocator.cublas_workspace = Bytes{32 * MiB};
  KernelSpec gemm;
  gemm.name = "mm";
  gemm.cls = KernelClass::Gemm;
  gemm.work.fixed = Time::from_ms(1);
  ProgramBuilder b;
  b.mark("forward", Phase::Forward);
  b.launch(StreamId{0}, gemm);
  b.launch(StreamId{0}, gemm);  // the same handle and stream: no second workspace
  b.mark("backward", Phase::Backward);
  b.launch(StreamId{0}, gemm);
  Metrics m = compute_metrics(simulate_program(b.take(), hw));
  // Two 32 MiB workspaces (a request >= 10 MiB gets a segment of its own, rounded to 2 MiB).
  CHECK(m.peak_memory.count == 64 * MiB);
  CHECK(m.peak_reserved.count == 64 * MiB);
  CHECK(m.non_pytorch.count == 0);  // they are PyTorch's, not outside it
}

TEST_CASE("record_stream frees keyed on their last op: released when the last recorded stream passes, in issue order", "[engine][allocator]") {
  ProgramBuilder b;
  auto s1 = b.stream("s1");
  auto s2 = b.stream("s2");
  auto x = b.alloc("x", Bytes{1 * MiB}, MemCategory::Activations, StreamId{0});
  auto y = b.alloc("y", Bytes{2 * MiB}, MemCategory::CommBuffers, StreamId{0});
  b.launch(s1, fixed_kernel("s1 work", Time::from_ms(2)));
  b.launch(s2, fixed_kernel("s2 work", Time::from_ms(5)));
  b.free_after(x, {s1, s2});  // waits for both: released when s2's kernel ends
  b.free_after(y, {s2});      // waits for s2 only: released at the same instant, after x
  Timeline t = simulate_program(b.take(), ideal_profile());
  // Samples: start, alloc x, alloc y, then the two releases, x's first (issue order). The two
  // kernels share the GPU: s1's 2 ms at half rate end at 4 ms, when s2 has done 2 of its 5 ms;
  // the other 3 at full rate end at 7 ms. Nothing is released at 4 ms (x also waits for s2).
  REQUIRE(t.memory.size() == 5);
  CHECK(t.memory[3].time == Time::from_ms(7));
  CHECK(t.memory[3].total.count == 2 * MiB);  // x gone, y still there
  CHECK(t.memory[4].time == Time::from_ms(7));
  CHECK(t.memory[4].total.count == 0);
}

TEST_CASE("Optimizer state torch.optim creates at the first step() lands in the blocks the first step's activations left",
          "[allocator][engine]") {
  // adamw.py _init_group: exp_avg / exp_avg_sq = zeros_like(p) inside the first step(), after
  // backward freed the activations. A 60 MiB state then splits the cached 100 MiB activation
  // block, and the next step's 100 MiB activation needs a segment of its own: reserved 200 MiB
  // in the steady state. Allocated before the step (not lazy), the state has its own 60 MiB
  // segment and the activation reuses its block every step: 160 MiB.
  auto run = [](bool lazy) {
    ProgramBuilder b;
    b.mark("setup", Phase::Setup);
    if (lazy) b.alloc_lazy_optimizer_state({"exp_avg w"}, Bytes{60 * MiB}, StreamId{0});
    else b.alloc("exp_avg w", Bytes{60 * MiB}, MemCategory::OptimizerState, StreamId{0});
    b.mark("forward", Phase::Forward);
    auto act = b.alloc("activation", Bytes{100 * MiB}, MemCategory::Activations, StreamId{0});
    b.launch(StreamId{0}, fixed_kernel("fwd", Time::from_ms(1)));
    b.mark("backward", Phase::Backward);
    b.free(act);
    b.mark("optimizer", Phase::Optimizer);
    b.launch(StreamId{0}, fixed_kernel("adam", Time::from_ms(1)));
    return compute_metrics(simulate_program(b.take(), ideal_profile()));
  };
  Metrics lazy = run(true), eager = run(false);
  CHECK(lazy.peak_memory.count == 160 * MiB);  // allocated: the state is live all step either way
  CHECK(eager.peak_memory.count == 160 * MiB);
  CHECK(lazy.peak_reserved.count == 200 * MiB);
  CHECK(eager.peak_reserved.count == 160 * MiB);
}

TEST_CASE("fingerprint: the state up to record names; equal states answer requests alike", "[allocator]") {
  const StreamId s{0};
  auto churn = [&](CachingAllocator& a, std::uint32_t first_id) {
    // The same requests under other buffer-record names (ids): a segment made, split, merged back.
    a.malloc(BufferId{first_id}, Bytes{30 * MiB}, s);
    a.malloc(BufferId{first_id + 1}, Bytes{5 * MiB}, s);
    a.free(BufferId{first_id});
  };
  CachingAllocator a, b;
  churn(a, 0);
  churn(b, 0);
  CHECK(a.fingerprint() == b.fingerprint());
  // Block records used in another order (a split of the cached 30 MiB block merged back, its
  // record left for reuse) are not state.
  b.malloc(BufferId{7}, Bytes{12 * MiB}, s);
  b.free(BufferId{7});
  CHECK(a.fingerprint() == b.fingerprint());
  // Which buffer holds a block is: a later free of buffer 1 releases a different block.
  CachingAllocator c;
  c.malloc(BufferId{0}, Bytes{30 * MiB}, s);
  c.malloc(BufferId{2}, Bytes{5 * MiB}, s);
  c.free(BufferId{0});
  CHECK(c.fingerprint() != a.fingerprint());
  // So is a cached block's size, and a released segment is gone from it.
  a.malloc(BufferId{3}, Bytes{8 * MiB}, s);
  CHECK(a.fingerprint() != b.fingerprint());
  a.free(BufferId{3});
  CHECK(a.fingerprint() == b.fingerprint());
  a.set_device_limit(Bytes{a.reserved().count});
  a.malloc(BufferId{4}, Bytes{200 * MiB}, s);  // no room: the flush releases nothing whole here
  CHECK(a.fingerprint() != b.fingerprint());
}

// A step whose live bytes alone exceed the device has no steady state (PyTorch raises
// OutOfMemoryError in its first step): its reserved curve and allocator counters are the first
// step's, not those of replayed steps no run reaches (Engine::steady_state_reserved).
TEST_CASE("A step that does not fit reports its first step's reserved bytes, flushes and OOMs, not a replay's",
          "[allocator][engine]") {
  HardwareProfile hw = ideal_profile();
  hw.memory_capacity = Bytes{50 * MiB};
  ProgramBuilder b;
  const std::array<std::int64_t, 3> sizes = {30 * MiB, 30 * MiB, 45 * MiB};
  auto a = b.alloc("a", Bytes{sizes[0]}, MemCategory::Activations, StreamId{0});
  auto c = b.alloc("b", Bytes{sizes[1]}, MemCategory::Activations, StreamId{0});  // 60 MiB live: does not fit
  b.free(a);
  b.free(c);
  auto d = b.alloc("c", Bytes{sizes[2]}, MemCategory::Activations, StreamId{0});
  b.free(d);
  const Metrics m = compute_metrics(simulate_program(b.take(), hw));
  REQUIRE_FALSE(m.fits_allocated);

  // The first step alone, on the allocator model.
  CachingAllocator first;
  first.set_device_limit(Bytes{50 * MiB});
  Bytes peak;
  const auto note = [&] { peak = std::max(peak, first.reserved()); };
  first.malloc(BufferId{0}, Bytes{sizes[0]}, StreamId{0});
  note();
  first.malloc(BufferId{1}, Bytes{sizes[1]}, StreamId{0});
  note();
  first.free(BufferId{0});
  first.free(BufferId{1});
  note();
  first.malloc(BufferId{2}, Bytes{sizes[2]}, StreamId{0});
  note();
  first.free(BufferId{2});
  CHECK(m.peak_reserved == peak);
  CHECK(m.alloc_retries == first.counters().num_alloc_retries);
  CHECK(m.alloc_ooms == first.counters().num_ooms);
}
