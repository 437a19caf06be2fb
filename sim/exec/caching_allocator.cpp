#include "sim/exec/caching_allocator.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/core/checked.hpp"

namespace stepsim {

// round_size (CUDACachingAllocator.cpp): below kMinBlockSize -> kMinBlockSize, else up to a
// multiple of it (roundup_power2_divisions is off by default and not modelled).
std::int64_t CachingAllocator::round_size(std::int64_t size) {
  if (size < kMinBlockSize) return kMinBlockSize;
  return round_up(size, kMinBlockSize);
}

// get_allocation_size: the cudaMalloc size of a new segment for a (rounded) request.
std::int64_t CachingAllocator::allocation_size(std::int64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return round_up(size, kRoundLarge);
}

void CachingAllocator::insert_free(int b) {
  Block& k = blocks_[static_cast<std::size_t>(b)];
  k.where = segments_[static_cast<std::size_t>(k.segment)].pool->insert({k.size, k.segment, k.offset, b}).first;
  note_releasable(b);
}

void CachingAllocator::erase_free(int b) {
  const Block& k = blocks_[static_cast<std::size_t>(b)];
  segments_[static_cast<std::size_t>(k.segment)].pool->erase(k.where);
  forget_releasable(b);
}

// A free block's neighbours change only while it is out of its free set (a merge takes the
// neighbour out, a split takes a block that malloc took out), so whether it is a whole segment
// is decided when it goes in.
void CachingAllocator::note_releasable(int b) {
  const Block& k = blocks_[static_cast<std::size_t>(b)];
  Segment& s = segments_[static_cast<std::size_t>(k.segment)];
  if (s.expandable || k.prev >= 0 || k.next >= 0) return;
  s.releasable_at = static_cast<int>(releasable_.size());
  releasable_.push_back(b);
}

void CachingAllocator::forget_releasable(int b) {
  Segment& s = segments_[static_cast<std::size_t>(blocks_[static_cast<std::size_t>(b)].segment)];
  if (s.releasable_at < 0) return;
  const int last = releasable_.back();
  releasable_[static_cast<std::size_t>(s.releasable_at)] = last;
  segments_[static_cast<std::size_t>(blocks_[static_cast<std::size_t>(last)].segment)].releasable_at = s.releasable_at;
  releasable_.pop_back();
  s.releasable_at = -1;
}

// get_free_block: "Do not return an oversized block for a large request" and "Allow oversized
// block size to be rounded up but within a limit" (kLargeBuffer).
bool CachingAllocator::oversize_rejects(std::int64_t block_size, std::int64_t request) const {
  if (!config_.max_split_size) return false;
  std::int64_t mss = config_.max_split_size->count;
  if (request < mss && block_size >= mss) return true;
  if (request >= mss && block_size >= request + kLargeBuffer) return true;
  return false;
}

// should_split: small pool (or expandable segments) keeps any rest >= 512 B; the large pool
// splits only when the rest is > 1 MiB and the request is below max_split_size.
bool CachingAllocator::should_split(const Block& b, std::int64_t size) const {
  std::int64_t remaining = b.size - size;
  const Segment& s = segments_[static_cast<std::size_t>(b.segment)];
  if (s.small || s.expandable) return remaining >= kMinBlockSize;
  std::int64_t mss = config_.max_split_size ? config_.max_split_size->count : std::numeric_limits<std::int64_t>::max();
  return size < mss && remaining > kSmallSize;
}

int CachingAllocator::new_segment(StreamId stream, bool small, std::int64_t bytes) {
  int seg = static_cast<int>(segments_.size());
  segments_.push_back(Segment{stream, small, false, bytes, &pool(stream, small)});
  reserved_ += bytes;
  return new_block(Block{seg, 0, bytes, -1, -1, false});
}

// alloc_block with expandable segments (try_allocate_expandable_block / map_block): one
// segment per (stream, pool); map the pages the request needs beyond a free tail block. The
// page is 2 MiB for the small pool and 20 MiB for the large one (Note [Expandable Segments]:
// "we use 2MiB pages for our small pool and 20MiB pages for our large pool").
int CachingAllocator::grow_expandable(StreamId stream, bool small, std::int64_t size) {
  auto key = std::make_pair(stream, small);
  auto it = expandable_.find(key);
  int seg;
  if (it == expandable_.end()) {
    seg = static_cast<int>(segments_.size());
    segments_.push_back(Segment{stream, small, true, 0, &pool(stream, small)});
    expandable_[key] = seg;
  } else {
    seg = it->second;
  }
  Segment& s = segments_[static_cast<std::size_t>(seg)];
  // The tail block: the one ending at the mapped end.
  int tail = s.tail;
  bool tail_free = tail >= 0 && !blocks_[static_cast<std::size_t>(tail)].allocated;
  std::int64_t add = device_bytes_needed(stream, small, size);
  reserved_ += add;
  std::int64_t old_end = s.mapped;
  s.mapped += add;
  if (tail_free) {
    erase_free(tail);
    blocks_[static_cast<std::size_t>(tail)].size += add;
    return tail;
  }
  int b = new_block(Block{seg, old_end, add, tail, -1, false});
  if (tail >= 0) blocks_[static_cast<std::size_t>(tail)].next = b;
  s.tail = b;
  return b;
}

// A block record, in the slot of one merged away if there is one: the records in use stay
// few (live and free blocks) and close together, where a record per split ever made grew to
// 90,000 (3.6 MB) in a 4,096-layer step and spread the model's reads over all of it.
int CachingAllocator::new_block(const Block& k) {
  if (dead_.empty()) {
    blocks_.push_back(k);
    return static_cast<int>(blocks_.size() - 1);
  }
  const int b = dead_.back();
  dead_.pop_back();
  blocks_[static_cast<std::size_t>(b)] = k;
  return b;
}

// alloc_found_block with split_remainder: the request keeps the front, the rest is cached.
int CachingAllocator::split(int b, std::int64_t size) {
  const Block& k = blocks_[static_cast<std::size_t>(b)];
  const int next = k.next;
  const int r = new_block(Block{k.segment, k.offset + size, k.size - size, b, next, false});
  blocks_[static_cast<std::size_t>(b)].size = size;
  blocks_[static_cast<std::size_t>(b)].next = r;
  if (next >= 0) blocks_[static_cast<std::size_t>(next)].prev = r;
  Segment& seg = segments_[static_cast<std::size_t>(blocks_[static_cast<std::size_t>(r)].segment)];
  if (seg.tail == b) seg.tail = r;
  insert_free(r);
  return r;
}

// What a new segment adds to reserved (get_allocation_size); with expandable segments, the pages
// for the part of the request the segment's free tail block does not cover (grow_expandable).
std::int64_t CachingAllocator::device_bytes_needed(StreamId stream, bool small, std::int64_t size) const {
  if (!config_.expandable_segments) return allocation_size(size);
  std::int64_t have = 0;
  if (auto it = expandable_.find({stream, small}); it != expandable_.end()) {
    const int tail = segments_[static_cast<std::size_t>(it->second)].tail;
    if (tail >= 0 && !blocks_[static_cast<std::size_t>(tail)].allocated) have = blocks_[static_cast<std::size_t>(tail)].size;
  }
  return round_up(size - have, small ? kSmallBuffer : kLargeBuffer);
}

bool CachingAllocator::device_has_room(StreamId stream, bool small, std::int64_t size) const {
  return !limit_ || reserved_ + device_bytes_needed(stream, small, size) <= limit_->count;
}

// malloc: alloc_block(p, false) || (release_available_cached_blocks(p) && alloc_block(p, false))
// || (release_cached_blocks() && alloc_block(p, true)); the last try counts num_alloc_retries.
bool CachingAllocator::make_room(StreamId stream, bool small, std::int64_t size) {
  if (!small && release_available_cached_blocks(stream, size) && device_has_room(stream, small, size)) return true;
  release_cached_blocks();
  ++counters_.num_alloc_retries;
  return device_has_room(stream, small, size);
}

// release_available_cached_blocks: nothing without max_split_size ("== SIZE_MAX: return
// false"). With it, the smallest free oversize block of the stream that is >= the key
// (max(request, max_split_size)), else the largest ones, down to max_split_size, until they
// add up to the key; blocks of expandable segments are skipped.
bool CachingAllocator::release_available_cached_blocks(StreamId stream, std::int64_t size) {
  if (!config_.max_split_size) return false;
  const std::int64_t mss = config_.max_split_size->count;
  const std::int64_t key = std::max(size, mss);
  FreeSet& fs = pool(stream, false);
  auto expandable = [&](const FreeKey& k) { return segments_[static_cast<std::size_t>(k.segment)].expandable; };
  auto it = fs.lower_bound(FreeKey::at_least(key));
  if (it != fs.end() && !expandable(*it)) {
    release_segment(it->block);
    return true;
  }
  if (it == fs.begin()) return false;
  std::int64_t released = 0;
  --it;
  while (released < key && it->size >= mss) {
    const auto cur = it;
    const bool first = cur == fs.begin();
    if (!first) --it;
    if (!expandable(*cur)) {
      released += cur->size;
      release_segment(cur->block);
    }
    if (first) break;
  }
  return released >= key;
}

// release_cached_blocks: synchronize_and_free_events (the engine frees the blocks its deferred
// record_stream frees hold), then release_blocks(large_blocks), release_blocks(small_blocks):
// every free block that is a whole segment is cudaFree'd; an expandable segment unmaps its free
// pages (unmap_block).
//
// The whole segments come from releasable_, taken in the order a walk of the pools would meet
// them ((stream, pool) in order, then the free set's order): no number depends on
// that order (reserved drops by their sum), but the block records they leave are then reused
// exactly as before, so the model's state stays the same as the walk's.
void CachingAllocator::release_cached_blocks() {
  if (flush_hook_) flush_hook_();
  if (!releasable_.empty()) {
    // Each a whole segment (offset 0): keyed by (stream, pool, size, segment), computed once.
    releasing_.clear();
    for (int b : releasable_) {
      const Block& k = blocks_[static_cast<std::size_t>(b)];
      const Segment& s = segments_[static_cast<std::size_t>(k.segment)];
      releasing_.push_back(Releasing{2 * s.stream.index() + (s.small ? 1 : 0), k.size, k.segment, b});
    }
    std::sort(releasing_.begin(), releasing_.end());
    for (const Releasing& r : releasing_) release_segment(r.block);
  }
  for (const auto& [key, seg] : expandable_) unmap_free_tail(seg);
}

// release_block: the segment's one free block goes back to the device.
void CachingAllocator::release_segment(int b) {
  const Block& k = blocks_[static_cast<std::size_t>(b)];
  if (k.prev >= 0 || k.next >= 0 || k.allocated) return;  // only a whole free segment is cudaFree'd
  Segment& s = segments_[static_cast<std::size_t>(k.segment)];
  erase_free(b);
  reserved_ -= s.mapped;
  s.mapped = 0;
  s.released = true;
  ++released_segments_;
  dead_.push_back(b);
}

// unmap_block on an expandable segment's free blocks: the model maps a segment as one prefix, so
// it unmaps the whole pages of the free block at its end (a free block between allocated ones
// stays mapped: see docs/memory.md).
void CachingAllocator::unmap_free_tail(int seg) {
  Segment& s = segments_[static_cast<std::size_t>(seg)];
  const int t = s.tail;
  if (t < 0 || blocks_[static_cast<std::size_t>(t)].allocated) return;
  Block& k = blocks_[static_cast<std::size_t>(t)];
  const std::int64_t end = round_up(k.offset, s.small ? kSmallBuffer : kLargeBuffer);
  if (end >= s.mapped) return;
  erase_free(t);
  reserved_ -= s.mapped - end;
  s.mapped = end;
  if (end == k.offset) {
    if (k.prev >= 0) blocks_[static_cast<std::size_t>(k.prev)].next = -1;
    s.tail = k.prev;
    dead_.push_back(t);
  } else {
    k.size = end - k.offset;
    insert_free(t);
  }
}

Bytes CachingAllocator::malloc(BufferId id, Bytes bytes, StreamId stream) {
  if (id.index() >= live_.size()) live_.resize(std::max(id.index() + 1, 2 * live_.size()), -1);
  if (live_[id.index()] >= 0) throw std::logic_error(fmt::format("allocator: buffer {} allocated twice", id));
  if (!config_.enabled) {
    int b = new_block(Block{-1, 0, bytes.count, -1, -1, true});
    live_[id.index()] = b;
    allocated_ += bytes.count;
    reserved_ += bytes.count;
    return bytes;
  }
  std::int64_t size = round_size(bytes.count);
  bool small = size <= kSmallSize;
  FreeSet& fs = pool(stream, small);
  int b = -1;
  auto it = fs.lower_bound(FreeKey::at_least(size));
  if (it != fs.end() && !oversize_rejects(it->size, size)) {
    b = it->block;
    erase_free(b);
  } else {
    // alloc_block, then its fallbacks when cudaMalloc would fail.
    if (limit_ && !device_has_room(stream, small, size) && !make_room(stream, small, size)) ++counters_.num_ooms;
    b = config_.expandable_segments ? grow_expandable(stream, small, size) : new_segment(stream, small, allocation_size(size));
    ++counters_.num_device_alloc;
  }
  if (should_split(blocks_[static_cast<std::size_t>(b)], size)) split(b, size);
  Block& k = blocks_[static_cast<std::size_t>(b)];
  k.allocated = true;
  live_[id.index()] = b;
  allocated_ += k.size;
  return Bytes{k.size};
}

void CachingAllocator::free(BufferId id) {
  if (id.index() >= live_.size() || live_[id.index()] < 0)
    throw std::logic_error(fmt::format("allocator: free of buffer {} that is not live", id));
  int b = live_[id.index()];
  live_[id.index()] = -1;
  Block& k = blocks_[static_cast<std::size_t>(b)];
  allocated_ -= k.size;
  k.allocated = false;
  if (!config_.enabled) {
    reserved_ -= k.size;
    dead_.push_back(b);
    return;
  }
  // try_merge_blocks with prev, then next.
  int prev = k.prev;
  if (prev >= 0 && !blocks_[static_cast<std::size_t>(prev)].allocated) {
    erase_free(prev);
    Block& p = blocks_[static_cast<std::size_t>(prev)];
    Block& kk = blocks_[static_cast<std::size_t>(b)];
    kk.offset = p.offset;
    kk.size += p.size;
    kk.prev = p.prev;
    if (kk.prev >= 0) blocks_[static_cast<std::size_t>(kk.prev)].next = b;
    dead_.push_back(prev);
  }
  int next = blocks_[static_cast<std::size_t>(b)].next;
  if (next >= 0 && !blocks_[static_cast<std::size_t>(next)].allocated) {
    erase_free(next);
    Block& n = blocks_[static_cast<std::size_t>(next)];
    Block& kk = blocks_[static_cast<std::size_t>(b)];
    kk.size += n.size;
    kk.next = n.next;
    if (kk.next >= 0) blocks_[static_cast<std::size_t>(kk.next)].prev = b;
    Segment& seg = segments_[static_cast<std::size_t>(kk.segment)];
    if (seg.tail == next) seg.tail = b;
    dead_.push_back(next);
  }
  insert_free(b);
}

std::vector<std::int64_t> CachingAllocator::fingerprint() const {
  std::vector<int> holder(blocks_.size(), -1);  // block -> the buffer allocated in it
  for (std::size_t id = 0; id < live_.size(); ++id)
    if (live_[id] >= 0) holder[static_cast<std::size_t>(live_[id])] = static_cast<int>(id);
  std::vector<char> dead(blocks_.size(), 0);
  for (int b : dead_) dead[static_cast<std::size_t>(b)] = 1;
  std::vector<int> head(segments_.size(), -1);  // segment -> its first block
  for (std::size_t b = 0; b < blocks_.size(); ++b)
    if (!dead[b] && blocks_[b].prev < 0 && blocks_[b].segment >= 0) head[static_cast<std::size_t>(blocks_[b].segment)] = static_cast<int>(b);
  std::vector<std::int64_t> out;  // sized once: the replay takes one at the end of every pass
  out.reserve(5 * segments() + 2 * (blocks_.size() - dead_.size()));
  for (std::size_t seg = 0; seg < segments_.size(); ++seg) {
    const Segment& s = segments_[seg];
    if (s.released) continue;
    out.push_back(-1);
    out.push_back(static_cast<std::int64_t>(s.stream.index()));
    out.push_back(s.small);
    out.push_back(s.expandable);
    out.push_back(s.mapped);
    for (int b = head[seg]; b >= 0; b = blocks_[static_cast<std::size_t>(b)].next) {
      const Block& k = blocks_[static_cast<std::size_t>(b)];
      out.push_back(k.size);
      out.push_back(k.allocated ? holder[static_cast<std::size_t>(b)] : -2);
    }
  }
  return out;
}

}  // namespace stepsim
