#pragma once
// A model of PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp, pytorch/pytorch
// at 001074d2, the 2.9 line; docs/memory.md lists every rule with its function). It answers one
// question: how many bytes the allocator has reserved from cudaMalloc (what
// torch.cuda.memory_reserved() reports) for a sequence of allocations and frees. Addresses are
// simulated (an offset inside a simulated segment); no memory is touched.
//
// Rules modelled (function names in CUDACachingAllocator.cpp):
//   - round_size: every request is rounded up to kMinBlockSize = 512 B.
//   - get_pool: requests <= kSmallSize (1 MiB) come from the small pool, others from the large.
//   - Blocks are cached per (allocation stream, pool): a freed block is reused only by a later
//     request on the same stream (BlockComparatorSize orders by stream first; get_free_block
//     rejects a block of another stream).
//   - get_free_block: best fit (the smallest cached block >= the request); with
//     max_split_size set, a request below it never takes a block >= it, and a request at or
//     above it takes a block only if the block is < request + kLargeBuffer (20 MiB).
//   - get_allocation_size: a new segment is kSmallBuffer (2 MiB) for a small request,
//     kLargeBuffer (20 MiB) for a request < kMinLargeAlloc (10 MiB), else the request rounded up
//     to kRoundLarge (2 MiB).
//   - should_split: the rest of a block becomes a free block when it is >= 512 B (small pool or
//     expandable segments) or > kSmallSize (1 MiB) and the request < max_split_size (large pool);
//     otherwise the request takes the whole block.
//   - free_block / try_merge_blocks: a freed block merges with free neighbours of its segment.
//   - Segments are released only when a cudaMalloc would fail (malloc's fallbacks, in order):
//     with a device limit set (the capacity minus the memory outside PyTorch), a new segment
//     that would take reserved past it first calls release_available_cached_blocks (only with
//     max_split_size set: it frees the smallest cached oversize block of the request's stream
//     that is >= max(request, max_split_size), else the largest ones until they add up to it)
//     and retries; then release_cached_blocks (synchronize_and_free_events: the blocks held
//     back by record_stream events are freed, through the flush hook; then every free block
//     that is a whole segment, of every stream and pool, is released, and an expandable
//     segment unmaps the free pages at its end) and retries once more, counted as
//     num_alloc_retries; if that fails too it is an OOM (num_ooms), and the model takes the
//     segment anyway so that the step can be measured.
//     Without a limit segments are never released (empty_cache() is not modelled).
//   - expandable_segments: one segment per (stream, pool) that grows by pages of 2 MiB (small
//     pool) or 20 MiB (large pool) (Note [Expandable Segments]); a request no free block fits
//     maps just enough pages at the segment's end, merging with a free tail block.
// record_stream is the engine's business: it calls free() only when the recorded streams have
// passed the free point (free() + insert_events/process_events upstream).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

#include "sim/core/units.hpp"
#include "sim/exec/allocator_config.hpp"
#include "sim/program/program.hpp"

namespace stepsim {

inline constexpr std::int64_t kMinBlockSize = 512;
inline constexpr std::int64_t kSmallSize = 1048576;
inline constexpr std::int64_t kSmallBuffer = 2097152;
inline constexpr std::int64_t kLargeBuffer = 20971520;
inline constexpr std::int64_t kMinLargeAlloc = 10485760;
inline constexpr std::int64_t kRoundLarge = 2097152;
// A step's allocator traffic replayed until a pass adds no segment, at most this many passes:
// the steady-state reserved bytes (Engine::steady_state_reserved, analyze --allocator-replay).
inline constexpr int kMaxSteadyStatePasses = 5;

// torch.cuda.memory_stats() counters the model keeps (same names upstream).
struct AllocatorCounters {
  std::int64_t num_device_alloc = 0;   // cudaMalloc calls (new segments, expandable pages mapped)
  std::int64_t num_alloc_retries = 0;  // cudaMalloc retried after release_cached_blocks
  std::int64_t num_ooms = 0;           // failed after that too: torch.OutOfMemoryError
};

class CachingAllocator {
 public:
  explicit CachingAllocator(AllocatorConfig config = {}) : config_(config) {}

  // What cudaMalloc can hand out in all (reserved included): unset = no limit.
  void set_device_limit(std::optional<Bytes> limit) { limit_ = limit; }
  // Called first by a flush: synchronize_and_free_events, which waits for every block's
  // record_stream events and frees the blocks they held back (the engine's deferred frees).
  void set_flush_hook(std::function<void()> hook) { flush_hook_ = std::move(hook); }
  const AllocatorCounters& counters() const { return counters_; }

  // Allocates `bytes` for buffer `id` on `stream`; returns the block size handed out.
  Bytes malloc(BufferId id, Bytes bytes, StreamId stream);
  // Returns buffer `id`'s block to its pool (merging with free neighbours).
  void free(BufferId id);

  Bytes reserved() const { return Bytes{reserved_}; }
  Bytes allocated() const { return Bytes{allocated_}; }  // sum of live block sizes
  std::size_t segments() const { return segments_.size() - released_segments_; }

  // The allocator's state up to the names of its records: its segments in creation order
  // (released ones left out), each with its pool and mapped bytes and its blocks in address order
  // (size, and the buffer an allocated one holds). Two allocators with equal fingerprints answer
  // any sequence of requests alike (the free sets order blocks by size, then by segment creation
  // order, then by offset; flushes release whole segments in that order), so a replayed step that
  // ends where the step before it ended repeats that step (Engine::steady_state_reserved).
  std::vector<std::int64_t> fingerprint() const;

  static std::int64_t round_size(std::int64_t size);
  static std::int64_t allocation_size(std::int64_t size);

 private:
  // The free sets' tree nodes, kept for reuse: the model inserts and erases a free block on
  // nearly every malloc and free, and a recycled node costs a fraction of operator new.
  class NodeRecycler {
   public:
    NodeRecycler() = default;
    NodeRecycler(const NodeRecycler&) = delete;
    NodeRecycler& operator=(const NodeRecycler&) = delete;
    ~NodeRecycler() {
      for (void* p : free_) ::operator delete(p);
    }
    void* get(std::size_t bytes) {
      if (bytes != bytes_) release_all(bytes);
      if (free_.empty()) return ::operator new(bytes);
      void* p = free_.back();
      free_.pop_back();
      return p;
    }
    void put(void* p, std::size_t bytes) {
      if (bytes == bytes_) free_.push_back(p);
      else ::operator delete(p);
    }

   private:
    void release_all(std::size_t bytes) {
      for (void* p : free_) ::operator delete(p);
      free_.clear();
      bytes_ = bytes;
    }
    std::size_t bytes_ = 0;
    std::vector<void*> free_;
  };
  template <class T>
  struct RecyclingAllocator {
    using value_type = T;
    explicit RecyclingAllocator(NodeRecycler* r) : nodes(r) {}
    template <class U>
    RecyclingAllocator(const RecyclingAllocator<U>& o) : nodes(o.nodes) {}  // NOLINT: rebinding
    T* allocate(std::size_t n) { return n == 1 ? static_cast<T*>(nodes->get(sizeof(T))) : std::allocator<T>{}.allocate(n); }
    void deallocate(T* p, std::size_t n) {
      if (n == 1) nodes->put(p, sizeof(T));
      else std::allocator<T>{}.deallocate(p, n);
    }
    friend bool operator==(const RecyclingAllocator& a, const RecyclingAllocator& b) { return a.nodes == b.nodes; }
    NodeRecycler* nodes;
  };
  // Free blocks of one (stream, pool), ordered by (size, segment, offset): best fit, then the
  // oldest segment, as BlockComparatorSize orders by (stream, size, ptr).
  struct FreeKey {
    std::int64_t size;
    int segment;
    std::int64_t offset;
    int block;
    // The first key of any block of at least `size` bytes.
    static FreeKey at_least(std::int64_t size) { return {size, std::numeric_limits<int>::min(), std::numeric_limits<std::int64_t>::min(), -1}; }
    bool operator<(const FreeKey& o) const {
      if (size != o.size) return size < o.size;
      if (segment != o.segment) return segment < o.segment;
      return offset < o.offset;  // (segment, offset) names one block: the block id never decides
    }
  };
  using FreeSet = std::set<FreeKey, std::less<>, RecyclingAllocator<FreeKey>>;
  struct Block {
    int segment = -1;
    std::int64_t offset = 0, size = 0;
    int prev = -1, next = -1;  // neighbours in the segment (block indices)
    bool allocated = false;
    // While free: its entry in its pool's free set, so that taking it out (a merge, an
    // expandable tail growing) needs no search of the set.
    FreeSet::iterator where;
  };
  struct Segment {
    StreamId stream{0};
    bool small = false;
    bool expandable = false;
    std::int64_t mapped = 0;  // bytes backed by cudaMalloc / mapped pages
    FreeSet* pool = nullptr;  // the free blocks of its (stream, pool)
    int tail = -1;            // expandable: the block ending at the mapped end
    bool released = false;    // cudaFree'd by a cache flush: no blocks, no bytes
    int releasable_at = -1;   // its place in releasable_ while it is one free block, else -1
  };

  // The free set of (stream, pool), made on first use; its address is stable (Segment::pool).
  FreeSet& pool(StreamId stream, bool small) {
    const std::size_t i = 2 * stream.index() + (small ? 1 : 0);
    if (i >= pools_.size()) pools_.resize(i + 1);
    if (!pools_[i]) pools_[i] = std::make_unique<FreeSet>(RecyclingAllocator<FreeKey>(&nodes_));
    return *pools_[i];
  }
  void insert_free(int b);
  void erase_free(int b);
  bool oversize_rejects(std::int64_t block_size, std::int64_t request) const;
  bool should_split(const Block& b, std::int64_t size) const;
  int new_segment(StreamId stream, bool small, std::int64_t bytes);
  int grow_expandable(StreamId stream, bool small, std::int64_t size);
  // What a new segment (or the pages an expandable segment maps) for `size` adds to reserved.
  std::int64_t device_bytes_needed(StreamId stream, bool small, std::int64_t size) const;
  bool device_has_room(StreamId stream, bool small, std::int64_t size) const;
  // malloc's fallbacks when the device has no room (see above); false: an OOM.
  bool make_room(StreamId stream, bool small, std::int64_t size);
  bool release_available_cached_blocks(StreamId stream, std::int64_t size);
  void release_cached_blocks();
  // releasable_ follows the free sets: a segment is in it exactly while its one block is.
  void note_releasable(int b);
  void forget_releasable(int b);
  void release_segment(int b);
  void unmap_free_tail(int seg);
  int split(int b, std::int64_t size);
  int new_block(const Block& k);

  AllocatorConfig config_;
  std::vector<Block> blocks_;
  std::vector<int> dead_;  // slots of blocks_ merged away (or freed, with the model off), for reuse
  std::vector<Segment> segments_;
  NodeRecycler nodes_;  // declared before pools_, whose nodes it outlives
  std::vector<std::unique_ptr<FreeSet>> pools_;  // by 2 * stream + small (a handful of streams)
  std::map<std::pair<StreamId, bool>, int> expandable_;  // (stream, pool) -> segment
  std::vector<int> live_;                            // buffer id -> block, -1 when not live
  // The blocks a cache flush releases (release_blocks: !prev && !next, not expandable): every
  // cached block that is a whole segment, of every stream and pool, in no order. A flush costs
  // what it releases instead of a walk of every free block; at 1,024 layers that walk, once
  // per failed cudaMalloc, was half of a step that does not fit.
  std::vector<int> releasable_;
  struct Releasing {
    std::size_t pool;  // 2 * stream + small: the order of the pools
    std::int64_t size;
    int segment, block;
    bool operator<(const Releasing& o) const {
      return std::tie(pool, size, segment) < std::tie(o.pool, o.size, o.segment);
    }
  };
  std::vector<Releasing> releasing_;  // release_cached_blocks' sorted copy of it, kept for its capacity
  std::int64_t reserved_ = 0, allocated_ = 0;
  std::optional<Bytes> limit_;
  std::function<void()> flush_hook_;
  AllocatorCounters counters_;
  std::size_t released_segments_ = 0;
};

}  // namespace stepsim
